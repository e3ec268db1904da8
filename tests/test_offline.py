from __future__ import annotations

import numpy as np

from assistant.agenda import parse_agenda
from assistant.config import Settings
from assistant.models import Paper
from assistant.store import Store
from assistant.triage.batch import tag_offline
from assistant.triage.offline import Corpus, summarize
from conftest import sample_records

AGENDA = parse_agenda(
    "## Protein structure\nPredicting and generating 3D protein structures with deep learning.\n\n"
    "## Not interested\nSpeech recognition and audio processing.\n"
)


def _store(settings: Settings) -> Store:
    store = Store.open(settings)
    papers = [
        Paper.create(**{k: v for k, v in r.items() if k in ("title", "abstract")}) for r in sample_records(30)
    ]
    papers += [
        Paper.create(
            title="Diffusion models for protein backbone generation",
            abstract="We generate protein structures in 3D with a diffusion model. Designed backbones fold.",
        ),
        Paper.create(
            title="Streaming speech recognition for audio assistants",
            abstract="We build an audio speech recognition system. It transcribes speech in real time.",
        ),
    ]
    store.upsert_papers(papers)
    return store


def test_on_topic_paper_ranks_first_and_not_interested_is_penalised(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    report = tag_offline(store, AGENDA)
    assert report.assessed == 32
    items = sorted(store.iter_all(), key=lambda i: -i.assessment.relevance)  # type: ignore[union-attr]
    assert items[0].paper.title.startswith("Diffusion models for protein")
    top = items[0].assessment
    assert top is not None and top.engine == "offline" and top.relevance >= 6
    assert "protein" in top.topics[0].reason and top.topics[0].reason.startswith("offline:")
    speech = next(i for i in items if i.paper.title.startswith("Streaming speech"))
    assert speech.assessment is not None and speech.assessment.relevance < 3


def test_second_run_is_free_and_an_agenda_edit_makes_everything_stale(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    tag_offline(store, AGENDA)
    assert tag_offline(store, AGENDA).assessed == 0
    edited = parse_agenda("## Protein structure\nProtein folding.\n")
    assert tag_offline(store, edited).assessed == 32
    assert tag_offline(store, edited, force=True, limit=5).assessed == 5


def test_summary_is_one_sentence_of_the_abstract() -> None:
    doc = (
        "T\n\nLanguage models are big. We propose a method to adapt language models to new languages "
        "with adapters. It works on ten languages and adapters are cheap."
    )
    corpus = Corpus.build(["a"], [doc])
    summary = summarize(doc, corpus)
    assert summary.startswith("We propose a method") and summary.endswith("adapters.")
    assert len(summarize("T\n\n" + " ".join(["word"] * 80) + ".", corpus).split()) <= 31
    assert np.isfinite(corpus.idf("languag"))
