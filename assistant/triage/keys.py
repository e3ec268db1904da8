"""The engines' assessment keys, and whether a stored assessment is stale.

Apart from the engines themselves so that the reading commands (`triage ranked`, `show`) can
tell a stale assessment without loading the LLM client or the offline engine's libraries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from assistant.agenda import Agenda
from assistant.models import StoredPaper
from assistant.triage.prompts import Prompts

LLM_VERSION = "llm-1"  # part of every LLM assessment's key: changing it re-assesses every paper
OFFLINE_ENGINE = "offline"  # the offline engine's name on its assessments
OFFLINE_VERSION = "offline-6"  # the offline engine's: a new engine re-assesses every paper


def engine_key(document: str, agenda: Agenda) -> str:
    """The key of an offline assessment: changes with the paper, the agenda or the engine."""
    raw = "\x1f".join([OFFLINE_VERSION, agenda.hash, document])
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:24]


def llm_key(
    document: str, agenda: Agenda, prompts: Prompts, model: str, mode: str, examples: str = ""
) -> str:
    parts = [LLM_VERSION, agenda.hash, prompts.hash, model, mode, document]
    if examples:
        parts += [prompts.examples, examples]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]


def is_stale(item: StoredPaper, agenda: Agenda, prompts: Prompts | None) -> bool:
    """Whether a paper's assessment was made against another agenda, prompt or paper text."""
    a = item.assessment
    if a is None:
        return False
    return stale_fields(a.model_dump(), item.paper.document, agenda, prompts)


def stale_fields(
    assessment: Mapping[str, Any], document: str, agenda: Agenda, prompts: Prompts | None
) -> bool:
    """`is_stale` from an assessment's stored fields (`agenda_hash`, `engine`, `key`,
    `base_key`, `model`) and the paper's text, without reading the whole assessment."""
    if assessment.get("agenda_hash") != agenda.hash:
        return True
    if assessment.get("engine") == OFFLINE_ENGINE:
        return assessment.get("key") != engine_key(document, agenda)
    if prompts is None:
        return False
    key = assessment.get("base_key") or assessment.get("key")  # with examples, the key without them
    model = str(assessment.get("model") or "")
    return all(key != llm_key(document, agenda, prompts, model, mode) for mode in ("tools", "json"))
