"""`triage ranked` answers without computing the estimate of relevant papers left: it prints the
one kept for the current decisions, or the last one labelled with its age, and a detached
refresher (`assistant.estimate_refresh`) brings it up to date."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant import estimate_refresh as refresh
from assistant.agenda import load_agenda
from assistant.cache import training
from assistant.cli import app
from assistant.config import load_settings
from assistant.models import Status
from assistant.personal import estimate_folder, store_ranking
from assistant.personal.state import Trained
from assistant.store import Store

runner = CliRunner()


def run(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def estimate_line(output: str) -> str:
    """The estimate line `ranked` printed ('' when none)."""
    return output[output.index("Seen enough?") :] if "Seen enough?" in output else ""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The folders `ranked` started a refresher for (none is started: the test runs it)."""
    calls: list[Path] = []
    monkeypatch.setattr(refresh, "start", lambda folder, flags, config: calls.append(folder) or True)
    return calls


def folder() -> Path:
    return estimate_folder(Store.open_for_reading(load_settings()))


def from_scratch() -> str:
    """The estimate line `ranked` printed when it computed the estimate itself: from no kept
    state at all (the caches removed)."""
    shutil.rmtree(Path(os.environ["XDG_CACHE_HOME"]) / "triage", ignore_errors=True)
    settings = load_settings()
    topics = [t.name for t in load_agenda(settings.agenda_path).topics]
    left = store_ranking(Store.open(settings), topics, with_estimate=True).ranking.estimate
    assert left is not None
    line = left.line()
    return (
        f"Seen enough? {line[:1].upper() + line[1:]}. An estimate from your decisions; 'triage check' "
        "samples the rest at random for a guarantee."
    )


def test_after_a_mark_ranked_labels_the_last_estimate_and_a_refresher_brings_it_up_to_date(
    decided: Path, started: list[Path]
) -> None:
    # No estimate kept yet: only a note, and a refresher started.
    assert estimate_line(run("ranked")) == "Seen enough? estimate updating"
    assert started == [folder()]
    assert refresh.refresh({}) is True
    first = estimate_line(run("ranked"))
    assert first.startswith("Seen enough? About ") and "updating" not in first
    assert len(started) == 1  # current: nothing to bring up to date

    result = runner.invoke(app, ["ranked", "--json", "--top", "1"])
    run("mark", json.loads(result.output.splitlines()[-1])["paper"]["id"], "--accept")
    assert started == [folder()] * 2  # the mark starts one
    labelled = estimate_line(run("ranked"))
    assert labelled == first.replace(". An estimate", " (as of 1 decision ago; updating). An estimate")
    assert len(started) == 3

    assert refresh.refresh({}) is True
    fresh = estimate_line(run("ranked"))
    assert "updating" not in fresh and len(started) == 3
    assert fresh == from_scratch()


def test_a_refresher_killed_midway_leaves_the_training_readable_and_the_next_one_finishes(
    decided: Path, started: list[Path]
) -> None:
    run("ranked")
    run("mark", *[pid for pid, _ in Store.open(load_settings()).iter_metadata()][20:22], "--reject")
    run("ranked")
    where = folder()
    command = [sys.executable, "-m", "assistant.estimate_refresh"]
    for delay in (0.3, 0.8, 1.5):
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert Trained.load(where) is not None
    assert refresh.refresh({}) is True  # the lock died with the killed one
    assert "updating" not in estimate_line(run("ranked"))


def test_one_refresher_at_a_time(decided: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run("ranked")  # (TRIAGE_NO_BACKGROUND: none started)
    where = folder()
    monkeypatch.delenv(refresh.NO_BACKGROUND)
    with refresh.locked(where) as mine:
        assert mine
        assert refresh.refresh({}) is False  # another one holds the lock: it does nothing
        assert refresh.KeptEstimate.load(where) is None
        assert refresh.start(where, {}, None) is False  # nor is one started
    assert refresh.refresh({}) is True
    assert refresh.KeptEstimate.load(where) is not None


def test_the_started_refresher_is_detached_and_leaves_no_zombie(
    decided: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("ranked")
    where = folder()
    monkeypatch.delenv(refresh.NO_BACKGROUND)
    assert refresh.start(where, {"store": None, "agenda": None, "chroma_url": None}, None)
    try:  # no child of ours left, running or dead (a server another module started may run)
        assert os.waitpid(-1, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        pass
    deadline = time.monotonic() + 120
    while "Seen enough? About" not in run("ranked"):
        assert time.monotonic() < deadline, "the refresher did not bring the estimate up to date"
        time.sleep(0.5)


def test_a_refresher_finishing_after_newer_decisions_keeps_the_newer_training(
    decided: Path, started: list[Path]
) -> None:
    run("ranked")
    where = folder()
    read = Trained.load(where)  # what a refresher read when it started
    assert read is not None and read.key
    run("mark", *[pid for pid, _ in Store.open(load_settings()).iter_metadata()][20:21], "--accept")
    run("ranked")  # the command trains on the newer decisions and keeps that
    newer = Trained.load(where)
    assert newer is not None and newer.key != read.key
    assert read.save(where, read, over_newer=False) is False
    kept = Trained.load(where)
    assert kept is not None and kept.key == newer.key


@pytest.fixture
def trainings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that trained the personal model (solved it), in order."""
    from assistant.personal import model

    calls: list[str] = []
    solve = model.solve

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(threading.current_thread().name)
        return solve(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "solve", counted)
    return calls


def test_after_a_mark_the_background_ranking_keeps_what_the_next_commands_read(
    decided: Path, started: list[Path], trainings: list[str]
) -> None:
    ids = [pid for pid, _ in Store.open(load_settings()).iter_metadata()]
    run("ranked")
    run("mark", ids[25], "--accept")
    assert started[-1] == folder()  # the mark started the background ranking
    assert refresh.refresh({}, None, started[-1]) is True  # (here, in this process)
    trained = len(trainings)
    assert trained >= 1
    # The reading commands right after it train nothing: they read what it kept.
    queue, shown = run("ranked", "--top", "30"), run("show", ids[25])
    export = run("export", "-f", "jsonl", "--status", "accepted")
    assert len(trainings) == trained
    assert "Seen enough? About" in queue and "updating" not in queue
    # And they answer as they do when they train themselves, from nothing kept.
    shutil.rmtree(Path(os.environ["XDG_CACHE_HOME"]) / "triage")
    again = run("ranked", "--top", "30")  # (its estimate is not kept now: only being updated)
    assert again.split("Seen enough?")[0] == queue.split("Seen enough?")[0]
    assert len(trainings) > trained
    assert run("show", ids[25]) == shown
    assert run("export", "-f", "jsonl", "--status", "accepted") == export


def test_a_command_waits_for_the_training_under_way_and_reads_it(
    decided: Path, started: list[Path], trainings: list[str]
) -> None:
    ids = [pid for pid, _ in Store.open(load_settings()).iter_metadata()]
    run("ranked")
    run("mark", ids[25], "--reject")
    where = started[-1]
    holding = threading.Event()

    def background() -> None:  # what the refresher does first: train under the lock
        with training(where):
            holding.set()
            time.sleep(0.5)  # (a store ten times the size trains this long)
            settings = load_settings()
            topics = [t.name for t in load_agenda(settings.agenda_path).topics]
            store_ranking(Store.open_for_reading(settings), topics, over_newer=False, wait=False)

    trainings.clear()
    worker = threading.Thread(target=background, name="background")
    worker.start()
    assert holding.wait(10)
    began = time.monotonic()
    shown = run("show", ids[25])
    worker.join()
    assert time.monotonic() - began >= 0.45  # it waited for the training
    assert trainings == ["background"]  # and trained nothing itself
    assert "your decisions" in shown


def test_waiting_for_a_training_stops_when_it_ends_or_at_the_timeout(tmp_path: Path) -> None:
    from assistant.cache import wait_for_training

    assert wait_for_training(tmp_path) is False  # none ever trained here: nothing to wait for
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from assistant.cache import training\n"
            "with training(Path(sys.argv[1])):\n"
            "    print('held', flush=True); time.sleep(float(sys.argv[2]))",
            str(tmp_path),
            "1.0",
        ],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    began = time.monotonic()
    assert wait_for_training(tmp_path, timeout=0.2) is True  # gave up waiting
    assert 0.2 <= time.monotonic() - began < 0.6
    assert wait_for_training(tmp_path) is True  # waited until the holder let go
    assert time.monotonic() - began >= 0.9
    holder.wait()
    assert wait_for_training(tmp_path) is False  # free: returns at once
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    holder.kill()  # a holder killed midway lets go with its process
    holder.wait()


def test_the_started_refresher_holds_the_training_lock_from_the_moment_start_returns(
    decided: Path, monkeypatch: pytest.MonkeyPatch, trainings: list[str]
) -> None:
    import fcntl

    from assistant.cache import TRAINING_LOCK, wait_for_training

    run("ranked")
    where = folder()
    run("mark", *[pid for pid, _ in Store.open(load_settings()).iter_metadata()][20:21], "--accept")
    monkeypatch.delenv(refresh.NO_BACKGROUND)
    trainings.clear()
    assert refresh.start(where, {"store": None, "agenda": None, "chroma_url": None}, None)
    fd = os.open(where / TRAINING_LOCK, os.O_RDONLY)
    try:  # taken by the starting process and handed over: no moment without it
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert wait_for_training(where, timeout=120) is True  # until the refresher kept the queue
    monkeypatch.setenv(refresh.NO_BACKGROUND, "1")
    run("ranked")
    run("show", *[pid for pid, _ in Store.open(load_settings()).iter_metadata()][20:21])
    assert trainings == []  # both read what the refresher kept


def test_a_write_as_the_refresher_ends_starts_another(
    decided: Path, started: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    run("ranked")
    where = folder()
    pid = [pid for pid, _ in Store.open(load_settings()).iter_metadata()][21]
    estimate = refresh._estimate

    def decided_meanwhile(opened: object) -> None:  # a mark lands while the estimate is made
        estimate(opened)  # type: ignore[arg-type]
        Store.open(load_settings()).update_decision(pid, status=Status.ACCEPTED)

    monkeypatch.setattr(refresh, "_estimate", decided_meanwhile)
    monkeypatch.setattr(refresh, "ROUNDS", 1)
    before = len(started)
    assert refresh.refresh({}, None, where) is True
    assert started[before:] == [where]  # it was not ranked: another refresher is started for it
    monkeypatch.setattr(refresh, "_estimate", estimate)
    assert refresh.refresh({}, None, where) is True
    assert len(started) == before + 1  # nothing new since: none
