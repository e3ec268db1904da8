"""What every importer returns, and the guard that keeps one bad record from costing the file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from assistant.errors import InputError, in_words
from assistant.ingest.records import RecordError
from assistant.models import Paper


@dataclass
class ParseResult:
    """The papers read from one file, the records that could not be read (with where), and
    notes on what was read in a way the user should know about (with where)."""

    papers: list[Paper] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    records: int = 0
    notes: list[str] = field(default_factory=list)


def record_error(
    exc: BaseException, path: str | Path, *, line: int | None = None, record: int | None = None
) -> InputError:
    """A record that failed, as the located `file:line: what is wrong` line the user sees."""
    if isinstance(exc, RecordError):  # the record's check already says what is wrong
        return InputError(str(exc), path=path, line=line, record=record)
    return InputError(f"could not be read: {in_words(exc)}", path=path, line=line, record=record)


@contextmanager
def one_record(
    result: ParseResult, path: str | Path, *, line: int | None = None, record: int | None = None
) -> Iterator[list[str]]:
    """Convert one record: whatever goes wrong inside becomes a skipped line of `result` with
    where the record is, and the file goes on. Yields a list for notes on the record (a year
    left out...), which end up in `result.notes` with where the record is."""
    notes: list[str] = []
    try:
        yield notes
    except Exception as exc:  # any failure costs this record only; it is reported, in words
        result.errors.append(record_error(exc, path, line=line, record=record))
        return
    where = InputError("", path=path, line=line, record=record).location_text()
    result.notes.extend(f"{where}{note}" for note in notes)
