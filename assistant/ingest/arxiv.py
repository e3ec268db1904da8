"""arXiv: Atom XML as the arXiv API returns it, from a file or live from the API.

The live client is polite: one request every `delay` seconds (3 by default, as arXiv asks),
pages of at most 100 results, retries with exponential backoff on 429 and 5xx (honouring
Retry-After), and a clear message when the API cannot be reached. Saved feeds add sorting,
category queries and submission-date windows (`assistant.feeds.sources`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as SafeET

from assistant.config import Settings
from assistant.errors import InputError, TriageError
from assistant.ingest.base import ParseResult, one_record
from assistant.ingest.records import RecordError, record_to_paper
from assistant.models import normalize_arxiv_id
from assistant.web import DEADLINE, MAX_BYTES, MB, FetchError, PoliteClient

NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}
DEFAULT_API = "https://export.arxiv.org/api/query"
PAGE = 100


def looks_like_atom(text: str) -> bool:
    head = text.lstrip()[:600]
    return head.startswith("<") and "http://www.w3.org/2005/Atom" in head


def _text(el: Element | None) -> str:
    return " ".join((el.text or "").split()) if el is not None else ""


# A `$...$` span (an escaped `\$` neither opens nor closes one): kept as it is written.
_MATH = re.compile(r"((?<!\\)\$(?:\\.|[^$\\])+\$)")
_ESCAPED = re.compile(r"\\([%&_#])")


def unescape_latex(text: str) -> str:
    """arXiv's titles and abstracts are LaTeX-ish: `30\\%`, `\\&`, `\\_`, `\\#` are the characters
    themselves; inside `$...$` math they stay as written (the exporters write math as it is)."""
    parts = _MATH.split(text)
    return "".join(part if i % 2 else _ESCAPED.sub(r"\1", part) for i, part in enumerate(parts))


def entry_to_record(entry: Element) -> dict[str, Any]:
    raw_id = _text(entry.find("atom:id", NS))
    record: dict[str, Any] = {
        "title": unescape_latex(_text(entry.find("atom:title", NS))),
        "abstract": unescape_latex(_text(entry.find("atom:summary", NS))),
        "authors": [_text(a.find("atom:name", NS)) for a in entry.findall("atom:author", NS)],
        "arxiv_id": raw_id,
        "url": raw_id or None,
    }
    published = _text(entry.find("atom:published", NS))
    if published:
        record["date"] = published[:10]
    updated = _text(entry.find("atom:updated", NS))
    if updated:
        record["updated"] = updated[:10]
    primary = entry.find("arxiv:primary_category", NS)
    cats = [c.get("term", "") for c in entry.findall("atom:category", NS)]
    if primary is not None and primary.get("term"):
        cats = [primary.get("term", ""), *[c for c in cats if c != primary.get("term")]]
    record["categories"] = [c for c in cats if c]
    doi = _text(entry.find("arxiv:doi", NS))
    if doi:
        record["doi"] = doi
    journal = _text(entry.find("arxiv:journal_ref", NS))
    if journal:
        record["venue"] = journal
    comment = _text(entry.find("arxiv:comment", NS))
    if comment:
        record["comment"] = comment
    versioned = raw_id.rsplit("/abs/", 1)[-1]
    if versioned and versioned != normalize_arxiv_id(raw_id):
        record["arxiv_version"] = versioned
    return {k: v for k, v in record.items() if v not in (None, "", [])}


def parse_feed(text: str) -> Element:
    """The Atom document; raises ParseError on XML that is not well formed."""
    root: Element = SafeET.fromstring(text.encode("utf-8"))
    return root


def parse_atom(path: Path, text: str) -> ParseResult:
    try:
        root = parse_feed(text)
    except ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else None
        raise InputError(f"not well-formed Atom XML: {exc}", path=path, line=line) from None
    except Exception as exc:  # defusedxml refuses entities and DTDs
        raise InputError(f"refused XML: {exc}", path=path) from None
    result = ParseResult()
    source = f"arxiv:{path.name}"
    for number, entry in enumerate(root.findall("atom:entry", NS), start=1):
        result.records += 1
        with one_record(result, path, record=number) as notes:
            record = entry_to_record(entry)
            if not record.get("arxiv_id") and _text(entry.find("atom:title", NS)) == "Error":
                raise RecordError(f"the arXiv API returned an error: {record.get('abstract', '')}")
            result.papers.append(record_to_paper(record, source, notes))
    return result


@dataclass
class ArxivClient:
    """A polite client of the arXiv API (one request every `delay` seconds, retried, each
    request within `deadline` seconds and `max_bytes` of answer)."""

    base_url: str = DEFAULT_API
    delay: float = 3.0
    retries: int = 4
    timeout: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    deadline: float = DEADLINE
    max_bytes: int = MAX_BYTES
    _http: PoliteClient | None = None

    @classmethod
    def from_settings(cls, settings: Settings, sleep: Callable[[float], None] = time.sleep) -> ArxivClient:
        """The client the settings describe (endpoint, delay, deadline, largest answer)."""
        return cls(
            base_url=settings.arxiv_url,
            delay=settings.arxiv_delay,
            sleep=sleep,
            deadline=settings.http_deadline,
            max_bytes=int(settings.http_max_mb * MB),
        )

    @property
    def http(self) -> PoliteClient:
        if self._http is None:
            self._http = PoliteClient(
                name="the arXiv API",
                delay=self.delay,
                retries=self.retries,
                timeout=self.timeout,
                sleep=self.sleep,
                deadline=self.deadline,
                max_bytes=self.max_bytes,
                hint=" Atom files saved from arXiv import with 'triage ingest FILE'.",
            )
        return self._http

    def pages(
        self,
        query: str | None = None,
        ids: list[str] | None = None,
        maximum: int = 100,
        sort: tuple[str, str] | None = None,
        notes: list[str] | None = None,
    ) -> Generator[str, None, None]:
        """Atom documents, one per page, until `maximum` entries or the end of the results;
        `sort` is (sortBy, sortOrder), e.g. ("submittedDate", "ascending"). A page that brings
        only entries of earlier pages (a server that ignores `start`) ends the paging, with a
        line in `notes`, as does a page larger than asked for (one that ignores `max_results`)."""
        start = 0
        had: set[str] = set()
        while start < maximum:
            size = min(PAGE, maximum - start)
            params: dict[str, Any] = {"start": start, "max_results": size}
            if query:
                params["search_query"] = query
            if ids:
                params["id_list"] = ",".join(ids)
            if sort:
                params["sortBy"], params["sortOrder"] = sort
            text = self.http.get(self.base_url, params=params).text
            try:
                root = parse_feed(text)
            except ParseError as exc:
                raise FetchError(f"the arXiv API sent a response that is not XML: {exc}") from None
            keys = [_text(e.find("atom:id", NS)) for e in root.findall("atom:entry", NS)]
            entries = len(keys)
            if keys and start and had.issuperset(keys):
                if notes is not None:
                    notes.append(
                        f"the arXiv API sent the same {entries} papers again for results from {start} "
                        "(it ignores paging); stopped there"
                    )
                return
            had.update(keys)
            total_el = root.find("opensearch:totalResults", NS)
            total_text = (total_el.text or "") if total_el is not None else ""
            total = int(total_text) if total_text.isdigit() else None
            del root, total_el  # the caller parses the page again: one tree at a time
            yield text
            start += entries
            if entries > size:
                if notes is not None:
                    notes.append(
                        f"the arXiv API sent {entries} papers for a page of {size} (it ignores max_results)"
                    )
                return
            if entries < size or (total is not None and start >= total):
                return


def categories_query(categories: list[str]) -> str:
    """`cat:cs.CL OR cat:cs.LG` for a list of arXiv categories."""
    return " OR ".join(f"cat:{c}" for c in categories)


def submitted_between(query: str, since: datetime, until: datetime) -> str:
    """The query limited to papers submitted in [since, until] (GMT, to the minute)."""
    return f"({query}) AND submittedDate:[{since:%Y%m%d%H%M} TO {until:%Y%m%d%H%M}]"


def entry_published(entry: Element) -> str:
    """An entry's first-version submission time, ISO 8601 (empty if absent)."""
    return _text(entry.find("atom:published", NS))


def fetch(client: ArxivClient, query: str | None, ids: list[str] | None, maximum: int) -> ParseResult:
    """Query the live API and parse every page into one result: at most `maximum` papers and,
    for a list of ids, only those ids (in any version), whatever the server sends."""
    result = ParseResult()
    label = Path(f"arxiv-api ({query or ','.join(ids or [])})")
    wanted = {normalize_arxiv_id(i) or i for i in ids or []}
    unasked = beyond = 0
    pages = client.pages(query=query, ids=ids, maximum=maximum, notes=result.notes)
    for page in pages:
        try:
            part = parse_atom(label, page)
        except InputError as exc:
            raise TriageError(str(exc)) from None
        papers = part.papers
        if wanted:
            papers = [p for p in papers if p.arxiv_id and normalize_arxiv_id(p.arxiv_id) in wanted]
        room = maximum - len(result.papers)
        left_out = len(part.papers) - min(len(papers), room)
        unasked += len(part.papers) - len(papers)
        beyond += max(len(papers) - room, 0)
        result.papers.extend(papers[:room])
        result.errors.extend(part.errors)
        result.records += part.records - left_out
        if len(result.papers) >= maximum:
            pages.close()
            break
    if unasked:
        result.notes.append(f"the arXiv API also sent {unasked} papers that were not asked for; left out")
    if beyond:
        result.notes.append(f"the arXiv API sent {beyond} papers beyond the {maximum} asked for; left out")
    return result
