"""The review UI at 1k, 10k and 100k papers: time to first paint and time per keypress.

    python bench/tui.py [--sizes 1000 10000 100000] [--presses 30]

Stores are filled with precomputed vectors and offline-style assessments (random topic
scores), then the app runs headless (Textual's Pilot) at 170x45, each opening in a fresh
process. First paint is timed from the process's start (its imports count, as they do for
`triage review`) until the first frame with the queue's rows is rendered; "settled" adds
Pilot's wait until the process is idle (the rest of the start: the whole index read, the
first refresh). The personal model is ready when every background job is done. Three
openings in turn: "first" (no cache at all: the queue index and the model's features are
built from the store), "warm" (the caches the first left, the store unchanged) and "cold" (a
fresh process after another client wrote a decision: the caches are one write behind).

Keypresses are timed on the warm opening, each from sending the key until Pilot has seen the
screen settle (Pilot.press plus a pause), with what the key starts afterwards (a view's
count, a refresh, the retrain 0.4 s after a decision) left to finish untimed before the next:
moving (j, k), deciding (a, x, s: each writes to the store and moves to the next undecided),
refresh (r), a view change (v), a sort change (S), the search line (/), a word search (its
enter) and clearing it (escape). An unbound key (z) gives the cost of the harness itself,
which every figure includes. Each is reported as wall time, as the process's CPU time over
the same span (all threads: a retrain's share included) and as the UI thread's CPU time
(the figure issue 30 sets: a key's own work). The last row is `j` pressed while the model
retrains after a decision.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.agenda import example_agenda_text, parse_agenda
from assistant.config import load_settings
from assistant.models import Status
from assistant.store import Store
from assistant.tui.app import ReviewApp

if TYPE_CHECKING:
    import numpy as np

# Only what `triage review` itself loads is imported at the top: an opening's first paint and
# its CPU time count the imports of a fresh process. Filling a store needs more (below).

BATCH = 5000
# When the papers of a filled store were added (and last written, but for their decisions).
ADDED_AT = datetime(2026, 11, 1, tzinfo=UTC)


def fill(store: Store, n: int, base: np.ndarray, rng: np.random.Generator) -> None:
    import numpy as np
    from common import sample_records

    from assistant.models import Assessment, Decision, Paper, TopicScore
    from assistant.store import assessment_metadata, decision_metadata, paper_metadata

    records = sample_records()
    agenda = parse_agenda(example_agenda_text())
    topics = [t.name for t in agenda.topics]
    statuses = [Status.NEW] * 6 + [Status.ACCEPTED, Status.REJECTED, Status.MAYBE]
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        pick = rng.integers(0, len(base), size)
        vecs = base[pick] + rng.normal(0, 0.35 / np.sqrt(base.shape[1]), (size, base.shape[1]))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        ids, docs, metas = [], [], []
        for i, p in enumerate(pick):
            r = records[p]
            k = start + i
            paper = Paper.create(
                title=f"{r['title']} ({k})",
                abstract=str(r["abstract"]),
                authors=list(r.get("authors") or []),
                arxiv_id=f"26{k // 100000:02d}.{k % 100000:05d}",
                date=f"{2015 + k % 11}-{1 + k % 12:02d}-{1 + k % 28:02d}",
                sources=["bench"],
            )
            scores = {t: int(rng.integers(0, 11)) for t in topics}
            assessment = Assessment(
                tags=[str(w).lower() for w in str(r["title"]).split()[:3]],
                summary="One sentence about the paper.",
                topics=[TopicScore(topic=t, score=s, reason="matches the agenda") for t, s in scores.items()],
                relevance=float(max(scores.values())) + float(rng.random()),
                engine="offline",
                agenda_hash=agenda.hash,
            )
            status = statuses[int(rng.integers(0, len(statuses)))]
            meta = {
                **paper_metadata(paper),
                **decision_metadata(Decision(status=status)),
                **assessment_metadata(assessment),
                "added_at": ADDED_AT.isoformat(),
                "touched": ADDED_AT.timestamp(),  # last written when it was added, as in a lab's store
            }
            ids.append(paper.id)
            docs.append(paper.document)
            metas.append({key: v for key, v in meta.items() if v is not None})
        store.collection.add(ids=ids, documents=docs, embeddings=vecs.astype(np.float32), metadatas=metas)  # type: ignore[arg-type]


# The keys timed on the warm opening: (label, keys pressed untimed first, the key timed,
# keys pressed untimed after, how many times). Word search: the search line is opened and filled
# untimed, the enter that filters the queue is timed; escape (timed) clears it again.
KEYS: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...], int], ...] = (
    ("unbound key (harness)", (), "z", (), 0),
    ("next paper (j)", (), "j", (), 0),
    ("previous paper (k)", (), "k", (), 0),
    ("accept (a)", (), "a", (), 0),
    ("reject (x)", (), "x", (), 0),
    ("star (s)", (), "s", (), 0),
    ("refresh (r)", (), "r", (), 0),
    ("filter (v)", (), "v", (), 14),
    ("sort (S)", (), "S", (), 12),
    ("search line (/)", (), "slash", ("escape",), 0),
    ("word search (enter)", ("slash", "tab", "space", "shift+tab", *"model"), "enter", (), 0),
    ("clear search (escape)", ("slash", "tab", "space", "shift+tab", *"model", "enter"), "escape", (), 0),
)
TIMED = [label for label, *_ in KEYS] + ["next paper (j) while the model retrains"]


def since_start() -> float:
    """Seconds since this process started (its imports and the app's making count in the first
    paint, as they do for `triage review`); 0 where /proc cannot say."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))


async def settled(app: ReviewApp) -> None:
    """Until every background job is done, a retrain that replaced another (a refresh that
    found a decision cancels the running one) and one still scheduled included."""
    from textual.worker import WorkerCancelled

    while True:
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            continue
        if not (app.ranking_outstanding or app.writes_pending) and all(w.is_finished for w in app.workers):
            return
        await asyncio.sleep(0.05)


async def session(app: ReviewApp, presses: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"first paint": [], "first paint cpu": []}
    out.update({label: [] for label in TIMED})
    out.update({f"{label} cpu": [] for label in TIMED})
    out.update({f"{label} ui cpu": [] for label in TIMED})
    out["model ready"], out["model ready cpu"] = [], []
    start = time.perf_counter() - since_start()
    painted: list[float] = []
    display = app._display

    def frame(screen: Any, update: Any) -> None:
        """The first frame with the queue's rows in it: what the terminal would be sent."""
        display(screen, update)
        if update is not None and app.shown and not painted:
            painted.extend((time.perf_counter() - start, time.process_time()))

    app._display = frame  # type: ignore[method-assign,assignment]
    async with app.run_test(size=(170, 45)) as pilot:
        while not painted:
            await asyncio.sleep(0.005)
        out["first paint"].append(painted[0])
        out["first paint cpu"].append(painted[1])  # this process's, from its start
        await pilot.pause()
        out["first paint, settled"] = [time.perf_counter() - start]
        await settled(app)
        out["model ready"].append(time.perf_counter() - start)
        out["model ready cpu"].append(time.process_time())
        if presses > 1:
            await _keys(app, pilot, presses, out)
    return out


async def _keys(app: ReviewApp, pilot: Any, presses: int, out: dict[str, list[float]]) -> None:
    for label, before, key, after, count in KEYS:
        for _ in range(count or presses):
            if before:
                await pilot.press(*before)
                await pilot.pause()
            t, cpu, ui = time.perf_counter(), time.process_time(), time.thread_time()
            await pilot.press(key)
            await pilot.pause()
            out[label].append(time.perf_counter() - t)
            out[label + " cpu"].append(time.process_time() - cpu)
            out[label + " ui cpu"].append(time.thread_time() - ui)
            if after:
                await pilot.press(*after)
            # Let what a key starts after it is drawn (counting the view, a refresh) finish,
            # untimed; a decision's retrain starts 0.4 s after the last one.
            await pilot.pause(0.05 if label in ("next paper (j)", "previous paper (k)") else 0.4)
            await settled(app)
    # Decide, let the retrain start (0.4 s after the last decision), then move meanwhile.
    label = "next paper (j) while the model retrains"
    for _ in range(min(presses, 10)):
        await pilot.press("a")
        await pilot.pause(0.45)
        t, cpu, ui = time.perf_counter(), time.process_time(), time.thread_time()
        await pilot.press("j")
        await pilot.pause()
        out[label].append(time.perf_counter() - t)
        out[label + " cpu"].append(time.process_time() - cpu)
        out[label + " ui cpu"].append(time.thread_time() - ui)
        await settled(app)


OPENINGS = (
    # (name, what happens before the app opens, how many presses of each key)
    ("first", "no cache at all: the queue index and the model's features are built"),
    ("warm", "the caches a previous opening left, the store unchanged"),
    ("cold", "a fresh process after another one wrote a decision (the issue's cold)"),
)


def opening(store_dir: Path, cache: Path, presses: int) -> dict[str, list[float]]:
    """One opening of the review UI in this (fresh) process."""
    settings = load_settings(store=store_dir)
    agenda = parse_agenda(example_agenda_text())
    app = ReviewApp(Store.open(settings), settings, agenda, cache_dir=cache, refresh_every=3600)
    out = asyncio.run(session(app, presses))
    child = resource.getrusage(resource.RUSAGE_CHILDREN)  # the training process, once closed
    out["training process cpu"] = [child.ru_utime + child.ru_stime]
    return out


def decide_elsewhere(store_dir: Path, k: int) -> None:
    """Another client writes one decision (the next opening is "cold")."""
    store = Store.open(load_settings(store=store_dir))
    papers = enumerate(store.iter_metadata())
    pid = next(pid for i, (pid, meta) in papers if i >= k and meta.get("status") == "new")
    store.set_status([pid], Status.ACCEPTED)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--open", nargs=2, metavar=("STORE", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.open:  # one opening, in the fresh process the bench started for it
        got = opening(Path(args.open[0]), Path(args.open[1]), args.presses)
        print("RESULT " + json.dumps(got))
        return
    import numpy as np
    from common import console, report, sample_records, timed

    from assistant.embedding import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    records = sample_records()
    base = np.asarray(embedder([f"{r['title']}\n\n{r['abstract']}" for r in records]))
    rows: list[list[object]] = []
    medians: dict[tuple[int, str], float] = {}
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            settings = load_settings(store=Path(tmp) / "store")
            store = Store.open(settings, embedder=embedder)
            seconds, _ = timed(lambda store=store, n=n: fill(store, n, base, np.random.default_rng(n)))
            console.print(f"{n} papers loaded in {seconds:.0f}s")
            del store
            cache = Path(tmp) / "cache"
            results: dict[str, list[float]] = {}
            for run, _ in OPENINGS:
                if run == "cold":
                    decide_elsewhere(settings.store, n // 3)
                presses = args.presses if run == "warm" else 1
                got = run_opening(settings.store, cache, presses)
                results[f"first paint, {run} (s)"] = got["first paint"]
                results[f"personal model ready, {run} (s)"] = got["model ready"]
                results[f"first paint, {run}, cpu (s)"] = got["first paint cpu"]
                results[f"first paint, {run}, settled (s)"] = got["first paint, settled"]
                results[f"training process, {run}, cpu (s)"] = got["training process cpu"]
                results[f"personal model ready, {run}, cpu of the UI's process (s)"] = got["model ready cpu"]
                if run == "warm":
                    for label in TIMED:
                        results[f"{label}, wall (ms)"] = [1000 * x for x in got[label]]
                        results[f"{label}, cpu (ms)"] = [1000 * x for x in got[label + " cpu"]]
                        results[f"{label}, UI thread cpu (ms)"] = [1000 * x for x in got[label + " ui cpu"]]
            for label, values in results.items():
                med = statistics.median(values)
                medians[(n, label)] = med
                p95 = float(np.percentile(values, 95))
                rows.append([f"{label} @ {n}", n, med, p95, max(values)])
    small, large = args.sizes[0], args.sizes[-1]
    extra: dict[str, object] = {"openings": dict(OPENINGS)}
    for label in sorted({lab for _, lab in medians}):
        ratio = medians[(large, label)] / medians[(small, label)]
        extra[f"ratio {large}/{small} {label}"] = ratio
        rows.append([f"ratio {large // 1000}k/{small // 1000}k, {label}", "", ratio, "", ""])
    report(
        "tui",
        "Review UI: first paint and keypress latency",
        ["measure", "papers", "median", "p95", "max"],
        rows,
        extra,
    )


def run_opening(store_dir: Path, cache: Path, presses: int) -> dict[str, list[float]]:
    # One BLAS thread, as the console script sets it for `triage review` (assistant.__main__),
    # unless the environment says otherwise.
    env = {"OPENBLAS_NUM_THREADS": "1", **os.environ}
    done = subprocess.run(
        [sys.executable, __file__, "--open", str(store_dir), str(cache), "--presses", str(presses)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


if __name__ == "__main__":
    main()
