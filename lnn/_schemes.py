"""One step of each fixed-step scheme of :mod:`lnn.odeint`, in TensorFlow.

A scheme is a :class:`Scheme`: the state it carries from step to step, one
step ``state -> state`` over ``[s, s + h]`` under a force ``force(time, q, qd)``,
and how many right-hand-side evaluations a step makes (for ``nfev``).

``"rk4"``
    :func:`rk4_step`, the classical Runge–Kutta method on ``y = [q, qd]``.
``"verlet"``
    :func:`verlet_step`, the Störmer–Verlet (generalized leapfrog) scheme in
    its variational, momentum form, written once and parametrised by how the
    momentum ``p(q, v)`` and its rate ``f = dp/dt`` are obtained:

    - :class:`LagrangianMomentum` (a system with ``lagrangian(q, qd)``):
      ``p = dL/dqd`` and ``f = dL/dq + tau`` from one ``tf.GradientTape``,
      plus the system's forces (``-friction_torque(v, q=q)``); ``p`` is
      inverted by Newton's method with the Jacobian ``dp/dqd = mass_matrix(q, qd)``;
    - :class:`MassMomentum` (a system without one, whose ``T = ½ qdᵀ M(q) qd``):
      ``p = M(q) v`` and ``f = M qdd + (dM/dq · v) v`` from its
      ``acceleration`` (which carries every force); ``p`` is linear in ``v``,
      so one Newton update, ``v = M⁻¹ p``, is exact.

    The momentum is carried in the state ``(q, qd, p)``, so that the inexact
    Newton inversion of the returned velocities never feeds back into the
    motion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import tensorflow as tf

from lnn.mechanics import solve_cholesky

__all__ = ["LagrangianMomentum", "MassMomentum", "Momentum", "Scheme", "rk4_step", "scheme", "verlet_step"]

_ZERO = tf.UnconnectedGradients.ZERO


@dataclass(frozen=True, eq=False)
class Scheme:
    """A fixed-step scheme for one system.

    Attributes
    ----------
    initial : callable
        ``initial(q0, qd0) -> state``: the tuple of tensors carried by the
        steps, ``(q, qd, ...)`` with ``q, qd`` of shape ``(B, n)`` first.
    step : callable
        ``step(state, s, h, force) -> state``: one step from time ``s`` to
        ``s + h``, ``force(time, q, qd) -> (B, n)``.
    evaluations : int
        Right-hand-side evaluations per step (accelerations, or ``dL/d(q, qd)``).
    """

    initial: Callable
    step: Callable
    evaluations: int


def scheme(system, method: str, *, iterations: int) -> Scheme:
    """The :class:`Scheme` named ``method`` (``"rk4"`` or ``"verlet"``) for ``system``.

    ``iterations`` bounds the implicit stages of ``"verlet"`` (see :func:`verlet_step`).
    """
    if method == "rk4":
        return Scheme(
            initial=lambda q0, qd0: (q0, qd0),
            step=lambda state, s, h, force: rk4_step(system, state, s, h, force),
            evaluations=4,
        )
    momentum = LagrangianMomentum(system) if callable(getattr(system, "lagrangian", None)) else MassMomentum(system)
    return Scheme(
        initial=lambda q0, qd0: (q0, qd0, momentum.momentum(q0, qd0)),
        step=lambda state, s, h, force: verlet_step(momentum, state, s, h, force, iterations=iterations),
        evaluations=momentum.evaluations(iterations),
    )


# ----------------------------------------------------------------------------- RK4


def rk4_step(system, state, s, h, force: Callable):
    """One classical Runge–Kutta step of ``y = [q, qd]``, ``y' = [qd, qdd(q, qd)]``.

    ``state`` is ``(q, qd)``, each ``(B, n)``.
    """
    q, qd = state

    def f(s, q, qd):
        return qd, system.acceleration(q, qd, force(s, q, qd))

    k1q, k1v = f(s, q, qd)
    k2q, k2v = f(s + h / 2, q + h / 2 * k1q, qd + h / 2 * k1v)
    k3q, k3v = f(s + h / 2, q + h / 2 * k2q, qd + h / 2 * k2v)
    k4q, k4v = f(s + h, q + h * k3q, qd + h * k3v)
    q_next = q + h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
    qd_next = qd + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return q_next, qd_next


# ----------------------------------------------------------------------------- Verlet


class Momentum(Protocol):
    """How :func:`verlet_step` obtains the momentum ``p(q, v)`` and its rate ``f = dp/dt``.

    Attributes
    ----------
    linear : bool
        ``p = M(q) v`` with ``M`` independent of ``v``: ``v = M⁻¹ p`` exactly
        (one Newton update, without evaluating ``p``).
    """

    linear: bool

    def momentum(self, q, v) -> tf.Tensor:
        """``p (B, n)`` at ``(q, v)``."""

    def parts(self, q, v) -> tuple[tf.Tensor, Any]:
        """``(p (B, n), aux)`` at ``(q, v)``; ``aux`` is what :meth:`rate` needs there."""

    def rate(self, q, v, aux, tau) -> tf.Tensor:
        """``f (B, n)`` at ``(q, v)`` under the generalized force ``tau (B, n)``."""

    def mass(self, q, v) -> tf.Tensor:
        """The Jacobian ``dp/dv = M(q, v)``, ``(B, n, n)``, symmetric positive definite."""

    def evaluations(self, iterations: int) -> int:
        """Right-hand-side evaluations of one :func:`verlet_step`."""


@dataclass(frozen=True, eq=False)
class LagrangianMomentum:
    """``p = dL/dqd`` and ``f = dL/dq + tau + f_s(q, v)`` from ``system.lagrangian`` (any ``T``).

    ``f_s`` are the system's own forces: ``-friction_torque(v, q=q)`` when it
    has that method (a :class:`lnn.LagrangianNetwork`: every learned force),
    else ``-D v`` with its ``damping_matrix()`` when it has one.
    """

    system: Any
    linear = False

    def momentum(self, q, v):
        """``dL/dqd`` at ``(q, v)`` (one tape, as :meth:`parts`)."""
        return self.parts(q, v)[0]

    def parts(self, q, v):
        """``(dL/dqd, dL/dq)`` at ``(q, v)``, ``(B, n)`` each, from one tape."""
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch([q, v])
            value = self.system.lagrangian(q, v)
        grad_q, grad_v = tape.gradient(value, [q, v], unconnected_gradients=_ZERO)
        return grad_v, grad_q

    def rate(self, q, v, aux, tau):
        out = aux + tau
        friction_torque = getattr(self.system, "friction_torque", None)
        if callable(friction_torque):  # every learned force f(q, v), e.g. -D v: the system spends -f on them
            return out - tf.cast(friction_torque(v, q=q), v.dtype)
        damping_matrix = getattr(self.system, "damping_matrix", None)
        if callable(damping_matrix):
            out = out - tf.matmul(v, tf.cast(damping_matrix(), v.dtype), transpose_b=True)
        return out

    def mass(self, q, v):
        return self.system.mass_matrix(q, v)

    def evaluations(self, iterations: int) -> int:
        """``dL/d(q, qd)`` evaluations: stage 1 ``(iterations + 1) + 1``, stage 2
        ``iterations + 1``, stage 3 ``1 + iterations``."""
        return 3 * iterations + 4


@dataclass(frozen=True, eq=False)
class MassMomentum:
    """``p = M(q) v``, ``f = M qdd + (dM/dq · v) v`` (``T = ½ vᵀ M(q) v``; forces in ``qdd``).

    The rate is that of ``p = M v`` along the motion: ``dp/dt = M qdd + Ṁ v``,
    ``Ṁ = dM/dq · v`` by forward-mode differentiation.
    """

    system: Any
    linear = True

    def momentum(self, q, v):
        """``M(q) v``, without forward mode.

        Not ``parts(q, v)[0]``: with the initial momentum of a rollout computed
        under a ``tf.autodiff.ForwardAccumulator``, rollouts of more than about
        7000 steps returned empty float32 tensors, without an error
        (TensorFlow 2.21; the cause was not isolated further).
        """
        return tf.linalg.matvec(self.system.mass_matrix(q, v), v)

    def parts(self, q, v):
        """``(M v, (M, Ṁ))`` at ``(q, v)``."""
        with tf.autodiff.ForwardAccumulator(primals=q, tangents=v) as acc:
            mass = self.system.mass_matrix(q, v)
        mass_dot = acc.jvp(mass, unconnected_gradients=_ZERO)
        return tf.linalg.matvec(mass, v), (mass, mass_dot)

    def rate(self, q, v, aux, tau):
        mass, mass_dot = aux
        qdd = self.system.acceleration(q, v, tau)
        return tf.linalg.matvec(mass, qdd) + tf.linalg.matvec(mass_dot, v)

    def mass(self, q, v):
        return self.system.mass_matrix(q, v)

    def evaluations(self, iterations: int) -> int:
        """Acceleration evaluations (one per rate): stage 1 ``iterations + 1``, stage 3 one."""
        return iterations + 2


def _cholesky_solve(chol, rhs):
    return tf.linalg.cholesky_solve(chol, rhs[..., tf.newaxis])[..., 0]


def verlet_step(momentum: Momentum, state, s, h, force: Callable, *, iterations: int):
    """One Störmer–Verlet step in the momentum form, ``(q0, qd0, p0) -> (q1, qd1, p1)``.

    With the momentum ``p(q, v)``, its Jacobian ``M(q, v) = dp/dv`` and its
    rate ``f(q, v, s)`` (from ``momentum``, see :class:`Momentum`)::

        v_a:      p(q0, v_a) = p0 + h/2 f(q0, v_a, s)     chord iterations with M(q0, qd0)
        q1, v_b:  p(q1, v_b) = p½ = p(q0, v_a),
                  q1 = q0 + h/2 (v_a + v_b)               Newton on v_b, fixed point on q1
        qd1:      p(q1, qd1) = p1 = p½ + h/2 f(q1, v_b, s + h)        Newton

    It is the variational integrator of the discrete Lagrangian
    ``h/2 [L(q0, (q1-q0)/h) + L(q1, (q1-q0)/h)]``: second order, symmetric,
    symplectic. ``iterations`` bounds every loop (``tf.while_loop``s, so that
    the graph holds one copy of the model per loop body and autodiff
    differentiates the fixed computation exactly): stage 1 runs ``iterations
    + 1`` chord iterations (the first, from ``v_a = qd0``, is the explicit
    Euler guess), stage 2 ``iterations + 1`` (from ``v_b = v_a``, so that the
    first ``q1`` is ``q0 + h v_a``; each ends with a Newton update of ``v_b``
    at the new ``q1``), and the final velocity ``iterations`` Newton updates
    from ``v_b`` (one when ``momentum.linear``: it is then exact).

    Parameters
    ----------
    momentum : Momentum
    state : tuple of tf.Tensor
        ``(q0, qd0, p0)``, each ``(B, n)``; ``p0 = p(q0, qd0)`` up to the
        Newton inversion of the previous step (the momentum is carried exactly).
    s, h : scalar tf.Tensor
        Start time and step.
    force : callable
        ``force(time, q, qd) -> (B, n)``.
    iterations : int, keyword-only
        ``>= 1``.

    Raises
    ------
    tf.errors.InvalidArgumentError
        When a mass matrix is not positive definite (its Cholesky
        factorisation fails; NaN under XLA). It is never pseudo-inverted.
    """
    q0, qd0, p0 = state
    linear = momentum.linear

    def rate(q, v, aux, time):
        return momentum.rate(q, v, aux, force(time, q, v))

    def newton(q, p_target, v):
        """One Newton update of ``v`` towards ``p(q, v) = p_target``."""
        if linear:
            return solve_cholesky(momentum.mass(q, v), p_target)
        return v + solve_cholesky(momentum.mass(q, v), p_target - momentum.momentum(q, v))

    # Stage 1 (chord iterations, Jacobian M(q0, qd0)): p(q0, v_a) = p0 + h/2 f(q0, v_a, s).
    # The loop carries v only; p and the rate's parts are evaluated at the iterate.
    chol0 = tf.linalg.cholesky(momentum.mass(q0, qd0))

    def stage1(i, v):
        p, aux = momentum.parts(q0, v)
        target = p0 + h / 2 * rate(q0, v, aux, s)
        v = _cholesky_solve(chol0, target) if linear else v + _cholesky_solve(chol0, target - p)
        return i + 1, v

    _, v_a = tf.while_loop(lambda i, v: i < iterations + 1, stage1, (tf.constant(0), qd0))
    p_half = momentum.momentum(q0, v_a)

    # Stage 2: q1 = q0 + h/2 (v_a + v_b), p(q1, v_b) = p½, from v_b = v_a (so q1 = q0 + h v_a);
    # every iteration ends with a Newton update of v_b at the new q1.
    def stage2(i, q1, v_b):
        q1 = q0 + h / 2 * (v_a + v_b)
        return i + 1, q1, newton(q1, p_half, v_b)

    _, q1, v_b = tf.while_loop(lambda i, *_: i < iterations + 1, stage2, (tf.constant(0), q0, v_a))

    # Stage 3: p1 = p½ + h/2 f(q1, v_b, s + h) (explicit), then qd1 = v(q1, p1) by Newton.
    _, aux1 = momentum.parts(q1, v_b)
    p1 = p_half + h / 2 * rate(q1, v_b, aux1, s + h)
    if linear:
        return q1, newton(q1, p1, v_b), p1
    _, qd1 = tf.while_loop(lambda i, v: i < iterations, lambda i, v: (i + 1, newton(q1, p1, v)), (tf.constant(0), v_b))
    return q1, qd1, p1
