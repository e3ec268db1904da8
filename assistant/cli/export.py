"""`triage export` (a filtered set of papers in a standard format) and `triage digest`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from assistant.cli.shared import app, err_console, state, user_errors
from assistant.defaults import MATCH
from assistant.errors import TriageError
from assistant.export import FORMATS, by_relevance, format_named, write_file
from assistant.status import Status

if TYPE_CHECKING:
    from assistant.agenda import Agenda
    from assistant.export.common import ExportContext
    from assistant.models import StoredPaper
    from assistant.selection import Selection

DEFAULT_QUERY_LIMIT = 50
_FORMAT_HELP = "; ".join(f"{f.name}: {f.description}" for f in FORMATS.values())

OutputOption = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Write to FILE (atomically) instead of standard output.", show_default=False
    ),
]


def optional_agenda() -> Agenda | None:
    """The agenda if there is one (a broken agenda is still an error)."""
    return state.agenda() if state.settings.agenda_path.exists() else None


def agenda_topic(agenda: Agenda, name: str) -> str:
    """The agenda's spelling of a topic named in any case; an unknown topic lists the known ones."""
    for topic in agenda.topics:
        if topic.name.casefold() == name.strip().casefold():
            return topic.name
    known = ", ".join(repr(t.name) for t in agenda.topics)
    raise TriageError(f"no topic {name!r} in the agenda {agenda.path}; its topics are {known}")


def emit(text: str, output: Path | None, count: int, what: str) -> None:
    """The export to `output` (atomically) or stdout; the count to stderr."""
    papers = f"{count} paper{'s' if count != 1 else ''}"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        err_console.print(f"Exported {papers} ({what}).")
        return
    write_file(output, text)
    err_console.print(f"Wrote {papers} to {escape(str(output))} ({what}).")


@app.command(
    help="Export papers (a reading list or any filtered set) as BibTeX, RIS, CSL-JSON, CSV, JSONL, Markdown "
    "or HTML.\n\nFilters combine: every one given must hold. Papers come most relevant first (with --topic, "
    "best on that topic first; with --query, nearest first). 'triage ingest' of a jsonl export restores "
    "papers, assessments, decisions and lists.\n\nLaTeX engines: -f bib is for bibtex or biber with pdflatex "
    "(ASCII, accents as LaTeX); -f biblatex is for biber with pdflatex, xelatex or lualatex (UTF-8 where "
    "pdflatex knows the letter, LaTeX macros such as \\ensuremath{\\lambda} for Greek and math symbols). "
    "Math in titles, venues and abstracts stays LaTeX math in both; the other formats give it as text."
    "\n\nGuide: docs/formats.md"
)
@user_errors
def export(
    list_name: Annotated[
        str | None,
        typer.Option("--list", "-l", help="Only the papers in this reading list.", show_default=False),
    ] = None,
    status: Annotated[
        list[Status] | None,
        typer.Option("--status", help="Only papers with this status (repeat: any of them)."),
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="Only papers with this tag, the engine's or yours (repeat: all of them)."),
    ] = None,
    topic: Annotated[
        str | None,
        typer.Option(help="Only papers scoring at least --min-score (default 1) on this agenda topic."),
    ] = None,
    min_score: Annotated[
        float | None,
        typer.Option(
            "--min-score",
            min=0,
            max=10,
            help="Minimum relevance (0-10); with --topic, minimum score on that topic.",
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only papers dated on or after: 2024-05-01, 2024, or an age (30d, 6m).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Only papers dated on or before this date.")] = None,
    starred: Annotated[bool, typer.Option("--starred", help="Only starred papers.")] = False,
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="Only the papers nearest in meaning to this text, nearest first."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=1,
            help=f"At most N papers (with --query: the N nearest, default {DEFAULT_QUERY_LIMIT}).",
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help=f"{_FORMAT_HELP}. Default: from -o's extension (-o refs.bib writes bib, which bibtex "
            "and biber both read with pdflatex; add -f biblatex for the UTF-8 one, for biber with pdflatex, "
            "xelatex or lualatex).",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = None,
    vectors: Annotated[
        bool,
        typer.Option(
            "--vectors",
            help="With -f jsonl: each paper's stored embedding too (about 2 KB a paper), so that "
            "'triage ingest' of the file embeds nothing (into a store with the same embedder; "
            "another store's embedder ignores them and embeds).",
        ),
    ] = False,
) -> None:
    """Export papers (a reading list or any filtered set) in a standard format."""
    from assistant.lists import ReadingLists
    from assistant.selection import Selection, parse_when

    chosen = format_named(fmt, output)
    if vectors and chosen.name != "jsonl":
        raise TriageError(
            f"--vectors is for -f jsonl (the format 'triage ingest' restores), not {chosen.name}"
        )
    store = state.store
    lists = ReadingLists(store)
    agenda = optional_agenda() if topic or chosen.name in ("md", "html", "csv") else None
    if topic and agenda is None:
        agenda = state.agenda()  # no agenda: this raises the error that says how to make one
    selection = Selection(
        statuses=tuple(status or ()),
        tags=tuple(tag or ()),
        topic=agenda_topic(agenda, topic) if topic and agenda else None,
        min_score=min_score,
        list_name=lists.get(list_name).name if list_name else None,
        since=parse_when(since) if since else None,
        until=parse_when(until) if until else None,
        starred=starred,
    )
    fast = None
    if chosen.name in ("bib", "biblatex") and not query and not selection.topic and not vectors:
        from assistant.export import bibcache

        # Entries kept from earlier exports (`assistant.export.bibcache`): the same text.
        fast = bibcache.export(store, selection, limit, paper_score(), chosen.name)
    if fast is not None:
        count, text = fast
        if not count:
            err_console.print(f"[yellow]No papers match ({escape(selection.describe())}).[/yellow]")
        emit(text, output, count, chosen.name)
        return
    from assistant.export.common import ExportContext

    items = select(selection, query, limit)
    description = lists.get(selection.list_name).description if selection.list_name else ""
    title = (
        f"Reading list: {selection.list_name}"
        if selection.list_name
        else f"Papers nearest to “{query}”"
        if query
        else "Papers"
    )
    context = ExportContext(
        title=title,
        description=description,
        agenda=agenda,
        lists={rl.name: rl.description for rl in lists.all()},
        selection=selection.describe() + (f", nearest to “{query}”" if query and selection.list_name else ""),
        topic=selection.topic,
    )
    if not items:
        err_console.print(f"[yellow]No papers match ({escape(selection.describe())}).[/yellow]")
    if chosen.name == "jsonl":
        context = everyones(context, [i.paper.id for i in items])
    if vectors:
        from assistant.export.jsonl import Vectors
        from assistant.export.jsonl import write as write_jsonl

        stored = Vectors(store.embedder_identity(), store.vectors([i.paper.id for i in items]))
        emit(write_jsonl(items, context, stored), output, len(items), "jsonl with vectors")
        return
    emit(chosen.write(items, context), output, len(items), chosen.name)


def everyones(context: ExportContext, ids: list[str]) -> ExportContext:
    """The jsonl export's context in a store several people use: whose the decisions are,
    every other person's decision on these papers with their lists, and the shared lists with
    who added each paper (a backup of the lab's decisions, which the restore puts back each to
    its person)."""
    from dataclasses import replace

    from assistant.lists import ReadingLists

    store = state.store
    me = store.view.person
    if set(store.people()[1]) <= {me}:
        return context
    others, shared = store.lab_keys(ids)
    lists: dict[str, dict[str, str]] = {}
    for who in sorted({who for decided in others.values() for who in decided}):
        with store.acting_as(who):
            lists[who] = {rl.name: rl.description for rl in ReadingLists(store).all() if not rl.shared}
    made = {rl.name: (rl.description, rl.created_by) for rl in ReadingLists(store).all() if rl.shared}
    return replace(context, person=me, others=others, others_lists=lists, shared=shared, shared_lists=made)


def paper_score() -> Callable[[str, float | None], float] | None:
    """The queue's blended order as a sort score of (id, the engine's relevance or None), when
    the personal model is in it."""
    personal = state.personal()
    if personal is None or not personal.ranking.personal:
        return None
    return personal.ranking.key


def queue_score() -> Callable[[StoredPaper], float] | None:
    """The queue's blended order as a sort score, when the personal model is in it."""
    score = paper_score()
    if score is None:
        return None
    return lambda i: score(i.paper.id, i.assessment.relevance if i.assessment else None)


def queue_shift() -> Callable[[StoredPaper], float] | None:
    """How far the personal model moves each paper on the 0-10 scale, when it is in the queue."""
    personal = state.personal()
    if personal is None or not personal.ranking.personal:
        return None
    ranking = personal.ranking

    def shift(item: StoredPaper) -> float:
        shown = ranking.score(item.paper.id)
        return shown - item.assessment.relevance if shown is not None and item.assessment else 0.0

    return shift


def select(selection: Selection, query: str | None, limit: int | None) -> list[StoredPaper]:
    """The selected papers: by relevance (by the topic's score with --topic), or the nearest to `query`."""
    store = state.store
    where = selection.where()
    if query:
        wanted = limit or DEFAULT_QUERY_LIMIT
        # Filters Chroma cannot apply (a topic's score) drop hits afterwards: ask for more.
        k = wanted * 4 if selection.topic else wanted
        hits = store.search(query, k=k, where=where)
        return [h.item for h in hits if selection.matches(h.item)][:wanted]
    items = by_relevance([i for i in store.iter_all(where) if selection.matches(i)], queue_score())
    if selection.topic:
        topic = selection.topic
        items.sort(
            key=lambda i: (
                -next((t.score for t in i.assessment.topics if t.topic == topic), 0) if i.assessment else 0
            )
        )
    return items[:limit] if limit else items


@app.command()
@user_errors
def digest(
    since: Annotated[str, typer.Option(help="New since: an age (7d, 2w, 1m) or a date (2024-05-01).")] = "7d",
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="At most N papers per topic.")] = 5,
    min_score: Annotated[
        int, typer.Option("--min-score", min=0, max=10, help="A topic score (0-10) that counts as a match.")
    ] = MATCH,
    output: OutputOption = None,
    lab: Annotated[
        bool,
        typer.Option(
            "--lab",
            help="The reading group's digest instead: papers anyone in the lab accepted since the date, "
            "who decided what, and where people disagree.",
        ),
    ] = False,
) -> None:
    """A Markdown digest of the best new papers per agenda topic, for a cron job or an email.

    New means added to the store on or after the date and not decided yet.

    Guide: docs/feeds.md
    """
    if lab:
        from assistant.lab import build, render
        from assistant.selection import parse_when

        group = build(state.store, parse_when(since))
        emit(render(group), output, len(group.accepted), f"lab digest since {group.since.isoformat()}")
        return
    from assistant.digest import build as build_digest
    from assistant.digest import render as render_digest
    from assistant.selection import Selection, parse_when

    day: date = parse_when(since)
    agenda = optional_agenda()
    kept = Selection(statuses=(Status.NEW,))
    result = build_digest(state.store.iter_all(kept.where()), agenda, day, top, queue_shift(), min_score)
    text = render_digest(result, agenda)
    papers = len({i.paper.id for entries in result.topics.values() for i, _ in entries})
    emit(text, output, papers, f"digest of {len(result.new)} new since {day.isoformat()}")
