"""What the personal model reads of every paper: the TF-IDF of its text and its embedding.

Built from the store once (TF-IDF of word 1-2 grams fitted on the store's documents, and the
stored vectors), cached in the user cache directory, and kept current from the store's
`touched` stamps: a refresh reads the text and vector of the papers written since the last
one. The vocabulary is fitted again when the store has grown by a quarter. Like the queue's
index, the cache is derived state: deleting it costs one rebuild.

The cache is a small pickle (the ids, the stamps, which files hold the rows) beside a folder of
plain `.npy` arrays: the TF-IDF rows (data, indices, indptr) and the vectors, memory-mapped
when read, so a command that ranks reads them without scikit-learn or scipy. The fitted
vectorizer has a file of its own, read only when the vocabulary is fitted again; new or changed
texts are transformed by `tfidf.Transform`, the vectorizer's transform in numpy, kept beside it
(scikit-learn transforms them only when that file is missing or the vectorizer uses an option
it does not repeat).
Files are named by a random generation written into the pickle last, so a reader never sees
half of a new generation; several processes keep it (the review UIs and `daily` of one machine):
a save removes another generation's files only once they are a minute old (younger ones may be
what another writer's pickle is about to name), and a reader whose generation was replaced and
removed meanwhile reads the new one. New papers (an import) are appended to the generation's
files, whose rows before them stay as they were: a reader takes as many rows as its pickle
names, so one that read the pickle before the append reads the rows it names.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from assistant.cache import cache_folder, features_cache, read_pickle, write_pickle
from assistant.personal.arrays import append_array, is_token, locked, mapped, save_array, save_text
from assistant.personal.csr import CSR
from assistant.personal.tfidf import Transform

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from assistant.store import Store

CACHE_VERSION = 3
REFIT_GROWTH = 1.25
REFRESH_OVERLAP = 10.0  # seconds: a write is stamped a moment before it commits
WORD_FEATURES = 20_000
ROW_FILES = ("data", "indices", "indptr", "vectors", "digests")
APPEND_LOCK = "append.lock"  # held by the one writer appending new papers to the files
READ_TRIES = 5  # reads of the cache when another process replaces it meanwhile
WRITING = 60.0  # seconds: files of another generation this young are not removed


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
        self._words = CSR.empty() if words is None else CSR.of(words)
        self._vectors = np.zeros((0, 0), dtype=np.float32) if vectors is None else vectors
        self.fitted_on = fitted_on
        self.stamp = stamp
        self.position = position if position is not None else {pid: i for i, pid in enumerate(self.ids)}
        self.version = version  # bumped whenever a row changes
        # Of each paper's text, to skip unchanged ones (a decision stamps a paper too).
        self._digests = np.zeros(len(self.ids), dtype=np.uint64)
        # New papers not put after the others yet (rows, vectors, digests): saved, they are
        # appended to the files and read back from them, never copied with the others.
        self._tail: list[tuple[CSR, np.ndarray, np.ndarray]] = []
        self._on_disk = 0  # rows of this generation in its files (0: none, or rows replaced)
        # Names the rows as they are on disk: the fitted state is kept for one generation.
        self.generation = ""
        self.vocabulary = ""  # names the vectorizer's generation
        self._tfidf = tfidf
        self._tfidf_file: Path | None = None
        self._transform: Transform | None = None  # the vectorizer's transform in numpy
        self._terms: list[str] | None = None
        self._saved = (-1, -1.0)  # (version, stamp) as last saved
        self._missing: tuple[int, int] | None = None  # (version, papers without a vector)

    @property
    def words(self) -> CSR:
        self._settle()
        return self._words

    @words.setter
    def words(self, value: CSR) -> None:
        self._settle()
        self._words = value

    @property
    def vectors(self) -> np.ndarray:
        self._settle()
        return self._vectors

    @vectors.setter
    def vectors(self, value: np.ndarray) -> None:
        self._settle()
        self._vectors = value

    @property
    def digests(self) -> np.ndarray:
        self._settle()
        return self._digests

    @digests.setter
    def digests(self, value: np.ndarray) -> None:
        self._settle()
        self._digests = value

    def _settle(self) -> None:
        """Put the new papers not saved yet after the others, in memory."""
        if not self._tail:
            return
        tail, self._tail = self._tail, []
        width = self._vectors.shape[1] if len(self._vectors) else tail[0][1].shape[1]
        self._words = self._words.vstack(CSR.stack([rows for rows, _, _ in tail], self._words.shape[1]))
        self._vectors = np.vstack([np.asarray(self._vectors).reshape(-1, width), *(v for _, v, _ in tail)])
        self._digests = np.concatenate([np.asarray(self._digests), *(d for _, _, d in tail)])
        self._on_disk = 0  # the rows on disk are no longer these: a save writes them all

    @property
    def tfidf(self) -> TfidfVectorizer | None:
        """The fitted vectorizer, read from its file when first asked (imports scikit-learn)."""
        if self._tfidf is None and self._tfidf_file is not None:
            self._tfidf = read_pickle(self._tfidf_file)
        return self._tfidf

    @tfidf.setter
    def tfidf(self, value: TfidfVectorizer | None) -> None:
        self._tfidf, self._tfidf_file, self._terms, self._transform = value, None, None, None

    def transformer(self) -> Transform | None:
        """The vectorizer's transform in numpy: read from its file, or made from the vectorizer
        when that is in memory; None when neither can be had (scikit-learn transforms then)."""
        if self._transform is None:
            if self._tfidf is not None:
                self._transform = Transform.of(self._tfidf)
            elif self._tfidf_file is not None:
                self._transform = Transform.load(self._tfidf_file.with_suffix(".transform"))
        return self._transform

    def transform(self, documents: Sequence[str]) -> CSR | None:
        """The TF-IDF rows of these documents by the kept vectorizer (None when there is none
        that can be read), in numpy when its transform is kept, else by scikit-learn."""
        numpy_transform = self.transformer()
        if numpy_transform is not None:
            return numpy_transform.transform(documents)
        tfidf = self._vectorizer()
        return CSR.of(tfidf.transform(list(documents))) if tfidf is not None else None

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
        location = store.data_key  # the same for every person of a shared store
        path = features_cache(location, cache_dir)
        if not path.exists():
            return cls(location=location), None
        for attempt in range(READ_TRIES):
            named = _identity(path)
            try:
                features = cls._read(path, location)
            except Exception as exc:  # any unreadable cache is rebuilt from the store
                if attempt + 1 < READ_TRIES and _identity(path) != named:
                    # Another process (a review UI beside `daily`) put a new generation in
                    # place and removed the files of the one named when this read began.
                    continue
                return cls(location=location), (
                    f"the personal model's cache {path} could not be read ({type(exc).__name__}); "
                    "it is rebuilt from the store"
                )
            return features if features is not None else cls(location=location), None
        raise AssertionError("unreachable")

    @classmethod
    def _read(cls, path: Path, location: str) -> TextFeatures | None:
        data = read_pickle(path)
        if data.get("version") != CACHE_VERSION or data.get("location") != location:
            return None
        folder, generation = cache_folder(path), str(data["generation"])
        # Mapped, not read: a ranking reads the rows it trains on and one pass to score.
        arrays = {name: mapped(folder / f"{generation}.{name}.npy") for name in ROW_FILES}
        ids = list(data["ids"])
        shape = (len(ids), int(data["columns"]))
        # The files may hold rows appended after this pickle was written: the ones it names come
        # first.
        indptr = np.asarray(arrays["indptr"][: len(ids) + 1], dtype=np.int64)
        entries = int(indptr[-1]) if len(indptr) else 0
        vectors = arrays["vectors"][: len(ids)]
        if (
            len(indptr) != len(ids) + 1
            or indptr[0] != 0
            or len(arrays["data"]) < entries
            or len(arrays["indices"]) < entries
            or bool((np.diff(indptr) < 0).any())
            or vectors.ndim != 2
            or len(vectors) != len(ids)
            or len(arrays["digests"]) < len(ids)
        ):
            raise ValueError("rows and ids differ")
        words = CSR(arrays["data"][:entries], arrays["indices"][:entries], indptr, shape)
        features = cls(
            location=location,
            ids=ids,
            words=words,
            vectors=vectors,
            fitted_on=int(data["fitted_on"]),
            stamp=float(data["stamp"]),
        )
        features.digests = np.asarray(arrays["digests"][: len(ids)])
        features._on_disk = len(ids)
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
            save_text(folder / f"{self.generation}.stamp", repr(self.stamp))
            self._saved = (self.version, self.stamp)
            return
        if rows_changed and self._tail and self.vocabulary and self._tfidf_file is not None:
            # One writer at a time appends, and only to the rows the pickle on disk names.
            with locked(folder / APPEND_LOCK) as held:
                if held and self._append(folder, path):
                    self._save_transform()
                    self._write_pickle(path)
                    return
        if rows_changed:
            self._settle()
            self.generation = secrets.token_hex(8)
            arrays: dict[str, np.ndarray] = {
                "data": np.asarray(self.words.data, dtype=np.float64),
                "indices": np.asarray(self.words.indices, dtype=np.int32),
                "indptr": np.asarray(self.words.indptr, dtype=np.int64),
                "vectors": np.asarray(self.vectors, dtype=np.float32),
                "digests": np.asarray(self.digests, dtype=np.uint64),
            }
            for name, array in arrays.items():
                save_array(folder / f"{self.generation}.{name}.npy", array)
            self._on_disk = len(self.ids)
        if not self.vocabulary or self._tfidf_file is None:
            tfidf = self.tfidf
            if tfidf is not None:
                self.vocabulary = secrets.token_hex(8)
                self._tfidf_file = folder / f"{self.vocabulary}.tfidf"
                write_pickle(self._tfidf_file, tfidf)
                write_pickle(self._tfidf_file.with_suffix(".terms"), self.terms())
        self._save_transform()
        self._write_pickle(path)
        keep = {self.generation, self.vocabulary}
        for file in folder.iterdir():
            # Only files of another generation or vocabulary go (named by a token, as these
            # are); the folder holds other derived state too (the kept training, the rows).
            token = file.name.split(".")[0]
            if file.suffix != ".tmp" and (token in keep or not is_token(token)):
                continue
            try:
                if time.time() - file.stat().st_mtime < WRITING:
                    # Another process may be writing it, or have written the rows its pickle
                    # is about to name (five review UIs saving at once named removed files).
                    continue
            except OSError:
                continue
            file.unlink(missing_ok=True)

    def _write_pickle(self, path: Path) -> None:
        """The pickle that names the rows on disk (written last)."""
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

    def _append(self, folder: Path, path: Path) -> bool:
        """Append the new papers to the generation's files and read the rows back from them
        (False, nothing read back, when they cannot be: the rows are then written anew). Only
        when the pickle at `path` names the rows these were read with, and the files hold no
        more: no other writer came between."""
        pending = sum(len(rows) for rows, _, _ in self._tail)
        if not self.generation or not self._on_disk or self._on_disk + pending != len(self.ids):
            return False
        try:
            on_disk = read_pickle(path)
            if on_disk.get("generation") != self.generation or len(on_disk.get("ids", ())) != self._on_disk:
                return False
        except (OSError, ValueError, EOFError, AttributeError, TypeError):
            return False
        tail = self._tail
        rows = CSR.stack([r for r, _, _ in tail], self._words.shape[1])
        width = self._vectors.shape[1]
        if any(v.shape[1] != width for _, v, _ in tail):
            return False
        entries = self._words.nnz
        parts: dict[str, tuple[np.ndarray, int]] = {  # each file's new rows, after how many
            "data": (np.asarray(rows.data, dtype=np.float64), entries),
            "indices": (np.asarray(rows.indices, dtype=np.int32), entries),
            "indptr": (np.asarray(rows.indptr[1:] + entries, dtype=np.int64), self._on_disk + 1),
            "vectors": (np.vstack([v for _, v, _ in tail]).astype(np.float32), self._on_disk),
            "digests": (np.concatenate([d for _, _, d in tail]).astype(np.uint64), self._on_disk),
        }
        try:
            for name, (array, before) in parts.items():
                if not append_array(folder / f"{self.generation}.{name}.npy", array, before):
                    return False
            arrays = {name: mapped(folder / f"{self.generation}.{name}.npy") for name in ROW_FILES}
        except (OSError, ValueError):
            return False
        missing = self._missing[1] + int((~parts["vectors"][0].any(axis=1)).sum()) if self._missing else None
        n = len(self.ids)
        indptr = np.asarray(arrays["indptr"][: n + 1], dtype=np.int64)
        end = int(indptr[-1])
        self._tail = []
        self._words = CSR(arrays["data"][:end], arrays["indices"][:end], indptr, (n, rows.shape[1]))
        self._vectors = arrays["vectors"][:n]
        self._digests = np.asarray(arrays["digests"][:n])
        self._on_disk = n
        if missing is not None:
            self._missing = (self.version, missing)
        return True

    def _save_transform(self) -> None:
        """Keep the vectorizer's transform in numpy beside its file, when the vectorizer is in
        memory (fitted here, or read for lack of it) and it can be made."""
        if self._tfidf is None or self._tfidf_file is None:
            return
        path = self._tfidf_file.with_suffix(".transform")
        if path.exists() and Transform.load(path) is not None:
            return
        numpy_transform = self.transformer()
        if numpy_transform is not None:
            numpy_transform.save(path)

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
        # A decision or a note stamps a paper too: only a new paper or a new text is read in,
        # and only its vector is read (a vector is ~8 KB through a server, a text ~1 KB).
        documents = store.documents(changed)
        new = [pid for pid, doc in documents.items() if self._known_digest(pid) != _digest(doc)]
        texts = store.texts(new) if new else []
        if texts and self.transformer() is None and self._vectorizer() is None:
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
        self._tail, self._on_disk = [], 0
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
        rows = self.transform([doc for _, doc, _ in texts])
        if rows is None:
            return
        digests = np.array([_digest(doc) for _, doc, _ in texts], dtype=np.uint64)
        vectors = _matrix([v for _, _, v in texts], width=self._vectors.shape[1] if len(self.ids) else 0)
        known = [i for i, (pid, _, _) in enumerate(texts) if pid in self.position]
        new = [i for i, (pid, _, _) in enumerate(texts) if pid not in self.position]
        self.version += 1
        if known:
            # The arrays read from the cache are memory-mapped read-only: changed ones are copies.
            self.digests = np.array(self.digests, dtype=np.uint64)
            at = np.array([self.position[texts[i][0]] for i in known], dtype=np.int64)
            self.words = self.words.replace_rows(at, rows.take(np.array(known)))
            self.digests[at] = digests[known]
            if vectors.shape[1] == self.vectors.shape[1]:
                self.vectors = np.array(self.vectors, dtype=np.float32)
                self.vectors[at] = vectors[known]
        if new:
            width = self._vectors.shape[1] if len(self.ids) else vectors.shape[1]
            fresh = vectors[new] if vectors.shape[1] == width else np.zeros((len(new), width), np.float32)
            self._tail.append((rows.take(np.array(new)), fresh, digests[new]))
            for i in new:
                self.position[texts[i][0]] = len(self.ids)
                self.ids.append(texts[i][0])

    def _known_digest(self, pid: str) -> int | None:
        at = self.position.get(pid)
        if at is None:
            return None
        if at < len(self._digests):
            return int(self._digests[at])
        at -= len(self._digests)
        for _, _, digests in self._tail:
            if at < len(digests):
                return int(digests[at])
            at -= len(digests)
        return None

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


def _identity(path: Path) -> tuple[int, int, int] | None:
    """Which file is at `path` now (a pickle is replaced whole: a new one is another inode)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def _digest(document: str) -> int:
    return int.from_bytes(hashlib.blake2b(document.encode("utf-8"), digest_size=8).digest(), "little")


def _matrix(vectors: Sequence[list[float] | None], width: int = 0) -> np.ndarray:
    width = width or next((len(v) for v in vectors if v), 0)
    out = np.zeros((len(vectors), width), dtype=np.float32)
    for i, v in enumerate(vectors):
        if v is not None and len(v) == width:
            out[i] = v
    return out
