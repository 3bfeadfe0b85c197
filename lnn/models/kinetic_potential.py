"""Kind ``"kinetic-potential"``: ``L = T(q, qd) - V(q)`` with a kinetic MLP and a potential MLP.

``M = d2T/dqd2``. With ``convex=True`` the kinetic MLP is input-convex
(non-negative kernels after the first layer, softplus) and ``T`` gains
``epsilon/2 |qd|^2``, so ``M`` is positive definite by construction. The
closed forms (TensorFlow and numpy) are those of :mod:`lnn.models.scalar`.

The gauge: the networks give ``L = y(q, qd) - U(q)`` (``y`` the kinetic MLP,
``U`` the potential MLP), but ``y(q, 0)`` is not zero, so ``y`` is not the
kinetic energy nor ``U`` the potential. The parts are named so that ``T(q,
0) = 0`` and ``V`` is the potential, ``V(q) = -L(q, 0)``::

    T(q, qd) = y(q, qd) - y(q, 0),        V(q) = U(q) - y(q, 0)

``L = T - V``, ``M``, the dynamics and the energy ``E = qd . dL/dqd - L`` are
those of the networks (unchanged by the gauge, and by models saved before
it); only the split of ``L`` and ``E`` into ``T`` and ``V`` moved.
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
    xla_train = True  # 1.3-1.6x faster steps after a 2-7 s compilation (bench_mechanics.py "train")

    def build(self, *, n_features, seeds, options):
        """The kinetic MLP (convex in ``qd`` at initialisation with ``convex_init``) and the potential MLP."""
        m, hidden = self.model, options["hidden"]
        scalar = dict(activation=options["activation"], dtype=options["dtype"], output_bias=False)
        m.kinetic_net = MLP(
            n_features,
            m.n_dof,
            hidden,
            1,
            nonnegative=options["convex"],
            seed=int(seeds[0]),
            name="kinetic",
            convex_init=options["convex_init"],
            **scalar,
        )
        m.potential_net = MLP(n_features, 0, hidden, 1, seed=int(seeds[1]), name="potential", **scalar)

    @property
    def _epsilon(self) -> float:
        return self.model.epsilon if self.model.convex else 0.0

    def _kinetic_net(self, x, qd):
        """``y(x, qd / s) (+ eps/2 |qd|^2 when convex)``, shape ``(B,)``."""
        m = self.model
        y = m.kinetic_net.forward(x, qd / m.qd_std)[:, 0]
        if self._epsilon:
            y = y + 0.5 * self._epsilon * tf.reduce_sum(qd * qd, axis=-1)
        return y

    def _at_rest(self, x, qd):
        """``y(x, 0)``, shape ``(B,)``: the kinetic network's value at rest."""
        return self.model.kinetic_net.forward(x, tf.zeros_like(qd))[:, 0]

    def lagrangian(self, q, qd):
        """``L = y(x, qd / s) - U(x)``."""
        x = self.model.features(q).x
        return self._kinetic_net(x, qd) - self.model.potential_net.forward(x)[:, 0]

    def kinetic(self, q, qd):
        """``T = y(x, qd / s) - y(x, 0)`` (``+ eps/2 |qd|^2`` when convex): zero at rest."""
        x = self.model.features(q).x
        return self._kinetic_net(x, qd) - self._at_rest(x, qd)

    def potential(self, q):
        """``V = U(x) - y(x, 0) = -L(q, 0)``."""
        x = self.model.features(q).x
        return self.model.potential_net.forward(x)[:, 0] - self._at_rest(x, q)

    def terms(self, q, qd, *, hessian, mixed, grad_q):
        """Closed form (:func:`lnn.models.scalar.scalar_terms`)."""
        m = self.model
        return scalar_terms(
            m,
            m.kinetic_net,
            q,
            qd,
            potential=m.potential_net,
            epsilon=self._epsilon,
            hessian=hessian,
            mixed=mixed,
            grad_q=grad_q,
        )

    def numpy(self, fold):
        """:class:`lnn.models.scalar.NumpyScalar` of ``T`` and ``V``."""
        m = self.model
        return NumpyScalar(fold(m.kinetic_net), fold(m.potential_net), self._epsilon, m.input_map, m.numpy_dtype)
