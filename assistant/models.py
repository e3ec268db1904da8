"""The data model: Paper, Assessment, Decision, and the stable paper id."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, field_validator

_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_OLD = re.compile(r"(?<![\w-])([a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?\b")
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_DOI = re.compile(r"(10\.\d{4,9}/\S+)", re.IGNORECASE)
_LATEX_CMD = re.compile(r"\\[a-zA-Z]+\*?|\\.")


def now_utc() -> datetime:
    return datetime.now(UTC)


def normalize_arxiv_id(value: str | None) -> str | None:
    """`arXiv:2401.01234v2`, `https://arxiv.org/abs/2401.01234` -> `2401.01234`; None if none."""
    if not value:
        return None
    text = value.strip()
    doi = _ARXIV_DOI.match(text)
    if doi:
        text = doi.group(1)
    m = _ARXIV_NEW.search(text)
    if m:
        return m.group(1)
    m = _ARXIV_OLD.search(text)
    return m.group(1) if m else None


def normalize_doi(value: str | None) -> str | None:
    """Any DOI spelling (URL, `doi:` prefix, case) -> `10.xxxx/...` lowercased; None if none."""
    if not value:
        return None
    m = _DOI.search(value.strip())
    if not m:
        return None
    return m.group(1).rstrip(".,;").lower()


def normalize_title(title: str) -> str:
    """Case, accents, LaTeX, punctuation and whitespace folded away: the key for title matching."""
    text = _LATEX_CMD.sub(" ", title)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"[^\w\s]|_", " ", text.casefold())
    return " ".join(text.split())


def clean_text(value: str) -> str:
    """Collapse runs of whitespace (titles and names must be one line)."""
    return " ".join(unicodedata.normalize("NFKC", value).split())


def paper_id_for(*, arxiv_id: str | None = None, doi: str | None = None, title: str = "") -> str:
    """The stable id: `arxiv:<id>` without version, else `doi:<lowercased>`, else a title hash."""
    arxiv = normalize_arxiv_id(arxiv_id) or normalize_arxiv_id(normalize_doi(doi))
    if arxiv:
        return f"arxiv:{arxiv}"
    norm_doi = normalize_doi(doi)
    if norm_doi:
        return f"doi:{norm_doi}"
    digest = hashlib.sha256(normalize_title(title).encode("utf-8")).hexdigest()[:16]
    return f"title:{digest}"


class Status(StrEnum):
    NEW = "new"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    MAYBE = "maybe"


class Paper(BaseModel):
    """One paper, whatever source it came from."""

    id: str
    title: str
    abstract: str = ""
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    date: str | None = None
    venue: str | None = None
    categories: list[str] = Field(default_factory=list)
    arxiv_id: str | None = None
    doi: str | None = None
    url: str | None = None
    sources: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str) -> str:
        value = clean_text(value)
        if not value:
            raise ValueError("title is empty")
        return value

    @classmethod
    def create(cls, **fields: Any) -> Paper:
        """Build a paper, normalising identifiers and deriving its stable id."""
        fields["arxiv_id"] = normalize_arxiv_id(fields.get("arxiv_id")) or normalize_arxiv_id(
            normalize_doi(fields.get("doi"))
        )
        fields["doi"] = normalize_doi(fields.get("doi"))
        fields["id"] = paper_id_for(
            arxiv_id=fields["arxiv_id"], doi=fields["doi"], title=str(fields.get("title") or "")
        )
        return cls(**fields)

    @property
    def document(self) -> str:
        """The text that is embedded and searched: title, blank line, abstract."""
        return f"{self.title}\n\n{self.abstract}" if self.abstract else self.title

    @property
    def day(self) -> int | None:
        """The paper's date as a sortable number, yyyymmdd (a year alone counts as its 1 January)."""
        if self.date and re.match(r"^\d{4}-\d{2}-\d{2}", self.date):
            return int(self.date[:10].replace("-", ""))
        if self.year:
            return self.year * 10000 + 101
        return None

    @property
    def link(self) -> str | None:
        if self.arxiv_id:
            return f"https://arxiv.org/abs/{self.arxiv_id}"
        if self.doi:
            return f"https://doi.org/{self.doi}"
        return self.url

    def merged_with(self, other: Paper) -> Paper:
        """Merge two records of the same paper: the richer field wins, lists are unioned."""

        def richer(a: str | None, b: str | None) -> str | None:
            if not a:
                return b
            if not b:
                return a
            return b if len(b) > len(a) else a

        def fuller(a: str, b: str) -> str:
            # The embedded text changes only for a clearly fuller version (a complete abstract
            # over a truncated one), not for punctuation or LaTeX spelled another way: a new
            # text means a new embedding and a stale assessment.
            return b if len(b) > 1.1 * len(a) + 10 else a

        def union(a: list[str], b: list[str]) -> list[str]:
            return list(dict.fromkeys([*a, *b]))

        return Paper(
            id=self.id,
            title=fuller(self.title, other.title),
            abstract=fuller(self.abstract, other.abstract),
            authors=other.authors if len(other.authors) > len(self.authors) else self.authors,
            year=self.year or other.year,
            date=richer(self.date, other.date),
            venue=richer(self.venue, other.venue),
            categories=union(self.categories, other.categories),
            arxiv_id=self.arxiv_id or other.arxiv_id,
            doi=self.doi or other.doi,
            url=self.url or other.url,
            sources=union(self.sources, other.sources),
            extra={**other.extra, **self.extra},
        )


class TopicScore(BaseModel):
    """How relevant a paper is to one agenda topic."""

    topic: str
    score: int = Field(ge=0, le=10)
    reason: str = ""


class Assessment(BaseModel):
    """What an engine made of a paper against the agenda."""

    tags: list[str] = Field(default_factory=list)
    summary: str = ""
    topics: list[TopicScore] = Field(default_factory=list)
    relevance: float = 0.0
    engine: str
    model: str | None = None
    key: str = ""
    # The key without the calibration examples in it (set when there were examples): what
    # tells whether the assessment was made against another agenda, prompt or paper text.
    base_key: str = ""
    agenda_hash: str = ""
    created_at: datetime = Field(default_factory=now_utc)


class Decision(BaseModel):
    """What the researcher decided about a paper."""

    status: Status = Status.NEW
    starred: bool = False
    note: str = ""
    tags: list[str] = Field(default_factory=list)
    lists: list[str] = Field(default_factory=list)
    decided_at: datetime | None = None


class MergeEntry(BaseModel):
    """A record of another identity merged into a stored paper: how it was recognised, when,
    and the record as it came (so that it can be split off again)."""

    how: str
    at: datetime
    record: Paper


class MergeLog(BaseModel):
    """A paper's merged records, and the paper as it was before the first of them."""

    base: Paper
    entries: list[MergeEntry] = Field(default_factory=list)


class StoredPaper(BaseModel):
    """A paper as the store holds it, with the decision and the latest assessment."""

    paper: Paper
    decision: Decision = Field(default_factory=Decision)
    assessment: Assessment | None = None
    added_at: datetime | None = None
    failure: tuple[str, str] | None = None  # (cache key, reason) of the last failed assessment
