"""The keys that change what the queue shows: moving, views (v), sorts (S), the filter (f),
search (/), more like this (M), the lab's picks (L), clearing (escape) and refreshing (r)."""

from __future__ import annotations

from datetime import date, timedelta

from textual import on
from textual.widgets import Static

from assistant.index import Sort
from assistant.render import LEAN_LEGEND
from assistant.selection import Selection
from assistant.tui.dialogs import guarded
from assistant.tui.screens import FilterChoices, FilterScreen, SearchBar, SearchRequest
from assistant.tui.state import UNDECIDED, VIEWS
from assistant.tui.widgets import clip
from assistant.tui.workers import Workers

LAB_DAYS = 7  # how far back `L` looks
OPEN_TO_SEARCH = {"quit", "focus_next", "focus_previous"}  # app keys the search line leaves alone


class Navigation(Workers):
    """What the keys that choose, order and search the queue do."""

    # -- moving and finding ----------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        if self.shown:
            self.table.move_cursor(row=max(0, min(len(self.shown) - 1, self.table.cursor_row + step)))

    def action_search(self) -> None:
        """/: the search line takes the status line's place (the queue keeps its size). While
        it is open the queue's keys do nothing (`check_action`), as under a dialog."""
        self._focus_before_search = self.focused
        self.query_one("#status-line", Static).display = False
        self.query_one(SearchBar).open()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action not in OPEN_TO_SEARCH and self.query(SearchBar) and self.query_one(SearchBar).display:
            return False  # the search line has the keys (its own are its bindings)
        return True

    @on(SearchBar.Done)
    def _search_done(self, done: SearchBar.Done) -> None:
        self.query_one("#status-line", Static).display = True
        # The focus goes back where it was (the detail pane read alone, say), else the queue.
        before = self._focus_before_search
        if before is not None and before.is_attached and before.display and before.focusable:
            before.focus()
        else:
            self.table.focus()
        self._searched(done.request)

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

    @guarded
    def action_more_like_this(self) -> None:
        pid = self.current_id()
        if not pid:
            return
        hits = self.store.neighbours(pid, k=50)
        self.pin([h.item.paper.id for h in hits], f"more like “{clip(self.index.rows[pid].title, 40)}”")

    @guarded
    def action_lab(self) -> None:
        """In a shared store: the papers others accepted or starred in the last week that this
        person has not decided yet (`triage ranked --lab` has the whole picture)."""
        from assistant.lab import build

        lab = build(self.store, date.today() - timedelta(days=LAB_DAYS))
        picks = lab.for_me
        if not picks:
            self.notify(f"Nothing others accepted in the last {LAB_DAYS} days is left for you to decide.")
            return
        disputed = sum(1 for p in picks if p.disputed)
        label = f"lab: {len(picks)} accepted by others this week, undecided by you"
        self.pin([p.item.paper.id for p in picks], label + (f" ({disputed} disputed)" if disputed else ""))

    def pin(self, ids: list[str], label: str) -> None:
        self.pinned, self.pinned_label = ids, label
        self.reload(keep_current=False)

    # -- views and sorts -------------------------------------------------------------------

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

    def action_cycle_sort(self) -> None:
        sorts = list(Sort)
        self.set_sort(sorts[(sorts.index(self.sort) + 1) % len(sorts)])

    def action_refresh(self) -> None:
        """r: decided papers kept on screen leave the view, and what other processes wrote is
        read (papers it moved take their places then). With nothing kept on screen the table
        is not filled again: the refresh redraws what changed."""
        refill = bool(self.sticky) or self.pinned is not None
        self.sticky.clear()
        self.check_agenda()
        if refill:
            self.reload()
        self.refresh_store()
