"""Store drills: a nearly full disk, undoing an import the researcher worked on, the store
removed under the review UI. What each loses, duplicates or redoes.

    python bench/drills_store.py [--drills disk-2mb,rm-decided,ui-removed]

disk-2mb     a store on a small tmpfs (needs root) filled to 2 MB free: `triage ingest` of 200
             more papers and `triage mark`, `note`, `list create` as subprocesses must each end
             in a one-line error (no traceback); once space is freed nothing stored before is
             missing and importing again duplicates nothing.
rm-decided   an import of 50 new papers (and 5 it merges into papers already stored); the
             researcher decides on, notes or lists 10 of them; `triage rm --last-import --yes`
             must keep those 10, take the 5 merged papers' source off, and write a file that
             `triage ingest` brings the other 40 back from whole.
ui-removed   the review UI (Textual's pilot, headless, in this process) on 30 papers; the
             store's folder is removed; 5 decisions made after it must be shown as not saved,
             the folder must not be made again, and the recovery file must hold all 5, which
             `triage ingest` of it restores.
ui-kill      the review UI (a process of its own, headless) on a `chroma run` server: decisions
             are made, then the UI is killed with SIGKILL, twice: once with the server stopped
             (SIGSTOP) while the keys were pressed, so every decision is still waiting to be
             written, and once at once after the last key with the server running. A new session
             of the store (the review UI, in this process) must write every decision the killed
             one showed, and leave no changes file behind.

Each drill function returns (row, details), row = [label, runs, expected, found, lost,
duplicated, redone, notes], as bench/drills.py's do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from common import ROOT, console, report, sample_records
from drills import isolate

from assistant.config import load_settings
from assistant.lists import ReadingLists
from assistant.models import Paper, Status, normalize_title
from assistant.store import Store

COLUMNS = ["drill", "runs", "expected", "found", "lost", "duplicated", "redone", "s", "notes"]
TIMEOUT = 300.0


# -- environment -------------------------------------------------------------------


def triage(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`triage --store STORE ARGS` as a user runs it: a process of its own."""
    exe = Path(sys.executable).parent / "triage"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "assistant"]
    return subprocess.run(
        [*cmd, "--store", str(store), *args], capture_output=True, text=True, timeout=TIMEOUT, env=os.environ
    )


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def census(store_path: Path, titles: list[str]) -> tuple[int, int, int]:
    """(found, lost, duplicated) of these titles in the store, read by a new process."""
    out = triage(store_path, "export", "-f", "jsonl")
    seen = Counter(normalize_title(json.loads(line)["paper"]["title"]) for line in out.stdout.splitlines())
    wanted = Counter(normalize_title(t) for t in titles)
    found = sum(min(seen[t], n) for t, n in wanted.items())
    lost = sum(n for t, n in wanted.items() if seen[t] < n)
    duplicated = sum(max(0, seen[t] - 1) for t in wanted)
    return found, lost, duplicated


def one_line_error(result: subprocess.CompletedProcess[str]) -> bool:
    """A failed command that said why in one line, without a traceback."""
    output = result.stdout + result.stderr
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    return result.returncode == 1 and "Traceback" not in output and len(errors) >= 1


# -- a nearly full disk --------------------------------------------------------------


def _fill_to(disk: Path, free_bytes: int) -> int:
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "ab") as fh:
        left = free - free_bytes
        while left > 0:
            chunk = min(left, 1 << 20)
            fh.write(b"\0" * chunk)
            left -= chunk
    return shutil.disk_usage(disk).free


def drill_disk_2mb(tmp: Path) -> tuple[list[Any], dict[str, Any]]:
    label = "2 MB free disk"
    disk = tmp / "disk"
    disk.mkdir(parents=True, exist_ok=True)
    mounted = (
        os.geteuid() == 0
        and (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True
            )
        ).returncode
        == 0
    )
    if not mounted:
        return [label, 0, "", "", "", "", "", "skipped: mounting a tmpfs needs root"], {"skipped": True}
    try:
        store = disk / "store"
        sample = sample_records()
        base = write_jsonl(tmp / "sample.jsonl", sample)
        more_records = [
            {"title": f"Another paper on adapters, number {i}", "abstract": "text " * 200} for i in range(200)
        ]
        more = write_jsonl(tmp / "more.jsonl", more_records)
        if triage(store, "ingest", str(base)).returncode != 0:
            raise RuntimeError("the first import failed")
        pid = Paper.create(title=str(sample[0]["title"])).id
        free = _fill_to(disk, 2 * 1024 * 1024)
        commands = {
            "ingest": ["ingest", str(more)],
            "mark": ["mark", pid, "--accept"],
            "note": ["note", pid, "read this"],
            "list create": ["list", "create", "Full disk"],
        }
        outcomes: dict[str, dict[str, Any]] = {}
        for name, args in commands.items():
            result = triage(store, *args)
            outcomes[name] = {
                "exit": result.returncode,
                "one_line": one_line_error(result),
                "says_full": "is full" in result.stdout + result.stderr,
                "tail": (result.stdout + result.stderr).strip().splitlines()[-1:],
            }
        reading = triage(store, "stats")
        (disk / "filler").unlink()
        again = triage(store, "ingest", str(more))
        marked = triage(store, "mark", pid, "--accept")
        titles = [str(r["title"]) for r in sample] + [r["title"] for r in more_records]
        found, lost, duplicated = census(store, titles)
        # A write small enough to fit (a list definition) may go through: then it must be kept.
        listed = "Full disk" in triage(store, "list", "ls").stdout
        outcomes["list create"]["kept"] = listed
        good = sum(
            1
            for name, o in outcomes.items()
            if (o["one_line"] and o["says_full"]) or (o["exit"] == 0 and name == "list create" and listed)
        )
        note = (
            f"{good}/{len(commands)} writing commands: one-line disk-full error or written and kept "
            f"({free // 1024} kB free); "
            f"stats while full exit {reading.returncode}; after freeing: ingest exit {again.returncode}, "
            f"mark exit {marked.returncode}"
        )
        row = [label, 1, len(titles), found, lost, duplicated, "", note]
        return row, {"free_kb": free // 1024, "commands": outcomes, "stats_exit": reading.returncode}
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


# -- rm --last-import with decided papers --------------------------------------------


def _saved_file(output: str) -> Path | None:
    found = re.search(r"Saved what was deleted to (.+?); 'triage ingest", " ".join(output.split()))
    return Path(found.group(1)) if found else None


def drill_rm_decided(tmp: Path) -> tuple[list[Any], dict[str, Any]]:
    label = "rm --last-import, 10 decided"
    store = tmp / "rm-store"
    sample = sample_records()
    base = write_jsonl(tmp / "base.jsonl", sample[:20])
    wrong_records = [
        {"title": f"A paper the wrong file brought, number {i}", "abstract": f"Abstract {i} of a stray file."}
        for i in range(50)
    ]
    wrong = write_jsonl(tmp / "wrong.jsonl", [*wrong_records, *sample[:5]])
    for path in (base, wrong):
        if triage(store, "ingest", str(path)).returncode != 0:
            raise RuntimeError(f"importing {path.name} failed")
    ids = [Paper.create(title=r["title"]).id for r in wrong_records]
    merged = [Paper.create(title=str(r["title"])).id for r in sample[:5]]
    settings = load_settings(store=store)
    opened = Store.open(settings)
    for pid in ids[:4]:
        opened.update_decision(pid, status=Status.ACCEPTED)
    for pid in ids[4:7]:
        opened.update_decision(pid, note="keep for the related work")
    ReadingLists(opened).create("Thesis")
    ReadingLists(opened).add("Thesis", ids[7:10])
    del opened
    undone = triage(store, "rm", "--last-import", "--yes")
    output = " ".join((undone.stdout + undone.stderr).split())
    saved = _saved_file(undone.stdout + undone.stderr)
    after_rm = {
        json.loads(ln)["paper"]["id"]: json.loads(ln)
        for ln in triage(store, "export", "-f", "jsonl").stdout.splitlines()
    }
    kept = sum(1 for pid in ids[:10] if pid in after_rm)
    removed = sum(1 for pid in ids[10:] if pid not in after_rm)
    unsourced = sum(
        1
        for pid in merged
        if pid in after_rm and "jsonl:wrong.jsonl" not in after_rm[pid]["paper"]["sources"]
    )
    restored = triage(store, "ingest", str(saved)) if saved else None
    found, lost, duplicated = census(store, [r["title"] for r in wrong_records])
    note = (
        f"kept {kept}/10 decided; removed {removed}/40; merged papers without the source {unsourced}/5; "
        f"says kept: {'kept 10 papers you decided on' in output}; restore file "
        f"{'ingested' if restored is not None and restored.returncode == 0 else 'MISSING or failed'}"
    )
    row = [label, 1, len(wrong_records), found, lost, duplicated, "", note]
    return row, {
        "kept": kept,
        "removed": removed,
        "unsourced": unsourced,
        "saved": str(saved),
        "rm_exit": undone.returncode,
    }


# -- the store removed under the review UI ------------------------------------------------


def drill_ui_store_removed(tmp: Path, decisions: int = 5) -> tuple[list[Any], dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from tui_support import settle  # the tests' own wait for the UI's workers

    from assistant.agenda import example_agenda_text, parse_agenda
    from assistant.tui.app import ReviewApp

    label = "store removed under the UI"
    settings = load_settings(store=tmp / "ui-store")
    store = Store.open(settings)
    papers = [
        Paper.create(**{k: v for k, v in r.items() if k in Paper.model_fields and k != "id"})
        for r in sample_records()[:30]
    ]
    store.upsert_papers(papers)
    app = ReviewApp(
        store, settings, parse_agenda(example_agenda_text()), cache_dir=tmp / "ui-cache", refresh_every=60.0
    )
    made: dict[str, str] = {}
    seen: dict[str, Any] = {}
    keys = {"a": "accepted", "x": "rejected", "m": "maybe"}

    async def main() -> None:
        async with app.run_test(size=(170, 45)) as pilot:
            await settle(pilot)
            await pilot.press("a")  # saved before the folder goes
            await settle(pilot)
            shutil.rmtree(settings.store)
            for i in range(decisions):
                key = "axm"[i % 3]
                pid = app.current_id()
                assert pid is not None
                made[pid] = keys[key]
                await pilot.press(key)
                await pilot.pause()
            seen["status"] = " ".join(str(app.query_one("#status-line").content).split())  # type: ignore[attr-defined]
            seen["marked"] = len(app.table.unsaved)
            seen["folder_back"] = settings.store.exists()
            seen["file"] = app.recovery_file

    asyncio.run(main())
    recovery: Path | None = seen.get("file")
    records = (
        {r["paper"]["id"]: r for r in map(json.loads, recovery.read_text().splitlines())}
        if recovery is not None and recovery.exists()
        else {}
    )
    in_file = sum(
        1 for pid, status in made.items() if records.get(pid, {}).get("decision", {}).get("status") == status
    )
    replay = tmp / "ui-replayed"
    replayed = triage(replay, "ingest", str(recovery)) if recovery else None
    after = (
        {
            json.loads(ln)["paper"]["id"]: json.loads(ln)
            for ln in triage(replay, "export", "-f", "jsonl").stdout.splitlines()
        }
        if replayed
        else {}
    )
    found = sum(
        1 for pid, status in made.items() if after.get(pid, {}).get("decision", {}).get("status") == status
    )
    said = "says not saved" if str(seen.get("status", "")).startswith("not saved:") else "SILENT"
    note = (
        f"{in_file}/{decisions} in the recovery file; {seen.get('marked')} rows marked not saved; "
        f"status line {said}; folder "
        f"{'MADE AGAIN' if seen.get('folder_back') else 'not made again'}; replayed by triage ingest"
    )
    row = [label, 1, decisions, found, decisions - found, 0, "", note]
    return row, {"status_line": seen.get("status"), "recovery_file": str(recovery), "in_file": in_file}


KEYS = {"a": "accepted", "x": "rejected", "m": "maybe"}


def ui_child(folder: Path, url: str, collection: str, held: int) -> None:
    """The review UI the ui-kill drill kills: one decision written, then `held` more pressed
    once `folder/go` appears (each noted in pressed.jsonl as it is pressed), then it waits."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tui_support import settle

    from assistant.agenda import example_agenda_text, parse_agenda
    from assistant.tui.app import ReviewApp

    settings = load_settings(chroma_url=url, collection=collection)
    app = ReviewApp(Store.open(settings), settings, parse_agenda(example_agenda_text()), refresh_every=3600)

    def note(pid: str | None, status: str) -> None:
        with (folder / "pressed.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps({"id": pid, "status": status}) + "\n")

    async def main() -> None:
        async with app.run_test(size=(170, 45)) as pilot:
            await settle(pilot)
            note(app.current_id(), "accepted")
            await pilot.press("a")
            await settle(pilot)  # written: the server is stopped only after it
            (folder / "ready").touch()
            while not (folder / "go").exists():
                await asyncio.sleep(0.02)
            for i in range(held):
                key = "xma"[i % 3]
                note(app.current_id(), KEYS[key])
                await pilot.press(key)
                await pilot.pause()
            (folder / "done").touch()
            await asyncio.sleep(3600)

    asyncio.run(main())


def _wait_for(path: Path, child: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the review UI stopped or hung before {path.name}")
        time.sleep(0.05)


def decided(settings: Any, pressed: dict[str, str]) -> int:
    """How many of these decisions (id: status) the store holds."""
    stored = {item.paper.id: item.decision.status.value for item in Store.open(settings).iter_all()}
    return sum(1 for pid, status in pressed.items() if stored.get(pid) == status)


def drill_ui_kill(tmp: Path, held: int = 3) -> tuple[list[Any], dict[str, Any]]:
    import signal

    from drills import ChromaServer

    sys.path.insert(0, str(ROOT / "tests"))
    from tui_support import settle

    from assistant.agenda import example_agenda_text, parse_agenda
    from assistant.tui import recovery
    from assistant.tui.app import ReviewApp

    label = "review UI killed, writes pending"
    server = ChromaServer(tmp / "ui-kill")
    (tmp / "ui-kill").mkdir()
    url = server.start()
    assert server.proc is not None
    papers = [
        Paper.create(**{k: v for k, v in r.items() if k in Paper.model_fields and k != "id"})
        for r in sample_records()[:30]
    ]
    details: dict[str, Any] = {}
    expected = found = left = 0
    try:
        for run, stopped in enumerate((True, False)):
            collection = f"ui-kill-{run}"
            settings = load_settings(chroma_url=url, collection=collection)
            Store.open(settings).upsert_papers(papers)
            folder = tmp / "ui-kill" / collection
            folder.mkdir()
            child = subprocess.Popen(  # noqa: S603
                [sys.executable, __file__, "--ui-child", str(folder), url, collection, str(held)]
            )
            try:
                _wait_for(folder / "ready", child, TIMEOUT)
                if stopped:
                    os.kill(server.proc.pid, signal.SIGSTOP)
                (folder / "go").touch()
                _wait_for(folder / "done", child, 60)
                journals = len(list(recovery.folder().glob(f"*-writing-{child.pid}{recovery.SUFFIX}")))
            finally:
                child.kill()
                child.wait()
                if stopped:
                    os.kill(server.proc.pid, signal.SIGCONT)
            pressed = {d["id"]: d["status"] for d in map(json.loads, (folder / "pressed.jsonl").open())}
            before = decided(settings, pressed)
            # A new session of the store: it writes what the killed one kept.
            store = Store.open(settings)
            app = ReviewApp(store, settings, parse_agenda(example_agenda_text()), refresh_every=3600)

            async def reopen(app: ReviewApp = app) -> None:
                async with app.run_test(size=(170, 45)) as pilot:
                    for _ in range(300):
                        await settle(pilot)
                        if app._replayed_all:
                            break
                        await pilot.pause(0.1)
                    await pilot.press("q")

            asyncio.run(reopen())
            ok = decided(settings, pressed)
            remaining = len(list(recovery.folder().glob(f"*-writing-{child.pid}{recovery.SUFFIX}")))
            expected += len(pressed)
            found += ok
            left += remaining
            details[collection] = {
                "server stopped while the keys were pressed": stopped,
                "decisions": len(pressed),
                "stored when the UI was killed": before,
                "stored after the new session": ok,
                "changes files of the killed UI when killed": journals,
                "left after the new session": remaining,
            }
    finally:
        server.stop()
    note = (
        f"2 kills ({held} decisions pending behind a stopped server; right after the last key); "
        f"{left} changes files left"
    )
    return [label, 2, expected, found, expected - found, 0, "", note], details


DRILLS = {
    "disk-2mb": drill_disk_2mb,
    "rm-decided": drill_rm_decided,
    "ui-removed": drill_ui_store_removed,
    "ui-kill": drill_ui_kill,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drills", default=",".join(DRILLS))
    parser.add_argument("--ui-child", nargs=4, help=argparse.SUPPRESS)  # ui-kill's review UI
    args = parser.parse_args()
    if args.ui_child:
        folder, url, collection, held = args.ui_child
        ui_child(Path(folder), url, collection, int(held))
        return
    rows: list[list[Any]] = []
    extra: dict[str, Any] = {"drills": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="triage-store-drills-") as name:
        tmp = Path(name)
        isolate(tmp / "home")
        for key in args.drills.split(","):
            console.print(f"[dim]{time.perf_counter() - started:6.1f}s  {key} ...[/dim]")
            start = time.perf_counter()
            try:
                row, details = DRILLS[key](tmp)
            except Exception as exc:  # one failing drill is a row, not the end of the bench
                rows.append(
                    [
                        key,
                        1,
                        "",
                        "",
                        "",
                        "",
                        "",
                        time.perf_counter() - start,
                        f"error: {type(exc).__name__}: {exc}",
                    ]
                )
                extra["drills"][key] = {"error": traceback.format_exc()}
                continue
            seconds = time.perf_counter() - start
            rows.append([*row[:7], seconds, row[7]])
            extra["drills"][row[0]] = {**details, "seconds": seconds}
    report(
        "drills_store",
        "Store drills: a full disk, undoing an import, the store removed under the UI",
        COLUMNS,
        rows,
        extra,
    )


if __name__ == "__main__":
    main()
