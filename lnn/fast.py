"""Fast numpy inference of a trained :class:`lnn.LagrangianNetwork`.

``solve_ivp`` calls the right-hand side once per solver stage, and at small
batches the cost of a call is dispatch, not arithmetic: any ``tf.function``
call costs 130–400 µs on a small CPU, against a few µs for a numpy function.
:class:`FastLagrangian` is a numpy snapshot of a model's weights that
evaluates the Euler–Lagrange accelerations of the built-in networks in closed
form, as a handful of batched matmuls:

- the feature map (``sin/cos`` of angular coordinates, affine scaling of the
  others, ``qd / qd_scale``) is folded into the first layer, so
  ``z_1 = [q_lin, sin q_ang, cos q_ang] @ W_r + qd @ W_qd + b``;
- a forward pass keeps ``s'(z_l)``, ``s''(z_l)``; the backward adjoints
  ``delta_l = dy/dh_l`` give ``dL/dq`` (pulled back through the feature map);
- the forward Jacobians ``K_l = dz_l/dqd`` (``K_1 = W_qd``,
  ``K_l = (K_{l-1} * s'(z_{l-1})) @ W_l``) are propagated together with the
  tangent ``t_l`` of ``z_l`` along the feature direction ``(dr/dq) qd``, so
  that one product per layer gives both ``M = d2T/dqd2 = sum_l K_l
  diag(s''(z_l) delta_l) K_l^T`` and the mixed term ``(d2L/dqd dq) qd =
  sum_l K_l (s''(z_l) delta_l t_l)``;
- the structured kind (``M = C C^T + eps I``) differentiates the Cholesky
  network in forward mode (``dM/dt``) and reverse mode (``d(qd^T M qd)/dq``).

:meth:`FastLagrangian.acceleration` equals the TensorFlow path to rounding
(tests: 1e-10 in float64). :func:`acceleration_jacobian` gives the exact
``d qdd / d [q, qd]`` by TensorFlow autodiff of the compiled acceleration, for
scipy's implicit solvers.

Batched calls allocate megabytes of temporaries; the first snapshot asks glibc
to keep 64 MB of heap slack (``mallopt(M_TOP_PAD)``) so that they are not
returned to the kernel and faulted in again on every call (up to 2x faster at
batch 256; set ``MALLOC_TOP_PAD_`` in the environment to choose another value).

A :class:`FastLagrangian` is a *snapshot*: it does not see later changes of the
model's weights; take a new one after training (``model.numpy_acceleration``
does so each time the attribute is looked up).
"""

from __future__ import annotations

import dataclasses
import weakref

import numpy as np
from scipy.special import expit

from lnn import _runtime
from lnn.mechanics import (MassMatrixError, batch_bucket, fast_caller, mass_matrix_health,
                           pad_rows)

__all__ = ["FastLagrangian", "IndefiniteMassMatrixError", "acceleration_jacobian"]


class IndefiniteMassMatrixError(MassMatrixError):
    """A learned mass matrix that is not positive definite during inference.

    Attributes
    ----------
    trajectories : tuple of int
        Batch indices whose ``M`` is not positive definite (the rollout
        reports them with the time).
    health : lnn.mechanics.MassMatrixHealth
        Health report of the whole batch.
    """

    def __init__(self, message: str, health, trajectories) -> None:
        super().__init__(message, health)
        self.trajectories = tuple(int(i) for i in trajectories)


# ----------------------------------------------------------------------------- memory

_M_TOP_PAD = -2  # glibc mallopt parameter
_TOP_PAD_BYTES = 64 << 20
_MALLOC_TUNED = []


def _keep_heap_padded() -> None:
    """Ask glibc to keep 64 MB of slack at the top of the heap (``M_TOP_PAD``), once.

    A batched right-hand side allocates a few MB of temporaries per call and
    frees them; by default glibc hands that memory back to the kernel and
    page-faults it in again on the next call, which doubled the cost of a
    7-DOF, batch-256 call (4.4 ms against 2.4 ms with the padding, measured
    on this package's benchmark machine). Nothing happens off glibc, or when
    the environment sets ``MALLOC_TOP_PAD_`` itself.
    """
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED.append(True)
    import os
    import sys

    if not sys.platform.startswith("linux") or "MALLOC_TOP_PAD_" in os.environ:
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TOP_PAD, _TOP_PAD_BYTES)
    except (OSError, AttributeError):  # not glibc
        pass


# ----------------------------------------------------------------------------- activations


def _softplus(z):
    return np.logaddexp(z, 0.0)


# Each activation maps z to (s(z) or None, s'(z), s''(z) or None); s(z) is skipped when
# the caller does not need it (the last hidden layer when only derivatives are wanted),
# s''(z) when only first derivatives are (the potential's gradient). Written with
# exp/log/tanh/copysign only: these vectorise, unlike logaddexp/expit/np.where here
# (np.where alone cost ~50 µs on a 256 x 64 batch, a third of the softplus).


def _act_softplus(z, value=True, curvature=True):
    if not value:  # s' = sigmoid(z) = (1 + tanh(z/2)) / 2, s'' = (1 - tanh(z/2)^2) / 4
        th = np.tanh(0.5 * z)
        d1 = 0.5 * th
        d1 += 0.5
        if not curvature:
            return None, d1, None
        th *= th
        return None, d1, 0.25 - 0.25 * th
    e = np.exp(-np.abs(z))  # exp(-|z|) in (0, 1]
    one_plus = 1.0 + e
    p = 1.0 / one_plus  # sigmoid(|z|)
    d1 = np.copysign(p - 0.5, z)  # sigmoid(z): p for z >= 0, 1 - p for z < 0
    d1 += 0.5
    h = np.log(one_plus)
    h += np.maximum(z, 0.0)  # softplus(z) = max(z, 0) + log(1 + exp(-|z|))
    if not curvature:
        return h, d1, None
    e *= p
    e *= p  # sigmoid(|z|) sigmoid(-|z|)
    return h, d1, e


def _act_tanh(z, value=True, curvature=True):
    t = np.tanh(z)
    d1 = 1.0 - t * t
    return t, d1, (-2.0 * t * d1 if curvature else None)


def _act_sigmoid(z, value=True, curvature=True):
    s = expit(z)
    d1 = s * (1.0 - s)
    return s, d1, (d1 * (1.0 - 2.0 * s) if curvature else None)


def _act_swish(z, value=True, curvature=True):
    s = expit(z)
    d1s = s * (1.0 - s)
    return z * s, s + z * d1s, (d1s * (2.0 + z * (1.0 - 2.0 * s)) if curvature else None)


#: name -> z -> (s(z), s'(z), s''(z)) in numpy.
_ACTIVATIONS = {
    "softplus": _act_softplus,
    "tanh": _act_tanh,
    "sigmoid": _act_sigmoid,
    "swish": _act_swish,
}


# ----------------------------------------------------------------------------- networks


@dataclasses.dataclass(frozen=True, eq=False)
class _Net:
    """An MLP on the raw inputs ``r = [q_lin, sin q_ang, cos q_ang]`` and ``qd``.

    ``w_r (R, H_1)``, ``w_qd (n, H_1)`` or None, ``b_1 (H_1,)``; then
    ``kernels[i] (H_i, H_{i+1})``, ``biases[i]`` with the last being the
    linear output layer.
    """

    w_r: np.ndarray
    w_qd: np.ndarray | None
    b_1: np.ndarray
    kernels: tuple
    biases: tuple
    activation: str


def _fold_net(layers, n_features: int, r_to_x: np.ndarray, x_offset: np.ndarray,
              qd_scale: np.ndarray, dtype) -> _Net:
    """Fold the feature map ``x = r @ r_to_x + x_offset`` and ``qd / qd_scale`` into layer 1."""
    first = layers[0]
    w_x = np.asarray(first.kernel[:n_features], np.float64)
    w_v = np.asarray(first.kernel[n_features:], np.float64)
    w_r = r_to_x @ w_x
    b_1 = np.asarray(first.bias, np.float64) + x_offset @ w_x
    w_qd = w_v / qd_scale[:, None] if w_v.shape[0] else None
    cast = lambda a: np.ascontiguousarray(a, dtype=dtype)  # noqa: E731
    return _Net(
        w_r=cast(w_r), w_qd=None if w_qd is None else cast(w_qd), b_1=cast(b_1),
        kernels=tuple(cast(layer.kernel) for layer in layers[1:]),
        biases=tuple(cast(layer.bias) for layer in layers[1:]),
        activation=first.activation,
    )


def _forward(net: _Net, r, qd, *, output: bool = True, curvature: bool = True):
    """Hidden pre-activations' derivatives and the output.

    Returns ``(out (B, K) or None, slopes [s'(z_l)], curvatures [s''(z_l)])``;
    ``output=False`` skips the last activation and the output layer,
    ``curvature=False`` the curvatures (None).
    """
    act = _ACTIVATIONS[net.activation]
    z = r @ net.w_r
    z += net.b_1
    if net.w_qd is not None:
        z += qd @ net.w_qd
    slopes, curvs = [], []
    last = len(net.kernels) - 1
    for i, (k, b) in enumerate(zip(net.kernels, net.biases)):
        h, d1, d2 = act(z, output or i < last, curvature)
        slopes.append(d1)
        curvs.append(d2)
        z = h @ k + b if h is not None else None
    return z, slopes, curvs


def _backward(net: _Net, slopes, adjoint):
    """Adjoints ``delta_l = d(out . adjoint)/dh_l`` and ``g_1 = delta_1 s'(z_1)``.

    ``adjoint`` has shape ``(B, K)`` or ``(1, K)``, or is None for a scalar
    output (adjoint 1); returns ``(deltas, g_1)``.
    """
    deltas = [None] * len(slopes)
    delta = net.kernels[-1].T if adjoint is None else adjoint @ net.kernels[-1].T
    for i in range(len(slopes) - 1, -1, -1):
        deltas[i] = delta
        if i > 0:
            delta = (delta * slopes[i]) @ net.kernels[i - 1].T
    return deltas, deltas[0] * slopes[0]


def _tangent(net: _Net, slopes, t_1):
    """Forward-mode tangent of the output for the tangent ``t_1`` of ``z_1``, shape ``(B, K)``."""
    t = t_1
    for k, d1 in zip(net.kernels, slopes):
        t = (t * d1) @ k
    return t


# ----------------------------------------------------------------------------- the snapshot


@dataclasses.dataclass(frozen=True, eq=False)
class FastLagrangian:
    """A numpy snapshot of a :class:`lnn.LagrangianNetwork` for fast inference.

    Build it with :meth:`from_model`. Every method takes numpy arrays ``q``,
    ``qd`` (and ``tau``) of shape ``(B, n)`` or ``(n,)`` and computes in the
    model's dtype.

    Attributes
    ----------
    n_dof : int
    angular : tuple of bool
    kind : str
        ``"kinetic-potential"``, ``"black-box"`` or ``"structured"``.
    dtype : numpy.dtype
    damping : numpy.ndarray or None, shape ``(n, n)``
        The learned viscous damping ``D`` (None without damping).
    epsilon : float
        Added to the diagonal of ``M`` (structured and convex models; 0 else).
    """

    n_dof: int
    angular: tuple
    kind: str
    dtype: np.dtype
    damping: np.ndarray | None
    epsilon: float
    lin: np.ndarray
    ang: np.ndarray
    main: _Net
    potential: _Net | None
    tril: tuple

    @classmethod
    def from_model(cls, model) -> "FastLagrangian":
        """Snapshot the current weights of ``model``.

        Parameters
        ----------
        model : lnn.LagrangianNetwork

        Returns
        -------
        FastLagrangian

        Raises
        ------
        TypeError
            If ``model`` does not expose ``feature_map()`` and ``mlp_layers()``.
        """
        for attr in ("feature_map", "mlp_layers", "kind", "n_dof"):
            if not hasattr(model, attr):
                raise TypeError(f"model must be an lnn.LagrangianNetwork; "
                                f"{type(model).__name__} has no {attr!r}")
        _keep_heap_padded()
        n = int(model.n_dof)
        dtype = np.dtype(str(model.dtype))
        angular = tuple(bool(a) for a in model.angular)
        fmap = model.feature_map()
        lin = np.flatnonzero(~np.asarray(angular, bool))
        ang = np.flatnonzero(np.asarray(angular, bool))
        r_to_x = np.concatenate([np.asarray(fmap.A, np.float64)[lin],
                                 np.asarray(fmap.B_sin, np.float64)[ang],
                                 np.asarray(fmap.B_cos, np.float64)[ang]], axis=0)
        x_offset = np.asarray(fmap.c, np.float64)
        qd_scale = np.asarray(fmap.qd_scale, np.float64)
        n_features = r_to_x.shape[1]
        layers = model.mlp_layers()
        fold = lambda name: _fold_net(layers[name], n_features, r_to_x, x_offset,  # noqa: E731
                                      qd_scale, dtype)
        kind = model.kind
        if kind == "kinetic-potential":
            main, potential = fold("kinetic"), fold("potential")
            epsilon = float(model.epsilon) if getattr(model, "convex", False) else 0.0
        elif kind == "black-box":
            main, potential, epsilon = fold("lagrangian"), None, 0.0
        elif kind == "structured":
            main, potential, epsilon = fold("cholesky"), fold("potential"), float(model.epsilon)
        else:
            raise TypeError(f"unsupported model kind {kind!r}")
        damping = None
        if getattr(model, "damping", False):
            damping = np.ascontiguousarray(np.asarray(model.damping_matrix()), dtype=dtype)
        return cls(n_dof=n, angular=angular, kind=kind, dtype=dtype, damping=damping,
                   epsilon=epsilon, lin=lin, ang=ang, main=main, potential=potential,
                   tril=np.tril_indices(n, -1))

    # -- inputs ------------------------------------------------------------------
    def _inputs(self, *arrays):
        out, single = [], False
        n = self.n_dof
        for name, value in arrays:
            if value is None:
                out.append(None)
                continue
            a = np.asarray(value, dtype=self.dtype)
            if a.ndim == 1:
                a, single = a[None], True
            if a.ndim != 2 or a.shape[1] != n:
                raise ValueError(f"{name} must have shape (B, {n}) or ({n},), "
                                 f"got shape {np.shape(value)}")
            out.append(a)
        shapes = {a.shape[0] for a in out if a is not None}
        if len(shapes) > 1:
            raise ValueError(f"q, qd and tau must have the same batch size, got {sorted(shapes)}")
        return out, single

    def _basis(self, q):
        """``r(q) = [q_lin, sin q_ang, cos q_ang]`` and its pieces, ``(B, R)``."""
        if self.ang.size == 0:
            return q, None, None
        qa = q[:, self.ang] if self.lin.size else q
        s, c = np.sin(qa), np.cos(qa)
        parts = ([q[:, self.lin]] if self.lin.size else []) + [s, c]
        return np.concatenate(parts, axis=1), s, c

    def _basis_tangent(self, u, s, c):
        """``(dr/dq) u``, shape ``(B, R)``."""
        if s is None:
            return u
        ua = u[:, self.ang] if self.lin.size else u
        parts = ([u[:, self.lin]] if self.lin.size else []) + [c * ua, -s * ua]
        return np.concatenate(parts, axis=1)

    def _pullback(self, g, s, c):
        """``g @ dr/dq`` for ``g (B, R)``: the gradient in ``q``, ``(B, n)``."""
        if s is None:
            return g
        n_lin, n_ang = self.lin.size, self.ang.size
        g_ang = c * g[:, n_lin:n_lin + n_ang] - s * g[:, n_lin + n_ang:]
        if not n_lin:
            return g_ang
        out = np.empty((g.shape[0], self.n_dof), dtype=g.dtype)
        out[:, self.lin] = g[:, :n_lin]
        out[:, self.ang] = g_ang
        return out

    # -- mechanics -----------------------------------------------------------------
    def _scalar_terms(self, q, qd, *, need_grad_q: bool = True):
        """``(M (B,n,n), dL/dq - (d2L/dqd dq) qd (B,n))`` for the scalar kinds."""
        net = self.main
        r, s, c = self._basis(q)
        _, slopes, curvs = _forward(net, r, qd, output=False)
        deltas, g_1 = _backward(net, slopes, None)
        n = self.n_dof
        # Rows 0..n-1: K_l = dz_l/dqd; row n: tangent of z_l along (dr/dq) qd.
        batch = q.shape[0]
        k = np.empty((batch, n + 1, net.w_qd.shape[1]), dtype=self.dtype)
        k[:, :n, :] = net.w_qd
        k[:, n, :] = self._basis_tangent(qd, s, c) @ net.w_r
        both = None
        for i, (d2, delta) in enumerate(zip(curvs, deltas)):
            if i > 0:
                # One (B (n+1), H) @ (H, H') BLAS call, not B small ones.
                scaled = k * slopes[i - 1][:, None, :]
                w = net.kernels[i - 1]
                k = (scaled.reshape(-1, w.shape[0]) @ w).reshape(batch, n + 1, w.shape[1])
            # This layer's share, rows [:n] of M and row n of the mixed term:
            # K diag(s'' delta) K[:n]^T, (B, n+1, n) (a sum over layers: no concatenation).
            d2 *= delta
            term = (k * d2[:, None, :]) @ k[:, :n, :].transpose(0, 2, 1)
            both = term if both is None else both + term
        mass = both[:, :n, :]
        mixed = both[:, n, :]
        if self.epsilon:
            mass = mass + self.epsilon * np.eye(n, dtype=self.dtype)
        if not need_grad_q:
            return mass, None
        grad_r = g_1 @ net.w_r.T
        if self.potential is not None:
            _, p_slopes, _ = _forward(self.potential, r, None, output=False, curvature=False)
            _, p_g1 = _backward(self.potential, p_slopes, None)
            grad_r = grad_r - p_g1 @ self.potential.w_r.T
        return mass, self._pullback(grad_r, s, c) - mixed

    def _structured_mass(self, r):
        """``(M, C, raw, slopes)`` of the structured kind at basis ``r``."""
        n = self.n_dof
        raw, slopes, _ = _forward(self.main, r, None)
        chol = np.zeros((r.shape[0], n, n), dtype=self.dtype)
        diag = np.arange(n)
        chol[:, diag, diag] = _softplus(raw[:, :n])
        chol[:, self.tril[0], self.tril[1]] = raw[:, n:]
        mass = chol @ chol.transpose(0, 2, 1) + self.epsilon * np.eye(n, dtype=self.dtype)
        return mass, chol, raw, slopes

    def _structured_terms(self, q, qd):
        n = self.n_dof
        r, s, c = self._basis(q)
        mass, chol, raw, slopes = self._structured_mass(r)
        sig = expit(raw[:, :n])
        w = np.einsum("bji,bj->bi", chol, qd)  # C^T qd
        # dL/dq: d(1/2 |C^T qd|^2)/d raw, back through the Cholesky net, minus dV/dq.
        adjoint = np.concatenate([qd * w * sig, qd[:, self.tril[0]] * w[:, self.tril[1]]], axis=1)
        _, g_1 = _backward(self.main, slopes, adjoint)
        grad_r = g_1 @ self.main.w_r.T
        _, p_slopes, _ = _forward(self.potential, r, None, output=False, curvature=False)
        _, p_g1 = _backward(self.potential, p_slopes, None)
        grad_r = grad_r - p_g1 @ self.potential.w_r.T
        # (dM/dt) qd = dC (C^T qd) + C (dC^T qd), dC the tangent of C along qd.
        d_raw = _tangent(self.main, slopes, self._basis_tangent(qd, s, c) @ self.main.w_r)
        d_chol = np.zeros_like(chol)
        diag = np.arange(n)
        d_chol[:, diag, diag] = sig * d_raw[:, :n]
        d_chol[:, self.tril[0], self.tril[1]] = d_raw[:, n:]
        mixed = (np.einsum("bij,bj->bi", d_chol, w)
                 + np.einsum("bij,bj->bi", chol, np.einsum("bji,bj->bi", d_chol, qd)))
        return mass, self._pullback(grad_r, s, c) - mixed

    def acceleration(self, q, qd, tau=None) -> np.ndarray:
        """Forward dynamics ``qdd = M^{-1} (dL/dq - (d2L/dqd dq) qd + tau - D qd)``.

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``
        tau : array_like, same shape, optional

        Returns
        -------
        numpy.ndarray, shape ``(B, n)`` (``(n,)`` for a single state), model dtype

        Raises
        ------
        IndefiniteMassMatrixError
            (a ``ValueError``) if ``M`` is not positive definite for some
            samples; its ``trajectories`` lists them.
        """
        (q, qd, tau), single = self._inputs(("q", q), ("qd", qd), ("tau", tau))
        mass, rhs = self._terms(q, qd)
        if tau is not None:
            rhs = rhs + tau
        if self.damping is not None:
            rhs = rhs - qd @ self.damping.T
        qdd = self._solve(mass, rhs)
        return qdd[0] if single else qdd

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """Inverse dynamics ``tau = M qdd + (d2L/dqd dq) qd - dL/dq + D qd``.

        Parameters
        ----------
        q, qd, qdd : array_like, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        numpy.ndarray, shape ``(B, n)`` (``(n,)`` for a single state), model dtype
        """
        (q, qd, qdd), single = self._inputs(("q", q), ("qd", qd), ("qdd", qdd))
        mass, rhs = self._terms(q, qd)
        tau = (mass @ qdd[..., None])[..., 0] - rhs
        if self.damping is not None:
            tau = tau + qd @ self.damping.T
        return tau[0] if single else tau

    def energy(self, q, qd) -> np.ndarray:
        """Total energy ``E = qd . dL/dqd - L`` (``T + V`` for the structured kind).

        Parameters
        ----------
        q, qd : array_like, shape ``(B, n)`` or ``(n,)``

        Returns
        -------
        numpy.ndarray, shape ``(B,)`` (a 0-d array for a single state), model dtype
        """
        (q, qd), single = self._inputs(("q", q), ("qd", qd))
        r = self._basis(q)[0]
        if self.kind == "structured":
            mass = self._structured_mass(r)[0]
            energy = 0.5 * np.einsum("bi,bij,bj->b", qd, mass, qd)
        else:
            # The main network is T (kinetic-potential) or L (black-box): qd . dy/dqd - y.
            net = self.main
            value, slopes, _ = _forward(net, r, qd, curvature=False)
            g_qd = _backward(net, slopes, None)[1] @ net.w_qd.T
            energy = np.einsum("bi,bi->b", qd, g_qd) - value[:, 0]
            if self.epsilon:  # the convex kinetic energy's (eps / 2) |qd|^2
                energy += 0.5 * self.epsilon * np.einsum("bi,bi->b", qd, qd)
        if self.potential is not None:
            energy += _forward(self.potential, r, None, curvature=False)[0][:, 0]
        return energy[0] if single else energy

    def _terms(self, q, qd):
        """``M (B, n, n)`` and ``dL/dq - (d2L/dqd dq) qd (B, n)``."""
        if self.kind == "structured":
            return self._structured_terms(q, qd)
        return self._scalar_terms(q, qd)

    def mass_matrix(self, q, qd=None) -> np.ndarray:
        """Mass matrix ``M = d2L/dqd2``.

        Parameters
        ----------
        q : array_like, shape ``(B, n)`` or ``(n,)``
        qd : array_like, same shape, optional (default zeros)

        Returns
        -------
        numpy.ndarray, shape ``(B, n, n)`` (``(n, n)`` for a single state)
        """
        if qd is None:
            qd = np.zeros(np.shape(q))
        (q, qd), single = self._inputs(("q", q), ("qd", qd))
        if self.kind == "structured":
            mass = self._structured_mass(self._basis(q)[0])[0]
        else:
            mass = self._scalar_terms(q, qd, need_grad_q=False)[0]
        return mass[0] if single else mass

    def _solve(self, mass, rhs):
        """``M^{-1} rhs`` per sample; a Cholesky factorisation checks positive definiteness."""
        try:
            np.linalg.cholesky(mass)
        except np.linalg.LinAlgError:
            health = mass_matrix_health(mass) if np.all(np.isfinite(mass)) else None
            bad = np.flatnonzero(~np.all(np.isfinite(mass), axis=(1, 2)))
            if health is not None:
                bad = np.flatnonzero(health.min_eigenvalues <= 0)
            detail = (f" (smallest eigenvalue {health.min_eigenvalue:.6g})"
                      if health is not None else " (non-finite entries)")
            raise IndefiniteMassMatrixError(
                f"the learned mass matrix is not positive definite for trajectory(ies) "
                f"{bad.tolist()} of {mass.shape[0]}{detail}; refusing to pseudo-invert it",
                health, bad) from None
        return np.linalg.solve(mass, rhs[..., None])[..., 0]


# ----------------------------------------------------------------------------- Jacobian

# model -> {("function", dtype, with_tau, xla): concrete function, ("calls", dtype, with_tau,
# rows): graph-mode calls at that padded batch size}; weak so that models can be freed.
_JACOBIANS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

#: Batches from this size get the XLA-compiled Jacobian (padded to
#: :func:`lnn.mechanics.batch_bucket` rows). For a 64x64 model on a 2-core CPU,
#: XLA compiles for 1.7 s (double pendulum) to 5 s (7 DOF) per batch size and
#: then saves 3-9 ms a call at batch 256 (paid back after ~600 calls), but only
#: 0.3-0.4 ms at batch 1 (after 4 000-12 000 calls: one 10 s Radau rollout of
#: a 7-DOF model makes ~2 000).
JACOBIAN_XLA_MIN_BATCH = 64
#: Smaller batches switch to XLA after this many graph-mode calls at their
#: padded size (a few one-by-one rollouts): by then the time XLA would have
#: saved is about its compilation time, so neither choice loses more than ~2x.
JACOBIAN_XLA_AFTER_CALLS = 4096


def acceleration_jacobian(model, q, qd, tau=None) -> np.ndarray:
    """Exact Jacobian ``d qdd / d [q, qd]`` of a learned model, by TensorFlow autodiff.

    One compiled ``tf.function`` (fixed ``input_signature``, batch dimension
    ``None``) takes ``tf.GradientTape.batch_jacobian`` of the model's
    acceleration graph, so the cost grows linearly with the batch and the
    blocks are per sample (``tau`` held fixed). With the model's ``xla`` on
    (the default), batches of :data:`JACOBIAN_XLA_MIN_BATCH` rows or more run
    XLA-compiled, padded to a ladder of batch sizes (a compilation of a few
    seconds per size; a rollout keeps its batch size), except for the
    ``"structured"`` kind; smaller batches run without compiling until
    :data:`JACOBIAN_XLA_AFTER_CALLS` calls at their size have been made.

    Parameters
    ----------
    model : lnn.LagrangianNetwork
    q, qd : array_like, shape ``(B, n)`` or ``(n,)``
    tau : array_like, same shape, optional

    Returns
    -------
    numpy.ndarray, shape ``(B, n, 2n)`` (``(n, 2n)`` for a single state), float64
        Columns ``[:n]`` are ``d qdd / d q``, columns ``[n:]`` ``d qdd / d qd``.

    Raises
    ------
    ValueError
        For shapes that do not match ``model.n_dof``.
    """
    import tensorflow as tf

    n = int(model.n_dof)
    dtype = tf.as_dtype(str(model.dtype))
    arrays, single = [], False
    for name, value in (("q", q), ("qd", qd), ("tau", tau)):
        if value is None:
            arrays.append(None)
            continue
        a = np.asarray(value, dtype=dtype.as_numpy_dtype)
        if a.ndim == 1:
            a, single = a[None], True
        if a.ndim != 2 or a.shape[1] != n:
            raise ValueError(f"{name} must have shape (B, {n}) or ({n},), got shape {np.shape(value)}")
        arrays.append(a)
    q, qd, tau = arrays
    if q.shape != qd.shape or (tau is not None and tau.shape != q.shape):
        raise ValueError(f"q, qd and tau must have the same shape, got {q.shape}, {qd.shape}"
                         + ("" if tau is None else f", {tau.shape}"))
    if q.shape[0] == 0:
        return np.zeros((0, n, 2 * n))
    try:
        per_model = _JACOBIANS.setdefault(model, {})
    except TypeError:
        per_model = {}
    batch = q.shape[0]
    rows = batch_bucket(batch)
    # XLA (2-4x faster a call) pays for its compilation only over many calls: at once for a
    # large batch, after JACOBIAN_XLA_AFTER_CALLS at a small one. The structured kind's
    # forward-mode term is left to TensorFlow's kernels.
    jit = bool(getattr(model, "xla", False)) and model.kind != "structured"
    if jit and batch < JACOBIAN_XLA_MIN_BATCH:
        count = ("calls", dtype, tau is not None, rows)
        per_model[count] = per_model.get(count, 0) + 1
        jit = per_model[count] > JACOBIAN_XLA_AFTER_CALLS
    key = ("function", dtype, tau is not None, jit)
    fn = per_model.get(key)
    if fn is None:
        spec = tf.TensorSpec((None, n), dtype)

        def jacobian(q, qd, tau=None):
            state = tf.concat([q, qd], axis=1)
            with tf.GradientTape() as tape:
                tape.watch(state)
                qdd = model._acceleration_graph(state[:, :n], state[:, n:], tau)
            return tape.batch_jacobian(qdd, state)

        signature = [spec, spec, spec] if tau is not None else [spec, spec]
        fn = tf.function(_runtime.xla_body(jacobian) if jit else jacobian, input_signature=signature,
                         autograph=False, jit_compile=jit)
        fn = fast_caller(fn.get_concrete_function())
        per_model[key] = fn
    args = (q, qd) if tau is None else (q, qd, tau)
    if jit and rows != batch:  # a ladder of sizes bounds the compilations
        args = tuple(pad_rows(a, rows) for a in args)
    result = np.asarray(fn(*(tf.constant(a) for a in args)), dtype=np.float64)[:batch]
    return result[0] if single else result
