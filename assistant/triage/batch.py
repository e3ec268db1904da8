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
        keys[item.paper.id] = item.assessment.key if item.assessment else ""
    report.total = len(documents)
    todo = [pid for pid, doc in documents.items() if force or keys[pid] != engine_key(doc, agenda)]
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
