"""What the ranking reads of each stored paper, from its metadata, without parsing what it need not.

The queue index's `Row` parses a paper's whole assessment (JSON) for its topic scores, which is
most of the cost of reading a large store's rows. The ranking needs the scores only, and an
assessment changes rarely: each paper's scores are kept with a checksum of the assessment they
came from (`TopicMemo`, beside the features) and parsed again only when it changed. The full
`Row`s are built only when a command asks for them (`LazyRows`).
"""

from __future__ import annotations

import json
import secrets
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import starmap
from operator import attrgetter
from pathlib import Path
from typing import Any

from assistant.cache import read_pickle, write_pickle
from assistant.index import Row, stored_day
from assistant.models import Status
from assistant.store import Store

MEMO_FILE = "topics.pickle"
MEMO_VERSION = 1
ROWS_FILE = "rows.pickle"
ROWS_VERSION = 2
# The papers written since the rows were last written in full, kept in a file of their own while
# they are fewer than this share of the papers (or DELTA_AT_LEAST): one decision does not write
# every paper's row again.
DELTA_FILE = "rows.delta.pickle"
DELTA_SHARE = 0.05
DELTA_AT_LEAST = 1000
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
    check: int = 0  # the checksum of the assessment its topic scores were read from


class TopicMemo:
    """Each paper's topic scores, with the checksum of the assessment they were read from. One
    `load`ed reads its file when first needed: a paper whose row is kept with the checksum of
    its assessment needs none."""

    def __init__(self, scores: dict[str, tuple[int, dict[str, int]]] | None = None):
        self._scores: dict[str, tuple[int, dict[str, int]]] | None = scores if scores is not None else {}
        self._folder: Path | None = None
        self.changed = False

    @classmethod
    def load(cls, folder: Path) -> TopicMemo:
        memo = cls()
        memo._scores, memo._folder = None, folder
        return memo

    @property
    def scores(self) -> dict[str, tuple[int, dict[str, int]]]:
        if self._scores is None:
            self._scores = {}
            try:
                data = read_pickle(self._folder / MEMO_FILE) if self._folder is not None else None
                if isinstance(data, dict) and data.get("version") == MEMO_VERSION:
                    self._scores = dict(data["scores"])
            except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
                pass
        return self._scores

    @scores.setter
    def scores(self, value: dict[str, tuple[int, dict[str, int]]]) -> None:
        self._scores = value

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        write_pickle(folder / MEMO_FILE, {"version": MEMO_VERSION, "scores": self.scores})

    def topics(self, pid: str, assessment: str, check: int | None = None) -> dict[str, int]:
        """The topic scores of this assessment of the paper (parsed once per assessment)."""
        check = zlib.crc32(assessment.encode("utf-8")) if check is None else check
        kept = self.scores.get(pid)
        if kept is not None and kept[0] == check:
            return kept[1]
        data = json.loads(assessment)
        topics = {str(t["topic"]): int(t["score"]) for t in data.get("topics", [])}
        self.scores[pid] = (check, topics)
        self.changed = True
        return topics

    def keep_only(self, ids: Sequence[str]) -> None:
        """Forget papers no longer in the store (when the memo was read at all)."""
        if self._scores is not None and len(self._scores) > len(ids):
            present = set(ids)
            self._scores = {pid: v for pid, v in self._scores.items() if pid in present}
            self.changed = True


def paper_row(pid: str, meta: dict[str, Any], memo: TopicMemo, kept: PaperRow | None = None) -> PaperRow:
    """What `Row.from_metadata` makes of these fields, the topic scores read through `memo`
    (or taken from `kept`, the paper's row kept from before, when its assessment is the one
    they were read from)."""
    assessment = meta.get("assessment")
    check = zlib.crc32(assessment.encode("utf-8")) if assessment else 0
    if not assessment:
        topics = None
    elif kept is not None and kept.check == check and kept.topics is not None:
        topics = kept.topics
    else:
        topics = memo.topics(pid, assessment, check)
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
        check=check,
    )


def paper_rows(store: Store, folder: Path, memo: TopicMemo) -> list[PaperRow]:
    """Every paper's row: the rows kept from the last command, brought up to date with the
    papers written since (the store's `touched` stamps, an indexed read); every paper is read
    only when there are none kept or papers left the store. The rows are kept as every row
    (`ROWS_FILE`) and the rows written since (`DELTA_FILE`)."""
    started = time.time()
    kept, stamp, token, since = _kept_rows(folder)
    changed = True
    whole = stamp <= 0  # every row is to be written
    if stamp > 0:
        written = store.changed_since(stamp - REFRESH_OVERLAP)
        for pid, meta in written:
            kept[pid] = paper_row(pid, meta, memo, kept.get(pid))
            since.add(pid)
        changed = bool(written)
        if store.count() != len(kept):  # papers left the store: read which
            present = set(store.iter_ids())
            kept = {pid: row for pid, row in kept.items() if pid in present}
            changed = whole = True
    if stamp <= 0 or len(kept) != store.count():
        kept = {pid: paper_row(pid, meta, memo) for pid, meta in store.iter_metadata()}
        changed = whole = True
    if changed:
        _keep_rows(folder, kept, started, None if whole else token, since)
    return list(kept.values())


ROW = attrgetter(*PaperRow.__slots__)


def _kept_rows(folder: Path) -> tuple[dict[str, PaperRow], float, str, set[str]]:
    """The rows kept (by id), as of when (0: none kept), the token of the file of every row and
    the papers written since it was (in the delta file)."""
    try:
        data = read_pickle(folder / ROWS_FILE)
        if not isinstance(data, dict) or data.get("version") != ROWS_VERSION:
            return {}, 0.0, "", set()
        rows = data["rows"]
        kept = dict(zip((t[0] for t in rows), starmap(PaperRow, rows), strict=True))
        stamp, token = float(data["stamp"]), str(data["token"])
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        return {}, 0.0, "", set()
    since: set[str] = set()
    try:
        delta = read_pickle(folder / DELTA_FILE)
        if isinstance(delta, dict) and delta.get("version") == ROWS_VERSION and delta.get("base") == token:
            for values in delta["rows"]:
                kept[values[0]] = PaperRow(*values)
                since.add(values[0])
            stamp = float(delta["stamp"])
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        pass  # the rows as of the file of every row: those written since are read again
    return kept, stamp, token, since


def _keep_rows(
    folder: Path, kept: dict[str, PaperRow], stamp: float, token: str | None, since: set[str]
) -> None:
    """Keep the rows as of `stamp`: only those written since the file of every row (`token`,
    None: there is none to build on) while they are few, else every row."""
    try:
        if token and len(since) <= max(DELTA_AT_LEAST, DELTA_SHARE * len(kept)):
            rows = [ROW(kept[pid]) for pid in since if pid in kept]
            write_pickle(
                folder / DELTA_FILE, {"version": ROWS_VERSION, "base": token, "stamp": stamp, "rows": rows}
            )
            return
        payload = {
            "version": ROWS_VERSION,
            "token": secrets.token_hex(8),
            "stamp": stamp,
            "rows": list(map(ROW, kept.values())),
        }
        write_pickle(folder / ROWS_FILE, payload)
        (folder / DELTA_FILE).unlink(missing_ok=True)
    except OSError:
        pass  # only a cache: read again next time


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
