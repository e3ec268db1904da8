"""The project's own error types: every user mistake surfaces as one of these."""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from pathlib import Path


class TriageError(Exception):
    """An error the user can act on; the CLI prints it without a traceback."""


class ConfigError(TriageError):
    """A setting, config file or agenda is wrong."""


class StoreError(TriageError):
    """The store cannot be opened or written."""


class DiskFullError(StoreError):
    """The disk holding the store has no room for a write."""


class ServerUnreachableError(StoreError):
    """The Chroma server cannot be reached: stopped, restarting, the network down, or the
    proxy in front of it answering that it is (HTTP 502/503/504). Unlike a refusal it passes:
    the review UI keeps a change it could not write and saves it when the server answers."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The error and those it came from (its cause or context, and theirs)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error (from Chroma, SQLite or the OS) means the disk is full."""
    return any(
        isinstance(e, DiskFullError)
        or (isinstance(e, OSError) and e.errno == errno.ENOSPC)
        or any(m in str(e).lower() for m in ("disk is full", "no space left on device"))
        for e in _chain(exc)
    )


# Below this much free space (or the size of the store's database, if larger: SQLite may
# need as much again to rewrite it) a Chroma internal error is taken for a full disk.
NEARLY_FULL = 32 * 1024 * 1024
# What Chroma's embedded engine says when applying its write log to the store failed: with
# too little room on the disk it fails so, not with the OS's "no space left on device".
_STORAGE_FAILURES = ("compaction", "backfill", "apply logs", "segment", "sqlite", "hnsw")


def nearly_full(path: Path) -> bool:
    """Whether the disk holding `path` (the store's folder) has too little room for Chroma to
    write: less than NEARLY_FULL free, or less than the store's database takes."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return False
    try:
        size = (path / "chroma.sqlite3").stat().st_size
    except OSError:
        size = 0
    return free < max(NEARLY_FULL, size)


def is_storage_failure(exc: BaseException) -> bool:
    """Whether an error is Chroma's own failure to write or compact its files (an
    `InternalError`, "Error in compaction: ..."), whose cause it does not say."""
    return any(
        type(e).__name__ == "InternalError" or any(m in str(e).lower() for m in _STORAGE_FAILURES)
        for e in _chain(exc)
        if not isinstance(e, TriageError)
    )


def is_disk_full_at(exc: BaseException, path: Path | None) -> bool:
    """Whether an error means the disk is full: it says so, or it is Chroma failing to write
    its files (`is_storage_failure`) while the disk holding the store at `path` is nearly full."""
    if is_disk_full(exc):
        return True
    return path is not None and is_storage_failure(exc) and nearly_full(path)


def disk_full(location: str, path: Path | None = None) -> DiskFullError:
    """The error to show when a write found the disk full: what to do, and that nothing is lost."""
    free = ""
    if path is not None:
        try:
            free = f" ({shutil.disk_usage(path).free // 1024:,} kB free)"
        except OSError:
            pass
    return DiskFullError(
        f"the disk holding the store at {location} is full{free}: free some space and run the command "
        "again. What was stored before is kept; a write that did not fit was not made."
    )


class ReadOnlyError(StoreError):
    """The store cannot be written: a read-only mount, or no permission."""


def is_read_only(exc: BaseException) -> bool:
    """Whether an error means the store cannot be written (a read-only mount, permissions)."""
    return any(
        isinstance(e, ReadOnlyError)
        or (isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EROFS))
        or any(m in str(e).lower() for m in ("readonly database", "read-only file system"))
        for e in _chain(exc)
    )


def read_only(location: str) -> ReadOnlyError:
    return ReadOnlyError(
        f"the store at {location} is read-only (a read-only mount, or no permission to write it): "
        "commands that read it (ranked, show, search, export, stats) still work; this one writes"
    )


class StoreGoneError(StoreError):
    """The store's folder was removed while the store was open."""


def store_gone(location: str) -> StoreGoneError:
    return StoreGoneError(
        f"the store at {location} was removed (its folder is gone): nothing was written, and it is "
        "not made again; restore the folder, or point --store / TRIAGE_STORE at the store"
    )


class InputError(TriageError):
    """A malformed input record, with where it is: file, line and/or record number."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        record: int | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.record = record
        super().__init__(self.location_text() + message)

    def location_text(self) -> str:
        """`file:line (record N): `, leaving out whatever is unknown."""
        where = self.path or ""
        if self.line is not None:
            where += f":{self.line}" if where else f"line {self.line}"
        if self.record is not None:
            where += f" (record {self.record})" if where else f"record {self.record}"
        return f"{where}: " if where else ""


def in_words(exc: BaseException) -> str:
    """What an unexpected error met while reading a record means, in words a user can act on
    (never the exception's class name): for the `could not be read: ...` of a skipped record or
    file. Errors of this project are already in words and come back as they are."""
    if isinstance(exc, InputError):
        return exc.message
    if isinstance(exc, TriageError):
        return str(exc)
    detail = str(exc).split("\n")[0].strip()[:160]
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to read"
    if isinstance(exc, KeyError):
        name = exc.args[0] if exc.args else None
        field = f"its {name!r} field" if isinstance(name, str | int) else "a field it needs"
        return f"{field} is missing or not in the form expected"
    if isinstance(exc, IndexError):
        return "a field it needs is empty or shorter than expected"
    if isinstance(exc, UnicodeError):
        return "it holds characters that cannot be read as text"
    if isinstance(exc, TypeError | AttributeError):
        return (
            "a field holds a value of an unexpected kind (a list, number or object where text was expected)"
        )
    if isinstance(exc, ValueError | ArithmeticError) and detail:
        return f"a value in it cannot be read ({detail})"
    return "something in it is not in the form expected"
