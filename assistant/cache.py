"""Caches of derived state (the queue's index, the personal model's features): where they
live and how they are written. Each can be deleted at any time; it is rebuilt from the store."""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import platformdirs


def cache_file(kind: str, location: str, cache_dir: Path | None = None) -> Path:
    """The cache of one kind for one store (named by its location key)."""
    base = cache_dir or Path(platformdirs.user_cache_dir("triage"))
    return base / kind / f"{hashlib.sha256(location.encode()).hexdigest()[:16]}.pickle"


def write_pickle(path: Path, payload: Any) -> None:
    """Write atomically: a temporary file beside it, then a rename (a half-written cache is
    never read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
