"""`triage review` (the review UI) and `triage mark` / `triage note` for scripts."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from assistant.cli.shared import app, console, read_ids, state, user_errors
from assistant.errors import ConfigError, TriageError
from assistant.status import Status


@app.command()
@user_errors
def review(
    refresh: Annotated[
        float, typer.Option(min=0.5, help="Seconds between reads of what other processes wrote.")
    ] = 3.0,
) -> None:
    """Review the ranked queue in a terminal UI: decide, tag, note, file into lists, search.

    Guide: docs/review.md"""
    from assistant.tui.app import ReviewApp  # the UI library loads only for this command

    try:
        agenda = state.agenda()
    except ConfigError as exc:
        agenda = None
        console.print(f"[yellow]note:[/yellow] {escape(str(exc))}; topic filters and assessing are off")
    ReviewApp(state.store, state.settings, agenda, refresh_every=refresh).run()


@app.command()
@user_errors
def mark(
    ids: Annotated[list[str], typer.Argument(help="Paper ids, as 'triage ranked' prints them.")],
    accept: Annotated[bool, typer.Option("--accept", help="Mark accepted.")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Mark rejected.")] = False,
    maybe: Annotated[bool, typer.Option("--maybe", help="Mark maybe.")] = False,
    new: Annotated[bool, typer.Option("--new", help="Back to undecided.")] = False,
    star: Annotated[
        bool | None, typer.Option("--star/--unstar", help="Star or unstar.", show_default=False)
    ] = None,
) -> None:
    """Record a decision for papers, as the review UI does.

    Guide: docs/review.md"""
    flags = ((Status.ACCEPTED, accept), (Status.REJECTED, reject), (Status.MAYBE, maybe), (Status.NEW, new))
    chosen = [status for status, given in flags if given]
    if len(chosen) > 1:
        raise TriageError("give one of --accept, --reject, --maybe, --new")
    if not chosen and star is None:
        raise TriageError("nothing to mark: give --accept, --reject, --maybe, --new or --star/--unstar")
    changes: dict[str, object] = {}
    if chosen:
        changes["status"] = chosen[0]
    if star is not None:
        changes["starred"] = star
    ids = read_ids(ids)
    store = state.store
    missing = [pid for pid in ids if store.get(pid) is None]
    if missing:
        raise TriageError(f"no paper with id {missing[0]!r}; 'triage search TEXT' finds ids")
    for pid in ids:
        decision = store.update_decision(pid, **changes)
        console.print(f"{escape(pid)}: {decision.status.value}{' ★' if decision.starred else ''}")
    state.rank_in_background()


@app.command()
@user_errors
def note(
    paper_id: Annotated[str, typer.Argument(help="Paper id.")],
    text: Annotated[str, typer.Argument(help="The note; an empty string clears it.")],
) -> None:
    """Write (or clear) a paper's note."""
    paper_id = read_ids([paper_id])[0]
    if state.store.get(paper_id) is None:
        raise TriageError(f"no paper with id {paper_id!r}; 'triage search TEXT' finds ids")
    state.store.update_decision(paper_id, note=text.strip())
    console.print(f"{escape(paper_id)}: note {'saved' if text.strip() else 'cleared'}")
