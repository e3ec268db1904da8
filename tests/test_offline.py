from __future__ import annotations

import numpy as np

from assistant.agenda import parse_agenda
from assistant.config import Settings
from assistant.models import Paper
from assistant.store import Store
from assistant.triage.batch import tag_offline
from assistant.triage.offline import Corpus, OfflineEngine, formulations, summarize
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
            title="What protein designers are interested in",
            abstract="A survey of what interests practitioners of protein design, and why it interests them.",
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
    assert report.assessed == 33
    items = sorted(store.iter_all(), key=lambda i: -i.assessment.relevance)  # type: ignore[union-attr]
    assert items[0].paper.title.startswith("Diffusion models for protein")
    top = items[0].assessment
    assert top is not None and top.engine == "offline" and top.relevance >= 6
    assert "protein" in top.topics[0].reason and top.topics[0].reason.startswith("offline:")
    speech = next(i for i in items if i.paper.title.startswith("Streaming speech"))
    assert speech.assessment is not None and speech.assessment.relevance < 3
    # The penalty's reason names what the researcher wrote, not the heading's own words.
    penalty = speech.assessment.topics[1]
    assert penalty.topic == "Not interested" and "'speech'" in penalty.reason
    for item in items:
        assert item.assessment is not None and "interested" not in item.assessment.topics[1].reason


def test_a_bare_not_interested_heading_penalises_nothing(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    agenda = parse_agenda("## Protein structure\nPredicting 3D protein structures.\n\n## Not interested\n")
    tag_offline(store, agenda)
    for item in store.iter_all():
        assert item.assessment is not None and item.assessment.topics[1].score == 0


def test_second_run_is_free_and_an_agenda_edit_makes_everything_stale(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    tag_offline(store, AGENDA)
    assert tag_offline(store, AGENDA).assessed == 0
    edited = parse_agenda("## Protein structure\nProtein folding.\n")
    assert tag_offline(store, edited).assessed == 33
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


MANY_THEMES = parse_agenda(
    "## Multilingual adaptation\n"
    "Adapting language models to languages with little data: tokenizer and vocabulary extension "
    "for new scripts; speech recognition for regional dialects; evaluation benchmarks for African "
    "languages.\n"
)


def test_a_topic_is_matched_by_its_name_and_each_clause() -> None:
    assert formulations(MANY_THEMES.topics[0]) == [
        "Multilingual adaptation",
        "Adapting language models to languages with little data",
        "tokenizer and vocabulary extension for new scripts",
        "speech recognition for regional dialects",
        "evaluation benchmarks for African languages",
    ]
    # A one-phrase topic has nothing to divide.
    assert formulations(parse_agenda("multi-task learning transfer\n").topics[0]) == []


def test_a_paper_on_one_theme_of_a_broad_topic_gains_from_its_clause(embedded_settings: Settings) -> None:
    """The whole paragraph's embedding blurs its themes; the clause's own embedding does not."""
    store = _store(embedded_settings)
    dialects = Paper.create(
        title="Speech recognition for regional dialects with little transcribed audio",
        abstract="We adapt an ASR model to five regional dialects using a few hours of speech each.",
    )
    store.upsert_papers([dialects])
    items = list(store.iter_all())
    ids = [i.paper.id for i in items]
    corpus = Corpus.build(ids, [i.paper.document for i in items])
    vectors = store.embeddings(ids)
    engine = OfflineEngine(MANY_THEMES, store.embed)
    _, cosine, similarity = engine.components(corpus, ids, vectors)
    row = ids.index(dialects.id)
    others = np.arange(len(ids)) != row

    def lead(scores: np.ndarray) -> float:
        """How far the dialect paper stands above the best of the others, in their spread."""
        column = scores[:, 0]
        return float((column[row] - column[others].max()) / column.std())

    assert lead(similarity) > lead(cosine) + 0.2
    # The two papers on a theme of the topic lead: the dialects paper and the sample's paper
    # on adapting language models to African languages.
    assessed = engine.assess(corpus, {i.paper.id: i.paper.document for i in items}, vectors)
    top = sorted(assessed, key=lambda pid: -assessed[pid].relevance)[:2]
    assert dialects.id in top
    assert any("African" in i.paper.title for i in items if i.paper.id in top)
    assert engine.assess(corpus, {}, vectors) == {}


def test_tags_are_the_titles_key_phrases_not_its_verbs(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    tag_offline(store, AGENDA)
    by_title = {i.paper.title: i.assessment for i in store.iter_all()}
    routing = next(a for t, a in by_title.items() if t.startswith("Leveraging Routing Dynamics"))
    assert routing is not None
    assert "routing dynamics" in routing.tags and "mixture-of-experts models" in routing.tags
    assert not any("leveraging" in tag for tag in routing.tags)
    protein = next(a for t, a in by_title.items() if t.startswith("Diffusion models for protein"))
    assert protein is not None and protein.tags[0] == "protein structure"  # the matching topic first
    for assessment in by_title.values():
        assert assessment is not None and 1 <= len(assessment.tags) <= 5
        words_in_tags = [w for tag in assessment.tags[1:] for w in tag.split()]
        assert len(words_in_tags) == len(set(words_in_tags))  # no word repeated across phrases
