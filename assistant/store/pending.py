"""Small writes waiting for Chroma: the store's queue of pending writes.

A decision, a note, a star, a reading list's change is a few metadata keys of one paper. A
command that makes only such writes (`mark`, `note`, `list add`) and finds the store's mirror
current does not open Chroma (that alone costs more than the whole command): it appends the
write to this queue, a SQLite file inside the store's folder (`triage-pending.sqlite3`, so it
is part of the store: copied, backed up and removed with it), and applies it to the mirror.
The next process that opens Chroma applies the queue to it, in order, before it reads or
writes anything else, and empties it (`Connection.drain`). Until then every reader sees the
writes through the mirror.

Queued are only Chroma calls that carry no text to embed: `update` of papers' metadata, and
`upsert`/`delete` of the store's own records. Each is kept whole, as the call was made.
"""

from __future__ import annotations

import marshal
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE_NAME = "triage-pending.sqlite3"


@dataclass(frozen=True)
class Write:
    """One queued Chroma call."""

    seq: int
    kind: int  # mirror.PAPERS or mirror.META
    op: str  # update, upsert, delete
    ids: list[str]
    metadatas: list[dict[str, Any] | None] | None
    documents: list[str | None] | None


class Pending:
    """The queue of one embedded store (the file is made at the first write)."""

    def __init__(self, store_dir: Path) -> None:
        self.path = store_dir / FILE_NAME
        self._db: sqlite3.Connection | None = None

    def _open(self, create: bool) -> sqlite3.Connection | None:
        if self._db is None:
            if not create and not self.path.exists():
                return None
            db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            db.execute(
                "CREATE TABLE IF NOT EXISTS writes (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind INTEGER, "
                "op TEXT, ids BLOB, metadatas BLOB, documents BLOB)"
            )
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def last(self) -> int:
        """The number of the last write ever queued (it only grows; 0 before the first)."""
        db = self._open(create=False)
        if db is None:
            return 0
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'writes'").fetchone()
        return int(row[0]) if row else 0

    def waiting(self) -> bool:
        db = self._open(create=False)
        return db is not None and db.execute("SELECT 1 FROM writes LIMIT 1").fetchone() is not None

    def append(
        self,
        kind: int,
        op: str,
        ids: Sequence[str],
        metadatas: Sequence[dict[str, Any] | None] | None = None,
        documents: Sequence[str | None] | None = None,
    ) -> int:
        """Queue one call (durably); returns its number."""
        db = self._open(create=True)
        assert db is not None
        cursor = db.execute(
            "INSERT INTO writes (kind, op, ids, metadatas, documents) VALUES (?, ?, ?, ?, ?)",
            (
                kind,
                op,
                marshal.dumps(list(ids)),
                marshal.dumps(list(metadatas)) if metadatas is not None else None,
                marshal.dumps(list(documents)) if documents is not None else None,
            ),
        )
        return int(cursor.lastrowid or 0)

    def writes(self) -> list[Write]:
        """Every queued call, oldest first."""
        db = self._open(create=False)
        if db is None:
            return []
        return [
            Write(
                int(seq),
                int(kind),
                str(op),
                marshal.loads(ids),
                marshal.loads(metas) if metas is not None else None,
                marshal.loads(docs) if docs is not None else None,
            )
            for seq, kind, op, ids, metas, docs in db.execute(
                "SELECT seq, kind, op, ids, metadatas, documents FROM writes ORDER BY seq"
            )
        ]

    def remove_through(self, seq: int) -> None:
        """Forget the calls up to `seq`, applied to Chroma."""
        db = self._open(create=False)
        if db is not None:
            db.execute("DELETE FROM writes WHERE seq <= ?", (seq,))
