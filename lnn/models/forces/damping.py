"""Force ``damping``: the learned viscous matrix ``-D qd`` of ``damping=True``.

``D = C_D C_D^T`` is constant, symmetric positive semi-definite
(:class:`lnn.models.damping.ViscousDamping`, variables ``damping_diag`` and
``damping_lower``), so ``qd . (-D qd) <= 0``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.damping import ViscousDamping
from lnn.models.forces import Force, NumpyForce, register_force


class NumpyDamping(NumpyForce):
    """The numpy twin of :class:`Damping`: ``-D qd`` with a snapshot of ``D``."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    def force(self, q, qd):
        """``-D qd``."""
        return -(qd @ self.matrix.T)


@register_force
class Damping(Force):
    """``-D qd`` with a learned constant SPD ``D``."""

    name = "damping"

    def __init__(self, model) -> None:
        super().__init__(model)
        self.viscous = ViscousDamping(model)

    def force(self, q, qd):
        """``-D qd``."""
        return -tf.linalg.matvec(self.viscous.matrix(), qd)

    def numpy(self, dtype):
        """:class:`NumpyDamping` of the current ``D``."""
        return NumpyDamping(self.viscous.numpy(dtype))

    def parameters(self):
        """``{"damping": D (n, n)}``."""
        return {"damping": np.asarray(self.viscous.matrix())}
