"""The `triage` app, its global options, and what every command shares: the per-run state
(settings, the store opened on first use, the personal ranking), the error wrapper, progress
bars. Command modules import this module; it imports none of them.

Only light modules are imported here: a command imports the store, the engines or the
personal model when it runs, so `triage --help` does not wait for them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from assistant import __version__
from assistant.defaults import default_config_path
from assistant.errors import (
    DiskFullError,
    StoreError,
    TriageError,
    disk_full,
    is_disk_full,
    is_read_only,
    read_only,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from assistant.agenda import Agenda
    from assistant.config import Settings
    from assistant.models import StoredPaper
    from assistant.personal import StoreRanking
    from assistant.store import Store

app = typer.Typer(
    name="triage",
    help="Paper Triage Assistant: rank papers against your research agenda, review them, export lists."
    "\n\nEvery command: docs/commands.md; the settings: docs/settings.md.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
console = Console()
# Off a terminal (a log, a pipe) a message is one line however long: no wrapping at 80 columns.
err_console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())

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
            from assistant.config import load_settings

            self._settings = load_settings(self.config_file, **self.flags)
        return self._settings

    @property
    def store(self) -> Store:
        if self._store is None:
            from assistant.store import Store

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
        from assistant.agenda import load_agenda

        return load_agenda(self.settings.agenda_path)

    def personal(self, quiet: bool = False, with_estimate: bool = False) -> StoreRanking | None:
        """The store ranked with the personal model (once per command); None, with a one-line
        note, when it cannot be had: the engine's order is used then. `with_estimate` also
        estimates the relevant papers left."""
        if self._ranking is not None and with_estimate and self._ranking.ranking.estimate is None:
            self._ranking = None  # ranked again, with the estimate
        if self._ranking is None:
            from assistant.personal import store_ranking

            try:
                agenda = self.agenda() if self.settings.agenda_path.exists() else None
            except TriageError:
                agenda = None
            topics = [t.name for t in agenda.topics] if agenda else []
            try:
                self._ranking = store_ranking(self.store, topics, with_estimate=with_estimate)
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

    def rank_in_background(self) -> None:
        """After a write that changes what the queue is ranked from (decisions, papers,
        assessments): start the background ranking (`assistant.estimate_refresh`), which trains
        the personal model for the store as it now is and keeps the queue `ranked` shows, so
        that the next reading command finds them kept (one started meanwhile waits for the
        training rather than doing it twice). Only for an embedded store: a server's keeps
        nothing between commands."""
        if self._store is None or not self.settings.local_store:
            return
        from assistant.cache import training_folder
        from assistant.estimate_refresh import start

        with contextlib.suppress(OSError):  # not started: the next command trains itself
            start(training_folder(self._store.cache_key), self.flags, self.config_file)

    def stale(self, items: Sequence[StoredPaper]) -> set[str]:
        """Ids of the papers whose assessment predates the agenda, prompts or paper text
        (none when there is no readable agenda)."""
        from assistant.triage.keys import is_stale
        from assistant.triage.prompts import Prompts, load_prompts

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


def _is_timeout(exc: BaseException) -> bool:
    """An HTTP timeout (from a Chroma server): httpx is loaded if anything could have raised one."""
    httpx = sys.modules.get("httpx")
    return httpx is not None and isinstance(exc, httpx.TimeoutException)


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
            elif _is_timeout(exc):
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
    """The ids given, with '-' replaced by the ids on standard input (plain, or JSON lines),
    each as the store has it: `2401.01234v2` -> `arxiv:2401.01234`, a DOI -> the id of the
    paper carrying it (`arxiv:...` when it has an arXiv id too)."""
    from assistant.models import canonical_id

    ids: list[str] = []
    for arg in args:
        if arg != "-":
            ids.append(canonical_id(arg))
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
            ids.append(canonical_id(line))
    if not ids:
        raise TriageError("no paper ids given")
    return state.store.resolve_ids(ids)


def _disk_full() -> DiskFullError:
    """The disk-full error for the store the command uses."""
    try:
        settings = state.settings
    except TriageError:
        return disk_full("?")
    return disk_full(settings.store_location, settings.local_store)


def plural(n: int, word: str) -> str:
    """'1 paper', '2 papers'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def sentence(text: str) -> str:
    """A note printed after a full stop, with its first letter capitalised."""
    return text[:1].upper() + text[1:]


def progress(*fields: str) -> Progress:
    """A transient progress bar on stderr; `fields` names extra task fields shown as text."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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
            help="Use a Chroma server, e.g. http://127.0.0.1:8000 (docs/server.md).",
            show_default=False,
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            envvar="TRIAGE_USER",
            help="Act as this person in a shared store: decisions, stars, notes, lists and the "
            "learned model are each person's own (default: your login name).",
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
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """Paper Triage Assistant."""
    state.flags = {"store": store, "chroma_url": chroma_url, "agenda": agenda, "user": user}
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
