"""Offline sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX, `assistant.minilm`) registered as
a Chroma embedding function. Nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from assistant.errors import ConfigError
from assistant.minilm import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_TOKENS,
    DIMENSIONS,
    MODEL_NAME,
    _Model,
    available_cores,
    embed,
    model_file,
    tokenizer_file,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_TOKENS",
    "DIMENSIONS",
    "MODEL_NAME",
    "MiniLMEmbedder",
    "_Model",
    "available_cores",
    "make_embedder",
    "model_file",
    "tokenizer_file",
]


@register_embedding_function
class MiniLMEmbedder(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 as int8 ONNX, run locally (`assistant.minilm.embed`: one text per run,
    a caller per core). `batch_size` (texts per run) and `threads` (callers) change the speed
    only, never a vector."""

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
        return _Model.get(self.max_tokens)

    def load(self) -> None:
        """Load (and verify) the model now rather than on the first call."""
        self._model()

    def __call__(self, input: Documents) -> Embeddings:
        texts = [str(t) for t in input]
        if not texts:
            return []
        return list(embed(texts, self.max_tokens, self.batch_size, self.threads, self.on_batch))

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
        # Every store made before one text per run keeps "batch_size": 8 in its collection's
        # configuration. The batch is a speed setting that no vector depends on, so a saved
        # one is not followed: such a store embeds as fast as a new one.
        return MiniLMEmbedder(max_tokens=int(config.get("max_tokens", DEFAULT_MAX_TOKENS)))

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
