"""A small assessed store for the review UI's tests, and a helper to drive the app."""

from __future__ import annotations

import asyncio
import hashlib
import io
import shutil
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from assistant.agenda import Agenda, example_agenda_text, parse_agenda
from assistant.config import Settings, load_settings
from assistant.models import Assessment, Paper, Status, TopicScore
from assistant.store import Store
from assistant.triage.batch import tag_offline
from assistant.triage.keys import engine_key
from assistant.tui.app import ReviewApp
from assistant.tui.widgets import Detail
from conftest import sample_records

FIXED = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)
SIZE = (170, 45)


def agenda() -> Agenda:
    return parse_agenda(example_agenda_text())


def fill(store: Store, n: int = 30, assess: bool = True, fixed: bool = False) -> None:
    """n sample papers, assessed offline with a fixed assessment time (for stable screens); or,
    `fixed`, with assessments no engine made (`fixed_assessments`)."""
    papers = [
        Paper.create(
            **{k: v for k, v in r.items() if k in Paper.model_fields and k != "id"}, sources=["sample"]
        )
        for r in sample_records(n)
    ]
    store.upsert_papers(papers)
    if fixed:
        store.set_assessments(fixed_assessments(papers, agenda()))
    elif assess:
        tag_offline(store, agenda())
        stamped = {}
        for item in store.iter_all():
            assert item.assessment is not None
            stamped[item.paper.id] = item.assessment.model_copy(update={"created_at": FIXED})
        store.set_assessments(stamped)


def fixed_assessments(papers: list[Paper], of: Agenda) -> dict[str, Assessment]:
    """Assessments that stay the same whatever the offline engine's tuning (for pictures of
    the screens): topic scores from a hash of the title, relevance mostly the best topic's
    score, summary the abstract's first sentence."""
    negative = of.negative.name if of.negative else None
    out = {}
    for paper in papers:
        digest = hashlib.sha256(paper.title.encode("utf-8")).digest()
        topics = [
            TopicScore(topic=t.name, score=digest[i + 1] % 11, reason=f"fixture score {digest[i + 1] % 11}")
            for i, t in enumerate(of.topics)
        ]
        interest = [t for t in topics if t.topic != negative]
        best = max((t.score for t in interest), default=0)
        out[paper.id] = Assessment(
            tags=[t.topic.lower() for t in sorted(interest, key=lambda t: -t.score) if t.score >= 6][:2],
            summary=paper.abstract.split(". ")[0].rstrip(".") + "." if paper.abstract else "",
            topics=topics,
            relevance=round(min(10.0, 0.7 * best + digest[0] % 31 / 10), 1),
            engine="offline",
            key=engine_key(paper.document, of),
            agenda_hash=of.hash,
            created_at=FIXED,
        )
    return out


def template(root: Path, assess: bool = True, fixed: bool = False) -> Path:
    """Build a store once per test module; tests work on copies of it."""
    path = root / ("fixed" if fixed else "assessed" if assess else "raw")
    if not path.exists():
        fill(Store.open(load_settings(store=path)), assess=assess, fixed=fixed)
    return path


def copy_store(template_path: Path, dest: Path) -> Settings:
    shutil.copytree(template_path, dest)
    return load_settings(store=dest)


def make_app(settings: Settings, tmp_path: Path, refresh: float = 60.0) -> ReviewApp:
    app = ReviewApp(
        Store.open(settings), settings, agenda(), cache_dir=tmp_path / "cache", refresh_every=refresh
    )
    # A new ranking re-sorts the queue as soon as it is made (the UI waits 0.4 s after the last
    # key): scripts that press a key and then settle do not wait for the pause each time.
    app.resort_after_keys = 0.0
    return app


def reopen(settings: Settings) -> Store:
    """A second client on the same store: proves what was written, not what the app holds."""
    return Store.open(settings)


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
        await complete(pilot)
        await pilot.pause()
    for _ in range(50):
        if not getattr(pilot.app, "ranking_outstanding", False):
            break
        await pilot.pause(0.1)
        await complete(pilot)
    for _ in range(200):  # the decisions written behind the keys (a thread of their own)
        if not getattr(pilot.app, "writes_pending", False):
            break
        await pilot.pause(0.05)
    await pilot.pause()


async def complete(pilot: Pilot[None]) -> None:
    """Wait for the workers; a retrain that a newer one replaced (cancelled) is waited past."""
    for _ in range(20):
        try:
            await pilot.app.workers.wait_for_complete()
            return
        except WorkerCancelled:
            await pilot.pause(0.05)


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


def slow_store(monkeypatch: pytest.MonkeyPatch, seconds: float, *methods: str) -> None:
    """Each call of these Store methods takes `seconds` more (a store busy with other work: a
    lab's server, another process's write)."""
    for name in methods:
        real = getattr(Store, name)

        def busy(store: Store, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            time.sleep(seconds)
            return _real(store, *args, **kwargs)

        monkeypatch.setattr(Store, name, busy)
