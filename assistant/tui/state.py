"""What a review session remembers besides the queue: the views `v` cycles through, the
entries `u` undoes, and the changes the store refused."""

from __future__ import annotations

from dataclasses import dataclass

from assistant.models import Decision, Status, StoredPaper
from assistant.store import PaperRecord

UNDECIDED = (Status.NEW, Status.MAYBE)
VIEWS: list[tuple[str, tuple[Status, ...], bool]] = [
    ("undecided", UNDECIDED, False),
    ("new", (Status.NEW,), False),
    ("accepted", (Status.ACCEPTED,), False),
    ("maybe", (Status.MAYBE,), False),
    ("rejected", (Status.REJECTED,), False),
    ("starred", (), True),
    ("all", (), False),
]


@dataclass
class DecisionChange:
    """What `u` undoes after a decision: the fields it changed and their old values."""

    pid: str
    decision: Decision
    fields: tuple[str, ...]


@dataclass
class Deletion:
    """What `u` undoes after a delete: the papers as they were stored, vectors included."""

    records: list[PaperRecord]


@dataclass
class Unsaved:
    """A change the store refused (removed, read-only, full) or a Chroma server could not take
    (unreachable): kept in the session, tried again, and written to the recovery file meanwhile."""

    item: StoredPaper  # the paper with the session's decision
    fields: set[str]  # the decision's fields changed
    lists: dict[str, bool]  # reading lists joined (True) or left (False)
    # False: the paper is known only from its queue row (the server was down when it was
    # decided), so it has no full record; only its changed fields are ever written.
    whole: bool = True
