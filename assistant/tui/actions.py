"""The keys that change papers: decide (a, x, m), star, undo, delete, tags, note, lists,
and open the link.

Each writes through `Saving.save` (a decision: `Saving.save_behind`, off the UI thread; a change
the store refuses is kept, not lost) and remembers what `u` undoes. Dialogs return their
result to a callback here.
"""

from __future__ import annotations

import functools
import time
import webbrowser
from typing import Any

from assistant.errors import ServerUnreachableError
from assistant.index import Row
from assistant.lists import check_name
from assistant.models import Status, StoredPaper, now_utc
from assistant.tui.dialogs import delete_question, guarded
from assistant.tui.saving import Saving, decided_row
from assistant.tui.screens import ConfirmDeleteScreen, ListsScreen, ListToggle, NoteScreen, TagsScreen
from assistant.tui.state import DecisionChange, Deletion
from assistant.tui.widgets import clip
from assistant.tui.workers import Workers

NEXT_DEPTH = 600  # how far below the cursor the next undecided paper is looked for


class Decisions(Saving, Workers):
    """What the keys that change a paper do to the store, the queue and the undo stack."""

    # -- decisions ---------------------------------------------------------------------

    def decide(self, pid: str, **changes: Any) -> None:
        """Write a decision change at once (only the fields changed), remember the old values
        for undo, redraw the row."""
        before = self.latest(pid)
        if before is None:
            raise RuntimeError(f"paper {pid} is no longer in the store")
        decision = before.decision.model_copy(update={**changes, "decided_at": now_utc()})
        changed = before.model_copy(update={"decision": decision})
        self.save_behind(changed, set(changes))
        self._written[pid] = time.time()
        self.undo_stack.append(DecisionChange(pid, before.decision, tuple(changes)))
        self.sticky.add(pid)
        old = self.index.rows[pid]
        self.show_row(old, decided_row(old, changed))
        self.schedule_retrain()

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
        item = self.latest(pid)
        if item is None:
            raise RuntimeError(f"paper {pid} is no longer in the store")
        undone = item.decision.model_copy(update={f: getattr(decision, f) for f in entry.fields})
        changed = item.model_copy(update={"decision": undone})
        if self.save(changed, set(entry.fields)):
            self.update_rows([pid])
        else:
            self.show_kept(changed)
        self._written[pid] = time.time()
        self.schedule_retrain()
        self.update_summary()
        self.show_again(pid)
        self.notify(f"Undone: back to {decision.status.value}.", timeout=2)

    # -- deleting ----------------------------------------------------------------------

    @guarded
    def action_delete(self) -> None:
        """D: delete the highlighted paper from the store, once the researcher said yes."""
        pid = self.current_id()
        self.flush_writes()  # the paper as its last change left it
        items = self.store.get_many([pid]) if pid else []
        if not items:
            return
        ids = [i.paper.id for i in items]
        self.push_screen(ConfirmDeleteScreen(delete_question(items)), functools.partial(self._delete, ids))

    @guarded
    def _delete(self, ids: list[str], yes: bool | None) -> None:
        if not yes:
            return
        self.flush_writes()  # a change still being written lands first: the undo brings it back
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
        what = f"“{clip(str(titles[0]), 50)}”" if len(titles) == 1 else f"{len(titles)} papers"
        self.notify(f"Deleted {what}; u brings it back.", timeout=4)

    def restore(self, deletion: Deletion) -> None:
        """Undo a delete: the papers come back whole, and the first is highlighted."""
        self.flush_writes()
        restored = self.store.restore_records(deletion.records)
        ids = [r.id for r in deletion.records]
        now = time.time()
        for pid in ids:
            self._written[pid] = now
        self.index.apply(Row.from_metadata(pid, meta) for pid, meta in self.store.metadata(ids))
        self.schedule_retrain()
        self.sticky.update(ids)
        self.show_again(ids[0])
        back = f"“{clip(self.index.rows[ids[0]].title, 50)}”" if len(ids) == 1 else f"{len(ids)} papers"
        again = len(ids) - len(restored)
        stored = f" ({again} had been stored again meanwhile and stay as they are)" if again else ""
        self.notify(f"Undone: {back} is back{stored}.", timeout=3)

    # -- through dialogs: each dialog returns its result to a callback here --------------

    def _current_item(self) -> StoredPaper | None:
        """The highlighted paper as stored (its note and tags to edit), or as its change still
        being written leaves it; not waited for from a server known to be down (the error says
        so, without a dialog)."""
        pid = self.current_id()
        behind = self.being_written(pid)
        if behind is not None:
            return behind
        if pid and self.server_down:
            raise ServerUnreachableError(str(self.server_down))
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
        item = self.latest(pid)
        if item is None:
            return
        names = [n for n in item.decision.lists if n != name] + ([name] if member else [])
        changed = item.model_copy(update={"decision": item.decision.model_copy(update={"lists": names})})
        if self.save(changed, set(), {name: member}, create=choice.create):
            # the name field always adds, even to an existing list
            self.notify(f"{'Added to' if member else 'Removed from'} “{name}”.", timeout=2)
            self.update_rows([pid])
        else:
            self.show_kept(changed)

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
