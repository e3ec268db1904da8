"""`triage enrich`: fill in what papers lack (abstract, authors, venue, year, DOI, arXiv id) by
batch look-ups, within the same politeness rules as the feeds.

Semantic Scholar's batch endpoint first (500 papers a request, by arXiv id or DOI); arXiv's id
list for arXiv papers still without an abstract (100 a request, one every 3 s); then, for
papers with neither identifier, Semantic Scholar's title match, one request per paper, taken
only when the titles are near-identical. Only missing fields are filled; a paper's own values
stay. A new abstract changes the paper's text: it is embedded again and its assessment is
stale until `triage tag` runs. A paper looked up and not found is not asked again for a week.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.etree.ElementTree import ParseError

from rapidfuzz import fuzz

from assistant.config import Settings
from assistant.feeds.s2 import lookup, match_title, s2_id, s2_paper
from assistant.feeds.sources import Context
from assistant.ingest.arxiv import NS, entry_to_record, parse_feed
from assistant.ingest.dedupe import conflict
from assistant.ingest.records import RecordError, record_to_paper
from assistant.models import Paper, StoredPaper, normalize_title
from assistant.store import Store
from assistant.web import FetchError

FIELDS = ("abstract", "authors", "venue", "year", "doi", "arxiv_id")
TRIED_KEY = "enrich_tried"
RETRY_AFTER = 7 * 24 * 3600.0  # seconds before a paper no source knew is looked up again
ARXIV_IDS = 100  # ids per arXiv request
TITLE_MATCH = 95.0  # how alike a title match's title must be (rapidfuzz ratio of normalised titles)


@dataclass
class EnrichReport:
    candidates: int = 0  # papers lacking a wanted field
    looked_up: int = 0
    enriched: int = 0  # papers that gained a field
    filled: dict[str, int] = field(default_factory=dict)  # field -> papers that gained it
    not_found: int = 0
    skipped_recent: int = 0  # looked up in the last week and not found then
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0
    ids: list[str] = field(default_factory=list)  # the papers enriched

    @property
    def ok(self) -> bool:
        return not self.errors


def lacking(paper: Paper, missing: str) -> list[str]:
    """The wanted fields this paper lacks: with `abstract`, papers without an abstract (and
    then whatever else they lack); with `all`, any of FIELDS."""
    gaps = [f for f in FIELDS if not getattr(paper, f)]
    if missing == "abstract" and "abstract" not in gaps:
        return []
    return gaps


def _fill(current: Paper, found: Paper, gaps: list[str]) -> Paper | None:
    """The record that adds what `found` has of the gaps (None if nothing, or if an identifier
    says `found` is another paper)."""
    if conflict(current, found):
        return None
    values: dict[str, Any] = {f: getattr(found, f) for f in gaps if getattr(found, f)}
    if not values:
        return None
    return Paper(id=current.id, title=current.title, **values)


def _arxiv_records(ctx: Context, ids: list[str]) -> dict[str, Paper]:
    out: dict[str, Paper] = {}
    for start in range(0, len(ids), ARXIV_IDS):
        chunk = ids[start : start + ARXIV_IDS]
        for page in ctx.arxiv.pages(ids=chunk, maximum=len(chunk)):
            try:
                root = parse_feed(page)
            except ParseError as exc:
                raise FetchError(f"the arXiv API sent a response that is not XML: {exc}") from None
            for entry in root.findall("atom:entry", NS):
                try:
                    paper = record_to_paper(entry_to_record(entry), "")
                except RecordError:
                    continue
                if paper.arxiv_id:
                    out[paper.arxiv_id] = paper
    return out


def enrich(
    store: Store,
    settings: Settings,
    *,
    missing: str = "abstract",
    ids: Sequence[str] | None = None,
    titles: bool = True,
    retry: bool = False,
    context: Context | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> EnrichReport:
    """Fill in what the papers (these ids, or the whole store) lack; see the module's docstring."""
    start = time.perf_counter()
    report = EnrichReport()
    now = time.time()
    recent = set() if retry else set(store.iter_ids({TRIED_KEY: {"$gt": now - RETRY_AFTER}}))
    items: list[StoredPaper] = list(store.get_many(list(ids)) if ids is not None else store.iter_all())
    wanted: dict[str, tuple[Paper, list[str]]] = {}
    for item in items:
        gaps = lacking(item.paper, missing)
        if not gaps:
            continue
        report.candidates += 1
        if item.paper.id in recent:
            report.skipped_recent += 1
            continue
        wanted[item.paper.id] = (item.paper, gaps)
    if on_total:
        on_total(len(wanted))
    ctx = context or Context(settings, store, datetime.now(UTC))
    updates: dict[str, Paper] = {}

    def found(pid: str, paper: Paper | None) -> None:
        current, gaps = wanted[pid]
        update = _fill(current, paper, gaps) if paper is not None else None
        if update is None:
            return
        merged = updates[pid].merged_with(update) if pid in updates else update
        updates[pid] = merged
        gaps[:] = [g for g in gaps if not getattr(merged, g)]

    try:
        # 1. Semantic Scholar's batch endpoint, for every paper it can be asked about by id.
        by_id = {pid: ident for pid, (paper, _) in wanted.items() if (ident := s2_id(paper))}
        if by_id:
            answers = lookup(ctx, list(by_id.values()))
            for pid, answer in zip(by_id, answers, strict=True):
                try:
                    found(pid, s2_paper(answer, "") if answer is not None else None)
                except RecordError:
                    pass
            if on_progress:
                on_progress(len(by_id))
        # 2. arXiv for arXiv papers still without an abstract (Semantic Scholar often has none).
        still = {p.arxiv_id: pid for pid, (p, gaps) in wanted.items() if p.arxiv_id and "abstract" in gaps}
        if still:
            for arxiv_id, paper in _arxiv_records(ctx, list(still)).items():
                if arxiv_id in still:
                    found(still[arxiv_id], paper)
        # 3. Title match, one request per paper with no identifier.
        if titles:
            for pid, (paper, _) in wanted.items():
                if pid in by_id:
                    continue
                answer = match_title(ctx, paper.title)
                if answer is not None:
                    try:
                        candidate = s2_paper(answer, "")
                    except RecordError:
                        candidate = None
                    alike = candidate is not None and fuzz.ratio(
                        normalize_title(candidate.title), normalize_title(paper.title)
                    )
                    found(pid, candidate if alike and alike >= TITLE_MATCH else None)
                if on_progress:
                    on_progress(1)
    except FetchError as exc:
        report.errors.append(str(exc))  # what was found so far is still stored
    finally:
        report.requests = sum(c.requests for c in ctx.clients.values())
        if context is None:
            ctx.close()
    report.looked_up = len(wanted)
    for pid, update in updates.items():
        current = wanted[pid][0]
        for name in FIELDS:
            if getattr(update, name) and not getattr(current, name):
                report.filled[name] = report.filled.get(name, 0) + 1
    if updates:
        with store.write_lock():
            store.upsert_papers(list(updates.values()))
    report.enriched, report.ids = len(updates), list(updates)
    asked = [pid for pid in wanted if pid not in updates]
    report.not_found = len(asked) if not report.errors else 0
    if asked and not report.errors:
        store.set_paper_values({pid: {TRIED_KEY: now} for pid in asked})
    report.seconds = time.perf_counter() - start
    return report
