"""The bundled model's vectors of recent searches, kept in the user cache.

Embedding a query is fast; loading the model to do it (ONNX Runtime, its session, the
tokenizer) costs a quarter of a second of CPU, most of a search read from the mirror. A search
asked again (after a decision, to see what is left) takes its vector from here. A vector is kept
with what made it: the model file and the tokenizer (their checksum, size and date), the
versions of ONNX Runtime and tokenizers installed, the token limit and the threads; another of
any of them and the vectors are made anew. The model is deterministic for these: a kept vector
is the one it would make now, bit for bit.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from assistant import __version__
from assistant.cache import cache_file, read_pickle, write_pickle

KEPT = 200  # the most recent queries kept


def _file_id(path: str | None) -> tuple[str, int, int, int] | None:
    if not path:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (path, stat.st_size, stat.st_mtime_ns, stat.st_ino)


def model_identity(max_tokens: int, threads: int) -> Hashable | None:
    """What the bundled model's vectors depend on, read without loading it (None when part of it
    cannot be read: nothing is kept then)."""
    from assistant.minilm import model_file, tokenizer_file

    try:
        path, sha256 = model_file()
    except Exception:  # a broken install: embedding says so in its own words
        return None
    parts: list[Any] = [__version__, sha256, max_tokens, threads]
    parts += [_file_id(str(path)), _file_id(str(tokenizer_file()))]
    for package in ("onnxruntime", "tokenizers"):
        spec = importlib.util.find_spec(package)
        parts.append(_file_id(spec.origin if spec is not None else None))
    return None if any(p is None for p in parts) else tuple(parts)


def vector(
    text: str, identity: Hashable | None, embed: Callable[[str], Any], cache_dir: Path | None = None
) -> Any:
    """`embed(text)`, or the vector it gave before under the same `identity`."""
    import numpy as np

    if identity is None:
        return embed(text)
    path = cache_file("queries", "minilm", cache_dir)
    try:
        saved = read_pickle(path)
    except (OSError, ValueError, EOFError, AttributeError, ImportError, TypeError):
        saved = None
    kept: dict[str, bytes] = (
        saved["vectors"] if isinstance(saved, dict) and saved.get("for") == identity else {}
    )
    if text in kept:
        return np.frombuffer(kept[text], dtype="<f4")
    made = np.asarray(embed(text), dtype=np.float32)
    kept = {k: v for k, v in kept.items() if k != text}
    kept[text] = made.astype("<f4").tobytes()
    kept = dict(list(kept.items())[-KEPT:])
    try:
        write_pickle(path, {"for": identity, "vectors": kept})
    except OSError:
        pass  # only a cache
    return made
