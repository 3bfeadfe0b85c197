"""Force ``joint_network``: a learned friction of each joint's own state, passive by construction.

Per joint ``j``::

    f_j(q_j, qd_j) = -g_j(q_j, qd_j) * tanh(qd_j / v0),    g_j = softplus(y_j),
    y_j = a_j(qd_j / qd_std_j) + b_j(x_j(q_j))

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
learns does not carry over to a new recording. Here each joint's logit is
the sum of a small MLP of its rate ``a_j`` and one of its position ``b_j``
(:class:`JointMLP`: their weights a leading joint axis, evaluated as batched
products), which can only learn what joint friction is: Stribeck and
asymmetric levels of the rate, modulated along the stroke. A sum rather than
one MLP of both, so that a level is never free at an angle and rate that no
recording reached together. What depends on the other joints (load-dependent
friction) is the ``network`` force's.

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

#: Hidden widths of each path of each joint's network.
HIDDEN = (16, 16)

#: The friction level ``g`` (N m) of every joint at initialisation.
INITIAL = 1e-3

#: Inputs of each joint's network: two position features and the scaled rate.
N_INPUTS = 3

#: The two paths of each joint's network and the inputs each reads: the rate path the scaled rate, the
#: position path the position features (:class:`JointMLP`).
PATHS = (("rate", (2,)), ("position", (0, 1)))


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
    """``n`` friction logits ``y_j = a_j(u_j,rate) + b_j(u_j,position)``: per joint an MLP of its scaled rate and
    one of its position features, summed; the weights of every joint stacked on a leading joint axis.

    The sum, and not one MLP of the three inputs, because a learned level must
    not be free where the data say nothing. A joint's states fill a box of
    ``(q_j, qd_j)`` only where the motion visits every angle at every rate;
    a new log can reach a joint's angles at rates the others reached only at
    other angles, where one MLP of both is free to put any friction at all
    (``docs/benchmarks/real-robots.md``). A sum is
    fixed there by what was seen: the level at that rate (at other angles) and
    the change along the angle (at other rates), the form of the residual
    analysis' ``f(qd) + g(q)`` (:mod:`lnn.residuals`).

    Parameters
    ----------
    n : int
        Joints.
    hidden : tuple of int
        Hidden widths of each path (the same for every joint).
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
        self.kernels: dict[str, list] = {}
        self.biases: dict[str, list] = {}
        self.w_out: dict[str, tf.Variable] = {}
        for path, inputs in PATHS:
            widths = (len(inputs),) + self.hidden
            self.kernels[path], self.biases[path] = [], []
            for i in range(len(self.hidden)):
                fan_in, fan_out = widths[i], widths[i + 1]
                kernel = rng.normal(0.0, 1.0 / np.sqrt(fan_in), (self.n, fan_in, fan_out))
                self.kernels[path].append(self._weight(f"{path}_w_{i + 1}", kernel, dtype))
                self.biases[path].append(self._weight(f"{path}_b_{i + 1}", np.zeros((self.n, fan_out)), dtype))
            last = len(self.hidden) + 1
            self.w_out[path] = self._weight(f"{path}_w_{last}", np.zeros((self.n, self.hidden[-1])), dtype)
        self.b_out = self._weight("b_out", np.full(self.n, softplus_inverse(self.initial)), dtype)
        self.built = True

    def _weight(self, name, values, dtype):
        var = self.add_weight(name=name, shape=values.shape, initializer="zeros", dtype=dtype)
        var.assign(np.asarray(values, dtype=dtype))
        return var

    def forward(self, u):
        """``y (B, n)`` of the per-joint inputs ``u (B, n, N_INPUTS)``: the paths' outputs summed."""
        act = ACTIVATIONS[self.activation_name].value
        y = self.b_out
        for path, inputs in PATHS:
            h = tf.gather(u, list(inputs), axis=-1)
            for kernel, bias in zip(self.kernels[path], self.biases[path]):
                h = act(tf.einsum("bni,nih->bnh", h, kernel) + bias)
            y = y + tf.einsum("bnh,nh->bn", h, self.w_out[path])
        return y

    def call(self, u):
        """Same as :meth:`forward` (Keras entry point)."""
        return self.forward(u)

    def arrays(self) -> tuple[list, list, np.ndarray, np.ndarray]:
        """The weights as one float64 MLP of the ``N_INPUTS`` inputs, the paths side by side (block-diagonal
        kernels, zero where a path does not read): ``(kernels, biases, w_out, b_out)``, the same function."""
        as64 = lambda v: np.asarray(v, np.float64)  # noqa: E731
        kernels, biases = [], []
        for i, width in enumerate(self.hidden):
            rows = N_INPUTS if i == 0 else self.hidden[i - 1] * len(PATHS)
            kernel = np.zeros((self.n, rows, width * len(PATHS)))
            for p, (path, inputs) in enumerate(PATHS):
                read = list(inputs) if i == 0 else slice(p * self.hidden[i - 1], (p + 1) * self.hidden[i - 1])
                kernel[:, read, p * width : (p + 1) * width] = as64(self.kernels[path][i])
            kernels.append(kernel)
            biases.append(np.concatenate([as64(self.biases[path][i]) for path, _ in PATHS], axis=-1))
        w_out = np.concatenate([as64(self.w_out[path]) for path, _ in PATHS], axis=-1)
        return kernels, biases, w_out, as64(self.b_out)

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
