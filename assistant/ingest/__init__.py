"""Reading paper files into the store: format detection, parsing, upsert, a report per file."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from assistant.errors import InputError
from assistant.ingest.base import ParseResult
from assistant.ingest.jsonfile import parse_json, parse_jsonl
from assistant.store import Store

Parser = Callable[[Path, str], ParseResult]

PARSERS: dict[str, Parser] = {"json": parse_json, "jsonl": parse_jsonl}
_SUFFIXES = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
CHUNK = 256


@dataclass
class FileReport:
    """What happened to one input file."""

    path: str
    format: str | None = None
    parsed: int = 0
    new: int = 0
    merged: int = 0
    unchanged: int = 0
    skipped: list[InputError] = field(default_factory=list)
    seconds: float = 0.0
    error: InputError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.skipped


def detect_format(path: Path, text: str) -> str:
    """The format of a file, from its content first and its name second."""
    head = text.lstrip()[:1]
    if head in ("[", "{"):
        lines = [ln for ln in text.splitlines()[:3] if ln.strip()]
        if head == "{" and len(lines) > 1 and lines[1].lstrip().startswith("{"):
            return "jsonl"
        return _SUFFIXES.get(path.suffix.lower(), "json")
    if path.suffix.lower() in _SUFFIXES:
        return _SUFFIXES[path.suffix.lower()]
    raise InputError(
        f"unknown format: not JSON or JSON Lines (name the format with --format {'/'.join(PARSERS)})",
        path=path,
    )


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", path=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None


def parse_file(path: Path, fmt: str | None = None) -> tuple[str, ParseResult]:
    """Read and parse one file; raises InputError if the file as a whole cannot be read."""
    text = read_text(path)
    if fmt is not None and fmt not in PARSERS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(PARSERS)}", path=path)
    fmt = fmt or detect_format(path, text)
    return fmt, PARSERS[fmt](path, text)


def ingest_files(
    store: Store,
    paths: list[Path],
    fmt: str | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_parsed: Callable[[Path, int], None] | None = None,
) -> list[FileReport]:
    """Import every file; a bad file or record is reported and the rest still imports."""
    reports = []
    for path in paths:
        report = FileReport(path=str(path))
        start = time.perf_counter()
        try:
            report.format, result = parse_file(path, fmt)
        except InputError as exc:
            report.error = exc
            reports.append(report)
            continue
        report.parsed = result.records
        report.skipped = result.errors
        if on_parsed:
            on_parsed(path, len(result.papers))
        for begin in range(0, len(result.papers), CHUNK):
            chunk = result.papers[begin : begin + CHUNK]
            upserted = store.upsert_papers(chunk)
            report.new += len(upserted.new)
            report.merged += len(upserted.merged)
            report.unchanged += len(upserted.unchanged)
            if on_progress:
                on_progress(len(chunk))
        report.seconds = time.perf_counter() - start
        reports.append(report)
    return reports
