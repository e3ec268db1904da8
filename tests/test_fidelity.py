"""Bibliographic fidelity: what comes in from a reference manager goes out whole.

Field-level round trips per source format (import -> export in the same format keeps every
field, with the exceptions the README lists), and the hostile cases one by one: stray braces,
accents, math, names, types, CSL mapping, keys, notes. The real consumers (biber, bibtex,
pdflatex, pandoc) are in test_fidelity_consumers.py.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import bibtexparser
import pytest
import rispy
from bibtexparser.middlewares import RemoveEnclosingMiddleware
from bibtexparser.middlewares.names import parse_single_name_into_parts, split_multiple_persons_names
from pylatexenc.latex2text import LatexNodes2Text

from assistant.agenda import parse_agenda
from assistant.export import render
from assistant.export.common import ExportContext
from assistant.export.latex import balanced, readable
from assistant.ingest import parse_file
from assistant.ingest.bibstrings import ResolveStrings
from assistant.ingest.records import unlabelled
from assistant.ingest.ris import LIST_TAGS
from assistant.models import Assessment, Decision, Paper, StoredPaper, parse_name
from assistant.store import _paper_from, paper_metadata
from conftest import FIXTURES, fidelity_file

FIDELITY = FIXTURES / "fidelity"
_DECODE = LatexNodes2Text(math_mode="verbatim")


def items_of(name: str, **decision: Any) -> list[StoredPaper]:
    _, result = parse_file(fidelity_file(name))
    assert not result.errors, result.errors
    return [StoredPaper(paper=p, decision=Decision(**decision)) for p in result.papers]


def export(name: str, fmt: str, **decision: Any) -> str:
    return render(fmt, items_of(name, **decision), ExportContext())


def bib_entries(text: str) -> dict[str, Any]:
    library = bibtexparser.parse_string(text, parse_stack=[ResolveStrings(), RemoveEnclosingMiddleware()])
    assert not library.failed_blocks, [b.error for b in library.failed_blocks]
    return {e.key: e for e in library.entries}


# -- round trips, field by field ----------------------------------------------------------------

# Spellings of one field that BibTeX and biblatex both read (the export writes the first).
_BIB_ALIASES = {
    "location": "address",
    "journaltitle": "journal",
    "annotation": "annote",
    "langid": "language",
}
# Fields the .bib export writes otherwise (README, "Bibliographic fidelity"): a biblatex `date` as
# `year` + `month`.
_BIB_EXCEPTIONS = {"date"}


def _plain(value: str) -> str:
    try:
        text = str(_DECODE.latex_to_text(value))
    except Exception:
        text = value
    return " ".join(text.replace("{", "").replace("}", "").split())


def _names(value: str) -> list[tuple[str, ...]]:
    out = []
    for raw in split_multiple_persons_names(value):
        parts = parse_single_name_into_parts(raw, strict=False)
        out.append(tuple(_plain(" ".join(p)) for p in (parts.first, parts.von, parts.last, parts.jr)))
    return out


def _bib_value(name: str, value: str) -> Any:
    if name in ("author", "editor"):
        return _names(value)
    if name == "pages":
        return re.sub(r"[-–—]+", "-", _plain(value))
    if name == "month":
        return _plain(value).lower()[:3]
    if name == "doi":
        return value.lower()
    if name == "keywords":
        return {k.strip() for k in re.split(r"[,;]", _plain(value)) if k.strip()}
    return _plain(value)


@pytest.mark.parametrize("name", ["thesis.bib", "astro.bib", "zotero_bbt.bib", "hostile.bib"])
@pytest.mark.parametrize("dialect", ["bib", "biblatex"])
def test_bibtex_round_trip_keeps_every_field(name: str, dialect: str) -> None:
    source = bib_entries(fidelity_file(name).read_text(encoding="utf-8"))
    exported = bib_entries(export(name, dialect))
    assert set(exported) == set(source)  # the source's citation keys, every entry
    for key, entry in source.items():
        out = exported[key]
        assert out.entry_type.lower() == entry.entry_type.lower(), key
        got = {_BIB_ALIASES.get(f.key.lower(), f.key.lower()): f.value for f in out.fields}
        for field in entry.fields:
            fname = _BIB_ALIASES.get(field.key.lower(), field.key.lower())
            if fname in _BIB_EXCEPTIONS:
                continue
            assert fname in got, (key, fname)
            want, have = _bib_value(fname, str(field.value)), _bib_value(fname, str(got[fname]))
            if fname == "keywords":
                assert want <= have, (key, want - have)
            else:
                assert have == want, (key, fname)
        for value in got.values():
            assert balanced(str(value)), (key, value)


def _ris_records(text: str) -> list[dict[str, Any]]:
    return rispy.loads(text, list_tags=LIST_TAGS)


def _ris_view(r: dict[str, Any]) -> dict[str, Any]:
    """A record by what it means: RIS has several tags for one thing (T1/TI, A1/AU, Y1/PY,
    N2/AB, JO/JF/T2); names in parts."""
    people = [parse_name(a) for a in [*r.get("authors", []), *r.get("first_authors", [])]]
    view = {
        "TY": r.get("type_of_reference"),
        "title": r.get("title") or r.get("primary_title"),
        "authors": [(p.family, p.given, p.particle, p.suffix, p.literal) for p in people],
        "editors": [parse_name(a).model_dump() for a in r.get("secondary_authors", [])],
        "year": str(r.get("year") or r.get("publication_year") or "")[:4],
        "venue": r.get("journal_name") or r.get("alternate_title3") or r.get("secondary_title"),
        "abstract": r.get("abstract") or r.get("notes_abstract"),
        "doi": str(r.get("doi") or "").lower(),
        "notes": "\n".join(r.get("notes", [])),
        "SN": set(r.get("issn", [])),
    }
    moved = {"type_of_reference", "title", "primary_title", "authors", "first_authors", "year"}
    moved |= {"publication_year", "journal_name", "alternate_title3", "secondary_title", "abstract"}
    moved |= {"notes_abstract", "doi", "notes", "issn", "secondary_authors", "id", "keywords", "urls"}
    view.update({k: v for k, v in r.items() if k not in moved})
    return view


@pytest.mark.parametrize("name", ["scopus.ris", "embase.ris", "ris_zotero_asreview.ris"])
def test_ris_round_trip_keeps_every_tag(name: str) -> None:
    source = _ris_records(fidelity_file(name).read_text(encoding="utf-8-sig"))
    exported = _ris_records(export(name, "ris"))
    assert len(exported) == len(source)
    for before, after in zip(source, exported, strict=True):
        want, have = _ris_view(before), _ris_view(after)
        for key, value in want.items():
            if value in (None, "", [], set()) or str(value).lower() == "nan":  # placeholders
                continue
            if key == "date":  # `2020///nan` placeholders are dropped; the date itself stays
                assert str(have.get(key, "")).startswith(str(value).split("//")[0].rstrip("/")), key
                continue
            if key == "unknown_tag":
                assert {k: v for k, v in value.items()} == dict(have.get(key, {})), key
                continue
            if key in ("title", "abstract"):  # math is written as readable text in RIS
                value = readable(str(value))
            if key == "abstract":  # a publisher's leading "Abstract" label is not kept (README)
                value = unlabelled(value)
            got = have.get(key)
            if isinstance(value, str) and isinstance(got, str):  # whitespace normalised (README)
                value, got = (" ".join(unicodedata.normalize("NFKC", v).split()) for v in (value, got))
            assert got == value, (before.get("title"), key)
        assert set(before.get("keywords", [])) <= set(after.get("keywords", []))
        assert set(before.get("urls", [])) <= set(after.get("urls", []))


def _csl_value(value: Any) -> Any:
    if isinstance(value, dict) and "date-parts" in value:
        return [[int(p) for p in parts] for parts in value["date-parts"]]
    return value


def test_csl_json_round_trip_keeps_every_variable() -> None:
    source = json.loads(fidelity_file("zotero_short_dois.json").read_text(encoding="utf-8"))
    exported = {i["id"]: i for i in json.loads(export("zotero_short_dois.json", "csl-json"))}
    assert len(exported) == len(source)
    for item in source:
        out = exported[item["citation-key"]]
        for key, value in item.items():
            if key == "keyword":
                assert set(value.split(", ")) <= set(out[key].split(", "))
                continue
            assert _csl_value(out.get(key)) == _csl_value(value), (item["id"], key)
    assert sum(1 for i in exported.values() if str(i.get("DOI", "")).startswith("10/")) == 15


# -- the cases of issue 14, one by one -------------------------------------------------------------


def hostile() -> dict[str, StoredPaper]:
    return {i.paper.title.split()[0]: i for i in items_of("hostile.json", note="line one\nline two")}


def test_every_field_is_brace_balanced_whatever_the_input() -> None:
    text = export("hostile.json", "bib")
    entries = bib_entries(text)
    abstract = next(e["abstract"] for e in entries.values() if "footnote" in e.fields_dict["abstract"].value)
    assert abstract.endswith("\\textbraceleft{}") and balanced(abstract)
    title = next(e["title"] for e in entries.values() if "Stray" in e["title"])
    assert "\\textbraceright{}" in title and "\\{balanced\\}" in title
    for entry in entries.values():
        assert all(balanced(str(f.value)) for f in entry.fields)


def test_accents_compile_and_junk_is_stripped() -> None:
    papers = hostile()
    mojibake = papers["Mojibake"].paper
    assert mojibake.title == "Mojibake Gárcía and combining junk q̇ é"
    assert mojibake.authors[0] == "Rosa García"  # a dotless i with an accent is an í
    assert "\x07" not in papers["Dark"].paper.title and "\x1b" not in papers["Dark"].paper.abstract
    text = export("hostile.json", "bib")
    assert "{\\'\\i}" not in text and "Garc{\\'i}a, Mart{\\'i}n" in text and "Y{\\i}lmaz" in text
    utf8 = export("hostile.json", "biblatex")
    assert "Martín" in utf8 and "Yılmaz" in utf8


def test_math_stays_math_in_bib_and_reads_as_text_in_csl_and_ris() -> None:
    bib = export("hostile.json", "bib")
    assert "H{$_2$}O" in bib and "{$\\lambda$}" in bib and "\\$5 and \\$10" in bib
    csl = {i["title"]: i for i in json.loads(export("hostile.json", "csl-json"))}
    nocase = '<span class="nocase">{}</span>'
    assert (
        f"Formation of {nocase.format('H₂O')} and {nocase.format('λ-dependent')} {nocase.format('CO₂')} ices"
        in csl
    )
    ris = export("hostile.json", "ris")
    assert "TI  - Formation of H₂O and λ-dependent CO₂ ices" in ris and "$_2$" not in ris
    astro = bib_entries(export("astro.bib", "bib"))["2019ApJ...870...12D"]
    assert astro["title"] == "{Molecular H$_{2}$ in $\\Lambda$CDM Halos at $z \\sim 2$}"  # as the source


@pytest.mark.parametrize(
    ("math", "text"),
    [
        # An operator name keeps the space LaTeX puts between it and its operand...
        ("$\\log n$", "log n"),
        ("$O(n \\log n)$", "O(n log n)"),
        ("$O(n\\log n)$", "O(n log n)"),
        ("$\\sin x$", "sin x"),
        ("$\\sin\\theta$", "sin θ"),
        ("$\\log\\log n$", "log log n"),
        ("$\\exp{x}$", "exp x"),
        ("$\\det A$", "det A"),
        ("$\\max_i x_i$", "max_i x_i"),
        ("$\\min_{x} f$", "minₓ f"),
        ("$\\log_2 n$", "log₂ n"),
        ("$\\sin^2 x$", "sin² x"),
        # ...and none before a parenthesis, where LaTeX puts none.
        ("$\\log(n)$", "log(n)"),
        ("$\\max\\{a, b\\}$", "max{a, b}"),
        # A relation or binary operator has one space each side, as LaTeX prints it, whatever
        # the source had...
        ("$x \\in X$", "x ∈ X"),
        ("$n \\to \\infty$", "n → ∞"),
        ("$a\\cdot b$", "a · b"),
        ("$t \\in\\{0, 1\\}$", "t ∈ {0, 1}"),
        ("$N = 10^6$", "N = 10⁶"),
        ("$N=10^6$", "N = 10⁶"),
        ("$\\alpha \\pm 0.1$", "α ± 0.1"),
        ("$\\alpha\\pm0.1$", "α ± 0.1"),
        ("$p<0.05$", "p < 0.05"),
        ("$x>0$", "x > 0"),
        ("$x\\leq y$", "x ≤ y"),
        ("$\\Delta E\\approx 0$", "ΔE ≈ 0"),
        ("$a \\ne b$", "a ≠ b"),  # a relation pylatexenc would drop
        ("$x^2+y^2=z^2$", "x² + y² = z²"),
        ("$a  =  b$", "a = b"),
        ("$\\|x\\|_2 \\leq 1$", "‖x‖₂ ≤ 1"),
        ("$\\log = 1$", "log = 1"),
        # ...but a sign is glued to what it signs, two relations in a row are one (`:=`), and
        # nothing is spaced inside a script, a fraction or text.
        ("$-1$", "-1"),
        ("$f(x) = -x$", "f(x) = -x"),
        ("$a = \\pm b$", "a = ±b"),
        ("$(-1)^n$", "(-1)ⁿ"),
        ("$x := y$", "x := y"),
        ("$x_{t-1} = y$", "xₜ₋₁ = y"),
        ("$10^{-3}$", "10⁻³"),
        ("$\\text{state-of-the-art}$", "state-of-the-art"),
        ("$a{=}b$", "a=b"),
        ("$1{,}000$", "1,000"),
        # No space where LaTeX has none; a symbol with a script is kept, not dropped.
        ("$\\alpha_i$", "α_i"),
        ("$\\alpha x$", "αx"),
        ("$\\alpha _i$", "α_i"),
        ("$\\sigma_n$", "σₙ"),
        ("$\\lambda_{max}$", "λₘₐₓ"),
        ("$\\{0, 1\\}^n$", "{0, 1}ⁿ"),
        ("H$_2$O", "H₂O"),
    ],
)
def test_math_as_text_keeps_the_spaces_latex_prints(math: str, text: str) -> None:
    assert readable(math) == text


def test_operator_spacing_in_csl_json_and_ris_exports() -> None:
    paper = Paper.create(title="Sorting in $O(n \\log n)$ time", abstract="We bound $\\sin x$ by $x$.")
    items = [StoredPaper(paper=paper)]
    (csl,) = json.loads(render("csl-json", items, ExportContext()))
    assert csl["title"] == 'Sorting in <span class="nocase">O(n log n)</span> time'
    assert csl["abstract"] == "We bound sin x by x."
    ris = render("ris", items, ExportContext())
    assert "TI  - Sorting in O(n log n) time" in ris and "AB  - We bound sin x by x." in ris


def test_relation_and_operator_spacing_in_csl_json_and_ris_exports() -> None:
    """A new user's title: `=` and `\\pm` kept their spaces in neither format (`α±0.1`)."""
    paper = Paper.create(
        title="Scaling with $N = 10^6$ tokens and $\\alpha \\pm 0.1$",
        abstract="Loss falls as $L\\approx N^{-0.07}$ while $p<0.05$ and $x \\leq 1$.",
    )
    items = [StoredPaper(paper=paper)]
    (csl,) = json.loads(render("csl-json", items, ExportContext()))
    nocase = '<span class="nocase">{}</span>'
    assert csl["title"] == f"Scaling with {nocase.format('N = 10⁶')} tokens and {nocase.format('α ± 0.1')}"
    assert csl["abstract"] == "Loss falls as L ≈ N^-0.07 while p < 0.05 and x ≤ 1."
    (record,) = _ris_records(render("ris", items, ExportContext()))
    assert record["title"] == "Scaling with N = 10⁶ tokens and α ± 0.1"
    assert record["abstract"] == csl["abstract"]


def test_structured_names_from_every_source_to_every_export() -> None:
    astro = bib_entries(export("astro.bib", "bib"))
    assert astro["2010ARA&A..48..431P"]["author"].startswith("{Portegies Zwart}, Simon F. and McMillan,")
    assert astro["2020A&A...641A...6P"]["author"].startswith("{Planck Collaboration} and Aghanim, N.")
    assert astro["2019ApJ...870...12D"]["author"] == (
        "{Del Maestro}, Adrian and {van de Schoot}, Rens and Thompson, III, F. R."
    )
    csl = {i["id"]: i for i in json.loads(export("astro.bib", "csl-json"))}
    assert csl["2020A&A...641A...6P"]["author"][0] == {"literal": "Planck Collaboration"}
    assert csl["2019ApJ...870...12D"]["author"] == [
        {"family": "Del Maestro", "given": "Adrian"},
        {"family": "van de Schoot", "given": "Rens"},  # braced whole in the source
        {"family": "Thompson", "given": "F. R.", "suffix": "III"},
    ]
    scopus = _ris_records(export("scopus.ris", "ris"))
    assert scopus[0]["authors"][0] == "Thompson, F.R., III"
    embase = _ris_records(export("embase.ris", "ris"))
    assert embase[0]["authors"][:3] == ["Nakashima, S.", "Ito, K.", "van den Berg, H.J."]
    assert embase[0]["authors"][3] == "The Pediatric Sepsis Study Group"
    scopus_bib = export("scopus.ris", "bib")
    assert "Thompson, III, F.R. and Dijak, W.D." in scopus_bib
    plain = {p.paper.title.split()[0]: p.paper for p in items_of("hostile.json")}
    assert [n.model_dump(exclude_defaults=True) for n in plain["Dark"].people][2:] == [
        {"family": "Del Maestro", "given": "Adrian"},
        {"literal": "Planck Collaboration"},
    ]


def test_every_source_field_is_kept_at_import() -> None:
    thesis = {p.paper.extra["citekey"]: p.paper for p in items_of("thesis.bib")}
    chapter = thesis["lee2012chapter"].biblio
    assert chapter is not None
    assert chapter.fields == {
        "publisher": "Springer",
        "page": "101-130",
        "volume": "7000",
        "collection-title": "Lecture Notes in Computer Science",
        "publisher-place": "Berlin",
        "chapter-number": "5",
    }
    assert [e.display for e in chapter.editors] == ["John Smith Jr.", "Pieter van der Berg"]
    article = thesis["vaswani2017jmlr"].biblio
    assert article is not None
    assert {k: article.fields[k] for k in ("volume", "issue", "page", "ISSN", "accessed", "issued")} == {
        "volume": "18",
        "issue": "4",
        "page": "1-38",
        "ISSN": "1532-4435",
        "accessed": "2020-05-01",
        "issued": "2017-03",
    }
    book = thesis["manning2008ir"].biblio
    assert book is not None and book.fields["ISBN"] == "978-0-521-86571-5" and book.fields["edition"] == "1st"
    assert book.fields["title-short"] == "IR"
    embase = items_of("embase.ris")[0].paper
    assert embase.abstract.startswith("Background: Sepsis") and embase.biblio is not None
    assert embase.biblio.fields["ISSN"] == "1529-7535 1947-3893" and embase.biblio.fields["page"] == "245-254"
    csl = items_of("zotero_short_dois.json")
    assert (
        sum(1 for i in csl if i.paper.biblio and i.paper.biblio.fields.get("DOI", "").startswith("10/")) == 15
    )


def test_source_keywords_are_kept_and_tags_added() -> None:
    """The source's keywords first, then the researcher's tags, then an LLM's topic labels (the
    offline engine's extracted terms are not keywords: tests/test_export_keywords.py)."""
    item = items_of("thesis.bib", tags=["to-cite"])[6]
    assert item.paper.extra["citekey"] == "vaswani2017jmlr"
    tagged = item.model_copy(update={"assessment": Assessment(tags=["transformers"], engine="llm")})
    entry = bib_entries(render("bib", [tagged], ExportContext()))["vaswani2017jmlr"]
    assert entry["keywords"] == "attention, sparsity, to-cite, transformers"
    csl = json.loads(render("csl-json", [tagged], ExportContext()))[0]
    assert csl["keyword"] == "attention, sparsity, to-cite, transformers"


def test_item_types_are_kept() -> None:
    thesis = {k: e.entry_type for k, e in bib_entries(export("thesis.bib", "bib")).items()}
    assert thesis == {
        "martin2019thesis": "phdthesis",
        "ramirez2016msc": "mastersthesis",
        "kok2018report": "techreport",
        "manning2008ir": "book",
        "lee2012chapter": "incollection",
        "garcia2021acl": "inproceedings",
        "vaswani2017jmlr": "article",
        "rcore2020": "manual",
        "nguyen2022draft": "unpublished",
        "wikidata2023": "misc",
    }
    csl = {i["id"]: i["type"] for i in json.loads(export("zotero_short_dois.json", "csl-json"))}
    assert {"webpage", "chapter", "book", "article-newspaper", "article-journal"} == set(csl.values())
    biblatex = bib_entries(export("zotero_short_dois.json", "biblatex"))
    assert {e.entry_type for e in biblatex.values()} == {"online", "incollection", "book", "article"}
    ris = {r["type_of_reference"] for r in _ris_records(export("thesis.bib", "ris"))}
    assert {"THES", "RPRT", "BOOK", "CHAP", "CPAPER", "JOUR", "UNPB"} <= ris


def test_csl_json_mapping_of_preprints_journals_and_books() -> None:
    astro = {i["id"]: i for i in json.loads(export("astro.bib", "csl-json"))}
    journal = astro["2010ARA&A..48..431P"]
    assert journal["type"] == "article-journal" and "number" not in journal
    assert journal["container-title"] == "Annual Review of Astronomy and Astrophysics"
    thesis = {i["id"]: i for i in json.loads(export("thesis.bib", "csl-json"))}
    book = thesis["manning2008ir"]
    assert "container-title" not in book and book["publisher"] == "Cambridge University Press"
    assert thesis["lee2012chapter"]["container-title"] == "Handbook of Search"
    preprint = StoredPaper(paper=Paper.create(title="A preprint", arxiv_id="2401.00001", authors=["A B"]))
    item = json.loads(render("csl-json", [preprint], ExportContext()))[0]
    assert (item["type"], item["number"], item["publisher"]) == ("article", "arXiv:2401.00001", "arXiv")


def test_entries_without_authors_get_a_key_and_notes_keep_their_lines() -> None:
    entries = bib_entries(export("hostile.json", "bib", note="line one\nline two"))
    anonymous = next(e for e in entries.values() if e["title"].startswith("No authors"))
    assert anonymous["key"] == "No authors at" and "author" not in anonymous.fields_dict
    assert anonymous["annote"] == "line one\nline two"
    thesis = bib_entries(export("thesis.bib", "bib"))
    assert thesis["martin2019thesis"]["note"] == "Supervised by Ana Garc{\\'i}a.\nDefended with honours."
    ris = _ris_records(export("hostile.json", "ris", note="line one\nER  - not the end"))
    assert len(ris) == 6 and ris[0]["notes"][0] == "line one" and ris[0]["notes"][1].endswith("not the end")


def test_string_concatenation_is_resolved() -> None:
    entry = bib_entries(export("thesis.bib", "bib"))["kok2018report"]
    assert entry["author"] == "de Kok, Jan and Williams, Ann"
    assert entry["institution"] == "Centrum Wiskunde \\& Informatica"


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_exports_do_not_print_the_agendas_absolute_path(fmt: str, tmp_path: Path) -> None:
    agenda = parse_agenda("## Topic\nText.\n", path=str(tmp_path / "private" / "agenda.md"))
    text = render(fmt, items_of("thesis.bib"), ExportContext(agenda=agenda))
    assert "agenda.md" in text and str(tmp_path) not in text


def test_old_stores_and_records_without_biblio_still_load() -> None:
    paper = Paper.create(title="Old paper", authors=["Rens van de Schoot"], year=2020)
    meta = paper_metadata(paper)
    assert meta["biblio"] is None
    del meta["biblio"]  # a store written before the field existed
    loaded = _paper_from(paper.id, paper.document, meta)
    assert loaded == paper and loaded.biblio is None
    assert loaded.people[0].particle == "van de"
    rich = items_of("astro.bib")[0].paper
    assert _paper_from(rich.id, rich.document, {**paper_metadata(rich)}).biblio == rich.biblio
    merged = paper.merged_with(rich.model_copy(update={"id": paper.id}))
    assert merged.biblio == rich.biblio


@pytest.mark.parametrize(
    ("line", "title", "first"),
    [
        (
            "MEGAVERSE: Benchmarking Large Language Models Across LanguagesSanchit Ahuja, Divyanshu Aggarwal",
            "MEGAVERSE: Benchmarking Large Language Models Across Languages",
            "Sanchit Ahuja",
        ),
        (
            "Superfluid Helium in Carbon NanotubesAdrian Del Maestro, Rens van de Schoot, Bo Chen",
            "Superfluid Helium in Carbon Nanotubes",
            "Adrian Del Maestro",
        ),
        ("Using LaTeX for ScienceYann LeCun, Bo Chen", "Using LaTeX for Science", "Yann LeCun"),
        ("Deep Models (Part II)Ann Lee, Bo Chen et al.", "Deep Models (Part II)", "Ann Lee"),
    ],
)
def test_listing_titles_split_at_the_glue_point(line: str, title: str, first: str) -> None:
    from assistant.ingest.listing import split_glued_title

    got, authors = split_glued_title(line)
    assert got == title and authors is not None and authors[0][0] == first


def test_deeply_nested_math_does_not_break_the_text() -> None:
    """Hostile input: braces nested thousands deep inside math read as text without a crash
    (the spacing of relations stops short of such depths)."""
    title = "On $" + "{" * 3000 + "x=y" + "}" * 3000 + "$ and $a=b$"
    text = readable(title)
    assert "x=y" in text and text.endswith("a = b")
