"""The kept TF-IDF vectorizer's transform in numpy: new text read in without scikit-learn.

A command that reads in a few new papers (after an import) would import scikit-learn, about a
second, to transform their text with the vectorizer fitted on the store. `Transform` holds what
that transform reads of the fitted vectorizer (how text is lower-cased and cut into words, the
stop words, the n-gram range, the vocabulary and the idf) and repeats scikit-learn's steps one
by one: its word analyser, the counts, the sublinear term frequency, the idf and the row's L2
norm summed in the same order, so the rows are scikit-learn's to the last bit. It is made only
from a vectorizer whose options it repeats (`Transform.of` is None for any other), and is kept
beside the vectorizer's file; without it the caller uses scikit-learn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from assistant.cache import read_pickle, write_pickle
from assistant.personal.csr import CSR

TRANSFORM_VERSION = 1


@dataclass
class Transform:
    """What a fitted word TfidfVectorizer's transform reads (see the module's summary)."""

    token_pattern: str
    lowercase: bool
    stop_words: frozenset[str]
    ngram_range: tuple[int, int]
    vocabulary: dict[str, int]
    idf: np.ndarray | None  # None: the vectorizer does not weigh by idf
    sublinear_tf: bool
    l2: bool  # rows L2-normalised (else not normalised)

    @classmethod
    def of(cls, tfidf: Any) -> Transform | None:
        """What the transform of this fitted vectorizer reads, or None when the vectorizer uses an
        option this module does not repeat (then scikit-learn transforms)."""
        try:
            plain = (
                tfidf.analyzer == "word"
                and tfidf.input == "content"
                and tfidf.preprocessor is None
                and tfidf.tokenizer is None
                and not tfidf.strip_accents
                and not tfidf.binary
                and tfidf.norm in ("l2", None)
                and np.dtype(tfidf.dtype) == np.float64
                and re.compile(tfidf.token_pattern).groups <= 1
            )
            if not plain or not hasattr(tfidf, "vocabulary_"):
                return None
            stop = tfidf.get_stop_words()
            idf = np.asarray(tfidf.idf_, dtype=np.float64) if tfidf.use_idf else None
            low, high = (int(n) for n in tfidf.ngram_range)
            vocabulary = {str(term): int(j) for term, j in tfidf.vocabulary_.items()}
        except (AttributeError, TypeError, ValueError, re.error):
            return None
        if sorted(vocabulary.values()) != list(range(len(vocabulary))):
            return None
        if idf is not None and len(idf) != len(vocabulary):
            return None
        return cls(
            token_pattern=str(tfidf.token_pattern),
            lowercase=bool(tfidf.lowercase),
            stop_words=frozenset(stop) if stop is not None else frozenset(),
            ngram_range=(low, high),
            vocabulary=vocabulary,
            idf=idf,
            sublinear_tf=bool(tfidf.sublinear_tf),
            l2=tfidf.norm == "l2",
        )

    @property
    def columns(self) -> int:
        return len(self.vocabulary)

    def analyse(self, document: str) -> list[str]:
        """The document's terms, as scikit-learn's word analyser makes them (its `_word_ngrams`)."""
        text = document.lower() if self.lowercase else document
        tokens = [w for w in re.findall(self.token_pattern, text) if w not in self.stop_words]
        low, high = self.ngram_range
        if high == 1:
            return tokens
        terms = list(tokens) if low == 1 else []
        for n in range(max(low, 2), min(high + 1, len(tokens) + 1)):
            terms.extend(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        return terms

    def transform(self, documents: Sequence[str]) -> CSR:
        """The TF-IDF rows of these documents."""
        vocabulary = self.vocabulary
        indices: list[int] = []
        counts: list[int] = []
        indptr = [0]
        for document in documents:
            counter: dict[int, int] = {}
            for term in self.analyse(document):
                j = vocabulary.get(term)
                if j is not None:
                    counter[j] = counter.get(j, 0) + 1
            for j in sorted(counter):
                indices.append(j)
                counts.append(counter[j])
            indptr.append(len(indices))
        columns = np.asarray(indices, dtype=np.int32)
        data = np.asarray(counts, dtype=np.float64)
        bounds = np.asarray(indptr, dtype=np.int64)
        if self.sublinear_tf:
            np.log(data, data)
            data += 1.0
        if self.idf is not None:
            data *= self.idf[columns]
        if self.l2:
            norms = np.repeat(_row_norms(data, bounds), np.diff(bounds))
            np.divide(data, norms, out=data, where=norms != 0.0)
        return CSR(data, columns, bounds, (len(documents), self.columns))

    def save(self, path: Path) -> None:
        payload = {
            "version": TRANSFORM_VERSION,
            "token_pattern": self.token_pattern,
            "lowercase": self.lowercase,
            "stop_words": sorted(self.stop_words),
            "ngram_range": self.ngram_range,
            "terms": sorted(self.vocabulary, key=self.vocabulary.__getitem__),  # by column
            "idf": self.idf,
            "sublinear_tf": self.sublinear_tf,
            "l2": self.l2,
        }
        write_pickle(path, payload)

    @classmethod
    def load(cls, path: Path) -> Transform | None:
        """The transform kept at `path`, or None when there is none that can be read."""
        try:
            data = read_pickle(path)
            if not isinstance(data, dict) or data.get("version") != TRANSFORM_VERSION:
                return None
            idf = data["idf"]
            if idf is not None and len(idf) != len(data["terms"]):
                return None
            return cls(
                token_pattern=str(data["token_pattern"]),
                lowercase=bool(data["lowercase"]),
                stop_words=frozenset(data["stop_words"]),
                ngram_range=(int(data["ngram_range"][0]), int(data["ngram_range"][1])),
                vocabulary={str(term): j for j, term in enumerate(data["terms"])},
                idf=None if idf is None else np.asarray(idf, dtype=np.float64),
                sublinear_tf=bool(data["sublinear_tf"]),
                l2=bool(data["l2"]),
            )
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError, IndexError):
            return None


def _row_norms(data: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Each row's L2 norm, its squares summed from the row's first entry to its last, one at a
    time, as scikit-learn's `inplace_csr_row_normalize_l2` sums them (numpy's own sums add in
    pairs, which can differ in the last bit)."""
    lengths = np.diff(indptr)
    sums = np.zeros(len(lengths))
    squares = data * data
    starts = indptr[:-1]
    for k in range(int(lengths.max(initial=0))):
        rows = np.flatnonzero(lengths > k)
        sums[rows] += squares[starts[rows] + k]
    return np.asarray(np.sqrt(sums), dtype=np.float64)
