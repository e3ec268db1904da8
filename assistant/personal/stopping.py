"""When to stop: a statistical test that the relevant papers found reach a target recall.

The queue's order finds the relevant papers early, but it cannot say what it has not found. The
test of Callaghan and Müller-Hansen (Systematic Reviews 9, 2020, "Statistical stopping
criteria for automated screening in systematic reviews") can: when the researcher thinks they
have seen enough, the papers still undecided become an urn, papers are drawn from it at random
and decided, and after each one a hypergeometric test asks whether the urn could still hold so
many relevant papers that the recall is below the target. Once that is unlikely enough (below
1 - confidence), the researcher may stop with that confidence.

`RecallCheck` is a check under way: the urn, the random order of the draw and the papers
decided through it, kept in the store as a named record so that it survives between commands.
Decisions are the store's own: a sampled paper counts as relevant when it is accepted, starred
or marked maybe (maybes count, the cautious choice). An urn paper decided outside the check
(from the queue) leaves the urn and counts among the papers found before, which keeps the test
valid: the draw's order does not depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scipy.stats import hypergeom

from assistant.models import Status
from assistant.personal.model import stable_order

CHECK_RECORD = "recall-check"
CHECK_NAME = "current"
TARGET = 0.95
CONFIDENCE = 0.95


def recall_p_value(urn: int, drawn: int, found_in_sample: int, found_before: int, target: float) -> float:
    """The p-value of "recall is below `target`" after `drawn` papers drawn at random from an
    urn of `urn` papers held `found_in_sample` relevant ones, `found_before` relevant papers
    having been found outside the urn. Small: the target recall is reached."""
    if drawn >= urn:
        return 0.0  # every paper decided: the recall is known
    found = found_before + found_in_sample
    # Recall is below the target when the urn holds at least this many relevant papers.
    least = math.floor(found / target - found_before) + 1
    least = max(least, found_in_sample)
    if least > urn:
        return 0.0
    return float(hypergeom.cdf(found_in_sample, urn, least, drawn))


def draws_to_stop(
    urn: int, drawn: int, found_in_sample: int, found_before: int, target: float, alpha: float
) -> int | None:
    """How many more papers, none of them relevant, would let the test stop (None: more than
    the urn holds)."""
    low, high = 0, urn - drawn
    if recall_p_value(urn, drawn + high, found_in_sample, found_before, target) >= alpha:
        return None
    while low < high:  # the p-value falls as irrelevant draws add up
        mid = (low + high) // 2
        if recall_p_value(urn, drawn + mid, found_in_sample, found_before, target) < alpha:
            high = mid
        else:
            low = mid + 1
    return low


@dataclass(frozen=True)
class CheckResult:
    """Where a check stands."""

    urn: int  # papers in the urn (undecided at the start, less those decided outside the check)
    drawn: int
    relevant_in_sample: int
    relevant_before: int
    target: float
    confidence: float
    p_value: float
    more: int | None  # irrelevant draws that would let it stop
    left_out: int  # papers added to the store since the check began (not covered)

    @property
    def reached(self) -> bool:
        return self.p_value < 1 - self.confidence

    def line(self) -> str:
        head = (
            f"{self.drawn} of {self.urn:,} undecided papers drawn at random: {self.relevant_in_sample} "
            f"relevant; {self.relevant_before} relevant found before"
        )
        if self.reached:
            verdict = (
                f"recall of at least {self.target:.0%} is reached with {self.confidence:.0%} confidence "
                f"(p = {self.p_value:.3f}): you can stop"
            )
        elif self.more is None:
            verdict = (
                f"recall of {self.target:.0%} cannot be shown with {self.confidence:.0%} confidence by "
                f"sampling this urn (p = {self.p_value:.2f}); keep working down the queue"
            )
        else:
            verdict = (
                f"not yet shown (p = {self.p_value:.2f}, stop below {1 - self.confidence:.2f}): about "
                f"{self.more} more papers without a relevant one would do it"
            )
        return f"{head}; {verdict}"

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "drawn": self.drawn,
            "relevant_in_sample": self.relevant_in_sample,
            "relevant_before": self.relevant_before,
            "target": self.target,
            "confidence": self.confidence,
            "p_value": self.p_value,
            "reached": self.reached,
            "more_needed": self.more,
            "added_since": self.left_out,
        }


def counts_as_relevant(status: Status, starred: bool) -> bool:
    return starred or status in (Status.ACCEPTED, Status.MAYBE)


@dataclass
class RecallCheck:
    """A recall check under way (see the module's summary)."""

    started: str
    target: float
    confidence: float
    seed: str
    urn: list[str]
    sample: list[str] = field(default_factory=list)  # decided through the check, in order

    @classmethod
    def begin(
        cls, undecided: Sequence[str], target: float = TARGET, confidence: float = CONFIDENCE, seed: str = ""
    ) -> RecallCheck:
        started = datetime.now().astimezone().isoformat(timespec="seconds")
        return cls(started, target, confidence, seed or started, sorted(undecided))

    def to_record(self) -> dict[str, Any]:
        return {
            "name": CHECK_NAME,
            "started": self.started,
            "target": self.target,
            "confidence": self.confidence,
            "seed": self.seed,
            "urn": self.urn,
            "sample": self.sample,
        }

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> RecallCheck:
        return cls(
            started=str(value["started"]),
            target=float(value["target"]),
            confidence=float(value["confidence"]),
            seed=str(value["seed"]),
            urn=[str(p) for p in value["urn"]],
            sample=[str(p) for p in value.get("sample", [])],
        )

    def draw_order(self) -> list[str]:
        """The urn in the check's random order (fixed by its seed)."""
        return [self.urn[i] for i in stable_order(self.urn, salt=self.seed)]

    def next_papers(self, decisions: Mapping[str, tuple[Status, bool]], count: int = 1) -> list[str]:
        """The next undecided papers of the draw (`decisions`: every stored paper's status and star)."""
        out = []
        for pid in self.draw_order():
            if pid in decisions and decisions[pid][0] is Status.NEW and not decisions[pid][1]:
                out.append(pid)
                if len(out) == count:
                    break
        return out

    def record(self, pid: str) -> None:
        """A paper of the draw was decided through the check."""
        if pid not in self.sample:
            self.sample.append(pid)

    def result(self, decisions: Mapping[str, tuple[Status, bool]]) -> CheckResult:
        """The test on the store's decisions as they are now."""

        def decided(pid: str) -> bool:
            status, starred = decisions[pid]
            return status is not Status.NEW or starred

        urn = {p for p in self.urn if p in decisions}
        sample = [p for p in self.sample if p in urn and decided(p)]
        taken = set(sample)
        outside = [p for p in urn if p not in taken and decided(p)]
        relevant = {p for p, (status, starred) in decisions.items() if counts_as_relevant(status, starred)}
        in_sample = sum(1 for p in sample if p in relevant)
        before = len(relevant - taken)
        size = len(urn) - len(outside)
        alpha = 1 - self.confidence
        return CheckResult(
            urn=size,
            drawn=len(sample),
            relevant_in_sample=in_sample,
            relevant_before=before,
            target=self.target,
            confidence=self.confidence,
            p_value=recall_p_value(size, len(sample), in_sample, before, self.target),
            more=draws_to_stop(size, len(sample), in_sample, before, self.target, alpha),
            left_out=len(set(decisions) - set(self.urn) - {p for p in decisions if decided(p)}),
        )
