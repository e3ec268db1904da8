"""One paper, one record: map incoming papers onto the records that already hold them.

A paper matches an existing record by arXiv id (any version), by DOI, by the normalised
title, or by a near-identical title (rapidfuzz, strict threshold) when no identifier says
they differ. Lookups go to the store by indexed metadata (`$in` on a few keys per chunk),
never by scanning every record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from assistant.models import Paper, normalize_title
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


def _conflict(a: Known, p: Paper) -> bool:
    """True when an identifier proves two records are different papers."""
    return bool(
        (a.arxiv_id and p.arxiv_id and a.arxiv_id != p.arxiv_id) or (a.doi and p.doi and a.doi != p.doi)
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

    def match(self, paper: Paper, key: str) -> Known | None:
        if paper.id in self.by_id:
            return self.by_id[paper.id]
        if paper.arxiv_id and paper.arxiv_id in self.by_arxiv:
            return self.by_arxiv[paper.arxiv_id]
        if paper.doi and paper.doi in self.by_doi and not _conflict(self.by_doi[paper.doi], paper):
            return self.by_doi[paper.doi]
        for known in self.by_title.get(key, []):
            if not _conflict(known, paper):
                return known
        if len(key) < MIN_FUZZY_LENGTH:
            return None
        head, tail = title_keys(key)
        best: tuple[float, Known] | None = None
        for block in {head, tail}:
            for known in self.by_block.get(block, []):
                score = fuzz.ratio(key, known.title_key)
                if (
                    score >= FUZZY_THRESHOLD
                    and not _conflict(known, paper)
                    and (best is None or score > best[0])
                ):
                    best = (score, known)
        return best[1] if best else None


def resolve(store: Store, papers: Sequence[Paper]) -> list[Paper]:
    """The papers with their ids changed to those of the records they duplicate (store or batch)."""
    keys = [normalize_title(p.title) for p in papers]
    index = _Index()
    for found in store.find_known(
        ids=[p.id for p in papers],
        arxiv_ids=[p.arxiv_id for p in papers if p.arxiv_id],
        dois=[p.doi for p in papers if p.doi],
        keys=keys,
    ):
        index.add(Known(*found))
    out: list[Paper] = []
    for paper, key in zip(papers, keys, strict=True):
        known = index.match(paper, key)
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
        out.append(paper)
    return out
