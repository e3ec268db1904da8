"""The daily loop's commands at 1k, 10k and 100k papers, each as a fresh process (the console
script, as a user runs it), in CPU seconds and wall seconds.

    python bench/everyday.py [--sizes 1000 10000 100000] [--reps 5] [--quick] [--timeout 120]

~16 min at the default sizes on a 2-core machine (2026-11-26; 3 of them building the
stores), ~4 min with --quick.

A command's CPU time is the child's user + system time (os.wait4), so another process on the
machine slows its wall time but hardly its CPU time. A write that changes what the queue is
ranked from (`mark`, `ingest`) starts the background ranking (`assistant.estimate_refresh`,
which trains the personal model for the new decisions and keeps the queue), and `ranked`
starts it to bring the estimate up to date: the bench is these processes' subreaper
(PR_SET_CHILD_SUBREAPER), so they become its children once detached; it waits for them to end
(the researcher's pause between two commands: the next one finds their work done) and reports
their CPU in a column of its own, the write's and the timed command's together. The row "at
once after a mark" does not wait: `ranked` runs straight after the write, while the background
ranking trains (it waits for it rather than training the same). Beside every row: the baseline,
`python -c "import typer, rich.console, pydantic"` (the libraries every command imports),
measured in the same run, and the row's ratio to its median CPU time.

Targets (CPU): every everyday command 0.5 s at 10k papers and 1 s at 100k; `triage eval`
2 s at 1k papers (about 350 decided).

The reading commands are timed "after a write", the case a user hits: before each timed run
an untimed `triage mark ID --accept|--reject|--maybe` (ids rotating over the queue's top 30,
the decision rotating too, so each mark really changes the store). Rows marked "unchanged"
run the same command again straight after the row before it, with no write between: the
answer a previous read saved (`assistant.readcache`) may serve. "after an import" times
`ranked` after an untimed `triage ingest` of 20 new papers; "after an agenda edit" (the row
after it: the store unchanged since) after an untimed sentence appended to agenda.md (every
assessment is then stale; `ranked` must still
answer; the agenda is put back afterwards, untimed, so the other rows' assessments stay
current).

Stores: built once per size in a temporary directory by a child process, with bench/tui.py's
`fill` (vectors near the sample's 40-odd embedded abstracts, offline-style assessments with
random topic scores, about a third of the papers decided at random). `fill` leaves the
assessments without the offline engine's key, which would make every one of them stale; the
builder gives each the key the offline engine would have written (`engine_key`), so that the
store is the one a researcher who ran `triage tag` has. The commands run in an isolated
environment (bench/startup.py's `environment()`: user dirs in the temporary directory,
TRIAGE_/OPENAI_ settings removed, HF_HUB_OFFLINE=1, bytecode cached). Each size has a warm-up
round (not counted), then --reps rounds (at most 3 at 100k papers) that run every row once in
order; the row's figure is the median. A run longer than --timeout is stopped and recorded as
a timeout, and its row is not run again at that size; a command that fails stops the bench.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import ROOT, console, report, sample_records
from startup import environment, triage

BASELINE = "import typer, rich.console, pydantic"
DECISIONS = ("--accept", "--reject", "--maybe")
LIST = "reading"
QUERY = "language models"
IMPORTED = 20  # papers per untimed import
BIG = 100_000  # at this size and above, at most BIG_REPS counted rounds
BIG_REPS = 3
EVAL_SIZE = 1000  # eval is timed at this size only


def build(directory: Path, sizes: list[int]) -> None:
    """A store of n papers at directory/<n>/store for each size, agenda.md beside it (run in a
    child process)."""
    import json as json_

    import numpy as np
    from tui import fill

    from assistant.agenda import example_agenda_text, parse_agenda
    from assistant.config import load_settings
    from assistant.embedding import MiniLMEmbedder
    from assistant.store import Store
    from assistant.triage.keys import engine_key

    agenda = parse_agenda(example_agenda_text())
    embedder = MiniLMEmbedder()
    records = sample_records()
    base = np.asarray(embedder([f"{r['title']}\n\n{r['abstract']}" for r in records]))

    class Keyed:
        """The store's collection, giving each added assessment its offline engine key."""

        def __init__(self, collection: Any) -> None:
            self.collection = collection

        def add(self, *, ids: Any, documents: Any, embeddings: Any, metadatas: Any) -> None:
            for doc, meta in zip(documents, metadatas, strict=True):
                key = engine_key(doc, agenda)
                assessment = json_.loads(meta["assessment"])
                assessment["key"] = key
                meta["assessment"] = json_.dumps(assessment)
                meta["assessed_key"] = key
            self.collection.add(ids=ids, documents=documents, embeddings=embeddings, metadatas=metadatas)

    class Filling:
        def __init__(self, store: Any) -> None:
            self.collection = Keyed(store.collection)

    for n in sizes:
        where = directory / str(n)
        where.mkdir(parents=True)
        (where / "agenda.md").write_text(example_agenda_text(), encoding="utf-8")
        store = Store.open(load_settings(store=where / "store"), embedder=embedder)
        start = time.perf_counter()
        fill(Filling(store), n, base, np.random.default_rng(n))  # type: ignore[arg-type]
        print(f"{n:,} papers filled in {time.perf_counter() - start:.0f} s", file=sys.stderr)


def counts(stats: str) -> dict[str, int]:
    """The figures of `triage stats`' table: papers, new, accepted, rejected, maybe, ..."""
    found = re.findall(r"[│|]\s*([a-z][a-z ']*?)\s*(?:\(.*?\))?\s*[│|]\s*(\d+)\s*[│|]", stats)
    return {name.strip(): int(value) for name, value in found}


def decided(stats: str) -> int:
    c = counts(stats)
    return c.get("accepted", 0) + c.get("rejected", 0) + c.get("maybe", 0)


@dataclass
class Run:
    cpu: float | None  # None: stopped at the timeout
    wall: float
    cpu_until_stopped: float | None = None


def run(cmd: list[str], env: dict[str, str], timeout: float, cwd: Path) -> tuple[Run, str]:
    """Run cmd to the end (or the timeout); its CPU time (user + sys, with its waited-for
    children) from wait4, and the end of its output. A failure stops the bench with the
    command's stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True,
        )  # fmt: skip
        deadline = start + timeout
        stopped = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                stopped = True
                break
            time.sleep(0.005)
        wall = time.perf_counter() - start
        cpu = usage.ru_utime + usage.ru_stime
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")[-600:]
        if stopped:
            return Run(None, wall, cpu), text
        if proc.returncode != 0:
            err.seek(0)
            msg = err.read().decode("utf-8", "replace")
            tail = msg if len(msg) < 4000 else msg[:1500] + "\n[...]\n" + msg[-2500:]
            raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{tail}")
    return Run(cpu, wall), text


def subreaper() -> bool:
    """Become the subreaper of what the commands detach (Linux): their background processes
    become this process's children when their parents end, so `settle` can wait for them."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def settle() -> float:
    """Wait for every child left (the commands' detached background work, adopted by this
    process) to end; their CPU seconds (user + system)."""
    cpu = 0.0
    while True:
        try:
            _, _, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return cpu
        cpu += usage.ru_utime + usage.ru_stime


def output(cmd: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout


@dataclass
class Row:
    name: str
    target: str
    command: Callable[[], list[str]]  # the timed command (args after the global options)
    before: Callable[[], None] | None = None  # untimed, before each timed run
    after: Callable[[], None] | None = None  # untimed, after each timed run
    at_once: bool = False  # timed straight after `before`, its background work under way
    times: dict[int, list[Run]] = field(default_factory=dict)
    background: dict[int, list[float]] = field(default_factory=dict)  # CPU s of detached work
    last_output: dict[int, str] = field(default_factory=dict)


class Size:
    """One store: its commands, the untimed writes between them, and the rounds."""

    def __init__(self, n: int, where: Path, env: dict[str, str], cwd: Path) -> None:
        self.n, self.where, self.env, self.cwd = n, where, env, cwd
        self.agenda = where / "agenda.md"
        self.glob = [*triage(), "--store", str(where / "store"), "--agenda", str(self.agenda)]
        self.marks = self.adds = self.imports = self.edits = 0
        self.records = sample_records()
        console.print(f"[dim]{n:,} papers: the queue's top 30 (untimed; the first read builds caches)[/dim]")
        lines = self.output("ranked", "--top", "30", "--json").splitlines()
        self.ids = [json.loads(line)["paper"]["id"] for line in lines]
        if len(self.ids) < 30:
            raise SystemExit(f"ranked --top 30 --json gave {len(self.ids)} papers at {n:,}")
        self.stats = self.output("stats")
        self.output("list", "create", LIST)

    def output(self, *rest: str) -> str:
        return output([*self.glob, *rest], self.env, self.cwd)

    def mark(self) -> list[str]:
        """A decision that changes the store: ids rotate over the queue's top 30, and an id
        gets another decision each time round."""
        k = self.marks
        self.marks += 1
        return ["mark", self.ids[k % len(self.ids)], DECISIONS[(k + k // len(self.ids)) % 3]]

    def write(self) -> None:
        self.output(*self.mark())

    def add(self) -> list[str]:
        self.adds += 1
        return ["list", "add", LIST, self.ids[-self.adds % len(self.ids)]]

    def ingest(self) -> None:
        """Import IMPORTED new papers (new arXiv ids and titles)."""
        self.imports += 1
        path = self.where / f"import-{self.imports}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for i in range(IMPORTED):
                r = self.records[(self.imports * IMPORTED + i) % len(self.records)]
                rec = {
                    "title": f"Imported study {self.imports}-{i}: {r['title']}",
                    "abstract": r["abstract"],
                    "authors": r.get("authors") or [],
                    "arxiv_id": f"2799.{self.imports:02d}{i:03d}",
                }
                f.write(json.dumps(rec) + "\n")
        self.output("ingest", str(path))

    def edit(self) -> None:
        self.edits += 1
        self.agenda_text = self.agenda.read_text(encoding="utf-8")
        with self.agenda.open("a", encoding="utf-8") as f:
            f.write(f"\nAlso of interest ({self.edits}): evaluation of retrieval-augmented models.\n")

    def unedit(self) -> None:
        """The agenda as it was (its assessments current again), so that the edit does not
        make every later row's assessments stale."""
        self.agenda.write_text(self.agenda_text, encoding="utf-8")

    def rows(self) -> list[Row]:
        bib = str(self.where / "out.bib")
        ranked = ["ranked", "--top", "10"]
        rows = [
            Row("mark ID --accept|--reject|--maybe", "everyday", self.mark),
            Row("note ID TEXT", "everyday", lambda: ["note", self.ids[1], f"note {self.marks}"], self.write),
            Row("list add NAME ID", "everyday", self.add, self.write),
            Row("list show NAME", "everyday", lambda: ["list", "show", LIST], self.write),
            Row("show ID", "everyday", lambda: ["show", self.ids[0]], self.write),
            Row("ranked --top 10", "everyday", lambda: ranked, self.write),
            Row("ranked --top 10, unchanged", "", lambda: ranked),
            Row("ranked --top 10, at once after a mark", "", lambda: ranked, self.write, at_once=True),
            Row(f"search '{QUERY}'", "everyday", lambda: ["search", QUERY], self.write),
            Row(f"search '{QUERY}', unchanged", "", lambda: ["search", QUERY]),
            Row("stats", "everyday", lambda: ["stats"], self.write),
            Row("stats, unchanged", "", lambda: ["stats"]),
            Row(
                "export -f bib --status accepted -o FILE",
                "everyday",
                lambda: ["export", "-f", "bib", "--status", "accepted", "-o", bib],
                self.write,
            ),
            Row(
                "export -f bib --list NAME -o FILE",
                "everyday",
                lambda: ["export", "-f", "bib", "--list", LIST, "-o", bib],
                self.write,
            ),
            Row(f"eval ({decided(self.stats)} decided papers)", "eval", lambda: ["eval"], self.write),
            Row(f"ranked --top 10, after an import of {IMPORTED}", "everyday", lambda: ranked, self.ingest),
            Row("ranked --top 10, after an agenda edit", "everyday", lambda: ranked, self.edit, self.unedit),
        ]
        return [r for r in rows if not r.name.startswith("eval") or self.n == EVAL_SIZE]

    def measure(self, baseline: Row, reps: int, timeout: float) -> list[Row]:
        """A warm-up round, then reps rounds: the baseline, then every row in order. A row
        stopped at the timeout is not run again."""
        n, rows = self.n, self.rows()
        stopped: set[str] = set()
        baseline.times[n] = []
        settle()  # what the first reads started
        for round_ in range(reps + 1):
            t0 = time.perf_counter()
            got, _ = run([sys.executable, "-c", BASELINE], self.env, timeout, self.cwd)
            if round_:
                baseline.times[n].append(got)
            for row in rows:
                if row.name in stopped:
                    continue
                background = 0.0
                if row.before:
                    row.before()
                    if not row.at_once:
                        background += settle()
                got, row.last_output[n] = run([*self.glob, *row.command()], self.env, timeout, self.cwd)
                background += settle()
                if got.cpu is None:
                    stopped.add(row.name)
                    console.print(f"[yellow]{row.name} @ {n:,}: stopped after {timeout:.0f} s[/yellow]")
                if round_ or got.cpu is None:
                    row.times.setdefault(n, []).append(got)
                    row.background.setdefault(n, []).append(background)
                if row.after:
                    row.after()
                    settle()
            label = f"round {round_}/{reps}" if round_ else "warm-up round"
            console.print(f"[dim]{n:,} papers: {label} in {time.perf_counter() - t0:.0f} s[/dim]")
        return rows

    def facts(self, rows: list[Row], reps: int) -> dict[str, Any]:
        n = self.n
        after = self.output("stats")
        papers = counts(after).get("papers")
        if papers != n + IMPORTED * self.imports:
            console.print(f"[yellow]{n:,}: {papers} papers after {self.imports} imports[/yellow]")
        edited = next(r for r in rows if "agenda edit" in r.name)
        return {
            "reps": reps,
            "decisions_before": decided(self.stats),
            "decisions_after": decided(after),
            "papers_after": papers,
            "stats_before": self.stats,
            "stats_after": after,
            "queue_ids": self.ids,
            "imports": self.imports,
            "agenda_edits": self.edits,
            "marks": self.marks,
            "ranked_after_agenda_edit_says_stale": "stale" in edited.last_output.get(n, ""),
            "last_output": {r.name: r.last_output.get(n, "") for r in rows},
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--reps", type=int, default=5, help="counted rounds per size (median)")
    parser.add_argument("--quick", action="store_true", help="sizes 1000 10000, 3 rounds")
    parser.add_argument("--timeout", type=float, default=120, help="seconds before a run is stopped")
    parser.add_argument("--name", default="everyday", help="bench/results/<name>.json")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(args.build, args.sizes)
        return
    if args.quick:
        args.sizes, args.reps = [1000, 10_000], 3
    if not subreaper():
        console.print(
            "[yellow]not a subreaper here: background work is neither waited for nor counted[/yellow]"
        )
    began = time.perf_counter()
    here = dict(os.environ)
    git = {
        "commit": output(["git", "-C", str(ROOT), "log", "-1", "--format=%h"], here, ROOT).strip(),
        "status_assistant": output(
            ["git", "-C", str(ROOT), "status", "--short", "assistant"], here, ROOT
        ).splitlines()[:10],
    }
    baseline = Row("baseline: python -c 'import typer, rich.console, pydantic'", "", lambda: [])
    rows: list[Row] = []
    facts: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = environment(root / "home")
        build_cmd = [sys.executable, __file__, "--build", str(root / "stores"), "--sizes"]
        start = time.perf_counter()
        subprocess.run([*build_cmd, *map(str, args.sizes)], env=env, check=True, cwd=ROOT)
        build_seconds = time.perf_counter() - start
        for n in args.sizes:
            reps = min(args.reps, BIG_REPS) if n >= BIG else args.reps
            size = Size(n, root / "stores" / str(n), env, root)
            size_rows = size.measure(baseline, reps, args.timeout)
            facts[n] = size.facts(size_rows, reps)
            rows += size_rows

    def med(runs: list[Run], what: str) -> float | None:
        values = [getattr(r, what) for r in runs]
        if any(v is None for v in values):
            return None
        return statistics.median(values)

    def target(row: Row, n: int) -> tuple[str, float | None]:
        if row.target == "eval":
            return "≤ 2 s", 2.0
        if row.target == "everyday":
            return {10_000: ("≤ 0.5 s", 0.5), 100_000: ("≤ 1 s", 1.0)}.get(n, ("", None))
        return "", None

    table: list[list[Any]] = []
    raw: dict[str, Any] = {}
    for n in args.sizes:
        base = med(baseline.times[n], "cpu")
        assert base is not None
        table.append([baseline.name, f"{n:,}", base, med(baseline.times[n], "wall"), "", 1.0, "", ""])
        raw[f"baseline @ {n}"] = [r.__dict__ for r in baseline.times[n]]
        for row in rows:
            if n not in row.times:
                continue
            runs = row.times[n]
            raw[f"{row.name} @ {n}"] = [r.__dict__ for r in runs]
            raw[f"{row.name} @ {n}, background CPU"] = row.background.get(n, [])
            cpu, wall = med(runs, "cpu"), med(runs, "wall")
            spent = statistics.median(row.background[n]) if row.background.get(n) else 0.0
            behind = round(spent, 3) if spent >= 0.005 else ""
            label, limit = target(row, n)
            name = f"triage {row.name}"
            if cpu is None:  # at least what it used before it was stopped
                least = max(r.cpu_until_stopped or 0.0 for r in runs if r.cpu is None)
                table.append(
                    [name, f"{n:,}", f"> {least:.1f} (stopped)", f"> {args.timeout:.0f}", "", "", label, "no"]
                )
                continue
            met = "" if limit is None else ("yes" if cpu <= limit else "no")
            table.append([name, f"{n:,}", cpu, wall, behind, cpu / base, label, met])
    load = os.getloadavg()
    minutes = (time.perf_counter() - began) / 60
    report(
        args.name,
        f"Everyday commands, fresh processes, median of {args.reps} rounds "
        f"({BIG_REPS} at {BIG:,}); load average {load[0]:.1f} at the end; {minutes:.0f} min",
        [
            "command",
            "papers",
            "median CPU s",
            "median wall s",
            "+ background CPU s",
            "x baseline CPU",
            "target (CPU)",
            "met?",
        ],
        table,
        {
            "sizes": args.sizes,
            "reps": args.reps,
            "timeout": args.timeout,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "load_average": load,
            "git": git,
            "build_seconds": build_seconds,
            "run_minutes": minutes,
            "stores": facts,
            "times": raw,
        },
    )


if __name__ == "__main__":
    main()
