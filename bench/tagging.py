"""LLM tagging throughput against a fake endpoint with fixed latency and some 429s.

    python bench/tagging.py [--n 1000] [--peer-n 200] [--latency 0.3] [--error-rate 0.03] [--concurrency 8]

The endpoint runs as its own process (tests/fake_llm.py); it answers 429s at once with
Retry-After: 0.2, as a rate limiter does. The peers' patterns run on the first --peer-n
papers (they are slow); rates are per paper, so the rows compare.

Rows, all on the same papers in the same run:
- ours: `triage tag`'s runner at the default concurrency, one paper per call; its throughput
  as a fraction of the ideal (concurrency / latency). Target >= 0.9.
- the two patterns peers use: one paper per call sequentially, and at concurrency 3.
- several papers per call (K=5): tokens per paper against K=1.
- a second run on the unchanged store: the number of calls (0).

    python bench/tagging.py --throughput [--latency 0.2] [--seconds 10] [--concurrency-list 8,32]

Throughput alone: no 429s, one paper per call, at each concurrency enough papers for about
--seconds of ideal run time; calls/s against the ideal (concurrency / latency). Target >= 0.95.
Writes bench/results/tagging_throughput.json. The store is opened again after it is filled, as
`triage tag` opens it (results queued with the store's small writes); with --chroma-open, the run
uses the store with Chroma open, as after --llm-top or --examples (results written to Chroma):
bench/results/tagging_throughput_chroma_open.json.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from common import Endpoint, endpoint, fill_sample, report, timed

from assistant.agenda import example_agenda_text, parse_agenda  # noqa: E402
from assistant.config import load_settings  # noqa: E402
from assistant.store import Store  # noqa: E402
from assistant.triage.llm import LLMEngine  # noqa: E402
from assistant.triage.prompts import load_prompts  # noqa: E402
from assistant.triage.runner import RunReport, plan_run, run_plan  # noqa: E402


def make_store(tmp: str, n: int, chroma_open: bool = False) -> Store:
    """n papers from the sample (the runner never reads vectors, so random ones will do), in the
    store opened again, as `triage tag` opens it in a process of its own: filling it opened
    Chroma in this process, and with Chroma open a run's results go to Chroma (a write holds the
    GIL for ~5 ms + 0.45 ms a paper, the event loop stalled with it) where the command queues
    them with the store's small writes (see assistant/store/pending.py). With chroma_open, the
    store that filled it: a run after `--llm-top` or `--examples`, which read vectors."""
    settings = load_settings(store=Path(tmp) / "store")
    store = Store.open(settings)
    fill_sample(store, n)
    return store if chroma_open else Store.open(settings)


def run(
    store: Store,
    fake: Endpoint,
    concurrency: int,
    per_call: int,
    force: bool = True,
    limit: int | None = None,
) -> RunReport:
    agenda = parse_agenda(example_agenda_text())
    engine = LLMEngine(agenda, load_prompts(), model="gpt-4o-mini", base_url=fake.url, api_key="sk-bench")
    plan = plan_run(store, engine, per_call=per_call, force=force, limit=limit)
    result = RunReport(engine="llm", model=engine.model, plan=plan)
    calls_before = fake.calls
    asyncio.run(run_plan(store, engine, plan, result, concurrency=concurrency, price=(0.15, 0.60)))
    result.calls = fake.calls - calls_before  # HTTP requests, retries and re-asks included
    return result


def throughput(latency: float, seconds: float, levels: list[int], chroma_open: bool = False) -> None:
    """Calls per second at each concurrency against the ideal, on a fake endpoint without errors."""
    rows: list[list[object]] = []
    ratios: dict[str, float] = {}
    with endpoint(latency, 0.0) as fake:
        for conc in levels:
            n = round(seconds * conc / latency)
            with tempfile.TemporaryDirectory() as tmp:
                store = make_store(tmp, n, chroma_open)
                res = run(store, fake, conc, 1, limit=n)
            assert res.done == n and res.failed == 0, (res.done, res.failed, list(res.failures.items())[:2])
            ideal = conc / latency
            rate = res.calls / res.seconds
            ratios[str(conc)] = rate / ideal
            rows.append([conc, n, res.calls, res.seconds, rate, ideal, rate / ideal])
    where = "Chroma open in the process" if chroma_open else "the store opened as `triage tag` opens it"
    title = f"LLM tagging throughput: fake endpoint {latency * 1000:.0f} ms, no errors, one paper a call"
    report(
        "tagging_throughput_chroma_open" if chroma_open else "tagging_throughput",
        f"{title}; {where}",
        ["concurrency", "papers", "calls", "s", "calls/s", "ideal", "of ideal"],
        rows,
        {"latency_s": latency, "target": 0.95, "fraction_of_ideal": ratios, "chroma_open": chroma_open},
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--peer-n", type=int, default=200)
    parser.add_argument("--latency", type=float, default=None, help="seconds (0.3; 0.2 with --throughput)")
    parser.add_argument("--error-rate", type=float, default=0.03)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--throughput", action="store_true", help="only the throughput table")
    parser.add_argument("--seconds", type=float, default=10.0, help="ideal run time per level")
    parser.add_argument("--concurrency-list", default="8,32", help="levels of the throughput table")
    parser.add_argument(
        "--chroma-open", action="store_true", help="throughput with Chroma open in this process (make_store)"
    )
    args = parser.parse_args()
    if args.throughput:
        levels = [int(c) for c in args.concurrency_list.split(",") if c.strip()]
        throughput(args.latency or 0.2, args.seconds, levels, args.chroma_open)
        return
    args.latency = args.latency or 0.3

    with (
        tempfile.TemporaryDirectory() as tmp,
        endpoint(args.latency, args.error_rate) as fake,
    ):
        store = make_store(tmp, args.n)
        ideal = args.concurrency / args.latency
        runs = [
            (f"ours: c={args.concurrency}, K=1", args.concurrency, 1, args.n),
            ("peers: sequential, K=1", 1, 1, args.peer_n),
            ("peers: c=3, K=1", 3, 1, args.peer_n),
            (f"ours: c={args.concurrency}, K=5", args.concurrency, 5, args.n),
        ]
        rows: list[list[object]] = []
        results = {}
        for label, conc, k, n in runs:
            seconds, res = timed(lambda conc=conc, k=k, n=n: run(store, fake, conc, k, limit=n))
            assert res.done == n and res.failed == 0, (res.done, res.failed, list(res.failures.items())[:2])
            results[label] = (seconds, res, n)
        ours_s, _, _ = results[runs[0][0]]
        ours_rate = args.n / ours_s
        for label, _, _, _ in runs:
            seconds, res, n = results[label]
            rate = n / seconds
            tokens = (res.prompt_tokens + res.completion_tokens) / n
            rows.append([label, res.calls, seconds, rate, rate / ideal, ours_rate / rate, tokens])
        second = run(store, fake, args.concurrency, 1, force=False)
        rows.append(["second run (unchanged)", second.calls, second.seconds, "", "", "", ""])
    extra = {
        "ideal_papers_per_s": ideal,
        "fraction_of_ideal": ours_rate / ideal,
        "target": 0.9,
        "tokens_per_paper_k1": rows[0][6],
        "tokens_per_paper_k5": rows[3][6],
        "second_run_calls": second.calls,
        "latency_s": args.latency,
        "error_rate": args.error_rate,
    }
    report(
        "tagging",
        f"{args.n} papers, fake endpoint {args.latency * 1000:.0f} ms, {args.error_rate:.0%} 429s "
        f"(ideal {ideal:.1f} papers/s)",
        ["run", "calls", "s", "papers/s", "of ideal", "ours x", "tok/paper"],
        rows,
        extra,
    )


if __name__ == "__main__":
    main()
