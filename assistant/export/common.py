"""What the export formats share: the context of an export, names, links, tags and topic groups."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from urllib.parse import urlparse

from assistant.agenda import NOT_INTERESTED, Agenda
from assistant.models import Decision, Paper, Person, StoredPaper, TopicScore, now_utc, parse_name
from assistant.triage.keys import OFFLINE_ENGINE

OTHER_GROUP = "Other papers"
UNASSESSED_GROUP = "Not assessed"


@dataclass(frozen=True)
class ExportContext:
    """Everything about an export that is not a paper: its title, the agenda, the lists."""

    title: str = "Papers"
    description: str = ""
    agenda: Agenda | None = None
    lists: Mapping[str, str] = field(default_factory=dict)  # every reading list: name -> description
    selection: str = "all papers"
    topic: str | None = None  # the papers were selected for this topic: file them all under it
    generated_at: datetime = field(default_factory=now_utc)
    # A store several people use (the jsonl export): who exports, every other person's decision
    # per paper id ({paper id: {person: decision}}) and their reading lists' descriptions.
    person: str | None = None
    others: Mapping[str, Mapping[str, Decision]] = field(default_factory=dict)
    others_lists: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The shared reading lists: per paper id, each one it is in and who added it; and each
    # one's description and maker.
    shared: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    shared_lists: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)


def split_name(name: str) -> Person:
    """A `First Last` (or `Last, First`) name in parts; an organisation stays whole."""
    return parse_name(name)


# Item types whose venue is a container (journal, proceedings, book, website) in CSL.
CONTAINER_TYPES = frozenset(
    "article-journal article-magazine article-newspaper paper-conference chapter entry "
    "entry-dictionary entry-encyclopedia webpage post post-weblog review review-book broadcast".split()
)
_CONFERENCE = re.compile(
    r"proceedings|conference|workshop|symposium|\b(ACL|EMNLP|NAACL|EACL|AACL|COLING|LREC|NeurIPS|NIPS|"
    r"ICML|ICLR|AAAI|IJCAI|CVPR|ICCV|ECCV|SIGIR|KDD|WWW|CHI|Interspeech|ICASSP)\b",
    re.IGNORECASE,
)
_PREPRINT_VENUE = re.compile(r"(arxiv|arxiv\.org|corr|arxiv preprint.*)", re.IGNORECASE)
_LEGACY_TYPES = {  # what stores made before `biblio` kept of the source's type, in `extra`
    "article": "article-journal",
    "inproceedings": "paper-conference",
    "incollection": "chapter",
    "book": "book",
    "techreport": "report",
    "phdthesis": "thesis",
    "mastersthesis": "thesis",
    "JOUR": "article-journal",
    "CPAPER": "paper-conference",
    "CONF": "paper-conference",
    "CHAP": "chapter",
    "BOOK": "book",
    "THES": "thesis",
    "RPRT": "report",
}


def venue(paper: Paper) -> str | None:
    """The paper's venue, unless it only says "arXiv" (a preprint has no venue)."""
    if paper.venue and _PREPRINT_VENUE.fullmatch(paper.venue.strip()):
        return None
    return paper.venue


def csl_type(paper: Paper) -> str:
    """The paper's item type in CSL's terms: the source's own type, else guessed from the venue."""
    if paper.biblio and paper.biblio.type:
        return paper.biblio.type
    legacy = str(paper.extra.get("csl_type") or "")
    if legacy:
        return legacy
    legacy = _LEGACY_TYPES.get(str(paper.extra.get("entry_type") or paper.extra.get("ris_type") or ""), "")
    place = venue(paper)
    if legacy and (place or legacy not in ("article-journal", "paper-conference", "chapter")):
        return legacy
    if place:
        return "paper-conference" if _CONFERENCE.search(place) else "article-journal"
    return "article" if paper.arxiv_id else "document"


def biblio_field(paper: Paper, name: str) -> str | None:
    """A field of the paper's bibliographic record (by CSL variable name), if it has one."""
    return paper.biblio.fields.get(name) if paper.biblio else None


def authors(paper: Paper) -> list[Person]:
    """The paper's authors in parts; none when the names it shows as authors are its editors
    (an edited book with no author of its own)."""
    biblio = paper.biblio
    if (
        biblio
        and not biblio.authors
        and biblio.editors
        and [e.display for e in biblio.editors] == paper.authors
    ):
        return []
    return paper.people


def editors(paper: Paper) -> list[Person]:
    return list(paper.biblio.editors) if paper.biblio else []


# What readers split a one-string keyword list at: biber and JabRef at commas, Zotero and this
# tool's own import (BibTeX `keywords`, CSL-JSON `keyword`) at commas and semicolons.
KEYWORD_SEPARATORS = ",;"


def keyword_text(word: str, separators: str = KEYWORD_SEPARATORS) -> str:
    """One keyword as one item of a list that readers split at `separators`: a separator inside it
    becomes a space (`Lymphoma, B-Cell` -> `Lymphoma B-Cell`), so it never comes back as two."""
    for separator in separators:
        word = word.replace(separator, " ")
    return one_line(word)


def keywords(item: StoredPaper, separators: str = "") -> list[str]:
    """The paper's keywords for a reference manager: the source record's own, then the
    researcher's tags, then an LLM assessment's tags (topic labels it chose for the paper), each
    once and on one line, with `separators` inside a keyword made spaces (see `keyword_text`).

    The offline engine's tags are not keywords: they are words cut from the title ("editor" and
    "entry" from "An Entry With No Author and No Editor", "cdm" from "$\\Lambda$CDM"), there to
    rank and filter, and a reference manager would keep them as the researcher's subject tags. A
    researcher who wants one as a keyword adds it as their own tag."""
    own = item.paper.biblio.keywords if item.paper.biblio else []
    assessment = item.assessment
    engine = assessment.tags if assessment and assessment.engine != OFFLINE_ENGINE else []
    seen: set[str] = set()
    out = []
    for word in [*own, *item.decision.tags, *engine]:
        text = keyword_text(word, separators)
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    return out


def note_lines(text: str) -> str:
    """A note with its line breaks (runs of blank lines as one), other whitespace collapsed."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def safe_url(url: str | None) -> str | None:
    """The URL if it is an http(s) link; anything else (javascript:, data:, file:) is dropped."""
    if not url:
        return None
    try:
        parsed = urlparse(url.strip())
    except ValueError:
        return None
    if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc:
        return None
    return url.strip()


def link(item: StoredPaper) -> str | None:
    """Where to read the paper: its arXiv abstract page, its DOI, or its URL (http(s) only)."""
    return safe_url(item.paper.link)


def all_tags(item: StoredPaper) -> list[str]:
    """The engine's tags and the researcher's own, without repeats."""
    engine = item.assessment.tags if item.assessment else []
    return list(dict.fromkeys([*engine, *item.decision.tags]))


def authors_short(authors: Sequence[str], most: int = 3) -> str:
    if len(authors) <= most:
        return ", ".join(authors)
    return ", ".join(authors[:most]) + " et al."


def _is_negative(name: str, agenda: Agenda | None) -> bool:
    if agenda is not None:
        negative = agenda.negative
        return negative is not None and negative.name == name
    return name.casefold() == NOT_INTERESTED


def topic_names(agenda: Agenda | None, items: Sequence[StoredPaper]) -> list[str]:
    """The agenda's positive topics in order, then topics that only older assessments name."""
    names = [t.name for t in agenda.positive] if agenda else []
    for item in items:
        for score in item.assessment.topics if item.assessment else []:
            if score.topic not in names and not _is_negative(score.topic, agenda):
                names.append(score.topic)
    return names


def topic_score(item: StoredPaper, topic: str) -> TopicScore | None:
    if item.assessment is None:
        return None
    return next((t for t in item.assessment.topics if t.topic == topic), None)


def best_topic(item: StoredPaper, order: Sequence[str]) -> TopicScore | None:
    """The topic the paper scores best on (at least 1; ties go to the earlier topic)."""
    best: TopicScore | None = None
    for name in order:
        score = topic_score(item, name)
        if score is not None and score.score >= 1 and (best is None or score.score > best.score):
            best = score
    return best


@dataclass
class Group:
    """Papers filed under one heading, each with the topic score that put it there."""

    name: str
    entries: list[tuple[StoredPaper, TopicScore | None]] = field(default_factory=list)


def group_by_topic(
    items: Sequence[StoredPaper], agenda: Agenda | None, topic: str | None = None
) -> list[Group]:
    """Each paper under the topic it scores best on (or all under `topic`, if given); then assessed
    papers no topic claims; then unassessed papers. Inside a topic, best score first."""
    order = [topic] if topic else topic_names(agenda, items)
    groups = {name: Group(name) for name in [*order, OTHER_GROUP, UNASSESSED_GROUP]}
    for item in items:
        if item.assessment is None:
            groups[UNASSESSED_GROUP].entries.append((item, None))
            continue
        best = best_topic(item, order)
        groups[best.topic if best else OTHER_GROUP].entries.append((item, best))
    for group in groups.values():
        group.entries.sort(
            key=lambda e: (
                -(e[1].score if e[1] else 0),
                -(e[0].assessment.relevance if e[0].assessment else 0.0),
                e[0].paper.title.casefold(),
            )
        )
    return [g for g in groups.values() if g.entries]


def agenda_name(agenda: Agenda) -> str:
    """The agenda file's name: an export is shared, the local directory it sits in is not."""
    return PurePath(agenda.path).name or "agenda"


def one_line(text: str) -> str:
    return " ".join(text.split())


def anchor(name: str) -> str:
    """The id GitHub gives a Markdown heading: lowercase, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", one_line(name).lower()).replace(" ", "-")
