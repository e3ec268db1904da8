"""Screening: a simulated researcher works down the queue of a real systematic review.

    python bench/screening.py DIR [--agendas DIR2] [--only NAME ...] [--json OUT]

Every `NAME.csv` or `NAME.csv.gz` in DIR (columns `title`, `abstract`, `label_included`, as in
`../shared/fixtures/screening/`) is one review's search results with the review's published
inclusion decisions. Its agenda is `NAME.md` (the question and criteria as a paragraph) and
`NAME-short.md` (keywords) in DIR2 (default DIR). The offline engine ranks the records against
the agenda; the simulated researcher decides the top undecided record by the label (accept if
the review included it, reject otherwise), the personal model retrains as in the review UI, and
the queue is re-ranked, until every included record is found. Beside it in the same run: the
engine's order alone, random order, and ASReview's default model (`elas_u4`, one relevant
and one irrelevant random record to start; its two starting records are not counted, as in
ASReview's own reports) over several seeds, run with `--asreview-python` (default
`.venv-asreview/bin/python`, which `make asreview` builds).

Reported per review and as means: WSS@95 (the share of records not read when 95% of the
included ones are found, less 5%), recall after 10% of the records, records screened to reach
95% and 100% recall, included records found within 20 and 50 decisions, recall after 10, 20,
50 and 100 decisions, and the churn of the blend (the share of the top 20 undecided records
that changes with one decision, mean over the first 50). Writes
`{"NAME": {"para": {"blend": {...}, "engine": {...}}, "short": {...}, "asreview": {...},
"random": {...}}}` to OUT and bench/results/screening*.json.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from common import ROOT, one_thread, report

from assistant.agenda import load_agenda
from assistant.embedding import MiniLMEmbedder
from assistant.models import Status
from assistant.personal.estimate import Estimate
from assistant.personal.features import TextFeatures, vectorizer
from assistant.personal.ranking import FeatureCache, rank
from assistant.personal.stopping import recall_p_value
from assistant.triage.offline import Corpus, OfflineEngine

FORMS = {"para": "{}.md", "short": "{}-short.md"}
ASREVIEW_SEEDS = (1, 2, 3)
RANDOM_SEEDS = 20
DECISION_POINTS = (10, 20, 50, 100)
FOUND_WITHIN = (20, 50)
CHURN_TOP = 20
CHURN_OVER = 50
# The model retrains after every decision up to this many, then after every RETRAIN_EVERY.
EVERY_STEP_UNTIL = 200
RETRAIN_EVERY = 5
# The estimate of relevant records left is made at 20 points of a run (at least 10 decisions
# apart); once it says 95% are found, the recall check starts there, over STOP_SEEDS draws.
ESTIMATES = 20
ESTIMATE_MIN_EVERY = 10
STOP_TARGET = 0.95
STOP_CONFIDENCE = 0.95
STOP_SEEDS = 20
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "paper-triage-bench" / "screening"
ASREVIEW_DEFAULT = ROOT / ".venv-asreview" / "bin" / "python"


@dataclass
class Review:
    name: str
    titles: list[str]
    documents: list[str]
    labels: np.ndarray  # bool, included by the review

    @property
    def ids(self) -> list[str]:
        return [f"r{i}" for i in range(len(self.titles))]


def find_reviews(folder: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(folder.iterdir()):
        for suffix in (".csv.gz", ".csv"):
            if path.name.endswith(suffix):
                out[path.name.removesuffix(suffix)] = path
    return out


def load_review(name: str, path: Path) -> Review:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    titles = [(r.get("title") or "").strip() or "(untitled)" for r in records]
    abstracts = [(r.get("abstract") or "").strip() for r in records]
    documents = [f"{t}\n\n{a}" if a else t for t, a in zip(titles, abstracts, strict=True)]
    labels = np.array([str(r.get("label_included", "0")).strip() == "1" for r in records], dtype=bool)
    return Review(name, titles, documents, labels)


def embed(documents: list[str]) -> np.ndarray:
    """The documents' embeddings by the store's default embedder, cached by their text."""
    digest = hashlib.blake2b("\x1e".join(documents).encode("utf-8"), digest_size=12).hexdigest()
    path = CACHE / f"{MiniLMEmbedder.name()}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(MiniLMEmbedder()(documents), dtype=np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


# -- metrics of an order ------------------------------------------------------------------------


def metrics(order: Sequence[int], labels: np.ndarray, total: int | None = None) -> dict[str, Any]:
    """What a researcher reading in this order gets: `order` lists the records in the order
    read, at least until the last included one; `total` is the number of records (default
    all of `labels`)."""
    n = len(labels) if total is None else total
    hits = labels[np.asarray(order, dtype=np.int64)].astype(np.int64)
    relevant = int(labels.sum()) if total is None else int(hits.sum())
    found = np.cumsum(hits)

    def found_after(k: int) -> int:
        return int(found[min(k, len(found)) - 1]) if k > 0 and len(found) else 0

    def screened_for(share: float) -> int:
        need = int(np.ceil(share * relevant))
        reached = np.flatnonzero(found >= need)
        return int(reached[0]) + 1 if len(reached) else n

    screened95 = screened_for(0.95)
    return {
        "wss95": (n - screened95) / n - 0.05,
        "recall10": found_after(int(np.ceil(0.1 * n))) / relevant,
        "screened95": screened95,
        "screened100": screened_for(1.0),
        "found": {str(k): found_after(k) for k in FOUND_WITHIN},
        "recall_at": {str(k): found_after(k) / relevant for k in DECISION_POINTS},
        "records": n,
        "included": relevant,
    }


def mean_metrics(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of several runs' metrics (key by key)."""

    def mean(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            return {k: mean([v[k] for v in values]) for k in values[0]}
        if isinstance(values[0], str | list):
            return values[0]
        return float(np.mean(values))

    return {k: mean([r[k] for r in runs]) for k in runs[0]}


def random_metrics(labels: np.ndarray) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return mean_metrics([metrics(rng.permutation(len(labels)), labels) for _ in range(RANDOM_SEEDS)])


# -- the simulated researcher -------------------------------------------------------------------


@dataclass
class PaperRow:
    """What the ranking reads of a record (the queue index's Row has the same fields)."""

    id: str
    title: str
    relevance: float | None
    topics: dict[str, int] | None
    status: Status = Status.NEW
    starred: bool = False
    seed: bool = False
    day: int | None = None


@dataclass
class Queue:
    """One review under one agenda: the engine's scores and what the model reads."""

    review: Review
    texts: TextFeatures
    rows: list[PaperRow]
    topic_names: list[str]
    engine: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)


def build_queue(review: Review, vectors: np.ndarray, agenda_path: Path) -> Queue:
    agenda = load_agenda(agenda_path)
    ids = review.ids
    by_id = {pid: vectors[i] for i, pid in enumerate(ids)}
    corpus = Corpus.build(ids, review.documents, by_id)
    engine = OfflineEngine(agenda, lambda texts: MiniLMEmbedder()(texts))
    assessed = engine.assess(corpus, dict(zip(ids, review.documents, strict=True)), by_id)
    rows = [
        PaperRow(pid, title, assessed[pid].relevance, {t.topic: t.score for t in assessed[pid].topics})
        for pid, title in zip(ids, review.titles, strict=True)
    ]
    tfidf = vectorizer()
    texts = TextFeatures(
        location="bench",
        ids=list(ids),
        words=tfidf.fit_transform(review.documents).tocsr(),
        vectors=vectors,
        tfidf=tfidf,
        fitted_on=len(ids),
        position={pid: i for i, pid in enumerate(ids)},
    )
    relevance = np.array([r.relevance for r in rows], dtype=np.float64)
    return Queue(review, texts, rows, [t.name for t in agenda.topics], relevance)


def engine_order(engine: np.ndarray) -> np.ndarray:
    """The engine's order alone, ties by record (as the queue breaks ties by id)."""
    return np.lexsort((np.arange(len(engine)), -engine))


def simulate(queue: Queue, seeds: int = STOP_SEEDS) -> dict[str, Any]:
    """Decide the top of the blended queue by the labels until every included record is found
    (and on, until the estimate says 95% are found, to start the stopping test there)."""
    review, rows = queue.review, queue.rows
    n, labels = len(rows), review.labels
    index = {r.id: i for i, r in enumerate(rows)}
    cache = FeatureCache()
    previous = None
    decided: list[int] = []
    undecided = np.ones(n, dtype=bool)
    churn: list[float] = []
    weights: list[float | None] = []
    estimates: list[dict[str, Any]] = []
    stop: dict[str, Any] | None = None
    fitted_at, order = -1, list(range(n))
    remaining = int(labels.sum())
    retrain_seconds: list[float] = []
    every = max(ESTIMATE_MIN_EVERY, n // ESTIMATES)
    for step in range(n):
        due = step > 0 and step % every == 0 and stop is None
        if step <= EVERY_STEP_UNTIL or step - fitted_at >= RETRAIN_EVERY or due:
            start = time.perf_counter()
            ranking = rank(queue.texts, rows, queue.topic_names, previous, cache, with_estimate=due)
            retrain_seconds.append(time.perf_counter() - start)
            previous, fitted_at = ranking.fit, step
            new_order = [index[pid] for pid in ranking.relevance_order()]
            if 0 < step <= CHURN_OVER:
                churn.append(_churn(order, new_order, undecided))
            order = new_order
            weights.append(round(ranking.fit.model.engine_weight, 3) if ranking.fit.model else None)
            left = ranking.estimate
            if left is not None:
                estimates.append(estimate_record(step, n, left, remaining))
                if left.recall >= STOP_TARGET:
                    stop = stopping_runs(labels, undecided, step, remaining, seeds)
        if remaining == 0 and stop is not None:
            break
        pick = next(i for i in order if undecided[i])
        undecided[pick] = False
        decided.append(pick)
        rows[pick].status = Status.ACCEPTED if labels[pick] else Status.REJECTED
        remaining -= int(labels[pick])
    for r in rows:
        r.status = Status.NEW
    result = metrics(decided, labels)
    result["churn"] = float(np.mean(churn)) if churn else 0.0
    result["engine_weights"] = weights[:60]
    result["retrain_ms"] = 1000 * float(np.median(retrain_seconds))
    result["estimates"] = estimates
    result["stopping"] = stop or stopping_runs(labels, undecided, len(decided), remaining, seeds)
    return result


def estimate_record(step: int, n: int, left: Estimate, actual: int) -> dict[str, Any]:
    """The estimate of relevant records left against the truth, at one point of a run."""
    return {
        "screened": step,
        "share": step / n,
        "estimate": left.left,
        "low": left.low,
        "high": left.high,
        "actual": actual,
        "covered": left.low <= actual <= left.high,
    }


def stopping_runs(
    labels: np.ndarray, undecided: np.ndarray, screened: int, remaining: int, seeds: int
) -> dict[str, Any]:
    """The recall check started here: the undecided records are the urn, drawn at random (one
    draw order per seed) and decided until the hypergeometric test says 95% recall is reached
    with 95% confidence. Per seed: the recall at the stop and the records read in all."""
    urn = np.flatnonzero(undecided)
    total = int(labels.sum())
    found_before = total - remaining
    recalls, reads = [], []
    for seed in range(seeds):
        order = np.random.default_rng(seed).permutation(urn)
        hits = np.cumsum(labels[order])
        drawn = len(order)
        for k in range(1, len(order) + 1):
            if recall_p_value(len(urn), k, int(hits[k - 1]), found_before, STOP_TARGET) < 1 - STOP_CONFIDENCE:
                drawn = k
                break
        found = found_before + (int(hits[drawn - 1]) if drawn else 0)
        recalls.append(found / total)
        reads.append(screened + drawn)
    n = len(labels)
    return {
        "started_at": screened,
        "recall_at_start": found_before / total,
        "recall": recalls,
        "read": reads,
        "met_target": float(np.mean(np.array(recalls) >= STOP_TARGET)),
        "work_saved": float(np.mean([1 - r / n for r in reads])),
    }


def _churn(before: list[int], after: list[int], undecided: np.ndarray) -> float:
    """The share of the top undecided records that one decision's re-ranking changed."""
    old = [i for i in before if undecided[i]][:CHURN_TOP]
    new = [i for i in after if undecided[i]][:CHURN_TOP]
    return 1.0 - len(set(old) & set(new)) / max(len(new), 1)


def run_case(args: tuple[str, str, Path, Path]) -> tuple[str, str, dict[str, Any]]:
    name, form, data, agenda = args
    review = load_review(name, data)
    queue = build_queue(review, embed(review.documents), agenda)
    start = time.perf_counter()
    blend = simulate(queue)
    blend["seconds"] = time.perf_counter() - start
    return name, form, {"blend": blend, "engine": metrics(engine_order(queue.engine), review.labels)}


def run_asreview(args: tuple[str, Path, Path, int]) -> tuple[str, dict[str, Any]]:
    name, data, python, seed = args
    with tempfile.TemporaryDirectory() as tmp:  # ASReview writes a cache file where it runs
        out = subprocess.run(
            [str(python), str(ROOT / "bench" / "asreview_sim.py"), str(data.resolve()), str(seed)],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp,
        )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    labels = load_review(name, data).labels
    # The two starting records are not counted (as in ASReview's own reports).
    keep = np.setdiff1d(np.arange(len(labels)), result["priors"])
    position = {int(r): i for i, r in enumerate(keep)}
    order = [position[r] for r in result["order"]]
    m = metrics(order, labels[keep])
    m["seconds"] = result["seconds"]
    m["version"] = result["asreview"]
    return name, m


# -- report ------------------------------------------------------------------------------------


def cell(m: dict[str, Any]) -> list[str]:
    return [
        f"{m['wss95']:.3f}",
        f"{m['recall10']:.3f}",
        f"{m['screened95']:.0f}",
        f"{m['screened100']:.0f}",
        "{:.1f} / {:.1f}".format(*m["found"].values()),
        " ".join(f"{v:.2f}" for v in m["recall_at"].values()),
    ]


COLUMNS = [
    "WSS@95",
    "recall@10%",
    "read for 95%",
    "read for 100%",
    "found in 20 / 50",
    "recall @10 20 50 100",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="folder of NAME.csv(.gz) screening datasets")
    parser.add_argument("--agendas", type=Path, help="folder of NAME.md and NAME-short.md (default: DATA)")
    parser.add_argument("--only", nargs="+", help="only these reviews")
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=list(FORMS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--asreview-python", type=Path, default=ASREVIEW_DEFAULT)
    parser.add_argument("--no-asreview", action="store_true")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tag", default="", help="suffix of the results file's name")
    args = parser.parse_args()
    agendas = args.agendas or args.data
    reviews = {k: v for k, v in find_reviews(args.data).items() if not args.only or k in args.only}
    cases = []
    for name, path in reviews.items():
        for form in args.forms:
            agenda = agendas / FORMS[form].format(name)
            if agenda.exists():
                cases.append((name, form, path, agenda))
            else:
                print(f"{name}: no agenda {agenda}, {form} skipped", file=sys.stderr)
    for name, path in reviews.items():  # embed once, before the workers share the cache
        embed(load_review(name, path).documents)
    results: dict[str, dict[str, Any]] = {name: {} for name in reviews}
    asreview_ok = not args.no_asreview and args.asreview_python.exists()
    if not asreview_ok and not args.no_asreview:
        print(f"ASReview not run: {args.asreview_python} not found (make asreview)", file=sys.stderr)
    asr_jobs = [(n, p, args.asreview_python, s) for n, p in reviews.items() for s in ASREVIEW_SEEDS]
    with ProcessPoolExecutor(max_workers=args.workers, initializer=one_thread) as pool:
        ours = pool.map(run_case, cases)
        theirs = pool.map(run_asreview, asr_jobs) if asreview_ok else iter(())
        asr_runs: dict[str, list[dict[str, Any]]] = {}
        for name, m in theirs:
            asr_runs.setdefault(name, []).append(m)
        for name, form, m in ours:
            results[name][form] = m
    for name, path in reviews.items():
        results[name]["random"] = random_metrics(load_review(name, path).labels)
        if name in asr_runs:
            results[name]["asreview"] = mean_metrics(asr_runs[name])
            results[name]["asreview"]["seeds"] = len(asr_runs[name])
    print_report(results, args.forms, args.tag)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


def print_report(results: dict[str, dict[str, Any]], forms: list[str], tag: str) -> None:
    rows: list[list[Any]] = []
    for name, res in results.items():
        for form in forms:
            if form in res:
                rows.append(
                    [name, f"blend, {form}", *cell(res[form]["blend"]), f"{res[form]['blend']['churn']:.3f}"]
                )
                rows.append([name, f"engine, {form}", *cell(res[form]["engine"]), ""])
        for other in ("asreview", "random"):
            if other in res:
                rows.append([name, other, *cell(res[other]), ""])
    report(
        f"screening{tag}",
        "Screening real systematic reviews",
        ["review", "ranking", *COLUMNS, "churn"],
        rows,
        {"results": results},
    )
    means: list[list[Any]] = []
    keys = [(f, w) for f in forms for w in ("blend", "engine")] + [(None, "asreview"), (None, "random")]
    for form, what in keys:
        runs = [
            res[form][what] if form else res[what]
            for res in results.values()
            if (form in res if form else what in res)
        ]
        if runs:
            m = mean_metrics(
                [
                    {
                        k: r[k]
                        for k in ("wss95", "recall10", "screened95", "screened100", "found", "recall_at")
                    }
                    for r in runs
                ]
            )
            churn = f"{np.mean([r['churn'] for r in runs]):.3f}" if what == "blend" else ""
            means.append([f"{what}, {form}" if form else what, len(runs), *cell(m), churn])
    report(
        f"screening{tag}_mean", "Mean over the reviews", ["ranking", "reviews", *COLUMNS, "churn"], means, {}
    )


if __name__ == "__main__":
    main()
