"""The mirror's file (`assistant.store.mirror`): its layout, its state, and every change made
to it, as Chroma makes it.

A record's short metadata (what filters look at) is in a narrow table, `records`, with when it
was written (`touched`) and the number of the write transaction that last changed it (`seq`);
its document, long metadata and vector are in tables of their own, so that a filter or a count
reads no text. `terms` indexes the values of the keys commands filter on
(`assistant.store.filters`). The `state` table says which state of the store the file reflects
(`stamp`), the file's generation (a new one at every rebuild and at every deletion of a paper:
row numbers are then not what they were) and the tokens of the papers' vectors
(`vectors_tokens`, for `assistant.store.vectors`).
"""

from __future__ import annotations

import marshal
import secrets
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from assistant.cache import cache_file
from assistant.store import vectors as vector_file
from assistant.store.filters import terms
from assistant.store.people import AGENDA_PREFIX, PERSON_PREFIX, stamp_key
from assistant.store.schema import is_number

VERSION = 6
PAPERS, META = 0, 1  # the two collections
# Metadata keys kept apart from the rest: long texts no `where` looks at, so that a filter reads
# only the short keys.
LONG_KEYS = frozenset({"assessment", "merges", "extra", "biblio", "failed_reason", "note", "authors"})
CHUNK = 500  # ids or row numbers per `IN (...)`

# What the mirror reflects: Chroma's database (device, inode), the two collections' ids, the last
# write its metadata segments applied, and the last write queued in the store's pending writes.
Stamp = tuple[int, int, str, str, int, int]
# A record as the mirror is built from: kind, id, document, metadata, vector (float32 bytes).
Row = tuple[int, str, str | None, dict[str, Any] | None, bytes | None]
ChromaState = tuple[int, int, str, str, int]
# Where the records' changes stand: the mirror's generation (a new one at every rebuild and every
# deletion of a paper) and the number of its last write.
Mark = tuple[str, int]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records (n INTEGER PRIMARY KEY, kind INTEGER NOT NULL, id TEXT NOT NULL, "
    "meta BLOB, touched REAL, seq INTEGER NOT NULL DEFAULT 0, UNIQUE (kind, id));"
    "CREATE INDEX IF NOT EXISTS by_touch ON records (kind, touched);"
    "CREATE INDEX IF NOT EXISTS by_seq ON records (kind, seq);"
    "CREATE TABLE IF NOT EXISTS documents (n INTEGER PRIMARY KEY, document TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS longs (n INTEGER PRIMARY KEY, long BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS vectors (n INTEGER PRIMARY KEY, vector BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS terms (kind INTEGER NOT NULL, key TEXT NOT NULL, term TEXT NOT NULL, "
    "n INTEGER NOT NULL, PRIMARY KEY (kind, key, term, n)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value BLOB);"
)


def mirror_path(store_dir: Path, collection: str, cache_dir: Path | None = None) -> Path:
    """Where the mirror of the embedded store at `store_dir` (its `collection`) is kept."""
    where = cache_file("mirror", f"{store_dir.resolve()}#{collection}", cache_dir)
    return where.with_suffix(f".v{VERSION}.sqlite3")  # a file per layout


def remove_other_layouts(path: Path) -> None:
    """Remove the mirrors of this store in other layouts (made by other versions), and what was
    derived from them: a version that reads them again rebuilds its own."""
    stem = path.name.split(".")[0]
    for old in path.parent.glob(f"{stem}.v*"):
        if not old.name.startswith(f"{stem}.v{VERSION}."):
            try:
                old.unlink()
            except OSError:
                pass


def _pack(meta: dict[str, Any] | None) -> tuple[bytes | None, bytes | None]:
    """A record's metadata as two blobs: its short keys, its long ones (None when empty)."""
    if meta is None:
        return None, None
    short = {k: v for k, v in meta.items() if not _long(k)}
    long = {k: v for k, v in meta.items() if _long(k)}
    return marshal.dumps(short), marshal.dumps(long) if long else None


def _long(key: str) -> bool:
    """Whether a metadata key is kept apart (a person's note, `d:<person>:note`, as a note)."""
    if key in LONG_KEYS:
        return True
    # A person's note (`d:<person>:note`), another agenda's assessment (`a:<hash>:assessment`).
    return key.startswith((PERSON_PREFIX, AGENDA_PREFIX)) and key.rpartition(":")[2] in LONG_KEYS


def _touched(meta: dict[str, Any] | None) -> float | None:
    """When a record was last written, kept in an indexed column: the latest of its stamps
    (`touched`, and each agenda's `a:<hash>:touched`, `assistant.store.people`)."""
    stamps = [float(v) for k, v in (meta or {}).items() if stamp_key(k) and is_number(v)]
    return max(stamps) if stamps else None


def _touched_after(where: dict[str, Any]) -> float | None:
    """The stamp of a filter the index on when records were written narrows: `{"touched":
    {"$gt": stamp}}`, or `$or` of such tests of stamps (a person reading with another agenda).
    The records the index finds are a superset: the filter is then tested on each."""
    if len(where) != 1:
        return None
    ((key, clause),) = where.items()
    if key == "$or" and isinstance(clause, list) and clause:
        found = {_touched_after(w) if isinstance(w, dict) else None for w in clause}
        return found.pop() if len(found) == 1 else None
    if stamp_key(key) and isinstance(clause, dict) and len(clause) == 1 and "$gt" in clause:
        value = clause["$gt"]
        if is_number(value):
            return float(value)
    return None


def _unpack(short: bytes | None, long: bytes | None = None) -> dict[str, Any] | None:
    if short is None:
        return None
    meta: dict[str, Any] = marshal.loads(short)
    if long is not None:
        meta.update(marshal.loads(long))
    return meta


def _select(documents: bool, metadatas: bool) -> str:
    """The start of a query of records: (n, id, document, short metadata, long metadata), the
    parts not asked for as NULL (their tables are not read)."""
    columns = [
        "r.n",
        "r.id",
        "d.document" if documents else "NULL",
        "r.meta" if metadatas else "NULL",
        "l.long" if metadatas else "NULL",
    ]
    joins = " LEFT JOIN documents d ON d.n = r.n" if documents else ""
    joins += " LEFT JOIN longs l ON l.n = r.n" if metadatas else ""
    return f"SELECT {', '.join(columns)} FROM records r{joins}"


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


class MirrorFile:
    """One store's mirror file: its tables, its state, and every change to it (made under the
    store's writer lock). `Mirror` reads it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._matches: dict[tuple[int, str, int], list[int]] = {}  # a where's rows, per version
        self._version = 0  # bumped by every change made through this object
        self._pages: dict[tuple[int, int, int], int] = {}  # (kind, offset, version) -> the row before
        self._seen: bytes | None = None  # the stamp those were worked out under
        self._seq: int | None = None  # the number of the write transaction under way

    # -- the file --------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            # Derived state: a crash mid-write is rolled back by the journal; an OS crash may
            # leave it damaged, which reads as stale and is rebuilt.
            db.execute("PRAGMA synchronous = OFF")
            db.executescript(SCHEMA)
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def remove_derived(self) -> None:
        """Remove the files derived from this mirror (the papers' vectors as a matrix)."""
        vector_file.remove(self.path)

    def _state(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_state(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", (key, value))

    def stamp(self) -> Stamp | None:
        """The state of the store this mirror reflects (None: unknown, rebuild it)."""
        try:
            value = self._state("stamp")
        except sqlite3.Error:
            return None
        if value is None:
            return None
        try:
            saved = marshal.loads(value)
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
            self._set_state("stamp", value)

    def vectors_tokens(self) -> tuple[str, str] | None:
        """Name the papers' vectors as they are (in the mirror's order): (base, token). The
        token is new whenever a vector, or which papers there are, changes; the base only when
        a paper is deleted or its vector changes (not when papers are added: their rows come
        after every other). None before the first rebuild."""
        found = dict(self.db.execute("SELECT key, value FROM state WHERE key IN ('vectors', 'vectors_base')"))
        if not found.get("vectors") or not found.get("vectors_base"):
            return None
        return str(found["vectors_base"]), str(found["vectors"])

    def _changed(self) -> None:
        self._version += 1
        self._matches.clear()
        self._pages.clear()
        self._seen = None

    def _sync(self) -> None:
        """Forget what was worked out from the rows (a filter's matches, where the next page
        starts) when any process changed the mirror since: every change restamps it."""
        try:
            seen = self._state("stamp")
        except sqlite3.Error:
            seen = None
        if seen != self._seen:
            self._version += 1
            self._matches.clear()
            self._pages.clear()
            self._seen = seen

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (rolled back on any error); what was read before is stale after.
        The records it writes are numbered with the next write's number (`seq`)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._seq = int(self._state("seq") or 0) + 1
            self._set_state("seq", self._seq)
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            self._seq = None
            self._changed()

    def _renew(self, *keys: str) -> None:
        """New tokens for these states (`generation`, `vectors`, `vectors_base`)."""
        for key in keys:
            self._set_state(key, secrets.token_hex(8))

    def rebuild(self, rows: Iterable[Row], stamp: Stamp) -> None:
        """Replace everything with these (kind, id, document, metadata, vector) rows, in
        Chroma's order."""
        ordered: dict[tuple[int, str], Row] = {}
        for row in rows:
            ordered.pop((row[0], row[1]), None)  # a record given twice is where it was given last
            ordered[(row[0], row[1])] = row
        with self._transaction() as db:
            for table in ("records", "documents", "longs", "vectors", "terms"):
                db.execute(f"DELETE FROM {table}")
            seq = self._seq
            packed = [(n, row, *_pack(row[3])) for n, row in enumerate(ordered.values(), start=1)]
            db.executemany(
                "INSERT INTO records (n, kind, id, meta, touched, seq) VALUES (?, ?, ?, ?, ?, ?)",
                ((n, row[0], row[1], short, _touched(row[3]), seq) for n, row, short, _ in packed),
            )
            db.executemany(
                "INSERT INTO documents (n, document) VALUES (?, ?)",
                ((n, row[2]) for n, row, _, _ in packed if row[2] is not None),
            )
            db.executemany(
                "INSERT INTO longs (n, long) VALUES (?, ?)",
                ((n, long) for n, _, _, long in packed if long is not None),
            )
            db.executemany(
                "INSERT INTO vectors (n, vector) VALUES (?, ?)",
                ((n, row[4]) for n, row, _, _ in packed if row[4] is not None),
            )
            db.executemany(
                "INSERT INTO terms (kind, key, term, n) VALUES (?, ?, ?, ?)",
                ((row[0], key, t, n) for n, row, _, _ in packed for key, t in terms(row[3])),
            )
            self._renew("generation", "vectors", "vectors_base")
            self.set_stamp(stamp)

    def _mark(self) -> Mark | None:
        """The mirror's generation and the number of its last write, or None before its first
        rebuild."""
        found = dict(self.db.execute("SELECT key, value FROM state WHERE key IN ('generation', 'seq')"))
        if not found.get("generation"):
            return None
        return str(found["generation"]), int(found.get("seq") or 0)

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
            renew: set[str] = set()
            if op == "delete":
                for pid in ids:
                    row = db.execute(
                        "SELECT n, meta FROM records WHERE kind = ? AND id = ?", (kind, pid)
                    ).fetchone()
                    if row is None:
                        continue
                    n = row[0]
                    self._set_terms(kind, n, _unpack(row[1]), None)
                    for table in ("records", "documents", "longs", "vectors"):
                        db.execute(f"DELETE FROM {table} WHERE n = ?", (n,))
                    if kind == PAPERS:
                        renew.update(("generation", "vectors", "vectors_base"))
            else:
                for i, pid in enumerate(ids):
                    patch = metadatas[i] if metadatas is not None else None
                    document = documents[i] if documents is not None else None
                    n, added = self._put(kind, op, pid, patch, document, documents is not None)
                    if n is None:
                        continue
                    if added and kind == PAPERS:
                        renew.add("vectors")  # a new paper: its row comes after every other
                    if vectors is not None and vectors[i] is not None:
                        db.execute(
                            "INSERT OR REPLACE INTO vectors (n, vector) VALUES (?, ?)", (n, vectors[i])
                        )
                        if kind == PAPERS:
                            renew.update(("vectors",) if added else ("vectors", "vectors_base"))
            self._renew(*sorted(renew))
            self.set_stamp(stamp)

    def _set_terms(self, kind: int, n: int, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Bring the index of a record's values from its old metadata to its new."""
        before, after = set(terms(old)), set(terms(new))
        self.db.executemany(
            "DELETE FROM terms WHERE kind = ? AND key = ? AND term = ? AND n = ?",
            [(kind, key, t, n) for key, t in before - after],
        )
        self.db.executemany(
            "INSERT OR IGNORE INTO terms (kind, key, term, n) VALUES (?, ?, ?, ?)",
            [(kind, key, t, n) for key, t in after - before],
        )

    def _set_texts(self, n: int, document: str | None, long: bytes | None) -> None:
        for table, column, value in (("documents", "document", document), ("longs", "long", long)):
            if value is None:
                self.db.execute(f"DELETE FROM {table} WHERE n = ?", (n,))
            else:
                self.db.execute(f"INSERT OR REPLACE INTO {table} (n, {column}) VALUES (?, ?)", (n, value))

    def _put(
        self, kind: int, op: str, pid: str, patch: dict[str, Any] | None, document: str | None, has_doc: bool
    ) -> tuple[int | None, bool]:
        """Write one record as Chroma does; its row number (None when Chroma keeps it as it is:
        an update of a record it does not have, an add of one it has) and whether it is new."""
        db = self.db
        row = db.execute(
            "SELECT r.n, d.document, r.meta, l.long FROM records r LEFT JOIN documents d ON d.n = r.n "
            "LEFT JOIN longs l ON l.n = r.n WHERE r.kind = ? AND r.id = ?",
            (kind, pid),
        ).fetchone()
        if row is None:
            if op == "update":
                return None, False  # Chroma ignores an update of a record it does not have
            meta = {k: v for k, v in (patch or {}).items() if v is not None} or None
            short, long = _pack(meta)
            n = db.execute(
                "INSERT INTO records (kind, id, meta, touched, seq) VALUES (?, ?, ?, ?, ?)",
                (kind, pid, short, _touched(meta), self._seq),
            ).lastrowid
            assert n is not None
            self._set_texts(n, document, long)
            self._set_terms(kind, n, None, meta)
            return n, True
        if op == "add":
            return None, False  # Chroma keeps the record it has
        n, old_document, short, long = row
        old = _unpack(short, long)
        meta = dict(old or {})
        for key, value in (patch or {}).items():
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
        new_short, new_long = _pack(meta or None)
        db.execute(
            "UPDATE records SET meta = ?, touched = ?, seq = ? WHERE n = ?",
            (new_short, _touched(meta), self._seq, n),
        )
        self._set_texts(n, document if has_doc else old_document, new_long)
        self._set_terms(kind, n, old, meta or None)
        return int(n), False
