"""The residual Lagrangian that a kind fitted from a model of the physics adds on request (``residual=True``).

``T_r = 1/2 |C(q)^T qd|^2`` with ``C`` the lower-triangular output of an MLP
of the model's features ``x(q)`` (so ``C C^T`` is positive semi-definite and
the kind's ``M`` stays as definite as it was) and ``V_r(q)`` an MLP, both
starting near zero (the last kernels at :data:`RESIDUAL_INIT` of their usual
scale): it learns what the kind's own Lagrangian misses. The kinds
``"rigid-body"`` (:mod:`lnn.models.rigid_body`) and ``"trigonometric"``
(:mod:`lnn.models.trigonometric`) hold one; its networks are the model's
attributes ``residual_net`` and ``residual_potential_net`` (names saved files carry).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn import mechanics
from lnn.models.mlp import MLP
from lnn.models.triangular import assemble_triangular, tril_index

__all__ = ["NETWORKS", "RESIDUAL_INIT", "ResidualLagrangian"]

#: The residual networks' last kernels start at this fraction of their usual scale.
RESIDUAL_INIT = 1e-2
#: The attributes of the model that hold the residual's networks.
NETWORKS = ("residual_net", "residual_potential_net")


class ResidualLagrangian:
    """The residual ``L_r = T_r - V_r`` of a model (see the module docstring); TensorFlow, batch-first."""

    def __init__(self, model, *, n_features: int, seeds, options: dict) -> None:
        n = model.n_dof
        common = dict(activation=options["activation"], dtype=options["dtype"])
        hidden = options["hidden"]
        model.residual_net = MLP(n_features, 0, hidden, n * (n + 1) // 2, seed=int(seeds[0]), name="residual", **common)
        model.residual_potential_net = MLP(
            n_features, 0, hidden, 1, seed=int(seeds[1]), name="residual_potential", output_bias=False, **common
        )
        for net in (model.residual_net, model.residual_potential_net):
            net._raw_kernels[-1].assign(RESIDUAL_INIT * np.asarray(net._raw_kernels[-1]))
        self.model = model
        self._index = tril_index(n)

    def factor(self, q):
        """``C(q)``, shape ``(B, n, n)``."""
        n = self.model.n_dof
        raw = self.model.residual_net.forward(self.model.features(q).x)
        return assemble_triangular(raw[:, :n], raw[:, n:], self._index)  # C C^T is positive semi-definite for any C

    def mass(self, q):
        """``M_r = C C^T``, shape ``(B, n, n)``."""
        c = self.factor(q)
        return tf.matmul(c, c, transpose_b=True)

    def kinetic(self, q, qd):
        """``T_r``, shape ``(B,)``."""
        ctq = tf.linalg.matvec(self.factor(q), qd, transpose_a=True)
        return 0.5 * tf.reduce_sum(ctq * ctq, -1)

    def potential(self, q):
        """``V_r``, shape ``(B,)``."""
        return self.model.residual_potential_net.forward(self.model.features(q).x)[:, 0]

    def dynamics_terms(self, q, qd):
        """``(M_r, dL_r/dq, (d2L_r/dqd dq) qd)`` by the nested tapes of :mod:`lnn.mechanics`."""
        return mechanics._dynamics_terms(mechanics.separable(self.kinetic, self.potential), q, qd, "reverse")

    def inverse_dynamics(self, q, qd, qdd):
        """``d/dt (dL_r/dqd) - dL_r/dq``: Hessian-vector products by the tapes of :mod:`lnn.mechanics`, no Hessian."""
        return mechanics._inverse_dynamics_body(mechanics.separable(self.kinetic, self.potential), q, qd, qdd)
