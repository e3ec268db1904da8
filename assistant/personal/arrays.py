"""The cache's array files: `.npy` files written whole and atomically, appended to in place,
and memory-mapped when read (a ranking reads the rows it trains on and one pass to score)."""

from __future__ import annotations

import fcntl
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def is_token(name: str) -> bool:
    """Whether a file's name starts with a generation's or a vocabulary's token."""
    return len(name) == 16 and all(c in "0123456789abcdef" for c in name)


def mapped(path: Path) -> np.ndarray:
    """A .npy file memory-mapped read-only, as a plain array (a memmap's indexing is slower)."""
    array: np.ndarray = np.load(path, mmap_mode="r").view(np.ndarray)
    return array


def save_text(path: Path, text: str) -> None:
    """Write a small text file atomically."""
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def save_array(path: Path, array: np.ndarray) -> None:
    """Write an array in .npy form atomically (a temporary file, then a rename)."""
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.save(fh, array, allow_pickle=False)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def locked(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on the file at `path` (across processes); False when it cannot
    be taken."""
    try:
        handle = open(path, "a+b")
    except OSError:
        yield False
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def append_array(path: Path, rows: np.ndarray, before: int) -> bool:
    """Append `rows` to the .npy file at `path` of `before` rows and say so in its header, which
    keeps its size (a reader of the rows before them reads them as they were); False, and the
    file as it was, when the file is not of `before` such rows or its header has no room for
    the new shape."""
    from numpy.lib import format as npy

    with open(path, "r+b") as fh:
        version = npy.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(fh)
        else:
            return False
        start = fh.tell()
        width = int(np.prod(shape[1:], dtype=np.int64))
        if fortran or dtype != rows.dtype or tuple(shape[1:]) != rows.shape[1:] or shape[0] != before:
            return False
        grown = (before + len(rows), *shape[1:])
        header = repr({"descr": npy.dtype_to_descr(dtype), "fortran_order": False, "shape": grown})
        room = start - (npy.MAGIC_LEN + (2 if version == (1, 0) else 4))
        if len(header) + 1 > room:
            return False
        fh.seek(start + before * width * dtype.itemsize)
        fh.truncate()  # nothing should follow; were it so, it is no row the pickle names
        fh.write(np.ascontiguousarray(rows).tobytes())
        fh.flush()
        fh.seek(start - room)
        fh.write((header + " " * (room - len(header) - 1) + "\n").encode("latin1"))
    return True
