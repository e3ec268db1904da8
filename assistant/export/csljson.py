"""CSL-JSON, Zotero's native format (and pandoc's): an array of items valid against csl-data.json.

arXiv preprints are written as Zotero writes them: type `article`, publisher `arXiv`, number
`arXiv:ID`. The item id is the citation key, as in the BibTeX export.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from assistant.export.bib import entry_type
from assistant.export.common import ExportContext, all_tags, split_name
from assistant.export.keys import citation_keys
from assistant.models import StoredPaper

_TYPES = {
    "article": "article-journal",
    "inproceedings": "paper-conference",
    "incollection": "chapter",
    "book": "book",
    "techreport": "report",
    "phdthesis": "thesis",
    "mastersthesis": "thesis",
}


def csl_name(name: str) -> dict[str, str]:
    parts = split_name(name)
    if not parts.given:
        return {"literal": name}
    out = {"family": parts.family, "given": parts.given}
    if parts.particle:
        out["non-dropping-particle"] = parts.particle
    if parts.suffix:
        out["suffix"] = parts.suffix
    return out


def item(entry: StoredPaper, key: str) -> dict[str, Any]:
    p = entry.paper
    kind, _ = entry_type(p)
    out: dict[str, Any] = {
        "id": key,
        "type": _TYPES.get(kind, "article" if p.arxiv_id else "document"),
        "title": p.title,
    }
    if p.authors:
        out["author"] = [csl_name(a) for a in p.authors]
    if p.date and re.match(r"^\d{4}-\d{2}-\d{2}$", p.date):
        out["issued"] = {"date-parts": [[int(x) for x in p.date.split("-")]]}
    elif p.year:
        out["issued"] = {"date-parts": [[p.year]]}
    if p.venue and out["type"] != "article":
        out["container-title"] = p.venue
    if p.arxiv_id:
        out["number"] = f"arXiv:{p.arxiv_id}"
        if out["type"] == "article":
            out["publisher"] = "arXiv"
    if p.doi:
        out["DOI"] = p.doi
    url = p.url or p.link
    if url:
        out["URL"] = url
    if p.abstract:
        out["abstract"] = p.abstract
    tags = all_tags(entry)
    if tags:
        out["keyword"] = ", ".join(tags)
    if entry.decision.note:
        out["annote"] = entry.decision.note
    return out


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    keys = citation_keys([i.paper for i in items])
    return json.dumps([item(i, keys[i.paper.id]) for i in items], ensure_ascii=False, indent=2) + "\n"
