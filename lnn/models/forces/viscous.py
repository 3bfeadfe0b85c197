"""Force ``viscous``: per-joint viscous friction ``f_j = -b_j qd_j``, ``b_j = softplus(w_j) >= 0``.

Variable ``friction_viscous`` (raw, ``(n,)``); ``b`` starts at :data:`INITIAL`.
"""

from __future__ import annotations

import numpy as np

from lnn.models.forces import Force, NumpyForce, assign_positive, joint_vector, positive, register_force

#: Initial viscous coefficient (N m s / rad).
INITIAL = 0.01


class NumpyViscous(NumpyForce):
    """The numpy twin of :class:`Viscous`: ``-b qd`` with a snapshot of ``b``."""

    def __init__(self, b: np.ndarray) -> None:
        self.b = b

    def force(self, q, qd):
        """``-b * qd``."""
        return -self.b * qd


@register_force
class Viscous(Force):
    """``-b * qd`` with learned ``b >= 0`` per joint."""

    name = "viscous"

    def __init__(self, model) -> None:
        super().__init__(model)
        model.friction_viscous = joint_vector(model, "friction_viscous", INITIAL, positive=True)

    def coefficients(self):
        """``b``, a tensor of shape ``(n,)``."""
        return positive(self.model.friction_viscous)

    def force(self, q, qd):
        """``-b * qd``."""
        return -self.coefficients() * qd

    def numpy(self, dtype):
        """:class:`NumpyViscous` of the current ``b``."""
        return NumpyViscous(np.asarray(self.coefficients()).astype(dtype))

    def parameters(self):
        """``{"viscous": b (n,)}``."""
        return {"viscous": np.asarray(self.coefficients())}

    def assign(self, viscous) -> None:
        """Set ``b`` (``(n,)``, >= 0)."""
        assign_positive(self.model.friction_viscous, viscous)
