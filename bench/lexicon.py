"""`triage tag` after an import, with the offline engine's statistics kept by text
(`assistant.triage.lexicon`) against every text read again (the kept file deleted first).

    python bench/lexicon.py --store DIR [--rounds 3] [--imported 20]

DIR holds store/ and agenda.md as `bench/everyday.py --build` leaves them (a 100,000-paper store:
~8 min with three rounds). The store is copied; each round imports `--imported` new papers
(untimed), then runs `triage tag` twice in turn, with the kept counts and without them (the two
orders alternate between rounds), each time on the papers the import brought, so both do the
same assessments. A first, uncounted round makes the mirror and the kept counts. Reported: the
command's wall and CPU time (its own process), median of the rounds, and the ratio of the two
in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import report, varied_records  # noqa: E402


def run(env: dict[str, str], *args: str) -> tuple[float, float, str]:
    """`triage ARGS` in a process of its own: (wall, CPU of that process, its output)."""
    start = time.perf_counter()
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "assistant", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"triage {' '.join(args)} failed:\n{out}")
    return wall, usage.ru_utime + usage.ru_stime, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", type=Path, required=True, help="a folder with store/ and agenda.md")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--imported", type=int, default=20)
    args = parser.parse_args()
    records = varied_records((args.rounds + 1) * 2 * args.imported)
    with tempfile.TemporaryDirectory(prefix="triage-lexicon-") as tmp:
        work = Path(tmp)
        shutil.copytree(args.store / "store", work / "store", ignore=shutil.ignore_patterns("triage-*"))
        env = {
            **os.environ,
            "HOME": str(work / "home"),
            "XDG_CACHE_HOME": str(work / "home" / ".cache"),
            "TRIAGE_STORE": str(work / "store"),
            "TRIAGE_AGENDA": str(args.store / "agenda.md"),
            "TRIAGE_NO_BACKGROUND": "1",
        }
        lexicon = work / "home" / ".cache" / "triage" / "lexicon"
        timed: dict[str, list[tuple[float, float]]] = {"kept": [], "every text read": []}
        for r in range(-1, args.rounds):  # the first round makes the mirror and the kept counts
            order = ["kept", "every text read"] if r % 2 == 0 else ["every text read", "kept"]
            for k, how in enumerate(order):
                path = work / f"import-{r}-{k}.jsonl"
                with path.open("w", encoding="utf-8") as f:
                    for i in range(args.imported):
                        rec = records[(2 * (r + 1) + k) * args.imported + i]
                        title = f"Lexicon bench {r}-{k}-{i}: {rec['title']}"
                        f.write(json.dumps({"title": title, "abstract": rec["abstract"]}) + "\n")
                run(env, "ingest", str(path))
                if how == "every text read":
                    shutil.rmtree(lexicon, ignore_errors=True)
                wall, cpu, out = run(env, "tag")
                if f"Assessed {args.imported} papers" not in out:
                    raise SystemExit(f"expected {args.imported} papers assessed:\n{out}")
                if r >= 0:
                    timed[how].append((wall, cpu))
                print(f"round {r + 1} {how}: {wall:.1f} s wall, {cpu:.1f} s CPU", file=sys.stderr)
    rows = []
    medians = {}
    for how, values in timed.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        medians[how] = (wall, cpu)
        rows.append([f"triage tag after an import of {args.imported}, {how}", f"{wall:.1f}", f"{cpu:.1f}"])
    ratio = medians["kept"][1] / medians["every text read"][1]
    rows.append(["kept / every text read (CPU)", "", f"{ratio:.2f}"])
    report(
        "lexicon",
        "The offline engine's statistics kept by text",
        ["run", "wall s (median)", "CPU s (median)"],
        rows,
        {"rounds": args.rounds, "imported": args.imported, "timed": timed, "cpu_ratio": round(ratio, 3)},
    )


if __name__ == "__main__":
    main()
