from __future__ import annotations

import numpy as np
import pytest

from assistant.agenda import parse_agenda
from assistant.cache import cache_file
from assistant.config import Settings
from assistant.models import Paper
from assistant.store import Store
from assistant.triage import lexicon
from assistant.triage.batch import tag_offline
from assistant.triage.offline import Corpus, keyphrases, summarize
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
    # LaTeX markup in an abstract does not reach the summary.
    latex = "T\n\nWe propose \\textit{adaptive fine-tuning} for \\textbf{ALPS} on ten languages."
    assert summarize(latex, corpus) == "We propose adaptive fine-tuning for ALPS on ten languages."
    assert np.isfinite(corpus.idf("languag"))


def test_tags_are_the_titles_key_phrases_not_its_verbs(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    tag_offline(store, AGENDA)
    by_title = {i.paper.title: i.assessment for i in store.iter_all()}
    routing = next(a for t, a in by_title.items() if t.startswith("Leveraging Routing Dynamics"))
    assert routing is not None
    assert "routing dynamics" in routing.tags and "mixture-of-experts" in routing.tags
    assert not any("leveraging" in tag for tag in routing.tags)
    protein = next(a for t, a in by_title.items() if t.startswith("Diffusion models for protein"))
    assert protein is not None and protein.tags[0] == "protein structure"  # the matching topic first
    for assessment in by_title.values():
        assert assessment is not None and 1 <= len(assessment.tags) <= 5
        words_in_tags = [w for tag in assessment.tags[1:] for w in tag.split()]
        assert len(words_in_tags) == len(set(words_in_tags))  # no word repeated across phrases


def test_key_phrases_recur_in_the_abstract_and_survive_latex_and_accents() -> None:
    docs = [r["title"] + "\n\n" + r["abstract"] for r in sample_records()]
    doc = (
        "Schrödinger Bridges for \\textbf{D}ual-\\textbf{H}ead Optimization: Leveraging Entity Linking\n\n"
        "We study entity linking with Schrödinger bridges. Entity linking improves; "
        "dual-head optimization helps."
    )
    corpus = Corpus.build([str(i) for i in range(len(docs) + 1)], [*docs, doc])
    ranked = keyphrases(doc, corpus)
    key = [phrase for phrase, is_key in ranked if is_key]
    assert {"entity linking", "schrödinger bridges", "dual-head optimization"} <= set(key)
    assert not any(p.startswith("leveraging") for p, _ in ranked)
    assert all("textbf" not in p for p, _ in ranked)
    # The phrase ranks above its own words: "entity linking" before "linking".
    assert key.index("entity linking") < key.index("linking") if "linking" in key else True


def test_a_headless_agenda_gives_no_placeholder_tag(embedded_settings: Settings) -> None:
    store = _store(embedded_settings)
    tag_offline(store, parse_agenda("protein structure prediction and design\n"))
    tags = [tag for item in store.iter_all() if item.assessment for tag in item.assessment.tags]
    assert tags and "agenda" not in tags


def test_the_top_of_the_queue_keeps_its_order(embedded_settings: Settings) -> None:
    """Papers that all match a topic fully used to tie at 10.0 and fall back to file order:
    ranking is on the unclipped score, while the topic scores shown stay 0-10."""
    store = Store.open(embedded_settings)
    same = "Attention heads in transformer language models: induction heads, retrieval heads."
    papers = [
        Paper.create(title=f"Attention heads study {i}", abstract=same + " More attention heads." * (i % 4))
        for i in range(8)
    ]
    papers += [
        Paper.create(**{k: v for k, v in r.items() if k in ("title", "abstract")}) for r in sample_records(20)
    ]
    store.upsert_papers(papers)
    agenda = parse_agenda("## Attention heads\nAttention heads, induction heads and retrieval heads.\n")
    tag_offline(store, agenda)
    items = sorted(store.iter_all(), key=lambda i: -i.assessment.relevance)  # type: ignore[union-attr]
    top = [i.assessment.relevance for i in items[:8]]  # type: ignore[union-attr]
    assert len(set(top)) == len(top), top  # no ties
    assert all(0 <= r < 10 for r in top)
    assert all(0 <= t.score <= 10 for i in items for t in i.assessment.topics)  # type: ignore[union-attr]
    assert items[0].assessment.topics[0].score == 10  # type: ignore[union-attr]


def test_an_agenda_phrase_counts_as_a_phrase() -> None:
    """Pairs of adjacent words are matched too: the phrase beats the same words apart."""
    docs = [
        "Induction heads form in attention layers of small transformers.",
        "Attention to heads of state: induction of political leaders in the news.",
        *[f"Unrelated paper number {i} about protein folding and chemistry." for i in range(10)],
    ]
    corpus = Corpus.build([str(i) for i in range(len(docs))], docs)
    scores = corpus.scores("induction heads")
    assert scores[0] > scores[1] > 0


def _relevance(store: Store) -> dict[str, float]:
    return tag_offline(store, AGENDA, rank_all=True, write=False).relevance


def test_a_pass_reads_only_the_texts_it_has_not_seen_and_scores_as_a_full_pass(
    embedded_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lexical statistics of the store are kept by text between passes: after an import,
    an edited abstract and a deletion, only the new texts are read again, and every paper's
    score is what a pass reading every text gives."""
    store = _store(embedded_settings)
    tag_offline(store, AGENDA)
    papers = {p.paper.title: p.paper for p in store.iter_all()}
    speech = papers["Streaming speech recognition for audio assistants"]
    store.upsert_papers(
        [
            speech.model_copy(
                update={"abstract": f"{speech.abstract} It runs on a phone, in twelve languages."}
            ),
            Paper.create(
                title="Folding proteins with language models", abstract="Protein structure from sequence."
            ),
            Paper.create(
                title="Denoising audio for speech", abstract="Speech enhancement with audio priors."
            ),
        ]
    )
    store.delete_papers([papers["What protein designers are interested in"].id])
    read: list[str] = []
    real_stems = lexicon.stems
    monkeypatch.setattr(lexicon, "stems", lambda text: read.append(text) or real_stems(text))
    kept = _relevance(store)
    assert sorted(t.split("\n")[0] for t in read) == [
        "Denoising audio for speech",
        "Folding proteins with language models",
        "Streaming speech recognition for audio assistants",
    ]
    read.clear()
    assert _relevance(store) == kept  # nothing new: nothing read
    assert read == []
    lexicon_file = cache_file("lexicon", store.data_key)
    lexicon_file.unlink()
    assert _relevance(store) == kept  # every text read again: the same scores
    assert len(read) == 34


def test_a_damaged_or_unwritable_lexicon_file_costs_a_full_pass_and_nothing_else(
    embedded_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(embedded_settings)
    expected = _relevance(store)
    lexicon_file = cache_file("lexicon", store.data_key)
    lexicon_file.write_bytes(lexicon_file.read_bytes()[:-100])
    assert _relevance(store) == expected
    read: list[str] = []
    real_stems = lexicon.stems
    monkeypatch.setattr(lexicon, "stems", lambda text: read.append(text) or real_stems(text))
    assert _relevance(store) == expected and read == []  # the damaged file was written anew
    # Rows made by another engine, release or stemmer are not used.
    made_by = lexicon._MADE_BY
    monkeypatch.setattr(lexicon, "_MADE_BY", (*made_by[:2], "offline-0", *made_by[3:]))
    assert _relevance(store) == expected and len(read) == 33
    read.clear()
    lexicon_file.unlink()
    lexicon_file.mkdir()  # where the file goes, something that is not one
    assert _relevance(store) == expected  # a cache that cannot be read or written is passed over
    assert len(read) == 33
