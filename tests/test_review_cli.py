"""`triage mark` and `triage note`: the review UI's decisions from the shell."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import load_settings
from assistant.models import Paper, Status
from assistant.store import Store

runner = CliRunner()


def setup_store(work: Path) -> tuple[Store, list[str]]:
    store = Store.open(load_settings(store=work / "store"))
    papers = [Paper.create(title=f"Paper number {i} on probing", arxiv_id=f"2401.0000{i}") for i in range(3)]
    store.upsert_papers(papers)
    return store, [p.id for p in papers]


def test_mark_and_note_write_what_the_ui_would(isolated: Path) -> None:
    store, ids = setup_store(isolated)
    result = runner.invoke(app, ["mark", ids[0], ids[1], "--accept", "--star"])
    assert result.exit_code == 0, result.output
    assert "accepted ★" in result.output
    result = runner.invoke(app, ["mark", ids[2], "--reject"])
    assert result.exit_code == 0
    result = runner.invoke(app, ["note", ids[0], "Read section 4 first."])
    assert result.exit_code == 0
    fresh = Store.open(load_settings(store=isolated / "store"))
    first, second, third = (fresh.get(i) for i in ids)
    assert first and second and third
    assert first.decision.status is Status.ACCEPTED and first.decision.starred
    assert first.decision.note == "Read section 4 first." and first.decision.decided_at is not None
    assert second.decision.status is Status.ACCEPTED and third.decision.status is Status.REJECTED
    result = runner.invoke(app, ["mark", ids[0], "--unstar", "--new"])
    assert result.exit_code == 0
    item = Store.open(load_settings(store=isolated / "store")).get(ids[0])
    assert item and item.decision.status is Status.NEW and not item.decision.starred
    assert item.decision.note == "Read section 4 first."


def test_mark_errors_are_one_line_and_change_nothing(isolated: Path) -> None:
    store, ids = setup_store(isolated)
    result = runner.invoke(app, ["mark", ids[0], "arxiv:9999.99999", "--accept"])
    assert result.exit_code == 1 and "no paper with id 'arxiv:9999.99999'" in result.output
    assert "Traceback" not in result.output
    assert Store.open(load_settings(store=isolated / "store")).get(ids[0]).decision.status is Status.NEW  # type: ignore[union-attr]
    result = runner.invoke(app, ["mark", ids[0], "--accept", "--reject"])
    assert result.exit_code == 1 and "one of" in result.output
    result = runner.invoke(app, ["mark", ids[0]])
    assert result.exit_code == 1 and "nothing to mark" in result.output
    result = runner.invoke(app, ["note", "arxiv:9999.99999", "x"])
    assert result.exit_code == 1 and "no paper" in result.output
