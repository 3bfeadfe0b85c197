"""Force ``offset``: a constant per-joint torque bias ``f_j = -o_j`` (a sensor offset; any sign).

Variable ``friction_offset`` ``(n,)``, starting at zero. Linear (least-squares
column ``1``, coefficient free); not dissipative.
"""

from __future__ import annotations

from lnn.models.forces.base import LinearForce, register_force


@register_force
class Offset(LinearForce):
    """``-o`` with a learned ``o`` per joint."""

    name = "offset"
    variable = "friction_offset"
    initial = 0.0
    dissipative = False
    nonnegative = False

    @staticmethod
    def columns(xp, q, qd, velocity):
        """Ones, shape of ``qd``."""
        return xp.ones_like(qd)
