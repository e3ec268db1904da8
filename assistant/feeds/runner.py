"""`triage fetch`: bring what is new from saved feeds into the store.

Each feed is fetched, its papers deduplicated against the store and stored (`store_papers`:
a new arXiv version, the published DOI of a preprint or a paper another feed brought merges
into the paper already there and counts as "already seen"), and only then does its state move
(watermark, what it has brought). A feed that fails records its error and leaves its state as
it was; the others go on. A run killed half way loses nothing: the next one fetches again from
the last stored watermark, and storing is idempotent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from assistant.config import Settings
from assistant.errors import TriageError, is_disk_full, is_read_only
from assistant.feeds.model import Feeds, FeedSpec, FeedState, Kind
from assistant.feeds.s2 import fetch_s2_author, fetch_s2_recommend
from assistant.feeds.sources import SOURCES, Batch, Context
from assistant.ingest import FileReport, record_import, store_papers
from assistant.models import now_utc
from assistant.store import Store

FETCHERS: dict[Kind, Callable[[FeedSpec, FeedState, Context], Batch]] = {
    **SOURCES,
    Kind.S2_AUTHOR: fetch_s2_author,
    Kind.S2_RECOMMEND: fetch_s2_recommend,
}


@dataclass
class FeedReport:
    """What one feed brought: fetched = records received that it had not brought before."""

    name: str
    source: str
    fetched: int = 0
    new: int = 0
    already_seen: int = 0
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    created: list[str] = field(default_factory=list)  # papers it made
    ids: list[str] = field(default_factory=list)  # stored papers its records went to

    @property
    def ok(self) -> bool:
        return self.error is None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TriageError):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def fetch_feed(
    feeds: Feeds,
    spec: FeedSpec,
    ctx: Context,
    on_stored: Callable[[int], None] | None = None,
    on_fetched: Callable[[int], None] | None = None,
) -> FeedReport:
    """Fetch one feed and store what it brought; its state moves only once that is stored."""
    start = time.perf_counter()
    report = FeedReport(spec.name, spec.describe())
    state = feeds.state(spec.name)
    state.last_run = now_utc()
    try:
        batch = FETCHERS[spec.kind](spec, state, ctx)
    except (TriageError, httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # A provider's error or an answer of a shape nobody documented: this feed fails.
        report.error = _reason(exc)
    else:
        report.fetched = len(batch.items) + len(batch.skipped)
        report.skipped, report.notes = batch.skipped, batch.notes
        if on_fetched:
            on_fetched(len(batch.items))
        stored = FileReport(path=spec.name)
        try:
            store_papers(ctx.store, [i.paper for i in batch.items], stored, on_stored)
        except Exception as exc:
            if not (isinstance(exc, TriageError) or is_disk_full(exc) or is_read_only(exc)):
                raise
            report.error = f"storing failed, the feed stays where it was: {_reason(exc)}"
        else:
            report.new, report.already_seen = stored.new, stored.merged + stored.unchanged
            report.created, report.ids = stored.created, stored.ids
            state = state.model_copy(update=batch.state)
            state.fetched, state.new, state.already_seen = report.fetched, report.new, report.already_seen
            state.skipped, state.notes = len(report.skipped), report.notes
            state.total_new += report.new
            state.last_ok, state.error = state.last_run, None
    if report.error:
        state.error = report.error
    try:
        feeds.save_state(state)
    except Exception as exc:
        if report.error is None:
            raise  # the papers are stored; without the state the next fetch brings them again
        if not (isinstance(exc, TriageError) or is_disk_full(exc) or is_read_only(exc)):
            raise
    report.seconds = time.perf_counter() - start
    return report


def fetch_feeds(
    store: Store,
    settings: Settings,
    names: Sequence[str] = (),
    *,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_feed: Callable[[FeedSpec], None] | None = None,
    on_fetched: Callable[[int], None] | None = None,
    on_stored: Callable[[int], None] | None = None,
    context: Context | None = None,
) -> list[FeedReport]:
    """Fetch the named feeds (every feed when none is named), one after the other."""
    feeds = Feeds(store)
    chosen = [feeds.get(n) for n in dict.fromkeys(names)] if names else list(feeds.all().values())
    if not chosen:
        raise TriageError(
            "no saved feeds: 'triage feed add NAME --arxiv QUERY' (or --hf-daily, ...) makes one"
        )
    ctx = context or Context(settings, store, now or datetime.now(UTC), sleep)
    reports = []
    try:
        for spec in chosen:
            if on_feed:
                on_feed(spec)
            reports.append(fetch_feed(feeds, spec, ctx, on_stored, on_fetched))
    finally:
        if context is None:
            ctx.close()
        # `triage rm --last-import` undoes what this fetch made
        record_import(store, [FileReport(path=f"feed {r.name}", created=r.created) for r in reports])
    return reports
