"""BibTeX as real users' files have it: AAS journal macros (ADS exports), macros of the author's
own LaTeX, `@preamble` definitions, biblatex `@set`/`@xdata`/`crossref`, repeated keys and
fields, and the real .bib files of ../shared/fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bibtexparser
import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.ingest import bibtex, parse_file
from assistant.models import Paper

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def read(tmp_path: Path, text: str, name: str = "refs.bib") -> tuple[list[Paper], list[str], list[str]]:
    """(papers, skipped lines, notes) of a .bib file with `text`, read as `triage ingest` does."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    _, result = parse_file(path)
    return result.papers, [str(e) for e in result.errors], result.notes


def by_key(papers: list[Paper]) -> dict[str, Paper]:
    return {str(p.extra["citekey"]): p for p in papers}


def test_an_ads_journal_macro_names_the_journal_and_the_whole_file_imports(tmp_path: Path) -> None:
    papers, skipped, _ = read(
        tmp_path,
        "@article{S, author={Smith, J.}, title={A}, journal={\\apj}, year=2020}\n"
        "@article{T, author={Jones, K.}, title={Dust in discs}, journal={Icarus}, year=2021}\n",
    )
    assert skipped == []
    assert {p.title: p.venue for p in papers} == {"A": "The Astrophysical Journal", "Dust in discs": "Icarus"}


@pytest.mark.parametrize(
    ("macro", "journal"),
    [
        ("mnras", "Monthly Notices of the Royal Astronomical Society"),
        ("aap", "Astronomy and Astrophysics"),
        ("astap", "Astronomy and Astrophysics"),
        ("apjl", "The Astrophysical Journal Letters"),
        ("apjs", "The Astrophysical Journal Supplement Series"),
        ("prd", "Physical Review D"),
        ("nat", "Nature"),
        ("procspie", "Proceedings of the SPIE"),
        ("psj", "The Planetary Science Journal"),
    ],
)
def test_aas_journal_macros_become_the_journals_full_names(tmp_path: Path, macro: str, journal: str) -> None:
    papers, skipped, _ = read(
        tmp_path,
        f"@article{{a, title={{Tidal tails}}, journal={{\\{macro}}}, year=2019}}\n"
        f"@inproceedings{{b, title={{Adaptive optics}}, booktitle={{\\{macro}}}, year=2019,"
        f" note={{Also in \\{macro}, vol. 3}}}}\n",
    )
    assert skipped == []
    assert [p.venue for p in papers] == [journal, journal]
    note = by_key(papers)["b"].biblio
    assert note is not None and note.fields["note"] == f"Also in {journal}, vol. 3"


def test_an_entry_that_fails_to_convert_is_one_skipped_line_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong inside one entry costs that entry: the rest of the file imports."""
    convert = bibtex.entry_to_record

    def failing(fields: dict[str, Any], key: str, entry_type: str, *args: Any) -> dict[str, Any]:
        if key == "S":
            raise KeyError("booktitle")  # how the defect showed itself: a field looked up that was not there
        return convert(fields, key, entry_type, *args)

    monkeypatch.setattr(bibtex, "entry_to_record", failing)
    path = tmp_path / "refs.bib"
    path.write_text(
        "@article{R, title={Kept before}, year=2020}\n\n"
        "@article{S, author={Smith, J.}, title={A}, journal={X}, year=2020}\n"
        "@article{T, title={Kept after}, year=2021}\n",
        encoding="utf-8",
    )
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["Kept before", "Kept after"]
    assert len(result.errors) == 1
    message = str(result.errors[0])
    assert message.startswith(f"{path}:3: @article{{S}}: ")
    assert "'booktitle'" in message and "KeyError" not in message


def test_a_macro_of_the_authors_own_latex_stays_visible_and_is_never_glued(tmp_path: Path) -> None:
    papers, skipped, _ = read(
        tmp_path,
        "@article{g, author={\\van{Gemund}{Van}{van}, Arjan and Lee, Wei},"
        " title={Scheduling with \\mysystem and \\tool{X}{2}}, journal={J. Par. Comp.}, year=2001}\n",
    )
    assert skipped == []
    (paper,) = papers
    text = " ".join([paper.title, *paper.authors])
    assert "GemundVanvan" not in text and "X2" not in text
    assert paper.authors[0] == "Arjan \\van{Gemund}{Van}{van}"
    assert paper.title == "Scheduling with \\mysystem and \\tool{X}{2}"


def test_known_latex_keeps_decoding(tmp_path: Path) -> None:
    papers, _, _ = read(
        tmp_path,
        "@article{k, author={M{\\\"u}ller, J{\\'e}r{\\^o}me and Espa\\~na, Ana},"
        " title={\\emph{In vivo} \\textit{E. coli} growth: 5\\% \\& more with $\\alpha$-helices"
        " in \\texttt{pylatexenc} and \\LaTeX}, journal={Cell \\& Bio}, year=2022}\n",
    )
    (paper,) = papers
    assert paper.title == "In vivo E. coli growth: 5% & more with $\\alpha$-helices in pylatexenc and LaTeX"
    assert paper.authors == ["Jérôme Müller", "Ana España"]
    assert paper.venue == "Cell & Bio"


def test_preamble_definitions_are_applied_to_that_files_fields(tmp_path: Path) -> None:
    preamble = (
        '@preamble{ "\\newcommand{\\noopsort}[1]{} \\def\\vdW{van der Waals}" #'
        ' "\\newcommand\\survey[2]{#2 survey of #1} \\newcommand{\\hst}{Hubble Space Telescope}" }\n'
    )
    papers, skipped, _ = read(
        tmp_path,
        preamble + "@article{p, author={{\\noopsort{b}}Knuth, Donald},"
        " title={\\vdW{} forces seen by the \\hst}, journal={\\survey{galaxies}{A deep}}, year=1999}\n",
    )
    assert skipped == []
    (paper,) = papers
    assert paper.title == "van der Waals forces seen by the Hubble Space Telescope"
    assert paper.venue == "A deep survey of galaxies"
    assert paper.authors == ["Donald Knuth"]
    # another file, without the preamble: the macro is shown, not taken from the first file
    (other,), _, _ = read(tmp_path, "@article{q, title={\\vdW{} forces}, year=1999}\n", name="other.bib")
    assert other.title == "\\vdW{} forces"


def test_biblatex_sets_and_xdata_are_not_papers_and_import_with_exit_0(tmp_path: Path) -> None:
    text = (
        "@set{pair, entryset={one,two}}\n"
        "@xdata{acme, publisher={Acme Press}, location={Springfield}}\n"
        "@book{one, author={Doe, Jane}, title={First volume}, year=2010, xdata={acme}}\n"
        "@book{two, author={Doe, Jane}, title={Second volume}, year=2011, xdata={acme}}\n"
    )
    papers, skipped, _ = read(tmp_path, text)
    assert skipped == []
    assert [p.title for p in papers] == ["First volume", "Second volume"]
    biblio = by_key(papers)["one"].biblio
    assert biblio is not None and biblio.fields["publisher"] == "Acme Press"
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "refs.bib")], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "no title" not in result.output


def test_crossref_children_take_the_parents_booktitle_year_publisher_and_editors(tmp_path: Path) -> None:
    papers, skipped, _ = read(
        tmp_path,
        "@inproceedings{talk, author={Roe, Ann}, title={Fast joins}, pages={1--10}, crossref={conf}}\n"
        "@inproceedings{late, author={Poe, Bo}, title={Slow joins}, year=2004, crossref={conf}}\n"
        "@incollection{chap, author={Yu, Li}, title={Graphs}, crossref={book}}\n"
        "@inproceedings{loose, author={Ng, Al}, title={Loose}, year=2003, xref={conf}}\n"
        "@proceedings{conf, editor={Editor, Ed and Other, Olga}, title={Proceedings of the Join Workshop},"
        " year=2003, publisher={JW Press}}\n"
        "@collection{book, editor={Smith, Sam}, title={Handbook of Graphs}, date={1999}}\n",
    )
    assert skipped == []
    papers_by_key = by_key(papers)
    talk = papers_by_key["talk"]
    assert (talk.title, talk.venue, talk.year) == ("Fast joins", "Proceedings of the Join Workshop", 2003)
    assert talk.biblio is not None and talk.biblio.fields["publisher"] == "JW Press"
    assert [e.family for e in talk.biblio.editors] == ["Editor", "Other"]
    assert talk.authors == ["Ann Roe"]
    assert papers_by_key["late"].year == 2004  # its own year stays
    chap = papers_by_key["chap"]
    assert (chap.title, chap.venue, chap.year) == ("Graphs", "Handbook of Graphs", 1999)
    assert papers_by_key["loose"].venue is None  # xref names a parent but passes nothing on (biblatex)


def test_a_parents_own_booktitle_comes_before_its_title(tmp_path: Path) -> None:
    """BibTeX-style files (DBLP) give the `@proceedings` a booktitle for its children to take."""
    papers, _, _ = read(
        tmp_path,
        "@proceedings{conf, title={Proceedings of the 5th Join Workshop, Oslo}, booktitle={JW 2003},"
        " year=2003}\n@inproceedings{talk, title={Fast joins}, crossref={conf}}\n",
    )
    assert by_key(papers)["talk"].venue == "JW 2003"


def test_a_repeated_key_or_field_does_not_cost_the_entry(tmp_path: Path) -> None:
    papers, skipped, notes = read(
        tmp_path,
        "@article{a, title={First paper}, year=2001}\n"
        "@article{a, title={Second paper under the same key}, year=2002}\n"
        "@article{b, title={Twice dated}, year={2014}, journal={J}, year={2008}}\n",
    )
    assert skipped == []
    assert {p.title: p.year for p in papers} == {
        "First paper": 2001,
        "Second paper under the same key": 2002,
        "Twice dated": 2014,
    }
    assert any("'year' is given twice" in note and ":3:" in note for note in notes)


def test_an_odd_month_digit_does_not_cost_the_entry(tmp_path: Path) -> None:
    papers, skipped, _ = read(tmp_path, "@article{m, title={Superscript month}, year=2020, month={²}}\n")
    assert skipped == [] and [p.title for p in papers] == ["Superscript month"]


def _real_bib_files() -> list[Path]:
    folders = [SHARED / "corpus", SHARED / "realworld"]
    if not all(folder.is_dir() for folder in folders):
        pytest.skip(f"needs {SHARED}/corpus and /realworld: the shared fixtures beside the project")
    return sorted(p for folder in folders for p in folder.glob("*.bib"))


def test_biblatex_examples_import_every_paper() -> None:
    (path,) = [p for p in _real_bib_files() if p.name == "bib_biblatex_examples.bib"]
    library = bibtexparser.parse_string(path.read_text(encoding="utf-8"))
    groups = [e for e in library.entries if e.entry_type.lower() in ("set", "xdata")]
    _, result = parse_file(path)
    assert result.errors == []
    assert len(result.papers) == len(library.entries) - len(groups) > 80
    westfahl = by_key(result.papers)["westfahl:space"]  # a crossref child with no booktitle of its own
    assert (westfahl.venue, westfahl.year) == ("Space and Beyond", 2000)
    titles = {p.title for p in result.papers}
    assert {"The TeXbook", "TeX: The Program"} <= titles
    assert not any("methodologyindependent" in t for t in titles)


def test_every_real_bib_file_imports_nearly_every_entry() -> None:
    entries = imported = 0
    for path in _real_bib_files():
        library = bibtexparser.parse_string(path.read_text(encoding="utf-8-sig"))
        papers_in_file = [e for e in library.entries if e.entry_type.lower() not in ("set", "xdata")]
        _, result = parse_file(path)  # raises if the file as a whole were lost
        assert result.papers, path
        entries += len(papers_in_file) + len(library.failed_blocks)
        imported += len(result.papers)
    assert imported >= 0.995 * entries, (imported, entries)
