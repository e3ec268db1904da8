"""`triage feed`, `fetch`, `enrich` and `daily`: saved feeds and the daily loop."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from assistant.cli.export import OutputOption, emit, optional_agenda, queue_shift
from assistant.cli.shared import app, console, err_console, plural, progress, state, subcommand, user_errors
from assistant.defaults import DEFAULT_MODEL, MATCH
from assistant.errors import TriageError
from assistant.status import Status

if TYPE_CHECKING:
    from assistant.feeds.enrich import EnrichReport
    from assistant.feeds.model import Feeds
    from assistant.feeds.runner import FeedReport

feed_app = typer.Typer(
    name="feed",
    help="Saved feeds (arXiv, Hugging Face daily papers, Semantic Scholar, RSS/Atom), kept in the "
    "store; 'triage fetch' brings what is new from them.\n\nGuide: docs/feeds.md",
    no_args_is_help=True,
)
feed_app.callback()(subcommand)
app.add_typer(feed_app, name="feed")

Name = Annotated[str, typer.Argument(help="The feed's name.", show_default=False)]
Arxiv = Annotated[
    str | None, typer.Option("--arxiv", help='arXiv search query, e.g. "cat:cs.CL AND abs:adapter".')
]
Categories = Annotated[
    list[str] | None,
    typer.Option("--arxiv-category", help="arXiv categories, e.g. cs.CL,cs.LG (new submissions in any)."),
]
HfDaily = Annotated[bool, typer.Option("--hf-daily", help="Hugging Face daily papers.")]
S2Author = Annotated[
    str | None, typer.Option("--s2-author", help="A Semantic Scholar author id: their new papers.")
]
S2Recommend = Annotated[
    bool,
    typer.Option(
        "--s2-recommend",
        help="Semantic Scholar's recommendations from your decisions (accepted: more like these; "
        "rejected: fewer like these).",
    ),
]
Rss = Annotated[str | None, typer.Option("--rss", help="An RSS or Atom feed's address.")]
Max = Annotated[
    int | None, typer.Option("--max", min=1, max=5000, help="New papers one fetch brings at most.")
]
FirstDays = Annotated[
    int | None, typer.Option("--first-days", min=0, max=365, help="How far back the first fetch looks.")
]


def _source(
    arxiv: str | None,
    categories: list[str] | None,
    hf_daily: bool,
    s2_author: str | None,
    s2_recommend: bool,
    rss: str | None,
) -> dict[str, Any] | None:
    """The feed fields for the one source given (None if none was)."""
    from assistant.feeds.model import Kind

    cats = [c.strip() for value in categories or [] for c in value.split(",") if c.strip()]
    given: list[dict[str, Any]] = []
    if arxiv or cats:
        given.append({"kind": Kind.ARXIV, "query": arxiv or None, "categories": cats})
    if arxiv and cats:
        given[-1]["query"] = f"({arxiv}) AND ({' OR '.join(f'cat:{c}' for c in cats)})"
        given[-1]["categories"] = []
    if hf_daily:
        given.append({"kind": Kind.HF_DAILY})
    if s2_author:
        given.append({"kind": Kind.S2_AUTHOR, "author": s2_author.strip()})
    if s2_recommend:
        given.append({"kind": Kind.S2_RECOMMEND})
    if rss:
        given.append({"kind": Kind.RSS, "url": rss.strip()})
    if len(given) > 1:
        raise TriageError(
            "a feed has one source: give one of --arxiv/--arxiv-category, --hf-daily, "
            "--s2-author, --s2-recommend, --rss (make a feed for each)"
        )
    if not given:
        return None
    blank: dict[str, Any] = {"query": None, "categories": [], "author": None, "url": None}
    return {**blank, **given[0]}


def _feeds() -> Feeds:
    from assistant.feeds.model import Feeds

    return Feeds(state.store)


@feed_app.command("add")
@user_errors
def add(
    name: Name,
    arxiv: Arxiv = None,
    arxiv_category: Categories = None,
    hf_daily: HfDaily = False,
    s2_author: S2Author = None,
    s2_recommend: S2Recommend = False,
    rss: Rss = None,
    maximum: Max = None,
    first_days: FirstDays = None,
) -> None:
    """Save a feed with one source; 'triage fetch' brings what is new from it."""
    source = _source(arxiv, arxiv_category, hf_daily, s2_author, s2_recommend, rss)
    if source is None:
        raise TriageError(
            "name the feed's source: --arxiv QUERY, --arxiv-category CATS, --hf-daily, "
            "--s2-author ID, --s2-recommend or --rss URL"
        )
    extra = {k: v for k, v in {"max": maximum, "first_days": first_days}.items() if v is not None}
    from assistant.feeds.model import check_spec

    spec = check_spec({"name": name, **source, **extra})
    _feeds().add(spec)
    console.print(
        f"Saved the feed {escape(spec.name)!r} ({escape(spec.describe())}): 'triage fetch' runs it."
    )


@feed_app.command("edit")
@user_errors
def edit(
    name: Name,
    arxiv: Arxiv = None,
    arxiv_category: Categories = None,
    hf_daily: HfDaily = False,
    s2_author: S2Author = None,
    s2_recommend: S2Recommend = False,
    rss: Rss = None,
    maximum: Max = None,
    first_days: FirstDays = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Forget what the feed brought: the next fetch is a first one.")
    ] = False,
) -> None:
    """Change a feed's source or limits (what it brought so far is kept unless --reset)."""
    from assistant.feeds.model import check_spec

    feeds = _feeds()
    spec = feeds.get(name)
    source = _source(arxiv, arxiv_category, hf_daily, s2_author, s2_recommend, rss)
    changes = {k: v for k, v in {"max": maximum, "first_days": first_days}.items() if v is not None}
    if source is None and not changes and not reset:
        raise TriageError("nothing to change: give a new source, --max, --first-days or --reset")
    updated = check_spec({**spec.model_dump(), **(source or {}), **changes})
    if source is not None:
        feeds.check_source(updated)
    feeds.replace(updated)
    if reset or (source is not None and source["kind"] != spec.kind):
        feeds.reset(spec.name)  # another kind of source: its watermark means nothing here
    console.print(f"Updated the feed {escape(spec.name)!r}: {escape(updated.describe())}.")


@feed_app.command("rm")
@user_errors
def rm(names: Annotated[list[str], typer.Argument(help="Feeds to delete.", show_default=False)]) -> None:
    """Delete saved feeds (the papers they brought stay)."""
    feeds = _feeds()
    for spec in [feeds.get(n) for n in names]:
        feeds.remove(spec.name)
        console.print(f"Deleted the feed {escape(spec.name)!r}; the papers it brought stay.")


def _when(value: datetime | None) -> str:
    return value.astimezone().strftime("%Y-%m-%d %H:%M") if value else "never"


@feed_app.command("ls")
@user_errors
def ls() -> None:
    """Every feed: its source, last run, what that run brought, errors."""
    feeds = _feeds()
    specs, states = feeds.all(), feeds.states()
    if not specs:
        console.print("No saved feeds: 'triage feed add NAME --arxiv-category cs.CL' makes one.")
        return
    table = Table(title="Feeds", title_justify="left")
    for col in ("feed", "source", "last run", "new", "seen", "skipped", "all time", "error / note"):
        table.add_column(
            col,
            justify="right" if col in ("new", "seen", "skipped", "all time") else "left",
            overflow="fold" if col == "error / note" else "ellipsis",  # an error's address in full
        )
    for spec in specs.values():
        st = states.get(spec.name)
        if st is None or st.last_run is None:
            table.add_row(escape(spec.name), escape(spec.describe()), "never", "", "", "", "", "")
            continue
        note = f"[red]{escape(st.error)}[/red]" if st.error else escape("; ".join(st.notes))
        table.add_row(
            escape(spec.name),
            escape(spec.describe()),
            _when(st.last_run) + ("" if st.error is None else " [red]failed[/red]"),
            str(st.new),
            str(st.already_seen),
            str(st.skipped),
            str(st.total_new),
            note,
        )
    console.print(table)


@contextlib.contextmanager
def _bar(label: str) -> Iterator[tuple[Callable[[str, int | None], None], Callable[[int], None]]]:
    """A transient progress bar on a terminal (nothing otherwise): (describe, advance)."""
    if not err_console.is_terminal:
        yield (lambda _d, _t: None), (lambda _n: None)
        return
    with progress() as bar:
        task = bar.add_task(label, total=None)

        def describe(text: str, total: int | None) -> None:
            bar.update(task, description=text, total=total, completed=0)

        yield describe, lambda n: bar.advance(task, n)


def run_fetch(names: list[str], plain: bool = False) -> list[FeedReport]:
    """Fetch feeds with a progress bar; print the per-feed table (or, `plain`, a line per
    feed for logs), notes and errors."""
    from assistant.feeds.runner import fetch_feeds

    with _bar("fetching") as (describe, advance):
        reports = fetch_feeds(
            state.store,
            state.settings,
            names,
            on_feed=lambda spec: describe(f"fetching {spec.name}", None),
            on_fetched=lambda n: describe("storing", n),
            on_stored=advance,
        )
    if plain:
        for r in reports:
            result = f"failed: {r.error}" if r.error else "; ".join(r.notes) or "ok"
            console.print(
                f"fetch {escape(r.name)}: {r.fetched} fetched, {r.new} new, {r.already_seen} already seen, "
                f"{len(r.skipped)} skipped ({r.seconds:.1f}s): {escape(result)}",
                highlight=False,
                soft_wrap=True,
            )
        return reports
    table = Table(title="Fetched", title_justify="left")
    for col in ("feed", "fetched", "new", "already seen", "skipped", "time", "result"):
        table.add_column(col, justify="left" if col in ("feed", "result") else "right")
    for r in reports:
        result = "[red]failed[/red]" if r.error else escape(r.notes[0]) if r.notes and not r.new else "ok"
        table.add_row(
            escape(r.name),
            str(r.fetched),
            str(r.new),
            str(r.already_seen),
            str(len(r.skipped)),
            f"{r.seconds:.1f}s",
            result,
        )
    console.print(table)
    for r in reports:
        if r.error:
            err_console.print(f"[red]error:[/red] {escape(r.name)}: {escape(r.error)}")
        for problem in r.skipped[:10]:
            err_console.print(f"[yellow]skipped:[/yellow] {escape(r.name)}: {escape(problem)}")
        for note in r.notes[1:] if not r.new else r.notes:
            err_console.print(f"[dim]{escape(r.name)}: {escape(note)}[/dim]")
    return reports


@app.command()
@user_errors
def fetch(
    names: Annotated[
        list[str] | None, typer.Argument(help="Feeds to fetch (default: every feed).", show_default=False)
    ] = None,
    with_enrich: Annotated[
        bool, typer.Option("--enrich", help="Then fill in abstracts and other fields the new papers lack.")
    ] = False,
) -> None:
    """Bring what is new from saved feeds; one failing feed does not stop the others (exit 1).

    Guide: docs/feeds.md"""
    reports = run_fetch(names or [])
    failed = any(not r.ok for r in reports)
    if with_enrich:
        made = [pid for r in reports for pid in r.created]
        failed = not run_enrich("abstract", made, titles=True, retry=False).ok or failed
    new = sum(r.new for r in reports)
    if new:
        state.rank_in_background()
        them = "it" if new == 1 else "them"
        err_console.print(
            f"[dim]{plural(new, 'new paper')}: 'triage tag' assesses {them} for the queue.[/dim]"
        )
    if failed:
        raise typer.Exit(1)


class Missing(StrEnum):
    ABSTRACT = "abstract"
    ALL = "all"


def run_enrich(missing: str, ids: list[str] | None, *, titles: bool, retry: bool) -> EnrichReport:
    from assistant.feeds.enrich import EnrichReport, enrich

    if ids is not None and not ids:
        return EnrichReport()
    with _bar("enriching") as (describe, advance):
        report = enrich(
            state.store,
            state.settings,
            missing=missing,
            ids=ids,
            titles=titles,
            retry=retry,
            on_total=lambda n: describe("enriching", n),
            on_progress=advance,
        )
    filled = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in sorted(report.filled.items()))
    console.print(
        f"Enriched {report.enriched} of {report.candidates} papers lacking "
        f"{'an abstract' if missing == 'abstract' else 'a field'}"
        + (f" ({filled})" if filled else "")
        + f"; {report.not_found} not found"
        + (
            f", {report.skipped_recent} looked up in the last week (--retry asks again)"
            if report.skipped_recent
            else ""
        )
        + f". {report.requests} requests, {report.seconds:.1f}s."
    )
    if report.filled.get("abstract"):
        err_console.print(
            "[dim]Papers with a new abstract were embedded again: 'triage tag' re-assesses them.[/dim]"
        )
    for error in report.errors:
        err_console.print(f"[red]error:[/red] {escape(error)} (what was found before it is stored)")
    return report


@app.command("enrich")
@user_errors
def enrich_cmd(
    missing: Annotated[
        Missing, typer.Option(help="abstract: papers without an abstract; all: papers lacking any field.")
    ] = Missing.ABSTRACT,
    titles: Annotated[
        bool,
        typer.Option(help="Look up papers with no arXiv id or DOI by title (one request each)."),
    ] = True,
    retry: Annotated[
        bool, typer.Option("--retry", help="Ask again about papers not found last week.")
    ] = False,
) -> None:
    """Fill in abstracts, authors, venue, year, DOI and arXiv id from Semantic Scholar and arXiv.

    Guide: docs/feeds.md"""
    if not run_enrich(missing.value, None, titles=titles, retry=retry).ok:
        raise typer.Exit(1)


def _stage(number: int, text: str) -> None:
    if err_console.is_terminal:
        err_console.print(f"[bold]{number}/4[/bold] {escape(text)}")


def _tag(budget: float | None, llm_top: int | None) -> bool:
    """The tag stage: the configured engine on every paper missing an up-to-date assessment;
    True when some paper failed (it is tried again next run)."""
    from assistant.cli import tag  # the 'triage tag' command's stage, as it runs there

    settings = state.settings
    if not settings.agenda_path.exists():
        err_console.print(f"note: no agenda at {settings.agenda_path}: nothing is tagged")
        return False
    if not settings.llm_configured:
        tag.run_offline_tag(force=False, limit=None)
        return False
    try:
        tag.run_llm_tag(
            model=settings.model or DEFAULT_MODEL,
            mode="tools",
            concurrency=8,
            per_call=1,
            llm_top=llm_top,
            dry_run=False,
            budget=budget,
            limit=None,
            force=False,
            retry_failed=False,
            examples=settings.examples,
        )
    except typer.Exit as exc:
        if exc.exit_code == 130:
            raise
        return True
    return False


@app.command()
@user_errors
def daily(
    names: Annotated[
        list[str] | None, typer.Argument(help="Feeds to fetch (default: every feed).", show_default=False)
    ] = None,
    with_enrich: Annotated[
        bool, typer.Option("--enrich/--no-enrich", help="Fill in missing abstracts.")
    ] = True,
    budget: Annotated[
        float | None, typer.Option(min=0, help="With an LLM: stop starting calls before this many USD.")
    ] = None,
    llm_top: Annotated[
        int | None, typer.Option(min=1, help="With an LLM: rank offline, send only the top N to it.")
    ] = None,
    top: Annotated[
        int, typer.Option("--top", "-n", min=1, help="At most N papers per topic in the digest.")
    ] = 5,
    min_score: Annotated[
        int, typer.Option("--min-score", min=0, max=10, help="A topic score (0-10) that counts as a match.")
    ] = MATCH,
    output: OutputOption = None,
    email: Annotated[
        bool, typer.Option("--email", help="E-mail the digest (smtp_host, digest_to in the config file).")
    ] = False,
) -> None:
    """The daily run: fetch, enrich, tag, digest. One at a time (a lock); a run killed half way
    is completed by the next. Progress on a terminal, a line per stage otherwise.

    Guide: docs/feeds.md"""
    from assistant.digest import build as build_digest
    from assistant.digest import render as render_digest
    from assistant.feeds.daily import CLOCK_MARGIN, RunRecord, check_email, daily_lock, send_email
    from assistant.feeds.model import Feeds
    from assistant.selection import Selection

    if email:
        check_email(state.settings)  # before the run, not after it
    store = state.store
    plain = not err_console.is_terminal
    with daily_lock(store):
        record = RunRecord.load(store)
        record.last_started = datetime.now(UTC)
        # Everything but the digest goes to stderr: the digest alone is on stdout (cron mails it).
        with contextlib.redirect_stdout(sys.stderr):
            _stage(1, "fetching")
            reports = run_fetch(names or [], plain) if names or Feeds(store).all() else []
            if not reports:
                err_console.print("No saved feeds ('triage feed add' makes one): going on with the store.")
            failed = any(not r.ok for r in reports)
            if with_enrich:
                _stage(2, "enriching")
                # Papers written since the last digest: what a killed run fetched is enriched too.
                fresh = [pid for pid, _ in store.changed_since(record.touched_after())]
                failed = not run_enrich("abstract", fresh, titles=True, retry=False).ok or failed
            _stage(3, "tagging")
            failed = _tag(budget, llm_top) or failed
        _stage(4, "digest")
        now = datetime.now(UTC)
        after = record.digest_after(now)
        agenda = optional_agenda()
        # A paper new since the last digest was written since then: only those are read, not
        # the whole store (with a margin for the clocks of a lab's other machines).
        written = {"touched": {"$gt": (after - CLOCK_MARGIN).timestamp()}}
        where = {"$and": [Selection(statuses=(Status.NEW,)).where(), written]}
        result = build_digest(
            store.iter_all(where), agenda, after.date(), top, queue_shift(), min_score, after=after
        )
        notes = [f"{r.name}: {n}" for r in reports if not r.new for n in r.notes[:1]]
        notes += [f"{r.name} failed: {r.error}" for r in reports if r.error]
        text = render_digest(result, agenda, notes)
        count = len({i.paper.id for entries in result.topics.values() for i, _ in entries})
        if email:
            subject = f"Paper digest: {len(result.new)} new since {after.astimezone():%Y-%m-%d %H:%M}"
            sent = send_email(state.settings, subject, text)
            err_console.print(f"Sent the digest of {len(result.new)} new papers to {', '.join(sent)}.")
            if output is not None:
                emit(text, output, count, f"digest of {len(result.new)} new")
        else:
            emit(
                text,
                output,
                count,
                f"digest of {len(result.new)} new since {after.astimezone():%Y-%m-%d %H:%M}",
            )
        record.last_digest = now
        record.save(store)
    if failed:
        raise typer.Exit(1)
