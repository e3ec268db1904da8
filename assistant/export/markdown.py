"""Markdown reading lists for humans: papers grouped by agenda topic, each with its link, summary,
why it matters (the topic's reason), the researcher's note and tags.

Paper text is read as text first (`latex.readable`: math as `O(n log n)`, `30\\%` as `30%`), then
escaped so that a title cannot become a link, an image, HTML or a heading, under CommonMark and
under GitHub's extensions (a bare `https://...` or `www.` is a link there).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from assistant.export.common import (
    OTHER_GROUP,
    UNASSESSED_GROUP,
    ExportContext,
    Group,
    agenda_name,
    all_tags,
    anchor,
    authors_short,
    group_by_topic,
    link,
    one_line,
)
from assistant.export.latex import readable
from assistant.models import StoredPaper, TopicScore

_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&$#!])")
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto|xmpp)(:)|\b(www)(\.)")


def md(text: str) -> str:
    """Inline Markdown that shows `text` literally (one line, punctuation backslash-escaped).

    The colon after a URL scheme and the dot of `www.` are escaped too: GitHub-flavoured
    Markdown turns bare URLs (`https://`, `ftp://`, `mailto:`) and `www.` names into links."""
    escaped = _SPECIAL.sub(r"\\\1", one_line(text))
    return _AUTOLINK.sub(lambda m: f"{m.group(1) or m.group(3)}\\{m.group(2) or m.group(4)}", escaped)


def code(text: str) -> str:
    """Inline code showing `text` (backticks inside become apostrophes)."""
    return "`" + one_line(text).replace("`", "'") + "`"


def md_link(text: str, url: str | None) -> str:
    if not url:
        return md(text)
    target = re.sub(r"[<>\\\s]", lambda m: f"%{ord(m.group()):02X}", url)
    return f"[{md(text)}](<{target}>)"


def paper_block(item: StoredPaper, score: TopicScore | None) -> list[str]:
    p, a, d = item.paper, item.assessment, item.decision
    byline = " · ".join(
        x
        for x in (md(authors_short(p.authors)), f"*{md(readable(p.venue))}*" if p.venue else "")
        if x.strip("*")
    )
    # Math as readable text (`O(n log n)`, `α ± 0.1`), as in RIS: not `\$O(n \\log n)\$`.
    title = f"**{md_link(readable(p.title), link(item))}**" + (f" ({p.year})" if p.year else "")
    lines = [f"- {title}" + (f" — {byline}" if byline else "")]
    if score is not None and score.reason:
        lines.append(f"  - *Why it matters* ({score.score}/10): {md(score.reason)}")
    if a and a.summary:
        lines.append(f"  - *Summary*: {md(readable(a.summary))}")
    if d.note:
        lines.append(f"  - *Note*: {md(d.note)}")
    facts = [f"status {d.status.value}" + (" ★" if d.starred else "")]
    if a:
        facts.append(f"relevance {a.relevance:.1f} ({md(a.model or a.engine)})")
    tags = all_tags(item)
    if tags:
        facts.insert(0, "tags: " + ", ".join(code(t) for t in tags))
    lines.append("  - " + " · ".join(facts))
    return lines


def header(context: ExportContext, count: int, extra: str = "") -> list[str]:
    lines = [f"# {md(context.title)}", ""]
    if context.description:
        lines += [md(context.description), ""]
    stamp = context.generated_at.strftime("%Y-%m-%d %H:%M UTC")
    facts = [f"{count} paper{'s' if count != 1 else ''}", md(context.selection), f"exported {stamp}"]
    if context.agenda:
        facts.append(f"agenda {code(agenda_name(context.agenda))}")
    lines += [" · ".join(facts) + extra, ""]
    return lines


def contents(groups: Sequence[Group]) -> list[str]:
    return [f"- [{md(g.name)}](#{anchor(g.name)}) ({len(g.entries)})" for g in groups] + [""]


def write_groups(groups: Sequence[Group]) -> list[str]:
    lines: list[str] = []
    for group in groups:
        lines += [f"## {md(group.name)}", ""]
        if group.name == UNASSESSED_GROUP:
            lines += ["*Not assessed against the agenda yet ('triage tag' does it).*", ""]
        elif group.name == OTHER_GROUP:
            lines += ["*Assessed, but no agenda topic scores them above 0.*", ""]
        for item, score in group.entries:
            lines += paper_block(item, score)
        lines.append("")
    return lines


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    groups = group_by_topic(items, context.agenda, context.topic)
    lines = header(context, len(items))
    if not items:
        lines.append("*No papers.*")
    elif len(groups) > 1:
        lines += contents(groups)
    lines += write_groups(groups)
    return "\n".join(lines).rstrip() + "\n"
