"""`triage export`: every format read back by an independent parser, re-imported, and escaped."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import bibtexparser
import jsonschema
import pytest
import rispy
from bibtexparser.middlewares import LatexDecodingMiddleware
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from assistant.cli import app
from assistant.config import Settings, load_settings
from assistant.export import bib
from assistant.export.keys import citation_keys
from assistant.export.latex import readable
from assistant.lists import ReadingLists
from assistant.models import Assessment, Decision, Paper, Status, TopicScore
from assistant.store import Store
from conftest import FIXTURES

runner = CliRunner()
AGENDA = """# Agenda

## Multilingual models
Language models for many languages, low-resource languages.

## Efficient fine-tuning
Adapters, LoRA, parameter-efficient methods.

## Not interested
Blockchains.
"""
DECIDED = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TITLE_A = "BERT and 50% of R&D: {Braces} #1 a_b \\cmd $x$ ~ x^2 Müller's Café"
TITLE_B = "=cmd|' /C calc'!A0 <script>alert(1)</script>"
NOTE_A = 'Read § 3 & 4 — 50% <faster> =HYPERLINK("x")'

A = Paper.create(
    title=TITLE_A,
    abstract="We gain 5% & more -- cheaply; see {x} #2 under_score and \\emph.",
    authors=["Jörg Müller", "Rens van de Schoot", "Ann Lee"],
    year=2024,
    date="2024-01-03",
    arxiv_id="2401.01234v2",
    categories=["cs.CL", "cs.LG"],
    sources=["test"],
)
B = Paper.create(
    title=TITLE_B,
    authors=["Zoë O'Brien"],
    year=2023,
    venue="Proceedings of ACL 2023",
    doi="10.1234/ABC_(x)",
    sources=["test"],
)
C = Paper.create(title="日本語の論文 — a study of Ümlauts", url="javascript:alert(1)", sources=["test"])
D1 = Paper.create(
    title="Attention Is Enough",
    authors=["Jane Smith"],
    year=2020,
    venue="Journal of Machine Learning Research",
    doi="10.5555/jmlr.1",
    sources=["test"],
)
D2 = Paper.create(
    title="Attention for Everyone",
    authors=["Bob Smith"],
    year=2020,
    url="https://example.org/d2",
    sources=["test"],
)
E = Paper.create(
    title="The Adapter Zoo",
    abstract="A zoo of adapters for parameter-efficient transfer.",
    authors=["Li Wei"],
    year=2022,
    arxiv_id="2201.00001",
    categories=["cs.LG"],
    sources=["test"],
)
PAPERS = [A, B, C, D1, D2, E]
KEYS = {
    A.id: "muller2024bert",
    B.id: "obrien2023cmd",
    C.id: "anonstudy",
    D1.id: "smith2020attentiona",
    D2.id: "smith2020attentionb",
    E.id: "wei2022adapter",
}


def assessment(multi: int, efficient: int, reason: str = "", **extra: Any) -> Assessment:
    return Assessment(
        topics=[
            TopicScore(topic="Multilingual models", score=multi, reason=reason or f"multilingual {multi}"),
            TopicScore(topic="Efficient fine-tuning", score=efficient, reason=f"efficient {efficient}"),
            TopicScore(topic="Not interested", score=0, reason="no"),
        ],
        relevance=float(max(multi, efficient)),
        engine="llm",
        model="gpt-4o-mini",
        created_at=DECIDED,
        **extra,
    )


def fill(store: Store) -> None:
    store.upsert_papers(PAPERS)
    store.set_assessments(
        {
            A.id: assessment(
                8,
                3,
                "Covers <b>many</b> languages & =1+1",
                tags=["multilingual"],
                summary="A summary with <i>markup</i> & 100%.",
            ),
            B.id: assessment(2, 9, tags=["lora"]),
            D1.id: assessment(0, 0),
            D2.id: assessment(5, 5),
            E.id: assessment(1, 7, tags=["adapters"]),
        }
    )
    lists = ReadingLists(store)
    lists.create("Reading group", "Thursday <b>papers</b> & more")
    lists.create("Zürich seminar")
    store.set_decision(
        A.id,
        Decision(status=Status.ACCEPTED, starred=True, note=NOTE_A, tags=["must-read"], decided_at=DECIDED),
    )
    store.set_decision(
        B.id, Decision(status=Status.MAYBE, note="+SUM(A1:A9)", tags=["-2+3", "@risky"], decided_at=DECIDED)
    )
    store.set_decision(E.id, Decision(status=Status.REJECTED, decided_at=DECIDED))
    lists.add("Reading group", [A.id, B.id])
    lists.add("Zürich seminar", [A.id])


@pytest.fixture
def env(tmp_path: Path, embedded_settings: Settings) -> dict[str, str]:
    fill(Store.open(embedded_settings))
    agenda = tmp_path / "agenda.md"
    agenda.write_text(AGENDA, encoding="utf-8")
    return {"TRIAGE_STORE": str(embedded_settings.store), "TRIAGE_AGENDA": str(agenda), "COLUMNS": "160"}


def run(env: dict[str, str], *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=env)


def export(env: dict[str, str], *args: str) -> str:
    result = run(env, "export", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def reimport(tmp_path: Path, name: str, text: str, *args: str) -> Store:
    """Import an export into a fresh store, through the CLI; that store."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    fresh = tmp_path / f"fresh-{name}"
    result = runner.invoke(app, ["--store", str(fresh), "ingest", *args, str(path)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    return Store.open(load_settings(store=fresh))


def assert_same_papers(
    store: Store, papers: list[Paper] = PAPERS, braces: bool = True, math_as_text: bool = False
) -> None:
    assert store.count() == len(papers)
    for paper in papers:
        got = store.get(paper.id)
        assert got is not None, paper.id
        title = paper.title if braces else paper.title.replace("{", "").replace("}", "")
        title = readable(title) if math_as_text else title  # RIS and CSL-JSON carry math as text
        assert (got.paper.title, got.paper.authors, got.paper.year) == (title, paper.authors, paper.year)
        assert (got.paper.arxiv_id, got.paper.doi) == (paper.arxiv_id, paper.doi)


# -- citation keys -------------------------------------------------------------------------


def test_citation_keys_are_unique_stable_and_ascii() -> None:
    assert citation_keys(PAPERS) == KEYS
    assert citation_keys(list(reversed(PAPERS))) == KEYS
    third = Paper.create(title="Attention, again", authors=["Al Smith"], year=2020)
    keys = citation_keys([D1, D2, third])
    assert sorted(keys.values()) == ["smith2020attentiona", "smith2020attentionb", "smith2020attentionc"]
    assert citation_keys([D2]) == {D2.id: "smith2020attention"}
    strasse = Paper.create(title="Über Straße", authors=["Hans Groß"])
    assert citation_keys([strasse]) == {strasse.id: "grossuber"}


def test_bibtex_escaping_of_every_special_character() -> None:
    assert bib.escape("{a} % & # _ \\ $ ~ ^") == (
        "\\{a\\} \\% \\& \\# \\_ {\\textbackslash} \\$ {\\textasciitilde} {\\textasciicircum}"
    )
    assert bib.escape('Ærø "quoted" -- x | y') == '{\\AE}r{\\o} {"}quoted{"} -{}- x \\ensuremath{|} y'
    assert bib.escape_title("LoRA for GPT-4 and Fine-Tuning") == "{LoRA} for {GPT-4} and Fine-Tuning"


# -- BibTeX ----------------------------------------------------------------------------------


def test_bibtex_parses_escapes_and_reimports(tmp_path: Path, env: dict[str, str]) -> None:
    text = export(env, "--format", "bib")
    library = bibtexparser.parse_string(text)
    assert library.failed_blocks == []
    entries = {e.key: e for e in library.entries}
    assert set(entries) == set(KEYS.values())
    a = entries["muller2024bert"]
    assert a.entry_type == "misc"
    assert (a["eprint"], a["archivePrefix"], a["primaryClass"]) == ("2401.01234", "arXiv", "cs.CL")
    assert a["url"] == "https://arxiv.org/abs/2401.01234"
    for escaped in ("50\\%", "R\\&D", "\\{Braces\\}", "\\#1", "a\\_b", "{\\textbackslash}cmd", "{$x$}"):
        assert escaped in a["title"], escaped
    assert '{\\"u}' in a["title"] or '\\"u' in a["title"]
    assert a["author"] == 'M{\\"u}ller, J{\\"o}rg and van de Schoot, Rens and Lee, Ann'  # braced: one letter
    for field in ("title", "abstract", "annote", "keywords"):
        assert not re.search(r"(?<!\\)[%&#_]", a[field]), (field, a[field])
    assert "must-read" in a["keywords"] and "annote" in a.fields_dict and "note" not in a.fields_dict
    b = entries["obrien2023cmd"]
    assert (b.entry_type, b["booktitle"], b["doi"]) == (
        "inproceedings",
        "Proceedings of ACL 2023",
        "10.1234/abc_(x)",
    )
    assert entries["smith2020attentiona"].entry_type == "article"
    # An independent LaTeX decoder reads back the original characters.
    decoded = {
        e.key: e
        for e in bibtexparser.parse_string(text, append_middleware=[LatexDecodingMiddleware()]).entries
    }
    # (pylatexenc's default table reads \textasciicircum as U+02C6; LaTeX prints "^".)
    title = decoded["muller2024bert"]["title"].replace("\u02c6", "^")
    assert title.replace("{", "").replace("}", "") == TITLE_A.replace("{", "").replace("}", "")
    assert "日本語の論文" in decoded["anonstudy"]["title"]
    assert export(env, "--format", "bib") == text  # same keys, same bytes, run after run
    # Escaped braces and the other specials come back as they were: the same title, the same paper.
    assert_same_papers(reimport(tmp_path, "out.bib", text))


# -- RIS and CSL-JSON ------------------------------------------------------------------------


def test_ris_parses_with_rispy_and_reimports(tmp_path: Path, env: dict[str, str]) -> None:
    text = export(env, "-f", "ris")
    records = {r["id"]: r for r in rispy.loads(text)}
    assert set(records) == set(KEYS.values())
    a = records["muller2024bert"]
    assert a["title"] == readable(TITLE_A) and a["authors"][1] == "van de Schoot, Rens"
    assert a["urls"] == ["https://arxiv.org/abs/2401.01234"] and a["notes"] == [NOTE_A]
    assert records["obrien2023cmd"]["doi"] == "10.1234/abc_(x)"
    assert records["obrien2023cmd"]["type_of_reference"] == "CPAPER"
    assert_same_papers(reimport(tmp_path, "out.ris", text), math_as_text=True)


def test_csl_json_is_valid_against_the_schema_and_reimports(tmp_path: Path, env: dict[str, str]) -> None:
    text = export(env, "-f", "csl-json")
    items = json.loads(text)
    schema = json.loads((FIXTURES / "csl" / "csl-data.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(items)
    by_id = {i["id"]: i for i in items}
    assert set(by_id) == set(KEYS.values())
    a = by_id["muller2024bert"]
    assert (a["type"], a["number"], a["issued"]) == (
        "article",
        "arXiv:2401.01234",
        {"date-parts": [[2024, 1, 3]]},
    )
    assert a["author"][1] == {"family": "Schoot", "given": "Rens", "non-dropping-particle": "van de"}
    assert by_id["obrien2023cmd"]["type"] == "paper-conference"
    assert "author" not in by_id["anonstudy"] and by_id["anonstudy"]["type"] == "document"
    assert_same_papers(reimport(tmp_path, "out.json", text), math_as_text=True)


# -- CSV -----------------------------------------------------------------------------------


def test_csv_one_row_per_paper_with_formulas_neutralised(env: dict[str, str]) -> None:
    rows = list(csv.DictReader(io.StringIO(export(env, "-f", "csv"))))
    assert len(rows) == len(PAPERS)
    by_id = {r["id"]: r for r in rows}
    # The queue's order: the engine's relevance with what the decisions taught (A is accepted
    # and starred, B only a maybe).
    assert [r["id"] for r in rows][:2] == [A.id, B.id]
    a, b = by_id[A.id], by_id[B.id]
    assert (a["topic: Multilingual models"], a["topic: Efficient fine-tuning"], a["relevance"]) == (
        "8",
        "3",
        "8.0",
    )
    assert "topic: Not interested" not in a
    assert (a["status"], a["starred"], a["lists"]) == ("accepted", "yes", "Reading group; Zürich seminar")
    assert a["note"] == NOTE_A and a["authors"] == "Jörg Müller; Rens van de Schoot; Ann Lee"
    assert b["title"] == "'" + TITLE_B and b["note"] == "'+SUM(A1:A9)" and b["tags"] == "lora; -2+3; @risky"
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "@")), cell
            assert not cell.startswith("-") or re.fullmatch(r"-?\d+(\.\d+)?", cell), cell


# -- JSONL: the lossless round trip -----------------------------------------------------------


def test_jsonl_round_trip_restores_everything(
    tmp_path: Path, env: dict[str, str], embedded_settings: Settings
) -> None:
    text = export(env, "-f", "jsonl")
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == len(PAPERS)
    first = next(r for r in lines if r["paper"]["id"] == A.id)
    assert first["lists"] == {"Reading group": "Thursday <b>papers</b> & more", "Zürich seminar": ""}
    assert first["assessment"]["topics"][0]["reason"] == "Covers <b>many</b> languages & =1+1"
    fresh = reimport(tmp_path, "all.jsonl", text)
    original = Store.open(embedded_settings)
    for item in original.iter_all():
        got = fresh.get(item.paper.id)
        assert got is not None
        assert got.paper == item.paper
        assert got.assessment == item.assessment
        assert got.decision == item.decision
        assert got.added_at == item.added_at  # a digest of the restored store sees nothing new
    lists = {rl.name: rl.description for rl in ReadingLists(fresh).all()}
    assert lists == {"Reading group": "Thursday <b>papers</b> & more", "Zürich seminar": ""}
    assert sorted(ReadingLists(fresh).members("Reading group")) == sorted([A.id, B.id])


def test_jsonl_reimport_keeps_newer_decisions_and_assessments(
    tmp_path: Path, env: dict[str, str], embedded_settings: Settings
) -> None:
    text = export(env, "-f", "jsonl")
    store = Store.open(embedded_settings)
    later = datetime(2026, 1, 1, tzinfo=UTC)
    store.set_decision(A.id, Decision(status=Status.REJECTED, note="changed my mind", decided_at=later))
    newer = assessment(1, 1, "re-assessed").model_copy(update={"created_at": later})
    store.set_assessment(B.id, newer)
    ReadingLists(store).delete("Zürich seminar")
    path = tmp_path / "backup.jsonl"
    path.write_text(text, encoding="utf-8")
    result = run(env, "ingest", str(path))
    assert result.exit_code == 0, result.output
    a, b = store.get(A.id), store.get(B.id)
    assert a is not None and b is not None
    assert (a.decision.status, a.decision.note) == (Status.REJECTED, "changed my mind")
    assert set(a.decision.lists) == {"Reading group", "Zürich seminar"}  # memberships are unioned
    assert ReadingLists(store).exists("Zürich seminar")
    assert b.assessment == newer


def test_ordinary_json_records_with_a_paper_field_are_not_full_records(tmp_path: Path) -> None:
    # Hugging Face daily-papers items hold a `paper` object but no `decision`: a plain record.
    path = tmp_path / "hf.json"
    path.write_text(
        json.dumps([{"paper": {"id": "2401.00002", "authors": [{"name": "X"}]}, "title": "HF paper"}])
    )
    result = runner.invoke(app, ["--store", str(tmp_path / "s"), "ingest", str(path)])
    assert result.exit_code == 0, result.output
    (item,) = Store.open(load_settings(store=tmp_path / "s")).iter_all()
    assert item.paper.title == "HF paper" and item.decision == Decision()


def test_broken_full_record_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = {"paper": {"id": "arxiv:2401.00003", "title": "Fine"}, "decision": {}}
    bad = {"paper": {"id": "arxiv:2401.00004", "title": "Bad"}, "decision": {"status": "loved"}}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["--store", str(tmp_path / "s"), "ingest", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert f"{path}:2: 'decision.status'" in result.output and "Traceback" not in result.output


# -- Markdown and HTML -----------------------------------------------------------------------


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.sections: dict[str, list[str]] = {}
        self._heading: str | None = None
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "h2":
            self._in_h2, self._heading = True, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._in_h2 = False
            assert self._heading is not None
            self._heading = re.sub(r"\s*\(\d+\)$", "", self._heading.strip())
            self.sections[self._heading] = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_h2 and self._heading is not None:
            self._heading += data
        elif self._heading is not None:
            self.sections[self._heading].append(data)

    def hrefs(self) -> list[str]:
        return [str(a.get("href")) for t, a in self.tags if "href" in a]


def in_section(page: Page, heading: str, text: str) -> bool:
    return any(text in chunk for chunk in page.sections[heading])


def test_markdown_groups_by_topic_with_links_and_escaping(env: dict[str, str]) -> None:
    text = export(env, "-f", "md", "--list", "Reading group")
    assert text.startswith("# Reading list: Reading group\n")
    assert "<script>" not in text and "javascript:" not in text
    page = Page()
    page.feed(MarkdownIt("commonmark").render(text))
    assert [t for t, _ in page.tags].count("script") == 0
    assert list(page.sections) == ["Multilingual models", "Efficient fine-tuning"]
    # Every special character shows literally; the `$x$` math span reads as text, as in RIS.
    assert in_section(page, "Multilingual models", readable(TITLE_A)) and in_section(
        page, "Efficient fine-tuning", TITLE_B
    )
    assert in_section(page, "Multilingual models", "Covers <b>many</b> languages & =1+1")
    assert in_section(page, "Multilingual models", NOTE_A)
    assert "Thursday <b>papers</b> & more" in "".join(page.text)
    assert "https://arxiv.org/abs/2401.01234" in page.hrefs()
    assert "https://doi.org/10.1234/abc_(x)" in page.hrefs()


def test_markdown_of_everything_has_other_and_unassessed_groups(env: dict[str, str]) -> None:
    page = Page()
    page.feed(MarkdownIt("commonmark").render(export(env, "-f", "md")))
    assert list(page.sections) == [
        "Multilingual models",
        "Efficient fine-tuning",
        "Other papers",
        "Not assessed",
    ]
    assert in_section(page, "Multilingual models", "Attention for Everyone")  # a 5-5 tie: the first topic
    assert in_section(page, "Other papers", "Attention Is Enough")
    assert in_section(page, "Not assessed", C.title)
    assert all(h.startswith(("https://", "#")) for h in page.hrefs())


def test_a_topic_selection_files_every_paper_under_that_topic(env: dict[str, str]) -> None:
    page = Page()
    page.feed(MarkdownIt("commonmark").render(export(env, "-f", "md", "--topic", "efficient fine-tuning")))
    assert list(page.sections) == ["Efficient fine-tuning"]
    text = "".join(page.sections["Efficient fine-tuning"])
    assert text.index(TITLE_B) < text.index("The Adapter Zoo") < text.index(readable(TITLE_A))
    assert "efficient 3" in text  # A's reason for this topic, not for its best one


def test_html_is_self_contained_escaped_and_sortable(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "list.html"
    result = run(env, "export", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"Wrote 6 papers to {out}" in result.stderr.replace("\n", "")
    page = Page()
    page.feed(out.read_text(encoding="utf-8"))
    tags = [t for t, _ in page.tags]
    assert tags.count("script") == 1 and "link" not in tags and "img" not in tags
    assert not any("src" in attrs for _, attrs in page.tags)
    assert all(h.startswith(("https://", "#")) for h in page.hrefs())
    policy = next(a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv"))
    assert policy is not None and "default-src 'none'" in policy
    assert list(page.sections) == [
        "Multilingual models",
        "Efficient fine-tuning",
        "Other papers",
        "Not assessed",
    ]
    assert in_section(page, "Efficient fine-tuning", TITLE_B)  # shown as text, not run as markup
    assert in_section(page, "Multilingual models", NOTE_A)
    assert in_section(page, "Not assessed", C.title)
    assert tags.count("table") == 4 and tags.count("tr") == len(PAPERS) + 4
    headers = [a.get("data-type") for t, a in page.tags if t == "th"]
    assert headers[:7] == ["num", None, "num", "num", "num", None, None]


# -- selection, errors, output ------------------------------------------------------------------


def ids(text: str) -> list[str]:
    return [json.loads(line)["paper"]["id"] for line in text.splitlines()]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--status", "accepted"], [A.id]),
        (["--status", "maybe", "--status", "rejected"], [B.id, E.id]),
        (["--tag", "must-read"], [A.id]),
        (["--tag", "multilingual"], [A.id]),
        (["--topic", "efficient FINE-tuning", "--min-score", "6"], [B.id, E.id]),
        (["--topic", "Multilingual models"], [A.id, D2.id, B.id, E.id]),
        (["--min-score", "6"], [A.id, B.id, E.id]),
        (["--since", "2023"], [A.id, B.id]),
        (["--list", "Reading group", "--status", "maybe"], [B.id]),
        (["--starred"], [A.id]),
        (["--query", "a zoo of adapters", "--limit", "1"], [E.id]),
        (["--query", "a zoo of adapters", "--status", "accepted"], [A.id]),
    ],
)
def test_filters_combine(env: dict[str, str], args: list[str], expected: list[str]) -> None:
    assert ids(export(env, "-f", "jsonl", *args)) == expected


def test_stdout_holds_only_the_export(env: dict[str, str]) -> None:
    result = run(env, "export", "-f", "jsonl")
    assert len(ids(result.stdout)) == len(PAPERS)
    assert "Exported 6 papers (jsonl)" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-f", "docx"],
            "unknown export format 'docx'; one of: bib, biblatex, ris, csl-json, csv, jsonl, md, html",
        ),
        ([], "say which format: --format"),
        (["-o", "x.txt"], "cannot tell the format from 'x.txt'"),
        (["-f", "md", "--topic", "nope"], "no topic 'nope' in the agenda"),
        (
            ["-f", "bib", "--list", "Nope"],
            "no reading list named 'Nope' (lists: Reading group, Zürich seminar)",
        ),
        (["-f", "bib", "--since", "last week"], "cannot read 'last week' as a date"),
        (["-f", "bib", "-o", "missing/dir/x.bib"], "the directory missing/dir does not exist"),
    ],
)
def test_mistakes_are_one_line_errors(env: dict[str, str], args: list[str], message: str) -> None:
    result = run(env, "export", *args)
    output = " ".join(result.output.split())
    assert result.exit_code == 1
    assert message in output and "Traceback" not in output
    if "topic" in message:
        assert "'Multilingual models', 'Efficient fine-tuning', 'Not interested'" in output


def test_output_file_is_replaced_atomically(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "refs.bib"
    out.write_text("old contents")
    assert run(env, "export", "-o", str(out), "--status", "accepted").exit_code == 0
    assert bibtexparser.parse_string(out.read_text(encoding="utf-8")).entries[0].key == "muller2024bert"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".refs.bib")) == []
    empty = run(env, "export", "-o", str(tmp_path / "none.json"), "--tag", "no-such-tag")
    assert empty.exit_code == 0 and "No papers match" in empty.stderr
    assert json.loads((tmp_path / "none.json").read_text()) == []


def test_markdown_keeps_urls_in_titles_and_notes_as_text_under_github_markdown(
    env: dict[str, str], embedded_settings: Settings
) -> None:
    """GitHub-flavoured Markdown links bare URLs and www. names: a title or note quoting one
    must still print as text, and the only links are the papers' own."""
    import cmarkgfm

    store = Store.open(embedded_settings)
    paper = Paper.create(
        title="Phishing at https://evil.example/login and www.evil.example, 10:30 ftp://x.example",
        arxiv_id="2402.00002",
        sources=["test"],
    )
    store.upsert_papers([paper])
    store.set_decision(paper.id, Decision(status=Status.ACCEPTED, note="mirror: http://evil.example/x"))
    html = cmarkgfm.github_flavored_markdown_to_html(export(env, "-f", "md", "--status", "accepted"))
    page = Page()
    page.feed(html)
    assert "evil" not in " ".join(page.hrefs())
    text = "".join(page.text)
    assert paper.title in text and "mirror: http://evil.example/x" in text
    assert "https://arxiv.org/abs/2402.00002" in page.hrefs()


def test_output_to_a_fifo_device_or_symlink_writes_through(tmp_path: Path, env: dict[str, str]) -> None:
    """`-o` used to rename a temporary file over whatever the path named: a FIFO, a device node
    or a symlink became a regular file."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert run(env, "export", "-f", "ris", "-o", str(fifo)).exit_code == 0
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and b"TY  - " in got[0]

    real = tmp_path / "lists" / "real.bib"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    os.chmod(real, 0o640)
    link = tmp_path / "link.bib"
    link.symlink_to(real)
    assert run(env, "export", "-f", "bib", "-o", str(link)).exit_code == 0
    assert link.is_symlink() and "@" in real.read_text(encoding="utf-8")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert [p.name for p in real.parent.iterdir()] == ["real.bib"]  # no temporary file left

    try:
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.mknod(tmp_path / "full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError:
        return  # device nodes need root
    assert run(env, "export", "-f", "html", "-o", str(tmp_path / "null")).exit_code == 0
    assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode)
    result = run(env, "export", "-f", "html", "-o", str(tmp_path / "full"))
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    assert stat.S_ISCHR(os.lstat(tmp_path / "full").st_mode)
