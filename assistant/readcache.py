"""Answers of the reading commands (`stats`, `ranked`) kept between runs, so that asking again
of an unchanged store waits neither for Chroma (a second to import) nor for the personal model
(scikit-learn, another second, and its training).

An answer holds while the store's data is unchanged. Every write to a Chroma collection (add,
update, upsert, delete, of papers or of the store's own records) is applied to the collection's
metadata segment, which records the number of the last write it applied (`max_seq_id`); a
small write that waits in the store's queue (`assistant.store.pending`) has a number there.
Those numbers, with the database file's identity, are the store's signature, read with the
standard library's sqlite3 in read-only mode in a millisecond (`assistant.store.mirror`). (The
file's mtime and SQLite's change counter will not do: Chroma writes to its database each time
a client opens it.) An answer is saved with the signature taken once the store was open, and
only if it is unchanged when the answer is computed; a small header beside it names what it
was computed from, so that a stale answer is known without reading it. A store behind a
Chroma server has no file to read and is always read through Chroma. The cache is derived
state: deleting it costs one slow read.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant import __version__
from assistant.cache import cache_file, features_cache, read_pickle, training_folder, write_pickle

if TYPE_CHECKING:
    from assistant.config import Settings
    from assistant.personal import Ranking, StoreRanking
    from assistant.store import Store

VERSION = 6

Signature = tuple[int, int, str, str, int, int]


def signature(settings: Settings) -> Signature | None:
    """What identifies the state of an embedded store's data (`Connection.stamp`: Chroma's
    database and its last applied write, and the store's queue of small writes); None when
    there is nothing reliable to read (a server store, no database yet, a database laid out
    otherwise than this Chroma version does)."""
    from assistant.store.connection import local_stamp

    return local_stamp(settings)


def _path(settings: Settings, part: str, cache_dir: Path | None) -> Path:
    where = f"{settings.store.resolve()}#{settings.collection}#{part}@{settings.person}"
    return cache_file("answers", where, cache_dir)


def _head(path: Path) -> Path:
    """The answer's header beside it: what it was computed from, read before the answer (at
    100k papers the queue's answer takes a tenth of a second to read, only to find it stale)."""
    return path.with_name(f"{path.stem}.head")


def load(settings: Settings, part: str, key: Any, cache_dir: Path | None = None) -> Any | None:
    """The saved answer for `part` asked with `key`, if the store has not changed since."""
    now = signature(settings)
    if now is None:
        return None
    path = _path(settings, part, cache_dir)
    wanted = {"version": (VERSION, __version__), "signature": now, "key": key}
    try:
        head = read_pickle(_head(path))
        if not isinstance(head, dict) or any(head.get(k) != v for k, v in wanted.items()):
            return None
        saved = read_pickle(path)
    except (OSError, ValueError, EOFError, AttributeError, ImportError, TypeError):
        return None
    if not isinstance(saved, dict) or any(saved.get(k) != v for k, v in wanted.items()):
        return None
    depends = saved.get("depends") or {}
    if any(_stamp(Path(path)) != stamp for path, stamp in depends.items()):
        return None
    return saved.get("value")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What identifies a version of a file: a rewrite or a deletion changes it."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def save(
    settings: Settings,
    part: str,
    key: Any,
    value: Any,
    before: Signature | None,
    cache_dir: Path | None = None,
    depends: Iterable[Path] = (),
) -> None:
    """Keep an answer computed from the store as it was at `before` (the signature taken once
    the store was open), unless the store changed meanwhile; and from the files of derived
    state in `depends` as they are now (the answer is not used once one is rewritten or
    deleted). A cache that cannot be written is not an error."""
    if before is None or signature(settings) != before:
        return
    payload = {
        "version": (VERSION, __version__),
        "signature": before,
        "key": key,
        "value": value,
        "depends": {str(path): _stamp(path) for path in depends},
    }
    path = _path(settings, part, cache_dir)
    try:
        write_pickle(path, payload)  # then its header: a header never names an answer not yet written
        write_pickle(_head(path), {k: payload[k] for k in ("version", "signature", "key")})
    except OSError:
        pass


@dataclass
class RankSummary:
    """What `triage ranked` needs of the personal ranking, without numpy or the model: each
    assessed paper's sort key, shown score, uncertainty and disagreement, as arrays of doubles
    in the order of `ids` (at 100k papers, four dicts cost a tenth of a second to build and
    pickle; arrays pickle as their bytes, and the ids are the queue's own strings, kept once)."""

    personal: bool
    has_model: bool
    note: str
    engine_stats: tuple[float, float]
    decided: int = 0  # the decisions the ranking learned from
    # A paper the ranking has not seen sorts by its relevance: key = a + b * z-score.
    engine_line: tuple[float, float] = (0.0, 1.0)
    # Relevant papers left among the undecided ones, in words (when estimated).
    estimate: str | None = None
    ids: list[str] = field(default_factory=list)
    keys: array[float] = field(default_factory=lambda: array("d"))  # -inf: not ranked
    shown: array[float] = field(default_factory=lambda: array("d"))  # nan: no score shown
    uncertainty: array[float] = field(default_factory=lambda: array("d"))
    disagreements: array[float] = field(default_factory=lambda: array("d"))
    _at: dict[str, int] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, ranking: Ranking, ids: Iterable[str]) -> RankSummary:
        """The summary of `ranking` for the papers in `ids`."""
        fit = ranking.fit
        summary = cls(ranking.personal, ranking.model is not None, fit.note, fit.engine_stats, fit.decided)
        summary.engine_line = ranking.engine_line()
        summary.estimate = ranking.estimate.line() if ranking.estimate is not None else None
        # Read for every paper at once (what `Ranking.key`, `score`, `uncertain` and
        # `disagreement` give one by one): at 100k papers, a loop over them costs a third of a second.
        import numpy as np

        summary.ids = ids = list(ids)
        at = np.array([ranking.position.get(pid, -1) for pid in ids], dtype=np.int64)
        known = at >= 0

        def taken(values: np.ndarray | None, fill: float, only_blended: bool = True) -> array[float]:
            """values[paper] for each paper of `ids` the ranking has (and blended), else fill."""
            out = np.full(len(ids), fill)
            if values is not None:
                out[known] = values[at[known]]
                if only_blended:
                    out[~seen] = fill
            return array("d", out.astype(np.float64).tobytes())

        blended = taken(ranking.blended, -np.inf, only_blended=False)
        seen = np.isfinite(np.frombuffer(blended, dtype=np.float64))
        summary.keys = blended
        summary.shown = taken(ranking.shown, np.nan, only_blended=False)
        summary.uncertainty = taken(ranking.uncertainty, np.inf)
        summary.disagreements = taken(ranking.model, 0.0)
        return summary

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_at": None}  # the index is built again where it is read

    def _place(self, pid: str) -> int | None:
        if self._at is None:
            self._at = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._at.get(pid)

    def key(self, pid: str, relevance: float | None) -> float:
        at = self._place(pid)
        value = self.keys[at] if at is not None else -math.inf
        if math.isfinite(value) or relevance is None:
            return value
        mean, std = self.engine_stats
        return self.engine_line[0] + self.engine_line[1] * (relevance - mean) / std

    def keys_of(self, entries: Sequence[tuple[str, str, float, int | None]]) -> list[float]:
        """`key` of each queue entry (id, status, relevance, day): read straight from the
        array when the entries are the ones summarised, in order (the whole queue)."""
        if len(entries) != len(self.ids) or [e[0] for e in entries] != self.ids:
            return [self.key(e[0], e[2]) for e in entries]
        isfinite, values = math.isfinite, self.keys.tolist()
        return [v if isfinite(v) else self.key(e[0], e[2]) for v, e in zip(values, entries, strict=True)]

    def score(self, pid: str) -> float | None:
        at = self._place(pid)
        value = self.shown[at] if at is not None else math.nan
        return value if math.isfinite(value) else None

    def uncertain(self, pid: str) -> float:
        at = self._place(pid)
        return self.uncertainty[at] if at is not None else math.inf

    def disagreement(self, pid: str) -> float:
        at = self._place(pid)
        return self.disagreements[at] if at is not None else 0.0


@dataclass
class RankedQueue:
    """Every assessed paper as the queue orders it: (id, status, relevance, day), with the
    personal ranking's view of them and the notes its training left. The papers themselves are
    read from the store for the rows shown."""

    entries: list[tuple[str, str, float, int | None]]
    ranking: RankSummary | None
    notes: list[str]
    unassessed: int = 0  # papers in the store with no assessment (not in the queue)
    # The key of the training the queue came from and the folder its estimate is kept in
    # (`assistant.estimate_refresh`); None for a store behind a Chroma server.
    trained: tuple[bytes, str] | None = None


def ranked_queue(
    settings: Settings,
    store: Store,
    topics: tuple[str, ...],
    personal: StoreRanking | None,
    before: Signature | None,
) -> RankedQueue:
    """The queue `triage ranked` shows, from the store ranked with the personal model (None: the
    model failed, the engine's order), kept as the answer for the store as it was at `before`
    (the signature taken once the store was open; `save`). The command computes it when its
    kept answer is stale, and so does the background ranking after a write
    (`assistant.estimate_refresh`), so that the next `ranked` finds it kept."""
    from assistant.index import Row
    from assistant.personal.rows import PaperTable

    rows: list[tuple[str, str, float | None, int | None]]
    if personal is None:
        rows = [
            (r.id, r.status.value, r.relevance, r.day)
            for r in (Row.from_metadata(pid, meta) for pid, meta in store.iter_metadata())
        ]
    elif isinstance(personal.papers, PaperTable):  # the store's rows as columns
        rows = personal.papers.queue_entries()
    else:
        rows = [(p.id, p.status.value, p.relevance, p.day) for p in personal.papers]
    assessed = [
        (pid, status, float(relevance), day) for pid, status, relevance, day in rows if relevance is not None
    ]
    summary = RankSummary.of(personal.ranking, (e[0] for e in assessed)) if personal else None
    queue = RankedQueue(assessed, summary, personal.notes if personal else [], len(rows) - len(assessed))
    if personal is not None:  # not when the model failed: the next read tries again
        # The ranking rests on the personal model's cached features too: deleting them is
        # answered by a new ranking, not by the one saved from them.
        trained = personal.ranking.trained
        if before is not None and trained is not None and trained.key:
            # Which training the queue came from, and where its estimate is kept, saved with the answer.
            queue.trained = (trained.key, str(training_folder(store.cache_key)))
        save(settings, "ranked", topics, queue, before, depends=[features_cache(store.data_key)])
    return queue
