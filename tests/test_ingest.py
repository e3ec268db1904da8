from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.errors import InputError
from assistant.ingest import detect_format, ingest_files, parse_file
from assistant.store import Store
from conftest import sample_records, write_lines


def test_jsonl_with_every_known_field_and_extras(tmp_path: Path) -> None:
    rec = {
        "id": "arXiv:2401.01234v2",
        "title": "A  Title",
        "abstract": "Text.",
        "authors": "Ann Lee, Bo Chen",
        "year": "2024",
        "date": "2024-01-03",
        "venue": "ACL",
        "categories": "cs.CL cs.LG",
        "doi": "10.1234/ABC",
        "url": "https://x.org/p",
        "stars": 5,
    }
    _, result = parse_file(write_lines(tmp_path / "p.jsonl", [json.dumps(rec)]))
    (p,) = result.papers
    assert p.id == "arxiv:2401.01234"
    assert (p.title, p.authors, p.year, p.categories) == (
        "A Title",
        ["Ann Lee", "Bo Chen"],
        2024,
        ["cs.CL", "cs.LG"],
    )
    assert (p.doi, p.venue, p.url, p.date) == ("10.1234/abc", "ACL", "https://x.org/p", "2024-01-03")
    assert p.extra == {"stars": 5}
    assert p.sources == ["jsonl:p.jsonl"]


def test_json_array_and_object_with_papers(tmp_path: Path) -> None:
    arr = tmp_path / "a.json"
    arr.write_text(json.dumps([{"title": "One"}, {"title": "Two", "authors": ["X", "Y"]}]))
    obj = tmp_path / "b.json"
    obj.write_text(json.dumps({"papers": [{"title": "Three"}]}))
    assert [p.title for p in parse_file(arr)[1].papers] == ["One", "Two"]
    assert [p.title for p in parse_file(obj)[1].papers] == ["Three"]


def test_bad_lines_are_reported_with_file_and_line_and_the_rest_imports(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "mixed.jsonl",
        [
            json.dumps({"title": "Good one"}),
            '{"title": "broken", ',
            json.dumps({"abstract": "no title here"}),
            "",
            json.dumps({"title": "Unknown year", "year": "soon"}),
            json.dumps({"title": "Good two", "authors": ["A"]}),
            json.dumps(["not", "an", "object"]),
            json.dumps({"title": "Year as an object", "year": {"value": 2020}}),
        ],
    )
    _, result = parse_file(path)
    # An unknown year leaves the paper without one (and says so); a year that is no text or
    # number at all is a skipped line.
    assert [(p.title, p.year) for p in result.papers] == [
        ("Good one", None),
        ("Unknown year", None),
        ("Good two", None),
    ]
    assert result.notes == [f"{path}:5: 'year' 'soon' is not a year: stored without a year"]
    messages = [str(e) for e in result.errors]
    assert messages[0].startswith(f"{path}:2: invalid JSON")
    assert messages[1] == f"{path}:3: record has no title"
    assert messages[2].startswith(f"{path}:7: expected an object")
    assert messages[3] == f"{path}:8: 'year' must be a year such as 2021, got dict"
    assert result.records == 7


def test_record_numbers_in_a_json_array(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps([{"title": "ok"}, {"title": ""}, {"title": "x", "authors": 3}]))
    errors = [str(e) for e in parse_file(path)[1].errors]
    assert errors == [
        f"{path} (record 2): record has no title",
        f"{path} (record 3): 'authors' must be a list or text, got int",
    ]


def test_invalid_json_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"title": "a"},\n  {"title": }\n]\n')
    with pytest.raises(InputError, match=r"bad.json:3: invalid JSON"):
        parse_file(path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.jsonl", "file not found"),
        (lambda d: d, "is a directory"),
        (lambda d: (d / "bin.jsonl").write_bytes(b"\xff\xfe\x00bad") and d / "bin.jsonl", "not UTF-8"),
        (lambda d: (d / "notes.txt").write_text("hello") and d / "notes.txt", "unknown format"),
    ],
)
def test_unreadable_or_unknown_files(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message):
        parse_file(make(tmp_path))


def test_format_is_detected_by_content(tmp_path: Path) -> None:
    assert detect_format(tmp_path / "x.txt", '{"title": "a"}\n{"title": "b"}\n') == "jsonl"
    assert detect_format(tmp_path / "x.dat", '[{"title": "a"}]') == "json"


def test_a_json_document_with_one_record_per_line_is_json_not_json_lines(tmp_path: Path) -> None:
    """Semantic Scholar's API answers ({"data": [...]}, {"recommendedPapers": [...]}) often come
    saved with a record per line: every record is read, none is skipped as a bad line."""
    records = [{"paperId": f"p{i}", "title": f"Paper number {i}", "abstract": "Text."} for i in range(3)]
    for key in ("data", "recommendedPapers"):
        text = f'{{"{key}": [\n' + ",\n".join(json.dumps(r) for r in records) + "\n]}\n"
        path = tmp_path / f"{key}.json"
        path.write_text(text, encoding="utf-8")
        assert detect_format(path, text) == "json"
        fmt, result = parse_file(path)
        assert fmt == "json"
        assert [p.title for p in result.papers] == [r["title"] for r in records]
        assert not result.errors
    # A file named .jsonl stays JSON Lines, whatever it holds.
    assert detect_format(tmp_path / "x.jsonl", '{"title": "a"}') == "jsonl"


def test_ingest_files_reports_per_file_and_skips_bad_files(
    tmp_path: Path, embedded_settings: Settings
) -> None:
    store = Store.open(embedded_settings)
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(5)])
    reports = ingest_files(store, [good, tmp_path / "missing.json", good])
    assert (reports[0].parsed, reports[0].new) == (5, 5)
    assert reports[1].error is not None and "file not found" in str(reports[1].error)
    assert (reports[2].new, reports[2].unchanged) == (0, 5)
    assert store.count() == 5


def test_crafted_json_is_a_located_error_and_the_rest_imports(
    tmp_path: Path, embedded_settings: Settings
) -> None:
    """Nesting deeper than the parser's recursion and a number past Python's integer-string
    limit used to raise out of the import: the rest of the file and later files were lost."""
    deep = "[" * 5000 + "]" * 5000
    lines = [
        json.dumps({"title": "First fine paper"}),
        deep,
        '{"title": "A year of 5000 digits", "year": ' + "9" * 5000 + "}",
        '{"title": "Nested", "authors": ' + deep + "}",
        json.dumps({"title": "Second fine paper"}),
    ]
    jsonl = write_lines(tmp_path / "crafted.jsonl", lines)
    whole = tmp_path / "deep.json"
    whole.write_text(deep, encoding="utf-8")
    array = tmp_path / "array.json"
    array.write_text('[{"title": "Big", "year": ' + "1" * 5000 + '}, {"title": "Third fine paper"}]')
    later = write_lines(tmp_path / "later.jsonl", [json.dumps({"title": "Fourth fine paper"})])
    store = Store.open(embedded_settings)
    reports = ingest_files(store, [jsonl, whole, array, later])
    assert [r.new for r in reports] == [3, 0, 2, 1]
    assert [(e.line, e.message) for e in reports[0].skipped] == [
        (2, "invalid JSON: nested too deeply"),
        (4, "invalid JSON: nested too deeply"),
    ]
    # A "year" of 5000 digits is no year: the paper is stored without one, and the user told.
    year = "(5,000 characters) is not a year"
    assert any(f"{jsonl}:3: 'year'" in n and year in n for n in reports[0].notes)
    assert reports[1].error is not None and "nested too deeply" in str(reports[1].error)
    assert not reports[2].skipped and "(record 1): 'year'" in reports[2].notes[0]
    assert store.count() == 6


def test_oversized_fields_are_cut_with_a_note(tmp_path: Path, embedded_settings: Settings) -> None:
    record = {
        "title": "A paper whose abstract is a whole book",
        "abstract": "word " * 2_000_000,
        "authors": [f"Author {i}" for i in range(6000)],
        "blob": "x" * 200_000,
    }
    path = write_lines(tmp_path / "big.jsonl", [json.dumps(record), json.dumps({"title": "Small"})])
    store = Store.open(embedded_settings)
    (report,) = ingest_files(store, [path])
    assert report.new == 2 and not report.skipped
    assert len(report.notes) == 3
    assert any("abstract cut from 10,000,000 to 20,000 characters" in n for n in report.notes)
    assert any("authors: 6,000 kept as 5,000" in n for n in report.notes)
    assert any("dropped for size: blob" in n for n in report.notes)
    stored = store.get(report.ids[0])
    assert stored is not None
    assert len(stored.paper.abstract) <= 20_000 and len(stored.paper.authors) == 5000
    assert "blob" not in stored.paper.extra


def test_the_source_record_is_capped_too_with_a_note(tmp_path: Path, embedded_settings: Settings) -> None:
    """The reference manager's record kept beside the paper (item type, names, keywords, every
    other field) is cut like the paper's own fields: a hostile .bib, .ris or CSL-JSON file
    cannot store a 1 MB field, 6,000 authors or 3,000 fields whole."""
    big, many = "x" * 1_000_000, 6_000
    bib = tmp_path / "hostile.bib"
    bib.write_text(
        "@article{k,\n title = {A hostile BibTeX record},\n"
        + f" author = {{{' and '.join(f'Last{i}, First' for i in range(many))}}},\n"
        + f" keywords = {{{', '.join(f'kw{i}' for i in range(many))}}},\n"
        + "".join(f" field{i} = {{value {i}}},\n" for i in range(3_000))
        + f" volume = {{{big}}},\n huge = {{{big}}},\n note = {{{big}}}\n}}\n",
        encoding="utf-8",
    )
    ris = tmp_path / "hostile.ris"
    ris.write_text(
        "TY  - JOUR\nTI  - A hostile RIS record\n"
        + "".join(f"AU  - Last{i}, First\n" for i in range(many))
        + "".join(f"KW  - kw{i}\n" for i in range(many))
        + f"VL  - {big}\nN1  - {big}\nER  - \n",
        encoding="utf-8",
    )
    item = {
        "id": "h",
        "type": "t" * 100_000,
        "title": "A hostile CSL-JSON item",
        "URL": "https://example.org/h",
        "author": [{"family": f"F{i}", "given": "G"} for i in range(many)],
        "editor": [{"family": "E" * 1_000}],
        "translator": [{"family": "T" * 1_000}] * 1_000,
        "keyword": "k" * 1_000,
        **{f"var{i}": f"value {i}" for i in range(3_000)},
    }
    csl = tmp_path / "hostile.json"
    csl.write_text(json.dumps([item]), encoding="utf-8")
    store = Store.open(embedded_settings)
    reports = ingest_files(store, [bib, ris, csl])
    for report in reports:
        assert report.new == 1 and not report.skipped and report.error is None
        stored = store.get(report.ids[0])
        assert stored is not None and stored.paper.biblio is not None
        biblio = stored.paper.biblio
        assert len(biblio.model_dump_json()) < 1_000_000, report.path
        assert len(biblio.authors) <= 5_000 and len(biblio.keywords) <= 200
        assert all(len("".join(p.model_dump().values())) <= 300 for p in [*biblio.authors, *biblio.editors])
        assert len(biblio.type) <= 100 and len(biblio.source_type) <= 100
        assert all(len(v) <= 20_000 for v in biblio.fields.values())
        assert len(json.dumps([biblio.fields, biblio.source_fields])) <= 64_000
        # (a .bib's names are cut as they are read, the others' when they are stored)
        cut = ("biblio.authors: 6,000 kept as 5,000", "'author': the first 5,000 names kept")
        assert any(c in n for n in report.notes for c in cut), report.notes
    bib_notes, ris_notes, csl_notes = (" | ".join(r.notes) for r in reports)
    assert "biblio.keywords: 6,000 kept as 200" in bib_notes
    # (a .bib's fields far beyond any cap are cut before they are decoded, then to their cap)
    assert "'volume' cut from 1,000,000 to 64,000 characters before it was read" in bib_notes
    assert "biblio.fields longer than their cap cut: note" in bib_notes
    assert "biblio fields dropped for size: source_fields.huge" in bib_notes
    assert "biblio.note cut from 1,000,000 to 20,000 characters" in ris_notes
    assert "biblio.volume cut from 1,000,000 to 2,000 characters" in ris_notes
    assert "biblio.type cut from 100,000 to 100 characters" in csl_notes
    assert "biblio.authors longer than 300 characters cut" not in csl_notes  # the count says it
    assert "biblio.editors longer than 300 characters cut" in csl_notes
    assert "biblio.keywords longer than 100 characters cut" in csl_notes
    assert "biblio fields dropped for size: source_fields.translator" in csl_notes


def test_the_progress_moves_as_papers_are_embedded(tmp_path: Path, embedded_settings: Settings) -> None:
    """The bar used to move once per 256-paper chunk (sitting at 0 while the first was embedded):
    it now moves with the embedder's batches, and ends at the number of records."""
    store = Store.open(embedded_settings)
    path = write_lines(tmp_path / "p.jsonl", [json.dumps(r) for r in sample_records(40)])
    steps: list[int] = []
    ingest_files(store, [path], on_progress=steps.append)
    assert sum(steps) == 40 and len(steps) >= 5
    again: list[int] = []
    ingest_files(store, [path], on_progress=again.append)  # nothing to embed: one step per chunk
    assert sum(again) == 40
