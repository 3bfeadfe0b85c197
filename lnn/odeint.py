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
    The Störmer–Verlet (generalized leapfrog) scheme on ``(q, p)`` with the
    momentum ``p = M(q) qd``, written in ``(q, qd)`` through ``M``. It is the
    variational integrator of the discrete Lagrangian
    ``h/2 [L(q0, (q1-q0)/h) + L(q1, (q1-q0)/h)]``: second order, symmetric and
    symplectic, so the energy error of a conservative system stays bounded
    over long times instead of drifting. The two implicit stages are solved by
    a fixed number of fixed-point iterations (``iterations``), which keeps the
    computation a fixed graph that autodiff differentiates exactly. The
    momentum rate is ``dp/dt = M qdd + (dM/dq · qd) qd = dL/dq + tau`` with the
    directional derivative of ``M`` taken in forward mode. This needs a
    kinetic energy ``T = ½ qdᵀ M(q) qd`` with ``M`` independent of ``qd``:
    every ground-truth system and the ``"structured"`` learned kind. The
    ``"kinetic-potential"`` and ``"black-box"`` kinds learn a ``T`` whose
    Hessian may depend on ``qd``, for which ``p = M qd`` is not the momentum;
    :func:`odeint` refuses them with ``method="verlet"`` (use ``"rk4"``).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from lnn.mechanics import solve_cholesky
from lnn.trajectory import Trajectory

__all__ = ["odeint", "METHODS"]

#: Names accepted by :func:`odeint`'s ``method``.
METHODS = ("rk4", "verlet")

# system -> {options key: compiled integrator}; weak so that models can be freed.
_CACHE: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


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
) -> Trajectory:
    """Integrate a system on a time grid with a fixed-step TensorFlow integrator.

    The step is the spacing of ``t`` (divided by ``substeps``); a non-uniform
    grid is integrated interval by interval. The whole rollout runs inside one
    compiled ``tf.function`` that is cached per system and options, so
    repeated calls (training steps) do not retrace, and it is differentiable
    with respect to ``q0``, ``qd0``, sampled torques and the variables the
    system reads.

    Parameters
    ----------
    system : lnn.MechanicalSystem
        Its ``acceleration(q, qd, tau)`` (``"rk4"``) and also
        ``mass_matrix(q, qd)`` (``"verlet"``) and ``energy(q, qd)`` must accept
        TensorFlow tensors of shape ``(B, n)`` and return tensors.
    q0, qd0 : array_like or tf.Tensor, shape ``(B, n)`` or ``(n,)``
        Initial coordinates and velocities (a single state is batched to
        ``B = 1``).
    t : array_like, shape ``(T,)``
        Strictly increasing sample times, ``T >= 2``; ``t[0]`` is the time of
        the initial state.
    method : {"rk4", "verlet"}, keyword-only
        Integration scheme (see the module docstring).
    tau : None, array_like of shape ``(T, n)`` or ``(B, T, n)``, or callable, keyword-only
        Generalized forces. Samples on ``t`` are interpolated linearly within
        each interval. A callable ``tau(t, q, qd)`` (a controller) receives a
        scalar tensor and tensors of shape ``(B, n)`` and must return a tensor
        broadcastable to ``(B, n)``; it is traced into the graph.
    substeps : int, keyword-only
        Integration steps per interval of ``t`` (``>= 1``).
    iterations : int, keyword-only
        Fixed-point iterations per implicit stage of ``"verlet"`` (``>= 1``).
        Each one gains a factor of about ``h · |∂qdd/∂qd|``.
    jit_compile : bool, keyword-only
        Compile the rollout with XLA.

    Returns
    -------
    Trajectory
        ``t`` as a numpy array ``(T,)``; ``q``, ``qd``, ``qdd``, ``tau``
        ``(B, T, n)`` and ``energy`` ``(B, T)`` as **TensorFlow tensors** in
        the system's dtype (so that losses on them can be differentiated;
        call ``.numpy()`` for arrays). ``nfev`` counts acceleration
        evaluations per trajectory; ``method`` is ``"rk4"`` or ``"verlet"``.

    Raises
    ------
    ValueError
        For an unknown ``method``, a ``t`` that is not a strictly increasing
        1-D grid of at least two times, inconsistent shapes of ``q0``, ``qd0``
        or ``tau``, non-positive ``substeps`` / ``iterations``, or
        ``method="verlet"`` on a learned model whose ``M`` may depend on ``qd``.
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
    kind = getattr(system, "kind", None)
    if method == "verlet" and kind in ("kinetic-potential", "black-box"):
        raise ValueError(
            f"method='verlet' needs a mass matrix M(q) independent of qd; a {kind!r} model "
            "learns a kinetic energy whose Hessian may depend on qd. Use method='rk4' or a "
            "'structured' model"
        )
    n = int(system.n_dof)
    dtype = _system_dtype(system, q0)

    t_np = np.asarray(t.numpy() if isinstance(t, tf.Tensor) else t, dtype=np.float64)
    if t_np.ndim != 1 or t_np.shape[0] < 2:
        raise ValueError(f"t must have shape (T,) with T >= 2, got shape {t_np.shape}")
    if not np.all(np.isfinite(t_np)) or np.any(np.diff(t_np) <= 0):
        raise ValueError("t must be finite and strictly increasing")

    q0 = _as_state(q0, "q0", n, dtype)
    qd0 = _as_state(qd0, "qd0", n, dtype)
    if q0.shape[0] != qd0.shape[0]:
        raise ValueError(
            f"q0 and qd0 must have the same batch size, got shapes {tuple(q0.shape)} "
            f"and {tuple(qd0.shape)}"
        )
    controller = tau if callable(tau) else None
    if controller is None:
        tau_samples = _as_tau_samples(tau, n, t_np.shape[0], int(q0.shape[0]), dtype)
    else:
        tau_samples = tf.zeros((1, t_np.shape[0], n), dtype=dtype)

    run = _integrator(system, method=method, substeps=int(substeps),
                      iterations=int(iterations), controller=controller,
                      jit_compile=bool(jit_compile), n=n, dtype=dtype)
    q, qd, qdd, tau_out, energy = run(q0, qd0, tf.constant(t_np, dtype=dtype), tau_samples)
    stages = 4 if method == "rk4" else int(iterations) + 2
    return Trajectory(
        t=t_np, q=q, qd=qd, qdd=qdd, tau=tau_out, energy=energy,
        nfev=stages * int(substeps) * (t_np.shape[0] - 1) + t_np.shape[0],
        method=method,
        metadata={"substeps": int(substeps), "iterations": int(iterations)},
    )


# ----------------------------------------------------------------------------- helpers


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


def _as_state(value, name: str, n: int, dtype: tf.DType) -> tf.Tensor:
    """Convert an initial state to a ``(B, n)`` tensor of ``dtype``."""
    x = tf.cast(tf.convert_to_tensor(value), dtype)
    if x.shape.rank == 1:
        x = x[tf.newaxis]
    if x.shape.rank != 2 or x.shape[1] != n:
        raise ValueError(f"{name} must have shape (B, {n}) or ({n},), got shape {tuple(np.shape(value))}")
    return x


def _as_tau_samples(tau, n: int, n_t: int, batch: int, dtype: tf.DType) -> tf.Tensor:
    """Torque samples on ``t`` as a ``(1 or B, T, n)`` tensor (zeros for ``None``)."""
    if tau is None:
        return tf.zeros((1, n_t, n), dtype=dtype)
    x = tf.cast(tf.convert_to_tensor(tau), dtype)
    if x.shape.rank == 2:
        x = x[tf.newaxis]
    if x.shape.rank != 3 or x.shape[1] != n_t or x.shape[2] != n or x.shape[0] not in (1, batch):
        raise ValueError(
            f"tau must be None, a callable tau(t, q, qd), or samples of shape ({n_t}, {n}) "
            f"or ({batch}, {n_t}, {n}); got shape {tuple(np.shape(tau))}"
        )
    return x


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
    step = _rk4_step if method == "rk4" else _verlet_step

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

    def interval(carry, elems):
        q, qd = carry
        t_a, t_b, tau_a, tau_b = elems
        force = force_fn(tau_a, tau_b, t_a, t_b)
        h = (t_b - t_a) / substeps
        if substeps == 1:
            q, qd = step(system, q, qd, t_a, h, force, iterations)
        else:
            def body(j, q, qd):
                s = t_a + tf.cast(j, dtype) * h
                return (j + 1,) + step(system, q, qd, s, h, force, iterations)

            _, q, qd = tf.while_loop(lambda j, q, qd: j < substeps, body,
                                     (tf.constant(0), q, qd))
        return q, qd

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
        q_path, qd_path = tf.scan(
            interval, (t[:-1], t[1:], tau_t[:-1], tau_t[1:]), initializer=(q0, qd0)
        )
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


def _rk4_step(system, q, qd, s, h, force: Callable, iterations: int):
    """One classical Runge–Kutta step of ``y = [q, qd]``, ``y' = [qd, qdd(q, qd)]``."""
    del iterations

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


def _verlet_step(system, q0, qd0, s, h, force: Callable, iterations: int):
    """One Störmer–Verlet (generalized leapfrog) step through ``p = M(q) qd``.

    With ``g(q, v, s) = dL/dq + tau = M qdd + Ṁ v``::

        p½ = p0 + h/2 g(q0, v_a, s),        v_a = M(q0)⁻¹ p½          (implicit in v_a)
        q1 = q0 + h/2 (v_a + M(q1)⁻¹ p½)                               (implicit in q1)
        p1 = p½ + h/2 g(q1, v_b, s + h),    v_b = M(q1)⁻¹ p½,  qd1 = M(q1)⁻¹ p1

    The fixed-point iterations run in ``tf.while_loop``s (one copy of the
    model per loop body in the graph); the first iteration of stage 1, from
    ``v_a = qd0``, is the explicit Euler guess.
    """

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
