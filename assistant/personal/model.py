"""The personal model: what the researcher's own decisions say about the papers still undecided.

One logistic regression gives the odds that the researcher accepts a paper, from the engine's
relevance (z-scored over the store) and from what the paper says: the TF-IDF of its words, its
embedding and the engine's topic scores. The engine's part has a prior: before any accept the
queue is the engine's order (the agenda is the researcher's own word), and its weight is held
near ENGINE_WEIGHT by a Gaussian prior. The paper's own features start at zero and an L2
prior holds them there until decisions pull them away, so every decision moves the order only
as far as its evidence carries, and the queue changes smoothly from one decision to the next:
there is no weight to choose and no switch that turns the model on and off.

Every decision is a label: accepted and starred papers are positives (a star counts double), a
maybe a weak positive, a rejection a negative. A sample of undecided papers counts as presumed
negatives at a quarter weight: most papers in a store are not what a researcher wants, and the
first decisions are nearly all accepts (the top of the queue). The papers wanted are rare and
each one teaches much: together the positives weigh POSITIVE_RATIO times the rest, as the
screening field's tools balance their classes. The constants were chosen on seven real
systematic reviews and checked on seven others and on the labelled sets (bench/README.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from assistant.models import Status
from assistant.personal import lbfgs
from assistant.personal.csr import CSR
from assistant.personal.matrix import EMBEDDING_SCALE, TOPIC_SCALE, Block, Features, features

__all__ = ["EMBEDDING_SCALE", "TOPIC_SCALE", "Features", "features"]

# Label weights: a star counts more than an accept, a maybe is a weak positive.
STAR_WEIGHT = 2.0
MAYBE_WEIGHT = 0.3
# Undecided papers used as presumed negatives: a few per label, within bounds.
BACKGROUND_PER_LABEL = 4
BACKGROUND_MIN = 50
BACKGROUND_MAX = 2000
BACKGROUND_WEIGHT = 0.25
# The positives together weigh at least this many times the negatives (decided and presumed).
POSITIVE_RATIO = 9.8
# Priors: the engine's weight (log-odds per standard deviation of its relevance) is held near
# ENGINE_WEIGHT, within about ENGINE_WEIGHT_SD; the paper's own features near zero, with
# strength L2 (per unit of label weight).
ENGINE_WEIGHT = 1.5
ENGINE_WEIGHT_SD = 0.5
L2 = 1.0
INTERCEPT_L2 = 1e-4
MAX_ITERATIONS = 300
# A problem this large (entries read per product) keeps the steep directions of its Hessian
# (`lbfgs.Spectrum`) to start the next solve from. Finding them costs LANCZOS_STEPS products
# (as much as a solve from scratch), so they are kept until the rows trained on have changed
# by RELEARN_GROWTH and a solve from them takes more than RELEARN_AFTER evaluations: a few
# more decisions change them little.
LARGE_PROBLEM = 200_000
RELEARN_GROWTH = 0.1
RELEARN_AFTER = 20
LANCZOS_STEPS = 150


STATUS_CODE = {Status.NEW: 0, Status.ACCEPTED: 1, Status.REJECTED: 2, Status.MAYBE: 3}


@dataclass(frozen=True)
class Labels:
    """Per paper: 1 positive, 0 negative, -1 undecided; and the weight of the label."""

    y: np.ndarray
    weight: np.ndarray
    # Decisions that did not come from working down the queue (a library imported with
    # --accept): the engine did not choose them.
    seeded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @classmethod
    def from_decisions(
        cls, statuses: Sequence[Status], starred: Sequence[bool], seeded: Sequence[bool] | None = None
    ) -> Labels:
        status = np.array([STATUS_CODE[st] for st in statuses], dtype=np.int8)
        return cls.from_codes(status, starred, seeded)

    @classmethod
    def from_codes(
        cls,
        status: np.ndarray,
        starred: Sequence[bool] | np.ndarray,
        seeded: Sequence[bool] | np.ndarray | None = None,
    ) -> Labels:
        """`from_decisions` of the statuses given by their `STATUS_CODE`."""
        star = np.asarray(starred, dtype=bool)
        y = np.full(len(status), -1, dtype=np.int8)
        w = np.zeros(len(status), dtype=np.float64)
        y[status == 1], w[status == 1] = 1, 1.0  # accepted
        y[status == 3], w[status == 3] = 1, MAYBE_WEIGHT
        starred_kept = star & (status != 2)
        y[starred_kept], w[starred_kept] = 1, STAR_WEIGHT
        y[status == 2], w[status == 2] = 0, 1.0  # rejected, starred or not
        seed = np.zeros(len(status), dtype=bool) if seeded is None else np.asarray(seeded, dtype=bool)
        return cls(y, w, seed & (y >= 0))

    @property
    def relevant(self) -> np.ndarray:
        """Accepted or starred papers (maybes are too weak to count here)."""
        return np.asarray((self.y == 1) & (self.weight >= 1.0))

    @property
    def positives(self) -> int:
        return int(self.relevant.sum())

    @property
    def negatives(self) -> int:
        return int((self.y == 0).sum())

    @property
    def decided(self) -> int:
        return int((self.y >= 0).sum())

    def without(self, rows: np.ndarray) -> Labels:
        """These labels with the decisions of `rows` hidden (for held-out scoring)."""
        y, w = self.y.copy(), self.weight.copy()
        y[rows], w[rows] = -1, 0.0
        seeded = self.seeded.copy() if len(self.seeded) else self.seeded
        if len(seeded):
            seeded[rows] = False
        return Labels(y, w, seeded)


def word_features(documents: Sequence[str]) -> CSR:
    """TF-IDF of word 1-2 grams over these documents (rows L2-normalised)."""
    from assistant.personal.features import vectorizer

    return CSR.of(vectorizer().fit_transform(documents))


@dataclass
class Model:
    """The regression's weights: log-odds = intercept + engine_weight * engine z + X @ coef."""

    intercept: float
    engine_weight: float
    coef: np.ndarray
    words: int
    # The steep directions of the objective at these weights: where the next solve starts.
    spectrum: lbfgs.Spectrum | None = None

    @property
    def theta(self) -> np.ndarray:
        return np.concatenate([[self.intercept, self.engine_weight], self.coef])

    def personal(self, X: Features, rows: np.ndarray | None = None) -> np.ndarray:
        """What the decisions add to each paper's log-odds beyond the engine (X @ coef)."""
        return X.dot(self.coef, rows)

    def logit(self, X: Features, engine_z: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        e = engine_z if rows is None else engine_z[rows]
        return np.asarray(self.intercept + self.engine_weight * e + self.personal(X, rows), dtype=np.float64)

    def word_weights(self) -> np.ndarray:
        """How much each word column (TF-IDF weight 1) adds to a paper's log-odds."""
        return np.asarray(self.coef[: self.words], dtype=np.float64)


@dataclass
class Fit:
    """The trained model (None before the first accept) and what it was trained on."""

    note: str = ""
    positives: int = 0
    negatives: int = 0
    decided: int = 0
    model: Model | None = None
    # z-scoring of the engine's relevance over the store.
    engine_stats: tuple[float, float] = (0.0, 1.0)

    @property
    def active(self) -> bool:
        return self.model is not None

    @property
    def personal(self) -> bool:
        """Whether the decisions change the order at all."""
        return self.active

    def engine_z(self, engine: np.ndarray) -> np.ndarray:
        return _z(engine, self.engine_stats)

    def short(self) -> str:
        """A few words for the review UI's header."""
        if self.model is not None:
            return f"learned from {_decisions(self.decided)}"
        return "learns from your first accept"


def _decisions(n: int) -> str:
    return f"{n} decision" if n == 1 else f"{n} decisions"


def _stats(values: np.ndarray) -> tuple[float, float]:
    """(mean, standard deviation) for z-scores; (0, 1) when there is nothing to scale."""
    values = values[np.isfinite(values)] if values.size else values
    if values.size == 0:
        return 0.0, 1.0
    std = float(values.std())
    return float(values.mean()), std if std > 1e-9 else 1.0


def _z(values: np.ndarray, stats: tuple[float, float]) -> np.ndarray:
    return np.asarray((values - stats[0]) / stats[1], dtype=np.float64)


def stable_order(ids: Sequence[str], salt: str = "") -> np.ndarray:
    """A pseudo-random order of papers that depends only on their ids (the same every run)."""
    keys = [hashlib.blake2b((salt + i).encode("utf-8"), digest_size=8).digest() for i in ids]
    return np.array(sorted(range(len(ids)), key=keys.__getitem__), dtype=np.int64)


def background(labels: Labels, order: np.ndarray) -> np.ndarray:
    """Undecided papers used as presumed negatives, in a fixed pseudo-random choice."""
    undecided = order[labels.y[order] < 0]
    n = int(np.clip(BACKGROUND_PER_LABEL * labels.decided, BACKGROUND_MIN, BACKGROUND_MAX))
    return np.asarray(undecided[:n], dtype=np.int64)


def train(
    X: Features,
    engine_z: np.ndarray,
    labels: Labels,
    rows: np.ndarray,
    presumed: np.ndarray,
    warm: Model | None = None,
    learn: bool = False,
    ftol: float = lbfgs.FTOL,
) -> Model:
    """The maximum a posteriori regression on these decisions and presumed negatives; `warm`
    is where the solver starts (one more decision moves the optimum little). The problem is
    convex: where it starts changes only how long it takes. `learn`: keep the Hessian's steep
    directions for the next solve when the problem is large. `ftol`: the solve stops when a
    step lowers the objective by less than this share of it."""
    index, y, w = problem(labels, rows, presumed)
    return solve(X, X.block(index), engine_z[index], y, w, warm, learn, ftol)


def problem(
    labels: Labels, rows: np.ndarray, presumed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The papers trained on (these decided rows, then the presumed negatives), their labels
    and their weights: the positives weighed up to POSITIVE_RATIO times the rest."""
    index = np.concatenate([rows, presumed])
    y = np.concatenate([labels.y[rows], np.zeros(len(presumed), dtype=np.int8)]).astype(np.float64)
    w = np.concatenate([labels.weight[rows], np.full(len(presumed), BACKGROUND_WEIGHT)])
    positive = y == 1
    if positive.any() and (~positive).any():
        w[positive] *= max(1.0, POSITIVE_RATIO * w[~positive].sum() / w[positive].sum())
    return index, y, w


def solve(
    X: Features,
    block: Block,
    e: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    warm: Model | None = None,
    learn: bool = False,
    ftol: float = lbfgs.FTOL,
) -> Model:
    """`train` on papers already gathered: their rows (`block`), engine z-scores, labels and
    weights (a paper of weight 0 is not trained on)."""

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, coef = theta[0], theta[1], theta[2:]
        z = a + b * e + block.dot(coef)
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow
        value = (
            lbfgs.inner(w, np.logaddexp(0.0, z) - y * z)
            + 0.5 * L2 * lbfgs.inner(coef, coef)
            + 0.5 * ((b - ENGINE_WEIGHT) / ENGINE_WEIGHT_SD) ** 2
            + 0.5 * INTERCEPT_L2 * a * a
        )
        r = w * (p - y)
        grad = np.empty_like(theta)
        grad[0] = r.sum() + INTERCEPT_L2 * a
        grad[1] = lbfgs.inner(r, e) + (b - ENGINE_WEIGHT) / ENGINE_WEIGHT_SD**2
        grad[2:] = block.tdot(r) + L2 * coef
        return value, grad

    width = X.width
    fits = warm is not None and len(warm.coef) == width
    start = np.concatenate([[0.0, ENGINE_WEIGHT], np.zeros(width)])
    spectrum = None
    if warm is not None and fits:
        start, spectrum = warm.theta, warm.spectrum
    solution = lbfgs.minimize(loss, start, MAX_ITERATIONS, spectrum, ftol=ftol)
    theta = solution.x
    large = block.words.nnz + len(block) * block.vectors.shape[1] >= LARGE_PROBLEM
    stale = spectrum is None or abs(len(block) - spectrum.learned_on) > RELEARN_GROWTH * spectrum.learned_on
    if learn and large and (spectrum is None or (stale and solution.evaluations > RELEARN_AFTER)):
        spectrum = lbfgs.spectrum(_hessian(block, e, w, theta), len(theta), LANCZOS_STEPS, flat=L2)
        spectrum.learned_on = len(block)
    return Model(float(theta[0]), float(theta[1]), theta[2:], X.words, spectrum if large else None)


def _hessian(
    block: Block, e: np.ndarray, w: np.ndarray, theta: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """The objective's Hessian at theta, as its product with a vector."""
    z = theta[0] + theta[1] * e + block.dot(theta[2:])
    p = 0.5 * (1.0 + np.tanh(0.5 * z))
    curvature = w * p * (1.0 - p)
    prior = np.concatenate([[INTERCEPT_L2, 1.0 / ENGINE_WEIGHT_SD**2], np.full(len(theta) - 2, L2)])

    def product(v: np.ndarray) -> np.ndarray:
        u = curvature * (v[0] + v[1] * e + block.dot(v[2:]))
        return np.asarray(np.concatenate([[u.sum(), lbfgs.inner(u, e)], block.tdot(u)]) + prior * v)

    return product


def average_precision(scores: np.ndarray, relevant: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Average precision of ranking by score (ties broken pessimistically)."""
    if not relevant.any():
        return 0.0
    order = np.lexsort((relevant, -scores))  # among equal scores, non-relevant first
    rel = relevant[order].astype(np.float64)
    w = np.ones_like(rel) if weight is None else weight[order]
    hits = np.cumsum(rel * w)
    seen = np.cumsum(w)
    return float(((hits / seen) * rel * w).sum() / (rel * w).sum())


@dataclass
class Gathered:
    """The papers a training read (decided, then presumed negatives) and their rows."""

    index: np.ndarray
    block: Block


def fit(
    X: Features,
    engine: np.ndarray,
    labels: Labels,
    ids: Sequence[str],
    previous: Fit | None = None,
    order: np.ndarray | None = None,
    known: Model | None = None,
) -> Fit:
    """Train the model on every decision. `previous`, the last fit, is where training starts;
    `order` is `stable_order(ids)` when already known; `known` is the model already trained on
    exactly these inputs (kept from an earlier command): it is used as it is."""
    return fit_gathered(X, engine, labels, ids, previous, order, known)[0]


def fit_gathered(
    X: Features,
    engine: np.ndarray,
    labels: Labels,
    ids: Sequence[str],
    previous: Fit | None = None,
    order: np.ndarray | None = None,
    known: Model | None = None,
) -> tuple[Fit, Gathered | None]:
    """`fit`, and the papers it trained on with their rows (None when it trained nothing): the
    estimate's fold models train on some of the same papers."""
    gathered = None
    result = Fit(
        positives=labels.positives,
        negatives=labels.negatives,
        decided=labels.decided,
        engine_stats=_stats(engine),
    )
    if labels.positives == 0:
        result.note = (
            f"{_decisions(labels.decided)}, none of them an accept: the engine ranks alone until "
            "you accept or star a paper (the model learns what you want from what you keep)"
            if labels.decided
            else "no decisions yet: the engine ranks alone; the queue learns from your first accept"
        )
        return result, None
    if known is not None:
        result.model = known
    else:
        presumed = background(labels, stable_order(ids) if order is None else order)
        decided = np.flatnonzero(labels.y >= 0)
        warm = previous.model if previous is not None else None
        index, y, w = problem(labels, decided, presumed)  # `train`, keeping what it gathered
        gathered = Gathered(index, X.block(index))
        engine_z = result.engine_z(engine)
        result.model = solve(X, gathered.block, engine_z[index], y, w, warm, learn=True, ftol=lbfgs.FTOL)
    kinds = f"{labels.positives} accepted or starred, {labels.decided - labels.positives} other"
    result.note = (
        f"learned from {_decisions(labels.decided)} ({kinds}): the engine's relevance is one of the "
        "model's inputs, and each decision moves the queue as far as its evidence carries"
    )
    return result, gathered


def scores(result: Fit, X: Features) -> np.ndarray | None:
    """What the decisions add to each paper's log-odds, or None without a model."""
    if result.model is None:
        return None
    return result.model.personal(X)


def blend(result: Fit, engine: np.ndarray, model: np.ndarray | None) -> np.ndarray:
    """The ranking score: the model's log-odds (the engine's weight times its z-score plus what
    the decisions add); before the first accept, the engine's z-score times its prior weight."""
    engine_z = result.engine_z(engine)
    if model is None or result.model is None:
        return ENGINE_WEIGHT * engine_z
    return np.asarray(
        result.model.intercept + result.model.engine_weight * engine_z + model, dtype=np.float64
    )
