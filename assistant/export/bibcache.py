"""BibTeX exports from entries kept between exports: a paper's entry is written once per state
of the paper.

Writing a BibTeX entry (escaping every field for LaTeX, splitting names) and making the stored
paper it is written from cost about half a millisecond a paper: an export of 11,000 accepted
papers seconds, every time, though one decision since the last export changed one paper. Each
paper's entry is kept, written with a stand-in for its citation key, with what the export
needs of the paper without making it (the fields a selection tests, what the citation keys
and aliases are made from), in a SQLite file of the user cache. A kept entry is named by the
paper's row in the store's mirror and the number of the write that last changed it
(`Reads.listing`): a paper written since is written again, and a rebuild of the mirror (a new
generation) makes every entry anew. What the export writes is the same text as writing every
paper (`assistant.export.bib.render`): the same papers in the same order, the keys and aliases
worked out over the whole export as there, the entry text the same bibtexparser writes; a
paper whose entry names aliases is written whole, as there.

The file is derived state: deleting it costs one export written in full. It is kept for one
version of the code that writes entries (its modules' files, bibtexparser's and pylatexenc's).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from assistant import __version__
from assistant.cache import cache_file
from assistant.models import Status, StoredPaper
from assistant.order import queue_key
from assistant.selection import PaperFields, Selection

if TYPE_CHECKING:
    from assistant.store import Store

VERSION = 2
KEY = "\x00key\x00"  # the stand-in for the citation key in a kept entry
# The code an entry's text comes from: a change to any of them (an upgrade) writes entries anew.
_MODULES = (
    "assistant.export.bib",
    "assistant.export.latex",
    "assistant.export.mathtext",
    "assistant.export.common",
    "assistant.export.keys",
    "assistant.export.bibcache",
    "assistant.models",
    "assistant.store.schema",
    "assistant.triage.keys",
    "assistant.selection",
    "bibtexparser",
    "pylatexenc",
)
# What is kept of a paper: its id, the fields a selection tests (status as its value), its key
# (source key, base key), alias candidates, and its entry as (text before the key, after it),
# None when its text does not split so (it is written whole).
Kept = tuple[str, tuple[Any, ...], str | None, str, list[str], str | None, str | None]


def _identity() -> str:
    parts = [str(VERSION), __version__]
    for name in _MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        try:
            stat = os.stat(origin) if origin else None
        except OSError:
            stat = None
        parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}" if stat else f"{name}:?")
    return "|".join(parts)


class _Fields(NamedTuple):
    """`PaperFields` as a tuple (made 11,000 times an export, a frozen dataclass is slow to make)."""

    status: Status
    starred: bool
    lists: tuple[str, ...]
    sources: tuple[str, ...]
    tags: tuple[str, ...]
    relevance: float | None
    topics: dict[str, int] | None
    day: int | None


_STATUS = {s.value: s for s in Status}


def _fields_from(kept: tuple[Any, ...]) -> _Fields:
    return _Fields(_STATUS.get(kept[0]) or Status(kept[0]), *kept[1:])


def _keep(item: StoredPaper, dialect: str) -> Kept:
    """What is kept of a paper for `dialect`."""
    from assistant.export.bib import alias_candidates, entry, write_entries
    from assistant.export.keys import base_key, source_key

    p = item.paper
    f = PaperFields.of(item)
    kept_fields = (f.status.value, f.starred, f.lists, f.sources, f.tags, f.relevance, f.topics, f.day)
    block = entry(item, KEY, dialect)
    text = write_entries([block])
    head: str | None = f"@{block.entry_type}{{"
    tail: str | None = text[len(f"{head}{KEY}") :]
    if not text.startswith(f"{head}{KEY},\n") or text.count(KEY) != 1:
        head = tail = None
    return (p.id, kept_fields, source_key(p), base_key(p), alias_candidates(p), head, tail)


class _File:
    """The kept entries of one store's mirror."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS entries (dialect TEXT NOT NULL, n INTEGER NOT NULL, "
            "generation TEXT NOT NULL, seq INTEGER NOT NULL, kept BLOB NOT NULL, PRIMARY KEY (dialect, n));"
            "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT);"
        )
        identity = _identity()
        row = self.db.execute("SELECT value FROM state WHERE key = 'identity'").fetchone()
        if row is None or row[0] != identity:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("DELETE FROM entries")
            self.db.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('identity', ?)", (identity,))
            self.db.execute("COMMIT")

    def read(self, dialect: str, generation: str, rows: Sequence[tuple[int, str, int]]) -> dict[int, Kept]:
        """The kept entries of these (row number, id, write number) that are still the paper's."""
        wanted = {n: seq for n, _, seq in rows}
        out: dict[int, Kept] = {}
        numbers = list(wanted)
        for start in range(0, len(numbers), 500):
            chunk = numbers[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for n, seq, blob in self.db.execute(
                f"SELECT n, seq, kept FROM entries WHERE dialect = ? AND generation = ? AND n IN ({marks})",
                (dialect, generation, *chunk),
            ):
                if wanted[n] == seq:
                    out[n] = marshal.loads(blob)
        return out

    def write(self, dialect: str, generation: str, made: Sequence[tuple[int, int, Kept]]) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("DELETE FROM entries WHERE generation != ?", (generation,))
            self.db.executemany(
                "INSERT OR REPLACE INTO entries (dialect, n, generation, seq, kept) VALUES (?, ?, ?, ?, ?)",
                [(dialect, n, generation, seq, marshal.dumps(kept)) for n, seq, kept in made],
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()


def export(
    store: Store,
    selection: Selection,
    limit: int | None,
    score: Callable[[str, float | None], float] | None,
    dialect: str,
) -> tuple[int, str] | None:
    """(papers, text) of the BibTeX export of the selected papers, most relevant first (by
    `score` of (id, relevance), the queue's order, when given), as `bib.render` writes them;
    None when the store has no current mirror to number its papers by (export them in full)."""
    listing = store.listing(selection.where())
    if listing is None or store.mirror is None:
        return None
    generation, rows = listing
    path = cache_file("export", f"{store.mirror.path}#bib{store.view.tag}").with_suffix(".sqlite3")
    try:
        file = _File(path)
        try:
            kept = file.read(dialect, generation, rows)
        finally:
            file.close()
    except (sqlite3.Error, OSError, ValueError, EOFError, TypeError):
        path.unlink(missing_ok=True)  # damaged: made anew, and this export written in full
        return None
    made = _make(store, [n for n, _, _ in rows if n not in kept], dialect)
    if made is None:
        return None
    if made:
        try:
            file = _File(path)
            try:
                file.write(dialect, generation, [(n, seq, value) for n, seq, value, _ in made])
            finally:
                file.close()
        except (sqlite3.Error, OSError):
            pass  # only a cache: these are made again next time
    kept.update((n, value) for n, _, value, _ in made)
    whole = {n: item for n, _, _, item in made}  # papers made now: written whole if need be
    chosen: list[tuple[int, Kept, _Fields]] = []
    for n, _, _ in rows:
        value = kept[n]
        f = _fields_from(value[1])
        if selection.matches_fields(f):
            chosen.append((n, value, f))
    chosen.sort(
        key=lambda c: (
            c[2].relevance is None,
            *queue_key(
                score(c[1][0], c[2].relevance)
                if score
                else c[2].relevance
                if c[2].relevance is not None
                else 0.0,
                c[2].day,
                c[1][0],
            ),
        )
    )
    if limit:
        chosen = chosen[:limit]
    text = _write(store, chosen, whole, dialect)
    return None if text is None else (len(chosen), text)


def _make(
    store: Store, numbers: Sequence[int], dialect: str
) -> list[tuple[int, int, Kept, StoredPaper]] | None:
    """What is kept of these papers, made from them now (None when one left the store since)."""
    records = store.numbered(numbers)
    if len(records) != len(numbers):
        return None
    return [(n, seq, _keep(item, dialect), item) for n, seq, item in records]


def _write(
    store: Store, chosen: Sequence[tuple[int, Kept, _Fields]], whole: dict[int, StoredPaper], dialect: str
) -> str | None:
    """The entries of the chosen papers: the kept text with each key; a paper with aliases,
    or whose kept text does not split at its key, written whole (None when one left the store
    meanwhile)."""
    from assistant.export.keys import assign_aliases, assign_keys

    keys = assign_keys([(value[0], value[2], value[3]) for _, value, _ in chosen])
    other = assign_aliases([(value[0], value[4]) for _, value, _ in chosen], keys)
    alone = [
        (n, value) for n, value, _ in chosen if value[0] in other or value[5] is None or value[6] is None
    ]
    for n, _, item in store.numbered([n for n, _ in alone if n not in whole]):
        whole[n] = item
    if any(n not in whole for n, _ in alone):
        return None
    written: dict[int, str] = {}
    if alone:
        from assistant.export.bib import entry, write_entries

        for n, value in alone:
            pid = value[0]
            written[n] = write_entries([entry(whole[n], keys[pid], dialect, other.get(pid, ()))])
    return "\n\n".join(
        written[n] if n in written else f"{value[5]}{keys[value[0]]}{value[6]}" for n, value, _ in chosen
    )
