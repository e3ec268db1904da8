"""Ingest throughput against the raw throughput of the embedding model, on the same texts.

    python bench/ingest.py [--n 5000] [--variants 400]

1. raw: the ONNX model (tokenize + run + pool) over the papers' texts, nothing else;
2. ingest: `triage ingest`'s code path (parse JSONL, dedupe, embed, write to Chroma) into a
   fresh embedded store;
3. embedder variants on a subset: batch size, length bucketing, threads, truncation length,
   with the quality cost of truncation (cosine to the 512-token vectors, top-5 agreement).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from common import console, report, timed, varied_records

from assistant.config import load_settings
from assistant.embedding import MiniLMEmbedder, _Model
from assistant.ingest import ingest_files
from assistant.models import Paper
from assistant.store import Store


def document(rec: dict[str, object]) -> str:
    return Paper.create(title=str(rec["title"]), abstract=str(rec.get("abstract") or "")).document


def variants(texts: list[str], queries: list[str]) -> list[list[object]]:
    """Embedder settings on the same texts: speed, and quality relative to 512 tokens."""
    reference = np.asarray(MiniLMEmbedder(max_tokens=512)(texts))
    q = np.asarray(MiniLMEmbedder(max_tokens=64)(queries))
    ref_top = np.argsort(-(q @ reference.T), axis=1)[:, :5]
    rows: list[list[object]] = []
    settings = [
        ("256 tokens, batch 32, sorted, 2 threads (default)", dict(max_tokens=256, batch_size=32)),
        ("256 tokens, batch 8, sorted", dict(max_tokens=256, batch_size=8)),
        ("256 tokens, batch 64, sorted", dict(max_tokens=256, batch_size=64)),
        ("256 tokens, batch 32, 1 thread", dict(max_tokens=256, batch_size=32, threads=1)),
        ("128 tokens, batch 32, sorted", dict(max_tokens=128, batch_size=32)),
        ("192 tokens, batch 32, sorted", dict(max_tokens=192, batch_size=32)),
    ]
    for label, kwargs in settings:
        ef = MiniLMEmbedder(**kwargs)  # type: ignore[arg-type]
        ef(texts[:4])
        seconds, vecs = timed(lambda ef=ef: np.asarray(ef(texts)))
        cos = (vecs * reference).sum(axis=1)
        top = np.argsort(-(q @ vecs.T), axis=1)[:, :5]
        overlap = float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(top, ref_top, strict=True)]))
        rows.append([label, len(texts) / seconds, float(cos.mean()), float(cos.min()), overlap])
    # Batches in file order (lengths mixed), as an embedder that does not sort would run them.
    model = _Model.get(256, MiniLMEmbedder().threads)
    seconds, vecs = timed(
        lambda: np.concatenate([model.embed_batch(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    )
    cos = (vecs * reference).sum(axis=1)
    top = np.argsort(-(q @ vecs.T), axis=1)[:, :5]
    overlap = float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(top, ref_top, strict=True)]))
    rows.insert(
        1,
        [
            "256 tokens, batch 32, file order",
            len(texts) / seconds,
            float(cos.mean()),
            float(cos.min()),
            overlap,
        ],
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=5000, help="papers to ingest")
    parser.add_argument("--variants", type=int, default=400, help="texts for the embedder variants (0: skip)")
    args = parser.parse_args()

    records = varied_records(args.n)
    texts = [document(r) for r in records]
    lengths = [sum(e.attention_mask) for e in _Model.get(512, 1).tokenizer.encode_batch(texts[:500])]
    console.print(
        f"{args.n} papers; tokens per text p50 {np.percentile(lengths, 50):.0f}, "
        f"p90 {np.percentile(lengths, 90):.0f}; over 256: {np.mean(np.array(lengths) > 256):.0%}"
    )

    embedder = MiniLMEmbedder()
    embedder(texts[:8])  # load the model outside the timings
    raw_before, _ = timed(lambda: embedder(texts))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "papers.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
        store = Store.open(load_settings(store=Path(tmp) / "store"), embedder=embedder)
        ingest_s, reports = timed(lambda: ingest_files(store, [path]))
        assert reports[0].new == args.n, reports[0]
        again_s, again = timed(lambda: ingest_files(store, [path]))
        assert again[0].new == 0

    # Raw speed measured before and after the ingest; the faster of the two is the baseline,
    # so machine noise can only make the ratio look worse, never better.
    raw_after, _ = timed(lambda: embedder(texts))
    raw_s = min(raw_before, raw_after)
    raw_rate, ingest_rate = args.n / raw_s, args.n / ingest_s
    rows: list[list[object]] = [
        ["raw embedding (ONNX model only)", args.n, raw_s, raw_rate, 1.0],
        [
            "triage ingest (parse, dedupe, embed, store)",
            args.n,
            ingest_s,
            ingest_rate,
            ingest_rate / raw_rate,
        ],
        [
            "re-import of the same file (nothing new)",
            args.n,
            again_s,
            args.n / again_s,
            (args.n / again_s) / raw_rate,
        ],
    ]
    extra: dict[str, object] = {
        "ratio_ingest_to_raw": ingest_rate / raw_rate,
        "target": 0.85,
        "raw_seconds_before_after": [raw_before, raw_after],
    }
    report(
        "ingest", "Ingest vs raw embedding", ["path", "papers", "seconds", "papers/s", "x raw"], rows, extra
    )

    if args.variants:
        subset = texts[: args.variants]
        queries = [str(r["title"]) for r in records[: min(args.variants, 87)]]
        vrows = variants(subset, queries)
        report(
            "embedder",
            f"Embedder settings on {len(subset)} texts (quality vs 512-token vectors)",
            ["setting", "texts/s", "mean cos", "min cos", "top-5 agreement"],
            vrows,
            {},
        )


if __name__ == "__main__":
    main()
