"""What the model sees of each paper, as numpy blocks: its words, its embedding, its topic scores.

The columns are the TF-IDF of the paper's words (the first `words`), its embedding and the
engine's topic scores (0..1, each counting as one more word). The words and embeddings stay as
the store's text features keep them (one row per text, memory-mapped when cached) and each
paper points at its row (`at`), so nothing is copied per ranking: training gathers the rows it
reads (`block`), and scoring every paper is one pass over the texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from assistant.personal.csr import CSR

# The embedding counts as much as a paper's words (both rows have unit length); the topic scores
# (0..1) count as one more word each.
EMBEDDING_SCALE = 1.0
TOPIC_SCALE = 1.0
CHUNK = 1024  # rows of embeddings turned to float64 at a time (these fit in the CPU's cache)


def dense_dot(vectors: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """vectors @ coef in float64, a chunk at a time (einsum: a matrix-vector product this small
    is not worth BLAS's threads, which only spin on a busy machine)."""
    out = np.empty(len(vectors))
    for start in range(0, len(vectors), CHUNK):
        chunk = np.asarray(vectors[start : start + CHUNK], dtype=np.float64)
        out[start : start + len(chunk)] = np.einsum("ij,j->i", chunk, coef)
    return out


class Block:
    """The rows of some papers, gathered for training: the products with the weights."""

    def __init__(self, words: CSR, vectors: np.ndarray, topics: np.ndarray):
        # Column indices as numpy's own index type: each product would convert them otherwise.
        self.words = CSR(words.data, np.asarray(words.indices, dtype=np.intp), words.indptr, words.shape)
        self.vectors = vectors  # float64: einsum takes twice as long casting float32 on the fly
        self.topics = topics
        self.split = (words.shape[1], words.shape[1] + vectors.shape[1])
        # Reused by every product with the words, either way (fresh memory is slow to touch).
        self._products = np.empty(words.nnz)

    def __len__(self) -> int:
        return len(self.topics)

    def dot(self, coef: np.ndarray) -> np.ndarray:
        """Each row's product with the weights (the model's part of its log-odds)."""
        w, v = self.split
        out = self.words.dot(coef[:w], self._products)
        if v > w:
            out += np.einsum("ij,j->i", self.vectors, EMBEDDING_SCALE * coef[w:v])
        if len(coef) > v:
            out += np.einsum("ij,j->i", self.topics, coef[v:])
        return out

    def tdot(self, r: np.ndarray) -> np.ndarray:
        """The weights' gradient of sum(r * rows @ weights): rows transposed times r."""
        w, v = self.split
        parts = [self.words.tdot(r, self._products)]
        if v > w:
            parts.append(EMBEDDING_SCALE * np.einsum("ij,i->j", self.vectors, r))
        parts.append(np.einsum("ij,i->j", self.topics, r))
        return np.concatenate(parts)

    def hess_dot(self, curvature: np.ndarray, direction: np.ndarray) -> np.ndarray:
        """rows.T @ (curvature * rows @ direction): the data's part of a Hessian product."""
        return self.tdot(curvature * self.dot(direction))


class Features:
    """Per paper, its row of words, its embedding and its topic scores (see the module's summary)."""

    def __init__(self, words: CSR, vectors: np.ndarray, topics: np.ndarray, at: np.ndarray | None = None):
        self.text_words = words
        self.text_vectors = vectors
        self.topics = np.asarray(TOPIC_SCALE * np.asarray(topics, dtype=np.float64) / 10.0)
        self.at = at  # each paper's text row (-1: not read yet); None: paper i is text row i
        if at is None and (len(words) != len(self.topics) or len(vectors) != len(self.topics)):
            raise ValueError("the words, vectors and topics have different numbers of rows")

    @property
    def words(self) -> int:
        """The number of word columns (they come first)."""
        return self.text_words.shape[1]

    @property
    def dims(self) -> int:
        return int(self.text_vectors.shape[1]) if self.text_vectors.ndim == 2 else 0

    @property
    def width(self) -> int:
        return self.words + self.dims + int(self.topics.shape[1])

    def __len__(self) -> int:
        return len(self.topics)

    def text_rows(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(rows if self.at is None else self.at[rows], dtype=np.int64)

    def block(self, rows: np.ndarray) -> Block:
        """These papers' rows, gathered (float64) for the many products of training."""
        rows = np.asarray(rows, dtype=np.int64)
        text = self.text_rows(rows)
        known = text >= 0
        vectors = np.zeros((len(rows), self.dims))
        if self.dims and len(self.text_vectors):
            # Gathered a chunk at a time: the float32 copy of all of them would be 50 MB more.
            picked = np.where(known, text, 0)
            for start in range(0, len(rows), CHUNK):
                vectors[start : start + CHUNK] = self.text_vectors[picked[start : start + CHUNK]]
            vectors[~known] = 0.0
        return Block(self.text_words.take(text, np.intp), vectors, self.topics[rows])

    def dot(self, coef: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """X @ coef for every paper, or for these rows."""
        if rows is not None:
            return self.block(rows).dot(coef)
        w, v = self.words, self.words + self.dims
        per_text = self.text_words.dot(coef[:w])
        if self.dims and len(per_text):
            per_text += dense_dot(self.text_vectors, EMBEDDING_SCALE * coef[w:v])
        if self.at is None:
            out = per_text
        else:
            out = np.zeros(len(self))
            known = self.at >= 0
            out[known] = per_text[self.at[known]]
        if len(coef) > v:
            out = out + np.einsum("ij,j->i", self.topics, coef[v:])
        return np.asarray(out, dtype=np.float64)

    def word_row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(word columns, TF-IDF weights) of paper i."""
        text = int(self.text_rows(np.array([i]))[0])
        if text < 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return self.text_words.row(text)

    def vectors_of(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The embeddings of these papers (zeros for a paper without one)."""
        text = self.text_rows(np.asarray(rows, dtype=np.int64))
        out = np.zeros((len(text), self.dims), dtype=np.float32)
        known = text >= 0
        if known.any() and self.dims:
            out[known] = self.text_vectors[text[known]]
        return out


def features(words: Any, vectors: np.ndarray, topics: np.ndarray) -> Features:
    """The features of papers given row by row: TF-IDF words (a CSR, or a scipy sparse
    matrix), embeddings (papers x dims) and topic scores (papers x topics, 0..10)."""
    words = CSR.of(words)
    vectors = np.asarray(vectors)
    if vectors.ndim != 2:
        vectors = vectors.reshape(len(words), -1)
    return Features(words, vectors, topics)
