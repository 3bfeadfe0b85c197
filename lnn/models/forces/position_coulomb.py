"""Force ``position_coulomb``: per-joint Coulomb friction whose level changes with the joint's angle.

    f_j = -c_j(q_j) tanh(qd_j / v0),
    c_j(q) = a_j1 (1 + cos q)/2 + a_j2 (1 - cos q)/2 + a_j3 (1 + sin q)/2 + a_j4 (1 - sin q)/2,   a_jm >= 0.

A gear's mesh, a seal or a cable drags more at some angles than at others;
``c_j(q) = c_0 + a cos q + b sin q`` is the first harmonic of that dependence,
written over four non-negative factors so that the level is never negative
(every ``c_0 >= |a| + |b|`` is reached). Four features per joint, variable
``friction_position_coulomb`` of shape ``(4, n)`` (raw, through softplus);
``v0`` is the model's ``friction_velocity``. For a linear coordinate the
factors read its value in its units (bounded and non-negative all the same).

Passive by construction: ``c_j(q_j) >= 0`` and ``qd_j tanh(qd_j / v0) >= 0``,
so ``qd_j f_j <= 0`` in every state. A
:attr:`~lnn.models.forces.Force.refinement` of ``coulomb``: :func:`lnn.identify`
keeps it only where the leave-one-recording-out validation does
(``docs/benchmarks/real-robots.md`` has what it changed on a simulated arm
and a real pendulum).
"""

from __future__ import annotations

from lnn.models.forces.base import LinearForce, register_force


@register_force
class PositionCoulomb(LinearForce):
    """``-c(q) tanh(qd / v0)`` with ``c(q)`` a non-negative first harmonic of the joint's angle."""

    name = "position_coulomb"
    variable = "friction_position_coulomb"
    initial = 0.01
    features = 4
    refinement = True
    needs_q = True

    @staticmethod
    def columns(xp, q, qd, velocity):
        """``(1 ± cos q) / 2 * tanh(qd / v0)`` and ``(1 ± sin q) / 2 * tanh(qd / v0)``."""
        sign = xp.tanh(qd / velocity)
        cos, sin = xp.cos(q), xp.sin(q)
        return ((1 + cos) / 2 * sign, (1 - cos) / 2 * sign, (1 + sin) / 2 * sign, (1 - sin) / 2 * sign)
