"""The LLM engine's assessment key, and whether a stored assessment is stale.

Apart from the engine itself so that the reading commands (`triage ranked`, `show`) can tell a
stale assessment without loading the LLM client. The offline engine's key is its own
(`offline.engine_key`).
"""

from __future__ import annotations

import hashlib

from assistant.agenda import Agenda
from assistant.models import StoredPaper
from assistant.triage.prompts import Prompts

LLM_VERSION = "llm-1"  # part of every LLM assessment's key: changing it re-assesses every paper


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
    if a.agenda_hash != agenda.hash:
        return True
    if a.engine == "offline":
        from assistant.triage.offline import engine_key  # its key is its own (and loads its engine)

        return a.key != engine_key(item.paper.document, agenda)
    if prompts is None:
        return False
    key = a.base_key or a.key  # with calibration examples, the key without them
    return all(
        key != llm_key(item.paper.document, agenda, prompts, a.model or "", mode)
        for mode in ("tools", "json")
    )
