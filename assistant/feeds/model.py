"""Saved feeds and their state, kept in the store (a Chroma server holds them with the papers).

A feed's definition (what to fetch, set by `triage feed add/edit`) and its state (watermark,
what it has brought, the last run's counts and error, written by `triage fetch`) are two
records in the store's meta collection, like reading-list definitions: editing a feed while a
fetch runs loses neither.
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field, ValidationError

from assistant.errors import TriageError
from assistant.models import now_utc
from assistant.store import Store

FEED = "feed"
FEED_STATE = "feed-state"
SEEN_KEPT = 5000  # keys of items a feed remembers having brought
_CATEGORY = re.compile(r"^[a-z][a-z-]*(\.[A-Za-z][A-Za-z-]*)?$")


class Kind(StrEnum):
    ARXIV = "arxiv"
    HF_DAILY = "hf-daily"
    S2_AUTHOR = "s2-author"
    S2_RECOMMEND = "s2-recommend"
    RSS = "rss"


class FeedSpec(BaseModel):
    """What a feed fetches."""

    name: str
    kind: Kind
    query: str | None = None  # arXiv search query
    categories: list[str] = Field(default_factory=list)  # arXiv categories
    author: str | None = None  # Semantic Scholar author id
    url: str | None = None  # RSS/Atom
    max: int = Field(default=200, ge=1, le=5000)  # new papers a run brings at most
    first_days: int = Field(default=3, ge=0, le=365)  # how far back the first run looks
    created_at: datetime = Field(default_factory=now_utc)

    def describe(self) -> str:
        """The source in a few words, as `feed ls` shows it."""
        if self.kind is Kind.ARXIV:
            return f"arXiv: {self.query}" if self.query else f"arXiv: {', '.join(self.categories)}"
        if self.kind is Kind.HF_DAILY:
            return "Hugging Face daily papers"
        if self.kind is Kind.S2_AUTHOR:
            return f"Semantic Scholar author {self.author}"
        if self.kind is Kind.S2_RECOMMEND:
            return "Semantic Scholar recommendations from your decisions"
        return f"RSS/Atom: {self.url}"

    def source(self) -> tuple[str, ...]:
        """What the feed fetches, alike for two feeds that would fetch the same papers: the
        query with its spacing evened out, the categories as a set, the address without what
        does not change the document (the case of scheme and host, a default port, a trailing
        slash, a fragment). Limits (--max, --first-days) are not part of it."""
        if self.kind is Kind.ARXIV:
            return (self.kind, " ".join((self.query or "").split()), *sorted(set(self.categories)))
        if self.kind is Kind.S2_AUTHOR:
            return (self.kind, str(self.author))
        if self.kind is Kind.RSS:
            return (self.kind, _same_address(self.url or ""))
        return (self.kind,)  # one Hugging Face daily list, one set of decisions to recommend from


def _same_address(url: str) -> str:
    """An RSS address as `FeedSpec.source` compares it."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    netloc = (parts.hostname or "") + (f":{port}" if port and port != default else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, ""))


class FeedState(BaseModel):
    """What a feed has brought so far; written only after its papers are stored."""

    name: str
    watermark: str | None = None  # the newest item stored (ISO date or time), for dated sources
    seen: dict[str, str] = Field(default_factory=dict)  # item key -> its date ('' if none)
    etag: str | None = None
    last_modified: str | None = None
    last_run: datetime | None = None
    last_ok: datetime | None = None
    fetched: int = 0
    new: int = 0
    already_seen: int = 0
    skipped: int = 0
    total_new: int = 0
    error: str | None = None
    notes: list[str] = Field(default_factory=list)


def check_spec(values: dict[str, Any]) -> FeedSpec:
    """A feed definition from `feed add/edit` options, or a one-line error saying what is wrong."""
    name = " ".join(str(values.get("name") or "").split())
    if not name:
        raise TriageError("a feed needs a name")
    if len(name) > 100:
        raise TriageError("a feed's name must be at most 100 characters")
    values = {**values, "name": name}
    kind = values.get("kind")
    if kind == Kind.ARXIV:
        if not values.get("query") and not values.get("categories"):
            raise TriageError("an arXiv feed needs a query or categories")
        bad = [c for c in values.get("categories") or [] if not _CATEGORY.match(c)]
        if bad:
            raise TriageError(f"{bad[0]!r} is not an arXiv category (e.g. cs.CL, math.PR, hep-th)")
    if kind == Kind.S2_AUTHOR and not str(values.get("author") or "").isdigit():
        raise TriageError(
            f"{values.get('author')!r} is not a Semantic Scholar author id: the number at the end "
            "of the author's page address (semanticscholar.org/author/NAME/2262347)"
        )
    if kind == Kind.RSS:
        parsed = urlsplit(str(values.get("url") or ""))
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise TriageError(f"{values.get('url')!r} is not an http(s) address of an RSS or Atom feed")
    try:
        return FeedSpec.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise TriageError(f"invalid feed: {problems}") from None


class Feeds:
    """The saved feeds of a store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def all(self) -> dict[str, FeedSpec]:
        specs = []
        for value in self.store.named_records(FEED).values():
            try:
                specs.append(FeedSpec.model_validate(value))
            except ValidationError:
                continue  # written by a newer version: left alone
        return {s.name: s for s in sorted(specs, key=lambda s: s.name.casefold())}

    def get(self, name: str) -> FeedSpec:
        feeds = self.all()
        if name in feeds:
            return feeds[name]
        folded = {n.casefold(): n for n in feeds}
        if name.casefold() in folded:
            return feeds[folded[name.casefold()]]
        known = ", ".join(feeds) or "none yet ('triage feed add NAME --arxiv QUERY' makes one)"
        raise TriageError(f"no feed named {name!r}; feeds: {known}")

    def add(self, spec: FeedSpec) -> None:
        """Save a new feed; its name and its source must both be new."""
        if any(n.casefold() == spec.name.casefold() for n in self.all()):
            raise TriageError(f"a feed named {spec.name!r} exists: 'triage feed edit' changes it")
        self.check_source(spec)
        self.store.put_named_record(FEED, spec.model_dump(mode="json"))

    def check_source(self, spec: FeedSpec) -> None:
        """Refuse a source another feed already fetches: two feeds of one source fetch every
        paper twice (twice the requests against the provider's rate limit) for nothing, since
        the second finds only papers the first stored."""
        for other in self.all().values():
            if other.name.casefold() != spec.name.casefold() and other.source() == spec.source():
                raise TriageError(
                    f"the feed {other.name!r} already fetches this source ({other.describe()}); "
                    f"'triage feed edit {shlex.quote(other.name)}' changes its --max or --first-days"
                )

    def replace(self, spec: FeedSpec) -> None:
        self.store.put_named_record(FEED, spec.model_dump(mode="json"))

    def remove(self, name: str) -> FeedSpec:
        spec = self.get(name)
        self.store.delete_named_record(FEED, spec.name)
        self.store.delete_named_record(FEED_STATE, spec.name)
        return spec

    def states(self) -> dict[str, FeedState]:
        out = {}
        for name, value in self.store.named_records(FEED_STATE).items():
            try:
                out[name] = FeedState.model_validate(value)
            except ValidationError:
                out[name] = FeedState(name=name)
        return out

    def state(self, name: str) -> FeedState:
        return self.states().get(name) or FeedState(name=name)

    def save_state(self, state: FeedState) -> None:
        if len(state.seen) > SEEN_KEPT:
            state.seen = dict(sorted(state.seen.items(), key=lambda kv: kv[1])[-SEEN_KEPT:])
        self.store.put_named_record(FEED_STATE, state.model_dump(mode="json"))

    def reset(self, name: str) -> None:
        """Forget what a feed has brought: its next fetch starts as a first run."""
        self.store.delete_named_record(FEED_STATE, name)
