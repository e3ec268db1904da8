"""One paper, one record: map incoming papers onto the records that already hold them.

A paper matches an existing record by arXiv id (any version), by DOI, by the normalised
title, or by a near-identical title (rapidfuzz, strict threshold) when no identifier says
they differ (a preprint's arXiv DOI does not differ from its published version's DOI: feeds
bring both) and the titles carry the same numbers ("... 2" and "... 3", two years, two
versions are different papers). Lookups go to the store by indexed metadata (`$in` on a few keys per chunk),
never by scanning every record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from assistant.models import Paper, is_arxiv_doi, normalize_title
from assistant.store import Store, title_keys

FUZZY_THRESHOLD = 95.0
MIN_FUZZY_LENGTH = 24


@dataclass(frozen=True)
class Known:
    """What identifies a stored (or already seen) paper."""

    id: str
    arxiv_id: str | None
    doi: str | None
    title_key: str


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


@dataclass
class _Index:
    by_id: dict[str, Known] = field(default_factory=dict)
    by_arxiv: dict[str, Known] = field(default_factory=dict)
    by_doi: dict[str, Known] = field(default_factory=dict)
    by_title: dict[str, list[Known]] = field(default_factory=dict)
    by_block: dict[str, list[Known]] = field(default_factory=dict)

    def add(self, known: Known) -> None:
        self.by_id[known.id] = known
        if known.arxiv_id:
            self.by_arxiv.setdefault(known.arxiv_id, known)
        if known.doi:
            self.by_doi.setdefault(known.doi, known)
        self.by_title.setdefault(known.title_key, []).append(known)
        head, tail = title_keys(known.title_key)
        for block in {head, tail}:
            self.by_block.setdefault(block, []).append(known)

    def match(self, paper: Paper, key: str) -> tuple[Known, str] | None:
        """The record this paper duplicates, and how it was recognised."""
        if paper.id in self.by_id:
            return self.by_id[paper.id], "same id"
        if paper.arxiv_id and paper.arxiv_id in self.by_arxiv:
            return self.by_arxiv[paper.arxiv_id], "same arXiv id"
        if paper.doi and paper.doi in self.by_doi and not conflict(self.by_doi[paper.doi], paper):
            return self.by_doi[paper.doi], "same DOI"
        for known in self.by_title.get(key, []):
            if not conflict(known, paper):
                return known, "same title"
        if len(key) < MIN_FUZZY_LENGTH:
            return None
        head, tail = title_keys(key)
        numbers = title_numbers(key)
        best: tuple[float, Known] | None = None
        for block in {head, tail}:
            for known in self.by_block.get(block, []):
                score = fuzz.ratio(key, known.title_key)
                if (
                    score >= FUZZY_THRESHOLD
                    and not conflict(known, paper)
                    and title_numbers(known.title_key) == numbers
                    and (best is None or score > best[0])
                ):
                    best = (score, known)
        return (best[1], f"similar title ({best[0]:.0f}% alike)") if best else None


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
        if all(conflict(a, b) for i, a in enumerate(alive) for b in alive[i + 1 :]):
            continue
        added = {item.paper.id: item.added_at for item in store.get_many([k.id for k in alive])}
        alive = sorted(
            (k for k in alive if k.id in added), key=lambda k: (added[k.id] is None, added[k.id] or 0, k.id)
        )
        keep = alive[0]
        for other in alive[1:]:
            if conflict(keep, other):
                continue
            store.absorb(keep.id, other.id, "duplicate record made by an import running at the same time")
            merged.add(other.id)
            keepers.append(keep)
    # The rest of this import matches the papers that were kept: one pass drops the merged ones.
    gone = {id(index.by_id.pop(pid)) for pid in merged}
    if gone:
        for table in (index.by_arxiv, index.by_doi):
            for key in [k for k, v in table.items() if id(v) in gone]:
                del table[key]
        for lists in (index.by_title, index.by_block):
            for key, entries in lists.items():
                lists[key] = [v for v in entries if id(v) not in gone]
    for keep in keepers:
        index.add(keep)
    return len(merged)


def resolve(store: Store, papers: Sequence[Paper]) -> list[Paper]:
    """The papers with their ids changed to those of the records they duplicate (store or batch)."""
    return [paper for paper, _ in resolve_matches(store, papers)]


def resolve_matches(store: Store, papers: Sequence[Paper]) -> list[tuple[Paper, str | None]]:
    """Each paper with its id changed to that of the record it duplicates, and how that record
    was recognised (None: a paper of its own)."""
    keys = [normalize_title(p.title) for p in papers]
    index = _Index()
    for stored in store.find_known(
        ids=[p.id for p in papers],
        arxiv_ids=[p.arxiv_id for p in papers if p.arxiv_id],
        dois=[p.doi for p in papers if p.doi],
        keys=keys,
    ):
        index.add(Known(*stored))
    out: list[tuple[Paper, str | None]] = []
    _merge_stored_duplicates(store, index)
    for paper, key in zip(papers, keys, strict=True):
        match = index.match(paper, key)
        known, how = match if match else (None, None)
        if known is not None and known.id != paper.id:
            paper = paper.model_copy(update={"id": known.id})
        # Remember what this record adds (a new arXiv id or DOI) for the rest of the batch.
        index.add(
            Known(
                paper.id,
                paper.arxiv_id or (known.arxiv_id if known else None),
                paper.doi or (known.doi if known else None),
                key,
            )
        )
        out.append((paper, how))
    return out
