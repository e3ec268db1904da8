"""BibTeX / BibLaTeX (bibtexparser v2): LaTeX to Unicode, arXiv eprints and DOIs recognised.

Every field of an entry is kept: the common ones on the paper, the rest in its `biblio` record
by CSL variable name (`pages` -> `page`, `address` -> `publisher-place`, `series` ->
`collection-title`...), names split the way BibTeX splits them (bibtexparser's name
middlewares), fields with no CSL counterpart as the source wrote them, and the title's LaTeX
too (its case protection and math), so that a .bib export gives the entry back.

A hostile file costs bounded time and memory: `@string` expansion is capped per value and per
file (`limits.EXPANDED`, `EXPANDED_FILE`), as is macro expansion (bibmacros.Budget); a field far
beyond its cap is cut before it is decoded, and one nesting braces deeper than `limits.NESTING`
costs its entry (a skipped line), never minutes of decoding.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bibtexparser
from bibtexparser.library import Library
from bibtexparser.middlewares import RemoveEnclosingMiddleware
from bibtexparser.middlewares.names import parse_single_name_into_parts, split_multiple_persons_names
from bibtexparser.model import DuplicateBlockKeyBlock, DuplicateFieldKeyBlock, Entry, Field
from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db
from pylatexenc.latexwalker import get_default_latex_context_db as get_default_parsing_context_db

from assistant.errors import InputError, in_words
from assistant.ingest import limits
from assistant.ingest.base import ParseResult
from assistant.ingest.bibinherit import Entries
from assistant.ingest.bibmacros import BUILTIN, SILENT, Budget, Macro, expand, looping, preamble_macros
from assistant.ingest.bibstrings import ResolveStrings, concatenated, entry_label, line_of
from assistant.ingest.bibtypes import FIELDS, TYPES
from assistant.ingest.records import RecordError, record_to_paper

# Damaged entries are reported by us, with file and line; the library's own log would repeat them.
logging.getLogger("bibtexparser").setLevel(logging.CRITICAL)
_BRACES = re.compile(r"[{}]")
_UNESCAPED_BRACES = re.compile(r"(?<!\\)[{}]")


_KEEP_ARGUMENT = ("texttt", "textsf", "textup", "textmd", "mbox")


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
            # The parser reads these with their argument; the default decoder drops both.
            *(MacroTextSpec(name, discard=False) for name in _KEEP_ARGUMENT),
        ],
    )
    return db


_LATEX = LatexNodes2Text(math_mode="verbatim", latex_context=_latex_context())
# Macros the decoder reads (the rest are expanded first, or shown as written: bibmacros).
_KNOWN = frozenset(
    {spec.macroname for spec in _LATEX.latex_context.iter_macro_specs()}
    | {spec.macroname for spec in get_default_parsing_context_db().iter_macro_specs()}
    | SILENT
)
# Fields that are prose (decoded from LaTeX); identifiers and URLs are kept verbatim.
_PROSE = frozenset(
    "title abstract journal journaltitle booktitle publisher keywords series address location "
    "institution school organization note edition type howpublished shorttitle eventtitle venue "
    "language langid chapter annote annotation addendum subtitle titleaddon".split()
)
_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
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


def _decode(value: str, macros: Mapping[str, Macro] = BUILTIN, budget: Budget | None = None) -> str:
    """A field's LaTeX as text: `macros` (a file's own, the journal macros) expanded within
    `budget`, other macros the decoder does not know left visible, never dropped with their
    arguments glued."""
    # Escaped specials (\% \& ...) are the common case in abstracts; the full LaTeX decoder is
    # slow (milliseconds a field), so it only sees text that still has markup after them.
    if not _LATEX_MARKUP.search(_ESCAPED.sub("", value)):
        return _ESCAPED.sub(r"\1", _UNESCAPED_BRACES.sub("", value))
    if "\\" in value:
        value = expand(value, macros, _KNOWN, budget=budget)
    try:
        return str(_LATEX.latex_to_text(value))
    except Exception:  # pylatexenc gives up on some damaged input; keep the raw text then
        return value


def _decode_block(value: str, macros: Mapping[str, Macro] = BUILTIN, budget: Budget | None = None) -> str:
    """A decoded prose field whose line breaks matter (a note): each paragraph decoded."""
    return "\n\n".join(_decode(p, macros, budget) for p in re.split(r"\n\s*\n", value.strip()))


# An accent command outside braces (`Espa\~na`, `Mu\~{n}oz`, `Ng\^{e}n`): BibTeX's name
# splitting reads its `~` as a tie (a space) and its letter as another word.
_BARE_ACCENT = re.compile(r"(?<!\{)(\\[`'^\"~=.])\s*(\{\\?[A-Za-z]\}|\\[ij](?![A-Za-z]) ?|[A-Za-z])")


def person(
    raw: str, macros: Mapping[str, Macro] = BUILTIN, budget: Budget | None = None
) -> dict[str, str] | None:
    """One BibTeX name in parts (bibtexparser splits it as BibTeX does); None for `others`."""
    if raw.strip().lower() == "others":
        return None
    budget = (Budget() if budget is None else budget).for_field(limits.read_limit(limits.NAME))
    raw = _BARE_ACCENT.sub(lambda m: "{" + m.group(1) + m.group(2) + "}", raw)
    try:
        parts = parse_single_name_into_parts(raw, strict=False)
    except Exception:  # a name bibtexparser cannot split: keep it whole
        return {"literal": _line(_decode(raw, macros, budget))}
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
        return {"literal": _line(_decode(parts.last[0], macros, budget))}
    if not words:
        return None
    out = {
        "given": _line(_decode(" ".join(parts.first), macros, budget)),
        "particle": _line(_decode(" ".join(parts.von), macros, budget)),
        "family": _line(_decode(" ".join(parts.last), macros, budget)),
        "suffix": _line(_decode(" ".join(parts.jr), macros, budget)),
    }
    return {k: v for k, v in out.items() if v}


def _people(
    value: Any, macros: Mapping[str, Macro] = BUILTIN, budget: Budget | None = None
) -> tuple[list[dict[str, str]], bool]:
    """(the names of a name field, whether it ended in `and others`: as it does when it names
    more than the store keeps, `limits.AUTHORS`, which are the ones read)."""
    names = value if isinstance(value, list) else split_multiple_persons_names(str(value))
    people = [person(n, macros, budget) for n in names[: limits.AUTHORS] if n.strip()]
    return [p for p in people if p], len(names) > limits.AUTHORS or any(p is None for p in people)


def _display(p: dict[str, str]) -> str:
    return p.get("literal") or " ".join(p[k] for k in ("given", "particle", "family", "suffix") if p.get(k))


# How much of a field is read (the rest is cut unread): a few times what the store keeps of it.
_READ = {
    "title": limits.read_limit(limits.TITLE),
    **dict.fromkeys(("abstract", "note", "annote"), limits.read_limit(limits.ABSTRACT)),
    **dict.fromkeys(("author", "editor"), limits.read_limit(limits.AUTHORS * 20)),
    "keywords": limits.read_limit(limits.CATEGORIES * limits.CATEGORY),
    **dict.fromkeys(
        _PROSE - {"title", "abstract", "note", "annote", "keywords"}, limits.read_limit(limits.SHORT_FIELD)
    ),
}
# The paper's own fields, cut to their cap at once when their source is cut.
_PAPER_CAPS = {"title": limits.TITLE, "abstract": limits.ABSTRACT}


def _nesting(value: str) -> int:
    """How deep the braces of a field nest (escaped braces are text)."""
    if value.count("{") <= limits.NESTING:
        return value.count("{")
    depth = deepest = 0
    for m in _UNESCAPED_BRACES.finditer(value):
        depth = depth + 1 if m.group() == "{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


def _bounded(fields: dict[str, Any], notes: list[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """The fields (names lower case) each within what is read of it, and the sizes of those cut;
    a field that nests braces deeper than the decoder reads costs the entry (RecordError)."""
    out: dict[str, Any] = {}
    cut: dict[str, int] = {}
    for name, value in fields.items():
        name = name.lower()
        if isinstance(value, str):
            most = _READ.get(name, limits.RECORD)
            if len(value) > most:
                cut[name] = len(value)
                value = value[:most]
                if name not in _PAPER_CAPS:
                    notes.append(f"{limits.cut_note(repr(name), cut[name], most)} before it was read")
            depth = _nesting(value)
            if depth > limits.NESTING:
                raise RecordError(
                    f"'{name}' nests braces {depth:,} deep, more than the {limits.NESTING} levels "
                    "that are read: the entry is skipped"
                )
        out[name] = value
    return out, cut


def _prose(
    fields: dict[str, Any], macros: Mapping[str, Macro], budget: Budget, notes: list[str]
) -> dict[str, str]:
    """The prose fields decoded, macro expansion within each one's budget (with a note if not)."""
    prose: dict[str, str] = {}
    for name, value in fields.items():
        if name not in _PROSE:
            continue
        budget.for_field(_READ[name])
        prose[name] = _decode(str(value), macros, budget)
        if budget.looped:
            shown = ", ".join(f"\\{m}" for m in sorted(budget.looped))
            notes.append(f"'{name}': the macro {shown} is defined by itself: shown as written")
        if budget.over:
            notes.append(
                f"'{name}': its macros expand beyond {_READ[name]:,} characters (or the file's "
                f"{limits.EXPANDED_FILE:,} in all): the rest is read as written"
            )
    return prose


def entry_to_record(
    fields: dict[str, Any],
    key: str,
    entry_type: str,
    macros: Mapping[str, Macro] = BUILTIN,
    notes: list[str] | None = None,
    budget: Budget | None = None,
) -> dict[str, Any]:
    """One entry's fields as a record; `macros` are the LaTeX macros its file defines (with the
    journal macros), expanded in prose fields and names within `budget` (the file's). What was
    cut on the way is said in `notes`."""
    notes = [] if notes is None else notes
    budget = Budget() if budget is None else budget
    f, cut = _bounded(fields, notes)
    kind = entry_type.lower()
    prose = _prose(f, macros, budget, notes)
    for name, cap in _PAPER_CAPS.items():
        if name in cut:
            notes.append(limits.cut_note(name, cut[name], cap))
            prose[name] = limits.cut(_line(prose[name]), cap)
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
            people, others = _people(f[role], macros, budget)
            if len(people) == limits.AUTHORS and others:
                notes.append(f"'{role}': the first {limits.AUTHORS:,} names kept, and others")
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
    month = _MONTHS.get(month_text[:3]) or (
        int(month_text) if re.fullmatch(r"[0-9]{1,2}", month_text) else None
    )
    if month and 1 <= month <= 12 and "year" in record and "date" not in record:
        record["month"] = month
        kept["issued"] = f"{record['year']}-{month:02d}"
    # The first venue field with text once decoded (a macro-only field may decode to nothing).
    venues = (_line(prose.get(name, "")) for name in ("journal", "journaltitle", "booktitle"))
    venue = next((v for v in venues if v), "")
    if venue:
        record["venue"] = venue
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
            kept[variable] = _decode_block(str(f[name]), macros, budget.for_field(_READ[name]))
        elif name in _PROSE:
            kept[variable] = _line(prose[name])
        else:
            kept[variable] = _text(f[name])
    for name, value in f.items():
        if name not in _HANDLED and name not in FIELDS and name not in source:
            source[name] = str(value)
    raw_title = str(f.get("title", ""))
    if raw_title and raw_title != record["title"] and "title" not in cut:
        source["title"] = raw_title  # its case protection and math, for the .bib export
    biblio["fields"] = kept
    biblio["source_fields"] = source
    record["biblio"] = biblio
    record["citekey"] = key
    record["entry_type"] = kind
    return record


def _recovered(block: Any, resolver: ResolveStrings, notes: list[str]) -> Entry | None:
    """The entry of a block bibtexparser refused for a repeated key or field (BibTeX reads
    both: a repeated field keeps its first value), with the file's @strings applied."""
    if not isinstance(block, DuplicateBlockKeyBlock | DuplicateFieldKeyBlock):
        return None
    entry = block.ignore_error_block
    if not isinstance(entry, Entry):
        return None
    if isinstance(block, DuplicateBlockKeyBlock):
        notes.append(f"{entry_label(entry)}: an earlier entry has the same key: both are imported")
    first: dict[str, Field] = {}
    for field in entry.fields:
        if field.key.lower() in first:
            kept = first[field.key.lower()]
            notes.append(
                f"{entry_label(entry)}: '{field.key}' is given twice ({_text(kept.value)!r} and "
                f"{_text(field.value)!r}): the first is kept, as BibTeX does"
            )
            continue
        first[field.key.lower()] = field
        if isinstance(field.value, str):
            what = ("field", field.key, entry)
            field.value = resolver.resolve(field.value, resolver.strings, braced=True, what=what)
    recovered = Entry(entry.entry_type, entry.key, list(first.values()), entry.start_line, entry.raw)
    return RemoveEnclosingMiddleware().transform_entry(recovered, Library())


def parse_bibtex(path: Path, text: str) -> ParseResult:
    budget = Budget()  # the file's expansion, @strings and macros together
    resolver = ResolveStrings(budget)
    try:
        library = bibtexparser.parse_string(  # type: ignore[attr-defined]
            text, parse_stack=[resolver, RemoveEnclosingMiddleware()]
        )
    except Exception as exc:  # bibtexparser raises assorted errors on damaged input
        raise InputError(f"not readable as BibTeX: {exc}", path=path) from None
    result = ParseResult()
    source = f"bibtex:{path.name}"
    macros: dict[str, Macro] = dict(BUILTIN)
    defined: dict[str, int | None] = {}  # the line of the @preamble that defined each macro
    for preamble in library.preambles:
        parts = concatenated(str(preamble.value))
        found = preamble_macros("".join(p for _, p in parts) if parts else str(preamble.value))
        macros.update(found)
        defined.update(dict.fromkeys(found, line_of(preamble)))
    budget.shown = frozenset(looping(macros))
    for name in sorted(budget.shown):
        del macros[name]
        where = InputError("", path=path, line=defined.get(name)).location_text()
        result.notes.append(
            f"{where}the @preamble macro \\{name} expands into itself (LaTeX would never finish): "
            "it is shown as written"
        )
    entries = list(library.entries)
    for block in library.failed_blocks:
        notes: list[str] = []
        entry = _recovered(block, resolver, notes)
        if entry is not None:
            entries.append(entry)
            where = InputError("", path=path, line=line_of(block)).location_text()
            result.notes.extend(f"{where}{note}" for note in notes)
            continue
        result.records += 1
        error = getattr(block, "error", None)
        reason = str(getattr(error, "abort_reason", "") or error or "").strip() or "its syntax is damaged"
        result.errors.append(InputError(f"unreadable BibTeX entry: {reason}", path=path, line=line_of(block)))
    for line, note in resolver.notes:
        result.notes.append(f"{InputError('', path=path, line=line).location_text()}{note}")
    entries.sort(key=lambda e: e.start_line if e.start_line is not None else -1)
    resolved = Entries(entries)
    for i, entry in enumerate(entries):
        if entry.entry_type.lower() in ("set", "xdata"):
            continue  # biblatex groups and shared data: not papers (their members are)
        result.records += 1
        line = line_of(entry)
        notes = []
        try:
            fields = resolved.fields(i)
            record = entry_to_record(fields, entry.key, entry.entry_type, macros, notes, budget)
            result.papers.append(record_to_paper(record, source, notes))
        except RecordError as exc:
            result.errors.append(InputError(f"{entry_label(entry)}: {exc}", path=path, line=line))
        except Exception as exc:  # one entry's surprise costs that entry, not the file
            result.errors.append(
                InputError(
                    f"{entry_label(entry)}: could not be read: {in_words(exc)}; "
                    "the other entries were imported",
                    path=path,
                    line=line,
                )
            )
            continue
        where = InputError("", path=path, line=line).location_text()
        result.notes.extend(f"{where}{entry_label(entry)}: {note}" for note in notes)
    return result
