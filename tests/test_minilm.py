"""The embedder's execution (one single-threaded session, a caller per core, one text per run)
and the lean model file (the shipped one less its NaN guards, made once into the user's cache):
the same vectors bit for bit as the shipped file run the previous way, whatever happens to the
cache."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from assistant import minilm
from assistant.embedding import MiniLMEmbedder
from assistant.models import Paper
from conftest import sample_records


@pytest.fixture(scope="module")
def documents() -> list[str]:
    return [
        Paper.create(title=str(r["title"]), abstract=str(r.get("abstract") or "")).document
        for r in sample_records()
    ]


@pytest.fixture(scope="module")
def previous_vectors(documents: list[str]) -> np.ndarray:
    """The sample's vectors as the embedder made them before: the shipped file, one session
    with two intra-op threads, length-sorted batches of 8."""
    model = minilm._Model(minilm.DEFAULT_MAX_TOKENS, 2, minilm.model_file()[0])
    out = np.empty((len(documents), minilm.DIMENSIONS), dtype=np.float32)
    order = sorted(range(len(documents)), key=lambda i: len(documents[i]))
    for start in range(0, len(order), 8):
        chunk = order[start : start + 8]
        out[chunk] = model.embed_batch([documents[i] for i in chunk])
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lean file and its sidecar, made once for the module (in a cache of its own)."""
    cache = tmp_path_factory.mktemp("lean-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(minilm, "cache_dir", lambda: cache)
        patch.setattr(minilm, "_tried", set())
        path, lean = minilm.file_to_run(derive=True)
    assert lean and path.parent == cache
    return path


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model loaded and no derivation tried in this process (the test's cache is empty)."""
    monkeypatch.setattr(minilm._Model, "_cache", {})
    monkeypatch.setattr(minilm, "_tried", set())


def install(made: Path) -> Path:
    """The module's lean file copied into this test's cache: where the embedder looks."""
    target = minilm.lean_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(made, target)
    shutil.copy(made.with_suffix(".json"), target.with_suffix(".json"))
    return target


def loaded() -> minilm._Model:
    return minilm._Model._cache[(minilm.DEFAULT_MAX_TOKENS, 1)]


def test_sample_vectors_are_bit_identical_to_the_previous_execution(
    made: Path, fresh: None, documents: list[str], previous_vectors: np.ndarray
) -> None:
    install(made)
    vectors = np.asarray(MiniLMEmbedder()(documents))
    assert loaded().lean and loaded().path == minilm.lean_file()
    assert np.array_equal(vectors, previous_vectors)
    # A saved batch size or one caller changes nothing either (a few, for time).
    few = documents[:12]
    assert np.array_equal(minilm.embed(few, batch_size=8, threads=1), previous_vectors[:12])


def test_the_shipped_file_run_the_new_way_gives_the_same_vectors(
    fresh: None, documents: list[str], previous_vectors: np.ndarray
) -> None:
    """What a query or a short import runs while the cache has no lean file."""
    got = minilm.embed(documents[:12])
    assert not loaded().lean
    assert np.array_equal(got, previous_vectors[:12])


def test_the_lean_file_is_made_once_and_reused(
    made: Path, fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = install(made)
    monkeypatch.setattr(minilm, "_without_nan_guards", lambda source: pytest.fail("derived again"))
    assert minilm.file_to_run(derive=True) == (target, True)
    meta = json.loads(target.with_suffix(".json").read_text())
    assert meta["source_sha256"] == minilm.model_file()[1]
    assert meta["sha256"] != meta["source_sha256"]  # really another file: 12 nodes fewer
    assert target.stat().st_size < minilm.model_file()[0].stat().st_size


def test_a_damaged_lean_file_is_not_run_and_is_made_again(made: Path, fresh: None) -> None:
    target = install(made)
    whole = target.read_bytes()
    target.write_bytes(whole[: len(whole) // 2])  # truncated: a full disk, a killed copy
    assert minilm.file_to_run(derive=False) == (minilm.model_file()[0], False)
    assert minilm.file_to_run(derive=True) == (target, True)
    assert target.read_bytes() == whole


def test_a_lean_file_checked_by_another_onnx_runtime_is_not_run(made: Path, fresh: None) -> None:
    target = install(made)
    sidecar = target.with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "onnxruntime": "0.0.1"}))
    assert minilm.file_to_run(derive=False) == (minilm.model_file()[0], False)


def test_without_onnx_the_shipped_file_runs_and_says_so_only_in_the_debug_log(
    fresh: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    monkeypatch.setattr(minilm, "DERIVE_FROM", 2)
    texts = ["Sparse attention for long documents.", "Lattice QCD at finite density."]
    with caplog.at_level(logging.DEBUG, logger="assistant.minilm"):
        vectors = minilm.embed(texts)
    assert vectors.shape == (2, minilm.DIMENSIONS)
    assert not loaded().lean and loaded().path == minilm.model_file()[0]
    assert "lean embedding model not made (ModuleNotFoundError" in caplog.text
    assert capsys.readouterr() == ("", "")
    assert not minilm.lean_file().exists()
    # Not tried again in this process: a second import does not pay for another failure.
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="assistant.minilm"):
        minilm.embed(texts)
    assert "not made" not in caplog.text


def test_an_unusable_cache_leaves_the_shipped_file_in_use(
    fresh: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setattr(minilm, "cache_dir", lambda: blocker / "models")
    assert minilm.file_to_run(derive=True) == (minilm.model_file()[0], False)


def test_a_graph_without_the_expected_guards_is_not_derived(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"])], "plain", [x], [y])
    path = tmp_path / "plain.onnx"
    save(helper.make_model(graph), str(path))
    with pytest.raises(ValueError, match="0 NaN guards for 1 softmaxes"):
        minilm._without_nan_guards(path)


def test_stores_made_with_batches_of_8_embed_the_new_way() -> None:
    """Every store made before keeps {"max_tokens": 256, "batch_size": 8} in its collection's
    configuration: it opens with the same name and keys and runs one text per run."""
    rebuilt = MiniLMEmbedder.build_from_config({"max_tokens": 256, "batch_size": 8})
    assert rebuilt.batch_size == minilm.DEFAULT_BATCH_SIZE == 1
    assert set(rebuilt.get_config()) == {"max_tokens", "batch_size"}
    assert MiniLMEmbedder.name() == "paper-triage-minilm-int8"


def test_every_text_keeps_its_vector_and_progress_counts_each(fresh: None) -> None:
    texts = [f"paper {i}: " + "word " * (i * 7 % 40) for i in range(9)]
    seen: list[int] = []
    together = minilm.embed(texts, threads=3, on_batch=seen.append)
    alone = np.vstack([minilm.embed([t], threads=1) for t in texts])
    assert np.array_equal(together, alone)
    assert sum(seen) == len(texts)
