"""Prose fields decoded once and written per consumer: LaTeX (math kept as math) in .bib files,
text in CSL-JSON, RIS, Markdown, HTML and CSV; and a biblatex file pdflatex compiles.

The real consumers (pdflatex with bibtex and biber, pandoc) run where they are installed
(tex_consumers.require_tools); every record here is made up.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
import rispy
from tex_consumers import compile_biblatex, compile_bibtex, pandoc_citeproc, require_tools
from typer.testing import CliRunner

from assistant.cli import app
from assistant.export import bib, render
from assistant.export.common import ExportContext
from assistant.export.latex import balanced, escape, pdflatex_utf8, readable, readable_title, rich
from assistant.models import Decision, Paper, StoredPaper

runner = CliRunner()

THESIS_BIB = r"""@inproceedings{lee2019ordinal,
  title = {Ordinal Venues in a Thesis},
  author = {Lee, Ann and Okafor, Chidi},
  booktitle = {$ 19^{th} $ International Conference on Graph Things},
  series = {Lecture Notes in $\mathcal{G}$ Science},
  note = {Best paper at the $ 3^{rd} $ workshop; 30\% acceptance},
  publisher = {Graph \& Co},
  abstract = {We improve recall by 30\% with $O(n \log n)$ work.},
  year = {2019}
}
@article{kim2020greek,
  title = {Learning λ Under Noise},
  author = {Kim, Dae},
  journal = {Journal of Made-Up Results},
  year = {2020}
}
"""
VENUE_TEXT = "19th International Conference on Graph Things"
# Fields of each text format that must read as text: no dollars, escapes or scripts left.
LATEX_LEFTOVERS = re.compile(r"\$|\\%|\\&|\^\{|\\emph|\\mathcal")


def _cli(store: Path, *args: str) -> str:
    result = runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def thesis_store(tmp_path: Path) -> Path:
    source = tmp_path / "thesis.bib"
    source.write_text(THESIS_BIB, encoding="utf-8")
    store = tmp_path / "store"
    _cli(store, "ingest", str(source))
    return store


# -- one rule for every prose field --------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "latex", "text", "csl"),
    [
        # Math spaced inside its dollars, as some .bib files write it: still math.
        (
            "$ 19^{th} $ Conference",
            "{$ 19^{th} $} Conference",
            "19th Conference",
            "19<sup>th</sup> Conference",
        ),
        (
            "the $ 3^{rd} $ workshop",
            "the {$ 3^{rd} $} workshop",
            "the 3rd workshop",
            "the 3<sup>rd</sup> workshop",
        ),
        ("$19^{th}$ Conference", "{$19^{th}$} Conference", "19th Conference", "19<sup>th</sup> Conference"),
        ("$\\alpha_i$ test", "{$\\alpha_i$} test", "α_i test", "α<sub>i</sub> test"),
        # Money is not math, spaced or not.
        ("$5 and $10", "\\$5 and \\$10", "$5 and $10", "$5 and $10"),
        ("from $ 5 to $ 10", "from \\$ 5 to \\$ 10", "from $ 5 to $ 10", "from $ 5 to $ 10"),
        # A special character a stored text still escapes (an older arXiv import): not escaped twice.
        ("gains of 30\\% \\& more", "gains of 30\\% \\& more", "gains of 30% & more", "gains of 30% & more"),
        ("a \\emph{new} bound", "a \\emph{new} bound", "a new bound", "a <i>new</i> bound"),
        ("\\textbf{Bold} $x$", "\\textbf{Bold} {$x$}", "Bold x", "<b>Bold</b> x"),
        # Any other backslash is a backslash: nothing is read into it.
        ("C:\\data and \\cmd{x}", "C:{\\textbackslash}data and {\\textbackslash}cmd\\{x\\}", None, None),
        ("an \\emph{unclosed", "an {\\textbackslash}emph\\textbraceleft{}unclosed", None, None),
    ],
)
def test_prose_is_decoded_once_and_written_per_consumer(
    stored: str, latex: str, text: str | None, csl: str | None
) -> None:
    assert escape(stored) == latex and escape(stored, utf8=True) == latex
    assert balanced(latex)
    assert readable(stored) == (text if text is not None else stored)
    assert rich(stored) == (csl if csl is not None else stored)


def test_csl_title_keeps_math_words_from_title_casing_and_markup_nested() -> None:
    title = "On the $ 19^{th} $ Result and \\emph{a $x$ b}"
    assert readable_title(title) == (
        'On the <span class="nocase">19<sup>th</sup></span> Result and '
        '<i>a <span class="nocase">x</span> b</i>'
    )


def test_a_visible_macro_stays_balanced() -> None:
    """A custom name macro an importer kept as text (`\\van{Gemund}{Van}{van}`) is literal text
    in every field of the .bib, braces balanced."""
    macro = "\\van{Gemund}{Van}{van}"
    for dialect in (False, True):
        written = escape(f"Ed. by {macro} }}{{", utf8=dialect)
        assert balanced(written) and "{\\textbackslash}van" in written
    assert balanced(bib.escape_title(f"About {macro} and $x$"))


# -- the thesis .bib through the CLI ------------------------------------------------------------


def test_booktitle_math_is_latex_in_bib_and_text_everywhere_else(thesis_store: Path) -> None:
    for fmt in ("bib", "biblatex"):
        text = _cli(thesis_store, "export", "-f", fmt)
        assert "booktitle = {{$ 19^{th} $} International Conference on Graph Things}" in text
        assert "series = {Lecture Notes in {$\\mathcal{G}$} Science}" in text
        assert "{$ 3^{rd} $} workshop; 30\\% acceptance" in text
        assert "\\$" not in text and "textasciicircum" not in text and "textbackslash" not in text

    items = {i["id"]: i for i in json.loads(_cli(thesis_store, "export", "-f", "csl-json"))}
    item = items["lee2019ordinal"]
    assert item["container-title"] == "19<sup>th</sup> International Conference on Graph Things"
    assert item["collection-title"] == "Lecture Notes in 𝒢 Science"
    assert item["note"] == "Best paper at the 3rd workshop; 30% acceptance"
    assert item["abstract"] == "We improve recall by 30% with O(n log n) work."
    assert item["publisher"] == "Graph & Co"
    for field in ("container-title", "collection-title", "note", "abstract", "publisher"):
        assert not LATEX_LEFTOVERS.search(item[field]), (field, item[field])

    ris = {r["id"]: r for r in rispy.loads(_cli(thesis_store, "export", "-f", "ris"))}["lee2019ordinal"]
    assert ris["secondary_title"] == VENUE_TEXT and ris["notes"][0].startswith("Best paper at the 3rd")
    for field in ("secondary_title", "tertiary_title", "abstract", "publisher"):
        assert not LATEX_LEFTOVERS.search(ris[field]), (field, ris[field])
    assert not LATEX_LEFTOVERS.search(ris["notes"][0])

    md = _cli(thesis_store, "export", "-f", "md")
    assert f"*{VENUE_TEXT}*" in md and "\\$" not in md and "^{" not in md
    page = _cli(thesis_store, "export", "-f", "html")
    assert VENUE_TEXT in page and "$ 19" not in page
    rows = list(csv.DictReader(io.StringIO(_cli(thesis_store, "export", "-f", "csv"))))
    venues = {r["title"]: r["venue"] for r in rows}
    assert venues["Ordinal Venues in a Thesis"] == VENUE_TEXT
    assert not any(LATEX_LEFTOVERS.search(v) for r in rows for v in (r["title"], r["venue"]))


def test_latex_left_in_stored_text_reads_as_text() -> None:
    """An older store's arXiv abstract (`30\\%`) and a venue with LaTeX formatting."""
    paper = Paper.create(
        title="Sparse \\emph{Adapters} Save 30\\% of Memory",
        abstract="We save 30\\% of the memory \\& time; see $\\alpha$.",
        venue="Proceedings of the $ 7^{th} $ Workshop on \\textit{Efficient} NLP",
        authors=["Ann Lee"],
        year=2024,
        arxiv_id="2401.00001",
    )
    items = [StoredPaper(paper=paper, decision=Decision())]
    context = ExportContext()
    bibtex = render("bib", items, context)
    assert "30\\% of the memory \\& time" in bibtex and "textbackslash" not in bibtex
    assert "\\emph{Adapters}" in bibtex and "{$ 7^{th} $} Workshop on \\textit{Efficient} NLP" in bibtex
    (csl,) = json.loads(render("csl-json", items, context))
    assert csl["title"] == "Sparse <i>Adapters</i> Save 30% of Memory"
    assert csl["abstract"] == "We save 30% of the memory & time; see α."
    assert csl["container-title"] == "Proceedings of the 7<sup>th</sup> Workshop on <i>Efficient</i> NLP"
    plain = "Proceedings of the 7th Workshop on Efficient NLP"
    (ris,) = rispy.loads(render("ris", items, context))
    assert ris["title"] == "Sparse Adapters Save 30% of Memory" and ris["secondary_title"] == plain
    assert ris["abstract"] == "We save 30% of the memory & time; see α."
    for fmt in ("md", "html", "csv"):
        shown = render(fmt, items, context)
        assert "Sparse Adapters Save 30% of Memory" in shown and "Efficient NLP" in shown, fmt
        assert not LATEX_LEFTOVERS.search(shown.replace("\\*", "")), fmt


# -- pdflatex: the UTF-8 dialect ----------------------------------------------------------------


def test_biblatex_dialect_writes_what_pdflatex_does_not_know_as_macros() -> None:
    assert escape("λ-calculus, ∞ and Müller's Ærø–Łódź", utf8=True) == (
        "\\ensuremath{\\lambda}-calculus, \\ensuremath{\\infty} and Müller's Ærø–Łódź"
    )
    assert escape("ẹ", utf8=True) == "{\\d e}"  # an accent T1 has no glyph for: a macro
    assert pdflatex_utf8("Müller Ærø – “x” € ±") and not pdflatex_utf8("λ")


def test_export_help_names_the_engine_of_each_bib_format() -> None:
    result = runner.invoke(app, ["export", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    help_text = " ".join(result.stdout.split())
    assert "-f bib is for bibtex or biber with pdflatex" in help_text
    assert "-f biblatex is for biber with pdflatex, xelatex or lualatex" in help_text


# -- the real consumers --------------------------------------------------------------------------


def test_thesis_bib_compiles_with_math_in_prose_fields(thesis_store: Path, tmp_path: Path) -> None:
    """The booktitle's `$ 19^{th} $` prints as math (19 with a superscript th), not dollars,
    with pdflatex + bibtex and pdflatex + biber; the UTF-8 dialect's `λ` compiles too."""
    require_tools()
    bibtex_file, biblatex_file = tmp_path / "refs.bib", tmp_path / "refs-biblatex.bib"
    bibtex_file.write_text(_cli(thesis_store, "export", "-f", "bib"), encoding="utf-8")
    biblatex_file.write_text(_cli(thesis_store, "export", "-f", "biblatex"), encoding="utf-8")
    assert "\\ensuremath{\\lambda}" in biblatex_file.read_text(encoding="utf-8")
    for report in (
        compile_bibtex(bibtex_file, tmp_path / "plain", "plain"),
        compile_biblatex(bibtex_file, tmp_path / "biber"),
        compile_biblatex(biblatex_file, tmp_path / "biber-utf8"),
    ):
        assert report.errors == [], report.errors
        assert "{$ 19^{th} $} International Conference" in report.bbl
        assert "\\$" not in report.bbl and "textasciicircum" not in report.bbl
    csl_file = tmp_path / "refs.json"
    csl_file.write_text(_cli(thesis_store, "export", "-f", "csl-json"), encoding="utf-8")
    shown = pandoc_citeproc(csl_file, tmp_path / "pandoc")
    assert "19^(th) International Conference on Graph Things" in shown  # pandoc's plain superscript
    assert "Lecture Notes in 𝒢 Science. Graph & Co." in shown and "$" not in shown


def test_raw_unicode_and_macros_compile_in_the_biblatex_dialect(tmp_path: Path) -> None:
    """A new user's `λ` (and ∞, and a visible custom macro) in a `-f biblatex` file: pdflatex
    used to stop at "Unicode character λ not set up for use with LaTeX"."""
    require_tools()
    papers = [
        Paper.create(
            title="Raw λ and ∞ in Müller's Łódź Café",
            authors=["Jörg Müller", "Ærø Ødegaard"],
            venue="Workshop on \\van{Gemund}{Van}{van} Names",
            abstract="The set $\\{0, 1\\}^n$ and λ again; 30\\% of it.",
            year=2024,
        ),
    ]
    items = [StoredPaper(paper=p, decision=Decision(note="Read λ §3 & 5%.")) for p in papers]
    path = tmp_path / "refs.bib"
    text = render("biblatex", items, ExportContext())
    assert "λ" not in text and "∞" not in text and "Müller" in text and "Łódź" in text
    path.write_text(text, encoding="utf-8")
    report = compile_biblatex(path, tmp_path / "biber")
    assert report.errors == [], report.errors
    assert "Müller" in report.bbl and "\\ensuremath{\\lambda}" in report.bbl
    assert "textbackslash" in report.bbl  # the visible macro, printed as text
    ascii_path = tmp_path / "refs-ascii.bib"
    ascii_path.write_text(render("bib", items, ExportContext()), encoding="utf-8")
    plain = compile_bibtex(ascii_path, tmp_path / "plain", "plain")
    assert plain.errors == [], plain.errors


WOS_RIS = """TY  - JOUR
AU  - Klevan, T
AU  - Krane, V
AU  - Weimand, B
TI  - Powerless and alone
T2  - Journal of Made-up Care
PY  - 2019
LA  - en_AU
ER  -
"""


def test_web_of_science_initials_and_language_codes_compile(tmp_path: Path) -> None:
    """Web of Science and MEDLINE write `Krane, V` (a family and an initial, not the suffix
    "the fifth"), and Zotero `en_AU` as a language: both stopped BibTeX or pdflatex."""
    from assistant.ingest import parse_file

    require_tools()
    path = tmp_path / "wos.ris"
    path.write_text(WOS_RIS, encoding="utf-8")
    _, result = parse_file(path)
    (paper,) = result.papers
    assert paper.biblio is not None and paper.biblio.authors[1].given == "V"
    items = [StoredPaper(paper=paper)]
    for dialect, compile_ in (
        ("bib", lambda b, d: compile_bibtex(b, d, "plain")),
        ("biblatex", compile_biblatex),
    ):
        out = tmp_path / f"{dialect}.bib"
        out.write_text(render(dialect, items, ExportContext()), encoding="utf-8")
        report = compile_(out, tmp_path / dialect)
        assert report.errors == [], (dialect, report.errors)
        assert "V~Krane" in report.bbl or re.search(r"family=\{Krane\}.*given=\{V\}", report.bbl, re.S), (
            report.bbl
        )
