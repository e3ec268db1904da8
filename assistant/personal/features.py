"""What the personal model reads of every paper: the TF-IDF of its text and its embedding.

Built from the store once (TF-IDF of word 1-2 grams fitted on the store's documents, and the
stored vectors), cached in the user cache directory, and kept current from the store's
`touched` stamps: a refresh reads the text and vector of the papers written since the last
one. The vocabulary is fitted again when the store has grown by a quarter. Like the queue's
index, the cache is derived state: deleting it costs one rebuild.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer

from assistant.cache import cache_file, read_pickle, write_pickle
from assistant.store import Store

CACHE_VERSION = 2
REFIT_GROWTH = 1.25
REFRESH_OVERLAP = 10.0  # seconds: a write is stamped a moment before it commits
WORD_FEATURES = 20_000


def features_cache(location: str, cache_dir: Path | None = None) -> Path:
    """Where the features of the store named `location` (its cache key) are cached."""
    return cache_file("personal", location, cache_dir)


def vectorizer() -> TfidfVectorizer:
    """TF-IDF over word 1-2 grams, sublinear term frequency, English stop words."""
    return TfidfVectorizer(
        ngram_range=(1, 2),
        sublinear_tf=True,
        stop_words="english",
        max_features=WORD_FEATURES,
        dtype=np.float64,
    )


@dataclass
class TextFeatures:
    """Per paper, a row of TF-IDF and the stored vector (zeros for a paper without one)."""

    location: str
    ids: list[str] = field(default_factory=list)
    words: sparse.csr_matrix = field(default_factory=lambda: sparse.csr_matrix((0, 0)))
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    tfidf: TfidfVectorizer | None = None
    fitted_on: int = 0
    stamp: float = 0.0
    position: dict[str, int] = field(default_factory=dict)
    version: int = 0  # bumped whenever a row changes
    digests: dict[str, bytes] = field(default_factory=dict)  # of each paper's text, to skip unchanged ones

    @property
    def built(self) -> bool:
        return self.tfidf is not None

    @property
    def missing_vectors(self) -> int:
        """Papers without a stored embedding (their row of vectors is zeros)."""
        if not len(self.ids):
            return 0
        return int((~self.vectors.any(axis=1)).sum())

    # -- the cache ------------------------------------------------------------------------

    @classmethod
    def open(cls, store: Store, cache_dir: Path | None = None) -> tuple[TextFeatures, str | None]:
        """The cached features of this store (call `refresh` next), and a note when a cache
        was there but could not be read (it is rebuilt)."""
        features = cls(location=store.cache_key)
        path = features.cache_path(cache_dir)
        if not path.exists():
            return features, None
        try:
            data = read_pickle(path)
            if data.get("version") != CACHE_VERSION or data.get("location") != features.location:
                return features, None
            features.ids = list(data["ids"])
            features.words = sparse.csr_matrix(data["words"])
            features.vectors = np.asarray(data["vectors"], dtype=np.float32)
            features.tfidf = data["tfidf"]
            features.fitted_on = int(data["fitted_on"])
            features.stamp = float(data["stamp"])
            features.digests = dict(data["digests"])
            if features.words.shape[0] != len(features.ids) or len(features.vectors) != len(features.ids):
                raise ValueError("rows and ids differ")
        except Exception as exc:  # any unreadable cache is rebuilt from the store
            return cls(location=features.location), (
                f"the personal model's cache {path} could not be read ({type(exc).__name__}); "
                "it is rebuilt from the store"
            )
        features.position = {pid: i for i, pid in enumerate(features.ids)}
        return features, None

    def cache_path(self, cache_dir: Path | None = None) -> Path:
        return features_cache(self.location, cache_dir)

    def save(self, cache_dir: Path | None = None) -> None:
        """Write the cache atomically."""
        payload = {
            "version": CACHE_VERSION,
            "location": self.location,
            "ids": self.ids,
            "words": self.words,
            "vectors": self.vectors,
            "tfidf": self.tfidf,
            "fitted_on": self.fitted_on,
            "stamp": self.stamp,
            "digests": self.digests,
        }
        write_pickle(self.cache_path(cache_dir), payload)

    # -- building and refreshing ----------------------------------------------------------

    def refresh(self, store: Store, on_progress: Callable[[int, int], None] | None = None) -> bool:
        """Bring the features up to date with the store; True if any paper's row changed."""
        started = time.time()
        total = store.count()
        if not self.built or total > REFIT_GROWTH * max(self.fitted_on, 1):
            self.build(store, on_progress)
            self.stamp = started
            return True
        changed = [pid for pid, _ in store.changed_since(self.stamp - REFRESH_OVERLAP)]
        self.stamp = started
        if not changed:
            return False
        before = self.version
        self.update(store.texts(changed))
        return self.version != before

    def build(self, store: Store, on_progress: Callable[[int, int], None] | None = None) -> None:
        """Read every paper's text and vector and fit the vocabulary on the store."""
        total = store.count()
        ids: list[str] = []
        documents: list[str] = []
        vectors: list[list[float] | None] = []
        for n, (pid, document, vector) in enumerate(store.iter_texts(), start=1):
            ids.append(pid)
            documents.append(document)
            vectors.append(vector)
            if on_progress and n % 1000 == 0:
                on_progress(n, total)
        # Fitted before it is put in place: a ranking made meanwhile keeps the old vocabulary.
        tfidf = vectorizer()
        self.words = tfidf.fit_transform(documents).tocsr() if documents else sparse.csr_matrix((0, 0))
        self.tfidf = tfidf
        self.ids = ids
        self.vectors = _matrix(vectors)
        self.fitted_on = len(ids)
        self.position = {pid: i for i, pid in enumerate(ids)}
        self.digests = {pid: _digest(doc) for pid, doc in zip(ids, documents, strict=True)}
        self.version += 1

    def update(self, texts: Sequence[tuple[str, str, list[float] | None]]) -> None:
        """Put in new papers and new versions of known ones (the vocabulary stays)."""
        # A decision or a note stamps a paper too: only a new paper or a new text is read in.
        texts = [t for t in texts if self.digests.get(t[0]) != _digest(t[1])]
        if not texts or self.tfidf is None:
            return
        self.version += 1
        self.digests.update((pid, _digest(doc)) for pid, doc, _ in texts)
        rows = self.tfidf.transform([doc for _, doc, _ in texts]).tocsr()
        vectors = _matrix([v for _, _, v in texts], width=self.vectors.shape[1] if len(self.ids) else 0)
        known = [i for i, (pid, _, _) in enumerate(texts) if pid in self.position]
        new = [i for i, (pid, _, _) in enumerate(texts) if pid not in self.position]
        if known:
            words = self.words.tolil()
            for i in known:
                at = self.position[texts[i][0]]
                words[at] = rows[i]
                if vectors.shape[1] == self.vectors.shape[1]:
                    self.vectors[at] = vectors[i]
            self.words = words.tocsr()
        if new:
            self.words = sparse.vstack([self.words, rows[new]], format="csr")
            width = self.vectors.shape[1] if len(self.ids) else vectors.shape[1]
            fresh = vectors[new] if vectors.shape[1] == width else np.zeros((len(new), width), np.float32)
            self.vectors = np.vstack([self.vectors.reshape(-1, width), fresh])
            for i in new:
                self.position[texts[i][0]] = len(self.ids)
                self.ids.append(texts[i][0])

    def rows(self, ids: Sequence[str]) -> tuple[sparse.csr_matrix, np.ndarray]:
        """The TF-IDF rows and vectors of these papers (zeros for papers not read yet)."""
        width = self.vectors.shape[1] if len(self.ids) else 0
        at = np.array([self.position.get(pid, -1) for pid in ids], dtype=np.int64)
        known = at >= 0
        words = sparse.csr_matrix((len(ids), self.words.shape[1]))
        vectors = np.zeros((len(ids), width), dtype=np.float32)
        if known.any():
            picked = self.words[at[known]]
            lookup = np.flatnonzero(known)
            # Scatter the known rows into place.
            scatter = sparse.csr_matrix(
                (np.ones(len(lookup)), (lookup, np.arange(len(lookup)))), shape=(len(ids), len(lookup))
            )
            words = (scatter @ picked).tocsr()
            vectors[known] = self.vectors[at[known]]
        return words, vectors


def _digest(document: str) -> bytes:
    return hashlib.blake2b(document.encode("utf-8"), digest_size=8).digest()


def _matrix(vectors: Sequence[list[float] | None], width: int = 0) -> np.ndarray:
    width = width or next((len(v) for v in vectors if v), 0)
    out = np.zeros((len(vectors), width), dtype=np.float32)
    for i, v in enumerate(vectors):
        if v is not None and len(v) == width:
            out[i] = v
    return out
