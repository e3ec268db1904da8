"""The README and docs/ hold together: links resolve, the README fits on a page, its quick start
is what the Makefile and CI run, and the pages `--help` names exist."""

from __future__ import annotations

import re
from pathlib import Path

import click
import typer
from typer.testing import CliRunner

from assistant.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 150

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
DOCS_NAMED = re.compile(r"\bdocs/[\w./-]+\.md(?:#[\w-]+)?")


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]


def prose(text: str) -> str:
    """The Markdown without fenced blocks and code spans (whose brackets and '#' are not Markdown)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links read as their text, lowercase, punctuation other than
    hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file (a repeated one gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text(encoding="utf-8")))


def broken_link(source: Path, target: str) -> str | None:
    """Why a relative link from `source` does not resolve; None when it does (or is not relative)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        return None  # http:, https:, mailto:
    file_part, _, anchor = target.partition("#")
    dest = (source.parent / file_part).resolve() if file_part else source
    if not dest.exists():
        return f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}"
    return None


def test_slug_follows_githubs_rules() -> None:
    assert slug("Real-world corpus (`bench/corpus.py`, stop 36, 2026-11-26)") == (
        "real-world-corpus-benchcorpuspy-stop-36-2026-11-26"
    )
    assert slug("Have I seen enough? The estimate and `triage check`") == (
        "have-i-seen-enough-the-estimate-and-triage-check"
    )
    assert slug("snake_case and CAPS") == "snake_case-and-caps"


def test_every_relative_link_points_to_an_existing_file_and_heading() -> None:
    problems = []
    checked = 0
    for page in pages():
        for target in links(page):
            checked += 1
            why = broken_link(page, target)
            if why:
                problems.append(f"{page.relative_to(ROOT)}: {why}")
    assert checked > 50  # the pattern does find the links
    assert not problems, "\n".join(problems)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    unlinked = [p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked]
    assert not unlinked


def test_readme_fits_on_a_page_and_shows_the_review_ui() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "docs/review.svg" in links(README)
    svg = (ROOT / "docs" / "review.svg").read_text(encoding="utf-8")
    # Textual's screenshot (Rich's terminal SVG), titled with the app's name
    assert svg.lstrip().startswith("<svg") and 'class="rich-terminal"' in svg and "triage&#160;review" in svg


def quick_start() -> list[str]:
    """The commands of the README's quick-start block, without their comments."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "the quick start has a ```sh block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def make_recipe(target: str) -> str:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n?)+)", makefile, re.MULTILINE)
    assert match, f"the Makefile has a '{target}' target"
    return match.group(1)


def test_quick_start_is_what_the_makefile_and_ci_run() -> None:
    commands = quick_start()
    assert commands == ["make demo", "make test"]
    # make demo installs and runs the main job on the embedded defaults (no --store, no server)
    demo = make_recipe("demo")
    assert "triage demo" in demo and "--store" not in demo and "--chroma-url" not in demo
    assert "pytest" in make_recipe("test")
    # CI runs the README's test command, and nothing else from make
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_make = [line.strip() for line in ci.splitlines() if re.match(r"\s*make\b", line)]
    assert ci_make == ["make test"]
    assert ci_make[0] in commands
    # the Makefile's own header names the same two commands
    header = (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()[0]
    assert all(f"`{command}`" in header for command in commands)


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += all_commands(command, (*prefix, name))
        elif command is not None:
            out.append((*prefix, name))
    return out


def test_docs_pages_named_in_help_exist() -> None:
    runner = CliRunner()
    named: dict[str, str] = {}
    for path in all_commands(typer.main.get_group(app)):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        for ref in DOCS_NAMED.findall(result.output):
            named.setdefault(ref, " ".join(("triage", *path, "--help")))
    # and in the CLI's source, where a page may be named in text --help shows only in part
    for source in (ROOT / "assistant" / "cli").glob("*.py"):
        for ref in DOCS_NAMED.findall(source.read_text(encoding="utf-8")):
            named.setdefault(ref, str(source.relative_to(ROOT)))
    assert len({ref.partition("#")[0] for ref in named}) >= 6  # the commands do point to the docs
    problems = [f"{where}: {why}" for ref, where in named.items() if (why := broken_link(README, ref))]
    assert not problems, "\n".join(problems)
