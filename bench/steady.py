"""Steadiness: do rejections of papers unlike the accepted ones bury the papers that are wanted?

    python bench/steady.py [--sets A B ...] [--accepts N]

For every agenda case of the labelled sets (bench/labelled.py; first reader, both forms): the
researcher accepts the two wanted (grade-2) papers the engine ranks highest, then rejects the
three unwanted (grade-0) papers of the engine's top 40 least like those two (mean cosine of
the embeddings). The bench reports where the other wanted papers of the engine's top 40 stand
in the queue after the accepts and after the rejections: the mean and worst fall, and how many
fell out of the top 40. A model that lets three rejections speak for papers unlike them buries
a subject; one that moves a paper as far as the evidence carries does not. The ranking is the
product's own (`assistant.personal.rank`), so the same script measures any version of it.
"""

from __future__ import annotations

import argparse

import numpy as np
from common import report
from labelled import SETS, cases, temporary_fixture
from screening import PaperRow

from assistant.models import Status
from assistant.personal import TextFeatures, rank
from assistant.personal.model import word_features
from assistant.triage.offline import Corpus, OfflineEngine

TOP = 40
ACCEPTS = 2
REJECTS = 3


def places(texts: TextFeatures, rows: list[PaperRow], topics: list[str]) -> dict[str, int]:
    ranking = rank(texts, rows, topics)  # type: ignore[arg-type]
    queue = [pid for pid in ranking.relevance_order() if ranking.undecided[ranking.position[pid]]]
    return {pid: k for k, pid in enumerate(queue, start=1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--accepts", type=int, default=ACCEPTS)
    args = parser.parse_args()
    accepts = args.accepts
    tmp, fx = temporary_fixture()
    corpus = Corpus.build(fx.ids, fx.documents, fx.vectors)
    words = word_features(fx.documents)
    texts = TextFeatures(
        location="bench",
        ids=list(fx.ids),
        words=words,
        vectors=fx.matrix,
        position={pid: i for i, pid in enumerate(fx.ids)},
    )
    out: list[list[object]] = []
    falls: dict[str, list[int]] = {}
    for case in cases(fx.ids, tuple(args.sets)):
        engine = OfflineEngine(case.agenda, fx.store.embed)
        assessed = engine.assess(corpus, dict(zip(fx.ids, fx.documents, strict=True)), fx.vectors)
        relevance = np.array([assessed[i].relevance for i in fx.ids])
        names = [t.name for t in case.agenda.topics]
        rows = [
            PaperRow(pid, pid, assessed[pid].relevance, {t.topic: t.score for t in assessed[pid].topics})
            for pid in fx.ids
        ]
        grades = case.grades["first"]
        order = np.lexsort((np.arange(len(fx.ids)), -relevance))[:TOP]
        wanted = [i for i in order if grades[i] == 2]
        unwanted = [i for i in order if grades[i] == 0]
        if len(wanted) < accepts + 3 or len(unwanted) < REJECTS:
            continue
        accepted = wanted[:accepts]
        like = fx.matrix[unwanted] @ fx.matrix[accepted].mean(axis=0)
        rejected = [unwanted[j] for j in np.argsort(like)[:REJECTS]]
        for i in accepted:
            rows[i].status = Status.ACCEPTED
        before = places(texts, rows, names)
        for i in rejected:
            rows[i].status = Status.REJECTED
        after = places(texts, rows, names)
        others = [fx.ids[i] for i in wanted[accepts:]]
        fall = [after[p] - before[p] for p in others]
        out_of_top = sum(1 for p in others if before[p] <= TOP < after[p])
        key = f"{case.set_name} ({SETS[case.set_name][0]}), {case.form}"
        falls.setdefault(key, []).extend(fall)
        out.append(
            [
                f"{case.set_name}: {case.label}",
                len(others),
                f"{np.mean(fall):+.1f}",
                max(fall),
                out_of_top,
            ]
        )
    tmp.cleanup()
    report(
        f"steady_{accepts}",
        f"After {accepts} accepts, {REJECTS} rejections unlike them: the other wanted of the top {TOP}",
        ["case", "papers", "mean fall (places)", "worst fall", f"out of the top {TOP}"],
        out,
        {},
    )
    summary = [
        [key, len(v), f"{np.mean(v):+.2f}", max(v), sum(1 for f in v if f > 10)]
        for key, v in sorted(falls.items())
    ]
    report(
        "steady_summary",
        "Per set and form",
        ["cases", "papers", "mean fall", "worst fall", "fell > 10 places"],
        summary,
        {},
    )


if __name__ == "__main__":
    main()
