"""Start-up: how long `triage` takes before it does anything, and the reading commands on a
1k-paper store, against the libraries every command needs, in the same run.

    python bench/startup.py [--reps 9] [--n 1000] [--decisions 40]

Each round runs every command once as a fresh process (the console script, as a user runs it),
in the same order; a first round warms the disk cache, the bytecode cache and the personal
model's feature cache, and is not counted. The processes cache bytecode (in a temporary
PYTHONPYCACHEPREFIX) as an installed package does, whatever the caller's
PYTHONDONTWRITEBYTECODE: compiling the project's modules on every start is not start-up.
Rows give the median over the rounds and its ratio to the baseline,
`python -c "import typer, rich.console, pydantic"` (the libraries every command imports).

Targets (issue 15): `--help` and `--version` within 2x the baseline; `stats` and `ranked` on a
1k-paper store under 1 s. Asked again of an unchanged store, `stats` and `ranked` answer from
what the last read saved (`assistant.readcache`); the rows marked "store changed" delete those
saved answers before each run, so they time the first read after a decision or an import.
Reference rows show the floors no command of ours can go below: a
two-command typer app's `--help` (typer renders help with rich and markdown), and importing
Chroma (every command that reads the store) and Chroma with scikit-learn (`ranked` trains the
personal model on the store's text features).

The stores are made once in a temporary directory by a child process: n papers from the
bundled sample with random vectors, assessed by the offline engine against the example agenda;
the second store also has --decisions decided papers (half accepted, half rejected), so
`ranked` trains the personal model as it does for a researcher who has been reviewing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, fill_sample, report

BASELINE = "import typer, rich.console, pydantic"
TYPER_APP = '''import typer
app = typer.Typer(no_args_is_help=True)
@app.command()
def one(n: int = 1) -> None:
    """One."""
@app.command()
def two(n: int = 1) -> None:
    """Two."""
app()
'''


def build(directory: Path, n: int, decisions: int) -> None:
    """A store of n assessed papers at directory/store, agenda.md beside it (run in a child process)."""
    from assistant.agenda import example_agenda_text, load_agenda
    from assistant.config import load_settings
    from assistant.models import Status
    from assistant.store import Store
    from assistant.triage.batch import tag_offline

    directory.mkdir(parents=True)
    (directory / "agenda.md").write_text(example_agenda_text(), encoding="utf-8")
    store = Store.open(load_settings(store=directory / "store"))
    ids = fill_sample(store, n)
    tag_offline(store, load_agenda(directory / "agenda.md"))
    half = decisions // 2
    if half:
        store.set_status(ids[:half], Status.ACCEPTED)
        store.set_status(ids[half : 2 * half], Status.REJECTED)


def triage() -> list[str]:
    exe = Path(sys.executable).parent / "triage"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "assistant"]


def environment(home: Path) -> dict[str, str]:
    """The caller's environment without triage/OpenAI settings, user dirs in `home`, bytecode
    cached under it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRIAGE_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(home / "pycache")
    for name, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        env[name] = str(home / sub)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def seconds(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=9, help="counted rounds (median)")
    parser.add_argument("--n", type=int, default=1000, help="papers in the store")
    parser.add_argument("--decisions", type=int, default=40, help="decided papers in the second store")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(args.build, args.n, args.decisions)
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = environment(root / "home")
        stores = {"plain": root / "plain", "decided": root / "decided"}
        for name, where in stores.items():
            decided = args.decisions if name == "decided" else 0
            made = [sys.executable, __file__, "--build", str(where), "--n", str(args.n)]
            subprocess.run([*made, "--decisions", str(decided)], env=env, check=True, cwd=ROOT)
        (root / "typer_app.py").write_text(TYPER_APP, encoding="utf-8")
        py, cli = sys.executable, triage()
        changed_cache = root / "home" / ".cache-changed"

        def on(store: str, *rest: str) -> list[str]:
            where = stores[store]
            return [*cli, "--store", str(where / "store"), "--agenda", str(where / "agenda.md"), *rest]

        rows: list[tuple[str, list[str], str]] = [
            ("baseline: python -c 'import typer, rich.console, pydantic'", [py, "-c", BASELINE], ""),
            ("triage --help", [*cli, "--help"], "2x"),
            ("triage --version", [*cli, "--version"], "2x"),
            ("triage list --help", [*cli, "list", "--help"], ""),
            (f"triage stats ({args.n:,} papers)", on("plain", "stats"), "< 1 s"),
            (f"triage ranked --top 10 ({args.n:,} papers)", on("plain", "ranked", "--top", "10"), "< 1 s"),
            (
                f"triage ranked --top 10 ({args.n:,} papers, {args.decisions} decided)",
                on("decided", "ranked", "--top", "10"),
                "< 1 s",
            ),
            (
                f"triage stats ({args.n:,} papers), store changed",
                on("plain", "stats"),
                "",
            ),
            (
                f"triage ranked --top 10 ({args.n:,} papers, {args.decisions} decided), store changed",
                on("decided", "ranked", "--top", "10"),
                "",
            ),
            ("reference: a two-command typer app's --help", [py, str(root / "typer_app.py"), "--help"], ""),
            ("reference: python -c 'import chromadb'", [py, "-c", "import chromadb"], ""),
            (
                "reference: python -c 'import chromadb, sklearn...'",
                [py, "-c", "import chromadb, sklearn.feature_extraction.text, sklearn.linear_model"],
                "",
            ),
        ]
        times: dict[str, list[float]] = {name: [] for name, _, _ in rows}
        for round_ in range(args.reps + 1):
            for name, cmd, _ in rows:
                if name.endswith("store changed"):  # a cache of their own, without answers
                    shutil.rmtree(changed_cache / "triage" / "answers", ignore_errors=True)
                    elapsed = seconds(cmd, {**env, "XDG_CACHE_HOME": str(changed_cache)})
                else:
                    elapsed = seconds(cmd, env)
                if round_:  # the first round warms caches
                    times[name].append(elapsed)
            console_note = f"round {round_}/{args.reps}" if round_ else "warm-up round"
            print(console_note, file=sys.stderr)

    base = statistics.median(times[rows[0][0]])
    table = []
    for name, _, target in rows:
        median = statistics.median(times[name])
        table.append([name, median, min(times[name]), median / base, target])
    load = os.getloadavg()[0]
    report(
        "startup",
        f"Start-up, median of {args.reps} rounds (load average {load:.1f} at the end)",
        ["command", "median s", "min s", "x baseline", "target"],
        table,
        {
            "reps": args.reps,
            "papers": args.n,
            "decisions": args.decisions,
            "load_average": load,
            "times": times,
        },
    )


if __name__ == "__main__":
    main()
