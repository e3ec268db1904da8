"""The digest: a Markdown page of the best new papers per agenda topic, for a cron job or an email.

A paper is new when it was added to the store on or after the date (a paper stored before
`added_at` was recorded counts by its own date) and is still undecided: a paper accepted or
rejected since has been seen. Under each topic, the new papers that match it (a score of at
least `min_score`, 5 by default), best first; a paper can appear under several topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from assistant.agenda import Agenda
from assistant.defaults import MATCH
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
    min_score: int = MATCH
    new: list[StoredPaper] = field(default_factory=list)
    topics: dict[str, list[tuple[StoredPaper, TopicScore]]] = field(default_factory=dict)
    matching: dict[str, int] = field(default_factory=dict)

    @property
    def unassessed(self) -> int:
        return sum(1 for i in self.new if i.assessment is None)


def is_new_after(item: StoredPaper, after: datetime) -> bool:
    """Added to the store after this moment (a paper stored before `added_at` was recorded
    counts by its date, from the moment's day on)."""
    if item.added_at is not None:
        return item.added_at > after
    return is_new(item, after.date())


def build(
    items: Iterable[StoredPaper],
    agenda: Agenda | None,
    since: date,
    top: int,
    shift: Callable[[StoredPaper], float] | None = None,
    min_score: int = MATCH,
    after: datetime | None = None,
) -> Digest:
    """The new undecided papers per topic that match it, best on it first. With `shift` (how
    far the personal model moves a paper on the 0-10 scale in the queue), a topic's score is
    moved as much. With `after` (the daily run: the last digest's moment), new means added
    after it, so no paper is in two daily digests."""
    if after is not None:
        new = [i for i in items if i.decision.status is Status.NEW and is_new_after(i, after)]
    else:
        new = [i for i in items if i.decision.status is Status.NEW and is_new(i, since)]
    result = Digest(since=since, top=top, new=new, min_score=min_score)
    for name in topic_names(agenda, new):
        scored = [(i, s) for i in new if (s := topic_score(i, name)) is not None and s.score >= min_score]
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


def render(digest: Digest, agenda: Agenda | None, notes: Sequence[str] = ()) -> str:
    """The digest as Markdown; `notes` (why a feed brought nothing, what failed) are listed
    under the counts."""
    since = digest.since.isoformat()
    lines = [f"# Paper digest: new since {since}", ""]
    said = [f"- {md(n)}" for n in notes]
    if not digest.new:
        return "\n".join([*lines, f"Nothing new since {since}.", *([""] + said if said else []), ""])
    n = len(digest.new)
    counts = f"{n} new undecided paper{'s' if n != 1 else ''} since {since}"
    if digest.unassessed:
        counts += f" ({digest.unassessed} not assessed yet: 'triage tag' assesses them)"
    where = f" of the agenda {md(Path(agenda.path).name)}" if agenda and agenda.path else ""
    lines += [
        f"{counts}; per topic{where}, the best {digest.top} of those scoring {digest.min_score} or more.",
        "",
    ]
    if said:
        lines += [*said, ""]
    if not digest.topics:
        lines += [f"None of them scores {digest.min_score} or more on an agenda topic.", ""]
    for name, entries in digest.topics.items():
        matching = digest.matching[name]
        shown = f"best {len(entries)} of {matching}" if matching > len(entries) else f"{matching}"
        lines += [f"## {md(name)} ({shown})", ""]
        for item, score in entries:
            lines += paper_block(item, score)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
