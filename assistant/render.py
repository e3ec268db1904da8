"""Rich renderings shared by the CLI commands (tables of papers, reports)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.style import Style
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from assistant.ingest import FileReport
    from assistant.models import StoredPaper


LEAN_LEGEND = "↑ the model rates it above the engine, ↓ below"

# What a terminal would act on rather than print: C0 controls but newline and tab (ESC starts
# escape sequences, OSC 8 links among them), DEL, C1 controls (0x9b is a one-byte CSI), and
# the bidirectional overrides and isolates that reorder what is shown ("Trojan source").
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the control picture: ESC prints as ␛
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def clean(text: object) -> str:
    """Text from a paper, a note or an LLM answer, safe to print: every character a terminal
    would act on is replaced by a visible stand-in (ESC by ␛), so no escape sequence passes."""
    return _CONTROL.sub(_visible, str(text).replace("\r\n", "\n"))


def plain(text: object) -> str:
    """`clean` text escaped for rich markup: `[bold]` in a title prints as written."""
    return escape(clean(text))


def terminal_url(url: str | None) -> str | None:
    """The URL if a terminal may make it clickable: http(s) only (arXiv and DOI links are made
    so), with no space or control character that could end the link's escape sequence."""
    from assistant.export.common import safe_url  # with the models: not at every command's start

    safe = safe_url(url)
    if safe is None or any(ch.isspace() or _CONTROL.match(ch) for ch in safe):
        return None
    return safe


def link_text(url: str) -> Text:
    """A URL to print: clickable (OSC 8) when `terminal_url` allows, plain text otherwise."""
    target = terminal_url(url)
    return Text(clean(url), style=Style(link=target) if target else "")


def lean(disagreement: float) -> str:
    """Which way the personal model leans on a paper against the engine (`LEAN_LEGEND`)."""
    return "↑" if disagreement > 0 else "↓"


def relevance_bar(value: float | None, width: int = 10) -> Text:
    if value is None:
        return Text("·" * width, style="dim")
    filled = max(0, min(width, round(value / 10 * width)))
    style = "green" if value >= 7 else "yellow" if value >= 4 else "red"
    return (
        Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim") + Text(f" {value:4.1f}")
    )


def papers_table(
    items: Sequence[StoredPaper],
    title: str,
    scores: Sequence[float] | None = None,
    width: int = 120,
    stale: Collection[str] = (),
    shown: Mapping[str, float | None] | None = None,
    marks: Mapping[str, str] | None = None,
) -> Table:
    """Papers by rank: relevance (or similarity), title and id, tags, status.

    Narrow terminals get the id under the title and no tag column. Papers in stale are
    marked stale (assessed before the agenda, prompts or paper changed). `shown` replaces the
    engine's relevance by the personal ranking's score; `marks` adds a mark to the status.
    """
    wide = width >= 110
    table = Table(title=title, title_justify="left", expand=wide)
    table.add_column("#", justify="right", style="dim")
    table.add_column("similarity" if scores is not None else "relevance", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=4)
    if wide:
        table.add_column("tags", overflow="fold", ratio=2, style="cyan")
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("by", style="dim", no_wrap=True)
        table.add_column("id", style="dim", no_wrap=True)
    for rank, item in enumerate(items, start=1):
        a = item.assessment
        if scores is not None:
            score_cell = Text(f"{scores[rank - 1]:.3f}")
        elif shown is not None:
            score_cell = relevance_bar(shown.get(item.paper.id), width=5)
        else:
            score_cell = relevance_bar(a.relevance if a else None, width=5)
        title_cell = plain(item.paper.title)
        if item.paper.year:
            title_cell += f" [dim]({item.paper.year})[/dim]"
        status = item.decision.status.value + (" ★" if item.decision.starred else "")
        if marks and item.paper.id in marks:
            status += f" {marks[item.paper.id]}"
        if wide:
            # The researcher's own tags first (bold), then the engine's.
            own = item.decision.tags
            engine_tags = [t for t in (a.tags if a else []) if t not in own][: max(0, 4 - len(own))]
            tags = ", ".join([*(f"[bold]{plain(t)}[/bold]" for t in own), *(plain(t) for t in engine_tags)])
            by = ((a.model if a.engine == "llm" else a.engine) or "") if a else ""
            by = plain(by) + (" [yellow]stale[/yellow]" if item.paper.id in stale else "")
            table.add_row(str(rank), score_cell, title_cell, tags, status, by, plain(item.paper.id))
        else:
            if item.paper.id in stale:
                status += " [yellow]stale[/yellow]"
            table.add_row(str(rank), score_cell, f"{title_cell}\n[dim]{plain(item.paper.id)}[/dim]", status)
    return table


def ingest_table(reports: Sequence[FileReport]) -> Table:
    table = Table(title="Import", title_justify="left")
    for name in ("file", "format", "parsed", "new", "merged", "unchanged", "skipped", "time"):
        if name == "file":  # the file's name, whole; the folder only where there is room
            table.add_column(name, justify="left", overflow="fold", ratio=1)
        else:
            table.add_column(name, justify="left" if name == "format" else "right", no_wrap=True)
    names = [Path(r.path).name if not r.path.startswith("arXiv API") else r.path for r in reports]
    # Two files of the same name from different folders keep their folders.
    shown = [r.path if names.count(n) > 1 else n for r, n in zip(reports, names, strict=True)]
    for r, name in zip(reports, shown, strict=True):
        if r.error:
            table.add_row(plain(name), "-", "-", "-", "-", "-", "[red]failed[/red]", "-")
            continue
        skipped = f"[yellow]{len(r.skipped)}[/yellow]" if r.skipped else "0"
        table.add_row(
            plain(name),
            r.format or "-",
            str(r.parsed),
            str(r.new),
            str(r.merged),
            str(r.unchanged),
            skipped,
            f"{r.seconds:.1f}s",
        )
    return table
