"""Undoing an import without losing the researcher's work, and writes the store refuses: a
nearly full disk (Chroma's "Error in compaction"), a store removed or read-only under the
review UI."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from chromadb.api.models.Collection import Collection
from chromadb.errors import InternalError
from textual.pilot import Pilot
from textual.widgets import Static
from tui_support import copy_store, drive, make_app, ranked_ids, reopen, settle, template
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import Settings, load_settings
from assistant.lists import ReadingLists
from assistant.models import Paper, Status
from assistant.store import Store
from assistant.store.pending import Pending
from assistant.tui.widgets import UNSAVED_MARK
from conftest import sample_records, write_lines

runner = CliRunner()


def triage(store: Path, *args: str) -> Any:
    return runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "200"})


def exported(store: Path) -> dict[str, dict[str, Any]]:
    out = triage(store, "export", "-f", "jsonl").stdout.splitlines()
    return {r["paper"]["id"]: r for r in map(json.loads, out)}


def saved_path(output: str) -> Path:
    """The file `rm` says it saved what it deleted to."""
    line = next(ln for ln in output.splitlines() if "Saved what was deleted to " in ln)
    return Path(line.split("Saved what was deleted to ", 1)[1].split("; ", 1)[0])


# -- rm --last-import ------------------------------------------------------------------------


def test_rm_last_import_keeps_decided_papers_and_saves_what_it_removes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    before = write_lines(tmp_path / "before.jsonl", [json.dumps(r) for r in sample_records(3)])
    assert triage(store, "ingest", str(before)).exit_code == 0
    wrong = [
        {"title": f"An imported paper on topic {i}", "abstract": f"Abstract number {i}."} for i in range(6)
    ]
    merged = sample_records(1)[0]  # already stored: the wrong file merges into it
    wrong_file = write_lines(tmp_path / "wrong.jsonl", [json.dumps(r) for r in [*wrong, merged]])
    assert triage(store, "ingest", str(wrong_file)).exit_code == 0
    ids = [Paper.create(title=str(r["title"])).id for r in wrong]
    merged_id = Paper.create(title=str(merged["title"])).id
    assert "jsonl:wrong.jsonl" in exported(store)[merged_id]["paper"]["sources"]
    # The researcher works on three of the new papers: a decision, a note, a list.
    assert triage(store, "mark", ids[0], "--accept").exit_code == 0
    assert triage(store, "note", ids[1], "read the appendix").exit_code == 0
    assert triage(store, "list", "create", "Thesis").exit_code == 0
    assert triage(store, "list", "add", "Thesis", ids[2]).exit_code == 0
    Store.open(load_settings(store=store)).update_decision(ids[3], status=Status.NEW, tags=["mine"])
    undone = triage(store, "rm", "--last-import", "--yes")
    assert undone.exit_code == 0, undone.output
    out = " ".join(undone.output.split())
    assert "kept 4 papers you decided on, noted or listed; --including-decided removes them too" in out
    assert "Deleted 2 papers." in out
    left = exported(store)
    assert set(ids[:4]) <= set(left) and not set(ids[4:]) & set(left)
    assert left[ids[0]]["decision"]["status"] == "accepted"
    # The paper the import merged into stays, without the undone file among its sources.
    assert left[merged_id]["paper"]["sources"] == ["jsonl:before.jsonl"]
    saved = saved_path(undone.output)
    assert saved.parent.name == "removed" and f"'triage ingest {saved}'" in undone.output
    # --including-decided takes the rest; the saved file brings all of it back whole.
    rest = triage(store, "rm", "--last-import", "--yes", "--including-decided")
    assert rest.exit_code == 0 and "Deleted 4 papers." in rest.output, rest.output
    assert not set(ids) & set(exported(store))
    for path in (saved, saved_path(rest.output)):
        assert triage(store, "ingest", str(path)).exit_code == 0
    back = exported(store)
    assert set(ids) <= set(back)
    assert back[ids[0]]["decision"]["status"] == "accepted"
    assert back[ids[1]]["decision"]["note"] == "read the appendix"
    assert back[ids[2]]["decision"]["lists"] == ["Thesis"]
    assert back[ids[3]]["decision"]["tags"] == ["mine"]
    assert back[ids[4]]["paper"]["sources"] == ["jsonl:wrong.jsonl"]
    assert back[ids[0]]["added_at"] == left[ids[0]]["added_at"]


def test_rm_by_id_writes_a_restore_file_too(tmp_path: Path) -> None:
    store = tmp_path / "store"
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(3)])
    assert triage(store, "ingest", str(good)).exit_code == 0
    pid = next(iter(exported(store)))
    assert triage(store, "mark", pid, "--reject").exit_code == 0
    done = triage(store, "rm", pid, "--yes")
    assert done.exit_code == 0 and "Deleted 1 paper." in done.output
    assert pid not in exported(store)
    assert triage(store, "ingest", str(saved_path(done.output))).exit_code == 0
    assert exported(store)[pid]["decision"]["status"] == "rejected"


def test_an_import_accepted_or_listed_by_its_own_command_is_not_kept(tmp_path: Path) -> None:
    """`ingest --accept --list` decides for the import, not the researcher: undone whole."""
    store = tmp_path / "store"
    lib = write_lines(tmp_path / "lib.jsonl", [json.dumps(r) for r in sample_records(4)])
    assert triage(store, "ingest", str(lib), "--accept", "--list", "Library").exit_code == 0
    undone = triage(store, "rm", "--last-import", "--yes")
    assert undone.exit_code == 0 and "Deleted 4 papers." in undone.output, undone.output
    assert "kept" not in undone.output


# -- a nearly full disk ------------------------------------------------------------------------

Usage = namedtuple("Usage", "total used free")


def _compaction_fails(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    """Chroma's writes fail as they do with 2 MB left on the disk; the disk reports `free`."""

    def fail(*args: Any, **kwargs: Any) -> None:
        raise InternalError("Error in compaction: Failed to apply logs to the metadata segment")

    for name in ("add", "update", "upsert", "delete"):
        monkeypatch.setattr(Collection, name, fail)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(real(p).total, real(p).total - free, free))


def test_error_in_compaction_on_a_nearly_full_disk_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(5)])
    assert triage(store, "ingest", str(good)).exit_code == 0
    before = exported(store)
    pid = next(iter(before))
    more = write_lines(tmp_path / "more.jsonl", [json.dumps({"title": f"More paper {i}"}) for i in range(3)])
    with monkeypatch.context() as patch:
        _compaction_fails(patch, 2 * 1024 * 1024)
        # A decision, a note, a new list are queued in the store (a few hundred bytes): kept.
        for args in (["mark", pid, "--accept"], ["note", pid, "x"], ["list", "create", "Full"]):
            result = triage(store, *args)
            assert result.exit_code == 0, (args, result.output, result.exception)
        # What must reach Chroma itself fails in one line, the queued writes kept for later.
        for args in (["ingest", str(more)], ["rm", pid, "--yes"]):
            result = triage(store, *args)
            assert result.exit_code == 1, (args, result.output, result.exception)
            assert not isinstance(result.exception, InternalError), args
            assert "the disk holding the store" in result.output and "is full" in result.output, args
            assert "Traceback" not in result.output and "InternalError" not in result.output
        after = exported(store)
    assert after.keys() == before.keys()
    assert after[pid]["decision"]["status"] == "accepted" and after[pid]["decision"]["note"] == "x"
    before[pid]["decision"] = after[pid]["decision"]
    assert exported(store) == before  # nothing lost, nothing half-written
    assert triage(store, "mark", pid, "--accept").exit_code == 0


def test_error_in_compaction_with_room_on_the_disk_is_not_called_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(2)])
    assert triage(store, "ingest", str(good)).exit_code == 0
    pid = next(iter(exported(store)))
    _compaction_fails(monkeypatch, 50 * 1024**3)
    result = triage(store, "rm", pid, "--yes")  # a write Chroma makes itself (a decision is queued)
    assert isinstance(result.exception, InternalError)


# -- the store removed or read-only under the review UI ---------------------------------------


@pytest.fixture(scope="module")
def assessed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template(tmp_path_factory.mktemp("tui-refused"), assess=True)


@pytest.fixture
def assessed(assessed_template: Path, tmp_path: Path) -> Settings:
    return copy_store(assessed_template, tmp_path / "store")


def status_line(app: Any) -> str:
    return " ".join(str(app.query_one("#status-line", Static).content).split())


def recovery(path: Path) -> dict[str, dict[str, Any]]:
    return {r["paper"]["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_decisions_after_the_store_is_removed_are_kept_and_recoverable(
    assessed: Settings, tmp_path: Path
) -> None:
    ids = ranked_ids(reopen(assessed))
    app = make_app(assessed, tmp_path)
    seen: dict[str, Any] = {}

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("a")  # saved
        await settle(pilot)
        shutil.rmtree(assessed.store)
        app.table.move_cursor(row=app.shown.index(ids[1]))
        await pilot.pause()
        await pilot.press("x")
        for _ in range(100):  # the write behind the key fails, and the change is kept
            if app.unsaved:
                break
            await pilot.pause(0.05)
        text = status_line(app)
        assert text.startswith(
            f"not saved: the store at {assessed.store_location} was removed or is read-only; "
            "kept in this session"
        ), text
        assert "retried on the next change, and written to " in text
        assert app.recovery_file is not None and app.recovery_file.exists()
        assert not assessed.store.exists()  # the UI did not make the folder again
        title = app.table.get_row(ids[1])[1]
        assert str(title).startswith(UNSAVED_MARK)
        assert app.index.rows[ids[1]].status is Status.REJECTED  # kept in the session
        app.table.move_cursor(row=app.shown.index(ids[2]))
        await pilot.pause()
        await pilot.press("s")  # a star, retried with the first and refused again
        await pilot.pause()
        assert not assessed.store.exists()
        seen["file"] = app.recovery_file
        seen["records"] = recovery(app.recovery_file)

    drive(app, script)
    records = seen["records"]
    assert set(records) == {ids[1], ids[2]}
    assert records[ids[1]]["decision"]["status"] == "rejected"
    assert records[ids[2]]["decision"]["starred"] is True
    # `triage ingest RECOVERY_FILE` replays them (here into a new store: Chroma keeps the
    # removed one's client in this process).
    result = triage(tmp_path / "new-store", "ingest", str(seen["file"]))
    assert result.exit_code == 0, result.output
    back = exported(tmp_path / "new-store")
    assert back[ids[1]]["decision"]["status"] == "rejected" and back[ids[2]]["decision"]["starred"]


def test_a_refused_change_is_retried_on_the_next_change(
    assessed: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = ranked_ids(reopen(assessed))
    app = make_app(assessed, tmp_path)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise InternalError(
            "Query error: Database error: error returned from database: (code: 1032) "
            "attempt to write a readonly database"
        )

    def refuse_queue(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    async def script(pilot: Pilot[None]) -> None:
        with monkeypatch.context() as patch:
            # A decision goes to the store's queue of small writes (or to Chroma, once open).
            patch.setattr(Collection, "update", refuse)
            patch.setattr(Pending, "append", refuse_queue)
            await pilot.press("m")
            await settle(pilot)  # the write behind the key is refused, and the change kept
            assert status_line(app).startswith("not saved: the store at")
            assert ids[0] in app.unsaved
        ReadingLists(reopen(assessed)).create("Later")
        app.table.move_cursor(row=app.shown.index(ids[1]))
        await pilot.pause()
        await pilot.press("x")
        await settle(pilot)
        assert not app.unsaved and not app.table.unsaved
        assert not str(app.table.get_row(ids[0])[1]).startswith(UNSAVED_MARK)

    drive(app, script)
    store = reopen(assessed)
    assert store.get(ids[0]).decision.status is Status.MAYBE  # type: ignore[union-attr]
    assert store.get(ids[1]).decision.status is Status.REJECTED  # type: ignore[union-attr]


def test_a_removed_store_is_not_made_again_by_a_write(tmp_path: Path) -> None:
    settings = load_settings(store=tmp_path / "store")
    store = Store.open(settings)
    store.upsert_papers([Paper.create(title="A paper")])
    shutil.rmtree(settings.store)
    from assistant.errors import StoreGoneError

    with pytest.raises(StoreGoneError, match="was removed"):
        store.set_status([Paper.create(title="A paper").id], Status.ACCEPTED)
    assert not settings.store.exists()
