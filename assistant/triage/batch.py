"""`triage tag`: assess every paper whose assessment is missing or stale, writing as it goes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from assistant.agenda import Agenda
from assistant.store import Store
from assistant.triage.offline import Corpus, OfflineEngine, engine_key

CHUNK = 200


@dataclass
class TagReport:
    engine: str
    total: int = 0
    selected: int = 0
    assessed: int = 0
    up_to_date: int = 0
    seconds: float = 0.0
    ids: list[str] = field(default_factory=list)


def tag_offline(
    store: Store,
    agenda: Agenda,
    *,
    force: bool = False,
    limit: int | None = None,
    on_selected: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> TagReport:
    """Assess with the offline engine the papers that need it; results are stored chunk by chunk."""
    start = time.perf_counter()
    report = TagReport(engine="offline")
    documents: dict[str, str] = {}
    keys: dict[str, str] = {}
    for item in store.iter_all():
        documents[item.paper.id] = item.paper.document
        a = item.assessment
        if a is not None and a.engine != "offline" and a.agenda_hash == agenda.hash and not force:
            keys[item.paper.id] = "keep"  # an LLM read it against this agenda: never replace it offline
        else:
            keys[item.paper.id] = a.key if a else ""
    report.total = len(documents)
    todo = [
        pid
        for pid, doc in documents.items()
        if keys[pid] != "keep" and (force or keys[pid] != engine_key(doc, agenda))
    ]
    report.up_to_date = report.total - len(todo)
    if limit is not None:
        todo = todo[:limit]
    report.selected = len(todo)
    if on_selected:
        on_selected(len(todo))
    if todo:
        corpus = Corpus.build(list(documents), list(documents.values()))
        engine = OfflineEngine(agenda, store.embed)
        for begin in range(0, len(todo), CHUNK):
            chunk = todo[begin : begin + CHUNK]
            vectors = store.embeddings(chunk)
            results = engine.assess(corpus, {pid: documents[pid] for pid in chunk}, vectors)
            store.set_assessments(results)
            report.assessed += len(results)
            report.ids.extend(results)
            if on_progress:
                on_progress(len(chunk))
    report.seconds = time.perf_counter() - start
    return report


def offline_relevance(store: Store, agenda: Agenda) -> dict[str, float]:
    """The offline engine's relevance of every paper, computed without storing anything.

    The cascade ranks by it, so its choice of papers for the LLM does not change when some
    of them already carry the LLM's own assessment.
    """
    documents = {item.paper.id: item.paper.document for item in store.iter_all()}
    if not documents:
        return {}
    corpus = Corpus.build(list(documents), list(documents.values()))
    engine = OfflineEngine(agenda, store.embed)
    ids = list(documents)
    out: dict[str, float] = {}
    for begin in range(0, len(ids), CHUNK * 5):
        chunk = ids[begin : begin + CHUNK * 5]
        results = engine.assess(corpus, {pid: documents[pid] for pid in chunk}, store.embeddings(chunk))
        out.update({pid: a.relevance for pid, a in results.items()})
    return out
