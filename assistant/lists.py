"""Reading lists: named, described sets of papers.

A list's name and description are one record per list (in Chroma beside the papers); its
membership is a key of each member's metadata, so a paper can be in many lists and deleting a
list never deletes a paper. No write rewrites what another list holds: two processes creating
lists, or filing the same paper into two lists, at once lose nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from assistant.errors import TriageError
from assistant.models import now_utc
from assistant.store import Store, list_key
from assistant.store.people import ADDED_BY, SHARED_LIST_RECORD, View, added_by_key

MAX_NAME = 80


class ListError(TriageError):
    """A reading list that does not exist, already exists, or has an unusable name."""


class ReadingList(BaseModel):
    name: str
    description: str = ""
    created_at: datetime = Field(default_factory=now_utc)
    # A shared list is the lab's (every person of the store sees and files into it); any other
    # is its maker's own. `created_by` names the maker of a shared list.
    shared: bool = False
    created_by: str | None = None


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
        """This person's lists and the shared ones (a shared list's name hides an own list's)."""
        stored = self.store.named_records(self.store.view.list_record)
        shared = self.store.named_records(SHARED_LIST_RECORD)
        # The shared lists as they are now: made or deleted since the store was opened, perhaps
        # by someone else.
        self.store.share_lists(shared, only=True)
        stored.update({n: {**v, "shared": True} for n, v in shared.items()})
        return {name: ReadingList.model_validate(value) for name, value in stored.items()}

    def _kind(self, reading_list: ReadingList) -> str:
        return SHARED_LIST_RECORD if reading_list.shared else self.store.view.list_record

    def _save(self, reading_list: ReadingList) -> None:
        self.store.put_named_record(self._kind(reading_list), reading_list.model_dump(mode="json"))
        if reading_list.shared:
            self.store.share_lists([reading_list.name])

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

    def create(
        self,
        name: str,
        description: str = "",
        *,
        exist_ok: bool = False,
        shared: bool = False,
        created_by: str | None = None,
    ) -> ReadingList:
        """Make a list: this person's own, or (`shared`) one every person of the store files into
        (made by this person, or by `created_by`: a restored one)."""
        name = check_name(name)
        lists = self._load()
        if name in lists:
            if exist_ok:
                return lists[name]
            raise ListError(f"a reading list named {name!r} already exists")
        if shared:
            self._check_shareable(name)
        made = ReadingList(
            name=name,
            description=description.strip(),
            shared=shared,
            created_by=(created_by or self.store.view.person) if shared else None,
        )
        lists[name] = made
        self._save(made)
        return made

    def _check_shareable(self, name: str) -> None:
        """A shared list's name must be no person's own list's (the shared list would hide it)."""
        if name.endswith(ADDED_BY):
            raise ListError(f"a shared list's name cannot end with {ADDED_BY!r}")
        first, people = self.store.people()
        for person in people:
            kind = View(person=person, first=person == first).list_record
            if name in self.store.named_records(kind):
                raise ListError(f"{person} has a reading list named {name!r}: choose another name")

    def added_by(self, name: str) -> dict[str, str]:
        """Who put each paper in a shared list: {paper id: person} ({} for an own list)."""
        if not self.get(name).shared:
            return {}
        key = added_by_key(name)
        members = self.store.iter_metadata({list_key(name): True})
        return {pid: str(meta.get(key) or "") for pid, meta in members}

    def describe(self, name: str, description: str) -> ReadingList:
        lists = self._load()
        name = self.get(name).name
        lists[name] = lists[name].model_copy(update={"description": description.strip()})
        self._save(lists[name])
        return lists[name]

    def members(self, name: str) -> list[str]:
        """Ids of the papers in a list."""
        return list(self.store.iter_ids({list_key(name): True}))

    def counts(self) -> dict[str, int]:
        return {rl.name: len(self.members(rl.name)) for rl in self.all()}

    def add(self, name: str, ids: Sequence[str]) -> int:
        """Put papers in a list; returns how many were not in it yet."""
        name = self.get(name).name
        return self._change(ids, name, True)

    def remove(self, name: str, ids: Sequence[str]) -> int:
        """Take papers out of a list; returns how many were in it."""
        name = self.get(name).name
        return self._change(ids, name, False)

    def rename(self, old: str, new: str) -> ReadingList:
        new = check_name(new)
        lists = self._load()
        old = self.get(old).name
        if new in lists and new != old:
            raise ListError(f"a reading list named {new!r} already exists")
        if new == old:
            return lists[old]
        if lists[old].shared:
            self._check_shareable(new)
        members = self.members(old)
        renamed = lists[old].model_copy(update={"name": new})
        # The new list first, then its members, then the old list goes: if this stops half-way,
        # every paper is still in one of the two.
        self._save(renamed)
        if renamed.shared:  # each paper keeps who added it
            who = self.added_by(old)
            self.store.set_shared_memberships({pid: {new: who.get(pid) or None} for pid in members})
        else:
            self._change(members, new, True)
        self._change(members, old, False)
        self.store.delete_named_record(self._kind(lists[old]), old)
        return renamed

    def delete(self, name: str) -> int:
        """Delete a list (never its papers); returns how many papers were in it."""
        found = self.get(name)
        removed = self._change(self.members(found.name), found.name, False)
        self.store.delete_named_record(self._kind(found), found.name)
        return removed

    def _change(self, ids: Iterable[str], name: str, member: bool) -> int:
        """Put papers in the list or take them out; returns how many changed."""
        wanted = list(dict.fromkeys(ids))
        found = {item.paper.id: name in item.decision.lists for item in self.store.get_many(wanted)}
        missing = [i for i in wanted if i not in found]
        if missing:
            raise ListError(f"no paper with id {missing[0]!r} in the store")
        changes = {pid: {name: member} for pid, was in found.items() if was != member}
        if changes:
            self.store.set_memberships(changes)
        return len(changes)
