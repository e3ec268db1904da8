"""`triage eval`: how far the scores agree with the researcher's own decisions.

Every decided, assessed paper is scored by the engine alone, by each agenda topic, by what the
decisions add to the engine (the personal model's own part) and by the blend (the queue's
order), the last two by models trained without it (k-fold cross-validation: each fold is scored
by a fit on the other folds).
Relevant means accepted or starred; maybes and rejections are not. The decided papers came
from the top of the queue, so the engine's figures measure how well it orders what it put
there, not how much it missed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from assistant.models import Status
from assistant.personal.estimate import Estimate, estimate
from assistant.personal.features import TextFeatures
from assistant.personal.model import Fit, Labels, average_precision, blend, features, fit, scores
from assistant.personal.ranking import PaperState, learns_from, topic_names, topic_scores

FOLDS = 5
BUCKETS = ((0.0, 2.0), (2.0, 4.0), (4.0, 6.0), (6.0, 8.0), (8.0, 10.01))


@dataclass
class Metrics:
    name: str
    papers: int
    precision_10: float | None
    precision_20: float | None
    average_precision: float | None
    roc_auc: float | None
    wss_95: float | None


@dataclass
class Bucket:
    low: float
    high: float
    papers: int
    accepted: int

    @property
    def share(self) -> float | None:
        return self.accepted / self.papers if self.papers else None


@dataclass
class EvalReport:
    decided: int
    accepted: int
    maybe: int
    rejected: int
    seeded: int
    assessed: int
    rankers: list[Metrics] = field(default_factory=list)
    topics: list[Metrics] = field(default_factory=list)
    calibration: list[Bucket] = field(default_factory=list)
    note: str = ""
    # What the queue's order uses now: "engine" (no accept yet) or "engine + model".
    in_use: str = "engine"
    # The engine's weight in the model (log-odds per standard deviation of its relevance).
    engine_weight: float | None = None
    random_ap: float | None = None  # a random order's average precision: the share of accepts
    # Relevant papers expected among the undecided ones.
    estimate: Estimate | None = None

    @property
    def measurable(self) -> bool:
        """Whether the decided papers hold both accepts and papers passed over: with one kind
        only, any order agrees perfectly and nothing is measured."""
        return bool(self.rankers) and self.rankers[0].roc_auc is not None

    def summary(self) -> str:
        """One line: can the scores be trusted?"""
        by = {m.name: m for m in self.rankers}
        engine, blended = by.get("engine"), by.get("blend")
        if not self.measurable or not engine or engine.average_precision is None:
            return f"{self.decided} decisions: too few to measure agreement ({self.note})"
        if not blended or blended.average_precision is None:
            return (
                f"agreement with your {self.assessed} assessed decisions: the engine's average precision "
                f"{engine.average_precision:.2f} (random order {_fmt(self.random_ap)}); the personal "
                "model is not trained yet"
            )
        gain = blended.average_precision - engine.average_precision
        verdict = (
            "what your decisions taught ranks them better than the engine alone"
            if gain >= 0.01
            else "what your decisions taught ranks them worse than the engine alone"
            if gain <= -0.01
            else "what your decisions taught ranks them as the engine alone does"
        )
        return (
            f"agreement with your {self.assessed} assessed decisions: average precision "
            f"{blended.average_precision:.2f} with what they taught, {engine.average_precision:.2f} "
            f"engine alone, {_fmt(self.random_ap)} in random order; ROC-AUC {_fmt(blended.roc_auc)} / "
            f"{_fmt(engine.roc_auc)}: {verdict}"
        )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def metrics(name: str, score: np.ndarray, relevant: np.ndarray) -> Metrics:
    n = len(score)
    if n == 0 or not relevant.any():
        return Metrics(name, n, None, None, None, None, None)
    order = np.lexsort((relevant, -score))  # ties: non-relevant first (no credit for ties)
    hits = relevant[order]

    def precision(k: int) -> float | None:
        return float(hits[:k].mean()) if n >= k else None

    return Metrics(
        name,
        n,
        precision(10),
        precision(20),
        average_precision(score, relevant),
        roc_auc(score, relevant),
        wss(hits, 0.95),
    )


def roc_auc(score: np.ndarray, relevant: np.ndarray) -> float | None:
    """The chance that a relevant paper scores above an irrelevant one (ties count half)."""
    pos, neg = score[relevant], score[~relevant]
    if not len(pos) or not len(neg):
        return None
    ranks = _average_ranks(np.concatenate([pos, neg]))
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def wss(hits: np.ndarray, recall: float) -> float | None:
    """Work saved over sampling at this recall: the share of papers not read before `recall`
    of the relevant ones are found, less the share a random order would save (1 - recall)."""
    total = int(hits.sum())
    if total == 0:
        return None
    needed = math.ceil(recall * total)
    read = int(np.flatnonzero(np.cumsum(hits) >= needed)[0]) + 1
    return (len(hits) - read) / len(hits) - (1 - recall)


def evaluate(
    texts: TextFeatures,
    rows: Sequence[PaperState],
    agenda_topics: Sequence[str] = (),
    on_progress: Callable[[int, int], None] | None = None,
    negative: Collection[str] = (),
    previous: Fit | None = None,
) -> EvalReport:
    """`negative` names topics that score what the researcher does not want; `previous`, a fit
    on the same decisions (the queue's), is where training starts (the problem is convex: it
    changes only how long it takes)."""
    ids = [r.id for r in rows]
    names = topic_names(rows, agenda_topics)
    engine = np.array([r.relevance if r.relevance is not None else np.nan for r in rows], dtype=np.float64)
    assessed = np.isfinite(engine)
    filled = np.where(assessed, engine, float(engine[assessed].min()) if assessed.any() else 0.0)
    topics = topic_scores(rows, names)
    words, vectors = texts.rows(ids)
    learned = topics[:, learns_from(names)]
    X = features(words, vectors, learned)
    labels = Labels.from_decisions(
        [r.status for r in rows], [r.starred for r in rows], [r.seed for r in rows]
    )
    decided = np.flatnonzero((labels.y >= 0) & assessed)
    accepted = (labels.y == 1) & (labels.weight >= 1.0)
    report = EvalReport(
        decided=labels.decided,
        accepted=labels.positives,
        maybe=sum(
            1 for r in rows if r.status is Status.MAYBE and not r.starred
        ),  # a starred one counts as starred
        rejected=labels.negatives,
        seeded=int(labels.seeded.sum()),
        assessed=len(decided),
    )
    relevant = accepted[decided]
    report.random_ap = float(relevant.mean()) if len(decided) else None
    report.rankers.append(metrics("engine", engine[decided], relevant))
    # A negative topic ("Not interested") is measured the right way round: a high score should
    # mean a paper you pass over.
    report.topics = [
        metrics(f"{name} (reversed)", -topics[decided, j], relevant)
        if name in negative
        else metrics(name, topics[decided, j], relevant)
        for j, name in enumerate(names)
    ]
    for low, high in BUCKETS:
        inside = decided[(engine[decided] >= low) & (engine[decided] < high)]
        report.calibration.append(Bucket(low, min(high, 10.0), len(inside), int(accepted[inside].sum())))
    whole = fit(X, filled, labels, ids, previous)
    report.note = whole.note
    report.in_use = "engine + model" if whole.active else "engine"
    report.engine_weight = whole.model.engine_weight if whole.model is not None else None
    undecided = np.flatnonzero((labels.y < 0) & assessed)
    report.estimate = estimate(X, filled, labels, ids, whole, undecided)
    if whole.model is None or not relevant.any() or relevant.all():
        return report
    # Out of fold: each fold's decisions are hidden from the fit that scores them.
    model_oof = np.full(len(rows), np.nan)
    blend_oof = np.full(len(rows), np.nan)
    folds = min(FOLDS, int(relevant.sum()), int((~relevant).sum()))
    fold_of = np.full(len(rows), -1)
    for group in (decided[relevant], decided[~relevant]):
        fold_of[group] = np.arange(len(group)) % max(folds, 2)
    for k in range(max(folds, 2)):
        held = decided[fold_of[decided] == k]
        part = fit(X, filled, labels.without(held), ids, whole)
        model = scores(part, X)
        if model is not None:
            model_oof[held] = model[held]
        blend_oof[held] = blend(part, filled, model)[held]
        if on_progress:
            on_progress(k + 1, max(folds, 2))
    if np.isfinite(model_oof[decided]).all():
        report.rankers.append(metrics("decisions' part", model_oof[decided], relevant))
    report.rankers.append(metrics("blend", blend_oof[decided], relevant))
    return report
