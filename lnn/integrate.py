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

:func:`odeint` is a lazy entry point to the in-graph TensorFlow integrator of
:mod:`lnn.odeint`; this module itself never imports TensorFlow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import scipy.sparse
from scipy.integrate import solve_ivp

from lnn import _validate
from lnn._grid import time_grid
from lnn._torque import NumpyTorque, check_interpolation
from lnn.trajectory import Trajectory

__all__ = ["METHODS", "IMPLICIT_METHODS", "IntegrationError", "rollout", "odeint", "default_tolerances"]

#: Every method of :func:`scipy.integrate.solve_ivp`, accepted by :func:`rollout`.
METHODS = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")
#: The methods that use a Jacobian of the vector field.
IMPLICIT_METHODS = ("Radau", "BDF", "LSODA")
#: Progress is reported at most this often, as a fraction of the time span.
_PROGRESS_STEP = 0.01


class IntegrationError(RuntimeError):
    """A solve that failed or diverged.

    Attributes
    ----------
    time : float
        The simulated time (s) the solver had reached.
    trajectories : tuple of int
        Indices (over the batch ``B``) of the trajectories whose state became
        non-finite; empty when scipy itself reported the failure.
    """

    def __init__(self, message: str, *, time: float, trajectories: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.time = float(time)
        self.trajectories = tuple(int(i) for i in trajectories)


def rollout(system, q0, qd0, t, *, tau=None, tau_interpolation: str = "linear",
            method: str = "DOP853", rtol: float | None = None, atol: float | None = None,
            max_step: float = np.inf,
            progress: Callable[..., None] | None = None) -> Trajectory:
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
    method : {"RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA"}, optional
        The ``solve_ivp`` method.
    rtol, atol : float, optional
        Relative and absolute tolerances of the solver; default
        :func:`default_tolerances` of ``system`` (``1e-8, 1e-10``, or
        ``1e-6, 1e-8`` for a float32 model, whose vector field is smooth only
        to ~1e-7: tighter tolerances make the solver chase round-off, with
        many more steps and no more accuracy). They control the
        root-mean-square error estimate over the **whole batch** state, so a
        single trajectory's local error may exceed that of a solo solve by up
        to a factor ``sqrt(B)``; tighten them for large batches that must
        match solo solves closely.
    max_step : float, optional
        Largest step the solver may take (s).
    progress : callable, optional
        ``progress(done, total)`` with the simulated time reached and the
        total time span (s), called at most about every 1 % of the span.

    Returns
    -------
    Trajectory
        ``t (T,)``; ``q, qd, qdd, tau (B, T, n)``; ``energy (B, T)``.
        ``qdd`` and ``energy`` are evaluated once, batched, at the samples
        (``energy`` is NaN for a model without one, such as
        :class:`lnn.baseline.AccelerationMLP`);
        ``tau`` holds the forces applied at the samples (zeros when
        unforced). ``metadata`` holds the solver's counters and tolerances.

    Raises
    ------
    ValueError
        For an unknown ``method`` or ``tau_interpolation``, shapes that do not
        match ``system.n_dof``, non-finite inputs, non-increasing ``t`` or
        tolerances (``rtol``, ``atol``, ``max_step``) that are not positive.
    TypeError
        If ``system`` lacks ``n_dof`` or ``acceleration``, or ``tau`` is of an
        unsupported type.
    IntegrationError
        (a ``RuntimeError``) if scipy reports a failed solve (its message and
        the time reached are included), a state becomes non-finite (the time
        and the trajectory indices are included), or the system's
        acceleration raises an ``ArithmeticError`` or ``ValueError`` (e.g. a
        ``LinAlgError`` for a learned mass matrix that is not positive
        definite) during the solve: the time is added to its message, and
        the indices of its ``trajectories`` attribute, when it has one, are
        kept; the original exception is the ``__cause__``.
    """
    problem = _problem(system, q0, qd0, t, tau=tau, tau_interpolation=tau_interpolation,
                       method=method, rtol=rtol, atol=atol, max_step=max_step)
    clock = _Clock(problem.t, progress)
    solution = _solve(problem, clock)
    clock.finish()
    return _trajectory(problem, solution)


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
    rtol, atol, max_step : float
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
    rtol: float
    atol: float
    max_step: float
    tau_interpolation: str
    torque: NumpyTorque
    acceleration: Callable
    energy: Callable | None


def _problem(system, q0, qd0, t, *, tau, tau_interpolation, method, rtol, atol,
             max_step) -> _Problem:
    """Check the inputs of :func:`rollout` (raising its ``ValueError`` / ``TypeError``)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    check_interpolation(tau_interpolation)
    n = _check_system(system)
    q0, _ = _validate.state("q0", q0, n)
    qd0, _ = _validate.state("qd0", qd0, n)
    if q0.shape != qd0.shape:
        raise ValueError(f"q0 and qd0 must have the same shape; got {q0.shape} and {qd0.shape}")
    B = q0.shape[0]
    t = time_grid(t)
    default_rtol, default_atol = default_tolerances(system)
    rtol = _validate.positive("rtol", default_rtol if rtol is None else rtol)
    atol = _validate.positive("atol", default_atol if atol is None else atol)
    max_step = np.inf if max_step == np.inf else _validate.positive("max_step", max_step)
    torque = NumpyTorque.build(tau, t, batch=B, n=n, interpolation=tau_interpolation)
    take_snapshot = getattr(system, "numpy_snapshot", None)
    snapshot = take_snapshot() if take_snapshot is not None else None  # once per rollout
    return _Problem(
        system=system, n=n, B=B, t=t, y0=np.concatenate([q0, qd0], axis=1).ravel(),
        method=method, rtol=rtol, atol=atol, max_step=float(max_step),
        tau_interpolation=tau_interpolation, torque=torque,
        acceleration=_acceleration_function(system, snapshot),
        energy=snapshot.energy if snapshot is not None else getattr(system, "energy", None),
    )


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
    fast = (snapshot.acceleration if snapshot is not None
            else getattr(system, "numpy_acceleration", None))
    slow = system.acceleration

    def acceleration(q, qd, tau):
        result = np.asarray(fast(q, qd, tau) if fast is not None else slow(q, qd, tau),
                            dtype=np.float64)
        if result.shape != q.shape:
            raise ValueError(
                f"{type(system).__name__}.acceleration must return the shape of q, {q.shape}; "
                f"got shape {result.shape}"
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


def _vector_field(problem: _Problem, clock: _Clock) -> Callable:
    """``rhs(time, y) -> dy``, ``(2 n B,)``: the batch's ODE, checked for failures and NaN/inf."""
    B, n, method = problem.B, problem.n, problem.method
    torque, acceleration = problem.torque, problem.acceleration

    def rhs(time, y):
        Y = y.reshape(B, 2 * n)
        q, qd = Y[:, :n], Y[:, n:]
        tau_now = torque(time, q, qd)
        try:
            qdd = acceleration(q, qd, tau_now)
        except (ArithmeticError, ValueError) as exc:  # LinAlgError is a ValueError
            _check_finite(time, Y, method)  # a non-finite state is the better explanation
            raise IntegrationError(
                f"the system's acceleration failed at t = {time:.6g} s ({method}): {exc}",
                time=time, trajectories=getattr(exc, "trajectories", ()),
            ) from exc
        dy = np.concatenate((qd, qdd), axis=1).ravel()
        # One dot product is the cheap test for NaN/inf (in qd or qdd); rows are inspected
        # only when it fails. A finite step of finite derivatives keeps q finite.
        if not math.isfinite(dy @ dy):
            _check_finite(time, np.concatenate((Y, qdd), axis=1), method)
        clock.advance(time)
        return dy

    return rhs


@dataclass(frozen=True, eq=False)
class _Solution:
    """The states at the samples, ``Y (B, T, 2n)``, and the solver's counters."""

    Y: np.ndarray
    nfev: int
    counters: dict


def _solve(problem: _Problem, clock: _Clock) -> _Solution:
    """Run ``solve_ivp`` on the batch (nothing to solve for a single time)."""
    B, n, t, method = problem.B, problem.n, problem.t, problem.method
    if t.shape[0] == 1:
        return _Solution(Y=problem.y0.reshape(B, 1, 2 * n), nfev=0, counters={})
    t0, t_end = float(t[0]), float(t[-1])
    options = _jacobian_options(problem.system, method, B, n, problem.torque)
    sol = solve_ivp(_vector_field(problem, clock), (t0, t_end), problem.y0, method=method,
                    t_eval=t, rtol=problem.rtol, atol=problem.atol, max_step=problem.max_step,
                    **options)
    if sol.status != 0 or sol.y.shape[1] != t.shape[0]:
        raise IntegrationError(
            f"solve_ivp ({method}) failed at t = {clock.reached:.6g} s of "
            f"[{t0:.6g}, {t_end:.6g}] s: {sol.message}",
            time=clock.reached,
        )
    # scipy's (2nB, T) layout -> (B, T, 2n), once.
    Y = sol.y.T.reshape(t.shape[0], B, 2 * n).transpose(1, 0, 2)
    return _Solution(Y=Y, nfev=int(sol.nfev),
                     counters={"njev": int(sol.njev), "nlu": int(sol.nlu)})


def _check_finite(time: float, rows: np.ndarray, method: str) -> None:
    """Raise :class:`IntegrationError` naming the rows of ``rows (B, k)`` that hold NaN or inf."""
    indices = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    if indices.size:
        raise IntegrationError(
            f"the state of trajectory(ies) {indices.tolist()} became non-finite at "
            f"t = {time:.6g} s ({method}); the system diverged or its acceleration is "
            "undefined there",
            time=time, trajectories=tuple(indices),
        )


# ----------------------------------------------------------------------------- the result


def _trajectory(problem: _Problem, solution: _Solution) -> Trajectory:
    """The :class:`Trajectory` of a solve: the states and the rest at the samples."""
    n = problem.n
    q = np.ascontiguousarray(solution.Y[..., :n])
    qd = np.ascontiguousarray(solution.Y[..., n:])
    tau = problem.torque.at_samples(q, qd)
    qdd, energy = _at_samples(problem, q, qd, None if problem.torque.is_none else tau)
    return Trajectory(
        t=problem.t, q=q, qd=qd, qdd=qdd, tau=tau, energy=energy, nfev=solution.nfev,
        method=problem.method,
        metadata={"rtol": problem.rtol, "atol": problem.atol, "max_step": problem.max_step,
                  "tau_interpolation": problem.tau_interpolation, **solution.counters},
    )


def _at_samples(problem: _Problem, q: np.ndarray, qd: np.ndarray, tau) -> tuple:
    """``qdd (B, T, n)`` and ``energy (B, T)`` at the samples, evaluated in blocks of rows.

    ``energy`` is NaN for a model without one, such as :class:`lnn.baseline.AccelerationMLP`.
    """
    flat = (q.shape[0] * q.shape[1], q.shape[2])
    q_flat, qd_flat = q.reshape(flat), qd.reshape(flat)
    tau_flat = None if tau is None else tau.reshape(flat)
    qdd = np.empty(flat)
    energy = np.full(flat[:1], np.nan)
    for start in range(0, flat[0], _SAMPLE_BLOCK):  # blocks: temporaries stay in cache
        rows = slice(start, start + _SAMPLE_BLOCK)
        qdd[rows] = problem.acceleration(q_flat[rows], qd_flat[rows],
                                         None if tau_flat is None else tau_flat[rows])
        if problem.energy is not None:
            energy[rows] = np.asarray(problem.energy(q_flat[rows], qd_flat[rows]),
                                      dtype=np.float64)
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
            f"system.acceleration_jacobian must return shape (B, n, 2n) = ({B}, {n}, {2 * n}); "
            f"got shape {J.shape}"
        )
    return J


def _jacobian_blocks(exact, torque: NumpyTorque, time, y, B: int, n: int) -> np.ndarray:
    """The dense ``2n x 2n`` diagonal blocks of the vector field's Jacobian, ``(B, 2n, 2n)``."""
    blocks = np.zeros((B, 2 * n, 2 * n))
    blocks[:, :n, n:] = np.eye(n)
    blocks[:, n:, :] = _acceleration_jacobian(exact, torque, time, y, B, n)
    return blocks
