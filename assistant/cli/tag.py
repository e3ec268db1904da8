"""`triage tag`: the batch assessment command (offline, LLM, or offline-then-LLM cascade)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.shared import app, console, err_console, progress, state, user_errors
from assistant.defaults import DEFAULT_MODEL
from assistant.errors import ConfigError, TriageError
from assistant.render import plain
from assistant.triage.pricing import cost, price_for

if TYPE_CHECKING:
    from assistant.store import Store
    from assistant.triage.batch import TagReport
    from assistant.triage.examples import Examples
    from assistant.triage.llm import LLMEngine
    from assistant.triage.runner import Plan, RunReport


class Engine(StrEnum):
    AUTO = "auto"
    LLM = "llm"
    OFFLINE = "offline"


class Mode(StrEnum):
    TOOLS = "tools"
    JSON = "json"


def run_offline_tag(force: bool, limit: int | None, rank_all: bool = False, write: bool = True) -> TagReport:
    """Assess with the offline engine, with a progress bar and a one-line summary."""
    from assistant.triage.batch import tag_offline

    agenda = state.agenda()
    store = state.store
    with progress() as bar:
        task = bar.add_task("assessing (offline)", total=None)
        report = tag_offline(
            store,
            agenda,
            force=force,
            limit=limit,
            on_selected=lambda n: bar.update(task, total=n),
            on_progress=lambda n: bar.advance(task, n),
            rank_all=rank_all,
            write=write,
        )
    if report.rescored and write:
        console.print(
            f"The store has {report.total} papers, against {report.corpus_before} when every paper was "
            f"last scored: {report.rescored} scored papers are scored again, so that old and new "
            "scores compare."
        )
    if not write:
        console.print(f"Ranked {report.total} papers with the offline engine (dry run: nothing stored).")
    elif report.assessed == 0:
        console.print(f"All {report.total} papers are up to date (engine: offline); nothing to assess.")
    else:
        rate = report.assessed / report.seconds if report.seconds else 0.0
        console.print(
            f"Assessed {report.assessed} papers with the [bold]offline[/bold] engine "
            f"in {report.seconds:.1f}s ({rate:.0f}/s); {report.up_to_date} were already up to date."
        )
    return report


def load_examples(store: Store, k: int) -> Examples | None:
    """The calibration examples for an LLM run (None for k = 0), with every paper's vector."""
    from assistant.triage.examples import Examples

    if k <= 0:
        return None
    found = Examples.from_store(store, k)
    found.prepare(store.embeddings(list(store.iter_ids())))
    return found


def _money(value: float | None) -> str:
    return "unknown (no price for this model)" if value is None else f"${value:.4f}"


def _plan_table(plan: Plan, engine: LLMEngine, per_call: int, price: tuple[float, float] | None) -> Table:
    table = Table(
        title=f"Dry run: {engine.model} ({engine.mode} mode)", title_justify="left", show_header=False
    )
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("papers to assess", str(plan.papers))
    table.add_row("already up to date", str(plan.up_to_date))
    table.add_row("failed before (use --retry-failed)", str(plan.skipped_failed))
    table.add_row(f"LLM calls ({per_call} paper(s) per call)", str(len(plan.groups)))
    table.add_row("estimated prompt tokens", f"{plan.prompt_tokens:,}")
    table.add_row("estimated completion tokens", f"{plan.completion_tokens:,}")
    table.add_row("estimated cost", _money(cost(plan.prompt_tokens, plan.completion_tokens, price)))
    return table


def _summary(report: RunReport) -> Table:
    title = (
        "Interrupted"
        if report.interrupted
        else "Stopped: no progress (watchdog)"
        if report.stalled
        else "Stopped: the LLM endpoint cannot be reached"
        if report.unreachable
        else "Stopped: results cannot be stored"
        if report.store_error
        else "Stopped by the budget"
        if report.stopped_by_budget
        else "Done"
    )
    table = Table(title=f"{title}: {report.engine} ({report.model})", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    rate = report.done / report.seconds if report.seconds else 0.0
    table.add_row("assessed", f"{report.done}")
    table.add_row("failed", f"[red]{report.failed}[/red]" if report.failed else "0")
    if report.removed:
        table.add_row("removed while queued", str(len(report.removed)))
    table.add_row("not started", str(report.not_started))
    table.add_row("already up to date", str(report.plan.up_to_date))
    table.add_row("LLM calls", str(report.calls))
    table.add_row("tokens (prompt / completion)", f"{report.prompt_tokens:,} / {report.completion_tokens:,}")
    table.add_row("cost", _money(report.cost))
    table.add_row("time", f"{report.seconds:.1f}s ({rate:.1f} papers/s)")
    return table


def run_llm_tag(
    *,
    model: str,
    mode: str,
    concurrency: int,
    per_call: int,
    llm_top: int | None,
    dry_run: bool,
    budget: float | None,
    limit: int | None,
    force: bool,
    retry_failed: bool,
    examples: int = 0,
    rank_after: bool = False,  # start the background ranking for what it assessed (daily ranks itself)
) -> RunReport | None:
    import asyncio

    from assistant.triage.llm import LLMEngine
    from assistant.triage.prompts import load_prompts
    from assistant.triage.runner import RunReport, plan_run, run_plan

    settings = state.settings
    agenda = state.agenda()
    prompts = load_prompts(settings.prompts)
    price = price_for(model, settings.prices)
    if budget is not None and price is None:
        raise ConfigError(
            f"--budget needs the price of {model!r}: add it to the config file, e.g. "
            f'[prices]\n"{model}" = [0.15, 0.60]  # USD per million input, output tokens'
        )
    api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    store = state.store
    engine = LLMEngine(
        agenda,
        prompts,
        model=model,
        base_url=settings.openai_base_url,
        api_key=api_key,
        mode=mode,
        examples=load_examples(store, examples),
    )
    only: list[str] | None = None
    if llm_top is not None:
        # Rank by offline relevance computed in the same pass, so the choice of papers does
        # not change once some of them carry the LLM's own assessment.
        offline = run_offline_tag(force=False, limit=None, rank_all=True, write=not dry_run).relevance
        personal = state.personal()
        if personal is not None and personal.ranking.fit.active:
            offline = personal.ranking.reorder(offline)  # what the decisions taught moves the cut
        only = sorted(offline, key=lambda pid: -offline[pid])[:llm_top]
    vocabulary = store.tag_vocabulary()
    personal = state.personal(quiet=True)
    plan = plan_run(
        store,
        engine,
        per_call=per_call,
        force=force,
        retry_failed=retry_failed,
        limit=limit,
        only=only,
        vocabulary=vocabulary,
        priority=personal.ranking.priority if personal is not None else None,
    )
    if dry_run:
        console.print(_plan_table(plan, engine, per_call, price))
        return None
    if plan.papers == 0:
        note = (
            f"; {plan.skipped_failed} failed before (--retry-failed tries them again)"
            if plan.skipped_failed
            else ""
        )
        console.print(
            f"All {plan.up_to_date} papers are up to date (engine: llm, model {model}): 0 LLM calls{note}."
        )
        return None
    report = RunReport(engine="llm", model=model, plan=plan)
    with progress("rate", "stats") as bar:
        task = bar.add_task(f"assessing ({model})", total=plan.papers, rate="", stats="")

        def update(r: RunReport) -> None:
            rate = (r.done + r.failed) / r.seconds if r.seconds else 0.0
            bar.update(
                task,
                completed=r.done + r.failed + len(r.removed),
                rate=f"{rate:.1f}/s" if rate else "",
                stats=f"failed {r.failed} · {r.prompt_tokens + r.completion_tokens:,} tok · {_money(r.cost)}",
            )

        def on_update(r: RunReport) -> None:
            r.seconds = bar.tasks[0].elapsed or 0.0
            update(r)

        try:
            asyncio.run(
                run_plan(
                    store,
                    engine,
                    plan,
                    report,
                    concurrency=concurrency,
                    budget=budget,
                    price=price,
                    vocabulary=vocabulary,
                    on_update=on_update,
                )
            )
        except KeyboardInterrupt:
            report.interrupted = True
    console.print(_summary(report))
    if report.plan.isolated:
        err_console.print(
            f"[yellow]note:[/yellow] {report.plan.isolated} papers whose text reads like instructions "
            "were asked one per call"
        )
    for note in report.notes:
        err_console.print(f"[yellow]note:[/yellow] {escape(note)}")
    if report.removed:
        shown = ", ".join(report.removed[:10]) + (
            f" and {len(report.removed) - 10} more" if len(report.removed) > 10 else ""
        )
        err_console.print(f"[yellow]removed while queued:[/yellow] {plain(shown)}")
    if report.stalled:
        err_console.print(
            f"[red]error:[/red] the run stopped: {escape(report.stalled)}.\nEvery result received is "
            "stored; the papers not assessed are tried again by the next 'triage tag'."
        )
    if report.store_error:
        err_console.print(f"[red]error:[/red] {escape(report.store_error)}")
    if report.unreachable:
        err_console.print(
            f"[red]error:[/red] {escape(report.unreachable)}\n"
            "Check OPENAI_BASE_URL (and that the server is running); the papers not assessed are "
            "tried again by the next 'triage tag'."
        )
    else:
        for paper_id, reason in list(report.failures.items())[:10]:
            err_console.print(f"[red]failed:[/red] {plain(paper_id)}: {plain(reason)}")
        if len(report.failures) > 10:
            err_console.print(
                f"... and {len(report.failures) - 10} more ('triage tag --retry-failed' tries them again)"
            )
    if rank_after and report.done:  # what was assessed, if the run stopped midway too
        state.rank_in_background()
    if report.interrupted:
        raise typer.Exit(130)
    if report.failed or report.stalled or report.store_error:
        raise typer.Exit(1)  # scripts and cron jobs see that something was not assessed
    return report


@app.command()
@user_errors
def tag(
    engine: Annotated[
        Engine, typer.Option(help="auto: the LLM when one is configured, else offline.")
    ] = Engine.AUTO,
    model: Annotated[
        str | None, typer.Option(envvar="TRIAGE_MODEL", help=f"LLM model (default {DEFAULT_MODEL}).")
    ] = None,
    mode: Annotated[Mode, typer.Option(help="tools, or json for servers without tool calling.")] = Mode.TOOLS,
    concurrency: Annotated[int, typer.Option(min=1, help="LLM calls in flight at once.")] = 8,
    papers_per_call: Annotated[int, typer.Option(min=1, max=20, help="Papers assessed in one LLM call.")] = 1,
    llm_top: Annotated[
        int | None, typer.Option(min=1, help="Rank everything offline, send only the top N to the LLM.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Estimate calls, tokens and cost; call nothing.")
    ] = False,
    budget: Annotated[
        float | None, typer.Option(min=0, help="Stop starting calls before this many USD.")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Assess at most N papers, the queue's best first."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-assess papers that are up to date.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Try failed papers again.")] = False,
    examples: Annotated[
        int | None,
        typer.Option(
            "--examples",
            min=0,
            max=50,
            help="Show the LLM the K decided papers nearest to each paper, with your decision, to "
            "calibrate its scores (config 'examples', TRIAGE_EXAMPLES; part of the cache key).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Assess every paper whose assessment is missing or stale against the agenda.

    Guide: docs/llm.md"""
    settings = state.settings
    use_llm = engine is Engine.LLM or (engine is Engine.AUTO and settings.llm_configured)
    if engine is Engine.LLM and not settings.llm_configured:
        raise TriageError("--engine llm needs OPENAI_API_KEY and/or OPENAI_BASE_URL (e.g. a local server)")
    if not use_llm:
        if llm_top or dry_run or budget is not None:
            raise TriageError("--llm-top, --dry-run and --budget apply to the LLM engine; none is configured")
        if run_offline_tag(force, limit).assessed:
            state.rank_in_background()
        return
    run_llm_tag(
        model=model or settings.model or DEFAULT_MODEL,
        mode=mode.value,
        concurrency=concurrency,
        per_call=papers_per_call,
        llm_top=llm_top,
        dry_run=dry_run,
        budget=budget,
        limit=limit,
        force=force,
        retry_failed=retry_failed,
        examples=settings.examples if examples is None else examples,
        rank_after=True,
    )
