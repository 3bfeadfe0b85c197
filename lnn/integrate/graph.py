"""The in-graph door, :func:`lnn.odeint.odeint`: differentiable rollouts in TensorFlow.

:func:`odeint` integrates any :class:`lnn.MechanicalSystem` whose
``acceleration`` (and, for the symplectic method, ``mass_matrix``) accept
TensorFlow tensors — a :class:`lnn.LagrangianNetwork` or a ground-truth system
written in TensorFlow — on a given time grid, inside one compiled
``tf.function`` (a ``tf.scan`` over the grid's intervals). Gradients of the
result flow to the initial state and to every variable the system reads
(the network's weights), so losses on multi-step rollouts can be trained.

Two methods (one step of each in :mod:`lnn._schemes`):

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
    d2L/dqd2``, factorised by Cholesky; every learned force of a model
    (``-friction_torque(qd, q=q)``: damping, friction, offsets) joins ``tau``. A system without
    ``lagrangian`` (e.g. a ground-truth system written in TensorFlow) must have
    ``T = ½ qdᵀ M(q) qd``: it uses ``p = M(q) qd`` and
    ``f = M qdd + (dM/dq · qd) qd`` from its ``acceleration`` (which then
    carries every force). Both forms are one step, parametrised by the
    momentum (:func:`lnn._schemes.verlet_step`); the momentum is carried from
    step to step, so the Newton error of the returned velocities never feeds
    back into the motion. When ``M`` does not depend on ``qd`` both forms are
    the same scheme: Newton's method on the linear ``p = M qd`` is exact in
    one step (on a ``"structured"`` model both give the same trajectory to
    1e-12; the ``dL/dqd`` form is the faster one there). The implicit stages
    run a fixed number of iterations (``iterations``) in ``tf.while_loop``s,
    which keeps the computation a fixed graph that autodiff differentiates
    exactly. A mass matrix that is not positive definite fails the Cholesky
    factorisation (``tf.errors.InvalidArgumentError``; NaN under
    ``jit_compile``); it is never pseudo-inverted.

Forces follow the rule of :mod:`lnn._torque`, shared with :func:`lnn.rollout`
(samples interpolated linearly within each interval, or a controller).

Inside a graph. Called while a ``tf.function`` traces (symbolic inputs,
batch dimension possibly ``None``), :func:`odeint` checks what it can
statically, adds run-time assertions for the rest and returns the same
:class:`lnn.Trajectory`, holding symbolic tensors (``t`` too). The compiled
rollout is cached per system and options, so the enclosing function traces
once for every batch size::

    @tf.function(input_signature=[tf.TensorSpec((None, n), tf.float64)] * 2)
    def loss(q0, qd0):
        result = lnn.odeint.odeint(model, q0, qd0, t, method="verlet")
        return tf.reduce_mean((result.q[:, -1] - target) ** 2)
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from lnn import _runtime, _torque, _validate
from lnn._grid import time_grid
from lnn._schemes import scheme
from lnn.integrate._methods import method as table_method
from lnn.integrate._methods import method_names
from lnn.integrate._precision import reachable
from lnn.integrate._problem import Problem, Solution, default_tolerances
from lnn.solvers import solve
from lnn.system import compute_dtype
from lnn.trajectory import Failure, Trajectory

__all__ = ["FIXED_STEP", "odeint", "solve_fixed_step"]

#: Names of the fixed-step methods of :func:`odeint`.
FIXED_STEP = method_names("fixed-step")

# system -> {options key: compiled integrator}; weak so that models can be freed.
_CACHE: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


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
    jit_compile: bool | None = None,
    rtol=None,
    atol=None,
    max_steps: int = 100_000,
) -> Trajectory:
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
        ``friction_torque(qd, q=q)`` (or ``damping_matrix()``) where the system
        has them (see the module docstring).
    q0, qd0 : array_like or tf.Tensor, shape ``(B, n)`` or ``(n,)``
        Initial coordinates and velocities (a single state is batched to
        ``B = 1``). Inside a ``tf.function`` ``B`` may be unknown.
    t : array_like or tf.Tensor, shape ``(T,)``
        Strictly increasing sample times, ``T >= 2``; ``t[0]`` is the time of
        the initial state. A symbolic ``t`` is checked when the graph runs.
    method : str, keyword-only
        ``"rk4"`` (default), ``"verlet"``, or a compiled pair (``"tsit5"``, ``"dopri8"``, ...;
        every method of the table of :mod:`lnn.integrate._methods` but scipy's).
        Integration scheme: the fixed-step schemes of the module docstring,
        or an adaptive embedded Runge–Kutta pair of :mod:`lnn.solvers`
        (every trajectory with its own step size and error control, dense
        output at ``t``; differentiable step by step, the step sizes held
        fixed; ``substeps`` and ``iterations`` do not apply). An adaptive
        method takes ``tau`` as samples or None (not a controller).
    tau : None, array_like or tensor ``(T, n)`` or ``(1 or B, T, n)``, or callable, keyword-only
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
    jit_compile : bool, optional, keyword-only
        Compile the rollout with XLA. Default: no for the fixed-step methods;
        for the adaptive ones, XLA unless a gradient tape may record or the
        call is inside a ``tf.function`` (its gradient runs without XLA).
    rtol, atol : float or array_like ``(B,)``, optional, keyword-only
        Tolerances of the adaptive methods (default
        :func:`lnn.integrate.default_tolerances`); not accepted by the
        fixed-step ones. The solve runs in the system's dtype (gradients
        reach its variables): a float32 system asked for ``rtol`` below
        1e-6 or ``atol`` below 1e-8 (numbers, not tensors) is solved at
        those, with one :class:`lnn.PrecisionWarning`, instead of its step
        size collapsing on rounding noise.
    max_steps : int, keyword-only
        Step attempts per trajectory of an adaptive method before it fails.

    Returns
    -------
    Trajectory
        ``q``, ``qd``, ``qdd``, ``tau`` ``(B, T, n)`` and ``energy`` ``(B, T)``
        as **TensorFlow tensors** in the system's dtype (so that losses on
        them can be differentiated; call ``.numpy()`` for arrays). Eagerly,
        ``t`` is a numpy array ``(T,)``; while a ``tf.function`` traces, every
        field is a symbolic tensor (``t`` in the system's dtype) whose
        unknown dimensions are ``None``. ``nfev`` counts acceleration
        evaluations per trajectory (for the Lagrangian form of ``"verlet"``,
        evaluations of ``dL/d(q, qd)``; 0 when ``T`` is only known at run
        time); ``method`` is ``"rk4"`` or ``"verlet"``; ``metadata`` holds
        ``substeps`` and ``iterations``.

    Raises
    ------
    ValueError
        For an unknown ``method``, a ``t`` that is not a strictly increasing
        1-D grid of at least two times, inconsistent shapes of ``q0``, ``qd0``
        or ``tau``, or ``substeps`` / ``iterations`` that are not positive integers. Inside a
        graph, what is only known at run time fails there with
        ``tf.errors.InvalidArgumentError`` carrying the same messages.
    TypeError
        If ``system`` lacks a method the chosen scheme needs.
    """
    row = table_method(method, door="odeint")
    if row.adaptive:
        return _adaptive(
            system,
            q0,
            qd0,
            t,
            method=method,
            tau=tau,
            rtol=rtol,
            atol=atol,
            max_steps=max_steps,
            jit_compile=jit_compile,
        )
    if rtol is not None or atol is not None:
        raise ValueError(
            f"rtol and atol apply to the adaptive methods {method_names('compiled')}; "
            f"method {method!r} is fixed-step (use substeps)"
        )
    jit_compile = bool(jit_compile)
    substeps, iterations = _check_options(system, method, substeps, iterations)
    dtype = tf.as_dtype(compute_dtype(system, like=q0))
    inputs = _inputs(system, q0, qd0, t, tau, dtype)
    run = _integrator(
        system,
        method=method,
        substeps=substeps,
        iterations=iterations,
        controller=inputs.controller,
        jit_compile=bool(jit_compile),
        n=inputs.n,
        dtype=dtype,
    )
    with tf.control_dependencies(inputs.checks):
        q0 = tf.identity(inputs.q0)
    paths = run(q0, inputs.qd0, inputs.t, inputs.tau_samples)
    evaluations = scheme(system, method, iterations=iterations).evaluations
    return _trajectory(inputs, paths, method=method, substeps=substeps, iterations=iterations, evaluations=evaluations)


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True, eq=False)
class _Inputs:
    """The checked inputs of one :func:`odeint` call.

    Attributes
    ----------
    n : int
    q0, qd0 : tf.Tensor, shape ``(B, n)``
    t : tf.Tensor, shape ``(T,)``
        In the system's dtype.
    t_np : numpy.ndarray or None
        ``t`` as float64, None when only known at run time.
    batch : int or None
        ``B``, None when only known at run time.
    tau_samples : tf.Tensor, shape ``(1 or B, T, n)``
        Zeros for an unforced system or a controller.
    controller : callable or None
    checks : list
        Run-time assertions of what could not be checked while tracing.
    """

    n: int
    q0: tf.Tensor
    qd0: tf.Tensor
    t: tf.Tensor
    t_np: np.ndarray | None
    batch: int | None
    tau_samples: tf.Tensor
    controller: Any
    checks: list

    @property
    def n_t(self) -> int | None:
        """``T``, None when only known at run time."""
        return None if self.t_np is None else self.t_np.shape[0]


def _adaptive(system, q0, qd0, t, *, method, tau, rtol, atol, max_steps, jit_compile):
    """:func:`odeint` with an adaptive method of :mod:`lnn.solvers` (tensors, differentiable)."""
    for attr in ("acceleration",):
        if not callable(getattr(system, attr, None)):
            raise TypeError(
                f"system must provide a callable {attr}(...) for method={method!r}; got {type(system).__name__}"
            )
    if callable(tau):
        raise ValueError(
            f"method {method!r} takes tau as samples on t or None, not a controller "
            "(its trajectories have their own times); use 'rk4' or 'verlet'"
        )
    max_steps = _validate.positive("max_steps", max_steps, integer=True)
    dtype = tf.as_dtype(compute_dtype(system, like=q0))
    inputs = _inputs(system, q0, qd0, t, tau, dtype)
    default_rtol, default_atol = default_tolerances(system)
    tolerances = []
    for name, value, default in (("rtol", rtol, default_rtol), ("atol", atol, default_atol)):
        value = default if value is None else value
        if not isinstance(value, (tf.Tensor, tf.Variable)):
            array = np.asarray(value, dtype=np.float64)
            if array.ndim > 1 or not (np.all(np.isfinite(array)) and np.all(array > 0)):
                raise ValueError(f"{name} must be a positive finite number or an array (B,); got {value!r}")
        tolerances.append(value)
    if dtype == tf.float32 and not any(isinstance(v, (tf.Tensor, tf.Variable)) for v in tolerances):
        reached = reachable(system, tolerances[0], tolerances[1], stacklevel=4, where="solving in float32")
        if reached is not None:
            tolerances = [r if np.ndim(r) else float(r) for r in reached]
    with tf.control_dependencies(inputs.checks):
        q0 = tf.identity(inputs.q0)
    y0 = tf.concat([q0, inputs.qd0], axis=1)
    tau_samples = None
    if tau is not None:
        tau_samples = tf.broadcast_to(inputs.tau_samples, tf.stack([tf.shape(y0)[0], tf.shape(inputs.t)[0], inputs.n]))
    result = solve(
        system,
        y0,
        inputs.t,
        method=method,
        tau_samples=tau_samples,
        rtol=tolerances[0],
        atol=tolerances[1],
        max_steps=max_steps,
        jit_compile=jit_compile,
        dtype=dtype,
    )
    eager = tf.executing_eagerly()
    failed_at = result.failed_at.numpy().astype(np.float64) if eager else None
    metadata = {"rtol": rtol, "atol": atol, "max_steps": max_steps}
    if eager:
        metadata.update(n_accepted=result.n_accepted.numpy().tolist(), n_rejected=result.n_rejected.numpy().tolist())
    else:
        metadata.update(failed_at=result.failed_at, status=result.status)
    return Trajectory(
        t=inputs.t_np if eager else inputs.t,
        q=result.q,
        qd=result.qd,
        qdd=result.qdd,
        tau=result.tau,
        energy=result.energy,
        nfev=int(result.nfev.numpy()) if eager else 0,
        method=method,
        metadata=metadata,
        failed_at=failed_at,
    )


def _check_options(system, method: str, substeps, iterations) -> tuple[int, int]:
    """``(substeps, iterations)`` as ints, once ``method`` and ``system`` are known to fit."""
    substeps = _validate.positive("substeps", substeps, integer=True)
    iterations = _validate.positive("iterations", iterations, integer=True)
    needed = ("acceleration", "energy") + (("mass_matrix",) if method == "verlet" else ())
    for attr in needed:
        if not callable(getattr(system, attr, None)):
            raise TypeError(
                f"system must provide a callable {attr}(...) for method={method!r}; got {type(system).__name__}"
            )
    return substeps, iterations


def _inputs(system, q0, qd0, t, tau, dtype: tf.DType) -> _Inputs:
    """Check and convert the inputs of :func:`odeint` (statically, or by run-time assertions)."""
    n = int(system.n_dof)
    t_np, t_tensor = _as_times(t, dtype)
    q0 = _as_state(q0, "q0", n, dtype)
    qd0 = _as_state(qd0, "qd0", n, dtype)
    batch_q, batch_qd = q0.shape[0], qd0.shape[0]
    if batch_q is not None and batch_qd is not None and batch_q != batch_qd:
        raise ValueError(
            f"q0 and qd0 must have the same batch size, got shapes {tuple(q0.shape)} and {tuple(qd0.shape)}"
        )
    checks = []
    if batch_q is None or batch_qd is None:
        checks.append(
            tf.debugging.assert_equal(
                tf.shape(q0)[0], tf.shape(qd0)[0], message="q0 and qd0 must have the same batch size"
            )
        )
    batch = batch_q if batch_q is not None else batch_qd
    n_t = None if t_np is None else t_np.shape[0]
    controller = tau if callable(tau) else None
    tau_samples, tau_checks = _torque.tensor_samples(
        None if controller is not None else tau, n=n, n_t=n_t, batch=batch, dtype=dtype, t=t_tensor, q0=q0
    )
    return _Inputs(
        n=n,
        q0=q0,
        qd0=qd0,
        t=t_tensor,
        t_np=t_np,
        batch=batch,
        tau_samples=tau_samples,
        controller=controller,
        checks=checks + tau_checks,
    )


def _is_symbolic(x) -> bool:
    """A graph tensor (no value until the graph runs)."""
    return isinstance(x, tf.Tensor) and not hasattr(x, "numpy")


def _as_times(t, dtype: tf.DType):
    """``(t as float64 numpy or None, t as a (T,) tensor of dtype)``.

    A concrete ``t`` is checked by :func:`lnn._grid.time_grid`; a symbolic
    ``t`` whose value is not known while tracing gets run-time assertions
    instead.
    """
    value = t
    if _is_symbolic(t):
        value = tf.get_static_value(t)
        if value is None:
            return None, _symbolic_times(t, dtype)
    elif isinstance(t, (tf.Tensor, tf.Variable)):
        value = t.numpy()
    t_np = time_grid(value, min_length=2)
    return t_np, tf.constant(t_np, dtype=dtype)


def _symbolic_times(t: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """``t`` cast to ``dtype`` behind run-time assertions of :func:`lnn._grid.time_grid`'s rules."""
    if t.shape.rank is not None and (t.shape.rank != 1 or (t.shape[0] is not None and t.shape[0] < 2)):
        raise ValueError(f"t must have shape (T,) with T >= 2, got shape {tuple(t.shape)}")
    x = tf.cast(t, dtype)
    steps = x[1:] - x[:-1]
    checks = [
        tf.debugging.assert_rank(x, 1, message="t must have shape (T,)"),
        tf.debugging.assert_greater_equal(tf.size(x), 2, message="t must have shape (T,) with T >= 2"),
        tf.debugging.assert_greater(steps, tf.zeros_like(steps), message="t must be finite and strictly increasing"),
        tf.debugging.assert_all_finite(x, "t must be finite and strictly increasing"),
    ]
    with tf.control_dependencies(checks):
        return tf.identity(x)


def _as_state(value, name: str, n: int, dtype: tf.DType) -> tf.Tensor:
    """An initial state as a ``(B, n)`` tensor of ``dtype`` (``B`` may be unknown).

    Arrays and lists are checked by :func:`lnn._validate.state` (without the
    finiteness check, which a symbolic input could not have: a NaN state gives
    a NaN trajectory in both cases). Tensors, which may be watched by a
    gradient tape or be symbolic, stay tensors and are checked statically.
    """
    if not isinstance(value, (tf.Tensor, tf.Variable)):
        array, _ = _validate.state(name, value, n, dtype=dtype.as_numpy_dtype, finite=False)
        return tf.constant(array, dtype=dtype)
    x = tf.cast(value, dtype)
    if x.shape.rank == 1:
        x = x[tf.newaxis]
    if x.shape.rank != 2 or x.shape[1] not in (n, None):
        shape = tuple(value.shape) if value.shape.rank is not None else ("unknown rank",)
        raise ValueError(f"{name} must have shape (B, {n}) or ({n},), got shape {shape}")
    if x.shape[1] is None:
        x = tf.ensure_shape(x, (None, n))
    return x


# ----------------------------------------------------------------------------- the compiled rollout


def _integrator(system, *, method, substeps, iterations, controller, jit_compile, n, dtype):
    """The compiled rollout for ``system`` and these options (cached)."""
    key = (method, substeps, iterations, controller, jit_compile, n, dtype)
    try:
        per_system = _CACHE.setdefault(system, {})
    except TypeError:  # neither weak-referenceable nor hashable: no cache
        per_system = {}
    if key not in per_system:
        per_system[key] = _build(
            system,
            method=method,
            substeps=substeps,
            iterations=iterations,
            controller=controller,
            jit_compile=jit_compile,
            n=n,
            dtype=dtype,
        )
    return per_system[key]


def _build(system, *, method, substeps, iterations, controller, jit_compile, n, dtype):
    """Trace-once ``tf.function`` ``run(q0, qd0, t, tau_samples) -> (q, qd, qdd, tau, energy)``.

    Inputs ``(B, n)``, ``(B, n)``, ``(T,)``, ``(1 or B, T, n)``; outputs
    batch-first, ``(B, T, n)`` and ``(B, T)``. Under ``jit_compile`` the
    body traces inside :func:`lnn._runtime.xla_body`, so that the mechanics
    pick their XLA forms.
    """
    chosen = scheme(system, method, iterations=iterations)

    def interval(state, elems):
        """The state at the end of one interval of the grid, from the state at its start."""
        t_a, t_b, tau_a, tau_b = elems
        force = _torque.interval_force(controller, tau_a, tau_b, t_a, t_b, dtype=dtype)
        h = (t_b - t_a) / substeps
        if substeps == 1:
            return chosen.step(state, t_a, h, force)

        def body(j, *state):
            s = t_a + tf.cast(j, dtype) * h
            return (j + 1,) + chosen.step(state, s, h, force)

        return tf.while_loop(lambda j, *_: j < substeps, body, (tf.constant(0),) + state)[1:]

    def run(q0, qd0, t, tau_samples):
        tau_t = tf.transpose(tau_samples, [1, 0, 2])  # (T, 1 or B, n)
        q_path, qd_path = tf.scan(
            interval, (t[:-1], t[1:], tau_t[:-1], tau_t[1:]), initializer=chosen.initial(q0, qd0)
        )[:2]
        q = tf.concat([q0[tf.newaxis], q_path], axis=0)  # (T, B, n)
        qd = tf.concat([qd0[tf.newaxis], qd_path], axis=0)
        tau_all = _torque.tensor_at_samples(controller, t, q, qd, tau_t, dtype=dtype)
        return _at_samples(system, q, qd, tau_all)

    spec_state = tf.TensorSpec([None, n], dtype)
    return tf.function(
        _runtime.xla_body(run) if jit_compile else run,
        input_signature=[spec_state, spec_state, tf.TensorSpec([None], dtype), tf.TensorSpec([None, None, n], dtype)],
        jit_compile=jit_compile,
        autograph=False,  # no Python control flow on tensors (as every tf.function of the package): autograph's
        # conversion of the step and the mechanics was over a third of a learned model's first trace
        reduce_retracing=True,
    )


def _at_samples(system, q, qd, tau):
    """Batch-first ``(q, qd, qdd, tau, energy)`` from time-major ``q, qd, tau (T, B, n)``.

    ``qdd`` and ``energy`` are evaluated in one batched call each.
    """
    shape = tf.shape(q)
    flat = (shape[0] * shape[1], q.shape[-1])
    q_flat, qd_flat = tf.reshape(q, flat), tf.reshape(qd, flat)
    qdd = tf.reshape(system.acceleration(q_flat, qd_flat, tf.reshape(tau, flat)), shape)
    energy = tf.reshape(system.energy(q_flat, qd_flat), shape[:2])
    perm = [1, 0, 2]
    return (
        tf.transpose(q, perm),
        tf.transpose(qd, perm),
        tf.transpose(qdd, perm),
        tf.transpose(tau, perm),
        tf.transpose(energy),
    )


def _trajectory(inputs: _Inputs, paths, *, method: str, substeps: int, iterations: int, evaluations: int) -> Trajectory:
    """The :class:`lnn.Trajectory` of a run: concrete ``t`` eagerly, symbolic in a graph."""
    q, qd, qdd, tau, energy = paths
    n_t = inputs.n_t
    if not tf.executing_eagerly():
        for x in (q, qd, qdd, tau):
            x.set_shape((inputs.batch, n_t, inputs.n))
        energy.set_shape((inputs.batch, n_t))
    nfev = 0 if n_t is None else evaluations * substeps * (n_t - 1) + n_t
    return Trajectory(
        t=inputs.t_np if tf.executing_eagerly() else inputs.t,
        q=q,
        qd=qd,
        qdd=qdd,
        tau=tau,
        energy=energy,
        nfev=nfev,
        method=method,
        metadata={"substeps": substeps, "iterations": iterations},
    )


# ----------------------------------------------------------------------------- lnn.rollout


def solve_fixed_step(problem: Problem, progress=None) -> Solution:
    """:func:`lnn.rollout` with a fixed-step method: :func:`odeint` eagerly, numpy results.

    The steps are the intervals of ``t``, each cut into ``ceil(interval /
    max_step)`` substeps when ``max_step`` is finite. A trajectory whose state
    becomes non-finite fails at the first such sample (the scheme cannot shrink
    its step). Sampled forces only, interpolated linearly (in TensorFlow a
    controller would have to be traced: use :func:`odeint` itself).
    """
    torque = problem.torque
    if torque.controller is not None or torque.hold:
        raise TypeError(
            f"method {problem.name!r} in lnn.rollout takes tau as samples on t, interpolated linearly (or None); "
            "use lnn.odeint.odeint for a controller written in TensorFlow, or a solve_ivp method such as 'DOP853'"
        )
    t, n = problem.t, problem.n
    substeps = 1
    if np.isfinite(problem.max_step) and t.shape[0] > 1:
        substeps = max(1, int(np.ceil(float(np.max(np.diff(t))) / problem.max_step - 1e-12)))
    result = odeint(
        problem.system,
        problem.y0[:, :n],
        problem.y0[:, n:],
        t,
        method=problem.name,
        tau=torque.samples,
        substeps=substeps,
    )
    Y = np.concatenate([np.asarray(result.q, np.float64), np.asarray(result.qd, np.float64)], axis=2)
    finite = np.isfinite(Y).all(axis=2)  # (B, T)
    failures = []
    for b in np.flatnonzero(~finite.all(axis=1)):
        k = int(np.argmin(finite[b]))
        Y[b, k:] = np.nan
        failures.append(
            Failure(int(b), float(t[k]), f"the state became non-finite at t = {t[k]:.6g} s ({problem.name})")
        )
    qdd, energy = np.asarray(result.qdd, np.float64), np.asarray(result.energy, np.float64)
    bad = ~np.isfinite(Y).all(axis=2)
    qdd[bad], energy[bad] = np.nan, np.nan
    if progress is not None:
        span = float(t[-1] - t[0])
        progress(span, span)
    return Solution(
        Y=Y, qdd=qdd, energy=energy, nfev=result.nfev, failures=tuple(failures), metadata={"substeps": substeps}
    )
