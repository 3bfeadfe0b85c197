"""Force ``viscous``: per-joint viscous friction ``f_j = -b_j qd_j``, ``b_j = softplus(w_j) >= 0``.

Variable ``friction_viscous`` (raw, ``(n,)``); ``b`` starts at :data:`INITIAL`.
Linear (least-squares column ``qd_j``), and exactly ``-D qd`` with ``D = diag(b)``.
"""

from __future__ import annotations

import tensorflow as tf

from lnn.models.forces.base import LinearForce, register_force

#: Initial viscous coefficient (N m s / rad).
INITIAL = 0.01


@register_force
class Viscous(LinearForce):
    """``-b * qd`` with learned ``b >= 0`` per joint."""

    name = "viscous"
    variable = "friction_viscous"
    initial = INITIAL

    @staticmethod
    def columns(xp, q, qd, velocity):
        """``qd``."""
        return qd

    def damping_matrix(self):
        """``diag(b)``, shape ``(n, n)``."""
        return tf.linalg.diag(self._coefficients())
