"""Caps on how big one paper's fields may be.

A feed or an export can carry a field of megabytes (a whole article pasted as the abstract, a
runaway string in a .bib): stored whole it would be embedded, assessed and exported at that
size. Each field is cut to a size no real record reaches, with a note saying what was cut. The
reference manager's record kept beside the paper (`Paper.biblio`: item type, names, keywords,
every other field) is cut the same way.

Importers cut a field far beyond its cap before the slow work on it (LaTeX decoding, Unicode
cleaning), with `read_limit`: decoding 20 MB of LaTeX takes minutes, cleaning 200 MB gigabytes.
Expansion in a .bib file (`@string` chains that double, `@preamble` macros that multiply) is
capped per field (`EXPANDED`) and per file (`EXPANDED_FILE`), and a field nesting braces deeper
than `NESTING` is not given to the LaTeX decoder (its time grows with the square of the depth).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from assistant.models import Biblio, Paper, Person

TITLE = 1_000  # characters
ABSTRACT = 20_000  # ~3,000 words: the longest structured abstracts fit
SHORT_FIELD = 2_000  # venue, url, doi, arXiv id, date
AUTHORS = 5_000  # names (collaboration papers list ~3,000)
NAME = 300  # characters per name (all the parts of a structured name)
CATEGORIES = 200
CATEGORY = 100
EXTRA = 64_000  # characters of the source's other fields, as JSON
TYPE = 100  # characters of the record's item type (`article-journal`, `phdthesis`, `JOUR`)
LONG_FIELDS = frozenset({"note", "annote", "abstract"})  # record fields as long as an abstract
RECORD = 64_000  # characters of the record's fields and raw source fields together, as JSON
EXPANDED = RECORD  # characters one @string, macro or field may expand to: the largest a record keeps
EXPANDED_FILE = 10_000_000  # characters of @string and macro expansion in one file, all told
NESTING = 100  # brace levels of a .bib field the LaTeX decoder reads (real ones nest a few)


def read_limit(limit: int) -> int:
    """How much of a source field is read to fill a field of `limit` characters: markup (LaTeX,
    runs of spaces) shrinks when it is decoded, so four times as much; the rest is cut unread."""
    return 4 * limit


def cut(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut with an ellipsis if it is longer: within them still
    once cleaned again (`clean_text`, as a paper's title is, spells the ellipsis as three dots)."""
    return text if len(text) <= limit else _cut(text, limit - 2)


def cut_note(name: str, size: int, limit: int) -> str:
    """The note for a field of `size` characters cut to `limit` (what `cap_fields` says too)."""
    return f"{name} cut from {size:,} to {limit:,} characters"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _text(name: str, value: str, limit: int, notes: list[str]) -> str:
    if len(value) <= limit:
        return value
    notes.append(cut_note(name, len(value), limit))
    return _cut(value, limit)


def _items(name: str, values: list[str], count: int, length: int, notes: list[str]) -> list[str]:
    kept = [_cut(v, length) for v in values[:count]]
    if kept != values:
        longest = max((len(v) for v in values), default=0)
        notes.append(
            f"{name}: {len(values):,} kept as {len(kept):,}"
            if len(values) > count
            else f"{name} longer than {length} characters cut (the longest had {longest:,})"
        )
    return kept


def _people(name: str, people: list[Person], notes: list[str]) -> list[Person]:
    def short(person: Person) -> Person:  # at most NAME characters in all, the family name first
        parts = person.model_dump()
        if sum(map(len, parts.values())) <= NAME:
            return person
        room = NAME
        kept: dict[str, str] = {}
        for key in ("literal", "family", "given", "particle", "dropping_particle", "suffix"):
            kept[key] = _cut(parts[key], room) if room > 0 else ""
            room -= len(kept[key])
        return Person(**kept)

    kept = [short(p) for p in people[:AUTHORS]]
    if len(people) > AUTHORS:
        notes.append(f"{name}: {len(people):,} kept as {AUTHORS:,}")
    elif any(a is not b for a, b in zip(kept, people, strict=True)):
        notes.append(f"{name} longer than {NAME} characters cut")
    return kept


def _within(what: str, mapping: Mapping[str, Any], limit: int, notes: list[str]) -> dict[str, Any]:
    """The mapping without its largest entries (the later of equal ones first) until it is at
    most `limit` characters as JSON. Linear: each entry's share of the JSON is measured once."""
    total = _size(mapping)
    if total <= limit:
        return dict(mapping)
    share = {key: _size(str(key)) + _size(value) + 4 for key, value in mapping.items()}  # `"k": v, `
    dropped: list[str] = []
    for _, key in sorted(enumerate(share), key=lambda item: (-share[item[1]], -item[0])):
        if total <= limit:
            break
        dropped.append(key)
        total -= share[key]
    gone = set(dropped)
    more = f" and {len(dropped) - 5:,} more" if len(dropped) > 5 else ""
    notes.append(f"{what} dropped for size: {', '.join(_cut(str(k), 40) for k in dropped[:5])}{more}")
    return {k: v for k, v in mapping.items() if k not in gone}


def _biblio(biblio: Biblio, notes: list[str]) -> Biblio:
    """The source record within its caps: the type, names and keywords like the paper's own,
    each field within the cap of its kind, all fields and raw source fields within `RECORD`."""
    update: dict[str, Any] = {
        name: _text(f"biblio.{name}", getattr(biblio, name), TYPE, notes)
        for name in ("type", "source_type", "source_format")
    }
    update["authors"] = _people("biblio.authors", biblio.authors, notes)
    update["editors"] = _people("biblio.editors", biblio.editors, notes)
    update["keywords"] = _items("biblio.keywords", biblio.keywords, CATEGORIES, CATEGORY, notes)
    fields = {
        name: _cut(value, ABSTRACT if name in LONG_FIELDS else SHORT_FIELD)
        for name, value in biblio.fields.items()
    }
    cut = [name for name, value in fields.items() if value != biblio.fields[name]]
    if cut:
        notes.append(f"biblio.fields longer than their cap cut: {', '.join(_cut(k, 40) for k in cut[:5])}")
    both = {
        **{f"fields.{k}": v for k, v in fields.items()},
        **{f"source_fields.{k}": v for k, v in biblio.source_fields.items()},
    }
    if _size(both) > RECORD:
        both = _within("biblio fields", both, RECORD, notes)
        fields = {k[len("fields.") :]: v for k, v in both.items() if k.startswith("fields.")}
        update["source_fields"] = {
            k[len("source_fields.") :]: v for k, v in both.items() if k.startswith("source_fields.")
        }
    update["fields"] = fields
    changed = {k: v for k, v in update.items() if v != getattr(biblio, k)}
    return biblio.model_copy(update=changed) if changed else biblio


def cap_fields(paper: Paper) -> tuple[Paper, list[str]]:
    """The paper with every field within its cap, and a note per field that was cut."""
    notes: list[str] = []
    update: dict[str, Any] = {}
    limits = {
        "title": TITLE,
        "abstract": ABSTRACT,
        **dict.fromkeys(("venue", "url", "doi", "arxiv_id", "date"), SHORT_FIELD),
    }
    for name, limit in limits.items():
        value = getattr(paper, name)
        if value is not None and len(value) > limit:
            update[name] = _text(name, value, limit, notes)
    for name, count, length in (("authors", AUTHORS, NAME), ("categories", CATEGORIES, CATEGORY)):
        values = getattr(paper, name)
        kept = _items(name, values, count, length, notes)
        if kept != values:
            update[name] = kept
    if paper.extra and _size(paper.extra) > EXTRA:
        update["extra"] = _within("source fields", paper.extra, EXTRA, notes)
    if paper.biblio:
        biblio = _biblio(paper.biblio, notes)
        if biblio is not paper.biblio:
            update["biblio"] = biblio
    if not update:
        return paper, notes
    return paper.model_copy(update=update), notes
