"""Embedding throughput: the shipped embedder against the one shipped before issue 30, same
documents, same run.

    python bench/embed.py [--n 500] [--rounds 2] [--busy 0]

Documents are built as the store builds them (Paper.document: title, blank line, abstract)
from the abstracts of ../shared/fixtures/screening/*.csv.gz (real, long abstracts), or from
the bundled sample with varied titles where the fixtures are absent. "before" is the embedder
until issue 30 (the shipped model file, length-sorted batches of 8, one ONNX Runtime session
with an intra-op thread per core, no spinning); "after" is MiniLMEmbedder as shipped (one text
per run, a caller per core on a one-thread session, the lean file). Rounds alternate
before/after so load from elsewhere hits both; the median rate per setting is reported, by the
wall clock and per CPU-second of this process (user + system: the work, less sensitive to other
processes). --busy N runs N busy-looping processes meanwhile (CPU contention, as when the
store or another process works beside the embedder). Vectors must be the same bit for bit.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import multiprocessing
import resource
import statistics
import time

import numpy as np
from common import ROOT, report, varied_records

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
    """The embedder until issue 30: the shipped file, one session with an intra-op thread per
    core, length-sorted batches of 8 run one after another."""

    def __init__(self) -> None:
        self.model = _Model(256, available_cores(), model_file()[0])

    def __call__(self, texts: list[str]) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), 8):
            chunk = order[start : start + 8]
            out[chunk] = self.model.embed_batch([texts[i] for i in chunk])
        return out


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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
    _Model.get(after.max_tokens, 1, derive=True)  # the lean file made if the cache has none
    after(texts[:8])
    hogs = [multiprocessing.Process(target=busy_loop, daemon=True) for _ in range(args.busy)]
    for hog in hogs:
        hog.start()
    rates: dict[str, list[float]] = {"before": [], "after": []}
    cpu_rates: dict[str, list[float]] = {"before": [], "after": []}
    vectors: dict[str, np.ndarray] = {}
    try:
        for r in range(args.rounds):
            pair = [("before", before), ("after", lambda t: np.asarray(after(t)))]
            for name, embed in pair if r % 2 == 0 else pair[::-1]:
                cpu0, start = cpu_seconds(), time.perf_counter()
                vectors[name] = embed(texts)
                seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
                rates[name].append(len(texts) / seconds)
                cpu_rates[name].append(len(texts) / cpu)
    finally:
        for hog in hogs:
            hog.terminate()
    diff = float(np.abs(vectors["after"] - vectors["before"]).max())
    cosine = float((vectors["after"] * vectors["before"]).sum(axis=1).min())
    b, a = statistics.median(rates["before"]), statistics.median(rates["after"])
    bc, ac = statistics.median(cpu_rates["before"]), statistics.median(cpu_rates["after"])
    lean = _Model.get(after.max_tokens, 1).lean
    rows: list[list[object]] = [
        [
            f"before: batch 8, 1 session x {available_cores()} threads, shipped file",
            len(texts),
            b,
            1.0,
            ", ".join(f"{r:.1f}" for r in rates["before"]),
            bc,
            1.0,
        ],
        [
            f"after: batch {after.batch_size}, {after.threads} callers x 1-thread session, "
            + ("lean file" if lean else "shipped file (no lean file)"),
            len(texts),
            a,
            a / b,
            ", ".join(f"{r:.1f}" for r in rates["after"]),
            ac,
            ac / bc,
        ],
    ]
    report(
        "embed" if not args.busy else f"embed_busy{args.busy}",
        f"Embedding {len(texts)} {source} on {available_cores()} cores, {args.busy} busy processes beside; "
        f"max |diff| {diff:.2e}, min cosine {cosine:.7f}",
        ["setting", "documents", "abstracts/s (median)", "ratio", "per round", "per CPU-s", "CPU ratio"],
        rows,
        {
            "source": source,
            "busy": args.busy,
            "tokens_p50": float(np.percentile(lengths, 50)),
            "share_over_256_tokens": float(np.mean(np.array(lengths) > 256)),
            "max_abs_diff": diff,
            "min_cosine": cosine,
            "vectors_identical": diff == 0.0,
            "per_cpu_second": {"before": bc, "after": ac},
        },
    )


if __name__ == "__main__":
    main()
