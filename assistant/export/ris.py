"""RIS (Zotero, EndNote, Mendeley), written with rispy: one tag a line, so every value is one line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rispy.writer import RisWriter

from assistant.export.bib import entry_type
from assistant.export.common import ExportContext, all_tags, one_line, split_name
from assistant.export.keys import citation_keys
from assistant.models import StoredPaper

_TYPES = {"article": "JOUR", "inproceedings": "CPAPER", "incollection": "CHAP", "book": "BOOK"}


class _Writer(RisWriter):  # type: ignore[misc]
    """rispy's writer without its numbered header line before each record (`1.`)."""

    def set_header(self, count: int) -> str:
        return ""


def _ris_name(name: str) -> str:
    parts = split_name(name)
    return f"{parts.last}, {parts.given}" if parts.given else parts.last


def record(item: StoredPaper, key: str) -> dict[str, Any]:
    p = item.paper
    kind, _ = entry_type(p)
    ref: dict[str, Any] = {
        "type_of_reference": _TYPES.get(kind, "UNPB" if p.arxiv_id else "GEN"),
        "id": key,
        "title": one_line(p.title),
    }
    if p.authors:
        ref["authors"] = [one_line(_ris_name(a)) for a in p.authors]
    if p.year:
        ref["year"] = str(p.year)
    if p.date and len(p.date) >= 10:
        ref["date"] = p.date[:10].replace("-", "/") + "/"
    if p.venue:
        ref["journal_name" if kind == "article" else "secondary_title"] = one_line(p.venue)
    if p.abstract:
        ref["abstract"] = one_line(p.abstract)
    if p.doi:
        ref["doi"] = p.doi
    urls = list(dict.fromkeys(u for u in (p.url, p.link) if u))
    if urls:
        ref["urls"] = [one_line(u) for u in urls]
    if p.arxiv_id:
        ref["accession_number"] = f"arXiv:{p.arxiv_id}"
    tags = all_tags(item)
    if tags:
        ref["keywords"] = [one_line(t) for t in tags]
    if item.decision.note:
        ref["notes"] = [one_line(item.decision.note)]
    return ref


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    keys = citation_keys([i.paper for i in items])
    if not items:
        return ""
    return str(_Writer().formats([record(i, keys[i.paper.id]) for i in items]))
