"""Writing the researcher's changes, and keeping what the store refuses.

A change the store refuses (removed, read-only, a full disk) stays in the session (its row
says "not saved"), goes to the recovery file, and is tried again with the next change.
"""

from __future__ import annotations

from dataclasses import replace

from assistant.errors import DiskFullError, ReadOnlyError, StoreError, StoreGoneError, is_read_only
from assistant.index import Row
from assistant.models import StoredPaper
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


class Saving(QueueView):
    """Writes changes to papers, keeps the ones the store refuses and retries them."""

    def latest(self, pid: str) -> StoredPaper | None:
        """The paper as this session knows it: its change kept in the session, else the detail
        pane's copy (read when it was highlighted, re-read when a refresh sees it written:
        current enough to rebuild its row from), else the store's."""
        kept = self.unsaved[pid].item if pid in self.unsaved else self._detail_item
        return kept if kept is not None and kept.paper.id == pid else self.store.get(pid)

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

    def show_kept(self, item: StoredPaper) -> None:
        """Redraw a paper's row from a change kept in the session."""
        pid = item.paper.id
        old = self.index.rows.get(pid)
        if old is None:
            return
        self.show_row(old, decided_row(old, item))
        if self._detail_item is not None and self._detail_item.paper.id == pid:
            self._detail_item = item
