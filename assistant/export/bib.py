"""BibTeX (read by BibTeX, biber, Zotero, JabRef): written with bibtexparser, escaped with pylatexenc.

Prose fields are LaTeX-encoded (`%`, `&`, `#`, `_`, `{`, `}`, `\\`, `$`, `~`, accents), words with
inner capitals are brace-protected (`{BERT}`), arXiv papers carry `eprint`/`archivePrefix`/
`primaryClass`, identifiers and links are written verbatim (biber reads them as verbatim fields).
The researcher's note goes to `annote`, which bibliography styles do not print.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import bibtexparser
from bibtexparser.library import Library
from bibtexparser.model import Entry, Field
from pylatexenc.latexencode import RULE_DICT, UnicodeToLatexConversionRule, UnicodeToLatexEncoder

from assistant.export.common import ExportContext, all_tags, one_line, split_name
from assistant.export.keys import citation_keys
from assistant.models import Paper, StoredPaper

# Characters with no LaTeX macro (CJK, ...) are kept as UTF-8, which biber and Zotero read.
logging.getLogger("pylatexenc.latexencode").setLevel(logging.ERROR)
_ENCODER = UnicodeToLatexEncoder(
    conversion_rules=[
        # A straight double quote stays one (pylatexenc would make it a closing curly quote);
        # a bar is a dash in LaTeX's default font encoding unless it is math.
        UnicodeToLatexConversionRule(
            rule_type=RULE_DICT, rule={ord('"'): '{"}', ord("|"): "\\ensuremath{|}"}
        ),
        "defaults",
    ],
    non_ascii_only=False,
    unknown_char_policy="keep",
)
_LIGATURE = re.compile(r"([-'`])(?=\1)")  # `--`, `''`, ``` `` ``` are dashes and quotes in TeX
_INNER_CAPITAL = re.compile(r"[^\W\d_][^\s-]*?[A-Z]")  # a capital after the first letter of a part
_CONFERENCE = re.compile(
    r"proceedings|conference|workshop|symposium|\b(ACL|EMNLP|NAACL|EACL|AACL|COLING|LREC|NeurIPS|NIPS|"
    r"ICML|ICLR|AAAI|IJCAI|CVPR|ICCV|ECCV|SIGIR|KDD|WWW|CHI|Interspeech|ICASSP)\b",
    re.IGNORECASE,
)
_ARXIV_CATEGORY = re.compile(r"^[a-z][a-z-]*(\.[A-Za-z-]+)?$")
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
# Entry types a paper imported from BibTeX keeps, with the field its venue goes to.
_VENUE_FIELD = {
    "article": "journal",
    "inproceedings": "booktitle",
    "incollection": "booktitle",
    "book": "publisher",
    "techreport": "institution",
    "phdthesis": "school",
    "mastersthesis": "school",
    "misc": "howpublished",
    "unpublished": "note",
}


def escape(text: str) -> str:
    """Unicode text as LaTeX that prints the same characters (and decodes back to them)."""
    return _LIGATURE.sub(r"\1{}", str(_ENCODER.unicode_to_latex(one_line(text))))


def escape_title(title: str) -> str:
    """Escaped, with words that have an inner capital (`BERT`, `LoRA`, `GPT-4`) kept from lowercasing."""
    words = one_line(title).split(" ")
    return " ".join(
        f"{{{escape(w)}}}"
        if any(_INNER_CAPITAL.match(part.lstrip("([`'\"")) for part in w.split("-"))
        else escape(w)
        for w in words
    )


def verbatim(value: str) -> str:
    """An identifier or URL: written as is, except what would unbalance the braces or the line."""
    return re.sub(r"[{}\\\s]", lambda m: f"%{ord(m.group()):02X}", value.strip())


def bib_name(name: str) -> str:
    """`Rens van de Schoot` -> `van de Schoot, Rens`; a name with ` and ` in it is kept whole."""
    if re.search(r"\band\b", name, re.IGNORECASE):
        return f"{{{escape(name)}}}"
    parts = split_name(name)
    last = escape(parts.last)
    if parts.suffix:
        return f"{last}, {escape(parts.suffix)}, {escape(parts.given)}"
    return f"{last}, {escape(parts.given)}" if parts.given else last


def entry_type(paper: Paper) -> tuple[str, str | None]:
    """The entry type and the field that holds the venue (None: no venue to write)."""
    venue = paper.venue
    if venue and re.fullmatch(r"(arxiv|arxiv\.org|corr|arxiv preprint.*)", venue.strip(), re.IGNORECASE):
        venue = None
    original = str(paper.extra.get("entry_type") or "").lower()
    if venue and original in _VENUE_FIELD:
        return original, _VENUE_FIELD[original]
    if venue:
        return ("inproceedings", "booktitle") if _CONFERENCE.search(venue) else ("article", "journal")
    return "misc", None


def primary_class(paper: Paper) -> str | None:
    return next((c for c in paper.categories if _ARXIV_CATEGORY.match(c) and "." in c), None)


def entry(item: StoredPaper, key: str) -> Entry:
    p = item.paper
    kind, venue_field = entry_type(p)
    fields: list[Field] = [Field("title", escape_title(p.title))]
    if p.authors:
        fields.append(Field("author", " and ".join(bib_name(a) for a in p.authors)))
    if p.year:
        fields.append(Field("year", str(p.year)))
        if p.date and re.match(r"^\d{4}-\d{2}", p.date) and 1 <= int(p.date[5:7]) <= 12:
            fields.append(Field("month", _MONTHS[int(p.date[5:7]) - 1], enclosing="no-enclosing"))
    if venue_field and p.venue:
        fields.append(Field(venue_field, escape(p.venue)))
    if p.arxiv_id:
        fields += [Field("eprint", verbatim(p.arxiv_id)), Field("archivePrefix", "arXiv")]
        category = primary_class(p)
        if category:
            fields.append(Field("primaryClass", category))
    if p.doi:
        fields.append(Field("doi", verbatim(p.doi)))
    url = p.url or p.link
    if url:
        fields.append(Field("url", verbatim(url)))
    if p.abstract:
        fields.append(Field("abstract", escape(p.abstract)))
    tags = all_tags(item)
    if tags:
        fields.append(Field("keywords", escape(", ".join(one_line(t).replace(",", " ") for t in tags))))
    if item.decision.note:
        fields.append(Field("annote", escape(item.decision.note)))
    return Entry(kind, key, fields)


def write(items: Sequence[StoredPaper], context: ExportContext) -> str:
    keys = citation_keys([i.paper for i in items])
    library = Library()
    for item in items:
        library.add(entry(item, keys[item.paper.id]))
    return str(bibtexparser.write_string(library))  # type: ignore[attr-defined]
