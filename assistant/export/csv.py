"""CSV for spreadsheets: one row per paper with relevance, one column per agenda topic, tags,
status and note. Paper text is read as text (`latex.readable`: math as `O(n log n)`, `30\\%` as
`30%`). A text cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR)
starts with an apostrophe instead (OWASP's advice), so it shows as text."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from assistant.export.common import ExportContext, all_tags, keyword_text, link, topic_names, topic_score
from assistant.export.latex import readable
from assistant.models import StoredPaper

FORMULA_START = tuple("=+-@\t\r\n") + ("＝", "＋", "－", "＠")
COLUMNS = ["id", "title", "authors", "year", "date", "venue", "arxiv_id", "doi", "url", "link"]
TAIL = ["relevance", "tags", "status", "starred", "lists", "note", "summary", "engine", "model", "added"]


def neutralise(cell: str) -> str:
    return "'" + cell if cell.startswith(FORMULA_START) else cell


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    topics = topic_names(context.agenda, items)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([neutralise(c) for c in [*COLUMNS, *(f"topic: {t}" for t in topics), *TAIL]])
    for item in items:
        p, a, d = item.paper, item.assessment, item.decision
        scores = [topic_score(item, t) for t in topics]
        cells: list[str | int | float] = [
            p.id,
            readable(p.title),
            "; ".join(p.authors),
            p.year or "",
            p.date or "",
            readable(p.venue or ""),
            p.arxiv_id or "",
            p.doi or "",
            p.url or "",
            link(item) or "",
            *(s.score if s else "" for s in scores),
            round(a.relevance, 2) if a else "",
            "; ".join(keyword_text(t, ";") for t in all_tags(item)),  # a `;` in a tag: not two tags
            d.status.value,
            "yes" if d.starred else "",
            "; ".join(d.lists),
            d.note,
            readable(a.summary) if a else "",
            a.engine if a else "",
            (a.model or "") if a else "",
            item.added_at.isoformat(timespec="seconds") if item.added_at else "",
        ]
        writer.writerow([neutralise(c) if isinstance(c, str) else c for c in cells])
    return out.getvalue()
