"""Turn a loose record (a dict from JSON, CSV, ...) into a Paper, or say what is wrong with it.

A field far beyond what the store keeps of it (`limits`) is cut before it is cleaned, with a
note: cleaning a 200 MB string takes a minute and gigabytes, its first characters milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import Any

from pydantic import ValidationError

from assistant.ingest import limits
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


# What the store keeps of each text field of a paper (the others: limits.SHORT_FIELD).
_CAPS = {"title": limits.TITLE, "abstract": limits.ABSTRACT}


def _bounded(
    name: str, text: str, limit: int, notes: list[str] | None, clean: Callable[[str], str] = clean_text
) -> str:
    """`clean(text)`; a text far beyond `limit` (`limits.read_limit`) is cut to `limit` from the
    cleaned first part of it, with a note (`limits.cap_fields` cuts one a little over)."""
    most = limits.read_limit(limit)
    if len(text) <= most:
        return clean(text)
    if notes is not None:
        notes.append(limits.cut_note(name, len(text), limit))
    return limits.cut(clean(text[:most]), limit)


def _shrunk(value: Any, room: int) -> Any:
    """A JSON-like value with its text cut and its lists and objects shortened to about `room`
    characters (one over it when it was longer, so that `limits.cap_fields` still drops it for
    size, with its note, without first measuring gigabytes)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value[: room + 1] if isinstance(value, str) else value
    left = room + 1

    def walk(item: Any) -> Any:
        nonlocal left
        if isinstance(item, str):
            item = item[: max(left, 0)]
            left -= len(item)
            return item
        if isinstance(item, list | tuple):
            kept = []
            for x in item:
                if left <= 0:
                    break
                left -= 2
                kept.append(walk(x))
            return tuple(kept) if isinstance(item, tuple) else kept
        if isinstance(item, dict):
            out = {}
            for k, x in item.items():
                if left <= 0:
                    break
                left -= len(str(k)) + 4
                out[k] = walk(x)
            return out
        left -= 8
        return item

    return walk(value)


def _text(name: str, value: Any, notes: list[str] | None = None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RecordError(f"'{name}' must be text, got {type(value).__name__}")
    text = _bounded(name, str(value), _CAPS.get(name, limits.SHORT_FIELD), notes)
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


def _text_list(name: str, value: Any, separators: str | None, notes: list[str] | None = None) -> list[str]:
    if value is None:
        return []
    count, length = (
        (limits.AUTHORS, limits.NAME) if name == "authors" else (limits.CATEGORIES, limits.CATEGORY)
    )
    parts: list[str]
    if isinstance(value, str):
        most = limits.read_limit(count * 20)  # far more than `count` items of any real list
        if len(value) > most:
            if notes is not None:
                notes.append(f"{limits.cut_note(name, len(value), most)} before it was read")
            value = value[:most]
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
    if len(parts) > count:
        if notes is not None:
            notes.append(f"{name}: {len(parts):,} kept as {count:,}")
        parts = parts[:count]
    return [t for t in (clean_text(p[: limits.read_limit(length)]) for p in parts) if t]


FIRST_YEAR, LAST_YEAR = 1000, 2999
# A year written as a number, maybe as a spreadsheet's float (`2020.0`), maybe with the rest
# of a date after it (`2020-05`, `2020/05/03`).
_YEAR_TEXT = re.compile(r"(\d{1,4})(?:\.0+|[-/.]\d{1,2}(?:[-/.]\d{1,2})?(?:[T ].*)?)?")
_YEAR_IN_TEXT = re.compile(r"(?<!\d)([12]\d{3})(?!\d)")


def plausible_year(year: int) -> bool:
    """Whether a number can be a paper's year (an unknown or mistyped one cannot: `5`, `20201`)."""
    return FIRST_YEAR <= year <= LAST_YEAR


def _year(value: Any, notes: list[str]) -> int | None:
    """The year, or None (with a note) for one that is unknown or implausible: the paper is
    kept without a year. A value that is not text or a number at all is a RecordError."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kind = "true/false" if isinstance(value, bool) else type(value).__name__
        raise RecordError(f"'year' must be a year such as 2021, got {kind}")
    raw = str(value)
    text = clean_text(raw[:100])  # no year is longer; the note shows the first characters
    found = _YEAR_TEXT.fullmatch(text) if len(raw) <= 100 else None
    year = int(found.group(1)) if found else None
    if year is None or not plausible_year(year):
        shown = repr(text) if len(raw) <= 40 else f"{text[:20]!r}... ({len(raw):,} characters)"
        notes.append(f"'year' {shown} is not a year: stored without a year")
        return None
    return year


def _iso_date(text: str) -> str | None:
    """`2020-05-03` (also with a time after it, or slashes), `2020-05` or `2020`; else None."""
    head = text[:10].replace("/", "-")
    if len(text) >= 10:
        try:
            day = date.fromisoformat(head)
        except ValueError:
            return None
        return day.isoformat() if plausible_year(day.year) else None
    parts = re.fullmatch(r"(\d{4})(?:-(\d{2}))?", text)
    if parts and plausible_year(int(parts.group(1))) and 1 <= int(parts.group(2) or 1) <= 12:
        return text
    return None


def _date(value: Any, notes: list[str]) -> str | None:
    """The date as ISO text, or None (with a note) for one that cannot be read: the paper is
    kept without a date. A value that is not text or a number at all is a RecordError."""
    text = _text("date", value, notes)
    if text is None:
        return None
    iso = _iso_date(text)
    if iso is None:
        shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
        notes.append(f"'date' {shown} is not a date (YYYY-MM-DD): stored without a date")
    return iso


def _clean_person(person: Person) -> Person | None:
    most = limits.read_limit(limits.NAME)
    values = {k: clean_text(v[:most]) for k, v in person.model_dump().items() if v}
    cleaned = Person(**values)
    return cleaned if cleaned.display else None


def _biblio(value: Any, notes: list[str] | None = None) -> Biblio | None:
    """The source's bibliographic record (a Biblio or its dict), cleaned (`limits.cap_fields`
    cuts it to size when it is stored, and says what it cut; a field far beyond its cap is cut
    here, before it is cleaned)."""
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
        limit = limits.ABSTRACT if name in limits.LONG_FIELDS else limits.SHORT_FIELD
        clean = clean_block if name in _BLOCK_FIELDS else clean_text
        cleaned = _bounded(f"biblio.{name}", str(text), limit, notes, clean)
        if cleaned:
            fields[name] = cleaned
    people = {}
    for role in ("authors", "editors"):
        listed: list[Person] = getattr(biblio, role)
        if len(listed) > limits.AUTHORS and notes is not None:
            notes.append(f"biblio.{role}: {len(listed):,} kept as {limits.AUTHORS:,}")
        people[role] = [p for p in map(_clean_person, listed[: limits.AUTHORS]) if p]
    keywords = biblio.keywords[: limits.CATEGORIES]
    if len(biblio.keywords) > limits.CATEGORIES and notes is not None:
        notes.append(f"biblio.keywords: {len(biblio.keywords):,} kept as {limits.CATEGORIES:,}")
    most = limits.read_limit(limits.CATEGORY)
    return biblio.model_copy(
        update={
            **people,
            "fields": fields,
            "keywords": [k for k in (clean_text(k[:most]) for k in keywords) if k],
            "source_fields": {k: _shrunk(v, limits.RECORD) for k, v in biblio.source_fields.items()},
        }
    )


def record_to_paper(record: Any, source: str, notes: list[str] | None = None) -> Paper:
    """Validate a record and build its Paper; unknown fields are kept in `extra`. What the
    paper is stored without (a year or date that cannot be one) is said in `notes`."""
    notes = [] if notes is None else notes
    if not isinstance(record, dict):
        raise RecordError(f"expected an object with a 'title', got {type(record).__name__}")
    title = _text("title", record.get("title"), notes)
    if not title:
        raise RecordError("record has no title")
    raw_id = _text("id", record.get("id"), notes)
    arxiv_id = _text("arxiv_id", record.get("arxiv_id"), notes)
    doi = _text("doi", record.get("doi"), notes)
    extra = {k: _shrunk(v, limits.EXTRA) for k, v in record.items() if k not in KNOWN_FIELDS}
    if raw_id:
        low = raw_id.lower()
        if low.startswith("arxiv:") and not arxiv_id:
            arxiv_id = raw_id[len("arxiv:") :]
        elif low.startswith("doi:") and not doi:
            doi = raw_id[len("doi:") :]
        elif not low.startswith(("title:", *_ID_PREFIXES)):
            extra["source_id"] = raw_id
    biblio = _biblio(record.get("biblio"), notes)
    authors = _text_list("authors", record.get("authors"), None, notes)
    if biblio and biblio.authors and not authors:
        authors = [p.display for p in biblio.authors]
    dt = _date(record.get("date"), notes)
    year = _year(record.get("year"), notes)
    if year is None and dt and dt[:4].isdigit():
        year = int(dt[:4])
    elif year is None and record.get("year") in (None, "") and isinstance(record.get("date"), str):
        # An unreadable date with a year in it (`May 2020`, `03.05.2020`) still gives the year.
        found = _YEAR_IN_TEXT.search(record["date"][: limits.SHORT_FIELD])
        year = int(found.group(1)) if found and plausible_year(int(found.group(1))) else None
    try:
        return Paper.create(
            title=title,
            abstract=unlabelled(_text("abstract", record.get("abstract"), notes) or ""),
            authors=authors,
            year=year,
            date=dt,
            venue=_text("venue", record.get("venue"), notes),
            categories=_text_list("categories", record.get("categories"), r"[,;\s]+", notes),
            arxiv_id=arxiv_id,
            doi=doi,
            url=_text("url", record.get("url"), notes),
            sources=[source],
            extra=extra,
            biblio=biblio,
        )
    except ValidationError as exc:
        raise RecordError("; ".join(e["msg"] for e in exc.errors())) from None
