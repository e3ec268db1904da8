"""What the ranking reads of each stored paper, from its metadata, without parsing what it need not.

The queue index's `Row` parses a paper's whole assessment (JSON) for its topic scores, which is
most of the cost of reading a large store's rows. The ranking needs the scores only, and an
assessment changes rarely: each paper's scores are kept with a checksum of the assessment they
came from (`TopicMemo`, beside the features) and parsed again only when it changed. The full
`Row`s are built only when a command asks for them (`LazyRows`).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.cache import read_pickle, write_pickle
from assistant.index import Row, stored_day
from assistant.models import Status
from assistant.store import Store

MEMO_FILE = "topics.pickle"
MEMO_VERSION = 1
ROWS_FILE = "rows.pickle"
ROWS_VERSION = 1
# A refresh re-reads papers stamped this long before the previous one: a write is stamped a
# moment before it commits.
REFRESH_OVERLAP = 10.0
STATUS = {s.value: s for s in Status}


@dataclass(slots=True)
class PaperRow:
    """A paper as the ranking reads it (`assistant.personal.ranking.PaperState`)."""

    id: str
    title: str
    relevance: float | None
    topics: dict[str, int] | None
    status: Status
    starred: bool
    seed: bool
    day: int | None


class TopicMemo:
    """Each paper's topic scores, with the checksum of the assessment they were read from."""

    def __init__(self, scores: dict[str, tuple[int, dict[str, int]]] | None = None):
        self.scores = scores or {}
        self.changed = False

    @classmethod
    def load(cls, folder: Path) -> TopicMemo:
        try:
            data = read_pickle(folder / MEMO_FILE)
            if isinstance(data, dict) and data.get("version") == MEMO_VERSION:
                return cls(data["scores"])
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
            pass
        return cls()

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        write_pickle(folder / MEMO_FILE, {"version": MEMO_VERSION, "scores": self.scores})

    def topics(self, pid: str, assessment: str) -> dict[str, int]:
        """The topic scores of this assessment of the paper (parsed once per assessment)."""
        check = zlib.crc32(assessment.encode("utf-8"))
        kept = self.scores.get(pid)
        if kept is not None and kept[0] == check:
            return kept[1]
        data = json.loads(assessment)
        topics = {str(t["topic"]): int(t["score"]) for t in data.get("topics", [])}
        self.scores[pid] = (check, topics)
        self.changed = True
        return topics

    def keep_only(self, ids: Sequence[str]) -> None:
        """Forget papers no longer in the store."""
        if len(self.scores) > len(ids):
            present = set(ids)
            self.scores = {pid: v for pid, v in self.scores.items() if pid in present}
            self.changed = True


def paper_row(pid: str, meta: dict[str, Any], memo: TopicMemo) -> PaperRow:
    """What `Row.from_metadata` makes of these fields, the topic scores read through `memo`."""
    assessment = meta.get("assessment")
    topics = memo.topics(pid, assessment) if assessment else None
    relevance = meta.get("relevance")
    day = stored_day(pid, meta)
    return PaperRow(
        id=pid,
        title=str(meta.get("title") or pid),
        relevance=float(relevance) if topics is not None and relevance is not None else None,
        topics=topics,
        status=STATUS.get(meta.get("status") or "new") or Status(meta["status"]),
        starred=bool(meta.get("starred")),
        seed=bool(meta.get("seed")),
        day=day,
    )


def paper_rows(store: Store, folder: Path, memo: TopicMemo) -> list[PaperRow]:
    """Every paper's row: the rows kept from the last command, brought up to date with the
    papers written since (the store's `touched` stamps, an indexed read); every paper is read
    only when there are none kept or papers left the store."""
    started = time.time()
    kept: dict[str, PaperRow] = {}
    stamp = 0.0
    try:
        data = read_pickle(folder / ROWS_FILE)
        if isinstance(data, dict) and data.get("version") == ROWS_VERSION:
            kept = {t[0]: PaperRow(*t) for t in data["rows"]}
            stamp = float(data["stamp"])
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        kept, stamp = {}, 0.0
    changed = True
    if stamp > 0:
        written = store.changed_since(stamp - REFRESH_OVERLAP)
        for pid, meta in written:
            kept[pid] = paper_row(pid, meta, memo)
        changed = bool(written)
        if store.count() != len(kept):  # papers left the store: read which
            present = set(store.iter_ids())
            kept = {pid: row for pid, row in kept.items() if pid in present}
            changed = True
    if stamp <= 0 or len(kept) != store.count():
        kept = {pid: paper_row(pid, meta, memo) for pid, meta in store.iter_metadata()}
        changed = True
    if changed:
        try:
            rows = [tuple(getattr(r, f) for f in PaperRow.__slots__) for r in kept.values()]
            write_pickle(folder / ROWS_FILE, {"version": ROWS_VERSION, "stamp": started, "rows": rows})
        except OSError:
            pass  # only a cache: read again next time
    return list(kept.values())


class LazyRows(Mapping[str, Row]):
    """The queue index's rows of the store's papers, read and built when first asked for."""

    def __init__(self, store: Store, ids: Sequence[str]):
        self._store = store
        self._ids = ids
        self._rows: dict[str, Row] | None = None

    def _built(self) -> dict[str, Row]:
        if self._rows is None:
            self._rows = {pid: Row.from_metadata(pid, meta) for pid, meta in self._store.iter_metadata()}
        return self._rows

    def __getitem__(self, pid: str) -> Row:
        return self._built()[pid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._ids)
