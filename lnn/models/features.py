"""The one input map of the networks: ``q`` to features, in TensorFlow and numpy.

Angular coordinates enter as ``(sin q_i, cos q_i)``, the others as
``(q_i - mean_i) / std_i``. Written in two steps that both backends share:

1. the *basis* ``r(q) = [q_lin, sin q_ang, cos q_ang]`` (shape ``(B, R)``),
   with its tangent ``(dr/dq) u`` and pull-back ``g @ dr/dq``;
2. the affine map ``x = r @ S + c`` onto the feature columns (shape
   ``(B, F)``), where ``S`` selects and scales (``1 / std`` on the linear rows)
   and ``c = -mean / std`` on the linear columns.

The feature columns are laid out per coordinate, in order: one column for a
linear coordinate, two (``sin``, ``cos``) for an angular one (the layout of
the networks' first kernels, hence of saved models). The numpy snapshot folds
step 2 into the first layer (:meth:`lnn.models.mlp.NumpyNet.fold`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

__all__ = ["FeatureMap", "Features", "InputMap"]


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


@dataclasses.dataclass(frozen=True, eq=False)
class InputMap:
    """The layout of the features of ``n`` coordinates (numpy constants).

    Attributes
    ----------
    n : int
    lin, ang : numpy.ndarray of int
        Indices of the linear and of the angular coordinates.
    select : numpy.ndarray, shape ``(R, F)``
        Row ``k`` of the basis ``r`` feeds one feature column (unscaled).
    order : numpy.ndarray, shape ``(n, n)``, or None
        ``[g_lin, g_ang] @ order`` puts gradients back in coordinate order
        (None when the coordinates are all of one type).
    """

    n: int
    lin: np.ndarray
    ang: np.ndarray
    select: np.ndarray
    order: np.ndarray | None

    @classmethod
    def from_angular(cls, angular, dtype) -> InputMap:
        """The layout for ``angular`` (``n`` bools) in ``dtype``."""
        angular = np.asarray(angular, bool)
        n = angular.size
        lin, ang = np.flatnonzero(~angular), np.flatnonzero(angular)
        n_features = n + ang.size
        select = np.zeros((n + ang.size, n_features))
        col = 0
        for i in range(n):
            if angular[i]:
                j = int(np.searchsorted(ang, i))
                select[lin.size + j, col] = 1.0  # sin q_i
                select[lin.size + ang.size + j, col + 1] = 1.0  # cos q_i
                col += 2
            else:
                select[int(np.searchsorted(lin, i)), col] = 1.0
                col += 1
        order = None
        if lin.size and ang.size:
            order = np.zeros((n, n))
            order[np.arange(n), np.concatenate([lin, ang])] = 1.0
        return cls(n, lin, ang, select.astype(dtype), None if order is None else order.astype(dtype))

    @property
    def n_features(self) -> int:
        """``F``: one column per linear coordinate, two per angular one."""
        return int(self.select.shape[1])

    def feature_map(self, q_mean, q_std, qd_scale) -> FeatureMap:
        """The public :class:`FeatureMap` for the given scaling (numpy arrays of shape ``(n,)``)."""
        s, off = self.affine_np(q_mean, q_std)
        n_lin, n_ang = self.lin.size, self.ang.size
        a = np.zeros((self.n, self.n_features), s.dtype)
        b_sin, b_cos = np.zeros_like(a), np.zeros_like(a)
        a[self.lin] = s[:n_lin]
        b_sin[self.ang] = s[n_lin : n_lin + n_ang]
        b_cos[self.ang] = s[n_lin + n_ang :]
        return FeatureMap(a, b_sin, b_cos, off, np.asarray(qd_scale))

    # -- numpy -----------------------------------------------------------------------
    def affine_np(self, q_mean, q_std):
        """``(S, c)`` of ``x = r @ S + c`` for the scaling ``q_mean, q_std (n,)``."""
        q_mean, q_std = np.asarray(q_mean, np.float64), np.asarray(q_std, np.float64)
        rows = np.ones(self.select.shape[0])
        rows[: self.lin.size] = 1.0 / q_std[self.lin]
        s = self.select.astype(np.float64) * rows[:, None]
        offset = -(q_mean[self.lin] / q_std[self.lin]) @ self.select[: self.lin.size].astype(np.float64)
        return s, offset

    def basis_np(self, q):
        """``(r (B, R), sin q_ang, cos q_ang)`` (the trigonometric parts None without angles)."""
        return self._basis(q, _NUMPY)

    def tangent_np(self, u, s, c):
        """``(dr/dq) u``, shape ``(B, R)``."""
        return self._tangent(u, s, c, _NUMPY)

    def pullback_np(self, g, s, c):
        """``g @ dr/dq`` for ``g (B, R)``: the gradient in ``q``, ``(B, n)``."""
        return self._pullback(g, s, c, _NUMPY)

    # -- both backends: ``ops`` is _NUMPY or _TENSORFLOW ------------------------------
    def _basis(self, q, ops):
        if self.ang.size == 0:
            return q, None, None
        qa = ops.take(q, self.ang) if self.lin.size else q
        s, c = ops.sin(qa), ops.cos(qa)
        return ops.concat(([ops.take(q, self.lin)] if self.lin.size else []) + [s, c]), s, c

    def _tangent(self, u, s, c, ops):
        if s is None:
            return u
        ua = ops.take(u, self.ang) if self.lin.size else u
        return ops.concat(([ops.take(u, self.lin)] if self.lin.size else []) + [c * ua, -s * ua])

    def _pullback(self, g, s, c, ops):
        if s is None:
            return g
        n_lin, n_ang = self.lin.size, self.ang.size
        g_ang = c * g[:, n_lin : n_lin + n_ang] - s * g[:, n_lin + n_ang :]
        return ops.reorder(self, g[:, :n_lin], g_ang) if n_lin else g_ang

    # -- TensorFlow --------------------------------------------------------------------
    def affine_tf(self, q_mean, q_std):
        """``(S, c)`` of ``x = r @ S + c`` from the scaling variables (tensors)."""
        if not self.lin.size:
            return self.select, None
        inv = 1.0 / tf.gather(q_std, self.lin)
        rows = tf.concat([inv, tf.ones(2 * self.ang.size, inv.dtype)], axis=0)
        s = self.select * rows[:, None]
        offset = -tf.linalg.matvec(self.select[: self.lin.size], tf.gather(q_mean, self.lin) * inv, transpose_a=True)
        return s, offset

    def basis_tf(self, q):
        """``(r, sin q_ang, cos q_ang)`` of a tensor ``q (B, n)``."""
        return self._basis(q, _TENSORFLOW)

    def tangent_tf(self, u, s, c):
        """``(dr/dq) u`` of a tensor ``u (B, n)``."""
        return self._tangent(u, s, c, _TENSORFLOW)

    def pullback_tf(self, g, s, c):
        """``g @ dr/dq`` of a tensor ``g (B, R)``, shape ``(B, n)``."""
        return self._pullback(g, s, c, _TENSORFLOW)


def _reorder_np(inputs, g_lin, g_ang):
    out = np.empty((g_lin.shape[0], inputs.n), dtype=g_lin.dtype)
    out[:, inputs.lin] = g_lin
    out[:, inputs.ang] = g_ang
    return out


def _reorder_tf(inputs, g_lin, g_ang):
    return tf.matmul(tf.concat([g_lin, g_ang], axis=1), inputs.order)


@dataclasses.dataclass(frozen=True)
class _Ops:
    """The few array operations the input map needs, per backend."""

    take: object  # (x (B, n), indices) -> x[:, indices]
    concat: object  # list of (B, k) -> (B, sum k)
    sin: object
    cos: object
    reorder: object  # (inputs, g_lin, g_ang) -> gradient in coordinate order


_NUMPY = _Ops(lambda x, i: x[:, i], lambda xs: np.concatenate(xs, axis=1), np.sin, np.cos, _reorder_np)
_TENSORFLOW = _Ops(lambda x, i: tf.gather(x, i, axis=1), lambda xs: tf.concat(xs, axis=1), tf.sin, tf.cos, _reorder_tf)


@dataclasses.dataclass(frozen=True, eq=False)
class Features:
    """The features ``x`` of a batch ``q`` with what their derivatives need (tensors).

    Attributes
    ----------
    x : tensor, shape ``(B, F)``
    sin, cos : tensor, shape ``(B, n_ang)``, or None
    select : tensor or numpy.ndarray, shape ``(R, F)``
        ``S`` of ``x = r @ S + c``.
    inputs : InputMap
    """

    x: tf.Tensor
    sin: tf.Tensor | None
    cos: tf.Tensor | None
    select: object
    inputs: InputMap

    @classmethod
    def of(cls, inputs: InputMap, q, q_mean, q_std) -> Features:
        """Features of ``q (B, n)`` with the scaling variables ``q_mean, q_std (n,)``."""
        s_mat, offset = inputs.affine_tf(q_mean, q_std)
        r, sin, cos = inputs.basis_tf(q)
        x = tf.matmul(r, s_mat)
        return cls(x if offset is None else x + offset, sin, cos, s_mat, inputs)

    def tangent(self, u):
        """``(dx/dq) u`` for ``u (B, n)``, shape ``(B, F)``."""
        return tf.matmul(self.inputs.tangent_tf(u, self.sin, self.cos), self.select)

    def pullback(self, g):
        """``g @ dx/dq`` for ``g (B, F)``: the gradient in ``q``, shape ``(B, n)``."""
        return self.inputs.pullback_tf(tf.matmul(g, self.select, transpose_b=True), self.sin, self.cos)
