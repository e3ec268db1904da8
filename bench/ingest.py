"""Ingest benchmarks: the embedder is the floor, everything else must be near-free.

    python bench/ingest.py [--sections embed,formats,dedupe,variants] [--n 5000] [--format-n 10000]

embed     `triage ingest`'s code path (parse JSONL, dedupe, embed, write to Chroma) against the
          raw ONNX model on the same texts, chunk by chunk in alternation so machine noise
          hits both alike. Target: ingest >= 0.85 x raw.
formats   a 10k-entry BibTeX file and a 10k-line JSONL of the same papers: parse time vs
          embedding time, papers/s end to end (BibTeX into an empty store), then the JSONL
          into that store (every paper known: the dedupe + merge path).
dedupe    the cost of matching a 1,000-paper batch against 10k and 100k stored papers (half
          of it duplicates under other ids or slightly different titles); the ratio 100k/10k
          shows whether it grows with the store (a full scan per record would be ~10x).
variants  embedder settings (batch size, callers, truncation) on a subset: speed and quality
          (cosine to 512-token vectors, top-5 neighbour agreement).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import console, report, timed, varied_records

from assistant.config import load_settings
from assistant.embedding import MiniLMEmbedder, _Model
from assistant.ingest import FileReport, parse_file, store_papers
from assistant.ingest.dedupe import resolve
from assistant.models import Decision, Paper
from assistant.store import Store, decision_metadata, paper_metadata

CHUNK = 500


def fresh_store(tmp: str, embedder: MiniLMEmbedder, name: str = "store") -> Store:
    return Store.open(load_settings(store=Path(tmp) / name), embedder=embedder)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")


def bib_escape(text: str) -> str:
    for char in "\\{}%&#_$":
        text = text.replace(char, "\\" + char)
    return text


def write_bibtex(path: Path, records: list[dict[str, Any]]) -> None:
    entries = []
    for i, r in enumerate(records):
        authors = " and ".join(
            ", ".join(reversed(a.rsplit(" ", 1))) if " " in a else a for a in r.get("authors", [])
        )
        fields = {
            "title": bib_escape(r["title"]),
            "author": bib_escape(authors),
            "year": r.get("year", 2024),
            "eprint": r["arxiv_id"],
            "archivePrefix": "arXiv",
            "abstract": bib_escape(r.get("abstract", "")),
        }
        body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items())
        entries.append(f"@article{{key{i},\n{body}\n}}\n")
    path.write_text("\n".join(entries), encoding="utf-8")


def section_embed(n: int, embedder: MiniLMEmbedder) -> None:
    records = varied_records(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "papers.jsonl"
        write_jsonl(path, records)
        store = fresh_store(tmp, embedder)
        parse_s, (_, parsed) = timed(lambda: parse_file(path))
        papers: list[Paper] = parsed.papers
        texts = [p.document for p in papers]
        raw_s = ingest_s = 0.0
        file_report = FileReport(path=str(path))
        for start in range(0, len(papers), CHUNK):
            chunk_texts = texts[start : start + CHUNK]
            t, _ = timed(lambda chunk_texts=chunk_texts: embedder(chunk_texts))
            raw_s += t
            t, _ = timed(lambda start=start: store_papers(store, papers[start : start + CHUNK], file_report))
            ingest_s += t
        ingest_s += parse_s
        assert file_report.new == n, file_report
        again_s, _ = timed(lambda: store_papers(store, parse_file(path)[1].papers, FileReport(path="again")))
    raw_rate, ingest_rate = n / raw_s, n / ingest_s
    rows: list[list[object]] = [
        ["raw embedding (ONNX model only)", n, raw_s, raw_rate, 1.0],
        ["triage ingest (parse, dedupe, embed, store)", n, ingest_s, ingest_rate, ingest_rate / raw_rate],
        ["  of which parsing", n, parse_s, n / parse_s, (n / parse_s) / raw_rate],
        ["re-import of the same file (nothing new)", n, again_s, n / again_s, (n / again_s) / raw_rate],
    ]
    report(
        "ingest",
        f"Ingest vs raw embedding, {n} papers, alternating {CHUNK}-paper chunks",
        ["path", "papers", "seconds", "papers/s", "x raw"],
        rows,
        {"ratio_ingest_to_raw": ingest_rate / raw_rate, "target": 0.85},
    )


def section_formats(n: int, embedder: MiniLMEmbedder) -> None:
    records = varied_records(n)
    with tempfile.TemporaryDirectory() as tmp:
        bib, jsonl = Path(tmp) / "papers.bib", Path(tmp) / "papers.jsonl"
        write_bibtex(bib, records)
        write_jsonl(jsonl, records)
        bib_parse_s, (_, bib_parsed) = timed(lambda: parse_file(bib))
        jsonl_parse_s, (_, jsonl_parsed) = timed(lambda: parse_file(jsonl))
        assert len(bib_parsed.papers) == n and len(jsonl_parsed.papers) == n, (bib_parsed.errors[:3],)
        store = fresh_store(tmp, embedder)
        bib_report = FileReport(path=str(bib))
        bib_store_s, _ = timed(lambda: store_papers(store, bib_parsed.papers, bib_report))
        sample = [p.document for p in bib_parsed.papers[:1000]]
        embed_s, _ = timed(lambda: embedder(sample))
        embed_total = embed_s * n / len(sample)
        jsonl_report = FileReport(path=str(jsonl))
        jsonl_store_s, _ = timed(lambda: store_papers(store, jsonl_parsed.papers, jsonl_report))
        assert bib_report.new == n and jsonl_report.new == 0, (bib_report, jsonl_report)
    rows: list[list[object]] = [
        ["BibTeX: parse", n, bib_parse_s, n / bib_parse_s],
        ["BibTeX: embedding alone (est. from 1,000)", n, embed_total, n / embed_total],
        [
            "BibTeX: end to end into an empty store",
            n,
            bib_parse_s + bib_store_s,
            n / (bib_parse_s + bib_store_s),
        ],
        ["JSONL: parse", n, jsonl_parse_s, n / jsonl_parse_s],
        [
            "JSONL: same papers again (dedupe + merge)",
            n,
            jsonl_parse_s + jsonl_store_s,
            n / (jsonl_parse_s + jsonl_store_s),
        ],
    ]
    report(
        "formats",
        f"{n}-entry files",
        ["step", "papers", "seconds", "papers/s"],
        rows,
        {"parse_share_of_end_to_end_bibtex": bib_parse_s / (bib_parse_s + bib_store_s)},
    )


def fill(store: Store, n: int, rng: np.random.Generator) -> list[Paper]:
    """n stored papers with random vectors (dedupe never looks at vectors)."""
    records = varied_records(n)
    papers = [Paper.create(**{k: r[k] for k in ("title", "arxiv_id", "year")}) for r in records]
    for start in range(0, n, 5000):
        chunk = papers[start : start + 5000]
        vecs = rng.normal(size=(len(chunk), 384)).astype(np.float32)
        metas = []
        for p in chunk:
            meta = {**paper_metadata(p), **decision_metadata(Decision())}
            metas.append({k: v for k, v in meta.items() if v is not None})
        store.collection.add(
            ids=[p.id for p in chunk], embeddings=vecs, documents=[p.document for p in chunk], metadatas=metas
        )  # type: ignore[arg-type]
    return papers


def incoming_batch(stored: list[Paper], rng: np.random.Generator) -> list[Paper]:
    """1,000 papers: 250 known by DOI-less title variants, 250 by arXiv version, 500 new."""
    picks = rng.choice(len(stored), 500, replace=False)
    batch = []
    for j, i in enumerate(picks):
        known = stored[int(i)]
        if j % 2:
            batch.append(Paper.create(title=known.title.upper() + ".", doi=f"10.9999/x{j}"))
        else:
            batch.append(Paper.create(title=known.title, arxiv_id=f"{known.arxiv_id}v2"))
    batch += [
        Paper.create(title=f"A new paper about topic {j} and its many consequences", doi=f"10.8888/n{j}")
        for j in range(500)
    ]
    return batch


def section_dedupe(sizes: list[int], embedder: MiniLMEmbedder) -> None:
    rows: list[list[object]] = []
    per: dict[int, float] = {}
    for n in sizes:
        rng = np.random.default_rng(n)
        with tempfile.TemporaryDirectory() as tmp:
            store = fresh_store(tmp, embedder)
            load_s, stored = timed(lambda store=store, n=n, rng=rng: fill(store, n, rng))
            batch = incoming_batch(stored, rng)
            resolve(store, batch[:256])  # warm up
            times = []
            for _ in range(3):
                start = time.perf_counter()
                resolved = [p for b in range(0, len(batch), 256) for p in resolve(store, batch[b : b + 256])]
                times.append(time.perf_counter() - start)
            known_ids = {p.id for p in stored}
            matched = sum(1 for p in resolved if p.id in known_ids)
            assert matched == 500, matched
        best = min(times)
        per[n] = best / len(batch) * 1e6
        rows.append([f"{n} stored (loaded in {load_s:.0f}s)", len(batch), best, per[n], matched])
    extra: dict[str, object] = {}
    if len(sizes) > 1:
        ratio = per[sizes[-1]] / per[sizes[0]]
        extra["ratio_large_small"] = ratio
        rows.append([f"ratio {sizes[-1] // 1000}k/{sizes[0] // 1000}k", "", ratio, "", ""])
    report(
        "dedupe",
        "Dedupe of a 1,000-paper batch against the store",
        ["store", "batch", "seconds", "us/paper", "matched"],
        rows,
        extra,
    )


def section_variants(count: int) -> None:
    records = varied_records(count)
    texts = [Paper.create(title=r["title"], abstract=r["abstract"]).document for r in records]
    queries = [str(r["title"]) for r in records[:87]]
    reference = np.asarray(MiniLMEmbedder(max_tokens=512)(texts))
    q = np.asarray(MiniLMEmbedder(max_tokens=64)(queries))
    ref_top = np.argsort(-(q @ reference.T), axis=1)[:, :5]

    def quality(vecs: np.ndarray) -> tuple[float, float, float]:
        cos = (vecs * reference).sum(axis=1)
        top = np.argsort(-(q @ vecs.T), axis=1)[:, :5]
        overlap = float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(top, ref_top, strict=True)]))
        return float(cos.mean()), float(cos.min()), overlap

    rows: list[list[object]] = []
    settings: list[tuple[str, dict[str, int]]] = [
        ("256 tokens, batch 1, a caller per core (default)", {"max_tokens": 256}),
        ("256 tokens, batch 8, length-sorted", {"max_tokens": 256, "batch_size": 8}),
        ("256 tokens, batch 32, length-sorted", {"max_tokens": 256, "batch_size": 32}),
        ("256 tokens, batch 1, 1 caller", {"max_tokens": 256, "threads": 1}),
        ("192 tokens, batch 1, a caller per core", {"max_tokens": 192}),
        ("128 tokens, batch 1, a caller per core", {"max_tokens": 128}),
    ]
    for label, kwargs in settings:
        ef = MiniLMEmbedder(**kwargs)
        ef(texts[:4])
        seconds, vecs = timed(lambda ef=ef: np.asarray(ef(texts)))
        rows.append([label, len(texts) / seconds, *quality(vecs)])
    model = _Model.get(256)
    seconds, vecs = timed(
        lambda: np.concatenate([model.embed_batch(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    )
    rows.insert(
        3, ["256 tokens, batch 32, file order (unsorted), 1 caller", len(texts) / seconds, *quality(vecs)]
    )
    report(
        "embedder",
        f"Embedder settings on {len(texts)} texts (quality vs 512-token vectors)",
        ["setting", "texts/s", "mean cos", "min cos", "top-5 agreement"],
        rows,
        {},
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sections", default="embed,formats,dedupe,variants")
    parser.add_argument("--n", type=int, default=5000, help="papers for the embed section")
    parser.add_argument("--format-n", type=int, default=10_000, help="entries in the BibTeX/JSONL files")
    parser.add_argument("--dedupe-sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--variants", type=int, default=400, help="texts for the embedder variants")
    args = parser.parse_args()
    sections = set(args.sections.split(","))

    embedder = MiniLMEmbedder()
    _Model.get(embedder.max_tokens, 1, derive=True)  # the lean file made now if the cache has none
    embedder(["warm up the model"])
    lengths = [
        sum(e.attention_mask)
        for e in _Model.get(512, 1).tokenizer.encode_batch(
            [Paper.create(title=r["title"], abstract=r["abstract"]).document for r in varied_records(87)]
        )
    ]
    console.print(
        f"sample texts: tokens p50 {np.percentile(lengths, 50):.0f}, p90 {np.percentile(lengths, 90):.0f}, "
        f"over 256 tokens {np.mean(np.array(lengths) > 256):.0%}"
    )
    if "embed" in sections:
        section_embed(args.n, embedder)
    if "formats" in sections:
        section_formats(args.format_n, embedder)
    if "dedupe" in sections:
        section_dedupe(args.dedupe_sizes, embedder)
    if "variants" in sections:
        section_variants(args.variants)


if __name__ == "__main__":
    main()
