"""Background work: building the queue's index, refreshing from the store, training the
personal model and ranking with it, and assessing papers (from the keys that start it).

Each job runs in a `@work(thread=True, exclusive=True, group=...)` worker and hands its
result to the UI thread with `call_from_thread`; the app's one `Worker.StateChanged` handler
turns a failure into an error modal.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.worker import Worker, get_current_worker

from assistant.errors import ServerUnreachableError
from assistant.index import QueueIndex, Row, Sort, model_orders
from assistant.models import Status
from assistant.selection import Selection
from assistant.tui.screens import ConfirmScreen
from assistant.tui.state import UNDECIDED
from assistant.tui.view import QueueView

if TYPE_CHECKING:
    from assistant.personal import Ranking
    from assistant.triage.assess import Prepared

AHEAD = (Sort.NEWEST, Sort.ADDED, Sort.TITLE)  # sorted in the background once the index is read
RETRAIN_AFTER = 0.4  # seconds after the last decision before the personal model retrains
# From this many papers the personal model trains in a process of its own (a retrain holds the
# interpreter long enough to be felt); below, in a thread of the UI's (~0.1 s at 5k papers).
APART_FROM = 5_000


def trains_apart(papers: int) -> bool:
    return papers >= APART_FROM


def settle_heap() -> None:
    """Leave what start-up built (libraries, the index) out of Python's full collections.

    A full collection walks every object and took ~200 ms here; it fell on one keypress in
    ten. Objects made later are still collected as usual.
    """
    gc.collect()
    gc.freeze()


def _teaches(old: Row | None, new: Row) -> bool:
    """Whether a changed row changes what the personal model learns or ranks."""
    return old is None or (old.status, old.starred, old.relevance) != (new.status, new.starred, new.relevance)


class Workers(QueueView):
    """The jobs that run off the UI thread, and what the UI does with their results."""

    # -- the queue's index ---------------------------------------------------------------

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
        self.sort_ahead()
        try:
            self.index.save(self.cache_dir, head=Selection(statuses=UNDECIDED))
        except OSError as exc:
            self.say(f"could not write the queue cache: {exc}")

    @work(thread=True, exclusive=True, group="orders")
    def sort_ahead(self) -> None:
        """The sorts that do not follow the personal model, computed once the index is read, so
        that S never waits on a sort of every paper (0.1-0.25 s each at 100k papers)."""
        index = self.index
        orders, version = index.sorted_orders(s for s in AHEAD if s not in index.computed())
        self.call_from_thread(self._sorted_ahead, index, orders, version)

    def _sorted_ahead(self, index: QueueIndex, orders: dict[Sort, list[str]], version: int) -> None:
        if index is self.index:
            index.install(orders, version)

    # -- what other processes wrote --------------------------------------------------------

    @work(thread=True, exclusive=True, group="refresh")
    def refresh_store(self) -> None:
        """Read what other processes (or this one) wrote since the last refresh."""
        if not self.index.built:
            return
        try:
            rows, started, gone = self.index.changes(self.store)
        except Exception as exc:
            down = exc if isinstance(exc, ServerUnreachableError) else self.store.refusal(exc)
            if isinstance(down, ServerUnreachableError):  # said once, in a notification
                self.call_from_thread(self.went_down, down)
            elif not self._refresh_failed:
                self._refresh_failed = True
                self.call_from_thread(self.show_error, exc)
            return
        self._refresh_failed = False
        if self.server_down is not None:
            self.call_from_thread(self._answering)
        self.call_from_thread(self._take_changes, rows, started, gone)

    def _answering(self) -> None:
        """The server answers again: the kept changes are written, and the personal model
        (which could not read the store meanwhile) trains again."""
        if self.server_down is not None:
            self.came_back()
            self.schedule_retrain()

    def _take_changes(self, rows: list[Row], started: float, gone: Sequence[str] = ()) -> None:
        self.index.stamp = started
        if gone:
            self.index.remove(gone)
            # A ranking trained meanwhile still orders them: it is dropped, and a new one trained.
            self.schedule_retrain()
            self.reload()
        # A read that began before this UI wrote a paper carries the paper as it was.
        with self._behind_lock:  # nor one whose change is still being written
            rows = [r for r in rows if self._written.get(r.id, 0.0) < started and r.id not in self._behind]
        current = self.current_id()
        rewritten = any(r.id == current and r.touched > self._detail_shown_at for r in rows)
        known = self.index.rows
        fresh = [r for r in rows if known.get(r.id) != r]
        if gone or any(r.id not in known for r in rows):
            self._texts_due = True
        # Written again by another process (it may have a new text, and nothing else new): not
        # a paper whose only change is this UI's own write.
        if any(
            r.id in known and r.touched > max(self._written.get(r.id, 0.0), known[r.id].touched) for r in rows
        ):
            self._texts_maybe = True
        # Rows whose stamp alone moved: taken in, so that what was read of them before (the
        # papers read ahead) is read again when shown.
        self.index.apply(r for r in rows if r.id in known and known[r.id] == r)
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

    # -- the personal model -----------------------------------------------------------------

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
            try:
                self._retrain(worker)
            except ServerUnreachableError as exc:  # it trains again when the server answers
                self.call_from_thread(self.went_down, exc)

    def _retrain(self, worker: Worker[None]) -> None:
        # The personal model's modules (numpy's) load here, after the first screen.
        from assistant.personal import estimate_folder, load_features

        notes: list[str] = []
        if self.texts is None:
            self.call_from_thread(self.say, "Reading the store for the personal model (once; then cached)…")
            self.texts, notes = load_features(self.store, self.cache_dir)
            self.call_from_thread(self.say, self.idle_text())
        elif self._texts_due or (
            self._texts_maybe and time.monotonic() - self._texts_read_at >= self.texts_every
        ):
            # Only when a refresh brought another process's writes: this UI's decisions change
            # no text, and reading what changed for each of them cost a lab's server three
            # requests per decision.
            due, maybe = self._texts_due, self._texts_maybe
            self._texts_due = self._texts_maybe = False
            try:
                refreshed = self.texts.refresh(self.store)
            except BaseException:
                self._texts_due, self._texts_maybe = due, maybe
                raise
            self._texts_read_at = time.monotonic()
            if refreshed:
                try:
                    self.texts.save(self.cache_dir)
                except OSError:
                    pass  # only a cache: the next opening rebuilds it
        version = self.index.version
        rows = list(self.index.rows.values())
        topics = [t.name for t in self.agenda.topics] if self.agenda else []
        folder = estimate_folder(self.store, self.cache_dir)  # this person's training
        ranking = None
        if trains_apart(len(rows)) and self.texts.saved_generation:
            ranking = self._rank_apart(rows, topics, folder)
        if ranking is None:
            ranking = self._rank_here(rows, topics, folder)
        # Every order that follows the model is sorted here (by numpy), so S never waits on one.
        orders = {Sort.RELEVANCE: ranking.relevance_order()}
        if ranking.model is not None:
            orders.update(model_orders(rows, ranking))
        ranking.gather_neighbours()  # here, not on the first detail shown
        # What a ranking leaves (100k-long lists and maps) out of the collections a keypress
        # would otherwise pay for: a young generation holding it took 20-40 ms to collect.
        gc.freeze()
        if not worker.is_cancelled:
            self.call_from_thread(self._ranked, ranking, orders, version, notes)

    def _rank_apart(self, rows: list[Row], topics: list[str], folder: Path) -> Ranking | None:
        """Trained in a process of its own, so the keys never wait on it (None: it could not)."""
        from assistant.personal.process import Job, TrainerError

        assert self.texts is not None
        path = self.texts.cache_path(self.cache_dir)
        job = Job(path, self.texts.location, folder, topics, with_estimate=True)
        try:
            ranking = self.trainer.rank(job, rows, self.texts, self.feature_rows)
        except TrainerError as exc:
            if not self._trainer_failed:
                self._trainer_failed = True
                note = f"The personal model trains in the review UI's process: {exc}."
                self.call_from_thread(self.notify, note, timeout=6)
            return None
        self._trained = None  # the child kept its training on disk: read it if this process trains
        return ranking

    def _rank_here(self, rows: list[Row], topics: list[str], folder: Path) -> Ranking:
        """Trained in this process, from the training a command (or the last session) kept:
        unchanged decisions train nothing, and one more trains from its weights."""
        from assistant.personal import rank
        from assistant.personal.state import Trained

        assert self.texts is not None
        if self._trained is None:
            self._trained = Trained.load(folder)
        saved = self._trained
        previous = self.ranking.fit if self.ranking else None
        ranking = rank(self.texts, rows, topics, previous, self.feature_rows, with_estimate=True, saved=saved)
        if ranking.trained is not None and ranking.trained is not saved:
            self._trained = ranking.trained
            try:
                ranking.trained.save(folder, saved)
            except OSError:
                pass  # only a cache: the next opening trains again
        return ranking

    @property
    def ranking_outstanding(self) -> bool:
        """A retrain is scheduled or under way, or its ranking waits for the keys to pause."""
        return self._retrain_pending or self._held_ranking is not None

    def _ranked(
        self, ranking: Ranking, orders: dict[Sort, list[str]], version: int, notes: list[str]
    ) -> None:
        """A ranking the personal model made: put in place now, or once the keys pause."""
        wait = self.last_input + self.resort_after_keys - time.monotonic()
        if wait > 0:
            self._held_ranking = (ranking, orders, version, notes)  # a newer one replaces it
            if self._held_timer is None:
                self._held_timer = self.set_timer(wait, self._install_held)
            return
        self._held_ranking = None
        self._install_ranking(ranking, orders, version, notes)

    def _install_held(self) -> None:
        self._held_timer = None
        if self._held_ranking is not None:
            self._ranked(*self._held_ranking)

    def _install_ranking(
        self, ranking: Ranking, orders: dict[Sort, list[str]], version: int, notes: list[str]
    ) -> None:
        if version != self.index.version and self._retrain_pending:
            return  # the rows changed while it trained and another retrain is on its way
        before = self.ranking
        # Where the cursor is, read before the score column's new label empties the table.
        current, at_top = self.current_id(), self.table.cursor_row == 0
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
            advanced = self._advanced_to is not None and current == self._advanced_to
            self.reload(keep_current=not (first and at_top), keep=current)
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

    # -- assessing, from the keys that start it -------------------------------------------

    @work(thread=True, exclusive=True, group="assess")
    def assess(self, ids: list[str], force: bool) -> None:
        if self.agenda is None:
            raise RuntimeError("there is no agenda to assess against: write agenda.md ('triage init')")
        engine = "LLM" if self.settings.llm_configured else "offline engine"

        def progress(done: int, total: int) -> None:
            self.call_from_thread(self.say, f"Assessing with the {engine}: {done} / {total}…")

        self.call_from_thread(self.say, f"Assessing {len(ids)} paper(s) with the {engine}…")
        from assistant.triage.assess import assess_papers  # the engines' libraries: read when used

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

    def action_assess(self) -> None:
        pid = self.current_id()
        if pid and self._can_assess():
            self.assess([pid], True)

    def action_assess_visible(self) -> None:
        """Assess every paper of the view (not just the rows loaded so far). With an LLM, the
        count and the cost estimate are asked about first."""
        if not self._can_assess():
            return
        ids = [r.id for r in self.rows_in_view()]
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
        from assistant.triage.assess import prepare_llm

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
