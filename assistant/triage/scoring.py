"""Overall relevance from topic scores: computed by us, never taken from an engine's answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from assistant.agenda import Agenda
from assistant.models import TopicScore

NEGATIVE_WEIGHT = 0.5


def relevance_from_scores(scores: Mapping[str, float], agenda: Agenda, digits: int = 1) -> float:
    """The best positive topic score, less half the 'Not interested' score, floored at 0."""
    negative = agenda.negative.name if agenda.negative else None
    best = max((s for name, s in scores.items() if name != negative), default=0.0)
    penalty = scores.get(negative, 0.0) if negative else 0.0
    return round(max(0.0, best - NEGATIVE_WEIGHT * penalty), digits)


def relevance_from(topics: Sequence[TopicScore], agenda: Agenda) -> float:
    return relevance_from_scores({t.topic: float(t.score) for t in topics}, agenda)
