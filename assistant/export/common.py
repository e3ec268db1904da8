"""What the export formats share: the context of an export, names, links, tags and topic groups."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlparse

from assistant.agenda import NOT_INTERESTED, Agenda
from assistant.models import StoredPaper, TopicScore, now_utc

OTHER_GROUP = "Other papers"
UNASSESSED_GROUP = "Not assessed"
_PARTICLES = frozenset("van von der den de del della di da dos das du la le ter ten zu af av bin ibn".split())
_SUFFIXES = frozenset("jr jr. sr sr. ii iii iv".split())


@dataclass(frozen=True)
class ExportContext:
    """Everything about an export that is not a paper: its title, the agenda, the lists."""

    title: str = "Papers"
    description: str = ""
    agenda: Agenda | None = None
    lists: Mapping[str, str] = field(default_factory=dict)  # every reading list: name -> description
    selection: str = "all papers"
    topic: str | None = None  # the papers were selected for this topic: file them all under it
    generated_at: datetime = field(default_factory=now_utc)


@dataclass(frozen=True)
class Name:
    """A person's name in parts (`Rens van de Schoot` -> given Rens, particle van de, family Schoot)."""

    given: str
    particle: str
    family: str
    suffix: str = ""

    @property
    def last(self) -> str:
        """The family name with its particle, as it sorts in a citation key."""
        return f"{self.particle} {self.family}".strip()


def split_name(name: str) -> Name:
    """Split a `First Last` (or `Last, First`) name; a one-word name is all family name."""
    name = " ".join(name.split())
    if name.count(",") == 1:
        last, given = (p.strip() for p in name.split(","))
        words = last.split()
        i = 0
        while i < len(words) - 1 and words[i] in _PARTICLES:
            i += 1
        return Name(given, " ".join(words[:i]), " ".join(words[i:]))
    words = name.split()
    suffix = ""
    if len(words) > 2 and words[-1].lower() in _SUFFIXES:
        suffix = words.pop()
    if len(words) <= 1:
        return Name("", "", " ".join(words), suffix)
    start = len(words) - 1
    while start > 1 and words[start - 1] in _PARTICLES:
        start -= 1
    return Name(" ".join(words[:start]), " ".join(words[start:-1]), words[-1], suffix)


def safe_url(url: str | None) -> str | None:
    """The URL if it is an http(s) link; anything else (javascript:, data:, file:) is dropped."""
    if not url:
        return None
    try:
        parsed = urlparse(url.strip())
    except ValueError:
        return None
    if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc:
        return None
    return url.strip()


def link(item: StoredPaper) -> str | None:
    """Where to read the paper: its arXiv abstract page, its DOI, or its URL (http(s) only)."""
    return safe_url(item.paper.link)


def all_tags(item: StoredPaper) -> list[str]:
    """The engine's tags and the researcher's own, without repeats."""
    engine = item.assessment.tags if item.assessment else []
    return list(dict.fromkeys([*engine, *item.decision.tags]))


def authors_short(authors: Sequence[str], most: int = 3) -> str:
    if len(authors) <= most:
        return ", ".join(authors)
    return ", ".join(authors[:most]) + " et al."


def _is_negative(name: str, agenda: Agenda | None) -> bool:
    if agenda is not None:
        negative = agenda.negative
        return negative is not None and negative.name == name
    return name.casefold() == NOT_INTERESTED


def topic_names(agenda: Agenda | None, items: Sequence[StoredPaper]) -> list[str]:
    """The agenda's positive topics in order, then topics that only older assessments name."""
    names = [t.name for t in agenda.positive] if agenda else []
    for item in items:
        for score in item.assessment.topics if item.assessment else []:
            if score.topic not in names and not _is_negative(score.topic, agenda):
                names.append(score.topic)
    return names


def topic_score(item: StoredPaper, topic: str) -> TopicScore | None:
    if item.assessment is None:
        return None
    return next((t for t in item.assessment.topics if t.topic == topic), None)


def best_topic(item: StoredPaper, order: Sequence[str]) -> TopicScore | None:
    """The topic the paper scores best on (at least 1; ties go to the earlier topic)."""
    best: TopicScore | None = None
    for name in order:
        score = topic_score(item, name)
        if score is not None and score.score >= 1 and (best is None or score.score > best.score):
            best = score
    return best


@dataclass
class Group:
    """Papers filed under one heading, each with the topic score that put it there."""

    name: str
    entries: list[tuple[StoredPaper, TopicScore | None]] = field(default_factory=list)


def group_by_topic(
    items: Sequence[StoredPaper], agenda: Agenda | None, topic: str | None = None
) -> list[Group]:
    """Each paper under the topic it scores best on (or all under `topic`, if given); then assessed
    papers no topic claims; then unassessed papers. Inside a topic, best score first."""
    order = [topic] if topic else topic_names(agenda, items)
    groups = {name: Group(name) for name in [*order, OTHER_GROUP, UNASSESSED_GROUP]}
    for item in items:
        if item.assessment is None:
            groups[UNASSESSED_GROUP].entries.append((item, None))
            continue
        best = best_topic(item, order)
        groups[best.topic if best else OTHER_GROUP].entries.append((item, best))
    for group in groups.values():
        group.entries.sort(
            key=lambda e: (
                -(e[1].score if e[1] else 0),
                -(e[0].assessment.relevance if e[0].assessment else 0.0),
                e[0].paper.title.casefold(),
            )
        )
    return [g for g in groups.values() if g.entries]


def one_line(text: str) -> str:
    return " ".join(text.split())


def anchor(name: str) -> str:
    """The id GitHub gives a Markdown heading: lowercase, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", one_line(name).lower()).replace(" ", "-")
