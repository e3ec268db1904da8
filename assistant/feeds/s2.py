"""Semantic Scholar: an author's new papers, recommendations from the researcher's decisions,
and the batch and title look-ups enrichment makes (Graph API and Recommendations API).

Requests go one a second by default (the public pool's polite rate); `S2_API_KEY` is sent as
`x-api-key` when set. Answers are read as the API documents them: `{"data": [...], "next": N}`
for an author's papers, `{"recommendedPapers": [...]}`, a list with `null` for unknown ids
from the batch endpoint.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from assistant.feeds.model import FeedSpec, FeedState
from assistant.feeds.sources import Batch, Context, Item, source_label
from assistant.ingest.csljson import s2_to_record
from assistant.ingest.records import RecordError, record_to_paper
from assistant.models import Paper
from assistant.web import FetchError

FIELDS = "title,abstract,authors,year,venue,publicationDate,externalIds,url"
AUTHOR_PAGE = 500
AUTHOR_PAGES_MAX = 20  # 10,000 papers: no author has more
BATCH = 500  # ids per batch request, the API's limit
SEEDS = 100  # positive and negative papers sent for recommendations, most recent decisions first


def _base(ctx: Context) -> str:
    return ctx.settings.s2_url.rstrip("/")


def _stamp(entry: dict[str, Any]) -> str:
    when = entry.get("publicationDate")
    if isinstance(when, str) and when:
        return when[:10]
    year = entry.get("year")
    return f"{year}-01-01" if isinstance(year, int) else ""


def s2_paper(entry: Any, source: str) -> Paper:
    """A Graph API paper object as a Paper (RecordError if it is not one)."""
    if not isinstance(entry, dict):
        raise RecordError(f"expected a paper object, got {type(entry).__name__}")
    return record_to_paper(s2_to_record(entry), source)


def s2_id(paper: Paper) -> str | None:
    """How Semantic Scholar knows a paper: its own id, else arXiv id, else DOI."""
    own = paper.extra.get("s2_paper_id")
    if isinstance(own, str) and own:
        return own
    if paper.arxiv_id:
        return f"ARXIV:{paper.arxiv_id}"
    if paper.doi:
        return f"DOI:{paper.doi}"
    return None


def fetch_s2_author(spec: FeedSpec, state: FeedState, ctx: Context) -> Batch:
    """The author's papers the feed has not brought before. The first fetch takes the author's
    past as seen and brings only papers of the last `first_days` days."""
    client = ctx.client("s2")
    first = state.last_ok is None and not state.seen
    cutoff = (ctx.now - timedelta(days=spec.first_days)).date().isoformat()
    batch = Batch()
    listed: dict[str, str] = {}
    offset: int | None = 0
    for _ in range(AUTHOR_PAGES_MAX):
        if offset is None:
            break
        data, cut = client.get_items(
            f"{_base(ctx)}/graph/v1/author/{spec.author}/papers",
            AUTHOR_PAGE,
            params={"fields": FIELDS, "offset": offset, "limit": AUTHOR_PAGE},
        )
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise FetchError("the Semantic Scholar API answered without a 'data' list of papers")
        if cut:
            batch.notes.append(
                f"the Semantic Scholar API sent more than the {AUTHOR_PAGE} papers a page asks for: "
                f"only the first {len(data['data'])} were read"
            )
        for number, entry in enumerate(data["data"], start=offset + 1):
            key = str(entry.get("paperId") or "") if isinstance(entry, dict) else ""
            if not key:
                batch.skipped.append(f"paper {number}: no paperId")
                continue
            stamp = _stamp(entry)
            listed[key] = stamp
            if key in state.seen or (first and stamp < cutoff):
                continue
            try:
                batch.items.append(Item(s2_paper(entry, source_label(spec)), key, stamp))
            except RecordError as exc:
                batch.skipped.append(f"paper {number} ({key}): {exc}")
        offset = data.get("next") if isinstance(data.get("next"), int) else None
    batch.items.sort(key=lambda i: i.stamp)
    later = batch.items[spec.max :]
    if later:
        batch.items = batch.items[: spec.max]
        batch.notes.append(f"stopped at the feed's maximum of {spec.max}; the next fetch brings the rest")
    unbrought = {i.key for i in later}
    seen = dict(state.seen)
    if first:  # the author's past, as listed today
        seen.update({k: v for k, v in listed.items() if k not in unbrought})
    seen.update({i.key: i.stamp for i in batch.items})
    batch.state = {"seen": seen}
    if first and listed:
        batch.notes.append(
            f"first fetch: the author's {len(listed) - len(batch.items)} earlier papers are taken as seen"
        )
    elif not batch.items:
        batch.notes.append("no paper by this author that the feed had not brought before")
    return batch


def seeds(ctx: Context) -> tuple[list[str], list[str]]:
    """Semantic Scholar ids of the accepted or starred papers (positives) and the rejected ones
    (negatives), most recently decided first."""
    pos: list[tuple[str, str]] = []
    neg: list[tuple[str, str]] = []
    where = {"$or": [{"status": "accepted"}, {"status": "rejected"}, {"starred": True}]}
    for pid, meta in ctx.store.iter_metadata(where):
        extra = meta.get("extra")
        paper = Paper(
            id=pid,
            title=str(meta.get("title") or pid),
            arxiv_id=meta.get("arxiv_id"),
            doi=meta.get("doi"),
            extra={"s2_paper_id": _s2_of(extra)} if _s2_of(extra) else {},
        )
        ident = s2_id(paper)
        if ident is None:
            continue
        when = str(meta.get("decided_at") or "")
        (neg if meta.get("status") == "rejected" and not meta.get("starred") else pos).append((when, ident))
    return [i for _, i in sorted(pos, reverse=True)[:SEEDS]], [
        i for _, i in sorted(neg, reverse=True)[:SEEDS]
    ]


def _s2_of(extra: Any) -> str | None:
    if not isinstance(extra, str) or "s2_paper_id" not in extra:
        return None
    value = json.loads(extra).get("s2_paper_id")
    return str(value) if value else None


def fetch_s2_recommend(spec: FeedSpec, state: FeedState, ctx: Context) -> Batch:
    """Recommendations for the researcher's decisions: accepted and starred papers as positives,
    rejected ones as negatives; those the feed brought before are left out."""
    batch = Batch()
    positives, negatives = seeds(ctx)
    if not positives:
        batch.notes.append(
            "no accepted paper with an arXiv id or DOI yet: accept some ('triage review') and "
            "recommendations follow"
        )
        return batch
    limit = min(spec.max, 500)
    data, cut = ctx.client("s2").post_items(
        f"{_base(ctx)}/recommendations/v1/papers/",
        limit,
        params={"fields": FIELDS, "limit": limit},
        json={"positivePaperIds": positives, "negativePaperIds": negatives},
    )
    if not isinstance(data, dict) or not isinstance(data.get("recommendedPapers"), list):
        raise FetchError("the Semantic Scholar API answered without a 'recommendedPapers' list")
    if cut:
        batch.notes.append(
            f"the Semantic Scholar API sent more than the {limit} recommendations asked for: only the "
            f"first {len(data['recommendedPapers'])} were read"
        )
    for number, entry in enumerate(data["recommendedPapers"], start=1):
        key = str(entry.get("paperId") or "") if isinstance(entry, dict) else ""
        if not key:
            batch.skipped.append(f"recommendation {number}: no paperId")
            continue
        if key in state.seen:
            continue
        try:
            batch.items.append(Item(s2_paper(entry, source_label(spec)), key, _stamp(entry)))
        except RecordError as exc:
            batch.skipped.append(f"recommendation {number} ({key}): {exc}")
    batch.state = {"seen": {**state.seen, **{i.key: i.stamp for i in batch.items}}}
    if not batch.items:
        batch.notes.append("no recommendation the feed had not brought before")
    return batch


def lookup(ctx: Context, ids: list[str]) -> list[Any]:
    """Graph API paper objects for these ids (`ARXIV:...`, `DOI:...`, S2 ids), None where
    unknown, in the order given; 500 ids a request."""
    out: list[Any] = []
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        data, cut = ctx.client("s2").post_items(
            f"{_base(ctx)}/graph/v1/paper/batch", len(chunk), params={"fields": FIELDS}, json={"ids": chunk}
        )
        if cut or not isinstance(data, list) or len(data) != len(chunk):
            raise FetchError("the Semantic Scholar batch endpoint did not answer one entry per id")
        out.extend(data)
    return out


def match_title(ctx: Context, title: str) -> Any:
    """The paper Semantic Scholar finds for a title (its best match), or None."""
    try:
        data = ctx.client("s2").get_json(
            f"{_base(ctx)}/graph/v1/paper/search/match", params={"query": title, "fields": FIELDS}
        )
    except FetchError as exc:
        if exc.status == 404:  # "Title match not found"
            return None
        raise
    found = data.get("data") if isinstance(data, dict) else None
    return found[0] if isinstance(found, list) and found else None
