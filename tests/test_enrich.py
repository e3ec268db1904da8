"""`triage enrich`: missing abstracts and fields from Semantic Scholar's batch endpoint, arXiv's
id list and Semantic Scholar's title match, served from 127.0.0.1 (the fake provider of
test_feeds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_feeds import Provider, Reply, Request, arxiv_day, cli, put, rss_toc, serve

from assistant.agenda import load_agenda
from assistant.feeds.enrich import enrich
from assistant.models import Paper
from assistant.store import Store
from assistant.triage.batch import tag_offline
from assistant.triage.keys import is_stale

BATCH = "/s2/graph/v1/paper/batch"
MATCH = "/s2/graph/v1/paper/search/match"
TACL_ABSTRACT = (
    "We survey adapter-based cross-lingual transfer, comparing language, task and invertible adapters."
)

S2_PAPERS: dict[str, dict[str, Any]] = {
    # Semantic Scholar knows the preprint, without an abstract (publishers withhold many).
    "ARXIV:2604.00001": {
        "paperId": "0f40b1f08821e22e859c6050916cec3667778613",
        "externalIds": {"ArXiv": "2604.00001", "DOI": "10.18653/v1/2026.acl-long.12", "CorpusId": 255313304},
        "title": "Adapters for Multilingual Transfer",
        "abstract": None,
        "venue": "Annual Meeting of the Association for Computational Linguistics",
        "year": 2026,
        "publicationDate": None,
        "authors": [],
    },
    "DOI:10.1162/tacl_a_00650": {
        "paperId": "a98db155965cf88ba4616831a2b720ff9f9a08f9",
        "externalIds": {"DOI": "10.1162/tacl_a_00650", "CorpusId": 270112233},
        "title": "Cross-Lingual Transfer with Language Adapters: A Survey",
        "abstract": TACL_ABSTRACT,
        "venue": "Transactions of the Association for Computational Linguistics",
        "year": 2025,
        "publicationDate": "2025-11-02",
        "authors": [{"authorId": "1741101", "name": "Wei Chen"}],
    },
}
MATCHED = {
    "paperId": "8a880c006894e11e8c852659f3a2ceddb0d2ab11",
    "externalIds": {"ArXiv": "2603.09999", "CorpusId": 268999001},
    "title": "Parameter-efficient fine-tuning without tears",
    "abstract": "A practical guide to parameter-efficient fine-tuning of language models.",
    "year": 2026,
    "authors": [{"authorId": "49889487", "name": "Lena Hoffmann"}],
    "matchScore": 212.4,
}


def batch_answer(request: Request) -> Reply:
    return Reply(200, [S2_PAPERS.get(i) for i in request.body["ids"]])


def match_answer(request: Request) -> Reply:
    if request.params["query"][0].lower().startswith("parameter-efficient"):
        return Reply(200, {"data": [MATCHED]})
    return Reply(404, {"error": "Title match not found"})


def arxiv_answer(request: Request) -> Reply:
    ids = request.params["id_list"][0].split(",")
    known = [i for i in ids if i == "2604.00001"]
    return Reply(200, arxiv_day(known, title="Adapters for Multilingual Transfer"))


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serve() as served:
        yield served


@pytest.fixture
def papers(provider: Provider, tmp_path: Path) -> tuple[Provider, Store]:
    provider.routes.update({BATCH: batch_answer, MATCH: match_answer, "/api/query": arxiv_answer})
    store = Store.open(provider.settings(tmp_path))
    put(
        store,
        Paper.create(title="Adapters for Multilingual Transfer", arxiv_id="2604.00001"),
        Paper.create(
            title="Cross-Lingual Transfer with Language Adapters: A Survey", doi="10.1162/tacl_a_00650"
        ),
        Paper.create(title="Parameter-Efficient Fine-Tuning Without Tears"),
        Paper.create(title="A Paper Nobody Indexed", arxiv_id="2604.00002"),
        Paper.create(title="Already Complete", abstract="It has an abstract.", arxiv_id="2604.00003"),
    )
    return provider, store


def test_missing_abstracts_and_fields_are_filled(papers: tuple[Provider, Store], tmp_path: Path) -> None:
    provider, store = papers
    agenda_file = tmp_path / "agenda.md"
    agenda_file.write_text("## Adapters\nParameter-efficient adapters for transfer.\n", encoding="utf-8")
    agenda = load_agenda(agenda_file)
    tag_offline(store, agenda)
    before = store.embeddings(["arxiv:2604.00001"])["arxiv:2604.00001"]
    report = enrich(store, provider.settings(tmp_path))
    assert (report.candidates, report.enriched, report.not_found, report.errors) == (4, 3, 1, [])
    assert report.filled["abstract"] == 3
    pre = store.get("arxiv:2604.00001")
    assert pre is not None
    assert pre.paper.abstract.startswith("Deep Learning (DL) has revolutionized")  # from arXiv
    assert pre.paper.doi == "10.18653/v1/2026.acl-long.12"  # from Semantic Scholar
    assert pre.paper.venue == "Annual Meeting of the Association for Computational Linguistics"
    tacl = store.get("doi:10.1162/tacl_a_00650")
    assert tacl is not None and tacl.paper.abstract == TACL_ABSTRACT and tacl.paper.authors == ["Wei Chen"]
    matched = store.get(Paper.create(title="Parameter-Efficient Fine-Tuning Without Tears").id)
    assert matched is not None and matched.paper.arxiv_id == "2603.09999"
    assert matched.paper.title == "Parameter-Efficient Fine-Tuning Without Tears"  # its own title stays
    # A new abstract is a new text: embedded again, and its assessment is stale until tagged.
    assert store.embeddings(["arxiv:2604.00001"])["arxiv:2604.00001"] != before
    assert is_stale(pre, agenda, None)
    complete = store.get("arxiv:2604.00003")
    assert complete is not None and not is_stale(complete, agenda, None)
    (request,) = provider.to(BATCH)
    assert request.body["ids"] == ["ARXIV:2604.00001", "DOI:10.1162/tacl_a_00650", "ARXIV:2604.00002"]
    assert provider.to("/api/query")[0].params["id_list"] == ["2604.00001,2604.00002"]


def test_a_title_match_that_is_another_paper_is_not_taken(
    papers: tuple[Provider, Store], tmp_path: Path
) -> None:
    provider, store = papers
    put(store, Paper.create(title="Parameter-Efficient Fine-Tuning Without Any Tears At All Today"))
    enrich(store, provider.settings(tmp_path))
    item = store.get(Paper.create(title="Parameter-Efficient Fine-Tuning Without Any Tears At All Today").id)
    assert item is not None and item.paper.abstract == "" and item.paper.arxiv_id is None


def test_papers_not_found_are_not_asked_again_for_a_week(
    papers: tuple[Provider, Store], tmp_path: Path
) -> None:
    provider, store = papers
    settings = provider.settings(tmp_path)
    enrich(store, settings)
    asked = len(provider.requests)
    again = enrich(store, settings)
    assert (again.candidates, again.skipped_recent, again.enriched) == (1, 1, 0)
    assert len(provider.requests) == asked
    retried = enrich(store, settings, retry=True)
    assert retried.not_found == 1 and len(provider.requests) > asked


def test_429_is_retried_and_a_dead_endpoint_fails_with_one_line(
    papers: tuple[Provider, Store], tmp_path: Path
) -> None:
    provider, store = papers
    provider.routes[BATCH] = [
        Reply(429, {"message": "Too Many Requests"}, {"Retry-After": "0"}),
        Reply(500, ""),
    ]
    report = enrich(store, provider.settings(tmp_path), titles=False)
    assert report.errors == [
        f"the Semantic Scholar API kept answering HTTP 500 Internal Server Error from {provider.url}{BATCH}; "
        "try again later"
    ]
    assert report.enriched == 0 and len(provider.to(BATCH)) == 5  # one try and four retries
    item = store.get("arxiv:2604.00001")
    assert item is not None and item.paper.abstract == ""
    result = cli(provider, "enrich", "--no-titles", TRIAGE_STORE=str(tmp_path / "store"))
    assert result.exit_code == 1 and "kept answering HTTP 500" in result.output
    assert "Traceback" not in result.output


def test_cli_enrich_and_fetch_with_enrich(provider: Provider) -> None:
    provider.routes.update({BATCH: batch_answer, MATCH: match_answer, "/api/query": arxiv_answer})
    provider.routes["/rss"] = [Reply(200, rss_toc())]
    cli(provider, "feed", "add", "tacl", "--rss", f"{provider.url}/rss")
    result = cli(provider, "fetch", "--enrich")
    assert result.exit_code == 0, result.output
    assert "Enriched 0 of 0 papers lacking an abstract" in result.output  # the TOC has abstracts
    store = Store.open(provider.settings(Path.cwd()))  # the store the command uses
    put(
        store,
        Paper.create(
            title="Cross-Lingual Transfer with Language Adapters: A Survey", doi="10.1162/tacl_a_00650"
        ),
    )
    result = cli(provider, "enrich", "--missing", "all")
    assert result.exit_code == 0, result.output
    assert "Enriched 1 of 3 papers lacking a field" in result.output


def test_ingest_enrich_fills_the_abstract_of_a_bibtex_entry(provider: Provider, tmp_path: Path) -> None:
    """A reference manager's entry often has no abstract: `ingest --enrich` looks it up on the way
    in, so the engines judge the abstract and not the title alone."""
    provider.routes.update({BATCH: batch_answer, MATCH: match_answer, "/api/query": arxiv_answer})
    bib = tmp_path / "library.bib"
    bib.write_text(
        "@article{chen2025,\n  title = {Cross-Lingual Transfer with Language Adapters: A Survey},\n"
        "  doi = {10.1162/tacl_a_00650},\n  year = {2025}\n}\n",
        encoding="utf-8",
    )
    result = cli(provider, "ingest", str(bib), "--enrich")
    assert result.exit_code == 0, result.output
    assert "Enriched 1 of 1 papers lacking an abstract" in result.output
    store = Store.open(provider.settings(Path.cwd()))
    (item,) = list(store.iter_all())
    assert item.paper.abstract == TACL_ABSTRACT
