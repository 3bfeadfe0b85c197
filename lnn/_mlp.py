"""Multilayer perceptrons with closed-form input derivatives.

The networks of :class:`lnn.LagrangianNetwork` are plain MLPs whose first
layer reads two input blocks, ``x`` (features of ``q``, shape ``(B, F)``) and
``v`` (velocities ``qd``, shape ``(B, n)``)::

    z_1 = x @ W_x + v @ W_v + b_1,       h_1 = s(z_1)
    z_l = h_{l-1} @ W_l + b_l,           h_l = s(z_l)        l = 2 .. L
    y   = h_L @ W_out + b_out                                 (linear output)

Feeding the first layer as two matmuls instead of ``concat([x, v]) @ W``
keeps ``tf.function(jit_compile=True)`` away from a gradient-registry gap of
``XlaDynamicUpdateSlice`` under forward-mode autodiff (TensorFlow 2.21).

For a scalar output the derivatives in ``v`` are closed forms, all batched
matmuls (:func:`scalar_derivatives`)::

    delta_L = W_out[:, 0],   g_l = delta_l * s'(z_l),   delta_{l-1} = g_l @ W_l^T
    K_1 = W_v,               K_l = (K_{l-1} * s'(z_{l-1})) @ W_l          (B, n, H_l)
    d2y/dv2 = sum_l K_l diag(s''(z_l) * delta_l) K_l^T
    (d2y/dv dx) u = sum_l K_l (s''(z_l) * delta_l * t_l),  t_1 = u @ W_x,
                                                           t_l = (s'(z_{l-1}) t_{l-1}) @ W_l

Reading the weights for a numpy re-implementation: :meth:`MLP.layers` returns
the effective ``(kernel, bias, activation)`` of every layer (the first layer's
kernel split into ``W_x`` and ``W_v``), already transformed where a
constraint applies (input-convex networks store ``softplus``-parametrised
kernels).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from lnn.mechanics import _in_xla_context

__all__ = ["ACTIVATIONS", "MLP", "MLPLayer", "scalar_derivatives", "ScalarDerivatives"]


def _softplus(z):
    return tf.math.softplus(z)


def _softplus_d1(z):
    return tf.math.sigmoid(z)


def _softplus_d2(z):
    s = tf.math.sigmoid(z)
    return s * (1.0 - s)


def _tanh_d1(z):
    t = tf.math.tanh(z)
    return 1.0 - t * t


def _tanh_d2(z):
    t = tf.math.tanh(z)
    return -2.0 * t * (1.0 - t * t)


def _sigmoid_d1(z):
    s = tf.math.sigmoid(z)
    return s * (1.0 - s)


def _sigmoid_d2(z):
    s = tf.math.sigmoid(z)
    return s * (1.0 - s) * (1.0 - 2.0 * s)


def _swish(z):
    return z * tf.math.sigmoid(z)


def _swish_d1(z):
    s = tf.math.sigmoid(z)
    return s + z * s * (1.0 - s)


def _swish_d2(z):
    s = tf.math.sigmoid(z)
    return s * (1.0 - s) * (2.0 + z * (1.0 - 2.0 * s))


#: name -> (s, s', s'') as TensorFlow callables. All are smooth: a Lagrangian
#: network needs non-zero second derivatives (ReLU would give ``M = 0``).
ACTIVATIONS: dict[str, tuple[Callable, Callable, Callable]] = {
    "softplus": (_softplus, _softplus_d1, _softplus_d2),
    "tanh": (tf.math.tanh, _tanh_d1, _tanh_d2),
    "sigmoid": (tf.math.sigmoid, _sigmoid_d1, _sigmoid_d2),
    "swish": (_swish, _swish_d1, _swish_d2),
}


def _value_slope_and_curvature(name: str, z):
    """``(s(z), s'(z), s''(z))`` from one transcendental evaluation where possible.

    For softplus, ``e = exp(-|z|)`` gives all three: ``s = max(z, 0) + log(1 + e)``
    (``log``, not ``log1p``: the argument lies in ``[1, 2]``, so the absolute error
    stays at rounding, and XLA's CPU ``log1p`` costs twice as much),
    ``s' = sigmoid(z)`` and ``s'' = s'(1 - s')``.
    """
    if name == "softplus":
        e = tf.exp(-tf.abs(z))
        one_plus = 1.0 + e
        p = 1.0 / one_plus  # sigmoid(|z|)
        ep = e * p  # sigmoid(-|z|) = 1 - p
        sig = tf.where(z >= 0, p, ep)
        return tf.maximum(z, 0.0) + tf.math.log(one_plus), sig, ep * p
    if name == "tanh":
        t = tf.math.tanh(z)
        d = 1.0 - t * t
        return t, d, -2.0 * t * d
    if name == "sigmoid":
        s = tf.math.sigmoid(z)
        d = s * (1.0 - s)
        return s, d, d * (1.0 - 2.0 * s)
    act, d1, d2 = ACTIVATIONS[name]
    return act(z), d1(z), d2(z)


def _slope_and_curvature(name: str, z):
    """``(s'(z), s''(z))`` (see :func:`_value_slope_and_curvature`)."""
    return _value_slope_and_curvature(name, z)[1:]


@dataclasses.dataclass(frozen=True)
class MLPLayer:
    """One affine layer and the activation that follows it.

    Attributes
    ----------
    kernel : numpy.ndarray, shape ``(fan_in, fan_out)``
        Effective kernel (constraints applied).
    bias : numpy.ndarray, shape ``(fan_out,)``
    activation : str
        A key of :data:`ACTIVATIONS`, or ``"linear"`` for the output layer.
    """

    kernel: np.ndarray
    bias: np.ndarray
    activation: str


@keras.saving.register_keras_serializable(package="lnn")
class MLP(keras.layers.Layer):
    """An MLP ``y(x, v)`` with a split first layer and closed-form derivatives.

    Parameters
    ----------
    n_features : int
        Width ``F`` of the first input block ``x`` (0 for none).
    n_velocity : int
        Width ``n`` of the second input block ``v`` (0 for none).
    hidden : tuple of int
        Hidden widths ``H_1 .. H_L`` (at least one).
    n_out : int
        Output width.
    activation : str
        Hidden activation, a key of :data:`ACTIVATIONS`.
    nonnegative : bool
        Input-convex network: kernels after the first layer (output included)
        are ``softplus`` of the stored variables, hence non-negative, so with a
        convex non-decreasing activation ``y`` is convex in ``(x, v)``.
    seed : int or None
        Seed of the initial weights (numpy ``default_rng``).
    convex_init : bool
        Initialise the kernels after the first layer non-negative (as an
        input-convex network, but unconstrained afterwards), so that a scalar
        network with a convex activation starts convex in ``(x, v)``: its
        ``v``-Hessian, a learned mass matrix, starts positive definite.
    output_bias : bool
        Whether the output layer has a bias (an energy offset does not change
        the dynamics: the scalar networks of the models go without, so every
        weight receives a gradient from a loss on ``qdd``).
    """

    def __init__(self, n_features: int, n_velocity: int, hidden, n_out: int, *,
                 activation: str = "softplus", nonnegative: bool = False,
                 seed: int | None = None, convex_init: bool = False, output_bias: bool = True,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        hidden = tuple(int(h) for h in hidden)
        if not hidden or min(hidden) < 1:
            raise ValueError(f"hidden must be a non-empty tuple of positive widths, got {hidden!r}")
        if n_features + n_velocity < 1:
            raise ValueError("an MLP needs at least one input (n_features + n_velocity >= 1)")
        self.n_features = int(n_features)
        self.n_velocity = int(n_velocity)
        self.hidden = hidden
        self.n_out = int(n_out)
        self.activation_name = activation
        self.nonnegative = bool(nonnegative)
        self.seed = seed
        self.output_bias = bool(output_bias)
        self.convex_init = bool(convex_init)
        rng = np.random.default_rng(seed)
        dtype = self.dtype_policy.variable_dtype

        def weight(name, shape, values, trainable=True):
            var = self.add_weight(name=name, shape=shape, initializer="zeros",
                                  dtype=dtype, trainable=trainable)
            var.assign(np.asarray(values, dtype=dtype))
            return var

        h1 = hidden[0]
        fan_in = self.n_features + self.n_velocity
        self.w_x = (weight("w_x", (self.n_features, h1),
                           rng.normal(0.0, 1.0 / np.sqrt(fan_in), (self.n_features, h1)))
                    if self.n_features else None)
        self.w_v = (weight("w_v", (self.n_velocity, h1),
                           rng.normal(0.0, 1.0 / np.sqrt(fan_in), (self.n_velocity, h1)))
                    if self.n_velocity else None)
        self.b_1 = weight("b_1", (h1,), np.zeros(h1))
        self._raw_kernels = []
        self._biases = []
        widths = hidden + (self.n_out,)
        for i in range(1, len(widths)):
            shape = (widths[i - 1], widths[i])
            init = rng.normal(0.0, 1.0 / np.sqrt(shape[0]), shape)
            if self.nonnegative:
                init = np.log(np.expm1(np.abs(init) + 1e-3))  # softplus^-1(|w|)
            elif self.convex_init:
                init = np.abs(init)
            self._raw_kernels.append(weight(f"w_{i + 1}", shape, init))
            if i < len(widths) - 1 or self.output_bias:
                self._biases.append(weight(f"b_{i + 1}", (shape[1],), np.zeros(shape[1])))
        self.built = True

    # -- weights ---------------------------------------------------------
    def kernels(self) -> list:
        """Effective kernels after the first layer, ``[W_2, ..., W_out]`` (tensors)."""
        if self.nonnegative:
            return [tf.math.softplus(k) for k in self._raw_kernels]
        return [tf.convert_to_tensor(k) for k in self._raw_kernels]

    def layers(self) -> list[MLPLayer]:
        """Effective weights as numpy arrays, one :class:`MLPLayer` per layer.

        Returns
        -------
        list of MLPLayer
            First the input layer, whose kernel has shape
            ``(n_features + n_velocity, H_1)``: rows ``[:n_features]`` act on
            ``x`` and rows ``[n_features:]`` on ``v``; then the hidden layers;
            the last (``activation="linear"``) is the output layer.
        """
        first = [np.asarray(w) for w in (self.w_x, self.w_v) if w is not None]
        out = [MLPLayer(np.concatenate(first, axis=0), np.asarray(self.b_1), self.activation_name)]
        kernels = [np.asarray(k) for k in self.kernels()]
        biases = [np.asarray(b) for b in self._biases]
        if not self.output_bias:
            biases.append(np.zeros(self.n_out, dtype=kernels[-1].dtype))
        for i, (k, b) in enumerate(zip(kernels, biases)):
            act = "linear" if i == len(kernels) - 1 else self.activation_name
            out.append(MLPLayer(k, b, act))
        return out

    def get_config(self) -> dict:
        """Constructor arguments (Keras serialisation)."""
        config = super().get_config()
        config.update(n_features=self.n_features, n_velocity=self.n_velocity,
                      hidden=list(self.hidden), n_out=self.n_out,
                      activation=self.activation_name, nonnegative=self.nonnegative,
                      seed=self.seed, convex_init=self.convex_init,
                      output_bias=self.output_bias)
        return config

    # -- evaluation ------------------------------------------------------
    def first_preactivation(self, x, v):
        """``z_1 = x @ W_x + v @ W_v + b_1``, shape ``(B, H_1)``."""
        z = self.b_1
        if self.w_x is not None:
            z = z + tf.matmul(x, self.w_x)
        if self.w_v is not None:
            z = z + tf.matmul(v, self.w_v)
        return z

    def forward(self, x, v=None):
        """Network output ``y``, shape ``(B, n_out)``.

        Parameters
        ----------
        x : tensor, shape ``(B, n_features)`` (ignored when ``n_features == 0``)
        v : tensor, shape ``(B, n_velocity)`` (ignored when ``n_velocity == 0``)
        """
        act = ACTIVATIONS[self.activation_name][0]
        h = act(self.first_preactivation(x, v))
        kernels = self.kernels()
        for k, b in zip(kernels[:-1], self._biases):
            h = act(tf.matmul(h, k) + b)
        y = tf.matmul(h, kernels[-1])
        return y + self._biases[-1] if self.output_bias else y

    def call(self, x, v=None):
        """Same as :meth:`forward` (Keras entry point)."""
        return self.forward(x, v)


@dataclasses.dataclass(frozen=True)
class ScalarDerivatives:
    """Value and input derivatives of a scalar MLP at a batch of inputs.

    Attributes
    ----------
    value : tensor, shape ``(B,)``
    grad_x : tensor, shape ``(B, F)`` or None
        ``dy/dx``.
    grad_v : tensor, shape ``(B, n)`` or None
        ``dy/dv``.
    hessian_v : tensor, shape ``(B, n, n)`` or None
        ``d2y/dv2`` (when requested).
    mixed_v : tensor, shape ``(B, n)`` or None
        ``(d2y/dv dx) u`` for the tangent ``u`` of ``x`` (when given).
    """

    value: tf.Tensor
    grad_x: tf.Tensor | None
    grad_v: tf.Tensor | None
    hessian_v: tf.Tensor | None
    mixed_v: tf.Tensor | None


#: Under XLA, a per-sample Gram ``K diag(c) K^T`` with at most this many products per
#: sample (``n * n * H``) is computed as one fused broadcast-and-sum instead of a batched
#: matmul of tiny matrices, which XLA's CPU backend runs slowly. Measured at batch 1024
#: (XLA, timeit loops, one core): n=7, H=32 (1568) M, qdd and the training step 8-13 %
#: faster; n=2, H=32 and 128 (128, 512) level or up to 15 % faster; n=7, H=128 (6272)
#: 45 % slower, hence the bound.
GRAM_BY_SUM_MAX = 2048


def weighted_gram(k, c):
    """``K diag(c) K^T`` per sample for ``k`` of shape ``(B, n, H)`` and ``c`` of shape ``(B, H)``.

    Returns
    -------
    tensor, shape ``(B, n, n)``
    """
    n, h = k.shape[1], k.shape[2]
    if n is not None and h is not None and n * n * h <= GRAM_BY_SUM_MAX and _in_xla_context():
        return tf.reduce_sum(k[:, :, None, :] * k[:, None, :, :] * c[:, None, None, :], axis=-1)
    return tf.matmul(k * c[:, None, :], k, transpose_b=True)


def _batched_right(a, w):
    """``a @ w`` for ``a`` of shape ``(B, n, H)`` and ``w`` of shape ``(H, K)``."""
    out = tf.matmul(tf.reshape(a, (-1, a.shape[-1])), w)
    return tf.reshape(out, (-1, a.shape[1], w.shape[-1]))


def scalar_derivatives(net: MLP, x, v, *, hessian: bool = True, x_tangent=None) -> ScalarDerivatives:
    """Closed-form value, gradients, ``v``-Hessian and mixed product of a scalar MLP.

    Parameters
    ----------
    net : MLP
        A network with ``n_out == 1``.
    x : tensor, shape ``(B, F)``
    v : tensor, shape ``(B, n)``
    hessian : bool
        Compute ``d2y/dv2`` (needs ``n_velocity > 0``).
    x_tangent : tensor, shape ``(B, F)``, optional
        Direction ``u`` of ``x`` for the mixed product ``(d2y/dv dx) u``.

    Returns
    -------
    ScalarDerivatives
    """
    # Read every variable once per trace (each read is an op in the graph).
    kernels = net.kernels()
    biases = [tf.convert_to_tensor(b) for b in net._biases]
    w_x = tf.convert_to_tensor(net.w_x) if net.w_x is not None else None
    w_v = tf.convert_to_tensor(net.w_v) if net.w_v is not None else None
    z = tf.convert_to_tensor(net.b_1)
    if w_x is not None:
        z = z + tf.matmul(x, w_x)
    if w_v is not None:
        z = z + tf.matmul(v, w_v)
    zs, slopes, second = [z], [], []
    for i in range(len(kernels)):
        h, d1, d2 = _value_slope_and_curvature(net.activation_name, zs[-1])
        slopes.append(d1)
        second.append(d2)
        z = tf.matmul(h, kernels[i])
        if i < len(kernels) - 1:
            zs.append(z + biases[i])
    value = z[:, 0]
    if net.output_bias:
        value = value + biases[-1][0]
    # Backward adjoints delta_l = dy/dh_l.
    deltas = [None] * len(zs)
    delta = tf.transpose(kernels[-1])  # (1, H_L), broadcasts over the batch
    for i in range(len(zs) - 1, -1, -1):
        deltas[i] = delta
        if i > 0:
            delta = tf.matmul(delta * slopes[i], kernels[i - 1], transpose_b=True)
    g1 = deltas[0] * slopes[0]
    grad_x = tf.matmul(g1, w_x, transpose_b=True) if w_x is not None else None
    grad_v = tf.matmul(g1, w_v, transpose_b=True) if w_v is not None else None
    hess = mixed = None
    if hessian or x_tangent is not None:
        curv = [c * d for c, d in zip(second, deltas)]  # s''(z_l) * delta_l, (B, H_l)
        tangents = None
        if x_tangent is not None:
            tangents = [tf.matmul(x_tangent, w_x)]
            for i in range(1, len(zs)):
                tangents.append(tf.matmul(slopes[i - 1] * tangents[-1], kernels[i - 1]))
        # Layer 1: K_1 = W_v is the same for every sample.
        wv = w_v
        k_l = None
        for i in range(len(zs)):
            if i == 0:
                if hessian:  # sum_h W_v[i,h] c[b,h] W_v[j,h] as one (B, H) @ (H, n*n) matmul
                    n = wv.shape[0]
                    outer = tf.reshape(wv[:, None, :] * wv[None, :, :], (n * n, -1))
                    hess = tf.reshape(tf.matmul(curv[0], outer, transpose_b=True), (-1, n, n))
                if tangents is not None:
                    mixed = tf.matmul(curv[0] * tangents[0], wv, transpose_b=True)
                continue
            if i == 1:
                k_l = _batched_right(wv[None, :, :] * slopes[0][:, None, :], kernels[0])
            else:
                k_l = _batched_right(k_l * slopes[i - 1][:, None, :], kernels[i - 1])
            if hessian:
                hess = hess + weighted_gram(k_l, curv[i])
            if tangents is not None:
                mixed = mixed + tf.linalg.matvec(k_l, curv[i] * tangents[i])
    return ScalarDerivatives(value, grad_x, grad_v, hess, mixed)
