"""Exported keywords: what a reference manager files the paper under.

The source record's keywords and the researcher's own tags always; an LLM assessment's tags
(topic labels it chose) too; the offline engine's tags never: they are words cut from the
title ("cdm", "editor", "entry"), and a .bib that carried them filed a user's papers under
junk. A keyword holding a list separator stays one keyword in every format.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import bibtexparser
import pytest
import rispy
from bibtexparser.middlewares import RemoveEnclosingMiddleware

from assistant.agenda import parse_agenda
from assistant.config import Settings
from assistant.export import render
from assistant.export.common import ExportContext, keywords
from assistant.ingest import parse_file
from assistant.ingest.ris import LIST_TAGS
from assistant.models import Assessment, Biblio, Decision, Paper, StoredPaper
from assistant.store import Store
from assistant.triage.batch import tag_offline
from conftest import FIXTURES

BIBLIOGRAPHIC = ["bib", "biblatex", "ris", "csl-json"]
SUFFIX = {"bib": ".bib", "biblatex": ".bib", "ris": ".ris", "csl-json": ".json"}


def _paper(**biblio: Any) -> Paper:
    paper = Paper.create(title="An Entry With No Author and No Editor", year=2018)
    return paper.model_copy(update={"biblio": Biblio(**biblio)}) if biblio else paper


def _item(engine: str, engine_tags: list[str], own: list[str], source: list[str]) -> StoredPaper:
    return StoredPaper(
        paper=_paper(keywords=source, source_format="bibtex") if source else _paper(),
        assessment=Assessment(tags=engine_tags, engine=engine),
        decision=Decision(tags=own),
    )


def exported_keywords(fmt: str, items: list[StoredPaper]) -> list[list[str]]:
    """Each exported paper's keywords, as an independent reader of the format splits them."""
    text = render(fmt, items, ExportContext())
    if fmt == "ris":
        return [r.get("keywords", []) for r in rispy.loads(text, list_tags=LIST_TAGS)]
    if fmt == "csl-json":
        values = [str(i.get("keyword", "")) for i in json.loads(text)]
    else:
        library = bibtexparser.parse_string(text, parse_stack=[RemoveEnclosingMiddleware()])
        values = [
            str(e.fields_dict["keywords"].value) if "keywords" in e.fields_dict else ""
            for e in library.entries
        ]
    return [[k.strip() for k in re.split(r"[,;]", v) if k.strip()] for v in values]


@pytest.mark.parametrize("fmt", BIBLIOGRAPHIC)
def test_the_offline_engines_tags_are_not_keywords(fmt: str) -> None:
    item = _item("offline", ["editor", "entry"], own=["must-read"], source=["reference managers"])
    assert exported_keywords(fmt, [item]) == [["reference managers", "must-read"]]


@pytest.mark.parametrize("fmt", BIBLIOGRAPHIC)
def test_an_offline_assessment_alone_writes_no_keywords_field(fmt: str) -> None:
    text = render(fmt, [_item("offline", ["cdm", "scaling"], own=[], source=[])], ExportContext())
    assert "cdm" not in text and "scaling" not in text.lower()
    assert not re.search(r"keywords? =|\"keyword\"|^KW  -", text, re.MULTILINE)


@pytest.mark.parametrize("fmt", BIBLIOGRAPHIC)
def test_an_llms_tags_follow_the_sources_keywords_and_the_researchers(fmt: str) -> None:
    item = _item("llm", ["sparse attention", "must-read"], own=["must-read"], source=["attention"])
    assert exported_keywords(fmt, [item]) == [["attention", "must-read", "sparse attention"]]


def test_the_offline_engine_on_a_real_store_leaves_only_the_researchers_keywords(
    embedded_settings: Settings,
) -> None:
    """The report, end to end: hostile.bib tagged by the offline engine gave `keywords = {editor,
    entry}` to "An Entry With No Author and No Editor" (two tags, joined by the list's comma)."""
    _, parsed = parse_file(FIXTURES / "fidelity" / "hostile.bib")
    store = Store.open(embedded_settings)
    store.upsert_papers(parsed.papers)
    tag_offline(store, parse_agenda("## Reference managers\nBibTeX, Zotero, citation keys and entries.\n"))
    items = list(store.iter_all())
    offline_tags = {t for i in items if i.assessment for t in i.assessment.tags}
    assert offline_tags and all(i.assessment and i.assessment.engine == "offline" for i in items)
    nokey = next(i for i in items if i.paper.title.startswith("An Entry With No Author"))
    store.set_decision(nokey.paper.id, Decision(tags=["anonymous works"]))
    items = list(store.iter_all())
    for fmt in BIBLIOGRAPHIC:
        for item, words in zip(items, exported_keywords(fmt, items), strict=True):
            source = item.paper.biblio.keywords if item.paper.biblio else []
            assert words == [*source, *item.decision.tags], (fmt, item.paper.title)


# A source keyword with a comma (RIS keeps each KW line whole: MeSH headings have commas), a tag of
# the researcher's with a semicolon (the tags dialog splits at commas only) and an LLM's tag with a
# comma (its answer is only trimmed and lowercased).
_RIS = """TY  - JOUR
TI  - B-cell lymphoma in adults
PY  - 2021
KW  - Lymphoma, B-Cell
KW  - Humans
ER  - 
"""


def _separated(tmp_path: Path) -> StoredPaper:
    source = tmp_path / "source.ris"
    source.write_text(_RIS, encoding="utf-8")
    _, parsed = parse_file(source)
    (paper,) = parsed.papers
    assert paper.biblio is not None and paper.biblio.keywords == ["Lymphoma, B-Cell", "Humans"]
    return StoredPaper(
        paper=paper,
        assessment=Assessment(tags=["editor, entry"], engine="llm"),
        decision=Decision(tags=["to read; soon"]),
    )


@pytest.mark.parametrize("fmt", BIBLIOGRAPHIC)
def test_a_keyword_holding_a_separator_stays_one_keyword(fmt: str, tmp_path: Path) -> None:
    item = _separated(tmp_path)
    if fmt == "ris":  # one KW line each: nothing to split at, the keyword as it was
        want = ["Lymphoma, B-Cell", "Humans", "to read; soon", "editor, entry"]
    else:
        want = ["Lymphoma B-Cell", "Humans", "to read soon", "editor entry"]
    assert exported_keywords(fmt, [item]) == [want]
    exported = tmp_path / f"exported{SUFFIX[fmt]}"
    exported.write_text(render(fmt, [item], ExportContext()), encoding="utf-8")
    _, again = parse_file(exported)  # and this tool's own import reads the same keywords back
    (paper,) = again.papers
    assert paper.biblio is not None and paper.biblio.keywords == want


def test_keywords_that_differ_only_by_a_separator_are_one(tmp_path: Path) -> None:
    item = _separated(tmp_path).model_copy(
        update={"decision": Decision(tags=["editor entry", "humans"])},
    )
    assert keywords(item, ",;") == ["Lymphoma B-Cell", "Humans", "editor entry"]


def test_a_csv_tag_holding_the_cells_separator_stays_one_tag(tmp_path: Path) -> None:
    item = _separated(tmp_path)
    rows = list(csv.DictReader(io.StringIO(render("csv", [item], ExportContext()))))
    assert rows[0]["tags"].split("; ") == ["editor, entry", "to read soon"]
