"""Imports that a new user's real files broke: one bad record never costs the file, CSV quoting
as `csv.writer` writes it, RIS records missing their end line, files that are not all UTF-8,
years and dates that are no year or date, and arXiv's LaTeX escapes."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element

import pytest
from typer.testing import CliRunner

from assistant.cli import app
from assistant.errors import InputError
from assistant.ingest import PARSERS, ingest_files, parse_file

POISON = "Poison Pill Paper"
ABSTRACT = (
    "We study how adapters behave when the training data shifts between domains, and report "
    "results on six benchmarks with three model sizes."
)


def _atom(titles: list[str]) -> str:
    entries = "".join(
        f"""<entry><id>http://arxiv.org/abs/2401.0000{i}v1</id><title>{t}</title>
        <summary>{ABSTRACT}</summary><published>2024-01-0{i}T00:00:00Z</published>
        <author><name>Ann Lee</name></author></entry>"""
        for i, t in enumerate(titles, start=1)
    )
    return f'<?xml version="1.0"?>\n<feed xmlns="http://www.w3.org/2005/Atom">{entries}</feed>\n'


TITLES = ["First Good Paper", POISON, "Last Good Paper"]
# Per importer: file name, text, the per-record conversion to break, and where the broken
# record is (its line, or its record number in a JSON array / Atom feed).
CASES: dict[str, tuple[str, str, str, dict[str, int]]] = {
    "csv": (
        "papers.csv",
        "title,abstract,year\n" + "".join(f'"{t}","{ABSTRACT}",2021\n' for t in TITLES),
        "assistant.ingest.csvfile.record_to_paper",
        {"line": 3},
    ),
    "ris": (
        "papers.ris",
        "".join(f"TY  - JOUR\nTI  - {t}\nPY  - 2021\nER  - \n\n" for t in TITLES),
        "assistant.ingest.ris.ris_to_record",
        {"line": 6},
    ),
    "csl-json": (
        "papers.json",
        json.dumps(
            [
                {"id": f"k{i}", "type": "article-journal", "title": t, "issued": {"date-parts": [[2021]]}}
                for i, t in enumerate(TITLES)
            ]
        ),
        "assistant.ingest.csljson.csl_to_record",
        {"record": 2},
    ),
    "s2-json": (
        "s2.json",
        json.dumps({"data": [{"paperId": f"p{i}", "title": t, "year": 2021} for i, t in enumerate(TITLES)]}),
        "assistant.ingest.csljson.s2_to_record",
        {"record": 2},
    ),
    "json": (
        "papers.json",
        json.dumps([{"title": t} for t in TITLES]),
        "assistant.ingest.jsonfile.record_to_paper",
        {"record": 2},
    ),
    "jsonl": (
        "papers.jsonl",
        "".join(json.dumps({"title": t}) + "\n" for t in TITLES),
        "assistant.ingest.jsonfile.record_to_paper",
        {"line": 2},
    ),
    "atom": (
        "feed.xml",
        _atom(TITLES),
        "assistant.ingest.arxiv.entry_to_record",
        {"record": 2},
    ),
    "listing": (
        "listing.txt",
        "".join(f"{t}\n{ABSTRACT}\n\n" for t in TITLES),
        "assistant.ingest.listing.record_to_paper",
        {"line": 4},
    ),
}
FAILURES: list[Exception] = [
    KeyError("booktitle"),
    TypeError("'NoneType' object is not subscriptable"),
    IndexError("list index out of range"),
    ValueError("invalid literal for int() with base 10: 'x'"),
    AttributeError("'list' object has no attribute 'strip'"),
]


def _mentions_poison(args: tuple[Any, ...]) -> bool:
    return any(POISON in ("".join(a.itertext()) if isinstance(a, Element) else repr(a)) for a in args)


def _breaking(real: Callable[..., Any], failure: Exception) -> Callable[..., Any]:
    def convert(*args: Any, **kwargs: Any) -> Any:
        if _mentions_poison(args):
            raise failure
        return real(*args, **kwargs)

    return convert


@pytest.mark.parametrize("failure", FAILURES, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("kind", sorted(CASES))
def test_one_record_that_trips_the_importer_costs_only_that_record(
    kind: str, failure: Exception, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, text, target, where = CASES[kind]
    module, function = target.rsplit(".", 1)
    real = getattr(__import__(module, fromlist=[function]), function)
    monkeypatch.setattr(target, _breaking(real, failure))
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["First Good Paper", "Last Good Paper"]
    (skipped,) = result.errors
    assert (skipped.path, skipped.line, skipped.record) == (str(path), where.get("line"), where.get("record"))
    message = str(skipped)
    assert message.startswith(f"{InputError('', path=path, **where).location_text()}could not be read: ")
    assert type(failure).__name__ not in message and "Error" not in message
    if isinstance(failure, KeyError):
        assert "'booktitle' field is missing" in message


def test_a_file_the_parser_trips_on_is_reported_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path, text: str) -> Any:
        raise KeyError("booktitle")

    monkeypatch.setitem(PARSERS, "csv", broken)
    path = tmp_path / "papers.csv"
    path.write_text("title\nOne\n", encoding="utf-8")
    (report,) = ingest_files(lambda: pytest.fail("nothing to store"), [path])
    assert report.error is not None
    assert str(report.error) == (
        f"{path}: could not be read: its 'booktitle' field is missing or not in the form expected; "
        "no papers were imported from this file"
    )


# -- CSV ---------------------------------------------------------------------------------------


def test_every_row_csv_writer_writes_is_read_back(tmp_path: Path) -> None:
    rows = []
    for i in range(200):
        title = f"Paper {i}"
        if i % 7 == 0:
            title = f'He said "Paris" today, part {i}'
        elif i % 5 == 0:
            title = f"Commas, semicolons; and tabs\tin title {i}"
        abstract = f'Line one of {i}.\nLine two, with "quotes".' if i % 3 == 0 else f"Plain abstract {i}."
        rows.append([title, abstract, "Ann Lee; Bo Chen", 2000 + i % 25])
    path = tmp_path / "written.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Title", "Abstract", "Authors", "Year"])
        writer.writerows(rows)
    _, result = parse_file(path)
    assert not result.errors
    assert [p.title for p in result.papers] == [r[0].replace("\t", " ") for r in rows]
    assert result.papers[0].title == 'He said "Paris" today, part 0'
    assert result.papers[3].abstract == 'Line one of 3. Line two, with "quotes".'
    assert [p.year for p in result.papers] == [r[3] for r in rows]


def test_an_unclosed_quote_costs_its_row_not_the_rows_after_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    path.write_text(
        "title,abstract,year\n"
        "First good,abs,2019\n"
        '"Broken title,abs,2020\n'
        "Good after,abs,2021\n"
        '"Quoted good","multi\nline abstract",2022\n'
        "Last good,abs,2023\n",
        encoding="utf-8",
    )
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["First good", "Good after", "Quoted good", "Last good"]
    assert result.papers[2].abstract == "multi line abstract"
    assert [str(e) for e in result.errors] == [
        f'{path}:3: a quote (") opened in this row is not closed; the row is skipped and the next line read'
    ]


def test_a_quote_left_open_to_the_end_of_the_file_costs_only_its_row(tmp_path: Path) -> None:
    path = tmp_path / "end.csv"
    path.write_text('title,year\nGood one,2020\n"Never closed,2021\nGood two,2022\nGood three,2023\n')
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["Good one", "Good two", "Good three"]
    assert [e.line for e in result.errors] == [3]


# -- RIS ---------------------------------------------------------------------------------------


def test_a_ris_record_without_its_end_line_takes_no_other_record_with_it(tmp_path: Path) -> None:
    path = tmp_path / "three.ris"
    path.write_text(
        "TY  - JOUR\nTI  - First without end\nAU  - Lee, Ann\nPY  - 2019\n\n"
        "TY  - JOUR\nTI  - Second paper\nPY  - 2020\nER  - \n\n"
        "TY  - JOUR\nTI  - Third paper\nPY  - 2021\nER  - \n",
        encoding="utf-8",
    )
    _, result = parse_file(path)
    assert [(p.title, p.year) for p in result.papers] == [
        ("First without end", 2019),
        ("Second paper", 2020),
        ("Third paper", 2021),
    ]
    assert result.papers[0].authors == ["Ann Lee"]
    assert not result.errors
    assert result.notes == [
        f"{path}:1: it has no 'ER  -' line: it was read up to the 'TY  -' line of the next record"
    ]


# -- Encoding ----------------------------------------------------------------------------------


def test_one_stray_windows_byte_costs_nothing_and_is_noted(tmp_path: Path) -> None:
    path = tmp_path / "mixed.ris"
    text = "".join(f"TY  - JOUR\nTI  - Paper {i} über Straßen\nER  - \n\n" for i in range(5))
    data = text.encode("utf-8").replace(b"Paper 3 \xc3\xbcber", b"Paper 3 \xfcber")  # Latin-1 ü
    path.write_bytes(data)
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == [f"Paper {i} über Straßen" for i in range(5)]
    assert result.notes == [f"{path}: line 14: not UTF-8, read as Windows-1252 (check their accents)"]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("cp1252.bib", "@article{k,\n  title = {Café’s naïve Übersicht},\n  year = {2020}\n}\n"),
        ("cp1252.csv", "title,year\nCafé’s naïve Übersicht,2020\n"),
        ("cp1252.jsonl", json.dumps({"title": "Café’s naïve Übersicht"}, ensure_ascii=False) + "\n"),
        ("cp1252.ris", "TY  - JOUR\nTI  - Café’s naïve Übersicht\nER  - \n"),
    ],
)
def test_a_file_saved_in_windows_1252_keeps_its_accents(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("cp1252"))
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["Café’s naïve Übersicht"]
    assert len(result.notes) == 1 and "read as Windows-1252" in result.notes[0]


def test_the_utf8_byte_order_mark_and_windows_line_ends_are_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbftitle,year\r\nCaf\xc3\xa9,2020\r\n")
    _, result = parse_file(path)
    assert [(p.title, p.year) for p in result.papers] == [("Café", 2020)]
    assert not result.notes and not result.errors


def test_the_encoding_note_reaches_the_user(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(json.dumps({"title": "Ubersicht"}).encode() + b"\n" + b'{"title": "\xdcbersicht"}\n')
    result = CliRunner().invoke(app, ["--store", str(tmp_path / "store"), "ingest", str(path)])
    assert result.exit_code == 0, result.output
    assert "line 2: not UTF-8, read as Windows-1252" in result.output


# -- Years and dates ---------------------------------------------------------------------------


def test_a_year_that_is_no_year_leaves_the_paper_without_one(tmp_path: Path) -> None:
    csl = tmp_path / "zotero.json"
    items = [("Year five", [[5]]), ("No such day", [[2020, 2, 30]]), ("Fine", [[2021, 3, 4]])]
    csl.write_text(
        json.dumps(
            [
                {"id": f"k{i}", "type": "article-journal", "title": t, "issued": {"date-parts": parts}}
                for i, (t, parts) in enumerate(items)
            ]
        )
    )
    _, result = parse_file(csl)
    assert [(p.title, p.year, p.date) for p in result.papers] == [
        ("Year five", None, None),
        ("No such day", 2020, None),
        ("Fine", 2021, "2021-03-04"),
    ]
    assert not result.errors
    assert result.notes == [
        f"{csl} (record 1): 'year' '5' is not a year: stored without a year",
        f"{csl} (record 2): 'date' '2020-02-30' is not a date (YYYY-MM-DD): stored without a date",
    ]
    ris = tmp_path / "year.ris"
    ris.write_text("TY  - JOUR\nTI  - RIS year five\nPY  - 5\nER  - \n")
    (paper,) = parse_file(ris)[1].papers
    assert (paper.title, paper.year) == ("RIS year five", None)


def test_dates_and_years_in_other_forms(tmp_path: Path) -> None:
    path = tmp_path / "dates.jsonl"
    records = [
        {"title": "Spreadsheet year", "year": 2020.0},
        {"title": "Year text with a date", "year": "2019-05"},
        {"title": "Month and year", "date": "May 2018"},
        {"title": "Slashed date", "date": "2017/06/07"},
        {"title": "Far future", "year": 20201},
        {"title": "Year as a list", "year": [2020]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, result = parse_file(path)
    assert [(p.title, p.year, p.date) for p in result.papers] == [
        ("Spreadsheet year", 2020, None),
        ("Year text with a date", 2019, None),
        ("Month and year", 2018, None),
        ("Slashed date", 2017, "2017-06-07"),
        ("Far future", None, None),
    ]
    assert [str(e) for e in result.errors] == [f"{path}:6: 'year' must be a year such as 2021, got list"]


def test_a_listing_date_that_is_no_date_leaves_the_paper_without_one(tmp_path: Path) -> None:
    path = tmp_path / "profile.txt"
    path.write_text(
        f"CLFeb 30, 2022\nA paper with no such day\nAnn Lee, Bo Chen\n{ABSTRACT}\n"
        f"CLMar 3, 2022\nA paper with a day\nAnn Lee, Bo Chen\n{ABSTRACT}\n"
    )
    _, result = parse_file(path, "listing")
    assert [(p.title, p.date) for p in result.papers] == [
        ("A paper with no such day", None),
        ("A paper with a day", "2022-03-03"),
    ]


# -- arXiv's LaTeX escapes ---------------------------------------------------------------------


def test_arxiv_escapes_are_stored_as_the_characters_and_math_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "feed.xml"
    path.write_text(
        _atom([r"Q\&amp;A at 30\% with snake\_case and \#tags"]).replace(
            ABSTRACT, r"We gain 30\% (and $25\%$ in math, $x_1$) on R\&amp;D \_ \# tasks."
        )
    )
    (paper,) = parse_file(path)[1].papers
    assert paper.title == "Q&A at 30% with snake_case and #tags"
    assert paper.abstract == r"We gain 30% (and $25\%$ in math, $x_1$) on R&D _ # tasks."


def test_crossref_shaped_csl_items_import_and_export_as_csl(tmp_path: Path) -> None:
    """Manubot's and Crossref's CSL-JSON give text variables as lists (`"container-title":
    ["Nature"]`, `"subtitle": []`); pandoc refuses a list there, so the export must not repeat it."""
    from assistant.export import render
    from assistant.export.common import ExportContext
    from assistant.models import StoredPaper

    item = {
        "id": "x",
        "type": "article-journal",
        "title": ["Deep learning for tabular data"],
        "container-title": ["Journal of Tables"],
        "short-container-title": [],
        "subtitle": [],
        "original-title": [],
        "author": [{"family": "Rao", "given": "Mina"}],
        "issued": {"date-parts": [[2021, 3]]},
        "DOI": "10.1000/tables.1",
    }
    path = tmp_path / "refs.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    _, result = parse_file(path)
    assert not result.errors
    (paper,) = result.papers
    assert paper.title == "Deep learning for tabular data" and paper.venue == "Journal of Tables"
    (out,) = json.loads(render("csl-json", [StoredPaper(paper=paper)], ExportContext()))
    assert out["container-title"] == "Journal of Tables"
    assert not [k for k, v in out.items() if isinstance(v, list) and k not in ("author", "editor")]
