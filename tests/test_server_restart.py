"""The review UI on a Chroma server that stops and starts again mid-review (docs/server.md):
a real `chroma run`, stopped and started on the same port and data directory. Decisions made
while it is down are kept (rows say not saved, one notification, no error dialog) and saved
by the refresh once it answers; a quit while it is down keeps them for the next session."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_support import detail_text, drive, fill, make_app, reopen, settle, slow_store

from assistant.config import Settings, load_settings
from assistant.models import Status
from assistant.store import Store
from assistant.tui.app import ReviewApp
from assistant.tui.screens import ErrorScreen
from assistant.tui.widgets import UNSAVED_MARK
from conftest import free_port, start_chroma, stop_process

REFRESH = 0.3  # seconds between the UI's refreshes: the retry after the server returns


class Server:
    """`chroma run` on one port and data directory, stopped and started again at will."""

    def __init__(self, root: Path) -> None:
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = start_chroma(self.root / "data", self.port, self.root / "server.log")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("restarting-chroma"))
    running.start()
    yield running
    running.stop()


@pytest.fixture
def lab(server: Server, tmp_path: Path) -> Settings:
    """A small assessed store in a collection of its own on the server (started if a test left
    it stopped)."""
    if server.proc is None:
        server.start()
    settings = load_settings(
        chroma_url=server.url, collection=f"papers-{uuid.uuid4().hex[:12]}", store=tmp_path / "unused"
    )
    fill(Store.open(settings), n=12)
    return settings


def decided(settings: Settings) -> dict[str, Status]:
    """Every paper that has a decision, as a second client reads the store."""
    items = reopen(settings).iter_all()
    return {i.paper.id: i.decision.status for i in items if i.decision.status is not Status.NEW}


def messages(app: ReviewApp) -> list[str]:
    return [n.message for n in app._notifications]


def dialogs(app: ReviewApp) -> list[Any]:
    return [s for s in app.screen_stack if isinstance(s, ErrorScreen)]


def marked(app: ReviewApp, pid: str) -> bool:
    return str(app.table.get_row(pid)[1]).startswith(UNSAVED_MARK)


async def press(pilot: Pilot[None], key: str) -> tuple[str, float]:
    """Press a key on the highlighted paper: (the paper, seconds until the key was handled)."""
    pid = pilot.app.current_id()  # type: ignore[attr-defined]
    started = time.perf_counter()
    await pilot.press(key)
    return pid, time.perf_counter() - started


async def until(pilot: Pilot[None], done: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.1)


def test_decisions_while_the_server_is_down_are_saved_when_it_returns(
    server: Server, lab: Settings, tmp_path: Path
) -> None:
    app = make_app(lab, tmp_path, refresh=REFRESH)
    want: dict[str, Status] = {}
    seen: dict[str, Any] = {}

    async def script(pilot: Pilot[None]) -> None:
        for key, status in (("a", Status.ACCEPTED), ("x", Status.REJECTED)):
            pid, _ = await press(pilot, key)
            want[pid] = status
            await settle(pilot)
        assert decided(lab) == want  # saved as usual
        server.stop()
        down: list[float] = []
        for key, status in (("a", Status.ACCEPTED), ("m", Status.MAYBE)):
            pid, took = await press(pilot, key)
            want[pid] = status
            down.append(took)
        await pilot.pause(3 * REFRESH)  # refreshes fail meanwhile
        for pid in list(want)[2:]:
            assert app.index.rows[pid].status is want[pid]  # kept in the session
            assert marked(app, pid), pid
        assert "not saved: the Chroma server at" in str(app.query_one("#status-line").content)
        assert len([m for m in messages(app) if "cannot be reached" in m]) == 1, messages(app)
        assert not dialogs(app)
        # u undoes a kept change (back to undecided, still kept), and the paper is decided again.
        last = list(want)[-1]
        await pilot.press("u")
        assert app.index.rows[last].status is Status.NEW and last in app.unsaved
        pid, took = await press(pilot, "x")
        assert pid == last
        want[last] = Status.REJECTED
        down.append(took)
        seen["down"] = down
        assert app.recovery_file is not None
        seen["changes"] = app.recovery_file.with_name(app.recovery_file.stem + ".changes.json")
        assert seen["changes"].exists()
        server.start()  # nothing pressed from here: the refresh saves them
        await until(pilot, lambda: not app.unsaved)
        await pilot.pause()
        assert not any(marked(app, pid) for pid in want)
        assert any("answers again: saved the 2 papers' changes" in m for m in messages(app)), messages(app)
        assert not dialogs(app)

    drive(app, script)
    # Every decision is in the store, on the paper it was made on, and no other paper changed.
    assert decided(lab) == want
    assert len(want) == 4
    assert not seen["changes"].exists()  # the next session has nothing to write again
    # No key waited on the stopped server (locally it refuses at once; elsewhere the connect
    # timeout bounds the first try and the known-down state skips the rest).
    assert max(seen["down"]) < 1.0, seen["down"]


def test_a_quit_while_the_server_is_down_keeps_the_changes_for_the_next_session(
    server: Server, lab: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = make_app(lab, tmp_path, refresh=REFRESH)
    want: dict[str, Status] = {}
    seen: dict[str, Any] = {}

    async def script(pilot: Pilot[None]) -> None:
        pid, _ = await press(pilot, "a")
        want[pid] = Status.ACCEPTED
        await settle(pilot)
        server.stop()
        for key, status in (("x", Status.REJECTED), ("s", None)):
            pid, _ = await press(pilot, key)
            if status is not None:
                want[pid] = status
            else:
                seen["starred"] = pid
        await pilot.press("q")

    drive(app, script)
    seen["file"] = app.recovery_file  # made once the writes behind the keys failed
    said = "".join(capsys.readouterr().err.splitlines())  # printed as the UI closes
    assert "2 papers' changes were not saved (the Chroma server at" in said, said
    assert f"kept in {seen['file']}; the next 'triage review' of this store saves them" in said, said
    changes = json.loads(seen["file"].with_name(seen["file"].stem + ".changes.json").read_text())
    assert {c["id"] for c in changes["changes"]} == set(list(want)[1:]) | {seen["starred"]}

    server.start()
    assert decided(lab) == dict(list(want.items())[:1])  # the store has only the first
    again = make_app(lab, tmp_path / "again", refresh=REFRESH)

    async def next_session(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: any("an earlier session could not save" in m for m in messages(again)))
        await pilot.pause()
        for pid, status in want.items():
            assert again.index.rows[pid].status is status

    drive(again, next_session)
    assert decided(lab) == want
    assert reopen(lab).get(seen["starred"]).decision.starred  # type: ignore[union-attr]
    assert not seen["file"].with_name(seen["file"].stem + ".changes.json").exists()


def test_on_a_busy_server_a_decision_waits_neither_on_its_write_nor_on_the_next_papers_read(
    server: Server, lab: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lab's server busy with everyone's work answers a read or a decision's write in 0.5 s
    here: the decision is written behind the key, and the paper it moves to was read ahead
    while the researcher read the one before, so the key waits on neither."""
    slow = 0.5
    slow_store(monkeypatch, slow, "get_many", "set_decision_fields")
    app = make_app(lab, tmp_path, refresh=REFRESH)
    want: dict[str, Status] = {}
    took: list[float] = []

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key, status in (("a", Status.ACCEPTED), ("x", Status.REJECTED), ("a", Status.ACCEPTED)):
            await pilot.pause(2 * slow)  # reading the paper: the next ones are read meanwhile
            pid, seconds = await press(pilot, key)
            want[pid] = status
            took.append(seconds)
            current = app.current_id()
            assert current is not None and app.index.rows[current].title[:30] in detail_text(app)
        await settle(pilot)

    drive(app, script)
    assert decided(lab) == want
    assert max(took) < slow, took


def test_on_a_server_each_paper_the_detail_pane_shows_is_read_once(
    server: Server, lab: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each decision retrains the model and the new ranking draws the pane again for the
    highlighted paper, and the cursor moves on to papers read ahead: no paper is read from the
    server twice (nothing else writes them), neither the one drawn again, nor one a read ahead
    still under way brings, nor the one just decided (this session wrote it)."""
    from collections import Counter

    app = make_app(lab, tmp_path, refresh=REFRESH)
    read: list[str] = []
    real = Store.get_many

    def counted(self: Store, ids: Any) -> Any:
        read.extend(ids)
        return real(self, ids)

    monkeypatch.setattr(Store, "get_many", counted)

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in "axaxa":
            await pilot.press(key)
            await settle(pilot)  # written, retrained, the new ranking in place
        assert app.ranking is not None and app.ranking.fit.decided == 5
        assert read
        assert {pid: n for pid, n in Counter(read).items() if n > 1} == {}
        before = len(read)
        await pilot.press("k")  # back to the paper decided last: read now, and shown
        await settle(pilot)
        back = app.current_id()
        assert back is not None and app.index.rows[back].title[:30] in detail_text(app)
        assert read[before:] == [back]

    drive(app, script)


def test_on_a_server_the_pane_shows_an_abstract_another_process_found(
    server: Server, lab: Settings, tmp_path: Path
) -> None:
    """A paper read (and kept) while it had no abstract gets one from another process (its
    queue row otherwise the same): the pane, drawn again, shows the abstract."""
    from assistant.models import Paper

    app = make_app(lab, tmp_path, refresh=REFRESH)
    bare = Paper.create(title="Sparse routing for mixture of experts", authors=["B. Writer"])

    async def script(pilot: Pilot[None]) -> None:
        await settle(pilot)
        reopen(lab).upsert_papers([bare])
        await until(pilot, lambda: bare.id in app.shown)
        app.table.move_cursor(row=app.shown.index(bare.id))
        await settle(pilot)
        assert app.current_id() == bare.id and "Sparse routing" in detail_text(app)
        found = bare.model_copy(update={"abstract": "Tokens are routed to a few quokka experts."})
        reopen(lab).upsert_papers([found])
        await until(pilot, lambda: "quokka" in detail_text(app))

    drive(app, script)


def test_the_changes_files_are_where_the_recovery_files_are() -> None:
    from assistant.ingest import RECOVERY_DIR, undo_file
    from assistant.tui import recovery

    assert recovery.folder() == undo_file(RECOVERY_DIR).parent
