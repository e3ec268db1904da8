"""Restoring `triage export --format jsonl` records: paper, assessment, decision, reading lists.

A full record is an object with a `paper` object and a `decision` object (what the JSONL export
and `triage ranked --json` write); any other JSON record is an ordinary paper record.

A record from a store several people use names whose its decision is (`person`) and holds the
others' (`people`): each goes to its person (a person the store has not seen is recorded among
its people); a record that names nobody is the restorer's, as a single-person export is.

Into a store that already holds the paper: the paper merges as any re-import does; the newer
decision (by `decided_at`) wins for status, star, note and tags, and list memberships are
unioned (an import never takes a paper out of a list); the newer assessment (by `created_at`)
wins. Lists that do not exist yet are created with the exported description; existing lists
keep theirs.

A record exported with `--vectors` carries its paper's vector (`embedding`, see
assistant.export.jsonl): the paper is stored with it and not embedded, when the vector was made
by this store's embedder and of the text the store would embed (not one edited since, or cut to
size on the way in). Any other vector is left aside with a note and the paper is embedded as
usual; a malformed one (not base64 float32 numbers, a length that is not its `dims`) is a located
note, never a failed record.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import ValidationError

from assistant.config import PERSON_NAME
from assistant.ingest.base import ParseResult
from assistant.ingest.records import RecordError
from assistant.lists import ListError, ReadingLists
from assistant.models import Assessment, Decision, Paper
from assistant.store import Store
from assistant.store.people import shared_key

CHUNK = 1000  # papers read at a time when shared lists are restored


@dataclass(frozen=True)
class GivenVector:
    """A paper's vector as an export gave it: made by `embedder`, of the text whose sha256
    begins with `document_sha256`, as float32 numbers."""

    embedder: str
    document_sha256: str
    values: np.ndarray


@dataclass
class Restored:
    """What a full record carries besides the paper."""

    decision: Decision
    assessment: Assessment | None = None
    lists: dict[str, str] = field(default_factory=dict)  # name -> description
    added_at: datetime | None = None
    vector: GivenVector | None = None
    # From a store several people use: whose `decision` is (None: the restorer's), and every
    # other person's decision with their lists (name -> description).
    person: str | None = None
    people: dict[str, tuple[Decision, dict[str, str]]] = field(default_factory=dict)
    # The lab's shared lists the paper is in: name -> (description, maker, who added it).
    shared: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)


class RestoredPapers(list[Paper]):
    """The papers of full records, which can tell the vectors their records carry (by paper id):
    `store_papers` stores those instead of embedding."""

    def __init__(self, papers: Iterable[Paper], restored: Mapping[str, Restored]) -> None:
        super().__init__(papers)
        self.restored = restored

    def vectors(self) -> dict[str, GivenVector]:
        return {pid: r.vector for pid, r in self.restored.items() if r.vector is not None}


@dataclass
class RestoreResult(ParseResult):
    """Papers parsed from JSON, with what full records say about them (by paper id)."""

    restored: dict[str, Restored] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.papers = RestoredPapers(self.papers, self.restored)


def is_full_record(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("paper"), dict)
        and isinstance(record.get("decision"), dict)
    )


def _errors(exc: ValidationError, what: str) -> RecordError:
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first["loc"])
    return RecordError(f"'{what}{'.' + where if where else ''}': {first['msg']}")


def parse_vector(raw: Any) -> GivenVector:
    """A record's `embedding`, checked for shape; raises ValueError saying what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("must be an object with 'embedder', 'document_sha256' and 'float32'")
    embedder, digest = raw.get("embedder"), raw.get("document_sha256")
    if not isinstance(embedder, str) or not embedder:
        raise ValueError("'embedder' must name the embedder that made the vector")
    if not isinstance(digest, str) or not digest:
        raise ValueError("'document_sha256' must name the text the vector is of")
    data = raw.get("float32")
    if isinstance(data, str):
        try:
            packed = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("'float32' is not base64") from None
        if len(packed) % 4:
            raise ValueError(f"'float32' holds {len(packed)} bytes, not whole float32 numbers")
        values = np.frombuffer(packed, dtype="<f4").astype(np.float32)
    elif isinstance(data, list):  # a hand-made file may give the numbers as they are
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in data):
            raise ValueError("'float32' must be base64 or a list of numbers")
        values = np.array([float(x) for x in data], dtype=np.float32)
    else:
        raise ValueError("'float32' must be base64 of little-endian float32 numbers")
    if not len(values):
        raise ValueError("the vector is empty")
    dims = raw.get("dims", len(values))
    if not isinstance(dims, int) or isinstance(dims, bool) or dims != len(values):
        raise ValueError(f"it has {len(values)} numbers, but 'dims' says {dims!r}")
    if not np.isfinite(values).all():
        raise ValueError("it holds numbers that are not finite (NaN or infinity)")
    return GivenVector(embedder, digest, values)


def parse_full_record(record: dict[str, Any], notes: list[str] | None = None) -> tuple[Paper, Restored]:
    """The paper (its id and sources as exported) and the rest of a full record. A malformed
    `embedding` is left out with a note in `notes` (the paper is then embedded)."""
    data = record["paper"]
    try:
        paper = Paper.model_validate(data) if data.get("id") else Paper.create(**data)
    except (ValidationError, TypeError) as exc:
        if isinstance(exc, ValidationError):
            raise _errors(exc, "paper") from None
        raise RecordError(f"'paper' is not a paper record: {exc}") from None
    try:
        decision = Decision.model_validate(record["decision"])
    except ValidationError as exc:
        raise _errors(exc, "decision") from None
    assessment = None
    if record.get("assessment") is not None:
        try:
            assessment = Assessment.model_validate(record["assessment"])
        except ValidationError as exc:
            raise _errors(exc, "assessment") from None
    lists = _lists(record.get("lists"), decision, "lists")
    added_at = None
    if record.get("added_at"):
        try:
            added_at = datetime.fromisoformat(str(record["added_at"]))
        except ValueError:
            raise RecordError(f"'added_at' must be an ISO date-time, got {record['added_at']!r}") from None
    vector = None
    if record.get("embedding") is not None:
        try:
            vector = parse_vector(record["embedding"])
        except ValueError as exc:
            if notes is not None:
                notes.append(f"'embedding': {exc}; the vector is left out and the paper embedded")
    person = record.get("person")
    if person is not None and not (isinstance(person, str) and PERSON_NAME.fullmatch(person)):
        raise RecordError(f"'person' must name a person (as --user does), not {person!r}")
    raw_people = record.get("people") or {}
    if not isinstance(raw_people, dict):
        raise RecordError("'people' must be an object of person names and their decisions")
    people: dict[str, tuple[Decision, dict[str, str]]] = {}
    for who, held in raw_people.items():
        if not PERSON_NAME.fullmatch(str(who)):
            raise RecordError(f"'people' holds {who!r}, which cannot name a person (as --user does)")
        if not isinstance(held, dict) or not isinstance(held.get("decision"), dict):
            raise RecordError(f"'people.{who}' must be an object with a 'decision'")
        try:
            theirs = Decision.model_validate(held["decision"])
        except ValidationError as exc:
            raise _errors(exc, f"people.{who}.decision") from None
        people[str(who)] = (theirs, _lists(held.get("lists"), theirs, f"people.{who}.lists"))
    shared = _shared_lists(record.get("shared_lists"))
    if shared:  # the lab's lists are not the exporter's own
        decision = decision.model_copy(update={"lists": [n for n in decision.lists if n not in shared]})
        lists = {n: d for n, d in lists.items() if n not in shared}
    return paper, Restored(decision, assessment, lists, added_at, vector, person, people, shared)


def _shared_lists(raw: Any) -> dict[str, tuple[str, str | None, str | None]]:
    """A record's `shared_lists`: name -> (description, maker, who added the paper)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RecordError("'shared_lists' must be an object of shared list names")
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for name, held in raw.items():
        if not isinstance(held, dict):
            raise RecordError(f"'shared_lists.{name}' must be an object")
        people = [held.get("created_by"), held.get("added_by")]
        for who in people:
            if who is not None and not (isinstance(who, str) and PERSON_NAME.fullmatch(who)):
                raise RecordError(f"'shared_lists.{name}' names {who!r}, which cannot name a person")
        out[str(name)] = (str(held.get("description") or ""), people[0], people[1])
    return out


def _lists(raw: Any, decision: Decision, where: str) -> dict[str, str]:
    """A record's lists (name -> description; a plain list of names is read too), with every
    list the decision names."""
    raw = raw or {}
    if isinstance(raw, list):
        raw = {str(n): "" for n in raw}
    if not isinstance(raw, dict):
        raise RecordError(f"'{where}' must be an object of list names and descriptions")
    lists = {str(n): str(d or "") for n, d in raw.items()}
    for name in decision.lists:
        lists.setdefault(name, "")
    return lists


@dataclass
class VectorCheck:
    """Which vectors a file gives this store may take (`take`, chunk by chunk), and the notes
    on those it may not (`notes`): made by another embedder, of another text, of another length."""

    identity: str
    length: int | None
    foreign: dict[str, int] = field(default_factory=dict)  # embedder -> papers
    other_text: int = 0
    other_length: dict[int, int] = field(default_factory=dict)  # length -> papers
    taken: int = 0

    def take(
        self, store: Store, papers: Iterable[Paper], vectors: Mapping[str, GivenVector]
    ) -> dict[str, Any]:
        """The vectors of these papers (as they will be stored) this store may take, by text."""
        from assistant.export.jsonl import document_sha256

        out: dict[str, Any] = {}
        for paper in papers:
            given = vectors.get(paper.id)
            if given is None:
                continue
            if given.embedder != self.identity:
                self.foreign[given.embedder] = self.foreign.get(given.embedder, 0) + 1
                continue
            if given.document_sha256 != document_sha256(paper.document):
                self.other_text += 1
                continue
            if self.length is None:  # an empty store whose embedder does not say: ask it once
                self.length = len(store.embed(["length"])[0])
            if len(given.values) != self.length:
                n = len(given.values)
                self.other_length[n] = self.other_length.get(n, 0) + 1
                continue
            out[paper.document] = given.values
            self.taken += 1
        return out

    def notes(self, where: str) -> list[str]:
        def papers(n: int) -> str:
            return f"{n} paper{'s' if n != 1 else ''}"

        notes = [
            f"{where}: {papers(n)} came with vectors made by {name!r}, not by this store's embedder "
            f"{self.identity!r}: those vectors were ignored and the papers embedded"
            for name, n in sorted(self.foreign.items())
        ]
        if self.other_text:
            notes.append(
                f"{where}: {papers(self.other_text)} came with vectors of another text than the paper's "
                "(edited since the export, or cut to size): those papers were embedded"
            )
        notes += [
            f"{where}: {papers(n)} came with vectors of {length} numbers, this store's have "
            f"{self.length}: those papers were embedded"
            for length, n in sorted(self.other_length.items())
        ]
        return notes


def _stamp(value: datetime | None) -> float:
    return value.timestamp() if value is not None else float("-inf")


def merge_decision(stored: Decision, incoming: Decision) -> Decision:
    """The newer decision, with the list memberships of both."""
    newer = incoming if _stamp(incoming.decided_at) > _stamp(stored.decided_at) else stored
    lists = list(dict.fromkeys([*stored.lists, *incoming.lists]))
    return newer.model_copy(update={"lists": lists})


def apply_restored(store: Store, restored: dict[str, Restored], ids: dict[str, str]) -> tuple[int, list[str]]:
    """Write decisions, assessments and lists of imported papers (`ids`: file id -> stored id).
    Each decision goes to its person (a record from a store several people use names them), an
    unnamed one to the restorer; a person the store has not seen yet is recorded among its people.

    Returns how many papers changed, and the list names that could not be created.
    """
    targets: dict[str, Restored] = {ids.get(pid, pid): state for pid, state in restored.items()}
    me = store.view.person
    by_person: dict[str, dict[str, tuple[Decision, dict[str, str]]]] = {}
    for pid, state in targets.items():
        by_person.setdefault(state.person or me, {})[pid] = (state.decision, state.lists)
        for who, theirs in state.people.items():
            by_person.setdefault(who, {})[pid] = theirs
    others = [who for who in by_person if who != me]
    if others:
        store.add_people(others)
    problems: list[str] = []
    changed = _restore_shared(store, targets, problems)
    for who, decisions in by_person.items():
        with store.acting_as(who) if who != me else contextlib.nullcontext():
            changed |= _restore_decisions(store, decisions, problems)
    assessments: dict[str, Assessment] = {}
    added: dict[str, datetime] = {}
    for item in store.get_many(list(targets)):
        pid, state = item.paper.id, targets[item.paper.id]
        if state.added_at is not None and (item.added_at is None or state.added_at < item.added_at):
            added[pid] = state.added_at  # the paper keeps its first arrival: a digest does not see it as new
        new = state.assessment
        if new is not None and (item.assessment is None or new.created_at > item.assessment.created_at):
            if new != item.assessment:
                assessments[pid] = new
                changed.add(pid)
    if added:
        store.set_added(added)
    if assessments:
        store.set_assessments(assessments)
    return len(changed), problems


def _restore_decisions(
    store: Store, decisions: dict[str, tuple[Decision, dict[str, str]]], problems: list[str]
) -> set[str]:
    """Merge these decisions (with their lists: name -> description) into the store's, as the
    person the store acts as; the papers whose decision changed. A list that cannot be made is
    said in `problems` and left out."""
    reading = ReadingLists(store)
    bad: set[str] = set()
    for name, description in sorted({n: d for _, ls in decisions.values() for n, d in ls.items()}.items()):
        try:
            if reading.create(name, description, exist_ok=True).name != name:
                raise ListError(f"{name!r} is not a usable list name")
        except ListError as exc:
            problems.append(str(exc))
            bad.add(name)
    merged: dict[str, Decision] = {}
    for item in store.get_many(list(decisions)):
        incoming = decisions[item.paper.id][0]
        incoming = incoming.model_copy(update={"lists": [n for n in incoming.lists if n not in bad]})
        decision = merge_decision(item.decision, incoming)
        if decision != item.decision:
            merged[item.paper.id] = decision
    if merged:
        # A whole decision writes every list it names: not the shared ones the paper is in
        # already, whose keys say who added it (a decision only ever adds to lists).
        shared = store.view.shared
        store.set_decisions(
            {
                pid: d.model_copy(update={"lists": [n for n in d.lists if n not in shared]})
                for pid, d in merged.items()
            }
        )
    return set(merged)


def _restore_shared(store: Store, targets: dict[str, Restored], problems: list[str]) -> set[str]:
    """Make the lab's shared lists the records name (as shared, with their makers) and put the
    papers back in them with who added each; a paper already in one keeps its adder. The papers
    that changed; a list that cannot be made shared (someone's own list has its name) is said in
    `problems` and left out."""
    wanted = {name: (d, maker) for s in targets.values() for name, (d, maker, _) in s.shared.items()}
    if not wanted:
        return set()
    reading = ReadingLists(store)
    made: set[str] = set()
    for name, (description, maker) in sorted(wanted.items()):
        try:
            found = reading.create(name, description, exist_ok=True, shared=True, created_by=maker)
            if not found.shared or found.name != name:
                raise ListError(f"a reading list named {name!r} is not shared here: its papers are left out")
            made.add(name)
        except ListError as exc:
            problems.append(str(exc))
    ids = [pid for pid, s in targets.items() if any(n in made for n in s.shared)]
    added: dict[str, dict[str, str | None]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        stored = store.get_stored(ids=chunk, include=["metadatas"])
        for pid, meta in zip(stored["ids"], stored["metadatas"] or [], strict=True):
            for name, (_, _, by) in targets[pid].shared.items():
                if name in made and not (meta or {}).get(shared_key(name)):
                    added.setdefault(pid, {})[name] = by
    store.set_shared_memberships(added)
    return set(added)
