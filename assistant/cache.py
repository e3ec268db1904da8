"""Caches of derived state (the queue's index, the personal model's features): where they
live and how they are written. Each can be deleted at any time; it is rebuilt from the store."""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import platformdirs


def cache_file(kind: str, location: str, cache_dir: Path | None = None) -> Path:
    """The cache of one kind for one store (named by its location key)."""
    base = cache_dir or Path(platformdirs.user_cache_dir("triage"))
    return base / kind / f"{hashlib.sha256(location.encode()).hexdigest()[:16]}.pickle"


MAGIC = b"triage-cache-1\n"


def write_pickle(path: Path, payload: Any) -> None:
    """Write atomically: a temporary file beside it, then a rename (a half-written cache is
    never read). The body is preceded by its SHA-256, so a damaged file is never used."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_pickle(path: Path) -> Any:
    """A cache written by `write_pickle`; ValueError if it is not one or was damaged since."""
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError("not a cache file of this version")
    digest, body = data[len(MAGIC) : len(MAGIC) + 32], memoryview(data)[len(MAGIC) + 32 :]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError("the file was damaged (checksum mismatch)")
    with no_collection():
        return pickle.loads(body)  # noqa: S301 - our own file, checksum verified


@contextmanager
def no_collection() -> Iterator[None]:
    """No cyclic garbage collection while many objects are made that form no cycle (a cache
    read, a row per paper): with a store's worth of objects alive, each collection walks all
    of them, and at 100k papers the collections doubled the time to read the queue's index."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
