"""What the ranking reads of each stored paper, from its metadata, without parsing what it need not.

The queue index's `Row` parses a paper's whole assessment (JSON) for its topic scores, which is
most of the cost of reading a large store's rows. The ranking needs the scores only, and an
assessment changes rarely: each paper's scores are kept with a checksum of the assessment they
came from (`TopicMemo`, beside the features) and parsed again only when it changed. The full
`Row`s are built only when a command asks for them (`LazyRows`).

The rows are kept as columns (`PaperTable`: the ids and titles as lists, every other field an
array, the topic scores a matrix): at 100k papers, reading back 100k row objects and their
topic dicts cost a third of a second, and building the ranking's arrays from them another tenth.
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
from typing import Any, overload

import numpy as np

from assistant.cache import read_pickle, write_pickle
from assistant.index import Row, stored_day
from assistant.models import Status
from assistant.store import Store

MEMO_FILE = "topics.pickle"
MEMO_VERSION = 1
ROWS_FILE = "rows.pickle"
ROWS_VERSION = 3
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
STATUSES = list(Status)  # a paper's status in a `PaperTable`: its index here
STATUS_INDEX = {s: i for i, s in enumerate(STATUSES)}


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


class PaperTable(Sequence[PaperRow]):
    """Every paper's row as columns, in the store's order (see the module's summary); a row is
    built as a `PaperRow` when asked for. `rank` reads the columns as they are."""

    ARRAYS = ("relevance", "status", "starred", "seed", "day", "check", "assessed", "scores", "has")

    def __init__(self, columns: dict[str, Any]):
        self.ids: list[str] = columns["ids"]
        self.titles: list[str] = columns["titles"]
        self.names: list[str] = columns["names"]  # the topics any paper's assessment scores
        self.relevance: np.ndarray = columns["relevance"]  # float64, NaN: none
        self.status: np.ndarray = columns["status"]  # int8: the index in STATUSES
        self.starred: np.ndarray = columns["starred"]
        self.seed: np.ndarray = columns["seed"]
        self.day: np.ndarray = columns["day"]  # int64 yyyymmdd, 0: unknown
        self.check: np.ndarray = columns["check"]  # int64: `PaperRow.check`
        self.assessed: np.ndarray = columns["assessed"]  # bool: topics is not None
        self.scores: np.ndarray = columns["scores"]  # float64, papers x names
        self.has: np.ndarray = columns["has"]  # bool, papers x names: the topic is scored
        self._positions: dict[str, int] | None = None

    @classmethod
    def of_rows(cls, rows: Sequence[PaperRow], names: Sequence[str] = ()) -> PaperTable:
        names = list(names) + sorted({n for r in rows if r.topics for n in r.topics} - set(names))
        column = {name: j for j, name in enumerate(names)}
        scores = np.zeros((len(rows), len(names)))
        has = np.zeros((len(rows), len(names)), dtype=bool)
        for i, r in enumerate(rows):
            for name, value in (r.topics or {}).items():
                scores[i, column[name]], has[i, column[name]] = value, True
        return cls(
            {
                "ids": [r.id for r in rows],
                "titles": [r.title for r in rows],
                "names": names,
                "relevance": np.array([np.nan if r.relevance is None else r.relevance for r in rows]),
                "status": np.array([STATUS_INDEX[r.status] for r in rows], dtype=np.int8),
                "starred": np.array([r.starred for r in rows], dtype=bool),
                "seed": np.array([r.seed for r in rows], dtype=bool),
                "day": np.array([r.day or 0 for r in rows], dtype=np.int64),
                "check": np.array([r.check for r in rows], dtype=np.int64),
                "assessed": np.array([r.topics is not None for r in rows], dtype=bool),
                "scores": scores.reshape(len(rows), len(names)),
                "has": has.reshape(len(rows), len(names)),
            }
        )

    def columns(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.ARRAYS}
        return {"ids": self.ids, "titles": self.titles, "names": self.names, **out}

    @property
    def positions(self) -> dict[str, int]:
        if self._positions is None:
            self._positions = {pid: i for i, pid in enumerate(self.ids)}
        return self._positions

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> PaperRow: ...
    @overload
    def __getitem__(self, i: slice) -> list[PaperRow]: ...
    def __getitem__(self, i: int | slice) -> PaperRow | list[PaperRow]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        relevance, day = float(self.relevance[i]), int(self.day[i])
        topics = (
            {name: int(self.scores[i, j]) for j, name in enumerate(self.names) if self.has[i, j]}
            if self.assessed[i]
            else None
        )
        return PaperRow(
            id=self.ids[i],
            title=self.titles[i],
            relevance=None if relevance != relevance else relevance,
            topics=topics,
            status=STATUSES[int(self.status[i])],
            starred=bool(self.starred[i]),
            seed=bool(self.seed[i]),
            day=day or None,
            check=int(self.check[i]),
        )

    def __iter__(self) -> Iterator[PaperRow]:
        return (self[i] for i in range(len(self)))

    def row(self, pid: str) -> PaperRow | None:
        i = self.positions.get(pid)
        return None if i is None else self[i]

    def update(self, rows: Sequence[PaperRow]) -> PaperTable:
        """This table with these rows written over the papers' own, and the new papers appended."""
        if not rows:
            return self
        latest = {r.id: r for r in rows}  # a paper given twice: its last row
        given = PaperTable.of_rows(list(latest.values()), self.names)
        table = self._with_names(given.names)
        at = np.array([table.positions.get(pid, -1) for pid in given.ids], dtype=np.int64)
        old = at >= 0
        for name in self.ARRAYS:
            getattr(table, name)[at[old]] = getattr(given, name)[old]
        for i, j in zip(np.flatnonzero(old).tolist(), at[old].tolist(), strict=True):
            table.titles[j] = given.titles[i]
        if old.all():
            return table
        new = np.flatnonzero(~old)
        columns = {
            name: np.concatenate([getattr(table, name), getattr(given, name)[new]]) for name in self.ARRAYS
        }
        return PaperTable(
            {
                "ids": table.ids + [given.ids[i] for i in new],
                "titles": table.titles + [given.titles[i] for i in new],
                "names": table.names,
                **columns,
            }
        )

    def _with_names(self, names: Sequence[str]) -> PaperTable:
        """This table with a (zero, unscored) column for each of `names` it has not."""
        extra = len(names) - len(self.names)
        if not extra:
            return self
        columns = self.columns()
        columns["names"] = list(names)
        columns["scores"] = np.hstack([self.scores, np.zeros((len(self), extra))])
        columns["has"] = np.hstack([self.has, np.zeros((len(self), extra), dtype=bool)])
        return PaperTable(columns)

    def only(self, present: set[str]) -> PaperTable:
        """The rows of the papers in `present`, in this order."""
        keep = np.array([pid in present for pid in self.ids], dtype=bool)
        columns = {name: getattr(self, name)[keep] for name in self.ARRAYS}
        kept = np.flatnonzero(keep).tolist()
        return PaperTable(
            {
                "ids": [self.ids[i] for i in kept],
                "titles": [self.titles[i] for i in kept],
                "names": self.names,
                **columns,
            }
        )

    def topic_names(self) -> list[str]:
        """What `ranking.topic_names` makes of these rows: every topic some paper is scored on."""
        return sorted(name for j, name in enumerate(self.names) if self.has[:, j].any())

    def topic_scores(self, names: Sequence[str]) -> np.ndarray:
        """What `ranking.topic_scores` makes of these rows (papers x names; 0 where none)."""
        out = np.zeros((len(self), len(names)))
        column = {name: j for j, name in enumerate(self.names)}
        for j, name in enumerate(names):
            if name in column:
                out[:, j] = np.where(self.has[:, column[name]], self.scores[:, column[name]], 0.0)
        return out

    def queue_entries(self) -> list[tuple[str, str, float | None, int | None]]:
        """(id, status, relevance or None, day or None) of every paper, what `triage ranked` keeps."""
        values = [s.value for s in STATUSES]
        relevance = [None if r != r else r for r in self.relevance.tolist()]
        days = [d or None for d in self.day.tolist()]
        status = [values[code] for code in self.status.tolist()]
        return list(zip(self.ids, status, relevance, days, strict=True))


def paper_rows(store: Store, folder: Path, memo: TopicMemo) -> PaperTable:
    """Every paper's row: the rows kept from the last command, brought up to date with the
    papers written since (the store's `touched` stamps, an indexed read); every paper is read
    only when there are none kept or papers left the store. The rows are kept as every row
    (`ROWS_FILE`) and the rows written since (`DELTA_FILE`)."""
    started = time.time()
    table, stamp, token, since = _kept_rows(folder)
    changed = True
    whole = stamp <= 0  # every row is to be written
    if stamp > 0:
        written = store.changed_since(stamp - REFRESH_OVERLAP)
        table = table.update([paper_row(pid, meta, memo, table.row(pid)) for pid, meta in written])
        since.update(pid for pid, _ in written)
        changed = bool(written)
        if store.count() != len(table):  # papers left the store: read which
            table = table.only(set(store.iter_ids()))
            changed = whole = True
    if stamp <= 0 or len(table) != store.count():
        table = PaperTable.of_rows([paper_row(pid, meta, memo) for pid, meta in store.iter_metadata()])
        changed = whole = True
    if changed:
        _keep_rows(folder, table, started, None if whole else token, since)
    return table


ROW = attrgetter(*PaperRow.__slots__)


def _kept_rows(folder: Path) -> tuple[PaperTable, float, str, set[str]]:
    """The rows kept, as of when (0: none kept), the token of the file of every row and the
    papers written since it was (in the delta file)."""
    try:
        data = read_pickle(folder / ROWS_FILE)
        if not isinstance(data, dict) or data.get("version") != ROWS_VERSION:
            return PaperTable.of_rows([]), 0.0, "", set()
        table = PaperTable(data["columns"])
        stamp, token = float(data["stamp"]), str(data["token"])
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        return PaperTable.of_rows([]), 0.0, "", set()
    since: set[str] = set()
    try:
        delta = read_pickle(folder / DELTA_FILE)
        if isinstance(delta, dict) and delta.get("version") == ROWS_VERSION and delta.get("base") == token:
            rows = list(starmap(PaperRow, delta["rows"]))
            table = table.update(rows)
            since.update(r.id for r in rows)
            stamp = float(delta["stamp"])
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        pass  # the rows as of the file of every row: those written since are read again
    return table, stamp, token, since


def _keep_rows(folder: Path, table: PaperTable, stamp: float, token: str | None, since: set[str]) -> None:
    """Keep the rows as of `stamp`: only those written since the file of every row (`token`,
    None: there is none to build on) while they are few, else every row."""
    try:
        if token and len(since) <= max(DELTA_AT_LEAST, DELTA_SHARE * len(table)):
            at = sorted(i for i in map(table.positions.get, since) if i is not None)  # in the table's order
            rows = [ROW(table[i]) for i in at]
            write_pickle(
                folder / DELTA_FILE, {"version": ROWS_VERSION, "base": token, "stamp": stamp, "rows": rows}
            )
            return
        payload = {
            "version": ROWS_VERSION,
            "token": secrets.token_hex(8),
            "stamp": stamp,
            "columns": table.columns(),
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
