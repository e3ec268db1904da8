"""The personal model: the queue learns from the researcher's decisions (see `model`).

`store_ranking` is what the commands use: it reads every paper's index row from the store,
brings the cached text features up to date, trains and ranks. The review UI keeps its own
rows and features and calls `rank` after each decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assistant.index import Row
from assistant.personal.features import TextFeatures
from assistant.personal.model import Fit
from assistant.personal.ranking import Explanation, FeatureCache, PaperState, Ranking, rank
from assistant.store import Store

__all__ = [
    "Explanation",
    "FeatureCache",
    "Fit",
    "PaperState",
    "Ranking",
    "StoreRanking",
    "TextFeatures",
    "load_features",
    "rank",
    "store_ranking",
]


@dataclass
class StoreRanking:
    ranking: Ranking
    rows: dict[str, Row]
    notes: list[str] = field(default_factory=list)


def load_features(
    store: Store, cache_dir: Path | None = None, on_progress: Callable[[int, int], None] | None = None
) -> tuple[TextFeatures, list[str]]:
    """The store's text features, from the cache brought up to date (or built), and notes on
    what fell back: an unreadable cache, papers without an embedding."""
    texts, note = TextFeatures.open(store, cache_dir)
    notes = [note] if note else []
    if texts.refresh(store, on_progress):
        try:
            texts.save(cache_dir)
        except OSError as exc:
            notes.append(
                f"the personal model's cache could not be written ({exc.strerror}); it is rebuilt next time"
            )
    if texts.missing_vectors:
        notes.append(
            f"{texts.missing_vectors} papers have no embedding: the personal model reads only their words"
        )
    return texts, notes


def store_ranking(
    store: Store,
    agenda_topics: Sequence[str] = (),
    cache_dir: Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    with_estimate: bool = False,
) -> StoreRanking:
    """Rank every paper in the store with the personal model trained on its decisions (the
    same decisions give the same order, in every command and the review UI); `with_estimate`
    also estimates the relevant papers left."""
    rows = {pid: Row.from_metadata(pid, meta) for pid, meta in store.iter_metadata()}
    texts, notes = load_features(store, cache_dir, on_progress)
    ranking = rank(texts, list(rows.values()), agenda_topics, with_estimate=with_estimate)
    return StoreRanking(ranking, rows, notes)
