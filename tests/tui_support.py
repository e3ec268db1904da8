"""A small assessed store for the review UI's tests, and a helper to drive the app."""

from __future__ import annotations

import asyncio
import io
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot

from assistant.agenda import Agenda, example_agenda_text, parse_agenda
from assistant.config import Settings, load_settings
from assistant.models import Paper, Status
from assistant.store import Store
from assistant.triage.batch import tag_offline
from assistant.tui.app import ReviewApp
from assistant.tui.widgets import Detail
from conftest import sample_records

FIXED = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)
SIZE = (170, 45)


def agenda() -> Agenda:
    return parse_agenda(example_agenda_text())


def fill(store: Store, n: int = 30, assess: bool = True) -> None:
    """n sample papers, assessed offline with a fixed assessment time (for stable screens)."""
    papers = [
        Paper.create(
            **{k: v for k, v in r.items() if k in Paper.model_fields and k != "id"}, sources=["sample"]
        )
        for r in sample_records(n)
    ]
    store.upsert_papers(papers)
    if assess:
        tag_offline(store, agenda())
        fixed = {}
        for item in store.iter_all():
            assert item.assessment is not None
            fixed[item.paper.id] = item.assessment.model_copy(update={"created_at": FIXED})
        store.set_assessments(fixed)


def template(root: Path, assess: bool = True) -> Path:
    """Build a store once per test module; tests work on copies of it."""
    path = root / ("assessed" if assess else "raw")
    if not path.exists():
        fill(Store.open(load_settings(store=path)), assess=assess)
    return path


def copy_store(template_path: Path, dest: Path) -> Settings:
    shutil.copytree(template_path, dest)
    return load_settings(store=dest)


def drive(
    app: ReviewApp, script: Callable[[Pilot[None]], Awaitable[None]], size: tuple[int, int] = SIZE
) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await script(pilot)

    asyncio.run(main())


async def settle(pilot: Pilot[None]) -> None:
    """Let the workers (index, count, refresh, the personal model) finish and the screen update,
    a retrain that a decision scheduled included."""
    for _ in range(3):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
    for _ in range(50):
        if not getattr(pilot.app, "_retrain_pending", False):
            break
        await pilot.pause(0.1)
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def ranked_ids(store: Store, statuses: tuple[Status, ...] = (Status.NEW, Status.MAYBE)) -> list[str]:
    items = [i for i in store.iter_all() if i.decision.status in statuses]
    items.sort(
        key=lambda i: (-(i.assessment.relevance if i.assessment else -1.0), -(i.paper.day or 0), i.paper.id)
    )
    return [i.paper.id for i in items]


def detail_text(app: ReviewApp) -> str:
    """The detail pane as plain text."""
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(app.query_one(Detail).content)
    return console.export_text()
