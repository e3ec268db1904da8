"""Overall relevance from topic scores: computed by us, never taken from an engine's answer."""

from __future__ import annotations

from collections.abc import Sequence

from assistant.agenda import Agenda
from assistant.models import TopicScore

NEGATIVE_WEIGHT = 0.5


def relevance_from(topics: Sequence[TopicScore], agenda: Agenda) -> float:
    """The best positive topic score, less half the 'Not interested' score, floored at 0."""
    negative = agenda.negative.name if agenda.negative else None
    best = max((t.score for t in topics if t.topic != negative), default=0)
    penalty = next((t.score for t in topics if t.topic == negative), 0)
    return round(max(0.0, best - NEGATIVE_WEIGHT * penalty), 1)
