"""Semantic query latency at 10k and 100k papers, plain and with a metadata filter.

    python bench/search.py [--sizes 10000 100000] [--queries 60]

Stores are filled with precomputed vectors (the sample papers' real embeddings plus noise),
then queried through `Store.search`, the path `triage search` takes (the query text is
embedded on every call). The figure that matters is the ratio 100k/10k.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from common import console, report, sample_records, timed

from assistant.config import load_settings
from assistant.embedding import MiniLMEmbedder
from assistant.models import Decision, Paper, Status
from assistant.store import Store, decision_metadata, paper_metadata

BATCH = 5000


def fill(store: Store, n: int, base: np.ndarray, titles: list[str], rng: np.random.Generator) -> None:
    statuses = list(Status)
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        pick = rng.integers(0, len(base), size)
        vecs = base[pick] + rng.normal(0, 0.35 / np.sqrt(base.shape[1]), (size, base.shape[1]))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        papers = [
            Paper.create(
                title=f"{titles[p]} ({start + i})",
                arxiv_id=f"26{(start + i) // 100000:02d}.{(start + i) % 100000:05d}",
                year=int(rng.integers(2015, 2027)),
            )
            for i, p in enumerate(pick)
        ]
        metas = []
        for p in papers:
            status = statuses[int(rng.integers(0, len(statuses)))]
            meta = {**paper_metadata(p), **decision_metadata(Decision(status=status))}
            metas.append({k: v for k, v in meta.items() if v is not None})
        store.collection.add(
            ids=[p.id for p in papers],
            documents=[p.document for p in papers],
            embeddings=vecs.astype(np.float32),  # type: ignore[arg-type]
            metadatas=metas,  # type: ignore[arg-type]
        )


def latencies(store: Store, queries: list[str], where: dict[str, object] | None) -> np.ndarray:
    for q in queries[:5]:
        store.search(q, k=10, where=where)
    out = []
    for q in queries:
        start = time.perf_counter()
        hits = store.search(q, k=10, where=where)
        out.append((time.perf_counter() - start) * 1000)
        assert hits
    return np.asarray(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()

    records = sample_records()
    embedder = MiniLMEmbedder()
    titles = [str(r["title"]) for r in records]
    base = np.asarray(
        embedder([Paper.create(title=str(r["title"]), abstract=str(r["abstract"])).document for r in records])
    )
    queries = [f"{r['title'].split(':')[0]} {' '.join(str(r['abstract']).split()[:12])}" for r in records]
    queries = (queries * (args.queries // len(queries) + 1))[: args.queries]
    where = {"$and": [{"status": "new"}, {"year": {"$gte": 2022}}]}

    rows: list[list[object]] = []
    p50s: dict[tuple[int, str], float] = {}
    embed_ms = float(np.median([timed(lambda q=q: embedder([q]))[0] * 1000 for q in queries[:30]]))
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(load_settings(store=Path(tmp) / "store"), embedder=embedder)
            load_s, _ = timed(lambda store=store, n=n: fill(store, n, base, titles, np.random.default_rng(n)))
            console.print(f"{n} papers loaded in {load_s:.0f}s")
            for label, flt in (("semantic", None), ("semantic + filter", where)):
                lat = latencies(store, queries, flt)
                p50s[(n, label)] = float(np.percentile(lat, 50))
                rows.append(
                    [f"{label} @ {n}", n, float(np.percentile(lat, 50)), float(np.percentile(lat, 95))]
                )
    extra: dict[str, object] = {"query_embedding_ms_p50": embed_ms}
    if len(args.sizes) >= 2:
        small, large = args.sizes[0], args.sizes[-1]
        for label in ("semantic", "semantic + filter"):
            ratio = p50s[(large, label)] / p50s[(small, label)]
            extra[f"ratio_{large}_{small}_{label.replace(' + ', '_')}"] = ratio
            rows.append([f"ratio {large // 1000}k/{small // 1000}k, {label}", "", ratio, ""])
    report(
        "search",
        f"Query latency in ms, k=10 (query embedding alone: {embed_ms:.1f} ms)",
        ["query", "papers", "p50 ms", "p95 ms"],
        rows,
        extra,
    )


if __name__ == "__main__":
    main()
