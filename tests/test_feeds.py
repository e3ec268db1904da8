"""Saved feeds and `triage fetch` against recorded provider responses served from 127.0.0.1.

One threaded http.server plays arXiv, Hugging Face, Semantic Scholar and an RSS host (as
tests/test_arxiv_api.py does for arXiv alone, whose page() cuts arXiv pages here too). Every
endpoint is a setting, so the CLI runs unchanged against it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from test_arxiv_api import page as arxiv_page
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import Settings, load_settings
from assistant.feeds.model import Feeds, FeedSpec, Kind
from assistant.feeds.runner import fetch_feeds
from assistant.ingest import FileReport, store_papers
from assistant.models import Paper, Status
from assistant.store import Store
from conftest import FIXTURES, free_port, shared

FEEDS = FIXTURES / "feeds"
NOW = datetime(2026, 4, 13, 9, 30, tzinfo=UTC)  # a Monday
S2_AUTHOR = json.loads(shared("realworld", "s2_author_turing.json").read_text(encoding="utf-8"))


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, list[str]]
    body: Any
    headers: dict[str, str]


@dataclass
class Reply:
    status: int = 200
    body: bytes | str | Any = b""
    headers: dict[str, str] = field(default_factory=dict)


Route = list[Reply] | Callable[[Request], Reply]


@dataclass
class Provider:
    """Per path, a queue of replies (the last one repeats) or a function of the request."""

    url: str
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    def to(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.path == path]

    def env(self, **more: str) -> dict[str, str]:
        return {
            "TRIAGE_ARXIV_URL": f"{self.url}/api/query",
            "TRIAGE_HF_URL": f"{self.url}/api/daily_papers",
            "TRIAGE_S2_URL": f"{self.url}/s2",
            "TRIAGE_ARXIV_DELAY": "0",
            "TRIAGE_HF_DELAY": "0",
            "TRIAGE_S2_DELAY": "0",
            "TRIAGE_RSS_DELAY": "0",
            "COLUMNS": "200",
            **more,
        }

    def settings(self, tmp: Path, **more: Any) -> Settings:
        values: dict[str, Any] = {
            "store": tmp / "store",
            "arxiv_url": f"{self.url}/api/query",
            "hf_url": f"{self.url}/api/daily_papers",
            "s2_url": f"{self.url}/s2",
            "arxiv_delay": 0,
            "hf_delay": 0,
            "s2_delay": 0,
            "rss_delay": 0,
        }
        return load_settings(**{**values, **more})


@contextmanager
def serve() -> Iterator[Provider]:
    """A fake provider on a free 127.0.0.1 port, for the block."""
    served = Provider(url="")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            parsed = urlparse(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request(
                self.command,
                parsed.path,
                parse_qs(parsed.query),
                json.loads(raw) if raw else None,
                {k.lower(): v for k, v in self.headers.items()},
            )
            served.requests.append(request)
            route = served.routes.get(parsed.path)
            if route is None:
                reply = Reply(404, {"error": f"no route {parsed.path}"})
            elif callable(route):
                reply = route(request)
            else:
                reply = route.pop(0) if len(route) > 1 else route[0]
            body = reply.body
            if not isinstance(body, bytes | str):
                body = json.dumps(body)
            data = body.encode("utf-8") if isinstance(body, str) else body
            self.send_response(reply.status)
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _answer  # noqa: N815
        do_POST = _answer  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    served.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as served:
        yield served


# -- recorded answers --------------------------------------------------------------------


def arxiv_day(
    ids: list[str], published: str = "2026-04-12T17:00:00Z", version: int = 1, title: str | None = None
) -> str:
    """An arXiv API page (cut from the recorded response) whose entries carry these ids."""
    text = arxiv_page(0, len(ids), len(ids))
    for i, arxiv_id in enumerate(ids):
        text = text.replace(f"abs/2601.{i:05d}", f"abs/{arxiv_id}v{version}", 1)
    if title is not None:
        text = re.sub(r"(<entry>\s*<id>[^<]+</id>\s*<title>)[^<]+", rf"\g<1>{title}", text)
    text = re.sub(r"<published>[^<]+", f"<published>{published}", text)
    return re.sub(r"<arxiv:doi>[^<]+</arxiv:doi>", "", text)


def hf_day() -> list[dict[str, Any]]:
    return list(json.loads((FEEDS / "hf_daily_papers.json").read_text(encoding="utf-8")))


def rss_toc() -> bytes:
    return (FEEDS / "rss_journal_toc.xml").read_bytes()


def author_papers(extra: list[dict[str, Any]] | None = None) -> Callable[[Request], Reply]:
    """The Graph API's author papers, paged as it pages them, from the recorded author."""
    papers = [*(extra or []), *S2_AUTHOR["papers"]]

    def answer(request: Request) -> Reply:
        offset, limit = int(request.params["offset"][0]), int(request.params["limit"][0])
        body: dict[str, Any] = {"offset": offset, "data": papers[offset : offset + limit]}
        if offset + limit < len(papers):
            body["next"] = offset + limit
        return Reply(200, body)

    return answer


def cli(provider: Provider, *args: str, **env: str) -> Any:
    return CliRunner().invoke(app, list(args), env=provider.env(**env))


def row(output: str, name: str) -> list[str]:
    """The cells of a feed's row in a printed table."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[1] == name:
            return cells[1:-1]
    raise AssertionError(f"no row {name!r} in:\n{output}")


def put(store: Store, *papers: Paper) -> None:
    store_papers(store, list(papers), FileReport(path="test"))


# -- feed add / ls / edit / rm -----------------------------------------------------------------


def test_feed_add_ls_edit_rm(provider: Provider) -> None:
    assert cli(provider, "feed", "add", "cl", "--arxiv-category", "cs.CL,cs.LG").exit_code == 0
    assert cli(provider, "feed", "add", "hf", "--hf-daily").exit_code == 0
    assert cli(provider, "feed", "add", "tacl", "--rss", "https://direct.mit.edu/rss/tacl").exit_code == 0
    listed = cli(provider, "feed", "ls").output
    assert "arXiv: cs.CL, cs.LG" in listed and "Hugging Face daily papers" in listed and "never" in listed
    edited = cli(provider, "feed", "edit", "cl", "--arxiv", "abs:adapter", "--max", "50")
    assert edited.exit_code == 0 and "arXiv: abs:adapter" in edited.output
    assert cli(provider, "feed", "rm", "tacl").exit_code == 0
    listed = cli(provider, "feed", "ls").output
    assert "tacl" not in listed and "abs:adapter" in listed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["feed", "add", "x"], "name the feed's source"),
        (["feed", "add", "x", "--hf-daily", "--rss", "https://a.b/feed"], "a feed has one source"),
        (["feed", "add", "x", "--arxiv-category", "computer science"], "is not an arXiv category"),
        (["feed", "add", "x", "--s2-author", "Alan Turing"], "not a Semantic Scholar author id"),
        (["feed", "add", "x", "--rss", "ftp://a.b/feed"], "not an http(s) address"),
        (["feed", "edit", "nope", "--max", "3"], "no feed named 'nope'"),
        (["fetch", "nope"], "no feed named 'nope'"),
        (["fetch"], "no saved feeds"),
    ],
)
def test_user_mistakes_are_one_line_errors(provider: Provider, args: list[str], message: str) -> None:
    result = cli(provider, *args)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert len([ln for ln in result.output.splitlines() if ln.strip()]) <= 3


def test_a_second_feed_of_the_same_name_is_refused(provider: Provider) -> None:
    cli(provider, "feed", "add", "Daily", "--hf-daily")
    result = cli(provider, "feed", "add", "daily", "--arxiv", "all:x")
    assert result.exit_code == 1 and "a feed named 'daily' exists" in result.output


def test_feeds_and_their_state_live_in_the_store(store: Store, settings: Settings) -> None:
    feeds = Feeds(store)
    feeds.add(FeedSpec(name="cl", kind=Kind.ARXIV, categories=["cs.CL"]))
    state = feeds.state("cl")
    state.watermark = "2026-04-12T17:00:00Z"
    feeds.save_state(state)
    again = Feeds(Store.open(settings))  # another process, or another machine on the server
    assert again.get("cl").categories == ["cs.CL"]
    assert again.state("cl").watermark == "2026-04-12T17:00:00Z"
    again.remove("cl")
    assert Feeds(store).all() == {} and Feeds(store).state("cl").watermark is None


# -- fetching ------------------------------------------------------------------------------------


def test_arxiv_feed_brings_new_submissions_once(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/query"] = [Reply(200, arxiv_day(["2604.00001", "2604.00002", "2604.00003"]))]
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="cl", kind=Kind.ARXIV, categories=["cs.CL", "cs.LG"]))
    (first,) = fetch_feeds(store, settings, now=NOW)
    assert (first.fetched, first.new, first.already_seen, first.error) == (3, 3, 0, None)
    query = provider.requests[0].params
    assert query["search_query"][0].startswith("(cat:cs.CL OR cat:cs.LG) AND submittedDate:[20260410")
    assert (query["sortBy"], query["sortOrder"]) == (["submittedDate"], ["ascending"])
    assert Feeds(store).state("cl").watermark == "2026-04-12T17:00:00Z"
    (second,) = fetch_feeds(store, settings, now=NOW)  # the same listing again: nothing new
    assert (second.fetched, second.new) == (0, 0) and second.notes
    assert "submittedDate:[20260410" in provider.requests[1].params["search_query"][0]  # 2 days back
    assert store.count() == 3


def test_429_with_retry_after_and_5xx_are_waited_out(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/daily_papers"] = [
        Reply(429, {"error": "Too Many Requests"}, {"Retry-After": "7"}),
        Reply(503, "<html>Service Unavailable</html>"),
        Reply(200, hf_day()),
    ]
    settings = provider.settings(tmp_path, hf_delay=1.0)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="hf", kind=Kind.HF_DAILY, first_days=1))
    sleeps: list[float] = []
    (report,) = fetch_feeds(store, settings, now=NOW, sleep=sleeps.append)
    assert report.ok and report.new == 2
    assert 7.0 in sleeps and 2.0 in sleeps  # Retry-After, then 1 s x 2^1
    assert provider.to("/api/daily_papers")[0].params["date"] == ["2026-04-13"]


def test_a_retry_after_of_an_hour_fails_the_feed_instead_of_stalling(
    provider: Provider, tmp_path: Path
) -> None:
    provider.routes["/api/daily_papers"] = [Reply(429, "slow down", {"Retry-After": "3600"})]
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="hf", kind=Kind.HF_DAILY, first_days=1))
    (report,) = fetch_feeds(store, settings, now=NOW, sleep=lambda s: None)
    assert report.error is not None and "asks to wait 3600s" in report.error


def test_an_empty_day_says_why(provider: Provider) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, [])]
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "3")
    result = cli(provider, "fetch", "hf")
    assert result.exit_code == 0, result.output
    assert "Hugging Face listed no papers on" in result.output
    assert len(provider.to("/api/daily_papers")) == 3  # the three days, each asked once
    listed = cli(provider, "feed", "ls").output
    assert "listed no papers" in listed


def test_an_empty_weekend_day(provider: Provider, tmp_path: Path) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, [])]
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="hf", kind=Kind.HF_DAILY, first_days=2))
    saturday = datetime(2026, 4, 11, 12, tzinfo=UTC)
    (report,) = fetch_feeds(store, settings, now=saturday)
    assert report.ok and report.new == 0
    assert report.notes == [
        "Hugging Face listed no papers on 2026-04-10 (a Friday), 2026-04-11 (a Saturday): "
        "weekends and holidays list none"
    ]


def test_one_feed_failing_does_not_stop_the_others(provider: Provider) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, "<!DOCTYPE html><html>maintenance</html>")]
    provider.routes["/api/query"] = [Reply(200, "<feed xmlns='http://www.w3.org/2005/Atom'><entry><title>")]
    provider.routes["/rss"] = [Reply(200, rss_toc(), {"Content-Type": "application/rss+xml"})]
    provider.routes["/broken.rss"] = [Reply(200, b"\x00\x01 this is not a feed")]
    cli(provider, "feed", "add", "hf", "--hf-daily")
    cli(provider, "feed", "add", "cl", "--arxiv-category", "cs.CL")
    cli(provider, "feed", "add", "tacl", "--rss", f"{provider.url}/rss")
    cli(provider, "feed", "add", "junk", "--rss", f"{provider.url}/broken.rss")
    result = cli(provider, "fetch")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert row(result.output, "tacl")[1:3] == ["2", "2"]  # fetched, new
    assert "failed" in row(result.output, "hf")[-1] and "failed" in row(result.output, "cl")[-1]
    assert "error: hf: the Hugging Face API sent a response that is not JSON" in result.output
    assert "error: cl: the arXiv API sent a response that is not XML" in result.output
    assert "did not send an RSS or Atom feed" in result.output
    listed = cli(provider, "feed", "ls").output
    assert "not JSON" in listed and "2" in row(listed, "tacl")[3]
    again = cli(provider, "fetch", "tacl")
    assert again.exit_code == 0 and row(again.output, "tacl")[1:3] == ["0", "0"]


def test_a_paper_seen_again_as_v2_and_as_its_doi_is_not_new(provider: Provider, tmp_path: Path) -> None:
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    feeds = Feeds(store)
    # Hugging Face lists 2604.00007 (v1) today; arXiv then sends its v2; the journal's table of
    # contents brings its published version under the DOI 10.1162/tacl_a_00701.
    provider.routes["/api/daily_papers"] = [Reply(200, hf_day())]
    title = "Sparse Adapters for Low-Resource Machine Translation"
    provider.routes["/api/query"] = [Reply(200, arxiv_day(["2604.00007"], version=2, title=title))]
    provider.routes["/rss"] = [Reply(200, rss_toc())]
    feeds.add(FeedSpec(name="hf", kind=Kind.HF_DAILY, first_days=1))
    feeds.add(FeedSpec(name="cl", kind=Kind.ARXIV, categories=["cs.CL"]))
    feeds.add(FeedSpec(name="tacl", kind=Kind.RSS, url=f"{provider.url}/rss"))
    (hf,) = fetch_feeds(store, settings, ["hf"], now=NOW)
    assert hf.new == 2
    before = store.get("arxiv:2604.00007")
    assert before is not None and before.added_at is not None
    store.update_decision("arxiv:2604.00007", status=Status.MAYBE)
    cl, tacl = fetch_feeds(store, settings, ["cl", "tacl"], now=NOW)
    assert (cl.new, cl.already_seen) == (0, 1)
    assert (tacl.new, tacl.already_seen) == (1, 1)  # the other TOC paper is new
    after = store.get("arxiv:2604.00007")
    assert after is not None and after.added_at == before.added_at  # not "new" again in a digest
    assert after.decision.status is Status.MAYBE
    assert after.paper.doi == "10.1162/tacl_a_00701"
    assert set(after.paper.sources) == {"feed:hf", "feed:cl", "feed:tacl"}
    assert store.count() == 3


def test_a_preprint_with_its_arxiv_doi_merges_with_the_published_doi(store: Store) -> None:
    title = "Sparse Adapters for Low-Resource Machine Translation"
    put(store, Paper.create(title=title, doi="10.48550/arXiv.2604.00007"))
    put(store, Paper.create(title=title, doi="10.1162/tacl_a_00701", venue="TACL"))
    (item,) = list(store.iter_all())
    assert item.paper.id == "arxiv:2604.00007" and item.paper.venue == "TACL"
    # Two publisher DOIs still say two papers.
    put(store, Paper.create(title="Introduction to the Special Issue", doi="10.1162/coli_a_00001"))
    put(store, Paper.create(title="Introduction to the Special Issue", doi="10.1162/coli_a_00002"))
    assert store.count() == 3


def test_watermark_does_not_move_when_storing_failed(
    provider: Provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider.routes["/api/query"] = [Reply(200, arxiv_day(["2604.00001", "2604.00002"]))]
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="cl", kind=Kind.ARXIV, categories=["cs.CL"]))

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(Store, "upsert_papers", full)
        (failed,) = fetch_feeds(store, settings, now=NOW)
    assert failed.error is not None and failed.error.startswith("storing failed")
    state = Feeds(store).state("cl")
    assert state.watermark is None and state.seen == {} and state.error
    (again,) = fetch_feeds(store, settings, now=NOW)
    assert (again.new, again.error) == (2, None)
    assert Feeds(store).state("cl").watermark == "2026-04-12T17:00:00Z"


def test_s2_author_feed_takes_the_past_as_seen_then_brings_new_papers(
    provider: Provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S2_API_KEY", "s2-test-key")
    path = "/s2/graph/v1/author/2262347/papers"
    provider.routes[path] = author_papers()
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="turing", kind=Kind.S2_AUTHOR, author="2262347"))
    (first,) = fetch_feeds(store, settings, now=NOW)
    assert (first.new, first.error) == (0, None) and "60 earlier papers are taken as seen" in first.notes[0]
    new_paper = {
        "paperId": "f00dfeed" * 5,
        "externalIds": {"ArXiv": "2604.01234", "CorpusId": 1},
        "title": "On Computable Numbers, Revisited",
        "abstract": "We revisit the decision problem.",
        "year": 2026,
        "publicationDate": "2026-04-10",
        "venue": "",
        "authors": [{"authorId": "2262347", "name": "A. Turing"}],
    }
    provider.routes[path] = author_papers([new_paper])
    (second,) = fetch_feeds(store, settings, now=NOW)
    assert (second.fetched, second.new) == (1, 1)
    assert store.get("arxiv:2604.01234") is not None
    assert all(r.headers.get("x-api-key") == "s2-test-key" for r in provider.to(path))
    assert provider.to(path)[0].params["fields"][0].startswith("title,abstract")


def test_s2_recommendations_come_from_decisions(provider: Provider, tmp_path: Path) -> None:
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    put(
        store,
        Paper.create(title="Sparse Adapters for Low-Resource Machine Translation", arxiv_id="2604.00007"),
        Paper.create(title="A Paper I Did Not Want", doi="10.1000/unwanted"),
        Paper.create(title="A paper with no identifier at all"),
    )
    store.update_decision("arxiv:2604.00007", status=Status.ACCEPTED)
    store.update_decision("doi:10.1000/unwanted", status=Status.REJECTED)
    provider.routes["/s2/recommendations/v1/papers/"] = [
        Reply(200, json.loads((FEEDS / "s2_recommendations.json").read_text(encoding="utf-8")))
    ]
    Feeds(store).add(FeedSpec(name="recs", kind=Kind.S2_RECOMMEND))
    (report,) = fetch_feeds(store, settings, now=NOW)
    (request,) = provider.to("/s2/recommendations/v1/papers/")
    assert request.method == "POST"
    assert request.body == {
        "positivePaperIds": ["ARXIV:2604.00007"],
        "negativePaperIds": ["DOI:10.1000/unwanted"],
    }
    assert (report.fetched, report.new, report.already_seen) == (3, 2, 1)
    (again,) = fetch_feeds(store, settings, now=NOW)
    assert (again.fetched, again.new) == (0, 0)


def test_s2_recommendations_without_decisions_say_so(provider: Provider, tmp_path: Path) -> None:
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="recs", kind=Kind.S2_RECOMMEND))
    (report,) = fetch_feeds(store, settings, now=NOW)
    assert report.ok and "no accepted paper" in report.notes[0] and not provider.requests


def test_rss_sends_a_conditional_get_and_reads_journal_fields(provider: Provider, tmp_path: Path) -> None:
    def toc(request: Request) -> Reply:
        if request.headers.get("if-none-match") == '"v1"':
            return Reply(304)
        return Reply(200, rss_toc(), {"ETag": '"v1"', "Content-Type": "application/rss+xml"})

    provider.routes["/rss"] = toc
    settings = provider.settings(tmp_path)
    store = Store.open(settings)
    Feeds(store).add(FeedSpec(name="tacl", kind=Kind.RSS, url=f"{provider.url}/rss"))
    (first,) = fetch_feeds(store, settings, now=NOW)
    assert first.new == 2
    item = store.get("doi:10.1162/tacl_a_00701")
    assert item is not None
    assert item.paper.authors == ["Mira Okafor", "Tomas Lindqvist"]
    assert item.paper.venue == "Transactions of the Association for Computational Linguistics"
    assert item.paper.abstract.startswith("We study sparse adapters") and "<" not in item.paper.abstract
    assert item.paper.date == "2026-04-10"
    (second,) = fetch_feeds(store, settings, now=NOW)
    assert second.fetched == 0 and second.notes == ["the feed has not changed since the last fetch"]


def test_feed_edit_reset_starts_the_feed_afresh_without_duplicating_papers(provider: Provider) -> None:
    provider.routes["/api/daily_papers"] = [Reply(200, hf_day())]
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
    assert row(cli(provider, "fetch").output, "hf")[1:4] == ["2", "2", "0"]
    assert row(cli(provider, "fetch").output, "hf")[1:4] == ["0", "0", "0"]
    assert cli(provider, "feed", "edit", "hf", "--reset").exit_code == 0
    assert row(cli(provider, "fetch").output, "hf")[1:4] == ["2", "0", "2"]  # brought again: already seen
