"""Reading papers: by id, page by page, by meaning (search, neighbours), counts, and the
lookups deduplication uses to find a paper by its identifiers. Nothing here writes."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from assistant.errors import StoreError
from assistant.models import Paper, Status, StoredPaper, normalize_title
from assistant.store.connection import Connection
from assistant.store.mirror import PAPERS
from assistant.store.schema import Where, _paper_from, _stored_from, title_keys

PAGE_SIZE = 1000
T = TypeVar("T")
# The settings of an embedder (its Chroma config) that change the vectors it makes; the others
# (a batch size, where an API key is read from) do not.
VECTOR_SETTINGS = ("model_name", "model", "model_id", "dimensions", "max_tokens", "normalize_embeddings")


@dataclass
class SearchHit:
    """A paper found by meaning, and its cosine distance from what was looked for."""

    item: StoredPaper
    distance: float

    @property
    def similarity(self) -> float:
        return 1.0 - self.distance


class Reads(Connection):
    """Every read of the papers: by id, page by page, by meaning, counts, and lookups by identifier."""

    # -- by id -----------------------------------------------------------------

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

    def metadata(self, ids: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        """(id, raw metadata) of these papers; unknown ids are left out."""
        res = self.collection.get(ids=list(ids), include=["metadatas"])
        return [(pid, dict(meta or {})) for pid, meta in zip(res["ids"], res["metadatas"] or [], strict=True)]

    def stored_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids are stored papers (an id may be given more than once)."""
        unique = list(dict.fromkeys(ids))
        found: set[str] = set()
        for start in range(0, len(unique), self._batch):
            found.update(self.collection.get(ids=unique[start : start + self._batch], include=[])["ids"])
        return found

    def embeddings(self, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of these papers."""
        return {pid: list(map(float, vec)) for pid, vec in self.embedding_arrays(ids).items()}

    def embedding_arrays(self, ids: Sequence[str]) -> dict[str, Any]:
        """The stored vectors of these papers as float32 arrays, what a matrix of them is made
        from (every paper's vector as Python floats took ~3 s of CPU at 100k papers)."""
        import numpy as np

        out: dict[str, Any] = {}
        for start in range(0, len(ids), self._batch):
            res = self.collection.get(ids=list(ids[start : start + self._batch]), include=["embeddings"])
            vectors = res["embeddings"]
            if vectors is None:
                continue
            for pid, vec in zip(res["ids"], vectors, strict=True):
                out[pid] = np.asarray(vec, dtype=np.float32)
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """(document, vector as little-endian float32 bytes) of these papers, by id: the text
        each vector was made of, and the vector as Chroma keeps it, compactly."""
        import numpy as np

        out: dict[str, tuple[str, bytes]] = {}
        for start in range(0, len(ids), self._batch):
            res = self.collection.get(
                ids=list(ids[start : start + self._batch]), include=["documents", "embeddings"]
            )
            vectors = res["embeddings"]
            if vectors is None:
                continue
            for pid, doc, vec in zip(res["ids"], res["documents"] or [], vectors, strict=True):
                if vec is not None and len(vec):
                    out[pid] = (doc or "", np.asarray(vec, dtype="<f4").tobytes())
        return out

    def embedder_identity(self) -> str:
        """Which embedder makes this store's vectors, as Chroma records it for the collection:
        its registered name and the settings that change its vectors
        (`paper-triage-minilm-int8 max_tokens=256`). Vectors made by an embedder of another
        identity are not this store's to take."""
        name = getattr(self.embedder, "name", None)
        ident = str(name()) if callable(name) else type(self.embedder).__name__
        get_config = getattr(self.embedder, "get_config", None)
        config = get_config() if callable(get_config) else {}
        shown = [f"{k}={config[k]}" for k in VECTOR_SETTINGS if config.get(k) is not None]
        return " ".join([ident, *shown])

    def vector_length(self) -> int | None:
        """How many numbers this store's vectors have: as Chroma knows it once one is stored,
        else as the embedder says (None when neither can say without embedding)."""
        model = getattr(self.collection, "_model", None)
        known = getattr(model, "dimension", None)
        if known:
            return int(known)
        from assistant.embedding import DIMENSIONS, MiniLMEmbedder

        if isinstance(self.embedder, MiniLMEmbedder):
            return DIMENSIONS
        get_config = getattr(self.embedder, "get_config", None)
        config = get_config() if callable(get_config) else {}
        return int(config["dimensions"]) if isinstance(config.get("dimensions"), int) else None

    def documents(self, ids: Sequence[str]) -> dict[str, str]:
        """The text (title and abstract) of these papers, by id; unknown ids are left out.
        Read from the mirror while it is current: no vectors, no Chroma."""
        out: dict[str, str] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), self._batch):
            res = self.collection.get(ids=unique[start : start + self._batch], include=["documents"])
            out.update(zip(res["ids"], [d or "" for d in res["documents"] or []], strict=True))
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

    # -- from the mirror, by row -------------------------------------------------

    def listing(self, where: Where | None = None) -> tuple[str, list[tuple[int, str, int]]] | None:
        """The papers matching `where` as the mirror numbers them: (its generation, [(row
        number, id, number of the write that last changed it)]), in the store's order; None when
        the store has no current mirror. A row's numbers name one state of one paper, for
        caches of what is derived from it (`assistant.export.bibcache`)."""
        if self.mirror is None or not self.mirror_current():
            return None
        return self.mirror.listing(PAPERS, self.view.where(where))

    def numbered(self, numbers: Sequence[int]) -> list[tuple[int, int, StoredPaper]]:
        """(row number, write number, stored paper) of these rows of the mirror, in order
        (those no longer there left out)."""
        if self.mirror is None:
            return []
        return [
            (n, seq, _stored_from(pid, doc, self.view.read(meta)))
            for n, pid, seq, doc, meta in self.mirror.numbered(numbers)
        ]

    def per_paper(
        self,
        name: str,
        key: Hashable,
        compute: Callable[[str, str, dict[str, Any]], T],
        documents: bool = True,
    ) -> list[T] | None:
        """`compute(id, document, metadata)` of every paper, in order, worked out again only for
        the papers written since the last time (`assistant.store.derived`); None when the store
        has no current mirror (the caller reads every paper)."""
        from assistant.store.derived import per_paper

        return per_paper(self, name, key, compute, documents)

    # -- page by page ----------------------------------------------------------

    def iter_all(self, where: Where | None = None, page_size: int = PAGE_SIZE) -> Iterator[StoredPaper]:
        """Every stored paper (matching `where`), read page by page."""
        for pid, doc, meta in self.iter_records(where, page_size):
            yield _stored_from(pid, doc, meta)

    def iter_metadata(
        self, where: Where | None = None, page_size: int = 500, *, stored: bool = False
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, raw metadata) of every paper (matching `where`), page by page, without documents.
        `stored`: every person's keys as stored (`assistant.store.people`), `where` on them too."""
        offset = 0
        while True:
            read = self.get_stored if stored else self.collection.get
            res = read(where=where, limit=page_size, offset=offset, include=["metadatas"])
            for pid, meta in zip(res["ids"], res["metadatas"] or [], strict=True):
                yield pid, dict(meta or {})
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def iter_records(
        self, where: Where | None = None, page_size: int = PAGE_SIZE
    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """(id, document, raw metadata) of every paper (matching `where`), page by page: what
        a count over the store reads without making each paper's models."""
        offset = 0
        while True:
            res = self.collection.get(
                where=where, limit=page_size, offset=offset, include=["documents", "metadatas"]
            )
            for pid, doc, meta in zip(
                res["ids"], res["documents"] or [], res["metadatas"] or [], strict=True
            ):
                yield pid, doc or "", dict(meta or {})
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def iter_ids(self, where: Where | None = None, page_size: int = 5000) -> Iterator[str]:
        offset = 0
        while True:
            res = self.collection.get(where=where, limit=page_size, offset=offset, include=[])
            yield from res["ids"]
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def iter_texts(self, page_size: int = PAGE_SIZE) -> Iterator[tuple[str, str, list[float] | None]]:
        """(id, document, vector or None) of every paper, page by page."""
        offset = 0
        while True:
            res = self.collection.get(limit=page_size, offset=offset, include=["documents", "embeddings"])
            yield from _texts(res)
            if len(res["ids"]) < page_size:
                return
            offset += page_size

    def changed_since(self, stamp: float) -> list[tuple[str, dict[str, Any]]]:
        """(id, metadata) of papers added or written after `stamp` (seconds since the epoch)."""
        return list(self.iter_metadata({"touched": {"$gt": stamp}}))

    # -- by meaning ------------------------------------------------------------

    def search(self, text: str, k: int = 10, where: Where | None = None) -> list[SearchHit]:
        """The k papers nearest in meaning to `text` (optionally filtered by metadata)."""
        total = self.count()
        if total == 0:
            return []
        if self._mirror_serves():
            found = self._nearest(self.query_vector(text), k, where)
            if found is not None:
                return found
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
        hits = self._nearest(vectors[paper_id], k + 1) if self._mirror_serves() else None
        if hits is None:
            hits = _hits(
                self.collection.query(
                    query_embeddings=[vectors[paper_id]],  # type: ignore[arg-type]
                    n_results=min(k + 1, self.count()),
                    include=["documents", "metadatas", "distances"],
                )
            )
        return [h for h in hits if h.item.paper.id != paper_id][:k]

    def query_vector(self, text: str) -> Any:
        """The store's embedder's vector of `text`. The bundled model is run without loading
        Chroma when the store's embedder was not made yet (a search read from the mirror), and
        a search asked again takes the vector it made before (`assistant.store.queries`)."""
        if self._embedder is None and self.settings.embedder in ("minilm-int8", "minilm", "default"):
            from assistant.minilm import DEFAULT_MAX_TOKENS, available_cores, embed
            from assistant.store import queries

            identity = queries.model_identity(DEFAULT_MAX_TOKENS, available_cores())
            return queries.vector(text, identity, lambda t: embed([t])[0])
        return self.embedder([text])[0]

    def _nearest(self, vector: Any, k: int, where: Where | None = None) -> list[SearchHit] | None:
        """The k papers nearest to a vector, by exact cosine distance over the mirror's vectors
        (None when the mirror cannot answer)."""
        assert self.mirror is not None
        found = self.mirror.nearest(PAPERS, vector, k, self.view.where(where))
        if found is None:
            return None
        items = {s.paper.id: s for s in self.get_many([pid for pid, _ in found])}
        return [SearchHit(items[pid], distance) for pid, distance in found if pid in items]

    # -- counting --------------------------------------------------------------

    def count(self, where: Where | None = None) -> int:
        if where is None:
            return self.collection.count()
        return sum(1 for _ in self.iter_ids(where))

    def counts_by_status(self) -> dict[Status, int]:
        return {status: self.count({"status": status.value}) for status in Status}

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

    # -- the papers a record may be (for deduplication) ------------------------

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
