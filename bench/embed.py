"""Embedding throughput: today's settings against the shipped ones, same documents, same run.

    python bench/embed.py [--n 500] [--rounds 2] [--busy 0]

Documents are built as the store builds them (Paper.document: title, blank line, abstract)
from the abstracts of ../shared/fixtures/screening/*.csv.gz (real, long abstracts), or from
the bundled sample with varied titles where the fixtures are absent. "before" is the session
as configured until now (batch 8, ONNX Runtime's default spinning threads); "after" is
MiniLMEmbedder as shipped. Rounds alternate before/after so load from elsewhere hits both;
the median rate per setting is reported. --busy N runs N busy-looping processes meanwhile
(CPU contention, as when the store or another process works beside the embedder).
Vectors must agree: max |difference| < 1e-4 and cosine > 0.9999 on every document.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import multiprocessing
import os
import statistics
import time

import numpy as np
from common import ROOT, report, timed, varied_records

from assistant.embedding import MiniLMEmbedder, _Model, available_cores, model_file
from assistant.models import Paper

SCREENING = ROOT.parent / "shared" / "fixtures" / "screening"


def documents(n: int) -> tuple[list[str], str]:
    """n documents, a few from each screening set in turn (the sample where they are absent)."""
    files = sorted(SCREENING.glob("*.csv.gz"))
    if not files:
        records = varied_records(n)
        return [Paper.create(title=r["title"], abstract=r["abstract"]).document for r in records], "sample"
    per_file = -(-n // len(files))
    out: list[str] = []
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if (r.get("abstract") or "").strip() and r.get("title")]
        out += [Paper.create(title=r["title"], abstract=r["abstract"]).document for r in rows[:per_file]]
    return out[:n], f"screening abstracts ({len(files)} sets)"


class Before:
    """The embedder as configured until now: batch 8, spinning threads, os.cpu_count()."""

    def __init__(self) -> None:
        import onnxruntime as ort

        self.model = _Model.__new__(_Model)
        self.model.tokenizer = _Model.get(256, available_cores()).tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.model.session = ort.InferenceSession(
            str(model_file()[0]), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, texts: list[str]) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), 8):
            chunk = order[start : start + 8]
            out[chunk] = self.model.embed_batch([texts[i] for i in chunk])
        return out


def busy_loop() -> None:
    end = time.monotonic() + 3600
    while time.monotonic() < end:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes beside the embedder")
    args = parser.parse_args()
    texts, source = documents(args.n)
    before, after = Before(), MiniLMEmbedder()
    lengths = [sum(e.attention_mask) for e in _Model.get(512, 1).tokenizer.encode_batch(texts)]
    before(texts[:8])
    after(texts[:8])
    hogs = [multiprocessing.Process(target=busy_loop, daemon=True) for _ in range(args.busy)]
    for hog in hogs:
        hog.start()
    rates: dict[str, list[float]] = {"before": [], "after": []}
    vectors: dict[str, np.ndarray] = {}
    try:
        for _ in range(args.rounds):
            for name, embed in (("before", before), ("after", lambda t: np.asarray(after(t)))):
                seconds, vecs = timed(lambda embed=embed: embed(texts))
                rates[name].append(len(texts) / seconds)
                vectors[name] = vecs
    finally:
        for hog in hogs:
            hog.terminate()
    diff = float(np.abs(vectors["after"] - vectors["before"]).max())
    cosine = float((vectors["after"] * vectors["before"]).sum(axis=1).min())
    b, a = statistics.median(rates["before"]), statistics.median(rates["after"])
    rows: list[list[object]] = [
        [
            "before: batch 8, spinning threads",
            len(texts),
            b,
            1.0,
            ", ".join(f"{r:.1f}" for r in rates["before"]),
        ],
        [
            f"after: batch {after.batch_size}, no spinning, {after.threads} threads",
            len(texts),
            a,
            a / b,
            ", ".join(f"{r:.1f}" for r in rates["after"]),
        ],
    ]
    report(
        "embed" if not args.busy else f"embed_busy{args.busy}",
        f"Embedding {len(texts)} {source} on {available_cores()} cores, {args.busy} busy processes beside; "
        f"max |diff| {diff:.2e}, min cosine {cosine:.7f}",
        ["setting", "documents", "abstracts/s (median)", "ratio", "per round"],
        rows,
        {
            "source": source,
            "busy": args.busy,
            "tokens_p50": float(np.percentile(lengths, 50)),
            "share_over_256_tokens": float(np.mean(np.array(lengths) > 256)),
            "max_abs_diff": diff,
            "min_cosine": cosine,
            "vectors_agree": diff < 1e-4 and cosine > 0.9999,
        },
    )


if __name__ == "__main__":
    main()
