"""`triage check`: have I found enough? A random sample of the undecided papers, and a test."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from assistant.cli.shared import app, console, err_console, state, user_errors
from assistant.errors import TriageError
from assistant.status import Status

if TYPE_CHECKING:
    from assistant.personal.stopping import RecallCheck
    from assistant.store import Store

ABSTRACT_CHARS = 1500
ANSWERS = {"a": Status.ACCEPTED, "r": Status.REJECTED, "m": Status.MAYBE}


def _decisions(store: Store) -> dict[str, tuple[Status, bool]]:
    return {
        pid: (Status(meta.get("status") or "new"), bool(meta.get("starred")))
        for pid, meta in store.iter_metadata()
    }


def _load(store: Store) -> RecallCheck | None:
    from assistant.personal.stopping import CHECK_NAME, CHECK_RECORD, RecallCheck

    value = store.named_records(CHECK_RECORD).get(CHECK_NAME)
    return RecallCheck.from_record(value) if value else None


def _save(store: Store, check: RecallCheck) -> None:
    from assistant.personal.stopping import CHECK_RECORD

    store.put_named_record(CHECK_RECORD, check.to_record())


def _show_paper(store: Store, pid: str, n: int) -> None:
    item = store.get(pid)
    if item is None:
        return
    p = item.paper
    console.rule(f"[bold]random paper {n}[/bold]", align="left")
    console.print(f"[bold]{escape(p.title)}[/bold]")
    meta = [
        ", ".join(p.authors[:6]) + (" et al." if len(p.authors) > 6 else ""),
        str(p.year or ""),
        p.venue or "",
    ]
    console.print(escape(" · ".join(m for m in meta if m)), style="italic")
    if p.abstract:
        abstract = p.abstract if len(p.abstract) <= ABSTRACT_CHARS else p.abstract[:ABSTRACT_CHARS] + "…"
        console.print(escape(textwrap.fill(abstract, width=min(console.width, 100))))
    if p.link:
        console.print(f"[dim]{escape(p.link)}[/dim]")
    console.print(f"[dim]id {escape(pid)}[/dim]")


@app.command()
@user_errors
def check(
    recall: Annotated[
        float, typer.Option("--recall", min=0.5, max=0.999, help="The recall to show (when a check begins).")
    ] = 0.95,
    confidence: Annotated[
        float,
        typer.Option(
            "--confidence", min=0.5, max=0.999, help="The confidence to show it with (when a check begins)."
        ),
    ] = 0.95,
    status: Annotated[bool, typer.Option("--status", help="Where the check stands; decide nothing.")] = False,
    restart: Annotated[
        bool, typer.Option("--restart", help="Begin a new check (the papers undecided now form the urn).")
    ] = False,
    stop: Annotated[bool, typer.Option("--stop", help="Discard the check under way.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Where it stands, as one JSON object.")] = False,
) -> None:
    """Have I found enough? Decide papers drawn at random from those still undecided until a test
    shows, with the confidence asked, that you have found the share of relevant papers asked
    (default 95% with 95% confidence; Callaghan and Müller-Hansen's hypergeometric test).

    Start it when the queue's top has stopped giving you relevant papers. Papers you accept,
    star or mark maybe count as relevant. The check keeps its place in the store: quit (q) and
    run it again to go on; decisions you make elsewhere meanwhile are taken into account.

    Guide: docs/ranking.md"""
    from assistant.personal.stopping import CHECK_NAME, CHECK_RECORD, RecallCheck

    store = state.store
    if stop:
        if _load(store) is None:
            console.print("No check under way.")
        else:
            store.delete_named_record(CHECK_RECORD, CHECK_NAME)
            console.print("The check is discarded; your decisions stay.")
        return
    decisions = _decisions(store)
    current = None if restart else _load(store)
    if current is None:
        if status or as_json:
            raise TriageError("no check under way: 'triage check' begins one")
        undecided = [pid for pid, (st, starred) in decisions.items() if st is Status.NEW and not starred]
        if not undecided:
            raise TriageError("every paper is decided: the recall is known, there is nothing to check")
        current = RecallCheck.begin(undecided, recall, confidence)
        _save(store, current)
        err_console.print(
            f"A check begins: the {len(undecided):,} undecided papers form the urn. Decide each paper "
            "shown on its own merits (it was drawn at random); q stops, and 'triage check' goes on later."
        )
    elif (recall, confidence) != (0.95, 0.95) and (recall, confidence) != (
        current.target,
        current.confidence,
    ):
        err_console.print(
            f"[yellow]note:[/yellow] the check under way tests {current.target:.0%} recall at "
            f"{current.confidence:.0%} confidence ('triage check --restart' begins another)"
        )
    result = current.result(decisions)
    if status or as_json or result.reached:
        _report(result.line(), result.as_json() | {"started": current.started}, as_json, result.left_out)
        return
    n, made = result.drawn, 0
    while True:
        upcoming = current.next_papers(decisions)
        if not upcoming:
            break
        pid = upcoming[0]
        n += 1
        _show_paper(store, pid, n)
        answer = _ask()
        if answer == "q":
            break
        decision = store.update_decision(pid, status=ANSWERS[answer])
        made += 1
        decisions[pid] = (decision.status, decision.starred)
        current.record(pid)
        _save(store, current)
        result = current.result(decisions)
        console.print(f"[dim]{escape(result.line())}[/dim]")
        if result.reached:
            break
    result = current.result(decisions)
    if made:  # the queue is ranked for them in the background
        state.rank_in_background()
    _report(result.line(), result.as_json() | {"started": current.started}, False, result.left_out)


def _ask() -> str:
    while True:
        try:
            answer = str(typer.prompt("[a]ccept, [r]eject, [m]aybe, [q]uit", default="q", show_default=False))
        except typer.Abort:
            return "q"
        answer = answer.strip().lower()[:1]
        if answer in ANSWERS or answer == "q":
            return answer
        err_console.print("a, r, m or q")


def _report(line: str, payload: dict[str, object], as_json: bool, added: int) -> None:
    if as_json:
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    console.print(f"[bold]{escape(line[:1].upper() + line[1:])}.[/bold]")
    if added:
        console.print(
            f"[yellow]note:[/yellow] {added} papers were added since the check began and are not covered "
            "('triage check --restart' takes them in)"
        )
