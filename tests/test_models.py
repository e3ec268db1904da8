from __future__ import annotations

import pytest
from pydantic import ValidationError

from assistant.models import Paper, normalize_title, paper_id_for


@pytest.mark.parametrize(
    "raw",
    [
        "2401.01234",
        "2401.01234v3",
        "arXiv:2401.01234v1",
        "https://arxiv.org/abs/2401.01234v2",
        "https://arxiv.org/pdf/2401.01234.pdf",
        "10.48550/arXiv.2401.01234",
    ],
)
def test_every_spelling_of_an_arxiv_id_gives_one_paper_id(raw: str) -> None:
    assert paper_id_for(arxiv_id=raw) == "arxiv:2401.01234"


def test_old_style_arxiv_ids_are_kept_whole() -> None:
    assert paper_id_for(arxiv_id="hep-th/9901001v2") == "arxiv:hep-th/9901001"
    assert paper_id_for(arxiv_id="math.GT/0309136") == "arxiv:math.GT/0309136"


def test_doi_is_lowercased_and_unwrapped() -> None:
    assert (
        paper_id_for(doi="https://doi.org/10.18653/V1/2023.ACL-LONG.1") == "doi:10.18653/v1/2023.acl-long.1"
    )
    assert paper_id_for(doi="doi:10.1000/XYZ") == "doi:10.1000/xyz"


def test_arxiv_doi_counts_as_arxiv() -> None:
    assert paper_id_for(doi="10.48550/arXiv.2310.00001") == "arxiv:2310.00001"


def test_arxiv_wins_over_doi_and_title() -> None:
    assert paper_id_for(arxiv_id="2401.01234", doi="10.1/x", title="T") == "arxiv:2401.01234"


def test_title_id_ignores_case_punctuation_latex_and_accents() -> None:
    a = paper_id_for(title="Attention Is All You Need!")
    b = paper_id_for(title="  attention is ALL you need ")
    c = paper_id_for(title=r"Attention is \emph{All} You Need")
    assert a == b == c and a.startswith("title:")
    assert normalize_title("Bražinskas: Café") == "brazinskas cafe"
    assert paper_id_for(title="Two Heads Are Better Than One: A") != paper_id_for(
        title="Two Heads Are Better Than One: B"
    )


def test_blank_title_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Paper.create(title="   ")


def test_merge_keeps_the_richer_fields_and_unions_sources() -> None:
    a = Paper.create(title="A Study", abstract="short", authors=["X"], sources=["bib:a"], year=2020)
    b = Paper.create(
        title="A study",
        abstract="a much longer abstract",
        authors=["X", "Y"],
        sources=["json:b"],
        venue="ACL",
        extra={"k": 1},
    )
    m = a.merged_with(b)
    assert m.id == a.id
    assert m.abstract == "a much longer abstract"
    assert m.authors == ["X", "Y"]
    assert m.sources == ["bib:a", "json:b"]
    assert (m.year, m.venue, m.extra) == (2020, "ACL", {"k": 1})
    assert m.merged_with(b) == m
