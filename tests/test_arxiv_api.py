"""The live arXiv path against recorded Atom responses served from 127.0.0.1."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.errors import TriageError
from assistant.ingest.arxiv import ArxivClient, fetch
from conftest import free_port, shared

RECORDED = shared("realworld", "atom_arxiv_testing_2026.xml").read_text(encoding="utf-8")
_ENTRY = re.compile(r"  <entry>.*?</entry>\n", re.DOTALL)


def page(start: int, size: int, total: int) -> str:
    """A page cut from the recorded response, entries renumbered so every page has its own ids."""
    entries = _ENTRY.findall(RECORDED)
    head = RECORDED[: RECORDED.index("  <entry>")]
    head = re.sub(r"<opensearch:totalResults>\d+", f"<opensearch:totalResults>{total}", head)
    body = []
    for i in range(start, min(start + size, total)):
        entry = entries[i % len(entries)]
        body.append(re.sub(r"abs/\d{4}\.\d{4,5}", f"abs/2601.{i:05d}", entry, count=1))
    return head + "".join(body) + "</feed>\n"


@dataclass
class Script:
    """What the fake API answers, in order; then pages of the recorded feed."""

    total: int = 150
    errors: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    requests: list[dict[str, list[str]]] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            params = parse_qs(urlparse(self.path).query)
            script.requests.append(params)
            if script.errors:
                status, headers = script.errors.pop(0)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(b"busy")
                return
            start, size = int(params["start"][0]), int(params["max_results"][0])
            body = page(start, size, script.total).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/atom+xml")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/api/query", script
    server.shutdown()


def client(url: str, sleeps: list[float]) -> ArxivClient:
    return ArxivClient(base_url=url, delay=3.0, sleep=sleeps.append)


def test_pages_through_results_politely(api: tuple[str, Script]) -> None:
    url, script = api
    sleeps: list[float] = []
    result = fetch(client(url, sleeps), "cat:cs.SE AND ti:testing", None, maximum=150)
    assert len(result.papers) == 150 and len({p.id for p in result.papers}) == 150
    assert [(r["start"], r["max_results"]) for r in script.requests] == [(["0"], ["100"]), (["100"], ["50"])]
    assert script.requests[0]["search_query"] == ["cat:cs.SE AND ti:testing"]
    assert len(sleeps) == 1 and 2.5 < sleeps[0] <= 3.0  # one request every 3 seconds


def test_stops_at_the_end_of_the_results(api: tuple[str, Script]) -> None:
    url, script = api
    script.total = 30
    result = fetch(client(url, []), "all:testing", None, maximum=500)
    assert len(result.papers) == 30 and len(script.requests) == 1


def test_retries_429_honouring_retry_after_and_500_with_backoff(api: tuple[str, Script]) -> None:
    url, script = api
    script.total = 5
    script.errors = [(429, {"Retry-After": "7"}), (503, {})]
    sleeps: list[float] = []
    result = fetch(client(url, sleeps), "all:testing", None, maximum=5)
    assert len(result.papers) == 5 and len(script.requests) == 3
    assert 7.0 in sleeps and 6.0 in sleeps  # Retry-After, then 3 s x 2^1


def test_gives_up_after_repeated_errors(api: tuple[str, Script]) -> None:
    url, script = api
    script.errors = [(500, {})] * 10
    with pytest.raises(TriageError, match="kept answering HTTP 500"):
        fetch(client(url, []), "all:testing", None, maximum=5)


def test_offline_is_a_clear_message() -> None:
    dead = f"http://127.0.0.1:{free_port()}/api/query"
    with pytest.raises(TriageError, match="cannot reach the arXiv API .* are you offline"):
        fetch(ArxivClient(base_url=dead, delay=0, retries=1, sleep=lambda s: None), "all:x", None, 5)


def test_id_list(api: tuple[str, Script]) -> None:
    url, script = api
    script.total = 2
    fetch(client(url, []), None, ["2401.01234", "2402.00001v2"], maximum=2)
    assert script.requests[0]["id_list"] == ["2401.01234,2402.00001v2"]


def test_cli_ingest_arxiv_query(api: tuple[str, Script]) -> None:
    url, script = api
    script.total = 12
    env = {"TRIAGE_ARXIV_URL": url, "TRIAGE_ARXIV_DELAY": "0", "COLUMNS": "160"}
    result = CliRunner().invoke(app, ["ingest", "--arxiv", "cat:cs.SE", "--max", "20"], env=env)
    assert result.exit_code == 0, result.output
    assert "arXiv API: cat:cs.SE" in result.output and re.search(r"│\s+12\s+│\s+12\s+│", result.output)
    again = CliRunner().invoke(app, ["ingest", "--arxiv", "cat:cs.SE", "--max", "20"], env=env)
    assert re.search(r"│\s+12\s+│\s+0\s+│", again.output)
