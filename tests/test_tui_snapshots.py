"""Pictures of the main screens (pytest-textual-snapshot); `pytest --snapshot-update` redraws them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_support import SIZE, agenda, copy_store, settle, template

from assistant.store import Store
from assistant.tui.app import ReviewApp


@pytest.fixture(scope="module")
def assessed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Assessments no engine made: the pictures change with the UI, not with the engine's tuning.
    return template(tmp_path_factory.mktemp("tui-snap"), fixed=True)


@pytest.fixture
def app(assessed_template: Path, tmp_path: Path) -> ReviewApp:
    settings = copy_store(assessed_template, tmp_path / "store")
    return ReviewApp(
        Store.open(settings), settings, agenda(), cache_dir=tmp_path / "cache", refresh_every=600
    )


def shot(snap_compare: Any, app: ReviewApp, *keys: str, size: tuple[int, int] = SIZE) -> None:
    async def before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await pilot.pause(0.4)  # the background count of the view
        await settle(pilot)

    assert snap_compare(app, run_before=before, terminal_size=size)


def test_queue_and_detail(snap_compare: Any, app: ReviewApp) -> None:
    shot(snap_compare, app, "j", "a")


def test_help(snap_compare: Any, app: ReviewApp) -> None:
    shot(snap_compare, app, "question_mark")


def test_filter(snap_compare: Any, app: ReviewApp) -> None:
    shot(snap_compare, app, "f")


def test_list_picker(snap_compare: Any, app: ReviewApp) -> None:
    app.lists.create("Group meeting")
    app.lists.create("Thesis related work")
    shot(snap_compare, app, "l")


def test_queue_at_100x30(snap_compare: Any, app: ReviewApp) -> None:
    """The title takes the room on a common terminal size; the footer shows D."""
    shot(snap_compare, app, size=(100, 30))


def test_delete_confirmation(snap_compare: Any, app: ReviewApp) -> None:
    shot(snap_compare, app, "j", "D", size=(100, 30))


def test_search_by_words(snap_compare: Any, app: ReviewApp) -> None:
    """The by-meaning switch turned off: a blank box and a label that says words."""
    shot(snap_compare, app, "slash", "tab", "space", size=(100, 30))
