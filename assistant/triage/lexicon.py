"""The offline engine's term counts of every paper, kept between runs.

The offline engine's lexical statistics are made over the whole store: every paper's text is
split into words, stemmed and hashed (`offline._counts`), ~25 s of CPU at 100,000 papers, in
every `triage tag` and `triage daily` though only the new papers' texts are new. A text's
counts and its set of stems depend on the text alone, so they are kept in the user cache by
the text's digest, and only the texts not seen before are read again; the statistics built from
them are the very ones a full pass makes (the same rows, in the same order).

The file holds the texts of the last corpus built and nothing else (an edited or deleted
paper's row goes at the next build); one file per store, shared by everyone who reads it and
every agenda (nothing in it depends on them). It is derived state: deleting it costs one full
pass, and a file that cannot be read or written is passed over.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from assistant import __version__
from assistant.cache import read_pickle, write_pickle
from assistant.triage.keys import OFFLINE_VERSION
from assistant.triage.offline import HASH_FEATURES, Corpus, _counts, stems

# What the kept rows were made by: another engine, release, stemmer or hasher may split, stem
# or hash differently.
VERSION = 1


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:  # installed without its metadata: the release then decides
        return ""


_STEMMER, _HASHER = _version("PyStemmer"), _version("scikit-learn")
_MADE_BY = (VERSION, __version__, OFFLINE_VERSION, HASH_FEATURES, _STEMMER, _HASHER)
# Counts are kept in the smallest of these that holds them (most texts say no word 256 times).
_COUNTS = (np.uint8, np.uint16)
DIGEST = 16  # bytes of a text's BLAKE2b digest


@dataclass
class _Kept:
    """The rows kept: per distinct text, its digest, its counts and its stems (as numbers into
    `vocabulary`)."""

    digests: list[bytes]
    counts: sparse.csr_matrix
    stems: sparse.csr_matrix  # a row per text, a column per stem of `vocabulary`
    vocabulary: list[str]

    def payload(self) -> dict[str, Any]:
        return {
            "made_by": _MADE_BY,
            "digests": b"".join(self.digests),
            "counts": _arrays(self.counts),
            "stems": _arrays(self.stems)[1:],  # every entry is 1
            "vocabulary": "\n".join(self.vocabulary),
        }

    @classmethod
    def empty(cls) -> _Kept:
        return cls(
            [], sparse.csr_matrix((0, 0), dtype=np.uint8), sparse.csr_matrix((0, 0), dtype=np.int8), []
        )

    @classmethod
    def read(cls, path: Path) -> _Kept | None:
        try:
            data = read_pickle(path)
            if not isinstance(data, dict) or data.get("made_by") != _MADE_BY:
                return None
            blob = data["digests"]
            digests = [blob[i : i + DIGEST] for i in range(0, len(blob), DIGEST)]
            vocabulary = data["vocabulary"].split("\n") if data["vocabulary"] else []
            counts = _matrix(data["counts"], len(digests))
            indices, indptr, width = data["stems"]
            stem_rows = _matrix((np.ones(len(indices), dtype=np.int8), indices, indptr, width), len(digests))
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError, ImportError):
            return None
        if stem_rows.shape[1] > len(vocabulary):
            return None
        return cls(digests, counts, stem_rows, vocabulary)


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST).digest()


def corpus(
    ids: Sequence[str],
    documents: Sequence[str],
    vectors: Mapping[str, Sequence[float]] | None,
    path: Path,
) -> Corpus:
    """`Corpus.build(ids, documents, vectors)`, reading only the texts the file at `path`
    does not hold (and keeping the rows of these documents in it for the next time)."""
    if not documents:
        return Corpus.build(ids, documents, vectors)
    kept = _Kept.read(path) or _Kept.empty()  # none yet, damaged, unreadable: none
    known = {d: n for n, d in enumerate(kept.digests)}
    fresh: dict[bytes, int] = {}  # a new text's digest -> its row after the kept ones
    texts: list[str] = []
    rows = np.empty(len(documents), dtype=np.int64)  # each document's row of the kept and new
    for i, text in enumerate(documents):
        d = digest(text)
        n = known.get(d)
        if n is None:
            n = fresh.get(d)
            if n is None:
                n = fresh[d] = len(kept.digests) + len(texts)
                texts.append(text)
        rows[i] = n
    every = _Kept(kept.digests + list(fresh), *_read(texts, kept)) if texts else kept
    counts = every.counts[rows].astype(np.float64)
    frequency = np.bincount(every.stems[rows].indices, minlength=len(every.vocabulary))
    df = {s: int(f) for s, f in zip(every.vocabulary, frequency.tolist(), strict=True) if f}
    used = np.unique(rows)
    if texts or len(used) != len(kept.digests):
        _save(path, every, used)
    return Corpus.of_counts(ids, counts, df, vectors)


def _read(texts: list[str], kept: _Kept) -> tuple[sparse.csr_matrix, sparse.csr_matrix, list[str]]:
    """The kept counts, stems and vocabulary with these texts' rows added under them."""
    tokens = [stems(t) for t in texts]
    vocabulary = list(kept.vocabulary)
    places = {s: n for n, s in enumerate(vocabulary)}
    columns: list[list[int]] = []
    for toks in tokens:
        row = []
        for s in set(toks):
            n = places.get(s)
            if n is None:
                n = places[s] = len(vocabulary)
                vocabulary.append(s)
            row.append(n)
        columns.append(sorted(row))
    new_stems = sparse.csr_matrix(
        (
            np.ones(sum(map(len, columns)), dtype=np.int8),
            np.fromiter((c for row in columns for c in row), dtype=np.int32),
            np.cumsum([0, *map(len, columns)]),
        ),
        shape=(len(texts), len(vocabulary)),
    )
    counts = _stack(kept.counts, _stored(_counts(texts, tokens)))
    return counts, _stack(kept.stems, new_stems), vocabulary


def _save(path: Path, every: _Kept, used: np.ndarray) -> None:
    """Keep these rows of `every`, with the stems no row uses taken out of the vocabulary."""
    stem_rows = every.stems[used]
    kept = np.zeros(len(every.vocabulary), dtype=bool)
    kept[stem_rows.indices] = True
    renumber = np.cumsum(kept) - 1
    stem_rows = sparse.csr_matrix(
        (stem_rows.data, renumber[stem_rows.indices].astype(np.int32), stem_rows.indptr),
        shape=(stem_rows.shape[0], int(kept.sum())),
    )
    words = [s for s, k in zip(every.vocabulary, kept.tolist(), strict=True) if k]
    digests = [every.digests[n] for n in used]
    try:
        write_pickle(path, _Kept(digests, every.counts[used], stem_rows, words).payload())
    except OSError:
        pass  # only a cache: the next build reads every text again


def _stored(counts: sparse.csr_matrix) -> sparse.csr_matrix:
    """Counts as kept: the smallest integers that hold them (else 32-bit floats, exact to 2**24)."""
    most = counts.data.max() if counts.nnz else 0
    for dtype in _COUNTS:
        if most <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.float32)


def _stack(kept: sparse.csr_matrix, new: sparse.csr_matrix) -> sparse.csr_matrix:
    """New rows under the kept ones, as wide as the new (the vocabulary only grows)."""
    parts = [_wide(m, new.shape[1]) for m in (kept, new) if m.shape[0]]
    dtype = np.result_type(*(m.dtype for m in parts))
    return sparse.vstack([m.astype(dtype) for m in parts], format="csr") if len(parts) > 1 else parts[0]


def _wide(matrix: sparse.csr_matrix, columns: int) -> sparse.csr_matrix:
    return sparse.csr_matrix((matrix.data, matrix.indices, matrix.indptr), shape=(matrix.shape[0], columns))


def _arrays(matrix: sparse.csr_matrix) -> tuple[Any, ...]:
    return (matrix.data, matrix.indices, matrix.indptr, matrix.shape[1])


def _matrix(arrays: tuple[Any, ...], rows: int) -> sparse.csr_matrix:
    data, indices, indptr, columns = arrays
    if len(indptr) != rows + 1:
        raise ValueError("the rows do not match the digests")
    return sparse.csr_matrix((data, indices, indptr), shape=(rows, columns))
