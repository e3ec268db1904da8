"""`triage digest`: the best new papers per agenda topic, as Markdown."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from markdown_it import MarkdownIt
from typer.testing import CliRunner

from assistant.agenda import parse_agenda
from assistant.cli import app
from assistant.config import Settings
from assistant.digest import build, render
from assistant.models import Assessment, Decision, Paper, Status, StoredPaper, TopicScore
from assistant.store import Store
from conftest import write_lines

runner = CliRunner()
AGENDA = (
    "## Multilingual models\nMany languages.\n\n## Efficient fine-tuning\nAdapters.\n\n"
    "## Not interested\nCrypto.\n"
)
NOW = datetime(2025, 6, 10, 9, 0, tzinfo=UTC)


def stored(
    title: str,
    multi: int | None,
    efficient: int = 0,
    *,
    days_ago: int = 1,
    status: Status = Status.NEW,
    added: bool = True,
    date_: str | None = None,
) -> StoredPaper:
    assessment = None
    if multi is not None:
        assessment = Assessment(
            topics=[
                TopicScore(topic="Multilingual models", score=multi, reason=f"why {title} <b>matters</b>"),
                TopicScore(topic="Efficient fine-tuning", score=efficient, reason="efficient"),
                TopicScore(topic="Not interested", score=9, reason="never shown"),
            ],
            relevance=float(max(multi, efficient)),
            engine="offline",
            summary=f"summary of {title}",
        )
    return StoredPaper(
        paper=Paper.create(title=title, date=date_, arxiv_id=None, url=f"https://example.org/{title[:3]}"),
        decision=Decision(status=status),
        assessment=assessment,
        added_at=NOW - timedelta(days=days_ago) if added else None,
    )


def test_digest_has_the_best_new_papers_per_topic() -> None:
    agenda = parse_agenda(AGENDA)
    items = [
        stored("Alpha multilingual", 9, 1),
        stored("Beta multilingual", 7, 6),
        stored("Gamma multilingual", 5),
        stored("Delta old news", 10, days_ago=30),
        stored("Epsilon rejected", 10, status=Status.REJECTED),
        stored("Theta accepted already", 10, status=Status.ACCEPTED),
        stored("Iota weak match", 3, 4),
        stored("Zeta not assessed yet", None),
        stored("Eta dated recently", 8, added=False, date_="2025-06-08"),
    ]
    text = render(build(items, agenda, NOW.date() - timedelta(days=7), top=2), agenda)
    assert text.startswith("# Paper digest: new since 2025-06-03\n")
    assert "6 new undecided papers since 2025-06-03 (1 not assessed yet" in text
    assert "the best 2 of those scoring 5 or more" in text
    html = MarkdownIt("commonmark").render(text)
    sections = re.findall(r"<h2>(.*?)</h2>", html)
    assert sections == ["Multilingual models (best 2 of 4)", "Efficient fine-tuning (1)"]
    multilingual = html.split("<h2>")[1]
    assert multilingual.index("Alpha") < multilingual.index("Eta") and "Beta" not in multilingual
    assert "why Alpha multilingual &lt;b&gt;matters&lt;/b&gt;" in multilingual  # the reason, escaped
    efficient = html.split("<h2>")[2]
    assert "Beta" in efficient and "Alpha" not in efficient  # 1 on it: not a match
    for absent in ("Delta", "Epsilon", "Theta", "Iota", "Not interested", "never shown"):
        assert absent not in text
    assert '<a href="https://example.org/Alp">' in html


def test_digest_says_when_nothing_is_new() -> None:
    agenda = parse_agenda(AGENDA)
    text = render(build([stored("Old", 9, days_ago=40)], agenda, date(2025, 6, 1), top=5), agenda)
    assert text == "# Paper digest: new since 2025-06-01\n\nNothing new since 2025-06-01.\n"
    text = render(build([stored("New but off-topic", 0)], agenda, date(2025, 6, 1), top=5), agenda)
    assert "1 new undecided paper since 2025-06-01" in text
    assert "None of them scores 5 or more on an agenda topic." in text


def test_digest_command_writes_markdown(tmp_path: Path, embedded_settings: Settings) -> None:
    agenda = tmp_path / "agenda.md"
    agenda.write_text(AGENDA, encoding="utf-8")
    env = {"COLUMNS": "160", "TRIAGE_STORE": str(embedded_settings.store), "TRIAGE_AGENDA": str(agenda)}
    records = [json.dumps({"title": t}) for t in ("Routing experts across languages", "A rejected paper")]
    assert (
        runner.invoke(app, ["ingest", str(write_lines(tmp_path / "p.jsonl", records))], env=env).exit_code
        == 0
    )
    store = Store.open(embedded_settings)
    ids = {i.paper.title: i.paper.id for i in store.iter_all()}
    for pid in ids.values():
        store.set_assessment(
            pid,
            Assessment(
                topics=[TopicScore(topic="Multilingual models", score=8)], relevance=8.0, engine="offline"
            ),
        )
    store.update_decision(ids["A rejected paper"], status=Status.REJECTED)
    out = tmp_path / "digest.md"
    result = runner.invoke(app, ["digest", "--since", "1d", "--top", "3", "-o", str(out)], env=env)
    assert result.exit_code == 0, result.output
    assert "Wrote 1 paper to" in result.stderr
    text = out.read_text(encoding="utf-8")
    assert "## Multilingual models (1)" in text and "Routing experts across languages" in text
    assert "A rejected paper" not in text
    later = runner.invoke(app, ["digest", "--since", "2999-01-01"], env=env)
    assert later.exit_code == 0 and "Nothing new since 2999-01-01." in later.stdout
    bad = runner.invoke(app, ["digest", "--since", "soon"], env=env)
    assert bad.exit_code == 1 and "cannot read 'soon' as a date" in bad.output
