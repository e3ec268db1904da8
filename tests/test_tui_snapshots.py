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
    return template(tmp_path_factory.mktemp("tui-snap"), assess=True)


@pytest.fixture
def app(assessed_template: Path, tmp_path: Path) -> ReviewApp:
    settings = copy_store(assessed_template, tmp_path / "store")
    return ReviewApp(
        Store.open(settings), settings, agenda(), cache_dir=tmp_path / "cache", refresh_every=600
    )


def shot(snap_compare: Any, app: ReviewApp, *keys: str) -> None:
    async def before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await pilot.pause(0.4)  # the background count of the view
        await settle(pilot)

    assert snap_compare(app, run_before=before, terminal_size=SIZE)


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
