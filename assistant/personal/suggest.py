"""Topics the agenda is missing: accepted papers that no topic scored well, grouped by meaning.

Accepted (or starred) papers whose every topic score is low say the agenda does not describe
something the researcher wants. They are grouped by their embeddings (average-linkage
clustering on cosine distance) and each group of at least two is named by the word 1-2 grams
that set its papers apart from the store (TF-IDF of the group against the store's mean).
The suggestion is printed as agenda Markdown to paste; nothing is written.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from assistant.defaults import LOW_SCORE
from assistant.personal.features import TextFeatures
from assistant.personal.ranking import PaperState, distinct_terms

DISTANCE = 0.55  # cosine distance within which papers are grouped (average linkage)
TERMS = 6


@dataclass
class Suggestion:
    name: str
    terms: list[str]
    titles: list[str]

    def markdown(self) -> str:
        lines = [f"## {self.name}", "", f"Papers about {', '.join(self.terms)}."]
        lines.append(f"<!-- from {len(self.titles)} accepted papers no topic scored above {LOW_SCORE}: ")
        lines += [f"     - {t}" for t in self.titles[:8]]
        lines.append("-->")
        return "\n".join(lines)


def uncovered(
    rows: Sequence[PaperState], low: int = LOW_SCORE, ignore: Collection[str] = ()
) -> list[PaperState]:
    """Accepted or starred papers, assessed, that no topic scored above `low` (the topics in
    `ignore`, such as "Not interested", do not cover a paper whatever they score)."""
    from assistant.models import Status

    return [
        r
        for r in rows
        if (r.status is Status.ACCEPTED or (r.starred and r.status is not Status.REJECTED))
        and r.topics is not None
        and max((v for k, v in r.topics.items() if k not in ignore), default=0) <= low
    ]


def suggest(
    texts: TextFeatures,
    rows: Sequence[PaperState],
    low: int = LOW_SCORE,
    min_papers: int = 2,
    ignore: Collection[str] = (),
) -> tuple[list[Suggestion], list[PaperState]]:
    """Suggested topics, largest group first, and the accepted papers no topic covered."""
    missing = uncovered(rows, low, ignore)
    if len(missing) < min_papers or not texts.built:
        return [], missing
    words, vectors = texts.rows([r.id for r in missing])
    if len(missing) == 1 or not vectors.any():
        groups = np.zeros(len(missing), dtype=np.int64)
    else:
        clustering = AgglomerativeClustering(
            n_clusters=None, distance_threshold=DISTANCE, metric="cosine", linkage="average"
        )
        groups = clustering.fit_predict(vectors + 1e-9)
    vocabulary = texts.terms()
    store_mean = texts.words.column_means()
    out: list[Suggestion] = []
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        if len(members) < min_papers:
            continue
        centroid = words.take(members).column_means() - store_mean
        terms = distinct_terms(
            [str(vocabulary[j]) for j in np.argsort(-centroid)[: TERMS * 3] if centroid[j] > 0]
        )
        if not terms:
            continue
        out.append(Suggestion(terms[0].capitalize(), terms[:TERMS], [missing[i].title for i in members]))
    out.sort(key=lambda s: -len(s.titles))
    return out, missing
