"""Writing the researcher's changes, and keeping what the store refuses or cannot take.

A change the store refuses (removed, read-only, a full disk) stays in the session (its row
says "not saved"), goes to the recovery file, and is tried again with the next change. A
change a Chroma server cannot take (stopped, restarting: `ServerUnreachableError`) is kept the
same way; while the server is known to be down no key waits on it (the change is kept at once)
and the periodic refresh tries the kept changes again (`retry_kept`), so they are saved when it
answers even if the researcher presses nothing more.

A decision is written behind its key (`save_behind`): a thread writes the changes in the order
the keys made them while the UI moves on; the writes that must follow them (an undo, a list, a
delete, a quit) wait for them first (`flush_writes`), and one that fails is kept as above.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace

from textual import work
from textual.message import Message

from assistant.errors import (
    DiskFullError,
    ReadOnlyError,
    ServerUnreachableError,
    StoreError,
    StoreGoneError,
    is_read_only,
)
from assistant.index import Row
from assistant.models import Decision, Paper, StoredPaper
from assistant.tui import recovery
from assistant.tui.state import Unsaved
from assistant.tui.view import QueueView


def decided_row(old: Row, item: StoredPaper) -> Row:
    """A paper's queue row after a change to its decision."""
    d = item.decision
    engine_tags = item.assessment.tags if item.assessment else []
    return replace(
        old,
        status=d.status,
        starred=d.starred,
        lists=tuple(d.lists),
        tags=tuple(dict.fromkeys([*d.tags, *engine_tags])),
    )


class WritesLanded(Message):
    """The writer thread wrote changes the keys made, or could not (`Saving.save_behind`)."""


class Saving(QueueView):
    """Writes changes to papers, keeps the ones the store refuses or cannot take (a server
    down), and retries them."""

    def latest(self, pid: str) -> StoredPaper | None:
        """The paper as this session knows it: its change kept in the session, else the detail
        pane's copy (read when it was highlighted, re-read when a refresh sees it written:
        current enough to rebuild its row from), else the store's."""
        behind = self.being_written(pid)
        if behind is not None:
            return behind
        kept = self.unsaved[pid].item if pid in self.unsaved else self._detail_item
        if kept is not None and kept.paper.id == pid:
            return kept
        if not self.server_down:
            try:
                return self.store.get(pid)
            except ServerUnreachableError as exc:
                self.went_down(exc)
        return self.from_row(pid)

    def from_row(self, pid: str) -> StoredPaper | None:
        """A paper as its queue row knows it, for a change made while the server cannot be read:
        only the fields the change names are written, so what the row lacks (the note, the
        abstract) is never written over."""
        row = self.index.rows.get(pid)
        if row is None:
            return None
        decision = Decision(
            status=row.status, starred=row.starred, tags=list(row.tags), lists=list(row.lists)
        )
        paper = Paper(id=pid, title=row.title, authors=list(row.authors))
        self._row_only.add(pid)
        return StoredPaper(paper=paper, decision=decision)

    def show_row(self, old: Row, row: Row) -> None:
        """Put a paper's changed row in the index and redraw it, and the counts."""
        self.recount(old, row)
        self.index.apply([row])
        self.redraw([row], detail=False)
        self.update_summary()

    def save(
        self,
        item: StoredPaper,
        fields: set[str],
        lists: dict[str, bool] | None = None,
        create: bool = False,
    ) -> bool:
        """Write a change to a paper's decision (`fields`) or lists. If the store refuses it
        (removed, read-only, a full disk) or its server cannot be reached, the change is kept
        in this session (the row says "not saved"), written to the recovery file, and tried
        again with the next change (a server's: by the refresh once it answers). Returns
        whether it was saved; errors of other kinds are raised."""
        self.flush_writes()  # the changes written behind the keys land first
        try:
            if self.server_down:  # no key waits on a server known to be down: the tick retries
                raise ServerUnreachableError(str(self.server_down))
            with self._write_lock:
                self._retry_unsaved()
                self._write_change(item, fields, lists or {}, create)
        except Exception as exc:
            reason = self._refused(exc)
            if reason is None:
                raise
            self._keep_unsaved(item, fields, lists or {}, exc, reason)
            return False
        return True

    def _keep_unsaved(
        self,
        item: StoredPaper,
        fields: set[str],
        lists: dict[str, bool],
        exc: Exception,
        reason: str,
        ui: bool = True,
    ) -> None:
        """Keep a change the store did not take, with what was kept of the paper before (`ui`:
        and say so; False as the UI closes, its widgets gone: the recovery file alone)."""
        pid = item.paper.id
        old = self.unsaved.get(pid)
        self.unsaved[pid] = Unsaved(
            item,
            (old.fields if old else set()) | fields,
            {**(old.lists if old else {}), **lists},
            (old.whole if old else True) and pid not in self._row_only,
        )
        self._keep(reason, ui)
        if ui and isinstance(exc, ServerUnreachableError):
            self.went_down(exc)

    # -- writing behind the keys -----------------------------------------------------------

    def save_behind(self, item: StoredPaper, fields: set[str]) -> None:
        """Write a change to a paper's decision off the UI thread, in the order the keys made
        them: a key does not wait on the store (a lab's server busy with everyone's work,
        another process holding the store's writer lock). Until the write lands, this session
        shows the change (`latest`, the detail pane) and a refresh does not bring the paper back
        as it was. While changes are kept (the store refused one, its server is down) the change
        goes the way `save` takes, at once; a write behind that fails is kept the same way (its
        row says "not saved"), and the writes queued after it are kept with it, in order."""
        pid = item.paper.id
        with self._behind_lock:
            behind = not (self.unsaved or self.server_down or self._behind_failed is not None)
            if behind:
                self._behind[pid] = item
                self._behind_fields[pid] = self._behind_fields.get(pid, frozenset()) | fields
                self._behind_queue.put((item, frozenset(fields)))
                start, self._writer_running = not self._writer_running, True
        if not behind:
            self.save(item, fields)
            return
        self._write_journal()
        if start:  # a thread of its own, started now: `flush_writes` may wait on it at once
            threading.Thread(target=self._write_behind, name="triage-writer", daemon=True).start()

    def _write_journal(self) -> None:
        """The changes still being written, on disk (`recovery.journal_file`): a session killed
        before they land loses none, the next one writes them. Removed once none is left."""
        with self._behind_lock:
            pending = {
                pid: Unsaved(item, set(self._behind_fields.get(pid, ())), {}, True)
                for pid, item in self._behind.items()
            }
        try:
            if pending:
                self._journal = self._journal or recovery.journal_file()
                recovery.write_changes_to(self._journal, self.store, pending)
            elif self._journal is not None:
                self._journal.unlink(missing_ok=True)
                self._journal = None
        except OSError:
            pass  # the writes go on; only a crash meanwhile would lose them, as before

    @property
    def writes_pending(self) -> bool:
        """A change written behind the keys has not landed yet, or its outcome not been taken."""
        with self._behind_lock:
            return self._writer_running or bool(self._behind_done)

    def _write_behind(self) -> None:
        while True:
            with self._behind_lock:
                try:
                    item, fields = self._behind_queue.get_nowait()
                except queue.Empty:
                    self._writer_running = False
                    return
                failed = self._behind_failed
            error: Exception | None = None
            try:
                if failed is not None:  # an earlier change is kept: this one after it, unwritten
                    raise failed
                if self.server_down:  # known down: kept without waiting on it
                    raise ServerUnreachableError(str(self.server_down))
                with self._write_lock:
                    self._write_change(item, set(fields), {}, False)
            except Exception as exc:
                error = exc
            finally:
                pid = item.paper.id
                with self._behind_lock:
                    self._written[pid] = time.time()  # a refresh that read before this brings nothing back
                    if self._behind.get(pid) is item:
                        del self._behind[pid]
                        self._behind_fields.pop(pid, None)
                    self._behind_done.append((item, fields, error))
                    self._behind_failed = self._behind_failed or error
                self._behind_queue.task_done()
                self.post_message(WritesLanded())

    def on_writes_landed(self, _: WritesLanded) -> None:
        self._take_written()

    def _take_written(self, ui: bool = True) -> None:
        """What the writer thread made of the changes written behind the keys: the ones it
        could not write are kept (`_keep_unsaved`), and their rows say so (`ui`)."""
        with self._behind_lock:  # what failed is taken, and the next changes go behind again
            done, self._behind_done = self._behind_done, []
            if not self._writer_running:  # (else it reports what it does next, and this runs again)
                self._behind_failed = None
        said: set[int] = set()
        for item, fields, error in done:
            if error is None:
                continue
            reason = self._refused(error)
            if reason is None:  # not a refusal: said in a dialog, and the change kept all the same
                reason = f"the store failed ({error})"
                if ui and id(error) not in said:
                    said.add(id(error))
                    self.show_error(error)
            self._keep_unsaved(item, set(fields), {}, error, reason, ui)
            if ui:
                self.show_kept(item)
        if done:
            self._write_journal()  # what landed leaves it (what failed is in the recovery file)

    def flush_writes(self, ui: bool = True) -> None:
        """Wait until every change written behind the keys has landed (or failed and been
        kept): before a write that must come after them (an undo, a list, a delete), at quit
        (`ui` False: as the UI closes, its widgets gone)."""
        self._behind_queue.join()
        self._take_written(ui)

    def _write_change(
        self, item: StoredPaper, fields: set[str], lists: dict[str, bool], create: bool
    ) -> None:
        recovery.write_change(self.store, self.lists, item.paper.id, item.decision, fields, lists, create)

    def _retry_unsaved(self) -> None:
        """Write the changes the store refused before; raises if it still refuses them."""
        if not self.unsaved:
            return
        for pid, kept in list(self.unsaved.items()):
            self._write_change(kept.item, kept.fields, kept.lists, False)
            del self.unsaved[pid]
            self._row_only.discard(pid)
            self.table.unsaved.discard(pid)
            self.update_rows([pid])
        where = f" (the recovery file {self.recovery_file} is no longer needed)" if self.recovery_file else ""
        recovery.forget(self.recovery_file)
        self.recovery_file = None
        self.say(f"Saved the changes the store had refused before{where}.")

    def _refused(self, exc: BaseException) -> str | None:
        """Why the store refused a write, in words; None if the error is not a refusal."""
        refusal = exc if isinstance(exc, StoreError) else self.store.refusal(exc)
        if isinstance(refusal, ServerUnreachableError):
            return f"the Chroma server at {self.store.location} cannot be reached"
        if isinstance(refusal, DiskFullError):
            return f"the disk holding the store at {self.store.location} is full"
        if isinstance(refusal, StoreGoneError | ReadOnlyError) or is_read_only(exc):
            return f"the store at {self.store.location} was removed or is read-only"
        return None

    def _keep(self, reason: str, ui: bool = True) -> None:
        """Write what the store refused to the recovery file and say so on the status line."""
        from assistant.ingest import RECOVERY_DIR, undo_file, write_full_records

        if self.recovery_file is None:
            self.recovery_file = undo_file(RECOVERY_DIR)
        lists = {name: "" for kept in self.unsaved.values() for name in kept.item.decision.lists}
        # A paper known only from its row (the server was down when it was decided) has no
        # full record to write: the changes file beside it has every change.
        whole = [k.item for k in self.unsaved.values() if k.whole]
        try:
            write_full_records(self.recovery_file, whole, lists)
            recovery.write_changes(self.recovery_file, self.store, self.unsaved)
            written = (
                f"written to {self.recovery_file} (the next 'triage review' of this store saves them; "
                "'triage ingest' of it replays them)"
            )
        except OSError as exc:
            written = f"and could not be written to {self.recovery_file} ({exc.strerror or exc}): do not quit"
        if not ui:
            return
        count = len(self.unsaved)
        what = "1 change" if count == 1 else f"{count} papers' changes"
        when = "when the server answers" if "cannot be reached" in reason else "on the next change"
        self.say(f"not saved: {reason}; kept in this session ({what}), retried {when}, and {written}")
        self.table.unsaved = set(self.unsaved)

    def show_kept(self, item: StoredPaper) -> None:
        """Redraw a paper's row from a change kept in the session."""
        pid = item.paper.id
        old = self.index.rows.get(pid)
        if old is None:
            return
        self.show_row(old, decided_row(old, item))
        if self._detail_item is not None and self._detail_item.paper.id == pid:
            self._detail_item = item

    # -- a Chroma server that cannot be reached --------------------------------------------

    def came_back(self) -> None:
        """A read from the server worked: keys write to it again, the kept changes are tried,
        and the detail pane that could not be read meanwhile is."""
        self.server_down = None
        if self.unsaved:
            self.retry_kept(dict(self.unsaved))
        if not self._replayed_all:
            self.replay_kept()
        self.show_detail()

    @work(thread=True, exclusive=True, group="retry")
    def retry_kept(self, kept: dict[str, Unsaved]) -> None:
        """Write the kept changes off the UI thread (the refresh found the server answering)."""
        try:
            for pid, entry in kept.items():
                with self._write_lock:
                    if self.unsaved.get(pid) is entry:  # else a key saved it, or changed it again
                        self._write_change(entry.item, entry.fields, entry.lists, False)
        except Exception as exc:  # still kept: said once (unreachable) or in a dialog
            self.call_from_thread(self.show_error, exc)
            return
        self.call_from_thread(self._kept_saved, kept)

    def _kept_saved(self, kept: dict[str, Unsaved]) -> None:
        saved = [pid for pid, entry in kept.items() if self.unsaved.get(pid) is entry]
        now = time.time()
        for pid in saved:  # a change made meanwhile to the same paper stays kept (and is retried)
            del self.unsaved[pid]
            self._row_only.discard(pid)
            self._written[pid] = now
        self.table.unsaved = set(self.unsaved)
        if not saved:
            return  # a key's own retry saved them first
        self.update_rows(saved)
        if self.unsaved:
            self.retry_kept(dict(self.unsaved))
            return
        recovery.forget(self.recovery_file)
        self.recovery_file = None
        papers = "1 paper's change" if len(saved) == 1 else f"{len(saved)} papers' changes"
        self.say("")
        self.notify(f"The Chroma server answers again: saved the {papers} kept meanwhile.", timeout=8)

    # -- what an earlier session kept --------------------------------------------------------

    @work(thread=True, exclusive=True, group="replay")
    def replay_kept(self) -> None:
        """Write the changes earlier sessions of this store kept (they ended with the server
        down, or the disk full); if it still cannot take them they stay for the next try."""
        where = recovery.folder()
        if not where.is_dir():
            self._replayed_all = True
            return
        try:
            done = recovery.replay(self.store, where)
        except Exception as exc:  # the files stay; unreachable: retried when the server answers
            self.call_from_thread(self.show_error, exc)
            return
        self._replayed_all = True
        if done.files:
            self.call_from_thread(self._replayed, done)

    def _replayed(self, done: recovery.Replayed) -> None:
        now = time.time()
        for pid in done.saved:
            self._written[pid] = now
        ids = [pid for pid in done.saved if pid in self.index.rows]
        if ids:
            self.update_rows(ids)
        saved = "1 paper's change" if len(done.saved) == 1 else f"{len(done.saved)} papers' changes"
        newer = (
            f"; {len(done.superseded)} had been decided again since and were left" if done.superseded else ""
        )
        self.notify(f"Saved the {saved} an earlier session could not save{newer}.", timeout=8)
