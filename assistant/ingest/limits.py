"""Caps on how big one paper's fields may be.

A feed or an export can carry a field of megabytes (a whole article pasted as the abstract, a
runaway string in a .bib): stored whole it would be embedded, assessed and exported at that
size. Each field is cut to a size no real record reaches, with a note saying what was cut.
"""

from __future__ import annotations

import json
from typing import Any

from assistant.models import Paper

TITLE = 1_000  # characters
ABSTRACT = 20_000  # ~3,000 words: the longest structured abstracts fit
SHORT_FIELD = 2_000  # venue, url, doi, arXiv id, date
AUTHORS = 5_000  # names (collaboration papers list ~3,000)
NAME = 300  # characters per name
CATEGORIES = 200
CATEGORY = 100
EXTRA = 64_000  # characters of the source's other fields, as JSON


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def cap_fields(paper: Paper) -> tuple[Paper, list[str]]:
    """The paper with every field within its cap, and a note per field that was cut."""
    notes: list[str] = []
    update: dict[str, Any] = {}

    def text(name: str, value: str | None, limit: int) -> None:
        if value is not None and len(value) > limit:
            update[name] = _cut(value, limit)
            notes.append(f"{name} cut from {len(value):,} to {limit:,} characters")

    def items(name: str, values: list[str], count: int, length: int) -> None:
        kept = [_cut(v, length) for v in values[:count]]
        if kept != values:
            update[name] = kept
            longest = max((len(v) for v in values), default=0)
            notes.append(
                f"{name}: {len(values):,} kept as {len(kept):,}"
                if len(values) > count
                else f"{name} longer than {length} characters cut (the longest had {longest:,})"
            )

    text("title", paper.title, TITLE)
    text("abstract", paper.abstract, ABSTRACT)
    for name in ("venue", "url", "doi", "arxiv_id", "date"):
        text(name, getattr(paper, name), SHORT_FIELD)
    items("authors", paper.authors, AUTHORS, NAME)
    items("categories", paper.categories, CATEGORIES, CATEGORY)
    if paper.extra and _size(paper.extra) > EXTRA:
        extra = dict(paper.extra)
        dropped = []
        for key in sorted(extra, key=lambda k: -_size(extra[k])):
            if _size(extra) <= EXTRA:
                break
            dropped.append(key)
            del extra[key]
        update["extra"] = extra
        notes.append(f"source fields dropped for size: {', '.join(_cut(k, 40) for k in dropped[:5])}")
    if not update:
        return paper, notes
    return paper.model_copy(update=update), notes
