"""The personal model: the queue learns from the researcher's decisions (see `model`).

`store_ranking` is what the commands use: it reads every paper's index row from the store,
brings the cached text features up to date, trains and ranks. The review UI keeps its own
rows and features and calls `rank` after each decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assistant.cache import cache_file, read_pickle, write_pickle
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
    "remember_choice",
    "remembered_choice",
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
) -> StoreRanking:
    """Rank every paper in the store with the personal model trained on its decisions, from
    the blend the last ranking of this store used (see `remembered_choice`)."""
    rows = {pid: Row.from_metadata(pid, meta) for pid, meta in store.iter_metadata()}
    texts, notes = load_features(store, cache_dir, on_progress)
    previous, note = remembered_choice(store, agenda_topics, cache_dir)
    notes += [note] if note else []
    ranking = rank(texts, list(rows.values()), agenda_topics, previous)
    remember_choice(store, agenda_topics, ranking.fit, cache_dir)
    return StoreRanking(ranking, rows, notes)


# The blend a store's queue uses is remembered between commands and review sessions, so that
# `ranked`, `export` and a new review session keep the order the last one left (a blend in use
# stays while it ranks held-out decisions no worse than the engine; past a few hundred
# decisions the weight is chosen again only when they have grown by a tenth). Derived state:
# without the file the blend is chosen afresh.
CHOICE_VERSION = 1
_CHOICE_FIELDS = ("weight", "calibrated", "decided", "cv", "confidence", "cv_decided")


def remembered_choice(
    store: Store, agenda_topics: Sequence[str], cache_dir: Path | None = None
) -> tuple[Fit | None, str | None]:
    """The last blend this store's queue used with this agenda, and a note if it was unreadable."""
    path = cache_file("blend", store.cache_key, cache_dir)
    if not path.exists():
        return None, None
    try:
        data = read_pickle(path)
        if data.get("version") != CHOICE_VERSION or data.get("topics") != list(agenda_topics):
            return None, None
        return Fit(**{name: data["fit"][name] for name in _CHOICE_FIELDS}), None
    except Exception as exc:  # derived state: chosen afresh
        return None, (
            f"the personal model's last blend {path} could not be read ({type(exc).__name__}); "
            "it is chosen afresh from your decisions"
        )


def remember_choice(
    store: Store, agenda_topics: Sequence[str], result: Fit, cache_dir: Path | None = None
) -> None:
    """Keep the blend this ranking used for the next command or review session."""
    choice = result.choice()
    payload = {
        "version": CHOICE_VERSION,
        "topics": list(agenda_topics),
        "fit": {name: getattr(choice, name) for name in _CHOICE_FIELDS},
    }
    try:
        write_pickle(cache_file("blend", store.cache_key, cache_dir), payload)
    except OSError:
        pass  # only derived state: the next ranking chooses afresh
