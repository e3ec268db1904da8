"""Assess chosen papers with the configured engine: what the review screen runs in the background."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from assistant.agenda import Agenda
from assistant.config import Settings
from assistant.defaults import DEFAULT_MODEL
from assistant.store import Store
from assistant.triage.batch import tag_offline
from assistant.triage.examples import Examples
from assistant.triage.llm import LLMEngine
from assistant.triage.pricing import cost, price_for
from assistant.triage.prompts import load_prompts
from assistant.triage.runner import Plan, RunReport, plan_run, run_plan


@dataclass
class AssessOutcome:
    engine: str
    assessed: int
    failed: int
    up_to_date: int
    failures: dict[str, str]
    removed: list[str] = field(default_factory=list)  # deleted from the store while queued


def assess_papers(
    store: Store,
    settings: Settings,
    agenda: Agenda,
    ids: Sequence[str],
    *,
    force: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> AssessOutcome:
    """Assess these papers (all of them with force, else those missing or stale) with the LLM
    when one is configured, else offline; results are stored as they come."""
    total = len(ids)
    if not settings.llm_configured:
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            if on_progress:
                on_progress(done, total)

        report = tag_offline(store, agenda, force=force, only=set(ids), on_progress=advance)
        return AssessOutcome("offline", report.assessed, 0, total - report.selected, {})
    prepared = prepare_llm(store, settings, agenda, ids, force=force)
    run = RunReport(engine="llm", model=prepared.model, plan=prepared.plan)
    if prepared.plan.papers:
        asyncio.run(
            run_plan(
                store,
                prepared.engine,
                prepared.plan,
                run,
                price=price_for(prepared.model, settings.prices),
                vocabulary=prepared.vocabulary,
                on_update=lambda r: (
                    on_progress(r.done + r.failed + len(r.removed), total) if on_progress else None
                ),
            )
        )
    return AssessOutcome(
        f"llm ({prepared.model})",
        run.done,
        run.failed,
        prepared.plan.up_to_date,
        dict(run.failures),
        list(run.removed),
    )


@dataclass
class Prepared:
    """An LLM assessment ready to run: the engine, and the plan with its estimates."""

    model: str
    engine: LLMEngine
    plan: Plan
    vocabulary: list[str]
    cost: float | None  # the estimate in USD; None when the model's price is unknown


def prepare_llm(
    store: Store, settings: Settings, agenda: Agenda, ids: Sequence[str], *, force: bool
) -> Prepared:
    """Plan an LLM assessment of these papers (no call is made): what it would cost first."""
    model = settings.model or DEFAULT_MODEL
    api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    examples = None
    if settings.examples > 0:
        examples = Examples.from_store(store, settings.examples)
        examples.prepare(store.embeddings(list(ids)))
    engine = LLMEngine(
        agenda,
        load_prompts(settings.prompts),
        model=model,
        base_url=settings.openai_base_url,
        api_key=api_key,
        examples=examples,
    )
    vocabulary = store.tag_vocabulary()
    plan = plan_run(store, engine, force=force, retry_failed=True, only=ids, vocabulary=vocabulary)
    estimate = cost(plan.prompt_tokens, plan.completion_tokens, price_for(model, settings.prices))
    return Prepared(model, engine, plan, vocabulary, estimate)
