"""Lower-triangular and symmetric matrices assembled from their free entries by one gather.

The Cholesky factors of the structured kind, the residual Lagrangian and the
damping force, and the symmetric mass matrix of the trigonometric kind, are
built from a flat vector of free entries. A dense 0/1 scatter matrix would do
it as one product, at ``n^2 (n - 1) n / 2`` multiplications per sample: the
dominant cost of a 64-joint model. A gather of ``n^2`` entries costs ``O(n^2)``,
value and gradient alike, and compiles under XLA.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["assemble_triangular", "lower_triangular", "symmetric_index", "tril_index"]


def tril_index(n: int) -> np.ndarray:
    """Where each entry of ``C`` comes from in ``[diag (n), lower (n(n-1)/2), 0]``, shape ``(n^2,)``.

    Entry ``(i, i)`` reads ``diag[i]``, entry ``(i, j)`` with ``i > j`` reads
    the strictly lower output in ``numpy.tril_indices(n, -1)`` order, and every
    entry above the diagonal reads the trailing zero: ``C`` is one gather of
    ``n^2`` values (a dense scatter matrix would cost ``n^2 (n - 1) n / 2``
    multiplications per sample, the dominant cost at 64 joints).
    """
    rows, cols = np.tril_indices(n, -1)
    index = np.full((n, n), n + len(rows), dtype=np.int32)
    index[np.arange(n), np.arange(n)] = np.arange(n)
    index[rows, cols] = n + np.arange(len(rows))
    return index.reshape(-1)


def assemble_triangular(diag, lower, index):
    """``diag(diag) + tril(lower)`` for a batch (``(B, n)``, ``(B, m)``) or one matrix.

    ``index`` is :func:`tril_index` of ``n``: the entries are gathered from
    ``[diag, lower, 0]``, so both the value and its gradient cost ``O(n^2)``.
    """
    n = diag.shape[-1]
    if n == 1:
        return tf.linalg.diag(diag)
    flat = tf.concat([diag, lower, tf.zeros_like(diag[..., :1])], axis=-1)
    entries = tf.gather(flat, index, axis=-1)
    if diag.shape.rank == 1:
        return tf.reshape(entries, (n, n))
    return tf.reshape(entries, (-1, n, n))


def lower_triangular(diag_raw, lower, index):
    """``C = diag(softplus(diag_raw)) + tril(lower)`` for a batch (``(B, n)``, ``(B, m)``) or one matrix."""
    return assemble_triangular(tf.math.softplus(diag_raw), lower, index)


def symmetric_index(rows: np.ndarray, cols: np.ndarray, n: int) -> np.ndarray:
    """Where each entry of a symmetric ``(n, n)`` matrix comes from in its upper-triangle entries, ``(n^2,)``.

    ``rows``, ``cols`` list the free entries ``(i, j)``, ``i <= j``, in the
    order of the flat vector; entries ``(i, j)`` and ``(j, i)`` both read it.
    """
    index = np.zeros((n, n), dtype=np.int32)
    index[rows, cols] = np.arange(len(rows))
    index[cols, rows] = np.arange(len(rows))
    return index.reshape(-1)
