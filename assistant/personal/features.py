"""What the personal model reads of every paper: the TF-IDF of its text and its embedding.

Built from the store once (TF-IDF of word 1-2 grams fitted on the store's documents, and the
stored vectors), cached in the user cache directory, and kept current from the store's
`touched` stamps: a refresh reads the text and vector of the papers written since the last
one. The vocabulary is fitted again when the store has grown by a quarter. Like the queue's
index, the cache is derived state: deleting it costs one rebuild.

The cache is a small pickle (the ids, the stamps, which files hold the rows) beside a folder of
plain `.npy` arrays: the TF-IDF rows (data, indices, indptr) and the vectors, memory-mapped
when read, so a command that ranks reads them without scikit-learn or scipy. The fitted
vectorizer has a file of its own, read only when new or changed texts must be transformed.
Files are named by a random generation written into the pickle last, so a reader never sees
half of a new generation.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from assistant.cache import cache_file, read_pickle, write_pickle
from assistant.personal.csr import CSR

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from assistant.store import Store

CACHE_VERSION = 3
REFIT_GROWTH = 1.25
REFRESH_OVERLAP = 10.0  # seconds: a write is stamped a moment before it commits
WORD_FEATURES = 20_000
ROW_FILES = ("data", "indices", "indptr", "vectors", "digests")


def features_cache(location: str, cache_dir: Path | None = None) -> Path:
    """Where the features of the store named `location` (its cache key) are cached."""
    return cache_file("personal", location, cache_dir)


def cache_folder(path: Path) -> Path:
    """The folder beside the features' pickle that holds their arrays (and the fitted state)."""
    return path.with_suffix("")


def vectorizer() -> TfidfVectorizer:
    """TF-IDF over word 1-2 grams, sublinear term frequency, English stop words."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        ngram_range=(1, 2),
        sublinear_tf=True,
        stop_words="english",
        max_features=WORD_FEATURES,
        dtype=np.float64,
    )


class TextFeatures:
    """Per paper, a row of TF-IDF and the stored vector (zeros for a paper without one)."""

    def __init__(
        self,
        location: str,
        ids: Sequence[str] = (),
        words: Any = None,
        vectors: np.ndarray | None = None,
        tfidf: TfidfVectorizer | None = None,
        fitted_on: int = 0,
        stamp: float = 0.0,
        position: dict[str, int] | None = None,
        version: int = 0,
    ):
        self.location = location
        self.ids = list(ids)
        self.words = CSR.empty() if words is None else CSR.of(words)
        self.vectors = np.zeros((0, 0), dtype=np.float32) if vectors is None else vectors
        self.fitted_on = fitted_on
        self.stamp = stamp
        self.position = position if position is not None else {pid: i for i, pid in enumerate(self.ids)}
        self.version = version  # bumped whenever a row changes
        # Of each paper's text, to skip unchanged ones (a decision stamps a paper too).
        self.digests = np.zeros(len(self.ids), dtype=np.uint64)
        # Names the rows as they are on disk: the fitted state is kept for one generation.
        self.generation = ""
        self.vocabulary = ""  # names the vectorizer's generation
        self._tfidf = tfidf
        self._tfidf_file: Path | None = None
        self._terms: list[str] | None = None
        self._saved = (-1, -1.0)  # (version, stamp) as last saved
        self._missing: tuple[int, int] | None = None  # (version, papers without a vector)

    @property
    def tfidf(self) -> TfidfVectorizer | None:
        """The fitted vectorizer, read from its file when first asked (imports scikit-learn)."""
        if self._tfidf is None and self._tfidf_file is not None:
            self._tfidf = read_pickle(self._tfidf_file)
        return self._tfidf

    @tfidf.setter
    def tfidf(self, value: TfidfVectorizer | None) -> None:
        self._tfidf, self._tfidf_file, self._terms = value, None, None

    @property
    def built(self) -> bool:
        return self._tfidf is not None or self._tfidf_file is not None

    @property
    def missing_vectors(self) -> int:
        """Papers without a stored embedding (their row of vectors is zeros)."""
        if not len(self.ids):
            return 0
        if self._missing is None or self._missing[0] != self.version:
            self._missing = (self.version, int((~np.asarray(self.vectors).any(axis=1)).sum()))
        return self._missing[1]

    def terms(self) -> list[str]:
        """The words of the TF-IDF columns (from the cache when it has them: no scikit-learn)."""
        if self._terms is None and self._tfidf_file is not None:
            try:
                self._terms = [str(t) for t in read_pickle(self._tfidf_file.with_suffix(".terms"))]
            except (OSError, ValueError, EOFError, TypeError):
                self._terms = None
        if self._terms is None:
            tfidf = self.tfidf
            fitted = tfidf is not None and hasattr(tfidf, "vocabulary_")  # not on an empty store
            self._terms = (
                [str(t) for t in tfidf.get_feature_names_out()] if tfidf is not None and fitted else []
            )
        return self._terms

    # -- the cache ------------------------------------------------------------------------

    @classmethod
    def open(cls, store: Store, cache_dir: Path | None = None) -> tuple[TextFeatures, str | None]:
        """The cached features of this store (call `refresh` next), and a note when a cache
        was there but could not be read (it is rebuilt)."""
        location = store.cache_key
        path = features_cache(location, cache_dir)
        if not path.exists():
            return cls(location=location), None
        try:
            features = cls._read(path, location)
        except Exception as exc:  # any unreadable cache is rebuilt from the store
            return cls(location=location), (
                f"the personal model's cache {path} could not be read ({type(exc).__name__}); "
                "it is rebuilt from the store"
            )
        return features if features is not None else cls(location=location), None

    @classmethod
    def _read(cls, path: Path, location: str) -> TextFeatures | None:
        data = read_pickle(path)
        if data.get("version") != CACHE_VERSION or data.get("location") != location:
            return None
        folder, generation = cache_folder(path), str(data["generation"])
        # Mapped, not read: a ranking reads the rows it trains on and one pass to score.
        arrays = {name: _mapped(folder / f"{generation}.{name}.npy") for name in ROW_FILES}
        ids = list(data["ids"])
        shape = (len(ids), int(data["columns"]))
        indptr = np.asarray(arrays["indptr"], dtype=np.int64)
        words = CSR(arrays["data"], arrays["indices"], indptr, shape)
        vectors = arrays["vectors"]
        if (
            len(indptr) != len(ids) + 1
            or indptr[0] != 0
            or indptr[-1] != len(arrays["data"])
            or len(arrays["data"]) != len(arrays["indices"])
            or bool((np.diff(indptr) < 0).any())
            or vectors.ndim != 2
            or len(vectors) != len(ids)
            or len(arrays["digests"]) != len(ids)
        ):
            raise ValueError("rows and ids differ")
        features = cls(
            location=location,
            ids=ids,
            words=words,
            vectors=vectors,
            fitted_on=int(data["fitted_on"]),
            stamp=float(data["stamp"]),
        )
        features.digests = np.asarray(arrays["digests"])
        features.generation, features.vocabulary = generation, str(data["vocabulary"])
        features._missing = (features.version, int(data["missing"]))
        try:  # the stamp moved on since the pickle was written (see `save`)
            features.stamp = max(features.stamp, float((folder / f"{generation}.stamp").read_text()))
        except (OSError, ValueError):
            pass
        features._tfidf_file = folder / f"{features.vocabulary}.tfidf"
        features._saved = (features.version, features.stamp)
        return features

    def cache_path(self, cache_dir: Path | None = None) -> Path:
        return features_cache(self.location, cache_dir)

    def save(self, cache_dir: Path | None = None) -> None:
        """Write the cache: the arrays of rows changed since it was read, then the pickle that
        names them (atomically), then remove the files it no longer names. When only the stamp
        moved (papers were decided, not rewritten), only a stamp file beside the rows is
        written: the pickle, which other caches of derived state rest on, stays as it is."""
        path = self.cache_path(cache_dir)
        folder = cache_folder(path)
        folder.mkdir(parents=True, exist_ok=True)
        rows_changed = not self.generation or self._saved[0] != self.version
        if not rows_changed and self.vocabulary and self._tfidf_file is not None and path.exists():
            _save_text(folder / f"{self.generation}.stamp", repr(self.stamp))
            self._saved = (self.version, self.stamp)
            return
        if rows_changed:
            self.generation = secrets.token_hex(8)
            arrays: dict[str, np.ndarray] = {
                "data": np.asarray(self.words.data, dtype=np.float64),
                "indices": np.asarray(self.words.indices, dtype=np.int32),
                "indptr": np.asarray(self.words.indptr, dtype=np.int64),
                "vectors": np.asarray(self.vectors, dtype=np.float32),
                "digests": np.asarray(self.digests, dtype=np.uint64),
            }
            for name, array in arrays.items():
                _save_array(folder / f"{self.generation}.{name}.npy", array)
        if not self.vocabulary or self._tfidf_file is None:
            tfidf = self.tfidf
            if tfidf is not None:
                self.vocabulary = secrets.token_hex(8)
                self._tfidf_file = folder / f"{self.vocabulary}.tfidf"
                write_pickle(self._tfidf_file, tfidf)
                write_pickle(self._tfidf_file.with_suffix(".terms"), self.terms())
        payload = {
            "version": CACHE_VERSION,
            "location": self.location,
            "ids": self.ids,
            "columns": self.words.shape[1],
            "generation": self.generation,
            "vocabulary": self.vocabulary,
            "fitted_on": self.fitted_on,
            "stamp": self.stamp,
            "missing": self.missing_vectors,
        }
        write_pickle(path, payload)
        self._saved = (self.version, self.stamp)
        keep = {self.generation, self.vocabulary}
        for file in folder.iterdir():
            if file.name.split(".")[0] in keep or file.name.startswith("fit"):
                continue
            if file.suffix == ".tmp" and time.time() - file.stat().st_mtime < 60:
                continue  # another process is writing it
            file.unlink(missing_ok=True)

    @property
    def saved_generation(self) -> str:
        """The generation of the rows on disk, if these rows are it ("" otherwise)."""
        return self.generation if self._saved[0] == self.version else ""

    def term_reader(self) -> Callable[[], list[str]] | None:
        """The words of the vocabulary as it is now, read when first asked (a later refit puts
        another vocabulary in place and leaves this one alone)."""
        if not self.built:
            return None
        source = TextFeatures(self.location, tfidf=self._tfidf)
        source._tfidf_file = self._tfidf_file
        source._terms = self._terms
        return source.terms

    @property
    def unsaved(self) -> bool:
        """Whether the rows or the stamp changed since the cache was read or written."""
        return self._saved != (self.version, self.stamp)

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
        if not changed:
            return False  # the stamp may stay: nothing was written since it
        # A decision or a note stamps a paper too: only a new paper or a new text is read in.
        texts = [t for t in store.texts(changed) if self._known_digest(t[0]) != _digest(t[1])]
        if texts and self._vectorizer() is None:
            self.build(store, on_progress)  # its file is gone or damaged: fit it again
            self.stamp = started
            return True
        before = self.version
        self.update(texts)
        self.stamp = started
        return self.version != before

    def _vectorizer(self) -> TfidfVectorizer | None:
        """The vectorizer, or None when its file cannot be read."""
        try:
            return self.tfidf
        except (OSError, ValueError, EOFError, AttributeError, ImportError, TypeError):
            self._tfidf_file = None
            return None

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
        words = CSR.of(tfidf.fit_transform(documents)) if documents else CSR.empty()
        self.tfidf = tfidf
        self.vocabulary = ""
        self.words = words
        self.ids = ids
        self.vectors = _matrix(vectors)
        self.fitted_on = len(ids)
        self.position = {pid: i for i, pid in enumerate(ids)}
        self.digests = np.array([_digest(doc) for doc in documents], dtype=np.uint64)
        self.version += 1

    def update(self, texts: Sequence[tuple[str, str, list[float] | None]]) -> None:
        """Put in new papers and new versions of known ones (the vocabulary stays)."""
        texts = [t for t in texts if self._known_digest(t[0]) != _digest(t[1])]
        if not texts:
            return
        tfidf = self.tfidf
        if tfidf is None:
            return
        rows = CSR.of(tfidf.transform([doc for _, doc, _ in texts]))
        digests = np.array([_digest(doc) for _, doc, _ in texts], dtype=np.uint64)
        vectors = _matrix([v for _, _, v in texts], width=self.vectors.shape[1] if len(self.ids) else 0)
        known = [i for i, (pid, _, _) in enumerate(texts) if pid in self.position]
        new = [i for i, (pid, _, _) in enumerate(texts) if pid not in self.position]
        self.version += 1
        # The arrays read from the cache are memory-mapped read-only: changed ones are copies.
        self.digests = np.array(self.digests, dtype=np.uint64)
        if known:
            at = np.array([self.position[texts[i][0]] for i in known], dtype=np.int64)
            self.words = self.words.replace_rows(at, rows.take(np.array(known)))
            self.digests[at] = digests[known]
            if vectors.shape[1] == self.vectors.shape[1]:
                self.vectors = np.array(self.vectors, dtype=np.float32)
                self.vectors[at] = vectors[known]
        if new:
            self.words = self.words.vstack(rows.take(np.array(new)))
            width = self.vectors.shape[1] if len(self.ids) else vectors.shape[1]
            fresh = vectors[new] if vectors.shape[1] == width else np.zeros((len(new), width), np.float32)
            self.vectors = np.vstack([np.asarray(self.vectors).reshape(-1, width), fresh])
            self.digests = np.concatenate([self.digests, digests[new]])
            for i in new:
                self.position[texts[i][0]] = len(self.ids)
                self.ids.append(texts[i][0])

    def _known_digest(self, pid: str) -> int | None:
        at = self.position.get(pid)
        return int(self.digests[at]) if at is not None and at < len(self.digests) else None

    def positions(self, ids: Sequence[str]) -> np.ndarray:
        """Each paper's row (-1 for a paper not read yet)."""
        if len(ids) <= len(self.ids) and ids == self.ids[: len(ids)]:
            return np.arange(len(ids), dtype=np.int64)  # the store reads them in the same order
        get = self.position.get
        return np.fromiter((get(pid, -1) for pid in ids), dtype=np.int64, count=len(ids))

    def rows(self, ids: Sequence[str]) -> tuple[CSR, np.ndarray]:
        """The TF-IDF rows and vectors of these papers (zeros for papers not read yet)."""
        at = self.positions(ids)
        width = self.vectors.shape[1] if len(self.ids) else 0
        vectors = np.zeros((len(ids), width), dtype=np.float32)
        known = at >= 0
        if known.any():
            vectors[known] = self.vectors[at[known]]
        words = self.words.take(at) if len(self.ids) else CSR.empty(len(ids), self.words.shape[1])
        return words, vectors


def _digest(document: str) -> int:
    return int.from_bytes(hashlib.blake2b(document.encode("utf-8"), digest_size=8).digest(), "little")


def _mapped(path: Path) -> np.ndarray:
    """A .npy file memory-mapped read-only, as a plain array (a memmap's indexing is slower)."""
    array: np.ndarray = np.load(path, mmap_mode="r").view(np.ndarray)
    return array


def _save_text(path: Path, text: str) -> None:
    """Write a small text file atomically."""
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _save_array(path: Path, array: np.ndarray) -> None:
    """Write an array in .npy form atomically (a temporary file, then a rename)."""
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.save(fh, array, allow_pickle=False)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _matrix(vectors: Sequence[list[float] | None], width: int = 0) -> np.ndarray:
    width = width or next((len(v) for v in vectors if v), 0)
    out = np.zeros((len(vectors), width), dtype=np.float32)
    for i, v in enumerate(vectors):
        if v is not None and len(v) == width:
            out[i] = v
    return out
