"""How a niced process paces its requests to a Chroma server.

The server does every client's work at its own priority, so a batch job niced on the lab's
machine (`nice -n 19 triage tag` for a new agenda) would still take the server from the review
UIs and `daily`. Paced, it takes the share of the server that Linux gives a niced process of a
CPU beside one not niced: after each request it waits `niced_pace()` times as long as the
request took.

Like the kernel, which lets a niced process have a CPU nobody else wants, it waits only while
someone else keeps the machine busy. When the server is on this machine (its address is one of
this machine's), the CPUs this process may run on are read from `/proc/stat` before and after
each of its pauses (a long pause in slices of a second): what was busy while it paused (neither
it nor the server working for it) is the others' work. Under a third of those CPUs, the job
stops waiting, the rest of a pause included, and pauses only for a quarter of a second every
five to look again; above it, it waits. (Measured while it runs, the others' share would hide
behind its own and the server's: on a saturated CPU a request's time is mostly queueing behind
the others.) `/proc/stat` counts in hundredths of a second, so short pauses are added up until
they make a tenth of a second of each CPU. A server elsewhere, whose machine it cannot see, is
always paced; one reached through a tunnel from this machine is judged by this machine's load.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from assistant.store.server import server_url

NICE_WEIGHT = 1.25  # how much less CPU Linux gives a process per step of niceness (CFS)
BUSY = 1 / 3  # the others' share of this process's CPUs above which it waits
PROBE = 0.25  # seconds of a pause made only to look at the machine, while it is idle
PROBE_EVERY = 5.0  # seconds between those looks
SLICE = 1.0  # seconds: a longer pause is made in slices, the machine looked at after each
MIN_LOOK = 0.1  # seconds of each CPU the pauses must make before the machine is judged


def niced_pace() -> float:
    """How long this process waits after a request to a busy Chroma server, per second the
    request took: each step of niceness weighs 1.25 times less, so it waits 1.25^n - 1 seconds
    per second of requests (`nice -n 10`: 8.3; 5: 2.1; 19: 68); 0 for a process not niced."""
    try:
        niceness = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        return 0.0
    return float(NICE_WEIGHT ** max(0, niceness) - 1)


def on_this_machine(url: str) -> bool:
    """Whether the server at `url` answers on one of this machine's addresses (a loopback
    address, or one this machine can bind: the lab's machine named by its own name)."""
    host = server_url(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, address in infos:
        ip = ipaddress.ip_address(address[0])
        if ip.is_loopback:
            return True
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.bind((address[0], 0))
            return True
        except OSError:
            continue
    return False


def cpu_seconds(cpus: set[int]) -> tuple[float, float] | None:
    """(busy, all) CPU seconds of these CPUs since boot, from `/proc/stat`; None off Linux."""
    try:
        lines = Path("/proc/stat").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    busy = total = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        fields = [int(f) for f in rest.split()]
        total += sum(fields[:8])  # user nice system idle iowait irq softirq steal
        busy += sum(fields[:8]) - fields[3] - fields[4]
    return (busy / tick, total / tick) if total else None


class Pacer:
    """The waits of one process on one server: `after(took)` is how long to wait after a
    request that took `took` seconds, `wait(seconds, sleep)` waits (and looks at the machine)."""

    def __init__(self, url: str) -> None:
        self.pace = niced_pace()
        self.busy = True  # until the machine is seen
        self._cpus: set[int] = set()
        if self.pace > 0 and on_this_machine(url) and hasattr(os, "sched_getaffinity"):
            self._cpus = os.sched_getaffinity(0)
        self._looked = time.monotonic()  # when a look at the machine was last made or handed out
        self._seen = [0.0, 0.0]  # the others' CPU seconds, and the CPUs' seconds, not judged yet
        if self._cpus and self._sample() is None:
            self._cpus = set()

    def __bool__(self) -> bool:
        return self.pace > 0

    def _sample(self) -> tuple[float, float, float] | None:
        """(this process's CPU seconds, the CPUs' busy seconds, their seconds) now."""
        seen = cpu_seconds(self._cpus) if self._cpus else None
        return None if seen is None else (time.process_time(), *seen)

    def after(self, took: float) -> float:
        """Seconds to wait after a request that took `took` seconds."""
        if not self.pace:
            return 0.0
        if self.busy or not self._cpus:
            return took * self.pace
        now = time.monotonic()
        if now - self._looked < PROBE_EVERY:
            return 0.0
        self._looked = now  # one look, however many requests (under the writer lock) follow
        return PROBE

    def wait(self, seconds: float, sleep: Callable[[float], None]) -> None:
        """Wait (with `sleep`), seeing whether others keep this process's CPUs busy meanwhile:
        once they do not, the rest of the wait is not made."""
        if not self._cpus:
            sleep(seconds)
            return
        left = seconds
        while left > 0:
            step = min(left, SLICE)
            before = self._sample()
            sleep(step)
            after = self._sample()
            left -= step
            if before is not None and after is not None and self._judge(before, after) is False:
                return

    def _judge(self, before: tuple[float, float, float], after: tuple[float, float, float]) -> bool | None:
        """Add a pause's reading; once they make enough, whether the others keep the CPUs busy."""
        self._seen[0] += (after[1] - before[1]) - (after[0] - before[0])
        self._seen[1] += max(0.0, after[2] - before[2])
        if self._seen[1] < MIN_LOOK * len(self._cpus):
            return None  # too short to tell
        others, capacity = self._seen
        self._seen = [0.0, 0.0]
        self.busy = others >= BUSY * capacity
        if not self.busy:
            self._looked = time.monotonic()
        return self.busy
