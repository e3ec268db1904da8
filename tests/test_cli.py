"""The command line as a user drives it (typer's runner, real store in a temp dir)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from assistant.cli import app
from conftest import sample_records, write_lines

runner = CliRunner()


def run(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env={"COLUMNS": "160"})


def test_help_documents_every_command() -> None:
    result = run("--help")
    assert result.exit_code == 0
    commands = ("ingest", "search", "stats", "doctor", "tag", "ranked", "show", "agenda", "init", "demo")
    for command in (*commands, "review", "mark", "note"):
        assert command in result.output
    assert "TRIAGE_STORE" in result.output


def test_demo_imports_assesses_and_ranks_offline(isolated: Path) -> None:
    result = run("demo", "--top", "5")
    assert result.exit_code == 0, result.output
    assert (isolated / "agenda.md").exists() and (isolated / "store").is_dir()
    assert "Top 5 by relevance" in result.output and "offline" in result.output
    ranked = run("ranked", "--json", "--top", "200")
    rows = [json.loads(line) for line in ranked.output.splitlines()]
    assert len(rows) == len(sample_records())
    relevances = [r["assessment"]["relevance"] for r in rows]
    assert relevances == sorted(relevances, reverse=True)
    again = run("tag")
    assert "up to date" in again.output and again.exit_code == 0


def test_ranked_and_show_mark_assessments_of_an_earlier_agenda(isolated: Path, demo_store: Path) -> None:
    first = json.loads(run("ranked", "--json", "--top", "1").output.splitlines()[0])["paper"]["id"]
    assert "stale" not in run("ranked", "--top", "5").output + run("show", first).output
    agenda = isolated / "agenda.md"
    agenda.write_text(agenda.read_text() + "\n## Speech\nSpeech recognition for dialects.\n")
    ranked = run("ranked", "--top", "5")
    assert "stale" in ranked.output
    assert "5 of these were assessed before the agenda, prompts or paper changed" in ranked.output
    assert "stale:" in run("show", first).output
    assert run("tag").exit_code == 0 and "stale" not in run("ranked", "--top", "5").output


def test_ingest_reports_and_exit_status(tmp_path: Path) -> None:
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(3)])
    assert run("ingest", str(good)).exit_code == 0
    bad = write_lines(
        tmp_path / "bad.jsonl", [json.dumps({"title": "Fine paper"}), "{oops", json.dumps({"year": 1999})]
    )
    result = run("ingest", str(bad))
    assert result.exit_code == 1
    assert f"{bad}:2: invalid JSON" in result.output
    assert f"{bad}:3: record has no title" in result.output
    assert "Traceback" not in result.output
    stats = run("stats")
    assert re.search(r"papers\s+│\s+4 ", stats.output)


def test_search_prints_nearest_papers(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(r) for r in sample_records()])
    run("ingest", str(path))
    result = run("search", "mixture-of-experts routing for multilingual adaptation", "-k", "2")
    assert result.exit_code == 0
    assert "Leveraging Routing" in result.output.splitlines()[4]


def test_user_mistakes_are_one_line_errors(tmp_path: Path) -> None:
    result = run("show", "arxiv:0000.00000")
    # No store where --store points: reading commands say so instead of making an empty one.
    assert result.exit_code == 1 and "no store at store" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "store").exists()
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(r) for r in sample_records(2)])
    assert run("ingest", str(path)).exit_code == 0
    result = run("show", "arxiv:0000.00000")
    assert result.exit_code == 1 and "no paper with id" in result.output and "Traceback" not in result.output
    result = run("tag")
    assert result.exit_code == 1 and "triage init" in result.output
    (tmp_path / "bad.toml").write_text("[[[")
    result = run("--config", str(tmp_path / "bad.toml"), "stats")
    assert result.exit_code == 1 and "not a valid TOML" in result.output


def test_store_flag_and_env_choose_the_store(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", [json.dumps(r) for r in sample_records(2)])
    assert run("--store", str(tmp_path / "elsewhere"), "ingest", str(path)).exit_code == 0
    assert (tmp_path / "elsewhere").is_dir()
    result = runner.invoke(
        app, ["stats"], env={"TRIAGE_STORE": str(tmp_path / "elsewhere"), "COLUMNS": "160"}
    )
    assert re.search(r"papers\s+│\s+2 ", result.output)


def test_doctor_reports_model_and_llm(isolated: Path) -> None:
    result = run("doctor")
    assert result.exit_code == 0, result.output
    assert "sha256 verified" in result.output and "not configured" in result.output


def test_init_writes_an_agenda_that_parses() -> None:
    assert run("init").exit_code == 0
    assert run("init").exit_code == 1
    result = run("agenda")
    assert "Multilingual" in result.output and "negative" in result.output


def test_ranked_shows_the_papers_still_to_decide_unless_asked(isolated: Path, demo_store: Path) -> None:
    """The README's recipe `triage ranked --json --top 8 | triage list add NAME -` must not file
    a rejected paper: by default the queue is the undecided papers."""

    def ids(*args: str) -> list[str]:
        result = run("ranked", "--json", *args)
        assert result.exit_code == 0, result.output
        return [json.loads(line)["paper"]["id"] for line in result.output.splitlines()]

    top = ids("--top", "4")
    assert run("mark", top[0], "--reject").exit_code == 0
    assert run("mark", top[1], "--accept").exit_code == 0
    queue = ids("--top", "200")
    assert top[0] not in queue and top[1] not in queue
    # The queue is every paper in the queue's order less the decided ones.
    assert queue == [pid for pid in ids("--all") if pid not in top[:2]]
    assert ids("--status", "rejected") == [top[0]]
    assert set(ids("--status", "accepted", "--status", "rejected")) == {top[0], top[1]}
    assert len(ids("--all")) == len(sample_records())
    assert (
        "Top 2 (accepted, rejected)" in run("ranked", "--status", "accepted", "--status", "rejected").output
    )


def test_rm_last_import_means_the_very_last_one_and_names_it(tmp_path: Path) -> None:
    """An import that made nothing new is still the last import: `rm --last-import` says so
    instead of reaching back to an older one (which would delete papers the researcher
    meant to keep). Unknown ids are named, and deleting nothing is an error."""
    store = tmp_path / "store"
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(4)])

    def triage(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "160"})

    assert triage("ingest", str(good)).exit_code == 0
    again = write_lines(tmp_path / "again.jsonl", [json.dumps(r) for r in sample_records(2)])
    assert triage("ingest", str(again)).exit_code == 0  # merges only
    nothing = triage("rm", "--last-import", "--yes")
    assert nothing.exit_code == 1 and "again.jsonl" in nothing.output
    assert "made no new papers" in nothing.output
    assert len(triage("export", "-f", "jsonl").stdout.splitlines()) == 4
    missing = triage("rm", "arxiv:9999.99999", "--yes")
    assert missing.exit_code == 1 and "arxiv:9999.99999" in missing.output
    # The demo is an import too: its sample comes back out with --last-import.
    demo = triage("demo")
    assert demo.exit_code == 0 and "already held 4 papers" in demo.output
    undone = triage("rm", "--last-import", "--yes")
    assert undone.exit_code == 0 and "sample_papers.jsonl" in undone.output
    assert len(triage("export", "-f", "jsonl").stdout.splitlines()) == 4


def test_rm_deletes_papers_and_undoes_the_last_import(tmp_path: Path) -> None:
    """A wrong file imported: `rm --last-import` takes back what it made (not the papers it
    merged into); `rm --source` and ids delete too; nothing goes without a confirmation."""
    store = tmp_path / "store"
    good = write_lines(tmp_path / "good.jsonl", [json.dumps(r) for r in sample_records(10)])
    junk = write_lines(
        tmp_path / "junk.jsonl",
        [json.dumps({"title": f"| column {i} | row {i} | table junk |"}) for i in range(5)]
        + [json.dumps(sample_records(1)[0])],  # a paper already stored: merged, not made
    )

    def triage(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "160"})

    other = write_lines(tmp_path / "other.jsonl", [json.dumps(sample_records(10)[1])])
    assert triage("ingest", str(good)).exit_code == 0
    triage("ingest", str(other))  # one paper of good.jsonl again: merged, not made
    assert triage("ingest", str(junk)).exit_code == 0
    assert "15 papers" in triage("stats").output.replace("│", " ") or "15" in triage("stats").output
    refused = triage("rm", "--last-import")
    assert refused.exit_code == 1 and "add --yes" in refused.output
    done = triage("rm", "--last-import", "--yes")
    assert done.exit_code == 0 and "Deleted 5 papers" in done.output
    remaining = [json.loads(line)["paper"] for line in triage("export", "-f", "jsonl").stdout.splitlines()]
    assert len(remaining) == 10
    # The paper junk.jsonl merged into stays, without the undone file among its sources.
    assert not [p for p in remaining if "jsonl:junk.jsonl" in p["sources"]]
    again = triage("rm", "--last-import", "--yes")
    assert again.exit_code == 1 and "junk.jsonl" in again.output and "was undone already" in again.output
    first = next(p["id"] for p in remaining if p["sources"] == ["jsonl:good.jsonl"])
    assert triage("mark", first, "--accept").exit_code == 0
    one = triage("rm", first, "--yes")
    assert "1 paper of these carry your decision" in one.output and "Deleted 1 paper." in one.output
    by_source = triage("rm", "--source", str(good), "--yes")
    # The paper other.jsonl also brought stays: only papers that came from that file alone go.
    assert "Deleted 8 papers" in by_source.output and "also came from other sources: kept" in by_source.output
    (left,) = [json.loads(line) for line in triage("export", "-f", "jsonl").stdout.splitlines()]
    assert set(left["paper"]["sources"]) == {"jsonl:good.jsonl", "jsonl:other.jsonl"}


def test_ranked_shows_the_researchers_own_tags(isolated: Path, demo_store: Path) -> None:
    from assistant.config import load_settings
    from assistant.store import Store

    first = json.loads(run("ranked", "--json", "--top", "1").output.splitlines()[0])["paper"]["id"]
    Store.open(load_settings(store=isolated / "store")).update_decision(first, tags=["for-thesis"])
    assert "for-thesis" in run("ranked", "--top", "3").output
    assert "your tags for-thesis" in run("show", first).output


def test_doctor_probes_the_llm_endpoint(isolated: Path, demo_store: Path) -> None:
    """The LLM row used to say ok whatever the endpoint did: it now asks it (the models list)."""
    from fake_llm import FakeLLM

    from conftest import free_port

    with FakeLLM() as fake:
        up = runner.invoke(app, ["doctor"], env={"COLUMNS": "200", "OPENAI_BASE_URL": fake.url})
    assert up.exit_code == 0, up.output
    assert "answers" in up.output and "87 assessed, 0 stale, 0 failed" in up.output
    dead = f"http://127.0.0.1:{free_port()}/v1"
    down = runner.invoke(app, ["doctor"], env={"COLUMNS": "200", "OPENAI_BASE_URL": dead})
    assert down.exit_code == 1 and "cannot reach it" in down.output


def test_agenda_warns_about_words_too_common_to_tell_papers_apart(isolated: Path, demo_store: Path) -> None:
    agenda = isolated / "agenda.md"
    text = agenda.read_text(encoding="utf-8")
    quiet = run("agenda")
    assert "push down nearly every paper" not in quiet.output
    agenda.write_text(
        text.replace("## Not interested\n", "## Not interested\nLanguage models.\n"), encoding="utf-8"
    )
    loud = " ".join(run("agenda").output.split())
    warning = loud[loud.index("under 'Not interested'") :]
    assert "models" in warning.split(" in over a fifth of the papers")[0]


def test_ids_as_a_researcher_types_them(tmp_path: Path) -> None:
    """A versioned arXiv id, an upper-case prefix, an arXiv URL or a DOI URL name the stored
    paper in show, mark, note and split; an unknown id is named as unknown."""
    store = tmp_path / "store"
    records = [
        {
            "title": "Sparse attention at scale",
            "abstract": "We study sparse attention.",
            "arxiv_id": "2401.01234",
            "doi": "10.1234/Sparse.2024.77",
        },
        {"title": "A journal paper", "abstract": "On parsing.", "doi": "10.1145/3292500.3330701"},
    ]
    papers = write_lines(tmp_path / "p.jsonl", [json.dumps(r) for r in records])

    def triage(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "160"})

    assert triage("ingest", str(papers)).exit_code == 0
    for typed in ("2401.01234v2", "ARXIV:2401.01234", "https://arxiv.org/abs/2401.01234v3"):
        shown = triage("show", typed)
        assert shown.exit_code == 0 and "Sparse attention at scale" in shown.output, typed
    assert "A journal paper" in triage("show", "https://doi.org/10.1145%2F3292500.3330701").output
    # A paper with an arXiv id is stored under it: its publisher DOI and arXiv's DOI find it too.
    for doi in ("https://doi.org/10.1234/SPARSE.2024.77", "10.48550/arXiv.2401.01234"):
        assert "Sparse attention at scale" in triage("show", doi).output, doi
    marked = triage("mark", "2401.01234v1", "--accept")
    assert marked.exit_code == 0 and "arxiv:2401.01234: accepted" in marked.output
    assert triage("note", "DOI:10.1145/3292500.3330701", "read later").exit_code == 0
    assert "read later" in triage("show", "doi:10.1145/3292500.3330701").output
    unknown = triage("split", "2501.99999")
    assert unknown.exit_code == 1 and "no paper with id 'arxiv:2501.99999'" in unknown.output


def test_command_line_mistakes_are_caught_before_the_store_is_made(tmp_path: Path) -> None:
    store = tmp_path / "store"
    papers = write_lines(tmp_path / "p.jsonl", [json.dumps(r) for r in sample_records(2)])

    def triage(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "160"})

    missing = triage("ingest", str(tmp_path / "no-such-file.bib"))
    assert (
        missing.exit_code == 1 and "no such file" in missing.output and "no-such-file.bib" in missing.output
    )
    bogus = triage("ingest", "--format", "bogus", str(papers))
    assert bogus.exit_code == 1 and "unknown format 'bogus'" in bogus.output
    empty = tmp_path / "empty.bib"
    empty.write_text("", encoding="utf-8")
    assert triage("ingest", str(empty)).exit_code == 1
    ris = tmp_path / "one.ris"
    ris.write_text("TY  - JOUR\nTI  - A paper\nAU  - Doe, Jane\nPY  - 2023\nER  - \n", encoding="utf-8")
    wrong = triage("ingest", "--format", "bibtex", str(ris))
    assert wrong.exit_code == 1 and "no papers found in it as bibtex: it looks like ris" in wrong.output
    assert not store.exists()  # nothing was importable: no store was made
    assert triage("ingest", "-f", "JSONL", str(papers)).exit_code == 0  # any case
    empty = triage("search", "  ")
    assert empty.exit_code == 1 and "nothing to search for" in empty.output
    assert triage("export", "--min-score", "11").exit_code == 2
    for name in ("markdown", "bibtex", "MD"):  # the names a researcher types for formats
        assert triage("export", "-f", name).exit_code == 0, name


def test_stats_counts_assessments_the_agenda_has_outdated(tmp_path: Path) -> None:
    store = tmp_path / "store"
    papers = write_lines(tmp_path / "p.jsonl", [json.dumps(r) for r in sample_records(6)])

    def stale() -> str:
        out = runner.invoke(app, ["--store", str(store), "stats"], env={"COLUMNS": "160"}).output
        return next(line for line in out.splitlines() if "stale" in line)

    for args in (["init"], ["ingest", str(papers)], ["tag"]):
        assert runner.invoke(app, ["--store", str(store), *args]).exit_code == 0
    assert re.search(r"│\s+0\s+│", stale())
    agenda = tmp_path / "agenda.md"
    agenda.write_text(
        agenda.read_text(encoding="utf-8") + "\n## Robotics\nRobot learning.\n", encoding="utf-8"
    )
    assert re.search(r"│\s+6\s+│", stale())


def test_a_long_error_is_one_line_in_a_log(tmp_path: Path) -> None:
    """Off a terminal, an error is not wrapped at 80 columns: a log keeps it on one line."""
    import subprocess
    import sys

    deep = tmp_path / ("a-rather-long-directory-name-" * 4) / "library.bib"
    done = subprocess.run(
        [sys.executable, "-m", "assistant", "--store", str(tmp_path / "store"), "ingest", str(deep)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(deep) in lines[0]


def test_an_empty_file_is_reported_alike_in_every_format(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for name in ("library.bib", "notes.md", "export.ris", "papers.jsonl", "list.txt"):
        path = tmp_path / name
        path.write_text("\n  \n", encoding="utf-8")
        result = runner.invoke(app, ["--store", str(store), "ingest", str(path)], env={"COLUMNS": "160"})
        assert result.exit_code == 1, name
        assert f"{name}: the file is empty" in result.output.replace(str(tmp_path) + "/", ""), name


def imported_then_exported(tmp_path: Path, name: str, text: str, fmt: str) -> str:
    """Import one file into a new store at tmp_path/store, and export the store in `fmt`."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    assert runner.invoke(app, ["--store", str(store), "ingest", str(path)]).exit_code == 0
    return runner.invoke(app, ["--store", str(store), "export", "-f", fmt]).stdout


def test_an_abstract_label_from_a_reference_manager_is_dropped(tmp_path: Path) -> None:
    """Publishers' abstracts often begin with their "Abstract" label, in Zotero's RIS as in
    journal feeds: it is not part of the abstract (the word elsewhere is)."""
    exported = imported_then_exported(
        tmp_path,
        "library.ris",
        "TY  - JOUR\nTI  - A trial of sparse adapters\nAU  - Doe, Jane\nPY  - 2023\n"
        "AB  - Abstract Objectives The objective was to compare adapters.\nER  - \n\n"
        "TY  - JOUR\nTI  - Static analysis\nAU  - Roe, Ann\nPY  - 2022\n"
        "AB  - Abstract interpretation is a theory of sound approximation.\nER  - \n",
        "jsonl",
    )
    abstracts = sorted(json.loads(line)["paper"]["abstract"] for line in exported.splitlines())
    assert abstracts == [
        "Abstract interpretation is a theory of sound approximation.",
        "Objectives The objective was to compare adapters.",
    ]


def test_offline_scores_made_before_an_import_are_made_again(tmp_path: Path) -> None:
    """The offline engine scores against the whole store: after an import, `tag` scores the
    old papers again too, so every score in the queue is the one a fresh pass would give."""
    store = tmp_path / "store"
    first = write_lines(tmp_path / "a.jsonl", [json.dumps(r) for r in sample_records(30)])
    more = write_lines(tmp_path / "b.jsonl", [json.dumps(r) for r in sample_records()[30:36]])

    def triage(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(app, ["--store", str(store), *args], env={"COLUMNS": "200"})

    def scores() -> dict[str, float]:
        lines = triage("ranked", "--json", "--all").stdout.splitlines()
        return {r["paper"]["id"]: r["assessment"]["relevance"] for r in map(json.loads, lines)}

    for args in (["init"], ["ingest", str(first)], ["tag"], ["ingest", str(more)]):
        assert triage(*args).exit_code == 0
    waiting = triage("ranked")
    assert "6 papers are not assessed yet and not ranked here" in " ".join(waiting.output.split())
    assert re.search(r"not yet \('triage tag' does\)\s*│\s+6\s", triage("stats").output)
    again = triage("tag")
    assert "30 scored papers are scored again" in again.output and "Assessed 36 papers" in again.output
    incremental = scores()
    assert triage("tag", "--force").exit_code == 0
    assert scores() == incremental
    assert "nothing to assess" in triage("tag").output


def test_a_bib_title_in_utf8_is_written_for_classic_bibtex(tmp_path: Path) -> None:
    """A title a .bib wrote in UTF-8 is escaped in `-f bib` (pdflatex with classic BibTeX
    stops at Greek in UTF-8); `-f biblatex` keeps the Latin letters pdflatex's UTF-8 input knows
    and writes the Greek ones as macros, so that it compiles with pdflatex too."""
    classic = imported_then_exported(
        tmp_path,
        "mine.bib",
        "@article{dvorak2024,\n  title = {Probing Heads in {BERT} for Čeština and Ελληνικά},\n"
        "  author = {Dvořák, Jan},\n  year = {2024}\n}\n",
        "bib",
    )
    store = tmp_path / "store"
    title = next(line for line in classic.splitlines() if line.strip().startswith("title"))
    assert title.isascii() and "{BERT}" in title
    utf8 = runner.invoke(app, ["--store", str(store), "export", "-f", "biblatex"]).stdout
    title = next(line for line in utf8.splitlines() if line.strip().startswith("title"))
    assert "Čeština" in title and "\\lambda" in title and "λ" not in title


def test_math_in_a_title_reads_as_text_in_markdown_and_html(tmp_path: Path) -> None:
    text = (
        "@article{k,\n  title = {Sorting in $O(n \\log n)$ with $\\alpha \\pm 0.1$},\n"
        "  author = {Doe, Jane},\n  year = {2024}\n}\n"
    )
    markdown = imported_then_exported(tmp_path, "m.bib", text, "md")
    assert "Sorting in O(n log n) with α ± 0.1" in markdown and "\\$" not in markdown
    html = runner.invoke(app, ["--store", str(tmp_path / "store"), "export", "-f", "html"]).stdout
    assert "Sorting in O(n log n) with α ± 0.1" in html
