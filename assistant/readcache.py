"""Answers of the reading commands (`stats`, `ranked`) kept between runs, so that asking again
of an unchanged store waits neither for Chroma (a second to import) nor for the personal model
(scikit-learn, another second, and its training).

An answer holds while the store's database file is unchanged: same file, size and mtime, and
the same SQLite change counter (bytes 24-27 of the header, which every committed write
transaction increments in the rollback-journal mode Chroma uses). Chroma writes to its database
even to open it, so an answer is saved with the file's signature taken after the store was
opened, and only if nothing was written while the answer was computed. A store behind a Chroma
server has no file to check and is always read. The cache is derived state: deleting it costs
one slow read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant import __version__
from assistant.cache import cache_file, read_pickle, write_pickle

if TYPE_CHECKING:
    from assistant.config import Settings
    from assistant.models import StoredPaper
    from assistant.personal import Ranking

VERSION = 1
SQLITE_HEADER = b"SQLite format 3\x00"

Signature = tuple[int, int, int, int, bytes]


def signature(settings: Settings) -> Signature | None:
    """What identifies the state of an embedded store's database; None when there is nothing
    reliable to check (a server store, no database yet, a write in progress, WAL mode)."""
    if settings.chroma_url or settings.local_store is None:
        return None
    db = settings.store / "chroma.sqlite3"
    try:
        if any(Path(f"{db}{suffix}").exists() for suffix in ("-journal", "-wal")):
            return None
        with open(db, "rb") as fh:
            stat = os.fstat(fh.fileno())
            header = fh.read(100)
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(SQLITE_HEADER) or header[18] != 1:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, header[24:28])


def _path(settings: Settings, part: str, cache_dir: Path | None) -> Path:
    where = f"{settings.store.resolve()}#{settings.collection}#{part}"
    return cache_file("answers", where, cache_dir)


def load(settings: Settings, part: str, key: Any, cache_dir: Path | None = None) -> Any | None:
    """The saved answer for `part` asked with `key`, if the store has not changed since."""
    now = signature(settings)
    if now is None:
        return None
    try:
        saved = read_pickle(_path(settings, part, cache_dir))
    except (OSError, ValueError, EOFError, AttributeError, ImportError, TypeError):
        return None
    if not isinstance(saved, dict) or saved.get("version") != (VERSION, __version__):
        return None
    if saved.get("signature") != now or saved.get("key") != key:
        return None
    return saved.get("value")


def save(
    settings: Settings,
    part: str,
    key: Any,
    value: Any,
    before: Signature | None,
    cache_dir: Path | None = None,
) -> None:
    """Keep an answer computed from the store as it was at `before` (the signature taken once
    the store was open), unless the store changed meanwhile. A cache that cannot be written is
    not an error."""
    if before is None or signature(settings) != before:
        return
    payload = {"version": (VERSION, __version__), "signature": before, "key": key, "value": value}
    try:
        write_pickle(_path(settings, part, cache_dir), payload)
    except OSError:
        pass


@dataclass
class RankSummary:
    """What `triage ranked` needs of the personal ranking, without numpy or the model: each
    assessed paper's sort key, shown score, uncertainty and disagreement."""

    personal: bool
    has_model: bool
    note: str
    engine_stats: tuple[float, float]
    keys: dict[str, float] = field(default_factory=dict)
    shown: dict[str, float] = field(default_factory=dict)
    uncertainty: dict[str, float] = field(default_factory=dict)
    disagreements: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, ranking: Ranking, ids: Mapping[str, Any]) -> RankSummary:
        """The summary of `ranking` for the papers in `ids`."""
        summary = cls(ranking.personal, ranking.model is not None, ranking.fit.note, ranking.fit.engine_stats)
        for pid in ids:
            summary.keys[pid] = ranking.key(pid, None)
            shown = ranking.score(pid)
            if shown is not None:
                summary.shown[pid] = shown
            summary.uncertainty[pid] = ranking.uncertain(pid)
            summary.disagreements[pid] = ranking.disagreement(pid)
        return summary

    def key(self, pid: str, relevance: float | None) -> float:
        value = self.keys.get(pid, -math.inf)
        if math.isfinite(value) or relevance is None:
            return value
        mean, std = self.engine_stats
        return (relevance - mean) / std

    def score(self, pid: str) -> float | None:
        return self.shown.get(pid)

    def uncertain(self, pid: str) -> float:
        return self.uncertainty.get(pid, math.inf)

    def disagreement(self, pid: str) -> float:
        return self.disagreements.get(pid, 0.0)


@dataclass
class RankedQueue:
    """Every assessed paper, with the personal ranking's view of them (what `ranked` orders)
    and the notes its training left."""

    items: list[StoredPaper]
    ranking: RankSummary | None
    notes: list[str]
