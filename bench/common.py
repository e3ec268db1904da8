"""Helpers shared by the benchmarks: synthetic paper sets from the bundled sample, output."""

from __future__ import annotations

import json
import platform
import random
import sys
import time
from collections.abc import Callable
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


def timed(func: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = func()
    return time.perf_counter() - start, result


def report(name: str, title: str, columns: list[str], rows: list[list[Any]], extra: dict[str, Any]) -> None:
    """Print a table and write bench/results/<name>.json."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, justify="left" if col == columns[0] else "right")
    for row in rows:
        table.add_row(*[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row])
    console.print(table)
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
