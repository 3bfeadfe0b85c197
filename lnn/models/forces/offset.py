"""Force ``offset``: a constant per-joint torque bias ``f_j = -o_j`` (a sensor offset; any sign).

Variable ``friction_offset`` ``(n,)``, starting at zero. Not dissipative.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.forces import Force, NumpyForce, joint_vector, register_force


class NumpyOffset(NumpyForce):
    """The numpy twin of :class:`Offset`: ``-o`` with a snapshot of ``o``."""

    def __init__(self, o: np.ndarray) -> None:
        self.o = o

    def force(self, q, qd):
        """``-o`` broadcast to ``qd``'s shape."""
        return np.broadcast_to(-self.o, qd.shape).astype(qd.dtype)


@register_force
class Offset(Force):
    """``-o`` with a learned ``o`` per joint."""

    name = "offset"
    dissipative = False

    def __init__(self, model) -> None:
        super().__init__(model)
        model.friction_offset = joint_vector(model, "friction_offset", 0.0, positive=False)

    def force(self, q, qd):
        """``-o`` for every sample."""
        return -self.model.friction_offset + tf.zeros_like(qd)

    def numpy(self, dtype):
        """:class:`NumpyOffset` of the current ``o``."""
        return NumpyOffset(np.asarray(self.model.friction_offset).astype(dtype))

    def parameters(self):
        """``{"offset": o (n,)}``."""
        return {"offset": np.asarray(self.model.friction_offset)}

    def assign(self, offset) -> None:
        """Set ``o`` (``(n,)``)."""
        self.model.friction_offset.assign(np.asarray(offset, self.model.friction_offset.dtype))
