"""Which papers: the filters that `triage export`, `triage digest` and the review queue share.

A `Selection` turns into a Chroma `where` clause for everything the store can filter on
(status, starred, list, tag, relevance) and a predicate for the rest (a topic's score, dates).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Protocol

from assistant.errors import TriageError
from assistant.models import Status, StoredPaper
from assistant.store import list_key

Where = dict[str, Any]

_AGO = re.compile(r"^\s*(\d+)\s*([dwmy])\s*$")
_UNIT_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}


def parse_when(text: str, today: date | None = None) -> date:
    """`2024-05-01`, `2024`, or an age such as `7d`, `2w`, `3m`, `1y` -> a date."""
    today = today or date.today()
    m = _AGO.match(text)
    if m:
        return today - timedelta(days=int(m.group(1)) * _UNIT_DAYS[m.group(2)])
    clean = text.strip()
    try:
        if re.fullmatch(r"\d{4}", clean):
            return date(int(clean), 1, 1)
        return date.fromisoformat(clean)
    except ValueError:
        raise TriageError(
            f"cannot read {text!r} as a date: use YYYY-MM-DD, YYYY, or an age like 7d, 2w, 3m"
        ) from None


class Fields(Protocol):
    """What a selection looks at: a stored paper's decision, assessment and date."""

    @property
    def status(self) -> Status: ...
    @property
    def starred(self) -> bool: ...
    @property
    def lists(self) -> tuple[str, ...]: ...
    @property
    def sources(self) -> tuple[str, ...]: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def relevance(self) -> float | None: ...
    @property
    def topics(self) -> Mapping[str, int] | None: ...
    @property
    def day(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class PaperFields:
    status: Status
    starred: bool
    lists: tuple[str, ...]
    sources: tuple[str, ...]
    tags: tuple[str, ...]
    relevance: float | None
    topics: Mapping[str, int] | None
    day: int | None

    @classmethod
    def of(cls, item: StoredPaper) -> PaperFields:
        """What a selection tests of a stored paper."""
        d, a = item.decision, item.assessment
        return cls(
            status=d.status,
            starred=d.starred,
            lists=tuple(d.lists),
            sources=tuple(item.paper.sources),
            tags=tuple({*(a.tags if a else ()), *d.tags}),
            relevance=a.relevance if a else None,
            topics={t.topic: t.score for t in a.topics} if a else None,
            day=item.paper.day,
        )


@dataclass(frozen=True)
class Selection:
    """Papers that pass every filter given; an empty selection is every paper."""

    statuses: tuple[Status, ...] = ()
    tags: tuple[str, ...] = ()
    topic: str | None = None
    min_score: float | None = None
    list_name: str | None = None
    source: str | None = None
    since: date | None = None
    until: date | None = None
    starred: bool = False
    assessed: bool = False

    def where(self) -> Where | None:
        """The part of the selection Chroma can evaluate, as a `where` clause (None: no filter)."""
        clauses: list[Where] = []
        if len(self.statuses) == 1:
            clauses.append({"status": self.statuses[0].value})
        elif self.statuses:
            clauses.append({"status": {"$in": [s.value for s in self.statuses]}})
        if self.starred:
            clauses.append({"starred": True})
        if self.list_name:
            clauses.append({list_key(self.list_name): True})
        if self.source:
            clauses.append({"sources": {"$contains": self.source}})
        for tag in self.tags:
            clauses.append({"$or": [{"tags": {"$contains": tag}}, {"user_tags": {"$contains": tag}}]})
        if self.min_score is not None and not self.topic:
            clauses.append({"relevance": {"$gte": float(self.min_score)}})
        elif self.assessed or self.topic:
            clauses.append({"relevance": {"$gte": 0.0}})
        # Dates are checked by `matches`: papers stored before the `day` key existed lack it.
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def matches(self, item: StoredPaper) -> bool:
        """The whole selection, evaluated on a stored paper."""
        return self.matches_fields(PaperFields.of(item))

    def matches_fields(self, f: Fields) -> bool:
        """The whole selection, on a paper's fields (relevance None: not assessed; day None: undated)."""
        if self.statuses and f.status not in self.statuses:
            return False
        if self.starred and not f.starred:
            return False
        if self.list_name and self.list_name not in f.lists:
            return False
        if self.source and self.source not in f.sources:
            return False
        if self.tags and any(tag not in f.tags for tag in self.tags):
            return False
        if self.assessed or self.topic or self.min_score is not None:
            if f.relevance is None or f.topics is None:
                return False
            if self.topic:
                score = f.topics.get(self.topic)
                if score is None or score < (self.min_score if self.min_score is not None else 1):
                    return False
            elif self.min_score is not None and f.relevance < self.min_score:
                return False
        if self.since and (f.day is None or f.day < _day(self.since)):
            return False
        return not (self.until and (f.day is None or f.day > _day(self.until)))

    def describe(self) -> str:
        """The selection in words, for titles and empty-result messages."""
        parts = []
        if self.statuses:
            parts.append("/".join(s.value for s in self.statuses))
        if self.starred:
            parts.append("starred")
        if self.list_name:
            parts.append(f"list {self.list_name!r}")
        if self.tags:
            parts.append("tagged " + ", ".join(self.tags))
        if self.topic:
            parts.append(f"topic {self.topic!r} >= {self.min_score if self.min_score is not None else 1}")
        elif self.min_score is not None:
            parts.append(f"relevance >= {self.min_score}")
        if self.source:
            parts.append(f"from {self.source}")
        if self.since:
            parts.append(f"since {self.since.isoformat()}")
        if self.until:
            parts.append(f"until {self.until.isoformat()}")
        return ", ".join(parts) or "all papers"


def _day(value: date) -> int:
    return value.year * 10000 + value.month * 100 + value.day
