"""Learned viscous damping: the generalized force ``-D qd``, in TensorFlow and numpy.

``D = C_D C_D^T`` with ``C_D`` lower-triangular and a softplus diagonal: a
constant, symmetric positive-definite matrix, so the force always dissipates
(``qd . (-D qd) <= 0``). Its two variables live on the model
(``damping_diag``, ``damping_lower``: the names saved models carry); the
diagonal starts at ``softplus^-1(0.05)``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.structured import lower_triangular, tril_scatter

__all__ = ["ViscousDamping"]


class ViscousDamping:
    """The damping force of one model.

    Parameters
    ----------
    model : lnn.LagrangianNetwork
        Receives the variables ``damping_diag (n,)`` and ``damping_lower (n(n-1)/2,)``.
    """

    #: Initial diagonal of ``C_D`` (after softplus).
    INITIAL = 0.05

    def __init__(self, model) -> None:
        n, dtype = model.n_dof, model.dtype
        self._scatter = tril_scatter(n, dtype)
        model.damping_diag = model.add_weight(name="damping_diag", shape=(n,), initializer="zeros", dtype=dtype)
        model.damping_diag.assign(np.full(n, np.log(np.expm1(self.INITIAL)), dtype=dtype))
        model.damping_lower = model.add_weight(
            name="damping_lower", shape=(n * (n - 1) // 2,), initializer="zeros", dtype=dtype
        )
        self.model = model

    def matrix(self):
        """``D``, a tensor of shape ``(n, n)``."""
        c = lower_triangular(self.model.damping_diag, self.model.damping_lower, self._scatter)
        return tf.matmul(c, c, transpose_b=True)

    def force(self, qd):
        """``-D qd`` for ``qd (B, n)`` (tensors)."""
        return -tf.linalg.matvec(self.matrix(), qd)

    def numpy(self, dtype) -> np.ndarray:
        """``D`` as a contiguous numpy array of ``dtype``."""
        return np.ascontiguousarray(np.asarray(self.matrix()), dtype=dtype)
