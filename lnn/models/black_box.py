"""Kind ``"black-box"``: one MLP ``L(q, qd)`` (Cranmer et al. 2020).

Its split into energies is ``V(q) = -L(q, 0)`` and ``T = L - L(q, 0)``; the
closed forms (TensorFlow and numpy) are those of :mod:`lnn.models.scalar`.
"""

from __future__ import annotations

import tensorflow as tf

from lnn.models.mlp import MLP
from lnn.models.registry import Kind, register_kind
from lnn.models.scalar import NumpyScalar, scalar_terms

__all__ = ["BlackBox"]


@register_kind
class BlackBox(Kind):
    """``L`` an MLP of ``(x(q), qd / qd_scale)``."""

    name = "black-box"
    networks = ("lagrangian_net",)

    def build(self, *, n_features, seeds, options):
        """The Lagrangian MLP (convex in ``qd`` at initialisation with ``convex_init``)."""
        m = self.model
        m.lagrangian_net = MLP(
            n_features,
            m.n_dof,
            options["hidden"],
            1,
            seed=int(seeds[0]),
            name="lagrangian",
            activation=options["activation"],
            dtype=options["dtype"],
            output_bias=False,
            convex_init=options["convex_init"],
        )

    def lagrangian(self, q, qd):
        """``L = MLP(x, qd / s)``."""
        m = self.model
        return m.lagrangian_net.forward(m.features(q).x, qd / m.qd_std)[:, 0]

    def kinetic(self, q, qd):
        """``T = L(q, qd) - L(q, 0)``."""
        return self.lagrangian(q, qd) - self.lagrangian(q, tf.zeros_like(qd))

    def potential(self, q):
        """``V = -L(q, 0)``."""
        return -self.lagrangian(q, tf.zeros_like(q))

    def tape_lagrangian(self):
        """``L`` itself (its Hessian in ``qd`` is ``M``)."""
        return self.lagrangian

    def terms(self, q, qd, *, hessian, mixed, grad_q):
        """Closed form (:func:`lnn.models.scalar.scalar_terms`)."""
        return scalar_terms(self.model, self.model.lagrangian_net, q, qd, hessian=hessian, mixed=mixed, grad_q=grad_q)

    def numpy(self, fold):
        """:class:`lnn.models.scalar.NumpyScalar` of ``L``."""
        m = self.model
        return NumpyScalar(fold(m.lagrangian_net), None, 0.0, m.input_map, m.numpy_dtype)
