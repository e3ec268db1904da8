"""Learning from decisions: a simulated researcher works down the queue, the model retrains.

    python bench/learning.py [--sets A B C] [--readers first second] [--workers N]

For every agenda case of the labelled sets (bench/labelled.py), a simulated researcher decides
the top paper of the queue, one at a time, by the labels: grade 2 is an accept, 1 a maybe, 0 a
rejection. After each decision the personal model is retrained, as in the review UI, and the
queue re-ordered by the blend. After 0, 5, 10, 20 and 50 decisions the bench reports the
average precision (grade 2 relevant) of the papers still undecided, ranked by the engine alone
and by the blend: the same papers, so the difference is the ranking's alone. "found" is how
many grade-2 papers the first 20 (and 50) decisions reached following the blend and following
the engine alone: when the two orders have decided different papers, their remaining queues
differ, and this count compares them on the same footing. WSS@95 is the work saved over reading
in random order at 95% recall: the share of papers the researcher need not read before 95% of
the grade-2 papers are found, less 5% (the blend retrains after every decision up to 50, then
every 10). Churn is the share of the top 20 undecided papers one decision's retraining
changes, over the first 50 decisions.

The model's constants were chosen on sets A and B; each later set was graded after the last
one reported, and reports once before anything may be chosen on it (bench/labelled.py says
which). Retrain time is
measured at 1k and 10k decisions on a 10k-paper store (random vectors), the cost of one
retrain after a decision in the review UI.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from common import one_thread, report, varied_records
from labelled import READERS, SETS, cases, temporary_fixture

from assistant.models import Status
from assistant.personal.model import (
    Fit,
    Labels,
    average_precision,
    blend,
    features,
    fit,
    scores,
    word_features,
)
from assistant.triage.offline import Corpus, OfflineEngine

CHECKPOINTS = (0, 5, 10, 20, 50)
# Grade-2 papers found within this many decisions. Unlike the remaining queue's AP, this
# compares the two orders on the same footing when they have decided different papers.
FOUND_WITHIN = (20, 50)
EVERY_STEP_UNTIL = 50
LATER_EVERY = 10
STATUS_OF_GRADE = {2: Status.ACCEPTED, 1: Status.MAYBE, 0: Status.REJECTED}
CHURN_TOP = 20


def simulate(
    ids: list[str],
    words: object,
    vectors: np.ndarray,
    engine: np.ndarray,
    topics: np.ndarray,
    grades: np.ndarray,
    stop_at: int = 10**9,
) -> dict[str, object]:
    n = len(ids)
    X = features(words, vectors, topics)
    statuses = [Status.NEW] * n
    starred = [False] * n
    relevant = grades == 2
    target = int(np.ceil(0.95 * relevant.sum()))
    rows: dict[int, tuple[float, float]] = {}
    weights: dict[int, float] = {}
    found = 0
    found_within: dict[int, int] = {}
    screened_at_target = n
    order_score = engine.copy()
    fitted_at = -1
    result: Fit | None = None
    churn: list[float] = []
    undecided = np.ones(n, dtype=bool)
    for step in range(n):
        if step <= EVERY_STEP_UNTIL or step - fitted_at >= LATER_EVERY:
            labels = Labels.from_decisions(statuses, starred)
            result = fit(X, engine, labels, ids, result)
            new_score = blend(result, engine, scores(result, X))
            if 0 < step <= EVERY_STEP_UNTIL:
                churn.append(_churn(order_score, new_score, undecided))
            order_score, fitted_at = new_score, step
        if step in CHECKPOINTS:
            rest = np.array([s is Status.NEW for s in statuses])
            rows[step] = (
                average_precision(engine[rest], relevant[rest]),
                average_precision(order_score[rest], relevant[rest]),
            )
            weights[step] = result.model.engine_weight if result is not None and result.model else 0.0
        choices = np.flatnonzero(undecided)
        pick = choices[np.lexsort((choices, -order_score[choices]))[0]]
        statuses[pick] = STATUS_OF_GRADE[int(grades[pick])]
        undecided[pick] = False
        if relevant[pick]:
            found += 1
            if found == target:
                screened_at_target = step + 1
        if step + 1 in FOUND_WITHIN:
            found_within[step + 1] = found
        if step >= stop_at or (found >= target and step >= max(CHECKPOINTS)):
            break
    engine_order = np.lexsort((np.arange(n), -engine))
    engine_screened = int(np.flatnonzero(np.cumsum(relevant[engine_order]) >= target)[0]) + 1
    return {
        "ap": rows,
        "weights": weights,
        "churn": float(np.mean(churn)) if churn else 0.0,
        "wss_blend": (n - screened_at_target) / n - 0.05,
        "wss_engine": (n - engine_screened) / n - 0.05,
        # within k decisions: (following the engine alone, following the blend)
        "found": {
            k: (int(relevant[engine_order[:k]].sum()), found_within.get(k, found)) for k in FOUND_WITHIN
        },
    }


def _churn(before: np.ndarray, after: np.ndarray, undecided: np.ndarray) -> float:
    """The share of the top undecided papers that one decision's retraining changed."""
    idx = np.flatnonzero(undecided)
    old = set(idx[np.lexsort((idx, -before[idx]))][:CHURN_TOP].tolist())
    new = set(idx[np.lexsort((idx, -after[idx]))][:CHURN_TOP].tolist())
    return 1.0 - len(old & new) / max(len(new), 1)


def retrain_times() -> list[list[object]]:
    """One retrain on a 10k-paper store (the sample's texts varied, random vectors): with the
    weight chosen again by cross-validation, and after one more decision (the review UI's
    case: the weight is kept until the decisions grow by a tenth, the model starts from the
    last fit)."""
    rng = np.random.default_rng(3)
    records = varied_records(10_000)
    n, dims = len(records), 384
    words = word_features([f"{r['title']}\n\n{r['abstract']}" for r in records])
    vectors = rng.normal(size=(n, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    topics = rng.integers(0, 11, size=(n, 3)).astype(np.float64)
    engine = topics.max(axis=1) + rng.random(n)
    like = vectors @ rng.normal(size=dims) + 0.05 * topics[:, 0] + rng.normal(0, 0.5, n)
    ids = [f"p{i}" for i in range(n)]
    X = features(words, vectors, topics)
    out: list[list[object]] = []
    # 400: below BOOTSTRAP_BELOW, where choosing the weight also bootstraps its confidence.
    for decided in (400, 1_000, 10_000):
        chosen = rng.choice(n, decided, replace=False)
        statuses = [Status.NEW] * n
        for i in chosen[:-1]:
            statuses[i] = Status.ACCEPTED if like[i] > np.median(like) else Status.REJECTED
        before = Labels.from_decisions(statuses, [False] * n)
        statuses[chosen[-1]] = Status.ACCEPTED
        labels = Labels.from_decisions(statuses, [False] * n)
        # The UI's case: the previous fit was on every decision but the last one.
        previous = fit(X, engine, before, ids, None)
        for label, start_from in (("from scratch", None), ("after one more decision", previous)):
            times = []
            for _ in range(3):
                start = time.perf_counter()
                result = fit(X, engine, labels, ids, start_from)
                blend(result, engine, scores(result, X))
                times.append(time.perf_counter() - start)
            weight = result.model.engine_weight if result.model is not None else 0.0
            out.append([f"{decided:,} decisions, 10k papers, {label}", float(np.median(times)), weight])
    return out


def job(
    args: tuple[str, str, list[str], object, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> list[object]:
    label, who, ids, words, vectors, engine, topics, grades = args
    start = time.perf_counter()
    sim = simulate(ids, words, vectors, engine, topics, grades)
    return [label, who, sim, time.perf_counter() - start]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--readers", nargs="+", default=list(READERS))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--retrain-only", action="store_true", help="only time the retrain")
    args = parser.parse_args()
    if args.retrain_only:
        report_retrain()
        return
    tmp, fx = temporary_fixture()
    corpus = Corpus.build(fx.ids, fx.documents, fx.vectors)
    words = word_features(fx.documents)
    jobs = []
    forms: dict[str, tuple[str, str]] = {}
    for case in cases(fx.ids, tuple(args.sets)):
        engine_ = OfflineEngine(case.agenda, fx.store.embed)
        assessed = engine_.assess(corpus, dict(zip(fx.ids, fx.documents, strict=True)), fx.vectors)
        engine = np.array([assessed[i].relevance for i in fx.ids])
        topics = np.array([[t.score for t in assessed[i].topics] for i in fx.ids], dtype=np.float64)
        label = f"{case.set_name}: {case.label}"
        forms[label] = (case.set_name, case.form)
        for who in args.readers:
            jobs.append((label, who, fx.ids, words, fx.matrix, engine, topics, case.grades[who]))
    tmp.cleanup()
    with ProcessPoolExecutor(max_workers=args.workers, initializer=one_thread) as pool:
        results = list(pool.map(job, jobs))
    rows: list[list[object]] = []
    summary: dict[tuple[str, str, str], list[list[float]]] = {}
    found_50: dict[tuple[str, str, str], np.ndarray] = {}
    for label, who, sim, seconds in results:
        assert isinstance(sim, dict) and isinstance(label, str) and isinstance(who, str)
        ap = sim["ap"]
        row: list[object] = [label, who]
        row += [f"{ap[n][0]:.3f} / {ap[n][1]:.3f}" for n in CHECKPOINTS]
        row += [
            f"{ap[20][1] - ap[20][0]:+.3f}",
            f"{sim['churn']:.3f}",
            *(f"{engine_found} / {blend_found}" for engine_found, blend_found in sim["found"].values()),
            f"{sim['wss_engine']:.3f} / {sim['wss_blend']:.3f}",
            f"{seconds:.0f}s",
        ]
        rows.append(row)
        set_name, form = forms[label]
        summary.setdefault((set_name, form, who), []).append(
            [*(ap[n][i] for n in CHECKPOINTS for i in (0, 1)), sim["churn"], ap[20][1] - ap[20][0]]
        )
        found_50[(set_name, form, who)] = found_50.get((set_name, form, who), np.zeros(2)) + sim["found"][50]
    columns = [
        "case",
        "labels",
        *(f"AP@{n} engine / blend" for n in CHECKPOINTS),
        "gain @20",
        "churn",
        *(f"found in {k} engine / blend" for k in FOUND_WITHIN),
        "WSS@95 engine / blend",
        "time",
    ]
    report("learning", "Average precision of the remaining queue after n decisions", columns, rows, {})
    means = []
    for (set_name, form, who), values in sorted(summary.items()):
        m = np.mean(values, axis=0)
        gains = np.array(values)[:, -1]
        means.append(
            [
                f"{set_name} ({SETS[set_name][0]}), {form}",
                who,
                *(f"{m[2 * i]:.3f} / {m[2 * i + 1]:.3f}" for i in range(len(CHECKPOINTS))),
                f"{gains.mean():+.3f} ({(gains >= 0.10).sum()} of {len(gains)} >= 0.10)",
                f"{np.array(values)[:, -2].mean():.3f}",
                f"{min(v[1] - v[0] for v in values):+.3f} / {min(v[3] - v[2] for v in values):+.3f}",
                "{:.0f} / {:.0f}".format(*found_50[(set_name, form, who)]),
            ]
        )
    report(
        "learning_summary",
        "Means per set and agenda form (engine / blend)",
        [
            "cases",
            "labels",
            *(f"AP@{n}" for n in CHECKPOINTS),
            "gain @20",
            "churn",
            "worst gain @0 / @5",
            "found in 50, all cases",
        ],
        means,
        {},
    )
    report_retrain()


def report_retrain() -> None:
    report(
        "learning_retrain",
        "Retrain time (fit and score the store)",
        ["labels", "seconds", "engine weight"],
        retrain_times(),
        {},
    )


if __name__ == "__main__":
    main()
