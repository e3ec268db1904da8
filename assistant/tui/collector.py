"""Python's cyclic garbage collector, run between the review UI's keys instead of inside them.

The automatic collector runs wherever allocations cross its thresholds. In the review UI at
100k papers that was inside the keys: a re-sort allocates enough for a young collection on each
press (2-10 ms) and a full one every sixth (13-15 ms), a fifth of the key's time. While the UI
runs, the automatic collector is off and `IdleCollector.tick` (on a timer) collects what it
would have collected, by the same thresholds, once the keys have paused; keys held down for long
still get a collection when garbage piles far past the thresholds. Reference counting frees
everything but cycles at once, as before: only cycles wait, for a fraction of a second.
"""

from __future__ import annotations

import gc
import time

CHECK_EVERY = 0.2  # seconds between looks at the collector's counts
IDLE = 0.3  # seconds without a key before a collection may run
BACKLOG = 100  # times the young generation's threshold: collected even while keys come


class IdleCollector:
    def __init__(self) -> None:
        self._was_enabled = gc.isenabled()

    def start(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def stop(self) -> None:
        """The automatic collector back as it was (the UI closes; tests run on after it)."""
        if self._was_enabled:
            gc.enable()

    def tick(self, last_input: float) -> int | None:
        """Collect the generation the automatic collector would have by now, if the keys have
        paused since `last_input` (time.monotonic()) or the backlog is too long; the
        generation collected, or None."""
        young, collections, older = gc.get_count()
        limit, every, every_older = gc.get_threshold()
        if limit <= 0 or young <= limit:
            return None
        if time.monotonic() - last_input < IDLE and young < limit * BACKLOG:
            return None
        # As CPython picks it: the oldest generation whose count is over its threshold.
        generation = 2 if older > every_older else 1 if collections > every else 0
        gc.collect(generation)
        return generation
