"""Roll out any mechanical system with scipy's ``solve_ivp`` (numpy + scipy only).

:func:`rollout` integrates a whole batch of initial states as **one** ODE
state, ``y = [q_1, qd_1, q_2, qd_2, ..., q_B, qd_B]`` of length ``2 n B``, so
that the solver calls the system once per stage for the whole batch instead of
looping over trajectories in Python. scipy's ``(2 n B, T)`` output layout is
transposed once, here, into the batch-first :class:`lnn.Trajectory`.

The vector field of trajectory ``b`` depends on trajectory ``b`` only, so its
Jacobian is block diagonal with ``2n x 2n`` blocks::

    d[qd, qdd]/d[q, qd] = [[0, I], [d qdd/d q, d qdd/d qd]]

Implicit methods receive it as a ``scipy.sparse`` matrix (Radau, BDF) or in
LAPACK band storage (LSODA) assembled from ``system.acceleration_jacobian``
when the system has one; otherwise they receive the block sparsity pattern
(``jac_sparsity``, or the band widths for LSODA) so that scipy's finite
differences and linear algebra stay linear in ``B``.

A trajectory that fails (its acceleration raises, e.g. a learned mass matrix
that is not positive definite, or its state becomes non-finite) does not take
the batch with it: the solver is stepped here, ``solve_ivp``'s loop written
out, and restarted without the failed trajectories from the last accepted
step; ``on_failure`` decides between one :class:`IntegrationError` naming
every failure and a masked result (``Trajectory.failed_at``). The explicit
methods control every trajectory's own error norm (``error_control``).

``method="tsit5" | "dopri5" | "dopri8" | "dopri853"`` dispatch to the compiled embedded
Runge–Kutta pairs of :mod:`lnn.solvers` (imported lazily). :func:`odeint` is
a lazy entry point to the in-graph TensorFlow integrators of
:mod:`lnn.odeint`; this module itself never imports TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.integrate
import scipy.sparse

from lnn import _validate
from lnn._grid import time_grid
from lnn._torque import NumpyTorque, check_interpolation
from lnn.solvers import NAMES as COMPILED_METHODS
from lnn.trajectory import Failure, Trajectory

__all__ = [
    "METHODS",
    "COMPILED_METHODS",
    "IMPLICIT_METHODS",
    "AUTO",
    "choose_method",
    "ON_FAILURE",
    "ERROR_CONTROL",
    "Failure",
    "IntegrationError",
    "MaskedEvaluation",
    "evaluate_masked",
    "rollout",
    "odeint",
    "default_tolerances",
]

#: Every method of :func:`scipy.integrate.solve_ivp`, accepted by :func:`rollout`.
METHODS = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")
#: The methods that use a Jacobian of the vector field.
IMPLICIT_METHODS = ("Radau", "BDF", "LSODA")
#: ``rollout(method=AUTO)``: :func:`choose_method` picks the method.
AUTO = "auto"
#: What :func:`rollout` does with a trajectory that fails.
ON_FAILURE = ("raise", "mask")
#: Whose local error the step-size control of :func:`rollout`'s scipy methods bounds.
ERROR_CONTROL = ("trajectory", "batch")
_SCIPY_SOLVERS = {
    "RK23": scipy.integrate.RK23,
    "RK45": scipy.integrate.RK45,
    "DOP853": scipy.integrate.DOP853,
    "Radau": scipy.integrate.Radau,
    "BDF": scipy.integrate.BDF,
    "LSODA": scipy.integrate.LSODA,
}
#: Progress is reported at most this often, as a fraction of the time span.
_PROGRESS_STEP = 0.01


class IntegrationError(RuntimeError):
    """A rollout in which some trajectories failed (``on_failure="raise"``).

    Attributes
    ----------
    failures : tuple of Failure
        One ``(index, time, reason)`` per failed trajectory, by index.
    time : float
        The earliest failure time (s).
    trajectories : tuple of int
        Indices (over the batch ``B``) of the failed trajectories.
    trajectory : Trajectory or None
        The masked result (what ``on_failure="mask"`` returns), when the solve
        got that far.
    """

    def __init__(
        self,
        message: str,
        *,
        time: float,
        trajectories: tuple[int, ...] = (),
        failures: tuple = (),
        trajectory: Trajectory | None = None,
    ) -> None:
        super().__init__(message)
        self.time = float(time)
        self.trajectories = tuple(int(i) for i in trajectories)
        self.failures = tuple(failures)
        self.trajectory = trajectory

    @classmethod
    def of(cls, failures, *, batch: int, method: str, trajectory=None) -> IntegrationError:
        """The error naming every one of ``failures`` (:class:`Failure`) of a batch of ``batch``."""
        failures = tuple(sorted(failures, key=lambda f: f.index))
        lines = "; ".join(f"trajectory {f.index} at t = {f.time:.6g} s: {f.reason}" for f in failures)
        indices = [f.index for f in failures]
        return cls(
            f"{len(failures)} of {batch} trajectory(ies) {indices} failed ({method}): {lines}",
            time=min(f.time for f in failures),
            trajectories=tuple(indices),
            failures=failures,
            trajectory=trajectory,
        )


def choose_method(system, *, tau=None) -> str:
    """The method of ``rollout(..., method="auto")``: the fastest path measured for the system.

    ``"dopri8"`` (compiled, :mod:`lnn.solvers`) for a learned float64 model
    (one with a ``numpy_snapshot``, whose ``acceleration`` is TensorFlow)
    without a controller: at every batch size it is faster than scipy's
    stepping, and of the compiled pairs the fastest or within 13 % of it,
    and the most accurate (``benchmarks/bench_rollout.py``, one core, rtol
    1e-6: 0.029 s against 0.57 s for one 10 s trajectory of a 64x64 double
    pendulum, 4.6 s against 11.7 s for 256; the fastest at every batch size
    for a 7-DOF chain, 29 s for 256; at the default, tighter, tolerances
    the 8th order gains more); with a second core the first rollout of a
    new shape does not wait for XLA. ``"DOP853"``
    otherwise: for numpy systems (ground truth), for a controller
    ``tau(t, q, qd)`` (the compiled methods take sampled forces only), and
    for float32 models, which scipy integrates in float64 (the compiled
    methods integrate in the model's dtype; ``model.astype("float64")``
    gives the compiled path).

    Parameters
    ----------
    system : MechanicalSystem
    tau : None, array_like or callable, optional, keyword-only
        The ``tau`` that :func:`rollout` gets.

    Returns
    -------
    str
        A name of :data:`COMPILED_METHODS` or :data:`METHODS`.
    """
    learned = callable(getattr(system, "numpy_snapshot", None))
    float64 = str(getattr(system, "dtype", "")) in ("float64", "<dtype: 'float64'>")
    return "dopri8" if learned and float64 and not callable(tau) else "DOP853"


def rollout(
    system,
    q0,
    qd0,
    t,
    *,
    tau=None,
    tau_interpolation: str = "linear",
    method: str = "DOP853",
    rtol=None,
    atol=None,
    max_step: float = np.inf,
    on_failure: str = "raise",
    error_control: str | None = None,
    max_steps: int = 100_000,
    progress: Callable[..., None] | None = None,
) -> Trajectory:
    """Integrate a batch of initial states of a mechanical system with ``solve_ivp``.

    Parameters
    ----------
    system : MechanicalSystem
        Anything with ``n_dof`` and ``acceleration(q, qd, tau=None)`` (and
        ``energy(q, qd)``); ``numpy_acceleration`` is used instead of
        ``acceleration`` when present, ``acceleration_jacobian`` feeds the
        implicit methods when present. A ``numpy_snapshot()`` (learned
        models) is taken once and gives both the accelerations and the
        energies.
    q0, qd0 : array_like, shape ``(B, n)`` or ``(n,)``
        Initial coordinates and velocities; a single state ``(n,)`` gives
        ``B = 1``.
    t : array_like, shape ``(T,)``
        Strictly increasing sample times; the integration runs from ``t[0]``
        to ``t[-1]`` and the solution is evaluated at every ``t`` (the
        solver's own steps are independent of this grid).
    tau : None, array_like or callable, optional
        Generalized forces (the rule of :mod:`lnn._torque`, shared with
        :func:`odeint`). ``None``: unforced. An array of shape ``(T, n)``
        (the same for every trajectory), ``(1, T, n)`` or ``(B, T, n)``
        sampled on ``t`` and interpolated between samples according to
        ``tau_interpolation``. A
        callable ``tau(t, q, qd) -> (B, n)`` (a controller) with ``t`` a float
        and ``q, qd`` of shape ``(B, n)``.
    tau_interpolation : {"linear", "hold"}, optional
        How an array ``tau`` is evaluated between samples: linear
        interpolation, or zero-order hold (the last sample at or before the
        time). A held ``tau`` is discontinuous at the samples, which costs
        the adaptive solvers some rejected steps there.
    method : str, optional
        ``"RK23"``, ``"RK45"``, ``"DOP853"``, ``"Radau"``, ``"BDF"``,
        ``"LSODA"``: the ``solve_ivp`` method (numpy; the whole batch is one
        ODE state with one step size). ``"tsit5"``, ``"dopri5"``,
        ``"dopri8"``, ``"dopri853"``: the compiled embedded Runge–Kutta pairs of
        :mod:`lnn.solvers` (Tsitouras 5(4), Dormand–Prince 5(4),
        Prince–Dormand 8(7) as diffrax's ``Dopri8``, and Dormand–Prince
        8(5,3) with DOP853's coefficients), for systems whose
        ``acceleration`` accepts TensorFlow tensors (learned models): the whole
        solve runs in one XLA-compiled graph, every trajectory with its own
        step size (compiled once per system, method and input shape, on a
        background thread: the first rollout of a shape runs as a plain
        graph meanwhile; at once on a single usable core). ``"auto"``: :func:`choose_method` (``"dopri8"`` for
        a learned float64 model, else ``"DOP853"``).
    rtol, atol : float or array_like ``(B,)``, optional
        Relative and absolute tolerances of the solver; default
        :func:`default_tolerances` of ``system`` (``1e-8, 1e-10``, or
        ``1e-6, 1e-8`` for a float32 model, whose vector field is smooth only
        to ~1e-7: tighter tolerances make the solver chase round-off, with
        many more steps and no more accuracy). An array gives every
        trajectory its own tolerance (the compiled methods, and the explicit
        scipy methods with ``error_control="trajectory"``).
    max_step : float, optional
        Largest step the solver may take (s).
    on_failure : {"raise", "mask"}, optional
        What a trajectory that fails (its learned mass matrix is not positive
        definite, its state becomes non-finite, its step size becomes too
        small) does to the batch. Either way it stops at its failure and the
        others continue to ``t[-1]``. ``"raise"``: one
        :class:`IntegrationError` naming every failed trajectory with its
        time and reason is raised at the end. ``"mask"``: the result is
        returned with the failed trajectories' samples after their failure
        set to NaN, ``Trajectory.failed_at`` (``(B,)``: the failure times, NaN
        for the trajectories that finished) and ``Trajectory.failures``.
    error_control : {"trajectory", "batch"}, optional
        For the scipy methods, whose batch shares one step size: with
        ``"trajectory"`` a step is accepted only when **every** trajectory's
        own error estimate (scipy's root-mean-square norm over its ``2n``
        components) meets its tolerance, so each trajectory meets the
        tolerance a solo solve would (the explicit methods compute the norm
        per trajectory and take the largest; the implicit ones, whose norm
        is inside scipy's Newton iterations, get the same guarantee from
        tolerances divided by ``sqrt(B)``, which costs them about
        ``B**(1/(2(p+1)))`` times the steps). ``"batch"``: scipy's norm over
        the whole stacked state (one trajectory's local error may then
        exceed its tolerance by up to ``sqrt(B)``). Default: ``"trajectory"``
        for RK23, RK45 and DOP853, ``"batch"`` for Radau, BDF and LSODA. The
        compiled methods always control every trajectory's error.
    max_steps : int, optional
        Step attempts per trajectory of the compiled methods before the
        trajectory fails.
    progress : callable, optional
        ``progress(done, total)`` with the simulated time reached and the
        total time span (s), called at most about every 1 % of the span.

    Returns
    -------
    Trajectory
        ``t (T,)``; ``q, qd, qdd, tau (B, T, n)``; ``energy (B, T)``;
        ``failed_at (B,)``. ``qdd`` and ``energy`` are evaluated once,
        batched, at the samples (``energy`` is NaN for a model without one,
        such as :class:`lnn.baseline.AccelerationMLP`; ``qdd`` is NaN at a
        sample whose mass matrix is not positive definite);
        ``tau`` holds the forces applied at the samples (zeros when
        unforced). ``metadata`` holds the solver's counters and tolerances.

    Raises
    ------
    ValueError
        For an unknown ``method`` (the message lists the methods),
        ``tau_interpolation``, ``on_failure`` or ``error_control``, shapes
        that do not match ``system.n_dof``, non-finite inputs, non-increasing
        ``t`` or tolerances (``rtol``, ``atol``, ``max_step``) that are not
        positive.
    TypeError
        If ``system`` lacks ``n_dof`` or ``acceleration``, ``tau`` is of an
        unsupported type, or a compiled method is asked of a system whose
        ``acceleration`` does not accept TensorFlow tensors.
    IntegrationError
        (a ``RuntimeError``, with ``on_failure="raise"``) when trajectories
        failed: a state became non-finite, the solver's step size became too
        small, or the system's acceleration raised an ``ArithmeticError`` or
        ``ValueError`` (e.g. :class:`lnn.fast.IndefiniteMassMatrixError` for
        a learned mass matrix that is not positive definite; the rows of its
        ``trajectories`` attribute, or of its ``health``, are the failing
        ones). Its ``failures`` name every failed trajectory with its time
        and reason, ``trajectory`` holds the masked result, and the first
        exception raised by the system is the ``__cause__``.
    """
    if isinstance(method, str) and method == AUTO:
        method = choose_method(system, tau=tau)
    problem = _problem(
        system,
        q0,
        qd0,
        t,
        tau=tau,
        tau_interpolation=tau_interpolation,
        method=method,
        rtol=rtol,
        atol=atol,
        max_step=max_step,
        on_failure=on_failure,
        error_control=error_control,
    )
    if method in COMPILED_METHODS:
        from lnn.solvers import compiled_rollout

        max_steps = _validate.positive("max_steps", max_steps, integer=True)
        result, cause = compiled_rollout(problem, max_steps=max_steps, progress=progress)
    else:
        clock = _Clock(problem.t, progress)
        solution = _solve(problem, clock)
        clock.finish()
        result, cause = _trajectory(problem, solution), solution.cause
    return _finish(result, problem, cause)


def _finish(result: Trajectory, problem, cause) -> Trajectory:
    """``result``, or the :class:`IntegrationError` of its failures under ``on_failure="raise"``."""
    if result.failures and problem.on_failure == "raise":
        error = IntegrationError.of(result.failures, batch=problem.B, method=problem.method, trajectory=result)
        raise error from cause
    return result


#: Rows per call when the accelerations are evaluated at the samples after a solve. One
#: call over 256 x 101 samples of a learned 64x64 model allocates ~40 MB of temporaries
#: and took 0.50 s; blocks of 1024 rows stay in cache: 0.22 s (4096 rows: 0.29 s).
_SAMPLE_BLOCK = 1024


def default_tolerances(system) -> tuple[float, float]:
    """``(rtol, atol)`` that suit ``system``'s arithmetic.

    Parameters
    ----------
    system : MechanicalSystem
        Read for a ``dtype`` attribute (learned models have one).

    Returns
    -------
    tuple of float
        ``(1e-6, 1e-8)`` for a float32 system, ``(1e-8, 1e-10)`` otherwise.
    """
    if str(getattr(system, "dtype", "float64")) == "float32":
        return 1e-6, 1e-8
    return 1e-8, 1e-10


def odeint(system, q0, qd0, t, *, method: str = "rk4", tau=None, **options) -> Trajectory:
    """Fixed-step, differentiable rollout in TensorFlow (lazy wrapper of :mod:`lnn.odeint`).

    Imports TensorFlow only when called, so that :mod:`lnn.integrate` stays
    numpy + scipy.

    Parameters
    ----------
    system : MechanicalSystem
        A system whose ``acceleration`` accepts tensors (e.g. a
        :class:`lnn.LagrangianNetwork`).
    q0, qd0 : array_like or tf.Tensor, shape ``(B, n)``
        Initial coordinates and velocities.
    t : array_like, shape ``(T,)``
        Sample times; the fixed steps run between consecutive samples.
    method : str, optional
        The fixed-step scheme (see :func:`lnn.odeint.odeint`), ``"rk4"`` by
        default.
    tau : None, array_like ``(T, n)`` or ``(1 or B, T, n)``, or callable, optional
        Generalized forces, as in :func:`lnn.odeint.odeint`.
    **options
        The other keyword-only options of :func:`lnn.odeint.odeint`
        (``substeps``, ``iterations``, ``jit_compile``).

    Returns
    -------
    Trajectory
        ``q, qd, qdd, tau (B, T, n)``, ``energy (B, T)`` as tensors, eagerly
        and inside a ``tf.function`` alike (see :func:`lnn.odeint.odeint`).
    """
    from lnn.odeint import odeint as _odeint

    return _odeint(system, q0, qd0, t, method=method, tau=tau, **options)


# ----------------------------------------------------------------------------- the problem


@dataclass(frozen=True, eq=False)
class _Problem:
    """The checked inputs of one :func:`rollout`.

    Attributes
    ----------
    system : MechanicalSystem
    n, B : int
        Degrees of freedom and batch size.
    t : numpy.ndarray, shape ``(T,)``
    y0 : numpy.ndarray, shape ``(2 n B,)``
        The initial ODE state ``[q_1, qd_1, ..., q_B, qd_B]``.
    method : str
    rtol, atol : numpy.ndarray, shape ``(B,)``
        Per-trajectory tolerances.
    max_step : float
    on_failure, error_control : str
    tau_interpolation : str
    torque : lnn._torque.NumpyTorque
    acceleration : callable
        ``acceleration(q, qd, tau) -> (B, n)`` float64 (see :func:`_acceleration_function`).
    energy : callable or None
        ``energy(q, qd) -> (B,)``; None for a system without one.
    """

    system: Any
    n: int
    B: int
    t: np.ndarray
    y0: np.ndarray
    method: str
    rtol: np.ndarray
    atol: np.ndarray
    max_step: float
    on_failure: str
    error_control: str
    tau_interpolation: str
    torque: NumpyTorque
    acceleration: Callable
    energy: Callable | None


def _problem(
    system, q0, qd0, t, *, tau, tau_interpolation, method, rtol, atol, max_step, on_failure="raise", error_control=None
) -> _Problem:
    """Check the inputs of :func:`rollout` (raising its ``ValueError`` / ``TypeError``)."""
    if not isinstance(method, str) or method not in METHODS + COMPILED_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(COMPILED_METHODS)} (compiled, "
            f"lnn.solvers), {', '.join(METHODS)} or {AUTO!r}; got {method!r}"
        )
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {ON_FAILURE}; got {on_failure!r}")
    if error_control is None:
        error_control = "batch" if method in IMPLICIT_METHODS else "trajectory"
    if error_control not in ERROR_CONTROL:
        raise ValueError(f"error_control must be one of {ERROR_CONTROL}; got {error_control!r}")
    check_interpolation(tau_interpolation)
    n = _check_system(system)
    q0, _ = _validate.state("q0", q0, n)
    qd0, _ = _validate.state("qd0", qd0, n)
    if q0.shape != qd0.shape:
        raise ValueError(f"q0 and qd0 must have the same shape; got {q0.shape} and {qd0.shape}")
    B = q0.shape[0]
    t = time_grid(t)
    default_rtol, default_atol = default_tolerances(system)
    rtol = _tolerance("rtol", default_rtol if rtol is None else rtol, B)
    atol = _tolerance("atol", default_atol if atol is None else atol, B)
    if method in METHODS and np.ptp(rtol) > 0:
        raise ValueError(
            f"a per-trajectory rtol needs a compiled method "
            f"({', '.join(COMPILED_METHODS)}); {method} takes one rtol (per-trajectory "
            f"atol is accepted); got rtol of {rtol.min():g} to {rtol.max():g}"
        )
    max_step = np.inf if max_step == np.inf else _validate.positive("max_step", max_step)
    torque = NumpyTorque.build(tau, t, batch=B, n=n, interpolation=tau_interpolation)
    take_snapshot = getattr(system, "numpy_snapshot", None)
    # Once per rollout; the compiled methods evaluate the system in TensorFlow instead.
    snapshot = take_snapshot() if take_snapshot is not None and method in METHODS else None
    return _Problem(
        system=system,
        n=n,
        B=B,
        t=t,
        y0=np.concatenate([q0, qd0], axis=1).ravel(),
        method=method,
        rtol=rtol,
        atol=atol,
        max_step=float(max_step),
        on_failure=on_failure,
        error_control=error_control,
        tau_interpolation=tau_interpolation,
        torque=torque,
        acceleration=(_acceleration_function(system, snapshot) if method in METHODS else system.acceleration),
        energy=snapshot.energy if snapshot is not None else getattr(system, "energy", None),
    )


def _tolerance(name: str, value, B: int) -> np.ndarray:
    """A tolerance, one positive finite number or one per trajectory, as an array ``(B,)``."""
    if np.ndim(value) == 0:
        return np.full(B, _validate.positive(name, value))
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a positive number or an array of shape (B,) = ({B},); got {type(value).__name__}"
        ) from None
    if array.shape != (B,):
        raise ValueError(
            f"{name} must be a positive number or an array of shape (B,) = ({B},); got shape {array.shape}"
        )
    if not (np.all(np.isfinite(array)) and np.all(array > 0)):
        raise ValueError(f"{name} must be positive and finite; got {array.tolist()}")
    return array


def _check_system(system) -> int:
    """``system.n_dof``, once ``system`` has what :func:`rollout` calls."""
    for attribute in ("n_dof", "acceleration"):
        if not hasattr(system, attribute):
            raise TypeError(
                f"system must satisfy lnn.MechanicalSystem (at least n_dof and acceleration); "
                f"{type(system).__name__} has no {attribute!r}"
            )
    n = system.n_dof
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise TypeError(f"system.n_dof must be a positive int; got {n!r}")
    return int(n)


def _acceleration_function(system, snapshot):
    """Return ``f(q, qd, tau) -> (B, n)`` float64 ndarray, the fastest path the system has.

    ``snapshot`` is ``system.numpy_snapshot()``, or None for a system without one.
    """
    fast = snapshot.acceleration if snapshot is not None else getattr(system, "numpy_acceleration", None)
    slow = system.acceleration

    def acceleration(q, qd, tau):
        result = np.asarray(fast(q, qd, tau) if fast is not None else slow(q, qd, tau), dtype=np.float64)
        if result.shape != q.shape:
            raise ValueError(
                f"{type(system).__name__}.acceleration must return the shape of q, {q.shape}; got shape {result.shape}"
            )
        return result

    return acceleration


# ----------------------------------------------------------------------------- the solve


class _Clock:
    """The simulated time the solver has reached; reported every ~1 % of the span."""

    def __init__(self, t: np.ndarray, progress: Callable[..., None] | None) -> None:
        self.t0 = float(t[0])
        self.span = float(t[-1]) - self.t0
        self.progress = progress
        self.reached = self.next_report = self.t0

    def advance(self, time: float) -> None:
        """Note that the solver evaluated the vector field at ``time``."""
        if time > self.reached:
            self.reached = time
            if self.progress is not None and time >= self.next_report:
                self.progress(time - self.t0, self.span)
                self.next_report = time + _PROGRESS_STEP * self.span

    def finish(self) -> None:
        """Report the whole span done."""
        if self.progress is not None:
            self.progress(self.span, self.span)


class _Failed(Exception):
    """Raised by the vector field to stop a solve: rows (of the active batch) that failed."""

    def __init__(self, rows, reasons, time: float, cause=None) -> None:
        super().__init__(f"rows {list(rows)} failed at t = {time}")
        self.rows = np.asarray(rows, dtype=np.int64)
        self.reasons = list(reasons)
        self.time = float(time)
        self.cause = cause


def _non_finite_reason(time: float, method: str) -> str:
    return (
        f"the state became non-finite at t = {time:.6g} s ({method}); the system diverged "
        "or its acceleration is undefined there"
    )


def _vector_field(problem: _Problem, clock: _Clock, active: np.ndarray) -> Callable:
    """``rhs(time, y) -> dy``, ``(2 n b,)`` for the ``b`` trajectories ``active``.

    Rows whose state or acceleration is non-finite, or whose acceleration
    raised, stop the solve with :class:`_Failed` (the driver restarts it
    without them).
    """
    b, n, method = active.shape[0], problem.n, problem.method
    torque, acceleration = problem.torque, problem.acceleration
    if not torque.is_none:
        torque = torque.subset(active)

    def rhs(time, y):
        Y = y.reshape(b, 2 * n)
        q, qd = Y[:, :n], Y[:, n:]
        tau_now = torque(time, q, qd)
        try:
            qdd = acceleration(q, qd, tau_now)
        except (ArithmeticError, ValueError) as exc:  # LinAlgError is a ValueError
            bad = np.flatnonzero(~np.isfinite(Y).all(axis=1))
            if bad.size:  # a non-finite state is the better explanation
                raise _Failed(bad, [_non_finite_reason(time, method)] * bad.size, time) from None
            rows = _failing_rows(exc, acceleration, q, qd, tau_now)
            reason = f"the system's acceleration failed at t = {time:.6g} s ({method}): {_short(exc)}"
            raise _Failed(rows, [reason] * rows.size, time, exc) from None
        dy = np.concatenate((qd, qdd), axis=1)
        # One dot product is the cheap test for NaN/inf (in qd or qdd); rows are inspected
        # only when it fails. A finite step of finite derivatives keeps q finite.
        flat = dy.ravel()
        if not math.isfinite(flat @ flat):
            bad = np.flatnonzero(~np.isfinite(np.concatenate((Y, qdd), axis=1)).all(axis=1))
            raise _Failed(bad, [_non_finite_reason(time, method)] * bad.size, time)
        clock.advance(time)
        return flat

    return rhs


def _short(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _failing_rows(exc: BaseException, fn: Callable, q, qd, tau) -> np.ndarray:
    """The rows of a batch call ``fn(q, qd, tau)`` that raised ``exc``.

    From the exception's ``trajectories`` attribute
    (:class:`lnn.fast.IndefiniteMassMatrixError`), else its ``health``'s
    per-sample eigenvalues (:class:`lnn.mechanics.MassMatrixError`), else by
    calling ``fn`` row by row.
    """
    rows = getattr(exc, "trajectories", None)
    if rows:
        return np.unique(np.asarray(rows, dtype=np.int64))
    health = getattr(exc, "health", None)
    eigenvalues = getattr(health, "min_eigenvalues", None)
    if eigenvalues is not None and np.shape(eigenvalues) == (q.shape[0],):
        bad = np.flatnonzero(~(np.asarray(eigenvalues) > 0))
        if bad.size:
            return bad
    if q.shape[0] == 1:
        return np.zeros(1, dtype=np.int64)
    bad = []
    for i in range(q.shape[0]):
        try:
            value = fn(q[i : i + 1], qd[i : i + 1], None if tau is None else tau[i : i + 1])
            if not np.all(np.isfinite(value)):
                bad.append(i)
        except (ArithmeticError, ValueError):
            bad.append(i)
    return np.asarray(bad if bad else range(q.shape[0]), dtype=np.int64)


@dataclass(frozen=True)
class MaskedEvaluation:
    """A batch evaluation in which the samples that failed are NaN instead of refusing the batch.

    Attributes
    ----------
    values : numpy.ndarray, shape ``(N, n)``
        The results, NaN in the failed rows.
    failed : numpy.ndarray of bool, shape ``(N,)``
    reasons : dict
        Row index -> the reason it failed (the system's message, or
        ``"non-finite result"``).
    """

    values: np.ndarray
    failed: np.ndarray
    reasons: dict

    @property
    def n_failed(self) -> int:
        """Number of failed rows."""
        return int(self.failed.sum())


def evaluate_masked(fn: Callable, q, qd, tau=None) -> MaskedEvaluation:
    """``fn(q, qd, tau)`` on a batch, the rows that fail set to NaN (the others as computed).

    A system's batch call (``acceleration``, ``numpy_acceleration``) refuses
    the whole batch when one sample's learned mass matrix is not positive
    definite; here the failing rows are found (:class:`lnn.fast.IndefiniteMassMatrixError`
    names them; otherwise the error's health report, or row by row), set to
    NaN and recorded, and the other rows are evaluated again.

    Parameters
    ----------
    fn : callable
        ``fn(q, qd, tau) -> (N, n)`` (``tau`` may be None).
    q, qd : numpy.ndarray, shape ``(N, n)``
    tau : numpy.ndarray, shape ``(N, n)``, optional

    Returns
    -------
    MaskedEvaluation
    """
    q, qd = np.asarray(q, dtype=np.float64), np.asarray(qd, dtype=np.float64)
    tau = None if tau is None else np.asarray(tau, dtype=np.float64)
    N = q.shape[0]
    values = np.full(q.shape, np.nan)
    failed = ~(np.isfinite(q).all(axis=1) & np.isfinite(qd).all(axis=1))
    reasons = {int(i): "non-finite state" for i in np.flatnonzero(failed)}
    while True:
        rows = np.flatnonzero(~failed)
        if rows.size == 0:
            break
        sub_tau = None if tau is None else tau[rows]
        try:
            out = np.asarray(fn(q[rows], qd[rows], sub_tau), dtype=np.float64)
        except (ArithmeticError, ValueError) as exc:
            bad = rows[_failing_rows(exc, fn, q[rows], qd[rows], sub_tau)]
            failed[bad] = True
            reasons.update({int(i): _short(exc) for i in bad})
            continue
        if out.shape != (rows.size,) + q.shape[1:]:
            raise ValueError(
                f"the evaluated function must return shape {(rows.size,) + q.shape[1:]}; got shape {out.shape}"
            )
        values[rows] = out
        bad = rows[~np.isfinite(out).all(axis=1)]
        values[bad] = np.nan
        failed[bad] = True
        reasons.update({int(i): "non-finite result" for i in bad})
        break
    assert values.shape[0] == N
    return MaskedEvaluation(values=values, failed=failed, reasons=reasons)


@dataclass(frozen=True, eq=False)
class _Solution:
    """The states at the samples ``Y (B, T, 2n)`` (NaN after a failure), failures, counters."""

    Y: np.ndarray
    nfev: int
    counters: dict
    failures: tuple = ()
    cause: BaseException | None = None


def _solve(problem: _Problem, clock: _Clock) -> _Solution:
    """Step scipy's solver over the batch; restart it without the trajectories that fail.

    The loop is ``solve_ivp``'s (one ``step()``, then the dense output at the
    samples it passed). A trajectory that fails (:class:`_Failed` from the
    vector field at the time of the failing stage, or the solver's own
    failure, charged to the trajectory with the largest error estimate) is
    dropped at the last accepted step (its later samples stay NaN; its
    failure time is the stage's): the solver is built again from there for
    the others.
    """
    B, n, t, method = problem.B, problem.n, problem.t, problem.method
    T = t.shape[0]
    Y = np.full((B, T, 2 * n), np.nan)
    Y[:, 0] = problem.y0.reshape(B, 2 * n)
    if T == 1:
        return _Solution(Y=Y, nfev=0, counters={})
    t_end = float(t[-1])
    active = np.arange(B)
    state = Y[:, 0].copy()
    t_now, k_next = float(t[0]), 1
    failures, cause = [], None
    counters = {"nfev": 0, "njev": 0, "nlu": 0, "restarts": 0}

    def fail(rows, reasons, time):
        nonlocal active, state
        rows = np.unique(rows)
        for r, reason in zip(rows, reasons if len(reasons) == len(rows) else [reasons[0]] * len(rows)):
            failures.append(Failure(index=int(active[r]), time=float(time), reason=reason))
        keep = np.setdiff1d(np.arange(active.size), rows)
        active, state = active[keep], state[keep]
        counters["restarts"] += 1

    while active.size and t_now < t_end:
        try:
            solver = _make_solver(problem, clock, active, t_now, state)
        except _Failed as failed:
            cause = cause or failed.cause
            fail(failed.rows, failed.reasons, failed.time)
            continue
        while True:
            t_before, y_before = solver.t, solver.y
            try:
                message = solver.step()
                status = solver.status
                if status == "failed":
                    break
                k_new = int(np.searchsorted(t, solver.t, side="right"))
                if k_new > k_next:
                    values = solver.dense_output()(t[k_next:k_new])  # (2 n b, k)
                    Y[active, k_next:k_new] = values.T.reshape(k_new - k_next, active.size, 2 * n).transpose(1, 0, 2)
                    k_next = k_new
            except _Failed as failed:
                cause = cause or failed.cause
                _count(counters, solver)
                t_now, state = t_before, y_before.reshape(active.size, 2 * n)
                # The samples up to t_before are written for every active trajectory.
                Y[active, k_next:] = np.nan
                fail(failed.rows, failed.reasons, failed.time)
                break
            if status == "finished":
                _count(counters, solver)
                t_now = t_end
                break
        else:  # pragma: no cover - the loop always breaks
            pass
        if solver.status == "failed":
            _count(counters, solver)
            t_now, state = solver.t, solver.y.reshape(active.size, 2 * n)
            norms = getattr(solver, "trajectory_norms", None)
            rows = (
                np.array([int(np.argmax(norms))]) if norms is not None and active.size > 1 else np.arange(active.size)
            )
            fail(
                rows,
                [f"solve_ivp ({method}) failed at t = {t_now:.6g} s of [{float(t[0]):.6g}, {t_end:.6g}] s: {message}"],
                t_now,
            )
    nfev = counters.pop("nfev")
    return _Solution(
        Y=Y, nfev=nfev, counters=counters, failures=tuple(sorted(failures, key=lambda f: f.index)), cause=cause
    )


def _count(counters: dict, solver) -> None:
    for name in ("nfev", "njev", "nlu"):
        counters[name] += int(getattr(solver, name, 0) or 0)


def _make_solver(problem: _Problem, clock: _Clock, active: np.ndarray, t0: float, state: np.ndarray):
    """scipy's solver of ``problem.method`` for the trajectories ``active`` from ``(t0, state)``."""
    b, n, method = active.shape[0], problem.n, problem.method
    rtol = float(problem.rtol[0])
    atol = np.repeat(problem.atol[active], 2 * n)
    atol = float(atol[0]) if np.ptp(atol) == 0 else atol
    options = _jacobian_options(
        problem.system, method, b, n, problem.torque if problem.torque.is_none else problem.torque.subset(active)
    )
    cls = _SCIPY_SOLVERS[method]
    if method in ("RK23", "RK45", "DOP853"):
        cls = _per_trajectory_solver(cls)
        options = {"batch": b, "per_trajectory": problem.error_control == "trajectory"}
    elif problem.error_control == "trajectory" and b > 1:
        # scipy's RMS norm over b trajectories bounds each one's norm by sqrt(b) times it.
        rtol, atol = rtol / math.sqrt(b), atol / math.sqrt(b)
    return cls(
        _vector_field(problem, clock, active),
        t0,
        state.ravel(),
        float(problem.t[-1]),
        rtol=rtol,
        atol=atol,
        max_step=problem.max_step,
        **options,
    )


_PER_TRAJECTORY: dict = {}


def _per_trajectory_solver(base):
    """``base`` (an explicit scipy Runge–Kutta class) with an error norm per trajectory.

    The norm of the stacked error estimate is computed per trajectory (the
    formula of ``base`` on each trajectory's ``2n`` components) and kept as
    ``trajectory_norms``; the step is controlled by their maximum
    (``per_trajectory``), or by ``base``'s norm of the whole state.
    """
    if base in _PER_TRAJECTORY:
        return _PER_TRAJECTORY[base]

    class PerTrajectory(base):
        def __init__(self, fun, t0, y0, t_bound, *, batch: int, per_trajectory: bool, **options):
            self.batch, self.per_trajectory, self.trajectory_norms = batch, per_trajectory, None
            super().__init__(fun, t0, y0, t_bound, **options)

        def _estimate_error_norm(self, K, h, scale):
            b = self.batch
            if base is scipy.integrate.DOP853:
                err5 = (K.T @ self.E5 / scale).reshape(b, -1)
                err3 = (K.T @ self.E3 / scale).reshape(b, -1)
                e5, e3 = np.sum(err5**2, axis=1), np.sum(err3**2, axis=1)
                denom = e5 + 0.01 * e3
                safe = np.where(denom > 0, denom, 1.0)
                norms = np.where(denom > 0, abs(h) * e5 / np.sqrt(safe * err5.shape[1]), 0.0)
            else:
                err = (h * (K.T @ self.E) / scale).reshape(b, -1)
                norms = np.sqrt(np.mean(err**2, axis=1))
            self.trajectory_norms = norms
            if self.per_trajectory:
                return float(norms.max())
            return super()._estimate_error_norm(K, h, scale)

    PerTrajectory.__name__ = f"PerTrajectory{base.__name__}"
    _PER_TRAJECTORY[base] = PerTrajectory
    return PerTrajectory


# ----------------------------------------------------------------------------- the result


def _trajectory(problem: _Problem, solution: _Solution) -> Trajectory:
    """The :class:`Trajectory` of a solve: the states and the rest at the samples."""
    n = problem.n
    q = np.ascontiguousarray(solution.Y[..., :n])
    qd = np.ascontiguousarray(solution.Y[..., n:])
    tau = problem.torque.at_samples(q, qd)
    qdd, energy = _at_samples(problem, q, qd, None if problem.torque.is_none else tau)
    failed_at = np.full(problem.B, np.nan)
    for failure in solution.failures:
        failed_at[failure.index] = failure.time
    return Trajectory(
        t=problem.t,
        q=q,
        qd=qd,
        qdd=qdd,
        tau=tau,
        energy=energy,
        nfev=solution.nfev,
        method=problem.method,
        metadata={
            **_tolerance_metadata(problem),
            "max_step": problem.max_step,
            "error_control": problem.error_control,
            "tau_interpolation": problem.tau_interpolation,
            **solution.counters,
        },
        failed_at=failed_at,
        failures=solution.failures,
    )


def _tolerance_metadata(problem: _Problem) -> dict:
    """``rtol`` and ``atol`` as floats when shared by the batch, else as lists."""
    return {
        name: (float(value[0]) if np.ptp(value) == 0 else value.tolist())
        for name, value in (("rtol", problem.rtol), ("atol", problem.atol))
    }


def _at_samples(problem: _Problem, q: np.ndarray, qd: np.ndarray, tau) -> tuple:
    """``qdd (B, T, n)`` and ``energy (B, T)`` at the samples, evaluated in blocks of rows.

    ``energy`` is NaN for a model without one, such as
    :class:`lnn.baseline.AccelerationMLP`; both are NaN at the samples after
    a failure and where the system refuses a sample (:func:`evaluate_masked`).
    """
    flat = (q.shape[0] * q.shape[1], q.shape[2])
    q_flat, qd_flat = q.reshape(flat), qd.reshape(flat)
    tau_flat = None if tau is None else tau.reshape(flat)
    qdd = np.full(flat, np.nan)
    energy = np.full(flat[:1], np.nan)
    for start in range(0, flat[0], _SAMPLE_BLOCK):  # blocks: temporaries stay in cache
        rows = slice(start, start + _SAMPLE_BLOCK)
        q_rows, qd_rows = q_flat[rows], qd_flat[rows]
        tau_rows = None if tau_flat is None else tau_flat[rows]
        good = np.isfinite(q_rows).all(axis=1) & np.isfinite(qd_rows).all(axis=1)
        if good.all():
            try:
                qdd[rows] = problem.acceleration(q_rows, qd_rows, tau_rows)
            except (ArithmeticError, ValueError):
                qdd[rows] = evaluate_masked(problem.acceleration, q_rows, qd_rows, tau_rows).values
        elif good.any():
            qdd[start + np.flatnonzero(good)] = evaluate_masked(
                problem.acceleration, q_rows[good], qd_rows[good], None if tau_rows is None else tau_rows[good]
            ).values
        if problem.energy is not None and good.any():
            block = np.full(good.shape, np.nan)
            block[good] = np.asarray(problem.energy(q_rows[good], qd_rows[good]), dtype=np.float64)
            energy[rows] = block
    return qdd.reshape(q.shape), energy.reshape(q.shape[:2])


# ----------------------------------------------------------------------------- implicit methods


def _jacobian_options(system, method: str, B: int, n: int, torque: NumpyTorque) -> dict:
    """Keyword arguments of ``solve_ivp`` that give an implicit method the block structure."""
    if method not in IMPLICIT_METHODS:
        return {}
    exact = getattr(system, "acceleration_jacobian", None)
    m = 2 * n
    if method == "LSODA":
        # Block diagonal with m x m blocks = banded with m - 1 sub/super-diagonals.
        options = {"lband": m - 1, "uband": m - 1}
        if exact is not None:
            local_i, local_j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
            cols = (np.arange(B)[:, None, None] * m + local_j).ravel()
            rows = np.broadcast_to((m - 1) + local_i - local_j, (B, m, m)).ravel()

            def jac(time, y):
                packed = np.zeros((2 * m - 1, B * m))
                packed[rows, cols] = _jacobian_blocks(exact, torque, time, y, B, n).ravel()
                return packed

            options["jac"] = jac
        return options
    # CSR structure of one block: n rows with the identity, then n dense rows of d qdd/d y.
    row_lengths = np.concatenate([np.ones(n, dtype=np.int64), np.full(n, m, dtype=np.int64)])
    block_cols = np.concatenate([n + np.arange(n), np.tile(np.arange(m), n)])
    indices = (np.arange(B)[:, None] * m + block_cols).ravel()
    indptr = np.concatenate([[0], np.cumsum(np.tile(row_lengths, B))])
    shape = (B * m, B * m)
    if exact is None:
        pattern = scipy.sparse.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=shape)
        return {"jac_sparsity": pattern}

    def jac(time, y):
        data = np.empty((B, n + m * n))
        data[:, :n] = 1.0
        data[:, n:] = _acceleration_jacobian(exact, torque, time, y, B, n).reshape(B, -1)
        return scipy.sparse.csr_matrix((data.ravel(), indices, indptr), shape=shape)

    return {"jac": jac}


def _acceleration_jacobian(exact, torque: NumpyTorque, time, y, B: int, n: int) -> np.ndarray:
    """``d qdd / d [q, qd]`` of the system at the ODE state ``y (2nB,)``, ``(B, n, 2n)``.

    The force is held fixed (a controller's own dependence on the state is
    left out: the Jacobian only steers Newton's iterations, not the answer).
    """
    Y = y.reshape(B, 2 * n)
    q, qd = Y[:, :n], Y[:, n:]
    J = np.asarray(exact(q, qd, torque(time, q, qd)), dtype=np.float64)
    if J.shape != (B, n, 2 * n):
        raise ValueError(
            f"system.acceleration_jacobian must return shape (B, n, 2n) = ({B}, {n}, {2 * n}); got shape {J.shape}"
        )
    return J


def _jacobian_blocks(exact, torque: NumpyTorque, time, y, B: int, n: int) -> np.ndarray:
    """The dense ``2n x 2n`` diagonal blocks of the vector field's Jacobian, ``(B, 2n, 2n)``."""
    blocks = np.zeros((B, 2 * n, 2 * n))
    blocks[:, :n, n:] = np.eye(n)
    blocks[:, n:, :] = _acceleration_jacobian(exact, torque, time, y, B, n)
    return blocks
