"""CSV (and TSV) with a header row; header names matched case-insensitively, with synonyms."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from assistant.errors import InputError
from assistant.ingest.base import ParseResult
from assistant.ingest.records import RecordError, record_to_paper

# Header (lowercased, spaces/underscores/dashes folded) -> our field. Zotero's CSV export included.
SYNONYMS = {
    "title": "title",
    "papertitle": "title",
    "abstract": "abstract",
    "abstractnote": "abstract",
    "summary": "abstract",
    "authors": "authors",
    "author": "authors",
    "creators": "authors",
    "year": "year",
    "publicationyear": "year",
    "date": "date",
    "published": "date",
    "publicationdate": "date",
    "venue": "venue",
    "journal": "venue",
    "publicationtitle": "venue",
    "booktitle": "venue",
    "categories": "categories",
    "category": "categories",
    "arxivid": "arxiv_id",
    "arxiv": "arxiv_id",
    "eprint": "arxiv_id",
    "doi": "doi",
    "url": "url",
    "link": "url",
    "id": "id",
}


def _key(header: str) -> str:
    return re.sub(r"[\s_\-]+", "", header.strip().lower())


def parse_csv(path: Path, text: str) -> ParseResult:
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise InputError(f"no CSV header row ({exc or 'empty file'})", path=path, line=1) from None
    fields = [SYNONYMS.get(_key(h), h.strip()) for h in header]
    if "title" not in fields:
        raise InputError(
            f"the CSV header has no title column (found: {', '.join(h for h in header[:12])})",
            path=path,
            line=1,
        )
    result = ParseResult()
    source = f"csv:{path.name}"
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            result.records += 1
            result.errors.append(InputError(f"malformed CSV: {exc}", path=path, line=reader.line_num))
            continue
        if not any(cell.strip() for cell in row):
            continue
        result.records += 1
        line = reader.line_num
        if len(row) > len(fields):
            result.errors.append(
                InputError(f"{len(row)} cells but the header has {len(fields)} columns", path=path, line=line)
            )
            continue
        record: dict[str, object] = {}
        for name, cell in zip(fields, row, strict=False):
            if cell.strip() and name not in record:
                record[name] = cell.strip()
        extra = str(record.get("Extra", ""))
        arxiv = re.search(r"arXiv:\s*(\S+)", extra)
        if arxiv and "arxiv_id" not in record:
            record["arxiv_id"] = arxiv.group(1)
        try:
            result.papers.append(record_to_paper(record, source))
        except RecordError as exc:
            result.errors.append(InputError(str(exc), path=path, line=line))
    return result
