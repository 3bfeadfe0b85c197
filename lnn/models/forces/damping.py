"""Force ``damping``: the learned viscous matrix ``f = -D qd`` (``damping=True``).

``D = C C^T`` with ``C`` lower-triangular, ``C = diag(softplus(d)) +
tril(l)``: a constant, symmetric positive semi-definite matrix (definite
while the diagonal is positive), so the force always dissipates, ``qd .
(-D qd) <= 0``. Two variables on the model: ``damping_diag`` ``d (n,)`` and
``damping_lower`` ``l (n(n-1)/2,)`` (entries in ``numpy.tril_indices(n, -1)``
order; the names saved models carry); the diagonal of ``C`` starts at
:data:`INITIAL`. Not per joint, hence not linear in the sense of least
squares; :meth:`Damping.damping_matrix` gives ``D``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.forces.base import Force, NumpyForce, register_force
from lnn.models.triangular import lower_triangular, tril_index

#: Initial diagonal of ``C`` (after softplus).
INITIAL = 0.05


class NumpyDamping(NumpyForce):
    """The numpy twin of :class:`Damping`: ``-D qd`` with a snapshot of ``D``."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    def force(self, q, qd):
        """``-D qd``."""
        return -(qd @ self.matrix.T)


@register_force
class Damping(Force):
    """``-D qd`` with a learned constant symmetric positive semi-definite ``D``."""

    name = "damping"

    def __init__(self, model) -> None:
        super().__init__(model)
        n, dtype = model.n_dof, model.dtype
        self._index = tril_index(n)
        model.damping_diag = model.add_weight(name="damping_diag", shape=(n,), initializer="zeros", dtype=dtype)
        model.damping_diag.assign(np.full(n, np.log(np.expm1(INITIAL)), dtype=dtype))
        model.damping_lower = model.add_weight(
            name="damping_lower", shape=(n * (n - 1) // 2,), initializer="zeros", dtype=dtype
        )

    def matrix(self):
        """``D``, a tensor of shape ``(n, n)`` (the same as :meth:`damping_matrix`)."""
        model = self.model
        c = lower_triangular(model.damping_diag, model.damping_lower, self._index)
        return tf.matmul(c, c, transpose_b=True)

    def damping_matrix(self):
        """``D``, shape ``(n, n)``."""
        return self.matrix()

    def force(self, q, qd):
        """``-D qd``."""
        return -tf.linalg.matvec(self.matrix(), qd)

    def numpy(self, dtype):
        """:class:`NumpyDamping` of the current ``D``."""
        return NumpyDamping(np.ascontiguousarray(np.asarray(self.matrix()), dtype=dtype))

    def parameters(self):
        """``{"damping": D (n, n)}``."""
        return {"damping": np.asarray(self.matrix())}
