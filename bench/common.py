"""Helpers shared by the benchmarks: synthetic paper sets from the bundled sample, output."""

from __future__ import annotations

import json
import platform
import random
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "assistant" / "data" / "sample_papers.jsonl"
RESULTS = ROOT / "bench" / "results"
# Wide enough for the tables when the output goes to a file or pipe.
console = Console(width=None if sys.stdout.isatty() else 160)


def sample_records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def varied_records(n: int) -> list[dict[str, Any]]:
    """n distinct papers: the sample's abstracts, each with its own arXiv id and a title mixed
    from two sample titles and words of the abstracts, so titles vary at both ends as real
    ones do (copies of one title would share every fuzzy-matching block)."""
    base = sample_records()
    vocabulary = sorted({w for r in base for w in str(r["abstract"]).split() if w.isalpha() and len(w) > 4})
    rng = random.Random(n)
    out = []
    for i in range(n):
        rec = dict(base[i % len(base)])
        if i >= len(base):
            a = str(base[rng.randrange(len(base))]["title"]).split()
            b = str(base[rng.randrange(len(base))]["title"]).split()
            words = [rng.choice(vocabulary), *a[: len(a) // 2], *b[len(b) // 2 :], rng.choice(vocabulary)]
            rec["title"] = " ".join(words)
        rec["arxiv_id"] = f"25{i // 100000:02d}.{i % 100000:05d}"
        out.append(rec)
    return out


def fill_sample(store: Any, n: int, seed: int = 0) -> list[str]:
    """Add n papers made from the sample (titles numbered, so all distinct) with random vectors,
    straight into the store's collection: for benches where nothing reads the vectors."""
    import numpy as np

    from assistant.models import Decision, Paper
    from assistant.store import decision_metadata, paper_metadata

    base = sample_records()
    papers = []
    for i in range(n):
        r = base[i % len(base)]
        papers.append(Paper.create(title=f"{r['title']} ({i})", abstract=r["abstract"], authors=r["authors"]))
    metas = [
        {k: v for k, v in {**paper_metadata(p), **decision_metadata(Decision())}.items() if v is not None}
        for p in papers
    ]
    vectors = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    store.collection.add(
        ids=[p.id for p in papers],
        documents=[p.document for p in papers],
        embeddings=vectors,
        metadatas=metas,
    )
    return [p.id for p in papers]


class Endpoint:
    """The fake endpoint (tests/fake_llm.py) in a process of its own, as a real one would be."""

    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def calls(self) -> int:
        with urllib.request.urlopen(self.url.removesuffix("/v1") + "/stats", timeout=5) as resp:
            return int(json.load(resp)["calls"])

    def env(self) -> dict[str, str]:
        """The environment that points `triage` at it."""
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": "sk-bench", "TRIAGE_MODEL": "gpt-4o-mini"}


@contextmanager
def endpoint(latency: float, error_rate: float) -> Iterator[Endpoint]:
    """Run the fake endpoint; its stderr is dropped (a client killed mid-request makes
    http.server print a traceback)."""
    cmd = [sys.executable, str(ROOT / "tests" / "fake_llm.py"), "--latency", str(latency)]
    proc = subprocess.Popen(
        [*cmd, "--error-rate", str(error_rate)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        yield Endpoint(proc.stdout.readline().strip())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def one_thread() -> None:
    """One BLAS thread in this process (a pool's initializer): workers run side by side, and
    BLAS threads spinning beside each other made a bench run many times slower on 2 cores."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = func()
    return time.perf_counter() - start, result


def print_table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """The bench's table: the first column left, the others right, floats to three places."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, justify="left" if col == columns[0] else "right")
    for row in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
    console.print(table)


def report(name: str, title: str, columns: list[str], rows: list[list[Any]], extra: dict[str, Any]) -> None:
    """Print a table and write bench/results/<name>.json."""
    print_table(title, columns, rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": name,
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "columns": columns,
        "rows": rows,
        **extra,
    }
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    console.print(f"[dim]wrote {out}[/dim]")
