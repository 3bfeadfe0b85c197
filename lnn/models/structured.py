"""Kind ``"structured"``: ``T = 1/2 qd^T M(q) qd`` with ``M = C C^T + epsilon I`` (DeLaN, Lutter et al. 2019).

``C`` is lower-triangular with a softplus diagonal, from an MLP of ``q`` (its
``n`` first outputs the raw diagonal, the rest the strictly lower entries in
``numpy.tril_indices(n, -1)`` order), plus a potential MLP ``V(q)``. ``M`` is
positive definite by construction and depends on ``q`` only.

TensorFlow and numpy, the same closed form (no tapes): ``dL/dq`` is
``d(1/2 |C^T qd|^2)/d raw`` back through the Cholesky network, and
``(dM/dt) qd = dC (C^T qd) + C (dC^T qd)`` with ``dC`` the tangent of ``C``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
from scipy.special import expit

from lnn.models.features import InputMap
from lnn.models.mlp import MLP, NumpyNet, scalar_derivatives, vector_jet
from lnn.models.registry import Kind, NumpyKind, Terms, register_kind
from lnn.models.triangular import assemble_triangular, lower_triangular, tril_index

__all__ = ["Structured"]


@register_kind
class Structured(Kind):
    """``M(q) = C C^T + eps I`` from a Cholesky MLP, and a potential MLP."""

    name = "structured"
    networks = ("cholesky_net", "potential_net")
    mass_depends_on_qd = False
    xla_train = True  # 2-DOF 128x128, batch 512, one core: 17.0 ms a step in graph, 10.1 ms under XLA
    torque_loss_alone = False  # the torque loss alone collapses C towards 0 (default_loss)

    def build(self, *, n_features, seeds, options):
        """The Cholesky MLP (``n (n + 1) / 2`` outputs) and the potential MLP."""
        m, n, hidden = self.model, self.model.n_dof, options["hidden"]
        common = dict(activation=options["activation"], dtype=options["dtype"])
        m.cholesky_net = MLP(n_features, 0, hidden, n * (n + 1) // 2, seed=int(seeds[0]), name="cholesky", **common)
        m.potential_net = MLP(
            n_features, 0, hidden, 1, seed=int(seeds[1]), name="potential", output_bias=False, **common
        )
        self._index = tril_index(n)

    # -- TensorFlow ------------------------------------------------------------------
    def _mass_of(self, chol):
        """``M = C C^T + eps I``."""
        m = tf.matmul(chol, chol, transpose_b=True)
        return m + self.model.epsilon * tf.eye(self.model.n_dof, dtype=m.dtype)

    def _mass(self, x):
        n = self.model.n_dof
        raw = self.model.cholesky_net.forward(x)
        return self._mass_of(lower_triangular(raw[:, :n], raw[:, n:], self._index))

    def kinetic(self, q, qd):
        """``T = 1/2 qd^T M(q) qd``."""
        mass = self._mass(self.model.features(q).x)
        return 0.5 * tf.reduce_sum(qd * tf.linalg.matvec(mass, qd), axis=-1)

    def potential(self, q):
        """``V = MLP(x)``."""
        return self.model.potential_net.forward(self.model.features(q).x)[:, 0]

    def mass_matrix(self, q, qd):
        """``M(q)`` (``qd`` unused)."""
        return self._mass(self.model.features(q).x)

    def energy(self, q, qd):
        """``E = T + V``."""
        return self.kinetic(q, qd) + self.potential(q)

    def terms(self, q, qd, *, hessian, mixed, grad_q):
        """Closed form: ``M = C C^T + eps I``, ``dL/dq`` and ``(dM/dt) qd`` by explicit products.

        With ``w = C^T qd``: ``L = 1/2 |w|^2 + eps/2 |qd|^2 - V``;
        ``dL/dC_ij = qd_i w_j`` is pulled back through the Cholesky network
        (the diagonal through the softplus), ``dV/dq`` through the potential
        network; ``(dM/dt) qd = dC w + C (dC^T qd)`` with ``dC`` the tangent
        of ``C`` along ``qd``. No tape and no forward accumulator: the graph
        compiles under XLA and trains by one reverse pass (equal to the tape
        engine to rounding: ``tests/test_kinds.py``, ``tests/test_train.py``).
        """
        model, n = self.model, self.model.n_dof
        features = model.features(q)
        jet = vector_jet(model.cholesky_net, features.x, features.tangent(qd) if mixed else None)
        diag_raw = jet.value[:, :n]
        chol = lower_triangular(diag_raw, jet.value[:, n:], self._index)
        w = tf.linalg.matvec(chol, qd, transpose_a=True)  # C^T qd
        p = tf.linalg.matvec(chol, w) + model.epsilon * qd
        if grad_q:
            potential = scalar_derivatives(model.potential_net, features.x, None, hessian=False)
            v = potential.value
        else:
            v = model.potential_net.forward(features.x)[:, 0]
        value = 0.5 * tf.reduce_sum(qd * p, axis=-1) - v
        sig = tf.math.sigmoid(diag_raw)  # d softplus / d raw on the diagonal
        gq = mix = None
        if grad_q:
            rows, cols = np.tril_indices(n, -1)
            adjoint = tf.concat([qd * w * sig, tf.gather(qd, rows, axis=1) * tf.gather(w, cols, axis=1)], axis=1)
            gq = features.pullback(jet.pullback(adjoint) - potential.grad_x)
        if mixed:
            d_chol = assemble_triangular(sig * jet.tangent[:, :n], jet.tangent[:, n:], self._index)
            mix = tf.linalg.matvec(d_chol, w) + tf.linalg.matvec(chol, tf.linalg.matvec(d_chol, qd, transpose_a=True))
        return Terms(value, gq, p, self._mass_of(chol), mix)

    # -- numpy -----------------------------------------------------------------------
    def numpy(self, fold):
        """:class:`NumpyStructured` of the current weights."""
        m = self.model
        return NumpyStructured(
            fold(m.cholesky_net),
            fold(m.potential_net),
            float(m.epsilon),
            m.input_map,
            m.numpy_dtype,
            np.tril_indices(m.n_dof, -1),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class NumpyStructured(NumpyKind):
    """numpy twin of :class:`Structured` (networks of the basis ``r``)."""

    cholesky: NumpyNet
    potential: NumpyNet
    epsilon: float
    inputs: InputMap
    dtype: np.dtype
    tril: tuple

    def _factor(self, r):
        """``(M, C, raw, slopes)`` at basis ``r``."""
        n = self.inputs.n
        raw, slopes, _ = self.cholesky.forward(r, None)
        chol = np.zeros((r.shape[0], n, n), dtype=self.dtype)
        diag = np.arange(n)
        chol[:, diag, diag] = np.logaddexp(raw[:, :n], 0.0)
        chol[:, self.tril[0], self.tril[1]] = raw[:, n:]
        mass = chol @ chol.transpose(0, 2, 1) + self.epsilon * np.eye(n, dtype=self.dtype)
        return mass, chol, raw, slopes

    def mass_matrix(self, q, qd, basis):
        """``M(q)``."""
        return self._factor(basis[0])[0]

    def dynamics(self, q, qd, basis):
        """``M`` and ``dL/dq - (dM/dt) qd``."""
        n = self.inputs.n
        r, s, c = basis
        mass, chol, raw, slopes = self._factor(r)
        sig = expit(raw[:, :n])
        w = np.einsum("bji,bj->bi", chol, qd)  # C^T qd
        # dL/dq: d(1/2 |C^T qd|^2)/d raw, back through the Cholesky net, minus dV/dq.
        adjoint = np.concatenate([qd * w * sig, qd[:, self.tril[0]] * w[:, self.tril[1]]], axis=1)
        grad_r = self.cholesky.backward(slopes, adjoint)[1] @ self.cholesky.w_r.T
        grad_r = grad_r - self.potential.gradient_r(r)
        # (dM/dt) qd = dC (C^T qd) + C (dC^T qd), dC the tangent of C along qd.
        d_raw = self.cholesky.tangent(slopes, self.inputs.tangent_np(qd, s, c) @ self.cholesky.w_r)
        d_chol = np.zeros_like(chol)
        diag = np.arange(n)
        d_chol[:, diag, diag] = sig * d_raw[:, :n]
        d_chol[:, self.tril[0], self.tril[1]] = d_raw[:, n:]
        mixed = np.einsum("bij,bj->bi", d_chol, w) + np.einsum("bij,bj->bi", chol, np.einsum("bji,bj->bi", d_chol, qd))
        return mass, self.inputs.pullback_np(grad_r, s, c) - mixed

    def energy(self, q, qd, basis):
        """``E = 1/2 qd^T M qd + V``."""
        r = basis[0]
        energy = 0.5 * np.einsum("bi,bij,bj->b", qd, self._factor(r)[0], qd)
        return energy + self.potential.forward(r, None, curvature=False)[0][:, 0]
