"""Hostile files cost bounded time and memory: @string chains that double, @preamble macros that
loop or multiply, fields of megabytes, braces nested thousands deep; and a title cannot carry
bidirectional overrides into the store or an export."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from assistant.export import FORMATS, render
from assistant.export.common import ExportContext
from assistant.ingest import limits, parse_file
from assistant.ingest.bibmacros import Macro
from assistant.models import Decision, StoredPaper, clean_block, clean_text

ROOT = Path(__file__).resolve().parents[1]
WORDS = 'adapters shift domains benchmark transformer attention Schr\\"odinger caf\\\'e na\\"ive '


def _plain(key: str, title: str) -> str:
    return f"@article{{{key},\n  title = {{{title}}},\n  author = {{Lee, Ann}},\n  year = {{2021}}\n}}\n\n"


def _chain(levels: int) -> str:
    """@strings s0 ... s<levels>, each the one before it twice (s<n> is 4 * 2**n characters)."""
    lines = ['@string{s0 = "aaaa"}'] + [
        f"@string{{s{i} = s{i - 1} # s{i - 1}}}" for i in range(1, levels + 1)
    ]
    return "\n".join(lines) + "\n\n"


# -- @string expansion ----------------------------------------------------------------------------


def test_a_doubling_string_chain_is_cut_once_with_a_located_note(tmp_path: Path) -> None:
    path = tmp_path / "chain.bib"
    text = _chain(20)  # s20 is 4 MB expanded
    text += _plain("first", "First Plain Paper")
    text += '@article{bomb,\n  title = "Bomb Title " # s20,\n  year = {2021}\n}\n\n'
    text += _plain("last", "Last Plain Paper")
    path.write_text(text, encoding="utf-8")
    _, result = parse_file(path)
    assert not result.errors
    titles = [p.title for p in result.papers]
    assert titles[0] == "First Plain Paper" and titles[2] == "Last Plain Paper"
    assert titles[1].startswith("Bomb Title aaaa") and len(titles[1]) <= limits.TITLE
    # s14 (65,536 characters) is the first past the cap; the @strings built from it are not
    # said again, the entry that uses one is.
    first_cut = 1 + 14  # its line
    string_notes = [n for n in result.notes if "the @string" in n]
    assert string_notes == [
        f"{path}:{first_cut}: the @string 's14' expands beyond {limits.EXPANDED:,} characters; cut"
    ]
    assert any(
        n.startswith(f"{path}:") and "@article{bomb}: 'title' expands beyond" in n for n in result.notes
    )
    assert all("\n" not in n for n in result.notes)


def test_a_forty_level_string_bomb_imports_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """The drill's file: s40 would be 4 TB. Read in a child process that may not use more than
    2 GB, so that a regression fails here instead of taking the machine's memory."""
    path = tmp_path / "bomb.bib"
    path.write_text(
        _chain(40)
        + _plain("first", "First Plain Paper")
        + '@article{bomb,\n  title = "Bomb Title " # s40 # s40,\n  abstract = s40,\n  year = {2021}\n}\n\n'
        + _plain("last", "Last Plain Paper"),
        encoding="utf-8",
    )
    script = textwrap.dedent(
        f"""
        import resource, sys, time
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))
        from pathlib import Path
        from assistant.ingest import parse_file
        start = time.perf_counter()
        _, result = parse_file(Path({str(path)!r}))
        print(time.perf_counter() - start)
        print(len(result.errors))
        for paper in result.papers:
            print(len(paper.title), len(paper.abstract), paper.title[:20])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-1500:]
    seconds, errors, *papers = done.stdout.splitlines()
    assert float(seconds) < 10 and errors == "0"
    assert [p.split(" ", 2)[2] for p in papers] == [
        "First Plain Paper",
        "Bomb Title aaaaaaaaa",
        "Last Plain Paper",
    ]
    title, abstract = (int(n) for n in papers[1].split()[:2])
    assert title <= limits.TITLE and abstract <= limits.EXPANDED  # the store cuts it to its cap


def test_the_files_string_expansion_is_capped_in_all(tmp_path: Path) -> None:
    """Every entry may use a long @string, but not without end: past `EXPANDED_FILE` characters
    the @strings stay as their names (one note) and every entry still imports."""
    path = tmp_path / "many.bib"
    entries = "".join(
        f"@article{{k{i},\n  title = {{Paper {i}}},\n  note = big,\n  year = 2021\n}}\n" for i in range(200)
    )
    path.write_text('@string{big = "' + "word " * 12_000 + '"}\n\n' + entries, encoding="utf-8")
    _, result = parse_file(path)
    assert not result.errors and len(result.papers) == 200
    spent = [n for n in result.notes if "in all" in n]
    assert len(spent) == 1 and f"beyond {limits.EXPANDED_FILE:,} characters in all" in spent[0]
    notes = [(p.biblio.fields.get("note") if p.biblio else None) for p in result.papers]
    assert notes[0] and notes[0].startswith("word word")
    assert notes[-1] == "big"  # past the budget: the name, as an unknown @string stays


# -- @preamble macros -----------------------------------------------------------------------------


def test_preamble_macros_that_expand_into_themselves_are_shown_as_written(tmp_path: Path) -> None:
    path = tmp_path / "loop.bib"
    path.write_text(
        '@preamble{ "\\def\\a{\\a\\a} \\newcommand{\\b}{\\b\\b\\b} '
        '\\def\\x{\\y} \\def\\y{\\x} \\def\\ok{fine}" }\n\n'
        + _plain("loop", "Looping \\a and \\b and \\x, but \\ok{} here")
        + _plain("after", "After the Loop"),
        encoding="utf-8",
    )
    start = time.perf_counter()
    _, result = parse_file(path)
    assert time.perf_counter() - start < 5
    assert [p.title for p in result.papers] == [
        "Looping \\a and \\b and \\x, but fine here",
        "After the Loop",
    ]
    looped = [n for n in result.notes if "expands into itself" in n]
    assert [n.split("macro ")[1].split(" ")[0] for n in looped] == ["\\a", "\\b", "\\x", "\\y"]
    assert all(n.startswith(f"{path}:1: the @preamble macro ") for n in looped)


def test_preamble_macros_that_multiply_stop_at_the_fields_budget(tmp_path: Path) -> None:
    """Six macros each using the next ten times: 10**6 copies if nothing stops them."""
    names = ["m", "n", "o", "p", "q", "r", "s"]
    uses = {a: ("\\" + b + " ") * 10 for a, b in zip(names, names[1:], strict=False)}
    defs = " ".join(f"\\def\\{a}{{{body}}}" for a, body in uses.items())
    path = tmp_path / "many.bib"
    path.write_text(
        f'@preamble{{ "{defs} \\def\\s{{xy}}" }}\n\n'
        + _plain("boom", "Boom \\m End")
        + _plain("after", "After"),
        encoding="utf-8",
    )
    start = time.perf_counter()
    _, result = parse_file(path)
    assert time.perf_counter() - start < 5
    boom, after = result.papers
    assert after.title == "After"
    # Within what is read of a title (the store then cuts it to its cap); the macros past the
    # budget are shown as written, not decoded as the LaTeX macros of the same names (\\o is ø).
    assert boom.title.startswith("Boom xyxyxy") and len(boom.title) <= limits.read_limit(limits.TITLE)
    assert boom.title.endswith("\\n \\n End")
    assert any("@article{boom}: 'title': its macros expand beyond" in n for n in result.notes)


def test_looping_finds_every_macro_on_a_cycle_and_no_other() -> None:
    from assistant.ingest.bibmacros import looping

    macros = {
        "a": Macro("\\a"),
        "b": Macro("\\c x"),
        "c": Macro("\\d"),
        "d": Macro("\\b"),
        "e": Macro("\\b and \\f"),  # uses a cycle, is not on it
        "f": Macro("plain"),
    }
    assert looping(macros) == {"a", "b", "c", "d"}
    chain = {f"m{i}": Macro(f"\\m{i + 1}") for i in range(5000)}  # deep, but no cycle: no recursion
    assert looping(chain) == set()


# -- fields of megabytes, braces nested deep -----------------------------------------------------------


def test_huge_bibtex_fields_are_cut_before_they_are_decoded(tmp_path: Path) -> None:
    big = 5_000_000  # decoding this much LaTeX took the old importer about half a minute a field
    words = (WORDS * (big // len(WORDS) + 1))[:big]
    path = tmp_path / "huge.bib"
    path.write_text(
        _plain("first", "First Plain Paper")
        + "@article{huge,\n  title = {Huge "
        + words
        + "},\n  abstract = {"
        + words
        + "},\n  year = {2021}\n}\n",
        encoding="utf-8",
    )
    start = time.perf_counter()
    _, result = parse_file(path)
    assert time.perf_counter() - start < 5
    first, huge = result.papers
    assert first.title == "First Plain Paper"
    assert huge.title.startswith(
        "Huge adapters shift domains benchmark transformer attention Schrödinger café"
    )
    assert len(huge.title) <= limits.TITLE and len(huge.abstract) <= limits.ABSTRACT
    assert (
        f"{path}:7: @article{{huge}}: title cut from {big + 5:,} to {limits.TITLE:,} characters"
        in result.notes
    )
    assert (
        f"{path}:7: @article{{huge}}: abstract cut from {big:,} to {limits.ABSTRACT:,} characters"
        in result.notes
    )
    assert "title" not in (huge.biblio.source_fields if huge.biblio else {})  # no cut LaTeX kept


def test_braces_nested_too_deep_cost_that_entry_only(tmp_path: Path) -> None:
    path = tmp_path / "deep.bib"
    deep = "{" * 1500 + "x" + "}" * 1500
    unknown = "\\foo{" * 3000 + "x" + "}" * 3000
    path.write_text(
        _plain("first", "First")
        + f"@article{{deep,\n  title = {{Deep {deep}}},\n  year = 2021\n}}\n\n"
        + f"@article{{macros,\n  title = {{Fine}},\n  abstract = {{{unknown}}},\n  year = 2021\n}}\n\n"
        + _plain("last", "Last"),
        encoding="utf-8",
    )
    start = time.perf_counter()
    _, result = parse_file(path)
    assert time.perf_counter() - start < 5
    assert [p.title for p in result.papers] == ["First", "Last"]
    assert [str(e) for e in result.errors] == [
        f"{path}:7: @article{{deep}}: 'title' nests braces 1,500 deep, more than the {limits.NESTING} "
        "levels that are read: the entry is skipped",
        f"{path}:12: @article{{macros}}: 'abstract' nests braces 3,000 deep, more than the "
        f"{limits.NESTING} levels that are read: the entry is skipped",
    ]


def test_huge_json_fields_are_cut_before_they_are_cleaned(tmp_path: Path) -> None:
    """Combining marks send the cleaning through a character-by-character loop: on 20 MB that
    took the old importer most of a minute."""
    big = 20_000_000
    marked = ("cafe\u0301 na\u0131\u0308ve " * (big // 12 + 1))[:big]
    path = tmp_path / "huge.json"
    records = [
        {"title": "Huge " + marked, "abstract": marked, "authors": "Lee, Ann", "year": 2021},
        {"title": "Plain", "abstract": "Short.", "year": 2021},
    ]
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    start = time.perf_counter()
    _, result = parse_file(path)
    assert time.perf_counter() - start < 5
    huge, plain = result.papers
    assert plain.title == "Plain"
    assert huge.title.startswith("Huge café naïve") and len(huge.title) <= limits.TITLE
    assert len(huge.abstract) <= limits.ABSTRACT
    assert f"{path} (record 1): title cut from {big + 5:,} to {limits.TITLE:,} characters" in result.notes
    assert f"{path} (record 1): abstract cut from {big:,} to {limits.ABSTRACT:,} characters" in result.notes


def test_a_json_string_of_megabytes_costs_a_few_times_its_size_in_memory(tmp_path: Path) -> None:
    """A 20 MB single-line string: the file, its text and the parsed string, and little else
    (splitting it into words to clean it took ten times its size)."""
    size = 20_000_000
    path = tmp_path / "line.json"
    text = "adapters shift domains benchmark " * (size // 33)
    path.write_text(
        json.dumps([{"title": "Long", "abstract": text, "blob": text, "year": 2021}]), encoding="utf-8"
    )
    tracemalloc.start()
    try:
        _, result = parse_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * path.stat().st_size, (
        f"{peak:,} bytes at the peak for a {path.stat().st_size:,} byte file"
    )
    paper = result.papers[0]
    assert len(paper.abstract) <= limits.ABSTRACT
    # An unknown field of megabytes is cut at once (the store's cap then drops it, with its note).
    assert len(paper.extra["blob"]) <= limits.EXTRA + 1


def test_a_csv_row_with_a_cell_of_megabytes_is_one_skipped_line(tmp_path: Path) -> None:
    path = tmp_path / "cell.csv"
    path.write_text(
        'title,abstract\n"First","Short."\n"Big","' + "word " * 400_000 + '"\n"Last","Short."\n',
        encoding="utf-8",
    )
    _, result = parse_file(path)
    assert [p.title for p in result.papers] == ["First", "Last"]
    assert len(result.errors) == 1 and str(result.errors[0]).startswith(f"{path}:3: a cell is longer than")


# -- bidirectional controls ----------------------------------------------------------------------------

RLO, PDF, LRI, PDI, LRM, RLM = "\u202e", "\u202c", "\u2066", "\u2069", "\u200e", "\u200f"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (f"Invoice {RLO}fdp.exe{PDF} attached", "Invoice fdp.exe attached"),
        (f"A {LRI}safe{PDI} title \u202a\u202b\u202d\u2067\u2068", "A safe title"),
        (f"Plain{LRM} Latin{RLM} title", "Plain Latin title"),  # marks with nothing to place
        (f"שלום {RLM}(2021) עולם", f"שלום {RLM}(2021) עולם"),  # a mark beside Hebrew stays
        ("تعلم الآلة للغة العربية", "تعلم الآلة للغة العربية"),
        (f"نموذج {RLO}لغوي{PDF}", "نموذج لغوي"),  # an override goes even in right-to-left text
    ],
)
def test_bidi_overrides_and_isolates_are_stripped_and_right_to_left_text_kept(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean
    assert clean_block(raw + "\n\nsecond " + RLO + "line") == clean + "\n\nsecond line"


def test_a_title_with_an_override_reaches_no_export(tmp_path: Path) -> None:
    path = tmp_path / "papers.csv"
    title = f"Benign Title {RLO}gnp.exe{PDF}"
    path.write_text(f'title,abstract,venue\n"{title}","About {LRI}x{PDI}.","Conf{RLO}"\n', encoding="utf-8")
    _, result = parse_file(path)
    paper = result.papers[0]
    assert paper.title == "Benign Title gnp.exe" and paper.abstract == "About x." and paper.venue == "Conf"
    bib = tmp_path / "papers.bib"
    bib.write_text(f"@article{{k,\n  title = {{Benign {RLO}Title{PDF}}},\n  author = {{Lee{RLO}, Ann}}\n}}\n")
    _, from_bib = parse_file(bib)
    items = [StoredPaper(paper=p, decision=Decision()) for p in [paper, *from_bib.papers]]
    for fmt in FORMATS:
        out = render(fmt, items, ExportContext())
        assert not any(ch in out for ch in (RLO, PDF, LRI, PDI)), fmt


def test_a_file_beyond_the_size_an_import_holds_is_refused_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import assistant.ingest as ingest
    from assistant.errors import InputError

    monkeypatch.setattr(ingest, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(f'{{"title": "Paper {i}"}}' for i in range(200)), encoding="utf-8")
    with pytest.raises(
        InputError, match=r"big.jsonl: the file is .* MB; files over .* MB are not read .*split it"
    ):
        ingest.parse_file(path)
