"""Selections: the filters export, digest and the review queue share."""

from __future__ import annotations

from datetime import date

import pytest

from assistant.errors import TriageError
from assistant.models import Assessment, Decision, Paper, Status, StoredPaper, TopicScore
from assistant.selection import Selection, parse_when
from assistant.store import Store


def item(status: Status = Status.NEW, score: int = 7, year: int = 2024, **decision: object) -> StoredPaper:
    paper = Paper.create(title=f"Paper {status} {score} {year}", year=year, date=f"{year}-05-02")
    assessment = Assessment(
        topics=[TopicScore(topic="Heads", score=score), TopicScore(topic="Other", score=2)],
        relevance=float(score),
        tags=["probing"],
        engine="offline",
    )
    return StoredPaper(paper=paper, decision=Decision(status=status, **decision), assessment=assessment)  # type: ignore[arg-type]


def test_dates_read_as_people_write_them() -> None:
    today = date(2026, 11, 22)
    assert parse_when("7d", today) == date(2026, 11, 15)
    assert parse_when("2w", today) == date(2026, 11, 8)
    assert parse_when("2024", today) == date(2024, 1, 1)
    assert parse_when("2024-05-01", today) == date(2024, 5, 1)
    with pytest.raises(TriageError, match="YYYY-MM-DD"):
        parse_when("last tuesday")


def test_every_filter_must_hold() -> None:
    a = item(Status.ACCEPTED, 8, 2025, tags=["mine"], lists=["Group"], starred=True)
    b = item(Status.NEW, 3, 2021)
    assert Selection().matches(a) and Selection().matches(b)
    assert [Selection(statuses=(Status.ACCEPTED,)).matches(x) for x in (a, b)] == [True, False]
    assert Selection(tags=("mine", "probing")).matches(a) and not Selection(tags=("mine",)).matches(b)
    assert Selection(topic="Heads", min_score=8).matches(a) and not Selection(
        topic="Heads", min_score=8
    ).matches(b)
    assert not Selection(topic="Other", min_score=3).matches(a)
    assert Selection(min_score=5).matches(a) and not Selection(min_score=5).matches(b)
    assert Selection(since=date(2024, 1, 1)).matches(a) and not Selection(since=date(2024, 1, 1)).matches(b)
    assert Selection(until=date(2022, 1, 1)).matches(b) and not Selection(until=date(2022, 1, 1)).matches(a)
    both = Selection(statuses=(Status.ACCEPTED,), list_name="Group", starred=True, min_score=7)
    assert both.matches(a) and not both.matches(b)
    unassessed = StoredPaper(paper=Paper.create(title="No assessment"))
    assert Selection().matches(unassessed) and not Selection(min_score=0).matches(unassessed)


def test_dates_are_not_pushed_to_the_store_so_older_papers_still_match(store: Store) -> None:
    paper = Paper.create(title="Stored before papers carried a day", date="2025-03-04")
    store.upsert_papers([paper])
    store.collection.update(ids=[paper.id], metadatas=[{"day": None}])  # as an older store holds it
    selection = Selection(since=date(2025, 1, 1), statuses=(Status.NEW,))
    found = [i for i in store.iter_all(selection.where()) if selection.matches(i)]
    assert [i.paper.id for i in found] == [paper.id]
