"""Force ``coulomb``: smooth per-joint Coulomb friction ``f_j = -c_j tanh(qd_j / v0)``.

``c_j = softplus(w_j) >= 0`` (variable ``friction_coulomb``, raw, ``(n,)``),
``v0`` the model's ``friction_velocity``; ``qd_j f_j <= 0`` always. Linear
(least-squares column ``tanh(qd_j / v0)``).
"""

from __future__ import annotations

from lnn.models.forces.base import LinearForce, register_force

#: Initial Coulomb coefficient (N m).
INITIAL = 0.01


@register_force
class Coulomb(LinearForce):
    """``-c * tanh(qd / v0)`` with learned ``c >= 0`` per joint."""

    name = "coulomb"
    variable = "friction_coulomb"
    initial = INITIAL

    @staticmethod
    def columns(xp, q, qd, velocity):
        """``tanh(qd / v0)``."""
        return xp.tanh(qd / velocity)
