"""Calibration examples for the LLM: how the researcher decided on papers like this one.

`triage tag --examples K` puts, for each paper, the K decided papers nearest to it in meaning
(by the stored embeddings) into the prompt: their titles and the decision (accepted, starred,
maybe, rejected). The examples are part of the paper's cache key, so a paper whose nearest
decisions change is assessed again; the key without them is kept too (`Assessment.base_key`)
to tell an assessment made against another agenda or prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from assistant.models import Status
from assistant.store import Store


@dataclass(frozen=True)
class Example:
    id: str
    title: str
    decision: str


def decision_label(status: Status, starred: bool) -> str | None:
    """How a decision reads in a prompt; None for a paper without one."""
    if starred and status is not Status.REJECTED:
        return "accepted and starred (a must-read)"
    return {
        Status.ACCEPTED: "accepted",
        Status.MAYBE: "maybe (unsure)",
        Status.REJECTED: "rejected",
    }.get(status)


class Examples:
    """The decided papers and their vectors; the nearest ones to any paper on demand."""

    def __init__(self, decided: Sequence[Example], vectors: np.ndarray, k: int) -> None:
        self.decided = list(decided)
        self.matrix = vectors
        self.k = k
        self.vectors: dict[str, np.ndarray] = {}

    @classmethod
    def from_store(cls, store: Store, k: int) -> Examples:
        decided: list[Example] = []
        for pid, meta in store.iter_metadata(
            {"$or": [{"status": {"$ne": Status.NEW.value}}, {"starred": True}]}
        ):
            label = decision_label(Status(meta.get("status") or Status.NEW), bool(meta.get("starred")))
            if label:
                decided.append(Example(pid, str(meta.get("title") or pid), label))
        vectors = store.embeddings([e.id for e in decided])
        decided = [e for e in decided if e.id in vectors]
        matrix = np.asarray([vectors[e.id] for e in decided], dtype=np.float32).reshape(len(decided), -1)
        return cls(decided, matrix, k)

    def prepare(self, vectors: Mapping[str, Sequence[float]]) -> None:
        """The vectors of the papers to be assessed (read from the store in one go)."""
        self.vectors.update({pid: np.asarray(v, dtype=np.float32) for pid, v in vectors.items()})

    def nearest(self, paper_id: str) -> list[Example]:
        """The k decided papers nearest in meaning to this one (never itself)."""
        vector = self.vectors.get(paper_id)
        if vector is None or not self.decided or self.k <= 0:
            return []
        similarity = self.matrix @ vector
        order = np.argsort(-similarity, kind="stable")
        return [self.decided[i] for i in order if self.decided[i].id != paper_id][: self.k]


def examples_text(examples: Sequence[Example]) -> str:
    """The examples as prompt lines; titles are data and are defused like paper text."""
    lines = []
    for e in examples:
        title = " ".join(e.title.split()).replace("<<<", "‹‹‹").replace(">>>", "›››")
        lines.append(f"- {e.decision}: {title}")
    return "\n".join(lines)


def examples_key(examples: Sequence[Example]) -> str:
    """What of the examples goes into a paper's cache key."""
    return "\x1e".join(f"{e.id}:{e.decision}" for e in examples)
