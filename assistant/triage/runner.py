"""`triage tag` with an LLM: concurrent, cached by content, resumable, within a budget.

Results are written as they arrive by one writer that groups them (see `writer.Writer`). An
interrupted run loses at most the calls in flight and the answers of the writer's last interval;
the next run picks up where it stopped.

Every planned paper ends in one of: assessed, failed with a reason, removed from the store while
queued (`triage rm` during the run: it is not sent, or its result is set aside), or not started
(budget, unreachable endpoint, a store that cannot be written, interruption, or the watchdog).
The run always ends: a watchdog stops it when nothing has happened for WATCHDOG_FACTOR times
the request deadline (no answer from the endpoint, no call ended, no write), keeping every
result it has.

With several papers per call, one paper's text could steer the model on the others (an
abstract that says "rate every paper 10"). Each paper is fenced in the prompt (see
`llm.paper_block`); on top of that, papers whose text reads like instructions are sent alone
from the start, and a batch whose answers moved together is asked again one paper per call
(see `moved_together`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from assistant.models import Assessment, Paper, StoredPaper
from assistant.store import Store
from assistant.triage.injection import instruction_like
from assistant.triage.llm import AssessFailure, LLMEngine
from assistant.triage.presence import Presence
from assistant.triage.pricing import cost
from assistant.triage.writer import WRITE_INTERVAL, Writer

__all__ = ["WRITE_INTERVAL", "Plan", "RunReport", "Writer", "plan_run", "run_plan"]

# Rough output size of one assessment, for estimates before any call is made.
OUTPUT_TOKENS_PER_PAPER = 60
OUTPUT_TOKENS_PER_TOPIC = 30
SCHEMA_TOKENS = 450  # the response model's JSON schema, sent with every call
# The run stops when nothing has happened for this many times the engine's request deadline.
WATCHDOG_FACTOR = 3
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
    # Papers deleted from the store while the run went on: not sent, or their result set aside.
    removed: list[str] = field(default_factory=list)
    # Set when results could not be stored (the run then stops starting calls): the reason.
    store_error: str | None = None
    # Set when the watchdog stopped the run: what it saw.
    stalled: str | None = None

    @property
    def not_started(self) -> int:
        return max(0, self.plan.papers - self.done - self.failed - len(self.removed))

    @property
    def notes(self) -> list[str]:
        """What the run did beyond its plan, one line each, for the summary."""
        notes = []
        if self.reasked:
            notes.append(f"{self.reasked} papers re-asked one per call: their batch's scores moved together")
        if self.removed:
            notes.append(f"{len(self.removed)} papers removed from the store while queued: not assessed")
        return notes


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
    watchdog: float | None = None,
) -> RunReport:
    """Run the planned calls; results and failures are stored as each call finishes.

    watchdog: seconds without progress (an answer from the endpoint, a call ended, a write)
    after which the run stops; by default WATCHDOG_FACTOR times the engine's request deadline."""
    start = time.perf_counter()
    semaphore = asyncio.Semaphore(max(1, concurrency))
    limit = watchdog if watchdog is not None else WATCHDOG_FACTOR * engine.timeout
    last_progress = time.monotonic()

    def progressed() -> None:
        nonlocal last_progress
        last_progress = time.monotonic()

    writer = Writer(store, on_written=progressed)
    presence = Presence(store, plan.groups, max(1, concurrency))
    committed = 0.0  # estimated cost of calls in flight
    spent = 0.0
    unreachable_in_a_row = 0
    settled: set[str] = set()  # papers assessed, failed or removed (their outcome is counted)
    removed: set[str] = set()

    def stopping() -> bool:
        return bool(report.unreachable or report.stalled or writer.error)

    async def one(index: int, group: list[Paper], planned: tuple[int, int]) -> None:
        async with semaphore:
            try:
                await call(index, group, cost(*planned, price) or 0.0)
            except Exception as exc:  # an error of ours: its papers fail with it, the run goes on
                reason = f"internal error: {type(exc).__name__}: {exc}"
                unsettled = [p for p in group if p.id not in settled]
                settled.update(p.id for p in unsettled)
                report.failed += len(unsettled)
                report.failures.update({p.id: reason for p in unsettled})
            finally:
                progressed()

    async def still_stored(index: int, group: list[Paper]) -> list[Paper]:
        """The group's papers still in the store; the others are counted as removed."""
        present = await presence.stored(index, [p.id for p in group])
        gone = [p.id for p in group if p.id not in present and p.id not in settled]
        removed.update(gone)
        settled.update(gone)
        report.removed.extend(gone)
        return [p for p in group if p.id in present]

    async def call(index: int, group: list[Paper], expected: float) -> None:
        nonlocal committed, spent, unreachable_in_a_row
        if stopping():
            return
        group = await still_stored(index, group)
        if not group or stopping():  # (the store read may have let the run stop meanwhile)
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
                    await call(index, [paper], expected / len(group))
                return
            if failure.unreachable:
                unreachable_in_a_row += 1
                if unreachable_in_a_row >= UNREACHABLE_STOP:
                    report.unreachable = failure.reason
            else:
                writer.put({}, {p.id: (engine.key(p), failure.reason) for p in group})
            settled.update(p.id for p in group)
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
                    await call(index, [paper], expected / len(group))
                return
            writer.put(result.assessments, {})
            settled.update(result.assessments)
            report.done += len(result.assessments)
            report.calls += 1
            _account(report, result.prompt_tokens, result.completion_tokens, price)
            spent = report.cost or 0.0
        if on_update:
            on_update(report)

    tasks = [
        asyncio.ensure_future(one(i, g, e))
        for i, (g, e) in enumerate(zip(plan.groups, plan.estimates, strict=True))
    ]

    async def watch() -> None:
        while True:
            await asyncio.sleep(min(1.0, limit / 10))
            idle = time.monotonic() - max(last_progress, engine.last_response)
            if idle > limit:
                report.stalled = (
                    f"no progress for {idle:.0f}s (no answer from the endpoint, no call ended, no "
                    f"result written; the limit is {limit:.0f}s, {WATCHDOG_FACTOR}x the request deadline)"
                )
                for task in tasks:
                    task.cancel()
                return

    watcher = asyncio.ensure_future(watch())
    with frozen_heap():
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
            watcher.cancel()
            if not await writer.close(timeout=limit):
                report.stalled = report.stalled or f"results still unwritten after {limit:.0f}s: given up on"
        except asyncio.CancelledError:
            report.interrupted = True
            for task in [*tasks, watcher]:
                task.cancel()
            raise
        finally:
            watcher.cancel()
            report.seconds = time.perf_counter() - start
            _settle(report, writer, removed)
            await engine.client.close()
    return report


_frozen_runs = 0
_frozen_lock = threading.Lock()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """While runs go on, the objects that existed when the first began (the libraries, the store,
    the plan: some 200,000) are left out of the garbage collector's full passes. A full pass over
    them took ~100 ms of the event loop, with every call in flight waiting, a few times a run; what
    the calls make is still collected as usual, and the rest is again once the last run ends."""
    global _frozen_runs
    with _frozen_lock:
        if _frozen_runs == 0:
            gc.freeze()
        _frozen_runs += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen_runs -= 1
            if _frozen_runs == 0:
                gc.unfreeze()


def _settle(report: RunReport, writer: Writer, removed: set[str]) -> None:
    """Count what the writer found: papers deleted before their result was written are removed,
    not assessed or failed; results that could not be stored are failures with the reason."""
    for pid in dict.fromkeys(writer.removed):
        if pid in removed:
            continue
        removed.add(pid)
        report.removed.append(pid)
        if report.failures.pop(pid, None) is not None:
            report.failed -= 1
        else:
            report.done -= 1
    for pid, reason in writer.unsaved.items():
        if pid in removed:
            continue
        if pid in report.failures:
            report.failures[pid] += f" ({reason})"
        else:
            report.done -= 1
            report.failed += 1
            report.failures[pid] = reason
    report.store_error = writer.error


def _account(report: RunReport, prompt: int, completion: int, price: tuple[float, float] | None) -> None:
    report.prompt_tokens += prompt
    report.completion_tokens += completion
    call_cost = cost(prompt, completion, price)
    report.cost = None if call_cost is None or report.cost is None else report.cost + call_cost
