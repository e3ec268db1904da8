"""JSON (an array of records, or an object holding one) and JSON Lines (one record a line).

A record with `paper` and `decision` objects is a full record from `triage export --format jsonl`:
its paper is taken as exported and the rest is kept for restoring (assistant.ingest.restore).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from assistant.errors import InputError
from assistant.ingest.csljson import convert
from assistant.ingest.records import RecordError, record_to_paper
from assistant.ingest.restore import RestoreResult, is_full_record, parse_full_record

_LIST_KEYS = ("papers", "items", "records", "data", "results")


def _add(result: RestoreResult, record: Any, source: str) -> None:
    """Parse one record into `result`; raises RecordError."""
    if is_full_record(record):
        paper, restored = parse_full_record(record)
        result.papers.append(paper)
        result.restored[paper.id] = restored
    else:
        result.papers.append(record_to_paper(convert([record])[0], source))


def parse_jsonl(path: Path, text: str) -> RestoreResult:
    result = RestoreResult()
    source = f"jsonl:{path.name}"
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        result.records += 1
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            result.errors.append(
                InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=lineno)
            )
            continue
        try:
            _add(result, record, source)
        except RecordError as exc:
            result.errors.append(InputError(str(exc), path=path, line=lineno))
    return result


def parse_json(path: Path, text: str) -> RestoreResult:
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines[:2]):
            return parse_jsonl(path, text)  # JSON Lines saved as .json
        raise InputError(
            f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno
        ) from None
    if isinstance(data, dict):
        key = next((k for k in _LIST_KEYS if isinstance(data.get(k), list)), None)
        data = data[key] if key else [data]
    if not isinstance(data, list):
        raise InputError("expected a list of paper records (or an object with a 'papers' list)", path=path)
    result = RestoreResult()
    source = f"json:{path.name}"
    for number, record in enumerate(data, start=1):
        result.records += 1
        try:
            _add(result, record, source)
        except RecordError as exc:
            result.errors.append(InputError(str(exc), path=path, record=number))
    return result
