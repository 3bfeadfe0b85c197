"""Closed-form mechanics of an energy that is one scalar MLP of ``(x(q), qd)``, in TensorFlow and numpy.

The kinetic-potential kind (``T`` an MLP, minus a potential MLP ``V(x)``) and
the black-box kind (``L`` an MLP) differentiate their network the same way;
this module holds that mathematics once, for both backends:

TensorFlow (:func:`scalar_terms`)
    :func:`lnn.models.mlp.scalar_derivatives` gives the value, ``dy/dx``,
    ``dy/dv``, ``d2y/dv2`` and the mixed product ``(d2y/dv dx) u`` of the
    network at ``v = qd / qd_scale``; the chain rule through the velocity
    scaling and the feature map gives ``dL/dq``, ``dL/dqd``, ``M`` and
    ``(d2L/dqd dq) qd``.
numpy (:class:`NumpyScalar`)
    The same for the snapshot, with the input map folded into layer 1: the
    forward Jacobians ``K_l = dz_l/dqd`` (``K_1 = W_qd``, ``K_l = (K_{l-1} *
    s'(z_{l-1})) @ W_l``) are propagated together with the tangent of ``z_l``
    along ``(dr/dq) qd``, so that one product per layer gives both
    ``M = sum_l K_l diag(s''(z_l) delta_l) K_l^T`` and the mixed term
    ``sum_l K_l (s''(z_l) delta_l t_l)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from lnn.models.features import InputMap
from lnn.models.mlp import NumpyNet, scalar_derivatives
from lnn.models.registry import NumpyKind, Terms

__all__ = ["NumpyScalar", "scalar_terms"]


def scalar_terms(
    model, net, q, qd, *, potential=None, epsilon: float = 0.0, hessian: bool, mixed: bool, grad_q: bool
) -> Terms:
    """Closed-form derivatives of ``L = y(x(q), qd / s) + eps/2 |qd|^2 - V(x(q))``.

    Parameters
    ----------
    model : lnn.LagrangianNetwork
        For its input map (``model.features(q)``) and velocity scale.
    net : lnn.models.mlp.MLP
        The scalar network ``y`` of ``(x, v)``.
    q, qd : tensor, shape ``(B, n)``
    potential : lnn.models.mlp.MLP, optional
        A scalar network ``V`` of ``x``, subtracted.
    epsilon : float
        ``eps`` of the convex kinetic energy's ``eps/2 |qd|^2``.
    hessian, mixed, grad_q : bool
        Which of ``M``, ``(d2L/dqd dq) qd``, ``dL/dq`` to compute.

    Returns
    -------
    Terms
    """
    f = model.features(q)
    scale = tf.convert_to_tensor(model.qd_std)
    d = scalar_derivatives(net, f.x, qd / scale, hessian=hessian, x_tangent=f.tangent(qd) if mixed else None)
    value, grad_x = d.value, d.grad_x
    grad_qd = d.grad_v / scale
    mass = d.hessian_v / (scale[:, None] * scale[None, :]) if hessian else None
    mix = d.mixed_v / scale if mixed else None
    if epsilon:
        value = value + 0.5 * epsilon * tf.reduce_sum(qd * qd, axis=-1)
        grad_qd = grad_qd + epsilon * qd
        if hessian:
            mass = mass + epsilon * tf.eye(qd.shape[-1], dtype=mass.dtype)
    if potential is not None:
        if grad_q:
            v = scalar_derivatives(potential, f.x, None, hessian=False)
            value, grad_x = value - v.value, grad_x - v.grad_x
        else:
            value = value - potential.forward(f.x)[:, 0]
    return Terms(value, f.pullback(grad_x) if grad_q else None, grad_qd, mass, mix)


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyScalar(NumpyKind):
    """numpy twin of :func:`scalar_terms`.

    Attributes
    ----------
    main : NumpyNet
        The scalar network of ``(r, qd)`` (``T`` or ``L``).
    potential : NumpyNet or None
        Subtracted ``V(r)``.
    epsilon : float
        ``eps`` of ``eps/2 |qd|^2`` (0 for none).
    inputs : InputMap
    dtype : numpy.dtype
    """

    main: NumpyNet
    potential: NumpyNet | None
    epsilon: float
    inputs: InputMap
    dtype: np.dtype

    def _mass_and_mixed(self, q, qd, basis, slopes, curvs, deltas):
        """``M (B, n, n)`` and ``(d2L/dqd dq) qd (B, n)`` from one pass over the layers."""
        net, n, batch = self.main, q.shape[1], q.shape[0]
        r, s, c = basis
        # Rows 0..n-1: K_l = dz_l/dqd; row n: tangent of z_l along (dr/dq) qd.
        k = np.empty((batch, n + 1, net.w_qd.shape[1]), dtype=self.dtype)
        k[:, :n, :] = net.w_qd
        k[:, n, :] = self.inputs.tangent_np(qd, s, c) @ net.w_r
        both = None
        for i, (d2, delta) in enumerate(zip(curvs, deltas)):
            if i > 0:  # one (B (n+1), H) @ (H, H') BLAS call, not B small ones
                w = net.kernels[i - 1]
                scaled = k * slopes[i - 1][:, None, :]
                k = (scaled.reshape(-1, w.shape[0]) @ w).reshape(batch, n + 1, w.shape[1])
            # This layer's share, K diag(s'' delta) K[:n]^T, (B, n+1, n): rows [:n] of M,
            # row n of the mixed term (a sum over layers: no concatenation).
            d2 *= delta
            term = (k * d2[:, None, :]) @ k[:, :n, :].transpose(0, 2, 1)
            both = term if both is None else both + term
        mass = both[:, :n, :]
        if self.epsilon:
            mass = mass + self.epsilon * np.eye(n, dtype=self.dtype)
        return mass, both[:, n, :]

    def _derivatives(self, q, qd, basis):
        _, slopes, curvs = self.main.forward(basis[0], qd, output=False)
        deltas, g_1 = self.main.backward(slopes)
        return slopes, curvs, deltas, g_1

    def dynamics(self, q, qd, basis):
        """``M`` and ``dL/dq - (d2L/dqd dq) qd``."""
        slopes, curvs, deltas, g_1 = self._derivatives(q, qd, basis)
        mass, mixed = self._mass_and_mixed(q, qd, basis, slopes, curvs, deltas)
        grad_r = g_1 @ self.main.w_r.T
        if self.potential is not None:
            grad_r = grad_r - self.potential.gradient_r(basis[0])
        return mass, self.inputs.pullback_np(grad_r, basis[1], basis[2]) - mixed

    def mass_matrix(self, q, qd, basis):
        """``M`` alone."""
        slopes, curvs, deltas, _ = self._derivatives(q, qd, basis)
        return self._mass_and_mixed(q, qd, basis, slopes, curvs, deltas)[0]

    def energy(self, q, qd, basis):
        """``E = qd . dy/dqd - y (+ eps/2 |qd|^2) + V``."""
        net = self.main
        value, slopes, _ = net.forward(basis[0], qd, curvature=False)
        g_qd = net.backward(slopes)[1] @ net.w_qd.T
        energy = np.einsum("bi,bi->b", qd, g_qd) - value[:, 0]
        if self.epsilon:  # the convex kinetic energy's (eps / 2) |qd|^2
            energy += 0.5 * self.epsilon * np.einsum("bi,bi->b", qd, qd)
        if self.potential is not None:
            energy += self.potential.forward(basis[0], None, curvature=False)[0][:, 0]
        return energy
