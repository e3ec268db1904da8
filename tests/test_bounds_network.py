"""Every network request is bounded whatever the server does: a cap on the decompressed body,
a cap on the entries of a list answer, a total deadline (a trickling or silent server fails in
about the deadline), limits the user asked for enforced against a server that ignores them,
and a Retry-After or a redirect that cannot be followed said in one short line. Servers on
127.0.0.1 only: the fake provider of test_feeds, and a raw socket server for the misbehaving
ones."""

from __future__ import annotations

import gzip
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_feeds import NOW, Provider, Reply, Request, arxiv_day, cli, serve

from assistant.config import load_settings
from assistant.errors import TriageError
from assistant.feeds.model import Feeds, FeedSpec, Kind
from assistant.feeds.runner import fetch_feeds
from assistant.feeds.sources import HF_ITEMS_MAX, Context
from assistant.ingest.arxiv import ArxivClient, fetch
from assistant.store import Store
from assistant.web import MB, BoundedJson, PoliteClient, wait_words

RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
<item><title>One paper</title><link>https://example.org/1</link><description>An abstract.</description></item>
</channel></rss>"""


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as served:
        yield served


@contextmanager
def raw_server(talk: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that hands each connection to `talk` (in its own thread)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.1)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve_forever() -> None:
        while not stop.is_set():
            try:
                conn = listener.accept()[0]
            except OSError:
                continue
            held.append(conn)
            threading.Thread(target=_quietly, args=(talk, conn), daemon=True).start()

    thread = threading.Thread(target=serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def _quietly(talk: Callable[[socket.socket], None], conn: socket.socket) -> None:
    try:
        conn.recv(65536)  # the request
        talk(conn)
    except OSError:
        pass  # the client hung up: what a bounded client does


def trickle(head: bytes, body: bytes, every: float, limit: float = 12.0) -> Callable[[socket.socket], None]:
    """Send `head` at once, then `body` a byte every `every` seconds (for `limit` s at most, so
    that a client without a deadline ends the test rather than hanging it)."""

    def talk(conn: socket.socket) -> None:
        conn.sendall(head)
        end = time.monotonic() + limit
        for byte in body:
            if time.monotonic() > end:
                return
            conn.sendall(bytes([byte]))
            time.sleep(every)

    return talk


def client(**kwargs: Any) -> PoliteClient:
    return PoliteClient(name="the RSS/Atom feed", delay=0, sleep=lambda s: None, **kwargs)


def one_feed(provider: Provider, tmp_path: Path, spec: FeedSpec, **settings: Any) -> Any:
    values = provider.settings(tmp_path, **settings)
    store = Store.open(values)
    Feeds(store).add(spec)
    (report,) = fetch_feeds(store, values, now=NOW, sleep=lambda s: None)
    return report


# -- 1. memory: the body and the list are capped -----------------------------------------------


def test_a_gzip_bomb_stops_at_the_cap_on_the_decompressed_body(provider: Provider, tmp_path: Path) -> None:
    bomb = gzip.compress(RSS[:-16] + b" " * (40 * MB) + b"</channel></rss>", 9)
    assert len(bomb) < MB // 10  # a small answer on the wire
    provider.routes["/feed"] = [Reply(200, bomb, {"Content-Encoding": "gzip", "Content-Type": "text/xml"})]
    spec = FeedSpec(name="j", kind=Kind.RSS, url=f"{provider.url}/feed")
    report = one_feed(provider, tmp_path, spec, http_max_mb=2)
    assert report.error == f"the answer from {provider.url[7:]} is larger than 2 MB; skipped"


def test_a_large_body_is_refused_by_its_length_and_while_it_streams() -> None:
    big = b"<html>" + b"x" * (3 * MB)
    with raw_server(
        lambda c: c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big) + big)
    ) as url:
        with pytest.raises(
            TriageError, match=r"^the answer from 127\.0\.0\.1:\d+ is larger than 1 MB; skipped$"
        ):
            client(max_bytes=MB).get(f"{url}/feed")
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"%x\r\n%s\r\n" % (64 * 1024, b"y" * 64 * 1024) for _ in range(48)
    )  # no length announced: the cap applies as it reads
    with raw_server(lambda c: c.sendall(chunked)) as url:
        with pytest.raises(TriageError, match="is larger than 1 MB; skipped"):
            client(max_bytes=MB).get(f"{url}/feed")


def test_a_large_web_page_is_too_large_not_html(provider: Provider, tmp_path: Path) -> None:
    page = b"<!DOCTYPE html><html><body>" + b"<p>lorem ipsum</p>" * (MB // 6) + b"</body></html>"
    provider.routes["/feed"] = [Reply(200, page, {"Content-Type": "text/html"})]
    spec = FeedSpec(name="j", kind=Kind.RSS, url=f"{provider.url}/feed")
    report = one_feed(provider, tmp_path, spec, http_max_mb=1)
    assert report.error is not None and "larger than 1 MB" in report.error and "HTML" not in report.error


def hf_items(n: int) -> list[dict[str, Any]]:
    return [
        {"paper": {"id": f"2604.{i:05d}", "title": f"Paper {i}", "summary": "An abstract.", "authors": []}}
        for i in range(n)
    ]


def test_a_hugging_face_day_of_too_many_papers_is_cut_with_a_note(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, hf_items(HF_ITEMS_MAX * 5))]
    spec = FeedSpec(name="hf", kind=Kind.HF_DAILY, first_days=1, max=5000)
    report = one_feed(provider, tmp_path, spec)
    assert report.ok and report.new == HF_ITEMS_MAX
    assert any(f"listed more than {HF_ITEMS_MAX:,} papers" in n for n in report.notes)


def test_a_hugging_face_day_stops_at_the_feeds_maximum(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, hf_items(300))]
    report = one_feed(provider, tmp_path, FeedSpec(name="hf", kind=Kind.HF_DAILY, first_days=1, max=40))
    assert report.ok and report.new == 40
    assert any("stopped at the feed's maximum of 40" in n for n in report.notes)


def test_an_s2_page_larger_than_asked_is_cut_with_a_note(provider: Provider, tmp_path: Path) -> None:
    papers = [
        {"paperId": f"p{i}", "title": f"Paper {i}", "year": 2026, "publicationDate": "2026-04-12"}
        for i in range(1200)
    ]
    provider.routes["/s2/graph/v1/author/42/papers"] = [Reply(200, {"data": papers, "next": 500})]
    spec = FeedSpec(name="a", kind=Kind.S2_AUTHOR, author="42", max=5000)
    report = one_feed(provider, tmp_path, spec)
    assert report.ok
    assert any("more than the 500 papers a page asks for: only the first 500" in n for n in report.notes)
    assert len(provider.to("/s2/graph/v1/author/42/papers")) == 1  # a cut page ends the paging


def test_the_json_reader_keeps_whole_entries_within_its_bounds() -> None:
    text = '{"data": [' + ",".join(f'{{"id": {i}, "tags": ["a", "b"]}}' for i in range(100)) + '], "next": 9}'
    reader = BoundedJson(text, items=10)
    assert reader.read() == {"data": [{"id": i, "tags": ["a", "b"]} for i in range(10)]} and reader.cut
    reader = BoundedJson(text, items=None, values=50)  # 5 values an entry: 9 whole ones fit
    data = reader.read()
    assert reader.cut and data["data"] == [{"id": i, "tags": ["a", "b"]} for i in range(9)]
    whole = BoundedJson(text, items=None)
    assert whole.read()["next"] == 9 and not whole.cut


# -- 2. a total deadline ---------------------------------------------------------------------


def test_a_trickling_body_fails_in_about_the_deadline() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\nContent-Length: 1000\r\n\r\n"
    with raw_server(trickle(head, b"<" * 1000, every=0.2)) as url:
        start = time.monotonic()
        with pytest.raises(TriageError) as caught:
            client(deadline=1.5).get(f"{url}/feed")
        elapsed = time.monotonic() - start
    assert elapsed < 3.0, f"took {elapsed:.1f}s"
    assert str(caught.value) == (
        f"the answer from {url[7:]} took longer than 1.5 s (the deadline for one request: the server "
        "is too slow or stalls); skipped"
    )


def test_trickled_headers_fail_in_about_the_deadline() -> None:
    head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000 + b"\r\n\r\n"
    with raw_server(trickle(b"", head, every=0.2)) as url:
        start = time.monotonic()
        with pytest.raises(TriageError, match="took longer than 1.5 s"):
            client(deadline=1.5).get(f"{url}/feed")
    assert time.monotonic() - start < 3.0


def test_a_silent_server_fails_in_about_the_deadline_retries_included() -> None:
    with raw_server(lambda c: time.sleep(12)) as url:
        start = time.monotonic()
        with pytest.raises(TriageError, match="took longer than 1 s"):
            PoliteClient(name="the RSS/Atom feed", delay=0, timeout=30, deadline=1.0).get(f"{url}/feed")
    assert time.monotonic() - start < 2.5  # not 5 tries x 30 s


def test_retries_and_their_waits_stay_within_the_deadline(provider: Provider) -> None:
    provider.routes["/feed"] = [Reply(503, "busy")]
    sleeps: list[float] = []
    polite = PoliteClient(name="the RSS/Atom feed", delay=10, sleep=sleeps.append, deadline=30)
    with pytest.raises(TriageError, match="kept answering HTTP 503"):
        polite.get(f"{provider.url}/feed")
    assert polite.requests == 2 and 10.0 in sleeps and 20.0 not in sleeps  # 10 + 20 s would pass 30 s


def test_the_deadline_and_the_cap_are_settings(provider: Provider, tmp_path: Path) -> None:
    settings = load_settings(store=tmp_path / "store")
    assert (settings.http_deadline, settings.http_max_mb) == (30.0, 50.0)
    env = {"TRIAGE_HTTP_DEADLINE": "7.5", "TRIAGE_HTTP_MAX_MB": "3"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        settings = load_settings(store=tmp_path / "store")
    ctx = Context(settings, Store.open(settings))
    assert (ctx.client("rss").deadline, ctx.client("rss").max_bytes) == (7.5, 3 * MB)
    assert (ctx.arxiv.http.deadline, ctx.arxiv.http.max_bytes) == (7.5, 3 * MB)


def test_a_stalled_feed_fails_through_the_cli_in_one_line(tmp_path: Path) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\nContent-Length: 1000\r\n\r\n"
    with raw_server(trickle(head, RSS, every=0.3)) as url, serve() as provider:
        cli(provider, "feed", "add", "slow", "--rss", f"{url}/feed")
        start = time.monotonic()
        result = cli(provider, "fetch", TRIAGE_HTTP_DEADLINE="1")
        elapsed = time.monotonic() - start
    assert result.exit_code == 1 and "Traceback" not in result.output and elapsed < 6
    assert f"error: slow: the answer from {url[7:]} took longer than 1 s" in result.output


# -- 3. limits the user asked for ---------------------------------------------------------------


def careless_arxiv(entries: int, published: str = "2026-04-12T17:00:00Z") -> Callable[[Request], Reply]:
    """An arXiv API that ignores max_results, start and the date range: always the same page."""
    ids = [f"2604.{i:05d}" for i in range(entries)]
    page = re.sub(
        r"<opensearch:totalResults>\d+", "<opensearch:totalResults>100000", arxiv_day(ids, published)
    )
    return lambda request: Reply(200, page, {"Content-Type": "application/atom+xml"})


def test_ingest_never_stores_more_than_max(provider: Provider) -> None:
    provider.routes["/api/query"] = careless_arxiv(100)
    result = cli(provider, "ingest", "--arxiv", "cat:cs.CL", "--max", "30")
    assert result.exit_code == 0, result.output
    assert re.search(r"│\s+30\s+│\s+30\s+│", result.output), result.output
    assert len(provider.to("/api/query")) == 1


def test_ingest_by_id_stores_only_the_ids_asked_for(provider: Provider) -> None:
    provider.routes["/api/query"] = careless_arxiv(100)
    result = cli(provider, "ingest", "--arxiv-id", "2604.00003", "--arxiv-id", "2604.00007v2")
    assert result.exit_code == 0, result.output
    assert re.search(r"│\s+2\s+│\s+2\s+│", result.output), result.output
    assert "98 papers that were not asked for" in result.output  # said, not only done


def test_fetch_keeps_the_ids_asked_for_and_says_what_it_left_out(provider: Provider) -> None:
    provider.routes["/api/query"] = careless_arxiv(100)
    arxiv = ArxivClient(base_url=f"{provider.url}/api/query", delay=0)
    result = fetch(arxiv, None, ["2604.00003", "2604.00007v2"], 2)
    assert sorted(p.arxiv_id or "" for p in result.papers) == ["2604.00003", "2604.00007"]
    assert any("98 papers that were not asked for" in n for n in result.notes)
    capped = fetch(arxiv, "all:x", None, 30)
    assert len(capped.papers) == 30 and capped.records == 30
    assert any("70 papers beyond the 30 asked for" in n for n in capped.notes)


def test_an_arxiv_feed_whose_server_ignores_the_dates_says_so(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/query"] = careless_arxiv(100, published="2019-01-01T00:00:00Z")
    report = one_feed(provider, tmp_path, FeedSpec(name="cl", kind=Kind.ARXIV, categories=["cs.CL"]))
    assert report.ok and report.new == 0
    assert len(provider.to("/api/query")) == 1  # not 50 pages
    (note,) = report.notes
    assert "ignored the date range" in note and "2019-01-01" in note and "holiday" not in note


def test_an_arxiv_feed_whose_server_repeats_its_page_stops(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/query"] = careless_arxiv(100)  # in range, but the same page again
    spec = FeedSpec(name="cl", kind=Kind.ARXIV, categories=["cs.CL"], max=5000)
    report = one_feed(provider, tmp_path, spec)
    assert report.ok and report.new == 100
    assert len(provider.to("/api/query")) == 2  # not 50
    assert report.notes == [
        "the arXiv API sent the same 100 papers again for results from 100 (it ignores paging); stopped there"
    ]


def test_a_page_of_only_earlier_entries_ends_the_paging(provider: Provider) -> None:
    provider.routes["/api/query"] = careless_arxiv(100)
    notes: list[str] = []
    arxiv = ArxivClient(base_url=f"{provider.url}/api/query", delay=0)
    assert len(list(arxiv.pages("all:x", maximum=5000, notes=notes))) == 1
    assert len(provider.to("/api/query")) == 2 and "it ignores paging" in notes[0]
    provider.routes["/api/query"] = careless_arxiv(50)
    notes.clear()
    assert len(list(arxiv.pages("all:x", maximum=20, notes=notes))) == 1
    assert notes == ["the arXiv API sent 50 papers for a page of 20 (it ignores max_results)"]


# -- 4. Retry-After and redirects ----------------------------------------------------------------


def test_an_absurd_retry_after_is_said_in_words(provider: Provider) -> None:
    provider.routes["/feed"] = [Reply(429, "slow down", {"Retry-After": "1e308"})]
    with pytest.raises(TriageError) as caught:
        client().get(f"{provider.url}/feed")
    message = str(caught.value)
    assert "asks to wait more than an hour" in message and "try again later" in message
    assert len(message) < 200 and not re.search(r"\d{5}", message)
    assert wait_words(45) == "45s" and wait_words(3600) == "3600s (60 min)" and wait_words(float("nan"))


def test_a_retry_after_longer_than_the_deadline_fails_at_once(provider: Provider) -> None:
    provider.routes["/feed"] = [Reply(503, "later", {"Retry-After": "45"}), Reply(200, RSS)]
    sleeps: list[float] = []
    polite = PoliteClient(name="the RSS/Atom feed", delay=0, sleep=sleeps.append, deadline=30)
    with pytest.raises(TriageError, match=r"asks to wait 45s before the next request \(HTTP 503\)"):
        polite.get(f"{provider.url}/feed")
    assert sleeps == [] and polite.requests == 1
    provider.routes["/short"] = [Reply(503, "later", {"Retry-After": "2"}), Reply(200, RSS)]
    assert polite.get(f"{provider.url}/short").status_code == 200 and sleeps == [2.0]


def test_a_redirect_to_a_file_is_refused_not_called_offline(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/feed"] = [Reply(302, "", {"Location": "file:///etc/passwd"})]
    spec = FeedSpec(name="j", kind=Kind.RSS, url=f"{provider.url}/feed")
    report = one_feed(provider, tmp_path, spec)
    assert report.error == (
        f"the RSS/Atom feed at {provider.url}/feed redirected to a non-web address (file:), which was refused"
    )
    assert len(provider.to("/feed")) == 1  # not retried
