"""The queue's order with the researcher's decisions in it: rank, explain, find what to teach.

`rank` trains the personal model on the decisions among the given papers and returns a
`Ranking`: each assessed paper's place in the blended order, the score shown for it (the
blend mapped onto the engine's own 0-10 distribution, so the scale reads as before), and what
is needed to explain a move (the nearest accepted and rejected papers). Papers are given as
the queue index's rows (`assistant.index.Row`), which every command and the review UI have.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from assistant.agenda import excludes
from assistant.models import Status
from assistant.personal.estimate import Estimate, Folds, estimate_folds
from assistant.personal.features import TextFeatures
from assistant.personal.lbfgs import Spectrum
from assistant.personal.matrix import Features
from assistant.personal.model import (
    ENGINE_WEIGHT,
    STATUS_CODE,
    Fit,
    Gathered,
    Labels,
    Model,
    blend,
    fit,
    fit_gathered,
    stable_order,
)
from assistant.personal.rows import STATUS_INDEX, STATUSES, PaperTable
from assistant.personal.state import Trained, ids_digest, problem_key, training_key

NEAREST = 3
WORDS = 4  # words named for and against a paper
WORD_FLOOR = 0.05  # a word adding less than this to the model's score (z) is not named


class PaperState(Protocol):
    """What the ranking needs of a paper (the queue index's Row has it)."""

    @property
    def id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def relevance(self) -> float | None: ...
    @property
    def topics(self) -> dict[str, int] | None: ...
    @property
    def status(self) -> Status: ...
    @property
    def starred(self) -> bool: ...
    @property
    def seed(self) -> bool: ...


@dataclass
class Neighbour:
    title: str
    id: str
    similarity: float
    decision: str


@dataclass
class Explanation:
    """How the decisions moved one paper, and why."""

    engine_place: int
    place: int
    of: int
    engine_score: float
    score: float
    chance: float | None  # the chance you accept it, from the model's log-odds calibrated
    accepted: list[Neighbour] = field(default_factory=list)
    rejected: list[Neighbour] = field(default_factory=list)
    note: str = ""
    undecided: bool = True  # placed among the papers still to decide, else among all assessed
    # The paper's words that weigh most for it and against it in the model's score.
    words_for: list[str] = field(default_factory=list)
    words_against: list[str] = field(default_factory=list)

    @property
    def moved(self) -> int:
        """Places gained (positive) or lost (negative) against the engine's own order."""
        return self.engine_place - self.place

    def lines(self) -> list[str]:
        """The explanation in words, one line each."""
        among = f"of {self.of} {'still to decide' if self.undecided else 'assessed'}"
        if self.moved > 0:
            head = f"moved it up {_places_word(self.moved)} (#{self.engine_place} → #{self.place} {among})"
        elif self.moved < 0:
            head = f"moved it down {_places_word(-self.moved)} (#{self.engine_place} → #{self.place} {among})"
        else:
            head = f"leave it at #{self.place} {among}"
        out = [f"{head}; score {self.score:.1f} (engine {self.engine_score:.1f})"]
        if self.chance is not None:
            out.append(f"chance you accept it, by the model calibrated on your decisions: {self.chance:.0%}")
        if self.words_for or self.words_against:
            parts = [f"for it: {', '.join(self.words_for)}"] if self.words_for else []
            parts += [f"against it: {', '.join(self.words_against)}"] if self.words_against else []
            out.append("words your decisions weigh " + "; ".join(parts))
        for label, group in (("nearest accepted", self.accepted), ("nearest rejected", self.rejected)):
            if group:
                out.append(
                    f"{label}: " + "; ".join(f"{n.title} ({n.similarity:.2f})" for n in group[:NEAREST])
                )
        return out


@dataclass
class Ranking:
    """Blended scores of the assessed papers, with the fit they came from."""

    ids: list[str]
    engine: np.ndarray  # relevance, NaN when not assessed
    blended: np.ndarray  # the sort key, -inf when not assessed
    shown: np.ndarray  # the blend on the engine's 0-10 scale, NaN when not assessed
    model: np.ndarray | None  # what the decisions add to the log-odds, None without a model
    uncertainty: np.ndarray | None  # |log-odds| of the model: small is uncertain
    chance: np.ndarray | None  # the calibrated chance of an accept (with an estimate)
    fit: Fit
    titles: list[str]
    labels: Labels
    # What the model read of each paper (its embedding names the nearest decided papers).
    features: Features
    # Papers still to decide (status new), the queue `ranked` prints: a paper among them is
    # placed among them (the labels count a starred new paper as decided; the queue does not).
    undecided: np.ndarray
    position: dict[str, int] = field(default_factory=dict)
    # The vocabulary's words, to name what moved a paper.
    terms: Callable[[], Sequence[str]] | None = None
    # Each paper's date (yyyymmdd, 0 unknown): among equal scores the newer paper comes first,
    # then the id, in every view of the queue (`assistant.order.queue_key`).
    days: np.ndarray | None = None
    # Relevant papers left among the undecided ones (when asked for and measurable).
    estimate: Estimate | None = None
    # What the training made of its inputs, to keep between commands (`assistant.personal.state`).
    trained: Trained | None = None

    def __post_init__(self) -> None:
        if len(self.position) != len(self.ids):  # (given: the rows' own, when they have one)
            self.position = {pid: i for i, pid in enumerate(self.ids)}
        assessed = np.isfinite(self.blended)
        # A paper still to decide is placed among those; a decided one among every assessed paper.
        queue = assessed & self.undecided
        self._assessed, self._queue = int(assessed.sum()), int(queue.sum())
        self._assessed_mask, self._queue_mask = assessed, queue
        # A paper's place is worked out when it is asked for (`explain`): sorting every paper
        # twice costs more than `show` spends on the rest of its answer at 100k papers.
        self._days = np.zeros(len(self.ids)) if self.days is None else np.asarray(self.days, dtype=np.float64)
        self._tie_ranks: np.ndarray | None = None
        self._accepted = np.flatnonzero((self.labels.y == 1) & (self.labels.weight >= 1.0))
        self._rejected = np.flatnonzero(self.labels.y == 0)
        self._gathered: dict[str, np.ndarray] = {}  # their embeddings, once asked for

    @property
    def personal(self) -> bool:
        return self.fit.personal

    @property
    def feature_rows(self) -> Features | None:
        """What the model read of each paper, when there is a model."""
        return self.features if self.fit.active else None

    def score(self, pid: str) -> float | None:
        """The score to show for a paper (0-10), None when it is not assessed or unknown."""
        i = self.position.get(pid)
        if i is None or not math.isfinite(self.shown[i]):
            return None
        return float(self.shown[i])

    def key(self, pid: str, relevance: float | None) -> float:
        """The sort key of a paper: its blend, or from its relevance for a paper the ranking
        has not seen (assessed since), as the engine alone would place it."""
        i = self.position.get(pid)
        if i is not None and math.isfinite(self.blended[i]):
            return float(self.blended[i])
        if relevance is None:
            return -math.inf
        a, b = self.engine_line()
        mean, std = self.fit.engine_stats
        return a + b * (relevance - mean) / std

    def engine_line(self) -> tuple[float, float]:
        """(a, b): the sort key of a paper known by its relevance alone is a + b * its z-score."""
        model = self.fit.model
        return (model.intercept, model.engine_weight) if model is not None else (0.0, ENGINE_WEIGHT)

    @property
    def _ties(self) -> np.ndarray:
        """Where each paper falls among equal scores: the newer first, then by id."""
        if self._tie_ranks is None:
            by_id = np.empty(len(self.ids), dtype=np.int64)
            by_id[np.argsort(np.asarray(self.ids), kind="stable")] = np.arange(len(self.ids))
            self._tie_ranks = np.empty(len(self.ids), dtype=np.int64)
            self._tie_ranks[np.lexsort((by_id, -self._days))] = np.arange(len(self.ids))
        return self._tie_ranks

    def _place(self, values: np.ndarray, i: int) -> int:
        """Paper i's 1-based place by descending value among the papers still to decide if it
        is one, else among every assessed paper; among equal values the newer paper first,
        then by id (what sorting them all by `assistant.order.queue_key` gives)."""
        among = self._queue_mask if self.undecided[i] else self._assessed_mask
        value = values[i]
        place = 1 + int(np.count_nonzero(among & (values > value)))
        for j in np.flatnonzero(among & (values == value)):
            if j != i and (-self._days[j], self.ids[j]) < (-self._days[i], self.ids[i]):
                place += 1
        return place

    def relevance_order(self) -> list[str]:
        """Every paper's id in the queue's relevance order (`assistant.order.queue_key`)."""
        order = np.lexsort((self._ties, -self.blended))
        return [self.ids[i] for i in order]

    def priority(self, pid: str) -> float:
        """How early a paper should be assessed: its place in the blend, or for a paper not
        assessed yet, what the model makes of its text (z-scores either way)."""
        i = self.position.get(pid)
        if i is None:
            return 0.0
        if math.isfinite(self.blended[i]):
            return float(self.blended[i])
        return float(self.model[i]) if self.model is not None else 0.0

    def reorder(self, relevance: Mapping[str, float]) -> dict[str, float]:
        """Blend other engine scores (the offline pass of a cascade) with the model as the
        ranking does: the scores' z-score at the engine's weight plus what the decisions add."""
        if not relevance:
            return {}
        values = np.array(list(relevance.values()), dtype=np.float64)
        mean, std = float(values.mean()), float(values.std()) or 1.0
        weight = self.fit.model.engine_weight if self.fit.model is not None else 1.0
        out = {}
        for pid, value in relevance.items():
            i = self.position.get(pid)
            model = float(self.model[i]) if self.model is not None and i is not None else 0.0
            out[pid] = weight * (value - mean) / std + model
        return out

    def uncertain(self, pid: str) -> float:
        """How sure the model is about a paper (smaller: its decision teaches the model more)."""
        i = self.position.get(pid)
        if i is None or self.uncertainty is None or not math.isfinite(self.blended[i]):
            return math.inf
        return float(self.uncertainty[i])

    def measures(self, ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`uncertain` and `disagreement` of each of these papers, as two arrays (what the
        queue's uncertain and disagreement sorts read of every paper after each retrain)."""
        at = np.fromiter((self.position.get(pid, -1) for pid in ids), dtype=np.int64, count=len(ids))
        ranked = at >= 0
        ranked[ranked] = np.isfinite(self.blended[at[ranked]])
        uncertain = np.full(len(ids), math.inf)
        disagreement = np.zeros(len(ids))
        if self.uncertainty is not None:
            uncertain[ranked] = self.uncertainty[at[ranked]]
        if self.model is not None:
            disagreement[ranked] = self.model[at[ranked]]
        return uncertain, disagreement

    def disagreement(self, pid: str) -> float:
        """What the decisions add to the engine's log-odds: positive when you would like it more."""
        i = self.position.get(pid)
        if i is None or self.model is None or not math.isfinite(self.blended[i]):
            return 0.0
        return float(self.model[i])

    def explain(self, pid: str) -> Explanation | None:
        i = self.position.get(pid)
        if i is None or not math.isfinite(self.blended[i]):
            return None
        undecided = bool(self.undecided[i])
        return Explanation(
            engine_place=self._place(np.where(self._assessed_mask, self.engine, -np.inf), i),
            place=self._place(self.blended, i),
            of=self._queue if undecided else self._assessed,
            undecided=undecided,
            engine_score=float(self.engine[i]),
            score=float(self.shown[i]),
            chance=float(self.chance[i])
            if self.chance is not None and math.isfinite(self.chance[i])
            else None,
            accepted=self._nearest(i, self._accepted, "accepted"),
            rejected=self._nearest(i, self._rejected, "rejected"),
            note=self.fit.note,
            **self._words(i),
        )

    def _words(self, i: int) -> dict[str, list[str]]:
        """The words of paper i that add most to the model's score and take most from it."""
        model, X = self.fit.model, self.feature_rows
        if not self.fit.active or model is None or X is None or self.terms is None:
            return {}
        indices, values = X.word_row(i)
        weights = model.word_weights()
        terms = self.terms()
        if not len(indices) or len(weights) != X.words or len(terms) != X.words:
            return {}
        contribution = values * weights[indices]
        order = np.argsort(-contribution)

        def named(picks: np.ndarray, sign: float) -> list[str]:
            # "post training" and "post" are one reason: name it once.
            weighty = [terms[indices[j]] for j in picks[: 3 * WORDS] if sign * contribution[j] > WORD_FLOOR]
            return distinct_terms(weighty)[:WORDS]

        return {"words_for": named(order, 1.0), "words_against": named(order[::-1], -1.0)}

    def gather_neighbours(self) -> None:
        """Gather the embeddings of the accepted and of the rejected papers that `explain`
        compares each paper with, now rather than for the first paper explained (the review UI
        calls this off its UI thread: at 100k papers, with a third of them decided, the first
        detail shown after each new ranking waited ~100 ms for it)."""
        for decision, group in (("accepted", self._accepted), ("rejected", self._rejected)):
            if len(group) and self.features.dims:
                self._group_vectors(decision, group)

    def _group_vectors(self, decision: str, group: np.ndarray) -> np.ndarray:
        """The embeddings of `group` (the accepted, or the rejected), gathered once per ranking:
        every paper shown asks again."""
        vectors = self._gathered.get(decision)
        if vectors is None:
            vectors = self._gathered[decision] = self.features.vectors_of(group)
        return vectors

    def _nearest(self, i: int, group: np.ndarray, decision: str) -> list[Neighbour]:
        """The papers of `group` (the accepted, or the rejected) nearest in meaning to paper i."""
        if not len(group) or not self.features.dims:
            return []
        mine = self.features.vectors_of([i])[0]
        if not mine.any():
            return []
        similar = np.einsum("ij,j->i", self._group_vectors(decision, group), mine)
        others = group != i
        group, similar = group[others], similar[others]
        if not len(group):
            return []
        k = min(NEAREST, len(group))
        best = np.argpartition(-similar, k - 1)[:k]
        best = best[np.argsort(-similar[best], kind="stable")]
        return [
            Neighbour(self.titles[group[j]], self.ids[group[j]], float(similar[j]), decision) for j in best
        ]


def _places_word(n: int) -> str:
    return f"{n} place" if n == 1 else f"{n} places"


def distinct_terms(terms: list[str]) -> list[str]:
    """Terms without those another (longer) term already contains: 'entity linking' over 'entity'."""
    kept: list[str] = []
    for term in sorted(terms, key=lambda t: -len(t.split())):
        if not any(term in k.split() or term == k for k in kept):
            kept.append(term)
    return sorted(kept, key=terms.index)


def topic_names(rows: Sequence[PaperState], agenda_topics: Sequence[str] = ()) -> list[str]:
    if agenda_topics:
        return list(agenda_topics)
    if isinstance(rows, PaperTable):
        return rows.topic_names()
    return sorted({name for r in rows if r.topics for name in r.topics})


def learned_topics(
    rows: Sequence[PaperState], agenda_topics: Sequence[str] = ()
) -> tuple[list[str], np.ndarray]:
    """The topics the model and the calibration learn from, and their scores (papers x topics)."""
    names = topic_names(rows, agenda_topics)
    names = [n for n, learned in zip(names, learns_from(names), strict=True) if learned]
    return names, topic_scores(rows, names)


def learns_from(names: Sequence[str]) -> list[bool]:
    """Whether the model and the calibration learn from each of these topics.

    "Not interested" is left out: the engine's relevance already counts it against a paper, and
    a few decisions can make its score look like a reason to accept (the papers it catches
    share words with the agenda), which would lift the very papers the agenda excludes."""
    return [not excludes(n) for n in names]


def topic_scores(rows: Sequence[PaperState], names: Sequence[str]) -> np.ndarray:
    """Each paper's score on each named topic (papers x topics; 0 where it has none)."""
    if isinstance(rows, PaperTable):
        return rows.topic_scores(names)
    scores = [r.topics or {} for r in rows]
    out = np.zeros((len(rows), len(names)))
    for j, name in enumerate(names):
        out[:, j] = [s.get(name, 0) for s in scores]
    return out


@dataclass
class FeatureCache:
    """The model's features from the last ranking: decisions do not change them, so a retrain
    after a decision reuses them."""

    key: tuple[int, int, int, bytes] | None = None
    X: Features | None = None
    order: np.ndarray | None = None  # stable_order of the ids, once training asked for it

    def get(self, texts: TextFeatures, ids: list[str], topics: np.ndarray) -> Features:
        digest = hashlib.blake2b(topics.tobytes(), digest_size=16)
        digest.update("\x1f".join(ids).encode("utf-8"))
        key = (id(texts), texts.version, len(ids), digest.digest())
        if key != self.key or self.X is None:
            self.X = Features(texts.words, texts.vectors, topics, texts.positions(ids))
            self.key, self.order = key, None
        return self.X

    def stable_order(self, ids: list[str]) -> np.ndarray:
        if self.order is None:
            self.order = stable_order(ids)
        return self.order


def rank(
    texts: TextFeatures,
    rows: Sequence[PaperState],
    agenda_topics: Sequence[str] = (),
    previous: Fit | None = None,
    cache: FeatureCache | None = None,
    with_estimate: bool = False,
    saved: Trained | None = None,
) -> Ranking:
    """Train on the decisions among `rows` and rank the assessed ones; `with_estimate` also
    estimates how many relevant papers are left among those still to decide. `saved`, a
    training kept from an earlier command, is used as it is when its inputs are these, and is
    where training starts otherwise; the ranking's `trained` is what to keep next."""
    table = rows if isinstance(rows, PaperTable) else None  # the store's rows, as columns
    ids = table.ids if table is not None else [r.id for r in rows]
    engine = (
        table.relevance.astype(np.float64)
        if table is not None
        else np.array([r.relevance if r.relevance is not None else np.nan for r in rows], dtype=np.float64)
    )
    assessed = np.isfinite(engine)
    floor = float(engine[assessed].min()) if assessed.any() else 0.0
    filled = np.where(assessed, engine, floor)
    _, topics = learned_topics(rows, agenda_topics)
    cache = cache or FeatureCache()
    X = cache.get(texts, ids, topics)
    if table is not None:
        codes = np.array([STATUS_CODE[status] for status in STATUSES], dtype=np.int8)[table.status]
        labels = Labels.from_codes(codes, table.starred, table.seed)
    else:
        labels = Labels.from_decisions(
            [r.status for r in rows], [r.starred for r in rows], [r.seed for r in rows]
        )
    papers = ids_digest(ids) if saved is not None else b""
    key = training_key(texts.saved_generation, papers, filled, topics, labels) if saved is not None else b""
    if saved is not None and saved.papers == papers and saved.order is not None and cache.order is None:
        cache.order = saved.order  # the stable order of these papers, kept
    kept = _model(saved, X) if saved is not None else None
    hit = saved is not None and bool(key) and saved.key == key and (saved.theta is None or kept is not None)
    gathered: Gathered | None = None  # what the training read, for the estimate's folds
    if hit:
        result = fit(X, filled, labels, ids, known=kept)
    else:
        start = previous if previous is not None and previous.model is not None else Fit(model=kept)
        order = cache.stable_order(ids) if labels.positives else None
        result, gathered = fit_gathered(X, filled, labels, ids, start, order)
    if result.model is None:
        model = None
    elif hit and saved is not None and saved.scores is not None and len(saved.scores) == len(ids):
        model = np.asarray(saved.scores)
    else:
        model = result.model.personal(X)
    blended = np.where(assessed, blend(result, filled, model), -np.inf)
    undecided = (
        table.status == STATUS_INDEX[Status.NEW]
        if table is not None
        else np.array([r.status is Status.NEW for r in rows], dtype=bool)
    )
    uncertainty = chance = None
    left = None
    estimated = False
    # The estimate's fold models: this training's, or where the next estimate starts.
    folds: Folds | None = saved.folds if saved is not None else None
    if result.model is not None and model is not None:
        logit = result.model.intercept + result.model.engine_weight * result.engine_z(filled) + model
        uncertainty = np.abs(logit)
        if with_estimate:
            estimated = True
            if hit and saved is not None and saved.estimated:
                left = saved.estimate
            else:
                candidates = np.flatnonzero(undecided & assessed & (labels.y < 0))
                base = problem_key(texts.saved_generation, papers, filled, topics) if key else b""
                left, folds = estimate_folds(
                    X, filled, labels, ids, result, candidates, order=cache.stable_order(ids),
                    kept=folds, base=base, papers=papers, gathered=gathered,
                )  # fmt: skip
            chance = left.chance(len(ids)) if left is not None else None
    trained = saved
    order_kept = saved is not None and saved.papers == papers and saved.order is not None
    if key and (not hit or (estimated and saved is not None and not saved.estimated) or not order_kept):
        trained = Trained(
            key,
            result.model.theta if result.model is not None else None,
            model,
            result.model.spectrum if result.model is not None else None,
            left,
            estimated,
            papers,
            cache.stable_order(ids),
            folds,
        )
    return Ranking(
        ids=ids,
        engine=engine,
        blended=blended,
        shown=_on_engine_scale(blended, engine, assessed),
        model=model,
        uncertainty=uncertainty,
        chance=chance,
        fit=result,
        titles=table.titles if table is not None else [r.title for r in rows],
        labels=labels,
        features=X,
        terms=texts.term_reader(),
        undecided=undecided,
        days=table.day.astype(np.float64)
        if table is not None
        else np.array([getattr(r, "day", None) or 0 for r in rows], dtype=np.float64),
        estimate=left,
        trained=trained,
        position=table.positions if table is not None else {},
    )


def _model(saved: Trained, X: Features) -> Model | None:
    """The model a kept training holds, if it fits these features."""
    if saved.theta is None or len(saved.theta) != X.width + 2:
        return None
    theta = np.asarray(saved.theta, dtype=np.float64)
    spectrum: Spectrum | None = saved.spectrum
    if spectrum is not None and spectrum.width != len(theta):
        spectrum = None
    return Model(float(theta[0]), float(theta[1]), theta[2:].copy(), X.words, spectrum)


def _on_engine_scale(blended: np.ndarray, engine: np.ndarray, assessed: np.ndarray) -> np.ndarray:
    """The blend's order carried onto the engine's own scores: the paper the blend puts k-th
    gets the k-th highest relevance, so the 0-10 scale keeps its meaning."""
    shown = np.full(len(engine), np.nan)
    if not assessed.any():
        return shown
    idx = np.flatnonzero(assessed)
    by_blend = idx[np.lexsort((idx, -blended[idx]))]
    shown[by_blend] = np.sort(engine[idx])[::-1]
    return np.round(shown, 2)
