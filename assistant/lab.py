"""The lab's views of a shared store: what the group accepted lately, who has not looked at it
yet, and where people disagree (`triage ranked --lab`, `triage digest --lab`).

Every person's decisions are keys of the paper (`assistant.store.people`); a decision writes the
paper's `touched` stamp, so the papers decided since a date are found by one filter on it, and
each one's decisions by everyone are read from its stored keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from assistant.export.markdown import md, paper_block
from assistant.models import Decision, Status, StoredPaper
from assistant.store import Store
from assistant.store.people import everyone


@dataclass(frozen=True)
class Verdict:
    """One person's decision on a paper."""

    status: str
    starred: bool
    decided_at: str  # ISO time ("" when not recorded)

    @property
    def accepted(self) -> bool:
        return self.status == Status.ACCEPTED.value or (self.starred and self.status != Status.REJECTED.value)

    @property
    def rejected(self) -> bool:
        return self.status == Status.REJECTED.value and not self.starred

    @property
    def mark(self) -> str:
        """A short mark for a table cell: ✓ accepted, ✗ rejected, ? maybe, ★ starred."""
        marks = {"accepted": "✓", "rejected": "✗", "maybe": "?"}
        return (marks.get(self.status, "") + (" ★" if self.starred else "")).strip()


@dataclass
class LabPaper:
    item: StoredPaper  # as the current person sees it (their agenda's assessment)
    verdicts: dict[str, Verdict]  # person -> decision, for those who decided it

    @property
    def accepted_by(self) -> list[str]:
        return [p for p, v in self.verdicts.items() if v.accepted]

    @property
    def rejected_by(self) -> list[str]:
        return [p for p, v in self.verdicts.items() if v.rejected]

    @property
    def disputed(self) -> bool:
        return bool(self.accepted_by and self.rejected_by)

    def undecided(self, people: Sequence[str]) -> list[str]:
        return [p for p in people if p not in self.verdicts]

    @property
    def last(self) -> str:
        return max((v.decided_at for v in self.verdicts.values()), default="")


@dataclass
class Lab:
    since: date
    person: str
    people: list[str]
    papers: list[LabPaper] = field(default_factory=list)

    @property
    def accepted(self) -> list[LabPaper]:
        """Papers someone accepted (or starred), most accepted first, then the latest."""
        latest_first = sorted((p for p in self.papers if p.accepted_by), key=lambda p: p.last, reverse=True)
        return sorted(latest_first, key=lambda p: -len(p.accepted_by))

    @property
    def disputed(self) -> list[LabPaper]:
        return [p for p in self.accepted if p.disputed]

    @property
    def for_me(self) -> list[LabPaper]:
        """Papers others accepted that this person has not decided."""
        return [p for p in self.accepted if self.person not in p.verdicts]


def build(store: Store, since: date) -> Lab:
    """The papers anybody decided on or after `since`, with everybody's decisions."""
    first, people = store.people()
    person = store.view.person
    people = list(dict.fromkeys([*people, person]))
    start = datetime.combine(since, time.min, tzinfo=UTC)
    stamp, cutoff = start.timestamp(), start.isoformat()
    verdicts: dict[str, dict[str, Verdict]] = {}
    for pid, meta in store.iter_metadata({"touched": {"$gte": stamp}}, stored=True):
        decided = {}
        for who, own in everyone(meta, first or person).items():
            status, starred = str(own.get("status") or Status.NEW.value), own.get("starred") is True
            if (status == Status.NEW.value and not starred) or own.get("seed") is True:
                continue  # undecided, or an import's (`ingest --accept`), not a reading
            decided[who] = Verdict(status, starred, str(own.get("decided_at") or ""))
        if any(v.decided_at >= cutoff for v in decided.values()):
            verdicts[pid] = decided
    items = {i.paper.id: i for i in store.get_many(list(verdicts))}
    papers = [LabPaper(items[pid], v) for pid, v in verdicts.items() if pid in items]
    return Lab(since=since, person=person, people=people, papers=papers)


def render(lab: Lab) -> str:
    """The lab's digest in Markdown: for the reading group."""
    out = [f"# Lab digest since {lab.since.isoformat()}", ""]
    accepted = lab.accepted
    out.append(
        f"{len(accepted)} papers accepted by the group ({', '.join(lab.people)}); "
        f"{len(lab.disputed)} where people disagree."
    )
    sections = (
        ("Accepted by the group", accepted),
        ("Where people disagree", lab.disputed),
    )
    for title, papers in sections:
        out += ["", f"## {title}", ""]
        if not papers:
            out.append("None.")
        for paper in papers:
            # The paper as anyone sees it: the decision and note of whoever runs this left out.
            out += paper_block(paper.item.model_copy(update={"decision": Decision()}), None)[:-1]
            who = ", ".join(f"{md(p)} {v.mark}" for p, v in sorted(paper.verdicts.items()))
            waiting = paper.undecided(lab.people)
            out.append(
                f"  - *Decided by* {who}" + (f"; *not yet*: {md(', '.join(waiting))}" if waiting else "")
            )
    return "\n".join(out).rstrip() + "\n"
