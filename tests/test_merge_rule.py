"""Only the same work is merged, and whatever is merged keeps every citation key.

A .bib's entries with different keys are different works unless an identifier says otherwise;
a conference paper and its journal version stay two papers even with the same title; a merge
of two keys is logged (shown, split off) and exported with biblatex `ids`. All data made up."""

from __future__ import annotations

from pathlib import Path

import bibtexparser
import pytest
from typer.testing import CliRunner

from assistant.export import render
from assistant.export.common import ExportContext
from assistant.ingest import FileReport, ingest_files, store_papers
from assistant.ingest.dedupe import different, work_kind
from assistant.models import Biblio, Paper, StoredPaper, citekeys, variant_id
from assistant.store import Store

TITLE = "Dynamically Discovering Likely Program Invariants to Support Program Evolution"

PAIR_BIB = f"""
@inproceedings{{Ernst99,
  author = {{Ernst, Michael D. and Cockrell, Jake and Griswold, William G. and Notkin, David}},
  title = {{{TITLE}}},
  booktitle = {{Proceedings of the 21st ICSE}},
  series = {{ICSE'99}},
  year = {{1999}},
  pages = {{213--224}}
}}

@article{{Ernst01,
  author = {{Ernst, Michael D. and Cockrell, Jake and Griswold, William G. and Notkin, David}},
  title = {{{TITLE}}},
  journal = {{IEEE Transactions on Software Engineering}},
  year = {{2001}},
  volume = {{27}},
  number = {{2}},
  pages = {{99--123}}
}}
"""

SAME_DOI_BIB = """
@article{Kim2020,
  author = {Kim, Hana and Oduya, Tomas},
  title = {Sparse Routing for Mixtures of Tiny Experts},
  journal = {Journal of Imaginary Machine Learning},
  year = {2020},
  doi = {10.5555/jiml.2020.042}
}

@article{kim2020sparse,
  author = {Kim, Hana and Oduya, Tomas},
  title = {Sparse routing for mixtures of tiny experts},
  journal = {J. Imag. Mach. Learn.},
  year = {2020},
  volume = {4},
  doi = {https://doi.org/10.5555/JIML.2020.042}
}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def entries(text: str) -> dict[str, dict[str, str]]:
    library = bibtexparser.parse_string(text)
    return {e.key: {f.key.lower(): str(f.value) for f in e.fields} for e in library.entries}


def put(store: Store, *papers: Paper) -> FileReport:
    report = FileReport(path="test")
    store_papers(store, list(papers), report)
    return report


def cli_env(store: Store) -> dict[str, str] | None:
    """The CLI's environment for this store (the embedded one; None for the server)."""
    if store.lock_path is not None and store.lock_path.name == "triage-write.lock":
        return {"TRIAGE_STORE": str(store.lock_path.parent), "COLUMNS": "250"}
    return None


def test_conference_paper_and_journal_version_stay_two_papers(store: Store, tmp_path: Path) -> None:
    bib = write(tmp_path, "thesis.bib", PAIR_BIB)
    (first,) = ingest_files(store, [bib])
    assert (first.new, first.merged, first.unchanged, first.skipped) == (2, 0, 0, [])
    papers = {citekeys(i.paper)[0]: i.paper for i in store.iter_all()}
    assert set(papers) == {"Ernst99", "Ernst01"}
    conf, journal = papers["Ernst99"], papers["Ernst01"]
    assert conf.id != journal.id and {conf.id, journal.id} == set(first.ids)
    assert (conf.year, conf.venue) == (1999, "Proceedings of the 21st ICSE")
    assert (journal.year, journal.venue) == (2001, "IEEE Transactions on Software Engineering")
    assert conf.biblio is not None and conf.biblio.fields.get("page") == "213-224"
    assert journal.biblio is not None and journal.biblio.fields.get("volume") == "27"
    assert "collection-title" not in journal.biblio.fields  # the conference's series stays its own
    # Both stay citable by their own keys, with their own types and fields.
    for dialect in ("bib", "biblatex"):
        out = entries(render(dialect, list(store.iter_all()), ExportContext()))
        assert set(out) == {"Ernst99", "Ernst01"}
        assert (out["Ernst99"]["year"], out["Ernst99"]["booktitle"]) == (
            "1999",
            "Proceedings of the 21st ICSE",
        )
        assert (out["Ernst01"]["year"], out["Ernst01"]["volume"]) == ("2001", "27")
        assert "journal" not in out["Ernst99"] and "series" not in out["Ernst01"]
        assert "ids" not in out["Ernst99"] and "ids" not in out["Ernst01"]
    # Nothing was merged, so there is nothing to show or split.
    assert store.merge_log(conf.id) is None and store.merge_log(journal.id) is None
    # Re-importing the file finds the same two papers and changes nothing.
    (again,) = ingest_files(store, [bib])
    assert (again.new, again.merged, again.unchanged) == (0, 0, 2)
    assert sorted(again.ids) == sorted(first.ids) and store.count() == 2


def test_the_pair_in_the_other_order_and_across_files(store: Store, tmp_path: Path) -> None:
    """Journal first, or the two entries in two files: still two papers, and each file's
    re-import lands on its own paper."""
    conf, journal = PAIR_BIB.split("@article")
    a = write(tmp_path, "journal.bib", "@article" + journal)
    b = write(tmp_path, "conference.bib", conf)
    reports = ingest_files(store, [a, b])
    assert [r.new for r in reports] == [1, 1] and store.count() == 2
    again = ingest_files(store, [b, a])
    assert [(r.new, r.merged, r.unchanged) for r in again] == [(0, 0, 1), (0, 0, 1)]
    assert {citekeys(i.paper)[0]: i.paper.year for i in store.iter_all()} == {
        "Ernst99": 1999,
        "Ernst01": 2001,
    }


def test_one_files_entries_with_different_keys_are_different_works(store: Store, tmp_path: Path) -> None:
    """Same title, type and year, two keys in one file (a paper and its erratum, say): two papers."""
    text = """
@article{Lund2019a, title = {On Sparse Tensor Sketches}, author = {Lund, Ada},
  journal = {J. Sketch}, year = {2019}}
@article{Lund2019b, title = {On sparse tensor sketches}, author = {Lund, Ada},
  journal = {J. Sketch}, year = {2019}, note = {Erratum}}
"""
    bib = write(tmp_path, "lund.bib", text)
    (first,) = ingest_files(store, [bib])
    assert first.new == 2 and store.count() == 2
    (again,) = ingest_files(store, [bib])
    assert (again.new, again.merged, again.unchanged) == (0, 0, 2)


def test_same_doi_under_two_keys_is_one_paper_keeping_both_keys(store: Store, tmp_path: Path) -> None:
    bib = write(tmp_path, "refs.bib", SAME_DOI_BIB)
    (first,) = ingest_files(store, [bib])
    assert (first.new, first.merged) == (1, 1) and store.count() == 1
    pid = "doi:10.5555/jiml.2020.042"
    item = store.get(pid)
    assert item is not None and citekeys(item.paper) == ["Kim2020", "kim2020sparse"]
    # biblatex resolves the second key through `ids`; classic BibTeX ignores the unknown field.
    for dialect in ("biblatex", "bib"):
        out = entries(render(dialect, [item], ExportContext()))
        assert set(out) == {"Kim2020"} and out["Kim2020"]["ids"] == "kim2020sparse"
    # The merge is logged, under an id of the merged record's own.
    log = store.merge_log(pid)
    assert log is not None and len(log.entries) == 1
    entry = log.entries[0]
    assert entry.record.extra["citekey"] == "kim2020sparse" and entry.record.id.startswith("title:")
    assert entry.how == "same DOI, another citation key (kim2020sparse)"
    # Re-importing the file adds nothing, and logs nothing again.
    (again,) = ingest_files(store, [bib])
    assert (again.new, again.merged, again.unchanged) == (0, 0, 2)
    log = store.merge_log(pid)
    assert log is not None and len(log.entries) == 1

    env = cli_env(store)
    if env is not None:
        from assistant.cli import app

        runner = CliRunner()
        shown = runner.invoke(app, ["show", pid], env=env)
        assert shown.exit_code == 0, shown.output
        assert "merged records" in shown.output and "kim2020sparse" in shown.output
        result = runner.invoke(app, ["split", pid], env=env)
        assert result.exit_code == 0, result.output
    else:
        store.split(pid, 1)
    # Split: two papers, each with its own key; the kept paper no longer carries the other key.
    assert store.count() == 2 and store.merge_log(pid) is None
    kept = store.get(pid)
    off = store.get(entry.record.id)
    assert kept is not None and off is not None
    assert citekeys(kept.paper) == ["Kim2020"] and citekeys(off.paper) == ["kim2020sparse"]
    assert kept.paper.biblio is not None and "volume" not in kept.paper.biblio.fields
    assert off.paper.doi == "10.5555/jiml.2020.042"
    out = entries(render("biblatex", [kept, off], ExportContext()))
    assert set(out) == {"Kim2020", "kim2020sparse"} and all("ids" not in e for e in out.values())
    # Re-importing after the split keeps it split: each key finds its own paper.
    (after,) = ingest_files(store, [bib])
    assert (after.new, after.merged, after.unchanged) == (0, 0, 2) and store.count() == 2


def test_keys_of_two_files_merged_by_doi_are_kept(store: Store, tmp_path: Path) -> None:
    first, second = SAME_DOI_BIB.split("@article")[1:]
    ingest_files(store, [write(tmp_path, "a.bib", "@article" + first)])
    ingest_files(store, [write(tmp_path, "b.bib", "@article" + second)])
    (item,) = list(store.iter_all())
    assert citekeys(item.paper) == ["Kim2020", "kim2020sparse"]
    out = entries(render("biblatex", [item], ExportContext()))
    assert out["Kim2020"]["ids"] == "kim2020sparse"
    log = store.merge_log(item.paper.id)
    assert log is not None and len(log.entries) == 1


def test_an_alias_that_is_another_entrys_key_is_not_written() -> None:
    one = Paper.create(title="Alpha Paper", doi="10.1/a", sources=["bibtex:x.bib"], extra={"citekey": "A"})
    two = Paper.create(title="Alpha Paper", doi="10.1/a", sources=["bibtex:y.bib"], extra={"citekey": "B"})
    other = Paper.create(title="Beta Paper", sources=["bibtex:z.bib"], extra={"citekey": "B"})
    items = [StoredPaper(paper=one.merged_with(two)), StoredPaper(paper=other)]
    out = entries(render("biblatex", items, ExportContext()))
    assert "ids" not in out["A"]


def test_arxiv_preprint_and_published_version_still_merge(store: Store, tmp_path: Path) -> None:
    title = "Tiny Adapters for Low-Resource Speech Translation"
    put(store, Paper.create(title=title, arxiv_id="2301.04567v2", year=2023, sources=["arxiv"]))
    text = f"""
@inproceedings{{Okafor2025,
  title = {{{title}}}, author = {{Okafor, Ngozi}}, booktitle = {{Proceedings of the 3rd Workshop on Speech}},
  year = {{2025}}, eprint = {{2301.04567}}, archivePrefix = {{arXiv}}, doi = {{10.5555/ws.2025.7}}
}}
"""
    (report,) = ingest_files(store, [write(tmp_path, "pub.bib", text)])
    assert (report.new, report.merged) == (0, 1) and store.count() == 1
    (item,) = list(store.iter_all())
    assert (item.paper.arxiv_id, item.paper.doi) == ("2301.04567", "10.5555/ws.2025.7")
    assert citekeys(item.paper) == ["Okafor2025"]
    # Linked by arXiv's DOI alone (no arXiv id, no title in common beyond case) it merges too.
    put(store, Paper.create(title="Rotary Probes", doi="10.48550/arXiv.2302.00011", year=2023))
    put(store, Paper.create(title="Rotary probes", arxiv_id="2302.00011", venue="TACL", year=2026))
    assert store.count() == 2


def test_a_feed_record_and_a_bib_entry_of_one_paper_merge(store: Store, tmp_path: Path) -> None:
    """Same title, years one apart, a venue that does not contradict the entry type: one paper."""
    title = "Calibrated Retrieval for Long Documents"
    put(store, Paper.create(title=title, year=2024, venue="ACL", sources=["feed:s2"]))
    text = f"""
@inproceedings{{Diaz2025, title = {{{title}}}, author = {{Diaz, Marta}},
  booktitle = {{Proceedings of the 63rd Annual Meeting of the ACL}}, year = {{2025}}}}
"""
    bib = write(tmp_path, "mine.bib", text)
    (report,) = ingest_files(store, [bib])
    assert (report.new, report.merged) == (0, 1) and store.count() == 1
    (item,) = list(store.iter_all())
    assert citekeys(item.paper) == ["Diaz2025"]
    (again,) = ingest_files(store, [bib])
    assert (again.new, again.merged, again.unchanged) == (0, 0, 1)
    # A feed record that names a journal (or comes years later) is another work.
    put(store, Paper.create(title=title, year=2025, venue="Transactions of the ACL", sources=["feed:s2"]))
    put(store, Paper.create(title=title, year=2031, sources=["feed:rss"]))
    assert store.count() == 3


def test_the_rule_itself() -> None:
    def bib(kind: str, year: int, key: str, source: str = "bibtex:a.bib", **more: str) -> Paper:
        return Paper.create(
            title=TITLE,
            year=year,
            sources=[source],
            extra={"citekey": key},
            biblio=Biblio(type=kind, source_format="bibtex"),
            **more,
        )

    conf, journal = bib("paper-conference", 1999, "E99"), bib("article-journal", 2001, "E01", "bibtex:b.bib")
    assert (work_kind(conf), work_kind(journal)) == ("proceedings", "journal")
    assert different(conf, journal)  # type (and years) differ
    assert different(conf, bib("paper-conference", 1999, "E99b"))  # one file, two keys
    assert not different(conf, bib("paper-conference", 1999, "E99"))  # the same record again
    assert not different(conf, bib("chapter", 2000, "X", "bibtex:c.bib"))  # LNCS chapter = the paper
    same_doi = bib("paper-conference", 1999, "E99b", doi="10.5555/x")
    assert not different(same_doi, bib("article-journal", 2001, "E01", doi="10.5555/x"))  # the DOI says one
    preprint = Paper.create(title=TITLE, year=1997, venue="arXiv preprint", sources=["feed"])
    assert work_kind(preprint) == "preprint" and not different(preprint, journal)
    pnas = Paper.create(title=TITLE, year=2001, venue="Proceedings of the National Academy of Sciences")
    assert work_kind(pnas) is None and not different(pnas, journal)
    # The variant id is stable and tells the records apart.
    assert variant_id(conf) == variant_id(conf.model_copy()) != variant_id(journal)
    assert variant_id(conf).startswith(conf.id + "-")


@pytest.mark.parametrize("order", [0, 1])
def test_a_batch_does_not_chain_two_works_through_a_third(store: Store, order: int) -> None:
    """A feed record (no type) first, then both entries of the pair: the first entry merges with
    it, the second stays apart whichever comes first."""
    put(store, Paper.create(title=TITLE, year=2000, sources=["feed:s2"]))
    pair = [
        Paper.create(
            title=TITLE,
            year=1999,
            venue="Proceedings of the 21st ICSE",
            sources=["bibtex:t.bib"],
            extra={"citekey": "Ernst99"},
            biblio=Biblio(type="paper-conference"),
        ),
        Paper.create(
            title=TITLE,
            year=2001,
            venue="IEEE Transactions on Software Engineering",
            sources=["bibtex:t.bib"],
            extra={"citekey": "Ernst01"},
            biblio=Biblio(type="article-journal"),
        ),
    ]
    if order:
        pair.reverse()
    r = put(store, *pair)
    assert (r.new, r.merged) == (1, 1) and store.count() == 2
    keys = sorted(tuple(citekeys(i.paper)) for i in store.iter_all())
    assert keys == sorted([(pair[0].extra["citekey"],), (pair[1].extra["citekey"],)])
