"""BibTeX / BibLaTeX (bibtexparser v2): LaTeX to Unicode, arXiv eprints and DOIs recognised.

Every field of an entry is kept: the common ones on the paper, the rest in its `biblio` record
by CSL variable name (`pages` -> `page`, `address` -> `publisher-place`, `series` ->
`collection-title`...), names split the way BibTeX splits them (bibtexparser's name
middlewares), fields with no CSL counterpart as the source wrote them, and the title's LaTeX
too (its case protection and math), so that a .bib export gives the entry back.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import bibtexparser
from bibtexparser.library import Library
from bibtexparser.middlewares import RemoveEnclosingMiddleware
from bibtexparser.middlewares.middleware import LibraryMiddleware
from bibtexparser.middlewares.names import parse_single_name_into_parts, split_multiple_persons_names
from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

from assistant.errors import InputError
from assistant.ingest.base import ParseResult
from assistant.ingest.records import RecordError, record_to_paper

# Damaged entries are reported by us, with file and line; the library's own log would repeat them.
logging.getLogger("bibtexparser").setLevel(logging.CRITICAL)
_BRACES = re.compile(r"[{}]")
_UNESCAPED_BRACES = re.compile(r"(?<!\\)[{}]")


def _latex_context() -> Any:
    # pylatexenc spells \textasciicircum as U+02C6 (a modifier letter); LaTeX prints "^".
    db = get_default_latex_context_db()
    db.add_context_category(
        "triage",
        prepend=True,
        macros=[
            MacroTextSpec("textasciicircum", "^"),
            MacroTextSpec("textbraceleft", "{"),
            MacroTextSpec("textbraceright", "}"),
        ],
    )
    return db


_LATEX = LatexNodes2Text(math_mode="verbatim", latex_context=_latex_context())
# Fields that are prose (decoded from LaTeX); identifiers and URLs are kept verbatim.
_PROSE = frozenset(
    "title abstract journal journaltitle booktitle publisher keywords series address location "
    "institution school organization note edition type howpublished shorttitle eventtitle venue "
    "language langid chapter annote annotation addendum subtitle titleaddon".split()
)
_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
# BibTeX / biblatex entry type -> CSL item type.
TYPES = {
    "article": "article-journal",
    "book": "book",
    "mvbook": "book",
    "booklet": "pamphlet",
    "inbook": "chapter",
    "incollection": "chapter",
    "inproceedings": "paper-conference",
    "conference": "paper-conference",
    "proceedings": "book",
    "collection": "book",
    "manual": "report",
    "techreport": "report",
    "report": "report",
    "phdthesis": "thesis",
    "mastersthesis": "thesis",
    "thesis": "thesis",
    "unpublished": "manuscript",
    "online": "webpage",
    "www": "webpage",
    "electronic": "webpage",
    "patent": "patent",
    "dataset": "dataset",
    "software": "software",
    "periodical": "periodical",
    "standard": "standard",
    "misc": "document",
}
# BibTeX field -> CSL variable, for fields that are plain values (prose decoded, others verbatim).
FIELDS = {
    "volume": "volume",
    "series": "collection-title",
    "address": "publisher-place",
    "location": "publisher-place",
    "publisher": "publisher",
    "isbn": "ISBN",
    "issn": "ISSN",
    "edition": "edition",
    "note": "note",
    "shorttitle": "title-short",
    "urldate": "accessed",
    "type": "genre",
    "chapter": "chapter-number",
    "language": "language",
    "langid": "language",
    "eventtitle": "event-title",
    "venue": "event-place",
    "pagetotal": "number-of-pages",
    "volumes": "number-of-volumes",
    "pmid": "PMID",
    "pmcid": "PMCID",
}
# Fields read into the paper itself or handled below (not kept again as source fields).
_HANDLED = frozenset(
    "title abstract author editor year date month journal journaltitle booktitle eprint "
    "archiveprefix eprinttype primaryclass eprintclass doi url keywords number pages institution "
    "school".split()
)


def _text(value: Any) -> str:
    """A verbatim field (date, eprint...) without its protective braces, on one line."""
    return " ".join(_BRACES.sub("", str(value)).split())


def _line(value: Any) -> str:
    """A decoded prose field on one line (braces left in it were escaped: they are text)."""
    return " ".join(str(value).split())


_LATEX_MARKUP = re.compile(r"[\\$~]|--|``|''")
_ESCAPED = re.compile(r"\\([%&#_${}])")


def _decode(value: str) -> str:
    # Escaped specials (\% \& ...) are the common case in abstracts; the full LaTeX decoder is
    # slow (milliseconds a field), so it only sees text that still has markup after them.
    if not _LATEX_MARKUP.search(_ESCAPED.sub("", value)):
        return _ESCAPED.sub(r"\1", _UNESCAPED_BRACES.sub("", value))
    try:
        return str(_LATEX.latex_to_text(value))
    except Exception:  # pylatexenc gives up on some damaged input; keep the raw text then
        return value


def _decode_block(value: str) -> str:
    """A decoded prose field whose line breaks matter (a note): each paragraph decoded."""
    return "\n\n".join(_decode(p) for p in re.split(r"\n\s*\n", value.strip()))


# An accent command outside braces (`Espa\~na`, `Mu\~{n}oz`, `Ng\^{e}n`): BibTeX's name
# splitting reads its `~` as a tie (a space) and its letter as another word.
_BARE_ACCENT = re.compile(r"(?<!\{)(\\[`'^\"~=.])\s*(\{\\?[A-Za-z]\}|\\[ij](?![A-Za-z]) ?|[A-Za-z])")


def person(raw: str) -> dict[str, str] | None:
    """One BibTeX name in parts (bibtexparser splits it as BibTeX does); None for `others`."""
    if raw.strip().lower() == "others":
        return None
    raw = _BARE_ACCENT.sub(lambda m: "{" + m.group(1) + m.group(2) + "}", raw)
    try:
        parts = parse_single_name_into_parts(raw, strict=False)
    except Exception:  # a name bibtexparser cannot split: keep it whole
        return {"literal": _line(_decode(raw))}
    words = [*parts.first, *parts.von, *parts.last, *parts.jr]
    if (
        not parts.first
        and not parts.von
        and not parts.jr
        and len(parts.last) == 1
        and parts.last[0].startswith("{")
        and parts.last[0].endswith("}")
        and " " in parts.last[0].strip("{} ")
    ):
        return {"literal": _line(_decode(parts.last[0]))}
    if not words:
        return None
    out = {
        "given": _line(_decode(" ".join(parts.first))),
        "particle": _line(_decode(" ".join(parts.von))),
        "family": _line(_decode(" ".join(parts.last))),
        "suffix": _line(_decode(" ".join(parts.jr))),
    }
    return {k: v for k, v in out.items() if v}


def _people(value: Any) -> tuple[list[dict[str, str]], bool]:
    """(the names of a name field, whether it ended in `and others`)."""
    names = value if isinstance(value, list) else split_multiple_persons_names(str(value))
    people = [person(n) for n in names if n.strip()]
    return [p for p in people if p], any(p is None for p in people)


def _display(p: dict[str, str]) -> str:
    return p.get("literal") or " ".join(p[k] for k in ("given", "particle", "family", "suffix") if p.get(k))


def entry_to_record(fields: dict[str, Any], key: str, entry_type: str) -> dict[str, Any]:
    f = {k.lower(): v for k, v in fields.items()}
    kind = entry_type.lower()
    prose = {k: _decode(str(v)) for k, v in f.items() if k in _PROSE}
    record: dict[str, Any] = {"title": _line(prose.get("title", ""))}
    biblio: dict[str, Any] = {
        "type": TYPES.get(kind, "document"),
        "source_format": "bibtex",
        "source_type": kind,
    }
    kept: dict[str, str] = {}
    source: dict[str, Any] = {}
    if f.get("abstract"):
        record["abstract"] = _line(prose["abstract"])
    for role in ("author", "editor"):
        if f.get(role):
            people, others = _people(f[role])
            biblio[f"{role}s"] = people
            if others:
                source[f"{role}_others"] = True
    if biblio.get("authors"):
        record["authors"] = [_display(p) for p in biblio["authors"]]
    elif biblio.get("editors"):
        record["authors"] = [_display(p) for p in biblio["editors"]]
    year = _text(f.get("year", "")).strip()
    if re.fullmatch(r"\d{4}", year):
        record["year"] = year
    date = _text(f.get("date", ""))
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        record["date"] = date
    elif re.fullmatch(r"\d{4}(-\d{2})?", date):
        record.setdefault("year", date[:4])
        if len(date) == 7:
            kept["issued"] = date
    month_text = _text(f.get("month", "")).strip().lower()
    month = _MONTHS.get(month_text[:3]) or (int(month_text) if month_text.isdigit() else None)
    if month and 1 <= month <= 12 and "year" in record and "date" not in record:
        record["month"] = month
        kept["issued"] = f"{record['year']}-{month:02d}"
    venue = f.get("journal") or f.get("journaltitle") or f.get("booktitle")
    if venue:
        record["venue"] = _line(prose.get("journal") or prose.get("journaltitle") or prose["booktitle"])
    publisher = prose.get("publisher") or prose.get("institution") or prose.get("school")
    if publisher:
        kept["publisher"] = _line(publisher)
        if not venue and kind in ("book", "techreport", "report", "phdthesis", "mastersthesis", "thesis"):
            record["venue"] = kept["publisher"]
    for name in ("institution", "school"):  # the publisher above unless both are given
        if f.get(name) and prose.get(name) and _line(prose[name]) != kept.get("publisher"):
            source[name] = str(f[name])
    eprint = _text(f.get("eprint", ""))
    archive = _text(f.get("archiveprefix", "") or f.get("eprinttype", "")).lower()
    if eprint and archive in ("", "arxiv"):
        record["arxiv_id"] = eprint
    elif eprint:
        record[f"eprint_{archive}"] = eprint
    if eprint and archive:
        source["archiveprefix" if f.get("archiveprefix") else "eprinttype"] = _text(
            f.get("archiveprefix") or f.get("eprinttype")
        )
    category = f.get("primaryclass") or f.get("eprintclass")
    if category:
        record["categories"] = [_text(category)]
    if f.get("doi"):
        doi = _text(f["doi"])
        record["doi"] = doi
        if not doi.lower().startswith(("10.", "https://doi.org/10.", "http://dx.doi.org/10.", "doi:10.")):
            kept["DOI"] = doi  # a short DOI (10/abcd): no paper identity, but the record keeps it
    if f.get("url"):
        record["url"] = _text(f["url"])
        if "arxiv_id" not in record and "arxiv.org/abs/" in record["url"]:
            record["arxiv_id"] = record["url"]
    if f.get("keywords"):
        biblio["keywords"] = [k.strip() for k in re.split(r"[,;]", _line(prose["keywords"])) if k.strip()]
    if f.get("pages"):
        kept["page"] = re.sub(r"\s*-+\s*", "-", _text(f["pages"]))
    if f.get("number"):
        number_field = "issue" if kind in ("article", "periodical") else "number"
        if kind in ("book", "inbook", "incollection", "inproceedings", "proceedings") and f.get("series"):
            number_field = "collection-number"
        kept[number_field] = _text(f["number"])
    for name, variable in FIELDS.items():
        if not f.get(name) or variable in kept:
            continue
        if name in ("note", "annote"):
            kept[variable] = _decode_block(str(f[name]))
        elif name in _PROSE:
            kept[variable] = _line(prose[name])
        else:
            kept[variable] = _text(f[name])
    for name, value in f.items():
        if name not in _HANDLED and name not in FIELDS and name not in source:
            source[name] = str(value)
    raw_title = str(f.get("title", ""))
    if raw_title and raw_title != record["title"]:
        source["title"] = raw_title  # its case protection and math, for the .bib export
    biblio["fields"] = kept
    biblio["source_fields"] = source
    record["biblio"] = biblio
    record["citekey"] = key
    record["entry_type"] = kind
    return record


class ResolveStrings(LibraryMiddleware):
    """`@string` macros and `#` concatenation (`JdK # " and Williams"`) resolved to one value.

    bibtexparser's own middleware replaces a value that is a single macro; a concatenation
    would stay a literal `JdK # "...` that every export repeated. Unknown macros (the month
    names) stay as their names."""

    @classmethod
    def metadata_key(cls) -> str:
        return "triage_resolve_strings"

    def transform(self, library: Library) -> Library:
        strings: dict[str, str] = {}
        for block in library.strings:
            strings[block.key.lower()] = self.resolve(str(block.value), strings, braced=False)
            block.value = strings[block.key.lower()]
        for entry in library.entries:
            for field in entry.fields:
                if isinstance(field.value, str):
                    field.value = self.resolve(field.value, strings, braced=True)
        return library

    @staticmethod
    def resolve(value: str, strings: dict[str, str], braced: bool) -> str:
        parts = _concatenated(value)
        if parts is None:
            return value
        text = "".join(strings.get(p.lower(), p) if kind == "macro" else p for kind, p in parts)
        if braced and len(parts) == 1 and parts[0][0] == "literal":
            return value
        return "{" + text + "}" if braced else text


def _concatenated(value: str) -> list[tuple[str, str]] | None:
    """The parts of a raw field value (`{...}`, `"..."`, numbers and macros joined by `#`);
    None if it is not such a value."""
    parts: list[tuple[str, str]] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i].isspace():
            i += 1
        if i >= n:
            break
        ch = value[i]
        if ch in '{"':
            depth, j = 0, i if ch == "{" else i + 1
            while j < n:
                c = value[j]
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0 and ch == "{":
                        break
                elif c == '"' and depth == 0 and ch == '"':
                    break
                j += 1
            if j >= n:
                return None
            parts.append(("literal", value[i + 1 : j]))
            i = j + 1
        else:
            m = re.match(r"[^\s#{}\"]+", value[i:])
            if not m:
                return None
            token = m.group()
            parts.append(("literal" if token.isdigit() else "macro", token))
            i += len(token)
        while i < n and value[i].isspace():
            i += 1
        if i < n:
            if value[i] != "#":
                return None
            i += 1
    return parts or None


def parse_bibtex(path: Path, text: str) -> ParseResult:
    try:
        library = bibtexparser.parse_string(  # type: ignore[attr-defined]
            text, parse_stack=[ResolveStrings(), RemoveEnclosingMiddleware()]
        )
    except Exception as exc:  # bibtexparser raises assorted errors on damaged input
        raise InputError(f"not readable as BibTeX: {exc}", path=path) from None
    result = ParseResult()
    source = f"bibtex:{path.name}"
    for block in library.failed_blocks:
        result.records += 1
        line = getattr(block, "start_line", None)
        error = getattr(block, "error", None)
        reason = str(getattr(error, "abort_reason", "") or error or "").strip() or type(error).__name__
        result.errors.append(
            InputError(
                f"unreadable BibTeX entry: {reason}", path=path, line=line + 1 if line is not None else None
            )
        )
    for entry in library.entries:
        result.records += 1
        line = entry.start_line + 1 if entry.start_line is not None else None
        fields = {name: field.value for name, field in entry.fields_dict.items()}
        try:
            result.papers.append(
                record_to_paper(entry_to_record(fields, entry.key, entry.entry_type), source)
            )
        except RecordError as exc:
            result.errors.append(
                InputError(f"@{entry.entry_type}{{{entry.key}}}: {exc}", path=path, line=line)
            )
    return result
