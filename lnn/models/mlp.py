"""Multilayer perceptrons with closed-form input derivatives, in TensorFlow and numpy.

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
kernels). :class:`NumpyNet` is the same network in numpy, with the feature
map folded into its first layer (the fast snapshot of :mod:`lnn.fast`): the
forward pass keeps ``s'(z_l)`` and ``s''(z_l)``, :meth:`NumpyNet.backward`
gives the adjoints, :meth:`NumpyNet.tangent` a forward-mode tangent.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.models.activations import ACTIVATIONS

__all__ = [
    "MLP",
    "MLPLayer",
    "NumpyNet",
    "ScalarDerivatives",
    "VectorJet",
    "scalar_derivatives",
    "vector_jet",
    "weighted_gram",
]


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

    def __init__(
        self,
        n_features: int,
        n_velocity: int,
        hidden,
        n_out: int,
        *,
        activation: str = "softplus",
        nonnegative: bool = False,
        seed: int | None = None,
        convex_init: bool = False,
        output_bias: bool = True,
        **kwargs,
    ) -> None:
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
            var = self.add_weight(name=name, shape=shape, initializer="zeros", dtype=dtype, trainable=trainable)
            var.assign(np.asarray(values, dtype=dtype))
            return var

        h1 = hidden[0]
        fan_in = self.n_features + self.n_velocity
        self.w_x = (
            weight("w_x", (self.n_features, h1), rng.normal(0.0, 1.0 / np.sqrt(fan_in), (self.n_features, h1)))
            if self.n_features
            else None
        )
        self.w_v = (
            weight("w_v", (self.n_velocity, h1), rng.normal(0.0, 1.0 / np.sqrt(fan_in), (self.n_velocity, h1)))
            if self.n_velocity
            else None
        )
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
        config.update(
            n_features=self.n_features,
            n_velocity=self.n_velocity,
            hidden=list(self.hidden),
            n_out=self.n_out,
            activation=self.activation_name,
            nonnegative=self.nonnegative,
            seed=self.seed,
            convex_init=self.convex_init,
            output_bias=self.output_bias,
        )
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
        act = ACTIVATIONS[self.activation_name].value
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
    if n is not None and h is not None and n * n * h <= GRAM_BY_SUM_MAX and _runtime.in_xla_trace():
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
    act = ACTIVATIONS[net.activation_name].tf
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
        h, d1, d2 = act(zs[-1])
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


@dataclasses.dataclass(frozen=True, eq=False)
class VectorJet:
    """An MLP of ``x`` alone at a batch: its output, a forward tangent, and reverse products.

    Built by :func:`vector_jet`; every derivative is an explicit product of
    the layers (no tape, no forward accumulator), so a graph holding it
    compiles under XLA and differentiates again for training.

    Attributes
    ----------
    value : tensor, shape ``(B, K)``
    tangent : tensor, shape ``(B, K)`` or None
        ``(dy/dx) u`` for the tangent ``u`` of ``x`` (when given).
    """

    value: tf.Tensor
    tangent: tf.Tensor | None
    _slopes: tuple
    _kernels: tuple
    _w_x: tf.Tensor

    def pullback(self, adjoint):
        """``adjoint @ dy/dx`` for ``adjoint (B, K)``: shape ``(B, F)``."""
        delta = tf.matmul(adjoint, self._kernels[-1], transpose_b=True)
        for i in range(len(self._slopes) - 1, 0, -1):
            delta = tf.matmul(delta * self._slopes[i], self._kernels[i - 1], transpose_b=True)
        return tf.matmul(delta * self._slopes[0], self._w_x, transpose_b=True)


def vector_jet(net: MLP, x, x_tangent=None) -> VectorJet:
    """Output, tangent and pullback of an MLP of ``x`` alone (``n_velocity == 0``), in closed form.

    ``z_1 = x W_x + b_1``; the tangent runs ``t_1 = u W_x``,
    ``t_l = (s'(z_{l-1}) t_{l-1}) W_l``, out ``(s'(z_L) t_L) W_out``; the
    pullback the transposed products in reverse.

    Parameters
    ----------
    net : MLP
        A network with ``n_features > 0`` and ``n_velocity == 0``.
    x : tensor, shape ``(B, F)``
    x_tangent : tensor, shape ``(B, F)``, optional
        Direction ``u`` of ``x``.

    Returns
    -------
    VectorJet
    """
    if net.w_v is not None or net.w_x is None:
        raise ValueError(
            f"vector_jet needs an MLP of x alone, got n_features={net.n_features}, n_velocity={net.n_velocity}"
        )
    act = ACTIVATIONS[net.activation_name].tf
    kernels = tuple(net.kernels())
    biases = [tf.convert_to_tensor(b) for b in net._biases]
    w_x = tf.convert_to_tensor(net.w_x)
    z = tf.matmul(x, w_x) + net.b_1
    t = None if x_tangent is None else tf.matmul(x_tangent, w_x)
    slopes = []
    for i, k in enumerate(kernels):
        h, d1, _ = act(z, curvature=False)
        slopes.append(d1)
        z = tf.matmul(h, k)
        if i < len(kernels) - 1 or net.output_bias:
            z = z + biases[i]
        if t is not None:
            t = tf.matmul(t * d1, k)
    return VectorJet(z, t, tuple(slopes), kernels, w_x)


# ----------------------------------------------------------------------------- numpy twin


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyNet:
    """An :class:`MLP` in numpy, on the raw inputs ``r = [q_lin, sin q_ang, cos q_ang]`` and ``qd``.

    The feature map ``x = r @ R + c`` and the velocity scaling ``qd / qd_scale``
    are folded into the first layer: ``z_1 = r @ w_r + qd @ w_qd + b_1``.

    Attributes
    ----------
    w_r : numpy.ndarray, shape ``(R, H_1)``
    w_qd : numpy.ndarray, shape ``(n, H_1)``, or None (a network of ``q`` only)
    b_1 : numpy.ndarray, shape ``(H_1,)``
    kernels, biases : tuple of numpy.ndarray
        The later layers, the last being the linear output layer.
    activation : str
        A key of :data:`lnn.models.activations.ACTIVATIONS`.
    """

    w_r: np.ndarray
    w_qd: np.ndarray | None
    b_1: np.ndarray
    kernels: tuple
    biases: tuple
    activation: str

    @classmethod
    def fold(
        cls, layers, n_features: int, r_to_x: np.ndarray, x_offset: np.ndarray, qd_scale: np.ndarray, dtype
    ) -> NumpyNet:
        """Fold ``x = r @ r_to_x + x_offset`` and ``qd / qd_scale`` into layer 1 of ``layers``.

        Parameters
        ----------
        layers : list of MLPLayer
            :meth:`MLP.layers` of the network.
        n_features : int
            ``F``, the rows of the first kernel that act on ``x``.
        r_to_x : numpy.ndarray, shape ``(R, F)``
        x_offset : numpy.ndarray, shape ``(F,)``
        qd_scale : numpy.ndarray, shape ``(n,)``
        dtype : numpy dtype of the snapshot
        """
        first = layers[0]
        w_x = np.asarray(first.kernel[:n_features], np.float64)
        w_v = np.asarray(first.kernel[n_features:], np.float64)
        w_qd = w_v / qd_scale[:, None] if w_v.shape[0] else None
        cast = lambda a: np.ascontiguousarray(a, dtype=dtype)  # noqa: E731
        return cls(
            w_r=cast(r_to_x @ w_x),
            w_qd=None if w_qd is None else cast(w_qd),
            b_1=cast(np.asarray(first.bias, np.float64) + x_offset @ w_x),
            kernels=tuple(cast(layer.kernel) for layer in layers[1:]),
            biases=tuple(cast(layer.bias) for layer in layers[1:]),
            activation=first.activation,
        )

    def forward(self, r, qd, *, output: bool = True, curvature: bool = True):
        """The output and the hidden layers' ``s'(z_l)``, ``s''(z_l)``.

        Parameters
        ----------
        r : numpy.ndarray, shape ``(B, R)``
        qd : numpy.ndarray, shape ``(B, n)``, or None for a network of ``q`` only
        output : bool
            False skips the last activation and the output layer (out is None).
        curvature : bool
            False skips the curvatures (None).

        Returns
        -------
        out : numpy.ndarray, shape ``(B, K)``, or None
        slopes, curvatures : list of numpy.ndarray, each ``(B, H_l)``
        """
        act = ACTIVATIONS[self.activation].np
        z = r @ self.w_r
        z += self.b_1
        if self.w_qd is not None:
            z += qd @ self.w_qd
        slopes, curvs = [], []
        last = len(self.kernels) - 1
        for i, (k, b) in enumerate(zip(self.kernels, self.biases)):
            h, d1, d2 = act(z, output or i < last, curvature)
            slopes.append(d1)
            curvs.append(d2)
            z = h @ k + b if h is not None else None
        return z, slopes, curvs

    def backward(self, slopes, adjoint=None):
        """Adjoints ``delta_l = d(out . adjoint)/dh_l`` and ``g_1 = delta_1 s'(z_1)``.

        Parameters
        ----------
        slopes : list of numpy.ndarray
            From :meth:`forward`.
        adjoint : numpy.ndarray, shape ``(B, K)`` or ``(1, K)``, optional
            Default: 1 (a scalar output).

        Returns
        -------
        deltas : list of numpy.ndarray
        g_1 : numpy.ndarray, shape ``(B, H_1)``
        """
        deltas = [None] * len(slopes)
        delta = self.kernels[-1].T if adjoint is None else adjoint @ self.kernels[-1].T
        for i in range(len(slopes) - 1, -1, -1):
            deltas[i] = delta
            if i > 0:
                delta = (delta * slopes[i]) @ self.kernels[i - 1].T
        return deltas, deltas[0] * slopes[0]

    def tangent(self, slopes, t_1):
        """Forward-mode tangent of the output for the tangent ``t_1 (B, H_1)`` of ``z_1``: ``(B, K)``."""
        t = t_1
        for k, d1 in zip(self.kernels, slopes):
            t = (t * d1) @ k
        return t

    def gradient_r(self, r, qd=None):
        """``d out / d r`` of a scalar network (no curvature computed), shape ``(B, R)``."""
        _, slopes, _ = self.forward(r, qd, output=False, curvature=False)
        return self.backward(slopes)[1] @ self.w_r.T
