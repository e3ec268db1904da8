"""The LLM run's one writer: results go to the store in the order they arrive, grouped.

A store write has a fixed cost (with Chroma open in the process, ~5 ms + 0.45 ms a paper during
which the event loop stalls: Chroma's bindings hold the GIL), so under load the writer writes at
most every WRITE_INTERVAL seconds, everything that arrived meanwhile in one write (longer
intervals made longer stalls, and runs no faster); `close` cuts that wait short (the last results
are written at once: waiting out the interval added up to WRITE_INTERVAL to every run). A write
that fails never stops the writer (a writer that died left `close` waiting for ever, and a run
idle with nothing in flight): a paper deleted while the run went on (`triage rm`, the review
screen) is set aside as removed and the rest of its write is written again; any other failure is
recorded with the papers it concerned and the run stops starting calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from assistant.models import Assessment
from assistant.store import Store

WRITE_INTERVAL = 0.2
T = TypeVar("T")
Failed = dict[str, tuple[str, str]]  # paper id -> (cache key, reason)


async def in_thread(func: Callable[..., T], *args: Any) -> T:
    """func(*args) in a daemon thread of its own: unlike `asyncio.to_thread`, a store write stuck
    on a lock cannot keep the process from exiting once the run has given up on it."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value, error = func(*args), None
        except BaseException as exc:  # handed to the awaiting coroutine, which decides
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop has closed: the run ended without this result
            return

    threading.Thread(target=work, name="triage-writer", daemon=True).start()
    return await future


class Writer:
    """Writes results in the order they arrive; results that arrive during one write are
    written together by the next. After `close`: `removed` (papers no longer in the store when
    their result was written), `unsaved` (paper -> why its result could not be stored) and
    `error` (the first such reason)."""

    def __init__(
        self, store: Store, interval: float = WRITE_INTERVAL, on_written: Callable[[], None] | None = None
    ) -> None:
        self.store = store
        self.interval = interval
        self.on_written = on_written
        self.last = 0.0
        self.removed: list[str] = []
        self.unsaved: dict[str, str] = {}
        self.error: str | None = None
        self.pending: set[str] = set()  # papers whose result is queued or being written
        self.closing = asyncio.Event()
        self.queue: asyncio.Queue[tuple[dict[str, Assessment], Failed] | None] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run())

    def put(self, done: dict[str, Assessment], failed: Failed) -> None:
        self.pending.update(done)
        self.pending.update(failed)
        self.queue.put_nowait((done, failed))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        closing = False
        while not closing:
            first = await self.queue.get()
            batch = [] if first is None else [first]
            closing = first is None
            wait = self.last + self.interval - loop.time()
            if wait > 0 and not closing:
                with contextlib.suppress(TimeoutError):  # over: the interval, or the run
                    await asyncio.wait_for(self.closing.wait(), wait)
            self.last = loop.time()
            while not self.queue.empty():
                item = self.queue.get_nowait()
                if item is None:
                    closing = True
                else:
                    batch.append(item)
            done = {k: v for d, _ in batch for k, v in d.items()}
            failed = {k: v for _, f in batch for k, v in f.items() if k not in done}
            if done or failed:
                await self._write(done, failed)
                self.pending.difference_update([*done, *failed])
                if self.on_written:
                    self.on_written()

    async def _write(self, done: dict[str, Assessment], failed: Failed) -> None:
        """Store these results; papers gone from the store are set aside, and the rest is
        written again (a paper can be deleted between the check and the write: a few rounds)."""
        for _ in range(5):
            try:
                if done:
                    await in_thread(self.store.set_assessments, done)
                if failed:
                    await in_thread(self.store.set_failures, failed)
                return
            except Exception as exc:  # recorded below: removed papers, or the reason for each
                reason = f"{type(exc).__name__}: {exc}"
                try:
                    present = await in_thread(self.store.stored_ids, [*done, *failed])
                except Exception as check:
                    self._unsaved([*done, *failed], f"{reason} (and the store cannot be read: {check})")
                    return
            gone = [pid for pid in [*done, *failed] if pid not in present]
            if not gone:
                self._unsaved([*done, *failed], reason)
                return
            self.removed.extend(gone)
            done = {k: v for k, v in done.items() if k in present}
            failed = {k: v for k, v in failed.items() if k in present}
            if not (done or failed):
                return
        self._unsaved([*done, *failed], "papers kept being deleted while their results were written")

    def _unsaved(self, ids: list[str], reason: str) -> None:
        message = f"the result could not be stored: {reason}"
        self.error = self.error or message
        self.unsaved.update(dict.fromkeys(ids, message))

    async def close(self, timeout: float | None = None) -> bool:
        """Write what is queued and stop; False when that took longer than timeout (the writes
        still under way are given up on: their papers are assessed again by the next run)."""
        self.queue.put_nowait(None)
        self.closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except TimeoutError:
            self.task.cancel()
            self._unsaved(sorted(self.pending), f"the store did not take it within {timeout:.0f}s")
            return False
        return True
