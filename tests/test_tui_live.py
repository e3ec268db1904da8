"""The review UI open while `triage tag` writes to the same store from another process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from textual.pilot import Pilot
from tui_support import agenda, drive, fill, settle

from assistant.agenda import example_agenda_text
from assistant.config import Settings
from assistant.index import Sort, sort_key
from assistant.models import Status
from assistant.store import Store
from assistant.tui.app import ReviewApp


def test_assessments_from_a_concurrent_tag_appear_and_no_decision_is_lost(
    settings: Settings, tmp_path: Path
) -> None:
    fill(Store.open(settings), n=40, assess=False)
    agenda_file = tmp_path / "agenda.md"
    agenda_file.write_text(example_agenda_text(), encoding="utf-8")
    where = ["--chroma-url", settings.chroma_url] if settings.chroma_url else ["--store", str(settings.store)]
    env = {**os.environ, "TRIAGE_COLLECTION": settings.collection}
    app = ReviewApp(Store.open(settings), settings, agenda(), cache_dir=tmp_path / "cache", refresh_every=0.3)
    decided: dict[str, Status] = {}

    async def script(pilot: Pilot[None]) -> None:
        assert all(app.index.rows[i].relevance is None for i in app.shown)
        proc = subprocess.Popen(
            [sys.executable, "-m", "assistant", *where, "--agenda", str(agenda_file), "tag"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        keys = ["a", "x", "m"]
        while proc.poll() is None:
            pid = app.current_id()
            if pid is not None and len(decided) < 12:
                key = keys[len(decided) % 3]
                decided[pid] = {"a": Status.ACCEPTED, "x": Status.REJECTED, "m": Status.MAYBE}[key]
                await pilot.press(key)
            await pilot.pause(0.2)
        output = proc.stdout.read().decode() if proc.stdout else ""
        assert proc.returncode == 0, output
        deadline = time.monotonic() + 20
        while any(r.relevance is None for r in app.index.rows.values()) and time.monotonic() < deadline:
            await pilot.pause(0.3)
        assert all(r.relevance is not None for r in app.index.rows.values()), "the UI missed assessments"
        # The queue shows them in its order: relevance blended with what the decisions taught.
        await settle(pilot)
        key = sort_key(Sort.RELEVANCE, app.ranking)
        keys = [key(app.index.rows[i]) for i in app.shown if i not in app.sticky]
        assert keys == sorted(keys)
        assert not app.screen.is_modal

    drive(app, script)
    assert decided, "no decision was made while the tag ran"
    store = Store.open(settings)
    for pid, status in decided.items():
        item = store.get(pid)
        assert item is not None and item.decision.status is status
    assert all(item.assessment is not None for item in store.iter_all())
