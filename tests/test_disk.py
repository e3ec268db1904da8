"""A full disk and a read-only mount (a real tmpfs, mounted here; needs root, as CI has): every
command ends in one line saying what is wrong, nothing stored is lost, and reading commands
still work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.models import Paper
from conftest import SAMPLE, free_port, sample_records, write_lines


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=24m", "tmpfs", str(where)):
        pytest.skip("mounting a tmpfs needs root")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (1 << 16))
                fh.flush()
        except OSError:
            pass


def invoke(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it: a process of its own (Chroma keeps per-process state of a
    store whose write failed)."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "triage"), "--store", str(store), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )
    result.output = result.stdout + result.stderr  # type: ignore[attr-defined]
    result.exit_code = result.returncode  # type: ignore[attr-defined]
    return result


def test_a_full_disk_loses_nothing_and_reading_still_works(small_disk: Path, tmp_path: Path) -> None:
    store = small_disk / "store"
    assert invoke(store, "ingest", str(SAMPLE)).exit_code == 0
    first = sample_records()[0]["title"]
    more = write_lines(
        tmp_path / "more.jsonl",
        [
            json.dumps({"title": f"Another paper on adapters, number {i}", "abstract": "text " * 20})
            for i in range(200)
        ],
    )
    _fill(small_disk)
    result = invoke(store, "ingest", str(more))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "the disk holding the store" in result.output and "is full" in result.output
    pid = Paper.create(title=str(first)).id
    for args in (["mark", pid, "--accept"], ["note", pid, "read this"], ["list", "create", "Full disk"]):
        result = invoke(store, *args)
        assert result.exit_code == 1, (args, result.output)
        assert "is full" in result.output and "Traceback" not in result.output
    for args in (["stats"], ["show", pid], ["export", "-f", "bib"], ["ranked"]):
        result = invoke(store, *args)
        assert result.exit_code == 0, (args, result.output)
        assert "the disk is full: reading a temporary copy" in " ".join(result.output.split())
    (small_disk / "filler").unlink()
    assert invoke(store, "ingest", str(more)).exit_code == 0
    stats = invoke(store, "stats")
    assert f"│ papers             │ {87 + 200}" in stats.output or str(87 + 200) in stats.output
    assert invoke(store, "mark", pid, "--accept").exit_code == 0


def test_a_read_only_store_reads_and_says_why_it_cannot_write(small_disk: Path, tmp_path: Path) -> None:
    store = small_disk / "store"
    assert invoke(store, "ingest", str(SAMPLE)).exit_code == 0
    view = tmp_path / "ro"
    view.mkdir()
    if not (_mount("--bind", str(small_disk), str(view)) and _mount("-o", "remount,ro,bind", str(view))):
        pytest.skip("a read-only bind mount needs root")
    try:
        result = invoke(view / "store", "stats")
        assert result.exit_code == 0 and "the store is read-only: reading a temporary copy" in " ".join(
            result.output.split()
        )
        assert invoke(view / "store", "export", "-f", "ris").exit_code == 0
        for group in (["list", "ls"], ["feed", "ls"]):  # a command group's reading commands too
            result = invoke(view / "store", *group)
            assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        result = invoke(view / "store", "ingest", str(SAMPLE))
        assert result.exit_code == 1 and "is read-only" in result.output and "Traceback" not in result.output
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def test_a_full_disk_under_a_chroma_server(small_disk: Path, tmp_path: Path) -> None:
    """The server's disk fills: its errors come over HTTP, and the commands say the same."""
    exe = Path(sys.executable).parent / "chroma"
    port = free_port()
    log = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen(
        [str(exe), "run", "--path", str(small_disk / "data"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(150):
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)

        def triage(*args: str) -> subprocess.CompletedProcess[str]:
            return invoke(tmp_path / "unused", "--chroma-url", url, *args)

        assert triage("ingest", str(SAMPLE)).exit_code == 0
        _fill(small_disk)
        more = write_lines(
            tmp_path / "more.jsonl", [json.dumps({"title": f"Paper {i} on adapters"}) for i in range(50)]
        )
        result = triage("ingest", str(more))
        assert result.exit_code == 1 and "is full" in result.output and "Traceback" not in result.output
        pid = Paper.create(title=str(sample_records()[0]["title"])).id
        result = triage("mark", pid, "--accept")
        assert result.exit_code == 1 and "is full" in result.output and "Traceback" not in result.output
        # Reads while the disk is full, and anything after it is freed, are the server's own
        # business: chroma 1.5 was seen to stop answering after failed writes (the client then
        # ends with a message after its timeout instead of waiting for ever).
    finally:
        server.terminate()
        server.wait(10)
        log.close()
