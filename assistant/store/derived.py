"""Values derived from every paper, kept between commands and brought up to date by reading
only the papers written since.

A count over the store (`triage stats`: statuses, stars, stale assessments) reads every paper;
after one decision, 99,999 of 100,000 give what they gave before. Each paper's value is kept in
the user cache with the mirror's mark (its generation and the number of its last write, see
`Mirror.changes`): the next command reads the papers written after the mark and computes only
theirs. A rebuild of the mirror or a deletion starts a new generation, and every paper is read
again; so does another `key` (what the values depend on besides the papers: an agenda's hash).
Like the mirror it is derived state: deleting it costs one full read.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

from assistant import __version__
from assistant.cache import cache_file, read_pickle, write_pickle
from assistant.store.mirror import PAPERS

if TYPE_CHECKING:
    from assistant.store.connection import Connection

VERSION = 1
T = TypeVar("T")


def per_paper(
    store: Connection,
    name: str,
    key: Hashable,
    compute: Callable[[str, str, dict[str, Any]], T],
    documents: bool = True,
) -> list[T] | None:
    """`compute(id, document, metadata)` of every paper, in the store's order, from the values
    kept for `name` and `key` and the papers written since; None when the store has no current
    mirror to read (the caller reads the store). `documents`: whether `compute` reads them."""
    mirror = store.mirror
    if mirror is None or not store.mirror_current():
        return None
    path = cache_file("derived", f"{mirror.path}#{name}{store.view.tag}")
    read = store.view.read
    wanted = (VERSION, __version__, key)
    saved: Any = None
    try:
        saved = read_pickle(path)
    except (OSError, ValueError, EOFError, AttributeError, ImportError, TypeError):
        saved = None
    usable = isinstance(saved, dict) and saved.get("for") == wanted
    since = saved["mark"] if usable else None
    found = mirror.changes(PAPERS, since, documents)
    if found is None:
        return None
    mark, every, rows = found
    values: dict[int, T] = {} if every else dict(saved["values"])
    # Equal values as one object: the cache file then holds each once (and reads back fast).
    shared: dict[Any, T] = {}
    last = max(values, default=0)
    ordered = True
    for n, pid, document, meta in rows:
        ordered = ordered and (n in values or n > last)
        last = max(last, n)
        value = compute(pid, document or "", meta if store.view.plain else read(meta) or {})
        try:
            value = shared.setdefault(value, value)
        except TypeError:  # not hashable: kept as it is
            pass
        values[n] = value
    if not ordered:  # a record numbered below one kept (not made by this version): sort
        values = dict(sorted(values.items()))
    if every or rows or mark != since:
        try:
            write_pickle(path, {"for": wanted, "mark": mark, "values": values})
        except OSError:
            pass  # only a cache: read again next time
    return list(values.values())
