"""Real files from real tools (`../shared/fixtures/corpus/` and `realworld/`: Web of Science,
Scopus, MEDLINE, PubMed, Zotero, Mendeley, JabRef, ADS, biblatex's own examples, Manubot):
no file is lost, nearly every entry an independent parser reads is imported, and every export
of them compiles in biber + biblatex, BibTeX and pandoc --citeproc without an error the source
file does not cause itself. Where `../shared` is absent these skip with the reason."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from corpus_check import CORPUS_DIRS, FileCheck, check, corpus_files
from tex_consumers import require_tools

FILES = corpus_files()
pytestmark = pytest.mark.skipif(
    not FILES, reason=f"the shared corpus is not here ({', '.join(str(d) for d in CORPUS_DIRS)})"
)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FileCheck]:
    require_tools()
    root = tmp_path_factory.mktemp("corpus")
    # The largest files first, so that the long ones do not end the run on one core alone.
    largest_first = sorted(FILES, key=lambda p: p.stat().st_size, reverse=True)
    with ThreadPoolExecutor(2) as pool:
        results = {r.name: r for r in pool.map(lambda p: check(p, root / p.stem), largest_first)}
    return {p.name: results[p.name] for p in FILES}


def test_the_corpus_is_all_here() -> None:
    """Thirteen corpus files and the realworld exports: a fixture folder that lost files would
    make the targets below easy."""
    names = {p.name for p in FILES}
    assert len([n for n in names if n.startswith(("bib_", "ris_", "csljson_"))]) >= 13, sorted(names)


def test_no_file_is_lost_and_nearly_every_entry_imports(checked: dict[str, FileCheck]) -> None:
    assert {name: c.lost for name, c in checked.items() if c.lost} == {}
    independent = sum(c.independent for c in checked.values())
    imported = sum(min(c.imported, c.independent) for c in checked.values())
    counts = {n: (c.imported, c.independent, c.skipped) for n, c in checked.items()}
    assert imported / independent >= 0.995, counts
    for name, c in checked.items():
        assert c.share >= 0.97, (name, c.imported, c.independent, c.skipped)


def test_every_export_compiles_in_its_consumers(checked: dict[str, FileCheck]) -> None:
    errors = {name: c.errors for name, c in checked.items() if c.export_errors}
    assert errors == {}


def test_a_skipped_entry_says_where_and_why(checked: dict[str, FileCheck]) -> None:
    for name, c in checked.items():
        for line in c.skipped:
            path, _, rest = line.partition(": ")
            assert name in path, line
            assert "Error" not in rest.split(":")[0], line  # words, not an exception's name
