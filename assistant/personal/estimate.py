"""How many relevant papers are left among the undecided ones: an estimate with an interval.

The model's log-odds order the queue but are not probabilities: it is trained with presumed
negatives and with its accepts weighted up. So the decided papers are scored by models trained
without them (k-fold), and a logistic map from those held-out scores to "accepted" (Platt
scaling) turns every undecided paper's score into a chance that the researcher would accept
it. Their sum is the estimate. The interval takes in both the luck of which papers turn out
relevant (each one a coin with its chance) and the uncertainty of the map itself (refitted on
bootstrap resamples of the decisions).

The decided papers came from the top of the queue, so the map is learned where scores are high
and carried down to the rest: early on the interval is wide, and it is an estimate, not a
guarantee. `assistant.personal.stopping` has the test that gives one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from assistant.personal.matrix import Features
from assistant.personal.model import Fit, Labels, background, stable_order, train

FOLDS = 5
MIN_RELEVANT = 5  # accepts before an estimate is made
MIN_OTHERS = 10  # rejections (or maybes) before an estimate is made
RESAMPLES = 200
LEVEL = 0.9  # the interval's coverage
# The map's slope has a prior: the model's log-odds are log-odds already (up to the weight its
# accepts were given), so with a few decisions the map stays near a shift of them.
SLOPE_PRIOR = 1.0
SLOPE_PRIOR_SD = 0.5
INTERCEPT_L2 = 1e-3


@dataclass(frozen=True)
class Estimate:
    """Relevant papers expected among the undecided ones, and a LEVEL interval."""

    left: float
    low: int
    high: int
    undecided: int
    found: int  # accepted or starred so far
    # The papers estimated for (indices) and each one's chance of an accept.
    pool: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chances: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def chance(self, papers: int) -> np.ndarray:
        """Every paper's chance of an accept (NaN for those not estimated), of `papers`."""
        out = np.full(papers, np.nan)
        out[self.pool] = self.chances
        return out

    @property
    def recall(self) -> float:
        """The share of all relevant papers found so far, by the estimate."""
        total = self.found + self.left
        return self.found / total if total else 1.0

    def line(self) -> str:
        return (
            f"about {self.left:.0f} relevant left among {self.undecided:,} undecided "
            f"({LEVEL:.0%} interval {self.low}-{self.high}; ~{self.recall:.0%} found)"
        )

    def short(self) -> str:
        return f"~{self.left:.0f} relevant left ({self.low}-{self.high})"


def platt(score: np.ndarray, relevant: np.ndarray, weight: np.ndarray | None = None) -> tuple[float, float]:
    """(a, b) of P(relevant) = logistic(a + b * score), the maximum a posteriori (the slope's
    prior at SLOPE_PRIOR, the intercept's wide), by Newton's method with a backtracking line
    search (without it a few separable decisions send it off)."""
    x = np.column_stack([np.ones(len(score)), score])
    y = relevant.astype(np.float64)
    w = np.ones(len(score)) if weight is None else weight
    prior = np.array([0.0, SLOPE_PRIOR])
    strength = np.array([INTERCEPT_L2, 1.0 / SLOPE_PRIOR_SD**2])

    def loss(theta: np.ndarray) -> float:
        z = x @ theta
        return float(np.sum(w * (np.logaddexp(0.0, z) - y * z)) + 0.5 * strength @ (theta - prior) ** 2)

    theta = prior.copy()
    current = loss(theta)
    for _ in range(100):
        p = _logistic(x @ theta)
        grad = x.T @ (w * (p - y)) + strength * (theta - prior)
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(strength)
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while size > 1e-6:
            trial = theta - size * step
            value = loss(trial)
            if value <= current:
                break
            size /= 2
        else:
            break
        theta, current = trial, value
        if np.abs(size * step).max() < 1e-8:
            break
    return float(theta[0]), float(theta[1])


def held_out_scores(
    X: Features,
    engine_z: np.ndarray,
    labels: Labels,
    ids: list[str],
    result: Fit,
    pool: np.ndarray,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each decided paper's log-odds from a model trained without its fold (NaN elsewhere), and
    the log-odds of the `pool` papers by each of those models (folds x pool): the map is
    learned from the fold models' scores, so it is applied to theirs."""
    decided = np.flatnonzero(labels.y >= 0)
    relevant = labels.relevant[decided]
    fold_of = np.full(len(labels.y), -1)
    for group in (decided[relevant], decided[~relevant]):
        fold_of[group] = np.arange(len(group)) % FOLDS
    order = stable_order(ids) if order is None else order
    out = np.full(len(labels.y), np.nan)
    pooled = []
    for k in range(FOLDS):
        held = decided[fold_of[decided] == k]
        if not len(held):
            continue
        hidden = labels.without(held)
        rows = np.flatnonzero(hidden.y >= 0)
        if not (hidden.relevant[rows]).any():
            continue
        # Presumed negatives never include the held-out papers (undecided here, decided in truth).
        presumed = background(hidden, order)
        presumed = presumed[fold_of[presumed] < 0]
        model = train(X, engine_z, hidden, rows, presumed, result.model)
        logit = model.logit(X, engine_z)  # one pass over every paper: cheaper than gathering rows
        out[held] = logit[held]
        pooled.append(logit[pool])
    return out, np.array(pooled).reshape(len(pooled), len(pool))


def estimate(
    X: Features,
    engine: np.ndarray,
    labels: Labels,
    ids: list[str],
    result: Fit,
    candidates: np.ndarray | None = None,
    seed: int = 0,
    order: np.ndarray | None = None,
) -> Estimate | None:
    """Relevant papers expected among the undecided `candidates` (all undecided by default),
    or None with too few decisions of either kind or no model."""
    relevant = labels.relevant
    decided = labels.y >= 0
    if result.model is None or relevant.sum() < MIN_RELEVANT or (decided & ~relevant).sum() < MIN_OTHERS:
        return None
    engine_z = result.engine_z(engine)
    pool = np.flatnonzero(~decided) if candidates is None else candidates
    held, score = held_out_scores(X, engine_z, labels, ids, result, pool, order)
    known = np.flatnonzero(decided & np.isfinite(held))
    if relevant[known].sum() < MIN_RELEVANT or (~relevant[known]).sum() < MIN_OTHERS:
        return None
    a, b = platt(held[known], relevant[known])
    chance = _logistic(a + b * score).mean(axis=0)
    rng = np.random.default_rng(seed)
    totals = np.empty(RESAMPLES)
    for i in range(RESAMPLES):
        pick = known[rng.integers(0, len(known), len(known))]
        if not relevant[pick].any() or relevant[pick].all():
            pick = known
        ra, rb = platt(held[pick], relevant[pick])
        # One fold's model at a time: how much the model itself could differ is part of it.
        p = _logistic(ra + rb * score[rng.integers(0, len(score))])
        # The papers' own luck on top of the map's: a normal approximation of their sum.
        totals[i] = rng.normal(p.sum(), np.sqrt((p * (1 - p)).sum()))
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(np.clip(totals, 0, None), [tail, 1 - tail])
    return Estimate(
        left=float(chance.sum()),
        low=int(np.floor(low)),
        high=int(np.ceil(high)),
        undecided=len(pool),
        found=int(relevant.sum()),
        pool=pool,
        chances=chance,
    )


def _logistic(z: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)
