"""The papers' vectors as one matrix in files beside the mirror, memory-mapped by a search.

Reading 100,000 vectors from the mirror's table costs half a second; the same matrix mapped
from a file costs nothing until it is used, and one matrix-vector product over it is exact
cosine distance to every paper. The files are derived state, named after the mirror's two
vectors tokens (`MirrorFile.vectors_tokens`): the base token, which a rebuild, a deletion or a
changed vector of a paper replaces (the files are then written anew from the mirror), and the
token, which a new paper also replaces (its rows are then appended to the files: an import of
20 papers costs the next search 20 rows, not 100,000). A decision changes neither.

Beside the raw matrix (`<base>.vectors.f32`, little-endian float32, rows in the mirror's
order) are each row's record number in the mirror (`<base>.rows.i64`) and norm
(`<base>.norms.f32`); a header (`<base>.json`, replaced atomically) says for which token and
how many rows they hold. Rows are appended before the header counts them, so a reader never
maps a row that is not all there.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

PARTS = {"vectors": ("f32", "<f4"), "rows": ("i64", "<i8"), "norms": ("f32", "<f4")}


class Matrix(NamedTuple):
    vectors: Any  # rows x dimensions, float32
    rows: Any  # each row's record number in the mirror, ascending
    norms: Any  # each row's norm


def _file(path: Path, base: str, part: str) -> Path:
    suffix = "json" if part == "header" else "lock" if part == "lock" else f"{part}.{PARTS[part][0]}"
    return path.with_name(f"{path.name}.{base}.{suffix}")


def header(path: Path, base: str) -> dict[str, Any] | None:
    """What the files of this base token hold: {"token", "count", "dim", "last"} (the last
    row's record number), or None when there are none."""
    try:
        found = json.loads(_file(path, base, "header").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or not all(
        isinstance(found.get(k), int) for k in ("count", "dim", "last")
    ):
        return None
    return found


def load(path: Path, base: str, token: str) -> Matrix | None:
    """The matrix kept for these tokens, mapped; None when the files hold another (or none)."""
    import numpy as np

    found = header(path, base)
    if found is None or found.get("token") != token or found["count"] <= 0:
        return None
    count, dim = found["count"], found["dim"]
    try:
        return Matrix(
            np.memmap(_file(path, base, "vectors"), dtype="<f4", mode="r", shape=(count, dim)),
            np.memmap(_file(path, base, "rows"), dtype="<i8", mode="r", shape=(count,)),
            np.memmap(_file(path, base, "norms"), dtype="<f4", mode="r", shape=(count,)),
        )
    except (OSError, ValueError):
        return None


def norms(vectors: np.ndarray) -> np.ndarray:
    """Each row's norm, as `Mirror.nearest` always worked them out (row by row: a row's norm is
    the same in any matrix)."""
    import numpy as np

    found: np.ndarray = np.linalg.norm(vectors, axis=1).astype("<f4", copy=False)
    return found


def _write_header(path: Path, base: str, found: dict[str, Any]) -> None:
    target = _file(path, base, "header")
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(found, fh)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _locked(path: Path, base: str) -> Iterator[None]:
    with open(_file(path, base, "lock"), "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def write(path: Path, base: str, token: str, vectors: np.ndarray, rows: np.ndarray) -> Matrix | None:
    """Keep this matrix for these tokens (the files of other base tokens go), and map it; None
    when it cannot be written (a cache: the caller uses the matrix it has)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path, base):
            for part, array in (("vectors", vectors), ("rows", rows), ("norms", norms(vectors))):
                fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
                try:
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(array.astype(PARTS[part][1], copy=False).tobytes())
                    os.replace(tmp, _file(path, base, part))
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            last = int(rows[-1]) if len(rows) else 0
            _write_header(
                path, base, {"token": token, "count": len(rows), "dim": vectors.shape[1], "last": last}
            )
    except OSError:
        return None
    remove(path, keep=base)
    return load(path, base, token)


def append(
    path: Path, base: str, since: str, token: str, vectors: np.ndarray, rows: np.ndarray
) -> Matrix | None:
    """Append rows (record numbers after the last kept) to the files kept for token `since`,
    now for `token`, and map them; None when the files changed meanwhile or cannot be written."""
    try:
        with _locked(path, base):
            found = header(path, base)
            if found is not None and found.get("token") == token:
                return load(path, base, token)  # another process appended them
            if found is None or found.get("token") != since or vectors.shape[1] != found["dim"]:
                return None
            count = found["count"]
            for part, array in (("vectors", vectors), ("rows", rows), ("norms", norms(vectors))):
                data = array.astype(PARTS[part][1], copy=False)
                kept = count * data.itemsize * (data.shape[1] if data.ndim == 2 else 1)
                with open(_file(path, base, part), "r+b") as fh:
                    fh.truncate(kept)  # whatever an append cut short left after the counted rows
                    fh.seek(kept)
                    fh.write(data.tobytes())
            _write_header(
                path, base, {**found, "token": token, "count": count + len(rows), "last": int(rows[-1])}
            )
    except OSError:
        return None
    return load(path, base, token)


def remove(path: Path, keep: str | None = None) -> None:
    """Remove the matrices kept for this mirror (but the one of base token `keep`)."""
    for old in path.parent.glob(f"{path.name}.*"):
        parts = old.name[len(path.name) + 1 :].split(".")
        if len(parts) >= 2 and parts[0] != keep and parts[-1] in ("json", "f32", "i64", "lock"):
            old.unlink(missing_ok=True)


def nearest(
    matrix: Matrix, query: Any, k: int, wanted: Sequence[int] | None
) -> list[tuple[int, float]] | None:
    """The k rows nearest to `query` by cosine distance, nearest first, as (record number,
    distance), among the records `wanted` (all when None); None when the query's length is not
    the vectors', or a wanted record has no row. The arithmetic is the mirror's own: the same
    float32 products, norms and tie order, so the same papers at the same distances."""
    import numpy as np

    vectors, rows, norms = matrix
    if wanted is not None:
        chosen = np.asarray(wanted, dtype=np.int64)
        positions = np.searchsorted(rows, chosen)
        if len(positions) and (positions.max() >= len(rows) or not np.array_equal(rows[positions], chosen)):
            return None
        vectors, rows, norms = vectors[positions], rows[positions], norms[positions]
    if not len(rows) or k <= 0:
        return []
    q = np.asarray(query, dtype=np.float32).ravel()
    if vectors.shape[1] != q.shape[0]:
        return None
    scaled = np.asarray(norms) * (float(np.linalg.norm(q)) or 1.0)
    distance = 1.0 - np.asarray(vectors @ q) / np.where(scaled > 0, scaled, 1.0)
    k = min(k, len(rows))
    best = np.argpartition(distance, k - 1)[:k]
    best = best[np.lexsort((best, distance[best]))]
    return [(int(rows[i]), float(distance[i])) for i in best]
