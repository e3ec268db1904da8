"""Restoring `triage export --format jsonl` records: paper, assessment, decision, reading lists.

A full record is an object with a `paper` object and a `decision` object (what the JSONL export
and `triage ranked --json` write); any other JSON record is an ordinary paper record.

Into a store that already holds the paper: the paper merges as any re-import does; the newer
decision (by `decided_at`) wins for status, star, note and tags, and list memberships are
unioned (an import never takes a paper out of a list); the newer assessment (by `created_at`)
wins. Lists that do not exist yet are created with the exported description; existing lists
keep theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from assistant.ingest.base import ParseResult
from assistant.ingest.records import RecordError
from assistant.lists import ListError, ReadingLists
from assistant.models import Assessment, Decision, Paper
from assistant.store import Store


@dataclass
class Restored:
    """What a full record carries besides the paper."""

    decision: Decision
    assessment: Assessment | None = None
    lists: dict[str, str] = field(default_factory=dict)  # name -> description
    added_at: datetime | None = None


@dataclass
class RestoreResult(ParseResult):
    """Papers parsed from JSON, with what full records say about them (by paper id)."""

    restored: dict[str, Restored] = field(default_factory=dict)


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


def parse_full_record(record: dict[str, Any]) -> tuple[Paper, Restored]:
    """The paper (its id and sources as exported) and the rest of a full record."""
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
    raw_lists = record.get("lists") or {}
    if isinstance(raw_lists, list):
        raw_lists = {str(n): "" for n in raw_lists}
    if not isinstance(raw_lists, dict):
        raise RecordError("'lists' must be an object of list names and descriptions")
    lists = {str(n): str(d or "") for n, d in raw_lists.items()}
    for name in decision.lists:
        lists.setdefault(name, "")
    added_at = None
    if record.get("added_at"):
        try:
            added_at = datetime.fromisoformat(str(record["added_at"]))
        except ValueError:
            raise RecordError(f"'added_at' must be an ISO date-time, got {record['added_at']!r}") from None
    return paper, Restored(decision, assessment, lists, added_at)


def _stamp(value: datetime | None) -> float:
    return value.timestamp() if value is not None else float("-inf")


def merge_decision(stored: Decision, incoming: Decision) -> Decision:
    """The newer decision, with the list memberships of both."""
    newer = incoming if _stamp(incoming.decided_at) > _stamp(stored.decided_at) else stored
    lists = list(dict.fromkeys([*stored.lists, *incoming.lists]))
    return newer.model_copy(update={"lists": lists})


def apply_restored(store: Store, restored: dict[str, Restored], ids: dict[str, str]) -> tuple[int, list[str]]:
    """Write decisions, assessments and lists of imported papers (`ids`: file id -> stored id).

    Returns how many papers changed, and the list names that could not be created.
    """
    targets: dict[str, Restored] = {ids.get(pid, pid): state for pid, state in restored.items()}
    reading = ReadingLists(store)
    problems: list[str] = []
    bad: set[str] = set()
    for name, description in sorted({n: d for s in targets.values() for n, d in s.lists.items()}.items()):
        try:
            if reading.create(name, description, exist_ok=True).name != name:
                raise ListError(f"{name!r} is not a usable list name")
        except ListError as exc:
            problems.append(str(exc))
            bad.add(name)
    assessments: dict[str, Assessment] = {}
    decisions: dict[str, Decision] = {}
    added: dict[str, datetime] = {}
    changed: set[str] = set()
    for item in store.get_many(list(targets)):
        pid, state = item.paper.id, targets[item.paper.id]
        incoming = state.decision.model_copy(
            update={"lists": [n for n in state.decision.lists if n not in bad]}
        )
        decision = merge_decision(item.decision, incoming)
        if decision != item.decision:
            decisions[pid] = decision
            changed.add(pid)
        if state.added_at is not None and (item.added_at is None or state.added_at < item.added_at):
            added[pid] = state.added_at  # the paper keeps its first arrival: a digest does not see it as new
        new = state.assessment
        if new is not None and (item.assessment is None or new.created_at > item.assessment.created_at):
            if new != item.assessment:
                assessments[pid] = new
                changed.add(pid)
    if decisions:
        store.set_decisions(decisions)
    if added:
        store.set_added(added)
    if assessments:
        store.set_assessments(assessments)
    return len(changed), problems
