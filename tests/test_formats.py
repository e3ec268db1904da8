"""Reference-manager exports and arXiv Atom, from real files nobody here wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.errors import InputError
from assistant.ingest import detect_format, parse_file
from conftest import SHARED

REAL = SHARED / "realworld"
if not REAL.is_dir():
    pytest.skip(f"needs {REAL}: the shared fixtures beside the project", allow_module_level=True)


@pytest.mark.parametrize(
    "name,fmt,count",
    [
        ("bibtex_bbt_export_901.bib", "bibtex", 36),
        ("ris_zotero_asreview.ris", "ris", 100),
        ("csljson_bbt_1179.json", "json", 26),
        ("atom_arxiv_testing_2026.xml", "arxiv", 100),
        ("s2_author_turing.json", "json", 60),
    ],
)
def test_every_record_of_real_exports_is_read(name: str, fmt: str, count: int) -> None:
    found, result = parse_file(REAL / name)
    assert found == fmt
    assert len(result.papers) == count and not result.errors


def test_bibtex_latex_braces_names_and_identifiers() -> None:
    papers = {p.extra["citekey"]: p for p in parse_file(REAL / "bibtex_bbt_export_901.bib")[1].papers}
    book = papers["Agassi-1982-Scientificphilosophytoday"]
    assert book.title == "Scientific philosophy today: Essays in honor of Mario Bunge"
    assert book.authors == ["Joseph Agassi", "R. S. Cohen"] and book.year == 1982
    jstor = papers["Apostol-1985-MarioBungesCritical"]
    assert jstor.arxiv_id is None and jstor.extra["eprint_jstor"] == "20099996"
    assert jstor.venue == "Studies in Soviet Thought"
    google = papers["--__theorytruthinauthor"]
    assert google.url is not None and "&tbo=p&tbm=bks" in google.url  # URLs are not LaTeX-decoded


def test_bibtex_arxiv_eprint_doi_and_accents(tmp_path: Path) -> None:
    bib = tmp_path / "refs.bib"
    bib.write_text(
        "@article{muller2024,\n  title = {{Caf\\'e} Models for {M}\\\"uller's Problem},\n"
        '  author = {M{\\"u}ller, J{\\"o}rg and Bra{\\v z}inskas, Arthur},\n  year = {2024},\n'
        "  eprint = {2401.01234v2},\n  archivePrefix = {arXiv},\n  primaryClass = {cs.CL},\n"
        "  doi = {10.48550/arXiv.2401.01234}\n}\n",
        encoding="utf-8",
    )
    (p,) = parse_file(bib)[1].papers
    assert p.title == "Café Models for Müller's Problem"
    assert p.authors == ["Jörg Müller", "Arthur Bražinskas"]
    assert (p.id, p.categories) == ("arxiv:2401.01234", ["cs.CL"])


def test_bibtex_broken_entry_is_located_and_the_rest_imports(tmp_path: Path) -> None:
    bib = tmp_path / "refs.bib"
    bib.write_text(
        "@article{ok1, title={First}, year={2020}}\n\n@article{broken, title={Second, year=2020\n\n"
        "@article{notitle, year={2021}}\n\n@article{ok2, title={Third}}\n",
        encoding="utf-8",
    )
    result = parse_file(bib)[1]
    assert [p.title for p in result.papers] == ["First", "Third"]
    assert [str(e) for e in result.errors] == [
        f"{bib}:3: unreadable BibTeX entry: Unexpected block start: `@article`. "
        "Was still looking for field-value closing `}`",
        f"{bib}:5: @article{{notitle}}: record has no title",
    ]


def test_ris_placeholders_and_line_numbers(tmp_path: Path) -> None:
    papers = parse_file(REAL / "ris_zotero_asreview.ris")[1].papers
    assert not any("nan" in a.lower().split() for p in papers for a in p.authors)
    assert papers[0].doi == "10.1038/s42256-020-00287-7" and papers[0].date == "2021-02-01"
    assert papers[0].authors[0] == "Rens van de Schoot"
    ris = tmp_path / "x.ris"
    ris.write_text("TY  - JOUR\nTI  - Good\nER  - \n\nTY  - JOUR\nAU  - Nobody\nER  - \n\nTI  - orphan\n")
    result = parse_file(ris)[1]
    assert [p.title for p in result.papers] == ["Good"]
    assert [str(e) for e in result.errors] == [
        f"{ris}:5: record has no title",
        f"{ris}:9: a record must start with 'TY  -', found 'TI  - orphan'",
    ]


def test_csl_json_names_dates_and_short_dois() -> None:
    papers = parse_file(REAL / "csljson_bbt_1179.json")[1].papers
    first = papers[0]
    assert first.authors == ["Ian Brittain"] and first.year == 2004
    assert first.extra["short_doi"] == "10/fqd6hj" and first.doi is None
    assert any(p.authors == ["Court of Arbitration for Sport"] for p in papers)


def test_arxiv_atom_ids_categories_and_doi() -> None:
    papers = parse_file(REAL / "atom_arxiv_testing_2026.xml")[1].papers
    p = papers[0]
    assert p.id == "arxiv:2202.12139" and p.arxiv_id == "2202.12139"
    assert p.categories[:2] == ["cs.SE", "cs.LG"] and p.doi == "10.1109/icstw55395.2022.00035"
    assert p.extra["arxiv_version"] == "2202.12139v1" and p.date == "2022-02-24"


def test_semantic_scholar_ligatures_are_unfolded() -> None:
    papers = parse_file(REAL / "s2_author_turing.json")[1].papers
    assert "artificial intelligence" in papers[0].abstract and "\ufb01" not in papers[0].abstract


def test_csv_headers_any_case_and_zotero_columns(tmp_path: Path) -> None:
    csv_file = tmp_path / "zotero.csv"
    csv_file.write_text(
        "Key,Item Type,Publication Year,Author,Title,Publication Title,DOI,Url,Abstract Note,Extra\n"
        'K1,preprint,2024,"Lee, Ann; Chen, Bo",Adapters Everywhere,,,,"We adapt.","arXiv: 2401.00002"\n'
        'K2,journalArticle,2023,"Diaz, Carla",Good Journal Paper,J. Stuff,10.1234/ABC,,,\n'
        'K3,journalArticle,2023,"Nobody",,,,,,\n',
        encoding="utf-8",
    )
    assert detect_format(csv_file, csv_file.read_text()) == "csv"
    result = parse_file(csv_file)[1]
    a, b = result.papers
    assert (a.id, a.authors, a.year, a.abstract) == (
        "arxiv:2401.00002",
        ["Ann Lee", "Bo Chen"],
        2024,
        "We adapt.",
    )
    assert (b.id, b.venue) == ("doi:10.1234/abc", "J. Stuff")
    assert [str(e) for e in result.errors] == [f"{csv_file}:4: record has no title"]


def test_csv_without_title_column_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("name,year\nfoo,2020\n")
    with pytest.raises(InputError, match="no title column"):
        parse_file(f)


def test_atom_that_is_not_xml_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "feed.xml"
    f.write_text('<?xml version="1.0"?>\n<feed xmlns="http://www.w3.org/2005/Atom">\n<entry>\n</feed>\n')
    with pytest.raises(InputError, match=r"feed.xml:4: not well-formed"):
        parse_file(f)


def test_xml_entity_bombs_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "bomb.xml"
    f.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE f [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>\n'
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>&b;</title></entry></feed>\n'
    )
    with pytest.raises(InputError, match="refused XML"):
        parse_file(f, "arxiv")


def test_bibtex_escapes_and_latex_mixed(tmp_path: Path) -> None:
    bib = tmp_path / "refs.bib"
    bib.write_text(
        "@article{a, title={Plain 50\\% and R\\&D},\n"
        "  abstract={We gain 5\\% with \\emph{tiny} models --- cheaply.}}\n",
        encoding="utf-8",
    )
    (p,) = parse_file(bib)[1].papers
    assert p.title == "Plain 50% and R&D"
    assert p.abstract == "We gain 5% with tiny models — cheaply."


def test_bibtex_accents_outside_braces_in_names(tmp_path: Path) -> None:
    """`Espa\\~na` is España, not "Espa na": the tilde of an accent is not a tie."""
    bib = tmp_path / "names.bib"
    bib.write_text(
        "@article{a, title={T}, author={Pe{\\~n}a, Jos{\\'e} and Espa\\~na, Ana and "
        "Mu\\~{n}oz, Luis and Ng\\~{u}y\\^{e}n, V. and G\\\"odel, Kurt and Garc\\'\\i a, M.}}\n",
        encoding="utf-8",
    )
    (p,) = parse_file(bib)[1].papers
    assert p.authors == ["José Peña", "Ana España", "Luis Muñoz", "V. Ngũyên", "Kurt Gödel", "M. García"]
    assert p.biblio is not None
    assert [a.family for a in p.biblio.authors] == ["Peña", "España", "Muñoz", "Ngũyên", "Gödel", "García"]


def test_bibtex_keeps_escaped_braces_and_carets(tmp_path: Path) -> None:
    path = tmp_path / "special.bib"
    path.write_text(
        "@article{k1,\n  title = {\\{Braces\\} and x{\\textasciicircum}2 in {LoRA} \\& 50\\%},\n"
        "  abstract = {Plain {BERT} text with \\{x\\}.},\n  year = {2024}\n}\n",
        encoding="utf-8",
    )
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["{Braces} and x^2 in LoRA & 50%"]
    assert result.papers[0].abstract == "Plain BERT text with {x}."
