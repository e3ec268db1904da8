"""The stored form of a paper: which metadata keys hold its fields, decision, assessment and
reading lists, and the conversions between those keys and the models. No Chroma here."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from assistant.models import Assessment, Biblio, Decision, Paper, Status, StoredPaper, normalize_title

# Paper fields kept in metadata (the abstract lives in the document).
_PAPER_SCALARS = ("title", "year", "date", "venue", "arxiv_id", "doi", "url")
_PAPER_LISTS = ("authors", "categories", "sources")

Where = dict[str, Any]  # a Chroma metadata filter


def _list_meta(values: Sequence[str]) -> list[str] | None:
    """Chroma rejects empty list metadata: an empty list is stored as an absent key."""
    return list(values) if values else None


BLOCK_WORDS = 5


def title_keys(title_key: str) -> tuple[str, str]:
    """The first and the last words of a normalised title: blocks for fuzzy matching.

    Two near-identical titles differ in a few characters, so they share their beginning or
    their end; five words keep common openings ("large language models are ...") selective.
    """
    words = title_key.split()
    return " ".join(words[:BLOCK_WORDS]), " ".join(words[-BLOCK_WORDS:])


def paper_metadata(paper: Paper) -> dict[str, Any]:
    meta: dict[str, Any] = {name: getattr(paper, name) for name in _PAPER_SCALARS}
    key = normalize_title(paper.title)
    meta["title_key"] = key
    meta["title_head"], meta["title_tail"] = title_keys(key)
    for name in _PAPER_LISTS:
        meta[name] = _list_meta(getattr(paper, name))
    meta["extra"] = json.dumps(paper.extra, ensure_ascii=False, sort_keys=True) if paper.extra else None
    # Absent in stores made before papers carried it (they load with biblio None).
    meta["biblio"] = paper.biblio.model_dump_json(exclude_defaults=True) if paper.biblio else None
    meta["day"] = paper.day
    meta["touched"] = time.time()
    return meta


# A paper's membership of a reading list is a metadata key of its own, `list:<name>`: two
# processes adding a paper to two lists at once write two keys, and neither loses the other's.
# (Stores made before this kept one `lists` key, rewritten whole; Store.open converts them.)
LIST_KEY_PREFIX = "list:"
LEGACY_LISTS = "lists"
# Reading-list definitions: one record each in the meta collection.
LIST_RECORD = "reading-list"
LEGACY_LIST_TABLE = "reading-lists"


def is_number(value: Any) -> bool:
    """Whether a metadata value is a number as Chroma compares it (a boolean is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def list_key(name: str) -> str:
    return LIST_KEY_PREFIX + name


def list_names(meta: dict[str, Any]) -> list[str]:
    """The reading lists a paper's metadata puts it in."""
    names = [str(n) for n in meta.get(LEGACY_LISTS) or ()]
    names += sorted(
        (k[len(LIST_KEY_PREFIX) :] for k, v in meta.items() if k.startswith(LIST_KEY_PREFIX) and v),
        key=str.casefold,
    )
    return list(dict.fromkeys(names))


# Decision fields and the metadata keys that hold them.
_DECISION_KEYS = {
    "status": "status",
    "starred": "starred",
    "note": "note",
    "tags": "user_tags",
}


def decision_metadata(decision: Decision) -> dict[str, Any]:
    return {
        "touched": time.time(),
        "status": decision.status.value,
        "starred": decision.starred,
        "note": decision.note or None,
        "user_tags": _list_meta(decision.tags),
        # A whole decision adds its lists; only ReadingLists takes a paper out of one.
        **{list_key(name): True for name in decision.lists},
        "decided_at": decision.decided_at.isoformat() if decision.decided_at else None,
        "seed": None,  # a decision made here is the researcher's own, not an import's
    }


def assessment_metadata(assessment: Assessment | None) -> dict[str, Any]:
    """An assessment's metadata; writing one clears any recorded failure."""
    if assessment is None:
        cleared = ("assessment", "relevance", "assessed_key", "engine", "tags")
        return {**dict.fromkeys(cleared), "touched": time.time()}
    return {
        "touched": time.time(),
        "assessment": assessment.model_dump_json(),
        "relevance": float(assessment.relevance),
        "assessed_key": assessment.key,
        "engine": assessment.engine,
        "tags": _list_meta(assessment.tags),
        "failed": None,
        "failed_key": None,
        "failed_reason": None,
    }


def _paper_from(pid: str, document: str | None, meta: dict[str, Any]) -> Paper:
    title = str(meta.get("title") or "")
    doc = document or ""
    abstract = doc[len(title) + 2 :] if doc.startswith(title + "\n\n") else ""
    extra = json.loads(meta["extra"]) if meta.get("extra") else {}
    return Paper(
        id=pid,
        title=title or pid,
        abstract=abstract,
        authors=list(meta.get("authors") or []),
        year=meta.get("year"),
        date=meta.get("date"),
        venue=meta.get("venue"),
        categories=list(meta.get("categories") or []),
        arxiv_id=meta.get("arxiv_id"),
        doi=meta.get("doi"),
        url=meta.get("url"),
        sources=list(meta.get("sources") or []),
        extra=extra,
        biblio=_biblio_from(meta.get("biblio")),
    )


def _biblio_from(raw: Any) -> Biblio | None:
    if not raw:
        return None
    try:
        return Biblio.model_validate_json(raw)
    except ValueError:  # written by a newer version in a shape this one does not know
        return None


def decision_from(meta: dict[str, Any]) -> Decision:
    """The decision a paper's (plain) metadata holds."""
    return Decision(
        status=Status(meta.get("status") or Status.NEW),
        starred=bool(meta.get("starred", False)),
        note=meta.get("note") or "",
        tags=list(meta.get("user_tags") or []),
        lists=list_names(meta),
        decided_at=datetime.fromisoformat(meta["decided_at"]) if meta.get("decided_at") else None,
    )


def _stored_from(pid: str, document: str | None, meta: dict[str, Any] | None) -> StoredPaper:
    meta = dict(meta or {})
    decision = decision_from(meta)
    assessment = Assessment.model_validate_json(meta["assessment"]) if meta.get("assessment") else None
    added = datetime.fromisoformat(meta["added_at"]) if meta.get("added_at") else None
    failure = (
        (str(meta["failed_key"]), str(meta.get("failed_reason") or "")) if meta.get("failed_key") else None
    )
    return StoredPaper(
        paper=_paper_from(pid, document, meta),
        decision=decision,
        assessment=assessment,
        added_at=added,
        failure=failure,
    )


def _drop_none(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if v is not None}
