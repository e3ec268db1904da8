"""One paper, one record, whatever path it came in by (both store backends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.ingest import FileReport, ingest_files, store_papers
from assistant.models import Paper, Status
from assistant.store import Store
from conftest import shared


def put(store: Store, *papers: Paper) -> FileReport:
    report = FileReport(path="test")
    store_papers(store, list(papers), report)
    return report


ABSTRACT = "We study adapters for transfer across many languages with small parameter budgets."


def test_arxiv_versions_doi_and_title_all_land_on_one_record(store: Store) -> None:
    put(
        store,
        Paper.create(title="Adapters for Multilingual Transfer", abstract=ABSTRACT, arxiv_id="2401.01234v1"),
    )
    r = put(
        store,
        Paper.create(title="Adapters for multilingual transfer", arxiv_id="arXiv:2401.01234v3", venue="ACL"),
        Paper.create(title="Adapters for Multilingual Transfer.", doi="10.18653/v1/2024.acl-long.7"),
    )
    assert (r.new, r.merged + r.unchanged) == (0, 2)
    (item,) = list(store.iter_all())
    assert item.paper.id == "arxiv:2401.01234"
    assert (item.paper.venue, item.paper.doi) == ("ACL", "10.18653/v1/2024.acl-long.7")


def test_doi_record_later_found_on_arxiv_keeps_its_id_and_decision(store: Store) -> None:
    put(store, Paper.create(title="Sparse Mixture Routing", doi="10.1234/smr"))
    store.update_decision("doi:10.1234/smr", status=Status.ACCEPTED, note="key paper")
    put(
        store,
        Paper.create(
            title="Sparse Mixture Routing", arxiv_id="2402.00001", doi="10.1234/SMR", abstract=ABSTRACT
        ),
    )
    (item,) = list(store.iter_all())
    assert item.paper.id == "doi:10.1234/smr" and item.paper.arxiv_id == "2402.00001"
    assert item.decision.status is Status.ACCEPTED and item.decision.note == "key paper"
    assert item.paper.abstract == ABSTRACT


def test_near_identical_titles_merge_but_similar_ones_stay_apart(store: Store) -> None:
    put(
        store,
        Paper.create(
            title="BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding"
        ),
    )
    r = put(
        store,
        Paper.create(title="BERT: Pretraining of deep bidirectional transformers for language understanding"),
        Paper.create(
            title="{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understandings"
        ),
        Paper.create(title="BERT: Pre-training of Deep Bidirectional Transformers for Language Generation"),
    )
    assert r.new == 1
    assert store.count() == 2


def test_same_title_but_different_arxiv_ids_are_different_papers(store: Store) -> None:
    put(store, Paper.create(title="Introduction to the Special Issue on Parsing", arxiv_id="2301.00001"))
    put(store, Paper.create(title="Introduction to the Special Issue on Parsing", arxiv_id="2302.00002"))
    assert store.count() == 2


def test_duplicates_inside_one_batch_are_merged(store: Store) -> None:
    r = put(
        store,
        Paper.create(title="Routing Dynamics in Mixture of Experts", doi="10.5555/rd"),
        Paper.create(title="Routing dynamics in mixture-of-experts", arxiv_id="2405.00005", doi="10.5555/rd"),
        Paper.create(title="Routing Dynamics in Mixture of Experts", arxiv_id="2405.00005v2"),
    )
    assert r.new == 1 and store.count() == 1


PREPRINT_DOI, PUBLISHED_DOI = "10.48550/arXiv.2604.00007", "10.1162/tacl_a_00701"


@pytest.mark.parametrize("preprint_first", [True, False])
def test_the_publisher_doi_wins_over_the_arxiv_doi_whichever_comes_first(
    store: Store, preprint_first: bool
) -> None:
    """A preprint from arXiv (with arXiv's DOI) and its published version (the journal's DOI) are
    one paper: it keeps the publisher's DOI and the arXiv id, in either order of arrival."""
    title = "Sparse Adapters for Low-Resource Machine Translation"
    preprint = Paper.create(title=title, doi=PREPRINT_DOI, abstract=ABSTRACT)
    published = Paper.create(title=title, doi=PUBLISHED_DOI, venue="TACL")
    first, second = (preprint, published) if preprint_first else (published, preprint)
    merged = first.merged_with(second)
    assert (merged.doi, merged.arxiv_id) == (PUBLISHED_DOI, "2604.00007")
    put(store, first)
    put(store, second)
    (item,) = list(store.iter_all())
    assert (item.paper.doi, item.paper.arxiv_id, item.paper.venue) == (PUBLISHED_DOI, "2604.00007", "TACL")
    # A record that names the preprint only by its arXiv DOI still gives its arXiv id.
    bare = Paper(id="arxiv:2604.00007", title=title, doi=PREPRINT_DOI.lower())
    for a, b in ((bare, published), (published, bare)):
        assert (a.merged_with(b).doi, a.merged_with(b).arxiv_id) == (PUBLISHED_DOI, "2604.00007")
    # Two publisher DOIs: the first stays, as before.
    other = Paper.create(title=title, doi="10.1162/tacl_a_00999")
    assert published.merged_with(other).doi == PUBLISHED_DOI


def first_blocks(name: str, blocks: int, tmp_path: Path) -> Path:
    """The head of a search listing page (two lines of navigation, then title/abstract pairs)."""
    lines = shared("listings", name).read_text(encoding="utf-8").splitlines()
    out = tmp_path / name
    out.write_text("\n".join(lines[: 2 + 2 * blocks]) + "\n", encoding="utf-8")
    return out


def test_three_different_two_heads_papers_and_reimport_adds_nothing(store: Store, tmp_path: Path) -> None:
    page = first_blocks("hf-papers-heads.txt", 25, tmp_path)
    (first,) = ingest_files(store, [page])
    assert first.new == 25 and not first.skipped
    heads = [i for i in store.iter_all() if i.paper.title.lower().startswith("two heads are better than one")]
    assert len(heads) == 3
    (again,) = ingest_files(store, [page])
    assert (again.new, again.merged, again.unchanged) == (0, 0, 25)


def test_the_same_paper_on_two_pages_is_merged(store: Store, tmp_path: Path) -> None:
    reports = ingest_files(
        store,
        [
            first_blocks("hf-papers-heads.txt", 25, tmp_path),
            first_blocks("hf-papers-multitask.txt", 25, tmp_path),
        ],
    )
    # "Does Time Have Its Place? ..." is on both pages: merged (its sources grow), not added
    assert (reports[1].new, reports[1].merged) == (24, 1)
    assert store.count() == 49


def test_titles_that_differ_by_a_number_are_different_papers(store: Store) -> None:
    """Parts, sequels, years and versions: a fuzzy match must not merge them."""
    titles = [
        "Findings of the Shared Task on Multilingual Coreference Resolution 2022",
        "Findings of the Shared Task on Multilingual Coreference Resolution 2023",
        "Scaling Instruction-Finetuned Language Models Across Many Tasks, Part II",
        "Scaling Instruction-Finetuned Language Models Across Many Tasks, Part III",
        "Overview of the Benchmark for Long Context Retrieval Models v1.5",
        "Overview of the Benchmark for Long Context Retrieval Models v2.5",
        "Large Language Model Agents Playing Board Games Episode 2",
        "Large Language Model Agents Playing Board Games Episode 3",
    ]
    put(store, *(Paper.create(title=t) for t in titles))
    assert store.count() == len(titles)
    # Spelling still merges when the numbers agree.
    r = put(
        store, Paper.create(title="Findings of the shared task on multilingual co-reference resolution 2023")
    )
    assert r.new == 0 and store.count() == len(titles)


def test_a_merge_is_shown_and_can_be_split_off_again(store: Store, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assistant.cli import app

    put(
        store,
        Paper.create(
            title="Graph Neural Networks for Molecular Property Prediction in Drug Discovery",
            doi="10.1234/gnn",
        ),
    )
    store.update_decision("doi:10.1234/gnn", status=Status.ACCEPTED, note="mine")
    # A different paper whose title is one letter away: merged by similar title.
    r = put(
        store,
        Paper.create(
            title="Graph Neural Network for Molecular Property Prediction in Drug Discovery",
            arxiv_id="2405.00001",
            abstract=ABSTRACT,
            sources=["feed"],
        ),
    )
    assert r.new == 0 and store.count() == 1
    merged = store.get("doi:10.1234/gnn")
    assert merged is not None and merged.paper.arxiv_id == "2405.00001" and merged.paper.abstract == ABSTRACT
    log = store.merge_log("doi:10.1234/gnn")
    assert log is not None and [e.how for e in log.entries] == ["similar title (99% alike)"]

    runner = CliRunner()
    env = {"TRIAGE_STORE": str(tmp_path / "unused"), "COLUMNS": "200"}
    if store.lock_path is not None and store.lock_path.name == "triage-write.lock":
        env["TRIAGE_STORE"] = str(store.lock_path.parent)
    else:
        return  # the CLI half needs the embedded store's path; the server half is checked below
    shown = runner.invoke(app, ["show", "doi:10.1234/gnn"], env=env)
    assert "merged records" in shown.output and "arxiv:2405.00001" in shown.output
    assert "similar title (99% alike)" in shown.output
    result = runner.invoke(app, ["split", "doi:10.1234/gnn"], env=env)
    assert result.exit_code == 0, result.output
    assert store.count() == 2
    kept, off = store.get("doi:10.1234/gnn"), store.get("arxiv:2405.00001")
    assert kept is not None and off is not None
    assert (kept.paper.arxiv_id, kept.paper.abstract) == (None, "")
    assert kept.paper.title == "Graph Neural Networks for Molecular Property Prediction in Drug Discovery"
    assert kept.decision.status is Status.ACCEPTED and kept.decision.note == "mine"
    assert off.decision.status is Status.NEW and off.paper.abstract == ABSTRACT
    assert store.merge_log("doi:10.1234/gnn") is None
    # Imported again, the split-off record goes to its own paper.
    put(
        store,
        Paper.create(
            title="Graph Neural Network for Molecular Property Prediction in Drug Discovery",
            arxiv_id="2405.00001",
        ),
    )
    assert store.count() == 2
    again = runner.invoke(app, ["split", "doi:10.1234/gnn"], env=env)
    assert again.exit_code == 1 and "nothing was merged" in again.output


def test_split_in_the_store_on_both_backends(store: Store) -> None:
    put(store, Paper.create(title="Contrastive Learning of Sentence Embeddings at Scale", doi="10.1234/a"))
    put(store, Paper.create(title="Contrastive Learning of Sentence Embedding at Scale", doi="10.1234/b"))
    # Different DOIs conflict: no merge.
    assert store.count() == 2
    put(
        store,
        Paper.create(title="Contrastive learning of sentence embeddings at scale.", url="https://x.org/c"),
    )
    log = store.merge_log("doi:10.1234/a")
    assert log is not None and log.entries[0].how == "same title"
    kept, off = store.split("doi:10.1234/a", 1)
    assert kept.url is None and off.url == "https://x.org/c" and store.count() == 3
