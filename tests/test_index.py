"""The queue's index: the engine's order sorted by numpy is the order every view uses; the
first screen painted from the rows kept apart is the first screen of the whole index."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

from assistant.index import HEAD_ROWS, QueueIndex, Row, Sort, model_orders, sort_key
from assistant.models import Status
from assistant.selection import Selection


def random_index(n: int, seed: int = 7, location: str = "test") -> QueueIndex:
    rng = random.Random(seed)
    index = QueueIndex(location=location)
    statuses = list(Status)
    for k in range(n):
        pid = f"{rng.choice('abcXYZé')}{rng.randrange(10**6):06d}{k}"
        index.rows[pid] = Row(
            id=pid,
            title=f"paper {k}",
            authors=(),
            relevance=rng.choice([None, 0.0, 2.5, 7.25, 10.0, rng.random() * 10]),
            topics=None,
            engine=None,
            agenda_hash=None,
            day=rng.choice([None, 20240101, 20250615, 20250616]),
            added="2026-01-01",
            status=rng.choice(statuses),
            tags=(),
            lists=(),
            sources=(),
            failed=False,
            starred=rng.random() < 0.1,
        )
    index.stamp = 1000.0
    return index


def test_the_engine_order_is_queue_key_order_with_ties_by_day_then_id() -> None:
    index = random_index(3000)
    expected = [r.id for r in sorted(index.rows.values(), key=sort_key(Sort.RELEVANCE))]
    assert index.order(Sort.RELEVANCE) == expected
    assert len(set(expected)) == 3000
    assert QueueIndex(location="empty").order(Sort.RELEVANCE) == []


class FakeStore:
    cache_key = "test"


UNDECIDED = Selection(statuses=(Status.NEW, Status.MAYBE))


def first_screen(index: QueueIndex, selection: Selection) -> tuple[list[Row], dict[Status, int], list[int]]:
    rows = list(index.view(selection, Sort.RELEVANCE))[:HEAD_ROWS]
    return rows, dict(index.counts()), list(index.histogram())


def test_the_first_screen_from_the_rows_kept_apart_is_the_whole_index_s(tmp_path: Path) -> None:
    index = random_index(3000)
    store: Any = FakeStore()
    assert QueueIndex.open_head(store, UNDECIDED, tmp_path) is None  # nothing saved yet
    index.save(tmp_path, head=UNDECIDED)
    for step in range(3):
        head = QueueIndex.open_head(store, UNDECIDED, tmp_path)
        assert head is not None and not head.built and head.head_stamp == index.stamp
        whole = QueueIndex.open(store, tmp_path)  # as the next opening reads it
        assert whole.built and whole.stamp == head.head_stamp
        assert first_screen(head, UNDECIDED) == first_screen(whole, UNDECIDED)
        whole.take_counts(head)  # the counts the first screen showed are the whole index's
        assert first_screen(head, UNDECIDED) == first_screen(QueueIndex.open(store, tmp_path), UNDECIDED)
        assert whole.counts() is head.counts()
        assert len(head.rows) == HEAD_ROWS
        # Narrower views of the first screen's rows are the first rows of those views too.
        new = Selection(statuses=(Status.NEW,))
        shown = list(head.view(new, Sort.RELEVANCE))
        assert shown == list(whole.view(new, Sort.RELEVANCE))[: len(shown)]
        # Decisions (of the first papers), then the next session's save: the next first screen.
        top = list(whole.view(UNDECIDED, Sort.RELEVANCE))[: 5 * (step + 1)]
        whole.apply([replace(r, status=Status.ACCEPTED) for r in top])
        whole.stamp += 1
        whole.save(tmp_path, head=UNDECIDED)
        index = whole
    # Another view's first screen is not this one; a cache of another store is not read.
    assert QueueIndex.open_head(store, Selection(statuses=(Status.NEW,)), tmp_path) is None
    other: Any = FakeStore()
    other.cache_key = "elsewhere"
    assert QueueIndex.open_head(other, UNDECIDED, tmp_path) is None


class FakeRanking:
    """Uncertainty and disagreement with ties, infinities and papers it has not seen."""

    def __init__(self, ids: list[str], seed: int = 3) -> None:
        rng = random.Random(seed)
        values = [0.0, 0.5, -0.5, 1.25, float("inf"), -2.0]
        self.u = {pid: rng.choice([*values, rng.random()]) for pid in ids if rng.random() < 0.9}
        self.d = {pid: rng.choice([*values[:4], -rng.random(), rng.random()]) for pid in self.u}

    def key(self, pid: str, relevance: float | None) -> float:
        return self.d.get(pid, 0.0)

    def uncertain(self, pid: str) -> float:
        return self.u.get(pid, float("inf"))

    def disagreement(self, pid: str) -> float:
        return self.d.get(pid, 0.0)

    def measures(self, ids: list[str]) -> tuple[list[float], list[float]]:
        return [self.uncertain(pid) for pid in ids], [self.disagreement(pid) for pid in ids]


def test_the_model_orders_sorted_by_numpy_are_the_key_sorts() -> None:
    index = random_index(4000, seed=11)
    ranking = FakeRanking(list(index.rows))
    rows = list(index.rows.values())
    got = model_orders(rows, ranking)
    for sort in (Sort.UNCERTAIN, Sort.DISAGREEMENT):
        assert got[sort] == [r.id for r in sorted(rows, key=sort_key(sort, ranking))]


def test_orders_sorted_in_the_background_take_in_the_changes_made_meanwhile() -> None:
    index = random_index(3000, seed=5)
    sorts = (Sort.NEWEST, Sort.ADDED, Sort.TITLE)
    orders, version = index.sorted_orders(sorts)
    # Rows change on the UI thread while the worker sorted: new days, titles, one gone.
    rows = list(index.rows.values())
    index.apply([replace(r, day=20300101, title="Zz " + r.title) for r in rows[:40]])
    index.remove([rows[50].id])
    index.install(orders, version)
    for sort in sorts:
        assert index.order(sort) == [r.id for r in sorted(index.rows.values(), key=sort_key(sort))]


def test_a_narrow_view_walks_its_own_papers_in_the_same_order_as_the_whole_one() -> None:
    """Starred papers, or statuses few papers have, are found from the rows themselves and
    sorted by the sort's key: the same rows in the same order as walking the whole order,
    with and without a personal ranking, the papers kept on screen (`always`) included."""
    index = random_index(4000, seed=3)
    rows = list(index.rows.values())
    # A rare status: a few maybes among many new papers.
    index.apply([replace(r, status=Status.NEW) for r in rows[:3800] if r.status is Status.MAYBE])
    assert 20 * index.counts()[Status.MAYBE] < len(index.rows)
    always = [rows[0].id, rows[1].id]
    for ranking in (None, FakeRanking(list(index.rows))):
        index.set_ranking(ranking)
        for sort in Sort:
            for selection in (
                Selection(statuses=(), starred=True),
                Selection(statuses=(Status.MAYBE,)),
                Selection(statuses=(Status.NEW, Status.MAYBE), starred=True),
                UNDECIDED,
            ):
                walked = [r.id for r in index.rows.values() if r.id in always or selection.matches_fields(r)]
                expected = [pid for pid in index.order(sort) if pid in set(walked)]
                got = [r.id for r in index.view(selection, sort, always=always)]
                assert got == expected, (sort, selection)


def test_the_count_of_a_view_is_how_many_papers_it_shows_and_sorts_nothing() -> None:
    """The count under the queue (how many papers the view matches) is the length of the view
    for every kind of selection and word search, before and after decisions change the
    statuses; a view that tests only statuses is counted without walking the papers at all."""
    index = random_index(3000, seed=5)
    index.set_ranking(FakeRanking(list(index.rows)))
    rows = list(index.rows.values())
    selections = [
        Selection(),
        UNDECIDED,
        Selection(statuses=(Status.ACCEPTED, Status.ACCEPTED)),
        Selection(statuses=(), starred=True),
        Selection(statuses=(Status.NEW,), min_score=5.0),
        Selection(since=date(2025, 6, 16)),
    ]
    for step in range(2):
        for selection in selections:
            for text in ("", "paper 1", "PAPER 12"):
                expected = sum(1 for _ in index.view(selection, Sort.UNCERTAIN, text))
                assert index.count(selection, text) == expected, (step, selection, text)
        index.apply([replace(r, status=Status.REJECTED) for r in rows[:500]])
    index.rows = _Unwalkable(index.rows)
    assert index.count(UNDECIDED) == sum(index.counts()[s] for s in UNDECIDED.statuses)


class _Unwalkable(dict[str, Row]):
    def values(self) -> Any:
        raise AssertionError("walked the rows to count a view of statuses")
