"""Writing papers: upsert with merging (and the merge log), absorbing a duplicate, splitting a
merged record off again, deleting and restoring, and embedding the texts those writes store."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from assistant.errors import StoreError
from assistant.models import Decision, MergeLog, Paper, Status, now_utc
from assistant.store.layout import PAPERS
from assistant.store.merges import _merge_log, _read_log, _unmerged
from assistant.store.people import holds_something, not_mine
from assistant.store.reads import Reads
from assistant.store.schema import (
    _drop_none,
    _paper_from,
    assessment_metadata,
    decision_metadata,
    paper_metadata,
)


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


class Papers(Reads):
    """Writing papers themselves: text, fields and vector."""

    # -- adding and merging ----------------------------------------------------

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
            # As stored, whoever adds them: a new paper is undecided for everyone, and the
            # plain keys (the store's first person's) say so, as the filters on them expect.
            self._write_call(
                PAPERS,
                "add",
                stored=True,
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
        # Other people's decisions and other agendas' assessments of the dropped record stay,
        # where the kept paper has none of its own.
        stored = self.get_stored(ids=[keep_id, drop_id], include=["metadatas"])
        metas = dict(zip(stored["ids"], stored["metadatas"] or [], strict=True))
        kept = not_mine(metas.get(keep_id) or {}, self.view)
        carried = {
            k: v
            for group, values in not_mine(metas.get(drop_id) or {}, self.view).items()
            if holds_something(values) and not holds_something(kept.get(group, {}))
            for k, v in values.items()
        }
        self.update_stored({keep_id: carried} if carried else {})
        self.collection.delete(ids=[drop_id])

    # -- the merge log ---------------------------------------------------------

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

    # -- deleting and putting back ---------------------------------------------

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
            res = self.get_stored(  # every person's keys: a restore puts back everyone's decisions
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
                self._write_call(
                    PAPERS,
                    "add",
                    stored=True,  # the keys as they were stored (`records`)
                    ids=[r.id for r in chunk],
                    documents=[r.document for r in chunk],
                    embeddings=vectors,
                    metadatas=[{**r.metadata, "touched": stamp} for r in chunk],
                )
                restored.extend(r.id for r in chunk)
        return restored

    # -- embedding -------------------------------------------------------------

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

    def provide_embeddings(self, vectors: dict[str, Any]) -> None:
        """Vectors made elsewhere (an export's), by the text each is of: the next write of these
        texts in this process stores them instead of embedding. The caller vouches that they are
        this store's embedder's vectors of exactly these texts (`embedder_identity`)."""
        self._prepared.update(vectors)

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


def _newer(a: datetime | None, b: datetime | None) -> bool:
    return a is not None and (b is None or a > b)
