"""Sparse rows in plain numpy: the TF-IDF of the store's papers, without scipy.

Compressed sparse rows (data, indices, indptr) with the few operations the personal model
needs: picking rows, the product with a vector and the transposed product. The arrays may be
memory-mapped `.npy` files: a command that scores a few papers reads only their rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class CSR:
    """A matrix in compressed sparse rows (rows may be empty; indptr starts at 0)."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]):
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.shape = (int(shape[0]), int(shape[1]))

    @classmethod
    def empty(cls, rows: int = 0, cols: int = 0) -> CSR:
        return cls(np.zeros(0), np.zeros(0, np.int32), np.zeros(rows + 1, np.int64), (rows, cols))

    @classmethod
    def of(cls, matrix: Any) -> CSR:
        """A CSR from this one or from a scipy sparse matrix (read by its arrays: no scipy import)."""
        if isinstance(matrix, CSR):
            return matrix
        if not hasattr(matrix, "indptr"):
            matrix = matrix.tocsr()
        if getattr(matrix, "format", "csr") != "csr":
            matrix = matrix.tocsr()
        if hasattr(matrix, "has_canonical_format") and not matrix.has_canonical_format:
            matrix = matrix.copy()
            matrix.sum_duplicates()  # duplicate entries add up, as scipy's own products do
        indptr = np.asarray(matrix.indptr, dtype=np.int64)
        start, end = int(indptr[0]), int(indptr[-1])
        return cls(
            np.asarray(matrix.data[start:end], dtype=np.float64),
            np.asarray(matrix.indices[start:end], dtype=np.int32),
            indptr - start,
            matrix.shape,
        )

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def __len__(self) -> int:
        return self.shape[0]

    def lengths(self) -> np.ndarray:
        """Entries per row."""
        return np.diff(self.indptr)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(column indices, values) of row i."""
        start, end = int(self.indptr[i]), int(self.indptr[i + 1])
        return np.asarray(self.indices[start:end]), np.asarray(self.data[start:end])

    def __getitem__(self, rows: Any) -> CSR:
        if isinstance(rows, (int, np.integer)):
            return self.take(np.array([rows], dtype=np.int64))
        return self.take(np.asarray(rows, dtype=np.int64))

    def take(self, rows: np.ndarray) -> CSR:
        """These rows, in this order; a row of -1 is an empty row (a paper not read yet)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.shape[0]:
            return CSR.empty(len(rows), self.shape[1])
        known = rows >= 0
        safe = np.where(known, rows, 0)
        starts = self.indptr[safe]
        lengths = np.where(known, self.indptr[safe + 1] - starts, 0)
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        # The position in data of every entry picked: its row's start plus its place in the row.
        at = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
        return CSR(
            np.asarray(self.data[at], dtype=np.float64),
            np.asarray(self.indices[at], dtype=np.int32),
            indptr,
            (len(rows), self.shape[1]),
        )

    def dot(self, vector: np.ndarray, buffer: np.ndarray | None = None) -> np.ndarray:
        """The product with a vector of the columns' length (one value per row); `buffer`, of
        nnz floats, saves allocating one (for many products: fresh memory is slow to touch)."""
        out = np.zeros(self.shape[0])
        if not self.nnz:
            return out
        products = np.take(vector, self.indices, out=buffer, mode="clip")
        np.multiply(products, self.data, out=products)
        filled = self.indptr[1:] > self.indptr[:-1]
        # reduceat sums from each start to the next; an empty row would take the next row's
        # first entry, so only rows with entries are summed.
        if filled.all():
            return np.asarray(np.add.reduceat(products, self.indptr[:-1]), dtype=np.float64)
        out[filled] = np.add.reduceat(products, self.indptr[:-1][filled])
        return out

    def tdot(self, vector: np.ndarray) -> np.ndarray:
        """The transposed product: the columns' sums of the rows weighted by `vector`."""
        if not self.nnz:
            return np.zeros(self.shape[1])
        weights = np.repeat(vector, self.lengths())
        np.multiply(weights, self.data, out=weights)
        return np.bincount(self.indices, weights=weights, minlength=self.shape[1])

    def column_means(self) -> np.ndarray:
        """The mean of each column over the rows."""
        if not self.shape[0]:
            return np.zeros(self.shape[1])
        sums = np.bincount(self.indices, weights=self.data, minlength=self.shape[1])
        return np.asarray(sums / self.shape[0], dtype=np.float64)

    def vstack(self, other: CSR) -> CSR:
        """These rows, then the other's (of as many columns)."""
        return CSR(
            np.concatenate([np.asarray(self.data), np.asarray(other.data)]),
            np.concatenate([np.asarray(self.indices), np.asarray(other.indices)]).astype(np.int32),
            np.concatenate([np.asarray(self.indptr), np.asarray(other.indptr[1:]) + self.nnz]),
            (self.shape[0] + other.shape[0], self.shape[1]),
        )

    def replace_rows(self, at: np.ndarray, rows: CSR) -> CSR:
        """A copy with row at[k] replaced by row k of `rows`."""
        order = np.arange(self.shape[0], dtype=np.int64)
        order[at] = self.shape[0] + np.arange(len(at))
        return self.vstack(rows).take(order)
