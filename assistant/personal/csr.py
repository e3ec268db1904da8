"""Sparse rows in plain numpy: the TF-IDF of the store's papers, without scipy.

Compressed sparse rows (data, indices, indptr) with the few operations the personal model
needs: picking rows, the product with a vector and the transposed product. The arrays may be
memory-mapped `.npy` files: a command that scores a few papers reads only their rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CHUNK = 1 << 18  # entries a product reads at a time (`CSR.dot`)


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

    def take(self, rows: np.ndarray, index_type: type = np.int32) -> CSR:
        """These rows, in this order; a row of -1 is an empty row (a paper not read yet). The
        column indices are of `index_type`; the entries are gathered CHUNK at a time (the
        positions of all of them at once would take as much memory again)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.shape[0]:
            return CSR.empty(len(rows), self.shape[1])
        known = rows >= 0
        safe = np.where(known, rows, 0)
        starts = self.indptr[safe]
        lengths = np.where(known, self.indptr[safe + 1] - starts, 0)
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        entries = int(indptr[-1])
        shape = (len(rows), self.shape[1])
        out = CSR(np.empty(entries), np.empty(entries, dtype=index_type), indptr, shape)
        bounds = out._bounds()
        for first, last in zip(bounds[:-1], bounds[1:], strict=True):
            begin, end = int(indptr[first]), int(indptr[last])
            # The position in data of every entry picked: its row's start plus its place in the row.
            at = np.repeat(starts[first:last] - indptr[first:last], lengths[first:last]) + np.arange(
                begin, end, dtype=np.int64
            )
            out.data[begin:end] = self.data[at]
            out.indices[begin:end] = self.indices[at]
        return out

    def dot(self, vector: np.ndarray, buffer: np.ndarray | None = None) -> np.ndarray:
        """The product with a vector of the columns' length (one value per row); `buffer`, of
        nnz floats, saves allocating one (for many products: fresh memory is slow to touch).
        A matrix of more than CHUNK entries is read CHUNK entries at a time (the same sums)."""
        if buffer is None and self.nnz > CHUNK:
            return self._dot_in_chunks(vector)
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

    def _dot_in_chunks(self, vector: np.ndarray) -> np.ndarray:
        """`dot`, a run of rows of about CHUNK entries at a time: the entries' products never
        take more memory than that (at 100k papers they would take 150 MB, and fresh memory
        costs more to touch than the products cost to make)."""
        out = np.zeros(self.shape[0])
        buffer = np.empty(CHUNK)
        indptr = np.asarray(self.indptr)
        bounds = self._bounds()
        for first, last in zip(bounds[:-1], bounds[1:], strict=True):
            start, end = int(indptr[first]), int(indptr[last])
            if end == start:
                continue
            chunk = CSR(
                self.data[start:end],
                self.indices[start:end],
                indptr[first : last + 1] - start,
                (last - first, self.shape[1]),
            )
            if end - start > CHUNK:  # one row longer than a chunk
                out[first:last] = chunk.dot(vector, np.empty(end - start))
            else:
                out[first:last] = chunk.dot(vector, buffer[: end - start])
        return out

    def tdot(self, vector: np.ndarray, buffer: np.ndarray | None = None) -> np.ndarray:
        """The transposed product: the columns' sums of the rows weighted by `vector`. `buffer`,
        of nnz floats, is where each entry's weight is put (for many products: fresh memory is
        slow to touch), a run of rows of about CHUNK entries at a time."""
        if not self.nnz:
            return np.zeros(self.shape[1])
        lengths = self.lengths()
        if buffer is None:
            weights = np.repeat(vector, lengths)
        else:
            weights = buffer[: self.nnz]
            bounds = self._bounds()
            for first, last in zip(bounds[:-1], bounds[1:], strict=True):
                start, end = int(self.indptr[first]), int(self.indptr[last])
                weights[start:end] = np.repeat(vector[first:last], lengths[first:last])
        np.multiply(weights, self.data, out=weights)
        return np.bincount(self.indices, weights=weights, minlength=self.shape[1])

    def _bounds(self) -> np.ndarray:
        """Rows where runs of about CHUNK entries start (and the last row's end)."""
        indptr = np.asarray(self.indptr)
        starts = np.searchsorted(indptr, np.arange(0, self.nnz, CHUNK), side="right") - 1
        return np.unique(np.concatenate([starts, [self.shape[0]]]))

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

    @staticmethod
    def stack(parts: list[CSR], columns: int) -> CSR:
        """The rows of these matrices, one after the other."""
        out = CSR.empty(0, columns)
        for part in parts:
            out = out.vstack(part)
        return out

    def replace_rows(self, at: np.ndarray, rows: CSR) -> CSR:
        """A copy with row at[k] replaced by row k of `rows`."""
        order = np.arange(self.shape[0], dtype=np.int64)
        order[at] = self.shape[0] + np.arange(len(at))
        return self.vstack(rows).take(order)
