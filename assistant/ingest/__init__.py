"""Reading paper files into the store: format detection, parsing, upsert, a report per file."""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.errors import InputError, in_words, is_disk_full
from assistant.ingest.arxiv import ArxivClient, fetch, looks_like_atom, parse_atom
from assistant.ingest.base import ParseResult
from assistant.ingest.bibtex import parse_bibtex
from assistant.ingest.csvfile import parse_csv
from assistant.ingest.dedupe import resolve_matches
from assistant.ingest.jsonfile import parse_json, parse_jsonl
from assistant.ingest.limits import cap_fields
from assistant.ingest.listing import looks_like_listing, parse_listing
from assistant.ingest.restore import GivenVector, RestoredPapers, RestoreResult, VectorCheck, apply_restored
from assistant.ingest.ris import looks_like_ris, parse_ris
from assistant.models import Paper, StoredPaper
from assistant.store import Store

Parser = Callable[[Path, str], ParseResult]

PARSERS: dict[str, Parser] = {
    "json": parse_json,
    "jsonl": parse_jsonl,
    "csl-json": parse_json,
    "bibtex": parse_bibtex,
    "ris": parse_ris,
    "csv": parse_csv,
    "arxiv": parse_atom,
    "listing": parse_listing,
}
_SUFFIXES = {
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".bib": "bibtex",
    ".bibtex": "bibtex",
    ".ris": "ris",
    ".csv": "csv",
    ".tsv": "csv",
    ".xml": "arxiv",
    ".atom": "arxiv",
}
CHUNK = 256
# Reading holds the bytes and the text at once (three times the file for CRLF text): beyond
# this an import would pass 500 MB.
MAX_FILE_BYTES = 200_000_000


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
    restored: int = 0  # papers whose decision or assessment a full JSONL record restored
    notes: list[str] = field(default_factory=list)  # records stored with a field cut to size
    ids: list[str] = field(default_factory=list)  # the stored papers its records went to
    created: list[str] = field(default_factory=list)  # the papers this file made (not merged into)
    # Papers this file merged into, with the sources the merge gave them (undone by `rm --last-import`).
    gained: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.skipped


def _one_document(body: str) -> bool:
    """Whether the text is a single JSON document (an object whose records sit one per line
    is JSON, not JSON Lines)."""
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def detect_format(path: Path, text: str) -> str:
    """The format of a file, from its content first and its name second."""
    body = text.lstrip("\ufeff \t\r\n")
    head = body[:1]
    if head in ("[", "{"):
        if _SUFFIXES.get(path.suffix.lower()) == "jsonl":
            return "jsonl"
        lines = [ln for ln in body.splitlines()[:3] if ln.strip()]
        if head == "{" and len(lines) > 1 and lines[1].lstrip().startswith("{") and not _one_document(body):
            return "jsonl"
        return "json"
    if head == "@" or "\n@" in body[:5000] and path.suffix.lower() in (".bib", ".bibtex", ".txt", ""):
        return "bibtex"
    if looks_like_ris(body):
        return "ris"
    if looks_like_atom(body):
        return "arxiv"
    suffix = _SUFFIXES.get(path.suffix.lower())
    if suffix in ("csv", "bibtex", "ris"):
        return suffix
    if looks_like_listing(body):
        return "listing"
    if suffix:
        return suffix
    raise InputError(
        "unknown format: not JSON, JSON Lines, BibTeX, RIS, CSV, arXiv Atom or a listing page "
        f"(name the format with --format {'|'.join(PARSERS)})",
        path=path,
    )


_UNDEFINED_IN_1252 = frozenset(b"\x81\x8d\x8f\x90\x9d")


def _windows_1252(exc: UnicodeError) -> tuple[str, int]:
    """Decoding error handler: bytes that are not UTF-8 read as Windows-1252 (as Latin-1 for
    the five bytes Windows-1252 leaves undefined)."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    text = "".join(chr(b) if b in _UNDEFINED_IN_1252 else bytes([b]).decode("cp1252") for b in bad)
    return text, exc.end


codecs.register_error("triage.windows-1252", _windows_1252)


def decode(data: bytes) -> tuple[str, list[int]]:
    """Bytes as text, line by line: UTF-8 where a line is UTF-8, else its stray bytes as
    Windows-1252, so one stray byte costs no record and a file saved in Windows-1252 keeps its
    accents. Returns the text (line ends as `\\n`) and the numbers of the lines not all UTF-8."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    others: list[int] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        lines = []
        for number, raw in enumerate(data.splitlines(keepends=True), start=1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                others.append(number)
                lines.append(raw.decode("utf-8", errors="triage.windows-1252"))
        text = "".join(lines)
    return text.replace("\r\n", "\n").replace("\r", "\n"), others


def _lines_note(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:8]))
    more = f" and {len(numbers) - 8} more" if len(numbers) > 8 else ""
    label = "line" if len(numbers) == 1 else "lines"
    return f"{label} {shown}{more}: not UTF-8, read as Windows-1252 (check their accents)"


def read_text(path: Path) -> tuple[str, list[str]]:
    """The text of a file, and notes on how it was read (lines that were not UTF-8)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES and path.is_file():
            raise InputError(
                f"the file is {size / 1e6:,.0f} MB; files over {MAX_FILE_BYTES / 1e6:,.0f} MB are not "
                "read (an import holds its file in memory): split it into smaller files",
                path=path,
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a file", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
    text, others = decode(data)
    if not others:
        return text, []
    if "\x00" in text:
        raise InputError(
            f"not UTF-8 or Windows-1252 text: it holds binary data (a NUL byte at byte {data.index(0)})",
            path=path,
        )
    return text, [f"{path}: {_lines_note(others)}"]


def parse_file(path: Path, fmt: str | None = None) -> tuple[str, ParseResult]:
    """Read and parse one file; raises InputError if the file as a whole cannot be read."""
    text, notes = read_text(path)
    if not text.strip():  # whatever its name: an empty export says the same in every format
        raise InputError("the file is empty: there are no papers in it", path=path)
    if fmt is not None and fmt not in PARSERS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(PARSERS)}", path=path)
    forced = fmt
    fmt = fmt or detect_format(path, text)
    result = PARSERS[fmt](path, text)
    if not result.records and not result.papers and not result.errors:
        hint = ""
        if forced:
            try:
                looks = detect_format(path, text)
            except InputError:
                looks = None
            if looks and looks != forced:
                hint = f": it looks like {looks} (leave out --format, or give --format {looks})"
        raise InputError(f"no papers found in it as {fmt}{hint}", path=path)
    result.notes[:0] = notes
    return fmt, result


def ingest_files(
    store: Store | Callable[[], Store],
    paths: list[Path],
    fmt: str | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_parsed: Callable[[Path, int], None] | None = None,
) -> list[FileReport]:
    """Import every file; a bad file or record is reported and the rest still imports. `store`
    may be a function that opens it: it is called once a file has papers to store, so files
    that all fail to parse leave no store behind."""
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
        except (RecursionError, ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as exc:
            # A parser tripped on something no check foresaw: this file fails, the rest import.
            report.error = InputError(
                f"could not be read: {in_words(exc)}; no papers were imported from this file", path=path
            )
            reports.append(report)
            continue
        report.parsed = result.records
        report.skipped = result.errors
        report.notes += result.notes
        if on_parsed:
            on_parsed(path, len(result.papers))
        if callable(store):
            store = store()
        try:
            ids = store_papers(store, result.papers, report, on_progress)
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            # What was stored stays; this file and the rest wait for room on the disk.
            stored = report.new + report.merged + report.unchanged
            report.error = InputError(
                f"the disk holding the store is full after {stored} of {len(result.papers)} records: "
                "free some space and import again (what is stored already is not duplicated)",
                path=path,
            )
            report.seconds = time.perf_counter() - start
            reports.append(report)
            for rest in paths[len(reports) :]:
                reports.append(
                    FileReport(path=str(rest), error=InputError("not imported: the disk is full", path=rest))
                )
            break
        if isinstance(result, RestoreResult) and result.restored:
            report.restored, problems = apply_restored(store, result.restored, ids)
            report.skipped += [InputError(problem, path=path) for problem in problems]
        report.seconds = time.perf_counter() - start
        reports.append(report)
    return reports


def store_papers(
    store: Store,
    papers: list[Paper],
    report: FileReport,
    on_progress: Callable[[int], None] | None = None,
    vectors: Mapping[str, GivenVector] | None = None,
) -> dict[str, str]:
    """Deduplicate against the store and upsert, chunk by chunk; returns record id -> stored id.

    Counts are per record: `new` made a paper, `merged` added to a paper (stored, or earlier
    in the same file), `unchanged` told the store nothing it did not know.

    `vectors` (by record id; by default those the records of an export with vectors carry) are
    stored instead of embedding, where this store may take them (`VectorCheck`); the rest is
    embedded, with a note on why.
    """
    if vectors is None and isinstance(papers, RestoredPapers):
        vectors = papers.vectors()
    check = VectorCheck(store.embedder_identity(), store.vector_length()) if vectors else None
    ids: dict[str, str] = {}
    for begin in range(0, len(papers), CHUNK):
        given = []
        for paper in papers[begin : begin + CHUNK]:
            capped, notes = cap_fields(paper)
            given.append(capped)
            report.notes += [f"{report.path}: {capped.title[:60]!r}: {note}" for note in notes]
        # Another process importing the same papers must not resolve against the store between
        # this chunk's look-up and its write: both would make the paper.
        embedded = 0

        def moved(n: int) -> None:  # the bar moves as papers are embedded, not per chunk
            nonlocal embedded
            embedded += n
            if on_progress:
                on_progress(n)

        # The new papers are embedded before the lock is taken (the look-up is made again under
        # it): other processes' writes, a decision in the review UI, wait for the lock.
        if check is not None and vectors:
            store.provide_embeddings(check.take(store, given, vectors))
        ahead = [paper for paper, _ in resolve_matches(store, given)]
        stored = store.stored_ids([p.id for p in ahead])
        store.prepare_embeddings([p.document for p in ahead if p.id not in stored], moved)
        with store.write_lock():
            matches = resolve_matches(store, given)
            chunk = [paper for paper, _ in matches]
            provenance = [(g.id, how) for g, (_, how) in zip(given, matches, strict=True)]
            had = {
                pid: set(map(str, meta.get("sources") or ()))
                for pid, meta in store.metadata(list(dict.fromkeys(p.id for p in chunk)))
            }
            upserted = store.upsert_papers(chunk, provenance, on_embedded=moved)
        for paper in chunk:  # the sources a merge gave papers that were there before
            if paper.id in had:
                new_sources = [x for x in paper.sources if x not in had[paper.id]]
                if new_sources:
                    gained = report.gained.setdefault(paper.id, [])
                    gained += [x for x in new_sources if x not in gained]
        ids.update((a.id, b.id) for a, b in zip(given, chunk, strict=True))
        report.ids.extend(p.id for p in chunk)
        created, changed = set(upserted.new), set(upserted.merged)
        for paper in chunk:
            if paper.id in created:
                created.discard(paper.id)
                report.new += 1
                report.created.append(paper.id)
            elif paper.id in changed or paper.id in upserted.new:
                report.merged += 1
            else:
                report.unchanged += 1
        if on_progress and len(chunk) > embedded:
            on_progress(len(chunk) - embedded)  # the papers that needed no embedding
    report.ids = list(dict.fromkeys(report.ids))
    if check is not None:
        report.notes += check.notes(str(report.path))
    return ids


def ingest_arxiv(
    store: Store,
    client: ArxivClient,
    query: str | None,
    ids: list[str] | None,
    maximum: int,
    on_progress: Callable[[int], None] | None = None,
) -> FileReport:
    """Import the results of an arXiv API query (or a list of arXiv ids)."""
    label = f"arXiv API: {query}" if query else f"arXiv API: {', '.join(ids or [])}"
    report = FileReport(path=label, format="arxiv")
    start = time.perf_counter()
    result = fetch(client, query, ids, maximum)
    for paper in result.papers:
        paper.sources = ["arxiv-api"]
    report.parsed = result.records
    report.skipped = result.errors
    report.notes.extend(f"{label}: {note}" for note in result.notes)
    store_papers(store, result.papers, report, on_progress)
    report.seconds = time.perf_counter() - start
    return report


LAST_IMPORT = "last-import"


def record_import(store: Store, reports: list[FileReport], list_name: str | None = None) -> None:
    """Remember which papers this import made (and merged into, and the reading list it files
    them into), for `triage rm --last-import`: every import is recorded, one that made nothing
    too, so `--last-import` never reaches back past it."""
    created = list(dict.fromkeys(pid for r in reports for pid in r.created))
    if not created and all(r.error is not None for r in reports):
        return  # nothing was read or stored: not an import to undo (and no write to a failing store)
    files = [str(r.path) for r in reports]
    gained: dict[str, list[str]] = {}
    for r in reports:
        for pid, sources in r.gained.items():
            if pid not in created:
                gained[pid] = list(dict.fromkeys([*gained.get(pid, []), *sources]))
    store.set_value(
        LAST_IMPORT,
        {"at": time.time(), "files": files, "created": created, "merged": gained, "list": list_name},
    )


def undo_last_import(store: Store, kept: list[str] | None = None) -> int:
    """Undo the rest of the last import once the papers it made were deleted: the papers it
    merged into lose the sources it gave them (they stay, with what else it merged). `kept`:
    papers it made that were not deleted (the researcher decided on them), which a later
    `--last-import` can still delete. Once nothing it made is left it is marked undone: it is
    still the last import, so `--last-import` says so rather than reaching back to an older one.
    Returns how many papers lost a source."""
    value = store.get_value(LAST_IMPORT)
    if not isinstance(value, dict):
        return 0
    merged: dict[str, Any] = value["merged"] if isinstance(value.get("merged"), dict) else {}
    changes: dict[str, dict[str, object]] = {}
    stamp = time.time()
    for pid, meta in store.metadata(list(merged)) if merged else []:
        given = {str(x) for x in merged.get(pid) or ()}
        sources = [str(x) for x in meta.get("sources") or ()]
        left = [x for x in sources if x not in given]
        if len(left) != len(sources):
            changes[pid] = {"sources": left or None, "touched": stamp}
    if changes:
        store.set_paper_values(changes)
    store.set_value(LAST_IMPORT, {**value, "created": list(kept or []), "merged": {}, "undone": not kept})
    return len(changes)


REMOVED_DIR = "removed"
RECOVERY_DIR = "recovery"


def undo_file(kind: str, stamp: float | None = None) -> Path:
    """A new file in the user's data folder for records to restore (`kind`: REMOVED_DIR for
    what `rm` deleted, RECOVERY_DIR for what the review UI could not save), named by time."""
    import platformdirs

    folder = Path(platformdirs.user_data_dir("triage")) / kind
    when = time.localtime(stamp if stamp is not None else time.time())
    base = time.strftime("%Y%m%d-%H%M%S", when)
    path = folder / f"{base}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"{base}-{n}.jsonl"
    return path


def write_full_records(path: Path, items: list[StoredPaper], lists: dict[str, str]) -> Path:
    """Write papers as full JSONL records (`triage export -f jsonl`): `triage ingest PATH`
    restores them whole, decisions, notes, assessments and lists included. Written to a
    temporary file and moved into place, so a half-written file never stands."""
    from assistant.export.common import ExportContext
    from assistant.export.jsonl import write

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(write(items, ExportContext(lists=lists)), encoding="utf-8")
    partial.replace(path)
    return path


def save_removed(store: Store, items: list[StoredPaper]) -> Path:
    """Write papers about to be deleted to a new file under the data folder's `removed/`;
    `triage ingest` of it brings them back."""
    from assistant.lists import ReadingLists

    lists = {rl.name: rl.description for rl in ReadingLists(store).all()}
    return write_full_records(undo_file(REMOVED_DIR), items, lists)


def was_undone(store: Store) -> bool:
    value = store.get_value(LAST_IMPORT)
    return isinstance(value, dict) and bool(value.get("undone"))


def import_lists(store: Store) -> list[str]:
    """The reading list the last import filed its papers into (`ingest --list`), if any."""
    value = store.get_value(LAST_IMPORT)
    name = value.get("list") if isinstance(value, dict) else None
    return [" ".join(name.split())] if isinstance(name, str) and name.strip() else []


def last_import(store: Store) -> tuple[list[str], list[str], float] | None:
    """(papers made, files, when) of the last import that made any, if it is known."""
    value = store.get_value(LAST_IMPORT)
    if not isinstance(value, dict) or not isinstance(value.get("created"), list):
        return None
    return (
        [str(i) for i in value["created"]],
        [str(f) for f in value.get("files", [])],
        float(value.get("at", 0)),
    )
