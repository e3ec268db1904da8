"""The daily run against `triage ingest` of the same papers, in the same run.

    python bench/fetch.py [--n 1000]

Recorded-shape feeds of n new papers are served from 127.0.0.1: 40% as arXiv API pages (100
entries a page), 30% as Hugging Face daily papers (three days), 30% as an RSS feed. Then, each
through the `triage` command in this process, each into an empty store:

  ingest     `triage ingest papers.jsonl` (the same papers as a file), `triage tag`, `triage digest`
  daily      `triage daily` (fetch the three feeds, enrich, tag, digest)
  again      `triage daily` once more: nothing new (dedupe and watermarks only)

Politeness waits are set to 0 here (nothing sleeps), and the waits the providers would enforce
(arXiv one request every 3 s, Hugging Face and RSS one a second) are counted from the requests
made and reported beside the time. Target: daily within 1.2x of ingest + tag + digest, plus
those waits.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from common import console, report, varied_records
from typer.testing import CliRunner

from assistant.cli import app

AGENDA = (
    "## Adapters\nParameter-efficient adapters and fine-tuning for transfer.\n\n"
    "## Multilinguality\nCross-lingual transfer and low-resource languages.\n"
)
WAITS = {"arxiv": 3.0, "hf": 1.0, "rss": 1.0}


def atom_entry(r: dict[str, Any], published: str) -> str:
    authors = "".join(f"<author><name>{escape(a)}</name></author>" for a in r.get("authors", []))
    return (
        f"<entry><id>http://arxiv.org/abs/{r['arxiv_id']}v1</id><title>{escape(r['title'])}</title>"
        f"<updated>{published}</updated><summary>{escape(r['abstract'])}</summary>"
        f"<published>{published}</published>{authors}"
        '<arxiv:primary_category term="cs.CL"/><category term="cs.CL" scheme="http://arxiv.org/schemas/atom"/>'
        "</entry>"
    )


def atom_page(entries: list[str], total: int) -> str:
    return (
        "<?xml version='1.0' encoding='UTF-8'?>"
        '<feed xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" '
        'xmlns:arxiv="http://arxiv.org/schemas/atom" xmlns="http://www.w3.org/2005/Atom">'
        f"<opensearch:totalResults>{total}</opensearch:totalResults>{''.join(entries)}</feed>"
    )


def hf_entry(r: dict[str, Any], day: str) -> dict[str, Any]:
    return {
        "paper": {
            "id": r["arxiv_id"],
            "authors": [{"_id": f"{i:024x}", "name": a, "hidden": False} for i, a in enumerate(r["authors"])],
            "publishedAt": f"{day}T12:00:00.000Z",
            "submittedOnDailyAt": f"{day}T13:00:00.000Z",
            "title": r["title"],
            "summary": r["abstract"],
            "upvotes": 3,
        },
        "title": r["title"],
        "numComments": 0,
    }


def rss(records: list[dict[str, Any]]) -> str:
    items = "".join(
        f"<item><title>{escape(r['title'])}</title><link>https://arxiv.org/abs/{r['arxiv_id']}</link>"
        f"<guid>https://arxiv.org/abs/{r['arxiv_id']}</guid><description>{escape(r['abstract'])}</description>"
        + "".join(f"<dc:creator>{escape(a)}</dc:creator>" for a in r["authors"])
        + "<pubDate>Fri, 10 Apr 2026 00:00:00 GMT</pubDate></item>"
        for r in records
    )
    return (
        '<?xml version="1.0"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<channel><title>bench</title><link>http://127.0.0.1/</link>{items}</channel></rss>"
    )


class Feeds:
    """The three feeds over n papers, served from 127.0.0.1; counts requests per provider."""

    def __init__(self, records: list[dict[str, Any]], now: datetime) -> None:
        n = len(records)
        a, h = int(n * 0.4), int(n * 0.7)
        published = (now - timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.arxiv = [atom_entry(r, published) for r in records[:a]]
        days = [(now.date() - timedelta(days=d)).isoformat() for d in (2, 1, 0)]
        hf = records[a:h]
        third = -(-len(hf) // 3)
        self.hf = {
            day: [hf_entry(r, day) for r in hf[i * third : (i + 1) * third]] for i, day in enumerate(days)
        }
        self.rss = rss(records[h:]).encode("utf-8")
        self.requests = {"arxiv": 0, "hf": 0, "rss": 0}

    def serve(self) -> tuple[ThreadingHTTPServer, str]:
        feeds = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                params = parse_qs(url.query)
                if url.path == "/api/query":
                    feeds.requests["arxiv"] += 1
                    start, size = int(params["start"][0]), int(params["max_results"][0])
                    body = atom_page(feeds.arxiv[start : start + size], len(feeds.arxiv)).encode("utf-8")
                elif url.path == "/api/daily_papers":
                    feeds.requests["hf"] += 1
                    body = json.dumps(feeds.hf.get(params["date"][0], [])).encode("utf-8")
                else:
                    feeds.requests["rss"] += 1
                    body = feeds.rss
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_port}"

    def waits(self, before: dict[str, int]) -> float:
        """Seconds the providers' rules would have made this run wait (no wait before a first request)."""
        return sum(WAITS[p] * max(0, n - before[p] - 1) for p, n in self.requests.items())


def run(runner: CliRunner, args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = runner.invoke(app, args, env=env)
    seconds = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(f"triage {' '.join(args)} failed ({result.exit_code}):\n{result.output[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    records = varied_records(args.n)
    now = datetime.now(UTC)
    feeds = Feeds(records, now)
    server, url = feeds.serve()
    runner = CliRunner()
    home = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            Path("agenda.md").write_text(AGENDA, encoding="utf-8")
            Path("papers.jsonl").write_text(
                "\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8"
            )
            base = {"TRIAGE_AGENDA": str(Path("agenda.md").resolve()), "COLUMNS": "160"}
            # 1. the same papers as a file
            ingest_env = {**base, "TRIAGE_STORE": "ingest-store"}
            ingest_s = run(runner, ["ingest", "papers.jsonl"], ingest_env)
            tag_s = run(runner, ["tag"], ingest_env)
            digest_s = run(runner, ["digest", "--since", "1d", "-o", "ingest-digest.md"], ingest_env)
            # 2. the daily run over the feeds
            daily_env = {
                **base,
                "TRIAGE_STORE": "daily-store",
                "TRIAGE_ARXIV_URL": f"{url}/api/query",
                "TRIAGE_HF_URL": f"{url}/api/daily_papers",
                "TRIAGE_S2_URL": f"{url}/s2",
                "TRIAGE_ARXIV_DELAY": "0",
                "TRIAGE_HF_DELAY": "0",
                "TRIAGE_RSS_DELAY": "0",
            }
            run(runner, ["feed", "add", "cl", "--arxiv-category", "cs.CL", "--max", "5000"], daily_env)
            run(runner, ["feed", "add", "hf", "--hf-daily", "--max", "5000"], daily_env)
            run(runner, ["feed", "add", "rss", "--rss", f"{url}/rss", "--max", "5000"], daily_env)
            before = dict(feeds.requests)
            daily_s = run(runner, ["daily", "-o", "daily-digest.md"], daily_env)
            waits = feeds.waits(before)
            requests = {p: n - before[p] for p, n in feeds.requests.items()}
            before = dict(feeds.requests)
            again_s = run(runner, ["daily", "-o", "daily-digest-2.md"], daily_env)
            again_waits = feeds.waits(before)
            daily_text = Path("daily-digest.md").read_text(encoding="utf-8")
        finally:
            os.chdir(home)
            server.shutdown()
    baseline = ingest_s + tag_s + digest_s
    rows = [
        [
            "ingest + tag + digest (baseline)",
            args.n,
            round(baseline, 1),
            0.0,
            round(args.n / baseline, 1),
            1.0,
        ],
        ["  of which ingest", args.n, round(ingest_s, 1), 0.0, round(args.n / ingest_s, 1), ""],
        [
            "daily: fetch, enrich, tag, digest",
            args.n,
            round(daily_s, 1),
            waits,
            round(args.n / daily_s, 1),
            round(daily_s / baseline, 3),
        ],
        ["daily again (nothing new)", 0, round(again_s, 1), again_waits, "", round(again_s / baseline, 3)],
    ]
    report(
        "fetch",
        f"Daily run vs ingest of the same {args.n} papers (providers' waits counted, not slept)",
        ["run", "papers", "seconds", "provider waits s", "papers/s", "x baseline"],
        rows,
        {"n": args.n, "requests": requests, "digest_has_papers": "new undecided paper" in daily_text},
    )
    target = 1.2 * baseline + waits
    verdict = "within" if daily_s <= 1.2 * baseline else "over"
    console.print(
        f"daily {daily_s:.1f}s = {daily_s / baseline:.2f}x the baseline ({verdict} 1.2x); with the "
        f"providers' waits ({waits:.0f}s: {requests}) a real run takes ~{daily_s + waits:.0f}s against a "
        f"target of {target:.0f}s."
    )


if __name__ == "__main__":
    main()
