"""Caches of derived state (the queue's index, the personal model's features): where they
live and how they are written. Each can be deleted at any time; it is rebuilt from the store."""

from __future__ import annotations

import fcntl
import gc
import hashlib
import os
import pickle
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import platformdirs


def cache_file(kind: str, location: str, cache_dir: Path | None = None) -> Path:
    """The cache of one kind for one store (named by its location key)."""
    base = cache_dir or Path(platformdirs.user_cache_dir("triage"))
    return base / kind / f"{hashlib.sha256(location.encode()).hexdigest()[:16]}.pickle"


def features_cache(location: str, cache_dir: Path | None = None) -> Path:
    """Where the personal model's text features of the store named `location` (its cache key)
    are cached."""
    return cache_file("personal", location, cache_dir)


def cache_folder(path: Path) -> Path:
    """The folder beside the features' pickle that holds their arrays (and the fitted state)."""
    return path.with_suffix("")


def training_folder(location: str, cache_dir: Path | None = None) -> Path:
    """Where the training kept for the store named `location` (its `cache_key`: this person's
    view of it) is, with its estimate and its locks."""
    return cache_folder(features_cache(location, cache_dir))


# In the folder of a kept training: held by the background ranking while it trains
# (`training`); a command that would train waits for it this long at most.
TRAINING_LOCK = "training.lock"
TRAINING_WAIT = 30.0


@contextmanager
def training(folder: Path) -> Iterator[bool]:
    """Hold the store's training lock while inside: the background ranking started after a
    write (`assistant.estimate_refresh`) does while it trains the model for the decisions just
    written, and a command that would train the same waits for it (`wait_for_training`) and
    reads what it kept. Waits for a waiter's moment of checking; yields False (holding nothing)
    when the lock file cannot be made."""
    fd = _training_lock(folder)
    if fd is None:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True  # released when the descriptor closes, or with the process
    finally:
        os.close(fd)


def hold_training(folder: Path) -> int | None:
    """The store's training lock, taken now without waiting, as an open descriptor to hand to
    the process that will train (`adopted` there); None when it cannot be had (held, or no
    lock file)."""
    fd = _training_lock(folder)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _training_lock(folder: Path) -> int | None:
    """The training lock's file, opened (made if need be); None when it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder / TRAINING_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


@contextmanager
def adopted(fd: int) -> Iterator[bool]:
    """Hold the training lock another process took and handed over (`hold_training`) while
    inside, then let it go."""
    try:
        yield True
    finally:
        with suppress(OSError):
            os.close(fd)


# When this process first waited for each store's training: a command waits TRAINING_WAIT in
# all, however many times it asks (the `ranked` answer's wait, then the ranking's).
_waiting_since: dict[Path, float] = {}


def wait_for_training(folder: Path, timeout: float = TRAINING_WAIT) -> bool:
    """Wait while another process trains this store's model (`training`), until `timeout`
    seconds after this process first waited for it (then the caller trains itself); True when
    there was one to wait for."""
    try:
        fd = os.open(folder / TRAINING_LOCK, os.O_RDONLY)
    except OSError:
        return False  # none has ever trained in the background here
    waited = False
    deadline = _waiting_since.setdefault(folder, time.monotonic()) + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return waited
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return waited
                waited = True
                time.sleep(0.01)
    finally:
        os.close(fd)


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
