"""What is not per paper, kept in the store's small second collection: named records (saved
feeds, their state, reading-list definitions) and store-wide key-values."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from assistant.errors import is_read_only
from assistant.store.connection import Connection
from assistant.store.people import PEOPLE_RECORD, SHARED_LIST_RECORD, View


class Records(Connection):
    """Records of the meta collection: named records of a kind, and store-wide values by key."""

    # -- named records (saved feeds, their state, reading-list definitions) -----

    def named_records(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every record of a kind (`feed`, `feed-state`, LIST_RECORD for reading-list
        definitions) kept in the meta collection, by name: one record each, so writers of two
        never clash."""
        res = self.meta.get(where={"kind": kind}, include=["documents"])
        out = {}
        for doc in res["documents"] or []:
            value = json.loads(doc) if doc else None
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                out[value["name"]] = value
        return out

    def put_named_record(self, kind: str, value: dict[str, Any]) -> None:
        """Create or replace one named record (`value["name"]` names it)."""
        with self.write_lock():
            self.meta.upsert(
                ids=[self._named_record_id(kind, value["name"])],
                documents=[json.dumps(value, ensure_ascii=False)],
                metadatas=[{"kind": kind}],
                embeddings=[[0.0]],  # type: ignore[arg-type]
            )

    def delete_named_record(self, kind: str, name: str) -> None:
        with self.write_lock():
            self.meta.delete(ids=[self._named_record_id(kind, name)])

    @staticmethod
    def _named_record_id(kind: str, name: str) -> str:
        return f"{kind}:{hashlib.sha256(name.encode('utf-8')).hexdigest()[:32]}"

    # -- store-wide values ----------------------------------------------------

    def get_value(self, key: str) -> Any:
        res = self.meta.get(ids=[key], include=["documents"])
        docs = res["documents"] or []
        return json.loads(docs[0]) if docs and docs[0] else None

    def set_value(self, key: str, value: Any) -> None:
        with self.write_lock():
            self.meta.upsert(ids=[key], documents=[json.dumps(value)], embeddings=[[0.0]])  # type: ignore[arg-type]

    # -- the store's people (`assistant.store.people`) -----------------------------

    def people(self) -> tuple[str | None, list[str]]:
        """(the store's first person, everyone who has used it) as recorded; (None, []) in a
        store no version with people has opened for writing."""
        record = self._people_record()
        return record.get("first"), list(record.get("people") or [])

    def _people_record(self) -> dict[str, Any]:
        value = self.get_value(PEOPLE_RECORD)
        if not isinstance(value, dict) or not isinstance(value.get("first"), str):
            return {}
        names = [str(n) for n in value.get("people") or () if isinstance(n, str)]
        agendas = value.get("agendas")
        agendas = agendas if isinstance(agendas, dict) else {}
        return {
            "first": value["first"],
            "people": list(dict.fromkeys([value["first"], *names])),
            "agendas": {str(k): str(v) for k, v in agendas.items() if isinstance(v, str)},
            "plain_agenda": value.get("plain_agenda") if isinstance(value.get("plain_agenda"), str) else None,
            "slots": [str(a) for a in value.get("slots") or () if isinstance(a, str)],
        }

    def _assessed_agenda(self) -> str | None:
        """The agenda the plain keys' assessments were made with (a store from before agendas
        were recorded): that of one assessed paper; None when none is."""
        found = self.get_stored(where={"relevance": {"$gte": 0.0}}, limit=1, include=["metadatas"])
        for meta in found["metadatas"] or []:
            try:
                value = json.loads(str((meta or {}).get("assessment") or "{}")).get("agenda_hash")
            except ValueError:
                continue
            if isinstance(value, str) and value:
                return value
        return None

    def join(self, person: str, agenda: str | None = None) -> View:
        """Act as `person`, with the agenda whose hash is `agenda`, from now on: recorded among
        the store's people (the first one to open a store, one made before there were people
        included, takes its plain keys) with their agenda, and the view set (`assistant.store.
        people`). A store that cannot be written (a read-only mount) is read as the record says."""
        record = self._people_record()
        if _joined(record, person, agenda) != record:
            try:
                with self.write_lock():
                    record = self._people_record()
                    if record.get("plain_agenda") is None:
                        record["plain_agenda"] = self._assessed_agenda()
                    updated = _joined(record, person, agenda)
                    if updated != record:
                        self.set_value(PEOPLE_RECORD, updated)
                        record = updated
            except Exception as exc:  # a store that cannot be written: read it as it is
                if not is_read_only(exc):
                    raise
                record = _joined(record, person, agenda)
        plain = record.get("plain_agenda")
        self.view = View(
            person=person,
            first=record.get("first") == person,
            shared=frozenset(self.named_records(SHARED_LIST_RECORD)),
            slot=agenda if agenda is not None and plain is not None and agenda != plain else None,
        )
        return self.view

    @contextmanager
    def acting_as(self, person: str) -> Iterator[View]:
        """Read and write as another of the store's people for a while (an export reading
        everyone's decisions, a restore putting them back): their decisions and lists, then this
        one's again. Assessments read meanwhile are of this one's agenda. The view is the
        store's: not for a store other threads use meanwhile."""
        mine = self.view
        first = self._people_record().get("first") or mine.person
        self.view = View(person=person, first=first == person, shared=mine.shared, slot=mine.slot)
        try:
            yield self.view
        finally:
            self.view = mine

    def add_people(self, names: Iterable[str]) -> None:
        """Record these people among the store's (a restore of their decisions)."""
        wanted = [n for n in names if n]
        if not wanted or set(wanted) <= set(self.people()[1]):
            return
        with self.write_lock():
            record = self._people_record() or _joined({}, self.view.person, None)
            updated = {**record, "people": list(dict.fromkeys([*record["people"], *wanted]))}
            if updated != record:
                self.set_value(PEOPLE_RECORD, updated)

    def share_lists(self, names: Iterable[str], *, only: bool = False) -> None:
        """These reading lists are shared: this view files into them from now on; with `only`,
        no other is (one deleted meanwhile, perhaps by someone else, is no longer mapped to the
        shared keys: a list of this person's own made with its name is their own)."""
        shared = frozenset(names) if only else self.view.shared | set(names)
        if shared != self.view.shared:
            self.view = replace(self.view, shared=shared)


def _joined(record: dict[str, Any], person: str, agenda: str | None) -> dict[str, Any]:
    """The people record with `person` in it, using `agenda`: the plain agenda is the first one
    recorded, replaced by this one once no person's agenda is it any more."""
    first = record.get("first") or person
    people = list(dict.fromkeys([*(record.get("people") or [first]), person]))
    agendas = dict(record.get("agendas") or {})
    plain = record.get("plain_agenda")
    slots = list(record.get("slots") or [])  # agendas with assessments under `a:<hash>:`
    if agenda is not None:
        agendas[person] = agenda
        # Replaced only when every person's agenda is known (one who has not used this version
        # yet may still read with it), none is it, and the new one has no keys of its own yet
        # (whose assessments would be left unread).
        if plain is None or (
            set(people) <= set(agendas) and plain not in agendas.values() and agenda not in slots
        ):
            plain = agenda
        if agenda != plain and agenda not in slots:
            slots.append(agenda)
    return {"first": first, "people": people, "agendas": agendas, "plain_agenda": plain, "slots": slots}
