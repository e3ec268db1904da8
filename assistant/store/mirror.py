"""The store's papers and records, mirrored in a SQLite file of the user cache, so that the
commands of the daily loop read them without Chroma (importing it alone costs half a second of
CPU, opening it and reading 10,000 papers through it seconds more).

The mirror is derived state. It holds each record's id, document, metadata and vector, for both
collections, in the order Chroma keeps them, and says which state of the store it reflects:
Chroma's database file (device, inode), the two collections' ids, the last write its metadata
segments applied (from Chroma's own tables, read with sqlite3 in a millisecond), and the last
write of the store's queue of small writes (`assistant.store.pending`). Every write of this
project goes through the store's writer lock and brings the mirror along when it was current,
so it stays current; a write by anything else (another version, another tool) leaves it stale,
and the next command rebuilds it from Chroma. Deleting it costs one rebuild.

`get` answers as `Collection.get` does: the same records, order and `where` semantics (`$ne`
and `$nin` match a record without the key; a boolean matches only a boolean); `nearest` finds
the papers nearest in meaning to a vector by exact cosine distance (Chroma's index is an
approximation of it).
"""

from __future__ import annotations

import marshal
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from assistant.cache import cache_file

VERSION = 4
PAPERS, META = 0, 1  # the two collections
# Metadata keys kept apart from the rest: long texts no `where` looks at, so that a filter reads
# only the short keys.
LONG_KEYS = frozenset({"assessment", "merges", "extra", "biblio", "failed_reason", "note", "authors"})

# What the mirror reflects: Chroma's database (device, inode), the two collections' ids, the last
# write its metadata segments applied, and the last write queued in the store's pending writes.
Stamp = tuple[int, int, str, str, int, int]
# A record as the mirror is built from: kind, id, document, metadata, vector (float32 bytes).
Row = tuple[int, str, str | None, dict[str, Any] | None, bytes | None]
ChromaState = tuple[int, int, str, str, int]


def chroma_state(
    store_dir: Path, names: tuple[str, str], connection: sqlite3.Connection | None = None
) -> ChromaState | None:
    """The state of an embedded store's Chroma database, read with sqlite3 (read-only, no Chroma):
    None when it cannot be read, or is laid out otherwise than this Chroma version does.
    `connection`: one already open on that file (see `StateReader`)."""
    db = store_dir / "chroma.sqlite3"
    try:
        stat = db.stat()
        own = connection is None
        if connection is None:
            connection = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
        try:
            ids = dict(connection.execute("SELECT name, id FROM collections WHERE name IN (?, ?)", names))
            applied = connection.execute(
                "SELECT max(m.seq_id) FROM max_seq_id m JOIN segments s ON s.id = m.segment_id "
                "WHERE s.scope = 'METADATA'"
            ).fetchone()[0]
        finally:
            if own:
                connection.close()
    except (OSError, sqlite3.Error):
        return None
    if names[0] not in ids or names[1] not in ids:
        return None
    return (stat.st_dev, stat.st_ino, str(ids[names[0]]), str(ids[names[1]]), int(applied or 0))


class StateReader:
    """Reads `chroma_state` of one store again and again over one connection (opening one on
    Chroma's database costs a millisecond or two: its schema is large), opened anew when the
    file is replaced."""

    def __init__(self, store_dir: Path, names: tuple[str, str]) -> None:
        self.store_dir = store_dir
        self.names = names
        self._connection: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None

    def state(self) -> ChromaState | None:
        db = self.store_dir / "chroma.sqlite3"
        try:
            stat = db.stat()
            if self._connection is None or self._inode != (stat.st_dev, stat.st_ino):
                self.close()
                self._connection = sqlite3.connect(
                    f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5, check_same_thread=False
                )
                self._inode = (stat.st_dev, stat.st_ino)
        except (OSError, sqlite3.Error):
            self.close()
            return None
        state = chroma_state(self.store_dir, self.names, self._connection)
        if state is None:
            self.close()  # the next call opens it again
        return state

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None
        self._inode = None


def mirror_path(store_dir: Path, collection: str, cache_dir: Path | None = None) -> Path:
    """Where the mirror of the embedded store at `store_dir` (its `collection`) is kept."""
    where = cache_file("mirror", f"{store_dir.resolve()}#{collection}", cache_dir)
    return where.with_suffix(f".v{VERSION}.sqlite3")  # a file per layout


def _pack(meta: dict[str, Any] | None) -> tuple[bytes | None, bytes | None]:
    """A record's metadata as two blobs: its short keys, its long ones (None when empty)."""
    if meta is None:
        return None, None
    short = {k: v for k, v in meta.items() if k not in LONG_KEYS}
    long = {k: v for k, v in meta.items() if k in LONG_KEYS}
    return marshal.dumps(short), marshal.dumps(long) if long else None


def _touched(meta: dict[str, Any] | None) -> float | None:
    """A record's `touched` stamp (when it was last written), kept in an indexed column."""
    value = (meta or {}).get("touched")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _touched_after(where: dict[str, Any]) -> float | None:
    """The stamp of a `{"touched": {"$gt": stamp}}` filter, which the index answers."""
    clause = where.get("touched") if len(where) == 1 else None
    if isinstance(clause, dict) and len(clause) == 1 and "$gt" in clause:
        value = clause["$gt"]
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _unpack(short: bytes | None, long: bytes | None = None) -> dict[str, Any] | None:
    if short is None:
        return None
    meta: dict[str, Any] = marshal.loads(short)
    if long is not None:
        meta.update(marshal.loads(long))
    return meta


class Mirror:
    """One store's mirror file. Every change is made under the store's writer lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._matches: dict[tuple[int, str, int], list[int]] = {}  # a where's rows, per version
        self._version = 0  # bumped by every change made through this object
        self._pages: dict[tuple[int, int, int], int] = {}  # (kind, offset, version) -> the row before
        self._seen: bytes | None = None  # the stamp those were worked out under

    # -- the file --------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            # Derived state: a crash mid-write is rolled back by the journal; an OS crash may
            # leave it damaged, which reads as stale and is rebuilt.
            db.execute("PRAGMA synchronous = OFF")
            db.executescript(
                "CREATE TABLE IF NOT EXISTS records (n INTEGER PRIMARY KEY, kind INTEGER NOT NULL, "
                "id TEXT NOT NULL, document TEXT, meta BLOB, long BLOB, touched REAL, UNIQUE (kind, id));"
                "CREATE INDEX IF NOT EXISTS by_touch ON records (kind, touched);"
                "CREATE TABLE IF NOT EXISTS vectors (n INTEGER PRIMARY KEY, vector BLOB NOT NULL);"
                "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value BLOB);"
            )
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def stamp(self) -> Stamp | None:
        """The state of the store this mirror reflects (None: unknown, rebuild it)."""
        try:
            row = self.db.execute("SELECT value FROM state WHERE key = 'stamp'").fetchone()
        except sqlite3.Error:
            return None
        if row is None:
            return None
        try:
            saved = marshal.loads(row[0])
        except (ValueError, EOFError, TypeError):
            return None
        if not isinstance(saved, tuple) or len(saved) != 2 or saved[0] != (VERSION, sys.version_info[:2]):
            return None
        return tuple(saved[1])

    def set_stamp(self, stamp: Stamp | None) -> None:
        if stamp is None:
            self.db.execute("DELETE FROM state WHERE key = 'stamp'")
        else:
            value = marshal.dumps(((VERSION, sys.version_info[:2]), tuple(stamp)))
            self.db.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('stamp', ?)", (value,))

    def _changed(self) -> None:
        self._version += 1
        self._matches.clear()
        self._pages.clear()
        self._seen = None

    def _sync(self) -> None:
        """Forget what was worked out from the rows (a filter's matches, where the next page
        starts) when any process changed the mirror since: every change restamps it."""
        try:
            row = self.db.execute("SELECT value FROM state WHERE key = 'stamp'").fetchone()
        except sqlite3.Error:
            row = None
        seen = row[0] if row else None
        if seen != self._seen:
            self._version += 1
            self._matches.clear()
            self._pages.clear()
            self._seen = seen

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (rolled back on any error); what was read before is stale after."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            self._changed()

    def rebuild(self, rows: Iterable[Row], stamp: Stamp) -> None:
        """Replace everything with these (kind, id, document, metadata, vector) rows, in
        Chroma's order."""
        with self._transaction() as db:
            db.execute("DELETE FROM records")
            db.execute("DELETE FROM vectors")
            for kind, pid, doc, meta, vector in rows:
                n = db.execute(
                    "INSERT OR REPLACE INTO records (kind, id, document, meta, long, touched) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (kind, pid, doc, *_pack(meta), _touched(meta)),
                ).lastrowid
                if vector is not None:
                    db.execute("INSERT OR REPLACE INTO vectors (n, vector) VALUES (?, ?)", (n, vector))
            self.set_stamp(stamp)

    # -- reading, as Collection.get ----------------------------------------------

    def count(self, kind: int) -> int:
        return int(self.db.execute("SELECT count(*) FROM records WHERE kind = ?", (kind,)).fetchone()[0])

    def get(
        self,
        kind: int,
        ids: Sequence[str] | None = None,
        where: dict[str, Any] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        include: Sequence[str] = ("metadatas", "documents"),
    ) -> dict[str, Any] | None:
        """What `Collection.get` returns for these arguments; None when vectors are asked for
        and the mirror lacks one."""
        self._sync()
        full = "metadatas" in include
        columns = "n, id, document, meta, long" if full else "n, id, document, meta, NULL"
        if ids is not None:
            unique = list(dict.fromkeys(ids))
            if len(unique) != len(ids):
                duplicate = next(i for i in ids if ids.count(i) > 1)
                raise ValueError(f"Expected IDs to be unique, found duplicates of: {duplicate} in get.")
            found: list[tuple[int, str, str | None, bytes | None, bytes | None]] = []
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found.extend(
                    self.db.execute(
                        f"SELECT {columns} FROM records WHERE kind = ? AND id IN ({marks})", (kind, *chunk)
                    )
                )
            found.sort(key=lambda r: r[0])
            rows = [(pid, doc, _unpack(meta, long)) for _, pid, doc, meta, long in found]
            if where is not None:
                test = matcher(where)
                rows = [r for r in rows if test(r[2] or {})]
            rows = rows[offset or 0 :]
            if limit is not None:
                rows = rows[:limit]
        elif where is not None:
            numbers = self._matching(kind, where)[offset or 0 :]
            if limit is not None:
                numbers = numbers[:limit]
            rows = []
            for start in range(0, len(numbers), 500):
                picks = numbers[start : start + 500]
                marks = ",".join("?" * len(picks))
                chosen = self.db.execute(
                    f"SELECT {columns} FROM records WHERE kind = ? AND n IN ({marks}) ORDER BY n",
                    (kind, *picks),
                )
                rows.extend((pid, doc, _unpack(meta, long)) for _, pid, doc, meta, long in chosen)
        else:
            # Pages read one after another continue from the last row of the one before (an
            # OFFSET steps over every row before it: reading a store page by page would be
            # quadratic). `+kind`: walk the rows in order rather than an index on kind, which
            # would sort the whole collection for every page.
            after = self._pages.get((kind, offset or 0, self._version))
            if after is not None:
                query = f"SELECT {columns} FROM records WHERE +kind = ? AND n > ? ORDER BY n LIMIT ?"
                cursor = self.db.execute(query, (kind, after, -1 if limit is None else limit))
            else:
                query = f"SELECT {columns} FROM records WHERE +kind = ? ORDER BY n LIMIT ? OFFSET ?"
                cursor = self.db.execute(query, (kind, -1 if limit is None else limit, offset or 0))
            picked: list[Any] = cursor.fetchall()
            if picked:
                self._pages = {(kind, (offset or 0) + len(picked), self._version): picked[-1][0]}
            rows = [(pid, doc, _unpack(meta, long)) for _, pid, doc, meta, long in picked]
        vectors = None
        if "embeddings" in include:
            vectors = self._vectors(kind, [r[0] for r in rows])
            if vectors is None:
                return None
        return {
            "ids": [r[0] for r in rows],
            "documents": [r[1] for r in rows] if "documents" in include else None,
            "metadatas": [r[2] for r in rows] if "metadatas" in include else None,
            "embeddings": vectors,
            "included": list(include),
        }

    def _vectors(self, kind: int, ids: list[str]) -> list[Any] | None:
        """The vectors of these records, in order; None if the mirror lacks one."""
        import numpy as np

        found: dict[str, bytes] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                self.db.execute(
                    f"SELECT r.id, v.vector FROM records r JOIN vectors v ON v.n = r.n "
                    f"WHERE r.kind = ? AND r.id IN ({marks})",
                    (kind, *chunk),
                )
            )
        if len(found) != len(ids):
            return None
        return [np.frombuffer(found[i], dtype="<f4") for i in ids]

    def nearest(
        self, kind: int, query: Any, k: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]] | None:
        """The k records nearest to `query` by cosine distance (among those matching `where`),
        nearest first, as (id, distance); None if the mirror lacks a vector."""
        self._sync()
        import numpy as np

        numbers = self._matching(kind, where) if where is not None else None
        rows = self.db.execute(
            "SELECT r.n, r.id, v.vector FROM records r LEFT JOIN vectors v ON v.n = r.n "
            "WHERE +r.kind = ? ORDER BY r.n",
            (kind,),
        ).fetchall()
        if numbers is not None:
            wanted = set(numbers)
            rows = [r for r in rows if r[0] in wanted]
        if any(r[2] is None for r in rows):
            return None
        if not rows or k <= 0:
            return []
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)
        q = np.asarray(query, dtype=np.float32).ravel()
        if matrix.shape[1] != q.shape[0]:
            return None
        norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
        distance = 1.0 - (matrix @ q) / np.where(norms > 0, norms, 1.0)
        k = min(k, len(rows))
        best = np.argpartition(distance, k - 1)[:k]
        best = best[np.lexsort((best, distance[best]))]
        return [(rows[i][1], float(distance[i])) for i in best]

    def _matching(self, kind: int, where: dict[str, Any]) -> list[int]:
        """The rows (in order) whose metadata match `where`: scanned once, then kept for the
        pages that follow (until the mirror changes)."""
        key = (kind, repr(where), self._version)
        since = _touched_after(where)
        if key not in self._matches and since is not None:  # `changed_since`: by the index
            self._matches[key] = [
                n
                for (n,) in self.db.execute(
                    "SELECT n FROM records WHERE kind = ? AND touched > ? ORDER BY n", (kind, since)
                )
            ]
        if key not in self._matches:
            test = matcher(where)
            self._matches[key] = [
                n
                for n, meta in self.db.execute(
                    "SELECT n, meta FROM records WHERE +kind = ? ORDER BY n", (kind,)
                )
                if test(marshal.loads(meta) if meta is not None else {})
            ]
        return self._matches[key]

    # -- writing, as Chroma does -------------------------------------------------

    def apply(
        self,
        kind: int,
        op: str,
        ids: Sequence[str],
        metadatas: Sequence[dict[str, Any] | None] | None = None,
        documents: Sequence[str | None] | None = None,
        stamp: Stamp | None = None,
        vectors: Sequence[bytes | None] | None = None,
    ) -> None:
        """Make the change Chroma made (`add`, `update`, `upsert` or `delete`) and record the
        store's state after it."""
        with self._transaction() as db:
            if op == "delete":
                for pid in ids:
                    row = db.execute(
                        "SELECT n FROM records WHERE kind = ? AND id = ?", (kind, pid)
                    ).fetchone()
                    if row is not None:
                        db.execute("DELETE FROM records WHERE n = ?", row)
                        db.execute("DELETE FROM vectors WHERE n = ?", row)
            else:
                for i, pid in enumerate(ids):
                    patch = metadatas[i] if metadatas is not None else None
                    document = documents[i] if documents is not None else None
                    n = self._put(kind, op, pid, patch, document, documents is not None)
                    if n is not None and vectors is not None and vectors[i] is not None:
                        db.execute(
                            "INSERT OR REPLACE INTO vectors (n, vector) VALUES (?, ?)", (n, vectors[i])
                        )
            self.set_stamp(stamp)

    def _put(
        self, kind: int, op: str, pid: str, patch: dict[str, Any] | None, document: str | None, has_doc: bool
    ) -> int | None:
        """Write one record as Chroma does; its row number, or None when Chroma keeps it as it
        is (an update of a record it does not have, an add of one it has)."""
        row = self.db.execute(
            "SELECT n, document, meta, long FROM records WHERE kind = ? AND id = ?", (kind, pid)
        ).fetchone()
        if row is None:
            if op == "update":
                return None  # Chroma ignores an update of a record it does not have
            meta = {k: v for k, v in (patch or {}).items() if v is not None} or None
            return self.db.execute(
                "INSERT INTO records (kind, id, document, meta, long, touched) VALUES (?, ?, ?, ?, ?, ?)",
                (kind, pid, document, *_pack(meta), _touched(meta)),
            ).lastrowid
        if op == "add":
            return None  # Chroma keeps the record it has
        n, old_document, short, long = row
        meta = _unpack(short, long) or {}
        for key, value in (patch or {}).items():
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
        self.db.execute(
            "UPDATE records SET document = ?, meta = ?, long = ?, touched = ? WHERE n = ?",
            (document if has_doc else old_document, *_pack(meta or None), _touched(meta), n),
        )
        return int(n)


# -- Chroma's `where`, evaluated on a record's metadata ----------------------------


def matcher(where: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """A test of a record's metadata that agrees with Chroma's `where` filter."""
    tests = [_clause(key, value) for key, value in where.items()]
    return lambda meta: all(t(meta) for t in tests)


def _clause(key: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    if key == "$and":
        parts = [matcher(w) for w in value]
        return lambda meta: all(p(meta) for p in parts)
    if key == "$or":
        parts = [matcher(w) for w in value]
        return lambda meta: any(p(meta) for p in parts)
    if isinstance(value, dict):
        tests = [_operator(key, op, operand) for op, operand in value.items()]
        return lambda meta: all(t(meta) for t in tests)
    return _operator(key, "$eq", value)


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """Equal as Chroma compares: a boolean equals only a boolean; an int may equal a float."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) != isinstance(b, str):
        return False
    return bool(a == b)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _operator(key: str, op: str, operand: Any) -> Callable[[dict[str, Any]], bool]:
    def get(meta: dict[str, Any]) -> Any:
        return meta.get(key, _MISSING)

    if op == "$eq":
        return lambda meta: _scalar_or_member(get(meta), operand)
    if op == "$ne":
        return lambda meta: (v := get(meta)) is _MISSING or not _scalar_or_member(v, operand)
    if op == "$in":
        return lambda meta: any(_scalar_or_member(get(meta), o) for o in operand)
    if op == "$nin":
        return lambda meta: (v := get(meta)) is _MISSING or not any(_scalar_or_member(v, o) for o in operand)
    if op == "$contains":
        return lambda meta: isinstance(v := get(meta), list) and any(_same(x, operand) for x in v)
    if op == "$not_contains":
        return lambda meta: not (isinstance(v := get(meta), list) and any(_same(x, operand) for x in v))
    compare = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }.get(op)
    if compare is None:
        raise ValueError(f"the mirror does not evaluate {op!r}")
    return lambda meta: _number(v := get(meta)) and _number(operand) and bool(compare(v, operand))


def _scalar_or_member(value: Any, operand: Any) -> bool:
    if value is _MISSING:
        return False
    if isinstance(value, list):  # Chroma 1.5 matches a list value by its members
        return any(_same(x, operand) for x in value)
    return _same(value, operand)
