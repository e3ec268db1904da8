"""Reading lists: named, described sets of papers.

A list's name and description are store-wide values (in Chroma beside the papers); its
membership lives in each paper's metadata, so a paper can be in many lists and deleting a
list never deletes a paper.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from assistant.errors import TriageError
from assistant.models import now_utc
from assistant.store import Store

LISTS_KEY = "reading-lists"
MAX_NAME = 80


class ListError(TriageError):
    """A reading list that does not exist, already exists, or has an unusable name."""


class ReadingList(BaseModel):
    name: str
    description: str = ""
    created_at: datetime = Field(default_factory=now_utc)


def check_name(name: str) -> str:
    """A list name: one line of at most 80 characters, surrounding spaces dropped."""
    clean = " ".join(name.split())
    if not clean:
        raise ListError("a reading list needs a name")
    if len(clean) > MAX_NAME:
        raise ListError(f"list name is {len(clean)} characters long; at most {MAX_NAME}")
    return clean


class ReadingLists:
    """The store's reading lists: create, describe, rename, delete, and membership."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _load(self) -> dict[str, ReadingList]:
        raw = self.store.get_value(LISTS_KEY) or {}
        return {name: ReadingList.model_validate(value) for name, value in raw.items()}

    def _save(self, lists: dict[str, ReadingList]) -> None:
        self.store.set_value(LISTS_KEY, {n: rl.model_dump(mode="json") for n, rl in sorted(lists.items())})

    def all(self) -> list[ReadingList]:
        """Every list, by name."""
        return sorted(self._load().values(), key=lambda rl: rl.name.casefold())

    def get(self, name: str) -> ReadingList:
        name = " ".join(name.split())
        lists = self._load()
        if name not in lists:
            known = ", ".join(sorted(lists)) or "none yet"
            raise ListError(
                f"no reading list named {name!r} (lists: {known}); 'triage list create' makes one"
            )
        return lists[name]

    def exists(self, name: str) -> bool:
        return " ".join(name.split()) in self._load()

    def create(self, name: str, description: str = "", *, exist_ok: bool = False) -> ReadingList:
        name = check_name(name)
        lists = self._load()
        if name in lists:
            if exist_ok:
                return lists[name]
            raise ListError(f"a reading list named {name!r} already exists")
        lists[name] = ReadingList(name=name, description=description.strip())
        self._save(lists)
        return lists[name]

    def describe(self, name: str, description: str) -> ReadingList:
        lists = self._load()
        name = self.get(name).name
        lists[name] = lists[name].model_copy(update={"description": description.strip()})
        self._save(lists)
        return lists[name]

    def members(self, name: str) -> list[str]:
        """Ids of the papers in a list."""
        return list(self.store.iter_ids({"lists": {"$contains": name}}))

    def counts(self) -> dict[str, int]:
        return {rl.name: len(self.members(rl.name)) for rl in self.all()}

    def add(self, name: str, ids: Sequence[str]) -> int:
        """Put papers in a list; returns how many were not in it yet."""
        name = self.get(name).name
        return self._change(ids, lambda current: [*current, name] if name not in current else current)

    def remove(self, name: str, ids: Sequence[str]) -> int:
        """Take papers out of a list; returns how many were in it."""
        name = self.get(name).name
        return self._change(ids, lambda current: [n for n in current if n != name])

    def rename(self, old: str, new: str) -> ReadingList:
        new = check_name(new)
        lists = self._load()
        old = self.get(old).name
        if new in lists and new != old:
            raise ListError(f"a reading list named {new!r} already exists")
        members = self.members(old)
        lists[new] = lists.pop(old).model_copy(update={"name": new})
        # Members first: if this stops half-way, the old name still finds what was not moved yet.
        self._change(members, lambda current: list(dict.fromkeys(new if n == old else n for n in current)))
        self._save(lists)
        return lists[new]

    def delete(self, name: str) -> int:
        """Delete a list (never its papers); returns how many papers were in it."""
        lists = self._load()
        name = self.get(name).name
        removed = self._change(self.members(name), lambda current: [n for n in current if n != name])
        del lists[name]
        self._save(lists)
        return removed

    def _change(self, ids: Iterable[str], edit: Callable[[list[str]], list[str]]) -> int:
        wanted = list(dict.fromkeys(ids))
        found = {item.paper.id: item.decision.lists for item in self.store.get_many(wanted)}
        missing = [i for i in wanted if i not in found]
        if missing:
            raise ListError(f"no paper with id {missing[0]!r} in the store")
        changes = {pid: edit(current) for pid, current in found.items()}
        changes = {pid: lists for pid, lists in changes.items() if lists != found[pid]}
        if changes:
            self.store.set_memberships(changes)
        return len(changes)
