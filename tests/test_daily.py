"""`triage daily`: fetch, enrich, tag and digest in one command, against the fake providers of
test_feeds (127.0.0.1), with a lock, resumable, quiet when not on a terminal."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_feeds import Provider, Reply, cli, hf_day, serve

from assistant.cli import tag as cli_tag
from assistant.config import load_settings
from assistant.feeds.daily import RunRecord, daily_lock
from assistant.store import Store

AGENDA = "## Adapters\nParameter-efficient adapters, sparse adapters, low-resource translation.\n"


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as served:
        served.routes["/api/daily_papers"] = [Reply(200, hf_day())]
        served.routes["/s2/graph/v1/paper/batch"] = lambda r: Reply(200, [None] * len(r.body["ids"]))
        yield served


@pytest.fixture
def agenda(isolated: Path) -> Path:
    path = isolated / "agenda.md"
    path.write_text(AGENDA, encoding="utf-8")
    return path


def store() -> Store:
    return Store.open(load_settings(store=Path("store")))


def test_daily_fetches_tags_and_writes_the_digest_then_says_why_nothing_is_new(
    provider: Provider, agenda: Path
) -> None:
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
    first = cli(provider, "daily", "--min-score", "0", "-o", "digest.md")
    assert first.exit_code == 0, first.output
    digest = Path("digest.md").read_text(encoding="utf-8")
    assert "2 new undecided papers" in digest
    assert "Sparse Adapters for Low-Resource Machine Translation" in digest
    assert all(i.assessment is not None for i in store().iter_all())  # tagged (offline: no LLM set)
    second = cli(provider, "daily", "--min-score", "0", "-o", "digest.md")
    assert second.exit_code == 0, second.output
    again = Path("digest.md").read_text(encoding="utf-8")
    assert "Nothing new since" in again and "hf: no paper the feed had not brought before" in again


def test_quiet_when_not_on_a_terminal(provider: Provider, agenda: Path) -> None:
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
    result = cli(provider, "daily", "--min-score", "0")
    assert result.exit_code == 0, result.output
    assert "━" not in result.output and "1/4 fetching" not in result.output  # no bars, no stage lines
    assert "fetch hf: 2 fetched, 2 new, 0 already seen, 0 skipped" in result.output  # a line per feed
    assert result.stdout.startswith("# Paper digest: new since")  # the digest alone on standard output


def test_two_runs_never_overlap(provider: Provider, agenda: Path) -> None:
    cli(provider, "feed", "add", "hf", "--hf-daily")
    with daily_lock(store()):
        result = cli(provider, "daily")
    assert result.exit_code == 1
    assert "another 'triage daily' is running (pid" in result.output and "Traceback" not in result.output
    assert not provider.requests  # it stopped before fetching anything
    assert cli(provider, "daily").exit_code == 0  # the lock went with the first run


def test_a_run_killed_half_way_is_completed_by_the_next(
    provider: Provider, agenda: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(cli_tag, "run_offline_tag", killed)
        interrupted = cli(provider, "daily", "-o", "digest.md")
    assert interrupted.exit_code == 130 and not Path("digest.md").exists()
    assert RunRecord.load(store()).last_digest is None
    resumed = cli(provider, "daily", "--min-score", "0", "-o", "digest.md")
    assert resumed.exit_code == 0, resumed.output
    digest = Path("digest.md").read_text(encoding="utf-8")
    assert "2 new undecided papers" in digest and "Why Language Models Hallucinate" in digest
    assert RunRecord.load(store()).last_digest is not None


def test_a_failing_feed_fails_the_run_but_the_digest_goes_out(provider: Provider, agenda: Path) -> None:
    provider.routes["/api/query"] = [Reply(503, "down")]
    cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
    cli(provider, "feed", "add", "cl", "--arxiv-category", "cs.CL")
    result = cli(provider, "daily", "--min-score", "0", "-o", "digest.md", TRIAGE_ARXIV_DELAY="0")
    assert result.exit_code == 1
    digest = Path("digest.md").read_text(encoding="utf-8")
    assert "2 new undecided papers" in digest
    assert "cl failed: the arXiv API kept answering HTTP 503" in digest


class _SMTP(socketserver.StreamRequestHandler):
    """Just enough SMTP to take one message (no STARTTLS offered, no login)."""

    received: list[str] = []

    def handle(self) -> None:
        self.wfile.write(b"220 localhost test SMTP\r\n")
        data: list[str] = []
        in_data = False
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if in_data:
                if line == ".":
                    in_data = False
                    self.received.append("\n".join(data))
                    self.wfile.write(b"250 OK\r\n")
                else:
                    data.append(line)
                continue
            verb = line.split(" ")[0].upper()
            if verb == "EHLO":
                self.wfile.write(b"250-localhost\r\n250 8BITMIME\r\n")
            elif verb == "DATA":
                in_data = True
                self.wfile.write(b"354 go ahead\r\n")
            elif verb == "QUIT":
                self.wfile.write(b"221 bye\r\n")
                return
            else:
                self.wfile.write(b"250 OK\r\n")


def test_the_digest_is_e_mailed(provider: Provider, agenda: Path) -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _SMTP)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = Path("config.toml")
    config.write_text(
        f'smtp_host = "127.0.0.1"\nsmtp_port = {server.server_address[1]}\n'
        'digest_from = "triage@example.org"\ndigest_to = ["me@example.org"]\n',
        encoding="utf-8",
    )
    _SMTP.received.clear()
    try:
        cli(provider, "feed", "add", "hf", "--hf-daily", "--first-days", "1")
        result = cli(provider, "--config", str(config), "daily", "--min-score", "0", "--email")
    finally:
        server.shutdown()
    assert result.exit_code == 0, result.output
    assert "Sent the digest of 2 new papers to me@example.org" in result.output
    (message,) = _SMTP.received
    assert "Subject: Paper digest: 2 new since" in message and "To: me@example.org" in message
    assert "Sparse Adapters for Low-Resource Machine Translation" in message


def test_e_mail_without_a_server_configured_is_a_one_line_error(provider: Provider, agenda: Path) -> None:
    result = cli(provider, "daily", "--email")
    assert result.exit_code == 1 and "needs smtp_host and digest_to" in result.output
    assert "Traceback" not in result.output
