"""Turn a loose record (a dict from JSON, CSV, ...) into a Paper, or say what is wrong with it."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from pydantic import ValidationError

from assistant.models import Biblio, Paper, Person, clean_block, clean_text

KNOWN_FIELDS = (
    "id",
    "title",
    "abstract",
    "authors",
    "year",
    "date",
    "venue",
    "categories",
    "arxiv_id",
    "doi",
    "url",
    "biblio",
)
# Fields of a bibliographic record whose line breaks are kept.
_BLOCK_FIELDS = frozenset({"note", "annote", "abstract"})

_ID_PREFIXES = ("arxiv:", "doi:")


class RecordError(ValueError):
    """What is wrong with one record (the caller adds where it is)."""


# A label before the abstract itself: `Abstract`, `Abstract:`, `ABSTRACT.`, `Abstract —`, and
# the `arXiv:... Announce Type: new` line arXiv's own RSS puts before it. Without punctuation
# the label must be followed by a capital or a digit, so that an abstract which starts with
# "Abstract interpretation is ..." keeps its first word.
_ABSTRACT_LABEL = re.compile(
    r"^\s*(?:arXiv:\S+\s+Announce Type:\s*\S+\s+)?"
    r"(?P<label>(?i:abstract))(?:\s*[:.]|\s+[-\u2013\u2014]|(?=\s+[A-Z0-9])|\s*$)\s*"
)
# "Abstract Meaning Representation (AMR)": a capitalised term the acronym after it spells out.
_TERM = re.compile(r"((?:[A-Z][\w-]*\s+){2,6})\(([A-Z]{2,})s?\)")


def unlabelled(abstract: str) -> str:
    """An abstract without the "Abstract" label publishers put first (journal feeds, Semantic
    Scholar's records, reference managers' exports); the word elsewhere stays, and so does a
    first "Abstract" that begins a term ("Abstract Meaning Representation (AMR) parsing ...")."""
    label = _ABSTRACT_LABEL.match(abstract)
    if label is None:
        return abstract
    term = _TERM.match(abstract, label.start("label"))
    if term and "".join(w[0] for w in term.group(1).split()).upper() == term.group(2):
        return abstract
    return abstract[label.end() :]


def _text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RecordError(f"'{name}' must be text, got {type(value).__name__}")
    text = clean_text(str(value))
    return text or None


def split_author_string(value: str) -> list[str]:
    """`A, B and C`, `Last, First; Last2, First2`, `A and B` -> names, `First Last` order."""
    if ";" in value:
        parts = value.split(";")
    elif re.search(r"\sand\s", value):
        parts = re.split(r",?\s+and\s+", value)
    else:
        parts = value.split(",")
    names = []
    for part in parts:
        part = part.strip()
        if part.count(",") == 1:
            last, first = (p.strip() for p in part.split(","))
            part = f"{first} {last}".strip()
        names.append(part)
    return names


def _text_list(name: str, value: Any, separators: str | None) -> list[str]:
    if value is None:
        return []
    parts: list[str]
    if isinstance(value, str):
        parts = split_author_string(value) if separators is None else re.split(separators, value)
    elif isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict):  # {"name": ...} or CSL-style {"given", "family"}
                item = item.get("name") or " ".join(str(item[k]) for k in ("given", "family") if item.get(k))
            if not isinstance(item, str | int | float) or isinstance(item, bool):
                raise RecordError(
                    f"'{name}' must be a list of text, got an item of type {type(item).__name__}"
                )
            parts.append(str(item))
    else:
        raise RecordError(f"'{name}' must be a list or text, got {type(value).__name__}")
    return [t for t in (clean_text(p) for p in parts) if t]


def _year(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise RecordError("'year' must be a number")
    if len(str(value)) > 40:  # also beyond what int() converts
        raise RecordError(f"'year' must be a year, got a number of {len(str(value).strip())} digits")
    try:
        year = int(str(value).strip())
    except ValueError:
        raise RecordError(f"'year' must be a number, got {value!r}") from None
    if not 1000 <= year <= 2999:
        raise RecordError(f"'year' {year} is out of range")
    return year


def _date(value: Any) -> str | None:
    text = _text("date", value)
    if text is None:
        return None
    try:
        return date.fromisoformat(text[:10]).isoformat() if len(text) >= 10 else text
    except ValueError:
        raise RecordError(f"'date' must be an ISO date (YYYY-MM-DD), got {text!r}") from None


def _clean_person(person: Person) -> Person | None:
    values = {k: clean_text(v) for k, v in person.model_dump().items() if v}
    cleaned = Person(**values)
    return cleaned if cleaned.display else None


def _biblio(value: Any) -> Biblio | None:
    """The source's bibliographic record (a Biblio or its dict), cleaned (`limits.cap_fields`
    cuts it to size when it is stored, and says what it cut)."""
    if value is None or value == {}:
        return None
    try:
        biblio = value if isinstance(value, Biblio) else Biblio.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise RecordError(f"'biblio.{where}': {first['msg']}") from None
    fields = {}
    for name, text in biblio.fields.items():
        cleaned = clean_block(str(text)) if name in _BLOCK_FIELDS else clean_text(str(text))
        if cleaned:
            fields[name] = cleaned
    return biblio.model_copy(
        update={
            "authors": [p for p in map(_clean_person, biblio.authors) if p],
            "editors": [p for p in map(_clean_person, biblio.editors) if p],
            "fields": fields,
            "keywords": [k for k in map(clean_text, biblio.keywords) if k],
        }
    )


def record_to_paper(record: Any, source: str) -> Paper:
    """Validate a record and build its Paper; unknown fields are kept in `extra`."""
    if not isinstance(record, dict):
        raise RecordError(f"expected an object with a 'title', got {type(record).__name__}")
    title = _text("title", record.get("title"))
    if not title:
        raise RecordError("record has no title")
    raw_id = _text("id", record.get("id"))
    arxiv_id = _text("arxiv_id", record.get("arxiv_id"))
    doi = _text("doi", record.get("doi"))
    extra = {k: v for k, v in record.items() if k not in KNOWN_FIELDS}
    if raw_id:
        low = raw_id.lower()
        if low.startswith("arxiv:") and not arxiv_id:
            arxiv_id = raw_id[len("arxiv:") :]
        elif low.startswith("doi:") and not doi:
            doi = raw_id[len("doi:") :]
        elif not low.startswith(("title:", *_ID_PREFIXES)):
            extra["source_id"] = raw_id
    biblio = _biblio(record.get("biblio"))
    authors = _text_list("authors", record.get("authors"), None)
    if biblio and biblio.authors and not authors:
        authors = [p.display for p in biblio.authors]
    dt = _date(record.get("date"))
    year = _year(record.get("year"))
    if year is None and dt and dt[:4].isdigit():
        year = int(dt[:4])
    try:
        return Paper.create(
            title=title,
            abstract=unlabelled(_text("abstract", record.get("abstract")) or ""),
            authors=authors,
            year=year,
            date=dt,
            venue=_text("venue", record.get("venue")),
            categories=_text_list("categories", record.get("categories"), r"[,;\s]+"),
            arxiv_id=arxiv_id,
            doi=doi,
            url=_text("url", record.get("url")),
            sources=[source],
            extra=extra,
            biblio=biblio,
        )
    except ValidationError as exc:
        raise RecordError("; ".join(e["msg"] for e in exc.errors())) from None
