"""Listing pages as people copy them from the web (select all, copy, paste into a file).

Two shapes are understood:

* author-profile listings (Semantic Scholar style): per paper a line such as
  ``89.7CLMay 28Code`` or ``CLJul 28, 2022`` (optional score, category, date, optional
  ``Code``), then the title, then the authors (``A, B, C et al. · affiliation, ...``), then
  the abstract;
* paper-search listings (Hugging Face papers style): a title line followed by an abstract
  line.

Copied pages vary: blank lines come and go, authors may be glued onto the end of the title
line, blocks repeat, the page may start mid-listing, navigation text surrounds the papers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from assistant.errors import InputError
from assistant.ingest.base import ParseResult, one_record, record_error
from assistant.ingest.records import RecordError, record_to_paper
from assistant.models import normalize_title

_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
META = re.compile(
    r"^(?P<score>\d{1,3}(?:\.\d)?)?(?P<cat>[A-Z]{2,4}(?:\.[A-Z]{2})?)"
    r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?P<day>\d{1,2})(?:, (?P<year>\d{4}))?"
    r"(?P<code>Code)?$"
)
_NAME = r"[A-ZÀ-ÖØ-Þ][\w'’.\-]*(?: (?:[a-zà-ÿ]{1,4} )*[A-ZÀ-ÖØ-Þ][\w'’.\-]*){0,4}"
AUTHORS = re.compile(rf"^(?P<names>{_NAME}(?:, {_NAME})*)(?P<etal> et al\.)?(?: · (?P<aff>.+))?$")
_GLUE = re.compile(r"(?<=[a-z0-9)\]?!.])(?=[A-ZÀ-ÖØ-Þ])")
_BOILERPLATE = re.compile(
    r"^(get trending papers in your email inbox.*|subscribe|load more|show more|next|previous|"
    r"page \d+( of \d+)?|\d+ papers?|sort by.*|filter.*|© .*|semantic scholar profile)$",
    re.IGNORECASE,
)
MIN_ABSTRACT = 120


@dataclass
class _Line:
    number: int
    text: str


def looks_like_listing(text: str) -> bool:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()][:400]
    if sum(1 for ln in lines if META.match(ln)) >= 1:
        return True
    pairs = sum(1 for a, b in zip(lines, lines[1:], strict=False) if _is_title(a) and len(b) >= MIN_ABSTRACT)
    return pairs >= 2


def _is_title(text: str) -> bool:
    return 8 <= len(text) <= 300 and not text.endswith((".", ":")) or text.endswith("?")


_MARKUP = re.compile(r"^(\||#|>|[-*+] |```|<[a-z/!])|`|\]\(")


def _not_a_title(text: str) -> str | None:
    """Why a would-be title is Markdown or prose rather than a paper's title (None: it may be one)."""
    if _MARKUP.search(text):
        return "Markdown (a table row, heading, list item or code)"
    words = text.split()
    if text.endswith((",", ";")) or (words and words[0][:1].islower() and len(words) > 12):
        return "a line of running prose"
    return None


def _clean(text: str) -> str:
    text = " ".join(text.split())
    return re.sub(r"^Subscribe(?=\S)", "", text)


def _date(m: re.Match[str], today: date) -> date | None:
    """The header line's date; None for one that is no date (`Feb 30`): no date is stored."""
    month, day = _MONTHS[m["mon"]], int(m["day"])
    try:
        if m["year"]:
            return date(int(m["year"]), month, day)
        # No year on the page: the most recent such date not after the import date.
        candidate = date(today.year, month, day)
        return candidate if candidate <= today else date(today.year - 1, month, day)
    except ValueError:
        if m["year"] or (month, day) != (2, 29):
            return None
        return date(today.year - (today.year % 4 or 4), 2, 29)  # the last leap year's 29 February


def split_authors(line: str) -> tuple[list[str], list[str], bool] | None:
    """`A, B et al. · aff1, aff2` -> (authors, affiliations, truncated); None if not authors."""
    m = AUTHORS.match(line.strip())
    if not m or len(line) > 600:
        return None
    names = [n.strip() for n in m["names"].split(",") if n.strip()]
    if len(names) == 1 and not (m["etal"] or m["aff"]) and len(names[0].split()) < 2:
        return None
    affiliations = [a.strip() for a in (m["aff"] or "").split(",") if a.strip()]
    return names, affiliations, bool(m["etal"])


def _reads_as_names(authors: tuple[list[str], list[str], bool]) -> bool:
    """Every name has two to six words (`Adrian Del Maestro`, `Rens van de Schoot`)."""
    return all(2 <= len(name.split()) <= 6 for name in authors[0])


def split_glued_title(line: str) -> tuple[str, tuple[list[str], list[str], bool] | None]:
    """A title line that may carry the author list glued onto its end (with or without a space).

    A glue point (a lower-case letter, digit or closing punctuation directly followed by a
    capital) is where the authors start if what follows reads as a list of names; the last such
    point wins (a name's own inner capital, `LeCun`, leaves a one-word first name and is passed
    over). Without one, of the spaces the line could be cut at, the one whose first author has
    as many words as the other authors typically do wins; a line with no such cut is all title.
    """

    def candidate(cut: int) -> tuple[str, tuple[list[str], list[str], bool]] | None:
        title, rest = line[:cut].strip(), line[cut:].strip()
        if len(title) < 8 or len(title.split()) < 2:
            return None
        if "," not in rest and " · " not in rest and "et al." not in rest:
            return None
        authors = split_authors(rest)
        return (title, authors) if authors is not None else None

    for cut in reversed([m.start() for m in _GLUE.finditer(line)]):
        found = candidate(cut)
        if found and _reads_as_names(found[1]):
            return found
    for cut in [m.start() + 1 for m in re.finditer(" ", line)]:
        found = candidate(cut)
        if found is None:
            continue
        title, authors = found
        sizes = [len(name.split()) for name in authors[0]]
        others = sorted(sizes[1:])
        target = others[len(others) // 2] if others else 2
        if sizes[0] == target and (len(sizes) > 1 or authors[2] or authors[1]):
            return title, authors
    return line, None


def parse_listing(path: Path, text: str, today: date | None = None) -> ParseResult:
    today = today or date.today()
    lines = [_Line(i, _clean(raw)) for i, raw in enumerate(text.splitlines(), start=1)]
    lines = [ln for ln in lines if ln.text and not _BOILERPLATE.match(ln.text)]
    if any(META.match(ln.text) for ln in lines):
        records = list(_profile_blocks(lines, today))
        source = f"listing:{path.name}"
    else:
        records = list(_search_blocks(lines))
        source = f"listing:{path.name}"
    result = ParseResult()
    seen: set[str] = set()
    for line_no, record in records:
        if isinstance(record, Exception):
            result.records += 1
            result.errors.append(record_error(record, path, line=line_no))
            continue
        key = normalize_title(str(record.get("title", "")))
        if key in seen:  # the same block repeated on the page
            continue
        seen.add(key)
        result.records += 1
        with one_record(result, path, line=line_no) as notes:
            result.papers.append(record_to_paper(record, source, notes))
    if not records:
        raise InputError("no papers found on this listing page", path=path)
    _check_titles(path, records)
    return result


def _check_titles(path: Path, records: list[tuple[int, Any]]) -> None:
    """A file whose "titles" are mostly Markdown or prose is not a listing page (a README with a
    table reads like one): an error naming the file, not an import of junk."""
    found = [(n, str(r.get("title", ""))) for n, r in records if isinstance(r, dict)]
    bad = [(n, t, why) for n, t in found if (why := _not_a_title(t))]
    if found and len(bad) * 2 >= len(found):
        line, title, why = bad[0]
        raise InputError(
            f"this does not read as a listing page: {len(bad)} of {len(found)} would-be titles are "
            f"Markdown or prose (line {line}: {title[:60]!r} is {why}); nothing was imported",
            path=path,
        )


def _profile_blocks(lines: list[_Line], today: date) -> Any:
    starts = [i for i, ln in enumerate(lines) if META.match(ln.text)]
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        block = lines[start + 1 : end]
        if not block:
            yield lines[start].number, RecordError("a paper header line with no title after it")
            continue
        try:
            yield block[0].number, _profile_record(lines[start], block, today)
        except Exception as exc:  # one block that trips the reader costs that paper only
            yield block[0].number, exc


def _profile_record(header: _Line, block: list[_Line], today: date) -> dict[str, Any]:
    """The record of one author-profile block: its header line, then title, authors, abstract."""
    meta = META.match(header.text)
    assert meta is not None
    title, rest = block[0].text, block[1:]
    authors = split_authors(rest[0].text) if rest else None
    if authors is not None:
        rest = rest[1:]
    else:
        title, authors = split_glued_title(title)
    abstract_lines = [ln.text for ln in rest[:1]] + [
        ln.text for ln in rest[1:] if len(ln.text) >= MIN_ABSTRACT
    ]
    day = _date(meta, today)
    record: dict[str, Any] = {
        "title": title,
        "abstract": " ".join(abstract_lines),
        "categories": [meta["cat"]],
    }
    if day is not None:
        record["date"] = day.isoformat()
    if authors:
        record["authors"] = authors[0]
        if authors[1]:
            record["affiliations"] = authors[1]
        if authors[2]:
            record["authors_truncated"] = True
    if meta["score"]:
        record["page_score"] = float(meta["score"])
    if meta["code"]:
        record["has_code"] = True
    return record


def _search_blocks(lines: list[_Line]) -> Any:
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        if (
            nxt is not None
            and _is_title(line.text)
            and len(nxt.text) >= MIN_ABSTRACT
            and len(line.text) < len(nxt.text)
        ):
            try:
                yield line.number, _search_record(line.text, nxt.text)
            except Exception as exc:  # one block that trips the reader costs that paper only
                yield line.number, exc
            i += 2
            continue
        i += 1


def _search_record(title_line: str, abstract: str) -> dict[str, Any]:
    """The record of one paper-search block: a title line (maybe with the authors glued on)."""
    title, authors = split_glued_title(title_line)
    record: dict[str, Any] = {"title": title, "abstract": abstract}
    if authors:
        record["authors"] = authors[0]
        if authors[1]:
            record["affiliations"] = authors[1]
    return record
