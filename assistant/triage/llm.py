"""The LLM engine: any OpenAI-compatible endpoint, via AsyncOpenAI + instructor.

instructor validates each answer against the response model and re-asks on a violation;
network failures (connection, timeout, 429, 5xx) are retried here with exponential backoff
and jitter, honouring Retry-After. The client itself never retries (`max_retries=0`).

A 429 pauses the whole pool, not just the call that got it: every request of an engine, from
any of the calls running at once (instructor's re-asks included), passes one shared `Gate`
before it is sent, and a 429 closes that gate for its Retry-After.

The event loop's time per call decides how close a run comes to concurrency / latency (at 32
calls in flight, 160 calls/s, a millisecond per call is a sixth of the loop). So instructor
prepares the request once per response model (the tools, or the JSON schema in the system
message; its own `create` prepared and checked the model again on every call, several times
over); each call adds its user message and goes through instructor's re-ask loop
(`retry_async`); and the request is posted as the JSON it is (`chat.completions.create` first
walks every request, schema included, through openai's type-driven transform, which changes
nothing in ours: a test compares the bodies). The bodies sent are the same as before, re-asks
included.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import instructor
import openai
from instructor.core import InstructorRetryException, retry_async
from instructor.processing.response import handle_response_model
from instructor.utils.providers import Provider
from instructor.v2.core.response_model import prepare_response_model
from openai.types.chat import ChatCompletion
from pydantic import ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from assistant.agenda import Agenda
from assistant.models import Assessment, Paper, TopicScore
from assistant.triage.examples import Examples, examples_key, examples_text
from assistant.triage.keys import llm_key
from assistant.triage.prompts import Prompts
from assistant.triage.schema import CALL_CONTEXT, BatchAnswer, PaperAnswer, answers_by_id
from assistant.triage.scoring import relevance_from

ENGINE = "llm"
REASKS = 2
NETWORK_ATTEMPTS = 5
MAX_WAIT = 60.0
# How long a 429 without Retry-After holds back the other calls (the call itself backs off).
POOL_PAUSE = 0.5
# Failed calls are reported per paper by the batch; instructor's own error log would repeat them.
logging.getLogger("instructor").setLevel(logging.CRITICAL)
MODES = {"tools": instructor.Mode.TOOLS, "json": instructor.Mode.JSON}
# The response models as instructor prepares them, once: given the plain models, instructor makes
# a new class each time and generates its JSON schema again (a few ms of the event loop).
ONE_PAPER: type[Any] = prepare_response_model(PaperAnswer) or PaperAnswer
SEVERAL_PAPERS: type[Any] = prepare_response_model(BatchAnswer) or BatchAnswer


class AssessFailure(Exception):
    """An assessment that could not be obtained; the reason is recorded with the paper."""

    def __init__(self, reason: str, usage: tuple[int, int] = (0, 0), unreachable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.usage = usage
        # The endpoint could not be reached at all: nothing is wrong with the paper, so the
        # failure is not recorded against it and the next run tries it again.
        self.unreachable = unreachable


@dataclass
class CallResult:
    assessments: dict[str, Assessment]
    prompt_tokens: int
    completion_tokens: int


_ANGLES = re.compile(r"<{2,}|>{2,}")
_LOOKALIKES = str.maketrans("<>", "‹›")


def new_fence() -> str:
    """A random code for one call's paper markers: text written before the call cannot know it."""
    return secrets.token_hex(6)


def paper_block(paper: Paper, fence: str) -> str:
    """A paper as data between this call's markers. The fence code is removed from the text and
    `<<`/`>>` are defused, so no text can close its paper's block or open another one."""

    def safe(text: str) -> str:
        return _ANGLES.sub(lambda m: m.group().translate(_LOOKALIKES), text.replace(fence, ""))

    lines = [f"<<<PAPER-{fence} id={paper.id}>>>", f"Title: {safe(paper.title)}"]
    if paper.authors:
        lines.append(f"Authors: {safe(', '.join(paper.authors[:12]))}")
    if paper.venue or paper.year:
        lines.append(f"Venue: {safe(' '.join(str(x) for x in (paper.venue, paper.year) if x))}")
    lines.append(f"Abstract: {safe(paper.abstract) if paper.abstract else '(none)'}")
    lines.append(f"<<<END PAPER-{fence}>>>")
    return "\n".join(lines)


def agenda_text(agenda: Agenda) -> str:
    return "\n".join(f'- "{t.name}": {t.description or t.name}' for t in agenda.topics)


def _cause(exc: BaseException) -> BaseException:
    """The underlying API error of an instructor exception."""
    seen = exc
    while isinstance(seen, InstructorRetryException) and seen.__cause__ is not None:
        seen = seen.__cause__
    return seen


def is_transient(exc: BaseException) -> bool:
    cause = _cause(exc)
    if isinstance(cause, openai.APIStatusError):
        return cause.status_code == 429 or cause.status_code >= 500
    return isinstance(cause, openai.APIConnectionError | openai.APIResponseValidationError)


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header (seconds, or an HTTP date) as seconds from now, at most MAX_WAIT."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_WAIT)


def _retry_after(exc: BaseException | None) -> float | None:
    cause = _cause(exc) if exc else None
    response = getattr(cause, "response", None)
    return retry_after_seconds(response.headers.get("retry-after")) if response is not None else None


def _wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    hinted = _retry_after(exc)
    if hinted is not None:
        return hinted
    base = min(MAX_WAIT, 0.5 * 2.0 ** (state.attempt_number - 1))
    return base / 2 + random.uniform(0, base / 2)


def _failure_reason(exc: BaseException, endpoint: object) -> str:
    cause = _cause(exc)
    if isinstance(cause, openai.APIStatusError):
        return f"HTTP {cause.status_code} from the LLM endpoint: {str(cause.message)[:200]}"
    if isinstance(cause, openai.APIConnectionError):
        return f"cannot reach the LLM endpoint at {endpoint}: {cause}"
    if isinstance(cause, ValidationError):
        text = "; ".join(
            f"{'.'.join(str(part) for part in err['loc'])}: {err['msg']}" if err["loc"] else str(err["msg"])
            for err in cause.errors()
        )
    else:
        text = " ".join(str(cause).split())
    return f"invalid answer after {REASKS} re-asks: {text[:300]}"


class Gate:
    """When the endpoint may be sent the next request: one for all the calls of an engine.

    Every request awaits `wait` before it leaves; a rate-limited answer moves the gate forward
    with `close_for`, so the calls running at once stop sending, not just the one that was told.
    One event loop uses it, so it needs no lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # tests that fake the sleeps fake the clock with them
        self.not_before = 0.0

    def close_for(self, seconds: float) -> None:
        self.not_before = max(self.not_before, self.clock() + seconds)

    async def wait(self, sleep: Callable[[float], Awaitable[Any]]) -> None:
        target = 0.0
        while self.not_before > target:  # moved again while we slept: wait for the new time
            target = self.not_before
            delay = target - self.clock()
            if delay > 0:
                await sleep(delay)


class LLMEngine:
    """Assesses papers with an LLM; one call covers one paper or a small batch."""

    name = ENGINE

    def __init__(
        self,
        agenda: Agenda,
        prompts: Prompts,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        mode: str = "tools",
        timeout: float = 120.0,
        examples: Examples | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}")
        self.agenda = agenda
        self.prompts = prompts
        self.model = model
        self.mode = mode
        self.timeout = timeout  # seconds one request may take: the run's watchdog counts in these
        self.gate = Gate()
        # When the endpoint last answered anything (an error too): the run is alive while it does.
        self.last_response = time.monotonic()
        http_client = openai.DefaultAsyncHttpxClient(
            event_hooks={"request": [self._before_request], "response": [self._after_response]}
        )
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )
        self.sleep: Any = None  # tests may replace the sleeps of backoff and of the gate
        self.examples = examples
        # Per response model: the model and the request (system message, schema) as instructor
        # prepares them, made at the first call that needs them.
        self._prepared: dict[type[Any], tuple[type[Any], dict[str, Any]]] = {}

    # httpx event hooks (openai's http client is httpx's, or httpx2's in openai 3; same hooks).
    async def _before_request(self, request: Any) -> None:
        await self.gate.wait(self.sleep or asyncio.sleep)

    async def _after_response(self, response: Any) -> None:
        self.last_response = time.monotonic()
        if response.status_code == 429:
            hinted = retry_after_seconds(response.headers.get("retry-after"))
            self.gate.close_for(POOL_PAUSE if hinted is None else hinted)

    def base_key(self, paper: Paper) -> str:
        """The cache key without calibration examples."""
        return llm_key(paper.document, self.agenda, self.prompts, self.model, self.mode)

    def key(self, paper: Paper) -> str:
        if self.examples is None:
            return self.base_key(paper)
        chosen = examples_key(self.examples.nearest(paper.id))
        return llm_key(paper.document, self.agenda, self.prompts, self.model, self.mode, chosen)

    def prepared(self, response_model: type[Any]) -> tuple[type[Any], dict[str, Any]]:
        """The response model and the request without its user message, as instructor prepares
        them for this engine's mode: the tools and tool choice, or the JSON schema appended to the
        system message. The same for every call, so prepared once."""
        if response_model not in self._prepared:
            system = [{"role": "system", "content": self.prompts.system}]
            model, request = handle_response_model(
                response_model,
                mode=MODES[self.mode],
                provider=Provider.OPENAI,
                messages=system,
                model=self.model,
            )
            self._prepared[response_model] = (model or response_model, request)
        return self._prepared[response_model]

    async def _complete(self, **request: Any) -> ChatCompletion:
        """One chat completion request, posted as the JSON it is (the same body and headers as
        `chat.completions.create`, without its transform of every value by its declared type)."""
        return await self.client.post(
            "/chat/completions",
            body=request,
            cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},  # as `create` sends it: the API key, no admin key
        )

    def messages(self, papers: Sequence[Paper], vocabulary: Sequence[str]) -> list[dict[str, str]]:
        """The call's prompt. Its paper markers carry a new random code each time; the cache key
        never sees them (it hashes the paper's text, agenda, templates and model)."""
        count = "paper" if len(papers) == 1 else f"{len(papers)} papers"
        fence = new_fence()
        user = self.prompts.render_assess(
            agenda=agenda_text(self.agenda),
            tags=", ".join(vocabulary[:200]) or "(none yet)",
            count=count,
            papers="\n\n".join(paper_block(p, fence) for p in papers),
        )
        if self.examples is not None:
            chosen = list({e.id: e for p in papers for e in self.examples.nearest(p.id)}.values())
            if chosen:
                user += "\n\n" + self.prompts.render_examples(examples_text(chosen))
        return [{"role": "system", "content": self.prompts.system}, {"role": "user", "content": user}]

    async def assess(self, papers: Sequence[Paper], vocabulary: Sequence[str] = ()) -> CallResult:
        """Assess the papers in one call (re-asked on invalid answers, retried on network errors)."""
        ids = [p.id for p in papers]
        response_model = ONE_PAPER if len(papers) == 1 else SEVERAL_PAPERS
        # The validators read it (see schema.CALL_CONTEXT); set for this task only.
        context = CALL_CONTEXT.set({"topics": [t.name for t in self.agenda.topics], "paper_ids": ids})
        response_model, prepared = self.prepared(response_model)
        # The prepared system message (with the schema, in JSON mode), then the call's own.
        messages = [*prepared["messages"], *self.messages(papers, vocabulary)[1:]]
        retrying = AsyncRetrying(
            retry=retry_if_exception(is_transient),
            stop=stop_after_attempt(NETWORK_ATTEMPTS),
            wait=_wait,
            reraise=True,
            **({"sleep": self.sleep} if self.sleep else {}),
        )
        try:
            async for attempt in retrying:
                with attempt:
                    answer = await retry_async(
                        func=self._complete,
                        response_model=response_model,
                        args=(),
                        # A list of messages of its own for each attempt: instructor's re-asks
                        # extend it, and a network retry starts again from the call's messages.
                        kwargs={**prepared, "messages": list(messages)},
                        max_retries=REASKS,
                        strict=True,
                        mode=MODES[self.mode],
                        provider=Provider.OPENAI,
                    )
        except Exception as exc:
            if isinstance(exc, InstructorRetryException | openai.OpenAIError):
                cause = _cause(exc)
                unreachable = isinstance(cause, openai.APIConnectionError) and not isinstance(
                    cause, openai.APITimeoutError
                )
                reason = _failure_reason(exc, self.client.base_url)
                raise AssessFailure(reason, _usage_of(exc), unreachable=unreachable) from exc
            raise
        finally:
            CALL_CONTEXT.reset(context)
        prompt_tokens, completion_tokens = _usage_of(answer, getattr(answer, "_raw_response", None))
        by_id = answers_by_id(answer, ids)
        out = {pid: self._assessment(by_id[pid], paper) for pid, paper in zip(ids, papers, strict=True)}
        return CallResult(out, prompt_tokens, completion_tokens)

    def _assessment(self, answer: PaperAnswer, paper: Paper) -> Assessment:
        by_topic = {t.topic: t for t in answer.topics}
        topics = [
            TopicScore(topic=t.name, score=by_topic[t.name].score, reason=by_topic[t.name].reason)
            for t in self.agenda.topics
        ]
        return Assessment(
            tags=answer.tags,
            summary=answer.summary,
            topics=topics,
            relevance=relevance_from(topics, self.agenda),
            engine=ENGINE,
            model=self.model,
            key=self.key(paper),
            base_key=self.base_key(paper) if self.examples is not None else "",
            agenda_hash=self.agenda.hash,
        )


def _usage_of(*objs: Any) -> tuple[int, int]:
    """(prompt, completion) tokens: instructor's total over re-asks when it has one."""
    for obj in objs:
        usage = (
            getattr(obj, "_total_usage", None)
            or getattr(obj, "total_usage", None)
            or getattr(obj, "usage", None)
        )
        if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
            return int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)
    return 0, 0
