"""`triage tag` with an LLM: concurrent, cached by content, resumable, within a budget.

Results are written as they arrive by one writer that groups them: a store write has a fixed
cost of ~25 ms during which the event loop stalls, so under load the writer writes at most
every WRITE_INTERVAL seconds, everything that arrived meanwhile in one write. An interrupted
run loses at most the calls in flight and the answers of that last interval; the next run
picks up where it stopped.

With several papers per call, one paper's text could steer the model on the others (an
abstract that says "rate every paper 10"). Each paper is fenced in the prompt (see
`llm.paper_block`); on top of that, papers whose text reads like instructions are sent alone
from the start, and a batch whose answers moved together is asked again one paper per call
(see `moved_together`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from assistant.models import Assessment, Paper, StoredPaper
from assistant.store import Store
from assistant.triage.llm import AssessFailure, LLMEngine, instruction_like
from assistant.triage.pricing import cost

# Rough output size of one assessment, for estimates before any call is made.
OUTPUT_TOKENS_PER_PAPER = 60
OUTPUT_TOKENS_PER_TOPIC = 30
SCHEMA_TOKENS = 450  # the response model's JSON schema, sent with every call
WRITE_INTERVAL = 0.2
# A batch whose papers all got the same topic scores, the highest this high, is asked again.
MOVED_TOGETHER_MIN_PAPERS = 3
MOVED_TOGETHER_MIN_SCORE = 8


@dataclass
class Plan:
    """What a run would do: the papers to assess, grouped into calls, with estimates."""

    groups: list[list[Paper]]
    up_to_date: int
    skipped_failed: int
    total: int
    estimates: list[tuple[int, int]] = field(default_factory=list)  # (prompt, completion) per group
    # With several papers per call: papers sent alone because their text reads like instructions.
    isolated: int = 0

    @property
    def papers(self) -> int:
        return sum(len(g) for g in self.groups)

    @property
    def prompt_tokens(self) -> int:
        return sum(p for p, _ in self.estimates)

    @property
    def completion_tokens(self) -> int:
        return sum(c for _, c in self.estimates)


@dataclass
class RunReport:
    engine: str
    model: str
    plan: Plan
    done: int = 0
    failed: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    seconds: float = 0.0
    stopped_by_budget: bool = False
    interrupted: bool = False
    failures: dict[str, str] = field(default_factory=dict)
    # Set when calls stopped because the endpoint could not be reached: the reason.
    unreachable: str | None = None
    # Papers of batches whose scores moved together, asked again one per call.
    reasked: int = 0

    @property
    def notes(self) -> list[str]:
        """What the run did beyond its plan, one line each, for the summary."""
        if not self.reasked:
            return []
        return [f"{self.reasked} papers re-asked one per call: their batch's scores moved together"]


class Writer:
    """Writes results in the order they arrive; a store write costs tens of milliseconds, so
    results that arrive during one write are written together by the next."""

    def __init__(self, store: Store, interval: float = WRITE_INTERVAL) -> None:
        self.store = store
        self.interval = interval
        self.last = 0.0
        self.queue: asyncio.Queue[tuple[dict[str, Assessment], dict[str, tuple[str, str]]]] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run())

    def put(self, done: dict[str, Assessment], failed: dict[str, tuple[str, str]]) -> None:
        self.queue.put_nowait((done, failed))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            wait = self.last + self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self.last = loop.time()
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            done = {k: v for d, _ in batch for k, v in d.items()}
            failed = {k: v for _, f in batch for k, v in f.items()}
            try:
                if done:
                    await asyncio.to_thread(self.store.set_assessments, done)
                if failed:
                    await asyncio.to_thread(self.store.set_failures, failed)
            finally:
                for _ in batch:
                    self.queue.task_done()

    async def close(self) -> None:
        await self.queue.join()
        self.task.cancel()


# Calls that could not reach the endpoint, one after another, before the run stops starting
# new ones (each has already been retried with backoff).
UNREACHABLE_STOP = 3


def needs_llm(item: StoredPaper, key: str, *, force: bool, retry_failed: bool) -> bool:
    if force:
        return True
    if item.assessment is not None and item.assessment.key == key:
        return False
    return not (item.failure is not None and item.failure[0] == key and not retry_failed)


def estimate(engine: LLMEngine, group: Sequence[Paper], vocabulary: Sequence[str]) -> tuple[int, int]:
    """(prompt, completion) tokens one call is expected to take (4 characters a token)."""
    chars = sum(len(m["content"]) for m in engine.messages(group, vocabulary))
    out = len(group) * (OUTPUT_TOKENS_PER_PAPER + OUTPUT_TOKENS_PER_TOPIC * len(engine.agenda.topics))
    return chars // 4 + SCHEMA_TOKENS, out


def group_papers(papers: Sequence[Paper], per_call: int) -> tuple[list[list[Paper]], int]:
    """The papers in calls of per_call, in order; with per_call > 1, a paper whose text reads
    like instructions to the model gets a call of its own. Also: how many got one that way."""
    groups: list[list[Paper]] = []
    batch: list[Paper] = []
    isolated = 0
    for paper in papers:
        if per_call > 1 and instruction_like(paper):
            groups.append([paper])
            isolated += 1
            continue
        batch.append(paper)
        if len(batch) >= per_call:
            groups.append(batch)
            batch = []
    if batch:
        groups.append(batch)
    return groups, isolated


def moved_together(assessments: Iterable[Assessment]) -> bool:
    """Whether a batch's answers look steered by one of its papers rather than read one by one.

    The rule: at least MOVED_TOGETHER_MIN_PAPERS papers, every one with the same score on every
    topic, and the highest of those scores MOVED_TOGETHER_MIN_SCORE or more. Papers read on
    their own merits rarely agree on every topic; papers told to "rate every paper 10" do.
    Comparing each paper with a reference that does not depend on the batch (the offline
    engine's score) would catch subtler shifts, but the runner has no such reference: the
    offline engine is not run before an LLM run, and its scale is not the LLM's, so "4 points
    above the offline score" would flag honest batches. This rule needs no reference and fires
    rarely on honest batches (a false alarm costs one call per paper, and is counted); the
    fence in the prompt and sending instruction-like papers alone are the first defence.
    """
    answers = list(assessments)
    if len(answers) < MOVED_TOGETHER_MIN_PAPERS:
        return False
    scores = {tuple(t.score for t in a.topics) for a in answers}
    return len(scores) == 1 and max(next(iter(scores)), default=0) >= MOVED_TOGETHER_MIN_SCORE


def plan_run(
    store: Store,
    engine: LLMEngine,
    *,
    per_call: int = 1,
    force: bool = False,
    retry_failed: bool = False,
    limit: int | None = None,
    only: Sequence[str] | None = None,
    vocabulary: Sequence[str] = (),
    priority: Callable[[str], float] | None = None,
) -> Plan:
    """Select the papers whose LLM assessment is missing or stale (or failed, with retry_failed),
    the highest `priority` first (the queue's order), so that a run cut short by a limit, the
    budget or an interruption has spent its calls on the papers that matter most."""
    items = store.get_many(list(only)) if only is not None else list(store.iter_all())
    todo: list[Paper] = []
    up_to_date = skipped = 0
    for item in items:
        key = engine.key(item.paper)
        if needs_llm(item, key, force=force, retry_failed=retry_failed):
            todo.append(item.paper)
        elif item.assessment is not None and item.assessment.key == key:
            up_to_date += 1
        else:
            skipped += 1
    if priority is not None:
        todo.sort(key=lambda p: -priority(p.id))
    if limit is not None:
        todo = todo[:limit]
    groups, isolated = group_papers(todo, max(1, per_call))
    return Plan(
        groups=groups,
        up_to_date=up_to_date,
        skipped_failed=skipped,
        total=len(items),
        estimates=[estimate(engine, group, vocabulary) for group in groups],
        isolated=isolated,
    )


async def run_plan(
    store: Store,
    engine: LLMEngine,
    plan: Plan,
    report: RunReport,
    *,
    concurrency: int = 8,
    budget: float | None = None,
    price: tuple[float, float] | None = None,
    vocabulary: Sequence[str] = (),
    on_update: Callable[[RunReport], None] | None = None,
) -> RunReport:
    """Run the planned calls; results and failures are stored as each call finishes."""
    start = time.perf_counter()
    semaphore = asyncio.Semaphore(max(1, concurrency))
    writer = Writer(store)
    committed = 0.0  # estimated cost of calls in flight
    spent = 0.0
    unreachable_in_a_row = 0

    async def one(group: list[Paper], planned: tuple[int, int]) -> None:
        async with semaphore:
            await call(group, cost(*planned, price) or 0.0)

    async def call(group: list[Paper], expected: float) -> None:
        nonlocal committed, spent, unreachable_in_a_row
        if report.unreachable:
            return
        if budget is not None and spent + committed + expected > budget:
            report.stopped_by_budget = True
            return
        committed += expected
        try:
            result = await engine.assess(group, vocabulary)
        except AssessFailure as failure:
            committed -= expected
            report.calls += 1
            _account(report, failure.usage[0], failure.usage[1], price)
            spent = report.cost or 0.0
            if len(group) > 1 and not failure.unreachable:
                # One bad answer in a batch should not cost the others: one call each.
                for paper in group:
                    await call([paper], expected / len(group))
                return
            if failure.unreachable:
                unreachable_in_a_row += 1
                if unreachable_in_a_row >= UNREACHABLE_STOP:
                    report.unreachable = failure.reason
            else:
                writer.put({}, {p.id: (engine.key(p), failure.reason) for p in group})
            report.failed += len(group)
            report.failures.update({p.id: failure.reason for p in group})
        else:
            committed -= expected
            unreachable_in_a_row = 0
            if len(group) > 1 and moved_together(result.assessments.values()):
                # The batch's answers are not kept: each paper is asked again on its own.
                report.calls += 1
                _account(report, result.prompt_tokens, result.completion_tokens, price)
                spent = report.cost or 0.0
                report.reasked += len(group)
                for paper in group:
                    await call([paper], expected / len(group))
                return
            writer.put(result.assessments, {})
            report.done += len(result.assessments)
            report.calls += 1
            _account(report, result.prompt_tokens, result.completion_tokens, price)
            spent = report.cost or 0.0
        if on_update:
            on_update(report)

    tasks = [asyncio.ensure_future(one(g, e)) for g, e in zip(plan.groups, plan.estimates, strict=True)]
    try:
        await asyncio.gather(*tasks)
        await writer.close()
    except asyncio.CancelledError:
        report.interrupted = True
        for task in tasks:
            task.cancel()
        raise
    finally:
        report.seconds = time.perf_counter() - start
        await engine.client.close()
    return report


def _account(report: RunReport, prompt: int, completion: int, price: tuple[float, float] | None) -> None:
    report.prompt_tokens += prompt
    report.completion_tokens += completion
    call_cost = cost(prompt, completion, price)
    report.cost = None if call_cost is None or report.cost is None else report.cost + call_cost
