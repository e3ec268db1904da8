"""The personal model: what the researcher's own decisions say about the papers still undecided.

Every decision is a label: accepted and starred papers are positives (a star counts double), a
maybe is a weak positive, a rejection a negative. A logistic regression over each paper's
embedding and the engine's topic scores learns them, contrasted with a sample of undecided
papers as presumed negatives (most papers in a store are not what a researcher wants, and the
first decisions are nearly all accepts: the top of the queue). The queue's order blends the
engine's relevance with the model's score; how much the model counts is chosen by
cross-validation on the decisions themselves. With too few labels, with accepts alone, or when
the model ranks held-out decisions worse than the engine, it counts nothing.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from assistant.models import Status
from assistant.personal.features import vectorizer

# Label weights: a star counts more than an accept, a maybe is a weak positive.
STAR_WEIGHT = 2.0
MAYBE_WEIGHT = 0.3
MIN_POSITIVES = 3  # accepted or starred papers before the model takes part
# Decisions before the model takes part at all: below 8 the cross-validation has two folds of
# a few papers each and cannot tell a lucky split from a signal (on held-out set I the model
# chose weight 4 from 5 decisions on four runs and halved the remaining queue's average
# precision; stop 27, see bench/README.md).
MIN_DECISIONS = 8
# Undecided papers used as presumed negatives: a few per label, within bounds.
BACKGROUND_PER_LABEL = 4
BACKGROUND_MIN = 50
BACKGROUND_MAX = 2000
BACKGROUND_WEIGHT = 0.25
REJECTED_SHARE = 0.5  # Rocchio's weight of the rejected papers' centroid
FOLDS = 5
# The weights tried for the model in the blend (engine z-score + weight * model z-score).
WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
# A weight above zero (other than PRIOR_WEIGHT from PRIOR_FROM decisions, below) must beat the
# engine alone by this much average precision in cross-validation; among weights that tie, the
# largest is taken.
MARGIN = 0.005
# ... and beat it in this share of bootstrap resamples of the decisions: with a few decisions
# a mean gain is often luck (a single rejection ranked well), and a blend chosen on luck
# reorders the queue for the worse. Past BOOTSTRAP_BELOW decisions the mean is trusted.
CONFIDENCE = 0.8
BOOTSTRAP = 100
BOOTSTRAP_BELOW = 500
# From this many decisions, with both accepts and papers passed over among them, the model
# takes part at PRIOR_WEIGHT unless it ranks held-out decisions worse than the engine alone:
# the burden of proof is on the engine, whose held-out decisions are its own top of the queue
# and so favour it (chosen on sets A-G, stop 26; see bench/README.md).
PRIOR_FROM = 10
PRIOR_WEIGHT = 0.5  # one of WEIGHTS: the cross-validation scores it
# The model promotes freely but demotes by at most its weight (in z-scores): a paper the
# engine rates highly is not buried by a model that has not seen its kind yet.
MODEL_FLOOR = -1.0
RAW, CALIBRATED = "engine", "calibrated"
CALIBRATION_FROM = 10  # decisions before the engine's scores are calibrated
C = 1.0
LIBLINEAR_BELOW = 2000
# The embedding counts more than any one word: with a few decisions, the words of the accepted
# papers are too specific (chosen on sets A-F, stop 25; see bench/README.md).
EMBEDDING_SCALE = 2.0
TOPIC_SCALE = 0.25
# With this many decisions, the weight is chosen again only when they have grown by a tenth.
REUSE_FROM = 200
REUSE_GROWTH = 1.1


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
        star = np.asarray(starred, dtype=bool)
        y = np.full(len(statuses), -1, dtype=np.int8)
        w = np.zeros(len(statuses), dtype=np.float64)
        y[status == 1], w[status == 1] = 1, 1.0  # accepted
        y[status == 3], w[status == 3] = 1, MAYBE_WEIGHT
        starred_kept = star & (status != 2)
        y[starred_kept], w[starred_kept] = 1, STAR_WEIGHT
        y[status == 2], w[status == 2] = 0, 1.0  # rejected, starred or not
        seed = np.zeros(len(statuses), dtype=bool) if seeded is None else np.asarray(seeded, dtype=bool)
        return cls(y, w, seed & (y >= 0))

    @property
    def positives(self) -> int:
        """Accepted or starred papers (maybes are too weak to count here)."""
        return int(((self.y == 1) & (self.weight >= 1.0)).sum())

    @property
    def negatives(self) -> int:
        return int((self.y == 0).sum())

    @property
    def decided(self) -> int:
        return int((self.y >= 0).sum())


@dataclass
class Fit:
    """A trained personal model and how much it counts in the blend."""

    weight: float = 0.0
    note: str = ""
    positives: int = 0
    negatives: int = 0
    decided: int = 0
    # (engine side, model weight) -> cross-validated average precision
    cv: dict[tuple[str, float], float] = field(default_factory=dict)
    # (engine side, model weight) -> share of bootstrap resamples in which it beats the engine
    confidence: dict[tuple[str, float], float] = field(default_factory=dict)
    cv_decided: int = 0  # the decisions the weight was chosen on
    model: Model | None = None
    # z-scoring of the engine's relevance over the store.
    engine_stats: tuple[float, float] = (0.0, 1.0)
    calibration: LogisticRegression | None = None  # engine scores -> chance of an accept
    calibration_stats: tuple[float, float] = (0.0, 1.0)
    calibrated: bool = False  # whether the blend uses the calibrated engine

    def accept_chance(self, engine: np.ndarray, topics: np.ndarray) -> np.ndarray | None:
        """The calibrated chance that the researcher accepts papers with these engine scores."""
        if self.calibration is None:
            return None
        return np.asarray(self.calibration.predict_proba(engine_features(engine, topics))[:, 1])

    def engine_side(self, engine: np.ndarray, topics: np.ndarray | None) -> np.ndarray:
        """The engine's part of the blend: its relevance (or its calibration), z-scored."""
        if self.calibrated and self.calibration is not None and topics is not None:
            logit = self.calibration.decision_function(engine_features(engine, topics))
            return _z(np.asarray(logit, dtype=np.float64), self.calibration_stats)
        return _z(engine, self.engine_stats)

    @property
    def active(self) -> bool:
        return self.model is not None and self.weight > 0

    @property
    def personal(self) -> bool:
        """Whether the decisions change the order at all (a model weight or a calibration)."""
        return self.active or self.calibrated

    def choice(self) -> Fit:
        """What a later fit needs of this one (see `fit`'s `previous`): the blend in use and
        the cross-validation it was chosen on, without the trained models."""
        return Fit(
            weight=self.weight,
            calibrated=self.calibrated,
            decided=self.decided,
            cv=dict(self.cv),
            confidence=dict(self.confidence),
            cv_decided=self.cv_decided,
        )

    def short(self) -> str:
        """A few words for the review UI's header."""
        if self.personal:
            best = (CALIBRATED if self.calibrated else RAW, self.weight)
            ap, engine = self.cv[best], self.cv[(RAW, 0.0)]
            if f"{ap:.2f}" == f"{engine:.2f}":  # the usual weight, counting at a tie
                return f"learned from {self.decided}: AP {ap:.2f}, level with the engine"
            return f"learned from {self.decided}: AP {ap:.2f} vs engine {engine:.2f}"
        if self.model is None and self.positives < MIN_POSITIVES:
            return f"learns after {MIN_POSITIVES} accepts"
        if self.model is None:
            return f"learns after {MIN_DECISIONS} decisions"
        if not self.cv:
            return "learning: needs a reject or maybe"
        return f"engine alone ({self.cv_decided} decisions)"


def word_features(documents: Sequence[str]) -> sparse.csr_matrix:
    """TF-IDF of word 1-2 grams over these documents (rows L2-normalised)."""
    return vectorizer().fit_transform(documents).tocsr()


@dataclass(frozen=True)
class Features:
    """What the model sees of each paper: the TF-IDF of its words (the first `words` columns),
    its embedding, scaled up so that meaning leads over single words, and the engine's topic
    scores (0..1), scaled down."""

    matrix: sparse.csr_matrix
    words: int

    def __len__(self) -> int:
        return int(self.matrix.shape[0])


def features(words: sparse.csr_matrix, vectors: np.ndarray, topics: np.ndarray) -> Features:
    matrix = sparse.hstack(
        [
            words,
            sparse.csr_matrix(EMBEDDING_SCALE * vectors.astype(np.float64)),
            sparse.csr_matrix(TOPIC_SCALE * topics / 10.0),
        ],
        format="csr",
    )
    return Features(matrix, int(words.shape[1]))


@dataclass
class Model:
    """Two linear scorers over the same papers, z-scored and added: a logistic regression of
    the decisions (against the background) and the Rocchio direction of relevance feedback (the
    centroid of the accepted papers' words less half that of the rejected ones). The centroid
    generalises from a handful of accepts; the regression sharpens as decisions add up."""

    classifier: LogisticRegression
    centroid: np.ndarray
    words: int
    stats: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 1.0), (0.0, 1.0))
    _whole: tuple[int, np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def parts(self, X: Features, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        m = X.matrix if rows is None else X.matrix[rows]
        return (
            np.asarray(self.classifier.decision_function(m), dtype=np.float64),
            np.asarray(m[:, : self.words] @ self.centroid, dtype=np.float64).ravel(),
        )

    def calibrate(self, X: Features, reference: np.ndarray | None = None) -> None:
        """z-score both parts over these papers (all of them by default)."""
        regression, rocchio = self.parts(X, reference)
        self.stats = (_stats(regression), _stats(rocchio))
        self._whole = (id(X), regression, rocchio) if reference is None else None

    def score(self, X: Features, rows: np.ndarray | None = None) -> np.ndarray:
        if rows is None and self._whole is not None and self._whole[0] == id(X):
            regression, rocchio = self._whole[1], self._whole[2]
        else:
            regression, rocchio = self.parts(X, rows)
        return np.asarray(_z(regression, self.stats[0]) + _z(rocchio, self.stats[1]), dtype=np.float64)

    def word_weights(self) -> np.ndarray:
        """How much each word column (TF-IDF weight 1) adds to the model's score: the score is
        linear in the words, the regression's and the centroid's parts each z-scored."""
        regression = np.asarray(self.classifier.coef_, dtype=np.float64).ravel()[: self.words]
        return np.asarray(regression / self.stats[0][1] + self.centroid / self.stats[1][1], dtype=np.float64)

    def regression(self, X: Features) -> np.ndarray:
        """The regression's logit for every paper (its uncertainty is how close it is to 0)."""
        if self._whole is not None and self._whole[0] == id(X):
            return self._whole[1]
        return self.parts(X)[0]


def _stats(values: np.ndarray) -> tuple[float, float]:
    """(mean, standard deviation) for z-scores; (0, 1) when there is nothing to scale."""
    if values.size == 0 or not np.isfinite(values).all():
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


def _background(labels: Labels, order: np.ndarray) -> np.ndarray:
    """Undecided papers used as presumed negatives, in a fixed pseudo-random choice."""
    undecided = order[labels.y[order] < 0]
    n = int(np.clip(BACKGROUND_PER_LABEL * labels.decided, BACKGROUND_MIN, BACKGROUND_MAX))
    return np.asarray(undecided[:n], dtype=np.int64)


def _train(
    X: Features,
    labels: Labels,
    rows: np.ndarray,
    background: np.ndarray,
    warm: LogisticRegression | None = None,
) -> Model:
    """Fit both scorers on these decisions; `warm`, the previous fit's regression, is where
    the solver starts (one more decision moves the optimum little)."""
    Xt = sparse.vstack([X.matrix[rows], X.matrix[background]], format="csr")
    yt = np.concatenate([labels.y[rows], np.zeros(len(background), dtype=np.int8)])
    wt = np.concatenate([labels.weight[rows], np.full(len(background), BACKGROUND_WEIGHT)])
    # liblinear is the faster on a few hundred rows, lbfgs on thousands.
    solver = "liblinear" if len(yt) < LIBLINEAR_BELOW else "lbfgs"
    clf = LogisticRegression(C=C, max_iter=300, solver=solver, warm_start=solver == "lbfgs")
    if solver == "lbfgs" and warm is not None and getattr(warm, "coef_", None) is not None:
        if warm.coef_.shape[1] == X.matrix.shape[1]:
            clf.coef_, clf.intercept_ = warm.coef_.copy(), warm.intercept_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(Xt, yt, sample_weight=wt)
    words = X.matrix[rows][:, : X.words]
    y, w = labels.y[rows], labels.weight[rows]
    centroid = np.asarray(words[y == 1].T @ w[y == 1]).ravel() / max(float(w[y == 1].sum()), 1e-9)
    if (y == 0).any():
        centroid -= REJECTED_SHARE * np.asarray(words[y == 0].mean(axis=0)).ravel()
    model = Model(clf, centroid, X.words)
    model.calibrate(X, background if len(background) else rows)
    return model


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


def engine_features(engine: np.ndarray, topics: np.ndarray) -> np.ndarray:
    """What the calibration sees: the engine's relevance and topic scores, 0..1."""
    return np.hstack([engine.reshape(-1, 1), topics]) / 10.0


def _calibration(E: np.ndarray, labels: Labels, rows: np.ndarray) -> LogisticRegression | None:
    """A small logistic map from the engine's scores to the chance of an accept, fitted on
    decided papers (accepts and stars against rejections and maybes); None with too few."""
    accepted = (labels.y[rows] == 1) & (labels.weight[rows] >= 1.0)
    if len(rows) < CALIBRATION_FROM or accepted.sum() < 3 or (~accepted).sum() < 3:
        return None
    weight = np.where(labels.y[rows] == 1, labels.weight[rows], 1.0)
    clf = LogisticRegression(C=C, max_iter=300, solver="liblinear")
    clf.fit(E[rows], accepted.astype(np.int8), sample_weight=weight)
    return clf


def fit(
    X: Features,
    engine: np.ndarray,
    labels: Labels,
    ids: Sequence[str],
    previous: Fit | None = None,
    topics: np.ndarray | None = None,
    assessed: np.ndarray | None = None,
    order: np.ndarray | None = None,
) -> Fit:
    """Train the model on every decision and choose its weight in the blend by cross-validation.

    With `topics` (the engine's topic scores), the engine's side of the blend may also be
    calibrated to the decisions: a logistic map of its scores, taken when it ranks held-out
    decisions better than the raw relevance. `assessed` marks the papers the engine has
    scored (all by default); `order` is `stable_order(ids)` when already known. With many
    decisions the weight hardly moves from one decision to the next: a previous fit's choice
    is kept until the decisions have grown (or shrunk) by a tenth (the model itself is always
    retrained). `previous` is the last fit, or its `choice()` remembered between commands."""
    result = Fit(
        positives=labels.positives,
        negatives=labels.negatives,
        decided=labels.decided,
        engine_stats=_stats(engine),
    )
    if labels.positives < MIN_POSITIVES or labels.decided < MIN_DECISIONS:
        result.note = (
            f"learning starts at {MIN_POSITIVES} accepted or starred papers and {MIN_DECISIONS} "
            f"decisions (now {labels.positives} and {labels.decided}): the engine ranks alone"
        )
        return result
    assessed = np.ones(len(engine), dtype=bool) if assessed is None else assessed
    background = _background(labels, stable_order(ids) if order is None else order)
    decided = np.flatnonzero(labels.y >= 0)
    warm = previous.model.classifier if previous is not None and previous.model is not None else None
    result.model = _train(X, labels, decided, background, warm)
    result.model.calibrate(X)
    E = engine_features(engine, topics if topics is not None else np.zeros((len(engine), 0)))
    result.calibration = _calibration(E, labels, decided)
    if result.calibration is not None:
        result.calibration_stats = _stats(result.calibration.decision_function(E))
    groups = _evaluation_groups(labels, decided, background, assessed)
    if not groups:
        result.note = (
            f"all {labels.decided} decisions so far are accepts of papers from the top of the queue: "
            "the engine ranks alone until a paper is rejected or marked maybe (the model needs to "
            "see what you pass over), or a library is imported with 'triage ingest FILE --accept'"
        )
        return result
    reuse = (
        previous is not None
        and previous.cv
        and previous.cv_decided >= REUSE_FROM
        and previous.cv_decided / REUSE_GROWTH <= labels.decided < REUSE_GROWTH * previous.cv_decided
    )
    if previous is not None and reuse:
        result.cv, result.cv_decided = previous.cv, previous.cv_decided
        result.confidence = previous.confidence
    else:
        result.cv, result.confidence = _cross_validate(
            X, E, engine, labels, decided, background, groups, result.engine_stats
        )
        result.cv_decided = labels.decided
    # The best (engine side, weight) among those that beat the engine alone by the margin in
    # most resamples; ties go to the raw engine and then to the larger weight.
    base_cv = result.cv[(RAW, 0.0)]
    candidates = [
        k
        for k in result.cv
        if (result.calibration is not None or k[0] == RAW)
        and (
            k == (RAW, 0.0)
            or (result.cv[k] >= base_cv + MARGIN and result.confidence.get(k, 1.0) >= CONFIDENCE)
        )
    ]
    # What the queue already uses stays while it still ranks held-out decisions no worse than
    # the engine alone: one more decision moves the cross-validation by luck, and a queue that
    # switches its order on and off from one decision to the next cannot be worked down.
    kept = None
    if previous is not None and (previous.weight > 0 or previous.calibrated):
        before = (CALIBRATED if previous.calibrated else RAW, previous.weight)
        usable = before[0] == RAW or result.calibration is not None
        if usable and before in result.cv and before not in candidates and result.cv[before] >= base_cv:
            candidates.append(before)
            kept = before
    best = max(candidates, key=lambda k: (round(result.cv[k], 6), k[0] == RAW, k[1]))
    prior = (best[0], PRIOR_WEIGHT)
    by_default = best[1] == 0.0 and labels.decided >= PRIOR_FROM and result.cv[prior] >= result.cv[best]
    if by_default:
        best = prior
    result.calibrated = best[0] == CALIBRATED
    result.weight = best[1]
    base, chosen = result.cv[(RAW, 0.0)], result.cv[best]
    if best == (RAW, 0.0) and labels.decided >= PRIOR_FROM:
        result.note = (
            f"on {result.cv_decided} decisions the model ranks held-out decisions worse than the engine "
            f"(average precision {result.cv[prior]:.2f} against {base:.2f}): the engine ranks alone"
        )
    elif best == (RAW, 0.0):
        result.note = (
            f"on {result.cv_decided} decisions neither the model nor a calibration ranks held-out "
            f"decisions better than the engine (average precision {base:.2f}): the engine ranks alone"
        )
    else:
        parts = [f"model weight {best[1]:g}"] if best[1] else []
        if result.calibrated:
            parts.insert(0, "engine calibrated to your decisions")
        n = result.cv_decided
        if best == kept:
            how = (
                f"kept from before: on {n} decisions it still ranks your held-out accepts above the "
                "papers you passed over no worse than the engine alone"
            )
        elif by_default:
            how = (
                f"the model's usual weight from {PRIOR_FROM} decisions on: on {n} decisions it ranks "
                "your held-out accepts above the papers you passed over no worse than the engine alone"
            )
        else:
            how = f"chosen on {n} decisions: ranking your held-out accepts above the papers you passed over"
        result.note = (
            f"{', '.join(parts)}; {how}, average precision {chosen:.2f} "
            f"against {base:.2f} for the engine alone"
        )
    return result


def _evaluation_groups(
    labels: Labels, decided: np.ndarray, background: np.ndarray, assessed: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The sets a blend is judged on: (papers, which of them are relevant).

    - Papers decided from the queue: accepts against maybes and rejections. Only decided
      papers: they all came from the top of the queue, so comparing them with the rest of the
      store would favour the engine that put them there.
    - Seeded accepts (a library the engine did not choose) against the background of undecided
      papers, both assessed: a fair contest for both sides.
    """
    accepted = (labels.y == 1) & (labels.weight >= 1.0)
    groups = []
    queue = decided[~labels.seeded[decided]]
    if accepted[queue].any() and (~accepted[queue]).any():
        groups.append((queue, accepted[queue]))
    seeded = decided[labels.seeded[decided] & accepted[decided] & assessed[decided]]
    pool = background[assessed[background]]
    if len(seeded) >= MIN_POSITIVES and len(pool):
        papers = np.concatenate([seeded, pool])
        groups.append((papers, np.concatenate([np.ones(len(seeded), bool), np.zeros(len(pool), bool)])))
    return groups


def _cross_validate(
    X: Features,
    E: np.ndarray,
    engine: np.ndarray,
    labels: Labels,
    decided: np.ndarray,
    background: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray]],
    engine_stats: tuple[float, float],
) -> tuple[dict[tuple[str, float], float], dict[tuple[str, float], float]]:
    """Each blend's mean average precision over the evaluation groups, every paper scored by
    a model (and a calibration) trained without it; and the share of bootstrap resamples of
    the groups' papers in which the blend ranks them better than the engine alone."""
    folds = max(2, min(FOLDS, labels.positives))
    fold_of = np.empty(len(labels.y), dtype=np.int64)
    # Accepts, maybes, rejections and the background are dealt round the folds separately.
    accepted = labels.weight[decided] >= 1.0
    for group in (
        decided[(labels.y[decided] == 1) & accepted],
        decided[(labels.y[decided] == 1) & ~accepted],
        decided[labels.y[decided] == 0],
        background,
    ):
        fold_of[group] = np.arange(len(group)) % folds
    scored = np.concatenate([decided, background])
    model_z = np.zeros(len(labels.y))
    calibrated_z = _z(engine, engine_stats)
    for k in range(folds):
        train = decided[fold_of[decided] != k]
        held = scored[fold_of[scored] == k]
        if not (labels.y[train] == 1).any() or not len(held):
            continue
        model = _train(X, labels, train, background[fold_of[background] != k])
        model_z[held] = model.score(X, held)
        calibration = _calibration(E, labels, train)
        if calibration is not None:
            reference = calibration.decision_function(E[background if len(background) else train])
            calibrated_z[held] = _z(calibration.decision_function(E[held]), _stats(reference))
    # A paper's weight: a star counts double; a maybe counts against a ranking, lightly.
    weight = np.where(labels.y >= 0, labels.weight, 1.0)
    sides = {RAW: _z(engine, engine_stats), CALIBRATED: calibrated_z}
    blends = {
        (side, w): values + w * np.maximum(model_z, MODEL_FLOOR)
        for side, values in sides.items()
        for w in WEIGHTS
    }

    def mean_ap(score: np.ndarray, picks: list[np.ndarray] | None = None) -> float:
        return float(
            np.mean(
                [
                    average_precision(score[papers[i]], relevant[i], weight[papers[i]])
                    for (papers, relevant), i in zip(
                        groups, picks or [np.arange(len(p)) for p, _ in groups], strict=True
                    )
                ]
            )
        )

    cv = {key: mean_ap(score) for key, score in blends.items()}
    confidence: dict[tuple[str, float], float] = {}
    if labels.decided < BOOTSTRAP_BELOW:
        rng = np.random.default_rng(len(decided))
        wins = dict.fromkeys(blends, 0)
        for _ in range(BOOTSTRAP):
            picks = [rng.integers(0, len(papers), len(papers)) for papers, _ in groups]
            base = mean_ap(blends[(RAW, 0.0)], picks)
            for key, score in blends.items():
                if key != (RAW, 0.0):  # the engine alone never beats itself
                    wins[key] += mean_ap(score, picks) > base
        confidence = {key: n / BOOTSTRAP for key, n in wins.items()}
    return cv, confidence


def scores(result: Fit, X: Features) -> np.ndarray | None:
    """The model's score of each paper (z-scored over the store), or None without a model."""
    if result.model is None:
        return None
    return result.model.score(X)


def blend(
    result: Fit, engine: np.ndarray, model: np.ndarray | None, topics: np.ndarray | None = None
) -> np.ndarray:
    """The ranking score: the engine's side (z-scored) plus the model's score, weighted."""
    engine_z = result.engine_side(engine, topics)
    if model is None or not result.active:
        return engine_z
    return np.asarray(engine_z + result.weight * np.maximum(model, MODEL_FLOOR), dtype=np.float64)
