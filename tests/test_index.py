"""The queue's index: the engine's order sorted by numpy is the order every view uses."""

from __future__ import annotations

import random

from assistant.index import QueueIndex, Row, Sort, sort_key
from assistant.models import Status


def test_the_engine_order_is_queue_key_order_with_ties_by_day_then_id() -> None:
    rng = random.Random(7)
    index = QueueIndex(location="test")
    statuses = list(Status)
    for k in range(3000):
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
            starred=False,
            tags=(),
            lists=(),
            sources=(),
            failed=False,
        )
    expected = [r.id for r in sorted(index.rows.values(), key=sort_key(Sort.RELEVANCE))]
    assert index.order(Sort.RELEVANCE) == expected
    assert len(set(expected)) == 3000
    assert QueueIndex(location="empty").order(Sort.RELEVANCE) == []
