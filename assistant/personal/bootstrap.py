"""The map from a model's held-out scores to the chance of an accept, and its uncertainty.

`platt` fits P(accepted) = logistic(a + b * score) to the decided papers' held-out scores, the
slope held near 1 by a prior. `resampled_totals` refits it on RESAMPLES bootstrap resamples of
the decisions and applies each refit to one fold model's scores of the undecided papers, with
their own luck on top: the spread of those totals is the estimate's interval
(`assistant.personal.estimate`). The resamples are drawn as drawing them one at a time would,
and their maps are fitted all at once (`platt_many`); with many decisions, scores are summed by
narrow bins (`Points`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RESAMPLES = 200
# The map's slope has a prior: the model's log-odds are log-odds already (up to the weight its
# accepts were given), so with a few decisions the map stays near a shift of them.
SLOPE_PRIOR = 1.0
SLOPE_PRIOR_SD = 0.5
INTERCEPT_L2 = 1e-3
# A resample's map takes a Newton step unchecked once the step's decrement is below this.
DECREMENT = 1e-6
# Scores are summed by bins this wide (`Points`) when there are at least four times
# POINTS_AT_LEAST of them and the bins make the sums at least twice as short.
POINT_WIDTH = 0.1
POINTS_AT_LEAST = 500
DRAWN_AT_ONCE = 16  # resamples drawn at a time


def platt(score: np.ndarray, relevant: np.ndarray, weight: np.ndarray | None = None) -> tuple[float, float]:
    """(a, b) of P(relevant) = logistic(a + b * score), the maximum a posteriori (the slope's
    prior at SLOPE_PRIOR, the intercept's wide), by Newton's method with a backtracking line
    search (without it a few separable decisions send it off). The sums are einsum's, not
    BLAS's: its threads would spin on, and be counted, long after these small products."""
    x = np.column_stack([np.ones(len(score)), score])
    y = relevant.astype(np.float64)
    w = np.ones(len(score)) if weight is None else weight
    prior = np.array([0.0, SLOPE_PRIOR])
    strength = np.array([INTERCEPT_L2, 1.0 / SLOPE_PRIOR_SD**2])

    def loss(theta: np.ndarray) -> float:
        z = np.einsum("ij,j->i", x, theta)
        return float(np.sum(w * (_softplus(z) - y * z)) + 0.5 * np.sum(strength * (theta - prior) ** 2))

    theta = prior.copy()
    current = loss(theta)
    for _ in range(100):
        p = logistic(np.einsum("ij,j->i", x, theta))
        grad = np.einsum("ij,i->j", x, w * (p - y)) + strength * (theta - prior)
        hess = np.einsum("ij,i,ik->jk", x, w * p * (1 - p), x) + np.diag(strength)
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


def resampled_totals(
    held: np.ndarray, relevant: np.ndarray, score: np.ndarray, fitted: tuple[float, float], seed: int = 0
) -> np.ndarray:
    """RESAMPLES totals of relevant papers left, each from the map refitted on a bootstrap
    resample of the decisions (`held` scores, `relevant` or not) applied to one fold model's
    scores of the pool, with the papers' own luck on top (a normal approximation of the sum of
    their coins). The resamples are drawn as one at a time would draw them, and their maps are
    fitted together (`platt_many`) from the map of all the decisions, `fitted`. With many
    decisions, each resample's decisions and each fold's pool are summed as `Points`."""
    n = len(held)
    rng = np.random.default_rng(seed)
    y = relevant.astype(np.float64)
    points = Points.of(held, relevant)
    size = n if points is None else len(points.centre)
    sums = np.zeros((3, RESAMPLES, size))  # per resample: picks (and their offsets) per score or bin
    model_of = np.empty(RESAMPLES, dtype=np.int64)
    noise = np.empty(RESAMPLES)
    # Drawn a few resamples at a time: all of them at once would take memory that costs more to
    # map than the sums cost to make.
    picks = np.empty((DRAWN_AT_ONCE, n), dtype=np.int64)
    for first in range(0, RESAMPLES, DRAWN_AT_ONCE):
        rows = np.arange(first, min(first + DRAWN_AT_ONCE, RESAMPLES))
        for j, i in enumerate(rows):
            picks[j] = rng.integers(0, n, n)
            # One fold's model at a time: how much the model itself could differ is part of it.
            model_of[i] = rng.integers(0, len(score))
            noise[i] = rng.standard_normal()
        drawn = picks[: len(rows)]
        if points is None:
            flat = (np.arange(len(rows), dtype=np.int64)[:, None] * n + drawn).ravel()
            sums[0, rows] = np.bincount(flat, minlength=len(rows) * n).reshape(len(rows), n)
        else:
            sums[:, rows] = points.sums(drawn)
    if points is None:
        weights = sums[0]
        hits = np.einsum("ij,j->i", weights, y)
        weights[(hits == 0) | (hits == n)] = 1.0  # a resample of one kind only: all the decisions
        a, b = platt_many(held, y, weights, fitted)
    else:
        at, weights = points.resampled(sums, n)
        a, b = platt_many(at, points.y, weights, fitted)
    totals = np.empty(RESAMPLES)
    for k in np.unique(model_of):
        mine = np.flatnonzero(model_of == k)
        pooled = Points.of(score[k], np.zeros(len(score[k]), dtype=bool))
        at_k, w_k = (score[k], np.ones(len(score[k]))) if pooled is None else pooled.whole()
        p = logistic(a[mine, None] + b[mine, None] * at_k)
        # The papers' own luck on top of the map's: a normal approximation of their sum.
        left = np.einsum("ij,j->i", p, w_k)
        spread = np.einsum("ij,j->i", p * (1 - p), w_k)
        totals[mine] = left + np.sqrt(spread) * noise[mine]
    return totals


@dataclass
class Points:
    """Scores summed by narrow bins (POINT_WIDTH of log-odds, one kind of decision each): a sum
    of a smooth function over a bin's scores is its weight times the function's mean at two
    points that have the bin's mean and variance, which is exact but for terms of the fourth
    power of the bin's width (on the screening sets and the bench's stores, the resampled totals
    move by less than 1e-3 of a paper)."""

    bin_of: np.ndarray  # each score's bin
    offset: np.ndarray  # each score's distance from its bin's centre
    centre: np.ndarray  # per bin
    y: np.ndarray  # per two points of a bin (the low ones, then the high ones): relevant or not

    @classmethod
    def of(cls, score: np.ndarray, relevant: np.ndarray) -> Points | None:
        """The bins of these scores, or None when they would not make the sums much shorter."""
        if len(score) < 4 * POINTS_AT_LEAST:
            return None
        cell = np.floor(score / POINT_WIDTH).astype(np.int64)
        lowest = int(cell.min())
        span = int(cell.max()) - lowest + 1
        keys, bin_of = np.unique(relevant * span + (cell - lowest), return_inverse=True)
        if 2 * len(keys) > len(score) / 2:
            return None
        kind = keys // span
        centre = (keys - kind * span + lowest + 0.5) * POINT_WIDTH
        bin_of = bin_of.reshape(-1)
        y = np.concatenate([kind, kind]).astype(np.float64)
        return cls(bin_of, score - centre[bin_of], centre, y)

    def _points(
        self, weight: np.ndarray, first: np.ndarray, second: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The two points of each bin (its weight, and its sums of offsets and squared offsets),
        along the last axis, and their weights."""
        filled = weight > 0
        safe = np.where(filled, weight, 1.0)
        mean = first / safe
        spread = np.sqrt(np.clip(second / safe - mean * mean, 0.0, None))
        mean = self.centre + np.where(filled, mean, 0.0)
        half = weight / 2
        return np.concatenate([mean - spread, mean + spread], axis=-1), np.concatenate([half, half], axis=-1)

    def whole(self) -> tuple[np.ndarray, np.ndarray]:
        """Every score once: the points and their weights."""
        bins = len(self.centre)
        weight = np.bincount(self.bin_of, minlength=bins).astype(np.float64)
        first = np.bincount(self.bin_of, weights=self.offset, minlength=bins)
        second = np.bincount(self.bin_of, weights=self.offset**2, minlength=bins)
        return self._points(weight, first, second)

    def sums(self, picks: np.ndarray) -> np.ndarray:
        """Per row of `picks` (a resample), how many of the scores picked fall in each bin, and
        the sums of their offsets and squared offsets (3 x rows x bins)."""
        bins, rows = len(self.centre), len(picks)
        flat = (np.arange(rows, dtype=np.int64)[:, None] * bins + self.bin_of[picks]).ravel()
        offsets = self.offset[picks].ravel()
        return np.stack(
            [
                np.bincount(flat, minlength=rows * bins),
                np.bincount(flat, weights=offsets, minlength=rows * bins),
                np.bincount(flat, weights=offsets * offsets, minlength=rows * bins),
            ]
        ).reshape(3, rows, bins)

    def resampled(self, sums: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The points and weights of each resample from its `sums` of n picks; a resample of
        one kind of decision only has every score once instead."""
        weight, first, second = sums[0], sums[1], sums[2]
        bins = len(self.centre)
        hits = np.einsum("ij,j->i", weight, self.y[:bins])
        whole = (hits == 0) | (hits == n)
        if whole.any():
            weight[whole] = np.bincount(self.bin_of, minlength=bins)
            first[whole] = np.bincount(self.bin_of, weights=self.offset, minlength=bins)
            second[whole] = np.bincount(self.bin_of, weights=self.offset**2, minlength=bins)
        return self._points(weight, first, second)


def platt_many(
    score: np.ndarray, y: np.ndarray, counts: np.ndarray, start: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """`platt` for many weightings of the decisions at once (counts: resamples x decisions; the
    decisions' scores shared, or one row per resample, `y` 1 for relevant), each solved from
    `start` by Newton's method with its own backtracking line search. Once a step is short
    (its Newton decrement below DECREMENT), the full step is taken unchecked: the objective is
    then as good as quadratic there, and checking is most of the cost."""
    shared = score.ndim == 1
    prior = np.array([0.0, SLOPE_PRIOR])
    strength = np.array([INTERCEPT_L2, 1.0 / SLOPE_PRIOR_SD**2])
    theta = np.tile(np.asarray(start, dtype=np.float64), (len(counts), 1))

    def at(rows: np.ndarray) -> np.ndarray:
        return score if shared else score[rows]

    def loss(th: np.ndarray, rows: np.ndarray) -> np.ndarray:
        z = th[:, :1] + th[:, 1:] * at(rows)
        return np.asarray(
            np.einsum("ij,ij->i", counts[rows], _softplus(z) - y * z)
            + 0.5 * np.einsum("ij,j->i", (th - prior) ** 2, strength)
        )

    active = np.arange(len(counts))
    current = np.full(len(counts), np.nan)  # the objective where it was last checked
    for _ in range(100):
        if not len(active):
            break
        th, weights, s = theta[active], counts[active], at(active)
        p = logistic(th[:, :1] + th[:, 1:] * s)
        r = weights * (p - y)
        h = weights * (p * (1 - p))
        sum_ = "ij->i"
        by_score = "ij,j->i" if shared else "ij,ij->i"
        g0 = np.einsum(sum_, r) + strength[0] * (th[:, 0] - prior[0])
        g1 = np.einsum(by_score, r, s) + strength[1] * (th[:, 1] - prior[1])
        h00 = np.einsum(sum_, h) + strength[0]
        h01 = np.einsum(by_score, h, s)
        h11 = np.einsum(by_score, h * s, s) + strength[1]
        det = h00 * h11 - h01 * h01
        step = np.column_stack([(h11 * g0 - h01 * g1) / det, (h00 * g1 - h01 * g0) / det])
        size = np.ones(len(active))
        accepted = np.ones(len(active), dtype=bool)
        trying = np.flatnonzero(g0 * step[:, 0] + g1 * step[:, 1] > DECREMENT)
        if len(trying):
            unknown = active[trying][np.isnan(current[active[trying]])]
            current[unknown] = loss(theta[unknown], unknown)
            accepted[trying] = False
        values = current[active].copy()
        while len(trying):
            value = loss(th[trying] - size[trying, None] * step[trying], active[trying])
            ok = value <= current[active[trying]]
            accepted[trying[ok]], values[trying[ok]] = True, value[ok]
            rest = trying[~ok]
            size[rest] /= 2
            trying = rest[size[rest] > 1e-6]
        moved = active[accepted]
        theta[moved] = th[accepted] - size[accepted, None] * step[accepted]
        current[moved] = values[accepted]
        small = np.abs(size[:, None] * step).max(axis=1) < 1e-8
        active = active[accepted & ~small]
    return theta[:, 0].copy(), theta[:, 1].copy()


def _softplus(z: np.ndarray) -> np.ndarray:
    """log(1 + exp(z)), without overflow (numpy's logaddexp takes ten times as long)."""
    return np.asarray(np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z))), dtype=np.float64)


def logistic(z: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)
