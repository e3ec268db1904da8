"""RIS (rispy), read record by record so a damaged record is reported with its line.

Every tag is kept: the common ones on the paper, the rest in its `biblio` record by CSL
variable name (VL -> `volume`, IS -> `issue`, SP/EP -> `page`, SN -> `ISSN` or `ISBN`, N1 ->
`note`...), Embase's N2 abstracts read as abstracts, names split in parts (`Thompson, F.R., III`,
`Nakashima S.`), and tags with no CSL counterpart as they came.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import rispy

from assistant.errors import InputError
from assistant.ingest.base import ParseResult, one_record, record_error
from assistant.ingest.records import record_to_paper
from assistant.models import parse_name

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
        text = re.sub(r"/+nan$", "", text)
        if re.fullmatch(r"\d{4}[/\d]*/+", text):  # a date's empty parts: `2020///`
            text = text.rstrip("/")
        return text or None
    return value


# RIS type -> CSL item type.
TYPES = {
    "JOUR": "article-journal",
    "JFULL": "article-journal",
    "EJOUR": "article-journal",
    "ABST": "article-journal",
    "INPR": "article-journal",
    "MGZN": "article-magazine",
    "NEWS": "article-newspaper",
    "BOOK": "book",
    "EBOOK": "book",
    "EDBOOK": "book",
    "SER": "book",
    "CHAP": "chapter",
    "ECHAP": "chapter",
    "CONF": "paper-conference",
    "CPAPER": "paper-conference",
    "THES": "thesis",
    "RPRT": "report",
    "ELEC": "webpage",
    "WEB": "webpage",
    "BLOG": "post-weblog",
    "UNPB": "manuscript",
    "MANSCPT": "manuscript",
    "DATA": "dataset",
    "COMP": "software",
    "PAT": "patent",
    "STAND": "standard",
    "ENCYC": "entry-encyclopedia",
    "DICT": "entry-dictionary",
    "PAMP": "pamphlet",
    "HEAR": "hearing",
    "CASE": "legal_case",
    "BILL": "bill",
    "STAT": "legislation",
    "MAP": "map",
    "SLIDE": "speech",
    "VIDEO": "motion_picture",
    "GEN": "document",
}
# rispy key -> CSL variable, for one-value tags.
FIELDS = {
    "volume": "volume",
    "number": "issue",
    "publisher": "publisher",
    "place_published": "publisher-place",
    "edition": "edition",
    "tertiary_title": "collection-title",
    "short_title": "title-short",
    "language": "language",
    "access_date": "accessed",
    "type_of_work": "genre",
    "alternate_title1": "container-title-short",
    "number_of_volumes": "number-of-volumes",
    "section": "section",
}
# Read into the paper or handled below.
_HANDLED = frozenset(
    "type_of_reference title primary_title authors first_authors secondary_authors abstract "
    "notes_abstract year publication_year date journal_name secondary_title alternate_title3 doi "
    "urls keywords start_page end_page issn notes id".split()
)
# SN holds ISSNs and ISBNs, one or more; rispy keeps only one unless told it is a list tag.
LIST_TAGS = [*rispy.LIST_TYPE_TAGS, "SN"]
_ISSN = re.compile(r"^\d{4}-?\d{3}[\dXx]$")


def ris_to_record(entry: dict[str, Any]) -> dict[str, Any]:
    e = {k: _value(v) for k, v in entry.items() if k != "unknown_tag"}
    e = {k: v for k, v in e.items() if v is not None}
    kind = str(e.get("type_of_reference") or "GEN").upper()
    record: dict[str, Any] = {
        "title": e.get("title") or e.get("primary_title") or e.get("translated_title") or "",
    }
    biblio: dict[str, Any] = {
        "type": TYPES.get(kind, "document"),
        "source_format": "ris",
        "source_type": kind,
    }
    fields: dict[str, str] = {}
    source: dict[str, Any] = {}
    authors = [*(e.get("authors") or []), *(e.get("first_authors") or [])]
    if authors:
        biblio["authors"] = [parse_name(a) for a in authors]
        record["authors"] = [p.display for p in biblio["authors"]]
    editors = [*(e.get("secondary_authors") or [])]
    unknown = {
        k: [v for v in (_value(x) for x in vs) if v] for k, vs in (entry.get("unknown_tag") or {}).items()
    }
    editors += unknown.pop("ED", [])
    if editors and kind not in ("JOUR", "MGZN", "NEWS"):
        biblio["editors"] = [parse_name(a) for a in editors]
    elif editors:
        source["secondary_authors"] = editors
    abstract, embase = e.get("abstract"), e.get("notes_abstract")
    record["abstract"] = abstract or embase  # Embase and some others put the abstract in N2
    if abstract and embase and embase != abstract:
        source["notes_abstract"] = embase
    year = str(e.get("year") or e.get("publication_year") or "")[:4]
    if year.isdigit():
        record["year"] = year
    date = str(e.get("date") or e.get("publication_year") or "").replace("/", "-").strip("-")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        record["date"] = date
    elif re.fullmatch(r"\d{4}-\d{2}(-.*)?", date):
        fields["issued"] = date[:7]
        record.setdefault("year", date[:4])
    for name in ("journal_name", "alternate_title3", "secondary_title"):
        if e.get(name):
            record["venue"] = e[name]
            if name != "journal_name":
                source["venue_tag"] = name
            break
    for name in ("journal_name", "alternate_title3", "secondary_title"):
        if e.get(name) and e[name] != record.get("venue"):
            source[name] = e[name]
    if e.get("doi"):
        doi = str(e["doi"])
        record["doi"] = doi
        if re.match(r"^10/", doi):
            fields["DOI"] = doi
    urls = e.get("urls") or []
    if urls:
        record["url"] = urls[0]
        if urls[1:]:
            source["urls"] = urls[1:]
        arxiv = next((u for u in urls if "arxiv.org/abs/" in u), None)
        if arxiv:
            record["arxiv_id"] = arxiv
    if e.get("keywords"):
        biblio["keywords"] = e["keywords"]
    first, last = e.get("start_page"), e.get("end_page")
    if first or last:
        fields["page"] = f"{first}-{last}" if first and last and "-" not in str(first) else str(first or last)
    for number in e.get("issn") or []:
        key = "ISSN" if _ISSN.match(number.strip()) else "ISBN"
        fields[key] = f"{fields[key]} {number}" if key in fields else number
    if e.get("notes"):
        fields["note"] = "\n".join(e["notes"])
    if e.get("alternate_title2") and not e.get("alternate_title1"):  # JA, where others write J2
        fields["container-title-short"] = str(e.pop("alternate_title2"))
        source["abbreviation_tag"] = "alternate_title2"
    for name, variable in FIELDS.items():
        if e.get(name) and variable not in fields:
            fields[variable] = str(e[name])
        elif e.get(name):
            source[name] = e[name]
    for name, value in e.items():
        if name not in _HANDLED and name not in FIELDS:
            source[name] = value
    if unknown:
        source["unknown_tag"] = {k: v for k, v in unknown.items() if v}
    if e.get("id"):
        record["citekey"] = str(e["id"])
    biblio["fields"] = fields
    biblio["source_fields"] = source
    record["biblio"] = biblio
    record["ris_type"] = kind
    return {k: v for k, v in record.items() if v is not None}


def _records(text: str) -> list[tuple[int, str, str]]:
    """(first line number, text, how it ends) of each TY ... ER record: "ER", or "TY" when a
    `TY  -` line begins the next record while it is open (its ER is missing: that costs no
    other record), or "end" when the file ends inside it."""
    out: list[tuple[int, str, str]] = []
    current: list[str] = []
    start = 0

    def close(end: str) -> None:
        if any(ln.strip() for ln in current):
            out.append((start, "\n".join(current) + "\n", end))

    for number, line in enumerate(text.splitlines(), start=1):
        if not current and not line.strip():
            continue
        if current and line.startswith("TY  -"):
            close("TY")
            current = []
        if not current:
            start = number
        current.append(line)
        if _END.match(line):
            close("ER")
            current = []
    close("end")
    return out


_UNCLOSED = {
    "TY": "it has no 'ER  -' line: it was read up to the 'TY  -' line of the next record",
    "end": "it has no 'ER  -' line: it was read up to the end of the file",
}


def parse_ris(path: Path, text: str) -> ParseResult:
    result = ParseResult()
    source = f"ris:{path.name}"
    for line, chunk, end in _records(text):
        result.records += 1
        first = chunk.lstrip().splitlines()[0]
        if not first.startswith("TY  -"):
            result.errors.append(
                InputError(f"a record must start with 'TY  -', found {first[:40]!r}", path=path, line=line)
            )
            continue
        if end != "ER":  # complete but for its end line
            chunk += "ER  - \n"
        try:
            entries = rispy.loads(chunk, list_tags=LIST_TAGS)
        except Exception as exc:  # rispy raises plain exceptions on damaged records
            result.errors.append(record_error(exc, path, line=line))
            continue
        for entry in entries:
            with one_record(result, path, line=line) as notes:
                result.papers.append(record_to_paper(ris_to_record(entry), source, notes))
                if end != "ER":
                    notes.append(_UNCLOSED[end])
    return result


def looks_like_ris(text: str) -> bool:
    head = [ln for ln in text.lstrip("\ufeff").splitlines()[:5] if ln.strip()]
    return (
        bool(head)
        and head[0].startswith("TY  -")
        and all(_TAG.match(ln) or not ln.strip() for ln in head[:2])
    )
