"""The data model: Paper, Assessment, Decision, and the stable paper id."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from pydantic import BaseModel, Field, field_validator

from assistant.status import Status as Status  # the decision status lives apart (see status.py)

_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_OLD = re.compile(r"(?<![\w-])([a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?\b")
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_DOI = re.compile(r"(10\.\d{4,9}/\S+)", re.IGNORECASE)
_LATEX_CMD = re.compile(r"\\[a-zA-Z]+\*?|\\.")


def now_utc() -> datetime:
    return datetime.now(UTC)


def normalize_arxiv_id(value: str | None) -> str | None:
    """`arXiv:2401.01234v2`, `https://arxiv.org/abs/2401.01234` -> `2401.01234`; None if none."""
    if not value:
        return None
    text = value.strip()
    doi = _ARXIV_DOI.match(text)
    if doi:
        text = doi.group(1)
    m = _ARXIV_NEW.search(text)
    if m:
        return m.group(1)
    m = _ARXIV_OLD.search(text)
    return m.group(1) if m else None


def is_arxiv_doi(doi: str | None) -> bool:
    """arXiv's own DOI for a preprint (10.48550/arXiv.ID): it names the preprint, not the paper
    a journal or conference publishes, which has a DOI of its own."""
    return bool(doi) and bool(_ARXIV_DOI.match(str(doi).strip()))


def normalize_doi(value: str | None) -> str | None:
    """Any DOI spelling (URL, `doi:` prefix, case) -> `10.xxxx/...` lowercased; None if none."""
    if not value:
        return None
    m = _DOI.search(value.strip())
    if not m:
        return None
    return m.group(1).rstrip(".,;").lower()


def canonical_id(text: str) -> str:
    """A paper id as a researcher may type or paste it -> the store's id: `2401.01234v2`,
    `arXiv:2401.01234`, an arXiv URL -> `arxiv:2401.01234`; a DOI in any spelling ->
    `doi:10.…` (arXiv's own DOI -> the arXiv id); a prefix in any case. Anything else is
    returned trimmed, as given."""
    value = text.strip()
    if "%" in value and "://" in value:  # a DOI URL copied percent-encoded (`10.5555%2FJFR...`)
        value = unquote(value)
    head, sep, rest = value.partition(":")
    if sep and head.lower() in ("arxiv", "doi", "title") and rest and not rest.startswith("//"):
        value = f"{head.lower()}:{rest.strip()}"
    if value.startswith("title:"):
        return value
    lowered = value.lower()
    doi = normalize_doi(value) if lowered.startswith(("doi:", "10.")) or "doi.org/" in lowered else None
    if doi and not is_arxiv_doi(doi):
        return f"doi:{doi}"
    named = lowered.startswith("arxiv") or "arxiv.org/" in lowered
    bare = _ARXIV_NEW.fullmatch(value) or _ARXIV_OLD.fullmatch(value)
    arxiv = normalize_arxiv_id(doi or value) if doi or named or bare else None
    return f"arxiv:{arxiv}" if arxiv else value


def normalize_title(title: str) -> str:
    """Case, accents, LaTeX, punctuation and whitespace folded away: the key for title matching."""
    text = _LATEX_CMD.sub(" ", title)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"[^\w\s]|_", " ", text.casefold())
    return " ".join(text.split())


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff\ufffe\uffff]")
_DOTLESS_ACCENTED = re.compile(r"([\u0131\u0237])([\u0300-\u036f])")
# Bidirectional embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI): a
# title holding them can display as other text than it is ("Trojan Source").
_BIDI_CONTROL = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
# The direction marks (LRM, RLM, ALM): needed only beside right-to-left letters.
_BIDI_MARK = re.compile(r"[\u200e\u200f\u061c]")
# Letters of the right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, NKo... and their forms).
_RIGHT_TO_LEFT = re.compile(
    r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\U00010800-\U00010fff\U0001e800-\U0001efff]"
)


def strip_bidi(value: str) -> str:
    """Text without bidirectional overrides, embeddings and isolates, which make text display
    as something else (U+202E turns what follows around); the direction marks (U+200E, U+200F,
    U+061C) stay only in text with right-to-left letters, where they place the punctuation."""
    text = _BIDI_CONTROL.sub("", value)
    if _BIDI_MARK.search(text) and not _RIGHT_TO_LEFT.search(text):
        text = _BIDI_MARK.sub("", text)
    return text


def clean_unicode(value: str) -> str:
    """Text without what a mojibake feed leaves in it: control characters (line breaks and tabs
    stay), bidirectional controls (`strip_bidi`), combining marks with no letter to sit on or
    stacked on one letter more than twice; a dotless i or j carrying an accent (a decoded
    `{\\'\\i}`) becomes the accented letter."""
    text = strip_bidi(_CONTROL.sub("", value))
    text = _DOTLESS_ACCENTED.sub(lambda m: {"\u0131": "i", "\u0237": "j"}[m.group(1)] + m.group(2), text)
    text = unicodedata.normalize("NFC", text)
    if not any(unicodedata.combining(ch) for ch in text):
        return text
    out: list[str] = []
    stacked = 0
    for ch in text:
        if unicodedata.combining(ch):
            base = out[-1 - stacked] if len(out) > stacked else ""
            repeated = ch in unicodedata.normalize("NFD", base) or (stacked and ch in out[-stacked:])
            if not base.isalpha() or stacked >= 2 or repeated:
                continue
            stacked += 1
        else:
            stacked = 0
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def clean_text(value: str) -> str:
    """Collapse runs of whitespace (titles and names must be one line); control characters,
    bidirectional overrides and stray combining marks dropped (`clean_unicode`)."""
    return " ".join(clean_unicode(unicodedata.normalize("NFKC", value)).split())


def clean_block(value: str) -> str:
    """Like `clean_text`, but line breaks stay (notes): spaces are collapsed within each line,
    and runs of blank lines become one."""
    lines = [
        " ".join(line.split()) for line in clean_unicode(unicodedata.normalize("NFKC", value)).splitlines()
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def paper_id_for(*, arxiv_id: str | None = None, doi: str | None = None, title: str = "") -> str:
    """The stable id: `arxiv:<id>` without version, else `doi:<lowercased>`, else a title hash."""
    arxiv = normalize_arxiv_id(arxiv_id) or normalize_arxiv_id(normalize_doi(doi))
    if arxiv:
        return f"arxiv:{arxiv}"
    norm_doi = normalize_doi(doi)
    if norm_doi:
        return f"doi:{norm_doi}"
    digest = hashlib.sha256(normalize_title(title).encode("utf-8")).hexdigest()[:16]
    return f"title:{digest}"


def variant_id(paper: Paper) -> str:
    """The id of a paper whose own id another work holds (a conference paper and its journal
    version share a title, and so a title hash): the title hash with a disambiguator made of what
    tells the two apart (citation key, year, item type). The same record always gets the same
    one, so a re-import finds the same papers again."""
    kind = (paper.biblio.type if paper.biblio else "") or str(paper.extra.get("entry_type") or "")
    tell = "|".join([*citekeys(paper), str(paper.year or ""), kind, paper.doi or "", paper.arxiv_id or ""])
    return f"{paper_id_for(title=paper.title)}-{hashlib.sha256(tell.encode('utf-8')).hexdigest()[:8]}"


def record_keys(paper: Paper) -> list[tuple[str, str]]:
    """The citation keys a paper had in the files it came from, with the file (source) of each:
    every record merged into it keeps its key (`extra["citekeys"]`, written once a second key
    joins); a record of one file has its `citekey` from its first source."""
    listed = paper.extra.get("citekeys")
    if isinstance(listed, list):
        pairs = [
            (str(p[0]), str(p[1])) for p in listed if isinstance(p, list | tuple) and len(p) == 2 and p[1]
        ]
        if pairs:
            return pairs
    key = str(paper.extra.get("citekey") or "")
    return [(paper.sources[0] if paper.sources else "", key)] if key else []


def citekeys(paper: Paper) -> list[str]:
    """The paper's citation keys, its own (`citekey`) first."""
    return list(dict.fromkeys(k for _, k in record_keys(paper)))


def _with_keys(paper: Paper, pairs: list[tuple[str, str]]) -> Paper:
    """The paper carrying these citation keys: listed in `extra["citekeys"]` only when its own
    `citekey` and first source do not already say them all (a record of one file stays as it came)."""
    bare = paper.model_copy(update={"extra": {k: v for k, v in paper.extra.items() if k != "citekeys"}})
    if not pairs or pairs == record_keys(bare):
        return bare
    extra = {"citekey": pairs[0][1], **bare.extra, "citekeys": [list(p) for p in pairs]}
    return paper.model_copy(update={"extra": extra})


_PARTICLES = frozenset(
    "van von der den de del della dei degli di da dal dos das do du la le les lo ter ten zu zur af av "
    "bin ibn al el st. saint".split()
)
_SUFFIX = re.compile(r"^(jr\.?|sr\.?|ii|iii|iv|v|vi|2nd|3rd)$", re.IGNORECASE)
_INITIALS = re.compile(r"^(?:[A-Z]\.?-?){1,4}$")
_ORGANISATION = re.compile(
    r"\b(collaboration|consortium|group|team|society|association|institute|university|committee|"
    r"council|court|agency|foundation|organi[sz]ation|project|network|initiative|centre|center|"
    r"ministry|department|office|board|commission|federation|union|alliance|panel|working|"
    r"corporation|inc\.?|ltd\.?|gmbh|llc)\b",
    re.IGNORECASE,
)


class Person(BaseModel):
    """A name in parts, as reference managers keep it: `{Portegies Zwart}, Simon` is family
    `Portegies Zwart`; `van de Schoot, Rens` has particle `van de`; `Thompson, F.R., III` has
    suffix `III`; an organisation (`{Planck Collaboration}`) is a `literal` and never split."""

    family: str = ""
    given: str = ""
    particle: str = ""  # a lower-case prefix kept with the family name (CSL non-dropping-particle)
    dropping_particle: str = ""  # CSL dropping-particle (`de` in Jean de La Fontaine, in some styles)
    suffix: str = ""
    literal: str = ""

    @property
    def display(self) -> str:
        """The name as people write it: `Rens van de Schoot`, `F.R. Thompson III`."""
        if self.literal:
            return self.literal
        words = [self.given, self.dropping_particle, self.particle, self.family, self.suffix]
        return " ".join(w for w in words if w)

    @property
    def last(self) -> str:
        """The family name with its particle, as it sorts in a citation key."""
        return self.literal or " ".join(w for w in (self.particle, self.family) if w)


def parse_name(name: str) -> Person:
    """A name written as one string, in parts: `First Last`, `Last, First`, `Last, First, Suffix`,
    `Last, Suffix, First` (BibTeX), `Nakashima S.` (family then initials, as Embase and PubMed
    write it). A name that reads as an organisation is kept whole as a literal; lower-case
    particles (`van de`) are a particle, capitalised ones (`Del Maestro`) part of the family name."""
    name = " ".join(name.split()).strip(" ,;")
    if not name:
        return Person()
    parts = [p.strip() for p in name.split(",")]
    if len(parts) == 1 and _ORGANISATION.search(name):
        return Person(literal=name)
    if len(parts) >= 2 and all(parts):
        suffix = ""
        if len(parts) >= 3 and _SUFFIX.match(parts[-1]):
            suffix = parts.pop()
        elif len(parts) >= 3 and _SUFFIX.match(parts[1]):
            suffix = parts.pop(1)
        elif len(parts) == 2 and _SUFFIX.match(parts[1]) and len(parts[0].split()) > 1:
            # `John Smith, Jr.`; but `Krane, V` (Web of Science, MEDLINE) is a family and an initial
            person = parse_name(parts[0])
            return person.model_copy(update={"suffix": parts[1]})
        if len(parts) == 2:
            words = parts[0].split()
            i = 0
            while i < len(words) - 1 and words[i] in _PARTICLES:
                i += 1
            return Person(
                family=" ".join(words[i:]), given=parts[1], particle=" ".join(words[:i]), suffix=suffix
            )
    words = name.split()
    suffix = ""
    if len(words) > 2 and _SUFFIX.match(words[-1]) and words[-1] not in ("V", "v"):
        suffix = words.pop()
    if len(words) == 1:
        return Person(family=words[0], suffix=suffix)
    if len(words) >= 2 and _INITIALS.match(words[-1]) and not _INITIALS.match(words[0]):
        # `Nakashima S.`, `Ng AY`: the family name comes first, the initials after it.
        cut = len(words) - 1
        while cut > 1 and _INITIALS.match(words[cut - 1]):
            cut -= 1
        lead = 0
        while lead < cut - 1 and words[lead] in _PARTICLES:
            lead += 1
        return Person(
            family=" ".join(words[lead:cut]),
            given=" ".join(words[cut:]),
            particle=" ".join(words[:lead]),
            suffix=suffix,
        )
    start = len(words) - 1
    while start > 1 and words[start - 1].casefold() in _PARTICLES:
        start -= 1
    lower = start
    while lower < len(words) - 1 and words[lower].islower():
        lower += 1
    return Person(
        given=" ".join(words[:start]),
        particle=" ".join(words[start:lower]),
        family=" ".join(words[lower:]),
        suffix=suffix,
    )


class Biblio(BaseModel):
    """What a reference manager's record says beyond the fields every paper has, kept so that an
    export gives it back: the item type, structured names, the source's own keywords and every
    other field (by its CSL-JSON variable name: `volume`, `issue`, `page`, `ISBN`, `publisher`,
    `publisher-place`, `collection-title`, `edition`, `note`, `title-short`, `accessed`...), and
    the fields no other format has a place for, as the source wrote them (`source_fields`)."""

    type: str = ""  # the CSL item type: article-journal, chapter, thesis, report, webpage...
    source_format: str = ""  # bibtex, ris or csl-json
    source_type: str = ""  # the type as the source spelled it: phdthesis, JOUR, webpage
    authors: list[Person] = Field(default_factory=list)
    editors: list[Person] = Field(default_factory=list)
    fields: dict[str, str] = Field(default_factory=dict)
    keywords: list[str] = Field(default_factory=list)
    source_fields: dict[str, Any] = Field(default_factory=dict)

    def merged_with(self, other: Biblio) -> Biblio:
        """This record, with what only `other` has filled in."""
        return Biblio(
            type=self.type or other.type,
            source_format=self.source_format or other.source_format,
            source_type=self.source_type or other.source_type,
            authors=self.authors or other.authors,
            editors=self.editors or other.editors,
            fields={**other.fields, **self.fields},
            keywords=list(dict.fromkeys([*self.keywords, *other.keywords])),
            source_fields={**other.source_fields, **self.source_fields},
        )


class Paper(BaseModel):
    """One paper, whatever source it came from."""

    id: str
    title: str
    abstract: str = ""
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    date: str | None = None
    venue: str | None = None
    categories: list[str] = Field(default_factory=list)
    arxiv_id: str | None = None
    doi: str | None = None
    url: str | None = None
    sources: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)
    # The reference manager's record (types, structured names, every other field); None for
    # papers from feeds and listings, and in stores made before it existed.
    biblio: Biblio | None = None

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str) -> str:
        value = clean_text(value)
        if not value:
            raise ValueError("title is empty")
        return value

    @classmethod
    def create(cls, **fields: Any) -> Paper:
        """Build a paper, normalising identifiers and deriving its stable id."""
        fields["arxiv_id"] = normalize_arxiv_id(fields.get("arxiv_id")) or normalize_arxiv_id(
            normalize_doi(fields.get("doi"))
        )
        fields["doi"] = normalize_doi(fields.get("doi"))
        fields["id"] = paper_id_for(
            arxiv_id=fields["arxiv_id"], doi=fields["doi"], title=str(fields.get("title") or "")
        )
        return cls(**fields)

    @property
    def document(self) -> str:
        """The text that is embedded and searched: title, blank line, abstract."""
        return f"{self.title}\n\n{self.abstract}" if self.abstract else self.title

    @property
    def day(self) -> int | None:
        """The paper's date as a sortable number, yyyymmdd (a year alone counts as its 1 January)."""
        if self.date and re.match(r"^\d{4}-\d{2}-\d{2}", self.date):
            return int(self.date[:10].replace("-", ""))
        if self.year:
            return self.year * 10000 + 101
        return None

    @property
    def people(self) -> list[Person]:
        """The authors in parts: the source's own structure where it still names the same
        people as `authors`, else each name parsed."""
        given = self.biblio.authors if self.biblio else []
        return [
            given[i] if i < len(given) and given[i].display == name else parse_name(name)
            for i, name in enumerate(self.authors)
        ]

    @property
    def link(self) -> str | None:
        if self.arxiv_id:
            return f"https://arxiv.org/abs/{self.arxiv_id}"
        if self.doi:
            return f"https://doi.org/{self.doi}"
        return self.url

    def merged_with(self, other: Paper) -> Paper:
        """Merge two records of the same paper: the richer field wins, lists are unioned."""

        def richer(a: str | None, b: str | None) -> str | None:
            if not a:
                return b
            if not b:
                return a
            return b if len(b) > len(a) else a

        def fuller(a: str, b: str) -> str:
            # The embedded text changes only for a clearly fuller version (a complete abstract
            # over a truncated one), not for punctuation or LaTeX spelled another way: a new
            # text means a new embedding and a stale assessment.
            return b if len(b) > 1.1 * len(a) + 10 else a

        def union(a: list[str], b: list[str]) -> list[str]:
            return list(dict.fromkeys([*a, *b]))

        # The published version's DOI names the paper; arXiv's DOI names its preprint, which
        # the arXiv id still gives (and is taken from that DOI if nothing else gave it).
        dois = sorted(filter(None, (self.doi, other.doi)), key=is_arxiv_doi)
        preprint = next((normalize_arxiv_id(d) for d in dois if is_arxiv_doi(d)), None)

        authors = other.authors if len(other.authors) > len(self.authors) else self.authors
        first, second = (other, self) if authors is other.authors else (self, other)
        biblio = first.biblio or second.biblio
        if first.biblio and second.biblio:
            biblio = first.biblio.merged_with(second.biblio)
        merged = Paper(
            id=self.id,
            title=fuller(self.title, other.title),
            abstract=fuller(self.abstract, other.abstract),
            authors=authors,
            year=self.year or other.year,
            date=richer(self.date, other.date),
            venue=richer(self.venue, other.venue),
            categories=union(self.categories, other.categories),
            arxiv_id=self.arxiv_id or other.arxiv_id or preprint,
            doi=dois[0] if dois else None,
            url=self.url or other.url,
            sources=union(self.sources, other.sources),
            extra={**other.extra, **self.extra},
            biblio=biblio,
        )
        # Every record's citation key stays (a document may cite the paper by any of them).
        keys = list(dict.fromkeys([*record_keys(self), *record_keys(other)]))
        return _with_keys(merged, keys) if keys or "citekeys" in merged.extra else merged


class TopicScore(BaseModel):
    """How relevant a paper is to one agenda topic."""

    topic: str
    score: int = Field(ge=0, le=10)
    reason: str = ""


class Assessment(BaseModel):
    """What an engine made of a paper against the agenda."""

    tags: list[str] = Field(default_factory=list)
    summary: str = ""
    topics: list[TopicScore] = Field(default_factory=list)
    relevance: float = 0.0
    engine: str
    model: str | None = None
    key: str = ""
    # The key without the calibration examples in it (set when there were examples): what
    # tells whether the assessment was made against another agenda, prompt or paper text.
    base_key: str = ""
    agenda_hash: str = ""
    created_at: datetime = Field(default_factory=now_utc)


class Decision(BaseModel):
    """What the researcher decided about a paper."""

    status: Status = Status.NEW
    starred: bool = False
    note: str = ""
    tags: list[str] = Field(default_factory=list)
    lists: list[str] = Field(default_factory=list)
    decided_at: datetime | None = None


class MergeEntry(BaseModel):
    """A record of another identity merged into a stored paper: how it was recognised, when,
    and the record as it came (so that it can be split off again)."""

    how: str
    at: datetime
    record: Paper


class MergeLog(BaseModel):
    """A paper's merged records, and the paper as it was before the first of them."""

    base: Paper
    entries: list[MergeEntry] = Field(default_factory=list)


class StoredPaper(BaseModel):
    """A paper as the store holds it, with the decision and the latest assessment."""

    paper: Paper
    decision: Decision = Field(default_factory=Decision)
    assessment: Assessment | None = None
    added_at: datetime | None = None
    failure: tuple[str, str] | None = None  # (cache key, reason) of the last failed assessment
