"""JSON (an array of records, or an object holding one) and JSON Lines (one record a line).

A record with `paper` and `decision` objects is a full record from `triage export --format jsonl`:
its paper is taken as exported and the rest is kept for restoring (assistant.ingest.restore).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assistant.errors import InputError
from assistant.ingest.base import one_record
from assistant.ingest.csljson import convert
from assistant.ingest.records import record_to_paper
from assistant.ingest.restore import RestoreResult, is_full_record, parse_full_record

_LIST_KEYS = ("papers", "items", "records", "data", "results", "recommendedPapers")


def _add(result: RestoreResult, record: Any, source: str, notes: list[str]) -> None:
    """Parse one record into `result`; raises whatever is wrong with it."""
    if is_full_record(record):
        paper, restored = parse_full_record(record, notes)
        result.papers.append(paper)
        result.restored[paper.id] = restored
    else:
        result.papers.append(record_to_paper(convert([record])[0], source, notes))


def _int(digits: str) -> int | str:
    """A JSON integer; one too long to be any field's value stays text (the record's check
    then says which field is wrong) instead of failing the whole file."""
    return int(digits) if len(digits) <= 40 else digits


def _loads(text: str) -> Any:
    """json.loads, with the failures it raises besides JSONDecodeError turned into one:
    nesting too deep for the parser, a number too long to convert."""
    try:
        return json.loads(text, parse_int=_int)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise
        reason = "a number too long" if "digits" in str(exc) else str(exc).split("\n")[0]
        raise json.JSONDecodeError(reason, text, 0) from None


def parse_jsonl(path: Path, text: str) -> RestoreResult:
    result = RestoreResult()
    source = f"jsonl:{path.name}"
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        result.records += 1
        try:
            record = _loads(line)
        except json.JSONDecodeError as exc:
            where = f" (column {exc.colno})" if exc.pos else ""
            result.errors.append(InputError(f"invalid JSON: {exc.msg}{where}", path=path, line=lineno))
            continue
        with one_record(result, path, line=lineno) as notes:
            _add(result, record, source, notes)
    return result


def parse_json(path: Path, text: str) -> RestoreResult:
    try:
        data: Any = _loads(text)
    except json.JSONDecodeError as exc:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines[:2]):
            return parse_jsonl(path, text)  # JSON Lines saved as .json
        where = f" (column {exc.colno})" if exc.pos else ""
        raise InputError(f"invalid JSON: {exc.msg}{where}", path=path, line=exc.lineno) from None
    if isinstance(data, dict):
        key = next((k for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
        data = data[key] if key else [data]
    if not isinstance(data, list):
        raise InputError("expected a list of paper records (or an object with a 'papers' list)", path=path)
    result = RestoreResult()
    source = f"json:{path.name}"
    for number, record in enumerate(data, start=1):
        result.records += 1
        with one_record(result, path, record=number) as notes:
            _add(result, record, source, notes)
    return result
