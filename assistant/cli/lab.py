"""`triage ranked --lab`: the lab's view of a shared store, in the terminal or as JSON lines."""

from __future__ import annotations

import json
import sys

from rich.markup import escape
from rich.table import Table

from assistant.cli.shared import console, plural, state


def print_lab(since: str, top: int, as_json: bool) -> None:
    """What the group accepted since a date, who has not decided it, and disagreements."""
    from assistant.lab import build
    from assistant.selection import parse_when

    lab = build(state.store, parse_when(since))
    if as_json:
        for paper in lab.accepted:
            record = {
                "id": paper.item.paper.id,
                "title": paper.item.paper.title,
                "decisions": {
                    who: {"status": v.status, "starred": v.starred, "decided_at": v.decided_at or None}
                    for who, v in sorted(paper.verdicts.items())
                },
                "accepted_by": paper.accepted_by,
                "rejected_by": paper.rejected_by,
                "undecided": paper.undecided(lab.people),
                "disputed": paper.disputed,
            }
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        return
    accepted = lab.accepted
    if not accepted:
        console.print(
            f"Nobody in the lab ({', '.join(lab.people)}) accepted or starred a paper since "
            f"{lab.since.isoformat()}."
        )
        return
    table = Table(
        title=f"Accepted by the lab since {lab.since.isoformat()}: {plural(len(accepted), 'paper')}, "
        f"{len(lab.disputed)} disputed, {len(lab.for_me)} you have not decided",
        title_justify="left",
    )
    table.add_column("#", justify="right", style="dim")
    table.add_column("title", overflow="fold", ratio=4)
    for person in lab.people:
        table.add_column(person + (" (you)" if person == lab.person else ""), justify="center", no_wrap=True)
    table.add_column("", no_wrap=True)
    for rank, paper in enumerate(accepted[:top], start=1):
        item = paper.item
        title = escape(item.paper.title) + f"\n[dim]{escape(item.paper.id)}[/dim]"
        cells = [paper.verdicts[p].mark if p in paper.verdicts else "·" for p in lab.people]
        flag = (
            "[red]disputed[/red]"
            if paper.disputed
            else "[yellow]for you[/yellow]"
            if lab.person not in paper.verdicts
            else ""
        )
        table.add_row(str(rank), title, *cells, flag)
    console.print(table)
    console.print("[dim]✓ accepted · ✗ rejected · ? maybe · ★ starred · '·' not decided yet[/dim]")
    if len(accepted) > top:
        console.print(f"[dim]{len(accepted) - top} more: --top {len(accepted)} shows them all.[/dim]")
