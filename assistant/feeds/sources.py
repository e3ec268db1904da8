"""The sources a feed fetches from: arXiv (query or categories), Hugging Face daily papers and
any RSS/Atom feed (Semantic Scholar's are in `s2`). Each turns what the provider answers into
papers, and says how the feed's state moves once they are stored.

Dated sources (arXiv, Hugging Face) look again a little before their watermark, since papers
can be listed late; what the feed brought before (its `seen` keys) is not brought again.
"""

from __future__ import annotations

import html
import io
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from xml.etree.ElementTree import ParseError

import feedparser

from assistant.config import Settings
from assistant.feeds.model import FeedSpec, FeedState, Kind
from assistant.ingest.arxiv import (
    NS,
    ArxivClient,
    categories_query,
    entry_published,
    entry_to_record,
    parse_feed,
    submitted_between,
)
from assistant.ingest.records import RecordError, record_to_paper
from assistant.models import Paper, normalize_arxiv_id, normalize_doi
from assistant.store import Store
from assistant.web import MB, FetchError, PoliteClient, address, is_html

OVERLAP = timedelta(days=2)  # dated sources look this far before their watermark again
SCAN_MAX = 5000  # arXiv entries one run reads at most (50 pages, 2.5 minutes at 3 s a page)
HF_DAYS_MAX = 14  # days of Hugging Face daily papers one run asks for at most
HF_ITEMS_MAX = 1000  # papers of one Hugging Face day read at most (a day lists about 50)
_WEEKDAY = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass
class Item:
    """One paper a feed brought, with its key (what the feed knows it by) and its date."""

    paper: Paper
    key: str
    stamp: str = ""


@dataclass
class Batch:
    """What one fetch of a feed brought, and how the feed's state moves once it is stored."""

    items: list[Item] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # records that could not be read, and why
    notes: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What every source of one run shares: settings, the store, the time, and one polite
    client per provider."""

    settings: Settings
    store: Store
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    sleep: Callable[[float], None] = time.sleep
    clients: dict[str, PoliteClient] = field(default_factory=dict)
    _arxiv: ArxivClient | None = None

    @property
    def arxiv(self) -> ArxivClient:
        if self._arxiv is None:
            self._arxiv = ArxivClient.from_settings(self.settings, sleep=self.sleep)
            self.clients["arxiv"] = self._arxiv.http
        return self._arxiv

    def client(self, provider: str) -> PoliteClient:
        """The shared client of `hf`, `s2` or `rss`."""
        if provider not in self.clients:
            s = self.settings
            headers: dict[str, str] = {}
            if provider == "s2" and s.s2_api_key is not None:
                headers["x-api-key"] = s.s2_api_key.get_secret_value()
            name, delay = {
                "hf": ("the Hugging Face API", s.hf_delay),
                "s2": ("the Semantic Scholar API", s.s2_delay),
                "rss": ("the RSS/Atom feed", s.rss_delay),
            }[provider]
            self.clients[provider] = PoliteClient(
                name=name,
                delay=delay,
                headers=headers,
                sleep=self.sleep,
                deadline=s.http_deadline,
                max_bytes=int(s.http_max_mb * MB),
            )
        return self.clients[provider]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def source_label(spec: FeedSpec) -> str:
    """The source a feed's papers carry (`triage rm --source NAME` removes what only it brought)."""
    return f"feed:{spec.name}"


def iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def moved(state: FeedState, items: list[Item], since: str, watermark: str | None) -> dict[str, Any]:
    """The state once these items are stored: the newest stamp as watermark, and the keys seen
    since `since` (older ones can no longer come back through the window)."""
    newest = max([watermark or "", *(i.stamp for i in items)])
    seen = {k: v for k, v in state.seen.items() if v >= since}
    seen.update({i.key: i.stamp for i in items})
    return {"watermark": newest or None, "seen": seen}


# -- arXiv ---------------------------------------------------------------------------


def fetch_arxiv(spec: FeedSpec, state: FeedState, ctx: Context) -> Batch:
    """New submissions matching the query or categories since the watermark, oldest first, at
    most `spec.max` a run (the next run goes on from there)."""
    query = spec.query or categories_query(spec.categories)
    if state.watermark:
        since = datetime.fromisoformat(state.watermark.replace("Z", "+00:00")) - OVERLAP
    else:
        since = ctx.now - timedelta(days=spec.first_days)
    until = ctx.now + timedelta(days=1)
    since_text = iso(since)
    window = (since_text[:16], iso(until)[:16])  # the query's range, to the minute as it asks
    batch = Batch()
    seen = set(state.seen)
    full = submitted_between(query, since, until)
    paging: list[str] = []
    pages = ctx.arxiv.pages(full, maximum=SCAN_MAX, sort=("submittedDate", "ascending"), notes=paging)
    outside: list[str] = []
    for page in pages:
        try:
            root = parse_feed(page)
        except ParseError as exc:
            raise FetchError(f"the arXiv API sent a response that is not XML: {exc}") from None
        for number, entry in enumerate(root.findall("atom:entry", NS), start=1):
            stamp = entry_published(entry)
            if stamp and not window[0] <= stamp[:16] <= window[1]:
                outside.append(stamp)  # a server that ignores the date range
                continue
            record = entry_to_record(entry)
            if not record.get("arxiv_id") and record.get("title") == "Error":
                raise FetchError(f"the arXiv API refused the query: {record.get('abstract', '')}")
            try:
                paper = record_to_paper(record, source_label(spec))
            except RecordError as exc:
                batch.skipped.append(f"entry {number}: {exc}")
                continue
            key = paper.arxiv_id or paper.id
            if key in seen:
                continue
            seen.add(key)
            batch.items.append(Item(paper, key, stamp))
            if len(batch.items) >= spec.max:
                batch.notes.append(
                    f"stopped at the feed's maximum of {spec.max} new papers; the next fetch goes on"
                )
                pages.close()
                break
        else:
            if not outside:
                continue
            pages.close()  # the next pages would be more of the same
        break
    batch.notes.extend(paging)
    if outside:
        batch.notes.append(
            f"the arXiv API ignored the date range asked for ({window[0][:10]} to {window[1][:10]}): it "
            f"sent {len(outside)} papers submitted outside it (e.g. on {min(outside)[:10]}), left out; "
            "paging stopped"
        )
    batch.state = moved(state, batch.items, since_text, state.watermark)
    if not batch.items and not outside and not paging:
        batch.notes.append(quiet_reason("arXiv", since, ctx.now))
    return batch


def quiet_reason(what: str, since: datetime, now: datetime) -> str:
    """Why a dated source brought nothing: a weekend, a holiday, or nothing matched."""
    if now.astimezone(UTC).weekday() >= 5:
        return f"nothing new since {since:%Y-%m-%d}: {what} announces no papers at weekends"
    return f"nothing new since {since:%Y-%m-%d}: no paper matched (on a holiday {what} announces none)"


# -- Hugging Face daily papers -----------------------------------------------------------


def hf_record(item: Any) -> dict[str, Any]:
    """One entry of the daily papers API as a record (the paper object, or the entry itself)."""
    if not isinstance(item, dict):
        raise RecordError(f"expected an object, got {type(item).__name__}")
    paper = item["paper"] if isinstance(item.get("paper"), dict) else item
    pid = paper.get("id")
    if not isinstance(pid, str) or not normalize_arxiv_id(pid):
        raise RecordError(f"no arXiv id in 'paper.id' ({pid!r})")
    authors = [a.get("name") for a in paper.get("authors") or [] if isinstance(a, dict) and a.get("name")]
    published = paper.get("publishedAt") or item.get("publishedAt")
    record = {
        "title": item.get("title") or paper.get("title"),
        "abstract": paper.get("summary") or item.get("summary"),
        "authors": authors,
        "arxiv_id": pid,
        "date": published[:10] if isinstance(published, str) else None,
        "url": f"https://huggingface.co/papers/{pid}",
        "hf_upvotes": paper.get("upvotes"),
    }
    return {k: v for k, v in record.items() if v not in (None, "", [])}


def fetch_hf(spec: FeedSpec, state: FeedState, ctx: Context) -> Batch:
    """Hugging Face's daily papers, day by day from the watermark's day (which may have grown
    since) to today."""
    today = ctx.now.astimezone(UTC).date()
    if state.watermark:
        start = date.fromisoformat(state.watermark[:10])
    else:
        start = today - timedelta(days=max(spec.first_days - 1, 0))
    start = max(start, today - timedelta(days=HF_DAYS_MAX - 1))
    client = ctx.client("hf")
    batch = Batch()
    seen = set(state.seen)
    empty: list[date] = []
    day = start
    full = False
    number = 0
    while day <= today and not full:
        data, cut = client.get_items(ctx.settings.hf_url, HF_ITEMS_MAX, params={"date": day.isoformat()})
        if not isinstance(data, list):
            raise FetchError(
                f"the Hugging Face API answered {type(data).__name__} for {day}, not a list of papers"
            )
        if cut:
            batch.notes.append(
                f"the Hugging Face API listed more than {len(data):,} papers for {day}: only the first "
                f"{len(data):,} were read"
            )
        if not data:
            empty.append(day)
        for number, entry in enumerate(data, start=1):
            try:
                paper = record_to_paper(hf_record(entry), source_label(spec))
            except RecordError as exc:
                batch.skipped.append(f"{day} entry {number}: {exc}")
                continue
            key = paper.arxiv_id or paper.id
            if key not in seen:
                seen.add(key)
                batch.items.append(Item(paper, key, day.isoformat()))
            if len(batch.items) >= spec.max:
                full = number < len(data) or day < today
                break
        if full:
            batch.notes.append(
                f"stopped at the feed's maximum of {spec.max} new papers; the next fetch goes on"
            )
        if not full or number == len(data):
            day += timedelta(days=1)  # a day read to its end
    last = min(day - timedelta(days=1), today)
    batch.state = moved(state, batch.items, (start - timedelta(days=1)).isoformat(), state.watermark)
    batch.state["watermark"] = max(state.watermark or "", last.isoformat())
    if empty:
        days = ", ".join(f"{d} (a {_WEEKDAY[d.weekday()]})" for d in empty)
        why = "weekends and holidays list none" if any(d.weekday() >= 5 for d in empty) else "a holiday?"
        batch.notes.append(f"Hugging Face listed no papers on {days}: {why}")
    elif not batch.items:
        batch.notes.append("no paper the feed had not brought before")
    return batch


# -- RSS / Atom ----------------------------------------------------------------------------

_TAG = re.compile(r"<[^>]+>")


def plain(text: str) -> str:
    """Feed HTML (tables of contents put markup in summaries) as plain text."""
    return " ".join(html.unescape(_TAG.sub(" ", text)).split())


def rss_record(entry: Any) -> dict[str, Any]:
    link = str(entry.get("link") or "")
    authors = [a.get("name") for a in entry.get("authors") or [] if a.get("name")]
    if not authors and entry.get("author"):
        authors = [entry["author"]]
    doi = entry.get("prism_doi") or entry.get("dc_identifier") or ""
    doi = normalize_doi(str(doi)) or (normalize_doi(link) if "doi.org/" in link else None)
    arxiv = normalize_arxiv_id(link) if "arxiv.org/" in link else None
    when = entry.get("published_parsed") or entry.get("updated_parsed")
    record = {
        "title": plain(str(entry.get("title") or "")),
        "abstract": plain(str(entry.get("summary") or "")),
        "authors": authors,
        "date": f"{when.tm_year:04d}-{when.tm_mon:02d}-{when.tm_mday:02d}" if when else None,
        "venue": entry.get("prism_publicationname"),
        "doi": doi,
        "arxiv_id": arxiv,
        "url": link or None,
    }
    return {k: v for k, v in record.items() if v not in (None, "", [])}


def fetch_rss(spec: FeedSpec, state: FeedState, ctx: Context) -> Batch:
    """The entries of an RSS/Atom feed not brought before (a conditional GET: an unchanged feed
    costs one short answer)."""
    assert spec.url is not None
    headers = {}
    if state.etag:
        headers["If-None-Match"] = state.etag
    if state.last_modified:
        headers["If-Modified-Since"] = state.last_modified
    response = ctx.client("rss").get(spec.url, headers=headers)
    batch = Batch()
    if response.status_code == 304:
        batch.notes.append("the feed has not changed since the last fetch")
        return batch
    # A stream, never bytes or text: feedparser takes a string for a URL or a file name.
    parsed = feedparser.parse(
        io.BytesIO(response.content),
        response_headers={k.lower(): v for k, v in response.headers.items()},
    )
    if parsed.bozo and not parsed.entries:
        if is_html(response):  # the journal's page rather than its feed, or a login page
            raise FetchError(
                f"{address(response.url)} sent a web page (HTML), not an RSS or Atom feed: the "
                "page's own address is not its feed's (look for an RSS link on it)"
            )
        reason = str(parsed.get("bozo_exception") or "no entries")
        raise FetchError(f"{spec.url} did not send an RSS or Atom feed ({reason[:150]})")
    seen = set(state.seen)
    for number, entry in enumerate(parsed.entries, start=1):
        key = str(entry.get("id") or entry.get("link") or entry.get("title") or "")
        if not key or key in seen:
            continue
        try:
            paper = record_to_paper(rss_record(entry), source_label(spec))
        except RecordError as exc:
            batch.skipped.append(f"entry {number}: {exc}")
            continue
        seen.add(key)
        batch.items.append(Item(paper, key, paper.date or ""))
        if len(batch.items) >= spec.max:
            batch.notes.append(f"stopped at the feed's maximum of {spec.max}; the next fetch brings the rest")
            break
    whole = not batch.notes  # a feed read in part must be read again, not answered "not modified"
    batch.state = {
        "seen": {**state.seen, **{i.key: i.stamp for i in batch.items}},
        "etag": response.headers.get("ETag") if whole else None,
        "last_modified": response.headers.get("Last-Modified") if whole else None,
    }
    if not batch.items:
        batch.notes.append("no entry the feed had not brought before")
    return batch


SOURCES: dict[Kind, Callable[[FeedSpec, FeedState, Context], Batch]] = {
    Kind.ARXIV: fetch_arxiv,
    Kind.HF_DAILY: fetch_hf,
    Kind.RSS: fetch_rss,
}
