"""Exports: the registry of formats, the default order of papers, and atomic file writing.

Each format is a module with `write(items, context) -> str`; `render` picks one by name. A
format's module (and `common`, with the models) is imported when it writes, not with the
registry: `triage export --help` lists the formats without loading them.
"""

from __future__ import annotations

import importlib
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.errors import TriageError
from assistant.order import queue_key

if TYPE_CHECKING:
    from assistant.export.common import ExportContext
    from assistant.models import StoredPaper

__all__ = ["FORMATS", "ExportFormat", "by_relevance", "format_named", "render", "write_file"]


@dataclass(frozen=True)
class ExportFormat:
    name: str
    suffixes: tuple[str, ...]
    description: str
    writer: str  # "module:function" in this package

    def write(self, items: Sequence[StoredPaper], context: ExportContext) -> str:
        module, _, function = self.writer.partition(":")
        write: Callable[[Sequence[StoredPaper], ExportContext], str] = getattr(
            importlib.import_module(f"assistant.export.{module}"), function
        )
        return write(items, context)


FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat(
            "bib", (".bib", ".bibtex"), "BibTeX for LaTeX (bibtex or biber), Zotero, JabRef", "bib:write"
        ),
        ExportFormat(
            "biblatex", (), "the same entries in UTF-8, for biblatex with biber", "bib:write_biblatex"
        ),
        ExportFormat("ris", (".ris",), "RIS for Zotero, EndNote, Mendeley", "ris:write"),
        ExportFormat(
            "csl-json", (".json",), "CSL-JSON, Zotero's native format (and pandoc's)", "csljson:write"
        ),
        ExportFormat("csv", (".csv",), "a spreadsheet: one row per paper", "csv:write"),
        ExportFormat("jsonl", (".jsonl", ".ndjson"), "everything, for a lossless re-import", "jsonl:write"),
        ExportFormat(
            "md", (".md", ".markdown"), "a Markdown reading list grouped by topic", "markdown:write"
        ),
        ExportFormat("html", (".html", ".htm"), "a self-contained web page, sortable", "html:write"),
    )
}


# Names a researcher may type for a format (each format's file extensions too, without the dot).
ALIASES = {"markdown": "md", "bibtex": "bib", "csljson": "csl-json", "json": "csl-json", "htm": "html"}


def format_named(name: str | None, output: Path | None = None) -> ExportFormat:
    """The format called `name`, else the one `output`'s extension names."""
    known = ", ".join(FORMATS)
    if name:
        wanted = name.strip().lower()
        found = FORMATS.get(ALIASES.get(wanted, wanted))
        if found is None:
            raise TriageError(f"unknown export format {name!r}; one of: {known}")
        return found
    if output is not None:
        suffix = output.suffix.lower()
        for fmt in FORMATS.values():
            if suffix in fmt.suffixes:
                return fmt
        raise TriageError(f"cannot tell the format from {output.name!r}: add --format ({known})")
    raise TriageError(f"say which format: --format {'|'.join(FORMATS)} (or -o FILE with its extension)")


def by_relevance(
    items: Sequence[StoredPaper], score: Callable[[StoredPaper], float] | None = None
) -> list[StoredPaper]:
    """Most relevant first (by `score`, the queue's blended order, when given), unassessed papers
    last; among equals as in the queue (`queue_key`: the newer paper, then the id)."""
    return sorted(
        items,
        key=lambda i: (
            i.assessment is None,
            *queue_key(
                score(i) if score else i.assessment.relevance if i.assessment else 0.0,
                i.paper.day,
                i.paper.id,
            ),
        ),
    )


def render(fmt: ExportFormat | str, items: Sequence[StoredPaper], context: ExportContext) -> str:
    chosen = fmt if isinstance(fmt, ExportFormat) else format_named(fmt)
    return chosen.write(items, context)


def write_file(path: Path, text: str) -> None:
    """Write `text` to `path`.

    A regular file (or a new one) is written atomically: a temporary file beside it, then a
    rename, so a reader never sees half an export. A symlink is followed, and the file it
    points to is the one replaced. Anything else (a terminal, a pipe or FIFO, a device such
    as the null device) is written through, never replaced by a regular file."""
    path = path.expanduser()
    try:
        mode = path.stat().st_mode  # follows symlinks
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise TriageError(f"cannot write {path}: {exc.strerror or exc}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise TriageError(f"cannot write {path}: it is a directory")
    if mode is not None and not stat.S_ISREG(mode):
        _write_through(path, text)
        return
    target = Path(os.path.realpath(path))
    parent = target.parent
    if not parent.is_dir():
        shown = parent if path.is_symlink() else path.parent
        raise TriageError(f"cannot write {path}: the directory {shown} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise TriageError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise TriageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_through(path: Path, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as exc:
        raise TriageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
