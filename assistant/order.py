"""The queue's order by relevance, one rule for every view of it (no heavy imports: `ranked`
answers from its read cache without loading the store)."""

from __future__ import annotations


def queue_key(score: float, day: int | None, pid: str) -> tuple[float, int, str]:
    """The same in `ranked`, the review UI and a paper's place in `show`: the higher score
    first; among equal scores (an LLM's scores tie often) the newer paper, then the id."""
    return (-score, -(day or 0), pid)
