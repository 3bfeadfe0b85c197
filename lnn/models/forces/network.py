"""Force ``network``: a learned friction of any shape per joint, passive by construction.

Per joint ``j``::

    f_j(q, qd) = -g_j(q, qd) * tanh(qd_j / v0),    g = softplus(y),    y = MLP(x(q), qd / qd_std)

with ``x(q)`` the model's features (``sin, cos`` of angular coordinates,
scaled linear ones: :mod:`lnn.models.features`), ``qd_std`` its velocity
scale and ``v0`` its ``friction_velocity``. Since ``g_j >= 0`` and
``tanh(qd_j / v0)`` has the sign of ``qd_j``, every joint's power ``qd_j f_j``
is ``<= 0`` at every state, in floating point too: the force never puts energy
in, whatever the weights.

``g_j`` is the friction level of joint ``j`` at that state, so the term
represents what ``b qd + c tanh(qd / v0)`` cannot: a level that falls from a
static to a Coulomb value with speed (Stribeck), differs for ``+qd`` and
``-qd`` (asymmetric), depends on the positions (and on the other joints'
velocities). It is a correction beside ``viscous`` and ``coulomb``:
``friction="viscous+coulomb+network"``. The MLP reads the state clipped to
the training states' box (:mod:`lnn.models.support`): beyond the data the
level holds its value at the nearest edge instead of extrapolating.

The MLP (:class:`lnn.models.mlp.MLP`, hidden widths :data:`HIDDEN`, the
model's activation; layer ``friction_network``, model attribute
``friction_net``) starts with a zero output kernel and the output bias at
``softplus^-1(INITIAL)``: ``g = INITIAL`` everywhere, so a model whose other
terms come from a least-squares fit is disturbed by at most ``INITIAL`` (N m)
per joint at the first step. It is smooth (the adaptive solvers' step control
sees nothing sharper than the Coulomb term's ``tanh``), compiles under XLA and
has its numpy twin (:class:`NumpyNetworkFriction`, the input map folded into
the first layer as for the kinds).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.forces.base import Force, NumpyForce, register_force, softplus_inverse
from lnn.models.mlp import MLP, NumpyNet
from lnn.models.support import TrainingBox

#: Hidden widths of the friction MLP.
HIDDEN = (32, 32)

#: The friction level ``g`` (N m) of every joint at initialisation.
INITIAL = 1e-3


def derived_seed(model, stream: int) -> int | None:
    """A seed for a force's weights drawn from the model's ``seed`` (None stays None) and the force's ``stream``."""
    return None if model.seed is None else int(np.random.SeedSequence([int(model.seed), stream]).generate_state(1)[0])


class NumpyPassiveFriction(NumpyForce):
    """A numpy force ``-g(q, qd) * tanh(qd / v0)`` of a level ``g >= 0``: passive at every state.

    A subclass gives :meth:`level` and sets ``velocity`` (``v0``).
    """

    velocity: float

    def level(self, q, qd):
        """The friction levels ``g >= 0``, shape ``(B, n)``."""
        raise NotImplementedError

    def force(self, q, qd):
        """``-g * tanh(qd / v0)``."""
        return -self.level(q, qd) * np.tanh(qd / self.velocity)


class PassiveFriction(Force):
    """``-g(q, qd) * tanh(qd / v0)`` of a level ``g >= 0``: passive at every state (``v0`` the model's).

    A subclass gives :meth:`level` (a tensor ``(B, n)``).
    """

    needs_q = True

    def level(self, q, qd):
        """The friction levels ``g >= 0``, a tensor of shape ``(B, n)``."""
        raise NotImplementedError

    def force(self, q, qd):
        """``-g(q, qd) * tanh(qd / v0)``."""
        return -self.level(q, qd) * tf.tanh(qd / self.model.friction_velocity)


class NumpyNetworkFriction(NumpyPassiveFriction):
    """The numpy twin of :class:`NetworkFriction` (a snapshot of its weights and of the input scaling).

    Parameters
    ----------
    net : lnn.models.mlp.NumpyNet
        The MLP with the input map folded into its first layer.
    inputs : lnn.models.features.InputMap
    velocity : float
        ``v0``.
    box : lnn.models.support.TrainingBox
        The model's training box.
    """

    def __init__(self, net: NumpyNet, inputs, velocity: float, box: TrainingBox) -> None:
        self.net, self.inputs, self.velocity, self.box = net, inputs, velocity, box

    def level(self, q, qd):
        """The friction levels ``g = softplus(y) >= 0`` of the state clipped to the training box, shape ``(B, n)``."""
        q, qd = self.box.clip_q(q), self.box.clip_qd(qd)
        y, _, _ = self.net.forward(self.inputs.basis_np(q)[0], qd, curvature=False)
        return np.logaddexp(0.0, y)


@register_force
class NetworkFriction(PassiveFriction):
    """``-g(q, qd) * tanh(qd / v0)`` with ``g = softplus(MLP)`` per joint: passive at every state."""

    name = "network"

    def __init__(self, model) -> None:
        super().__init__(model)
        n = model.n_dof
        seed = derived_seed(model, 1)
        net = MLP(
            model.input_map.n_features,
            n,
            HIDDEN,
            n,
            activation=model.activation_name,
            seed=seed,
            name="friction_network",
            dtype=model.dtype,
        )
        output = {v.path.rsplit("/", 1)[-1]: v for v in net.weights}
        last = len(HIDDEN) + 1
        output[f"w_{last}"].assign(np.zeros(tuple(output[f"w_{last}"].shape), dtype=model.dtype))
        output[f"b_{last}"].assign(np.full(n, softplus_inverse(INITIAL), dtype=model.dtype))
        model.friction_net = net

    def level(self, q, qd):
        """The friction levels ``g(q, qd) = softplus(y) >= 0`` of the state clipped to the training box, a tensor
        of shape ``(B, n)``."""
        model = self.model
        q, qd = model.box_q(q), model.box_qd(qd)
        y = model.friction_net.forward(model.features(q).x, qd / tf.convert_to_tensor(model.qd_std))
        return tf.math.softplus(y)

    def numpy(self, dtype):
        """:class:`NumpyNetworkFriction` of the current weights and input scaling."""
        model = self.model
        inputs = model.input_map
        s, offset = inputs.affine_np(np.asarray(model.q_mean), np.asarray(model.q_std))
        net = NumpyNet.fold(
            model.friction_net.layers(), inputs.n_features, s, offset, np.asarray(model.qd_std, np.float64), dtype
        )
        return NumpyNetworkFriction(net, inputs, float(model.friction_velocity), model.training_box())
