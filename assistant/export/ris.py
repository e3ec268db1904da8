"""RIS (Zotero, EndNote, Mendeley), written with rispy.

A record keeps the source's type (TY), names as `Family, Given, Suffix` (organisations whole),
volume, issue, pages (SP/EP), ISSN/ISBN (SN), publisher, place, edition, series, short title,
access date and every tag an RIS source had. Prose is given as plain text (see `latex`): math
readable (`H₂O`, `$ 19^{th} $` -> `19th`), `30\\%` as `30%`; notes keep their line breaks
(continuation lines, as Zotero writes them), every other value is one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import rispy
from rispy.writer import RisWriter

from assistant.export.common import (
    ExportContext,
    authors,
    biblio_field,
    csl_type,
    keywords,
    note_lines,
    one_line,
)
from assistant.export.keys import citation_keys
from assistant.export.latex import readable
from assistant.models import Person, StoredPaper

# CSL item type -> RIS type.
_TYPES = {
    "article-journal": "JOUR",
    "article-magazine": "MGZN",
    "article-newspaper": "NEWS",
    "paper-conference": "CPAPER",
    "chapter": "CHAP",
    "book": "BOOK",
    "thesis": "THES",
    "report": "RPRT",
    "webpage": "ELEC",
    "post": "ELEC",
    "post-weblog": "BLOG",
    "manuscript": "UNPB",
    "article": "UNPB",
    "dataset": "DATA",
    "software": "COMP",
    "patent": "PAT",
    "standard": "STAND",
    "entry-encyclopedia": "ENCYC",
    "entry-dictionary": "DICT",
    "pamphlet": "PAMP",
    "legal_case": "CASE",
    "bill": "BILL",
    "legislation": "STAT",
    "map": "MAP",
    "speech": "SLIDE",
    "motion_picture": "VIDEO",
    "hearing": "HEAR",
}
# CSL variable -> rispy key, for one-value tags.
_FIELDS = {
    "volume": "volume",
    "publisher": "publisher",
    "publisher-place": "place_published",
    "edition": "edition",
    "collection-title": "tertiary_title",
    "title-short": "short_title",
    "language": "language",
    "accessed": "access_date",
    "genre": "type_of_work",
    "container-title-short": "alternate_title1",
    "number-of-volumes": "number_of_volumes",
    "section": "section",
}
_TAG_LINE = re.compile(r"^([A-Z][A-Z0-9]  -)")


class _Writer(RisWriter):  # type: ignore[misc]
    """rispy's writer without its numbered header line before each record (`1.`)."""

    def set_header(self, count: int) -> str:
        return ""


def _ris_name(person: Person) -> str:
    if person.literal or not person.given:
        return one_line(person.literal or person.family)
    parts = [person.last, person.given, person.suffix]
    return one_line(", ".join(p for p in parts if p))


def _text(value: str) -> str:
    return one_line(readable(value))


def _note(value: str) -> str:
    """A note on several lines, none of which can pass for a tag (or end the record)."""
    lines = note_lines(value).split("\n")
    return "\n".join(_TAG_LINE.sub(r" \1", line) for line in lines)


def _pages(value: str) -> tuple[str, str | None]:
    parts = re.split(r"\s*[-‐‑‒–—]+\s*", value.strip(), maxsplit=1)
    return parts[0], parts[1] if len(parts) > 1 and parts[1] else None


def record(item: StoredPaper, key: str) -> dict[str, Any]:
    p = item.paper
    biblio = p.biblio
    from_ris = biblio is not None and biblio.source_format == "ris"
    source = dict(biblio.source_fields) if biblio and from_ris else {}
    kind = biblio.source_type if biblio and from_ris and biblio.source_type else None
    ref: dict[str, Any] = {
        "type_of_reference": kind or _TYPES.get(csl_type(p), "UNPB" if p.arxiv_id else "GEN"),
        "id": key,
        "title": _text(p.title),
    }
    people = authors(p)
    if people:
        ref["authors"] = [_ris_name(n) for n in people]
    if biblio and biblio.editors:
        ref["secondary_authors"] = [_ris_name(n) for n in biblio.editors]
    if p.year:
        ref["year"] = str(p.year)
    issued = biblio_field(p, "issued")
    if p.date and len(p.date) >= 10:
        ref["date"] = p.date[:10].replace("-", "/") + "/"
    elif issued and re.fullmatch(r"\d{4}-\d{2}", issued):
        ref["date"] = issued.replace("-", "/") + "//"
    elif p.year:
        ref["date"] = f"{p.year}///"
    if p.venue:
        tag = str(source.get("venue_tag") or "")
        if tag not in ("secondary_title", "alternate_title3", "journal_name"):
            tag = (
                "journal_name" if ref["type_of_reference"] in ("JOUR", "MGZN", "NEWS") else "secondary_title"
            )
        ref[tag] = _text(p.venue)
    if p.abstract:
        ref["abstract"] = _text(p.abstract)
    doi = p.doi or biblio_field(p, "DOI")
    if doi:
        ref["doi"] = doi
    urls = list(dict.fromkeys(u for u in (p.url, p.link, *source.get("urls", [])) if u))
    if urls:
        ref["urls"] = [one_line(u) for u in urls]
    if p.arxiv_id:
        ref["accession_number"] = f"arXiv:{p.arxiv_id}"
    number = biblio_field(p, "issue") or biblio_field(p, "number")
    if number:
        ref["number"] = _text(number)
    page = biblio_field(p, "page")
    if page:
        first, last = _pages(page)
        ref["start_page"] = first
        if last:
            ref["end_page"] = last
    numbers = [n for name in ("ISSN", "ISBN") for n in (biblio_field(p, name) or "").split() if n]
    if numbers:
        ref["issn"] = numbers
    for variable, name in _FIELDS.items():
        value = biblio_field(p, variable)
        if value:
            if name == "alternate_title1" and source.get("abbreviation_tag") == "alternate_title2":
                name = "alternate_title2"
            ref[name] = _text(value)
    words = keywords(item)  # one KW line each: a comma in a keyword stays (`Lymphoma, B-Cell`)
    if words:
        ref["keywords"] = words
    source_note = biblio_field(p, "note")  # the record's: prose, read as text; the researcher's as typed
    notes = [n for n in (source_note and readable(source_note), item.decision.note) if n]
    if notes:
        ref["notes"] = [_note(n) for n in notes]
    for name, value in source.items():
        if name in ("venue_tag", "urls", "abbreviation_tag") or name in ref:
            continue
        if name == "unknown_tag" and isinstance(value, dict):
            ref["unknown_tag"] = {
                str(k): [one_line(str(v)) for v in vs]
                for k, vs in value.items()
                if re.fullmatch(r"[A-Z][A-Z0-9]", str(k))
            }
        elif name in rispy.TAG_KEY_MAPPING.values():
            ref[name] = [one_line(str(v)) for v in value] if isinstance(value, list) else one_line(str(value))
    return ref


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    keys = citation_keys([i.paper for i in items])
    if not items:
        return ""
    writer = _Writer(list_tags=[*rispy.LIST_TYPE_TAGS, "SN"], enforce_list_tags=False)
    return str(writer.formats([record(i, keys[i.paper.id]) for i in items]))
