"""The review UI's changes that could not be written, kept on disk so that none is lost when
the session ends before the store takes them (a Chroma server still down at quit, a full disk).

Beside the recovery file of full records (`triage ingest` of it replays them) a session writes
`<recovery file>.changes.json`: for each paper only the decision's fields it changed and the
lists it joined or left, with the store they belong to. The next `triage review` of that store
writes them (`replay`) and removes both files. Only the changed fields are written, so what was
written since to the rest of a paper (a note, a list) survives; a decision made after the kept
one (by a command, say) is newer and is not overwritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.models import Decision

if TYPE_CHECKING:
    from assistant.lists import ReadingLists
    from assistant.store import Store
    from assistant.tui.state import Unsaved

SUFFIX = ".changes.json"


def folder() -> Path:
    """Where the recovery files are (`assistant.ingest.undo_file(RECOVERY_DIR)`'s folder),
    found without importing the ingest modules at the UI's start (0.2 s of CPU)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("triage")) / "recovery"


def store_key(store: Store) -> str:
    """Which store kept changes belong to: its location and its collection, and whose they are
    (a person other than the store's first, `assistant.store.people`)."""
    return f"{store.location}#{store.settings.collection}{store.view.person_tag}"


def changes_file(recovery_file: Path) -> Path:
    return recovery_file.with_name(recovery_file.name.removesuffix(".jsonl") + SUFFIX)


def write_changes(recovery_file: Path, store: Store, unsaved: Mapping[str, Unsaved]) -> Path:
    """Write the kept changes beside the recovery file (to a temporary file moved into place)."""
    return write_changes_to(changes_file(recovery_file), store, unsaved)


def write_changes_to(path: Path, store: Store, unsaved: Mapping[str, Unsaved]) -> Path:
    """Write these changes to a changes file (`replay` writes them to the store)."""
    body = {
        "store": store_key(store),
        "changes": [
            {
                "id": pid,
                "fields": sorted(kept.fields),
                "decision": kept.item.decision.model_dump(mode="json"),
                "lists": kept.lists,
            }
            for pid, kept in unsaved.items()
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(body, indent=1), encoding="utf-8")
    partial.replace(path)
    return path


def journal_file() -> Path:
    """Where a session writes the decisions still being written behind its keys, so that a
    session killed before they land loses none: named like the recovery files (by time, this
    process's id after it), replayed by the next session as theirs are."""
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    return folder() / f"{stamp}-writing-{os.getpid()}{SUFFIX}"


def _live_journal(path: Path) -> bool:
    """Whether this is the journal of a session still running (this one included)."""
    _, writing, pid = path.name.removesuffix(SUFFIX).rpartition("-writing-")
    if not writing or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:  # there, but another user's
        return True
    return True


def forget(recovery_file: Path | None) -> None:
    """The kept changes were written: the next session must not write them again."""
    if recovery_file is not None:
        changes_file(recovery_file).unlink(missing_ok=True)


@dataclass
class Replayed:
    """What `replay` wrote: papers saved, papers whose kept change a newer decision replaced,
    and the files it came from (now removed)."""

    saved: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def pending_files(folder: Path, store: Store) -> list[Path]:
    """This store's files of kept changes in `folder`, oldest first."""
    key = store_key(store)
    found = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        if _live_journal(path):
            continue  # a running session's changes being written: it writes them itself
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("store") == key:
                found.append(path)
        except (OSError, ValueError, AttributeError):
            continue  # another store's, or unreadable: left for the researcher
    return found


def write_change(
    store: Store,
    lists: ReadingLists,
    pid: str,
    decision: Decision,
    fields: Iterable[str],
    memberships: Mapping[str, bool],
    create: bool = False,
) -> None:
    """Write one paper's change: these fields of its decision, then the reading lists it joined
    (True) or left (False); a list joined that is not there is made (`create`: made whether or
    not it is there, as a list the change itself named new)."""
    fields = list(fields)
    if fields:
        store.set_decision_fields(pid, decision, fields)
    for name, member in memberships.items():
        if member and (create or not lists.exists(name)):
            lists.create(name, exist_ok=True)
        (lists.add if member else lists.remove)(name, [pid])


def replay(store: Store, folder: Path) -> Replayed:
    """Write the changes earlier sessions kept for this store, oldest first, and remove their
    files. Raises the store's error if it cannot be written (the files stay for next time)."""
    from assistant.lists import ReadingLists

    done = Replayed()
    lists = ReadingLists(store)
    for path in pending_files(folder, store):
        changes = json.loads(path.read_text(encoding="utf-8")).get("changes", [])
        ids = [c["id"] for c in changes]
        current = {item.paper.id: item for item in store.get_many(ids)}
        for change in changes:
            pid, kept = change["id"], Decision.model_validate(change["decision"])
            stored = current.get(pid)
            if stored is None:
                continue  # deleted since
            newer = stored.decision.decided_at
            if newer is not None and kept.decided_at is not None and newer > kept.decided_at:
                done.superseded.append(pid)
                continue
            write_change(store, lists, pid, kept, change["fields"], change["lists"])
            done.saved.append(pid)
        path.unlink(missing_ok=True)
        path.with_name(path.name.removesuffix(SUFFIX) + ".jsonl").unlink(missing_ok=True)
        done.files.append(path)
    return done
