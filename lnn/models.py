"""Lagrangian neural networks: Keras models of a Lagrangian ``L(q, qd)``.

:class:`LagrangianNetwork` learns a Lagrangian and satisfies the
:class:`lnn.MechanicalSystem` protocol. Three kinds:

``"kinetic-potential"`` (default)
    ``L = T(q, qd) - V(q)`` with a kinetic MLP ``T`` and a potential MLP
    ``V``; ``M = d2T/dqd2``. With ``convex=True`` the kinetic MLP is
    input-convex (non-negative kernels after the first layer, softplus), and
    ``T`` gains ``epsilon/2 |qd|^2``, so ``M`` is positive definite by
    construction.
``"black-box"``
    One MLP ``L(q, qd)`` (Cranmer et al. 2020). Its split into energies is
    ``V(q) = -L(q, 0)`` and ``T = L - L(q, 0)``.
``"structured"``
    ``T = 1/2 qd^T M(q) qd`` with ``M = C C^T + epsilon I``, ``C``
    lower-triangular with a softplus diagonal from an MLP of ``q`` (DeLaN,
    Lutter et al. 2019), plus a potential MLP ``V(q)``.

Inputs of the networks. Angular coordinates enter as ``(sin q_i, cos q_i)``,
the others as ``(q_i - mean_i) / std_i``; velocities as ``qd_i / qd_std_i``
(scales set by :meth:`LagrangianNetwork.adapt`, saved with the model).
With ``A, B_sin, B_cos, c = model.feature_map()`` the features are
``x = q @ A + sin(q) @ B_sin + cos(q) @ B_cos + c`` (shape ``(B, F)``), and
:meth:`LagrangianNetwork.mlp_layers` gives every network's layers as numpy
arrays (see :mod:`lnn._mlp` for the layer equations and the closed-form
Hessian). Optional learned viscous damping adds the generalized force
``-D qd`` with ``D = C_D C_D^T`` (``C_D`` lower-triangular, softplus
diagonal), constant and positive definite.

The built-in networks are differentiated in closed form (forward Jacobians
and backward adjoints, batched matmuls; see ``benchmarks/bench_mechanics.py``
for the measurements against nested tapes, forward-over-reverse, XLA and
JAX). The public methods validate their inputs, run a ``tf.function``
compiled once per operation with a fixed ``input_signature`` (batch
dimension ``None``), with XLA when ``xla`` (the default; XLA compiles once
per batch shape, so batches are padded to a short ladder of sizes by
:func:`lnn.mechanics.bucketed`), through
:func:`lnn.mechanics.fast_caller` (past TensorFlow's Python call path when
no tape records), and return tensors in the model dtype; on symbolic tensors
(inside a training step) they inline.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile

import keras
import numpy as np
import tensorflow as tf

from lnn import _runtime, mechanics
from lnn._mlp import ACTIVATIONS, MLP, MLPLayer, scalar_derivatives
from lnn.mechanics import MassMatrixHealth, PowerBalance

__all__ = ["FeatureMap", "LagrangianNetwork", "load_model", "KINDS"]

#: The model kinds.
KINDS = ("kinetic-potential", "black-box", "structured")


@dataclasses.dataclass(frozen=True)
class FeatureMap:
    """Affine/trigonometric map from ``q`` to network features.

    ``x = q @ A + sin(q) @ B_sin + cos(q) @ B_cos + c`` and the velocity input
    is ``qd / qd_scale``.

    Attributes
    ----------
    A, B_sin, B_cos : numpy.ndarray, shape ``(n, F)``
    c : numpy.ndarray, shape ``(F,)``
    qd_scale : numpy.ndarray, shape ``(n,)``
    """

    A: np.ndarray
    B_sin: np.ndarray
    B_cos: np.ndarray
    c: np.ndarray
    qd_scale: np.ndarray


@dataclasses.dataclass(frozen=True)
class _Terms:
    """Everything the dynamics need at ``(q, qd)`` (tensors, batch-first)."""

    lagrangian: tf.Tensor
    grad_q: tf.Tensor | None
    grad_qd: tf.Tensor | None
    mass: tf.Tensor | None
    mixed: tf.Tensor | None


def _inv_softplus(x: float) -> float:
    return float(np.log(np.expm1(x)))


@keras.saving.register_keras_serializable(package="lnn")
class LagrangianNetwork(keras.Model):
    """A learned Lagrangian ``L(q, qd)`` with its mechanics.

    Parameters
    ----------
    n_dof : int
        Number of degrees of freedom ``n``.
    kind : {"kinetic-potential", "black-box", "structured"}
        Model structure (see the module docstring).
    hidden : tuple of int
        Hidden widths of every MLP.
    activation : {"softplus", "tanh", "sigmoid", "swish"}
        Smooth hidden activation (``convex=True`` requires ``"softplus"``).
    angular : bool or tuple of bool, length ``n_dof``, optional
        Which coordinates are angles (fed as ``sin, cos``); one bool applies
        to all. Default: none.
    damping : bool
        Learn a constant positive-definite viscous damping ``D``; the
        generalized force ``-D qd`` is added to ``tau``.
    convex : bool
        Input-convex kinetic MLP (kind ``"kinetic-potential"`` only).
    epsilon : float
        The ``epsilon I`` added to ``M`` by the structured and convex models.
    dtype : {"float32", "float64"}
        Weights, computations and outputs.
    seed : int, optional
        Seed of the initial weights.
    convex_init : bool, optional
        Initialise the kinetic (or black-box) MLP convex in ``qd``:
        non-negative kernels after the first layer, unconstrained during
        training, so that ``M`` is positive definite at initialisation (an
        unconstrained random ``T`` is indefinite at some states, and a batch
        containing one gives NaN accelerations: the default model would then
        fail its first training step). Needs ``activation="softplus"``.
        Default (None): on exactly when the activation is softplus.
    xla : bool
        Compile the eager mass-matrix, acceleration and inverse-dynamics calls
        with XLA (the fastest path measured; TensorFlow traces once). XLA
        compiles once per batch shape (0.3-1.3 s), so batches are padded to
        the next of ``1, 2, 3, 4, 6, 8, 12, 16, ...`` rows
        (:func:`lnn.mechanics.bucketed`): about ``2 log2(B)`` compilations for
        any mix of batch sizes up to ``B``, at most 1.5x the rows per call.
        ``model(...)`` inside a training step is never forced to XLA.
    name : str, optional
        Keras model name.

    Attributes
    ----------
    n_dof, angular, kind, dtype
        As given (``angular`` as a tuple of ``n_dof`` bools).
    """

    def __init__(self, n_dof: int, *, kind: str = "kinetic-potential", hidden=(128, 128),
                 activation: str = "softplus", angular=None, damping: bool = False,
                 convex: bool = False, epsilon: float = 1e-4, dtype: str = "float32",
                 seed: int | None = None, convex_init: bool | None = None, xla: bool = True,
                 name: str | None = None,
                 **kwargs) -> None:
        if isinstance(n_dof, bool) or not isinstance(n_dof, (int, np.integer)) or n_dof < 1:
            raise ValueError(f"n_dof must be a positive integer, got {n_dof!r}")
        n_dof = int(n_dof)
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if isinstance(hidden, (int, np.integer)):
            raise TypeError(f"hidden must be a tuple of widths, got the integer {hidden!r}")
        hidden = tuple(int(h) for h in hidden)
        if not hidden or min(hidden) < 1:
            raise ValueError(f"hidden must be a non-empty tuple of positive widths, got {hidden!r}")
        if angular is None or isinstance(angular, (bool, np.bool_)):
            angular = (bool(angular),) * n_dof
        try:
            angular = tuple(bool(a) for a in angular)
        except TypeError:
            raise TypeError(f"angular must be a bool or {n_dof} bools, got {angular!r}") from None
        if len(angular) != n_dof:
            raise ValueError(f"angular must have n_dof = {n_dof} entries, got {len(angular)}: {angular!r}")
        if convex and kind != "kinetic-potential":
            raise ValueError(f"convex=True applies to kind 'kinetic-potential' only, got kind {kind!r}")
        if convex and activation != "softplus":
            raise ValueError("convex=True needs a convex non-decreasing activation: use "
                             f"activation='softplus', got {activation!r}")
        if convex_init is None:
            convex_init = activation == "softplus"
        if convex_init and activation != "softplus":
            raise ValueError("convex_init=True needs a convex activation: use activation='softplus', "
                             f"got {activation!r}")
        if not (float(epsilon) >= 0.0):
            raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
        if dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.n_dof = n_dof
        self.kind = kind
        self.hidden = hidden
        self.activation_name = activation
        self._angular = angular
        self.damping = bool(damping)
        self.convex = bool(convex)
        self.epsilon = float(epsilon)
        self.seed = seed
        self.xla = bool(xla)
        self.convex_init = bool(convex_init)
        self._np_dtype = np.dtype(dtype)
        self._tf_dtype = tf.as_dtype(dtype)

        # Feature layout: per coordinate one column (linear) or two (sin, cos).
        n = n_dof
        n_feat = sum(2 if a else 1 for a in angular)
        sel_lin = np.zeros((n, n_feat))
        sel_sin = np.zeros((n, n_feat))
        sel_cos = np.zeros((n, n_feat))
        col = 0
        for i, a in enumerate(angular):
            if a:
                sel_sin[i, col], sel_cos[i, col + 1] = 1.0, 1.0
                col += 2
            else:
                sel_lin[i, col] = 1.0
                col += 1
        self._n_features = n_feat
        self._has_linear = not all(angular)
        self._has_angular = any(angular)
        # numpy, not tf.constant: a compiled call then embeds them as constants (XLA folds
        # them) instead of binding them as captured inputs on every call (~10 µs each).
        self._sel_lin = sel_lin.astype(dtype)
        self._sel_sin = sel_sin.astype(dtype)
        self._sel_cos = sel_cos.astype(dtype)

        def stat(name, value):
            var = self.add_weight(name=name, shape=(n,), initializer="zeros", dtype=dtype,
                                  trainable=False)
            var.assign(np.full(n, value, dtype=dtype))
            return var

        self.q_mean = stat("q_mean", 0.0)
        self.q_std = stat("q_std", 1.0)
        self.qd_std = stat("qd_std", 1.0)
        self.qdd_std = stat("qdd_std", 1.0)

        seeds = np.random.SeedSequence(seed).generate_state(4)
        common = dict(activation=activation, dtype=dtype)
        scalar = dict(common, output_bias=False)  # energy offsets do not change the dynamics
        # With convex_init, the networks differentiated twice in qd start convex there (M
        # positive definite at initialisation), then train unconstrained.
        energy = dict(scalar, convex_init=self.convex_init)
        if kind == "kinetic-potential":
            self.kinetic_net = MLP(n_feat, n, hidden, 1, nonnegative=self.convex,
                                   seed=int(seeds[0]), name="kinetic", **energy)
            self.potential_net = MLP(n_feat, 0, hidden, 1, seed=int(seeds[1]),
                                     name="potential", **scalar)
        elif kind == "black-box":
            self.lagrangian_net = MLP(n_feat, n, hidden, 1, seed=int(seeds[0]),
                                      name="lagrangian", **energy)
        else:
            self.cholesky_net = MLP(n_feat, 0, hidden, n * (n + 1) // 2, seed=int(seeds[0]),
                                    name="cholesky", **common)
            self.potential_net = MLP(n_feat, 0, hidden, 1, seed=int(seeds[1]),
                                     name="potential", **scalar)
        # Lower-triangular assembly: C = diag(softplus(d)) + reshape(off @ S).
        rows, cols = np.tril_indices(n, -1)
        scatter = np.zeros((len(rows), n * n))
        scatter[np.arange(len(rows)), rows * n + cols] = 1.0
        self._tril_scatter = scatter.astype(dtype)
        if self.damping:
            self.damping_diag = self.add_weight(name="damping_diag", shape=(n,),
                                                initializer="zeros", dtype=dtype)
            self.damping_diag.assign(np.full(n, _inv_softplus(0.05), dtype=dtype))
            self.damping_lower = self.add_weight(name="damping_lower", shape=(len(rows),),
                                                 initializer="zeros", dtype=dtype)
        object.__setattr__(self, "_functions", {})
        self.built = True

    # -- configuration -------------------------------------------------------------
    @property
    def angular(self) -> tuple[bool, ...]:
        """Which coordinates are angles, length ``n_dof``."""
        return self._angular

    def get_config(self) -> dict:
        """Constructor arguments (Keras serialisation)."""
        return dict(n_dof=self.n_dof, kind=self.kind, hidden=list(self.hidden),
                    activation=self.activation_name, angular=list(self._angular),
                    damping=self.damping, convex=self.convex, epsilon=self.epsilon,
                    dtype=self.dtype, seed=self.seed, convex_init=self.convex_init, xla=self.xla,
                    name=self.name)

    @classmethod
    def from_config(cls, config: dict) -> "LagrangianNetwork":
        """Rebuild from :meth:`get_config`."""
        config = dict(config)
        dtype = config.pop("dtype", "float32")
        if isinstance(dtype, dict):  # a serialised DTypePolicy
            dtype = dtype.get("config", {}).get("name", "float32")
        return cls(config.pop("n_dof"), dtype=dtype, **config)

    def feature_map(self) -> FeatureMap:
        """The input map of the networks as numpy arrays (see :class:`FeatureMap`)."""
        a, c = self._linear_map()
        return FeatureMap(np.asarray(a), np.asarray(self._sel_sin), np.asarray(self._sel_cos),
                          np.asarray(c), np.asarray(self.qd_std))

    def mlp_layers(self) -> dict[str, list[MLPLayer]]:
        """Effective layers of every network, for re-implementations.

        Returns
        -------
        dict
            ``{"kinetic", "potential"}`` (kinetic-potential),
            ``{"lagrangian"}`` (black-box) or ``{"cholesky", "potential"}``
            (structured): lists of :class:`lnn._mlp.MLPLayer` whose first
            kernel stacks the rows for the features ``x`` (``F`` rows) over
            those for ``qd / qd_scale`` (``n`` rows, kinetic and black-box).
            The cholesky network outputs ``n`` raw diagonal entries (through
            softplus) then the strictly lower entries in ``numpy.tril_indices(n, -1)``
            order.
        """
        return {net.name: net.layers() for net in self._networks()}

    def damping_matrix(self):
        """The learned viscous damping ``D``, shape ``(n, n)`` (zeros without damping)."""
        return self._damping_matrix() if self.damping else tf.zeros(
            (self.n_dof, self.n_dof), self.dtype)

    def _networks(self):
        if self.kind == "kinetic-potential":
            return [self.kinetic_net, self.potential_net]
        if self.kind == "black-box":
            return [self.lagrangian_net]
        return [self.cholesky_net, self.potential_net]

    # -- input scaling ---------------------------------------------------------------
    def adapt(self, q, qd, qdd=None) -> None:
        """Set the input scaling from data (non-trainable weights, saved with the model).

        Parameters
        ----------
        q, qd : array_like, shape ``(N, n)``
            Sample states: the mean and standard deviation of the non-angular
            ``q`` and the standard deviation of ``qd`` (about 0) are stored.
        qdd : array_like, shape ``(N, n)``, optional
            Sample accelerations: their standard deviation is stored as
            ``model.qdd_std`` for loss normalisation (not used by the model).
        """
        values = [("q", q), ("qd", qd)] + ([("qdd", qdd)] if qdd is not None else [])
        arrays = []
        for name, x in values:
            arr = np.asarray(x, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[1] != self.n_dof:
                raise ValueError(f"{name} must have shape (N, {self.n_dof}), got shape {arr.shape}")
            if len(arr) < 2:
                raise ValueError(f"adapt needs at least 2 samples, {name} has {len(arr)}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} contains NaN or infinite values")
            arrays.append(arr)

        def spread(x):
            s = np.sqrt(np.mean(x ** 2, axis=0))
            return np.where(s > 1e-8, s, 1.0)

        q_arr, qd_arr = arrays[0], arrays[1]
        mean = np.where(self._angular, 0.0, q_arr.mean(axis=0))
        std = np.where(self._angular, 1.0, spread(q_arr - mean))
        self.q_mean.assign(mean.astype(self._np_dtype))
        self.q_std.assign(std.astype(self._np_dtype))
        self.qd_std.assign(spread(qd_arr).astype(self._np_dtype))
        if qdd is not None:
            self.qdd_std.assign(spread(arrays[2]).astype(self._np_dtype))

    # -- graph mathematics (tensors in, tensors out) ------------------------------------
    def _linear_map(self):
        a = self._sel_lin / self.q_std[:, None]
        c = -tf.linalg.matvec(self._sel_lin, self.q_mean / self.q_std, transpose_a=True)
        return a, c

    def _features(self, q, trig=None):
        x = None
        if self._has_linear:
            a, c = self._linear_map()
            x = tf.matmul(q, a) + c
        if self._has_angular:
            sin, cos = trig if trig is not None else (tf.sin(q), tf.cos(q))
            part = tf.matmul(sin, self._sel_sin) + tf.matmul(cos, self._sel_cos)
            x = part if x is None else x + part
        return x

    def _feature_tangent(self, q, u, trig=None):
        x = None
        if self._has_linear:
            x = tf.matmul(u, self._linear_map()[0])
        if self._has_angular:
            sin, cos = trig if trig is not None else (tf.sin(q), tf.cos(q))
            part = tf.matmul(cos * u, self._sel_sin) - tf.matmul(sin * u, self._sel_cos)
            x = part if x is None else x + part
        return x

    def _feature_pullback(self, q, g, trig=None):
        out = None
        if self._has_linear:
            out = tf.matmul(g, self._linear_map()[0], transpose_b=True)
        if self._has_angular:
            sin, cos = trig if trig is not None else (tf.sin(q), tf.cos(q))
            part = (cos * tf.matmul(g, self._sel_sin, transpose_b=True)
                    - sin * tf.matmul(g, self._sel_cos, transpose_b=True))
            out = part if out is None else out + part
        return out

    def _damping_matrix(self):
        n = self.n_dof
        c = tf.linalg.diag(tf.math.softplus(self.damping_diag))
        if n > 1:
            c = c + tf.reshape(tf.linalg.matvec(self._tril_scatter, self.damping_lower,
                                                transpose_a=True), (n, n))
        return tf.matmul(c, c, transpose_b=True)

    def _structured_mass(self, x):
        n = self.n_dof
        raw = self.cholesky_net.forward(x)
        c = tf.linalg.diag(tf.math.softplus(raw[:, :n]))
        if n > 1:
            c = c + tf.reshape(tf.matmul(raw[:, n:], self._tril_scatter), (-1, n, n))
        m = tf.matmul(c, c, transpose_b=True)
        return m + self.epsilon * tf.eye(n, dtype=m.dtype)

    def _potential(self, q):
        if self.kind == "black-box":
            return -self._black_box_value(q, tf.zeros_like(q))
        return self.potential_net.forward(self._features(q))[:, 0]

    def _black_box_value(self, q, qd):
        return self.lagrangian_net.forward(self._features(q), qd / self.qd_std)[:, 0]

    def _kinetic(self, q, qd):
        if self.kind == "kinetic-potential":
            t = self.kinetic_net.forward(self._features(q), qd / self.qd_std)[:, 0]
            if self.convex:
                t = t + 0.5 * self.epsilon * tf.reduce_sum(qd * qd, axis=-1)
            return t
        if self.kind == "black-box":
            return self._black_box_value(q, qd) - self._black_box_value(q, tf.zeros_like(qd))
        m = self._structured_mass(self._features(q))
        return 0.5 * tf.reduce_sum(qd * tf.linalg.matvec(m, qd), axis=-1)

    def _lagrangian(self, q, qd):
        if self.kind == "black-box":
            return self._black_box_value(q, qd)
        return self._kinetic(q, qd) - self._potential(q)

    def _terms(self, q, qd, *, hessian: bool, mixed: bool, grad_q: bool) -> _Terms:
        """Closed-form derivatives of ``L`` (structured: M direct, rest by autodiff)."""
        if self.kind == "structured":
            return self._structured_terms(q, qd, mixed=mixed, grad_q=grad_q)
        trig = (tf.sin(q), tf.cos(q)) if self._has_angular else None
        x = self._features(q, trig)
        scale = tf.convert_to_tensor(self.qd_std)
        net = self.kinetic_net if self.kind == "kinetic-potential" else self.lagrangian_net
        tangent = self._feature_tangent(q, qd, trig) if mixed else None
        d = scalar_derivatives(net, x, qd / scale, hessian=hessian, x_tangent=tangent)
        value = d.value
        grad_x = d.grad_x
        grad_qd = d.grad_v / scale
        mass = d.hessian_v / (scale[:, None] * scale[None, :]) if hessian else None
        mix = d.mixed_v / scale if mixed else None
        if self.kind == "kinetic-potential":
            if self.convex:
                eps = self.epsilon
                value = value + 0.5 * eps * tf.reduce_sum(qd * qd, axis=-1)
                grad_qd = grad_qd + eps * qd
                if hessian:
                    mass = mass + eps * tf.eye(self.n_dof, dtype=mass.dtype)
            if grad_q:
                v = scalar_derivatives(self.potential_net, x, None, hessian=False)
                value = value - v.value
                grad_x = grad_x - v.grad_x
            else:
                value = value - self.potential_net.forward(x)[:, 0]
        gq = self._feature_pullback(q, grad_x, trig) if grad_q else None
        return _Terms(value, gq, grad_qd, mass, mix)

    def _structured_terms(self, q, qd, *, mixed: bool, grad_q: bool) -> _Terms:
        def evaluate():
            m = self._structured_mass(self._features(q))
            p = tf.linalg.matvec(m, qd)
            value = 0.5 * tf.reduce_sum(qd * p, axis=-1) - self._potential(q)
            return m, p, value

        if not (mixed or grad_q):
            m, p, value = evaluate()
            return _Terms(value, None, p, m, None)
        with tf.autodiff.ForwardAccumulator(q, qd) as acc:
            with tf.GradientTape() as tape:
                tape.watch(q)
                m, p, value = evaluate()
            gq = tape.gradient(value, q, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        m_dot = acc.jvp(m)
        return _Terms(value, gq, p, m, tf.linalg.matvec(m_dot, qd))

    def _generalized_force(self, qd, tau):
        if self.damping:
            damp = -tf.linalg.matvec(self._damping_matrix(), qd)
            return damp if tau is None else tau + damp
        return tau

    def _linear_system(self, q, qd, tau=None):
        """``(M, rhs)`` of the Euler-Lagrange equations ``M qdd = rhs``."""
        t = self._terms(q, qd, hessian=True, mixed=True, grad_q=True)
        rhs = t.grad_q - t.mixed
        force = self._generalized_force(qd, tau)
        if force is not None:
            rhs = rhs + force
        return t.mass, rhs

    def _acceleration_graph(self, q, qd, tau=None, regularize=None):
        return mechanics.solve_cholesky(*self._linear_system(q, qd, tau), regularize)

    def _acceleration_by_tapes(self, q, qd, tau=None):
        """Accelerations whose ``M``, ``dL/dq`` and mixed term come from nested tapes.

        The generic engine of :mod:`lnn.mechanics` applied to the networks,
        instead of their closed-form derivatives (equal to rounding): a check of
        the closed form's weight gradients. Not for XLA training steps: an XLA
        train step built on it was recompiled after every weight update
        (0.6-0.9 s a step; ``tests/test_train.py`` counts the compilations).
        """
        force = self._generalized_force(qd, tau)
        force = tf.zeros_like(q) if force is None else force
        if self.kind == "kinetic-potential":
            lagrangian = mechanics.separable(self._kinetic, self._potential)
        else:
            lagrangian = self._lagrangian
        return mechanics._acceleration_body(lagrangian, q, qd, force, "reverse", None)

    def _inverse_dynamics_graph(self, q, qd, qdd):
        t = self._terms(q, qd, hessian=True, mixed=True, grad_q=True)
        tau = tf.linalg.matvec(t.mass, qdd) + t.mixed - t.grad_q
        if self.damping:
            tau = tau + tf.linalg.matvec(self._damping_matrix(), qd)
        return tau

    def _mass_matrix_graph(self, q, qd):
        if self.kind == "structured":
            return self._structured_mass(self._features(q))
        return self._terms(q, qd, hessian=True, mixed=False, grad_q=False).mass

    def _energy_graph(self, q, qd):
        if self.kind == "structured":
            return self._kinetic(q, qd) + self._potential(q)
        t = self._terms(q, qd, hessian=False, mixed=False, grad_q=False)
        return tf.reduce_sum(qd * t.grad_qd, axis=-1) - t.lagrangian

    # -- compiled dispatch ---------------------------------------------------------------
    _SIGNATURES = {
        "lagrangian": ("_lagrangian", 2), "kinetic_energy": ("_kinetic", 2),
        "potential_energy": ("_potential", 1), "mass_matrix": ("_mass_matrix_graph", 2),
        "acceleration": ("_acceleration_graph", 3), "acceleration_free": ("_acceleration_graph", 2),
        "inverse_dynamics": ("_inverse_dynamics_graph", 3), "energy": ("_energy_graph", 2),
    }

    #: Operations compiled with XLA when ``xla`` (measured faster in
    #: ``benchmarks/bench_mechanics.py``). Under XLA the accelerations solve
    #: with an unrolled Cholesky factorisation for ``n <=
    #: mechanics.UNROLLED_CHOLESKY_MAX_N`` (XLA's own CPU Cholesky is slow);
    #: for larger ``n`` the derivatives are compiled with XLA and TensorFlow's
    #: batched Cholesky runs outside.
    _XLA_OPS = ("mass_matrix", "inverse_dynamics")

    def _function(self, op: str, regularize=None):
        """The compiled ``op`` for a packed ``(B, k n)`` tensor (XLA batches padded)."""
        return self._entry(op, regularize)[1]

    def _run_packed(self, op: str, x: np.ndarray, regularize=None):
        """Run the compiled ``op`` on the packed numpy batch ``x`` of shape ``(B, k n)``.

        The hot path: the XLA batch padding (:func:`lnn.mechanics.bucketed`) is
        done here in numpy, before the one conversion to a tensor.
        """
        _, _, raw, jit = self._entry(op, regularize)
        rows = x.shape[0]
        size = mechanics.batch_bucket(rows) if jit else rows
        if size == rows:
            return raw(mechanics._make_eager(x, self._tf_dtype))
        out = raw(mechanics._make_eager(mechanics.pad_rows(x, size), self._tf_dtype))
        if mechanics.tape_may_record():  # a tape watches the weights: cut where it sees it
            return out[:rows]
        return mechanics._make_eager(out.numpy()[:rows], out.dtype)

    def _entry(self, op: str, regularize=None):
        """``(tf.function, caller, raw caller, xla)`` of ``op``, compiled on first use."""
        key = (op, regularize)
        fn = self._functions.get(key)
        if fn is None:
            method, n_args = self._SIGNATURES[op]
            graph = getattr(self, method)
            jit = False
            if op.startswith("acceleration"):
                if self.xla and self.n_dof <= mechanics.UNROLLED_CHOLESKY_MAX_N:
                    jit = True

                    def solve(*args):
                        return mechanics.solve_cholesky(*self._linear_system(*args), regularize)
                elif self.xla:
                    system = tf.function(_runtime.xla_body(self._linear_system), jit_compile=True,
                                         autograph=False)

                    def solve(*args):
                        return mechanics.solve_cholesky(*system(*args), regularize)
                else:
                    def solve(*args):
                        return mechanics.solve_cholesky(*self._linear_system(*args), regularize)
                graph = solve
            else:
                jit = self.xla and op in self._XLA_OPS
            n = self.n_dof

            # One packed input (B, n_args n), split here: one tensor per call to convert
            # and bind instead of n_args (mechanics.pack_columns).
            def body(x):
                return graph(*[x[:, i * n:(i + 1) * n] for i in range(n_args)])

            spec = [tf.TensorSpec((None, n_args * n), self.dtype)]
            poly = tf.function(_runtime.xla_body(body) if jit else body, input_signature=spec,
                               autograph=False, jit_compile=jit)
            raw = mechanics.fast_caller(poly.get_concrete_function())
            # XLA compiles per batch shape: pad to a ladder of sizes.
            fn = (poly, mechanics.bucketed(raw) if jit else raw, raw, jit)
            self._functions[key] = fn
        return fn

    def tracing_count(self, op: str) -> int:
        """Number of traces of the compiled ``op`` (0 before its first call).

        Parameters
        ----------
        op : str
            One of ``"lagrangian"``, ``"kinetic_energy"``, ``"potential_energy"``,
            ``"mass_matrix"``, ``"acceleration"``, ``"acceleration_free"``
            (without ``tau``), ``"inverse_dynamics"``, ``"energy"``.
        """
        if op not in self._SIGNATURES:
            raise ValueError(f"op must be one of {sorted(self._SIGNATURES)}, got {op!r}")
        fn = self._functions.get((op, None))
        return 0 if fn is None else int(fn[0].experimental_get_tracing_count())

    def _prepare(self, *pairs):
        return mechanics._inputs(pairs, self._tf_dtype, n=self.n_dof)

    def _dispatch(self, op, graph, names, *values):
        """Check ``values``; inline ``graph(*args)`` on symbolic tensors, else run compiled ``op``.

        The compiled functions take the inputs side by side in one ``(B, k n)``
        tensor (one conversion and one bound input per call instead of ``k``).
        ``names`` (one per value) word the errors of the full checks.
        """
        x = mechanics.packed_plain(values, self._np_dtype, self._tf_dtype, self.n_dof)
        if x is not None:  # finite (B, n) batches of the model's dtype: the hot path
            return self._run_packed(op, x)
        args, single, _ = self._prepare(*zip(names, values))
        if mechanics._is_symbolic(args[0]):
            return graph(*args)
        out = self._function(op)(mechanics.pack_columns(args, self._tf_dtype))
        return mechanics._unbatch(out, single)

    # -- public mechanics ---------------------------------------------------------------
    def lagrangian(self, q, qd):
        """Lagrangian ``L``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("lagrangian", self._lagrangian, ("q", "qd"), q, qd)

    def kinetic_energy(self, q, qd):
        """Kinetic energy ``T``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("kinetic_energy", self._kinetic, ("q", "qd"), q, qd)

    def potential_energy(self, q):
        """Potential energy ``V``.

        Parameters
        ----------
        q : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("potential_energy", self._potential, ("q",), q)

    def mass_matrix(self, q, qd=None):
        """Mass matrix ``M = d2T/dqd2`` (closed form).

        Parameters
        ----------
        q : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        qd : array_like or tensor, same shape, optional
            Needed unless ``kind == "structured"`` (where ``M`` depends on
            ``q`` only); default zeros.

        Returns
        -------
        tensor, shape ``(B, n, n)`` (``(n, n)`` for a single state)
        """
        x = mechanics.packed_plain((q, qd), self._np_dtype, self._tf_dtype, self.n_dof)
        if x is not None:  # the hot path of scripts and integrators, as in _dispatch
            return self._run_packed("mass_matrix", x)
        if qd is None:
            qd = (tf.zeros_like(q) if isinstance(q, tf.Tensor)
                  else np.zeros_like(np.asarray(q, float)))
        return self._dispatch("mass_matrix", self._mass_matrix_graph, ("q", "qd"), q, qd)

    def acceleration(self, q, qd, tau=None, *, regularize: float | None = None):
        """Forward dynamics ``qdd = M^{-1} (dL/dq - (d2L/dqd dq) qd + tau - D qd)``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``
        tau : array_like or tensor, same shape, optional
            Generalized forces (default zero).
        regularize : float, optional
            Solve with ``M + regularize I`` (explicit, caller-chosen). Default:
            none; a mass matrix that is not positive definite raises.

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)

        Raises
        ------
        lnn.mechanics.MassMatrixError
            (a ``ValueError``) naming how many samples have a mass matrix that is
            not positive definite and the smallest eigenvalue.
        """
        # The hot path of integrators and scripts, written out (no closures): see _dispatch.
        x = mechanics.packed_plain((q, qd) if tau is None else (q, qd, tau), self._np_dtype,
                                   self._tf_dtype, self.n_dof)
        op = "acceleration_free" if tau is None else "acceleration"
        shift = None if regularize is None else float(regularize)
        single = False
        if x is not None:
            try:
                qdd = self._run_packed(op, x, shift)
                if mechanics._all_finite(qdd.numpy()):
                    return qdd
            except tf.errors.InvalidArgumentError:  # TensorFlow's Cholesky (large n) refused M
                pass
            packed = mechanics._make_eager(x, self._tf_dtype)
        else:
            pairs = (("q", q), ("qd", qd)) + ((("tau", tau),) if tau is not None else ())
            args, single, _ = self._prepare(*pairs)
            if mechanics._is_symbolic(args[0]):
                return self._acceleration_graph(*args, regularize=regularize)
            packed = mechanics.pack_columns(args, self._tf_dtype)
        # The full call: a failed Cholesky or a non-finite result is explained (raises).
        n2 = 2 * self.n_dof
        qdd = mechanics.call_checked(self._function(op, shift), (packed,),
                                     lambda: self._function("mass_matrix")(packed[:, :n2]), shift)
        return qdd[0] if single else qdd

    # -- fast numpy inference (lnn.fast; owned by the rollout-speed issue) ----------------
    @property
    def numpy_acceleration(self):
        """:meth:`acceleration` in numpy, ``f(q, qd, tau=None) -> ndarray`` (the integrator's hot path).

        Looking the attribute up takes a numpy snapshot of the current weights
        (:class:`lnn.fast.FastLagrangian`: the closed-form derivatives of the
        built-in networks, equal to :meth:`acceleration` to rounding), so a
        call costs tens of microseconds instead of a ``tf.function`` dispatch.
        Keep the returned function for repeated calls (``lnn.rollout`` does)
        and look it up again after the weights change.

        Returns
        -------
        callable
            ``f(q, qd, tau=None)`` with ``q, qd, tau`` of shape ``(B, n)`` or
            ``(n,)``, returning a numpy array of the same shape in the model
            dtype; it raises :class:`lnn.fast.IndefiniteMassMatrixError` (a
            ``ValueError`` listing the ``trajectories``) where ``M`` is not
            positive definite.
        """
        return self.numpy_snapshot().acceleration

    def numpy_snapshot(self):
        """A numpy snapshot of the current weights (:class:`lnn.fast.FastLagrangian`).

        It evaluates ``acceleration``, ``inverse_dynamics``, ``mass_matrix``
        and ``energy`` in numpy (equal to the TensorFlow path to rounding) and
        does not see later changes of the weights. ``lnn.rollout`` takes one
        per rollout for the solver's right-hand side and the energies at the
        samples.

        Returns
        -------
        lnn.fast.FastLagrangian
        """
        from lnn.fast import FastLagrangian

        return FastLagrangian.from_model(self)

    def acceleration_jacobian(self, q, qd, tau=None) -> np.ndarray:
        """Exact ``d qdd / d [q, qd]`` by autodiff, for scipy's implicit solvers.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``
        tau : array_like, same shape, optional (held fixed)

        Returns
        -------
        numpy.ndarray, shape ``(B, n, 2n)`` (``(n, 2n)`` for a single state), float64
        """
        from lnn.fast import acceleration_jacobian

        return acceleration_jacobian(self, q, qd, tau)
    # -- end of fast numpy inference ----------------------------------------------------------

    def inverse_dynamics(self, q, qd, qdd):
        """Inverse dynamics ``tau = M qdd + (d2L/dqd dq) qd - dL/dq + D qd``.

        Parameters
        ----------
        q, qd, qdd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B, n)`` (``(n,)`` for a single state)
            The generalized force that produces ``qdd``.
        """
        return self._dispatch("inverse_dynamics", self._inverse_dynamics_graph,
                              ("q", "qd", "qdd"), q, qd, qdd)

    def energy(self, q, qd):
        """Energy ``E = qd . dL/dqd - L``.

        Parameters
        ----------
        q, qd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return self._dispatch("energy", self._energy_graph, ("q", "qd"), q, qd)

    def energy_rate(self, q, qd, qdd):
        """``dE/dt`` along ``(qd, qdd)`` by automatic differentiation.

        Parameters
        ----------
        q, qd, qdd : array_like or tensor, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        tensor, shape ``(B,)`` (scalar for a single state)
        """
        return mechanics.energy_rate(self._lagrangian, q, qd, qdd, dtype=self.dtype)

    def power_balance(self, q, qd, tau=None) -> PowerBalance:
        """Check ``dE/dt = qd . (tau - D qd)`` along the model's own accelerations.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)``
        tau : array_like, shape ``(B, n)``, optional

        Returns
        -------
        lnn.mechanics.PowerBalance
            ``input_power`` includes the damping power ``-qd . D qd``; the
            residual is zero up to rounding for a well-conditioned ``M``.
        """
        q_arr = np.atleast_2d(np.asarray(q, np.float64))
        qd_arr = np.atleast_2d(np.asarray(qd, np.float64))
        qdd = self.acceleration(q_arr, qd_arr, tau).numpy()
        force = np.zeros_like(qd_arr) if tau is None else np.atleast_2d(np.asarray(tau, np.float64))
        if self.damping:
            force = force - qd_arr @ np.asarray(self._damping_matrix(), np.float64).T
        return mechanics.power_balance(self._lagrangian, q_arr, qd_arr, qdd, force, dtype=self.dtype)

    def mass_matrix_health(self, q, qd=None) -> MassMatrixHealth:
        """Health report of ``M`` on a batch of states.

        Parameters
        ----------
        q : array_like, shape ``(B, n)``
        qd : array_like, shape ``(B, n)``, optional

        Returns
        -------
        lnn.mechanics.MassMatrixHealth
            Smallest eigenvalue, condition numbers, fraction of samples that
            are not positive definite.
        """
        return mechanics.mass_matrix_health(self.mass_matrix(q, qd))

    # -- Keras ------------------------------------------------------------------------------
    def call(self, inputs):
        """Accelerations for Keras: ``inputs = (q, qd)`` or ``(q, qd, tau)``, each ``(B, n)``.

        Returns
        -------
        tensor, shape ``(B, n)``
        """
        if not isinstance(inputs, (tuple, list)) or len(inputs) not in (2, 3):
            raise ValueError("inputs must be a tuple (q, qd) or (q, qd, tau), got "
                             f"{type(inputs).__name__} of length "
                             f"{len(inputs) if isinstance(inputs, (tuple, list)) else 'n/a'}")
        dtype = tf.as_dtype(self.dtype)
        q, qd = (tf.cast(x, dtype) for x in inputs[:2])
        tau = tf.cast(inputs[2], dtype) if len(inputs) == 3 and inputs[2] is not None else None
        return self._acceleration_graph(q, qd, tau)


def load_model(path):
    """Load an lnn model saved with ``model.save(path)``.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.keras`` file holding a :class:`LagrangianNetwork` or the plain-MLP
        baseline :class:`lnn.baseline.AccelerationMLP`.

    Returns
    -------
    LagrangianNetwork or lnn.baseline.AccelerationMLP
        With the saved configuration and bit-identical weights.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is not a Keras archive of an lnn model.
    """
    from lnn.baseline import AccelerationMLP

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path!r}")
    if not path.endswith(".keras") or not zipfile.is_zipfile(path):
        raise ValueError(f"{path!r} is not a Keras '.keras' model archive")
    try:
        model = keras.saving.load_model(
            path, custom_objects={"LagrangianNetwork": LagrangianNetwork, "MLP": MLP,
                                  "AccelerationMLP": AccelerationMLP})
    except Exception as exc:  # Keras raises many types for foreign archives
        raise ValueError(f"cannot load {path!r} as an lnn model: {exc}") from exc
    if not isinstance(model, (LagrangianNetwork, AccelerationMLP)):
        raise ValueError(f"{path!r} holds a {type(model).__name__}, not an lnn LagrangianNetwork "
                         "or AccelerationMLP")
    return model
