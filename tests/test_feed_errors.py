"""What a user sees when a feed goes wrong, and what feeds bring in: one-line HTTP errors
without the server's HTML, a refused connection that fails at once, journal abstracts without
their "Abstract" label, and a second feed of a source already saved. Against the fake provider
of test_feeds (127.0.0.1 only)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_feeds import NOW, S2_AUTHOR, Provider, Reply, author_papers, cli, row, serve

from assistant.errors import TriageError
from assistant.feeds.model import Feeds, FeedSpec, Kind
from assistant.feeds.runner import fetch_feeds
from assistant.store import Store
from assistant.web import PoliteClient
from conftest import free_port

ERROR_PAGE = """<!DOCTYPE html>
<html lang="en"><head><title>{status} | Journal</title>
<style>body {{ font-family: sans-serif }}</style></head>
<body><div class="error"><h1>Page not found</h1>
<p>Sorry, the page you requested could not be found. <a href="/">Home</a></p></div>
<script>window.dataLayer = [];</script></body></html>
"""


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as served:
        yield served


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def last_cell(output: str, name: str) -> str:
    """The last cell of a feed's row in a printed table, wrapped lines and all, without spaces
    (the table breaks long words anywhere)."""
    pieces: list[str] = []
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) < 3:
            if pieces:
                break
            continue
        if cells[1] == name or (pieces and not cells[1]):
            pieces.append(cells[-2])
        elif pieces:
            break
    return "".join("".join(pieces).split())


def squeezed(text: str) -> str:
    return "".join(text.split())


# -- 1. HTTP errors in one readable line ---------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason"), [(404, "Not Found"), (410, "Gone"), (500, "Internal Server Error")]
)
def test_an_html_error_page_is_one_line_with_status_and_address(
    provider: Provider, status: int, reason: str
) -> None:
    page = ERROR_PAGE.format(status=status)
    provider.routes["/gone.rss"] = [Reply(status, page, {"Content-Type": "text/html; charset=utf-8"})]
    cli(provider, "feed", "add", "tacl", "--rss", f"{provider.url}/gone.rss?token=secret")
    result = cli(provider, "fetch")
    assert result.exit_code == 1 and "Traceback" not in result.output
    expected = f"HTTP {status} {reason} from {provider.url}/gone.rss"
    (line,) = error_lines(result.output)
    assert line.startswith("error: tacl: ") and expected in line
    for junk in ("<", "DOCTYPE", "Page not found", "font-family", "dataLayer", "token=secret"):
        assert junk not in result.output
    listed = cli(provider, "feed", "ls")
    assert squeezed(expected) in last_cell(listed.output, "tacl")
    assert "<" not in listed.output and "Page not found" not in listed.output


def test_an_html_page_without_a_content_type_is_not_quoted_either(provider: Provider) -> None:
    provider.routes["/feed"] = [Reply(403, "<html><body><h1>403 Forbidden</h1><hr>nginx</body></html>")]
    cli(provider, "feed", "add", "blocked", "--rss", f"{provider.url}/feed")
    result = cli(provider, "fetch", "blocked")
    (line,) = error_lines(result.output)
    assert line == f"error: blocked: HTTP 403 Forbidden from {provider.url}/feed"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"error": "Author with id 999 not found"}, "Author with id 999 not found"),
        ({"message": "Forbidden"}, "Forbidden"),
        ({"error": {"code": 404, "message": "no such author"}}, "no such author"),
    ],
)
def test_a_json_apis_error_message_is_kept(provider: Provider, body: object, said: str) -> None:
    provider.routes["/s2/graph/v1/author/999/papers"] = [
        Reply(404, body, {"Content-Type": "application/json"})
    ]
    cli(provider, "feed", "add", "someone", "--s2-author", "999")
    result = cli(provider, "fetch", "someone")
    assert result.exit_code == 1
    (line,) = error_lines(result.output)
    assert line == (
        f"error: someone: HTTP 404 Not Found from {provider.url}/s2/graph/v1/author/999/papers: {said}"
    )
    assert last_cell(cli(provider, "feed", "ls").output, "someone").endswith(f"papers:{squeezed(said)}")


def test_a_plain_text_body_is_cut_short(provider: Provider) -> None:
    text = "This feed has moved to the new platform. " * 20
    provider.routes["/feed"] = [Reply(410, text, {"Content-Type": "text/plain"})]
    settings = provider.settings(Path("."))
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="old", kind=Kind.RSS, url=f"{provider.url}/feed"))
    (report,) = fetch_feeds(store, settings, now=NOW)
    assert report.error is not None
    assert report.error.startswith(
        f"HTTP 410 Gone from {provider.url}/feed: This feed has moved to the new platform."
    )
    assert report.error.endswith("…") and len(report.error) < 250 and "\n" not in report.error


def test_a_5xx_retried_to_the_end_says_status_reason_and_address(provider: Provider) -> None:
    provider.routes["/api/daily_papers"] = [
        Reply(502, ERROR_PAGE.format(status=502), {"Content-Type": "text/html"})
    ]
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
    result = cli(provider, "fetch", "hf")
    (line,) = error_lines(result.output)
    assert line == (
        f"error: hf: the Hugging Face API kept answering HTTP 502 Bad Gateway from "
        f"{provider.url}/api/daily_papers; try again later"
    )
    assert len(provider.to("/api/daily_papers")) == 5  # retried as before


def test_an_html_page_instead_of_json_is_named_not_quoted(provider: Provider) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, ERROR_PAGE.format(status=200))]
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
    result = cli(provider, "fetch", "hf")
    (line,) = error_lines(result.output)
    assert line.startswith("error: hf: the Hugging Face API sent a response that is not JSON")
    assert "an HTML page" in line and "<" not in result.output


def test_an_html_page_instead_of_a_feed_is_named(provider: Provider) -> None:
    provider.routes["/journal"] = [Reply(200, ERROR_PAGE.format(status=200), {"Content-Type": "text/html"})]
    cli(provider, "feed", "add", "journal", "--rss", f"{provider.url}/journal")
    result = cli(provider, "fetch", "journal")
    (line,) = error_lines(result.output)
    assert "sent a web page (HTML), not an RSS or Atom feed" in line and "<" not in result.output


# -- 2. "Abstract" labels ------------------------------------------------------------------


def rss(*summaries: str) -> str:
    items = "".join(
        f"<item><title>Paper {n}</title><link>https://journal.example/article/{n}</link>"
        f"<guid>item-{n}</guid><description><![CDATA[{summary}]]></description></item>"
        for n, summary in enumerate(summaries)
    )
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>J</title>{items}</channel></rss>'


STUDY = "We study adapters."
AMR = "Abstract Meaning Representation (AMR) parsing maps sentences to graphs."
ABSTRACTS = [  # (summary in the feed, abstract stored)
    (
        '<p><span class="paragraphSection"><div class="boxTitle">Abstract</div>We study adapters.</span></p>',
        STUDY,
    ),
    ("Abstract: We study adapters.", STUDY),
    ("ABSTRACT. We study adapters.", STUDY),
    ("abstract We study adapters.", STUDY),
    ("<h3>Abstract</h3>\n<p>We study adapters.</p>", STUDY),
    ("Abstract \u2014 We study adapters.", STUDY),
    ("<b>Abstract:</b> We study adapters.", STUDY),
    ("arXiv:2604.00001v1 Announce Type: new \nAbstract: We study adapters.", STUDY),
    (f"<h2>Abstract</h2><p>{AMR}</p>", AMR),
    # The word elsewhere, or starting the abstract itself, stays.
    (AMR, AMR),
    ("Abstract interpretation is a theory of sound approximation.",) * 2,
    ("Abstractive summarisation condenses a document.",) * 2,
    ("We study abstract syntax trees. Abstract: none.",) * 2,
    ("Abstract-level features help retrieval.",) * 2,
]


def test_abstract_labels_of_feed_entries_are_dropped(provider: Provider) -> None:
    feed = rss(*(summary for summary, _ in ABSTRACTS))
    provider.routes["/rss"] = [Reply(200, feed, {"Content-Type": "application/rss+xml"})]
    cli(provider, "feed", "add", "j", "--rss", f"{provider.url}/rss")
    assert cli(provider, "fetch", "j").exit_code == 0
    store = Store.open(provider.settings(Path(".")))
    stored = {i.paper.title: i.paper.abstract for i in store.iter_all()}
    assert [stored[f"Paper {n}"] for n in range(len(ABSTRACTS))] == [a for _, a in ABSTRACTS]


def test_the_abstract_label_of_a_semantic_scholar_paper_is_dropped(provider: Provider) -> None:
    path = "/s2/graph/v1/author/2262347/papers"
    paper = {
        **S2_AUTHOR["papers"][0],
        "paperId": "cafe" * 10,
        "externalIds": {"DOI": "10.1000/labelled"},
        "title": "A Labelled Abstract",
        "abstract": "Abstract Background Publishers put a label first.",
        "publicationDate": "2026-04-12",
        "year": 2026,
    }
    provider.routes[path] = author_papers([paper])
    settings = provider.settings(Path("."))
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="turing", kind=Kind.S2_AUTHOR, author="2262347"))
    (report,) = fetch_feeds(store, settings, now=NOW)
    assert report.new == 1
    item = store.get("doi:10.1000/labelled")
    assert item is not None and item.paper.abstract == "Background Publishers put a label first."


# -- 3. A refused connection ---------------------------------------------------------------


def test_a_refused_connection_fails_at_once_with_a_clear_message(provider: Provider) -> None:
    port = free_port()  # nothing listens there
    cli(provider, "feed", "add", "dead", "--rss", f"http://127.0.0.1:{port}/feed")
    start = time.monotonic()
    result = cli(provider, "fetch", "dead", TRIAGE_RSS_DELAY="1")  # the default politeness
    elapsed = time.monotonic() - start
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = error_lines(result.output)
    assert f"cannot connect to 127.0.0.1:{port}: connection refused" in line
    assert line.startswith("error: dead: ")
    assert elapsed < 5, f"a refused connection took {elapsed:.1f}s"  # was 15 s of backoff


def test_a_refused_connection_is_not_retried_but_a_timeout_is() -> None:
    sleeps: list[float] = []
    refused = PoliteClient(name="the RSS/Atom feed", delay=1.0, sleep=sleeps.append)
    with pytest.raises(TriageError, match="connection refused"):
        refused.get(f"http://127.0.0.1:{free_port()}/feed")
    assert refused.requests == 1 and sleeps == []
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        held: list[socket.socket] = []
        stop = threading.Event()

        def accept() -> None:
            silent.settimeout(0.1)
            while not stop.is_set():
                try:
                    held.append(silent.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        slow = PoliteClient(name="the RSS/Atom feed", delay=1.0, retries=2, timeout=0.2, sleep=sleeps.append)
        try:
            with pytest.raises(TriageError, match="ReadTimeout"):
                slow.get(f"http://127.0.0.1:{silent.getsockname()[1]}/feed")
        finally:
            stop.set()
            thread.join()
            for conn in held:
                conn.close()
            slow.close()
    assert slow.requests == 3 and 1.0 in sleeps and 2.0 in sleeps  # backoff between tries, as before


# -- 4. The same source twice -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "again"),
    [
        (["--arxiv", "cat:cs.CL AND abs:adapter"], ["--arxiv", " cat:cs.CL  AND abs:adapter "]),
        (["--arxiv-category", "cs.CL,cs.LG"], ["--arxiv-category", "cs.LG", "--arxiv-category", "cs.CL"]),
        (["--hf-daily"], ["--hf-daily", "--first-days", "7"]),
        (["--s2-author", "2262347"], ["--s2-author", "2262347", "--max", "10"]),
        (["--s2-recommend"], ["--s2-recommend"]),
        (["--rss", "https://direct.mit.edu/rss/tacl"], ["--rss", "HTTPS://Direct.MIT.edu:443/rss/tacl/"]),
    ],
)
def test_a_second_feed_of_the_same_source_is_refused(
    provider: Provider, first: list[str], again: list[str]
) -> None:
    assert cli(provider, "feed", "add", "mine", *first).exit_code == 0
    result = cli(provider, "feed", "add", "other", *again)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "the feed 'mine' already fetches" in result.output
    listed = cli(provider, "feed", "ls").output
    assert "mine" in listed and "other" not in listed


def test_feeds_of_different_sources_are_kept(provider: Provider) -> None:
    assert cli(provider, "feed", "add", "a", "--arxiv", "abs:adapter").exit_code == 0
    assert cli(provider, "feed", "add", "b", "--arxiv", "abs:adapters").exit_code == 0
    assert cli(provider, "feed", "add", "c", "--arxiv-category", "cs.CL").exit_code == 0
    assert cli(provider, "feed", "add", "d", "--arxiv-category", "cs.CL,cs.LG").exit_code == 0
    assert cli(provider, "feed", "add", "e", "--rss", "https://a.example/feed?issue=1").exit_code == 0
    assert cli(provider, "feed", "add", "f", "--rss", "https://a.example/feed?issue=2").exit_code == 0
    assert cli(provider, "feed", "add", "g", "--s2-author", "1").exit_code == 0
    assert cli(provider, "feed", "add", "h", "--s2-author", "2").exit_code == 0
    assert len(Feeds(Store.open(provider.settings(Path(".")))).all()) == 8


def test_editing_a_feed_onto_another_feeds_source_is_refused(provider: Provider) -> None:
    cli(provider, "feed", "add", "tacl", "--rss", "https://direct.mit.edu/rss/tacl")
    cli(provider, "feed", "add", "cl", "--arxiv-category", "cs.CL")
    result = cli(provider, "feed", "edit", "cl", "--rss", "https://direct.mit.edu/rss/tacl")
    assert result.exit_code == 1 and "the feed 'tacl' already fetches" in result.output
    assert "arXiv: cs.CL" in row(cli(provider, "feed", "ls").output, "cl")[1]
    # Changing a feed's limits keeps its own source, which is no duplicate of itself.
    assert cli(provider, "feed", "edit", "tacl", "--max", "20").exit_code == 0
