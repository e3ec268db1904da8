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

A paper's fold is drawn from its id (`fold_of`), so one more decision leaves the other papers in
their folds, but for a paper or two moved to keep few decisions of a kind spread evenly: the
five fold models, kept between commands (`Folds`, with the queue's model in
`assistant.personal.state`), then start from where they were, moved as the queue's model moved,
and a fold whose problem is unchanged (mostly the one the new decision is held out of) is not
solved again. Like the queue's model, where a solve starts changes only how long it takes. The
map and its resamples are fitted in `assistant.personal.bootstrap`.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from assistant.personal.bootstrap import logistic, platt, resampled_totals
from assistant.personal.matrix import Features
from assistant.personal.model import Fit, Gathered, Labels, Model, background, problem, solve, stable_order

FOLDS = 5
MIN_RELEVANT = 5  # accepts before an estimate is made
MIN_OTHERS = 10  # rejections (or maybes) before an estimate is made
LEVEL = 0.9  # the interval's coverage
# The fold models' solves stop when a step lowers the objective by less than this share of it:
# their scores move the estimate by far less than a paper then (the queue's model solves to
# lbfgs.FTOL, its order depending on every digit).
FOLD_FTOL = 1e-8
FOLD_SALT = "fold\x1f"
FOLD_VERSION = 2  # how papers are put in folds and what a fold's key reads
# Decided papers of a kind (relevant, other) fewer than this are spread evenly over the folds.
EVEN_BELOW = 200


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


@dataclass
class Folds:
    """The estimate's fold models, kept to start the next estimate from."""

    thetas: np.ndarray  # folds x (2 + features): intercept, engine weight, coefficients (NaN: none)
    keys: list[bytes]  # what each fold model was trained on (b"": not to be used as it is)
    logits: np.ndarray  # folds x papers: each fold model's log-odds of every paper
    labels: np.ndarray  # the labels (y) of the papers they were trained on
    weights: np.ndarray  # and their weights
    anchor: np.ndarray  # the queue's model (its theta) when they were trained
    papers: bytes  # the papers, in order (`state.ids_digest`)
    assigned: np.ndarray  # each paper's draw of its fold (`assign`)


def assign(ids: Sequence[str]) -> np.ndarray:
    """Each paper's draw from its id: the fold it goes to once decided (the draw modulo FOLDS)
    unless its fold has more than its share (`fold_of`)."""
    return np.array([zlib.crc32((FOLD_SALT + pid).encode("utf-8")) for pid in ids], dtype=np.int64)


def fold_of(assigned: np.ndarray, labels: Labels) -> np.ndarray:
    """Each decided paper's fold (-1 for undecided papers): the fold its draw says. While the
    relevant papers, or the others, are fewer than EVEN_BELOW, they are spread over the folds
    as evenly as they go (no fold holds more than one more of them than another, as when they
    are dealt out in turn), the fewest moved from the fold drawn to even them out: a fold with
    one relevant paper fewer than another changes its model much. The folds depend only on the
    decided papers, and one more decision moves a paper or two of the others at most."""
    out = np.full(len(labels.y), -1, dtype=np.int64)
    decided = labels.y >= 0
    for group in (np.flatnonzero(decided & labels.relevant), np.flatnonzero(decided & ~labels.relevant)):
        drawn = assigned[group] % FOLDS
        out[group] = _evened(drawn, assigned[group] // FOLDS) if len(group) < EVEN_BELOW else drawn
    return out


def _evened(fold: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """These papers' folds (`fold`, drawn) evened out: the folds that hold most keep one paper
    more than the others where they do not divide evenly, and a fold holding more than its share
    gives its papers of the highest `rank` to the folds short of theirs, in order."""
    counts = np.bincount(fold, minlength=FOLDS)
    share = np.full(FOLDS, len(fold) // FOLDS)
    share[np.lexsort((np.arange(FOLDS), -counts))[: len(fold) % FOLDS]] += 1
    out = fold.copy()
    moving = []
    for k in np.flatnonzero(counts > share):
        own = np.flatnonzero(fold == k)
        moving.append(own[np.lexsort((own, -rank[own]))[: counts[k] - share[k]]])
    if moving:
        leaving = np.concatenate(moving)
        leaving = leaving[np.lexsort((leaving, rank[leaving]))]
        out[leaving] = np.repeat(np.arange(FOLDS), np.clip(share - counts, 0, None))
    return out


def fold_key(base: bytes, k: int, hidden: Labels, presumed: np.ndarray) -> bytes:
    """A digest of fold k's problem: `base` (everything the training reads but the labels),
    the labels it is trained on and its presumed negatives."""
    digest = hashlib.blake2b(base, digest_size=20)
    digest.update(f"{FOLD_VERSION}\x1f{k}\x1f".encode())
    for array in (hidden.y, hidden.weight, presumed):
        part = np.ascontiguousarray(array)
        digest.update(f"{part.dtype.str}{part.shape}".encode())
        digest.update(part.tobytes())
    return digest.digest()


def held_out_scores(
    X: Features,
    engine_z: np.ndarray,
    labels: Labels,
    ids: Sequence[str],
    result: Fit,
    pool: np.ndarray,
    order: np.ndarray | None = None,
    kept: Folds | None = None,
    base: bytes = b"",
    papers: bytes = b"",
    gathered: Gathered | None = None,
) -> tuple[np.ndarray, np.ndarray, Folds]:
    """Each decided paper's log-odds from a model trained without its fold (NaN elsewhere), the
    log-odds of the `pool` papers by each of those models (folds x pool: the map is learned from
    the fold models' scores, so it is applied to theirs), and the fold models to keep. `kept`,
    the fold models of an earlier estimate, is where they start; one whose key is this fold's
    (`base` names the rest of the problem; b"": none is) is used as it is. `gathered`, what the
    queue's model trained on, holds every paper a fold model trains on (each fold's presumed
    negatives are among the queue's): the folds read their rows from it."""
    if result.model is None:
        raise ValueError("no model to hold decisions out of")
    main = result.model
    n, width = len(labels.y), X.width + 2
    decided = np.flatnonzero(labels.y >= 0)
    usable = kept if kept is not None and kept.thetas.shape == (FOLDS, width) else None
    same = usable is not None and bool(papers) and usable.papers == papers and len(usable.labels) == n
    assigned = np.asarray(usable.assigned) if usable is not None and same else assign(ids)
    fold = fold_of(assigned, labels)
    order = stable_order(ids) if order is None else order
    changed: np.ndarray | None = None  # papers whose label changed since the kept fold models
    if usable is not None and same:
        changed = (np.asarray(usable.labels) != labels.y) | (np.asarray(usable.weights) != labels.weight)
    shift = main.theta - usable.anchor if usable is not None and len(usable.anchor) == width else None
    thetas = np.full((FOLDS, width), np.nan)
    keys = [b""] * FOLDS
    logits = np.full((FOLDS, n), np.nan)
    unsolved: list[tuple[int, Labels, np.ndarray, np.ndarray, Model]] = []
    for k in range(FOLDS):
        held = decided[fold[decided] == k]
        if not len(held):
            continue
        hidden = labels.without(held)
        rows = np.flatnonzero(hidden.y >= 0)
        if not (hidden.relevant[rows]).any():
            continue
        # Presumed negatives never include the held-out papers (undecided here, decided in truth).
        presumed = background(hidden, order)
        presumed = presumed[fold[presumed] < 0]
        keys[k] = fold_key(base, k, hidden, presumed) if base else b""
        before = usable.thetas[k] if usable is not None else None
        if usable is not None and before is not None and keys[k] and usable.keys[k] == keys[k]:
            thetas[k], logits[k] = before, usable.logits[k]  # the same problem
            continue
        start = main
        if before is not None and np.isfinite(before).all():
            # The kept fold model; moved as the queue's model moved when its decisions changed.
            theta0 = np.array(before, dtype=np.float64)
            if shift is not None and (changed is None or bool((changed & (fold != k)).any())):
                theta0 += shift
            start = Model(float(theta0[0]), float(theta0[1]), theta0[2:], X.words, main.spectrum)
        unsolved.append((k, hidden, rows, presumed, start))
    if unsolved:
        # The papers the folds train on, gathered once: each fold weighs the others' zero.
        needed = np.concatenate([decided, *(presumed for _, _, _, presumed, _ in unsolved)])
        place = np.full(n, -1, dtype=np.int64)
        if gathered is not None:
            place[gathered.index] = np.arange(len(gathered.index))
        if gathered is None or (place[needed] < 0).any():
            gathered = Gathered(np.unique(needed), X.block(np.unique(needed)))
            place[:] = -1
            place[gathered.index] = np.arange(len(gathered.index))
        block, e = gathered.block, engine_z[gathered.index]
        for k, hidden, rows, presumed, start in unsolved:
            index, y_k, w_k = problem(hidden, rows, presumed)
            y, w = np.zeros(len(gathered.index)), np.zeros(len(gathered.index))
            y[place[index]], w[place[index]] = y_k, w_k
            model = solve(X, block, e, y, w, start, ftol=FOLD_FTOL)
            thetas[k] = model.theta
            logits[k] = model.logit(X, engine_z)  # one pass over every paper: cheaper than gathering rows
    out = np.full(n, np.nan)
    pooled = []
    for k in range(FOLDS):
        if np.isnan(thetas[k, 0]):
            continue
        held = decided[fold[decided] == k]
        out[held] = logits[k, held]
        pooled.append(logits[k, pool])
    folds = Folds(
        thetas, keys, logits, labels.y.copy(), labels.weight.copy(), main.theta.copy(), papers, assigned
    )
    return out, np.array(pooled).reshape(len(pooled), len(pool)), folds


def estimate(
    X: Features,
    engine: np.ndarray,
    labels: Labels,
    ids: Sequence[str],
    result: Fit,
    candidates: np.ndarray | None = None,
    seed: int = 0,
    order: np.ndarray | None = None,
) -> Estimate | None:
    """Relevant papers expected among the undecided `candidates` (all undecided by default),
    or None with too few decisions of either kind or no model."""
    return estimate_folds(X, engine, labels, ids, result, candidates, seed, order)[0]


def estimate_folds(
    X: Features,
    engine: np.ndarray,
    labels: Labels,
    ids: Sequence[str],
    result: Fit,
    candidates: np.ndarray | None = None,
    seed: int = 0,
    order: np.ndarray | None = None,
    kept: Folds | None = None,
    base: bytes = b"",
    papers: bytes = b"",
    gathered: Gathered | None = None,
) -> tuple[Estimate | None, Folds | None]:
    """`estimate`, and the fold models to keep for the next one (`kept` when none were
    trained); `kept`, `base`, `papers` and `gathered` as `held_out_scores` takes them."""
    relevant = labels.relevant
    decided = labels.y >= 0
    if result.model is None or relevant.sum() < MIN_RELEVANT or (decided & ~relevant).sum() < MIN_OTHERS:
        return None, kept
    engine_z = result.engine_z(engine)
    pool = np.flatnonzero(~decided) if candidates is None else candidates
    held, score, folds = held_out_scores(
        X, engine_z, labels, ids, result, pool, order, kept, base, papers, gathered
    )
    known = np.flatnonzero(decided & np.isfinite(held))
    if relevant[known].sum() < MIN_RELEVANT or (~relevant[known]).sum() < MIN_OTHERS:
        return None, folds
    a, b = platt(held[known], relevant[known])
    chance = logistic(a + b * score).mean(axis=0)
    totals = resampled_totals(held[known], relevant[known], score, (a, b), seed)
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(np.clip(totals, 0, None), [tail, 1 - tail])
    left = Estimate(
        left=float(chance.sum()),
        low=int(np.floor(low)),
        high=int(np.ceil(high)),
        undecided=len(pool),
        found=int(relevant.sum()),
        pool=pool,
        chances=chance,
    )
    return left, folds
