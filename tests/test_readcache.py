"""`stats` and `ranked` asked again of an unchanged store answer from what the last read saved
(without reading the store or training the personal model again), and never from a store that
changed since: whoever wrote to it, this tool or Chroma directly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import chromadb
from typer.testing import CliRunner

from assistant.cli import app
from conftest import sample_records, write_lines

runner = CliRunner()


def _answers(store: Path) -> dict[Path, tuple[int, int]]:
    """The saved answers under the test's cache, each with what identifies its version."""
    root = store.parent / "home" / ".cache"
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.rglob("answers/*.pickle")}


def triage_process(store: Path, *args: str) -> tuple[str, bool]:
    """Run a command as its own process: its output, and whether it computed its answer
    (and saved it) rather than taking the saved one."""
    before = _answers(store)
    result = subprocess.run(
        [sys.executable, "-m", "assistant", "--store", str(store), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
        check=True,
    )
    return result.stdout, _answers(store) != before


def stats_rows(output: str) -> dict[str, int]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 2 and cells[1].isdigit():
            rows[cells[0]] = int(cells[1])
    return rows


def test_an_unchanged_store_is_read_once_and_a_changed_one_again(tmp_path: Path) -> None:
    store = tmp_path / "store"
    papers = write_lines(tmp_path / "p.jsonl", [json.dumps(r) for r in sample_records(12)])
    for args in (["init"], ["ingest", str(papers)], ["tag"]):
        assert runner.invoke(app, ["--store", str(store), *args]).exit_code == 0

    first, loaded = triage_process(store, "ranked", "--json", "--top", "5")
    assert loaded
    again, loaded = triage_process(store, "ranked", "--json", "--top", "5")
    assert not loaded and again == first
    stats, loaded = triage_process(store, "stats")
    assert loaded and stats_rows(stats)["new"] == 12
    stats_again, loaded = triage_process(store, "stats")
    assert not loaded and stats_again == stats
    # Commands that open the store without changing it (Chroma writes to its file to open it)
    # leave the saved answers good.
    top = json.loads(first.splitlines()[0])["paper"]["id"]
    assert runner.invoke(app, ["--store", str(store), "show", top]).exit_code == 0
    triage_process(store, "search", "attention")
    stats_again, loaded = triage_process(store, "stats")
    assert not loaded and stats_again == stats
    again, loaded = triage_process(store, "ranked", "--json", "--top", "5")
    assert not loaded and again == first
    # The queue's order rests on the personal model's cached features: with them deleted, it
    # is ranked again (as 'show' and 'eval' would), not answered from before.
    features = list((tmp_path / "home" / ".cache").rglob("personal/*.pickle"))
    assert features
    for path in features:
        path.unlink()
    again, loaded = triage_process(store, "ranked", "--json", "--top", "5")
    assert loaded and again == first
    again, loaded = triage_process(store, "ranked", "--json", "--top", "5")
    assert not loaded and again == first  # and saved again, with the rebuilt cache

    # A decision made with this tool: the next read sees it.
    assert runner.invoke(app, ["--store", str(store), "mark", top, "--accept"]).exit_code == 0
    after, loaded = triage_process(store, "ranked", "--json", "--top", "5")
    assert loaded and top not in after
    stats, _ = triage_process(store, "stats")
    assert stats_rows(stats)["accepted"] == 1 and stats_rows(stats)["new"] == 11

    # A write straight through Chroma, by another program: seen too.
    triage_process(store, "stats")
    second = json.loads(after.splitlines()[0])["paper"]["id"]
    client = chromadb.PersistentClient(
        path=str(store), settings=chromadb.config.Settings(anonymized_telemetry=False)
    )
    papers = client.get_collection("papers")
    papers.update(ids=[second], metadatas=[{"status": "rejected"}])
    stats, loaded = triage_process(store, "stats")
    assert loaded and stats_rows(stats)["rejected"] == 1
    ranked, _ = triage_process(store, "ranked", "--json", "--top", "5")
    assert second not in ranked


def test_a_damaged_saved_answer_is_not_used(tmp_path: Path) -> None:
    store = tmp_path / "store"
    papers = write_lines(tmp_path / "p.jsonl", [json.dumps(r) for r in sample_records(5)])
    assert runner.invoke(app, ["--store", str(store), "ingest", str(papers)]).exit_code == 0
    stats, _ = triage_process(store, "stats")
    saved = list((tmp_path / "home" / ".cache").rglob("answers/*.pickle"))
    assert saved
    for path in saved:
        path.write_bytes(path.read_bytes()[:-10] + b"0123456789")
    again, loaded = triage_process(store, "stats")
    assert loaded and again == stats
