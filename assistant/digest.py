"""The digest: a Markdown page of the best new papers per agenda topic, for a cron job or an email.

A paper is new when it was added to the store on or after the date (a paper stored before
`added_at` was recorded counts by its own date). Rejected papers are left out. Under each topic,
the new papers that score at least 1 on it, best first; a paper can appear under several topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date

from assistant.agenda import Agenda
from assistant.export.common import topic_names, topic_score
from assistant.export.markdown import md, paper_block
from assistant.models import Status, StoredPaper, TopicScore


def is_new(item: StoredPaper, since: date) -> bool:
    if item.added_at is not None:
        return item.added_at.date() >= since
    day = item.paper.day
    return day is not None and day >= since.year * 10000 + since.month * 100 + since.day


@dataclass
class Digest:
    since: date
    top: int
    new: list[StoredPaper] = field(default_factory=list)
    topics: dict[str, list[tuple[StoredPaper, TopicScore]]] = field(default_factory=dict)
    matching: dict[str, int] = field(default_factory=dict)

    @property
    def unassessed(self) -> int:
        return sum(1 for i in self.new if i.assessment is None)


def build(
    items: Iterable[StoredPaper],
    agenda: Agenda | None,
    since: date,
    top: int,
    shift: Callable[[StoredPaper], float] | None = None,
) -> Digest:
    """The new papers per topic, best on it first. With `shift` (how far the personal model
    moves a paper on the 0-10 scale in the queue), a topic's score is moved as much."""
    new = [i for i in items if i.decision.status is not Status.REJECTED and is_new(i, since)]
    result = Digest(since=since, top=top, new=new)
    for name in topic_names(agenda, new):
        scored = [(i, s) for i in new if (s := topic_score(i, name)) is not None and s.score >= 1]
        scored.sort(
            key=lambda e: (
                -(e[1].score + (shift(e[0]) if shift else 0.0)),
                -(e[0].assessment.relevance if e[0].assessment else 0.0),
                e[0].paper.title,
            )
        )
        result.matching[name] = len(scored)
        if scored:
            result.topics[name] = scored[:top]
    return result


def render(digest: Digest, agenda: Agenda | None) -> str:
    since = digest.since.isoformat()
    lines = [f"# Paper digest: new since {since}", ""]
    if not digest.new:
        return "\n".join([*lines, f"Nothing new since {since}.", ""])
    n = len(digest.new)
    counts = f"{n} new paper{'s' if n != 1 else ''} since {since}"
    if digest.unassessed:
        counts += f" ({digest.unassessed} not assessed yet: 'triage tag' assesses them)"
    where = f" of the agenda {md(agenda.path)}" if agenda else ""
    lines += [f"{counts}; the best {digest.top} per topic{where}.", ""]
    if not digest.topics:
        lines += ["None of them scores on an agenda topic.", ""]
    for name, entries in digest.topics.items():
        matching = digest.matching[name]
        shown = f"best {len(entries)} of {matching}" if matching > len(entries) else f"{matching}"
        lines += [f"## {md(name)} ({shown})", ""]
        for item, score in entries:
            lines += paper_block(item, score)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
