"""The personal model: the queue learns from the researcher's decisions (see `model`).

`store_ranking` is what the commands use: it reads every paper's index row from the store,
brings the cached text features up to date, trains and ranks. What the training made is kept
beside the features (`state`): the same decisions are not trained again, and one more decision
trains from the kept weights (the estimate's fold models too). Neither needs scikit-learn or
scipy, nor does reading a new paper's text (`tfidf`: the kept vectorizer's transform in numpy).
The review UI keeps its own rows and features and calls `rank` after each decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assistant.cache import no_collection, training_folder, wait_for_training
from assistant.index import Row
from assistant.personal.features import TextFeatures
from assistant.personal.model import Fit
from assistant.personal.ranking import Explanation, FeatureCache, PaperState, Ranking, rank
from assistant.personal.rows import LazyRows, PaperRow, PaperTable, TopicMemo, paper_rows
from assistant.personal.state import Trained
from assistant.store import Store

__all__ = [
    "Explanation",
    "FeatureCache",
    "Fit",
    "PaperState",
    "Ranking",
    "StoreRanking",
    "TextFeatures",
    "estimate_folder",
    "load_features",
    "rank",
    "store_ranking",
]


@dataclass
class StoreRanking:
    ranking: Ranking
    rows: Mapping[str, Row]  # built when first asked for
    notes: list[str] = field(default_factory=list)
    # What the ranking read of each paper.
    papers: PaperTable | list[PaperRow] = field(default_factory=list)


def load_features(
    store: Store, cache_dir: Path | None = None, on_progress: Callable[[int, int], None] | None = None
) -> tuple[TextFeatures, list[str]]:
    """The store's text features, from the cache brought up to date (or built), and notes on
    what fell back: an unreadable cache, papers without an embedding."""
    texts, note = TextFeatures.open(store, cache_dir)
    notes = [note] if note else []
    texts.refresh(store, on_progress)
    if texts.unsaved:
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
    over_newer: bool = True,
    wait: bool = True,
) -> StoreRanking:
    """Rank every paper in the store with the personal model trained on its decisions (the
    same decisions give the same order, in every command and the review UI); `with_estimate`
    also estimates the relevant papers left. Without `over_newer`, the training is not kept
    over one another process kept meanwhile (`Trained.save`). With `wait`, a background ranking
    training this store's model now (started by the write before: `assistant.estimate_refresh`)
    is waited for, and what it kept is read rather than trained again."""
    folder = estimate_folder(store, cache_dir)  # this person's: rows, topic scores, training
    if wait:
        wait_for_training(folder)
    texts, notes = load_features(store, cache_dir, on_progress)
    with no_collection():  # a row per paper: at 100k, collections cost more than the rows
        memo = TopicMemo.load(folder)
        papers = paper_rows(store, folder, memo)
        memo.keep_only(papers.ids)
        saved = Trained.load(folder) or Trained(b"", None, None)
        ranking = rank(texts, papers, agenda_topics, with_estimate=with_estimate, saved=saved)
    try:
        if ranking.trained is not None and ranking.trained is not saved:
            ranking.trained.save(folder, saved, over_newer)
        if memo.changed:
            memo.save(folder)
    except OSError:
        pass  # only caches: the next command trains (or reads) again
    return StoreRanking(ranking, LazyRows(store, papers.ids), notes, papers)


def estimate_folder(store: Store, cache_dir: Path | None = None) -> Path:
    """The folder of the store's kept training and estimate (beside its text features)."""
    return training_folder(store.cache_key, cache_dir)
