"""What the LLM must return. Docstrings and field descriptions are part of the prompt.

Validators enforce the scale and the agenda's topic names (passed as validation context, or
set for the call under way in CALL_CONTEXT); instructor sends a violation back to the model and
asks again.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Self

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

MAX_SUMMARY_WORDS = 40  # the prompt asks for 30; a little slack before re-asking
# The expected topics and paper ids of the LLM call under way in this task ({"topics": [...],
# "paper_ids": [...]}). The engine sets it instead of handing instructor a `context`: instructor
# renders every message as a Jinja template when given one, which costs a template compile per
# message per call and would evaluate `{{ ... }}` written in a paper's (untrusted) text.
CALL_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("triage_call_context", default=None)


def _context(info: ValidationInfo) -> dict[str, Any]:
    return dict(info.context or CALL_CONTEXT.get() or {})


class TopicAnswer(BaseModel):
    """How relevant the paper is to one agenda topic."""

    topic: str = Field(description="The agenda topic's name, exactly as written in the agenda.")
    score: int = Field(
        ge=0,
        le=10,
        description="Integer 0-10: 0 unrelated, 1-3 passing mention, 4-6 relevant, 7-8 clearly about it, "
        "9-10 central to it.",
    )
    reason: str = Field(description="One sentence: what in the paper earns this score.")


class PaperAnswer(BaseModel):
    """Your reading of one paper against the researcher's agenda."""

    tags: list[str] = Field(
        min_length=2,
        max_length=6,
        description="2 to 6 short lowercase tags (methods, tasks, domains); "
        "reuse the library's tags when they fit.",
    )
    summary: str = Field(description="One sentence of at most 30 words, in your own words.")
    topics: list[TopicAnswer] = Field(description="Exactly one entry for every agenda topic, by name.")

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, tags: list[str]) -> list[str]:
        cleaned = list(dict.fromkeys(" ".join(t.lower().split()) for t in tags if t.strip()))
        if not 2 <= len(cleaned) <= 6:
            raise ValueError("give 2 to 6 distinct non-empty tags")
        return cleaned

    @field_validator("summary")
    @classmethod
    def _one_short_sentence(cls, summary: str) -> str:
        summary = " ".join(summary.split())
        if not summary:
            raise ValueError("the summary is empty")
        if len(summary.split()) > MAX_SUMMARY_WORDS:
            raise ValueError(
                f"the summary has {len(summary.split())} words; write one sentence of at most 30"
            )
        return summary

    @model_validator(mode="after")
    def _one_entry_per_topic(self, info: ValidationInfo) -> Self:
        expected: list[str] = list(_context(info).get("topics", []))
        if expected:
            check_topics([t.topic for t in self.topics], expected)
        return self


def check_topics(given: list[str], expected: list[str]) -> None:
    """Raise a ValueError naming what is missing, unknown or repeated."""
    missing = [t for t in expected if t not in given]
    unknown = [t for t in given if t not in expected]
    repeated = sorted({t for t in given if given.count(t) > 1})
    problems = []
    if missing:
        problems.append(f"missing topics: {missing}")
    if unknown:
        problems.append(f"unknown topics: {unknown} (use the agenda's names exactly)")
    if repeated:
        problems.append(f"topics given more than once: {repeated}")
    if problems:
        raise ValueError("; ".join(problems) + f". Give exactly one entry for each of {expected}.")


class IdentifiedPaperAnswer(PaperAnswer):
    """Your reading of one paper, identified by the id shown in its <<<PAPER id=...>>> marker."""

    paper_id: str = Field(description="The paper's id, exactly as in its marker.")


class BatchAnswer(BaseModel):
    """Your readings of all the papers given, exactly one per paper id."""

    papers: list[IdentifiedPaperAnswer] = Field(description="One assessment for each paper id given.")

    @model_validator(mode="after")
    def _one_per_paper(self, info: ValidationInfo) -> Self:
        expected: list[str] = list(_context(info).get("paper_ids", []))
        given = [p.paper_id for p in self.papers]
        missing = [i for i in expected if i not in given]
        extra = [i for i in given if i not in expected]
        repeated = sorted({i for i in given if given.count(i) > 1})
        if missing or extra or repeated:
            raise ValueError(
                f"return exactly one assessment per paper id {expected}: "
                f"missing {missing}, unexpected {extra}, repeated {repeated}"
            )
        return self


def answers_by_id(answer: Any, paper_ids: list[str]) -> dict[str, PaperAnswer]:
    """The validated answer as paper id -> PaperAnswer, for one paper or a batch."""
    if isinstance(answer, BatchAnswer):
        return {p.paper_id: p for p in answer.papers}
    return {paper_ids[0]: answer}
