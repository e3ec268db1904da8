"""A self-contained web page: papers grouped by agenda topic, one sortable table per topic.

No external assets (inline CSS and a few lines of inline JavaScript to sort by a column), paper
text read as text (`latex.readable`: math as `O(n log n)`, `30\\%` as `30%`), every field
HTML-escaped, only http(s) links, and a Content-Security-Policy that lets nothing run but the
page's own script, so even text that slipped through could not execute.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from html import escape

from assistant.export.common import (
    OTHER_GROUP,
    UNASSESSED_GROUP,
    ExportContext,
    Group,
    agenda_name,
    all_tags,
    authors_short,
    group_by_topic,
    link,
    one_line,
)
from assistant.export.latex import readable
from assistant.models import StoredPaper, TopicScore

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem;
       color: #1d1d1f; background: #fff; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
.meta, .by, .count { color: #666; } .desc { font-size: 1.05rem; }
nav a { margin-right: 1rem; white-space: nowrap; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .45rem .5rem; border-bottom: 1px solid #eee; }
th { cursor: pointer; user-select: none; background: #f6f6f8; position: sticky; top: 0; }
th[aria-sort=ascending]::after { content: " \\25B2"; } th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; white-space: nowrap; } td p { margin: .25rem 0; }
.tag { display: inline-block; background: #eef2ff; border-radius: 3px; padding: 0 .3rem; margin: 1px; }
.note { background: #fff8e1; } .why b, .summary b, .note b { font-weight: 600; }
@media (prefers-color-scheme: dark) { body { background: #161618; color: #e8e8ea; }
  th { background: #26262a; } th, td { border-color: #333; } .tag { background: #2b2f45; }
  .note { background: #3a3420; } a { color: #8ab4ff; } }
"""

SCRIPT = """
function sortKey(cell, numeric) {
  var value = cell.getAttribute("data-sort");
  if (value === null) { value = cell.textContent.trim(); }
  if (numeric) { var n = parseFloat(value); return isNaN(n) ? -Infinity : n; }
  return value.toLowerCase();
}
function sortBy(th) {
  var table = th.closest("table"), body = table.tBodies[0], index = th.cellIndex;
  var numeric = th.getAttribute("data-type") === "num", current = th.getAttribute("aria-sort");
  var ascending = numeric ? current === "descending" : current !== "ascending";
  table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = sortKey(a.cells[index], numeric), y = sortKey(b.cells[index], numeric);
    var order = x < y ? -1 : x > y ? 1 : 0;
    return ascending ? order : -order;
  });
  rows.forEach(function (row) { body.appendChild(row); });
}
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.tabIndex = 0;
  th.title = "Sort by this column";
  th.addEventListener("click", function () { sortBy(th); });
  th.addEventListener("keydown", function (event) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortBy(th); }
  });
});
"""

COLUMNS: tuple[tuple[str, str], ...] = (
    ("#", "num"),
    ("Paper", ""),
    ("Year", "num"),
    ("Score", "num"),
    ("Relevance", "num"),
    ("Status", ""),
    ("Tags", ""),
)


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def paper_cell(item: StoredPaper, score: TopicScore | None) -> str:
    p, a, d = item.paper, item.assessment, item.decision
    url = link(item)
    shown = readable(p.title)  # math as readable text, as in RIS and Markdown
    title = f'<a href="{esc(url)}" rel="noopener noreferrer">{esc(shown)}</a>' if url else esc(shown)
    byline = " · ".join(x for x in (authors_short(p.authors), readable(p.venue or "")) if x)
    parts = [f"<strong>{title}</strong>"]
    if byline:
        parts.append(f'<div class="by">{esc(byline)}</div>')
    if score is not None and score.reason:
        parts.append(f'<p class="why"><b>Why it matters:</b> {esc(score.reason)}</p>')
    if a and a.summary:
        parts.append(f'<p class="summary"><b>Summary:</b> {esc(readable(a.summary))}</p>')
    if d.note:
        parts.append(f'<p class="note"><b>Note:</b> {esc(d.note)}</p>')
    return f'<td data-sort="{esc(shown.casefold())}">' + "".join(parts) + "</td>"


def row(rank: int, item: StoredPaper, score: TopicScore | None) -> str:
    p, a, d = item.paper, item.assessment, item.decision
    tags = "".join(f'<span class="tag">{esc(one_line(t))}</span> ' for t in all_tags(item))
    status = d.status.value + (" ★" if d.starred else "")
    cells = [
        f'<td class="num">{rank}</td>',
        paper_cell(item, score),
        f'<td class="num" data-sort="{p.day or ""}">{esc(p.year or "")}</td>',
        f'<td class="num">{score.score if score else ""}</td>',
        f'<td class="num">{f"{a.relevance:.1f}" if a else ""}</td>',
        f"<td>{esc(status)}</td>",
        f"<td>{tags.strip()}</td>",
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def section(group: Group, number: int) -> list[str]:
    lines = [
        f'<section id="topic-{number}">',
        f'<h2>{esc(group.name)} <span class="count">({len(group.entries)})</span></h2>',
    ]
    if group.name == UNASSESSED_GROUP:
        lines.append('<p class="meta">Not assessed against the agenda yet.</p>')
    elif group.name == OTHER_GROUP:
        lines.append('<p class="meta">Assessed, but no agenda topic scores them above 0.</p>')
    head = "".join(
        f'<th data-type="{kind}">{name}</th>' if kind else f"<th>{name}</th>" for name, kind in COLUMNS
    )
    lines += ['<table class="sortable">', f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    lines += [row(rank, item, score) for rank, (item, score) in enumerate(group.entries, start=1)]
    lines += ["</tbody>", "</table>", "</section>"]
    return lines


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    groups = group_by_topic(items, context.agenda, context.topic)
    policy = (
        f"default-src 'none'; style-src '{_hash(STYLE)}'; script-src '{_hash(SCRIPT)}'; "
        "img-src 'none'; form-action 'none'; base-uri 'none'"
    )
    stamp = context.generated_at.strftime("%Y-%m-%d %H:%M UTC")
    facts = [f"{len(items)} paper{'s' if len(items) != 1 else ''}", context.selection, f"exported {stamp}"]
    if context.agenda:
        facts.append(f"agenda {agenda_name(context.agenda)}")
    lines = [
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}">',
        f"<title>{esc(context.title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        f"<header><h1>{esc(context.title)}</h1>",
    ]
    if context.description:
        lines.append(f'<p class="desc">{esc(context.description)}</p>')
    lines += [f'<p class="meta">{esc(" · ".join(facts))}</p>', "</header>"]
    if len(groups) > 1:
        links = " ".join(
            f'<a href="#topic-{n}">{esc(g.name)} ({len(g.entries)})</a>' for n, g in enumerate(groups, 1)
        )
        lines.append(f"<nav>{links}</nav>")
    if not items:
        lines.append("<p>No papers.</p>")
    for number, group in enumerate(groups, start=1):
        lines += section(group, number)
    lines += ['<footer class="meta"><p>Exported by triage (Paper Triage Assistant).</p></footer>']
    lines += [f"<script>{SCRIPT}</script>", "</body>", "</html>"]
    return "\n".join(lines) + "\n"
