"""Import drills: hostile files that must import in bounded time and memory.

    python bench/drills_import.py [--drills string-bomb,huge-fields,json-string,csv-cell]

Each drill writes a crafted file to a temporary directory and runs the real `triage ingest` on
it as a subprocess (HOME and the user dirs isolated as in bench/drills.py), measuring its wall
time and its peak resident memory (the child's own `ru_maxrss`, from `os.wait4`). A watchdog
kills a run that goes past --rss-limit MB or --timeout seconds (a run the fixes have not reached
would otherwise take the machine's memory). Then the store is opened and what was imported is
counted: a paper found is one of the file's records stored, with every field within its cap.

string-bomb   a .bib whose @string chain doubles 40 times (s40 = 4 TB once expanded), a title
              using s40, a @preamble with `\\def\\a{\\a\\a}` used in a title, and two plain
              entries: every entry imports, the bomb's title cut.
huge-fields   a .bib entry with a 20 MB title and a 20 MB abstract (words with LaTeX accents),
              and a plain entry: both import, the big fields cut, in about a second of parsing.
json-string   a single-line .json whose first record's abstract is a 200 MB string, and a plain
              record: both import, the abstract cut.
csv-cell      a .csv whose second row holds a 100 MB cell between two plain rows: the plain rows
              import, the big row is cut or skipped with its reason.

Each row: drill, runs, expected papers, found, lost, duplicated (0: one import each), redone
(empty), seconds, peak RSS in MB, notes. The thresholds: every run under 500 MB and ~60 s.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import console, report
from drills import isolate, triage_cmd

from assistant.config import load_settings
from assistant.ingest import limits
from assistant.store import Store

COLUMNS = ["drill", "runs", "expected", "found", "lost", "duplicated", "redone", "s", "peak MB", "notes"]
RSS_BUDGET_MB = 500
TIMEOUT_S = 120.0  # a run still going after this is killed (the fixed import takes seconds)
RSS_LIMIT_MB = 3000.0  # a run past this much memory is killed (before the fixes: gigabytes)
WORDS = 'adapters shift domains benchmark transformer attention Schr\\"odinger caf\\\'e na\\"ive '
DRILLS = ("string-bomb", "huge-fields", "json-string", "csv-cell")
Row = list[Any]


# -- running `triage ingest` under watch ------------------------------------------------------


def _rss_mb(pid: int) -> float:
    """The current resident memory of a process, in MB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_ingest(
    where: Path, source: Path, timeout: float, rss_limit_mb: float
) -> tuple[int | None, float, float, str, str]:
    """`triage --store WHERE/store ingest SOURCE`: (exit code or None if killed, seconds, peak
    RSS in MB, why it was killed or "", its output)."""
    log = where / f"{source.stem}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*triage_cmd(), "--store", str(where / "store"), "ingest", str(source)],
            cwd=where,
            env={**os.environ, "COLUMNS": "200"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    start, killed = time.perf_counter(), ""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        elapsed = time.perf_counter() - start
        rss = _rss_mb(proc.pid)
        if not killed and (rss > rss_limit_mb or elapsed > timeout):
            killed = f"killed at {rss:,.0f} MB" if rss > rss_limit_mb else f"killed after {elapsed:.0f}s"
            os.kill(proc.pid, signal.SIGKILL)
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    code = None if killed else proc.returncode
    return code, seconds, usage.ru_maxrss / 1024, killed, log.read_text(encoding="utf-8", errors="replace")


def stored(where: Path) -> list[dict[str, Any]]:
    """The metadata of every paper in the drill's store (none if there is no store)."""
    if not (where / "store").exists():
        return []
    return [meta for _, meta in Store.open(load_settings(store=where / "store")).iter_metadata()]


def within_caps(meta: dict[str, Any]) -> bool:
    return len(str(meta.get("title") or "")) <= limits.TITLE and len(str(meta.get("abstract") or "")) <= (
        limits.ABSTRACT
    )


def _said(output: str, source: Path) -> str:
    """The first lines of `triage ingest`'s output that say a record was cut or skipped, with
    the file's name in place of its temporary path."""
    lines = [" ".join(ln.split()).replace(str(source), source.name) for ln in output.splitlines()]
    words = ("expands", "cut", "longer than", "nests", "skipped")
    said = [ln for ln in lines if source.name + ":" in ln or source.name + " (" in ln]
    said = [ln for ln in said if any(w in ln for w in words)]
    return "; ".join(s[:120] for s in said[:2])


def drill(
    tmp: Path,
    label: str,
    name: str,
    write: Callable[[Path], tuple[int, list[str]]],
    timeout: float = TIMEOUT_S,
    rss_limit_mb: float = RSS_LIMIT_MB,
) -> tuple[Row, dict[str, Any]]:
    """Write the drill's file, import it, and count what arrived (`write` returns the number
    of papers expected and the titles they start with). The row is bench/drills.py's: label,
    runs, expected, found, lost, duplicated, redone, notes (time and peak RSS among them)."""
    where = tmp / label
    where.mkdir()
    source = where / name
    expected, prefixes = write(source)
    size_mb = source.stat().st_size / 1e6
    code, seconds, peak, killed, output = run_ingest(where, source, timeout, rss_limit_mb)
    metas = [] if killed else stored(where)
    titles = [str(m.get("title") or "") for m in metas]
    found = sum(1 for p in prefixes if any(t.startswith(p) for t in titles))
    duplicated = sum(max(0, sum(t.startswith(p) for t in titles) - 1) for p in prefixes)
    capped = all(within_caps(m) for m in metas)
    notes = [f"{seconds:.1f}s, peak {peak:,.0f} MB", f"{size_mb:,.0f} MB file", killed or f"exit {code}"]
    if metas and not capped:
        notes.append("a field over its cap was stored")
    if peak > RSS_BUDGET_MB:
        notes.append(f"over the {RSS_BUDGET_MB} MB budget")
    said = _said(output, source)
    if said:
        notes.append(said)
    if code not in (0, None) and not metas:
        notes.append(output.strip().splitlines()[-1][:120] if output.strip() else "no output")
    row = [label, 1, expected, found, expected - found, duplicated, "", "; ".join(notes)]
    details = {
        "file_mb": size_mb,
        "exit_code": code,
        "killed": killed,
        "seconds": seconds,
        "peak_rss_mb": peak,
        "stored": len(metas),
        "within_caps": capped,
        "output_tail": output[-2000:],
    }
    return row, details


# -- the crafted files ------------------------------------------------------------------------


def _plain_bib(key: str, title: str) -> str:
    fields = f"  title = {{{title}}},\n  author = {{Lee, Ann and Kim, Bo}},\n  year = {{2021}}\n"
    return f"@article{{{key},\n{fields}}}\n\n"


def write_string_bomb(path: Path) -> tuple[int, list[str]]:
    chain = ['@string{s0 = "aaaa"}'] + [f"@string{{s{i} = s{i - 1} # s{i - 1}}}" for i in range(1, 41)]
    text = "\n".join(chain) + "\n\n"
    text += '@preamble{ "\\def\\a{\\a\\a} \\newcommand{\\b}{\\b\\b\\b}" }\n\n'
    text += _plain_bib("first", "First Plain Paper on Adapters")
    text += '@article{bomb,\n  title = "Bomb Title " # s40,\n  author = {Lee, Ann},\n  year = {2021}\n}\n\n'
    text += _plain_bib("loop", "Looping Macros \\a and \\b in a Title")
    text += _plain_bib("last", "Last Plain Paper on Adapters")
    path.write_text(text, encoding="utf-8")
    return 4, ["First Plain Paper", "Bomb Title", "Looping Macros", "Last Plain Paper"]


def _words(size: int) -> str:
    return (WORDS * (size // len(WORDS) + 1))[:size]


def write_huge_fields(path: Path) -> tuple[int, list[str]]:
    big = 20_000_000
    text = _plain_bib("first", "First Plain Paper on Adapters")
    text += (
        "@article{huge,\n  title = {Huge Title "
        + _words(big)
        + "},\n  abstract = {"
        + _words(big)
        + "},\n  author = {Lee, Ann},\n  year = {2021}\n}\n\n"
    )
    path.write_text(text, encoding="utf-8")
    return 2, ["First Plain Paper", "Huge Title"]


def write_json_string(path: Path) -> tuple[int, list[str]]:
    plain = '{"title": "Plain Record on Adapters", "abstract": "A short abstract.", "year": 2021}'
    words = "adapters shift domains benchmark transformer attention caf\\u00e9 "
    with open(path, "w", encoding="utf-8") as out:
        out.write('[{"title": "Big String Record", "year": 2021, "abstract": "')
        chunk = words * (1_000_000 // len(words))
        for _ in range(200_000_000 // len(chunk)):
            out.write(chunk)
        out.write('"}, ' + plain + "]")
    return 2, ["Big String Record", "Plain Record"]


def write_csv_cell(path: Path) -> tuple[int, list[str]]:
    words = "adapters shift domains benchmark transformer attention café "
    with open(path, "w", encoding="utf-8") as out:
        out.write("title,abstract,year\n")
        out.write('"First Plain Row","A short abstract.",2021\n')
        out.write('"Big Cell Row","')
        chunk = words * (1_000_000 // len(words))
        for _ in range(100_000_000 // len(chunk)):
            out.write(chunk)
        out.write('",2021\n')
        out.write('"Last Plain Row","A short abstract.",2021\n')
    return 3, ["First Plain Row", "Big Cell Row", "Last Plain Row"]


def drill_string_bomb(
    tmp: Path, timeout: float = TIMEOUT_S, rss_limit_mb: float = RSS_LIMIT_MB
) -> tuple[Row, dict[str, Any]]:
    return drill(tmp, "@string doubling bomb", "bomb.bib", write_string_bomb, timeout, rss_limit_mb)


def drill_huge_fields(
    tmp: Path, timeout: float = TIMEOUT_S, rss_limit_mb: float = RSS_LIMIT_MB
) -> tuple[Row, dict[str, Any]]:
    return drill(tmp, "20 MB title + 20 MB abstract", "huge.bib", write_huge_fields, timeout, rss_limit_mb)


def drill_json_string(
    tmp: Path, timeout: float = TIMEOUT_S, rss_limit_mb: float = RSS_LIMIT_MB
) -> tuple[Row, dict[str, Any]]:
    return drill(tmp, "200 MB JSON string", "big.json", write_json_string, timeout, rss_limit_mb)


def drill_csv_cell(
    tmp: Path, timeout: float = TIMEOUT_S, rss_limit_mb: float = RSS_LIMIT_MB
) -> tuple[Row, dict[str, Any]]:
    return drill(tmp, "100 MB CSV cell", "big.csv", write_csv_cell, timeout, rss_limit_mb)


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--drills", default=",".join(DRILLS))
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before a run is killed")
    parser.add_argument(
        "--rss-limit", type=float, default=RSS_LIMIT_MB, help="MB of RSS before a run is killed"
    )
    args = parser.parse_args()
    chosen = args.drills.split(",")
    bodies = {
        "string-bomb": drill_string_bomb,
        "huge-fields": drill_huge_fields,
        "json-string": drill_json_string,
        "csv-cell": drill_csv_cell,
    }
    unknown = [c for c in chosen if c not in bodies]
    if unknown:
        parser.error(f"unknown drills: {', '.join(unknown)} (known: {', '.join(DRILLS)})")
    rows: list[Row] = []
    extra: dict[str, Any] = {"rss_budget_mb": RSS_BUDGET_MB, "drills": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="triage-import-drills-") as name:
        tmp = Path(name)
        isolate(tmp / "home")
        for key in chosen:
            console.print(f"[dim]{time.perf_counter() - started:6.1f}s  {key} ...[/dim]")
            row, details = bodies[key](tmp, args.timeout, args.rss_limit)
            rows.append([*row[:7], details["seconds"], round(details["peak_rss_mb"]), row[7]])
            extra["drills"][row[0]] = details
    extra["total_seconds"] = time.perf_counter() - started
    report(
        "drills_import",
        f"Import drills: time and peak memory of `triage ingest` on hostile files "
        f"(budget {RSS_BUDGET_MB} MB); {extra['total_seconds']:.0f}s in all",
        COLUMNS,
        rows,
        extra,
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
