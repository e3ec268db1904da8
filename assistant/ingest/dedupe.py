"""One paper, one record: map incoming papers onto the records that already hold them.

A paper matches an existing record by arXiv id (any version), by DOI, by the normalised
title, or by a near-identical title (rapidfuzz, strict threshold) when nothing says they are
different works and the titles carry the same numbers ("... 2" and "... 3", two years, two
versions are different papers). What says two records are different works:

- an identifier: two arXiv ids, or two DOIs (a preprint's arXiv DOI does not differ from its
  published version's DOI: feeds bring both);
- unless an identifier (the same arXiv id or DOI) says they are one paper:
  - one source file, two citation keys: a file's entries are its author's different works;
  - what they are: a conference paper and its journal version (or a thesis, a report, a book)
    share a title but not an item type (the entry type, else a venue that plainly names a
    journal or a conference; a preprint goes with any);
  - when: years more than one apart, unless one of them is a preprint (or carries an arXiv
    id), which may precede its publication by years.

A record seen before under the same citation key of the same file is that paper again,
whatever changed in it. A record that is a different work from the one holding its title
hash gets an id of its own (`models.variant_id`). Lookups go to the store by indexed
metadata (`$in` on a few keys per chunk), never by scanning every record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from rapidfuzz import fuzz

from assistant.ingest.bibtypes import TYPES as BIBTEX_TYPES
from assistant.models import Paper, is_arxiv_doi, normalize_title, record_keys, variant_id
from assistant.store import Store, title_keys

FUZZY_THRESHOLD = 95.0
MIN_FUZZY_LENGTH = 24
YEARS_APART = 1  # a paper's year differs by one between sources (online first, issue later)

# CSL item type -> what kind of work it is; two kinds that differ are two works. Chapters go
# with conference papers (Springer calls an LNCS paper a chapter, DBLP an inproceedings).
_KINDS = {
    "article-journal": "journal",
    "article-magazine": "journal",
    "article-newspaper": "journal",
    "periodical": "journal",
    "review": "journal",
    "review-book": "journal",
    "paper-conference": "proceedings",
    "chapter": "proceedings",
    "entry": "proceedings",
    "entry-dictionary": "proceedings",
    "entry-encyclopedia": "proceedings",
    "book": "book",
    "thesis": "thesis",
    "report": "report",
    "article": "preprint",  # CSL's type for a preprint
    "manuscript": "preprint",
}
_PREPRINT_VENUE = re.compile(
    r"\b(arxiv|corr|biorxiv|medrxiv|chemrxiv|techrxiv|psyarxiv|ssrn|preprints?|research square)\b", re.I
)
# A venue that plainly names an event (`Proceedings of the 21st ICSE`) or a journal; one that
# names both (`Journal of Physics: Conference Series`), or neither (`ACL`), says nothing.
_EVENT_VENUE = re.compile(r"\b(conference|workshop|symposium|colloquium|congress|\d+(st|nd|rd|th))\b", re.I)
_JOURNAL_VENUE = re.compile(r"\b(journal|transactions|trans\.|letters|magazine)(\W|$)", re.I)


def work_kind(paper: Paper) -> str | None:
    """What kind of work a record is: journal, proceedings (conference paper or chapter), book,
    thesis, report, preprint; None when it does not say."""
    venue = paper.venue or ""
    if _PREPRINT_VENUE.search(venue):
        return "preprint"
    ctype = paper.biblio.type if paper.biblio else ""
    if not ctype and paper.extra.get("entry_type"):
        ctype = BIBTEX_TYPES.get(str(paper.extra["entry_type"]).lower(), "")
    kind = _KINDS.get(ctype)
    if kind:
        return kind
    event, journal = bool(_EVENT_VENUE.search(venue)), bool(_JOURNAL_VENUE.search(venue))
    if event != journal:
        return "proceedings" if event else "journal"
    return None


@dataclass(frozen=True)
class Known:
    """What identifies a stored (or already seen) paper, and what tells it from another work."""

    id: str
    arxiv_id: str | None
    doi: str | None
    title_key: str
    kind: str | None = None
    year: int | None = None
    keys: frozenset[tuple[str, str]] = frozenset()  # (source file, citation key) of its records

    @classmethod
    def of(cls, paper: Paper, title_key: str | None = None) -> Known:
        return cls(
            paper.id,
            paper.arxiv_id,
            paper.doi,
            normalize_title(paper.title) if title_key is None else title_key,
            work_kind(paper),
            paper.year,
            frozenset(
                pair for pair in record_keys(paper) if pair[0]
            ),  # a key of an unnamed source says nothing
        )

    @property
    def preprint(self) -> bool:
        return self.kind == "preprint" or bool(self.arxiv_id)


# Roman numerals that number parts and volumes ("i", "v" and "x" are too often words or symbols).
_ROMAN = frozenset({"ii", "iii", "iv", "vi", "vii", "viii", "ix", "xi", "xii", "xiii"})


def title_numbers(key: str) -> list[str]:
    """The numbers in a normalised title: digits (years, versions, parts) and roman numerals."""
    return sorted([str(int(n)) for n in re.findall(r"\d+", key)] + [w for w in key.split() if w in _ROMAN])


def conflict(a: Known | Paper, p: Known | Paper) -> bool:
    """True when an identifier proves two records are different papers (either way round).

    A preprint's arXiv DOI and the DOI of its published version are the same paper's: they
    conflict only through the arXiv ids they carry."""
    return bool(
        (a.arxiv_id and p.arxiv_id and a.arxiv_id != p.arxiv_id)
        or (a.doi and p.doi and a.doi != p.doi and not (is_arxiv_doi(a.doi) or is_arxiv_doi(p.doi)))
    )


def linked(a: Known, p: Known) -> bool:
    """True when an identifier says two records are one paper: the same arXiv id or DOI."""
    return bool((a.arxiv_id and a.arxiv_id == p.arxiv_id) or (a.doi and a.doi == p.doi))


def same_key(a: Known, p: Known) -> bool:
    """True when the two records share a citation key of the same source file."""
    return bool(a.keys & p.keys)


def other_works(a: Known, p: Known) -> bool:
    """True when what two records say (and no identifier gainsays) makes them different works:
    two citation keys of one file, different kinds of work, years more than one apart."""
    if linked(a, p) or same_key(a, p):
        return False
    shared = {s for s, _ in a.keys} & {s for s, _ in p.keys}
    if shared:
        return True  # one file, two keys (a shared key returned above)
    if a.kind and p.kind and a.kind != p.kind and not (a.preprint or p.preprint):
        return True  # an arXiv record is the preprint of whichever version it says it became
    return bool(a.year and p.year and abs(a.year - p.year) > YEARS_APART and not (a.preprint or p.preprint))


def different(a: Known | Paper, p: Known | Paper) -> bool:
    """True when two records are different papers: an identifier proves it (`conflict`), or
    what they say does (`other_works`) and no identifier says otherwise."""
    ka = a if isinstance(a, Known) else Known.of(a)
    kp = p if isinstance(p, Known) else Known.of(p)
    return conflict(ka, kp) or other_works(ka, kp)


# How a record found by its own id was recognised, by the kind of id.
_SAME_ID = {"arxiv": "same arXiv id", "doi": "same DOI", "title": "same title"}


@dataclass
class _Index:
    by_id: dict[str, Known] = field(default_factory=dict)
    by_arxiv: dict[str, Known] = field(default_factory=dict)
    by_doi: dict[str, Known] = field(default_factory=dict)
    by_key: dict[tuple[str, str], Known] = field(default_factory=dict)
    by_title: dict[str, list[Known]] = field(default_factory=dict)
    by_block: dict[str, list[Known]] = field(default_factory=dict)
    titles: dict[str, set[str]] = field(default_factory=dict)  # id -> every title it was seen under

    def add(self, known: Known) -> None:
        """Index a record. One indexed under this id before (a batch record merged into it adds
        its identifiers, keys and title spelling) is replaced, under every title it had."""
        titles = self.titles.get(known.id, set()) | {known.title_key}
        if known.id in self.by_id:
            self.drop({known.id})
        self.titles[known.id] = titles
        self.by_id[known.id] = known
        if known.arxiv_id:
            self.by_arxiv.setdefault(known.arxiv_id, known)
        if known.doi:
            self.by_doi.setdefault(known.doi, known)
        for pair in known.keys:
            self.by_key.setdefault(pair, known)
        for title in sorted(titles):
            entry = known if title == known.title_key else replace(known, title_key=title)
            self.by_title.setdefault(title, []).append(entry)
            for block in set(title_keys(title)):
                self.by_block.setdefault(block, []).append(entry)

    def drop(self, ids: set[str]) -> None:
        """Forget these records in every table."""
        for pid in ids:
            old = self.by_id.pop(pid, None)
            if old is None:
                continue
            if old.arxiv_id and self.by_arxiv.get(old.arxiv_id, old).id == pid:
                self.by_arxiv.pop(old.arxiv_id, None)
            if old.doi and self.by_doi.get(old.doi, old).id == pid:
                self.by_doi.pop(old.doi, None)
            for pair in old.keys:
                if self.by_key.get(pair, old).id == pid:
                    self.by_key.pop(pair, None)
            for title in self.titles.pop(pid, set()):
                for table, names in ((self.by_title, {title}), (self.by_block, set(title_keys(title)))):
                    for name in names:
                        table[name] = [v for v in table.get(name, []) if v.id != pid]

    def match(self, paper: Paper, key: str) -> tuple[Known, str | None] | None:
        """The record this paper duplicates, and how it was recognised (None: it is that
        record's own paper, found again by its citation key)."""
        me = Known.of(paper, key)
        for pair in sorted(me.keys):
            known = self.by_key.get(pair)
            if (
                known is not None
                and not conflict(known, me)
                and (linked(known, me) or self._alike(known, key) is not None)
            ):
                return known, None
        known = self.by_id.get(paper.id)
        if known is not None and not other_works(known, me):
            return known, _SAME_ID.get(paper.id.partition(":")[0], "same id")
        if paper.arxiv_id and paper.arxiv_id in self.by_arxiv:
            return self.by_arxiv[paper.arxiv_id], "same arXiv id"
        if paper.doi and paper.doi in self.by_doi and not different(self.by_doi[paper.doi], me):
            return self.by_doi[paper.doi], "same DOI"
        for known in self.by_title.get(key, []):
            if not different(known, me):
                return known, "same title"
        if len(key) < MIN_FUZZY_LENGTH:
            return None
        head, tail = title_keys(key)
        best: tuple[float, Known] | None = None
        for block in {head, tail}:
            for known in self.by_block.get(block, []):
                score = self._alike(known, key)
                if score is not None and not different(known, me) and (best is None or score > best[0]):
                    best = (score, known)
        return (best[1], f"similar title ({best[0]:.0f}% alike)") if best else None

    @staticmethod
    def _alike(known: Known, key: str) -> float | None:
        """How alike the titles are (100: the same), if alike enough to be one paper's."""
        if known.title_key == key:
            return 100.0
        if len(key) < MIN_FUZZY_LENGTH:
            return None
        score = fuzz.ratio(key, known.title_key)
        if score >= FUZZY_THRESHOLD and title_numbers(known.title_key) == title_numbers(key):
            return score
        return None


def _apart(a: Known, b: Known) -> bool:
    """Two stored records that must stay two papers: different works, or records of different
    citation keys (one was split off the other, `triage split`: the same import, run twice at
    once, makes its records under the same keys)."""
    keys_a, keys_b = {k for _, k in a.keys}, {k for _, k in b.keys}
    return different(a, b) or bool(keys_a and keys_b and not keys_a & keys_b)


def _merge_stored_duplicates(store: Store, index: _Index) -> int:
    """Stored records that are one paper (same arXiv id, DOI or title, nothing that says they
    differ) are merged into the oldest: two imports that ran at once on machines that do not
    share the writer lock can each have made the paper. Returns how many were merged."""
    groups: dict[str, list[Known]] = {}
    for known in index.by_id.values():
        for key in (
            f"a:{known.arxiv_id}" if known.arxiv_id else "",
            f"d:{known.doi}" if known.doi else "",
            f"t:{known.title_key}",
        ):
            if key:
                groups.setdefault(key, []).append(known)
    merged: set[str] = set()
    keepers: list[Known] = []
    for group in groups.values():
        alive = [k for k in group if k.id not in merged]
        if len(alive) < 2:
            continue
        # Most such groups are different papers an identifier tells apart: no store read for them.
        if all(_apart(a, b) for i, a in enumerate(alive) for b in alive[i + 1 :]):
            continue
        added = {item.paper.id: item.added_at for item in store.get_many([k.id for k in alive])}
        alive = sorted(
            (k for k in alive if k.id in added), key=lambda k: (added[k.id] is None, added[k.id] or 0, k.id)
        )
        keep = alive[0]
        for other in alive[1:]:
            if _apart(keep, other):
                continue
            store.absorb(keep.id, other.id, "duplicate record made by an import running at the same time")
            merged.add(other.id)
            keepers.append(keep)
    # The rest of this import matches the papers that were kept: one pass drops the merged ones.
    index.drop(merged)
    for keep in keepers:
        index.add(keep)
    return len(merged)


def resolve(store: Store, papers: Sequence[Paper]) -> list[Paper]:
    """The papers with their ids changed to those of the records they duplicate (store or batch)."""
    return [paper for paper, _ in resolve_matches(store, papers)]


def resolve_matches(store: Store, papers: Sequence[Paper]) -> list[tuple[Paper, str | None]]:
    """Each paper with its id changed to that of the record it duplicates, and how that record
    was recognised (None: a paper of its own, new or found again by its id or citation key). A
    paper whose id another work holds gets an id of its own (`variant_id`)."""
    keys = [normalize_title(p.title) for p in papers]
    index = _Index()
    for stored in store.find_candidates(
        ids=[p.id for p in papers],
        arxiv_ids=[p.arxiv_id for p in papers if p.arxiv_id],
        dois=[p.doi for p in papers if p.doi],
        keys=keys,
    ):
        index.add(Known.of(stored))
    out: list[tuple[Paper, str | None]] = []
    _merge_stored_duplicates(store, index)
    for paper, key in zip(papers, keys, strict=True):
        match = index.match(paper, key)
        known, how = match if match else (None, None)
        if known is not None and known.id != paper.id:
            paper = paper.model_copy(update={"id": known.id})
        elif known is None and paper.id in index.by_id:  # another work holds its id
            own, n = variant_id(paper), 1
            while own in index.by_id:
                n += 1
                own = f"{variant_id(paper)}-{n}"
            paper = paper.model_copy(update={"id": own})
        # Remember what this record adds (a new arXiv id, DOI or key) for the rest of the batch.
        mine = Known.of(paper, key)
        if known is not None:
            mine = Known(
                paper.id,
                paper.arxiv_id or known.arxiv_id,
                paper.doi or known.doi,
                key,
                known.kind or mine.kind,
                known.year or mine.year,
                known.keys | mine.keys,
            )
        index.add(mine)
        out.append((paper, how))
    return out
