"""Which queued papers are still in the store, read ahead in batches, off the event loop.

A paper deleted while a run goes on (`triage rm`, the review screen) should not be sent. Reading
the store for every call cost a store read on the event loop per call, which at 32 calls in flight
was a sixth of the loop's time; instead one read, in a thread, covers the call's papers and those
of the next calls in the queue, and its answer holds for MAX_AGE seconds. A paper deleted within
that time of its call is still sent; its result is then set aside by the writer (counted as removed
all the same).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from assistant.models import Paper
from assistant.store import Store
from assistant.triage.writer import in_thread

MAX_AGE = 1.0  # seconds a read's answer holds
AHEAD_PER_CALL = 4  # one read covers this many times the concurrency of queued calls


class Presence:
    """Answers "which of these papers are stored" for the calls of one run, in order of the plan."""

    def __init__(self, store: Store, groups: Sequence[Sequence[Paper]], concurrency: int) -> None:
        self.store = store
        self.ids = [[p.id for p in g] for g in groups]
        self.ahead = max(16, AHEAD_PER_CALL * concurrency)
        self.seen: dict[str, float] = {}  # paper id -> when a read that found it began
        self.gone: set[str] = set()
        self.reading: asyncio.Future[None] | None = None

    def _fresh(self, ids: Sequence[str]) -> bool:
        oldest = time.monotonic() - MAX_AGE
        return all(i in self.gone or self.seen.get(i, -1.0) >= oldest for i in ids)

    async def stored(self, index: int, ids: Sequence[str]) -> set[str]:
        """Which of ids (papers of the plan's group `index`) are in the store."""
        while not self._fresh(ids):
            if self.reading is None or self.reading.done():
                window = [*ids, *(i for g in self.ids[index : index + self.ahead] for i in g)]
                self.reading = asyncio.ensure_future(self._read(list(dict.fromkeys(window))))
            await asyncio.shield(self.reading)  # a cancelled call leaves the read to the others
        return {i for i in ids if i not in self.gone}

    async def _read(self, ids: list[str]) -> None:
        began = time.monotonic()
        present = await in_thread(self.store.stored_ids, ids)
        for pid in ids:
            if pid in present:
                self.seen[pid] = max(self.seen.get(pid, began), began)
            else:
                self.gone.add(pid)
