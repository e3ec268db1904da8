"""`triage ranked`, `show`, `search` and `stats`: reading the store and the queue."""

from __future__ import annotations

import contextlib
import functools
import heapq
import json
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.shared import app, console, err_console, plural, read_ids, sentence, state, user_errors
from assistant.errors import TriageError
from assistant.order import queue_key
from assistant.render import LEAN_LEGEND, lean, link_text, papers_table, plain, relevance_bar
from assistant.status import Status

if TYPE_CHECKING:
    from assistant.models import StoredPaper
    from assistant.readcache import RankedQueue, RankSummary


@app.command()
@user_errors
def search(
    text: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int, typer.Option("-k", help="Number of results.", min=1)] = 10,
    status: Annotated[Status | None, typer.Option(help="Only papers with this status.")] = None,
) -> None:
    """Semantic search over the store.

    Guide: docs/commands.md"""
    if not text.strip():
        raise TriageError("nothing to search for: give some words, e.g. triage search 'sparse attention'")
    where = {"status": status.value} if status else None
    hits = state.store.search(text, k=k, where=where)
    if not hits:
        console.print(
            "No papers match."
            if state.store.count()
            else "The store is empty: import papers with 'triage ingest FILE'."
        )
        return
    console.print(
        papers_table(
            [h.item for h in hits],
            f"Nearest to “{escape(text)}”",
            [h.similarity for h in hits],
            console.width,
        )
    )


@app.command()
@user_errors
def stats() -> None:
    """Counts of papers by status and assessment.

    Guide: docs/commands.md"""
    from assistant import readcache

    settings = state.settings
    key = _assessment_key()
    rows = readcache.load(settings, "stats", key) if settings.store_exists else None
    if rows is None:
        state.store  # noqa: B018 - opened first: opening may bring its mirror up to date
        before = readcache.signature(settings)
        rows = _store_counts(key is not None)
        readcache.save(settings, "stats", key, rows, before)
    table = Table(title=f"Store {escape(settings.store_location)}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for what, n in rows:
        table.add_row(what, str(n))
    console.print(table)


def _store_counts(with_stale: bool) -> list[tuple[str, int]]:
    """What `stats` counts: each paper's part of it (its status, star, failure, whether it is
    assessed and stale) kept from the last count and worked out again only for the papers
    written since (`assistant.store.derived`), or read from every paper."""
    from assistant.triage.keys import LLM_VERSION, OFFLINE_VERSION, stale_fields
    from assistant.triage.prompts import Prompts, load_prompts

    agenda = state.agenda() if with_stale else None
    prompts: Prompts | None = None
    if agenda is not None:
        try:
            prompts = load_prompts(state.settings.prompts)
        except TriageError:
            prompts = None  # offline assessments are still checked

    def counted(_: str, document: str, meta: dict[str, Any]) -> tuple[str, bool, bool, bool, bool]:
        """A paper's part of the counts: status, starred, failed, assessed, stale."""
        status = str(meta.get("status") or Status.NEW.value)
        starred, failed = meta.get("starred") is True, meta.get("failed") is True
        relevance = meta.get("relevance")
        if not isinstance(relevance, int | float) or relevance < 0 or not meta.get("assessment"):
            return status, starred, failed, False, False
        stale = agenda is not None and stale_fields(
            json.loads(str(meta["assessment"])), document, agenda, prompts
        )
        return status, starred, failed, True, bool(stale)

    store = state.store
    # What the stale check reads besides the paper: the agenda, the prompts, the engines' versions.
    key = (agenda.hash if agenda else None, prompts.hash if prompts else None, OFFLINE_VERSION, LLM_VERSION)
    parts = store.per_paper("stats", key, counted)
    if parts is None:
        parts = [counted(pid, document, meta) for pid, document, meta in store.iter_records()]
    statuses = {status.value: 0 for status in Status}
    starred = assessed = stale = failed = 0
    for status, star, failure, scored, old in parts:
        statuses[status] = statuses.get(status, 0) + 1
        starred += star
        failed += failure
        assessed += scored
        stale += old
    total = len(parts)
    rows = [("papers", total), *((f"  {status}", n) for status, n in statuses.items()), ("starred", starred)]
    rows.append(("assessed", assessed))
    if total > assessed:
        rows.append(("  not yet ('triage tag' does)", total - assessed))
    if agenda is not None:
        rows.append(("  stale ('triage tag' redoes)", stale))
    rows.append(("failed assessments", failed))
    return rows


def _assessment_key() -> tuple[str, str] | None:
    """What makes an assessment stale besides the paper: the agenda's and the prompts' hashes
    (None without a readable agenda: nothing is stale then)."""
    from assistant.triage.prompts import load_prompts

    try:
        agenda = state.agenda()
    except TriageError:
        return None
    try:
        prompts = load_prompts(state.settings.prompts).hash
    except TriageError:
        prompts = ""
    return agenda.hash, prompts


class RankSort(StrEnum):
    RELEVANCE = "relevance"
    UNCERTAIN = "uncertain"
    DISAGREEMENT = "disagreement"


def assessed_queue() -> RankedQueue:
    """The assessed papers and their ranking: saved from the last read of an unchanged store
    (see `assistant.readcache`), or read and ranked now."""
    from assistant import readcache

    settings = state.settings
    try:
        topics = tuple(t.name for t in state.agenda().topics) if settings.agenda_path.exists() else ()
    except TriageError:
        topics = ()
    queue = readcache.load(settings, "ranked", topics) if settings.store_exists else None
    if queue is None and settings.local_store:
        from assistant.cache import training_folder, wait_for_training

        # The background ranking a write started, under way: its answer, once it is kept.
        if wait_for_training(training_folder(state.store.cache_key)):
            queue = readcache.load(settings, "ranked", topics)
    if isinstance(queue, readcache.RankedQueue):
        for note in queue.notes:
            err_console.print(f"[dim]note: {escape(note)}[/dim]")
        return queue
    store = state.store
    before = readcache.signature(settings)
    # The estimate of relevant papers left is brought up to date by a process of its own
    # (`assistant.estimate_refresh`), but for a store behind a Chroma server, where no answer
    # is kept between commands: there it is computed here, as every ranking there is.
    personal = state.personal(with_estimate=before is None)
    return readcache.ranked_queue(settings, store, topics, personal, before)


def estimate_words(queue: RankedQueue) -> tuple[str | None, Callable[[], object] | None]:
    """The estimate line under the queue of new papers (rich markup), and what brings it up to
    date when the kept one is not of the current decisions (starting `assistant.estimate_refresh`
    once the command has printed)."""
    hint = (
        "[dim]An estimate from your decisions; 'triage check' samples the rest at random for a "
        "guarantee.[/dim]"
    )
    summary = queue.ranking
    if summary is None:
        return None, None
    if summary.estimate:  # computed here (a store behind a Chroma server)
        return f"[bold]Seen enough?[/bold] {escape(sentence(summary.estimate))}. {hint}", None
    trained = queue.trained
    if not summary.has_model or trained is None:
        return None, None
    from pathlib import Path

    from assistant.estimate_refresh import KeptEstimate, label, start

    key, folder = trained[0], Path(trained[1])
    words, current = label(KeptEstimate.load(folder), key, summary.decided)
    then = None if current else functools.partial(start, folder, state.flags, state.config_file)
    if words is None:
        return (None if current else "[bold]Seen enough?[/bold] [dim]estimate updating[/dim]"), then
    return f"[bold]Seen enough?[/bold] {escape(sentence(words))}. {hint}", then


def ranked_items(
    top: int | None,
    sort: RankSort = RankSort.RELEVANCE,
    statuses: Sequence[Status] | None = None,
    queue: RankedQueue | None = None,
) -> tuple[list[StoredPaper], RankSummary | None]:
    """Assessed papers in the queue's order (the blend of the engine and the personal model),
    and the ranking when there is one. `statuses` chooses which (all by default); the uncertain
    and disagreement orders cover the papers with no decision yet."""
    queue = queue or assessed_queue()
    ranking = queue.ranking
    wanted = {s.value for s in statuses} if statuses else None
    entries = [e for e in queue.entries if wanted is None or e[1] in wanted]
    if ranking is None or sort is RankSort.RELEVANCE:
        keys = ranking.keys_of(entries) if ranking is not None else [e[2] for e in entries]
        entries = _first(entries, keys, top)
    else:
        entries = [e for e in entries if e[1] == Status.NEW.value]
        if sort is RankSort.UNCERTAIN:
            entries.sort(key=lambda e: (ranking.uncertain(e[0]), -e[2]))
        else:
            entries.sort(key=lambda e: -abs(ranking.disagreement(e[0])))
    chosen = [e[0] for e in (entries[:top] if top else entries)]
    return state.store.get_many(chosen), ranking


def _first(
    entries: list[tuple[str, str, float, int | None]], keys: list[float], top: int | None
) -> list[tuple[str, str, float, int | None]]:
    """The entries in the queue's order (`queue_key` of each one's sort key in `keys`), or the
    first `top` of them: those scoring at least the top-th score, sorted (the rest are not
    sorted at all: at 100k papers, sorting every one costs a tenth of a second)."""
    if top and len(entries) > top and not any(k != k for k in keys):  # (NaN compares with nothing)
        least = heapq.nlargest(top, keys)[-1]
        picked = [(k, e) for k, e in zip(keys, entries, strict=True) if k >= least]
    else:
        picked = list(zip(keys, entries, strict=True))
    picked.sort(key=lambda p: queue_key(p[0], p[1][3], p[1][0]))
    return [e for _, e in (picked[:top] if top else picked)]


SORT_TITLES = {
    RankSort.RELEVANCE: "by relevance",
    RankSort.UNCERTAIN: "the model is least sure of (deciding these teaches it most)",
    RankSort.DISAGREEMENT: f"where your personal model and the engine disagree most ({LEAN_LEGEND})",
}


@app.command()
@user_errors
def ranked(
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="How many papers.")] = 20,
    sort: Annotated[
        RankSort,
        typer.Option(
            help="relevance: the queue's order (the engine blended with what your decisions taught); "
            "uncertain: undecided papers whose decision would teach the personal model most; "
            "disagreement: undecided papers the model and the engine disagree on."
        ),
    ] = RankSort.RELEVANCE,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per line instead of a table.")
    ] = False,
    status: Annotated[
        list[Status] | None,
        typer.Option(
            "--status",
            help="Papers with this decision (repeatable). Default: new, the papers still to decide.",
            show_default=False,
        ),
    ] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Every assessed paper, decided or not, however many.")
    ] = False,
    lab: Annotated[
        bool,
        typer.Option(
            "--lab",
            help="The lab's view of a shared store: papers anyone accepted or starred since --since, "
            "with each person's decision, those you have not decided and those people disagree on.",
        ),
    ] = False,
    since: Annotated[
        str, typer.Option(help="With --lab: decided since an age (7d, 2w, 1m) or a date.")
    ] = "7d",
) -> None:
    """Print the queue still to decide, ordered by relevance (with the personal model once it has
    learned). Decided papers only with --status or --all.

    Guide: docs/ranking.md"""
    if lab:
        from assistant.cli.lab import print_lab

        return print_lab(since, top, as_json)
    statuses = None if everything else (status or [Status.NEW])
    queue = assessed_queue()
    items, ranking = ranked_items(None if everything else top, sort, statuses, queue)
    if sort is not RankSort.RELEVANCE and (ranking is None or not ranking.has_model):
        note = ranking.note if ranking else "the personal model is not available"
        err_console.print(
            f"[yellow]No personal model yet: papers come by relevance.[/yellow] {escape(sentence(note))}"
        )
        sort = RankSort.RELEVANCE
    elif ranking is not None and ranking.decided and not ranking.personal and not as_json:
        # Why the decisions so far leave the order as the engine's ("ranked_by" says it in JSON).
        err_console.print(f"[yellow]note:[/yellow] {escape(ranking.note)}")
    shown = {i.paper.id: ranking.score(i.paper.id) for i in items} if ranking and ranking.personal else None
    if as_json:
        for item in items:
            record = json.loads(item.model_dump_json())
            # The score the queue is ordered by: the blend on the 0-10 scale, or the engine's.
            score = shown.get(item.paper.id) if shown is not None else None
            record["score"] = (
                score if score is not None else (item.assessment.relevance if item.assessment else None)
            )
            record["ranked_by"] = "blend" if score is not None else "engine"
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        return
    if not items:
        if not queue.entries:
            console.print("No assessed papers yet: run 'triage tag'.")
        else:
            which = ", ".join(s.value for s in statuses) if statuses else "any"
            console.print(f"No assessed papers with status {which}; --all shows every paper.")
        return
    if queue.unassessed:
        n = queue.unassessed
        err_console.print(
            f"[yellow]note:[/yellow] {plural(n, 'paper')} {'is' if n == 1 else 'are'} not assessed yet "
            f"and not ranked here: 'triage tag' assesses {'it' if n == 1 else 'them'}."
        )
    stale = state.stale(items)
    marks = (
        {i.paper.id: lean(ranking.disagreement(i.paper.id)) for i in items}
        if ranking is not None and sort is RankSort.DISAGREEMENT
        else {}
    )
    which = (
        ""
        if statuses == [Status.NEW]
        else f" ({', '.join(s.value for s in statuses)})"
        if statuses
        else " (all)"
    )
    title = f"{'All' if everything else 'Top'} {len(items)}{which} {SORT_TITLES[sort]}"
    if shown is not None and sort is RankSort.RELEVANCE:
        title += " (with what your decisions taught)"
    console.print(papers_table(items, title, width=console.width, stale=stale, shown=shown, marks=marks))
    if stale:
        console.print(
            f"[yellow]{len(stale)} of these were assessed before the agenda, prompts or paper "
            "changed[/yellow] (marked 'stale'); 'triage tag' re-assesses them."
        )
    words, then = estimate_words(queue) if statuses == [Status.NEW] else (None, None)
    if words:
        console.print(words)
    if then is not None:
        with contextlib.suppress(OSError):  # not started: the next command starts it
            then()


@app.command()
@user_errors
def show(paper_id: Annotated[str, typer.Argument(help="Paper id, as 'triage ranked' prints it.")]) -> None:
    """Print one paper with its assessment and decision.

    Guide: docs/ranking.md"""
    from assistant.triage.injection import instruction_hint

    paper_id = read_ids([paper_id])[0]
    item = state.store.get(paper_id)
    if item is None:
        raise TriageError(f"no paper with id {paper_id!r}; 'triage search TEXT' finds ids")
    p, a, d = item.paper, item.assessment, item.decision
    # Everything from the paper, its assessment or a note goes through `plain`: rich markup in
    # it prints as written, and no control character reaches the terminal.
    console.print(f"[bold]{plain(p.title)}[/bold]")
    meta = [
        ", ".join(p.authors[:8]) + (" et al." if len(p.authors) > 8 else ""),
        str(p.year or ""),
        p.venue or "",
        " ".join(p.categories),
    ]
    console.print(plain(" · ".join(m for m in meta if m)))
    if p.link:
        console.print(link_text(p.link))  # clickable only when http(s)
    console.print(
        f"id {plain(p.id)} · status {d.status.value}{' ★' if d.starred else ''} · "
        f"sources {plain(', '.join(p.sources))}"
    )
    hint = instruction_hint(p)
    if hint is not None:
        console.print(
            f"[bold yellow]warning:[/bold yellow] this paper's text addresses the grader "
            f"(“{plain(hint[:80])}”): it is assessed in a call of its own, as data, but its "
            "scores may still be steered; read it before trusting them"
        )
    if a:
        console.print()
        console.print(
            "[bold]relevance[/bold] ",
            relevance_bar(a.relevance),
            f"  [dim]({plain(a.engine)}, {a.created_at:%Y-%m-%d %H:%M})[/dim]",
        )
        if state.stale([item]):
            console.print(
                "[yellow]stale:[/yellow] assessed before the agenda, prompts or paper changed; "
                "'triage tag' re-assesses it"
            )
        console.print(f"[bold]summary[/bold] {plain(a.summary)}")
        for t in a.topics:
            console.print(f"  {t.score:>2}/10 [bold]{plain(t.topic)}[/bold]: {plain(t.reason)}")
        console.print(f"[bold]tags[/bold] {plain(', '.join(a.tags))}")
        personal = state.personal(quiet=True)
        explanation = personal.ranking.explain(p.id) if personal else None
        if explanation is not None and personal is not None and personal.ranking.personal:
            console.print("[bold]your decisions[/bold] " + plain(explanation.lines()[0]))
            for line in explanation.lines()[1:]:
                console.print(f"  {plain(line)}")
            console.print(f"  [dim]{plain(explanation.note)}[/dim]")
        elif personal is not None:
            console.print(f"[bold]personal model[/bold] [dim]{plain(personal.ranking.fit.note)}[/dim]")
    if d.tags:
        console.print(f"[bold]your tags[/bold] {plain(', '.join(d.tags))}")
    if item.failure:
        console.print(f"[red]last LLM attempt failed:[/red] {plain(item.failure[1])}")
    if d.note:
        console.print(f"[bold]note[/bold] {plain(d.note)}")
    log = state.store.merge_log(p.id)
    if log is not None and log.entries:
        console.print("[bold]merged records[/bold] (each can be split off: 'triage split ID N')")
        for n, entry in enumerate(log.entries, start=1):
            source = ", ".join(entry.record.sources) or "unknown source"
            console.print(
                f"  {n}. {plain(entry.record.title)} [dim]({plain(entry.record.id)}; {plain(entry.how)}; "
                f"from {plain(source)}, {entry.at:%Y-%m-%d %H:%M})[/dim]"
            )
    if p.abstract:
        console.print()
        console.print(plain(p.abstract))
