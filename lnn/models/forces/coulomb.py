"""Force ``coulomb``: smooth per-joint Coulomb friction ``f_j = -c_j tanh(qd_j / v0)``.

``c_j = softplus(w_j) >= 0`` (variable ``friction_coulomb``, raw, ``(n,)``),
``v0`` the model's ``friction_velocity``; ``qd_j f_j <= 0`` always.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.forces import Force, NumpyForce, assign_positive, joint_vector, positive, register_force

#: Initial Coulomb coefficient (N m).
INITIAL = 0.01


class NumpyCoulomb(NumpyForce):
    """The numpy twin of :class:`Coulomb`: ``-c tanh(qd / v0)`` with a snapshot of ``c``."""

    def __init__(self, c: np.ndarray, velocity: float) -> None:
        self.c, self.velocity = c, velocity

    def force(self, q, qd):
        """``-c * tanh(qd / v0)``."""
        return -self.c * np.tanh(qd / self.velocity)


@register_force
class Coulomb(Force):
    """``-c * tanh(qd / v0)`` with learned ``c >= 0`` per joint."""

    name = "coulomb"

    def __init__(self, model) -> None:
        super().__init__(model)
        model.friction_coulomb = joint_vector(model, "friction_coulomb", INITIAL, positive=True)

    def coefficients(self):
        """``c``, a tensor of shape ``(n,)``."""
        return positive(self.model.friction_coulomb)

    def force(self, q, qd):
        """``-c * tanh(qd / v0)``."""
        return -self.coefficients() * tf.tanh(qd / self.model.friction_velocity)

    def numpy(self, dtype):
        """:class:`NumpyCoulomb` of the current ``c``."""
        return NumpyCoulomb(np.asarray(self.coefficients()).astype(dtype), float(self.model.friction_velocity))

    def parameters(self):
        """``{"coulomb": c (n,)}``."""
        return {"coulomb": np.asarray(self.coefficients())}

    def assign(self, coulomb) -> None:
        """Set ``c`` (``(n,)``, >= 0)."""
        assign_positive(self.model.friction_coulomb, coulomb)
