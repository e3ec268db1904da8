"""The queue's ranking and the estimate of relevant papers left, brought up to date off the
researcher's path.

A write that changes what the queue is ranked from (`mark`, `ingest`, `tag`) starts this module
as a detached, niced process (`start`): it trains the personal model for the store as it now
is and keeps the queue `ranked` shows (`readcache.ranked_queue`), so the next reading command
(`ranked`, `show`, `export`, seconds later) reads the training instead of making it (at 100k
papers about half a second). While it trains it holds the store's training lock (taken by the
command that starts it and handed over, so there is no moment without it: `start`): a command
that would train meanwhile waits for it (`cache.wait_for_training`, 30 s in all) and reads what
it kept, rather than training the same on the other core. It then computes the estimate under
the queue.

`triage ranked` answers with the queue at once: the estimate under it costs five fold models
re-solved after a decision and a scoring pass over every paper for each (most of the command's
time at 100k papers). So the command prints the estimate kept for the current decisions when
there is one, else the last one with how many decisions ago it was made, and starts a
refresher when none is running; the refresher computes the estimate exactly as `ranked` did
itself (`store_ranking(..., with_estimate=True)`, which keeps it with the trained model, as the
review UI does) and writes the small note the command reads (`KeptEstimate`). The module is
outside `assistant.personal`: importing that package costs `ranked` a fifth of a second it does
not otherwise spend when it answers from the saved queue.

One refresher runs at a time per store: it holds an advisory lock (`fcntl.flock`) on a file
beside the kept training, which the kernel releases when the process ends, however it ends, so
a crashed refresher never holds it. A write while one runs starts none; the running one ranks
again when it finds the store changed since it began (ROUNDS at most), and starts another if
a write came as it used its last. Every file it writes is
written atomically (a temporary file, then a rename), so a refresher killed midway leaves the
last complete files. A refresher whose decisions changed again while it ran still writes what
it computed, named by the training it was computed for, and leaves the newer training a command
kept: the command then shows it as an earlier estimate and starts another. A script calling
`ranked` in a loop starts at most one at a time, and none once the estimate is current, so
`ranked` starts one whether or not it writes to a terminal. `TRIAGE_NO_BACKGROUND=1` (set for
the tests) starts none. A store behind a Chroma server has none: `ranked` trains there on every
call anyway and computes the estimate itself.

Run as `python -m assistant.estimate_refresh --flags JSON [--config FILE] [--folder DIR]`, with
the settings the command had."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.cache import adopted, hold_training, read_pickle, training, write_pickle

if TYPE_CHECKING:
    from assistant.config import Settings
    from assistant.store import Store

ESTIMATE_FILE = "estimate.pickle"
LOCK_FILE = "refresh.lock"
VERSION = 1
NO_BACKGROUND = "TRIAGE_NO_BACKGROUND"
NICENESS = 10
ROUNDS = 3  # at most this many rankings per refresher, the store changing under it


@dataclass(frozen=True)
class KeptEstimate:
    """The last estimate made, in words, and the training (its decisions) it was made for."""

    key: bytes  # `Trained.key`: the papers, their scores and the decisions it was made from
    decided: int  # the decisions the model learned from then
    line: str | None  # `Estimate.line()`; None: too few decisions for one

    @classmethod
    def load(cls, folder: Path) -> KeptEstimate | None:
        try:
            data = read_pickle(folder / ESTIMATE_FILE)
            if not isinstance(data, dict) or data.get("version") != VERSION:
                return None
            return cls(bytes(data["key"]), int(data["decided"]), data["line"])
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
            return None

    def save(self, folder: Path) -> None:
        payload = {"version": VERSION, "key": self.key, "decided": self.decided, "line": self.line}
        write_pickle(folder / ESTIMATE_FILE, payload)


def label(kept: KeptEstimate | None, key: bytes, decided: int) -> tuple[str | None, bool]:
    """What `ranked` says of the estimate for the training `key`, and whether it is current.

    (line, True): the estimate of these decisions, as `triage check` would print it (None: too
    few decisions for one). (text, False): the last one with its age, or only that it is being
    brought up to date."""
    if kept is not None and kept.key == key:
        return kept.line, True
    if kept is None or kept.line is None:
        return None, False
    ago = abs(decided - kept.decided)
    when = f"as of {ago} decision{'' if ago == 1 else 's'} ago" if ago else "as of earlier decisions"
    return f"{kept.line} ({when}; updating)", False


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[bool]:
    """Hold the store's refresh lock while inside; yields False (holding nothing) when another
    process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True  # released when the descriptor closes, or with the process
    finally:
        os.close(fd)


def start(folder: Path, flags: dict[str, Any], config: Path | None) -> bool:
    """Start a refresher for the store whose kept training is in `folder`, detached from this
    process (its own session, no terminal, reparented once started: never a zombie of ours).
    False when none was started: switched off, or one is running."""
    if os.environ.get(NO_BACKGROUND):
        return False
    import subprocess

    with locked(folder) as free:
        if not free:
            return False  # the one running brings it up to date; when done, the next command sees
    command = [sys.executable, "-m", "assistant.estimate_refresh", "--flags", json.dumps(flags, default=str)]
    command += ["--folder", str(folder)]
    if config is not None:
        command += ["--config", str(config)]
    # The training lock is taken here and handed to the refresher (an flock belongs to the
    # open file, which the refresher inherits): a command started the moment this one ends
    # finds the training under way, though the refresher takes a moment to start.
    held = hold_training(folder)
    if held is not None:
        command += ["--training-fd", str(held)]
    try:
        pid = os.fork()
        if pid == 0:  # the go-between: starts the refresher and ends, so init adopts it
            code = 0
            try:
                subprocess.Popen(  # noqa: S603 - this interpreter and this module
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(held,) if held is not None else (),
                )
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        if held is not None:
            os.close(held)  # the refresher's copy holds the lock now (or nobody does)
    return os.waitstatus_to_exitcode(status) == 0


@dataclass
class _Opened:
    """The store a refresher ranks, as the command that started it had it."""

    settings: Settings
    topics: list[str]
    store: Store
    folder: Path  # its kept training

    @classmethod
    def of(cls, flags: dict[str, Any], config: Path | None) -> _Opened:
        from assistant.agenda import load_agenda
        from assistant.config import load_settings
        from assistant.errors import TriageError
        from assistant.personal import estimate_folder
        from assistant.store import Store

        settings = load_settings(config, **flags)
        topics: list[str] = []
        if settings.agenda_path.exists():
            with contextlib.suppress(TriageError):  # as the command does: no topics then
                topics = [t.name for t in load_agenda(settings.agenda_path).topics]
        store = Store.open_for_reading(settings)
        return cls(settings, topics, store, estimate_folder(store))


def refresh(
    flags: dict[str, Any],
    config: Path | None = None,
    folder: Path | None = None,
    training_fd: int | None = None,
) -> bool:
    """Rank the store for its current decisions and keep the queue `ranked` shows (with the
    trained model), then compute the estimate and keep it (as a `KeptEstimate` too); False when
    another refresher holds the lock. `folder`, the store's kept training as the starting
    command knew it, lets the locks be taken before the store is opened; `training_fd`, the
    training lock the starting command took and handed over (`start`), is held until the first
    ranking is kept: a command started meanwhile finds the training under way and waits for it.
    Writes that came after the last ranking started (a `start` then found this one running)
    are ranked again, ROUNDS times at most; any later start another refresher."""
    from assistant import readcache
    from assistant.personal import store_ranking

    handed = adopted(training_fd) if training_fd is not None else None
    opened: _Opened | None = _Opened.of(flags, config) if folder is None else None
    where = opened.folder if opened is not None else folder
    assert where is not None
    ranked: Any = None  # the store's signature when it was last ranked
    settings: Settings | None = None
    with locked(where) as free:
        if not free:
            if training_fd is not None:
                os.close(training_fd)  # another refresher runs: the training lock is let go
            return False
        for _ in range(ROUNDS):
            with handed or training(where):
                handed = None
                opened = opened or _Opened.of(flags, config)
                settings = opened.settings
                # The queue as `ranked` shows it, kept for the store as it is: the next reading
                # command finds the model trained for these decisions, `ranked` its whole answer.
                ranked = readcache.signature(opened.settings)
                personal = store_ranking(opened.store, opened.topics, over_newer=False, wait=False)
                readcache.ranked_queue(opened.settings, opened.store, tuple(opened.topics), personal, ranked)
            _estimate(opened)
            if ranked is None or readcache.signature(opened.settings) == ranked:
                break
            opened = None
    if ranked is not None and settings is not None and readcache.signature(settings) != ranked:
        with contextlib.suppress(OSError):  # a write as this one let go: its start found it running
            start(where, flags, config)
    return True


def _estimate(opened: _Opened) -> None:
    """Compute the estimate and keep it with the training, unless a command trained on newer
    decisions meanwhile: its training stays, and the estimate is kept in words, named by the
    decisions it is of."""
    from assistant.personal import store_ranking

    ranking = store_ranking(
        opened.store, opened.topics, with_estimate=True, over_newer=False, wait=False
    ).ranking
    trained = ranking.trained
    if trained is not None and trained.key:  # else a training that cannot be named
        line = ranking.estimate.line() if ranking.estimate is not None else None
        kept = KeptEstimate.load(opened.folder)
        if kept is None or kept.key != trained.key or kept.line != line:
            with contextlib.suppress(OSError):  # the next command starts another
                KeptEstimate(trained.key, ranking.fit.decided, line).save(opened.folder)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m assistant.estimate_refresh")
    parser.add_argument("--flags", default="{}")
    parser.add_argument("--config", type=Path)
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--training-fd", type=int)
    args = parser.parse_args(argv)
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    return 0 if refresh(json.loads(args.flags), args.config, args.folder, args.training_fd) else 1


if __name__ == "__main__":
    sys.exit(main())
