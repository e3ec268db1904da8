"""The lab drill: one `chroma run` server, five people reviewing at once while `daily` fetches
and `tag` assesses for another agenda.

    python bench/lab.py [--papers 100000] [--reviewers 5] [--seconds 60] [--new 300] [--store DIR]

The store (`--store DIR`: a folder with `store/` and `agenda.md` as `bench/everyday.py --build`
leaves them; else one is filled here, with precomputed vectors) is copied into the server's data
directory. Then:

1. alone: `triage daily` as the curator fetches `--new` papers from three feeds served from
   127.0.0.1 (arXiv, Hugging Face daily papers, RSS), embeds, assesses and digests them (after
   a first, uncounted run that builds the caches every later run reuses);
2. together: `--reviewers` review UIs (headless, Textual's Pilot, each in a process of its own,
   each a person: `--user r1`...) open the store, and once all are up each one decides the
   paper under its cursor once a second for `--seconds` seconds, accept or reject in turn (each
   reviewer starting on another one), while `triage daily` fetches another `--new` papers and
   `triage tag` assesses the store for a second agenda as another person.

Reported: per reviewer, decisions made, lost (the store does not hold that person's last
decision on a paper) and misattributed (a reviewer's key on a paper that reviewer never
decided), and the decision keys' time (wall, from the press until the screen settles, and the
UI thread's CPU), median and p95, beside an unbound key's wall time pressed right after each
(the harness's own, on the machine as loaded then); `daily` together against alone (target:
1.2x). Everything runs on this one machine: the server, every reviewer and its retraining, the
daily run and the tagging share its cores, where a lab's reviewers each have their own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import report, varied_records  # noqa: E402

from assistant.store.people import everyone  # noqa: E402

SECOND_AGENDA = """# Systems

## Serving and inference

Serving large models: batching, caching, quantisation, speculative decoding, latency.

## Mixture of experts

Sparse mixture-of-experts models: routing, load balancing, expert specialisation.
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = free_port()
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent)) or "chroma"
    proc = subprocess.Popen(  # noqa: S603
        [exe, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise SystemExit(f"the Chroma server did not start: see {log}")


def proc_cpu(pid: int) -> float:
    """CPU seconds a live process has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu(parent: int) -> dict[int, float]:
    """CPU seconds of each live child of a process."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent:
            out[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def triage(env: dict[str, str], *args: str) -> float:
    """Run `triage` (a process of its own, as a person would) and return its wall time."""
    start = time.perf_counter()
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "assistant", *args], env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"triage {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return time.perf_counter() - start


def daily(env: dict[str, str], records: list[dict[str, Any]], tag: str) -> tuple[float, int]:
    """`triage daily` over three feeds of these records, served from 127.0.0.1: (wall, requests)."""
    from fetch import Feeds

    feeds = Feeds(records, datetime.now(UTC))
    server, url = feeds.serve()
    try:
        env = {
            **env,
            "TRIAGE_ARXIV_URL": f"{url}/api/query",
            "TRIAGE_HF_URL": f"{url}/api/daily_papers",
            "TRIAGE_S2_URL": f"{url}/s2",
        }
        names = [f"cl-{tag}", f"hf-{tag}", f"rss-{tag}"]
        triage(env, "feed", "add", names[0], "--arxiv-category", "cs.CL", "--max", "5000")
        triage(env, "feed", "add", names[1], "--hf-daily", "--max", "5000")
        triage(env, "feed", "add", names[2], "--rss", f"{url}/rss", "--max", "5000")
        seconds = triage(env, "daily", "-o", f"digest-{tag}.md")
        for name in names:  # the next run fetches its own feeds only
            triage(env, "feed", "rm", name)
        return seconds, sum(feeds.requests.values())
    finally:
        server.shutdown()


# -- one reviewer (a process of its own) ----------------------------------------


async def review(name: str, url: str, agenda_path: Path, seconds: int, offset: int, folder: Path) -> None:
    from tui import settled

    from assistant.agenda import load_agenda
    from assistant.config import load_settings
    from assistant.store import Store
    from assistant.tui.app import ReviewApp

    settings = load_settings(chroma_url=url, user=name, agenda=agenda_path)
    # Refreshed from the store every 3 s, as `triage review` is: what the others write comes in.
    app = ReviewApp(Store.open(settings), settings, load_agenda(agenda_path))

    decisions: list[dict[str, Any]] = []
    async with app.run_test(size=(170, 45)) as pilot:
        while not app.shown:
            await asyncio.sleep(0.05)
        await settled(app)
        (folder / f"{name}.ready").touch()
        while not (folder / "go").exists():
            await asyncio.sleep(0.05)
        start = time.monotonic()
        own, kids = time.process_time(), children_cpu(os.getpid())
        for i in range(seconds):
            pid = app.current_id()
            key, status = ("a", "accepted") if (i + offset) % 2 == 0 else ("x", "rejected")
            wall, ui = time.perf_counter(), time.thread_time()
            await pilot.press(key)
            await pilot.pause()
            record = {"id": pid, "status": status, "wall": time.perf_counter() - wall}
            record["ui"] = time.thread_time() - ui
            # An unbound key: the harness's own time (Pilot's pause until the screen settles)
            # on this machine as loaded at this moment.
            wall = time.perf_counter()
            await pilot.press("z")
            await pilot.pause()
            decisions.append({**record, "harness": time.perf_counter() - wall})
            await asyncio.sleep(max(0.0, start + i + 1 - time.monotonic()))
        now = children_cpu(os.getpid())
        cpu = {
            "ui_process_cpu": time.process_time() - own,
            "training_cpu": sum(c - kids.get(pid, 0.0) for pid, c in now.items()),
            "seconds": time.monotonic() - start,
        }
        await settled(app)
        await pilot.press("q")
        await pilot.pause()
    (folder / f"{name}.json").write_text(json.dumps(decisions), encoding="utf-8")
    (folder / f"{name}.cpu.json").write_text(json.dumps(cpu), encoding="utf-8")


# -- the drill -------------------------------------------------------------------


def fill_store(where: Path, n: int) -> None:
    """A store of n papers at where/store with agenda.md beside it (bench/everyday.py's build)."""
    subprocess.run(  # noqa: S603
        [sys.executable, str(BENCH / "everyday.py"), "--build", str(where), "--sizes", str(n)], check=True
    )
    for item in (where / str(n)).iterdir():
        item.rename(where / item.name)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--reviewers", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--new", type=int, default=300)
    parser.add_argument(
        "--store", type=Path, help="a folder with store/ and agenda.md (bench/everyday.py --build)"
    )
    parser.add_argument(
        "--placement",
        choices=["split", "shared"],
        default="split",
        help="split (the default, on 2+ cores): the reviewers' processes on the last core (their "
        "laptops), the server, daily and tag on the others (the lab's machine); shared: all on every core",
    )
    parser.add_argument(
        "--tag-nice",
        type=int,
        default=19,
        help="the niceness of the tagging job (docs/server.md: the lab's jobs that can wait run at 19)",
    )
    parser.add_argument("--reviewer", help=argparse.SUPPRESS)  # a reviewer's own process
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--offset", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reviewer:
        agenda = args.folder / "agenda.md"
        asyncio.run(review(args.reviewer, args.url, agenda, args.seconds, args.offset, args.folder))
        return

    cores = sorted(os.sched_getaffinity(0))
    laptops: set[int] | None = None
    if args.placement == "split" and len(cores) >= 2:
        # Each reviewer reads on a laptop of their own: their UIs and training share one core
        # here, and the lab's machine (this process, the server, daily, tag: inherited) the rest.
        laptops = {cores[-1]}
        os.sched_setaffinity(0, set(cores[:-1]))
    placement = (
        f"reviewers on core {cores[-1]}, the server, daily and tag on {len(cores) - 1}"
        if laptops
        else f"everything on all {len(cores)} cores"
    )
    with tempfile.TemporaryDirectory(prefix="triage-lab-") as tmp:
        work = Path(tmp)
        source = args.store
        if source is None:
            source = work / "built"
            fill_store(source, args.papers)
        data = work / "chroma-data"
        shutil.copytree(source / "store", data, ignore=shutil.ignore_patterns("triage-*"))
        shutil.copy(source / "agenda.md", work / "agenda.md")
        (work / "second.md").write_text(SECOND_AGENDA, encoding="utf-8")
        server, url = start_server(data, work / "server.log")
        env = {
            **os.environ,
            "HOME": str(work / "home"),
            "XDG_CACHE_HOME": str(work / "home" / ".cache"),
            "TRIAGE_CHROMA_URL": url,
            "TRIAGE_AGENDA": str(work / "agenda.md"),
            "TRIAGE_ARXIV_DELAY": "0",
            "TRIAGE_HF_DELAY": "0",
            "TRIAGE_RSS_DELAY": "0",
            "TRIAGE_NO_BACKGROUND": "1",
            "COLUMNS": "160",
        }
        os.chdir(work)
        try:
            records = varied_records(args.papers + 3 * args.new)[args.papers :]
            curator = {**env, "TRIAGE_USER": "curator"}
            triage(curator, "stats")  # the store's first person: the one who built it
            triage(curator, "search", "language models")  # the server loads its vector index
            # A first daily builds what every later one reuses (the caches of the personal
            # model and of the offline engine): not counted.
            warm, _ = daily(curator, records[: args.new], "warm")
            print(f"daily, first run (not counted): {warm:.1f} s", file=sys.stderr)
            server_before, children = proc_cpu(server.pid), resource.getrusage(resource.RUSAGE_CHILDREN)
            alone, _ = daily(curator, records[args.new : 2 * args.new], "alone")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_alone = {
                "window_s": round(alone, 1),
                "chroma server": round(proc_cpu(server.pid) - server_before, 1),
                "daily": round(after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime, 1),
            }
            print(f"daily alone: {alone:.1f} s", file=sys.stderr)

            names = [f"r{i + 1}" for i in range(args.reviewers)]
            reviewers = [
                subprocess.Popen(  # noqa: S603
                    [sys.executable, str(BENCH / "lab.py"), "--reviewer", name, "--url", url]
                    + ["--folder", str(work), "--seconds", str(args.seconds), "--offset", str(i)],
                    env=env,
                    preexec_fn=(lambda: os.sched_setaffinity(0, laptops)) if laptops else None,  # noqa: PLW1509
                )
                for i, name in enumerate(names)
            ]
            opened = time.perf_counter()
            while not all((work / f"{n}.ready").exists() for n in names):
                if any(r.poll() is not None for r in reviewers):
                    raise SystemExit("a reviewer stopped before it was ready")
                time.sleep(0.2)
            print(f"{len(names)} review UIs up in {time.perf_counter() - opened:.0f} s", file=sys.stderr)
            tagger = subprocess.Popen(  # noqa: S603
                # A batch job, niced as docs/server.md advises for the lab's cron jobs.
                ["nice", "-n", str(args.tag_nice), sys.executable, "-m", "assistant", "tag"],
                env={**env, "TRIAGE_USER": "tagger", "TRIAGE_AGENDA": str(work / "second.md")},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started = datetime.now(UTC)
            server_cpu, tagger_cpu = proc_cpu(server.pid), proc_cpu(tagger.pid)
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            (work / "go").touch()
            together, _ = daily(curator, records[2 * args.new :], "together")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            daily_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
            server_cpu, tagger_cpu = proc_cpu(server.pid) - server_cpu, proc_cpu(tagger.pid) - tagger_cpu
            print(f"daily together: {together:.1f} s", file=sys.stderr)
            for r in reviewers:
                r.wait()
            shares = [json.loads((work / f"{n}.cpu.json").read_text(encoding="utf-8")) for n in names]
            cpu = {
                "window_s": round(together, 1),
                "cores": os.cpu_count(),
                "placement": placement,
                "chroma server": round(server_cpu, 1),
                "daily": round(daily_cpu, 1),
                f"tag (second agenda, nice {args.tag_nice})": round(tagger_cpu, 1),
                "review UIs (over the reviewers' seconds)": round(
                    sum(c["ui_process_cpu"] for c in shares), 1
                ),
                "their training processes": round(sum(c["training_cpu"] for c in shares), 1),
                "reviewers' seconds": round(max(c["seconds"] for c in shares), 1),
            }
            tagger.terminate()
            tagger.wait()
            rows, extra = verify(url, names, started, args)
        finally:
            server.terminate()
            server.wait()
            os.chdir(BENCH)
    ratio = together / alone
    rows.append(
        [
            "daily (fetch, embed, tag, digest)",
            "",
            "",
            "",
            f"alone {alone:.1f} s",
            f"together {together:.1f} s",
            "",
        ]
    )
    extra.update(
        {
            "daily_alone_s": round(alone, 2),
            "daily_together_s": round(together, 2),
            "daily_ratio": round(ratio, 3),
            "placement": placement,
            "cpu_seconds_alone": cpu_alone,
            "cpu_seconds_while_together": cpu,
        }
    )
    report(
        "lab",
        f"The lab drill: {args.papers:,} papers on chroma run, {args.reviewers} reviewers at 1 decision/s "
        f"({placement})",
        [
            "reviewer",
            "decisions",
            "lost",
            "misattributed",
            "key wall ms p50 / p95",
            "key UI CPU ms p50 / p95",
            "unbound key (harness) wall ms p50 / p95",
        ],
        rows,
        extra,
    )
    print(f"daily together / alone = {ratio:.2f} (target 1.2)")
    print("CPU seconds while daily ran alone: " + ", ".join(f"{k} {v}" for k, v in cpu_alone.items()))
    print(
        "CPU seconds while daily ran beside the reviewers: " + ", ".join(f"{k} {v}" for k, v in cpu.items())
    )


def verify(
    url: str, names: list[str], started: datetime, args: argparse.Namespace
) -> tuple[list[list[Any]], dict[str, Any]]:
    """Each reviewer's last decision per paper against the store's keys."""
    from assistant.config import load_settings
    from assistant.store import Store

    store = Store.open(load_settings(chroma_url=url, user="auditor"))
    first, _ = store.people()
    stored = dict(store.iter_metadata({"touched": {"$gte": started.timestamp() - 5}}, stored=True))
    rows: list[list[Any]] = []
    extra: dict[str, Any] = {"reviewers": {}}
    for name in names:
        made = json.loads(Path(f"{name}.json").read_text(encoding="utf-8"))
        last = {d["id"]: d["status"] for d in made if d["id"]}
        lost = sum(
            1
            for pid, status in last.items()
            if everyone(stored.get(pid, {}), first or "").get(name, {}).get("status") != status
        )
        mine = {pid for pid, meta in stored.items() if name in everyone(meta, first or "")}
        misattributed = len(mine - set(last))
        wall = [d["wall"] * 1000 for d in made]
        ui = [d["ui"] * 1000 for d in made]
        harness = [d["harness"] * 1000 for d in made]
        rows.append(
            [
                name,
                len(made),
                lost,
                misattributed,
                f"{statistics.median(wall):.0f} / {percentile(wall, 0.95):.0f}",
                f"{statistics.median(ui):.0f} / {percentile(ui, 0.95):.0f}",
                f"{statistics.median(harness):.0f} / {percentile(harness, 0.95):.0f}",
            ]
        )
        extra["reviewers"][name] = {
            "decisions": len(made),
            "papers": len(last),
            "lost": lost,
            "misattributed": misattributed,
            "wall_ms_p50": statistics.median(wall),
            "wall_ms_p95": percentile(wall, 0.95),
            "ui_ms_p50": statistics.median(ui),
            "ui_ms_p95": percentile(ui, 0.95),
            "harness_ms_p50": statistics.median(harness),
            "harness_ms_p95": percentile(harness, 0.95),
        }
    return rows, extra


if __name__ == "__main__":
    main()
