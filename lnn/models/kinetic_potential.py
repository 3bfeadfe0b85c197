"""Kind ``"kinetic-potential"``: ``L = T(q, qd) - V(q)`` with a kinetic MLP and a potential MLP.

``M = d2T/dqd2``. With ``convex=True`` the kinetic MLP is input-convex
(non-negative kernels after the first layer, softplus) and ``T`` gains
``epsilon/2 |qd|^2``, so ``M`` is positive definite by construction. The
closed forms (TensorFlow and numpy) are those of :mod:`lnn.models.scalar`.
"""

from __future__ import annotations

import tensorflow as tf

from lnn.models.mlp import MLP
from lnn.models.registry import Kind, register_kind
from lnn.models.scalar import NumpyScalar, scalar_terms

__all__ = ["KineticPotential"]


@register_kind
class KineticPotential(Kind):
    """``T`` an MLP of ``(x(q), qd / qd_scale)``, ``V`` an MLP of ``x(q)``."""

    name = "kinetic-potential"
    networks = ("kinetic_net", "potential_net")
    convex = True

    def build(self, *, n_features, seeds, options):
        """The kinetic MLP (convex in ``qd`` at initialisation with ``convex_init``) and the potential MLP."""
        m, hidden = self.model, options["hidden"]
        scalar = dict(activation=options["activation"], dtype=options["dtype"], output_bias=False)
        m.kinetic_net = MLP(n_features, m.n_dof, hidden, 1, nonnegative=options["convex"],
                            seed=int(seeds[0]), name="kinetic", convex_init=options["convex_init"],
                            **scalar)
        m.potential_net = MLP(n_features, 0, hidden, 1, seed=int(seeds[1]), name="potential", **scalar)

    @property
    def _epsilon(self) -> float:
        return self.model.epsilon if self.model.convex else 0.0

    def kinetic(self, q, qd):
        """``T = y(x, qd / s) (+ eps/2 |qd|^2 when convex)``."""
        m = self.model
        t = m.kinetic_net.forward(m.features(q).x, qd / m.qd_std)[:, 0]
        if self._epsilon:
            t = t + 0.5 * self._epsilon * tf.reduce_sum(qd * qd, axis=-1)
        return t

    def potential(self, q):
        """``V = MLP(x)``."""
        return self.model.potential_net.forward(self.model.features(q).x)[:, 0]

    def terms(self, q, qd, *, hessian, mixed, grad_q):
        """Closed form (:func:`lnn.models.scalar.scalar_terms`)."""
        m = self.model
        return scalar_terms(m, m.kinetic_net, q, qd, potential=m.potential_net,
                            epsilon=self._epsilon, hessian=hessian, mixed=mixed, grad_q=grad_q)

    def numpy(self, fold):
        """:class:`lnn.models.scalar.NumpyScalar` of ``T`` and ``V``."""
        m = self.model
        return NumpyScalar(fold(m.kinetic_net), fold(m.potential_net), self._epsilon,
                           m.input_map, m.numpy_dtype)
