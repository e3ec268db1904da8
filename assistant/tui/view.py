"""The review session's state and the queue on screen: which rows the view shows, the
summary bar, the detail pane, the status line, and counting the view.

`QueueView` is the base of the app's parts (assistant.tui.app composes them): it holds every
piece of state the session keeps, and the methods the others redraw the screen with.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App
from textual.widget import Widget
from textual.widgets import Static

from assistant.agenda import Agenda, load_agenda
from assistant.config import Settings
from assistant.errors import ServerUnreachableError, TriageError
from assistant.index import QueueIndex, Row, Sort
from assistant.lists import ReadingLists
from assistant.models import StoredPaper
from assistant.render import lean
from assistant.selection import Selection
from assistant.store import Store
from assistant.triage.keys import is_stale
from assistant.triage.prompts import Prompts, load_prompts
from assistant.tui.collector import IdleCollector
from assistant.tui.dialogs import guarded
from assistant.tui.screens import ErrorScreen
from assistant.tui.state import UNDECIDED, DecisionChange, Deletion, Unsaved
from assistant.tui.widgets import Detail, QueueTable, Summary

if TYPE_CHECKING:  # the personal model's modules (numpy) load after the first screen
    from assistant.personal import FeatureCache, Ranking, TextFeatures
    from assistant.personal.process import Trainer
    from assistant.personal.state import Trained

# A new ranking re-sorts the queue once the keys have paused this long (seconds): a researcher
# moving through the queue does not see it re-sort under the cursor, nor wait on the re-sort.
RESORT_AFTER_KEYS = 0.4
AHEAD = 3  # papers below the cursor a server store's UI keeps read ahead (and the one above)
TEXTS_EVERY = 30.0  # seconds between reads of papers other processes wrote again, for the model
AHEAD_READ = 12  # and reads at once when one of them is missing: a request per dozen decisions
KEEP_DEPTH = 500  # how far down a reloaded view is read to keep the highlighted paper


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


class QueueView(App[None]):
    """The session's state, and what the screen shows of it."""

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
        self.selection = Selection(statuses=UNDECIDED)
        # The first screen is painted from the first rows of the queue the last session kept
        # apart (`QueueIndex.open_head`), the whole index read once it is on screen.
        self.index = QueueIndex.open_head(store, self.selection, cache_dir) or QueueIndex.open(
            store, cache_dir
        )
        self.lists = ReadingLists(store)
        self.prompts: Prompts | None = None
        try:
            self.prompts = load_prompts(settings.prompts)
        except Exception:  # stale marks for LLM assessments need them; the rest works without
            self.prompts = None
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
        # Decision changes written behind the keys (`Saving.save_behind`): the newest change of
        # each paper whose write has not landed, the writes in the order the keys made them,
        # and what the writer thread made of each, for the UI thread to take.
        self._behind: dict[str, StoredPaper] = {}
        self._behind_queue: queue.Queue[tuple[StoredPaper, frozenset[str]]] = queue.Queue()
        self._behind_fields: dict[str, frozenset[str]] = {}  # every field changed, by paper
        self._behind_lock = threading.Lock()
        self._journal: Path | None = None  # where they are on disk meanwhile (`recovery.journal_file`)
        self._behind_done: list[tuple[StoredPaper, frozenset[str], Exception | None]] = []
        # Why a write behind failed, until the UI has kept it: the writes after it are kept too.
        self._behind_failed: Exception | None = None
        self._writer_running = False
        self._generation = 0  # bumped whenever the view is rebuilt
        self._head_generation = -1  # the generation the first screen was painted at
        self.matching: int | None = None
        self._refresh_failed = False
        # The Chroma server cannot be reached (the error that said so), until a refresh reads it.
        self.server_down: ServerUnreachableError | None = None
        self._row_only: set[str] = set()  # papers kept changes were made to from their rows
        self._replayed_all = False  # the changes earlier sessions kept were written
        # Held for each write of a change: a kept change written by `retry_kept` (a thread)
        # never lands after a newer change to the same paper made by a key.
        self._write_lock = threading.Lock()
        self._detail_shown_at = 0.0
        self._detail_item: StoredPaper | None = None
        self._detail_of: tuple[object, ...] | None = None  # what the detail pane shows (`show_detail`)
        self._focus_before_search: Widget | None = None  # where the focus goes back after `/`
        self.ranking: Ranking | None = None
        self.texts: TextFeatures | None = None
        # The text features must read what other processes wrote: a new paper (at the next
        # retrain), a known one written again (its text may be new; at a retrain once
        # `texts_every` seconds have passed since the last read: in a lab every refresh brings
        # others' decisions, which stamp papers as a new abstract does).
        self._texts_due = False
        self._texts_maybe = False
        self._texts_read_at = 0.0  # time.monotonic() of the last read
        self.texts_every = TEXTS_EVERY
        self._retrain_timer: Any = None
        self._retrain_pending = False
        # When a key (or a click) last came (time.monotonic()), and a ranking made meanwhile that
        # waits for the keys to pause before it re-sorts the queue (`Workers._ranked`).
        self.last_input = 0.0
        self.resort_after_keys = RESORT_AFTER_KEYS
        self._held_ranking: tuple[Ranking, dict[Sort, list[str]], int, list[str]] | None = None
        self._held_timer: Any = None
        self._collector = IdleCollector()  # the garbage collector runs between keys
        # Papers read ahead of the cursor on a server store: (paper, its row's stamp, read at).
        self._ahead: dict[str, tuple[StoredPaper, float, float]] = {}
        self._reading: set[str] = set()  # being read ahead now (changed in place: one call each)
        self._texts_lock = threading.Lock()
        self._features: FeatureCache | None = None
        self._trained: Trained | None = None  # the training kept on disk, once read
        self._trainer: Trainer | None = None
        self._trainer_failed = False
        # The paper a decision moved the cursor to, while the cursor stays there: when the
        # queue is re-ranked the cursor goes to the best undecided paper of the new order.
        self._advanced_to: str | None = None

    @property
    def trainer(self) -> Trainer:
        """Trains the personal model in a process of its own (made when first needed: its
        modules load after the first screen)."""
        if self._trainer is None:
            from assistant.personal.process import Trainer

            self._trainer = Trainer()
        return self._trainer

    @property
    def feature_rows(self) -> FeatureCache:
        """The papers' feature rows, kept between rankings."""
        if self._features is None:
            from assistant.personal import FeatureCache

            self._features = FeatureCache()
        return self._features

    @property
    def table(self) -> QueueTable:
        return self.query_one("#queue", QueueTable)

    @property
    def shown(self) -> list[str]:
        return self.table.shown

    def current_id(self) -> str | None:
        return self.table.current_id()

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
        self.query_one("#status-line", Static).update(text, layout=False)  # one line

    def show_error(self, exc: BaseException) -> None:
        """An error in a modal; a server that cannot be reached is said once, without one."""
        down = exc if isinstance(exc, ServerUnreachableError) else self.store.refusal(exc)
        if isinstance(down, ServerUnreachableError):
            self.went_down(down)
            self.say(f"{down}: try again once it answers (decisions are kept meanwhile).")
            return
        title = "Error" if isinstance(exc, TriageError) else type(exc).__name__
        self.push_screen(ErrorScreen(title, str(exc) or repr(exc)))

    def went_down(self, exc: ServerUnreachableError) -> None:
        """The server cannot be reached: say so once (no dialog), and let keys keep changes
        without trying it until the periodic refresh finds it answering again."""
        if self.server_down is None:
            self.notify(
                f"The Chroma server at {self.store.location} cannot be reached: changes are kept "
                "(their rows say not saved) and saved when it answers again.",
                severity="warning",
                timeout=8,
            )
        self.server_down = exc

    def came_back(self) -> None:
        """A read from the server worked (`Saving` also writes what was kept meanwhile)."""
        self.server_down = None

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

    # -- the queue ---------------------------------------------------------------------

    def in_view(self, row: Row) -> bool:
        return row.id in self.sticky or self.selection.matches_fields(row)

    def rows_in_view(self) -> Iterator[Row]:
        if self.pinned is not None:
            rows = self.index.rows
            return (rows[i] for i in self.pinned if i in rows and self.in_view(rows[i]))
        return self.index.view(self.selection, self.sort, self.text, always=self.sticky)

    def reload(self, keep_current: bool = True, keep: str | None = None) -> None:
        """Show the current view, with the highlighted paper (or `keep`) still highlighted if
        it is in the view's first pages (else from the top)."""
        self._generation += 1
        keep = (keep or self.current_id()) if keep_current else None
        if keep and not (keep in self.index.rows and self.in_view(self.index.rows[keep])):
            keep = None
        # Where it is in the view, from the ids of the view's first rows, before any row is
        # added to the table: a re-sort that does not find it adds one page, not KEEP_DEPTH rows.
        at = None
        if keep:
            first = itertools.islice(self.rows_in_view(), KEEP_DEPTH)
            at = next((i for i, row in enumerate(first) if row.id == keep), None)
        self.table.fill(self.rows_in_view(), keep, at)
        self.matching = None
        if self.index.built and not self.index.rows:
            self.say(self.idle_text())
        self.update_summary()
        self.show_detail()
        # Counting a large view takes a while: start it once this keypress has been drawn.
        self.set_timer(0.3, self.count_view)

    @guarded
    def show_detail(self) -> None:
        self._detail_shown_at = time.time()
        pid = self.current_id()
        behind = self.being_written(pid)
        if behind is not None:
            item: StoredPaper | None = behind
        elif pid in self.unsaved:  # the session's change, not what the store still holds
            item = self.unsaved[pid].item
        elif pid and self.server_down:  # no key waits on a server known to be down
            self._detail_item = self._detail_of = None
            self.query_one(Detail).show_unreachable(self.store.location)
            return
        else:
            item = self._read_ahead(pid) or (self._read_now(pid) if pid else None)
            self.read_ahead_near()
        self._detail_item = item
        stale = bool(item and self.agenda and is_stale(item, self.agenda, self.prompts))
        # The same paper as it was, with the same ranking and agenda (a re-sort that keeps the
        # highlighted paper, a search cleared): the pane is left as it is (~25 ms at 100k).
        of = (pid, item, stale, self.ranking, self.agenda)
        last = self._detail_of
        if last is not None and of[:3] == last[:3] and of[3] is last[3] and of[4] is last[4]:
            return
        self._detail_of = of
        explanation = self.ranking.explain(pid) if self.ranking and pid and self.ranking.personal else None
        note = self.ranking.fit.note if self.ranking and not self.ranking.personal else ""
        self.query_one(Detail).show(item, self.agenda, stale, explanation, note)

    def being_written(self, pid: str | None) -> StoredPaper | None:
        """The paper as its change still being written behind the keys leaves it, if it has one
        (`Saving.save_behind`): what the session shows of it until the write lands."""
        if not pid:
            return None
        with self._behind_lock:
            return self._behind.get(pid)

    # -- a server store: the papers next to the cursor read ahead -----------------------------

    def _read_ahead(self, pid: str | None) -> StoredPaper | None:
        """The paper as read ahead, if nothing wrote it since (the refresh's stamp, this UI)."""
        got = self._ahead.get(pid) if pid else None
        row = self.index.rows.get(pid) if pid else None
        if got is None or row is None:
            return None
        item, touched, read_at = got
        fresh = row.touched == touched and self._written.get(row.id, 0.0) < read_at
        return item if fresh else None

    def _read_now(self, pid: str) -> StoredPaper | None:
        """The paper read from the store, and on a server kept with the papers read ahead: the
        pane drawn again for it (a new ranking puts the cursor back on it) reads it no more."""
        row = self.index.rows.get(pid)
        read_at = time.time()
        item = self.store.get(pid)
        if item is not None and row is not None and self.store.settings.chroma_url:
            self._keep_ahead({pid: (item, row.touched, read_at)})
        return item

    def _keep_ahead(self, read: dict[str, tuple[StoredPaper, float, float]]) -> None:
        """Keep papers just read with those read ahead (the latest few dozen): swapped whole, as
        the UI thread and the reads ahead both read and change it."""
        ahead = {**self._ahead, **read}
        self._ahead = dict(list(ahead.items())[-3 * AHEAD_READ :])

    def read_ahead_near(self) -> None:
        """On a Chroma server, read the papers around the highlighted one (the next ones first:
        a decision moves there) in the background, so the detail pane does not wait on the server
        when the cursor gets there. A local store answers in a millisecond: nothing is read."""
        if not self.store.settings.chroma_url or self.server_down:
            return
        shown, at = self.shown, self.table.cursor_row

        def wanted(pid: str) -> bool:
            # Not a paper this session wrote (the one just decided, above the cursor: read
            # if the cursor goes back to it), nor one a read still under way brings.
            return pid not in self._written and pid not in self._reading and self._read_ahead(pid) is None

        near = shown[at + 1 : at + 1 + AHEAD] + shown[max(0, at - 1) : at]
        if any(wanted(pid) for pid in near):
            block = shown[at + 1 : at + 1 + AHEAD_READ] + shown[max(0, at - 1) : at]
            ids = [pid for pid in block if wanted(pid)]
            self._reading.update(ids)
            self._read_papers_ahead(ids)

    # Not exclusive: a read cancelled before it ran would leave its papers marked as being read.
    @work(thread=True, group="ahead")
    def _read_papers_ahead(self, ids: list[str]) -> None:
        rows = self.index.rows
        stamps = {pid: rows[pid].touched for pid in ids if pid in rows}
        read_at = time.time()
        try:
            items = self.store.get_many(list(stamps))
        except Exception:  # read when shown, as without reading ahead
            return
        finally:
            self._reading.difference_update(ids)
        self._keep_ahead({i.paper.id: (i, stamps[i.paper.id], read_at) for i in items})

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

    def set_marks(self) -> None:
        """In the disagreement sort, each paper says which way the model leans (`LEAN_LEGEND`)."""
        ranking = self.ranking
        if self.sort is Sort.DISAGREEMENT and ranking is not None and ranking.model is not None:
            self.table.mark_of = lambda pid: lean(ranking.disagreement(pid))
        else:
            self.table.mark_of = None

    @work(thread=True, exclusive=True, group="count")
    def count_view(self) -> None:
        """How many papers the view matches (decided papers kept on screen are not counted)."""
        generation = self._generation
        rows = self.index.rows
        if self.pinned is not None:
            total = sum(1 for i in self.pinned if i in rows and self.selection.matches_fields(rows[i]))
        else:
            total = self.index.count(self.selection, self.text)
        self.call_from_thread(self._counted, total, generation)

    def _counted(self, total: int, generation: int) -> None:
        if generation == self._generation:  # else the view changed while it was counted
            self.matching = total
            self.update_summary()
