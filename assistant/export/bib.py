"""BibTeX (read by BibTeX, biber, Zotero, JabRef): written with bibtexparser, escaped by `latex`.

Two dialects of one entry:
- `bib` (for bibtex or biber, with pdflatex): non-ASCII letters as LaTeX accents that classic
  BibTeX handles (it counts bytes, so UTF-8 names break its sorting and initials) and biber
  decodes back to the same characters (`í` is `{\\'i}`);
- `biblatex` (for biber, with pdflatex, xelatex or lualatex): the same fields in UTF-8, which
  biber reads natively (it writes UTF-8 to the .bbl whichever way the .bib spelled a letter),
  with biblatex's types for web pages, data sets and software and the full `date`. A character
  pdflatex's utf8 input does not know with T1 fonts (Greek, math symbols: `λ`) is a LaTeX macro
  (`\\ensuremath{\\lambda}`) here too, so the file compiles with pdflatex as well.

Every field value is brace-balanced whatever the text, math (`$...$`) stays math, words with
inner capitals are brace-protected (`{BERT}`), and a title that came from a .bib is written as
its source spelled it (case protection, math) while it still reads the same. Entries keep the
source's type and fields (pages, volume, number, editor, series, address, ISBN, ISSN, edition,
month, note, shorttitle, urldate...), names keep their parts (`{Portegies Zwart}, Simon`,
`{Planck Collaboration}`, `Thompson, III, F. R.`), and an entry with neither author nor editor
gets a `key` to sort by. arXiv papers carry `eprint`/`archivePrefix`/`primaryClass`;
identifiers and links are written verbatim. The researcher's note goes to `annote`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import bibtexparser
from bibtexparser.library import Library
from bibtexparser.model import Entry, Field
from pylatexenc.latex2text import LatexNodes2Text

from assistant.export import latex
from assistant.export.common import (
    KEYWORD_SEPARATORS,
    ExportContext,
    authors,
    biblio_field,
    csl_type,
    editors,
    keywords,
    note_lines,
    one_line,
    venue,
)
from assistant.export.keys import assign_aliases, citation_keys
from assistant.models import Paper, Person, StoredPaper, citekeys, clean_text

_INNER_CAPITAL = re.compile(r"[^\W\d_][^\s-]*?[A-Z]")  # a capital after the first letter of a part
_ARXIV_CATEGORY = re.compile(r"^[a-z][a-z-]*(\.[A-Za-z-]+)?$")
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
# CSL item type -> BibTeX entry type (and the biblatex one where it has its own).
_TYPES = {
    "article-journal": "article",
    "article-magazine": "article",
    "article-newspaper": "article",
    "periodical": "article",
    "review": "article",
    "review-book": "article",
    "paper-conference": "inproceedings",
    "chapter": "incollection",
    "entry": "incollection",
    "entry-dictionary": "incollection",
    "entry-encyclopedia": "incollection",
    "book": "book",
    "report": "techreport",
    "thesis": "phdthesis",
    "manuscript": "unpublished",
    "pamphlet": "booklet",
}
_BIBLATEX_TYPES = {
    "webpage": "online",
    "post": "online",
    "post-weblog": "online",
    "dataset": "dataset",
    "software": "software",
    "patent": "patent",
}
# Entry types with a container: the field the venue goes to.
_VENUE_FIELD = {
    "article": "journal",
    "inproceedings": "booktitle",
    "conference": "booktitle",
    "incollection": "booktitle",
    "inbook": "booktitle",
}
# The field a publisher goes to, by entry type.
_PUBLISHER_FIELD = {
    "techreport": "institution",
    "report": "institution",
    "manual": "organization",
    "phdthesis": "school",
    "mastersthesis": "school",
    "thesis": "school",
}
# CSL variable -> BibTeX field, for plain values.
_FIELDS = {
    "volume": "volume",
    "collection-title": "series",
    "publisher-place": "address",
    "edition": "edition",
    "ISBN": "isbn",
    "ISSN": "issn",
    "title-short": "shorttitle",
    "accessed": "urldate",
    "genre": "type",
    "chapter-number": "chapter",
    "language": "language",
    "event-title": "eventtitle",
    "event-place": "venue",
    "number-of-pages": "pagetotal",
    "number-of-volumes": "volumes",
    "PMID": "pmid",
    "PMCID": "pmcid",
}
# Fields reference managers keep for themselves (no style prints them): written back as they came.
_BOOKKEEPING = frozenset(
    "file pdf timestamp owner groups mendeley-tags creationdate modificationdate added-at biburl "
    "bibsource interhash intrahash ranking readstatus priority qualityassured".split()
)
_DECODE = LatexNodes2Text(math_mode="verbatim")


# ISO 639-1 codes -> the language names biblatex localises (and prints as such otherwise).
_LANGUAGES = {
    "en": "english",
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "it": "italian",
    "nl": "dutch",
    "pt": "portuguese",
    "ru": "russian",
    "pl": "polish",
    "sv": "swedish",
    "da": "danish",
    "fi": "finnish",
    "nb": "norwegian",
    "no": "norwegian",
    "cs": "czech",
    "el": "greek",
    "tr": "turkish",
    "ja": "japanese",
    "zh": "chinese",
}
_LANGUAGE_CODE = re.compile(r"^([a-z]{2,3})(?:[-_][A-Za-z0-9]{2,8})*$")


def language(value: str) -> str:
    """A language as biblatex reads it: Zotero and RIS give codes (`en`, `en_AU`, `en-GB`), and
    an underscore in the field stops pdflatex inside biblatex's language lookup."""
    code = _LANGUAGE_CODE.match(value.strip())
    if code is None:
        return value
    return _LANGUAGES.get(code.group(1), value.strip().replace("_", "-"))


def escape(text: str, utf8: bool = False) -> str:
    """Unicode text as a brace-balanced LaTeX field value (see `latex.escape`), on one line."""
    return latex.escape(one_line(text), utf8=utf8)


def escape_title(title: str, utf8: bool = False) -> str:
    """Escaped, with words that have an inner capital (`BERT`, `LoRA`, `GPT-4`, `H$_2$O`) kept from
    lowercasing; a math span is one word, whatever spaces it holds."""
    out = []
    for word in latex.math_words(one_line(title)):
        shape = word
        for start, end in reversed(latex.math_spans(word)):
            shape = shape[:start] + "x" + shape[end:]
        escaped = escape(word, utf8)
        protect = any(_INNER_CAPITAL.match(part.lstrip("([`'\"")) for part in shape.split("-"))
        out.append(f"{{{escaped}}}" if protect else escaped)
    return " ".join(out)


def verbatim(value: str) -> str:
    """An identifier or URL: written as is, except what would unbalance the braces or the line."""
    return re.sub(r"[{}\\\s]", lambda m: f"%{ord(m.group()):02X}", value.strip())


def _part(text: str, utf8: bool) -> str:
    """A name part: escaped, and braced if BibTeX would split it or take it for a `von` part."""
    value = escape(text, utf8)
    if re.search(r",|\band\b", text, re.IGNORECASE) or (text[:1].islower() and text[:1].isalpha()):
        return f"{{{value}}}"
    return value


def bib_name(person: Person | str, utf8: bool = False) -> str:
    """`van de Schoot, Rens`, `{Portegies Zwart}, Simon`, `Thompson, III, F. R.`, `{Planck
    Collaboration}`: a name BibTeX and biber split into the same parts."""
    if isinstance(person, str):
        from assistant.models import parse_name

        person = parse_name(person)
    if person.literal or not person.family:
        return f"{{{escape(person.literal or person.display, utf8)}}}"
    family = escape(person.family, utf8)
    if " " in person.family or re.search(r",|\band\b", person.family, re.IGNORECASE):
        family = f"{{{family}}}"
    elif person.family[:1].islower():
        family = f"{{{family}}}"
    von = " ".join(escape(w, utf8) for w in (person.dropping_particle, person.particle) if w)
    last = f"{von} {family}".strip()
    given = " ".join(_part(w, utf8) for w in person.given.split())
    if person.suffix:
        return f"{last}, {_part(person.suffix, utf8)}, {given}"
    return f"{last}, {given}" if given else last


def entry_type(paper: Paper, dialect: str = "bib") -> tuple[str, str | None]:
    """The entry type and the field that holds the venue (None: no venue to write)."""
    biblio = paper.biblio
    original = str(paper.extra.get("entry_type") or "").lower()
    if biblio and biblio.source_format == "bibtex" and biblio.source_type:
        kind = biblio.source_type
    elif biblio is None and original and (original not in _VENUE_FIELD or venue(paper)):
        kind = original
    else:
        ctype = csl_type(paper)
        kind = (_BIBLATEX_TYPES.get(ctype) if dialect == "biblatex" else None) or _TYPES.get(ctype, "misc")
        if kind == "phdthesis" and re.search(r"master", biblio_field(paper, "genre") or "", re.IGNORECASE):
            kind = "mastersthesis"
        if kind == "unpublished" and not (biblio_field(paper, "note")):
            kind = "misc"
    if kind in _VENUE_FIELD:
        return kind, _VENUE_FIELD[kind] if venue(paper) else None
    if kind == "misc" and venue(paper) and not (paper.biblio and paper.biblio.fields.get("publisher")):
        return kind, "howpublished"
    return kind, None


def primary_class(paper: Paper) -> str | None:
    return next((c for c in paper.categories if _ARXIV_CATEGORY.match(c) and "." in c), None)


def _source_title(paper: Paper, utf8: bool) -> str | None:
    """The title as the source .bib spelled it, if it still reads as the paper's title and is
    safe to write back: for classic BibTeX (not `utf8`), only in ASCII; for biber, only in the
    UTF-8 pdflatex knows, since a source written in UTF-8 (`Ελληνικά`, `λ`) would stop pdflatex
    where the escaped title compiles."""
    raw = paper.biblio.source_fields.get("title") if paper.biblio else None
    if not isinstance(raw, str) or not (raw.isascii() or (utf8 and latex.pdflatex_utf8(raw))):
        return None
    raw = latex.dotted_i(raw)
    if not latex.safe_raw(raw):
        return None
    try:
        decoded = clean_text(str(_DECODE.latex_to_text(raw)))
    except Exception:  # pylatexenc gives up on some damaged input
        return None
    return raw if decoded == paper.title else None


def _date_fields(paper: Paper, dialect: str) -> list[Field]:
    out: list[Field] = []
    issued = biblio_field(paper, "issued") or ""
    month = None
    if paper.date and re.match(r"^\d{4}-\d{2}", paper.date):
        month = int(paper.date[5:7])
    elif re.match(r"^\d{4}-\d{2}$", issued):
        month = int(issued[5:7])
    if paper.year:
        out.append(Field("year", str(paper.year)))
        if month and 1 <= month <= 12:
            out.append(Field("month", _MONTHS[month - 1], enclosing="no-enclosing"))
        if dialect == "biblatex" and paper.date and re.fullmatch(r"\d{4}-\d{2}-\d{2}", paper.date):
            out.append(Field("date", paper.date))
    return out


def _pages(value: str, utf8: bool) -> str:
    """`12-19`, `12–19` -> `12--19` (a range is an en dash in TeX); each side escaped."""
    return "--".join(escape(part, utf8) for part in re.split(r"\s*[-‐‑‒–—]+\s*", value.strip()))


def entry(item: StoredPaper, key: str, dialect: str = "bib", aliases: Sequence[str] = ()) -> Entry:
    p = item.paper
    utf8 = dialect == "biblatex"
    kind, venue_field = entry_type(p, dialect)
    biblio = p.biblio
    source = biblio.source_fields if biblio and biblio.source_format == "bibtex" else {}
    title = _source_title(p, utf8)
    fields: list[Field] = [Field("title", title if title is not None else escape_title(p.title, utf8))]
    people = authors(p)
    if people:
        names = " and ".join(bib_name(n, utf8) for n in people)
        fields.append(Field("author", names + (" and others" if source.get("author_others") else "")))
    eds = editors(p)
    if eds:
        names = " and ".join(bib_name(n, utf8) for n in eds)
        fields.append(Field("editor", names + (" and others" if source.get("editor_others") else "")))
    fields += _date_fields(p, dialect)
    place = venue(p)
    publisher = biblio_field(p, "publisher")
    if venue_field and place:
        fields.append(Field(venue_field, escape(place, utf8)))
    elif place and not publisher and kind in (*_PUBLISHER_FIELD, "book", "proceedings", "booklet"):
        publisher = place
    if publisher:
        fields.append(Field(_PUBLISHER_FIELD.get(kind, "publisher"), escape(publisher, utf8)))
    for name in ("institution", "school"):  # a second one the publisher field did not take
        if isinstance(source.get(name), str) and name != _PUBLISHER_FIELD.get(kind):
            fields.append(Field(name, _raw(source[name], utf8)))
    number = biblio_field(p, "issue") or biblio_field(p, "number") or biblio_field(p, "collection-number")
    if number:
        fields.append(Field("number", escape(number, utf8)))
    page = biblio_field(p, "page")
    if page:
        fields.append(Field("pages", _pages(page, utf8)))
    for variable, name in _FIELDS.items():
        value = biblio_field(p, variable)
        if value and name == "language":
            value = language(value)
        if value and not any(f.key == name for f in fields):
            fields.append(Field(name, escape(value, utf8)))
    note = biblio_field(p, "note")
    if note:
        fields.append(Field("note", _block(note, utf8)))
    if p.arxiv_id:
        fields += [Field("eprint", verbatim(p.arxiv_id)), Field("archivePrefix", "arXiv")]
        category = primary_class(p)
        if category:
            fields.append(Field("primaryClass", category))
    else:
        other = next((str(v) for k, v in p.extra.items() if k.startswith("eprint_") and v), None)
        archive = source.get("eprinttype") or source.get("archiveprefix")
        if other and archive:
            fields += [Field("eprint", verbatim(other)), Field("eprinttype", verbatim(str(archive)))]
    doi = p.doi or biblio_field(p, "DOI")
    if doi:
        fields.append(Field("doi", verbatim(doi)))
    url = p.url or p.link
    if url:
        fields.append(Field("url", verbatim(url)))
    if p.abstract:
        fields.append(Field("abstract", escape(p.abstract, utf8)))
    words = keywords(item, KEYWORD_SEPARATORS)
    if words:
        fields.append(Field("keywords", escape(", ".join(words), utf8)))
    notes = [str(source[n]) for n in ("annote", "annotation") if isinstance(source.get(n), str)]
    annote = "\n\n".join(
        [*(_decode_raw(n) for n in notes), *([item.decision.note] if item.decision.note else [])]
    )
    if annote:
        fields.append(Field("annote", _block(annote, utf8)))
    if not people:
        fields.append(Field("key", escape(_sort_key(p, eds), utf8)))
    if aliases:  # biblatex's other keys of the entry (classic BibTeX ignores the field)
        fields.append(Field("ids", ", ".join(aliases)))
    written = {f.key.lower() for f in fields}
    for name, value in source.items():
        if (
            isinstance(value, str)
            and name not in written
            and name not in ("title", "annote", "annotation", "key", "eprinttype", "archiveprefix", "ids")
        ):
            fields.append(Field(name, _raw(value, utf8, bookkeeping=name in _BOOKKEEPING)))
    return Entry(kind, key, fields)


def _decode_raw(raw: str) -> str:
    try:
        return str(_DECODE.latex_to_text(raw))
    except Exception:  # pylatexenc gives up on some damaged input
        return raw


def _raw(value: str, utf8: bool, bookkeeping: bool = False) -> str:
    """A field as the source .bib wrote it, if that is safe to write back (and printed, in
    characters pdflatex knows); else its text."""
    value = latex.dotted_i(value)
    printable = latex.safe_raw(value) and latex.pdflatex_utf8(value)
    if latex.balanced(value) and "\n\n" not in value and (bookkeeping or printable):
        return value
    return escape(_decode_raw(value), utf8)


def _block(text: str, utf8: bool) -> str:
    """A note: escaped line by line, its line breaks kept (each paragraph balanced on its own)."""
    return "\n".join(latex.escape(line, utf8=utf8) for line in note_lines(text).split("\n"))


def _sort_key(paper: Paper, eds: list[Person]) -> str:
    """What BibTeX sorts and labels an entry without an author by: its first editor's family
    name, else the first words of its title."""
    if eds:
        return eds[0].last or eds[0].display
    words = [w for w in re.split(r"\s+", paper.title) if w]
    return " ".join(words[:3])


def alias_candidates(paper: Paper) -> list[str]:
    """The keys a paper may also be cited by: its records' keys, the source's own `ids`."""
    source = paper.biblio.source_fields.get("ids") if paper.biblio else None
    given = [k.strip() for k in source.split(",")] if isinstance(source, str) else []
    return [*citekeys(paper), *given]


def aliases(items: Sequence[StoredPaper], keys: dict[str, str]) -> dict[str, list[str]]:
    """Paper id -> its other citation keys (records merged into it, the source's own `ids`):
    written as `ids` so that a document citing a merged record's key still finds the paper.
    A key that is another entry's key, or another entry's alias already, is left out."""
    return assign_aliases([(i.paper.id, alias_candidates(i.paper)) for i in items], keys)


def render(items: Sequence[StoredPaper], dialect: str) -> str:
    keys = citation_keys([i.paper for i in items])
    other = aliases(items, keys)
    return write_entries(
        [entry(item, keys[item.paper.id], dialect, other.get(item.paper.id, ())) for item in items]
    )


def write_entries(entries: Sequence[Entry]) -> str:
    """The entries as a .bib file, as bibtexparser writes them: each entry on its own (the
    writer's default format puts nothing between them but a blank line), so that an entry
    written alone is the same text as in a file (`assistant.export.bibcache` keeps them)."""
    library = Library()
    library.add(list(entries))
    # The library is written once and dropped: its blocks may be enclosed in place (the default
    # stack deep-copies every entry first, which at 10,000 entries costs more than writing them).
    stack = bibtexparser.middlewares.default_unparse_stack(allow_inplace_modification=True)
    return str(bibtexparser.write_string(library, unparse_stack=stack))  # type: ignore[attr-defined]


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    """BibTeX in ASCII, for bibtex or biber with pdflatex."""
    return render(items, "bib")


def write_biblatex(items: Sequence[StoredPaper], context: ExportContext) -> str:
    """biblatex in UTF-8, for biber with pdflatex, xelatex or lualatex."""
    return render(items, "biblatex")
