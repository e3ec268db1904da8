"""BibTeX / BibLaTeX (bibtexparser v2): LaTeX to Unicode, arXiv eprints and DOIs recognised."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import bibtexparser
from bibtexparser import middlewares
from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

from assistant.errors import InputError
from assistant.ingest.base import ParseResult
from assistant.ingest.records import RecordError, record_to_paper

# Damaged entries are reported by us, with file and line; the library's own log would repeat them.
logging.getLogger("bibtexparser").setLevel(logging.CRITICAL)
_BRACES = re.compile(r"[{}]")
_UNESCAPED_BRACES = re.compile(r"(?<!\\)[{}]")


def _latex_context() -> Any:
    # pylatexenc spells \textasciicircum as U+02C6 (a modifier letter); LaTeX prints "^".
    db = get_default_latex_context_db()
    db.add_context_category("triage", prepend=True, macros=[MacroTextSpec("textasciicircum", "^")])
    return db


_LATEX = LatexNodes2Text(math_mode="verbatim", latex_context=_latex_context())
# Fields that are prose (decoded from LaTeX); identifiers and URLs are kept verbatim.
_PROSE = (
    "title",
    "abstract",
    "author",
    "editor",
    "journal",
    "journaltitle",
    "booktitle",
    "publisher",
    "keywords",
)
_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}


def _name(raw: str) -> str:
    """`Last, First` -> `First Last`; `{Organisation Name}` stays whole."""
    raw = _BRACES.sub("", raw).strip()
    if raw.count(",") == 1:
        last, first = (p.strip() for p in raw.split(","))
        return f"{first} {last}".strip()
    if raw.count(",") == 2:  # Last, Jr, First
        last, jr, first = (p.strip() for p in raw.split(","))
        return f"{first} {last} {jr}".strip()
    return raw


def _text(value: Any) -> str:
    """A verbatim field (date, eprint...) without its protective braces, on one line."""
    return " ".join(_BRACES.sub("", str(value)).split())


def _line(value: Any) -> str:
    """A decoded prose field on one line (braces left in it were escaped: they are text)."""
    return " ".join(str(value).split())


_LATEX_MARKUP = re.compile(r"[\\$~]|--|``|''")
_ESCAPED = re.compile(r"\\([%&#_${}])")


def _decode(value: str) -> str:
    # Escaped specials (\% \& ...) are the common case in abstracts; the full LaTeX decoder is
    # slow (milliseconds a field), so it only sees text that still has markup after them.
    if not _LATEX_MARKUP.search(_ESCAPED.sub("", value)):
        return _ESCAPED.sub(r"\1", _UNESCAPED_BRACES.sub("", value))
    try:
        return str(_LATEX.latex_to_text(value))
    except Exception:  # pylatexenc gives up on some damaged input; keep the raw text then
        return value


def _prose(value: Any) -> Any:
    return [_decode(str(v)) for v in value] if isinstance(value, list) else _decode(str(value))


def entry_to_record(fields: dict[str, Any], key: str, entry_type: str) -> dict[str, Any]:
    f = {k.lower(): _prose(v) if k.lower() in _PROSE else v for k, v in fields.items()}
    record: dict[str, Any] = {"title": _line(f.get("title", ""))}
    if f.get("abstract"):
        record["abstract"] = _line(f["abstract"])
    authors = f.get("author") or f.get("editor")
    if authors:
        names = authors if isinstance(authors, list) else re.split(r"\s+and\s+", str(authors))
        record["authors"] = [_name(n) for n in names if _name(n) and _name(n).lower() != "others"]
    year = str(f.get("year", "")).strip()
    if re.fullmatch(r"\d{4}", year):
        record["year"] = year
    date = _text(f.get("date", ""))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        record["date"] = date
    elif re.fullmatch(r"\d{4}(-\d{2})?", date) and "year" not in record:
        record["year"] = date[:4]
    month = _MONTHS.get(str(f.get("month", "")).strip().lower()[:3])
    if month and "year" in record and "date" not in record:
        record["month"] = month
    venue = f.get("journal") or f.get("journaltitle") or f.get("booktitle") or f.get("publisher")
    if venue:
        record["venue"] = _line(venue)
    eprint = _text(f.get("eprint", ""))
    kind = _text(f.get("archiveprefix", "") or f.get("eprinttype", "")).lower()
    if eprint and kind in ("", "arxiv"):
        record["arxiv_id"] = eprint
    elif eprint:
        record[f"eprint_{kind}"] = eprint
    if f.get("primaryclass"):
        record["categories"] = [_text(f["primaryclass"])]
    if f.get("doi"):
        record["doi"] = _text(f["doi"])
    if f.get("url"):
        record["url"] = _text(f["url"])
        if "arxiv_id" not in record and "arxiv.org/abs/" in record["url"]:
            record["arxiv_id"] = record["url"]
    if f.get("keywords"):
        record["keywords"] = [k.strip() for k in _text(f["keywords"]).split(",") if k.strip()]
    record["citekey"] = key
    record["entry_type"] = entry_type
    return record


def parse_bibtex(path: Path, text: str) -> ParseResult:
    try:
        library = bibtexparser.parse_string(  # type: ignore[attr-defined]
            text,
            append_middleware=[middlewares.SeparateCoAuthors()],
        )
    except Exception as exc:  # bibtexparser raises assorted errors on damaged input
        raise InputError(f"not readable as BibTeX: {exc}", path=path) from None
    result = ParseResult()
    source = f"bibtex:{path.name}"
    for block in library.failed_blocks:
        result.records += 1
        line = getattr(block, "start_line", None)
        error = getattr(block, "error", None)
        reason = str(getattr(error, "abort_reason", "") or error or "").strip() or type(error).__name__
        result.errors.append(
            InputError(
                f"unreadable BibTeX entry: {reason}", path=path, line=line + 1 if line is not None else None
            )
        )
    for entry in library.entries:
        result.records += 1
        line = entry.start_line + 1 if entry.start_line is not None else None
        fields = {name: field.value for name, field in entry.fields_dict.items()}
        try:
            result.papers.append(
                record_to_paper(entry_to_record(fields, entry.key, entry.entry_type), source)
            )
        except RecordError as exc:
            result.errors.append(
                InputError(f"@{entry.entry_type}{{{entry.key}}}: {exc}", path=path, line=line)
            )
    return result
