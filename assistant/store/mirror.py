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

Its layout (`assistant.store.layout`) serves the reads of the daily loop: a record's short
metadata (what filters look at) apart from its text and vector; an index of the values of the
keys commands filter on (`assistant.store.filters`: status, star, reading lists); and, per
record, the number of the last write that changed it, so that what is derived from every record
(`assistant.store.derived`, `assistant.export.bibcache`) is brought up to date by reading only
the records written since. The papers' vectors are also kept as one matrix in a file beside it
(`assistant.store.vectors`), for search.

`get` answers as `Collection.get` does: the same records, order and `where` semantics (`$ne`
and `$nin` match a record without the key; a boolean matches only a boolean); `nearest` finds
the papers nearest in meaning to a vector by exact cosine distance (Chroma's index is an
approximation of it).
"""

from __future__ import annotations

import marshal
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from assistant.store import vectors as vector_file
from assistant.store.filters import Lookup, lookups, matcher, narrowing
from assistant.store.layout import (
    META,
    PAPERS,
    VERSION,
    ChromaState,
    Mark,
    MirrorFile,
    Row,
    Stamp,
    _chunks,
    _select,
    _touched_after,
    _unpack,
    mirror_path,
    remove_other_layouts,
)

__all__ = [
    "META",
    "PAPERS",
    "VERSION",
    "ChromaState",
    "Mirror",
    "Row",
    "Stamp",
    "StateReader",
    "chroma_state",
    "matcher",
    "mirror_path",
    "remove_other_layouts",
]


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


class Mirror(MirrorFile):
    """One store's mirror, read as Chroma's collections are (`get`, `count`, `nearest`), and
    by row (`changes`, `listing`, `numbered`)."""

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
        select = _select("documents" in include, "metadatas" in include)
        if ids is not None:
            unique = list(dict.fromkeys(ids))
            if len(unique) != len(ids):
                duplicate = next(i for i in ids if ids.count(i) > 1)
                raise ValueError(f"Expected IDs to be unique, found duplicates of: {duplicate} in get.")
            found: list[tuple[int, str, str | None, bytes | None, bytes | None]] = []
            for chunk in _chunks(unique):
                marks = ",".join("?" * len(chunk))
                found.extend(
                    self.db.execute(f"{select} WHERE r.kind = ? AND r.id IN ({marks})", (kind, *chunk))
                )
            found.sort(key=lambda r: r[0])
            if where is not None:
                test = matcher(where)
                shorts = self._shorts([r[0] for r in found]) if "metadatas" not in include else None
                found = [
                    r
                    for r in found
                    if test((_unpack(r[3], r[4]) if shorts is None else _unpack(shorts.get(r[0]))) or {})
                ]
            found = found[offset or 0 :]
            if limit is not None:
                found = found[:limit]
            rows = [(pid, doc, _unpack(meta, long)) for _, pid, doc, meta, long in found]
        elif where is not None:
            numbers = self._matching(kind, where)[offset or 0 :]
            if limit is not None:
                numbers = numbers[:limit]
            rows = []
            for picks in _chunks(numbers):
                marks = ",".join("?" * len(picks))
                chosen = self.db.execute(f"{select} WHERE r.n IN ({marks}) ORDER BY r.n", tuple(picks))
                rows.extend((pid, doc, _unpack(meta, long)) for _, pid, doc, meta, long in chosen)
        else:
            # Pages read one after another continue from the last row of the one before (an
            # OFFSET steps over every row before it: reading a store page by page would be
            # quadratic). `+kind`: walk the rows in order rather than an index on kind, which
            # would sort the whole collection for every page.
            after = self._pages.get((kind, offset or 0, self._version))
            if after is not None:
                query = f"{select} WHERE +r.kind = ? AND r.n > ? ORDER BY r.n LIMIT ?"
                cursor = self.db.execute(query, (kind, after, -1 if limit is None else limit))
            else:
                query = f"{select} WHERE +r.kind = ? ORDER BY r.n LIMIT ? OFFSET ?"
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

    def _shorts(self, numbers: Sequence[int]) -> dict[int, bytes | None]:
        """The short metadata of these records, by row number."""
        out: dict[int, bytes | None] = {}
        for chunk in _chunks(numbers):
            marks = ",".join("?" * len(chunk))
            out.update(self.db.execute(f"SELECT n, meta FROM records WHERE n IN ({marks})", tuple(chunk)))
        return out

    def _vectors(self, kind: int, ids: list[str]) -> list[Any] | None:
        """The vectors of these records, in order; None if the mirror lacks one."""
        import numpy as np

        found: dict[str, bytes] = {}
        for chunk in _chunks(ids):
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
        nearest first, as (id, distance); None if the mirror lacks a vector. The papers' vectors
        are read as one mapped matrix (`assistant.store.vectors`), brought up to date by the
        first search after they change."""
        self._sync()
        wanted = self._matching(kind, where) if where is not None else None
        matrix = self._matrix() if kind == PAPERS else None
        found = vector_file.nearest(matrix, query, k, wanted) if matrix is not None else None
        if found is None:
            return self._nearest_rows(kind, query, k, wanted)
        ids: dict[int, str] = {}
        for chunk in _chunks([n for n, _ in found]):
            marks = ",".join("?" * len(chunk))
            ids.update(self.db.execute(f"SELECT n, id FROM records WHERE n IN ({marks})", tuple(chunk)))
        if len(ids) != len(found):
            return self._nearest_rows(kind, query, k, wanted)
        return [(ids[n], distance) for n, distance in found]

    def _matrix(self) -> vector_file.Matrix | None:
        """The papers' vectors as one matrix, from their files: the papers added since appended
        when the files are behind, written anew when there are none for this base token; None
        when a paper has no vector in the mirror."""
        tokens = self.vectors_tokens()
        if tokens is None:
            return None
        base, token = tokens
        loaded = vector_file.load(self.path, base, token)
        if loaded is not None:
            return loaded
        kept = vector_file.header(self.path, base)
        if kept is not None:
            added = self._vector_rows(tokens, after=int(kept["last"]))
            if added is not None and len(added[1]):
                appended = vector_file.append(self.path, base, str(kept.get("token")), token, *added)
                if appended is not None:
                    return appended
        every = self._vector_rows(tokens, after=0)
        if every is None or not len(every[1]):
            return None
        written = vector_file.write(self.path, base, token, *every)
        return written or vector_file.Matrix(every[0], every[1], vector_file.norms(every[0]))

    def _vector_rows(self, tokens: tuple[str, str], after: int) -> tuple[Any, Any] | None:
        """(vectors, record numbers) of the papers after record `after`, in order; None when one
        has no vector, or the vectors changed while they were read."""
        import numpy as np

        rows = self.db.execute(
            "SELECT r.n, v.vector FROM records r LEFT JOIN vectors v ON v.n = r.n "
            "WHERE +r.kind = ? AND r.n > ? ORDER BY r.n",
            (PAPERS, after),
        ).fetchall()
        # Every change of the vectors renews their tokens in its own transaction: the same
        # tokens after the read say the rows are theirs.
        if self.vectors_tokens() != tokens or any(r[1] is None for r in rows):
            return None
        if len({len(r[1]) for r in rows}) > 1:
            return None
        vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
        return vectors, np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def _nearest_rows(
        self, kind: int, query: Any, k: int, wanted: list[int] | None
    ) -> list[tuple[str, float]] | None:
        """`nearest` from the vectors' table itself (no matrix file to read)."""
        import numpy as np

        rows = self.db.execute(
            "SELECT r.n, r.id, v.vector FROM records r LEFT JOIN vectors v ON v.n = r.n "
            "WHERE +r.kind = ? ORDER BY r.n",
            (kind,),
        ).fetchall()
        if wanted is not None:
            chosen = set(wanted)
            rows = [r for r in rows if r[0] in chosen]
        if any(r[2] is None for r in rows):
            return None
        if not rows or k <= 0:
            return []
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), -1)
        found = vector_file.nearest(
            vector_file.Matrix(matrix, np.arange(len(rows)), vector_file.norms(matrix)), query, k, None
        )
        return None if found is None else [(rows[i][1], distance) for i, distance in found]

    def _matching(self, kind: int, where: dict[str, Any]) -> list[int]:
        """The rows (in order) whose metadata match `where`: from the index when it answers the
        filter, else tested one by one (on the rows the index narrows it to); kept for the pages
        that follow (until the mirror changes)."""
        key = (kind, repr(where), self._version)
        if key in self._matches:
            return self._matches[key]
        since = _touched_after(where)
        exact = lookups(where)
        if since is not None:  # `changed_since`: by the index on when records were written
            test = matcher(where)
            found = [
                n
                for n, meta in self.db.execute(
                    "SELECT n, meta FROM records WHERE kind = ? AND touched > ? ORDER BY n", (kind, since)
                )
                if test(marshal.loads(meta) if meta is not None else {})
            ]
        elif exact is not None:
            found = sorted(self._lookup(kind, exact))
        else:
            test = matcher(where)
            narrow = narrowing(where)
            if narrow is not None:
                shorts = self._shorts(sorted(self._lookup(kind, narrow)))
                pairs: Iterable[tuple[int, bytes | None]] = sorted(shorts.items())
            else:
                pairs = self.db.execute("SELECT n, meta FROM records WHERE +kind = ? ORDER BY n", (kind,))
            found = [n for n, meta in pairs if test(marshal.loads(meta) if meta is not None else {})]
        self._matches[key] = found
        return found

    def _lookup(self, kind: int, lookup: Lookup) -> set[int]:
        """The rows an index lookup (`assistant.store.filters.lookups`) finds."""
        how, parts = lookup
        if how == "any":
            found: set[int] = set()
            for key, t in parts:
                found.update(
                    n
                    for (n,) in self.db.execute(
                        "SELECT n FROM terms WHERE kind = ? AND key = ? AND term = ?", (kind, key, t)
                    )
                )
            return found
        sets = [self._lookup(kind, part) for part in parts]
        if how == "and":
            return set.intersection(*sets)
        return set.union(*sets)

    # -- what changed -----------------------------------------------------------

    def changes(
        self, kind: int, since: Mark | None, documents: bool = True
    ) -> tuple[Mark, bool, list[tuple[int, str, str | None, dict[str, Any]]]] | None:
        """The records written after `since` (every record when `since` is None or of another
        generation: a rebuild or a deletion came between), as (the mark they bring a reader up
        to, whether these are every record, [(row number, id, document, metadata)] in order);
        None when the mirror has no generation yet."""
        select = _select(documents, True)
        for _ in range(5):
            mark = self._mark()
            if mark is None:
                return None
            every = since is None or since[0] != mark[0]
            if every:
                cursor = self.db.execute(f"{select} WHERE +r.kind = ? ORDER BY r.n", (kind,))
            else:
                assert since is not None
                cursor = self.db.execute(
                    f"{select} WHERE r.kind = ? AND r.seq > ? ORDER BY r.n", (kind, since[1])
                )
            rows = [(n, pid, doc, _unpack(meta, long) or {}) for n, pid, doc, meta, long in cursor]
            # A rebuild or a deletion renews the generation in its own transaction: the same one
            # after the read says no record left meanwhile. (Records written meanwhile may be
            # read already, and are read again next time: their number is above the mark.)
            again = self._mark()
            if again is not None and again[0] == mark[0]:
                return mark, every, rows
        return None

    def listing(
        self, kind: int, where: dict[str, Any] | None
    ) -> tuple[str, list[tuple[int, str, int]]] | None:
        """(generation, [(row number, id, write number)]) of the records matching `where` (all
        when None), in order; None before the mirror's first rebuild, or when one came between."""
        self._sync()
        mark = self._mark()
        if mark is None:
            return None
        if where is None:
            rows = self.db.execute(
                "SELECT n, id, seq FROM records WHERE +kind = ? ORDER BY n", (kind,)
            ).fetchall()
        else:
            rows = []
            for chunk in _chunks(self._matching(kind, where)):
                marks = ",".join("?" * len(chunk))
                rows += self.db.execute(
                    f"SELECT n, id, seq FROM records WHERE n IN ({marks}) ORDER BY n", tuple(chunk)
                ).fetchall()
        again = self._mark()
        return (mark[0], rows) if again is not None and again[0] == mark[0] else None

    def numbered(self, numbers: Sequence[int]) -> list[tuple[int, str, int, str | None, dict[str, Any]]]:
        """(row number, id, write number, document, metadata) of these records, in order."""
        select = _select(True, True).replace("SELECT r.n, r.id,", "SELECT r.n, r.id, r.seq,", 1)
        out: list[tuple[int, str, int, str | None, dict[str, Any]]] = []
        for chunk in _chunks(sorted(numbers)):
            marks = ",".join("?" * len(chunk))
            for n, pid, seq, doc, meta, long in self.db.execute(
                f"{select} WHERE r.n IN ({marks}) ORDER BY r.n", tuple(chunk)
            ):
                out.append((n, pid, seq, doc, _unpack(meta, long) or {}))
        return out
