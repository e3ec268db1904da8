"""CSL-JSON, Zotero's native format (and pandoc's): an array of items valid against csl-data.json.

An item keeps the source's type (webpage, chapter, book, thesis...), names in their parts
(`non-dropping-particle`, `suffix`, `literal` for organisations) and every variable the source
had (page, volume, issue, ISSN, ISBN, publisher, short DOIs...). The venue is the
`container-title` only of types that have a container; a book's, report's or thesis's venue is
its publisher. arXiv preprints are written as Zotero writes them: type `article`, publisher
`arXiv`, number `arXiv:ID` (never on a journal or conference item, where styles would print
"Article arXiv:..."). Prose is given as text (see `latex`): math readable (`H₂O`), `30\\%` as
`30%`; titles (the item's, its container's, series' and event's) in CSL's rich text, a script
Unicode lacks as `<sup>` (`19<sup>th</sup>`), emphasis as `<i>`, a word with math kept from
title-casing; the abstract, note and publisher as plain text, which Zotero keeps them as. The
item id is the citation key, as in the BibTeX export.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from assistant.export.common import (
    CONTAINER_TYPES,
    KEYWORD_SEPARATORS,
    ExportContext,
    authors,
    csl_type,
    keywords,
    note_lines,
    venue,
)
from assistant.export.keys import citation_keys
from assistant.export.latex import readable, readable_title, rich
from assistant.models import Person, StoredPaper, parse_name

_DATES = frozenset({"accessed", "available-date", "event-date", "issued", "original-date", "submitted"})
# Variables written from the paper itself, never copied from the record's fields.
_OWN = frozenset({"id", "type", "title", "author", "editor", "issued", "container-title", "DOI", "URL"})
_OWN |= {"abstract", "keyword", "annote", "number", "publisher"}


def csl_name(name: Person | str) -> dict[str, str]:
    person = parse_name(name) if isinstance(name, str) else name
    if person.literal or not person.given:
        return {"literal": person.literal} if person.literal else {"family": person.family}
    out = {"family": person.family, "given": person.given}
    if person.particle:
        out["non-dropping-particle"] = person.particle
    if person.dropping_particle:
        out["dropping-particle"] = person.dropping_particle
    if person.suffix:
        out["suffix"] = person.suffix
    return out


def _date(value: str) -> dict[str, Any] | None:
    parts = [int(p) for p in re.findall(r"\d+", value)[:3]]
    return {"date-parts": [parts]} if parts and len(str(parts[0])) == 4 else None


def _prose(name: str, value: str) -> str:
    """A field's text: a title (`collection-title`, `event-title`...) as rich text, a note with
    its line breaks, anything else on one line as plain text."""
    if name == "note":
        return "\n".join(readable(line) for line in note_lines(value).split("\n"))
    return rich(value) if name.endswith(("title", "title-short")) else readable(value)


def item(entry: StoredPaper, key: str) -> dict[str, Any]:
    p = entry.paper
    biblio = p.biblio
    fields = dict(biblio.fields) if biblio else {}
    kind = csl_type(p)
    out: dict[str, Any] = {"id": key, "type": kind, "title": readable_title(p.title)}
    people = authors(p)
    if people:
        out["author"] = [csl_name(n) for n in people]
    if biblio and biblio.editors:
        out["editor"] = [csl_name(n) for n in biblio.editors]
    if p.date and re.match(r"^\d{4}-\d{2}-\d{2}$", p.date):
        out["issued"] = {"date-parts": [[int(x) for x in p.date.split("-")]]}
    elif fields.get("issued") and _date(fields["issued"]):
        out["issued"] = _date(fields["issued"])
    elif p.year:
        out["issued"] = {"date-parts": [[p.year]]}
    place = venue(p)
    publisher = fields.get("publisher")
    if place and kind in CONTAINER_TYPES:
        out["container-title"] = rich(place)
    elif place and not publisher and kind != "article":
        publisher = place
    if p.arxiv_id and kind == "article":
        out["number"] = f"arXiv:{p.arxiv_id}"
        publisher = publisher or "arXiv"
    elif fields.get("number"):
        out["number"] = fields["number"]
    if publisher:
        out["publisher"] = readable(publisher)
    doi = p.doi or fields.get("DOI")
    if doi:
        out["DOI"] = doi
    url = p.url or p.link
    if url:
        out["URL"] = url
    if p.abstract:
        out["abstract"] = readable(p.abstract)
    for name, value in fields.items():
        if name in _OWN or name in out:
            continue
        if name in _DATES:
            date = _date(value)
            if date:
                out[name] = date
        else:
            out[name] = _prose(name, value)
    if biblio and biblio.source_format == "csl-json":
        for name, value in biblio.source_fields.items():
            out.setdefault(name, value)
    words = keywords(entry, KEYWORD_SEPARATORS)
    if words:
        out["keyword"] = ", ".join(words)
    annote = [fields["annote"]] if fields.get("annote") else []
    if entry.decision.note:
        annote.append(note_lines(entry.decision.note))
    if annote:
        out["annote"] = "\n\n".join(annote)
    return out


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    keys = citation_keys([i.paper for i in items])
    return json.dumps([item(i, keys[i.paper.id]) for i in items], ensure_ascii=False, indent=2) + "\n"
