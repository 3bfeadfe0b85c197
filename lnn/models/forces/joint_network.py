"""Force ``joint_network``: a learned friction of each joint's own state, passive by construction.

Per joint ``j``::

    f_j(q_j, qd_j) = -g_j(q_j, qd_j) * tanh(qd_j / v0),    g_j = softplus(y_j),
    y_j = MLP_j(x_j(q_j), qd_j / qd_std_j)

with ``x_j`` the model's features of coordinate ``j`` alone (``sin q_j, cos
q_j`` for an angular joint, ``(q_j - mean_j) / std_j`` and a zero for a
linear one: :mod:`lnn.models.features`). Passive as the ``network`` force
is, for the same reason: ``g_j >= 0`` and ``tanh(qd_j / v0)`` has the sign of
``qd_j``, so every joint's power ``qd_j f_j <= 0`` at every state.

It is the ``network`` force (:mod:`lnn.models.forces.network`) with the
structure of joint friction: a joint's bearing, gear and seal rub with that
joint's rate and along that joint's stroke, not with the other joints'. One
MLP of the whole state ``(q, qd)`` can explain a recording's residual with
any joint's state; with few recordings of a 7-DOF arm it does, and what it
learns does not carry over to a new recording. The ``n`` small MLPs here have
three inputs each (their weights a leading joint axis of one set of
variables, evaluated as one batched product) and can only learn what joint
friction is: Stribeck, asymmetric, position-dependent levels per joint. What
depends on the other joints (load-dependent friction) is the ``network``
force's.

Each MLP reads its joint's state clipped to the training states' range
(:mod:`lnn.models.support`): beyond the data the level holds its value at
the nearest edge; an MLP extrapolating in the rate put 4 N m of friction on
a 7-DOF arm's shoulder at rates 1.7x the training ones.

The MLPs start with a zero output kernel and the output bias at
``softplus^-1(INITIAL)``: ``g = INITIAL`` everywhere, so a model whose other
terms come from a least-squares fit is disturbed by at most ``INITIAL`` (N m)
per joint at the first step. Layer ``joint_friction_network``, model
attribute ``joint_friction_net``; numpy twin :class:`NumpyJointFriction`.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from lnn.models.activations import ACTIVATIONS
from lnn.models.forces.base import register_force, softplus_inverse
from lnn.models.forces.network import NumpyPassiveFriction, PassiveFriction, derived_seed
from lnn.models.support import TrainingBox

#: Hidden widths of each joint's MLP.
HIDDEN = (16, 16)

#: The friction level ``g`` (N m) of every joint at initialisation.
INITIAL = 1e-3

#: Inputs of each joint's MLP: two position features and the scaled rate.
N_INPUTS = 3


def joint_features(inputs) -> np.ndarray:
    """``P (F, 2n)``: ``x @ P`` puts coordinate ``j``'s feature columns in columns ``2j, 2j + 1`` (zero padded)."""
    n = inputs.n
    angular = np.zeros(n, bool)
    angular[inputs.ang] = True
    gather = np.zeros((inputs.n_features, 2 * n))
    col = 0
    for j in range(n):
        width = 2 if angular[j] else 1
        for k in range(width):
            gather[col + k, 2 * j + k] = 1.0
        col += width
    return gather


class JointMLP(keras.layers.Layer):
    """``n`` MLPs of ``N_INPUTS`` inputs and one output, their weights stacked on a leading joint axis.

    Parameters
    ----------
    n : int
        Joints.
    hidden : tuple of int
        Hidden widths (the same for every joint).
    activation : str
        A key of :data:`lnn.models.activations.ACTIVATIONS`.
    seed : int or None
    initial : float
        The output ``softplus(y)`` of every joint at initialisation.
    """

    def __init__(self, n: int, hidden=HIDDEN, *, activation: str = "softplus", seed=None, initial=INITIAL, **kwargs):
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.n, self.hidden, self.activation_name = int(n), tuple(int(h) for h in hidden), activation
        self.seed, self.initial = seed, float(initial)
        rng = np.random.default_rng(seed)
        dtype = self.dtype_policy.variable_dtype
        widths = (N_INPUTS,) + self.hidden
        self.kernels, self.biases = [], []
        for i in range(len(self.hidden)):
            fan_in, fan_out = widths[i], widths[i + 1]
            kernel = rng.normal(0.0, 1.0 / np.sqrt(fan_in), (self.n, fan_in, fan_out))
            self.kernels.append(self._weight(f"w_{i + 1}", kernel, dtype))
            self.biases.append(self._weight(f"b_{i + 1}", np.zeros((self.n, fan_out)), dtype))
        last = len(self.hidden) + 1
        self.w_out = self._weight(f"w_{last}", np.zeros((self.n, self.hidden[-1])), dtype)
        self.b_out = self._weight(f"b_{last}", np.full(self.n, softplus_inverse(self.initial)), dtype)
        self.built = True

    def _weight(self, name, values, dtype):
        var = self.add_weight(name=name, shape=values.shape, initializer="zeros", dtype=dtype)
        var.assign(np.asarray(values, dtype=dtype))
        return var

    def forward(self, u):
        """``y (B, n)`` of the per-joint inputs ``u (B, n, N_INPUTS)``."""
        act = ACTIVATIONS[self.activation_name].value
        h = u
        for kernel, bias in zip(self.kernels, self.biases):
            h = act(tf.einsum("bni,nih->bnh", h, kernel) + bias)
        return tf.einsum("bnh,nh->bn", h, self.w_out) + self.b_out

    def call(self, u):
        """Same as :meth:`forward` (Keras entry point)."""
        return self.forward(u)

    def arrays(self) -> tuple[list, list, np.ndarray, np.ndarray]:
        """The weights as float64 arrays: ``(kernels, biases, w_out, b_out)``."""
        as64 = lambda v: np.asarray(v, np.float64)  # noqa: E731
        return [as64(k) for k in self.kernels], [as64(b) for b in self.biases], as64(self.w_out), as64(self.b_out)

    def get_config(self) -> dict:
        """Constructor arguments (Keras serialisation)."""
        config = super().get_config()
        config.update(
            n=self.n, hidden=list(self.hidden), activation=self.activation_name, seed=self.seed, initial=self.initial
        )
        return config


class NumpyJointFriction(NumpyPassiveFriction):
    """The numpy twin of :class:`JointNetworkFriction` (a snapshot of its weights and of the input scaling).

    Parameters
    ----------
    weights : tuple
        :meth:`JointMLP.arrays`: kernels ``(n, fan_in, fan_out)``, biases
        ``(n, fan_out)``, output kernel ``(n, H)`` and bias ``(n,)``.
    inputs : lnn.models.features.InputMap
    q_mean, q_std, qd_std : numpy.ndarray, shape ``(n,)``
        The model's input scaling.
    velocity : float
        ``v0``.
    activation : str
        A key of :data:`lnn.models.activations.ACTIVATIONS`.
    dtype : numpy dtype of the snapshot
    box : lnn.models.support.TrainingBox
        The model's training box.
    """

    def __init__(
        self, weights, inputs, q_mean, q_std, qd_std, velocity: float, activation: str, dtype, box: TrainingBox
    ) -> None:
        kernels, biases, w_out, b_out = weights
        cast = lambda a: np.ascontiguousarray(a, dtype=dtype)  # noqa: E731
        self.kernels, self.biases = [cast(k) for k in kernels], [cast(b) for b in biases]
        self.w_out, self.b_out = cast(w_out), cast(b_out)
        self.inputs, self.velocity, self.activation = inputs, velocity, activation
        s, offset = inputs.affine_np(q_mean, q_std)
        gather = joint_features(inputs)
        self.r_to_u, self.u_offset = cast(s @ gather), cast(offset @ gather)
        self.qd_scale = cast(qd_std)
        self.box = box

    def level(self, q, qd):
        """The friction levels ``g = softplus(y) >= 0`` of the state clipped to the training box, shape ``(B, n)``."""
        q, qd = self.box.clip_q(np.atleast_2d(q)), self.box.clip_qd(np.atleast_2d(qd))
        r = self.inputs.basis_np(q)[0]
        position = (r @ self.r_to_u + self.u_offset).reshape(q.shape[0], -1, 2)
        h = np.concatenate([position, (qd / self.qd_scale)[..., None]], axis=-1)
        act = ACTIVATIONS[self.activation].np
        for kernel, bias in zip(self.kernels, self.biases):
            h = act(np.einsum("bni,nih->bnh", h, kernel) + bias, True, False)[0]
        return np.logaddexp(0.0, np.einsum("bnh,nh->bn", h, self.w_out) + self.b_out)


@register_force
class JointNetworkFriction(PassiveFriction):
    """``-g_j(q_j, qd_j) * tanh(qd_j / v0)`` with ``g_j = softplus(MLP_j)`` per joint: passive at every state."""

    name = "joint_network"

    def __init__(self, model) -> None:
        super().__init__(model)
        model.joint_friction_net = JointMLP(
            model.n_dof,
            activation=model.activation_name,
            seed=derived_seed(model, 2),
            name="joint_friction_network",
            dtype=model.dtype,
        )
        self._gather = joint_features(model.input_map).astype(model.dtype)

    def level(self, q, qd):
        """The friction levels ``g_j(q_j, qd_j) = softplus(y_j) >= 0`` of the state clipped to the training box,
        a tensor of shape ``(B, n)``."""
        model = self.model
        q, qd = model.box_q(q), model.box_qd(qd)
        position = tf.reshape(tf.matmul(model.features(q).x, self._gather), (-1, model.n_dof, 2))
        rate = (qd / tf.convert_to_tensor(model.qd_std))[..., None]
        return tf.math.softplus(model.joint_friction_net.forward(tf.concat([position, rate], axis=-1)))

    def numpy(self, dtype):
        """:class:`NumpyJointFriction` of the current weights and input scaling."""
        model = self.model
        net = model.joint_friction_net
        return NumpyJointFriction(
            net.arrays(),
            model.input_map,
            np.asarray(model.q_mean),
            np.asarray(model.q_std),
            np.asarray(model.qd_std, np.float64),
            float(model.friction_velocity),
            net.activation_name,
            dtype,
            model.training_box(),
        )
