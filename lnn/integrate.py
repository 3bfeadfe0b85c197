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
from typing import Callable

import numpy as np
import scipy.sparse
from scipy.integrate import solve_ivp

from lnn.trajectory import Trajectory

__all__ = ["METHODS", "IMPLICIT_METHODS", "IntegrationError", "rollout", "odeint", "default_tolerances"]

#: Every method of :func:`scipy.integrate.solve_ivp`, accepted by :func:`rollout`.
METHODS = ("RK23", "RK45", "DOP853", "Radau", "BDF", "LSODA")
#: The methods that use a Jacobian of the vector field.
IMPLICIT_METHODS = ("Radau", "BDF", "LSODA")
_TAU_INTERPOLATIONS = ("linear", "hold")
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
        Generalized forces. ``None``: unforced. An array of shape ``(T, n)``
        (the same for every trajectory) or ``(B, T, n)`` sampled on ``t`` and
        interpolated between samples according to ``tau_interpolation``. A
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
        match ``system.n_dof``, non-finite inputs or non-increasing ``t``.
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
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if tau_interpolation not in _TAU_INTERPOLATIONS:
        raise ValueError(
            f"tau_interpolation must be one of {_TAU_INTERPOLATIONS}; got {tau_interpolation!r}"
        )
    n = _check_system(system)
    q0 = _state_array(q0, "q0", n)
    qd0 = _state_array(qd0, "qd0", n)
    if q0.shape != qd0.shape:
        raise ValueError(f"q0 and qd0 must have the same shape; got {q0.shape} and {qd0.shape}")
    B = q0.shape[0]
    t = _time_grid(t)
    default_rtol, default_atol = default_tolerances(system)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    for name, value in (("rtol", rtol), ("atol", atol), ("max_step", max_step)):
        if not value > 0:
            raise ValueError(f"{name} must be positive; got {value!r}")
    torque = _Torque(tau, t, B, n, tau_interpolation)
    take_snapshot = getattr(system, "numpy_snapshot", None)
    snapshot = take_snapshot() if take_snapshot is not None else None  # once per rollout
    acceleration = _acceleration_function(system, snapshot)

    t0, t_end = float(t[0]), float(t[-1])
    span = t_end - t0
    status = {"t": t0, "next_report": t0}

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
        if time > status["t"]:
            status["t"] = time
            if progress is not None and time >= status["next_report"]:
                progress(time - t0, span)
                status["next_report"] = time + _PROGRESS_STEP * span
        return dy

    y0 = np.concatenate([q0, qd0], axis=1).ravel()
    if t.shape[0] == 1:
        Y = y0.reshape(B, 1, 2 * n)
        nfev, extra = 0, {}
    else:
        options = _jacobian_options(system, method, B, n, torque)
        sol = solve_ivp(rhs, (t0, t_end), y0, method=method, t_eval=t, rtol=rtol, atol=atol,
                        max_step=max_step, **options)
        if sol.status != 0 or sol.y.shape[1] != t.shape[0]:
            raise IntegrationError(
                f"solve_ivp ({method}) failed at t = {status['t']:.6g} s of "
                f"[{t0:.6g}, {t_end:.6g}] s: {sol.message}",
                time=status["t"],
            )
        # scipy's (2nB, T) layout -> (B, T, 2n), once.
        Y = sol.y.T.reshape(t.shape[0], B, 2 * n).transpose(1, 0, 2)
        nfev, extra = int(sol.nfev), {"njev": int(sol.njev), "nlu": int(sol.nlu)}
    if progress is not None:
        progress(span, span)
    q = np.ascontiguousarray(Y[..., :n])
    qd = np.ascontiguousarray(Y[..., n:])
    tau_samples = torque.at_samples(q, qd)
    flat = (B * t.shape[0], n)
    q_flat, qd_flat = q.reshape(flat), qd.reshape(flat)
    tau_flat = None if torque.is_none else tau_samples.reshape(flat)
    energy_of = snapshot.energy if snapshot is not None else getattr(system, "energy", None)
    qdd = np.empty(flat)
    # NaN for a model without an energy, such as lnn.baseline.AccelerationMLP.
    energy = np.full(flat[:1], np.nan)
    for start in range(0, flat[0], _SAMPLE_BLOCK):  # blocks: temporaries stay in cache
        rows = slice(start, start + _SAMPLE_BLOCK)
        qdd[rows] = acceleration(q_flat[rows], qd_flat[rows],
                                 None if tau_flat is None else tau_flat[rows])
        if energy_of is not None:
            energy[rows] = np.asarray(energy_of(q_flat[rows], qd_flat[rows]), dtype=np.float64)
    return Trajectory(
        t=t, q=q, qd=qd, qdd=qdd.reshape(q.shape), tau=tau_samples,
        energy=energy.reshape(B, t.shape[0]), nfev=nfev, method=method,
        metadata={"rtol": rtol, "atol": atol, "max_step": float(max_step),
                  "tau_interpolation": tau_interpolation, **extra},
    )


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
    tau : None, array_like ``(T, n)`` or ``(B, T, n)``, or callable, optional
        Generalized forces, as in :func:`lnn.odeint.odeint`.
    **options
        The other keyword-only options of :func:`lnn.odeint.odeint`
        (``substeps``, ``iterations``, ``jit_compile``).

    Returns
    -------
    Trajectory
        ``q, qd, qdd, tau (B, T, n)``, ``energy (B, T)``; inside a
        ``tf.function``, a :class:`lnn.odeint.OdeintResult` of tensors with the
        same fields (see :func:`lnn.odeint.odeint`).
    """
    from lnn.odeint import odeint as _odeint

    return _odeint(system, q0, qd0, t, method=method, tau=tau, **options)


# ----------------------------------------------------------------------------- internals


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


def _check_system(system) -> int:
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


def _state_array(value, name: str, n: int) -> np.ndarray:
    array = np.array(value, dtype=np.float64, ndmin=1)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != n or array.shape[0] < 1:
        raise ValueError(f"{name} must have shape (B, {n}) or ({n},); got shape {np.shape(value)}")
    if not np.isfinite(array).all():
        bad = np.flatnonzero(~np.isfinite(array).all(axis=1))
        raise ValueError(f"{name} has non-finite values (NaN or inf) in trajectory(ies) {bad.tolist()}")
    return array


def _time_grid(t) -> np.ndarray:
    t = np.array(t, dtype=np.float64, ndmin=1)
    if t.ndim != 1:
        raise ValueError(f"t must have shape (T,); got shape {t.shape}")
    if not np.isfinite(t).all():
        raise ValueError("t has non-finite values (NaN or inf)")
    if t.shape[0] > 1 and not (np.diff(t) > 0).all():
        k = int(np.flatnonzero(np.diff(t) <= 0)[0])
        raise ValueError(
            f"t must be strictly increasing; got t[{k}] = {float(t[k])!r} >= "
            f"t[{k + 1}] = {float(t[k + 1])!r}"
        )
    return t


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


class _Torque:
    """Evaluate the generalized force of :func:`rollout` at any time, shape ``(B, n)``."""

    def __init__(self, tau, t: np.ndarray, B: int, n: int, interpolation: str) -> None:
        self.t, self.B, self.n = t, B, n
        self.is_none = tau is None
        self.callable = callable(tau)
        self.hold = interpolation == "hold"
        if self.is_none or self.callable:
            self.fn = tau
            return
        try:
            samples = np.asarray(tau, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"tau must be None, an array (T, n) or (B, T, n), or a callable "
                f"tau(t, q, qd); got {type(tau).__name__}"
            ) from exc
        T = t.shape[0]
        if samples.shape == (T, n):
            samples = np.broadcast_to(samples, (B, T, n))
        if samples.shape != (B, T, n):
            raise ValueError(
                f"tau must have shape (T, n) = ({T}, {n}) or (B, T, n) = ({B}, {T}, {n}); "
                f"got shape {samples.shape}"
            )
        if not np.isfinite(samples).all():
            raise ValueError("tau has non-finite values (NaN or inf)")
        self.samples = samples

    def __call__(self, time: float, q: np.ndarray, qd: np.ndarray):
        if self.is_none:
            return None
        if self.callable:
            value = np.asarray(self.fn(time, q, qd), dtype=np.float64)
            if value.shape != (self.B, self.n):
                value = self._broadcast(value, time)
            return value
        t = self.t
        if t.shape[0] == 1:
            return self.samples[:, 0]
        k = int(np.searchsorted(t, time, side="right")) - 1
        if self.hold:
            return self.samples[:, min(max(k, 0), t.shape[0] - 1)]
        k = min(max(k, 0), t.shape[0] - 2)
        w = (time - t[k]) / (t[k + 1] - t[k])
        return (1.0 - w) * self.samples[:, k] + w * self.samples[:, k + 1]

    def _broadcast(self, value: np.ndarray, time: float) -> np.ndarray:
        if value.shape == (self.n,):
            return np.broadcast_to(value, (self.B, self.n))
        raise ValueError(
            f"the controller tau(t, q, qd) must return shape (B, n) = ({self.B}, {self.n}) "
            f"or ({self.n},); got shape {value.shape} at t = {time:.6g}"
        )

    def at_samples(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The forces at the samples, shape ``(B, T, n)``, given ``q, qd (B, T, n)``."""
        if self.is_none:
            return np.zeros_like(q)
        if self.callable:
            return np.stack([self(float(tk), q[:, k], qd[:, k]) for k, tk in enumerate(self.t)],
                            axis=1)
        return np.array(self.samples)


def _jacobian_options(system, method: str, B: int, n: int, torque: _Torque) -> dict:
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


def _acceleration_jacobian(exact, torque: _Torque, time, y, B: int, n: int) -> np.ndarray:
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


def _jacobian_blocks(exact, torque: _Torque, time, y, B: int, n: int) -> np.ndarray:
    """The dense ``2n x 2n`` diagonal blocks of the vector field's Jacobian, ``(B, 2n, 2n)``."""
    blocks = np.zeros((B, 2 * n, 2 * n))
    blocks[:, :n, n:] = np.eye(n)
    blocks[:, n:, :] = _acceleration_jacobian(exact, torque, time, y, B, n)
    return blocks
