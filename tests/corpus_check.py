"""The real-world corpus (`../shared/fixtures/corpus/` and `realworld/`): what an independent
parser finds in each file, what we import, and whether every export of it compiles in the
programs researchers feed it to (biber + biblatex, BibTeX with plain, pandoc --citeproc).

Shared by tests/test_corpus.py (which asserts the targets) and bench/corpus.py (which prints
the table). The files are read where they are; nothing is copied into the project.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import bibtexparser
import rispy
from tex_consumers import Report, compile_biblatex, compile_bibtex, pandoc_citeproc

from assistant.export import render
from assistant.export.common import ExportContext
from assistant.ingest import parse_file
from assistant.models import Paper, StoredPaper

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
CORPUS_DIRS = (SHARED / "corpus", SHARED / "realworld")
_SUFFIXES = (".bib", ".ris", ".json")
# biblatex entries that hold no work of their own: a set groups others, xdata lends fields.
_NOT_WORKS = frozenset({"set", "xdata"})


def corpus_files() -> list[Path]:
    """Every bibliographic file of the shared corpus (the Atom and S2 files are feeds, tested
    with the feeds)."""
    files: list[Path] = []
    for folder in CORPUS_DIRS:
        if folder.is_dir():
            files += sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES and "s2_" not in p.name)
    return files


def independent_count(path: Path) -> int:
    """The works an independent parser finds: bibtexparser's entries (sets and xdata left out)
    and the blocks it failed on, rispy's records, the JSON file's items."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    try:
        return _independent_count(path, text)
    except Exception:  # the other parser gives up on the file: count its records' first lines
        head = r"^\s*@(?!(string|preamble|comment|set|xdata)\b)" if path.suffix == ".bib" else r"^TY  -"
        return len(re.findall(head, text, re.M | re.I))


def _independent_count(path: Path, text: str) -> int:
    if path.suffix == ".bib":
        library = bibtexparser.parse_string(text)  # type: ignore[attr-defined]
        works = [e for e in library.entries if e.entry_type.lower() not in _NOT_WORKS]
        return len(works) + len(library.failed_blocks)
    if path.suffix == ".ris":
        return len(rispy.loads(text))
    data = json.loads(text)
    return len(data if isinstance(data, list) else data.get("items", []))


@dataclass
class FileCheck:
    """One corpus file: counts, what was skipped, and the consumers' errors per export."""

    name: str
    independent: int
    imported: int = 0
    skipped: list[str] = field(default_factory=list)
    lost: str | None = None  # the whole file failed
    errors: dict[str, list[str]] = field(default_factory=dict)  # consumer -> new errors
    seconds: float = 0.0

    @property
    def share(self) -> float:
        return min(self.imported / self.independent, 1.0) if self.independent else 1.0

    @property
    def export_errors(self) -> int:
        return sum(len(v) for v in self.errors.values())


def _error_key(error: str) -> str:
    """An error without what differs between a source and its export (line numbers, keys)."""
    return re.sub(r"\d+", "#", error.split(" l.")[0])[:120]


def _new(export: Report, source: Callable[[], Report] | None) -> list[str]:
    """The export's errors that its source does not cause itself (the source is compiled only
    where the export has errors: an export without any needs no comparison)."""
    if not export.errors:
        return []
    known = {_error_key(e) for e in source().errors} if source else set()
    return [e for e in export.errors if _error_key(e) not in known]


def check(path: Path, workdir: Path, compile_exports: bool = True) -> FileCheck:
    """Import `path` (parse only: the store's merging is tested elsewhere) and compile every
    export of what was imported."""
    start = time.perf_counter()
    result = FileCheck(name=path.name, independent=independent_count(path))
    try:
        _, parsed = parse_file(path)
    except Exception as exc:  # a lost file is the failure this records
        result.lost = str(exc)
        return result
    result.imported = len(parsed.papers)
    result.skipped = [str(e) for e in parsed.errors]
    if compile_exports and parsed.papers:
        papers: dict[str, Paper] = {}  # one paper an id, as the store keeps them
        for paper in parsed.papers:
            papers[paper.id] = papers[paper.id].merged_with(paper) if paper.id in papers else paper
        items = [StoredPaper(paper=p) for p in papers.values()]
        workdir.mkdir(parents=True, exist_ok=True)
        bib = workdir / "export.bib"
        bib.write_text(render("bib", items, ExportContext()), encoding="utf-8")
        biblatex = workdir / "export.biblatex.bib"
        biblatex.write_text(render("biblatex", items, ExportContext()), encoding="utf-8")
        csl = workdir / "export.json"
        csl.write_text(render("csl-json", items, ExportContext()), encoding="utf-8")
        source_biber: Callable[[], Report] | None = None
        source_bibtex: Callable[[], Report] | None = None
        if path.suffix == ".bib":
            source_biber = partial(compile_biblatex, path, workdir / "source-biber")
            source_bibtex = partial(compile_bibtex, path, workdir / "source-bibtex", "plain")
        result.errors["biber"] = _new(compile_biblatex(biblatex, workdir / "biber"), source_biber)
        result.errors["bibtex"] = _new(compile_bibtex(bib, workdir / "bibtex", "plain"), source_bibtex)
        try:
            pandoc_citeproc(csl, workdir / "pandoc")
            result.errors["pandoc"] = []
        except AssertionError as exc:
            result.errors["pandoc"] = [str(exc)[:300]]
    result.seconds = time.perf_counter() - start
    return result
