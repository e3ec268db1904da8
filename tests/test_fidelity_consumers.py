"""Every export compiles in its real consumers: biblatex + biber, BibTeX with plain and plainnat
(pdflatex), pandoc --citeproc. One document per export file, citing all its entries.

A .bib source is compiled too: the export may only warn where the source itself warns (0
errors always, even where the source had some). Exports of other sources may warn only that
an entry lacks a field its type wants (`empty journal in ...`), which is the source's to fix.
The tools are installed in CI (.ci/run); elsewhere these tests skip with the reason.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tex_consumers import Report, compile_biblatex, compile_bibtex, pandoc_citeproc, require_tools

from assistant.export import render
from assistant.export.common import ExportContext
from assistant.ingest import parse_file
from assistant.models import Decision, StoredPaper
from conftest import FIXTURES, fidelity_file

FIDELITY = FIXTURES / "fidelity"
BIB_SOURCES = ["thesis.bib", "astro.bib", "zotero_bbt.bib", "hostile.bib"]
# Other sources, exported together into one file (one document per export file).
OTHER_SOURCES = ["hostile.json", "scopus.ris", "embase.ris", "zotero_short_dois.json"]
_MISSING_FIELD = re.compile(r"^bibtex: Warning--empty \w+ in ")


def _items(names: list[str]) -> list[StoredPaper]:
    items = []
    for name in names:
        _, result = parse_file(fidelity_file(name))
        assert not result.errors, result.errors
        items += [
            StoredPaper(paper=p, decision=Decision(note="Read §3.\nThen §4 & 5%.")) for p in result.papers
        ]
    return items


def _jobs(bib: Path, out: Path) -> dict[str, object]:
    return {
        "biber": lambda: compile_biblatex(bib, out / "biber"),
        "plain": lambda: compile_bibtex(bib, out / "plain", "plain"),
        "plainnat": lambda: compile_bibtex(bib, out / "plainnat", "plainnat"),
    }


def _run_all(jobs: dict[str, object]) -> dict[str, Report]:
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}  # type: ignore[arg-type]
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Report]]:
    """Every export (bib and biblatex dialects) and every .bib source, compiled once."""
    require_tools()
    root = tmp_path_factory.mktemp("tex")
    jobs: dict[str, object] = {}
    sources = {name: [name] for name in BIB_SOURCES} | {"others": OTHER_SOURCES}
    for label, names in sources.items():
        items = _items(names)
        for dialect in ("bib", "biblatex"):
            path = root / f"{label}.{dialect}.bib"
            path.write_text(render(dialect, items, ExportContext()), encoding="utf-8")
            if dialect == "biblatex":  # biblatex's own dialect goes to biber only
                jobs[f"{label}|biblatex|biber"] = lambda p=path, d=root / f"{label}-biblatex": (
                    compile_biblatex(p, d / "biber")
                )
            else:
                for consumer, job in _jobs(path, root / f"{label}-bib").items():
                    jobs[f"{label}|bib|{consumer}"] = job
        if label in BIB_SOURCES:
            for consumer, job in _jobs(fidelity_file(label), root / f"{label}-source").items():
                jobs[f"{label}|source|{consumer}"] = job
    reports = _run_all(jobs)
    out: dict[str, dict[str, Report]] = {}
    for key, report in reports.items():
        label, kind, consumer = key.split("|")
        out.setdefault(f"{label}|{kind}", {})[consumer] = report
    return out


CASES = [(label, dialect) for label in [*BIB_SOURCES, "others"] for dialect in ("bib", "biblatex")]


@pytest.mark.parametrize(("label", "dialect"), CASES)
def test_every_export_compiles_without_errors_or_new_warnings(
    compiled: dict[str, dict[str, Report]], label: str, dialect: str
) -> None:
    for consumer, report in compiled[f"{label}|{dialect}"].items():
        assert report.errors == [], (consumer, report.errors)
        assert "Empty bibliography" not in report.log
        assert report.bbl.count("\\entry{" if consumer == "biber" else "\\bibitem") >= 4, consumer
        source = compiled.get(f"{label}|source", {}).get(consumer)
        if source is not None:
            new = report.warnings - source.warnings
        else:
            new = {w for w in report.warnings if not _MISSING_FIELD.match(w)}
        assert new == set(), (consumer, sorted(new))


def test_the_sources_themselves_break_where_the_exports_do_not(
    compiled: dict[str, dict[str, Report]],
) -> None:
    """The thesis and hostile .bib files spell í as `{\\'\\i}`, which biber turns into a dotless i
    and a combining accent that pdflatex cannot print: the exports of the same entries compile."""
    for label in ("thesis.bib", "hostile.bib"):
        assert any("U+0301" in e for e in compiled[f"{label}|source"]["biber"].errors), label
        assert compiled[f"{label}|bib"]["biber"].errors == []


def test_names_and_math_reach_the_bibliography(compiled: dict[str, dict[str, Report]]) -> None:
    bbl = compiled["astro.bib|biblatex"]["biber"].bbl
    for family in ("Portegies Zwart", "Planck Collaboration", "Del Maestro"):
        assert re.search(r"family=\{\{?" + family + r"\}?\}", bbl), family
    assert re.search(r"suffix=\{III\}", bbl)
    assert "$\\Lambda$CDM" in bbl
    plain = compiled["others|bib"]["plainnat"].bbl
    assert "F.R. Thompson, III" in plain or "F.R.~Thompson, III" in plain or "Thompson, III" in plain
    assert "H{$_2$}O" in plain or "H$_2$O" in plain


def test_csl_json_renders_with_pandoc_citeproc(tmp_path: Path) -> None:
    require_tools()
    items = _items([*OTHER_SOURCES, "thesis.bib", "astro.bib"])
    path = tmp_path / "refs.json"
    path.write_text(render("csl-json", items, ExportContext()), encoding="utf-8")
    assert len(json.loads(path.read_text(encoding="utf-8"))) == len(items)
    text = " ".join(pandoc_citeproc(path, tmp_path).split())
    # Names in their parts: particles, compound family names, suffixes, organisations.
    for name in (
        "Portegies Zwart, Simon F.",
        "Planck Collaboration",
        "Del Maestro, Adrian",
        "Thompson, F.R., III",
    ):
        assert name in text, name
    assert "Nakashima, S." in text and "The Pediatric Sepsis Study Group" in text
    assert "Schoot, Rens van de" in text or "van de Schoot, Rens" in text
    # Dates, containers and types: a journal article with volume, issue and pages; a book by
    # its publisher and place; a chapter in its book with editors; a thesis with its school.
    assert "Ecological Applications 25 (8): 2186–2201" in text
    assert "Cambridge, UK: Cambridge University Press" in text and "In Cambridge University Press" not in text
    assert "In Handbook of Search, edited by John Smith Jr. and Pieter van der Berg" in text
    assert "PhD thesis, Madrid, Spain: Universidad Politécnica de Madrid" in text
    assert "2021" in text and "2010" in text
    # Math as text, no raw markup; no "Article arXiv:..." on journal items.
    assert "H₂O" in text and "$" not in text and "Article arXiv" not in text
