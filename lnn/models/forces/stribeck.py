"""Force ``stribeck``: per-joint static friction above the Coulomb level, falling off with the rate.

    f_j = -sum_k s_jk exp(-(qd_j / vs_k)^2) tanh(qd_j / v0),     s_jk >= 0,

with the Stribeck velocities ``vs_k`` of :data:`STRIBECK_VELOCITIES` (rad/s or
m/s) and ``v0`` the model's ``friction_velocity``. A joint breaks away at a
higher friction than it slides at (Stribeck's curve); where that excess
falls off is a property of the joint (0.01-0.3 rad/s on robot arms' gears),
so the force is a non-negative mixture of three fall-offs rather than one
guessed width: least squares chooses the mixture (three features per joint,
variable ``friction_stribeck`` of shape ``(3, n)``, raw, through softplus).

Passive by construction: each column ``e_k tanh(qd_j / v0)`` has the sign of
``qd_j`` and each coefficient is ``>= 0``, so ``qd_j f_j <= 0`` in every
state. A :attr:`~lnn.models.forces.Force.refinement` of ``coulomb``:
:func:`lnn.identify` keeps it only where the leave-one-recording-out
validation does (``docs/benchmarks/real-robots.md`` has what it changed on
a simulated arm and a real pendulum).
"""

from __future__ import annotations

from lnn.models.forces.base import LinearForce, register_force

#: The Stribeck velocities ``vs_k`` (rad/s) of the three fall-offs: a decade of robot joints' range.
STRIBECK_VELOCITIES = (0.03, 0.1, 0.3)


@register_force
class Stribeck(LinearForce):
    """``-sum_k s_k exp(-(qd / vs_k)^2) tanh(qd / v0)`` with learned ``s_k >= 0`` per joint."""

    name = "stribeck"
    variable = "friction_stribeck"
    initial = 0.003
    features = len(STRIBECK_VELOCITIES)
    refinement = True

    @staticmethod
    def columns(xp, q, qd, velocity):
        """``exp(-(qd / vs_k)^2) tanh(qd / v0)`` for each ``vs_k``."""
        sign = xp.tanh(qd / velocity)
        return tuple(xp.exp(-((qd / vs) ** 2)) * sign for vs in STRIBECK_VELOCITIES)
