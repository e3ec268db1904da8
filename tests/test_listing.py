"""Listing pages copied from the web, as they are and as they vary."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from assistant.errors import InputError
from assistant.ingest import detect_format
from assistant.ingest.listing import parse_listing, split_glued_title
from conftest import SHARED

LISTINGS = SHARED / "listings"
if not LISTINGS.is_dir():
    pytest.skip(f"needs {LISTINGS}: the shared fixtures beside the project", allow_module_level=True)
TODAY = date(2026, 11, 22)


def parse(text: str, name: str = "page.txt"):  # type: ignore[no-untyped-def]
    return parse_listing(Path(name), text, today=TODAY)


def test_profile_page_every_paper_with_fields_split() -> None:
    result = parse((LISTINGS / "s2-profile-mosbach.txt").read_text(encoding="utf-8"))
    assert len(result.papers) == 38 and not result.errors
    first, second = result.papers[0], result.papers[1]
    assert (
        first.title == "Measuring Causal Effects of Data Statistics on Language Model's `Factual' Predictions"
    )
    assert first.authors == ["Yanai Elazar", "Nora Kassner", "Shauli Ravfogel"]
    assert first.extra == {"affiliations": ["cmu"], "authors_truncated": True}
    assert (first.date, first.year, first.categories) == ("2022-07-28", 2022, ["CL"])
    assert first.abstract.startswith("Large amounts of training data")
    assert second.extra["page_score"] == 89.7 and second.extra["has_code"] is True
    assert second.date == "2026-05-28"  # no year on the page: the latest such date before the import


def test_titov_profile_all_fifty() -> None:
    result = parse((LISTINGS / "s2-profile-titov.txt").read_text(encoding="utf-8"))
    assert len(result.papers) == 50
    assert result.papers[1].extra["affiliations"] == ["microsoft-research", "mit"]
    assert all(p.abstract and p.authors for p in result.papers)


@pytest.mark.parametrize("name,count", [("hf-papers-heads.txt", 266), ("hf-papers-multitask.txt", 202)])
def test_search_pages_titles_and_abstracts(name: str, count: int) -> None:
    result = parse((LISTINGS / name).read_text(encoding="utf-8"), name)
    assert len(result.papers) == count
    assert not any(p.title.startswith("Subscribe") for p in result.papers)
    assert all(len(p.abstract) > 100 for p in result.papers)
    heads = [p for p in result.papers if p.title.lower().startswith("two heads are better than one")]
    if name == "hf-papers-heads.txt":
        assert len(heads) == 3 and len({p.id for p in heads}) == 3


def test_date_without_year_later_in_the_year_means_last_year() -> None:
    page = "CLDec 13\nA Paper About Things\n\nAnn Lee, Bo Chen\n\n" + "Long abstract text. " * 10
    assert parse(page).papers[0].date == "2025-12-13"


BLOCK = (
    "{meta}\n{title}{glue}Ann Lee, Bo Chen, Carla Diaz et al. · mit\n\n"
    "We study something important across many languages and report strong results "
    "on every benchmark we tried.\n"
)


@pytest.mark.parametrize("glue", ["", " "])
def test_authors_glued_onto_the_title_line(glue: str) -> None:
    page = BLOCK.format(meta="CLJan 5, 2024", title="Sparse Adapters for Multilingual Transfer", glue=glue)
    (paper,) = parse(page).papers
    assert paper.title == "Sparse Adapters for Multilingual Transfer"
    assert paper.authors == ["Ann Lee", "Bo Chen", "Carla Diaz"]
    assert paper.extra["affiliations"] == ["mit"]


def test_title_with_commas_is_not_mistaken_for_authors() -> None:
    title, authors = split_glued_title("Sparse, Dense, and Attentional Representations for Text Retrieval")
    assert authors is None and title.startswith("Sparse, Dense")


def test_no_blank_lines_repeated_blocks_missing_header_and_navigation() -> None:
    text = (LISTINGS / "s2-profile-mosbach.txt").read_text(encoding="utf-8")
    body = text[text.index("CLJul 28, 2022") :]  # starts mid-page, no header
    squeezed = "\n".join(line for line in body.splitlines() if line.strip())  # no blank lines
    page = squeezed + "\n" + squeezed[: squeezed.index("IRApr 6, 2022")] + "\nLoad more\nPage 2 of 4\n"
    result = parse(page)
    assert len(result.papers) == 38
    assert result.papers[-1].abstract.endswith(".") and "Load more" not in result.papers[-1].abstract


def test_detected_by_content_and_empty_page_is_an_error() -> None:
    for name in ("s2-profile-titov.txt", "hf-papers-heads.txt"):
        assert detect_format(Path(name), (LISTINGS / name).read_text(encoding="utf-8")) == "listing"
    with pytest.raises(InputError, match="no papers found"):
        parse("Get trending papers in your email inbox!\nSubscribe\n")


def test_a_markdown_file_is_not_taken_for_a_listing_page(tmp_path: Path) -> None:
    """A README with a table reads like title-then-abstract pairs: it used to import its table
    rows and sentences as papers. It is an error naming the file, and nothing is imported."""
    from assistant.errors import InputError
    from assistant.ingest import parse_file

    readme = tmp_path / "README.md"
    readme.write_text(
        "# Tool\n\n| key | what it does in the review screen of the tool |\n|---|---|\n"
        "| `a` | accept |\n"
        "| `x` | reject the highlighted paper and move on to the next undecided paper in the queue, "
        "or to the previous one when it is the last |\n"
        "| `m` | maybe |\n"
        "| `s` | star the highlighted paper and keep it where it is in the queue, so that it can be "
        "found again under the starred view |\n\n"
        "a second run on an unchanged store makes no call,\n"
        "because every assessment is cached by its key and only missing or stale ones are made again "
        "when the agenda, the prompts or the paper's own text have changed since it was made,\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        parse_file(readme, "listing")
    assert caught.value.path == str(readme) and "does not read as a listing page" in str(caught.value)
