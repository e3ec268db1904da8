"""CSV (and TSV) with a header row; header names matched case-insensitively, with synonyms."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from assistant.errors import InputError
from assistant.ingest.base import ParseResult, one_record
from assistant.ingest.records import record_to_paper

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


def _reader_options(path: Path, text: str) -> dict[str, Any]:
    """RFC 4180 quoting (a quote inside a quoted cell written twice, as `csv.writer` does) with
    the file's delimiter: the sniffer's, unless the header row says otherwise. `strict`, so that
    a quote left open is an error at the row that opened it, not a cell that eats the file."""
    end = text.find("\n")
    header = text[:end] if end >= 0 else text  # not text.split(): that copies the whole file
    delimiter, skip_space = ("\t" if path.suffix.lower() == ".tsv" else ","), False
    try:
        sniffed = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
        delimiter, skip_space = sniffed.delimiter, bool(sniffed.skipinitialspace)
    except csv.Error:
        pass
    if delimiter not in header:  # the header row names the columns: its delimiter is the file's
        counts = {d: header.count(d) for d in ",;\t"}
        best = max(counts, key=lambda d: counts[d])
        delimiter = best if counts[best] else delimiter
    return {
        "delimiter": delimiter,
        "quotechar": '"',
        "doublequote": True,
        "skipinitialspace": skip_space,
        "strict": True,
    }


def _malformed(exc: csv.Error, lines: int) -> str:
    """A csv module error, for the row where the record began, in words."""
    reason = str(exc)
    if "expected after" in reason and lines == 1:
        return (
            'a quoted cell has text after its closing quote (a quote inside a quoted cell is written as "")'
        )
    if "expected after" in reason or "end of data" in reason:
        return 'a quote (") opened in this row is not closed; the row is skipped and the next line read'
    if "NUL" in reason:
        return "the row holds a NUL character (binary data, not text)"
    if "field larger" in reason:
        return f"a cell is longer than {csv.field_size_limit():,} characters"
    return f"the row is not well-formed CSV ({reason})"


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


class _Rows:
    """The rows of a CSV text with the physical line each begins on; after a malformed row
    (a quote left open), reading goes on at the line after the one the row began on."""

    def __init__(self, text: str, options: dict[str, Any]) -> None:
        # Physical lines, their ends kept (as io.StringIO(newline="") gives them, without the
        # buffer four times the text's size that it builds).
        self.lines = _LINE.findall(text)
        self.options = options
        self._restart(0)

    def _restart(self, at: int) -> None:
        self.offset = at
        self.reader = csv.reader(iter(self.lines[at:]), **self.options)

    def next(self) -> tuple[int, list[str] | csv.Error] | None:
        """(1-based line the row begins on, its cells or what is wrong); None at the end."""
        begin = self.offset + self.reader.line_num
        try:
            row = next(self.reader)
        except StopIteration:
            return None
        except csv.Error as exc:
            spans = self.offset + self.reader.line_num - begin
            self._restart(begin + 1)
            return begin + 1, csv.Error(_malformed(exc, spans))
        return begin + 1, row


def parse_csv(path: Path, text: str) -> ParseResult:
    rows = _Rows(text, _reader_options(path, text))
    first = rows.next()
    while first is not None and first[1] == []:  # blank lines before the header
        first = rows.next()
    if first is None:
        raise InputError("no CSV header row (empty file)", path=path, line=1)
    header_line, header = first
    if isinstance(header, csv.Error):
        raise InputError(f"no CSV header row ({header})", path=path, line=header_line)
    fields = [SYNONYMS.get(_key(h), h.strip()) for h in header]
    if "title" not in fields:
        raise InputError(
            f"the CSV header has no title column (found: {', '.join(h for h in header[:12])})",
            path=path,
            line=header_line,
        )
    result = ParseResult()
    source = f"csv:{path.name}"
    while (item := rows.next()) is not None:
        line, row = item
        if isinstance(row, csv.Error):
            result.records += 1
            result.errors.append(InputError(str(row), path=path, line=line))
            continue
        if not any(cell.strip() for cell in row):
            continue
        result.records += 1
        if len(row) > len(fields):
            result.errors.append(
                InputError(f"{len(row)} cells but the header has {len(fields)} columns", path=path, line=line)
            )
            continue
        with one_record(result, path, line=line) as notes:
            result.papers.append(record_to_paper(_record(fields, row), source, notes))
    return result


def _record(fields: list[str], row: list[str]) -> dict[str, object]:
    record: dict[str, object] = {}
    for name, cell in zip(fields, row, strict=False):
        if cell.strip() and name not in record:
            record[name] = cell.strip()
    extra = str(record.get("Extra", ""))
    arxiv = re.search(r"arXiv:\s*(\S+)", extra)
    if arxiv and "arxiv_id" not in record:
        record["arxiv_id"] = arxiv.group(1)
    return record
