"""Limited-memory BFGS in numpy: the personal model's solver (scipy's takes a second to import).

The model's objective is smooth and strongly convex (every weight has a Gaussian prior), so a
backtracking line search that asks for sufficient decrease is enough: the curvature of every
step is positive and each pair of step and gradient change can be kept.

Many papers alike (a subject the researcher reads a lot of) make the objective steep along a
few dozen directions and flat along the rest, which costs L-BFGS a hundred steps from any start.
A `Spectrum`, the steep directions and their curvatures (from a Lanczos run at an optimum), is
its starting inverse Hessian: the next decision's optimum, or the one after a hundred more, is
then a handful of steps away.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

MEMORY = 10
# Stop when no gradient component exceeds GTOL (scipy's L-BFGS-B default), or when a step
# lowers the objective by less than FTOL of its value (scipy's is 2.2e-9: this converges tighter).
GTOL = 1e-5
FTOL = 1e-10
ARMIJO = 1e-4
MAX_BACKTRACKS = 30
# The spectrum keeps the directions whose curvature is this many times the flat one's.
STEEP = 2.0

Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]


def inner(a: np.ndarray, b: np.ndarray) -> float:
    """a @ b without BLAS (whose threads, for a product this size, only spin on a busy machine)."""
    return float(np.einsum("i,i->", a, b))


@dataclass
class Spectrum:
    """The Hessian's steep directions (orthonormal columns), their curvatures and the curvature
    assumed elsewhere (the prior's)."""

    directions: np.ndarray  # n x k
    curvatures: np.ndarray  # k
    flat: float = 1.0
    learned_on: int = 0  # the size of the problem it was learned on (rows of data)

    def __len__(self) -> int:
        return int(self.curvatures.shape[0])

    @property
    def width(self) -> int:
        return int(self.directions.shape[0])

    def inverse(self, g: np.ndarray) -> np.ndarray:
        """The inverse of the Hessian this spectrum describes, applied to g."""
        u = self.directions
        c = np.einsum("ij,i->j", u, g) * (1.0 / self.curvatures - 1.0 / self.flat)
        return np.asarray(g / self.flat + np.einsum("ij,j->i", u, c))


@dataclass
class Curvature:
    """The last steps (s) and gradient changes (y) of a solve, newest last."""

    steps: list[np.ndarray] = field(default_factory=list)
    changes: list[np.ndarray] = field(default_factory=list)
    products: list[float] = field(default_factory=list)  # s @ y

    def __len__(self) -> int:
        return len(self.steps)

    def add(self, s: np.ndarray, y: np.ndarray) -> None:
        sy = inner(s, y)
        if sy <= 1e-10 * inner(y, y):  # no curvature to learn from (cannot happen when convex)
            return
        self.steps.append(s)
        self.changes.append(y)
        self.products.append(sy)
        if len(self.steps) > MEMORY:
            del self.steps[0], self.changes[0], self.products[0]

    def direction(self, g: np.ndarray, start: Spectrum | None) -> np.ndarray:
        """-H g, H the inverse Hessian these pairs make from `start` (the two-loop recursion)."""
        q = g.copy()
        alphas = []
        newest_first = zip(reversed(self.steps), reversed(self.changes), reversed(self.products), strict=True)
        for s, y, sy in newest_first:
            alpha = inner(s, q) / sy
            alphas.append(alpha)
            q -= alpha * y
        if start is not None:
            q = start.inverse(q)
        elif self.steps:
            q *= self.products[-1] / inner(self.changes[-1], self.changes[-1])
        for s, y, sy, alpha in zip(self.steps, self.changes, self.products, reversed(alphas), strict=True):
            q += (alpha - inner(y, q) / sy) * s
        return -q


@dataclass
class Solution:
    x: np.ndarray
    value: float
    gradient: np.ndarray
    iterations: int
    evaluations: int
    converged: bool


def minimize(
    fun: Objective,
    x0: np.ndarray,
    max_iterations: int = 300,
    spectrum: Spectrum | None = None,
    gtol: float = GTOL,
    ftol: float = FTOL,
) -> Solution:
    """The minimum of `fun` (value and gradient) from x0; `spectrum`, of a nearby problem's
    Hessian, is the starting inverse Hessian."""
    x = np.array(x0, dtype=np.float64)
    start = spectrum if spectrum is not None and spectrum.width == len(x) else None
    pairs = Curvature()
    f, g = fun(x)
    evaluations, iterations, converged = 1, 0, False
    while iterations < max_iterations:
        if float(np.abs(g).max(initial=0.0)) <= gtol:
            converged = True
            break
        d = pairs.direction(g, start)
        slope = inner(g, d)
        if slope >= 0:  # not a descent direction (rounding): start again from the gradient
            pairs, start = Curvature(), None
            d = -g
            slope = inner(g, d)
        # Without curvature known yet, the first step is of unit length at most.
        step = 1.0 if len(pairs) or start is not None else min(1.0, 1.0 / np.sqrt(-slope))
        iterations += 1
        for _ in range(MAX_BACKTRACKS):
            x_new = x + step * d
            f_new, g_new = fun(x_new)
            evaluations += 1
            if f_new <= f + ARMIJO * step * slope:
                break
            # The minimum of the parabola through f, the slope and f_new, kept within bounds.
            shrink = -slope * step / (2.0 * (f_new - f - slope * step))
            step *= float(np.clip(shrink, 0.1, 0.5))
        else:
            break  # no decrease left at floating point: as close as it gets
        pairs.add(x_new - x, g_new - g)
        small = f - f_new <= ftol * max(abs(f), abs(f_new), 1.0)
        x, f, g = x_new, f_new, g_new
        if small:
            converged = True
            break
    return Solution(x, f, g, iterations, evaluations, converged)


def spectrum(
    hess_dot: Callable[[np.ndarray], np.ndarray], n: int, steps: int, flat: float = 1.0, seed: int = 0
) -> Spectrum:
    """The steep directions of a Hessian (given by its products), from `steps` of Lanczos with
    full reorthogonalisation: the Ritz pairs that converged and are STEEP times the flat
    curvature or more."""
    steps = min(steps, n)
    basis = np.zeros((steps + 1, n))
    alpha, beta = np.zeros(steps), np.zeros(steps)
    q = np.random.default_rng(seed).standard_normal(n)
    basis[0] = q / np.linalg.norm(q)
    done = steps
    for j in range(steps):
        w = hess_dot(basis[j])
        alpha[j] = inner(basis[j], w)
        before = np.linalg.norm(w)
        w -= basis[: j + 1].T @ (basis[: j + 1] @ w)
        if np.linalg.norm(w) < 0.7 * before:  # cancellation: once more ("twice is enough")
            w -= basis[: j + 1].T @ (basis[: j + 1] @ w)
        beta[j] = np.linalg.norm(w)
        if beta[j] <= 1e-10 * max(abs(alpha[j]), 1.0):  # an invariant subspace: nothing more to find
            done = j + 1
            break
        basis[j + 1] = w / beta[j]
    alpha, beta = alpha[:done], beta[:done]
    tridiagonal = np.diag(alpha) + np.diag(beta[:-1], 1) + np.diag(beta[:-1], -1)
    values, vectors = np.linalg.eigh(tridiagonal)
    # A Ritz pair's residual is |beta_last * its last component|.
    residual = np.abs(beta[-1] * vectors[-1, :])
    keep = (values > STEEP * flat) & (residual <= 0.1 * values)
    directions = basis[:done].T @ vectors[:, keep]
    # Elsewhere the curvature is between the prior's and STEEP times it (or a direction the run
    # did not resolve): taken as the upper end, a step there is never too long.
    return Spectrum(np.ascontiguousarray(directions), values[keep].copy(), STEEP * flat)
