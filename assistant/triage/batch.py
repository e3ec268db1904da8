"""`triage tag`: assess every paper whose assessment is missing or stale, writing as it goes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from assistant.agenda import Agenda
from assistant.cache import cache_file
from assistant.store import Store
from assistant.triage import lexicon
from assistant.triage.keys import OFFLINE_ENGINE, engine_key
from assistant.triage.offline import OfflineEngine

CHUNK = 200
# The offline engine scores a paper against the whole store (its words' rarity, each topic's
# best matches, the spread of the scores), so a score made when the store was much smaller is
# not comparable with one made now. When the store has changed by this share of its papers
# since the last pass that scored every paper (or it is small, and a pass costs nothing), every
# offline assessment is made again, not just the new papers'.
CORPUS_DRIFT = 0.05
ALWAYS_WHOLE_BELOW = 500
CORPUS_KEY = "offline_corpus"  # the store's value: how many papers the last whole pass saw


@dataclass
class TagReport:
    engine: str
    total: int = 0
    selected: int = 0
    assessed: int = 0
    up_to_date: int = 0
    seconds: float = 0.0
    ids: list[str] = field(default_factory=list)
    # Papers whose offline score was made again because the store changed (see CORPUS_DRIFT),
    # and the store's size at the last whole pass.
    rescored: int = 0
    corpus_before: int | None = None
    # With rank_all: the offline relevance of every paper, stored or not (for the cascade).
    relevance: dict[str, float] = field(default_factory=dict)


def tag_offline(
    store: Store,
    agenda: Agenda,
    *,
    force: bool = False,
    limit: int | None = None,
    on_selected: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    rank_all: bool = False,
    only: Collection[str] | None = None,
    write: bool = True,
) -> TagReport:
    """Assess with the offline engine the papers that need it; results are stored chunk by chunk.

    With rank_all, every paper is scored in the same pass (only those that need it are
    stored) and the report carries each paper's offline relevance. With only, just those
    papers are candidates (the whole store still makes the lexical statistics). Without
    write, nothing is stored (a dry run still ranks).
    """
    start = time.perf_counter()
    report = TagReport(engine=OFFLINE_ENGINE)
    documents: dict[str, str] = {}
    keys: dict[str, str] = {}
    # Each paper's stored text and its assessment's three fields, without making its models
    # (~5 s of CPU at 100k papers); the stored text is the paper's document, as `stats` reads it.
    for pid, document, meta in store.iter_records():
        documents[pid] = document
        a = json.loads(meta["assessment"]) if meta.get("assessment") else {}
        read = a.get("engine", OFFLINE_ENGINE) != OFFLINE_ENGINE and a.get("agenda_hash") == agenda.hash
        # An LLM read it against this agenda: never replace it offline.
        keys[pid] = "keep" if read and not force else a.get("key", "")
    report.total = len(documents)
    current = {pid for pid, doc in documents.items() if keys[pid] == engine_key(doc, agenda)}
    seen = store.get_value(CORPUS_KEY)
    report.corpus_before = seen if isinstance(seen, int) else None
    drifted = (
        report.corpus_before is not None
        and report.corpus_before != report.total
        and (
            report.total < ALWAYS_WHOLE_BELOW
            or abs(report.total - report.corpus_before) >= CORPUS_DRIFT * report.corpus_before
        )
    )
    todo = [
        pid
        for pid in documents
        if keys[pid] != "keep" and (only is None or pid in only) and (force or drifted or pid not in current)
    ]
    report.rescored = len([pid for pid in todo if pid in current]) if drifted and not force else 0
    eligible = sum(1 for pid in documents if keys[pid] != "keep")
    # Every offline score is now made against this store: the next passes measure from here. A
    # store that never recorded it (made by an earlier version) starts measuring now.
    whole = only is None and (limit is None or limit >= len(todo)) and len(todo) == eligible
    report.up_to_date = report.total - len(todo)
    if limit is not None:
        todo = todo[:limit]
    report.selected = len(todo)
    if on_selected:
        on_selected(len(todo))
    wanted = set(todo) if write else set()
    score = list(documents) if rank_all else todo
    if score:
        # Every paper's vector: feedback looks for a topic's best matches in the whole store.
        vectors = store.embedding_arrays(list(documents))
        # Each text's counts are kept between runs: only the texts not seen before are read.
        lexicon_file = cache_file("lexicon", store.data_key)
        corpus = lexicon.corpus(list(documents), list(documents.values()), vectors, lexicon_file)
        engine = OfflineEngine(agenda, store.embed)
        for begin in range(0, len(score), CHUNK):
            chunk = score[begin : begin + CHUNK]
            results = engine.assess(corpus, {pid: documents[pid] for pid in chunk}, vectors)
            if rank_all:
                report.relevance.update({pid: a.relevance for pid, a in results.items()})
            stored = {pid: a for pid, a in results.items() if pid in wanted}
            if stored:
                store.set_assessments(stored)
                report.assessed += len(stored)
                report.ids.extend(stored)
                if on_progress:
                    on_progress(len(stored))
    if write and report.corpus_before != report.total and (whole or report.corpus_before is None):
        store.set_value(CORPUS_KEY, report.total)
    report.seconds = time.perf_counter() - start
    return report
