"""The review UI at 1k, 10k and 100k papers: time to first paint and time per keypress.

    python bench/tui.py [--sizes 1000 10000 100000] [--presses 30]

Stores are filled with precomputed vectors and offline-style assessments (random topic
scores), then the app runs headless (Textual's Pilot) at 170x45, each opening in a fresh
process. First paint is timed from starting the app until the queue shows rows, the personal
model ready when every background job is done, at three openings in turn: "first" (no cache
at all: the queue index and the model's features are built from the store), "warm" (the
caches the first left, the store unchanged) and "cold" (a fresh process after another client
wrote a decision: the caches are one write behind). Keypresses are timed on the warm opening.
A keypress is timed from sending the key
until the screen has processed it (Pilot.press plus a pause): next paper (j), accept (a,
which writes to the store and moves to the next undecided), and a filter change (v, the
next status view). An unbound key (z) gives the cost of the test harness itself (Pilot
waits for idle and for a screen refresh), which a keypress's figure includes. The figure
that matters is the ratio 100k/1k. Each keypress is reported as wall time and as the
process's CPU time over the same span (all threads): the CPU time is the work the app did,
without the harness's idle waits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import console, report, sample_records, timed

from assistant.agenda import example_agenda_text, parse_agenda
from assistant.config import load_settings
from assistant.embedding import MiniLMEmbedder
from assistant.models import Assessment, Decision, Paper, Status, TopicScore
from assistant.store import Store, assessment_metadata, decision_metadata, paper_metadata
from assistant.tui.app import ReviewApp

BATCH = 5000


def fill(store: Store, n: int, base: np.ndarray, rng: np.random.Generator) -> None:
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
                "added_at": "2026-11-01T00:00:00+00:00",
            }
            ids.append(paper.id)
            docs.append(paper.document)
            metas.append({key: v for key, v in meta.items() if v is not None})
        store.collection.add(ids=ids, documents=docs, embeddings=vecs.astype(np.float32), metadatas=metas)  # type: ignore[arg-type]


async def session(app: ReviewApp, presses: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {
        "first paint": [],
        "unbound key (harness)": [],
        "next paper (j)": [],
        "accept (a)": [],
        "filter (v)": [],
        "next paper (j) while the model retrains": [],
        "model ready": [],
    }
    out.update({f"{label} cpu": [] for label in list(out) if label != "first paint"})
    start = time.perf_counter()
    async with app.run_test(size=(170, 45)) as pilot:
        while not app.shown:
            await pilot.pause(0.01)
        await pilot.pause()
        out["first paint"].append(time.perf_counter() - start)
        await app.workers.wait_for_complete()
        out["model ready"].append(time.perf_counter() - start)
        for key, label, count in (
            ("z", "unbound key (harness)", presses),
            ("j", "next paper (j)", presses),
            ("a", "accept (a)", presses),
            ("v", "filter (v)", 14),
        ):
            for _ in range(count):
                t, cpu = time.perf_counter(), time.process_time()
                await pilot.press(key)
                await pilot.pause()
                out[label].append(time.perf_counter() - t)
                out[label + " cpu"].append(time.process_time() - cpu)
                if key == "v":  # let the background count of the new view finish, untimed
                    await pilot.pause(0.4)
                    await app.workers.wait_for_complete()
        # Decide, let the retrain start (0.4 s after the last decision), then move meanwhile.
        label = "next paper (j) while the model retrains"
        for _ in range(min(presses, 10)):
            await pilot.press("a")
            await pilot.pause(0.45)
            t, cpu = time.perf_counter(), time.process_time()
            await pilot.press("j")
            await pilot.pause()
            out[label].append(time.perf_counter() - t)
            out[label + " cpu"].append(time.process_time() - cpu)
            await app.workers.wait_for_complete()
    return out


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
    return asyncio.run(session(app, presses))


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
                if run == "warm":
                    for label in (
                        "unbound key (harness)",
                        "next paper (j)",
                        "accept (a)",
                        "filter (v)",
                        "next paper (j) while the model retrains",
                    ):
                        results[f"{label}, wall (ms)"] = [1000 * x for x in got[label]]
                        results[f"{label}, cpu (ms)"] = [1000 * x for x in got[label + " cpu"]]
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
    done = subprocess.run(
        [sys.executable, __file__, "--open", str(store_dir), str(cache), "--presses", str(presses)],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


if __name__ == "__main__":
    main()
