"""Fixed-step, differentiable integrators written in TensorFlow.

:func:`odeint` integrates any :class:`lnn.MechanicalSystem` whose
``acceleration`` (and, for the symplectic method, ``mass_matrix``) accept
TensorFlow tensors — a :class:`lnn.LagrangianNetwork` or a ground-truth system
written in TensorFlow — on a given time grid, inside one compiled
``tf.function`` (a ``tf.scan`` over the grid's intervals). Gradients of the
result flow to the initial state and to every variable the system reads
(the network's weights), so losses on multi-step rollouts can be trained.

Two methods:

``"rk4"``
    The classical fourth-order Runge–Kutta method on ``y = [q, qd]``.
``"verlet"``
    The Störmer–Verlet (generalized leapfrog) scheme for ``H(q, p)``, written
    in ``(q, qd)``: it is the variational integrator of the discrete
    Lagrangian ``h/2 [L(q0, (q1-q0)/h) + L(q1, (q1-q0)/h)]``, second order,
    symmetric and symplectic, so the energy error of a conservative system
    stays bounded over long times instead of drifting. One step::

        p½ = p0 + h/2 f(q0, v_a),   p(q0, v_a) = p½              (implicit in v_a)
        q1 = q0 + h/2 (v_a + v_b),  p(q1, v_b) = p½              (implicit in q1, v_b)
        p1 = p½ + h/2 f(q1, v_b),   p(q1, qd1) = p1              (qd1 by Newton)

    with the momentum ``p(q, qd)`` and its rate ``f = dp/dt = dL/dq + tau``
    (plus the system's damping). A system with a ``lagrangian(q, qd)`` method
    (every :class:`lnn.LagrangianNetwork`, of any kind) uses the true momentum
    ``p = dL/dqd`` (one ``tf.GradientTape`` gives ``dL/dq`` too) and inverts
    it by Newton's method with the Jacobian ``dp/dqd = mass_matrix(q, qd) =
    d2L/dqd2``, factorised by Cholesky; a model's viscous damping
    ``-D qd`` (``damping_matrix()``) joins ``tau``; the momentum is carried
    from step to step, so the Newton error of the returned velocities never
    feeds back into the motion. A system without
    ``lagrangian`` (e.g. a ground-truth system written in TensorFlow) must have
    ``T = ½ qdᵀ M(q) qd``: it uses ``p = M(q) qd`` and
    ``f = M qdd + (dM/dq · qd) qd`` from its ``acceleration`` (which then
    carries every force). When ``M`` does not depend on ``qd`` both forms are
    the same scheme: Newton's method on the linear ``p = M qd`` is exact in
    one step (on a ``"structured"`` model both give the same trajectory to
    1e-12; the ``dL/dqd`` form is the faster one there). The implicit stages
    run a fixed number of iterations (``iterations``) in ``tf.while_loop``s,
    which keeps the computation a fixed graph that autodiff differentiates
    exactly. A mass matrix that is not positive definite fails the Cholesky
    factorisation (``tf.errors.InvalidArgumentError``; NaN under
    ``jit_compile``); it is never pseudo-inverted.

Inside a graph. Called while a ``tf.function`` traces (symbolic inputs,
batch dimension possibly ``None``), :func:`odeint` checks what it can
statically, adds run-time assertions for the rest and returns an
:class:`OdeintResult` of tensors instead of a :class:`lnn.Trajectory` (which
holds concrete arrays); the field names are the same. The compiled rollout
is cached per system and options, so the enclosing function traces once for
every batch size::

    @tf.function(input_signature=[tf.TensorSpec((None, n), tf.float64)] * 2)
    def loss(q0, qd0):
        result = lnn.odeint.odeint(model, q0, qd0, t, method="verlet")
        return tf.reduce_mean((result.q[:, -1] - target) ** 2)
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from lnn.mechanics import solve_cholesky
from lnn.trajectory import Trajectory

__all__ = ["odeint", "OdeintResult", "METHODS"]

#: Names accepted by :func:`odeint`'s ``method``.
METHODS = ("rk4", "verlet")

# system -> {options key: compiled integrator}; weak so that models can be freed.
_CACHE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()

_ZERO = tf.UnconnectedGradients.ZERO


@dataclass(frozen=True, eq=False)
class OdeintResult:
    """The rollout of :func:`odeint` as tensors (what it returns inside a ``tf.function``).

    The fields are those of :class:`lnn.Trajectory`, as tensors in the
    system's dtype; leading dimensions may be unknown (``None``) while tracing.

    Attributes
    ----------
    t : tf.Tensor, shape ``(T,)``
        Sample times.
    q, qd, qdd, tau : tf.Tensor, shape ``(B, T, n)``
        Coordinates, velocities, accelerations and generalized forces.
    energy : tf.Tensor, shape ``(B, T)``
        The system's ``energy(q, qd)`` at each sample.
    method : str
        ``"rk4"`` or ``"verlet"``.
    """

    t: tf.Tensor
    q: tf.Tensor
    qd: tf.Tensor
    qdd: tf.Tensor
    tau: tf.Tensor
    energy: tf.Tensor
    method: str


def odeint(
    system,
    q0,
    qd0,
    t,
    *,
    method: str = "rk4",
    tau=None,
    substeps: int = 1,
    iterations: int = 4,
    jit_compile: bool = False,
) -> Trajectory | OdeintResult:
    """Integrate a system on a time grid with a fixed-step TensorFlow integrator.

    The step is the spacing of ``t`` (divided by ``substeps``); a non-uniform
    grid is integrated interval by interval. The whole rollout runs inside one
    compiled ``tf.function`` that is cached per system and options, so
    repeated calls (training steps) do not retrace, and it is differentiable
    with respect to ``q0``, ``qd0``, sampled torques and the variables the
    system reads. It may be called inside a ``tf.function`` (see Returns).

    Parameters
    ----------
    system : lnn.MechanicalSystem
        Its ``acceleration(q, qd, tau)`` and ``energy(q, qd)`` must accept
        TensorFlow tensors of shape ``(B, n)`` and return tensors; ``"verlet"``
        also needs ``mass_matrix(q, qd)`` and uses ``lagrangian(q, qd)`` and
        ``damping_matrix()`` where the system has them (see the module
        docstring).
    q0, qd0 : array_like or tf.Tensor, shape ``(B, n)`` or ``(n,)``
        Initial coordinates and velocities (a single state is batched to
        ``B = 1``). Inside a ``tf.function`` ``B`` may be unknown.
    t : array_like or tf.Tensor, shape ``(T,)``
        Strictly increasing sample times, ``T >= 2``; ``t[0]`` is the time of
        the initial state. A symbolic ``t`` is checked when the graph runs.
    method : {"rk4", "verlet"}, keyword-only
        Integration scheme (see the module docstring).
    tau : None, array_like or tensor of shape ``(T, n)`` or ``(B, T, n)``, or callable, keyword-only
        Generalized forces. Samples on ``t`` are interpolated linearly within
        each interval. A callable ``tau(t, q, qd)`` (a controller) receives a
        scalar tensor and tensors of shape ``(B, n)`` and must return a tensor
        broadcastable to ``(B, n)``; it is traced into the graph.
    substeps : int, keyword-only
        Integration steps per interval of ``t`` (``>= 1``).
    iterations : int, keyword-only
        Iterations per implicit stage of ``"verlet"`` (``>= 1``): the
        fixed-point iterations of the two implicit stages each gain a factor
        of about ``h · |∂qdd/∂qd|``; the Newton inversions of the momentum
        converge quadratically.
    jit_compile : bool, keyword-only
        Compile the rollout with XLA.

    Returns
    -------
    Trajectory or OdeintResult
        Eagerly, a :class:`lnn.Trajectory`: ``t`` as a numpy array ``(T,)``;
        ``q``, ``qd``, ``qdd``, ``tau`` ``(B, T, n)`` and ``energy``
        ``(B, T)`` as **TensorFlow tensors** in the system's dtype (so that
        losses on them can be differentiated; call ``.numpy()`` for arrays).
        ``nfev`` counts acceleration evaluations per trajectory (for the
        Lagrangian form of ``"verlet"``, evaluations of ``dL/d(q, qd)``);
        ``method`` is ``"rk4"`` or ``"verlet"``. While a ``tf.function``
        traces, an :class:`OdeintResult` with the same fields, all tensors.

    Raises
    ------
    ValueError
        For an unknown ``method``, a ``t`` that is not a strictly increasing
        1-D grid of at least two times, inconsistent shapes of ``q0``, ``qd0``
        or ``tau``, or non-positive ``substeps`` / ``iterations``. Inside a
        graph, what is only known at run time fails there with
        ``tf.errors.InvalidArgumentError`` carrying the same messages.
    TypeError
        If ``system`` lacks a method the chosen scheme needs.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    for name, value in (("substeps", substeps), ("iterations", iterations)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    needed = ("acceleration", "energy") + (("mass_matrix",) if method == "verlet" else ())
    for attr in needed:
        if not callable(getattr(system, attr, None)):
            raise TypeError(
                f"system must provide a callable {attr}(...) for method={method!r}; "
                f"got {type(system).__name__}"
            )
    n = int(system.n_dof)
    dtype = _system_dtype(system, q0)
    graph_mode = not tf.executing_eagerly()

    t_np, t_tensor = _as_times(t, dtype)
    q0 = _as_state(q0, "q0", n, dtype)
    qd0 = _as_state(qd0, "qd0", n, dtype)
    batch_q, batch_qd = q0.shape[0], qd0.shape[0]
    if batch_q is not None and batch_qd is not None and batch_q != batch_qd:
        raise ValueError(
            f"q0 and qd0 must have the same batch size, got shapes {tuple(q0.shape)} "
            f"and {tuple(qd0.shape)}"
        )
    checks = []
    if batch_q is None or batch_qd is None:
        checks.append(tf.debugging.assert_equal(
            tf.shape(q0)[0], tf.shape(qd0)[0],
            message="q0 and qd0 must have the same batch size"))
    n_t = None if t_np is None else t_np.shape[0]
    controller = tau if callable(tau) else None
    if controller is None:
        tau_samples, tau_checks = _as_tau_samples(tau, n, n_t, batch_q or batch_qd, dtype,
                                                  t_tensor, q0)
        checks.extend(tau_checks)
    else:
        tau_samples = tf.zeros((1, n_t if n_t is not None else tf.shape(t_tensor)[0], n), dtype)

    run = _integrator(system, method=method, substeps=int(substeps),
                      iterations=int(iterations), controller=controller,
                      jit_compile=bool(jit_compile), n=n, dtype=dtype)
    with tf.control_dependencies(checks):
        q0 = tf.identity(q0)
    q, qd, qdd, tau_out, energy = run(q0, qd0, t_tensor, tau_samples)
    if graph_mode:
        batch = batch_q if batch_q is not None else batch_qd
        for x in (q, qd, qdd, tau_out):
            x.set_shape((batch, n_t, n))
        energy.set_shape((batch, n_t))
        return OdeintResult(t=t_tensor, q=q, qd=qd, qdd=qdd, tau=tau_out, energy=energy,
                            method=method)
    return Trajectory(
        t=t_np, q=q, qd=qd, qdd=qdd, tau=tau_out, energy=energy,
        nfev=_evaluations(system, method, int(iterations)) * int(substeps) * (t_np.shape[0] - 1)
        + t_np.shape[0],
        method=method,
        metadata={"substeps": int(substeps), "iterations": int(iterations)},
    )


# ----------------------------------------------------------------------------- helpers


def _uses_lagrangian(system) -> bool:
    """Whether ``"verlet"`` takes the momentum ``dL/dqd`` from ``system.lagrangian``."""
    return callable(getattr(system, "lagrangian", None))


def _evaluations(system, method: str, iterations: int) -> int:
    """Right-hand-side evaluations of one step (acceleration, or ``dL/d(q, qd)``)."""
    if method == "rk4":
        return 4
    if _uses_lagrangian(system):
        # stage 1: 1 + (iterations + 1); stage 2: iterations; stage 3: 2 + iterations
        return 3 * iterations + 4
    return iterations + 2


def _system_dtype(system, q0) -> tf.DType:
    """The float dtype to integrate in: the system's, else ``q0``'s, else float64."""
    for attr in ("compute_dtype", "dtype"):
        value = getattr(system, attr, None)
        if isinstance(value, (str, tf.DType)):
            try:
                dtype = tf.as_dtype(value)
            except TypeError:
                continue
            if dtype.is_floating:
                return dtype
    if isinstance(q0, (tf.Tensor, tf.Variable)) and q0.dtype.is_floating:
        return q0.dtype
    if isinstance(q0, np.ndarray) and q0.dtype == np.float32:
        return tf.float32
    return tf.float64


def _is_symbolic(x) -> bool:
    """A graph tensor (no value until the graph runs)."""
    return isinstance(x, tf.Tensor) and not hasattr(x, "numpy")


def _as_times(t, dtype: tf.DType):
    """``(t as float64 numpy or None, t as a (T,) tensor of dtype)``.

    A symbolic ``t`` whose value is not known while tracing gets run-time
    assertions instead of the checks.
    """
    value = t
    if _is_symbolic(t):
        value = tf.get_static_value(t)
        if value is None:
            if t.shape.rank is not None and (t.shape.rank != 1 or (t.shape[0] is not None
                                                                   and t.shape[0] < 2)):
                raise ValueError(f"t must have shape (T,) with T >= 2, got shape {tuple(t.shape)}")
            x = tf.cast(t, dtype)
            steps = x[1:] - x[:-1]
            checks = [
                tf.debugging.assert_rank(x, 1, message="t must have shape (T,)"),
                tf.debugging.assert_greater_equal(tf.size(x), 2,
                                                  message="t must have shape (T,) with T >= 2"),
                tf.debugging.assert_greater(steps, tf.zeros_like(steps),
                                            message="t must be finite and strictly increasing"),
                tf.debugging.assert_all_finite(x, "t must be finite and strictly increasing"),
            ]
            with tf.control_dependencies(checks):
                return None, tf.identity(x)
    elif isinstance(t, (tf.Tensor, tf.Variable)):
        value = t.numpy()
    t_np = np.asarray(value, dtype=np.float64)
    if t_np.ndim != 1 or t_np.shape[0] < 2:
        raise ValueError(f"t must have shape (T,) with T >= 2, got shape {t_np.shape}")
    if not np.all(np.isfinite(t_np)) or np.any(np.diff(t_np) <= 0):
        raise ValueError("t must be finite and strictly increasing")
    return t_np, tf.constant(t_np, dtype=dtype)


def _as_state(value, name: str, n: int, dtype: tf.DType) -> tf.Tensor:
    """Convert an initial state to a ``(B, n)`` tensor of ``dtype`` (``B`` may be unknown)."""
    x = tf.cast(tf.convert_to_tensor(value), dtype)
    if x.shape.rank == 1:
        x = x[tf.newaxis]
    if x.shape.rank != 2 or x.shape[1] not in (n, None):
        raise ValueError(f"{name} must have shape (B, {n}) or ({n},), got shape {_shape(value)}")
    if x.shape[1] is None:
        x = tf.ensure_shape(x, (None, n))
    return x


def _shape(value) -> tuple:
    """Static shape of an array or tensor, ``None`` for unknown dimensions."""
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tuple(value.shape) if value.shape.rank is not None else ("unknown rank",)
    return tuple(np.shape(value))


def _as_tau_samples(tau, n: int, n_t, batch, dtype: tf.DType, t, q0):
    """Torque samples on ``t`` as a ``(1 or B, T, n)`` tensor (zeros for ``None``).

    ``n_t`` and ``batch`` are ``None`` when only known at run time; the
    second result lists the run-time assertions of what could not be checked.
    """
    if tau is None:
        return tf.zeros((1, n_t if n_t is not None else tf.shape(t)[0], n), dtype=dtype), []
    x = tf.cast(tf.convert_to_tensor(tau), dtype)
    if x.shape.rank == 2:
        x = x[tf.newaxis]
    shape = tuple(x.shape) if x.shape.rank is not None else None
    expected = (f"({'T' if n_t is None else n_t}, {n}) or "
                f"({'B' if batch is None else batch}, {'T' if n_t is None else n_t}, {n})")
    message = (f"tau must be None, a callable tau(t, q, qd), or samples of shape {expected}; "
               f"got shape {_shape(tau)}")
    if (shape is None or len(shape) != 3 or shape[2] not in (n, None)
            or None not in (shape[1], n_t) and shape[1] != n_t
            or None not in (shape[0], batch) and shape[0] not in (1, batch)):
        raise ValueError(message)
    checks = []
    if shape[2] is None:
        x = tf.ensure_shape(x, (None, None, n))
    if shape[1] is None or n_t is None:
        checks.append(tf.debugging.assert_equal(tf.shape(x)[1], tf.shape(t)[0], message=message))
    if shape[0] not in (1,) and (shape[0] is None or batch is None):
        rows = tf.shape(x)[0]
        checks.append(tf.debugging.Assert(
            tf.logical_or(tf.equal(rows, 1), tf.equal(rows, tf.shape(q0)[0])), [message, rows]))
    return x, checks


def _integrator(system, *, method, substeps, iterations, controller, jit_compile, n, dtype):
    """The compiled rollout for ``system`` and these options (cached)."""
    key = (method, substeps, iterations, controller, jit_compile, n, dtype)
    try:
        per_system = _CACHE.setdefault(system, {})
    except TypeError:  # neither weak-referenceable nor hashable: no cache
        per_system = {}
    if key not in per_system:
        per_system[key] = _build(system, method=method, substeps=substeps,
                                 iterations=iterations, controller=controller,
                                 jit_compile=jit_compile, n=n, dtype=dtype)
    return per_system[key]


def _build(system, *, method, substeps, iterations, controller, jit_compile, n, dtype):
    """Trace-once ``tf.function`` that rolls out ``system`` on a grid."""
    # A step maps a state tuple (q, qd, ...) to the next; the Lagrangian Verlet
    # form also carries the momentum p = dL/dqd, so that the inexact Newton
    # inversion of the output velocity never feeds back into the dynamics.
    if method == "rk4":
        step, extra = _rk4_step, None
    elif _uses_lagrangian(system):
        step = _lagrangian_verlet_step

        def extra(q, qd):
            return (_lagrangian_parts(system, q, qd)[0],)
    else:
        step, extra = _verlet_step, None

    def force_fn(tau_a, tau_b, t_a, t_b):
        """Generalized force at time ``s`` in ``[t_a, t_b]`` and state ``(q, qd)``."""
        if controller is not None:
            def force(s, q, qd):
                return tf.broadcast_to(tf.cast(controller(s, q, qd), dtype), tf.shape(q))
        else:
            def force(s, q, qd):
                c = (s - t_a) / (t_b - t_a)
                return tf.broadcast_to((1 - c) * tau_a + c * tau_b, tf.shape(q))
        return force

    def interval(state, elems):
        t_a, t_b, tau_a, tau_b = elems
        force = force_fn(tau_a, tau_b, t_a, t_b)
        h = (t_b - t_a) / substeps
        if substeps == 1:
            return step(system, state, t_a, h, force, iterations)

        def body(j, *state):
            s = t_a + tf.cast(j, dtype) * h
            return (j + 1,) + step(system, state, s, h, force, iterations)

        return tf.while_loop(lambda j, *_: j < substeps, body, (tf.constant(0),) + state)[1:]

    spec_state = tf.TensorSpec([None, n], dtype)

    @tf.function(
        input_signature=[spec_state, spec_state, tf.TensorSpec([None], dtype),
                         tf.TensorSpec([None, None, n], dtype)],
        jit_compile=jit_compile,
        reduce_retracing=True,
    )
    def run(q0, qd0, t, tau_samples):
        batch = tf.shape(q0)[0]
        n_t = tf.shape(t)[0]
        tau_t = tf.transpose(tau_samples, [1, 0, 2])  # (T, 1 or B, n)
        state0 = (q0, qd0) + (extra(q0, qd0) if extra is not None else ())
        q_path, qd_path = tf.scan(
            interval, (t[:-1], t[1:], tau_t[:-1], tau_t[1:]), initializer=state0
        )[:2]
        q = tf.concat([q0[tf.newaxis], q_path], axis=0)  # (T, B, n)
        qd = tf.concat([qd0[tf.newaxis], qd_path], axis=0)
        if controller is not None:
            tau_all = tf.map_fn(
                lambda x: tf.broadcast_to(tf.cast(controller(x[0], x[1], x[2]), dtype),
                                          tf.shape(x[1])),
                (t, q, qd), fn_output_signature=tf.TensorSpec([None, n], dtype),
            )
        else:
            tau_all = tf.broadcast_to(tau_t, tf.shape(q))
        flat = (n_t * batch, n)
        q_flat = tf.reshape(q, flat)
        qd_flat = tf.reshape(qd, flat)
        qdd = tf.reshape(system.acceleration(q_flat, qd_flat, tf.reshape(tau_all, flat)),
                         tf.shape(q))
        energy = tf.reshape(system.energy(q_flat, qd_flat), (n_t, batch))
        perm = [1, 0, 2]
        return (tf.transpose(q, perm), tf.transpose(qd, perm), tf.transpose(qdd, perm),
                tf.transpose(tau_all, perm), tf.transpose(energy))

    return run


def _rk4_step(system, state, s, h, force: Callable, iterations: int):
    """One classical Runge–Kutta step of ``y = [q, qd]``, ``y' = [qd, qdd(q, qd)]``."""
    del iterations
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


def _mass_and_rate(system, q, qd):
    """``M(q)`` and its rate ``dM/dt = (dM/dq · qd)`` along the motion, ``(B, n, n)`` each."""
    with tf.autodiff.ForwardAccumulator(primals=q, tangents=qd) as acc:
        mass = system.mass_matrix(q, qd)
    return mass, acc.jvp(mass)


def _verlet_step(system, state, s, h, force: Callable, iterations: int):
    """One Störmer–Verlet (generalized leapfrog) step through ``p = M(q) qd``.

    For systems without ``lagrangian`` (see :func:`_lagrangian_verlet_step`).

    With ``g(q, v, s) = dL/dq + tau = M qdd + Ṁ v``::

        p½ = p0 + h/2 g(q0, v_a, s),        v_a = M(q0)⁻¹ p½          (implicit in v_a)
        q1 = q0 + h/2 (v_a + M(q1)⁻¹ p½)                               (implicit in q1)
        p1 = p½ + h/2 g(q1, v_b, s + h),    v_b = M(q1)⁻¹ p½,  qd1 = M(q1)⁻¹ p1

    The fixed-point iterations run in ``tf.while_loop``s (one copy of the
    model per loop body in the graph); the first iteration of stage 1, from
    ``v_a = qd0``, is the explicit Euler guess. ``state`` is ``(q0, qd0)``.
    """
    q0, qd0 = state

    def rate(q, v, time):  # dp/dt at (q, v): M qdd + Ṁ v
        mass, mass_dot = _mass_and_rate(system, q, v)
        qdd = system.acceleration(q, v, force(time, q, v))
        return tf.linalg.matvec(mass, qdd) + tf.linalg.matvec(mass_dot, v)

    def solve(chol, p):
        return tf.linalg.cholesky_solve(chol, p[..., tf.newaxis])[..., 0]

    # Stage 1: p½ = p0 + h/2 g(q0, M(q0)⁻¹ p½).
    mass0 = system.mass_matrix(q0, qd0)
    chol0 = tf.linalg.cholesky(mass0)
    p0 = tf.linalg.matvec(mass0, qd0)

    def stage1(i, v_a):
        return i + 1, solve(chol0, p0 + h / 2 * rate(q0, v_a, s))

    _, v_a = tf.while_loop(lambda i, v: i < iterations + 1, stage1, (tf.constant(0), qd0))
    p_half = tf.linalg.matvec(mass0, v_a)

    # Stage 2: q1 = q0 + h/2 (v_a + M(q1)⁻¹ p½), from the explicit guess q0 + h v_a.
    def stage2(i, q1):
        return i + 1, q0 + h / 2 * (v_a + solve_cholesky(system.mass_matrix(q1, v_a), p_half))

    _, q1 = tf.while_loop(lambda i, q: i < iterations, stage2, (tf.constant(0), q0 + h * v_a))

    # Stage 3 (explicit): p1 = p½ + h/2 g(q1, v_b).
    chol1 = tf.linalg.cholesky(system.mass_matrix(q1, v_a))
    v_b = solve(chol1, p_half)
    p1 = p_half + h / 2 * rate(q1, v_b, s + h)
    return q1, solve(chol1, p1)


def _lagrangian_parts(system, q, v):
    """The momentum ``dL/dqd`` and ``dL/dq`` at ``(q, v)``, ``(B, n)`` each (one tape)."""
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([q, v])
        value = system.lagrangian(q, v)
    grad_q, grad_v = tape.gradient(value, [q, v], unconnected_gradients=_ZERO)
    return grad_v, grad_q


def _lagrangian_verlet_step(system, state, s, h, force: Callable, iterations: int):
    """One Störmer–Verlet (generalized leapfrog) step through the momentum ``p = dL/dqd``.

    ``state`` is ``(q0, qd0, p0)`` with ``p0 = p(q0, qd0)`` up to the Newton
    inversion of the previous step; the momentum is carried exactly.

    With ``p(q, v) = dL/dqd``, its Jacobian ``M(q, v) = d2L/dqd2`` and the
    momentum rate ``f(q, v, s) = dL/dq + tau - D v``::

        v_a:      p(q0, v_a) = p0 + h/2 f(q0, v_a, s)     chord iterations with M(q0, qd0)
        q1, v_b:  p(q1, v_b) = p½ = p(q0, v_a),
                  q1 = q0 + h/2 (v_a + v_b)               Newton on v_b, fixed point on q1
        qd1:      p(q1, qd1) = p1 = p½ + h/2 f(q1, v_b, s + h)        Newton

    For ``p = M(q) v`` every Newton update is exact and the step is that of
    :func:`_verlet_step` up to round-off. ``iterations`` bounds every loop: stage 1 runs
    ``iterations + 1`` chord iterations (the first from ``v_a = qd0`` is the
    explicit Euler guess), stage 2 ``iterations + 1`` (from ``v_b = v_a``, so
    that the first ``q1`` is ``q0 + h v_a``; each ends with a Newton update
    of ``v_b`` at the new ``q1``), and the final velocity ``iterations``
    Newton updates from ``v_b``.
    """
    q0, qd0, p0 = state
    damping_matrix = getattr(system, "damping_matrix", None)
    damping = damping_matrix() if callable(damping_matrix) else None

    def rate(q, v, grad_q, time):
        """``dp/dt = dL/dq + tau - D v`` from ``dL/dq`` at ``(q, v)``."""
        out = grad_q + force(time, q, v)
        if damping is not None:
            out = out - tf.matmul(v, tf.cast(damping, v.dtype), transpose_b=True)
        return out

    def newton(q, p_target, v):
        """One Newton update of ``v`` towards ``p(q, v) = p_target``."""
        p, _ = _lagrangian_parts(system, q, v)
        return v + solve_cholesky(system.mass_matrix(q, v), p_target - p)

    # Stage 1 (chord iterations, Jacobian M(q0, qd0)): p(q0, v_a) = p0 + h/2 f(q0, v_a, s).
    chol0 = tf.linalg.cholesky(system.mass_matrix(q0, qd0))
    p_guess, grad_q0 = _lagrangian_parts(system, q0, qd0)

    def stage1(i, v, p, grad_q):
        residual = p0 + h / 2 * rate(q0, v, grad_q, s) - p
        v = v + tf.linalg.cholesky_solve(chol0, residual[..., tf.newaxis])[..., 0]
        return (i + 1, v) + _lagrangian_parts(system, q0, v)

    _, v_a, p_half, _ = tf.while_loop(lambda i, *_: i < iterations + 1, stage1,
                                      (tf.constant(0), qd0, p_guess, grad_q0))

    # Stage 2: q1 = q0 + h/2 (v_a + v_b), p(q1, v_b) = p½, from v_b = v_a (so q1 = q0 + h v_a);
    # every iteration ends with a Newton update of v_b at the new q1.
    def stage2(i, q1, v_b):
        q1 = q0 + h / 2 * (v_a + v_b)
        return i + 1, q1, newton(q1, p_half, v_b)

    _, q1, v_b = tf.while_loop(lambda i, *_: i < iterations + 1, stage2,
                               (tf.constant(0), q0, v_a))

    # Stage 3: p1 = p½ + h/2 f(q1, v_b, s + h) (explicit), then qd1 = v(q1, p1) by Newton.
    _, grad_q1 = _lagrangian_parts(system, q1, v_b)
    p1 = p_half + h / 2 * rate(q1, v_b, grad_q1, s + h)
    _, qd1 = tf.while_loop(lambda i, v: i < iterations,
                           lambda i, v: (i + 1, newton(q1, p1, v)), (tf.constant(0), v_b))
    return q1, qd1, p1
