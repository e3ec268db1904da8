"""Writing what is added to stored papers without re-embedding them: assessments (and failed
ones), decisions, reading-list memberships, and other per-paper metadata values."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from assistant.errors import StoreError, is_read_only
from assistant.models import Assessment, Decision, Status, now_utc
from assistant.store.people import (
    ADDED_BY,
    SHARED_PREFIX,
    added_by_key,
    everyone,
    holds_something,
    shared_key,
)
from assistant.store.reads import Reads
from assistant.store.records import Records
from assistant.store.schema import (
    _DECISION_KEYS,
    LEGACY_LIST_TABLE,
    LEGACY_LISTS,
    LIST_RECORD,
    assessment_metadata,
    decision_from,
    decision_metadata,
    list_key,
)

# ({paper id: {person: decision}}, {paper id: {shared list: who added the paper}}): `lab_keys`
LabKeys = tuple[dict[str, dict[str, Decision]], dict[str, dict[str, str]]]


class Annotations(Reads, Records):
    """What the researcher and the engines add to stored papers, written as metadata only
    (nothing is re-embedded): assessments, decisions, list memberships, other per-paper values."""

    # -- assessments -----------------------------------------------------------

    def set_assessment(self, paper_id: str, assessment: Assessment) -> None:
        self.set_assessments({paper_id: assessment})

    def set_assessments(self, assessments: dict[str, Assessment]) -> None:
        """Record assessments (metadata only: nothing is re-embedded)."""
        self._write({pid: assessment_metadata(a) for pid, a in assessments.items()})

    def set_failures(self, failures: dict[str, tuple[str, str]]) -> None:
        """Record failed assessments (id -> (cache key, reason)); an earlier assessment is kept."""
        stamp = time.time()
        self._write(
            {
                pid: {"failed": True, "failed_key": key, "failed_reason": reason[:1000], "touched": stamp}
                for pid, (key, reason) in failures.items()
            }
        )

    # -- decisions (status, star, note, tags) ----------------------------------

    def lab_keys(self, ids: Sequence[str]) -> LabKeys:
        """What these papers' stored keys hold besides this person's view of them: every other
        person's decision where they hold one (a status, a star, a note, tags, a list), and
        each shared reading list a paper is in with who added it:
        ({paper id: {person: decision}}, {paper id: {shared list: person}})."""
        first, _ = self.people()
        me = self.view.person
        decisions: dict[str, dict[str, Decision]] = {}
        shared: dict[str, dict[str, str]] = {}
        for start in range(0, len(ids), self._batch):
            res = self.get_stored(ids=list(ids[start : start + self._batch]), include=["metadatas"])
            for pid, meta in zip(res["ids"], res["metadatas"] or [], strict=True):
                meta = dict(meta or {})
                for who, own in everyone(meta, first or me).items():
                    if who != me and holds_something(own):
                        decisions.setdefault(pid, {})[who] = decision_from(own)
                for key, value in meta.items():
                    if key.startswith(SHARED_PREFIX) and not key.endswith(ADDED_BY) and value:
                        by = meta.get(key + ADDED_BY)
                        shared.setdefault(pid, {})[key[len(SHARED_PREFIX) :]] = str(by or "")
        return decisions, shared

    def set_decision(self, paper_id: str, decision: Decision) -> None:
        self.set_decisions({paper_id: decision})

    def set_decisions(self, decisions: dict[str, Decision]) -> None:
        """Record decisions (metadata only)."""
        self._write({pid: decision_metadata(d) for pid, d in decisions.items()})

    def update_decision(self, paper_id: str, **changes: Any) -> Decision:
        """Change some fields of a paper's decision and return the new decision."""
        item = self.get(paper_id)
        if item is None:
            raise StoreError(f"no paper with id {paper_id!r} in the store")
        decision = Decision.model_validate({**item.decision.model_dump(), **changes, "decided_at": now_utc()})
        self.set_decision_fields(paper_id, decision, changes)
        return decision

    def set_decision_fields(self, paper_id: str, decision: Decision, fields: Iterable[str]) -> None:
        """Write only these fields of a decision (and when it was made): what other processes
        changed in the rest of it (a note, a list) survives."""
        keys = {_DECISION_KEYS[f] for f in fields} | {"decided_at", "touched", "seed"}
        self._write({paper_id: {k: v for k, v in decision_metadata(decision).items() if k in keys}})

    def set_status(self, ids: Sequence[str], status: Status, *, seed: bool = False) -> None:
        """Give these papers a status (only the status and when it was decided are written);
        `seed` marks decisions that come from an import, not from working down the queue."""
        stamp, when = time.time(), now_utc().isoformat()
        meta = {"status": status.value, "decided_at": when, "touched": stamp, "seed": True if seed else None}
        self._write({pid: dict(meta) for pid in ids})

    # -- reading-list memberships ----------------------------------------------

    def set_memberships(self, changes: dict[str, dict[str, bool]]) -> None:
        """Put papers in reading lists or take them out: {paper id: {list name: member?}}.
        Only those lists' keys are written, so concurrent changes to other lists survive."""
        stamp = time.time()
        writes: dict[str, dict[str, Any]] = {}
        for pid, names in changes.items():
            writes[pid] = {list_key(n): True if member else None for n, member in names.items()}
            writes[pid]["touched"] = stamp
        self._write(writes)

    def set_shared_memberships(self, added: dict[str, dict[str, str | None]]) -> None:
        """Put papers in shared reading lists as someone else added them (a renamed list, a
        restored one): {paper id: {shared list: who added it}}, written as stored, not through
        this person's view (which would name this person as the one who added them)."""
        stamp = time.time()
        writes: dict[str, dict[str, Any]] = {}
        for pid, names in added.items():
            writes[pid] = {"touched": stamp}
            for name, by in names.items():
                writes[pid] |= {shared_key(name): True, added_by_key(name): by}
        ids = list(writes)
        for start in range(0, len(ids), self._batch):
            self.update_stored({pid: writes[pid] for pid in ids[start : start + self._batch]})

    def _convert_lists(self) -> None:
        """Move a store made before per-list keys to them: one record per list definition, one
        metadata key per membership. Idempotent; a store that cannot be written (a read-only
        mount) keeps the old form, which reads still understand."""
        legacy = self.get_value(LEGACY_LIST_TABLE)
        if not isinstance(legacy, dict):
            return
        try:
            with_legacy: set[str] = set()
            for name, value in legacy.items():
                self.put_named_record(LIST_RECORD, {**value, "name": name})
                members = list(self.iter_ids({LEGACY_LISTS: {"$contains": name}}))
                self._write({pid: {list_key(name): True} for pid in members})
                with_legacy.update(members)
            self._write({pid: {LEGACY_LISTS: None} for pid in with_legacy})
            with self.write_lock():
                self.meta.delete(ids=[LEGACY_LIST_TABLE])
        except Exception as exc:  # a store that cannot be written (a server's) stays as it is
            if not is_read_only(exc):
                raise

    # -- other per-paper values ------------------------------------------------

    def set_added(self, added: dict[str, datetime]) -> None:
        """Set when papers were first added (a restore keeps the original time)."""
        stamp = time.time()
        self._write({pid: {"added_at": when.isoformat(), "touched": stamp} for pid, when in added.items()})

    def set_paper_values(self, values: dict[str, dict[str, Any]]) -> None:
        """Write some metadata keys of stored papers that no other method owns (such as when
        enrichment last looked a paper up); None removes a key. Not a change readers refresh on."""
        self._write(values)

    # -- the one metadata writer -----------------------------------------------

    def _write(self, metadatas: dict[str, dict[str, Any]]) -> None:
        """Write some metadata keys of stored papers (None removes a key), in batches."""
        ids = list(metadatas)
        with self.write_lock():
            self._require(ids)
            for start in range(0, len(ids), self._batch):
                chunk = ids[start : start + self._batch]
                self.collection.update(ids=chunk, metadatas=[metadatas[i] for i in chunk])

    def _require(self, ids: Sequence[str]) -> None:
        found = self.stored_ids(ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise StoreError(f"no paper with id {missing[0]!r} in the store")
