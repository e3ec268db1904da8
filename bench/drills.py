"""Operator drills: what a kill -9, a second writer or a faulty endpoint loses, duplicates or redoes.

    python bench/drills.py [--quick] [--drills ingest-kill,tag-kill,writers,two-ingests,faulty,...]

Every drill runs the real `triage` command (or, for the parallel writers, the functions the
commands call) against a store in a temporary directory; nothing leaves 127.0.0.1, ./store is
never touched. Run them again after every change to the store or the LLM path.

ingest-kill   `triage ingest` of ~1,500 distinct papers (short abstracts, so the drill fits in a
              few minutes) is killed with SIGKILL at a random point after its first write,
              then run again to completion. The store must open and hold every paper once;
              "redone" = papers the first run had stored that the second did not find unchanged.
tag-kill      `triage tag --engine llm` on 200 papers against the fake endpoint
              (tests/fake_llm.py, its own process) is killed once a random share of its calls
              went out, then run again. Every paper must end assessed; "redone" = papers
              assessed before the second run whose assessment it rewrote.
writers       three processes at once on one store (embedded, and on a `chroma run` server):
              decisions (mark), notes and reading lists (create, add, remove one) over the
              same 20 papers, through `Store.update_decision` and `ReadingLists` as the
              commands do. Every last-written decision, note, list and membership must be
              there, and no paper taken out of a list may be back in it.
two-ingests   the same 120 papers, one file with DOIs and one with titles only, imported by
              two `triage ingest` processes at once (embedded and server): 120 papers after.
faulty        the fake endpoint answers 30% of requests 429: `triage tag --engine llm` on 150
              papers must end with every paper assessed or failed with a reason; "redone" =
              requests beyond one per paper.

import-bounds    (bench/drills_import.py) a 40-level @string doubling bomb, a 20 MB title and
                 abstract, a 200 MB JSON string, a 100 MB CSV cell: time and peak memory
                 of `triage ingest` (under 500 MB), what was imported.
network-bounds   (bench/drills_network.py) a gzip bomb, a 200 MB body, a server trickling a
                 byte every 5 s, a Hugging Face day of 10^6 papers: `triage fetch` ends in
                 about the deadline, under 500 MB, with a one-line reason.
llm-bounds       (bench/drills_llm.py) `triage rm` of queued papers while `tag --engine llm`
                 runs against a faulty endpoint (20 runs: hangs, lost, redone), and the
                 injection set batched against one paper a call: neighbours' scores moved.
store-failures   (bench/drills_store.py) a disk with 2 MB free (a tmpfs; needs root), `rm
                 --last-import` over decided papers, the store removed under the review UI,
                 the review UI killed with decisions waiting to be written:
                 nothing decided lost, every refused change in the recovery file.

--quick runs each drill once (the kill drills default to 3 and 2 runs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import console, endpoint, fill_sample, report, varied_records

from assistant.agenda import example_agenda_text
from assistant.config import load_settings
from assistant.ingest import CHUNK as INGEST_CHUNK  # papers per dedupe + write
from assistant.lists import ReadingLists
from assistant.models import Status, normalize_title
from assistant.store import Store

ABSTRACT_WORDS = 12  # short abstracts: the embedder is the floor of every import
STARTUP_S = 2.5  # about what `triage` takes to start and parse before it embeds
SUBPROCESS_TIMEOUT = 300.0
COLUMNS = ["drill", "runs", "expected", "found", "lost", "duplicated", "redone", "s", "notes"]
# The bounds drills (bench/drills_*.py, each also runnable alone): hostile inputs, hostile
# endpoints, a store that fails under the commands and the review UI, the LLM path.
BOUNDS: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "import-bounds": (
        "drills_import",
        [(f, {}) for f in ("drill_string_bomb", "drill_huge_fields", "drill_json_string", "drill_csv_cell")],
    ),
    "network-bounds": (
        "drills_network",
        [(f, {}) for f in ("drill_gzip_bomb", "drill_big_body", "drill_trickle", "drill_hf_million")],
    ),
    "store-failures": (
        "drills_store",
        [(f, {}) for f in ("drill_disk_2mb", "drill_rm_decided", "drill_ui_store_removed", "drill_ui_kill")],
    ),
    "llm-bounds": (
        "drills_llm",
        [
            ("drill_rm_during_tag", {"runs": 20}),
            ("drill_injection", {"scope": "paper"}),
            ("drill_injection", {"scope": "request"}),
        ],
    ),
}

Spec = dict[str, Any]  # keyword arguments of load_settings, picklable for worker processes


# -- environment -------------------------------------------------------------------


def isolate(home: Path) -> None:
    """No user config, cache or LLM settings leak into the drills (nor the drills into them)."""
    for var in list(os.environ):
        if var.startswith("TRIAGE_") or var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
            del os.environ[var]
    for name, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".data"),
    ):
        os.environ[name] = str(home / sub)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["COLUMNS"] = "200"  # the ingest table is parsed; keep its rows on one line


def triage_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "triage"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "assistant"]


def cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start `triage ARGS` (output to `log`, or discarded)."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the child owns it
    try:
        return subprocess.Popen(
            [*triage_cmd(), *args], cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=out
        )
    finally:
        if log:
            out.close()  # type: ignore[union-attr]


def finish(proc: subprocess.Popen[bytes], timeout: float = SUBPROCESS_TIMEOUT) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{str(proc.args)[:120]} ran over {timeout:.0f}s") from None


def ingest_counts(log: Path) -> dict[str, int]:
    """new / merged / unchanged from `triage ingest`'s table (one file per run)."""
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) >= 9 and cells[2] in ("jsonl", "json", "bibtex"):
            number = [int(c.replace(",", "")) for c in cells[3:7]]
            return dict(zip(("parsed", "new", "merged", "unchanged"), number, strict=True))
    raise RuntimeError(f"no import table in the output: {log.read_text()[-500:]}")


# -- data --------------------------------------------------------------------------


def short_records(n: int) -> list[dict[str, Any]]:
    """n distinct papers (bench/common.py's varied titles), abstracts cut to ABSTRACT_WORDS."""
    records = varied_records(n)
    for r in records:
        r["abstract"] = " ".join(str(r["abstract"]).split()[:ABSTRACT_WORDS])
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def fill(store: Store, n: int) -> list[str]:
    """n papers from the sample with random vectors (tagging never reads vectors)."""
    return fill_sample(store, n, seed=n)


def title_census(store: Store, titles: list[str]) -> tuple[int, int, int]:
    """(stored papers, expected titles missing, extra records of an expected title)."""
    seen = Counter(normalize_title(str(meta.get("title") or "")) for _, meta in store.iter_metadata())
    wanted = {normalize_title(t) for t in titles}
    lost = sum(1 for t in wanted if not seen[t])
    duplicated = sum(c - 1 for t, c in seen.items() if c > 1)
    return sum(seen.values()), lost, duplicated


def store_dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


# -- the fake endpoint and the Chroma server -----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer:
    """`chroma run` on a free 127.0.0.1 port with a temporary --path, started on first use."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.url: str | None = None

    @staticmethod
    def executable() -> str | None:
        return shutil.which("chroma", path=str(Path(sys.executable).parent))

    def start(self) -> str:
        if self.url:
            return self.url
        exe = self.executable()
        if exe is None:
            raise RuntimeError("no 'chroma' executable beside the interpreter")
        port = free_port()
        log = open(self.tmp / "chroma-server.log", "wb")  # noqa: SIM115 - the server owns it
        self.proc = subprocess.Popen(
            [exe, "run", "--path", str(self.tmp / "chroma-data"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as resp:
                    json.load(resp)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the chroma server did not start") from None
                time.sleep(0.2)
        self.url = url
        return url

    def spec(self) -> Spec:
        return {"chroma_url": self.start(), "collection": f"drill-{uuid.uuid4().hex[:10]}"}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def spec_env(spec: Spec) -> dict[str, str]:
    """The same store for a `triage` process, through its environment."""
    if "chroma_url" in spec:
        return {"TRIAGE_CHROMA_URL": spec["chroma_url"], "TRIAGE_COLLECTION": spec["collection"]}
    return {"TRIAGE_STORE": str(spec["store"])}


# -- drill 1: kill -9 mid-ingest --------------------------------------------------------


def drill_ingest_kill(tmp: Path, runs: int, n: int, rng: random.Random) -> tuple[list[Any], dict[str, Any]]:
    records = short_records(n)
    titles = [str(r["title"]) for r in records]
    source = write_jsonl(tmp / "papers.jsonl", records)
    empty = tmp / "empty-store"
    Store.open(load_settings(store=empty))
    baseline = store_dir_bytes(empty)
    details: list[dict[str, Any]] = []
    found = lost = duplicated = redone = 0
    for run in range(runs):
        where = tmp / f"ingest-kill-{run}"
        where.mkdir()
        store_path = where / "store"
        launched = time.monotonic()
        first = cli(["--store", str(store_path), "ingest", str(source)], where, log=where / "first.log")
        # "Started writing": the store has grown by more than its first chunk's metadata would.
        deadline = launched + SUBPROCESS_TIMEOUT
        while first.poll() is None and store_dir_bytes(store_path) < baseline + 200_000:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        # Then a random point in the rest of the run, estimated from how long the first chunk took.
        chunk_s = max(0.5, time.monotonic() - launched - STARTUP_S)
        delay = rng.uniform(0.0, 0.6 * chunk_s * (-(-n // INGEST_CHUNK) - 1))
        time.sleep(delay)
        killed = first.poll() is None
        if killed:
            first.send_signal(signal.SIGKILL)
        first.wait()
        settings = load_settings(store=store_path)
        stored_first = Store.open(settings).count()  # the store opens after the kill
        second = cli(["--store", str(store_path), "ingest", str(source)], where, log=where / "second.log")
        code = finish(second)
        if code != 0:
            raise RuntimeError(
                f"the second import exited {code}: {(where / 'second.log').read_text()[-400:]}"
            )
        counts = ingest_counts(where / "second.log")
        store = Store.open(settings)
        total, run_lost, run_dup = title_census(store, titles)
        store.search("language models", k=5)  # the index answers too
        run_redone = max(0, stored_first - counts["unchanged"])
        found += total - run_dup
        lost += run_lost
        duplicated += run_dup
        redone += run_redone
        details.append(
            {
                "killed": killed,
                "kill_after_first_write_s": round(delay, 2),
                "stored_by_first_run": stored_first,
                "second_run": counts,
                "count_after": total,
                "lost": run_lost,
                "duplicated": run_dup,
                "redone": run_redone,
            }
        )
    stored = ", ".join(str(d["stored_by_first_run"]) for d in details)
    unchanged = ", ".join(str(d["second_run"]["unchanged"]) for d in details)
    note = f"1st run stored {stored}; 2nd found unchanged {unchanged}"
    if not all(d["killed"] for d in details):
        note += f"; {sum(not d['killed'] for d in details)} run(s) ended before the kill"
    row = ["kill -9 mid-ingest", runs, n * runs, found, lost, duplicated, redone, note]
    return row, {"papers": n, "runs": details}


# -- drill 2: kill -9 mid-LLM-tag --------------------------------------------------------


def assessments(store: Store) -> tuple[dict[str, str], dict[str, str]]:
    """{id: assessment created_at} of assessed papers, {id: reason} of failed ones."""
    done, failed = {}, {}
    for item in store.iter_all():
        if item.assessment is not None:
            done[item.paper.id] = item.assessment.created_at.isoformat()
        elif item.failure is not None:
            failed[item.paper.id] = item.failure[1]
    return done, failed


def agenda_beside(store_path: Path) -> None:
    (store_path.parent / "agenda.md").write_text(example_agenda_text(), encoding="utf-8")


def drill_tag_kill(
    tmp: Path, runs: int, n: int, latency: float, rng: random.Random
) -> tuple[list[Any], dict[str, Any]]:
    details: list[dict[str, Any]] = []
    found = lost = redone = 0
    with endpoint(latency, 0.0) as fake:
        for run in range(runs):
            where = tmp / f"tag-kill-{run}"
            where.mkdir()
            store_path = where / "store"
            settings = load_settings(store=store_path)
            ids = fill(Store.open(settings), n)
            agenda_beside(store_path)
            args = ["--store", str(store_path), "tag", "--engine", "llm"]
            calls_before = fake.calls
            target = calls_before + rng.randint(n // 4, 3 * n // 4)
            first = cli(args, where, fake.env(), where / "first.log")
            deadline = time.monotonic() + SUBPROCESS_TIMEOUT
            while first.poll() is None and fake.calls < target and time.monotonic() < deadline:
                time.sleep(0.02)
            killed = first.poll() is None
            if killed:
                first.send_signal(signal.SIGKILL)
            first.wait()
            first_calls = fake.calls - calls_before
            before, _ = assessments(Store.open(settings))
            second = cli(args, where, fake.env(), where / "second.log")
            code = finish(second)
            second_calls = fake.calls - calls_before - first_calls
            after, failed = assessments(Store.open(settings))
            run_redone = sum(1 for pid, when in before.items() if after.get(pid) != when)
            run_lost = sum(1 for pid in ids if pid not in after)
            found += sum(1 for pid in ids if pid in after)
            lost += run_lost
            redone += run_redone
            details.append(
                {
                    "killed": killed,
                    "calls_before_kill": first_calls,
                    "assessed_by_first_run": len(before),
                    "second_run_calls": second_calls,
                    "second_run_exit": code,
                    "assessed_after": len(after),
                    "failed_after": len(failed),
                    "lost": run_lost,
                    "redone": run_redone,
                }
            )
    sent = ", ".join(str(d["calls_before_kill"]) for d in details)
    kept = ", ".join(str(d["assessed_by_first_run"]) for d in details)
    again = sum(d["calls_before_kill"] + d["second_run_calls"] for d in details) - n * runs
    note = f"killed after {sent} calls, {kept} stored; calls made twice: {again}"
    if not all(d["killed"] for d in details):
        note += f"; {sum(not d['killed'] for d in details)} run(s) ended before the kill"
    row = ["kill -9 mid-LLM-tag", runs, n * runs, found, lost, 0, redone, note]
    return row, {"papers": n, "latency_s": latency, "calls_made_twice": again, "runs": details}


# -- drill 3: parallel writers -------------------------------------------------------------

WRITER_PAPERS = 20
WRITER_LISTS = 10


def _writer(kind: str, spec: Spec, ids: list[str], rounds: int, ready: Any, go: Any, out: Any) -> None:
    """One of the three writers; puts (kind, what it wrote last, error) on `out`."""
    try:
        store = Store.open(load_settings(**spec))
        ready.put(kind)
        go.wait(120)
        written: dict[str, Any] = {}
        if kind == "mark":
            for r in range(rounds):
                for i, pid in enumerate(ids):
                    status = Status.ACCEPTED if (r + i) % 2 == 0 else Status.REJECTED
                    store.update_decision(pid, status=status)  # `triage mark ID --accept/--reject`
                    written[pid] = status.value
        elif kind == "note":
            for r in range(rounds):
                for pid in ids:
                    text = f"drill note {r} on {pid}"
                    store.update_decision(pid, note=text)  # `triage note ID TEXT`
                    written[pid] = text
        else:
            lists = ReadingLists(store)
            for j in range(WRITER_LISTS):
                name = f"drill list {j}"
                lists.create(name, f"list {j} of the writers drill")  # `triage list create`
                members = ids[j % 2 :: 2]
                for pid in members:
                    lists.add(name, [pid])  # `triage list add NAME ID`
                lists.remove(name, members[:1])  # `triage list remove NAME ID`
                written[name] = (members[1:], members[:1])
        out.put((kind, written, None))
    except Exception:  # reported as the drill's error, not lost in a child's stderr
        out.put((kind, {}, traceback.format_exc()[-1500:]))
        ready.put(kind)


def drill_writers(spec: Spec, rounds: int) -> tuple[list[Any], dict[str, Any]]:
    store = Store.open(load_settings(**spec))
    ids = fill(store, WRITER_PAPERS)
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    kinds = ("mark", "note", "lists")
    procs = [ctx.Process(target=_writer, args=(k, spec, ids, rounds, ready, go, out)) for k in kinds]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=120)
        start = time.perf_counter()
        go.set()
        results = {}
        for _ in procs:
            kind, written, error = out.get(timeout=SUBPROCESS_TIMEOUT)
            if error:
                raise RuntimeError(f"the {kind} writer failed: {error}")
            results[kind] = written
        writing_s = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    items = {item.paper.id: item for item in store.get_many(ids)}
    definitions = {rl.name for rl in ReadingLists(store).all()}
    missing: Counter[str] = Counter()
    for pid, status in results["mark"].items():
        missing["decision"] += items[pid].decision.status.value != status
    for pid, text in results["note"].items():
        missing["note"] += items[pid].decision.note != text
    expected = len(results["mark"]) + len(results["note"])
    for name, (members, removed) in results["lists"].items():
        missing["list"] += name not in definitions
        missing["membership"] += sum(1 for pid in members if name not in items[pid].decision.lists)
        # A paper taken out of a list must stay out (a stale write applied late puts it back).
        missing["removal undone"] += sum(1 for pid in removed if name in items[pid].decision.lists)
        expected += 1 + len(members) + len(removed)
    lost = sum(missing.values())
    ops = rounds * WRITER_PAPERS * 2 + WRITER_LISTS * (2 + WRITER_PAPERS // 2)
    note = f"{ops} writes in {writing_s:.1f}s" + (
        "; missing " + ", ".join(f"{k} {v}" for k, v in missing.items() if v) if lost else ""
    )
    where = "server" if "chroma_url" in spec else "embedded"
    row = [f"parallel writers ({where})", 1, expected, expected - lost, lost, 0, "", note]
    return row, {"writes": ops, "writing_s": writing_s, "missing": dict(missing)}


# -- drill 4: two ingests at once ---------------------------------------------------------


def drill_two_ingests(tmp: Path, spec: Spec, n: int) -> tuple[list[Any], dict[str, Any]]:
    where = tmp / f"two-ingests-{'server' if 'chroma_url' in spec else 'embedded'}"
    where.mkdir()
    records = short_records(n + 5000)[5000:]  # papers no other drill uses
    with_doi = [
        {"title": r["title"], "abstract": r["abstract"], "authors": r["authors"], "doi": f"10.5555/drill.{i}"}
        for i, r in enumerate(records)
    ]
    titles_only = [{"title": r["title"], "abstract": r["abstract"], "authors": r["authors"]} for r in records]
    files = [
        write_jsonl(where / "with-doi.jsonl", with_doi),
        write_jsonl(where / "no-doi.jsonl", titles_only),
    ]
    env = spec_env(spec)
    procs = [cli(["ingest", str(f)], where, env, where / f"{f.stem}.log") for f in files]
    codes = [finish(p) for p in procs]
    if any(codes):
        raise RuntimeError(f"an import exited {codes}: {(where / 'no-doi.log').read_text()[-400:]}")
    counts = [ingest_counts(where / f"{f.stem}.log") for f in files]
    store = Store.open(load_settings(**spec))
    total, lost, duplicated = title_census(store, [str(r["title"]) for r in records])
    with_dois = sum(1 for _, meta in store.iter_metadata() if meta.get("doi"))
    label = "server" if "chroma_url" in spec else "embedded"
    news = " + ".join(str(c["new"]) for c in counts)
    note = f"made new: {news}; {with_dois} carry their DOI; count {total}"
    row = [f"two ingests at once ({label})", 1, n, total - duplicated, lost, duplicated, "", note]
    return row, {"papers": n, "reports": counts, "count": total, "with_doi": with_dois}


# -- drill 5: faulty endpoint --------------------------------------------------------------


def drill_faulty(tmp: Path, n: int, latency: float, error_rate: float) -> tuple[list[Any], dict[str, Any]]:
    where = tmp / "faulty"
    where.mkdir()
    store_path = where / "store"
    settings = load_settings(store=store_path)
    ids = fill(Store.open(settings), n)
    agenda_beside(store_path)
    with endpoint(latency, error_rate) as fake:
        proc = cli(
            ["--store", str(store_path), "tag", "--engine", "llm"], where, fake.env(), where / "tag.log"
        )
        code = finish(proc)
        calls = fake.calls
    done, failed = assessments(Store.open(settings))
    unaccounted = [pid for pid in ids if pid not in done and not failed.get(pid)]
    reasons = Counter(reason.split(":")[0][:60] for reason in failed.values())
    note = f"{len(done)} assessed, {len(failed)} failed; {calls} requests for {n} papers; exit {code}"
    if reasons:
        note += "; " + ", ".join(f"{r} x{c}" for r, c in reasons.most_common(3))
    row = [f"faulty endpoint ({error_rate:.0%} 429)", 1, n, n - len(unaccounted), len(unaccounted), 0]
    row += [calls - n, note]
    extra = {
        "papers": n,
        "error_rate": error_rate,
        "assessed": len(done),
        "failed": len(failed),
        "failure_reasons": dict(Counter(failed.values())),
        "requests": calls,
        "exit_code": code,
    }
    return row, extra


# -- main ----------------------------------------------------------------------------------


def run_drill(
    label: str,
    runs: int,
    body: Callable[[], tuple[list[Any], dict[str, Any]]],
    rows: list[list[Any]],
    extra: dict[str, Any],
    started: float,
) -> None:
    """Run one drill: its row (with its seconds) goes to `rows`, its details to
    `extra["drills"]`; a drill that fails is a row saying why, not the end of the bench."""
    console.print(f"[dim]{time.perf_counter() - started:6.1f}s  {label} ...[/dim]")
    start = time.perf_counter()
    try:
        row, details = body()
    except Exception as exc:
        seconds = time.perf_counter() - start
        rows.append([label, runs, "", "", "", "", "", seconds, f"error: {type(exc).__name__}: {exc}"])
        extra["drills"][label] = {"error": traceback.format_exc()}
        return
    seconds = time.perf_counter() - start
    rows.append([*row[:7], seconds, row[7]])
    extra["drills"][row[0]] = {**details, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one run of each drill")
    kinds = ["ingest-kill", "tag-kill", "writers", "two-ingests", "faulty", *BOUNDS]
    parser.add_argument("--drills", default=",".join(kinds))
    parser.add_argument("--ingest-n", type=int, default=1500)
    parser.add_argument("--tag-n", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.1, help="the fake endpoint's seconds per answer")
    parser.add_argument("--rounds", type=int, default=5, help="passes over the 20 papers per writer")
    parser.add_argument("--seed", type=int, default=None, help="where the kills land (default: random)")
    args = parser.parse_args()
    chosen = set(args.drills.split(","))
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    rng = random.Random(seed)

    rows: list[list[Any]] = []
    extra: dict[str, Any] = {"seed": seed, "abstract_words": ABSTRACT_WORDS, "drills": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="triage-drills-") as name:
        tmp = Path(name)
        isolate(tmp / "home")
        server = ChromaServer(tmp)
        has_server = ChromaServer.executable() is not None

        def drill(label: str, runs: int, body: Callable[[], tuple[list[Any], dict[str, Any]]]) -> None:
            run_drill(label, runs, body, rows, extra, started)

        try:
            if "ingest-kill" in chosen:
                runs = 1 if args.quick else 3
                drill(
                    "kill -9 mid-ingest",
                    runs,
                    lambda: drill_ingest_kill(tmp, runs, args.ingest_n, rng),
                )
            if "tag-kill" in chosen:
                runs2 = 1 if args.quick else 2
                drill(
                    "kill -9 mid-LLM-tag",
                    runs2,
                    lambda: drill_tag_kill(tmp, runs2, args.tag_n, args.latency, rng),
                )
            # Where the writers drills run: a fresh embedded store, and a fresh collection on the
            # Chroma server (started on first use) when `chroma` is installed.
            stores: list[tuple[str, Callable[[str], Spec]]] = [
                ("embedded", lambda what: {"store": tmp / what / "store"})
            ]
            if has_server:
                stores.append(("server", lambda what: server.spec()))
            for where, make_spec in stores if "writers" in chosen else []:

                def writers(make_spec: Callable[[str], Spec] = make_spec) -> tuple[list[Any], dict[str, Any]]:
                    return drill_writers(make_spec("writers"), args.rounds)

                drill(f"parallel writers ({where})", 1, writers)
            for where, make_spec in stores if "two-ingests" in chosen else []:

                def two(make_spec: Callable[[str], Spec] = make_spec) -> tuple[list[Any], dict[str, Any]]:
                    return drill_two_ingests(tmp, make_spec("two-ingests-store"), 120)

                drill(f"two ingests at once ({where})", 1, two)
            if "faulty" in chosen:
                drill("faulty endpoint", 1, lambda: drill_faulty(tmp, 150, args.latency / 2, 0.3))
            for group, (module, names) in BOUNDS.items():
                if group not in chosen:
                    continue
                functions = importlib.import_module(module)  # they import this module's helpers
                for i, (fname, kwargs) in enumerate(names):
                    folder = tmp / group / f"{i}-{fname}"
                    folder.mkdir(parents=True, exist_ok=True)
                    body: Callable[..., tuple[list[Any], dict[str, Any]]] = getattr(functions, fname)
                    label = f"{group}: {fname[len('drill_') :]} {' '.join(map(str, kwargs.values()))}".strip()

                    def run(
                        body: Callable[..., tuple[list[Any], dict[str, Any]]] = body,
                        folder: Path = folder,
                        kwargs: dict[str, Any] = kwargs,
                    ) -> tuple[list[Any], dict[str, Any]]:
                        return body(folder, **kwargs)

                    drill(label, int(kwargs.get("runs", 1)), run)
        finally:
            server.stop()
    total = time.perf_counter() - started
    extra["total_seconds"] = total
    extra["chroma_server"] = has_server
    report(
        "drills",
        f"Operator drills ({'quick' if args.quick else 'full'}, seed {seed}): lost, duplicated, redone; "
        f"{total:.0f}s in all",
        COLUMNS,
        rows,
        extra,
    )


if __name__ == "__main__":
    main()
