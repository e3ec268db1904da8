from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from assistant import minilm
from assistant.embedding import MiniLMEmbedder
from assistant.errors import ConfigError


def test_embeds_offline_and_puts_similar_texts_closer() -> None:
    ef = MiniLMEmbedder()
    v = np.asarray(
        ef(["A cat sits on the mat.", "A kitten rests on a rug.", "Lattice QCD at finite density."])
    )
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]


def test_batching_by_length_keeps_each_text_with_its_vector() -> None:
    texts = [
        "short",
        "a considerably longer sentence about neural machine translation systems",
        "mid length text",
    ]
    together = np.asarray(MiniLMEmbedder(batch_size=2)(texts))
    alone = np.asarray([MiniLMEmbedder()([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_registered_with_chroma_and_rebuilt_from_its_config() -> None:
    from chromadb.utils.embedding_functions import known_embedding_functions

    assert known_embedding_functions[MiniLMEmbedder.name()] is MiniLMEmbedder
    rebuilt = MiniLMEmbedder.build_from_config(MiniLMEmbedder(max_tokens=128).get_config())
    assert rebuilt.max_tokens == 128


def test_a_corrupt_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    monkeypatch.setattr(minilm, "model_file", lambda: (bad, "0" * 64))
    with pytest.raises(ConfigError, match="corrupt"):
        MiniLMEmbedder(max_tokens=77)(["x"])  # a size not loaded yet, so the file is read


def test_works_with_an_empty_home_and_downloads_nothing(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    home.mkdir()
    code = (
        "import socket\n"
        "def deny(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = deny\n"
        "socket.create_connection = deny\n"
        "from assistant.embedding import MiniLMEmbedder\n"
        "print(len(MiniLMEmbedder()(['offline please'])[0]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
    env["HOME"] = str(home)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "384"
    written = [p for p in home.rglob("*") if p.is_file()]
    assert not [p for p in written if p.suffix in (".onnx", ".safetensors", ".bin", ".json")], written
    assert all(p.stat().st_size < 1_000_000 for p in written), "nothing may be downloaded into HOME"
