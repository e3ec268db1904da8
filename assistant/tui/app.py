"""`triage review`: the keyboard-first review UI over the ranked queue."""

from __future__ import annotations

import functools
import gc
import threading
import time
import webbrowser
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, WorkerState, get_current_worker
from threadpoolctl import threadpool_limits

from assistant.agenda import Agenda, load_agenda
from assistant.config import Settings
from assistant.errors import (
    DiskFullError,
    ReadOnlyError,
    StoreError,
    StoreGoneError,
    TriageError,
    is_read_only,
)
from assistant.index import PERSONAL_SORTS, QueueIndex, Row, Sort, sort_key
from assistant.lists import ReadingLists, check_name
from assistant.models import Decision, Status, StoredPaper, now_utc
from assistant.personal import (
    FeatureCache,
    Ranking,
    TextFeatures,
    load_features,
    rank,
)
from assistant.render import LEAN_LEGEND, lean
from assistant.selection import Selection
from assistant.store import PaperRecord, Store
from assistant.triage.assess import Prepared, assess_papers, prepare_llm
from assistant.triage.keys import is_stale
from assistant.triage.prompts import Prompts, load_prompts
from assistant.tui.dialogs import delete_question, guarded, help_rows
from assistant.tui.screens import (
    ConfirmDeleteScreen,
    ConfirmScreen,
    ErrorScreen,
    FilterChoices,
    FilterScreen,
    HelpScreen,
    ListsScreen,
    ListToggle,
    NoteScreen,
    SearchRequest,
    SearchScreen,
    TagsScreen,
)
from assistant.tui.widgets import Detail, QueueTable, Summary, column_widths

PREFETCH = 20  # load the next page when the cursor is this close to the end
NARROW = 150  # below this many columns the detail pane is shown on demand (enter)
KEEP_DEPTH = 500  # how far down a reloaded view is read to keep the highlighted paper
NEXT_DEPTH = 600  # how far below the cursor the next undecided paper is looked for
UNDECIDED = (Status.NEW, Status.MAYBE)
RETRAIN_AFTER = 0.4  # seconds after the last decision before the personal model retrains
VIEWS: list[tuple[str, tuple[Status, ...], bool]] = [
    ("undecided", UNDECIDED, False),
    ("new", (Status.NEW,), False),
    ("accepted", (Status.ACCEPTED,), False),
    ("maybe", (Status.MAYBE,), False),
    ("rejected", (Status.REJECTED,), False),
    ("starred", (), True),
    ("all", (), False),
]


def settle_heap() -> None:
    """Leave what start-up built (libraries, the index) out of Python's full collections.

    A full collection walks every object and took ~200 ms here; it fell on one keypress in
    ten. Objects made later are still collected as usual.
    """
    gc.collect()
    gc.freeze()


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + "…"


def _teaches(old: Row | None, new: Row) -> bool:
    """Whether a changed row changes what the personal model learns or ranks."""
    return old is None or (old.status, old.starred, old.relevance) != (new.status, new.starred, new.relevance)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


NARROW_HINT = "A narrow terminal: enter shows the highlighted paper, enter again the queue."


@dataclass
class DecisionChange:
    """What `u` undoes after a decision: the fields it changed and their old values."""

    pid: str
    decision: Decision
    fields: tuple[str, ...]


@dataclass
class Unsaved:
    """A change the store refused (removed, read-only, full): kept in the session, tried again
    on the next change, and written to the recovery file meanwhile."""

    item: StoredPaper  # the paper with the session's decision
    fields: set[str]  # the decision's fields changed
    lists: dict[str, bool]  # reading lists joined (True) or left (False)


@dataclass
class Deletion:
    """What `u` undoes after a delete: the papers as they were stored, vectors included."""

    records: list[PaperRecord]


class ReviewApp(App[None]):
    """Review the ranked queue: read, decide, tag, note, file into lists, search."""

    CSS_PATH = "app.tcss"
    TITLE = "triage review"
    BINDINGS = [
        Binding(
            "a", "decide('accepted')", "Accept", id="accept", tooltip="Accept and go to the next undecided"
        ),
        Binding(
            "x", "decide('rejected')", "Reject", id="reject", tooltip="Reject and go to the next undecided"
        ),
        Binding("m", "decide('maybe')", "Maybe", id="maybe", tooltip="Maybe, and go to the next undecided"),
        Binding("s", "star", "Star", id="star", tooltip="Star (or unstar) and go to the next undecided"),
        Binding("u", "undo", "Undo", id="undo", tooltip="Undo the last decision or delete"),
        Binding(
            "D",
            "delete",
            "Delete",
            id="delete",
            tooltip="Delete the paper from the store (asks first; u undoes)",
        ),
        Binding("t", "tags", "Tags", id="tags"),
        Binding("n", "note", "Note", id="note"),
        Binding("l", "lists", "Lists", id="lists"),
        Binding("o", "open_link", "Open", id="open"),
        Binding("slash", "search", "Search", id="search"),
        Binding("f", "filter", "Filter", id="filter"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
        Binding(
            "enter", "toggle_detail", "Detail", id="detail", tooltip="The detail pane full width, or back"
        ),
        Binding("j", "cursor(1)", "Next paper", show=False),
        Binding("k", "cursor(-1)", "Previous paper", show=False),
        Binding("M", "more_like_this", "More like this", show=False),
        Binding("v", "cycle_view", "View: undecided, new, accepted, ... all", show=False),
        Binding(
            "S",
            "cycle_sort",
            "Sort: relevance, newest, added, title, uncertain (teaches the model most), disagreement",
            show=False,
        ),
        Binding("e", "assess", "Assess this paper", show=False),
        Binding("E", "assess_visible", "Assess every paper in the view", show=False),
        Binding("r", "refresh", "Refresh from the store", show=False),
        Binding("escape", "clear", "Back to the queue (clear search)", show=False),
    ]

    def __init__(
        self,
        store: Store,
        settings: Settings,
        agenda: Agenda | None,
        *,
        cache_dir: Path | None = None,
        refresh_every: float = 3.0,
    ) -> None:
        super().__init__()
        self.store = store
        self.settings = settings
        self.agenda = agenda
        self._agenda_mtime = _mtime(settings.agenda_path) if agenda is not None else None
        self.cache_dir = cache_dir
        self.refresh_every = refresh_every
        self.index = QueueIndex.open(store, cache_dir)
        self.lists = ReadingLists(store)
        self.prompts: Prompts | None = None
        try:
            self.prompts = load_prompts(settings.prompts)
        except Exception:  # stale marks for LLM assessments need them; the rest works without
            self.prompts = None
        self.selection = Selection(statuses=UNDECIDED)
        self.view_name = "undecided"
        self.sort = Sort.RELEVANCE
        self.text = ""
        self.pinned: list[str] | None = None
        self.pinned_label = ""
        self.sticky: set[str] = set()
        self.undo_stack: list[DecisionChange | Deletion] = []
        self.unsaved: dict[str, Unsaved] = {}  # changes the store refused, by paper
        self.recovery_file: Path | None = None  # where they are written, once there are any
        self._written: dict[str, float] = {}  # when this UI last wrote each paper
        self._generation = 0  # bumped whenever the view is rebuilt
        self.matching: int | None = None
        self._refresh_failed = False
        self._detail_shown_at = 0.0
        self._detail_item: StoredPaper | None = None
        self.ranking: Ranking | None = None
        self.texts: TextFeatures | None = None
        self._retrain_timer: Any = None
        self._retrain_pending = False
        self._texts_lock = threading.Lock()
        self._features = FeatureCache()
        # The paper a decision moved the cursor to, while the cursor stays there: when the
        # queue is re-ranked the cursor goes to the best undecided paper of the new order.
        self._advanced_to: str | None = None

    # -- layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Summary(id="summary")
        with Horizontal(id="main"):
            yield QueueTable(id="queue")
            with VerticalScroll(id="detail-pane"):
                yield Detail(id="detail")
        yield Static("", id="status-line")
        yield Footer(compact=True)  # every key of the triage flow fits in 100 columns

    @property
    def table(self) -> QueueTable:
        return self.query_one("#queue", QueueTable)

    def on_mount(self) -> None:
        # The UI's matrix work is small (a paper's nearest decisions): one BLAS thread, so no
        # pool of threads spins beside the keypresses.
        self._blas_limit = threadpool_limits(limits=1, user_api="blas")
        self.fit(self.size.width)  # the columns, and the queue if the index is cached
        if self.index.built:
            settle_heap()
            self.refresh_store()
            self.retrain()
        else:
            self.say("Indexing the store for the queue (once; later openings read the cache)…")
            self.build_index()
        self.set_interval(self.refresh_every, self.tick)

    def tick(self) -> None:
        self.check_agenda()
        self.refresh_store()

    def check_agenda(self) -> None:
        """Take in an edited agenda: new assessments use it, older ones show as stale."""
        path = self.settings.agenda_path
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return
        if mtime == self._agenda_mtime:
            return
        self._agenda_mtime = mtime
        try:
            agenda = load_agenda(path)
        except TriageError as exc:
            self.notify(f"The agenda cannot be read, the previous one stays in use: {exc}", severity="error")
            return
        if self.agenda is not None and agenda.hash == self.agenda.hash:
            return
        self.agenda = agenda
        self.notify("The agenda changed: older assessments show as stale; E re-assesses the view.", timeout=6)
        self.show_detail()

    def on_unmount(self) -> None:
        if self.index.built:
            try:
                self.index.save(self.cache_dir)
            except OSError:
                pass  # only a cache: the next opening rebuilds it

    def get_system_commands(self, screen: Screen[Any]) -> Iterator[SystemCommand]:
        yield from super().get_system_commands(screen)
        for sort in Sort:
            yield SystemCommand(
                f"Sort by {sort.value}",
                f"Order the queue by {sort.value}",
                functools.partial(self.set_sort, sort),
            )
        for name, _, _ in VIEWS:
            yield SystemCommand(f"Show {name}", f"Show {name} papers", functools.partial(self.set_view, name))
        yield SystemCommand(
            "Assess all visible", "Assess the papers in this view", self.action_assess_visible
        )
        yield SystemCommand(
            "Refresh", "Read new assessments and decisions from the store", self.action_refresh
        )
        yield SystemCommand("Clear filters", "Show every undecided paper", self.clear_filters)

    # -- messages to the user ---------------------------------------------------------

    def idle_text(self) -> str:
        """The status line when nothing is under way: a hint for an empty store, else nothing."""
        if self.index.built and not self.index.rows:
            return (
                "The store is empty: quit (q) and import papers with 'triage ingest FILE' "
                "('triage demo' imports a sample)."
            )
        return ""

    def say(self, text: str) -> None:
        self.query_one("#status-line", Static).update(text)

    def show_error(self, exc: BaseException) -> None:
        title = "Error" if isinstance(exc, TriageError) else type(exc).__name__
        self.push_screen(ErrorScreen(title, str(exc) or repr(exc)))

    def view_label(self) -> str:
        if self.pinned is not None:
            return self.pinned_label
        label = (
            self.view_name
            if self.selection.describe() == "/".join(s.value for s in self.selection.statuses)
            else self.selection.describe()
        )
        if self.text:
            label += f', words "{self.text}"'
        return f"{label} by {self.sort.value}"

    def update_summary(self) -> None:
        personal = ""
        if self.ranking is not None:
            personal = self.ranking.fit.short()
            if self.ranking.estimate is not None:
                personal += f" · {self.ranking.estimate.short()}"
        self.query_one(Summary).show(
            dict(self.index.counts()),
            self.index.histogram(),
            self.view_label(),
            self.matching,
            personal,
        )

    # -- the queue ---------------------------------------------------------------------

    def in_view(self, row: Row) -> bool:
        return row.id in self.sticky or self.selection.matches_fields(row)

    def _iter_rows(self) -> Iterator[Row]:
        if self.pinned is not None:
            rows = self.index.rows
            return (rows[i] for i in self.pinned if i in rows and self.in_view(rows[i]))
        return self.index.view(self.selection, self.sort, self.text, always=self.sticky)

    def reload(self, keep_current: bool = True) -> None:
        """Show the current view, with the highlighted paper still highlighted if it is in the
        view's first pages (else from the top)."""
        self._generation += 1
        keep = self.current_id() if keep_current else None
        if keep and not (keep in self.index.rows and self.in_view(self.index.rows[keep])):
            keep = None
        self.table.fill(self._iter_rows(), keep, KEEP_DEPTH)
        self.matching = None
        if self.index.built and not self.index.rows:
            self.say(self.idle_text())
        self.update_summary()
        self.show_detail()
        # Counting a large view takes a while: start it once this keypress has been drawn.
        self.set_timer(0.3, self.count_view)

    @property
    def shown(self) -> list[str]:
        return self.table.shown

    def current_id(self) -> str | None:
        return self.table.current_id()

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if not self.table.exhausted and event.cursor_row >= len(self.shown) - PREFETCH:
            self.table.load_more()
        self.show_detail()

    @guarded
    def show_detail(self) -> None:
        self._detail_shown_at = time.time()
        pid = self.current_id()
        if pid in self.unsaved:  # the session's change, not what the store still holds
            item: StoredPaper | None = self.unsaved[pid].item
        else:
            item = self.store.get(pid) if pid else None
        self._detail_item = item
        stale = bool(item and self.agenda and is_stale(item, self.agenda, self.prompts))
        explanation = self.ranking.explain(pid) if self.ranking and pid and self.ranking.personal else None
        note = self.ranking.fit.note if self.ranking and not self.ranking.personal else ""
        self.query_one(Detail).show(item, self.agenda, stale, explanation, note)

    def update_rows(self, ids: list[str]) -> None:
        """Re-read these papers' rows from the store and redraw them where they are shown."""
        rows = [Row.from_metadata(pid, meta) for pid, meta in self.store.metadata(ids)]
        for row in rows:
            if row.id in self.index.rows:
                self.recount(self.index.rows[row.id], row)
        self.index.apply(rows)
        self.update_summary()
        self.redraw(rows)

    def recount(self, old: Row, new: Row) -> None:
        """Keep the view's count in step with a paper that changed (a decided paper stays on
        screen, uncounted)."""
        if self.matching is not None and self.pinned is None and not self.text:
            self.matching += self.selection.matches_fields(new) - self.selection.matches_fields(old)
        else:
            self.set_timer(0.3, self.count_view)

    def redraw(self, rows: list[Row], detail: bool = True) -> None:
        self.table.redraw(rows)
        if detail and self.current_id() in {r.id for r in rows}:
            self.show_detail()

    # -- workers ------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="index")
    def build_index(self) -> None:
        def progress(done: int, total: int) -> None:
            self.call_from_thread(self.say, f"Indexing the store for the queue: {done:,} / {total:,} papers…")

        fresh = QueueIndex(location=self.index.location)
        fresh.build(self.store, on_progress=progress)
        self.call_from_thread(self._index_built, fresh)

    def _index_built(self, fresh: QueueIndex) -> None:
        self.index = fresh  # swapped in on the UI thread: the worker never touched the live index
        self.index.set_ranking(self.ranking)
        self.say("")
        self.reload()
        settle_heap()
        self.retrain()
        try:
            self.index.save(self.cache_dir)
        except OSError as exc:
            self.say(f"could not write the queue cache: {exc}")

    @work(thread=True, exclusive=True, group="refresh")
    def refresh_store(self) -> None:
        """Read what other processes (or this one) wrote since the last refresh."""
        if not self.index.built:
            return
        try:
            rows, started, gone = self.index.changes(self.store)
        except Exception as exc:
            if not self._refresh_failed:
                self._refresh_failed = True
                self.call_from_thread(self.show_error, exc)
            return
        self._refresh_failed = False
        self.call_from_thread(self._take_changes, rows, started, gone)

    def _take_changes(self, rows: list[Row], started: float, gone: Sequence[str] = ()) -> None:
        self.index.stamp = started
        if gone:
            self.index.remove(gone)
            # A ranking trained meanwhile still orders them: it is dropped, and a new one trained.
            self.schedule_retrain()
            self.reload()
        # A read that began before this UI wrote a paper carries the paper as it was.
        rows = [r for r in rows if self._written.get(r.id, 0.0) < started]
        current = self.current_id()
        rewritten = any(r.id == current and r.touched > self._detail_shown_at for r in rows)
        fresh = [r for r in rows if self.index.rows.get(r.id) != r]
        if any(_teaches(self.index.rows.get(r.id), r) for r in fresh):
            self.schedule_retrain()
        if fresh:
            shown = set(self.shown)
            moved = self.pinned is None and any(r.id in shown or self.in_view(r) for r in fresh)
            self.index.apply(fresh)
            if moved:
                # Papers take their new places, the highlighted one stays highlighted, and the
                # summary and detail pane are redrawn.
                self.reload()
                return
            self.redraw(fresh, detail=False)
            self.update_summary()
        if rewritten or (fresh and current in {r.id for r in fresh}):
            self.show_detail()

    def schedule_retrain(self) -> None:
        """Retrain the personal model shortly after the last decision (off the UI thread)."""
        self._retrain_pending = True
        if self._retrain_timer is not None:
            self._retrain_timer.stop()
        self._retrain_timer = self.set_timer(RETRAIN_AFTER, self.retrain)

    @work(thread=True, exclusive=True, group="personal")
    def retrain(self) -> None:
        """Train the personal model on the decisions in the index and rank the queue with it;
        the sort orders are computed here too, so the UI thread only swaps them in."""
        if not self.index.built:
            return
        self._retrain_pending = False
        worker = get_current_worker()
        with self._texts_lock:  # a cancelled retrain may still be running: one at a time
            self._retrain(worker)

    def _retrain(self, worker: Worker[None]) -> None:
        notes: list[str] = []
        if self.texts is None:
            self.call_from_thread(self.say, "Reading the store for the personal model (once; then cached)…")
            self.texts, notes = load_features(self.store, self.cache_dir)
            self.call_from_thread(self.say, self.idle_text())
        elif self.texts.refresh(self.store):
            try:
                self.texts.save(self.cache_dir)
            except OSError:
                pass  # only a cache: the next opening rebuilds it
        version = self.index.version
        rows = list(self.index.rows.values())
        topics = [t.name for t in self.agenda.topics] if self.agenda else []
        previous = self.ranking.fit if self.ranking else None
        ranking = rank(self.texts, rows, topics, previous, self._features, with_estimate=True)
        # Only the order on screen is sorted here; the others when they are asked for.
        orders: dict[Sort, list[str]] = {}
        if self.sort is Sort.RELEVANCE:
            orders[Sort.RELEVANCE] = ranking.relevance_order()
        elif self.sort in PERSONAL_SORTS:
            orders[self.sort] = [r.id for r in sorted(rows, key=sort_key(self.sort, ranking))]
        if not worker.is_cancelled:
            self.call_from_thread(self._ranked, ranking, orders, version, notes)

    def _ranked(
        self, ranking: Ranking, orders: dict[Sort, list[str]], version: int, notes: list[str]
    ) -> None:
        if version != self.index.version and self._retrain_pending:
            return  # the rows changed while it trained and another retrain is on its way
        before = self.ranking
        self.ranking = ranking
        self.table.score_of = ranking.score if ranking.personal else None
        label = "blend" if ranking.personal else "relevance"
        if label != self.table.score_label and self.table.widths:
            self.table.score_label = label
            self.table.set_columns(self.table.widths)  # the rows are filled again below
        self.set_marks()
        # Rows that changed while it trained (a refresh, a decision) move to their places.
        self.index.set_ranking(ranking, orders, version)
        for note in notes:
            self.notify(note, timeout=6)
        # The uncertain and disagreement sorts follow the model even when it does not blend.
        model_sort = self.sort in (Sort.UNCERTAIN, Sort.DISAGREEMENT)
        if ranking.personal or (before is not None and before.personal) or model_sort:
            # The first blended order replaces the engine's: if the researcher has not moved
            # off the first row, the top of the blended queue is where the cursor belongs.
            first = before is None or not before.personal
            advanced = self._advanced_to is not None and self.current_id() == self._advanced_to
            self.reload(keep_current=not (first and self.table.cursor_row == 0))
            self.follow_new_order(advanced)
        else:
            self.update_summary()

    def follow_new_order(self, advanced: bool) -> None:
        """After a re-ranking, undecided papers may now stand above the highlighted one. If a
        decision put the cursor there, it moves to the best undecided paper of the new order;
        if the researcher moved it, it stays, and the status line says how many are above."""
        if self.sort is not Sort.RELEVANCE or self.pinned is not None:
            return
        current = self.current_id()
        rows = self.index.rows
        above = [
            i for i, pid in enumerate(self.shown[: self.table.cursor_row]) if rows[pid].status is Status.NEW
        ]
        if not above or current is None:
            return
        papers = f"{len(above)} undecided paper{'' if len(above) == 1 else 's'}"
        if advanced:
            self.table.move_cursor(row=above[0], animate=False)
            self._advanced_to = self.current_id()
            self.say(
                f"Re-ranked after your decision: {papers} moved above the next one; the cursor is "
                "on the best of them."
            )
        else:
            self.say(f"Re-ranked: {papers} now above the cursor (g: to the top).")

    @work(thread=True, exclusive=True, group="count")
    def count_view(self) -> None:
        """How many papers the view matches (decided papers kept on screen are not counted)."""
        generation = self._generation
        rows = self.index.rows
        if self.pinned is not None:
            total = sum(1 for i in self.pinned if i in rows and self.selection.matches_fields(rows[i]))
        else:
            total = sum(1 for _ in self.index.view(self.selection, self.sort, self.text))
        self.call_from_thread(self._counted, total, generation)

    def _counted(self, total: int, generation: int) -> None:
        if generation == self._generation:  # else the view changed while it was counted
            self.matching = total
            self.update_summary()

    @work(thread=True, exclusive=True, group="assess")
    def assess(self, ids: list[str], force: bool) -> None:
        if self.agenda is None:
            raise RuntimeError("there is no agenda to assess against: write agenda.md ('triage init')")
        engine = "LLM" if self.settings.llm_configured else "offline engine"

        def progress(done: int, total: int) -> None:
            self.call_from_thread(self.say, f"Assessing with the {engine}: {done} / {total}…")

        self.call_from_thread(self.say, f"Assessing {len(ids)} paper(s) with the {engine}…")
        outcome = assess_papers(
            self.store, self.settings, self.agenda, ids, force=force, on_progress=progress
        )
        failed = f", {outcome.failed} failed" if outcome.failed else ""
        self.call_from_thread(
            self.say,
            f"Assessed {outcome.assessed} paper(s) with {outcome.engine}{failed}; "
            f"{outcome.up_to_date} already up to date.",
        )
        self.call_from_thread(self.update_rows, ids)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self.say("")
            self.show_error(event.worker.error)

    # -- actions: decisions ---------------------------------------------------------------

    def decide(self, pid: str, **changes: Any) -> None:
        """Write a decision change at once (only the fields changed), remember the old values
        for undo, redraw the row."""
        # The detail pane read this paper when it was highlighted, and re-reads it when the
        # refresh sees it written: that copy is current enough to rebuild the row from.
        shown = self.unsaved[pid].item if pid in self.unsaved else self._detail_item
        before = shown if shown is not None and shown.paper.id == pid else self.store.get(pid)
        if before is None:
            raise RuntimeError(f"paper {pid} is no longer in the store")
        decision = before.decision.model_copy(update={**changes, "decided_at": now_utc()})
        self.save(before.model_copy(update={"decision": decision}), set(changes))
        self._written[pid] = time.time()
        self.undo_stack.append(DecisionChange(pid, before.decision, tuple(changes)))
        self.sticky.add(pid)
        engine_tags = before.assessment.tags if before.assessment else []
        old = self.index.rows[pid]
        row = replace(
            old,
            status=decision.status,
            starred=decision.starred,
            lists=tuple(decision.lists),
            tags=tuple(dict.fromkeys([*decision.tags, *engine_tags])),
        )
        self.recount(old, row)
        self.index.apply([row])
        self.redraw([row], detail=False)
        self.update_summary()
        self.schedule_retrain()

    # -- writing, and keeping what the store refuses ------------------------------------------

    def save(
        self,
        item: StoredPaper,
        fields: set[str],
        lists: dict[str, bool] | None = None,
        create: bool = False,
    ) -> bool:
        """Write a change to a paper's decision (`fields`) or lists. If the store refuses it
        (removed, read-only, a full disk) the change is kept in this session (the row says
        "not saved"), written to the recovery file, and tried again with the next change.
        Returns whether it was saved; errors of other kinds are raised."""
        pid = item.paper.id
        try:
            self._retry_unsaved()
            self._write_change(item, fields, lists or {}, create)
        except Exception as exc:
            reason = self._refused(exc)
            if reason is None:
                raise
            old = self.unsaved.get(pid)
            self.unsaved[pid] = Unsaved(
                item,
                (old.fields if old else set()) | fields,
                {**(old.lists if old else {}), **(lists or {})},
            )
            self._keep(reason)
            return False
        return True

    def _write_change(
        self, item: StoredPaper, fields: set[str], lists: dict[str, bool], create: bool
    ) -> None:
        pid = item.paper.id
        if fields:
            self.store.set_decision_fields(pid, item.decision, fields)
        for name, member in lists.items():
            if member and (create or not self.lists.exists(name)):
                self.lists.create(name, exist_ok=True)
            (self.lists.add if member else self.lists.remove)(name, [pid])

    def _retry_unsaved(self) -> None:
        """Write the changes the store refused before; raises if it still refuses them."""
        if not self.unsaved:
            return
        for pid, kept in list(self.unsaved.items()):
            self._write_change(kept.item, kept.fields, kept.lists, False)
            del self.unsaved[pid]
            self.table.unsaved.discard(pid)
            self.update_rows([pid])
        where = f" (the recovery file {self.recovery_file} is no longer needed)" if self.recovery_file else ""
        self.recovery_file = None
        self.say(f"Saved the changes the store had refused before{where}.")

    def _refused(self, exc: BaseException) -> str | None:
        """Why the store refused a write, in words; None if the error is not a refusal."""
        refusal = exc if isinstance(exc, StoreError) else self.store.refusal(exc)
        if isinstance(refusal, DiskFullError):
            return f"the disk holding the store at {self.store.location} is full"
        if isinstance(refusal, StoreGoneError | ReadOnlyError) or is_read_only(exc):
            return f"the store at {self.store.location} was removed or is read-only"
        return None

    def _keep(self, reason: str) -> None:
        """Write what the store refused to the recovery file and say so on the status line."""
        from assistant.ingest import RECOVERY_DIR, undo_file, write_full_records

        if self.recovery_file is None:
            self.recovery_file = undo_file(RECOVERY_DIR)
        lists = {name: "" for kept in self.unsaved.values() for name in kept.item.decision.lists}
        try:
            write_full_records(self.recovery_file, [k.item for k in self.unsaved.values()], lists)
            written = f"written to {self.recovery_file} ('triage ingest' of it replays them)"
        except OSError as exc:
            written = f"and could not be written to {self.recovery_file} ({exc.strerror or exc}): do not quit"
        count = len(self.unsaved)
        what = "1 change" if count == 1 else f"{count} papers' changes"
        self.say(
            f"not saved: {reason}; kept in this session ({what}), retried on the next change, and {written}"
        )
        self.table.unsaved = set(self.unsaved)

    def _show_kept(self, item: StoredPaper) -> None:
        """Redraw a paper's row from a change kept in the session."""
        pid = item.paper.id
        old = self.index.rows.get(pid)
        if old is None:
            return
        d = item.decision
        engine_tags = item.assessment.tags if item.assessment else []
        row = replace(
            old,
            status=d.status,
            starred=d.starred,
            lists=tuple(d.lists),
            tags=tuple(dict.fromkeys([*d.tags, *engine_tags])),
        )
        self.recount(old, row)
        self.index.apply([row])
        self.redraw([row], detail=False)
        self.update_summary()
        if self._detail_item is not None and self._detail_item.paper.id == pid:
            self._detail_item = item

    @guarded
    def action_decide(self, status: str) -> None:
        self.decide_and_advance(status=Status(status))

    @guarded
    def action_star(self) -> None:
        pid = self.current_id()
        if pid:
            self.decide_and_advance(starred=not self.index.rows[pid].starred)

    def decide_and_advance(self, **changes: Any) -> None:
        """The triage flow: decide on the highlighted paper, then go to the next undecided one
        (the best undecided one once the queue is re-ranked, see `follow_new_order`)."""
        pid = self.current_id()
        if pid:
            self.decide(pid, **changes)
            self.next_undecided()
            self._advanced_to = self.current_id()
            if self.current_id() == pid:
                self.show_detail()

    def next_undecided(self) -> None:
        """Move to the next paper below that has no decision yet (loading pages as needed)."""
        start = self.table.cursor_row + 1
        i = start
        while True:
            while i < len(self.shown):
                if self.index.rows[self.shown[i]].status is Status.NEW:
                    self.table.move_cursor(row=i, animate=False)
                    return
                i += 1
            if self.table.exhausted or len(self.shown) - start > NEXT_DEPTH:
                self.notify("No undecided paper below this one.", timeout=3)
                if start < len(self.shown):
                    self.table.move_cursor(row=start, animate=False)
                return
            self.table.load_more()

    @guarded
    def action_undo(self) -> None:
        if not self.undo_stack:
            self.notify("Nothing to undo.", timeout=2)
            return
        entry = self.undo_stack[-1]
        if isinstance(entry, Deletion):
            self.restore(entry)
            self.undo_stack.pop()
            return
        self.undo_stack.pop()
        pid, decision = entry.pid, entry.decision
        kept = self.unsaved[pid].item if pid in self.unsaved else self._detail_item
        item = kept if kept is not None and kept.paper.id == pid else self.store.get(pid)
        if item is None:
            raise RuntimeError(f"paper {pid} is no longer in the store")
        undone = item.decision.model_copy(update={f: getattr(decision, f) for f in entry.fields})
        if self.save(item.model_copy(update={"decision": undone}), set(entry.fields)):
            self.update_rows([pid])
        else:
            self._show_kept(item.model_copy(update={"decision": undone}))
        self._written[pid] = time.time()
        self.schedule_retrain()
        self.update_summary()
        self.show_again(pid)
        self.notify(f"Undone: back to {decision.status.value}.", timeout=2)

    def show_again(self, pid: str) -> None:
        """Highlight a paper an undo brought back, in the view even if it left it (refreshed
        since, or deleted)."""
        if pid not in self.shown:
            self.sticky.add(pid)
            self.reload(keep_current=False)
            while pid not in self.shown and not self.table.exhausted:
                self.table.load_more()
        if pid in self.shown:
            self.table.move_cursor(row=self.shown.index(pid), animate=False)

    # -- actions: deleting ------------------------------------------------------------------

    @guarded
    def action_delete(self) -> None:
        """D: delete the highlighted paper from the store, once the researcher said yes."""
        pid = self.current_id()
        items = self.store.get_many([pid]) if pid else []
        if not items:
            return
        ids = [i.paper.id for i in items]
        self.push_screen(ConfirmDeleteScreen(delete_question(items)), functools.partial(self._delete, ids))

    @guarded
    def _delete(self, ids: list[str], yes: bool | None) -> None:
        if not yes:
            return
        records = self.store.records(ids)  # everything, the vector included, for the undo
        if not records:
            return  # deleted meanwhile (by another process)
        self.store.delete_papers(ids)
        self.undo_stack.append(Deletion(records))
        now = time.time()
        for pid in ids:
            self._written[pid] = now  # a refresh that read it before the delete brings nothing back
            self.sticky.discard(pid)
            old = self.index.rows.get(pid)
            if old is not None and self.matching is not None and self.pinned is None and not self.text:
                self.matching -= self.selection.matches_fields(old)
            self.table.drop(pid)
        self.index.remove(ids)
        if self.pinned is not None or self.text:
            self.set_timer(0.3, self.count_view)
        self.update_summary()
        self.show_detail()
        self.schedule_retrain()
        titles = [r.metadata.get("title") or r.id for r in records]
        what = f"“{_clip(str(titles[0]), 50)}”" if len(titles) == 1 else f"{len(titles)} papers"
        self.notify(f"Deleted {what}; u brings it back.", timeout=4)

    def restore(self, deletion: Deletion) -> None:
        """Undo a delete: the papers come back whole, and the first is highlighted."""
        restored = self.store.restore_records(deletion.records)
        ids = [r.id for r in deletion.records]
        now = time.time()
        for pid in ids:
            self._written[pid] = now
        self.index.apply(Row.from_metadata(pid, meta) for pid, meta in self.store.metadata(ids))
        self.schedule_retrain()
        self.sticky.update(ids)
        self.show_again(ids[0])
        back = f"“{_clip(self.index.rows[ids[0]].title, 50)}”" if len(ids) == 1 else f"{len(ids)} papers"
        again = len(ids) - len(restored)
        stored = f" ({again} had been stored again meanwhile and stay as they are)" if again else ""
        self.notify(f"Undone: {back} is back{stored}.", timeout=3)

    @on(DataTable.RowSelected)
    def action_toggle_detail(self) -> None:
        """Enter: the detail pane alone (the way to read it in a narrow terminal), or back."""
        self.screen.toggle_class("-detail-only")

    def on_resize(self, event: events.Resize) -> None:
        self.fit(event.size.width)

    def fit(self, width: int) -> None:
        """Narrow terminals show the queue alone (enter shows the detail); the title column
        takes the width the other columns leave."""
        narrow = width < NARROW
        if narrow != self.screen.has_class("-narrow"):
            if narrow:
                self.say(NARROW_HINT)
            elif str(self.query_one("#status-line", Static).content) == NARROW_HINT:
                self.say("")
        self.screen.set_class(narrow, "-narrow")
        widths = column_widths(width if narrow else width * 3 // 5)
        if widths != self.table.widths or not self.table.columns:
            self.table.set_columns(widths)
            self.reload()  # rows are cut to the new width

    def action_cursor(self, step: int) -> None:
        if self.shown:
            self.table.move_cursor(row=max(0, min(len(self.shown) - 1, self.table.cursor_row + step)))

    # -- actions through dialogs: each dialog returns its result to a callback here ----------

    def _current_item(self) -> StoredPaper | None:
        pid = self.current_id()
        return self.store.get(pid) if pid else None

    @guarded
    def action_tags(self) -> None:
        item = self._current_item()
        if item is not None:
            screen = TagsScreen(item.decision.tags, self.index.vocabulary(), item.paper.title)
            self.push_screen(screen, functools.partial(self._edited, item.paper.id, "tags"))

    @guarded
    def action_note(self) -> None:
        item = self._current_item()
        if item is not None:
            screen = NoteScreen(item.decision.note, item.paper.title)
            self.push_screen(screen, functools.partial(self._edited, item.paper.id, "note"))

    @guarded
    def _edited(self, pid: str, field: str, value: list[str] | str | None) -> None:
        """A tags or note dialog closed: write what it returned (None: cancelled)."""
        if value is not None:
            self.decide(pid, **{field: value})
            self.show_detail()

    def action_lists(self) -> None:
        pid = self.current_id()
        if pid is not None:
            names = [rl.name for rl in self.lists.all()]
            row = self.index.rows[pid]
            screen = ListsScreen(names, row.lists, row.title)
            self.push_screen(screen, functools.partial(self._list_chosen, pid))

    @guarded
    def _list_chosen(self, pid: str, choice: ListToggle | None) -> None:
        if choice is None:
            return
        name = check_name(choice.name) if choice.create else choice.name
        member = not (name in self.index.rows[pid].lists and not choice.create)
        kept = self.unsaved[pid].item if pid in self.unsaved else self._detail_item
        item = kept if kept is not None and kept.paper.id == pid else self.store.get(pid)
        if item is None:
            return
        names = [n for n in item.decision.lists if n != name] + ([name] if member else [])
        changed = item.model_copy(update={"decision": item.decision.model_copy(update={"lists": names})})
        if self.save(changed, set(), {name: member}, create=choice.create):
            # the name field always adds, even to an existing list
            self.notify(f"{'Added to' if member else 'Removed from'} “{name}”.", timeout=2)
            self.update_rows([pid])
        else:
            self._show_kept(changed)

    @guarded
    def action_open_link(self) -> None:
        item = self._current_item()
        if item is None:
            return
        link = item.paper.link
        if not link:
            self.notify("This paper has no link.", severity="warning", timeout=3)
        elif webbrowser.open(link):
            self.notify(f"Opened {link}", timeout=3)
        else:
            self.copy_to_clipboard(link)
            self.notify(f"No browser found here; the link (copied to the clipboard): {link}", timeout=10)

    def action_search(self) -> None:
        self.push_screen(SearchScreen(), self._searched)

    @guarded
    def _searched(self, request: SearchRequest | None) -> None:
        if request is None:
            return
        if request.semantic:
            hits = self.store.search(request.text, k=100)
            self.pin([h.item.paper.id for h in hits], f"nearest to “{request.text}”")
        else:
            self.pinned, self.text = None, request.text
            self.reload(keep_current=False)

    def action_filter(self) -> None:
        choices = FilterChoices(
            topics=[t.name for t in self.agenda.topics] if self.agenda else [],
            tags=self.index.vocabulary(),
            lists=[rl.name for rl in self.lists.all()],
            sources=self.index.sources(),
        )
        self.push_screen(FilterScreen(self.selection, choices), self._filtered)

    def _filtered(self, selection: Selection | None) -> None:
        if selection is not None:
            self.set_view("filtered", selection)

    # -- actions: finding papers ----------------------------------------------------------------

    @guarded
    def action_more_like_this(self) -> None:
        pid = self.current_id()
        if not pid:
            return
        hits = self.store.neighbours(pid, k=50)
        self.pin([h.item.paper.id for h in hits], f"more like “{_clip(self.index.rows[pid].title, 40)}”")

    def pin(self, ids: list[str], label: str) -> None:
        self.pinned, self.pinned_label = ids, label
        self.reload(keep_current=False)

    def action_clear(self) -> None:
        if self.pinned is not None or self.text:
            self.pinned, self.text = None, ""
            self.reload()

    def clear_filters(self) -> None:
        self.set_view("undecided", Selection(statuses=UNDECIDED))

    def set_view(self, name: str, selection: Selection | None = None) -> None:
        if selection is None:
            _, statuses, starred = next(v for v in VIEWS if v[0] == name)
            selection = Selection(**{**self.selection.__dict__, "statuses": statuses, "starred": starred})
        self.view_name, self.selection = name, selection
        self.sticky.clear()
        self.reload(keep_current=False)

    def action_cycle_view(self) -> None:
        names = [v[0] for v in VIEWS]
        current = names.index(self.view_name) if self.view_name in names else -1
        self.set_view(names[(current + 1) % len(names)])

    def set_sort(self, sort: Sort) -> None:
        self.sort = sort
        if sort in (Sort.UNCERTAIN, Sort.DISAGREEMENT) and (
            self.ranking is None or self.ranking.model is None
        ):
            note = self.ranking.fit.note if self.ranking else "the personal model is still loading"
            self.notify(f"No personal model yet ({note}): by relevance meanwhile.", timeout=5)
        elif sort is Sort.DISAGREEMENT:
            self.notify(f"Disagreement first: {LEAN_LEGEND}.", timeout=5)
        self.set_marks()
        self.reload()

    def set_marks(self) -> None:
        """In the disagreement sort, each paper says which way the model leans (`LEAN_LEGEND`)."""
        ranking = self.ranking
        if self.sort is Sort.DISAGREEMENT and ranking is not None and ranking.model is not None:
            self.table.mark_of = lambda pid: lean(ranking.disagreement(pid))
        else:
            self.table.mark_of = None

    def action_cycle_sort(self) -> None:
        sorts = list(Sort)
        self.set_sort(sorts[(sorts.index(self.sort) + 1) % len(sorts)])

    def action_refresh(self) -> None:
        self.sticky.clear()
        self.check_agenda()
        self.reload()
        self.refresh_store()

    # -- actions: assessing ----------------------------------------------------------------

    def action_assess(self) -> None:
        pid = self.current_id()
        if pid and self._can_assess():
            self.assess([pid], True)

    def action_assess_visible(self) -> None:
        """Assess every paper of the view (not just the rows loaded so far). With an LLM, the
        count and the cost estimate are asked about first."""
        if not self._can_assess():
            return
        ids = [r.id for r in self._iter_rows()]
        if not ids:
            return
        if not self.settings.llm_configured:
            self.assess(ids, False)  # offline: free, and seconds even for thousands
            return
        self.say(f"Estimating an LLM assessment of the {len(ids):,} papers in the view…")
        self.plan_assessment(ids)

    @work(thread=True, exclusive=True, group="assess")
    def plan_assessment(self, ids: list[str]) -> None:
        if self.agenda is None:
            raise RuntimeError("there is no agenda to assess against: write agenda.md ('triage init')")
        prepared = prepare_llm(self.store, self.settings, self.agenda, ids, force=False)
        self.call_from_thread(self._confirm_assessment, prepared, ids)

    def _confirm_assessment(self, prepared: Prepared, ids: list[str]) -> None:
        plan = prepared.plan
        self.say("")
        if not plan.papers:
            self.say(f"All {len(ids):,} papers in the view are assessed and up to date.")
            return
        money = "cost unknown for this model" if prepared.cost is None else f"about ${prepared.cost:.2f}"
        question = (
            f"Assess {plan.papers:,} of the {len(ids):,} papers in the view with {prepared.model}? "
            f"{len(plan.groups):,} calls, ~{plan.prompt_tokens + plan.completion_tokens:,} tokens, {money}. "
            f"({plan.up_to_date:,} are up to date already.)"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.assess(ids, False)

        self.push_screen(ConfirmScreen(question), answered)

    def _can_assess(self) -> bool:
        if any(w.group == "assess" and w.is_running for w in self.workers):
            self.notify("An assessment is running; wait for it to finish.", severity="warning", timeout=3)
            return False
        self.check_agenda()
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_rows(self.BINDINGS)))
