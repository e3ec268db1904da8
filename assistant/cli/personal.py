"""`triage eval` (can the scores be trusted?) and `triage suggest-agenda`."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.shared import app, console, err_console, progress, sentence, state, user_errors
from assistant.defaults import LOW_SCORE
from assistant.status import Status

if TYPE_CHECKING:
    from assistant.index import Row
    from assistant.personal.evaluate import EvalReport, Metrics


def _rows_and_topics() -> tuple[list[Row], list[str]]:
    from assistant.index import Row

    store = state.store
    rows = [Row.from_metadata(pid, meta) for pid, meta in store.iter_metadata()]
    agenda = state.agenda() if state.settings.agenda_path.exists() else None
    return rows, [t.name for t in agenda.topics] if agenda else []


def _negative_topics() -> list[str]:
    agenda = state.agenda() if state.settings.agenda_path.exists() else None
    return [t.name for t in agenda.topics if t.negative] if agenda else []


SHOW_UNCOVERED = 10  # accepted papers named when too few to suggest a topic


def _cell(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "[dim]-[/dim]"
    return f"{value:.0%}" if percent else f"{value:.3f}"


def _metrics_table(title: str, rows: list[Metrics]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("ranker", "papers", "P@10", "P@20", "AP", "ROC-AUC", "WSS@95"):
        table.add_column(name, justify="left" if name == "ranker" else "right")
    for m in rows:
        table.add_row(
            escape(m.name),
            str(m.papers),
            _cell(m.precision_10),
            _cell(m.precision_20),
            _cell(m.average_precision),
            _cell(m.roc_auc),
            _cell(m.wss_95),
        )
    return table


def print_report(report: EvalReport) -> None:
    console.print(
        f"[bold]Decisions[/bold]: {report.decided} ({report.accepted} accepted or starred, "
        f"{report.maybe} maybe, {report.rejected} rejected; {report.seeded} from imports with --accept); "
        f"{report.assessed} of them assessed."
    )
    if not report.measurable:
        console.print(
            "Too few decisions to measure: agreement needs papers you accepted and papers you "
            "rejected or marked maybe, among those assessed. Decide some more ('triage review'), "
            f"then run this again. [dim]{escape(report.note)}[/dim]"
        )
        return
    console.print(
        _metrics_table(
            "Agreement with your decisions (personal model and blend: held out, 5-fold)", report.rankers
        )
    )
    if len(report.topics) > 1:
        console.print(_metrics_table("Each agenda topic's score alone", report.topics))
    table = Table(
        title="Calibration: the engine's relevance and how often you accepted", title_justify="left"
    )
    for name in ("relevance", "papers", "accepted"):
        table.add_column(name, justify="right")
    for b in report.calibration:
        table.add_row(f"{b.low:.0f}-{b.high:.0f}", str(b.papers), _cell(b.share, percent=True))
    console.print(table)
    console.print(f"[bold]{escape(sentence(report.summary()))}[/bold]")
    console.print(
        f"[bold]The queue uses[/bold] {escape(_in_use(report))}. [dim]{escape(sentence(report.note))}[/dim]"
    )
    if report.estimate is not None:
        console.print(f"[bold]Seen enough?[/bold] {escape(sentence(report.estimate.line()))}. {CHECK_HINT}")
    console.print(
        "[dim]Relevant = accepted or starred. Every figure ranks your decided papers only: a paper "
        "the engine buried and you never met is not measured. AP is average precision (1 = every "
        "accept above every other decision; a random order scores the share of accepts). WSS@95 is "
        "the share of these papers you could have skipped and still met 95% of your accepts, beyond "
        "the 5% a random order saves (negative: none). The estimate of relevant papers left comes "
        "from the model's scores calibrated on held-out decisions; it is an estimate, not a "
        "guarantee.[/dim]"
    )


CHECK_HINT = "[dim]For a guarantee, 'triage check' samples the rest at random and tests the recall.[/dim]"


def _in_use(report: EvalReport) -> str:
    if report.engine_weight is not None:
        return (
            "the personal model: the engine's relevance (weight "
            f"{report.engine_weight:.2f} per standard deviation) with what your decisions taught"
        )
    return "the engine alone"


@app.command("eval")
@user_errors
def eval_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="The report as one JSON object.")] = False,
) -> None:
    """Can I trust the scores? Agreement of the engine, the personal model and the blend with your
    decisions (P@10/20, average precision, ROC-AUC, WSS@95), per topic, with a calibration table.

    Guide: docs/ranking.md"""
    from assistant.personal import load_features
    from assistant.personal.evaluate import evaluate

    rows, topics = _rows_and_topics()
    # The queue's training (kept between commands) is where the cross-validation's fits start.
    personal = state.personal(quiet=True)
    texts, notes = load_features(state.store)
    for note in notes:
        err_console.print(f"[dim]note: {escape(note)}[/dim]")
    with progress() as bar:
        task = bar.add_task("cross-validating", total=None)
        report = evaluate(
            texts,
            rows,
            topics,
            on_progress=lambda done, total: bar.update(task, completed=done, total=total),
            negative=_negative_topics(),
            previous=personal.ranking.fit if personal is not None else None,
        )
    if as_json:
        left = report.estimate
        report.estimate = None  # its per-paper arrays are not for JSON: the figures below are
        payload = dataclasses.asdict(report) | {"summary": report.summary()}
        if left is not None:
            payload["estimate"] = {
                "left": left.left,
                "low": left.low,
                "high": left.high,
                "undecided": left.undecided,
                "found": left.found,
                "line": left.line(),
            }
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    print_report(report)


@app.command("suggest-agenda")
@user_errors
def suggest_agenda(
    max_score: Annotated[
        int,
        typer.Option(
            "--max-score", min=0, max=10, help="Accepted papers whose every topic scored at most this."
        ),
    ] = LOW_SCORE,
    min_papers: Annotated[
        int, typer.Option("--min-papers", min=1, help="Papers a suggested topic needs.")
    ] = 2,
) -> None:
    """Suggest topics your agenda is missing, from accepted papers that every topic scored low.
    Prints agenda Markdown to paste into agenda.md; writes nothing.

    Guide: docs/agenda.md"""
    from assistant.personal import load_features
    from assistant.personal.suggest import suggest

    rows, _ = _rows_and_topics()
    negative = _negative_topics()
    texts, notes = load_features(state.store)
    for note in notes:
        err_console.print(f"[dim]note: {escape(note)}[/dim]")
    found, papers = suggest(texts, rows, max_score, min_papers, ignore=negative)
    uncovered = len(papers)
    if not any(r.status is Status.ACCEPTED or r.starred for r in rows):
        console.print("No accepted papers yet: suggestions come from papers you accept that no topic covers.")
        return
    if not found:
        console.print(
            f"{uncovered} accepted {'paper scores' if uncovered == 1 else 'papers score'} {max_score} "
            "or less on every topic"
            + (
                ": too few, or too different from each other, to suggest a topic."
                if uncovered
                else ": the agenda covers what you accept."
            )
        )
        if uncovered:  # name them: the researcher may see the missing topic at a glance
            for row in papers[:SHOW_UNCOVERED]:
                console.print(f"  {escape(row.title)} [dim]({escape(row.id)})[/dim]")
            if len(papers) > SHOW_UNCOVERED:
                console.print(f"  [dim]and {len(papers) - SHOW_UNCOVERED} more[/dim]")
        return
    err_console.print(
        f"{uncovered} accepted papers score {max_score} or less on every topic. Suggested topics "
        "(paste what fits into your agenda, then 'triage tag'):\n"
    )
    console.print("\n\n".join(s.markdown() for s in found), markup=False, highlight=False)
