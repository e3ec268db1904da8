"""`triage review`: the keyboard-first review UI over the ranked queue.

`ReviewApp` wires the parts together: its key bindings (and so the footer and the help),
the layout, the lifecycle (mount, the refresh timer, unmount) and the events. What each key
does lives in the parts it is composed of (see the map in assistant/tui/__init__.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

from textual import events, on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from assistant.index import QueueIndex, Sort
from assistant.selection import Selection
from assistant.tui.actions import Decisions
from assistant.tui.collector import CHECK_EVERY
from assistant.tui.dialogs import help_rows
from assistant.tui.navigation import Navigation
from assistant.tui.screens import HelpScreen, SearchBar
from assistant.tui.state import UNDECIDED, VIEWS
from assistant.tui.widgets import Detail, KeyFooter, QueueTable, Summary, column_widths
from assistant.tui.workers import settle_heap, trains_apart

PREFETCH = 20  # load the next page when the cursor is this close to the end
NARROW = 150  # below this many columns the detail pane is shown on demand (enter)
NARROW_HINT = "A narrow terminal: enter shows the highlighted paper, enter again the queue."


class QueueScreen(Screen[None]):
    """The review UI's screen. A change of focus (to the search line and back) repaints what
    it changes: Textual's screen repaints every widget on one (~40 ms at 10,000 papers), though
    a widget whose look depends on the focus redraws itself."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)


# What the researcher does that a re-sort of the queue would disturb (a mouse merely moved is not).
ACTIVE_INPUT = (events.Key, events.MouseDown, events.MouseScrollDown, events.MouseScrollUp)


class ReviewApp(Decisions, Navigation):
    """Review the ranked queue: read, decide, tag, note, file into lists, search.

    Made with the store, the settings and the agenda (`QueueView.__init__`, which holds the
    session's state)."""

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
        Binding("L", "lab", "Lab: papers others accepted this week that you have not decided", show=False),
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

    # -- layout and lifecycle ---------------------------------------------------------------------

    def get_default_screen(self) -> Screen[None]:
        return QueueScreen(id="_default")

    def compose(self) -> ComposeResult:
        yield Summary(id="summary")
        with Horizontal(id="main"):
            yield QueueTable(id="queue")
            with VerticalScroll(id="detail-pane"):
                yield Detail(id="detail")
        yield Static("", id="status-line")
        yield SearchBar(id="search-bar")  # in the status line's place while it is open
        yield KeyFooter(id="footer")  # every key of the triage flow fits in 100 columns

    def on_mount(self) -> None:
        self.fit(self.size.width)  # the columns, and the queue if the index is cached
        if self.index.head_stamp:
            self._head_generation = self._generation
            self.call_after_refresh(self.open_index)  # the first screen is out: the rest now
        else:
            self.start()
        self.set_interval(self.refresh_every, self.tick)
        self._collector.start()
        self.set_interval(CHECK_EVERY, lambda: self._collector.tick(self.last_input))

    def open_index(self) -> None:
        """Read the whole index after a first screen painted from its first rows; the table
        goes on from it (or is filled again from it if it is not the one the rows came from)."""
        head, self.index = self.index, QueueIndex.open(self.store, self.cache_dir)
        self.index.take_counts(head)
        # A key pressed before this (a decision on a row of the first screen) is kept.
        self.index.apply(head.rows[pid] for _, pid in head.changes_since(0) if pid in head.rows)
        same = self.index.stamp == head.head_stamp and self._generation == self._head_generation
        if same and head.rows:
            self.table.follow(self.rows_in_view())
            # The view is counted on the whole index (a count of the first rows is dropped).
            self._generation += 1
            self.matching = None
            self.set_timer(0.3, self.count_view)
        else:
            self.reload()
        self.start()

    def start(self) -> None:
        """What follows the first screen: what other processes wrote since, and the personal
        model (or, with no cached index, building it)."""
        # The UI's matrix work is small (a paper's nearest decisions): one BLAS thread, so no
        # pool of threads spins beside the keypresses. numpy loads here, after the first screen.
        import numpy  # noqa: F401 - threadpoolctl limits the BLAS libraries loaded
        from threadpoolctl import threadpool_limits

        self._blas_limit = threadpool_limits(limits=1, user_api="blas")
        # Changes an earlier session could not save; the refresh shows them once written.
        self.replay_kept()
        if trains_apart(len(self.index.rows)):
            self.trainer.start()  # it reads its libraries while the queue comes up
        if self.index.built:
            self.call_after_refresh(settle_heap)  # after the first paint
            self.refresh_store()
            self.retrain()
            self.sort_ahead()
        else:
            self.say("Indexing the store for the queue (once; later openings read the cache)…")
            self.build_index()

    def tick(self) -> None:
        self.check_agenda()
        self.refresh_store()

    async def action_quit(self) -> None:
        """q: quit; changes still not saved are said on the way out, with where they are kept."""
        self.flush_writes()
        if self.unsaved and not self.server_down:
            try:
                with self._write_lock:
                    self._retry_unsaved()  # one more try: the store may take them now
            except Exception:
                pass  # said below
        if not self.unsaved:
            self.exit()
            return
        count = len(self.unsaved)
        what = "1 change was" if count == 1 else f"{count} papers' changes were"
        why = (
            f"the Chroma server at {self.store.location} could not be reached"
            if self.server_down
            else f"the store at {self.store.location} refused them"
        )
        where = (
            f"they are kept in {self.recovery_file}; the next 'triage review' of this store saves them"
            if self.recovery_file
            else "they could not be written to a recovery file"
        )
        self.exit(message=f"{what} not saved ({why}): {where}.")

    def on_unmount(self) -> None:
        self._collector.stop()
        self.flush_writes(ui=False)  # a close other than q's: decisions being written land or are kept
        if self._trainer is not None:
            self._trainer.close()
        if self.index.built:
            try:
                self.index.save(self.cache_dir, head=Selection(statuses=UNDECIDED))
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

    # -- events ---------------------------------------------------------------------

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if not event.data_table.is_attached:  # the UI closed after the cursor moved (a re-sort)
            return
        if not self.table.exhausted and event.cursor_row >= len(self.shown) - PREFETCH:
            self.table.load_more()
        self.show_detail()

    @on(DataTable.RowSelected)
    def action_toggle_detail(self) -> None:
        """Enter: the detail pane alone (the way to read it in a narrow terminal), or back."""
        self.screen.toggle_class("-detail-only")

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, ACTIVE_INPUT):  # a new ranking waits for the keys to pause
            self.last_input = time.monotonic()
        await super().on_event(event)

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

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.error is not None:
            self.say("")
            self.show_error(event.worker.error)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_rows(self.BINDINGS)))
