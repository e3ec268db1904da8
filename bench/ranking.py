"""Ranking quality of the offline engine against pure TF-IDF and pure embedding ranking.

    python bench/ranking.py

The labelled set: bench/data/ranking_papers.jsonl (207 papers from the fixture listing
pages) graded 0/1/2 by reading each abstract against three agendas (bench/data/agendas/,
labels in bench/data/labels/). Each agenda runs twice: as its one-paragraph topic and as
three words. Metrics: nDCG@20 (gain 2^grade - 1) and average precision (grade 2 relevant).
All three rankers see the same papers and the same agenda text in the same run.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
from common import ROOT, report

from assistant.agenda import load_agenda
from assistant.config import load_settings
from assistant.models import Paper
from assistant.store import Store
from assistant.triage.offline import Corpus, OfflineEngine, stems

DATA = ROOT / "bench" / "data"
AGENDAS = ["heads", "multilingual", "multitask"]


def ndcg(ranking: list[str], grades: dict[str, int], k: int = 20) -> float:
    gains = [2 ** grades.get(pid, 0) - 1 for pid in ranking[:k]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((2**g - 1 for g in grades.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def average_precision(ranking: list[str], grades: dict[str, int]) -> float:
    relevant = {pid for pid, g in grades.items() if g == 2}
    hits, total = 0, 0.0
    for i, pid in enumerate(ranking, start=1):
        if pid in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant) if relevant else 0.0


def tfidf_scores(documents: list[str], query: str) -> np.ndarray:
    """Cosine between TF-IDF vectors (log tf, smoothed idf) of the query and each document."""
    docs = [Counter(stems(d)) for d in documents]
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    n = len(docs)

    def vec(counts: Counter[str]) -> dict[str, float]:
        return {t: (1 + math.log(c)) * (math.log((1 + n) / (1 + df[t])) + 1) for t, c in counts.items()}

    q = vec(Counter(stems(query)))
    qn = math.sqrt(sum(v * v for v in q.values())) or 1.0
    out = np.zeros(n)
    for i, d in enumerate(docs):
        v = vec(d)
        dn = math.sqrt(sum(x * x for x in v.values())) or 1.0
        out[i] = sum(q[t] * v.get(t, 0.0) for t in q) / (qn * dn)
    return out


def main() -> None:
    records = [
        json.loads(line) for line in (DATA / "ranking_papers.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    papers = [Paper(id=r["id"], title=r["title"], abstract=r["abstract"]) for r in records]
    ids = [p.id for p in papers]
    rows: list[list[object]] = []
    wins = 0
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(load_settings(store=Path(tmp) / "store"))
        store.upsert_papers(papers)
        vectors = store.embeddings(ids)
        documents = [p.document for p in papers]
        corpus = Corpus.build(ids, documents)
        for name in AGENDAS:
            grades = json.loads((DATA / "labels" / f"{name}.json").read_text())["grades"]
            for variant in ("paragraph", "three words"):
                path = DATA / "agendas" / (f"{name}.md" if variant == "paragraph" else f"{name}-short.md")
                agenda = load_agenda(path)
                engine = OfflineEngine(agenda, store.embed)
                assessed = engine.assess(corpus, dict(zip(ids, documents, strict=True)), vectors)
                hybrid = sorted(ids, key=lambda pid: -assessed[pid].relevance)
                _, cosine = engine.components(corpus, ids, vectors)
                embedding = [ids[i] for i in np.argsort(-cosine.max(axis=1), kind="stable")]
                tfidf_raw = tfidf_scores(documents, agenda.topics[0].text)
                tfidf = [ids[i] for i in np.argsort(-tfidf_raw, kind="stable")]
                scores = {
                    key: (ndcg(r, grades), average_precision(r, grades))
                    for key, r in (("hybrid", hybrid), ("tfidf", tfidf), ("embedding", embedding))
                }
                beats = all(
                    scores["hybrid"][m] > max(scores["tfidf"][m], scores["embedding"][m]) for m in (0, 1)
                )
                wins += beats
                cases += 1
                relevant = sum(1 for g in grades.values() if g == 2)
                rows.append(
                    [
                        f"{name} ({variant})",
                        relevant,
                        scores["hybrid"][0],
                        scores["tfidf"][0],
                        scores["embedding"][0],
                        scores["hybrid"][1],
                        scores["tfidf"][1],
                        scores["embedding"][1],
                        "yes" if beats else "no",
                    ]
                )
    report(
        "ranking",
        f"Ranking quality on {len(papers)} labelled papers (hybrid = the offline engine)",
        [
            "agenda",
            "grade-2",
            "nDCG@20 hybrid",
            "tf-idf",
            "embedding",
            "AP hybrid",
            "tf-idf",
            "embedding",
            "hybrid best",
        ],
        rows,
        {"hybrid_beats_both": f"{wins}/{cases}"},
    )


if __name__ == "__main__":
    main()
