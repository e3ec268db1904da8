"""`D` in the review UI: delete the highlighted paper after a confirmation, `u` brings it back whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from tui_support import copy_store, detail_text, drive, make_app, ranked_ids, reopen, settle, template

from assistant.config import Settings
from assistant.index import QueueIndex
from assistant.lists import ReadingLists
from assistant.models import Status
from assistant.tui.screens import ConfirmDeleteScreen
from assistant.tui.widgets import KeyFooter


@pytest.fixture(scope="module")
def assessed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return template(tmp_path_factory.mktemp("tui-delete"), assess=True)


@pytest.fixture
def assessed(assessed_template: Path, tmp_path: Path) -> Settings:
    return copy_store(assessed_template, tmp_path / "store")


def snapshot(settings: Settings, pid: str) -> tuple[object, ...]:
    """Everything the store holds of a paper, read by a second client."""
    store = reopen(settings)
    record = store.records([pid])
    item = store.get(pid)
    assert record and item is not None
    meta = {k: v for k, v in record[0].metadata.items() if k != "touched"}
    return item, record[0].document, meta, record[0].embedding


def summary(app: object) -> str:
    return str(app.query_one("#summary", Static).content)  # type: ignore[attr-defined]


def test_delete_asks_first_and_undo_brings_the_paper_back_whole(assessed: Settings, tmp_path: Path) -> None:
    ids = ranked_ids(reopen(assessed))
    target = ids[1]
    # The paper carries everything the researcher gave it: a decision, a star, tags, a note, lists.
    store = reopen(assessed)
    ReadingLists(store).create("Reading group")
    ReadingLists(store).add("Reading group", [target])
    store.update_decision(target, status=Status.MAYBE, starred=True, note="Ask Ana.", tags=["probing"])
    before = snapshot(assessed, target)
    title = before[0].paper.title  # type: ignore[attr-defined]
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.pause(0.4)  # the view's count
        await settle(pilot)
        assert app.matching == 30
        # Its star and maybe taught the queue: it is where the queue's order puts it now.
        row = app.shown.index(target)
        below = app.shown[row + 1]
        app.table.move_cursor(row=row)
        await pilot.pause()
        assert app.current_id() == target
        # The question names the paper, and says what goes with it; n, escape and enter keep it.
        for key in ("n", "escape", "enter"):
            await pilot.press("D")
            assert isinstance(app.screen, ConfirmDeleteScreen)
            assert title[:40] in app.screen.question and target in app.screen.question
            assert "decision (maybe), star, tags, note and lists" in app.screen.question
            await pilot.press(key)
            assert not isinstance(app.screen, ConfirmDeleteScreen)
            assert reopen(assessed).get(target) is not None
        await pilot.press("D", "y")
        assert app.current_id() == below  # the cursor stays where it was: on the next paper
        assert app.table.cursor_row == row
        await settle(pilot)  # the queue re-ranked without the deleted paper's star
        assert reopen(assessed).get(target) is None
        assert target not in app.shown and target not in app.index.rows
        assert app.current_id() == below
        await pilot.pause(0.4)  # the view's count, after the re-ranking's reload
        await settle(pilot)
        assert "maybe 0" in summary(app) and app.matching == 29
        assert ReadingLists(reopen(assessed)).members("Reading group") == []
        assert any("Deleted" in n.message and "u brings it back" in n.message for n in app._notifications)
        await pilot.press("u")
        await settle(pilot)
        assert snapshot(assessed, target) == before  # paper, decision, assessment, lists, vector
        assert ReadingLists(reopen(assessed)).members("Reading group") == [target]
        assert app.current_id() == target
        assert "maybe 1" in summary(app)
        assert "Ask Ana." in detail_text(app) and "Reading group" in detail_text(app)
        # Search by meaning finds it again: its vector came back with it.
        hits = reopen(assessed).search(title, k=1)
        assert hits[0].item.paper.id == target
        await pilot.pause(0.4)
        await settle(pilot)
        assert app.matching == 30

    drive(app, script)


def test_undo_takes_back_deletes_and_decisions_in_turn(assessed: Settings, tmp_path: Path) -> None:
    ids = ranked_ids(reopen(assessed))
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("a")  # accept the first paper; the cursor moves to the second
        assert app.current_id() == ids[1]
        await settle(pilot)  # the queue learns from the accept and is re-ranked
        second = app.current_id()
        following = app.shown[app.table.cursor_row + 1]
        await pilot.press("D", "y")
        assert app.current_id() == following and second not in app.shown
        await settle(pilot)
        await pilot.press("end")
        last = app.current_id()
        await pilot.press("D", "y")  # the last row: the cursor goes to the one above
        assert app.current_id() == app.shown[-1] != last
        await settle(pilot)
        assert reopen(assessed).count() == 28
        await pilot.press("u")
        assert app.current_id() == last and reopen(assessed).get(last) is not None  # type: ignore[arg-type]
        await pilot.press("u")
        assert app.current_id() == second and reopen(assessed).count() == 30
        await pilot.press("u")
        assert reopen(assessed).get(ids[0]).decision.status is Status.NEW  # type: ignore[union-attr]
        await pilot.press("u")
        assert any(n.message == "Nothing to undo." for n in app._notifications)

    drive(app, script)


def test_other_uis_on_the_store_follow_the_delete_and_the_undo(assessed: Settings, tmp_path: Path) -> None:
    """The delete and its undo go through the store: another UI's refresh takes both in."""
    watcher = QueueIndex(location="another UI")
    watcher.build(reopen(assessed))
    first = ranked_ids(reopen(assessed))[0]
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        await pilot.press("D", "y")
        rows, started, gone = watcher.changes(reopen(assessed))
        assert gone == [first]
        watcher.remove(gone)
        watcher.stamp = started
        await pilot.press("u")
        rows, started, gone = watcher.changes(reopen(assessed))
        assert not gone and first in {r.id for r in rows}

    drive(app, script)


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
def test_the_footer_shows_the_delete_key(assessed: Settings, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(assessed, tmp_path)

    async def script(pilot: Pilot[None]) -> None:
        footer = app.query_one(KeyFooter)
        assert ("D", "D", "Delete", True) in footer.shown
        start, end = next((start, end) for start, end, key in footer.spans if key == "D")
        assert 0 < end <= size[0]  # on screen, not cut off
        assert "D Delete" in footer.render().plain[start:end]
        # Keys are shown whole or not at all (the palette's key goes first on a narrow screen).
        drawn = footer.render().plain
        for left, right, key in footer.spans:
            assert right <= size[0]
            description = next(
                (d for k, _, d, _ in (*footer.shown, footer.palette or ("", "", "", True)) if k == key)
            )
            assert drawn[left:right].endswith(description)
        # A key clicked is pressed: the delete question is asked.
        await pilot.click(KeyFooter, offset=(start, 0))
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDeleteScreen)

    drive(app, script, size=size)
