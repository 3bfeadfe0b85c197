"""The scipy backend of :func:`lnn.rollout`: ``solve_ivp``'s solvers stepped over the stacked batch.

The batch of initial states is integrated as **one** ODE state,
``y = [q_1, qd_1, q_2, qd_2, ..., q_B, qd_B]`` of length ``2 n B``, so that
the solver calls the system once per stage for the whole batch instead of
looping over trajectories in Python. scipy's ``(2 n B, T)`` output layout is
transposed once, here, into the batch-first states.

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
step. The explicit methods control every trajectory's own error norm
(``error_control="trajectory"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.integrate
import scipy.sparse

from lnn._torque import NumpyTorque
from lnn.integrate._masked import evaluate_masked, failing_rows, short
from lnn.integrate._problem import SAMPLE_BLOCK, Problem, Solution
from lnn.trajectory import Failure

__all__ = ["SOLVERS", "Functions", "samples", "solve"]

#: The solver class of each scipy method of the table.
SOLVERS = {
    "RK23": scipy.integrate.RK23,
    "RK45": scipy.integrate.RK45,
    "DOP853": scipy.integrate.DOP853,
    "Radau": scipy.integrate.Radau,
    "BDF": scipy.integrate.BDF,
    "LSODA": scipy.integrate.LSODA,
}
#: The implicit solvers (they use the Jacobian of the vector field).
IMPLICIT = (scipy.integrate.Radau, scipy.integrate.BDF, scipy.integrate.LSODA)
#: Progress is reported at most this often, as a fraction of the time span.
_PROGRESS_STEP = 0.01


def solve(problem: Problem, progress: Callable[..., None] | None = None) -> Solution:
    """Integrate ``problem`` with its scipy method; the accelerations and energies at the samples too.

    ``progress(done, total)`` gets the simulated time reached and the span (s),
    at most about every 1 % of the span.
    """
    functions = Functions.of(problem.system)
    clock = _Clock(problem.t, progress)
    Y, nfev, counters, failures, cause = _step(problem, functions, clock)
    clock.finish()
    n = problem.n
    tau = problem.torque.at_samples(Y[..., :n], Y[..., n:])
    qdd, energy = samples(functions, Y[..., :n], Y[..., n:], None if problem.torque.is_none else tau)
    return Solution(Y=Y, qdd=qdd, energy=energy, nfev=nfev, failures=failures, metadata=counters, cause=cause)


class Functions:
    """The numpy functions of a system that a scipy solve calls: acceleration and energy.

    ``acceleration(q, qd, tau) -> (B, n)`` float64, the fastest path the system
    has: a ``numpy_snapshot()`` (learned models: taken once per rollout, it
    gives the energies too), else ``numpy_acceleration``, else ``acceleration``.
    ``energy`` is None for a system without one.
    """

    def __init__(self, system, acceleration: Callable, energy: Callable | None) -> None:
        self.system, self.acceleration, self.energy = system, acceleration, energy

    @classmethod
    def of(cls, system) -> Functions:
        take_snapshot = getattr(system, "numpy_snapshot", None)
        snapshot = take_snapshot() if take_snapshot is not None else None
        fast = snapshot.acceleration if snapshot is not None else getattr(system, "numpy_acceleration", None)
        slow = system.acceleration

        def acceleration(q, qd, tau):
            result = np.asarray(fast(q, qd, tau) if fast is not None else slow(q, qd, tau), dtype=np.float64)
            if result.shape != q.shape:
                raise ValueError(
                    f"{type(system).__name__}.acceleration must return the shape of q, {q.shape}; "
                    f"got shape {result.shape}"
                )
            return result

        return cls(system, acceleration, snapshot.energy if snapshot is not None else getattr(system, "energy", None))


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


def _vector_field(problem: Problem, acceleration: Callable, clock: _Clock, active: np.ndarray) -> Callable:
    """``rhs(time, y) -> dy``, ``(2 n b,)`` for the ``b`` trajectories ``active``.

    Rows whose state or acceleration is non-finite, or whose acceleration
    raised, stop the solve with :class:`_Failed` (the driver restarts it
    without them).
    """
    b, n, method, torque = active.shape[0], problem.n, problem.name, problem.torque
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
            rows = failing_rows(exc, acceleration, q, qd, tau_now)
            reason = f"the system's acceleration failed at t = {time:.6g} s ({method}): {short(exc)}"
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


def _step(problem: Problem, functions: Functions, clock: _Clock):
    """Step scipy's solver over the batch; restart it without the trajectories that fail.

    The loop is ``solve_ivp``'s (one ``step()``, then the dense output at the
    samples it passed). A trajectory that fails (:class:`_Failed` from the
    vector field at the time of the failing stage, or the solver's own
    failure, charged to the trajectory with the largest error estimate) is
    dropped at the last accepted step (its later samples stay NaN; its
    failure time is the stage's): the solver is built again from there for
    the others.
    """
    B, n, t, method = problem.B, problem.n, problem.t, problem.name
    T = t.shape[0]
    Y = np.full((B, T, 2 * n), np.nan)
    Y[:, 0] = problem.y0
    if T == 1:
        return Y, 0, {}, (), None
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
            solver = _make_solver(problem, functions, clock, active, t_now, state)
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
    return Y, nfev, counters, tuple(sorted(failures, key=lambda f: f.index)), cause


def _count(counters: dict, solver) -> None:
    for name in ("nfev", "njev", "nlu"):
        counters[name] += int(getattr(solver, name, 0) or 0)


def _make_solver(problem: Problem, functions: Functions, clock: _Clock, active, t0: float, state: np.ndarray):
    """scipy's solver of ``problem.method`` for the trajectories ``active`` from ``(t0, state)``."""
    b, n, method = active.shape[0], problem.n, problem.name
    rtol = float(problem.rtol[0])
    atol = np.repeat(problem.atol[active], 2 * n)
    atol = float(atol[0]) if np.ptp(atol) == 0 else atol
    options = _jacobian_options(
        problem.system, method, b, n, problem.torque if problem.torque.is_none else problem.torque.subset(active)
    )
    cls = SOLVERS[method]
    if method in ("RK23", "RK45", "DOP853"):
        cls = _per_trajectory_solver(cls)
        options = {"batch": b, "per_trajectory": problem.error_control == "trajectory"}
    elif problem.error_control == "trajectory" and b > 1:
        # scipy's RMS norm over b trajectories bounds each one's norm by sqrt(b) times it.
        rtol, atol = rtol / math.sqrt(b), atol / math.sqrt(b)
    return cls(
        _vector_field(problem, functions.acceleration, clock, active),
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


# ----------------------------------------------------------------------------- the samples


def samples(functions: Functions, q: np.ndarray, qd: np.ndarray, tau) -> tuple:
    """``qdd (B, T, n)`` and ``energy (B, T)`` at the samples ``q, qd (B, T, n)``, evaluated in blocks of rows.

    ``energy`` is NaN for a model without one, such as
    :class:`lnn.baseline.AccelerationMLP`; both are NaN at the samples after
    a failure and where the system refuses a sample (:func:`evaluate_masked`).
    """
    flat = (q.shape[0] * q.shape[1], q.shape[2])
    q_flat, qd_flat = q.reshape(flat), qd.reshape(flat)
    tau_flat = None if tau is None else tau.reshape(flat)
    qdd = np.full(flat, np.nan)
    energy = np.full(flat[:1], np.nan)
    for start in range(0, flat[0], SAMPLE_BLOCK):  # blocks: temporaries stay in cache
        rows = slice(start, start + SAMPLE_BLOCK)
        q_rows, qd_rows = q_flat[rows], qd_flat[rows]
        tau_rows = None if tau_flat is None else tau_flat[rows]
        good = np.isfinite(q_rows).all(axis=1) & np.isfinite(qd_rows).all(axis=1)
        if good.all():
            try:
                qdd[rows] = functions.acceleration(q_rows, qd_rows, tau_rows)
            except (ArithmeticError, ValueError):
                qdd[rows] = evaluate_masked(functions.acceleration, q_rows, qd_rows, tau_rows).values
        elif good.any():
            qdd[start + np.flatnonzero(good)] = evaluate_masked(
                functions.acceleration, q_rows[good], qd_rows[good], None if tau_rows is None else tau_rows[good]
            ).values
        if functions.energy is not None and good.any():
            block = np.full(good.shape, np.nan)
            block[good] = np.asarray(functions.energy(q_rows[good], qd_rows[good]), dtype=np.float64)
            energy[rows] = block
    return qdd.reshape(q.shape), energy.reshape(q.shape[:2])


# ----------------------------------------------------------------------------- implicit methods


def _jacobian_options(system, method: str, B: int, n: int, torque: NumpyTorque) -> dict:
    """Keyword arguments of ``solve_ivp`` that give an implicit method the block structure."""
    if SOLVERS[method] not in IMPLICIT:
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
