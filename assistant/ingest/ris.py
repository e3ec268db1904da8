"""RIS (rispy), read record by record so a damaged record is reported with its line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import rispy

from assistant.errors import InputError
from assistant.ingest.base import ParseResult
from assistant.ingest.records import RecordError, record_to_paper

_TAG = re.compile(r"^[A-Z][A-Z0-9]  -( |$)")
_END = re.compile(r"^ER  -\s*$")
_NULLS = {"", "nan", "none", "null", "n/a"}


def _value(value: Any) -> Any:
    """Drop the literal placeholders some exporters write (`nan`, `2020///nan`)."""
    if isinstance(value, list):
        kept = [v for v in (_value(x) for x in value) if v is not None]
        return kept or None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _NULLS:
            return None
        return re.sub(r"/+nan$|/+$", "", text) or None
    return value


def ris_to_record(entry: dict[str, Any]) -> dict[str, Any]:
    e = {k: _value(v) for k, v in entry.items()}
    e = {k: v for k, v in e.items() if v is not None}
    record: dict[str, Any] = {
        "title": e.get("title") or e.get("primary_title") or e.get("translated_title") or "",
    }
    authors = (e.get("authors") or []) + (e.get("first_authors") or [])
    if authors:
        record["authors"] = [_flip(a) for a in authors]
    if e.get("abstract"):
        record["abstract"] = e["abstract"]
    year = str(e.get("year") or e.get("publication_year") or "")[:4]
    if year.isdigit():
        record["year"] = year
    date = str(e.get("date") or "").replace("/", "-")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}-?", date):
        record["date"] = date[:10]
    venue = e.get("journal_name") or e.get("secondary_title") or e.get("alternate_title3")
    if venue:
        record["venue"] = venue
    if e.get("doi"):
        record["doi"] = e["doi"]
    urls = e.get("urls") or []
    if urls:
        record["url"] = urls[0]
        arxiv = next((u for u in urls if "arxiv.org/abs/" in u), None)
        if arxiv:
            record["arxiv_id"] = arxiv
    if e.get("keywords"):
        record["keywords"] = e["keywords"]
    record["ris_type"] = e.get("type_of_reference")
    return {k: v for k, v in record.items() if v is not None}


def _flip(name: str) -> str:
    if name.count(",") == 1:
        last, first = (p.strip() for p in name.split(","))
        return f"{first} {last}".strip()
    return name.strip()


def _records(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each TY ... ER record."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not current and not line.strip():
            continue
        if not current:
            start = number
        current.append(line)
        if _END.match(line):
            out.append((start, "\n".join(current) + "\n"))
            current = []
    if any(ln.strip() for ln in current):
        out.append((start, "\n".join(current) + "\n"))
    return out


def parse_ris(path: Path, text: str) -> ParseResult:
    result = ParseResult()
    source = f"ris:{path.name}"
    for line, chunk in _records(text):
        result.records += 1
        first = chunk.lstrip().splitlines()[0]
        if not first.startswith("TY  -"):
            result.errors.append(
                InputError(f"a record must start with 'TY  -', found {first[:40]!r}", path=path, line=line)
            )
            continue
        if not _END.match(chunk.rstrip().splitlines()[-1]):
            result.errors.append(InputError("record is not closed by 'ER  -'", path=path, line=line))
            continue
        try:
            entries = rispy.loads(chunk, skip_unknown_tags=True)
        except Exception as exc:  # rispy raises plain exceptions on damaged records
            result.errors.append(InputError(f"unreadable RIS record: {exc}", path=path, line=line))
            continue
        for entry in entries:
            try:
                result.papers.append(record_to_paper(ris_to_record(entry), source))
            except RecordError as exc:
                result.errors.append(InputError(str(exc), path=path, line=line))
    return result


def looks_like_ris(text: str) -> bool:
    head = [ln for ln in text.lstrip("\ufeff").splitlines()[:5] if ln.strip()]
    return (
        bool(head)
        and head[0].startswith("TY  -")
        and all(_TAG.match(ln) or not ln.strip() for ln in head[:2])
    )
