"""Kind ``"rigid-body"``: the Lagrangian of a kinematic chain of rigid bodies, with trainable inertias.

``T`` and ``V`` are those of the chain of a :class:`lnn.models.chain.RigidBodyChain`
(a URDF robot's, a planar arm's), written in TensorFlow: forward kinematics
from the joint placements and axes, each body's twist ``(v_i, w_i)`` in its
own frame by the recursion ::

    w_i = R_pi^T w_p + a_i qd_i              (revolute)
    v_i = R_pi^T (v_p + w_p x p_pi) (+ a_i qd_i, prismatic)

and, with the body's pseudo-inertia ``J_i = [[Sigma_i, h_i], [h_i^T, m_i]]``::

    T = sum_i 1/2 m_i |v_i|^2 + v_i . (w_i x h_i) + 1/2 (tr(Sigma_i) |w_i|^2 - w_i^T Sigma_i w_i)
        + 1/2 sum_j armature_j qd_j^2
    V = -sum_i g . (m_i p_i + R_i h_i)

Every ``J_i`` is ``U U^T`` of its trainable log-Cholesky coordinates (Rucker &
Wensing 2022; variable ``rigid_body_inertia (n, 10)``), so each body stays
physical whatever the optimiser does; the armature is ``softplus`` of
``rigid_body_armature (n,)``. They start at the prior's values. ``M`` is the
Hessian of this ``T`` by automatic differentiation, forward over reverse
(:meth:`RigidBody.terms`: the ``n`` Hessian columns as one forward-mode
product over the batch tiled ``n`` times, which traces in seconds where a
``batch_jacobian`` of the chain's graph took minutes), and the other terms of
the Euler-Lagrange equations as in :mod:`lnn.mechanics`.

With ``residual=True`` a structured residual Lagrangian
(:class:`lnn.models.residual.ResidualLagrangian`) joins it:
``T_r = 1/2 |C(q)^T qd|^2`` (``C`` a lower-triangular MLP output, so ``M``
stays positive definite) and ``V_r`` an MLP, both of the usual features
``x(q)`` and starting near zero; it learns what the rigid body misses.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from lnn.models.chain import RigidBodyChain, log_cholesky, standard_parameters
from lnn.models.forces import softplus_inverse
from lnn.models.registry import Kind, Terms, register_kind
from lnn.models.residual import NETWORKS, ResidualLagrangian

__all__ = ["RigidBody"]

#: Smallest armature that the softplus parametrisation starts from (exact zeros are not reachable).
_ARMATURE_FLOOR = 1e-12


def _cross(a, b):
    """``a x b`` along the last axis, broadcasting ``(B, 3)`` against ``(3,)`` or ``(1, 3)``."""
    a, b = a + tf.zeros_like(b), b + tf.zeros_like(a)
    return tf.linalg.cross(a, b)


def _skew(axis: np.ndarray) -> np.ndarray:
    x, y, z = axis
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


@register_kind
class RigidBody(Kind):
    """The rigid-body Lagrangian of a chain (trainable, physical inertias), plus an optional residual."""

    name = "rigid-body"
    networks = NETWORKS
    mass_depends_on_qd = False
    takes_prior = True
    takes_residual = True

    def build(self, *, n_features, seeds, options):
        """The inertia and armature variables from the prior, and the residual networks if asked."""
        m = self.model
        prior = options.get("prior")
        if prior is None:
            raise ValueError(
                "kind 'rigid-body' needs prior=: a RigidBodyChain, a URDF robot or a planar "
                "arm (e.g. LagrangianNetwork(n, kind='rigid-body', prior=simulations.panda()))"
            )
        chain = RigidBodyChain.from_dict(prior) if isinstance(prior, dict) else RigidBodyChain.from_system(prior)
        if chain.n_dof != m.n_dof:
            raise ValueError(
                f"the prior has {chain.n_dof} joints ({', '.join(chain.names)}); the model has n_dof = {m.n_dof}"
            )
        self.chain0, self.residual = chain, bool(options.get("residual", False))
        dtype = options["dtype"]
        n = m.n_dof
        m.rigid_body_inertia = m.add_weight(name="rigid_body_inertia", shape=(n, 10), initializer="zeros", dtype=dtype)
        m.rigid_body_armature = m.add_weight(name="rigid_body_armature", shape=(n,), initializer="zeros", dtype=dtype)
        self.assign(chain.inertias, chain.armature)
        c = lambda x: tf.constant(np.asarray(x), dtype=dtype)  # noqa: E731
        self._rotations = [c(r) for r in chain.rotations]
        self._translations = [c(p) for p in chain.translations]
        self._axes = [c(a) for a in chain.axes]
        self._skews = [c(_skew(a)) for a in chain.axes]
        self._skews2 = [c(_skew(a) @ _skew(a)) for a in chain.axes]
        self._gravity = c(chain.gravity)
        self._residual = None
        if self.residual:
            self._residual = ResidualLagrangian(m, n_features=n_features, seeds=seeds, options=options)

    def nets(self) -> list:
        """The residual networks (none without ``residual=True``)."""
        return super().nets() if self.residual else []

    def config(self) -> dict:
        """``prior`` (the initial chain, as a dict) and ``residual``, for the model's config."""
        return {"prior": self.chain0.to_dict(), "residual": self.residual}

    # -- parameters ------------------------------------------------------------------
    def assign(self, inertias, armature=None) -> None:
        """Set the bodies' standard parameters ``(n, 10)`` (physical) and the armature ``(n,)``."""
        m = self.model
        dtype = np.dtype(str(m.rigid_body_inertia.dtype))
        m.rigid_body_inertia.assign(log_cholesky(np.asarray(inertias, np.float64)).astype(dtype))
        if armature is not None:
            raw = [softplus_inverse(max(float(a), _ARMATURE_FLOOR)) for a in np.asarray(armature)]
            m.rigid_body_armature.assign(np.asarray(raw, dtype))

    def pseudo_inertias(self):
        """``J = U U^T`` of every body, a tensor of shape ``(n, 4, 4)``."""
        theta = self.model.rigid_body_inertia
        alpha, d, s, t = theta[:, 0], theta[:, 1:4], theta[:, 4:7], theta[:, 7:10]
        n = theta.shape[0]
        zero = tf.zeros((n,), theta.dtype)
        one = tf.ones((n,), theta.dtype)
        ed = tf.exp(d)
        rows = [
            tf.stack([ed[:, 0], s[:, 0], s[:, 2], t[:, 0]], -1),
            tf.stack([zero, ed[:, 1], s[:, 1], t[:, 1]], -1),
            tf.stack([zero, zero, ed[:, 2], t[:, 2]], -1),
            tf.stack([zero, zero, zero, one], -1),
        ]
        U = tf.exp(alpha)[:, None, None] * tf.stack(rows, -2)
        return tf.matmul(U, U, transpose_b=True)

    def armature(self):
        """The armature, a tensor of shape ``(n,)``."""
        return tf.nn.softplus(self.model.rigid_body_armature)

    def chain(self) -> RigidBodyChain:
        """The chain with the current (learned) inertias and armature."""
        return self.chain0.with_parameters(
            inertias=standard_parameters(np.asarray(self.pseudo_inertias(), np.float64)),
            armature=np.asarray(self.armature(), np.float64),
        )

    # -- kinematics ------------------------------------------------------------------
    def _bodies(self, q, qd=None):
        """World rotation ``R (B, 3, 3)`` and origin ``p (B, 3)`` of every body, and its twist
        ``(v, w)`` in its own frame when ``qd`` is given."""
        B = tf.shape(q)[0]
        eye = tf.eye(3, batch_shape=[B], dtype=q.dtype)
        zeros = tf.zeros([B, 3], q.dtype)
        base = (eye, zeros, zeros, zeros)
        poses = []
        for i, parent in enumerate(self.chain0.parents):
            R_p, p_p, v_p, w_p = base if parent < 0 else poses[parent]
            R_rel, p_rel = self._relative(q, i, B)
            R = tf.matmul(R_p, R_rel)
            p = p_p + tf.linalg.matvec(R_p, p_rel)
            v = w = zeros
            if qd is not None:
                rate = qd[:, i : i + 1] * self._axes[i]
                w = tf.linalg.matvec(R_rel, w_p, transpose_a=True)
                v = tf.linalg.matvec(R_rel, v_p + _cross(w_p, p_rel), transpose_a=True)
                if self.chain0.prismatic[i]:
                    v = v + rate
                else:
                    w = w + rate
            poses.append((R, p, v, w))
        return poses

    # -- TensorFlow ------------------------------------------------------------------
    def kinetic(self, q, qd):
        """``T`` of the bodies and the armature (+ the residual's)."""
        J = self.pseudo_inertias()
        t = 0.5 * tf.reduce_sum(self.armature() * qd * qd, axis=-1)
        for i, (_, _, v, w) in enumerate(self._bodies(q, qd)):
            mass, h, sigma = J[i, 3, 3], J[i, :3, 3], J[i, :3, :3]
            rot = tf.linalg.trace(sigma) * tf.reduce_sum(w * w, -1) - tf.reduce_sum(w * tf.linalg.matvec(sigma, w), -1)
            t = t + 0.5 * mass * tf.reduce_sum(v * v, -1) + tf.reduce_sum(v * _cross(w, h[None]), -1) + 0.5 * rot
        return t + self._residual.kinetic(q, qd) if self.residual else t

    def potential(self, q):
        """``V = -sum_i g . (m_i p_i + R_i h_i)`` (+ the residual's)."""
        J = self.pseudo_inertias()
        v = tf.zeros(tf.shape(q)[:1], q.dtype)
        for i, (R, p, _, _) in enumerate(self._bodies(q)):
            moment = J[i, 3, 3] * p + tf.linalg.matvec(R, J[i, :3, 3])
            v = v - tf.linalg.matvec(moment, self._gravity)
        return v + self._residual.potential(q) if self.residual else v

    def _newton_euler(self, q, qd, qdd, *, gravity: bool = True, J=None, armature=None):
        """The rigid body's inverse dynamics ``M qdd + C qd + g`` (recursive Newton-Euler), ``(B, n)``.

        Twists and accelerations of every body's origin in its own frame outwards
        (the base accelerating at ``-g`` stands for gravity), then the bodies'
        wrenches at their origins inwards; ``tau_j`` is the wrench along joint
        ``j``'s axis, plus ``armature_j qdd_j``. ``J (n, 4, 4)`` and ``armature
        (n,)`` default to the model's; the result is linear in them (the
        regressor of :func:`lnn.identify`).
        """
        J = self.pseudo_inertias() if J is None else J
        armature = self.armature() if armature is None else armature
        chain = self.chain0
        B = tf.shape(q)[0]
        zeros = tf.zeros([B, 3], q.dtype)
        base_acc = -self._gravity + zeros if gravity else zeros
        frames, wrenches = [], []
        for i, parent in enumerate(chain.parents):
            R_rel, p_rel = self._relative(q, i, B)
            if parent < 0:
                w_p, dw_p, a_p = zeros, zeros, base_acc
            else:
                w_p, dw_p, a_p = frames[parent][2:]
            axis = self._axes[i]
            rate, accel = qd[:, i : i + 1] * axis, qdd[:, i : i + 1] * axis
            w = tf.linalg.matvec(R_rel, w_p, transpose_a=True)
            dw = tf.linalg.matvec(R_rel, dw_p, transpose_a=True)
            a = tf.linalg.matvec(R_rel, a_p + _cross(dw_p, p_rel) + _cross(w_p, _cross(w_p, p_rel)), transpose_a=True)
            if chain.prismatic[i]:
                a = a + 2.0 * _cross(w, rate) + accel
            else:
                dw = dw + _cross(w, rate) + accel
                w = w + rate
            frames.append((R_rel, p_rel, w, dw, a))
            mass, h, sigma = J[i, 3, 3], J[i, :3, 3], J[i, :3, :3]
            inertia = tf.linalg.trace(sigma) * tf.eye(3, dtype=q.dtype) - sigma
            force = mass * a + _cross(dw, h) + _cross(w, _cross(w, h))
            moment = tf.linalg.matvec(inertia, dw) + _cross(w, tf.linalg.matvec(inertia, w)) + _cross(h + zeros, a)
            wrenches.append([force, moment])
        tau = [None] * chain.n_dof
        for i in reversed(range(chain.n_dof)):
            force, moment = wrenches[i]
            along = force if chain.prismatic[i] else moment
            tau[i] = tf.reduce_sum(along * self._axes[i], -1)
            parent = chain.parents[i]
            if parent >= 0:
                R_rel, p_rel = frames[i][:2]
                f_parent = tf.linalg.matvec(R_rel, force)
                wrenches[parent][0] = wrenches[parent][0] + f_parent
                wrenches[parent][1] = wrenches[parent][1] + tf.linalg.matvec(R_rel, moment) + _cross(p_rel, f_parent)
        return tf.stack(tau, -1) + armature * qdd

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """The rigid bodies' torque regressor: ``tau_rigid = Y @ theta``, ``Y (N, n, 10 n)`` float64.

        ``theta`` stacks every body's ten standard parameters (Pinocchio's
        order, at the joint frame: :mod:`lnn.inertia`); the torque is linear
        in them because the Newton-Euler recursion is linear in each body's
        pseudo-inertia, which is linear in ``theta``: column ``(i, k)`` is the
        recursion run with body ``i``'s parameters the ``k``-th unit vector and
        every other body empty (gravity included, armature excluded). Equal to
        Pinocchio's ``computeJointTorqueRegressor`` for a URDF robot
        (``tests/test_identify.py``).

        Parameters
        ----------
        q, qd, qdd : array_like, shape ``(N, n)``

        Returns
        -------
        numpy.ndarray, shape ``(N, n, 10 n)``
        """
        from lnn.inertia import pseudo_inertia

        n = self.chain0.n_dof
        dtype = tf.float64
        q, qd, qdd = (tf.constant(np.asarray(a, np.float64), dtype) for a in (q, qd, qdd))
        units = pseudo_inertia(np.eye(10))  # (10, 4, 4): the pseudo-inertia of each unit parameter vector
        zero = tf.zeros(n, dtype)

        @tf.function(input_signature=[tf.TensorSpec((n, 4, 4), dtype)], autograph=False)
        def column(J):
            return self._newton_euler(q, qd, qdd, J=J, armature=zero)

        columns = []
        for i in range(n):
            for k in range(10):
                J = np.zeros((n, 4, 4))
                J[i] = units[k]
                columns.append(np.asarray(column(tf.constant(J))))
        return np.stack(columns, axis=-1)

    def _relative(self, q, i: int, B):
        """Joint ``i``'s frame in its parent's: rotation ``(B, 3, 3)`` and origin ``(B, 3)``."""
        R0 = self._rotations[i]
        if self.chain0.prismatic[i]:
            return (
                tf.broadcast_to(R0, [B, 3, 3]),
                self._translations[i] + q[:, i : i + 1] * tf.linalg.matvec(R0, self._axes[i]),
            )
        qi = q[:, i][:, None, None]
        rot = tf.eye(3, dtype=q.dtype) + tf.sin(qi) * self._skews[i] + (1.0 - tf.cos(qi)) * self._skews2[i]
        return tf.einsum("jk,bkl->bjl", R0, rot), tf.broadcast_to(self._translations[i], [B, 3])

    def _rigid_mass(self, q):
        """The rigid body's ``M(q)``: column ``j`` is Newton-Euler at ``qd = 0``, ``qdd = e_j``, no gravity."""
        n = self.model.n_dof
        B = tf.shape(q)[0]
        directions = tf.repeat(tf.eye(n, dtype=q.dtype), B, axis=0)  # row j B + b is e_j
        columns = self._newton_euler(tf.tile(q, [n, 1]), tf.zeros_like(directions), directions, gravity=False)
        m = tf.transpose(tf.reshape(columns, [n, B, n]), [1, 2, 0])
        return 0.5 * (m + tf.linalg.matrix_transpose(m))

    def terms(self, q, qd, *, hessian, mixed, grad_q):
        """Closed form: ``M`` and ``M qdd + C qd + g`` by Newton-Euler, ``dL/dq`` by a tape.

        ``(d2L/dqd dq) qd - dL/dq = C qd + g`` (the bias force) gives the mixed
        term from ``dL/dq``; the residual Lagrangian's terms come from nested tapes.
        Equal to the Hessian of :meth:`kinetic` and the tape engine to rounding
        (``tests/test_rigid_body.py``).
        """
        zero = tf.UnconnectedGradients.ZERO
        with tf.GradientTape() as tape:
            tape.watch([q, qd])
            value = self.lagrangian(q, qd)
        gq, gqd = tape.gradient(value, [q, qd], unconnected_gradients=zero)
        mass = self._rigid_mass(q) if hessian else None
        mix = None
        if mixed:
            mix = gq + self._newton_euler(q, qd, tf.zeros_like(qd))
            if self.residual:
                m_r, gq_r, mix_r = self._residual.dynamics_terms(q, qd)
                # The rigid part's mixed term is gq_rigid + bias; gq above includes the residual's.
                mix = mix - gq_r + mix_r
                mass = None if mass is None else mass + m_r
        elif hessian and self.residual:
            mass = mass + self._residual.mass(q)
        return Terms(value, gq if grad_q else None, gqd, mass, mix)

    def inverse_dynamics(self, q, qd, qdd):
        """``M qdd + C qd + g``: Newton-Euler for the rigid body, one forward-over-reverse pass for the residual.

        O(n) operations where the default forms the ``n x n`` mass matrix (a
        7-DOF arm's torque loss trains several times faster; equal to it to
        rounding, ``tests/test_rigid_body.py``). The residual's part is
        ``d/dt (dL_r/dqd) - dL_r/dq``, the time derivative a forward-mode
        product of ``dL_r/dqd`` along ``(qd, qdd)``: no Hessian either.
        """
        tau = self._newton_euler(q, qd, qdd)
        return tau + self._residual.inverse_dynamics(q, qd, qdd) if self.residual else tau

    def mass_matrix(self, q, qd):
        """``M(q)`` (``qd`` unused)."""
        mass = self._rigid_mass(q)
        return mass + self._residual.mass(q) if self.residual else mass

    def energy(self, q, qd):
        """``E = T + V`` (``T`` is quadratic in ``qd``)."""
        return self.kinetic(q, qd) + self.potential(q)
