"""The real consumers of the exports: pdflatex with biber (biblatex) or classic BibTeX, pandoc.

Each `compile_*` builds one document that cites every entry of a .bib file (`\\nocite{*}`) and
returns what the tools reported: errors, and the warnings with line numbers taken out, so that
the warnings of an export can be compared with those of its source file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TOOLS = ("pdflatex", "biber", "bibtex", "pandoc")
PREAMBLE = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage{amsmath,amssymb}
\usepackage{url}
"""


def missing_tools() -> list[str]:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if shutil.which("kpsewhich"):
        for sty in ("biblatex.sty", "lmodern.sty", "plainnat.bst", "amssymb.sty"):
            found = subprocess.run(["kpsewhich", sty], capture_output=True, text=True).stdout.strip()
            if not found:
                missing.append(sty)
    return missing


def require_tools() -> None:
    """Skip (with the reason) where the tools are not installed; CI installs them (.ci/run),
    so there a missing tool fails instead."""
    missing = missing_tools()
    if not missing:
        return
    reason = f"needs {', '.join(missing)} (apt-get install biber texlive-bibtex-extra ... as in .ci/run)"
    if os.environ.get("TRIAGE_REQUIRE_TEX"):  # set by .ci/run, which installs them
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    warnings: set[str] = field(default_factory=set)
    bbl: str = ""
    log: str = ""


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "max_print_line": "10000", "openout_any": "p", "shell_escape": "f"}
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=180, env=env, check=False
    )


def _draft(latex: list[str]) -> list[str]:
    """A LaTeX run that writes no PDF (`-draftmode`): for the runs before the last, which only
    feed .aux/.bcf to the bibliography tool and the next run."""
    return [latex[0], "-draftmode", *latex[1:]]


_compiled: dict[tuple[str, ...], Report] = {}
_compiled_lock = threading.Lock()


def _once(kind: str, bib: Path, make: Callable[[], Report]) -> Report:
    """One compilation of the same .bib text the same way per session: the test modules that
    compile a shared source file (the corpus and the fidelity tests) share its report."""
    key = (kind, hashlib.sha256(bib.read_bytes()).hexdigest())
    with _compiled_lock:
        if key in _compiled:
            return _compiled[key]
    report = make()
    with _compiled_lock:
        return _compiled.setdefault(key, report)


def _normal(line: str) -> str:
    line = re.sub(r"\s+", " ", line)
    line = re.sub(r"on input line \d+|line \d+|\(line \d+\)|\d+ of file \S+", "", line)
    return line.strip()


def _latex_messages(log: str, report: Report) -> None:
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("!"):
            report.errors.append(" ".join([line, *lines[i + 1 : i + 3]]))
        elif "Warning" in line and "Please rerun" not in line:
            report.warnings.add("latex: " + _normal(" ".join([line, *lines[i + 1 : i + 2]])))


def compile_biblatex(bib: Path, workdir: Path) -> Report:
    """pdflatex, biber, pdflatex, pdflatex on a biblatex document citing all of `bib`."""
    return _once("biber", bib, lambda: _compile_biblatex(bib, workdir))


def _compile_biblatex(bib: Path, workdir: Path) -> Report:
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(bib, workdir / "refs.bib")
    (workdir / "doc.tex").write_text(
        PREAMBLE + "\\usepackage[backend=biber,style=authoryear]{biblatex}\n\\addbibresource{refs.bib}\n"
        "\\begin{document}\n\\nocite{*}\n\\printbibliography\n\\end{document}\n",
        encoding="utf-8",
    )
    report = Report()
    latex = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "doc.tex"]
    _run(_draft(latex), workdir)
    biber = _run(["biber", "--nodieonerror", "doc"], workdir)
    for line in biber.stdout.splitlines():
        if re.match(r"^(WARN|ERROR) - ", line):
            target = report.errors if line.startswith("ERROR") else None
            text = "biber: " + _normal(re.sub(r"/\S+/", "", line))
            if target is not None:
                target.append(text)
            else:
                report.warnings.add(text)
    return _finish(latex, workdir, report)


def _finish(latex: list[str], workdir: Path, report: Report) -> Report:
    """The two last LaTeX runs after the bibliography tool, and what they said (the PDF is
    written by the last one only: the runs before it write the same .aux and log)."""
    _run(_draft(latex), workdir)
    _run(latex, workdir)
    report.log = (workdir / "doc.log").read_text(encoding="utf-8", errors="replace")
    _latex_messages(report.log, report)
    bbl = workdir / "doc.bbl"
    report.bbl = bbl.read_text(encoding="utf-8", errors="replace") if bbl.exists() else ""
    return report


def compile_bibtex(bib: Path, workdir: Path, style: str) -> Report:
    """pdflatex, bibtex, pdflatex, pdflatex with `style` (plain, plainnat) citing all of `bib`."""
    return _once(f"bibtex-{style}", bib, lambda: _compile_bibtex(bib, workdir, style))


def _compile_bibtex(bib: Path, workdir: Path, style: str) -> Report:
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(bib, workdir / "refs.bib")
    natbib = "\\usepackage[numbers]{natbib}\n" if style.endswith("nat") else ""
    (workdir / "doc.tex").write_text(
        PREAMBLE + natbib + "\\begin{document}\n\\nocite{*}\n"
        f"\\bibliographystyle{{{style}}}\n\\bibliography{{refs}}\n\\end{{document}}\n",
        encoding="utf-8",
    )
    report = Report()
    latex = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "doc.tex"]
    _run(_draft(latex), workdir)
    bibtex = _run(["bibtex", "doc"], workdir)
    for line in bibtex.stdout.splitlines():
        if line.startswith("Warning--"):
            report.warnings.add("bibtex: " + _normal(line))
        elif re.search(r"error message|I was expecting|I'm skipping|Illegal", line):
            report.errors.append("bibtex: " + line)
    return _finish(latex, workdir, report)


def pandoc_citeproc(csl_json: Path, workdir: Path) -> str:
    """The bibliography pandoc's citeproc (Chicago author-date, its default) makes of every item,
    as plain text."""
    workdir.mkdir(parents=True, exist_ok=True)
    doc = workdir / "doc.md"
    doc.write_text("---\nnocite: '@*'\n---\n\n# References\n", encoding="utf-8")
    result = _run(
        ["pandoc", "--citeproc", f"--bibliography={csl_json}", "-t", "plain", "--wrap=none", str(doc)],
        workdir,
    )
    assert result.returncode == 0, result.stderr
    assert "[WARNING]" not in result.stderr, result.stderr
    return result.stdout
