"""The paper store: the only module that talks to Chroma.

One collection of papers (document = title + abstract, embedded by the configured embedder);
the paper's fields, the researcher's decision and the latest assessment live in its metadata.
A second small collection holds what is not per paper (store-wide settings).
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlparse

import chromadb
import httpx
import platformdirs
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError

from assistant.config import Settings
from assistant.embedding import make_embedder
from assistant.errors import (
    ReadOnlyError,
    StoreError,
    TriageError,
    disk_full,
    is_disk_full,
    is_disk_full_at,
    is_read_only,
    read_only,
    store_gone,
)
from assistant.models import (
    Assessment,
    Biblio,
    Decision,
    MergeEntry,
    MergeLog,
    Paper,
    Status,
    StoredPaper,
    citekeys,
    normalize_title,
    now_utc,
    variant_id,
)

PAGE_SIZE = 1000
META_COLLECTION_SUFFIX = "-meta"

# Paper fields kept in metadata (the abstract lives in the document).
_PAPER_SCALARS = ("title", "year", "date", "venue", "arxiv_id", "doi", "url")
_PAPER_LISTS = ("authors", "categories", "sources")

Where = dict[str, Any]


@dataclass
class UpsertReport:
    """What an upsert did: ids that were new, merged into an existing record, or unchanged."""

    new: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@dataclass
class PaperRecord:
    """A paper exactly as the store holds it (text, every metadata key, vector): what
    `Store.records` reads before a delete and `Store.restore_records` puts back."""

    id: str
    document: str
    metadata: dict[str, Any]
    embedding: list[float] | None


@dataclass
class SearchHit:
    item: StoredPaper
    distance: float

    @property
    def similarity(self) -> float:
        return 1.0 - self.distance


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


def _stored_from(pid: str, document: str | None, meta: dict[str, Any] | None) -> StoredPaper:
    meta = dict(meta or {})
    decision = Decision(
        status=Status(meta.get("status") or Status.NEW),
        starred=bool(meta.get("starred", False)),
        note=meta.get("note") or "",
        tags=list(meta.get("user_tags") or []),
        lists=list_names(meta),
        decided_at=datetime.fromisoformat(meta["decided_at"]) if meta.get("decided_at") else None,
    )
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


def _newer(a: datetime | None, b: datetime | None) -> bool:
    return a is not None and (b is None or a > b)


MERGES_KEPT = 20  # merged records a paper keeps for splitting; older ones fold into its base


def _read_log(meta: dict[str, Any] | None) -> MergeLog | None:
    raw = (meta or {}).get("merges")
    if not raw:
        return None
    try:
        return MergeLog.model_validate_json(raw)
    except ValueError:
        return None


def _merge_log(
    pid: str,
    stored: Paper | None,
    meta: dict[str, Any] | None,
    records: list[tuple[Paper, str | None]],
) -> MergeLog | None:
    """The paper's merge log with these records added (None if no record of another identity
    was merged into it). The base is the paper as it was before its first logged merge.

    A record of another identity has another id, or (merged by the paper's own id: the same
    DOI) a citation key other than the paper's: it is logged under an id of its own
    (`variant_id`), which it takes if it is split off. A record logged before is not logged
    again."""
    log = _read_log(meta)
    if stored is not None:
        known = set(citekeys(stored))
    else:
        known = {k for r, how in records if not how for k in citekeys(r)}
    logged = {e.record.id for e in log.entries} if log else set()
    others: list[tuple[Paper, str]] = []
    own: list[Paper] = []
    for r, how in records:
        keys = [k for k in citekeys(r) if k not in known]
        if r.id == pid and how and keys and known:  # the paper has a key already: another one
            r = r.model_copy(update={"id": variant_id(r)})
            how = f"{how}, another citation key ({', '.join(keys)})"
        if r.id == pid or not how:
            own.append(r)
        elif r.id not in logged:
            others.append((r, how))
            logged.add(r.id)
        known.update(keys)
    if not others:
        return None
    if log is None:
        if stored is not None:
            base = stored
        else:  # new in this batch: its own record(s) are the base
            own = [r for r in own if r.id == pid] or [others.pop(0)[0].model_copy(update={"id": pid})]
            base = own[0]
            for r in own[1:]:
                base = base.merged_with(r)
        log = MergeLog(base=base)
    when = now_utc()
    log.entries += [MergeEntry(how=str(how), at=when, record=r) for r, how in others]
    while len(log.entries) > MERGES_KEPT:
        oldest = log.entries.pop(0)
        log.base = log.base.merged_with(oldest.record.model_copy(update={"id": pid}))
    return log


def _unmerged(current: Paper, log: MergeLog, rest: list[MergeEntry]) -> Paper:
    """The paper without one merged record: rebuilt from its base and the other records; a
    field that changed since by other means (a re-import under the paper's own id) keeps its
    current value, and list fields keep what those added."""
    full, rebuilt = log.base, log.base
    for e in log.entries:
        full = full.merged_with(e.record.model_copy(update={"id": current.id}))
    for e in rest:
        rebuilt = rebuilt.merged_with(e.record.model_copy(update={"id": current.id}))
    values: dict[str, Any] = {}
    for name in Paper.model_fields:
        now, was, back = getattr(current, name), getattr(full, name), getattr(rebuilt, name)
        if isinstance(now, list):
            values[name] = list(dict.fromkeys([*back, *(v for v in now if v not in was)]))
        else:
            values[name] = back if now == was else now
    values["id"] = current.id
    return Paper(**values)


def _drop_none(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if v is not None}


class _Guarded:
    """A Chroma collection whose errors the store says in words: a full disk (Chroma's
    "Error in compaction" on a nearly full disk included), a read-only or removed store."""

    def __init__(self, collection: Collection, store: Store) -> None:
        self._collection = collection
        self._store = store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._collection, name)
        if not callable(value):
            return value

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Exception as exc:
                error = self._store.refusal(exc)
                if error is None:
                    raise
                raise error from exc

        return call


class Store:
    """Papers in Chroma: upsert with merging, paged reads, semantic search, metadata updates."""

    def __init__(
        self, client: ClientAPI, collection: Collection, meta: Collection, location: str, embedder: Any
    ) -> None:
        self.client = client
        self.embedder = embedder
        self.collection = cast(Collection, _Guarded(collection, self))
        self.meta = cast(Collection, _Guarded(meta, self))
        self.location = location
        self.path: Path | None = None  # an embedded store's folder
        self._batch = max(1, min(client.get_max_batch_size(), 1000))
        self.lock_path: Path | None = None
        self._thread_lock = threading.RLock()
        self._prepared: dict[str, Any] = {}  # text -> vector, embedded ahead of a write
        self._holding = False  # whether this store's writer lock is held (by the thread in _thread_lock)
        self.snapshot: str | None = None  # why this is a temporary copy of the store, if it is

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open_for_reading(cls, settings: Settings, embedder: Any | None = None) -> Store:
        """Open the store for a command that only reads it. Chroma writes to its database even
        to open it, so an embedded store on a full disk or a read-only mount is read from a
        temporary copy instead (`snapshot` is set; nothing written there is kept)."""
        try:
            store = cls.open(settings, embedder)
            # Chroma applies its write log at the first read: on a full disk that read fails.
            store.collection.count()
            return store
        except StoreError as exc:
            if settings.local_store is None or not settings.store_exists:
                raise
            if not (is_disk_full(exc) or isinstance(exc, ReadOnlyError)):
                raise
            copy = Path(tempfile.mkdtemp(prefix="triage-read-"))
            try:
                shutil.copytree(settings.store, copy / "store")
            except OSError as copy_error:
                shutil.rmtree(copy, ignore_errors=True)
                raise StoreError(
                    f"{exc}; reading from a temporary copy failed too ({copy_error.strerror})"
                ) from exc
            atexit.register(shutil.rmtree, copy, True)
            store = cls.open(settings.model_copy(update={"store": copy / "store"}), embedder)
            store.snapshot = "the disk is full" if is_disk_full(exc) else "the store is read-only"
            store.location = settings.store_location
            return store

    @classmethod
    def open(cls, settings: Settings, embedder: Any | None = None) -> Store:
        """Open (creating if needed) the store the settings point at."""
        api_key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        ef = embedder or make_embedder(settings.embedder, api_key, settings.openai_base_url)
        location = settings.store_location
        try:
            if not settings.chroma_url:
                settings.store.mkdir(parents=True, exist_ok=True)
            with _creating(settings):
                if settings.chroma_url:
                    client = _http_client(settings.chroma_url)
                else:
                    client = chromadb.PersistentClient(
                        path=str(settings.store.resolve()), settings=_chroma_settings()
                    )
                collection = client.get_or_create_collection(
                    settings.collection, embedding_function=ef, configuration={"hnsw": {"space": "cosine"}}
                )
                meta = client.get_or_create_collection(
                    settings.collection + META_COLLECTION_SUFFIX, embedding_function=None
                )
        except (ChromaError, ValueError, OSError) as exc:
            if settings.local_store is not None:
                _forget_client(settings.local_store)
            if is_disk_full(exc):
                raise disk_full(location, settings.local_store) from exc
            if is_read_only(exc):
                raise read_only(location) from exc
            raise StoreError(f"cannot open the store at {location}: {exc}") from exc
        except Exception as exc:  # connection errors come from httpx and others
            if type(exc).__module__.split(".")[0] in ("httpx", "httpcore", "requests", "urllib3"):
                raise StoreError(f"cannot reach the Chroma server at {location}: {exc}") from exc
            raise
        store = cls(client, collection, meta, location, ef)
        if settings.chroma_url:  # writers on this machine share a lock per server collection
            digest = hashlib.sha256(f"{location}#{settings.collection}".encode()).hexdigest()[:16]
            store.lock_path = Path(platformdirs.user_cache_dir("triage")) / "locks" / f"{digest}.lock"
        else:
            store.lock_path = settings.store / "triage-write.lock"
            store.path = settings.store
        store._convert_lists()
        return store

    def refusal(self, exc: BaseException) -> StoreError | None:
        """The error in words for a Chroma error that means the store cannot be written (its
        folder removed, its disk full, read-only), or None for any other error."""
        if isinstance(exc, TriageError):
            return None
        if self.path is not None and not self.path.is_dir():
            return store_gone(self.location)
        if is_disk_full_at(exc, self.path):
            return disk_full(self.location, self.path)
        if is_read_only(exc):
            return read_only(self.location)
        return None

    @property
    def cache_key(self) -> str:
        """Names this store for caches of derived state. The collection's id is new whenever a
        collection is created: two projects with a store at the same relative path, or a store
        deleted and rebuilt, never share a cache."""
        return f"{self.location}#{self.collection.name}#{self.collection.id}"

    # -- writing papers ---------------------------------------------------------

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the store's writer lock: across processes on this machine, one at a time
        (deduplicating and upserting must see what the other writer just stored). A lock
        that cannot be made (a read-only store) is not taken: the write itself then fails.
        Re-entrant: a write inside a held lock does not wait for itself.

        Every write to the collections takes it, not only those that must see each other's
        results: an embedded store's processes each apply the shared write log to the store,
        and two applying at once can apply an older write after a newer one (a paper taken
        out of a list came back)."""
        if self.lock_path is None:
            yield
            return
        with self._thread_lock:
            if self._holding:
                yield
                return
            if self.path is not None and not self.path.is_dir():
                raise store_gone(self.location)  # its lock file would make the folder again
            with _file_lock(self.lock_path, make_dir=self.path is None):
                self._holding = True
                try:
                    yield
                finally:
                    self._holding = False

    def upsert_papers(
        self,
        papers: Iterable[Paper],
        provenance: Sequence[tuple[str, str | None]] | None = None,
        on_embedded: Callable[[int], None] | None = None,
    ) -> UpsertReport:
        """Add new papers, merge records of papers already stored; decisions and assessments survive.

        Only papers whose text changed are (re-)embedded. `provenance`, one per paper, says
        which record each was before deduplication gave it a stored paper's id (its own id, and
        how it was recognised): a record merged into a paper of another identity is logged on
        that paper, to be shown and split off again (`split`).
        """
        incoming: dict[str, Paper] = {}
        records: dict[str, list[tuple[Paper, str | None]]] = {}
        for i, paper in enumerate(papers):
            incoming[paper.id] = incoming[paper.id].merged_with(paper) if paper.id in incoming else paper
            original, how = provenance[i] if provenance is not None else (paper.id, None)
            records.setdefault(paper.id, []).append((paper.model_copy(update={"id": original}), how))
        report = UpsertReport()
        ids = list(incoming)
        try:
            with self.write_lock():
                for start in range(0, len(ids), self._batch):
                    chunk = ids[start : start + self._batch]
                    self._upsert_chunk(
                        [incoming[i] for i in chunk], report, {i: records[i] for i in chunk}, on_embedded
                    )
        finally:
            self._prepared.clear()  # prepared for this write; what it did not need is dropped
        return report

    def _upsert_chunk(
        self,
        papers: list[Paper],
        report: UpsertReport,
        records: dict[str, list[tuple[Paper, str | None]]],
        on_embedded: Callable[[int], None] | None = None,
    ) -> None:
        existing = self.collection.get(ids=[p.id for p in papers], include=["documents", "metadatas"])
        metas = {
            pid: cast(dict[str, Any], meta)
            for pid, meta in zip(existing["ids"], existing["metadatas"] or [], strict=True)
        }
        current = {
            pid: _paper_from(pid, doc, metas[pid])
            for pid, doc in zip(existing["ids"], existing["documents"] or [], strict=True)
        }
        logs = {}
        for paper in papers:
            log = _merge_log(paper.id, current.get(paper.id), metas.get(paper.id), records[paper.id])
            if log is not None:
                logs[paper.id] = {"merges": log.model_dump_json()}
        added_at = now_utc().isoformat()
        new = [p for p in papers if p.id not in current]
        text_changed: list[Paper] = []
        meta_changed: list[Paper] = []
        for paper in papers:
            if paper.id not in current:
                continue
            merged = current[paper.id].merged_with(paper)
            if merged == current[paper.id]:
                report.unchanged.append(paper.id)
            elif merged.document != current[paper.id].document:
                text_changed.append(merged)
            else:
                meta_changed.append(merged)
        if new:
            # Embed first, stamp after: a reader that saw a stamp must also see the row, and
            # embedding a chunk can take longer than a reader's overlap.
            vectors = self.embed([p.document for p in new], on_embedded)
            self.collection.add(
                ids=[p.id for p in new],
                documents=[p.document for p in new],
                embeddings=vectors,
                metadatas=[
                    _drop_none(
                        {
                            **paper_metadata(p),
                            **decision_metadata(Decision()),
                            "added_at": added_at,
                            **logs.pop(p.id, {}),
                        }
                    )
                    for p in new
                ],
            )
            report.new.extend(p.id for p in new)
        if text_changed:
            vectors = self.embed([p.document for p in text_changed], on_embedded)
            self.collection.update(
                ids=[p.id for p in text_changed],
                documents=[p.document for p in text_changed],
                embeddings=vectors,
                metadatas=[{**paper_metadata(p), **logs.pop(p.id, {})} for p in text_changed],
            )
        if meta_changed:
            self.collection.update(
                ids=[p.id for p in meta_changed],
                metadatas=[{**paper_metadata(p), **logs.pop(p.id, {})} for p in meta_changed],
            )
        if logs:  # merged records that added nothing are logged all the same
            self.collection.update(ids=list(logs), metadatas=list(logs.values()))
        report.merged.extend(p.id for p in [*text_changed, *meta_changed])

    def absorb(self, keep_id: str, drop_id: str, how: str) -> None:
        """Merge a duplicate record into the paper it duplicates, then delete it: fields,
        decision (the newer decided status; notes, tags and lists of both), assessment (the
        newer) and first arrival are combined, and the merge is logged (`split` undoes it)."""
        with self.write_lock():
            self._absorb(keep_id, drop_id, how)

    def _absorb(self, keep_id: str, drop_id: str, how: str) -> None:
        found = {s.paper.id: s for s in self.get_many([keep_id, drop_id])}
        if keep_id not in found or drop_id not in found:
            return
        keep, drop = found[keep_id], found[drop_id]
        metas = dict(self.metadata([keep_id]))  # the merge log (rare path: a second small read)
        paper = keep.paper.merged_with(drop.paper.model_copy(update={"id": keep_id}))
        a, b = keep.decision, drop.decision
        if a.status is Status.NEW or (b.status is not Status.NEW and _newer(b.decided_at, a.decided_at)):
            first, second = b, a
        else:
            first, second = a, b
        decision = first.model_copy(
            update={
                "starred": a.starred or b.starred,
                "note": "\n".join(dict.fromkeys(n for n in (first.note, second.note) if n)),
                "tags": list(dict.fromkeys([*a.tags, *b.tags])),
                "lists": list(dict.fromkeys([*a.lists, *b.lists])),
            }
        )
        assessment = keep.assessment
        if drop.assessment is not None and (
            assessment is None or drop.assessment.created_at > assessment.created_at
        ):
            assessment = drop.assessment
        log = _merge_log(keep_id, keep.paper, metas.get(keep_id), [(drop.paper, how)])
        added = min((t for t in (keep.added_at, drop.added_at) if t is not None), default=None)
        update: dict[str, Any] = {
            **paper_metadata(paper),
            **decision_metadata(decision),
            **assessment_metadata(assessment),
            "merges": log.model_dump_json() if log else None,
        }
        if added is not None:
            update["added_at"] = added.isoformat()
        if assessment is not None and assessment is keep.assessment and keep.failure is not None:
            update.update({"failed_key": keep.failure[0], "failed_reason": keep.failure[1]})
        self._rewrite(paper, keep.paper.document, update)
        self.collection.delete(ids=[drop_id])

    def delete_papers(self, ids: Sequence[str]) -> int:
        """Remove papers (with their decisions, assessments and list memberships); returns how
        many were there. Reading lists themselves stay."""
        present = [i for i in dict.fromkeys(ids) if i]
        found = 0
        with self.write_lock():
            for start in range(0, len(present), self._batch):
                chunk = present[start : start + self._batch]
                there = self.collection.get(ids=chunk, include=[])["ids"]
                if there:
                    self.collection.delete(ids=list(there))
                    found += len(there)
        return found

    def records(self, ids: Sequence[str]) -> list[PaperRecord]:
        """These papers as stored, vectors included, in the order given (unknown ids are left
        out): read them before `delete_papers` and `restore_records` undoes the delete."""
        by_id: dict[str, PaperRecord] = {}
        for start in range(0, len(ids), self._batch):
            res = self.collection.get(
                ids=list(ids[start : start + self._batch]), include=["documents", "metadatas", "embeddings"]
            )
            vectors: list[Any] = (
                [None] * len(res["ids"]) if res["embeddings"] is None else list(res["embeddings"])
            )
            for pid, doc, meta, vec in zip(
                res["ids"], res["documents"] or [], res["metadatas"] or [], vectors, strict=True
            ):
                vector = list(map(float, vec)) if vec is not None and len(vec) else None
                by_id[pid] = PaperRecord(pid, doc or "", dict(meta or {}), vector)
        return [by_id[i] for i in ids if i in by_id]

    def restore_records(self, records: Sequence[PaperRecord]) -> list[str]:
        """Put deleted papers back as they were: text, vector, decision, assessment, lists and
        when they were added. They are stamped as just written, so open views take them in. A
        paper stored again meanwhile (a re-import) is left as it is now. Returns the ids put back."""
        restored: list[str] = []
        with self.write_lock():
            for start in range(0, len(records), self._batch):
                chunk = list(records[start : start + self._batch])
                present = self.stored_ids([r.id for r in chunk])
                chunk = [r for r in dict((r.id, r) for r in chunk).values() if r.id not in present]
                if not chunk:
                    continue
                missing = [r for r in chunk if r.embedding is None]
                made = iter(self.embed([r.document for r in missing]) if missing else [])
                vectors = [r.embedding if r.embedding is not None else next(made) for r in chunk]
                stamp = time.time()
                self.collection.add(
                    ids=[r.id for r in chunk],
                    documents=[r.document for r in chunk],
                    embeddings=vectors,
                    metadatas=[{**r.metadata, "touched": stamp} for r in chunk],
                )
                restored.extend(r.id for r in chunk)
        return restored

    def merge_log(self, paper_id: str) -> MergeLog | None:
        """The records merged into this paper from papers of another identity, if any."""
        metas = self.metadata([paper_id])
        return _read_log(metas[0][1]) if metas else None

    def split(self, paper_id: str, number: int) -> tuple[Paper, Paper]:
        """Undo one logged merge: the record becomes a paper of its own again, and this paper
        gets back what it was without it. Returns (this paper, the split-off paper)."""
        with self.write_lock():
            found = self.collection.get(ids=[paper_id], include=["documents", "metadatas"])
            if not found["ids"]:
                raise StoreError(f"no paper with id {paper_id!r} in the store")
            meta = cast(dict[str, Any], (found["metadatas"] or [{}])[0])
            current = _paper_from(paper_id, (found["documents"] or [""])[0], meta)
            log = _read_log(meta)
            if log is None or not log.entries:
                raise StoreError(f"nothing was merged into {paper_id}: there is nothing to split")
            if not 1 <= number <= len(log.entries):
                raise StoreError(
                    f"{paper_id} has {len(log.entries)} merged records: give 1-{len(log.entries)}"
                )
            entry = log.entries[number - 1]
            record = entry.record
            if record.id == paper_id or self.collection.get(ids=[record.id], include=[])["ids"]:
                raise StoreError(
                    f"the merged record's own id {record.id} is taken: it cannot become a paper of its own"
                )
            rest = [e for i, e in enumerate(log.entries) if i != number - 1]
            restored = _unmerged(current, log, rest)
            self.upsert_papers([record])
            new_log = MergeLog(base=log.base, entries=rest) if rest else None
            update = {**paper_metadata(restored), "merges": new_log.model_dump_json() if new_log else None}
            self._rewrite(restored, current.document, update)
            return restored, record

    def _rewrite(self, paper: Paper, old_document: str, metadata: dict[str, Any]) -> None:
        """Write a paper's metadata, and its text and embedding if the text changed."""
        if paper.document == old_document:
            self.collection.update(ids=[paper.id], metadatas=[metadata])
            return
        self.collection.update(
            ids=[paper.id],
            documents=[paper.document],
            embeddings=self.embed([paper.document]),
            metadatas=[metadata],
        )

    def prepare_embeddings(
        self, texts: Sequence[str], on_progress: Callable[[int], None] | None = None
    ) -> None:
        """Embed texts ahead of the write that stores them, before taking the writer lock: the
        next `embed` of these texts in this process takes them from here. Embedding is the slow
        part of an import, and other processes' writes (a decision in the review UI) wait for
        the lock."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._prepared]
        if todo:
            self._prepared.update(zip(todo, self._embed(todo, on_progress), strict=True))

    def embed(self, texts: list[str], on_progress: Callable[[int], None] | None = None) -> list[Any]:
        """Embed texts with the store's embedder (those prepared ahead are taken as they are);
        `on_progress` is told how many are done as the embedder's batches finish (or once at the
        end, for an embedder that cannot say)."""
        ready = {t: self._prepared.pop(t) for t in set(texts) if t in self._prepared}
        missing = [t for t in texts if t not in ready]
        fresh = iter(self._embed(missing, on_progress) if missing else [])
        return [ready[t] if t in ready else next(fresh) for t in texts]

    def _embed(self, texts: list[str], on_progress: Callable[[int], None] | None = None) -> list[Any]:
        if on_progress is not None and hasattr(self.embedder, "on_batch"):
            self.embedder.on_batch = on_progress
            try:
                return list(self.embedder(texts))
            finally:
                self.embedder.on_batch = None
        vectors = list(self.embedder(texts))
        if on_progress is not None:
            on_progress(len(texts))
        return vectors

    def find_known(
        self, ids: Sequence[str], arxiv_ids: Sequence[str], dois: Sequence[str], keys: Sequence[str]
    ) -> list[tuple[str, str | None, str | None, str]]:
        """(id, arxiv_id, doi, title_key) of stored papers that may be one of these, by indexed lookups."""
        return [
            (p.id, p.arxiv_id, p.doi, normalize_title(p.title))
            for p in self.find_candidates(ids, arxiv_ids, dois, keys)
        ]

    def find_candidates(
        self, ids: Sequence[str], arxiv_ids: Sequence[str], dois: Sequence[str], keys: Sequence[str]
    ) -> list[Paper]:
        """Stored papers (without their abstracts) that may be one of these: those with these
        ids, arXiv ids, DOIs, normalised titles or title blocks, by indexed lookups."""
        blocks = sorted({b for key in keys for b in title_keys(key)})
        queries: list[Where] = []
        for field_name, values in (
            ("arxiv_id", arxiv_ids),
            ("doi", dois),
            ("title_key", keys),
            ("title_head", blocks),
            ("title_tail", blocks),
        ):
            unique = sorted(set(values))
            for start in range(0, len(unique), 500):
                queries.append({field_name: {"$in": unique[start : start + 500]}})
        found: dict[str, Paper] = {}
        results = [self.collection.get(ids=list(dict.fromkeys(ids)), include=["metadatas"])] if ids else []
        results += [self.collection.get(where=q, include=["metadatas"]) for q in queries]
        for res in results:
            for pid, meta in zip(res["ids"], res["metadatas"] or [], strict=True):
                if pid not in found:
                    found[pid] = _paper_from(pid, None, dict(meta or {}))
        return list(found.values())

    def resolve_ids(self, ids: Sequence[str]) -> list[str]:
        """Each id as the store has it: a paper's own id, else for a `doi:` or `arxiv:` id the
        paper that carries that DOI or arXiv id (a paper with both is stored under its arXiv
        id); an id nothing matches comes back unchanged."""
        if not ids:
            return []
        known = self.stored_ids(ids)
        missing = [i for i in ids if i not in known]
        dois = {i.removeprefix("doi:"): i for i in missing if i.startswith("doi:")}
        arxiv = {i.removeprefix("arxiv:"): i for i in missing if i.startswith("arxiv:")}
        found: dict[str, str] = {}
        if dois or arxiv:
            for pid, arxiv_id, doi, _ in self.find_known([], sorted(arxiv), sorted(dois), []):
                if doi in dois:
                    found.setdefault(dois[doi], pid)
                if arxiv_id in arxiv:
                    found.setdefault(arxiv[arxiv_id], pid)
        return [found.get(i, i) for i in ids]

    # -- reading ----------------------------------------------------------------

    def get(self, paper_id: str) -> StoredPaper | None:
        found = self.get_many([paper_id])
        return found[0] if found else None

    def get_many(self, ids: Sequence[str]) -> list[StoredPaper]:
        """The stored papers with these ids, in the order given; unknown ids are left out."""
        by_id: dict[str, StoredPaper] = {}
        for start in range(0, len(ids), self._batch):
            res = self.collection.get(
                ids=list(ids[start : start + self._batch]), include=["documents", "metadatas"]
            )
            for pid, doc, meta in zip(
                res["ids"], res["documents"] or [], res["metadatas"] or [], strict=True
            ):
                by_id[pid] = _stored_from(pid, doc, cast(dict[str, Any], meta))
        return [by_id[i] for i in ids if i in by_id]

    def iter_all(self, where: Where | None = None, page_size: int = PAGE_SIZE) -> Iterator[StoredPaper]:
        """Every stored paper (matching `where`), read page by page."""
        offset = 0
        while True:
            res = self.collection.get(
                where=where, limit=page_size, offset=offset, include=["documents", "metadatas"]
            )
            for pid, doc, meta in zip(
                res["ids"], res["documents"] or [], res["metadatas"] or [], strict=True
            ):
                yield _stored_from(pid, doc, cast(dict[str, Any], meta))
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def iter_metadata(
        self, where: Where | None = None, page_size: int = 500
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, raw metadata) of every paper (matching `where`), page by page, without documents."""
        offset = 0
        while True:
            res = self.collection.get(where=where, limit=page_size, offset=offset, include=["metadatas"])
            for pid, meta in zip(res["ids"], res["metadatas"] or [], strict=True):
                yield pid, dict(meta or {})
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def metadata(self, ids: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        """(id, raw metadata) of these papers; unknown ids are left out."""
        res = self.collection.get(ids=list(ids), include=["metadatas"])
        return [(pid, dict(meta or {})) for pid, meta in zip(res["ids"], res["metadatas"] or [], strict=True)]

    def iter_ids(self, where: Where | None = None, page_size: int = 5000) -> Iterator[str]:
        offset = 0
        while True:
            res = self.collection.get(where=where, limit=page_size, offset=offset, include=[])
            yield from res["ids"]
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def embeddings(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of these papers."""
        out: dict[str, list[float]] = {}
        for start in range(0, len(ids), self._batch):
            res = self.collection.get(ids=list(ids[start : start + self._batch]), include=["embeddings"])
            vectors = res["embeddings"]
            if vectors is None:
                continue
            for pid, vec in zip(res["ids"], vectors, strict=True):
                out[pid] = list(map(float, vec))
        return out

    def texts(self, ids: Sequence[str]) -> list[tuple[str, str, list[float] | None]]:
        """(id, document, vector or None) of these papers; unknown ids are left out."""
        out: list[tuple[str, str, list[float] | None]] = []
        for start in range(0, len(ids), self._batch):
            res = self.collection.get(
                ids=list(ids[start : start + self._batch]), include=["documents", "embeddings"]
            )
            out.extend(_texts(res))
        return out

    def iter_texts(self, page_size: int = PAGE_SIZE) -> Iterator[tuple[str, str, list[float] | None]]:
        """(id, document, vector or None) of every paper, page by page."""
        offset = 0
        while True:
            res = self.collection.get(limit=page_size, offset=offset, include=["documents", "embeddings"])
            yield from _texts(res)
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def search(self, text: str, k: int = 10, where: Where | None = None) -> list[SearchHit]:
        """The k papers nearest in meaning to `text` (optionally filtered by metadata)."""
        total = self.count()
        if total == 0:
            return []
        return _hits(
            self.collection.query(
                query_texts=[text],
                n_results=min(k, total),
                where=where,
                include=["documents", "metadatas", "distances"],
            )
        )

    def neighbours(self, paper_id: str, k: int = 20) -> list[SearchHit]:
        """The k papers nearest in meaning to a stored paper (itself left out)."""
        vectors = self.embeddings([paper_id])
        if paper_id not in vectors:
            raise StoreError(f"no paper with id {paper_id!r} in the store")
        hits = _hits(
            self.collection.query(
                query_embeddings=[vectors[paper_id]],  # type: ignore[arg-type]
                n_results=min(k + 1, self.count()),
                include=["documents", "metadatas", "distances"],
            )
        )
        return [h for h in hits if h.item.paper.id != paper_id][:k]

    def count(self, where: Where | None = None) -> int:
        if where is None:
            return self.collection.count()
        return sum(1 for _ in self.iter_ids(where))

    def counts_by_status(self) -> dict[Status, int]:
        return {status: self.count({"status": status.value}) for status in Status}

    # -- updating without re-embedding ---------------------------------------------

    def set_assessment(self, paper_id: str, assessment: Assessment) -> None:
        self.set_assessments({paper_id: assessment})

    def set_assessments(self, assessments: dict[str, Assessment]) -> None:
        """Record assessments (metadata only: nothing is re-embedded)."""
        self._write({pid: assessment_metadata(a) for pid, a in assessments.items()})

    def set_failures(self, failures: dict[str, tuple[str, str]]) -> None:
        """Record failed assessments (id -> (cache key, reason)); an earlier assessment is kept."""
        stamp = time.time()
        self._write(
            {
                pid: {"failed": True, "failed_key": key, "failed_reason": reason[:1000], "touched": stamp}
                for pid, (key, reason) in failures.items()
            }
        )

    def tag_vocabulary(self, limit: int = 200) -> list[str]:
        """The tags in use, most used first (engine tags and the researcher's own)."""
        counts: dict[str, int] = {}
        offset = 0
        while True:
            res = self.collection.get(limit=5000, offset=offset, include=["metadatas"])
            for meta in res["metadatas"] or []:
                for tag in [*(meta.get("tags") or []), *(meta.get("user_tags") or [])]:  # type: ignore[misc]
                    counts[str(tag)] = counts.get(str(tag), 0) + 1
            if len(res["ids"]) < 5000:
                break
            offset += 5000
        return sorted(counts, key=lambda t: (-counts[t], t))[:limit]

    def set_decision(self, paper_id: str, decision: Decision) -> None:
        self.set_decisions({paper_id: decision})

    def set_decisions(self, decisions: dict[str, Decision]) -> None:
        """Record decisions (metadata only)."""
        self._write({pid: decision_metadata(d) for pid, d in decisions.items()})

    def set_added(self, added: dict[str, datetime]) -> None:
        """Set when papers were first added (a restore keeps the original time)."""
        stamp = time.time()
        self._write({pid: {"added_at": when.isoformat(), "touched": stamp} for pid, when in added.items()})

    def update_decision(self, paper_id: str, **changes: Any) -> Decision:
        """Change some fields of a paper's decision and return the new decision."""
        item = self.get(paper_id)
        if item is None:
            raise StoreError(f"no paper with id {paper_id!r} in the store")
        decision = Decision.model_validate({**item.decision.model_dump(), **changes, "decided_at": now_utc()})
        self.set_decision_fields(paper_id, decision, changes)
        return decision

    def set_decision_fields(self, paper_id: str, decision: Decision, fields: Iterable[str]) -> None:
        """Write only these fields of a decision (and when it was made): what other processes
        changed in the rest of it (a note, a list) survives."""
        keys = {_DECISION_KEYS[f] for f in fields} | {"decided_at", "touched", "seed"}
        self._write({paper_id: {k: v for k, v in decision_metadata(decision).items() if k in keys}})

    def set_status(self, ids: Sequence[str], status: Status, *, seed: bool = False) -> None:
        """Give these papers a status (only the status and when it was decided are written);
        `seed` marks decisions that come from an import, not from working down the queue."""
        stamp, when = time.time(), now_utc().isoformat()
        meta = {"status": status.value, "decided_at": when, "touched": stamp, "seed": True if seed else None}
        self._write({pid: dict(meta) for pid in ids})

    def set_memberships(self, changes: dict[str, dict[str, bool]]) -> None:
        """Put papers in reading lists or take them out: {paper id: {list name: member?}}.
        Only those lists' keys are written, so concurrent changes to other lists survive."""
        stamp = time.time()
        writes: dict[str, dict[str, Any]] = {}
        for pid, names in changes.items():
            writes[pid] = {list_key(n): True if member else None for n, member in names.items()}
            writes[pid]["touched"] = stamp
        self._write(writes)

    def _convert_lists(self) -> None:
        """Move a store made before per-list keys to them: one record per list definition, one
        metadata key per membership. Idempotent; a store that cannot be written (a read-only
        mount) keeps the old form, which reads still understand."""
        legacy = self.get_value(LEGACY_LIST_TABLE)
        if not isinstance(legacy, dict):
            return
        try:
            with_legacy: set[str] = set()
            for name, value in legacy.items():
                self.put_named_record(LIST_RECORD, {**value, "name": name})
                members = list(self.iter_ids({LEGACY_LISTS: {"$contains": name}}))
                self._write({pid: {list_key(name): True} for pid in members})
                with_legacy.update(members)
            self._write({pid: {LEGACY_LISTS: None} for pid in with_legacy})
            with self.write_lock():
                self.meta.delete(ids=[LEGACY_LIST_TABLE])
        except Exception as exc:  # a store that cannot be written (a server's) stays as it is
            if not is_read_only(exc):
                raise

    # -- named records (saved feeds and their state) ------------------------------------

    def named_records(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every record of a kind (`feed`, `feed-state`, LIST_RECORD for reading-list
        definitions) kept in the meta collection, by name: one record each, so writers of two
        never clash."""
        res = self.meta.get(where={"kind": kind}, include=["documents"])
        out = {}
        for doc in res["documents"] or []:
            value = json.loads(doc) if doc else None
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                out[value["name"]] = value
        return out

    def put_named_record(self, kind: str, value: dict[str, Any]) -> None:
        """Create or replace one named record (`value["name"]` names it)."""
        with self.write_lock():
            self.meta.upsert(
                ids=[self._named_record_id(kind, value["name"])],
                documents=[json.dumps(value, ensure_ascii=False)],
                metadatas=[{"kind": kind}],
                embeddings=[[0.0]],  # type: ignore[arg-type]
            )

    def delete_named_record(self, kind: str, name: str) -> None:
        with self.write_lock():
            self.meta.delete(ids=[self._named_record_id(kind, name)])

    @staticmethod
    def _named_record_id(kind: str, name: str) -> str:
        return f"{kind}:{hashlib.sha256(name.encode('utf-8')).hexdigest()[:32]}"

    def set_paper_values(self, values: dict[str, dict[str, Any]]) -> None:
        """Write some metadata keys of stored papers that no other method owns (such as when
        enrichment last looked a paper up); None removes a key. Not a change readers refresh on."""
        self._write(values)

    def changed_since(self, stamp: float) -> list[tuple[str, dict[str, Any]]]:
        """(id, metadata) of papers added or written after `stamp` (seconds since the epoch)."""
        return list(self.iter_metadata({"touched": {"$gt": stamp}}))

    def _write(self, metadatas: dict[str, dict[str, Any]]) -> None:
        """Write some metadata keys of stored papers (None removes a key), in batches."""
        ids = list(metadatas)
        with self.write_lock():
            self._require(ids)
            for start in range(0, len(ids), self._batch):
                chunk = ids[start : start + self._batch]
                self.collection.update(ids=chunk, metadatas=[metadatas[i] for i in chunk])

    def stored_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids are stored papers (an id may be given more than once)."""
        unique = list(dict.fromkeys(ids))
        found: set[str] = set()
        for start in range(0, len(unique), self._batch):
            found.update(self.collection.get(ids=unique[start : start + self._batch], include=[])["ids"])
        return found

    def _require(self, ids: Sequence[str]) -> None:
        found = self.stored_ids(ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise StoreError(f"no paper with id {missing[0]!r} in the store")

    # -- store-wide values -----------------------------------------------------------

    def get_value(self, key: str) -> Any:
        res = self.meta.get(ids=[key], include=["documents"])
        docs = res["documents"] or []
        return json.loads(docs[0]) if docs and docs[0] else None

    def set_value(self, key: str, value: Any) -> None:
        with self.write_lock():
            self.meta.upsert(ids=[key], documents=[json.dumps(value)], embeddings=[[0.0]])  # type: ignore[arg-type]


def _texts(res: Any) -> list[tuple[str, str, list[float] | None]]:
    vectors = res["embeddings"]
    if vectors is None:
        vectors = [None] * len(res["ids"])
    return [
        (pid, doc or "", list(map(float, vec)) if vec is not None and len(vec) else None)
        for pid, doc, vec in zip(res["ids"], res["documents"] or [], vectors, strict=True)
    ]


def _hits(res: Any) -> list[SearchHit]:
    """A one-query Chroma result as search hits, nearest first."""
    return [
        SearchHit(_stored_from(pid, doc, cast(dict[str, Any], meta)), float(dist))
        for pid, doc, meta, dist in zip(
            res["ids"][0],
            (res["documents"] or [[]])[0],
            (res["metadatas"] or [[]])[0],
            (res["distances"] or [[]])[0],
            strict=True,
        )
    ]


@contextmanager
def _creating(settings: Settings) -> Iterator[None]:
    """Hold a lock while an embedded store is created: two processes creating the same new
    store at once both run Chroma's schema migrations, and the second fails ("table
    collections already exists"). An existing store is opened without the lock."""
    if settings.chroma_url or (settings.store / "chroma.sqlite3").exists():
        yield
        return
    with _file_lock(settings.store / "triage-create.lock"):
        yield


@contextmanager
def _file_lock(path: Path, make_dir: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on `path` across processes on this machine; a lock file that
    cannot be made (a read-only store) is not taken: what the lock guards then fails itself.
    `make_dir`: make the lock's folder if it is missing (never a store's own folder)."""
    try:
        if make_dir:
            path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+b")  # noqa: SIM115 - held for the block
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _http_client(url: str) -> ClientAPI:
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise StoreError(f"invalid Chroma URL {url!r}: expected e.g. http://127.0.0.1:8000")
    ssl = parsed.scheme == "https"
    port = parsed.port or (443 if ssl else 8000)
    client = chromadb.HttpClient(host=parsed.hostname, port=port, ssl=ssl, settings=_chroma_settings())
    # Chroma's client waits for ever; a server that stopped answering (one seen stuck after its
    # disk filled) must end the command with a message instead.
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is not None and hasattr(session, "timeout"):
        session.timeout = httpx.Timeout(SERVER_TIMEOUT, connect=10.0)
    return client


SERVER_TIMEOUT = 120.0  # seconds a Chroma server may take to answer one request


def _forget_client(path: Path) -> None:
    """Drop Chroma's cached client of a store that failed to open: it caches clients by path
    in the process, and the next open would get the broken one back."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(path.resolve()), None)
        SharedSystemClient._identifier_to_refcount.pop(str(path.resolve()), None)
    except (ImportError, AttributeError, OSError):
        pass


def _chroma_settings() -> ChromaSettings:
    return ChromaSettings(anonymized_telemetry=False)
