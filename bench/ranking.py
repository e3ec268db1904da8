"""Ranking quality of the offline engine against strong lexical and embedding baselines.

    python bench/ranking.py [--sets A B C]

The labelled sets (bench/labelled.py): 514 papers graded 0/1/2 by two independent readers,
sets A and B (seven agendas, where the engine was tuned) and set C (four agendas, graded after
the engine's current version was written and never tuned on). Each agenda runs as a paragraph
and as three words. Every ranker sees the same papers and the same agenda text in the same run:

- engine: the offline engine as shipped (its relevance, as the queue sorts it);
- offline-4: an earlier engine (BM25 and the embedding, clipped), recomputed;
- tf-idf: the strong lexical baseline, TF-IDF of word 1-2 grams over title and abstract,
  sublinear tf, English stop words, 20,000 features, fitted on the store, cosine to the topic;
- tf-idf (arxiv-sanity): the same with arxiv-sanity-lite's max_df=0.1, min_df=5;
- bm25: BM25 over stemmed words alone (the engine's lexical part until offline-5);
- embedding: cosine of the stored MiniLM vectors with the topic's vector alone.

Metrics: nDCG@20 (gain 2^grade - 1) and average precision (grade 2 relevant), per reader.
"ahead / behind" is the share of 1,000 bootstrap resamples of the papers in which the engine's
AP is above / below the strong TF-IDF's.
"""

from __future__ import annotations

import argparse
import time

import bm25s
import numpy as np
from common import report
from labelled import READERS, SETS, cases, temporary_fixture
from sklearn.feature_extraction.text import TfidfVectorizer

from assistant.triage.offline import Corpus, OfflineEngine, stems

K = 20
RESAMPLES = 1000
RANKERS = ("engine", "offline4", "tfidf", "tfidf_as", "bm25", "embedding")
LABELS = {
    "engine": "engine",
    "offline4": "offline-4",
    "tfidf": "tf-idf",
    "tfidf_as": "tf-idf (a-s)",
    "bm25": "bm25",
    "embedding": "emb",
}


def ndcg(order: np.ndarray, grades: np.ndarray, k: int = K) -> float:
    """nDCG@k of `order` (indices into grades, best first) over the papers it covers."""
    gains = 2.0 ** grades[order[:k]] - 1
    discounts = 1 / np.log2(np.arange(2, k + 2))
    ideal = np.sort(2.0 ** grades[order] - 1)[::-1][:k]
    idcg = float(ideal @ discounts[: len(ideal)])
    return float(gains @ discounts[: len(gains)]) / idcg if idcg else 0.0


def average_precision(order: np.ndarray, grades: np.ndarray) -> float:
    relevant = grades[order] == 2
    if not relevant.any():
        return 0.0
    hits = np.cumsum(relevant)
    return float((hits / np.arange(1, len(order) + 1))[relevant].sum() / relevant.sum())


def order_of(scores: np.ndarray, subset: np.ndarray | None = None) -> np.ndarray:
    """Indices by descending score (ties keep paper order), optionally within a resample."""
    if subset is None:
        return np.argsort(-scores, kind="stable")
    return subset[np.argsort(-scores[subset], kind="stable")]


def bm25_scores(index: bm25s.BM25, query: str) -> np.ndarray:
    """BM25 over stemmed words (the engine's lexical part until offline-5)."""
    terms = list(dict.fromkeys(stems(query)))
    return np.asarray(index.get_scores(terms), dtype=np.float64) if terms else np.zeros(0)


def previous_engine(bm25: np.ndarray, cosine: np.ndarray) -> np.ndarray:
    """The engine until offline-5: 0.7 x the clipped cosine scale + 0.3 x BM25 relative to the
    store's best matches, clipped, as relevance rounded to 0.01 (single-topic agendas)."""
    positive = bm25[bm25 > 0]
    top = float(np.percentile(positive, 99)) if positive.size >= 100 else float(positive.max() or 1)
    lexical = np.clip(bm25 / max(top, 1e-9), 0, 1)
    return np.round(10 * (0.7 * np.clip((cosine - 0.15) / 0.45, 0, 1) + 0.3 * lexical), 2)


def tfidf_scores(documents: list[str], query: str, **options: float) -> np.ndarray:
    vectorizer = TfidfVectorizer(
        ngram_range=(1, 2), sublinear_tf=True, stop_words="english", max_features=20_000, **options
    )
    matrix = vectorizer.fit_transform(documents)
    return np.asarray((matrix @ vectorizer.transform([query]).T).toarray()).ravel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    args = parser.parse_args()
    tmp, fx = temporary_fixture()
    corpus = Corpus.build(fx.ids, fx.documents, fx.vectors)
    bm25 = bm25s.BM25()
    bm25.index([stems(d) for d in fx.documents], show_progress=False)
    rng = np.random.default_rng(7)
    resamples = [rng.integers(0, len(fx.ids), len(fx.ids)) for _ in range(RESAMPLES)]
    rows: list[list[object]] = []
    per_case: dict[tuple[str, str, str], list[dict[str, tuple[float, float]]]] = {}
    seconds: list[float] = []
    documents = dict(zip(fx.ids, fx.documents, strict=True))
    for case in cases(fx.ids, tuple(args.sets)):
        start = time.perf_counter()
        engine = OfflineEngine(case.agenda, fx.store.embed)
        assessed = engine.assess(corpus, documents, fx.vectors)
        seconds.append(time.perf_counter() - start)
        text = case.agenda.topics[0].text
        scores = {
            "engine": np.array([assessed[pid].relevance for pid in fx.ids]),
            "tfidf": tfidf_scores(fx.documents, text),
            "tfidf_as": tfidf_scores(fx.documents, text, max_df=0.1, min_df=5),
            "bm25": bm25_scores(bm25, text),
            "embedding": fx.matrix @ engine.topic_vectors[0],
        }
        scores["offline4"] = previous_engine(scores["bm25"], scores["embedding"])
        for who in READERS:
            grades = case.grades[who]
            m = {
                key: (ndcg(order_of(s), grades), average_precision(order_of(s), grades))
                for key, s in scores.items()
            }
            engine_ap = np.array(
                [average_precision(order_of(scores["engine"], r), grades) for r in resamples]
            )
            tfidf_ap = np.array([average_precision(order_of(scores["tfidf"], r), grades) for r in resamples])
            rows.append(
                [
                    f"{case.set_name}: {case.label}",
                    who,
                    int((grades == 2).sum()),
                    *(m[key][0] for key in RANKERS),
                    *(m[key][1] for key in RANKERS),
                    f"{np.mean(engine_ap > tfidf_ap):.0%} / {np.mean(engine_ap < tfidf_ap):.0%}",
                ]
            )
            per_case.setdefault((case.set_name, case.form, who), []).append(m)
    tmp.cleanup()
    metric_columns = [f"nDCG {LABELS[k]}" for k in RANKERS] + [f"AP {LABELS[k]}" for k in RANKERS]
    report(
        "ranking",
        f"Ranking quality on {len(fx.ids)} labelled papers (engine = the offline engine)",
        ["case", "labels", "grade 2", *metric_columns, "engine AP ahead / behind tf-idf"],
        rows,
        {"resamples": RESAMPLES, "assess_seconds": seconds},
    )
    summary = []
    for (set_name, form, who), ms in sorted(per_case.items()):
        wins_ap = sum(m["engine"][1] > m["tfidf"][1] for m in ms)
        wins_ndcg = sum(m["engine"][0] > m["tfidf"][0] for m in ms)
        summary.append(
            [
                f"{set_name} ({SETS[set_name][0]}), {form}",
                who,
                *(float(np.mean([m[key][0] for m in ms])) for key in RANKERS),
                *(float(np.mean([m[key][1] for m in ms])) for key in RANKERS),
                f"{wins_ap}/{len(ms)}",
                f"{wins_ndcg}/{len(ms)}",
            ]
        )
    report(
        "ranking_summary",
        "Means per set and agenda form; agendas where the engine beats the strong TF-IDF",
        ["cases", "labels", *metric_columns, "AP wins", "nDCG wins"],
        summary,
        {},
    )
    print(f"offline assessment of 514 papers: {np.median(seconds):.2f} s (median over cases)")


if __name__ == "__main__":
    main()
