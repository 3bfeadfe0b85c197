"""The engine's two entries: :func:`solve` (tensors, differentiable) and :func:`solve_arrays` (numpy).

:func:`solve` runs a whole solve as one ``tf.function`` (XLA for a forward
solve; under a gradient tape, or inside another ``tf.function``, the same
graph without XLA, differentiated step by step: discretise-then-differentiate,
the step sizes held fixed, as by diffrax's default adjoint), so gradients
reach the initial state, the sampled forces and the system's variables.
:func:`lnn.odeint.odeint` calls it.

:func:`solve_arrays` is the numpy entry of :func:`lnn.rollout`'s compiled
methods: the solve runs through a :class:`~lnn.solvers._scheduler.RolloutScheduler`
(a new shape runs as a plain graph while XLA compiles it in the background),
and the accelerations and energies at the samples are evaluated in blocks of
about ``sample_block`` samples by a plain graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from lnn import _runtime
from lnn.solvers._controller import DEFAULT_CONTROLLER, StepController
from lnn.solvers._engine import (
    DONE,
    MAX_STEPS,
    NONFINITE,
    STATUS,
    TOO_SMALL,
    at_samples,
    build_begin,
    build_run,
    cached,
)
from lnn.solvers._scheduler import RolloutScheduler
from lnn.solvers.tableau import tableau as _tableau
from lnn.system import compute_dtype

__all__ = ["AdaptiveSolution", "ArraySolution", "describe_status", "solve", "solve_arrays"]


@dataclass(frozen=True, eq=False)
class AdaptiveSolution:
    """The result of :func:`solve` (tensors).

    Attributes
    ----------
    q, qd, qdd, tau : tf.Tensor, shape ``(B, T, n)``
        At the samples; NaN after a trajectory's failure (``qdd`` also NaN
        where the system's acceleration is not finite).
    energy : tf.Tensor, shape ``(B, T)``
        NaN for a system without ``energy``.
    failed_at : tf.Tensor, shape ``(B,)``
        The failure times (the last accepted time), NaN where the trajectory finished.
    status : tf.Tensor of int32, shape ``(B,)``
        Codes of :data:`lnn.solvers.STATUS` (1: finished).
    n_accepted, n_rejected : tf.Tensor of int32, shape ``(B,)``
        Accepted and rejected steps per trajectory.
    nfev : tf.Tensor of int32
        Batched right-hand-side evaluations of the solve (the samples' not included).
    """

    q: tf.Tensor
    qd: tf.Tensor
    qdd: tf.Tensor
    tau: tf.Tensor
    energy: tf.Tensor
    failed_at: tf.Tensor
    status: tf.Tensor
    n_accepted: tf.Tensor
    n_rejected: tf.Tensor
    nfev: tf.Tensor


@dataclass(frozen=True, eq=False)
class ArraySolution:
    """The result of :func:`solve_arrays` (numpy, the solve's dtype).

    Attributes
    ----------
    Y : numpy.ndarray, shape ``(B, T, 2n)``
        The states ``[q, qd]`` at the samples; NaN after a trajectory's failure.
    qdd : numpy.ndarray, shape ``(B, T, n)``
    energy : numpy.ndarray, shape ``(B, T)``
        NaN for a system without ``energy``.
    failed_at : numpy.ndarray, shape ``(B,)``
        NaN where the trajectory finished.
    status : numpy.ndarray of int, shape ``(B,)``
        Codes of :data:`lnn.solvers.STATUS`.
    n_accepted, n_rejected : numpy.ndarray of int, shape ``(B,)``
    nfev : int
        Batched right-hand-side evaluations (the samples' not included).
    max_steps : int
        The attempts each trajectory was allowed.
    """

    Y: np.ndarray
    qdd: np.ndarray
    energy: np.ndarray
    failed_at: np.ndarray
    status: np.ndarray
    n_accepted: np.ndarray
    n_rejected: np.ndarray
    nfev: int
    max_steps: int

    @property
    def failed(self) -> np.ndarray:
        """Which trajectories did not finish, ``(B,)`` bool."""
        return self.status != DONE

    def reason(self, b: int, method: str) -> str:
        """Why trajectory ``b`` stopped (:func:`describe_status`), naming ``method``."""
        return describe_status(int(self.status[b]), float(self.failed_at[b]), method, self.max_steps)


def describe_status(status: int, time: float, method: str, max_steps: int) -> str:
    """Why a trajectory with ``status`` (a code of :data:`lnn.solvers.STATUS`) stopped at ``time``."""
    if status == NONFINITE:
        return (
            f"the state or acceleration became non-finite after t = {time:.6g} s ({method}); "
            "a learned mass matrix that is not positive definite gives NaN accelerations, "
            "or the system diverged"
        )
    if status == TOO_SMALL:
        return f"the step size became too small at t = {time:.6g} s ({method})"
    if status == MAX_STEPS:
        return f"max_steps = {max_steps} step attempts reached at t = {time:.6g} s ({method})"
    return f"stopped with status {STATUS.get(status, status)!r} at t = {time:.6g} s ({method})"


def _compiled(system, tab, *, n, dtype, has_tau, hold, jit, controller):
    """The compiled whole solve for ``system`` and these options (cached; traced on first use)."""
    key = (tab.name, n, dtype, has_tau, hold, jit, True, controller)
    return cached(
        system,
        key,
        lambda: build_run(system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=hold, jit=jit, controller=controller),
    )


def solve(
    system,
    y0,
    t,
    *,
    method: str,
    tau_samples=None,
    hold: bool = False,
    rtol,
    atol,
    max_step=math.inf,
    max_steps: int = 100_000,
    jit_compile: bool | None = None,
    dtype=None,
    controller: StepController = DEFAULT_CONTROLLER,
) -> AdaptiveSolution:
    """Integrate a batch adaptively with the registered pair ``method`` (tensors in, tensors out).

    The engine under both doors (:func:`lnn.rollout` and
    :func:`lnn.odeint.odeint`, which check the inputs and return a
    :class:`lnn.Trajectory`); call it directly for the raw per-trajectory
    status and step counts.

    Parameters
    ----------
    system : MechanicalSystem
        Its ``acceleration(q, qd[, tau])`` (and ``energy(q, qd)``, when it has
        one) must accept TensorFlow tensors ``(B, n)``.
    y0 : tensor or array, shape ``(B, 2n)``
        Initial states ``[q, qd]``.
    t : tensor or array, shape ``(T,)``
        Strictly increasing sample times (checked by the callers), ``T >= 2``.
    method : str, keyword-only
        A registered pair (:func:`lnn.solvers.names`).
    tau_samples : tensor or array, shape ``(B, T, n)``, optional, keyword-only
        Generalized forces sampled on ``t`` (interpolated linearly, or held
        with ``hold``); None: unforced.
    rtol, atol : tensor or array, shape ``(B,)`` or scalar, keyword-only
        Per-trajectory tolerances (positive).
    max_step : float, keyword-only
    max_steps : int, keyword-only
        Step attempts per trajectory before it fails.
    jit_compile : bool, optional, keyword-only
        XLA for the solve; default: XLA unless a gradient tape may record or
        the inputs are symbolic.
    dtype : tf.DType, optional
        Default: :func:`lnn.system.compute_dtype` of the system (and ``y0``).
    controller : StepController, keyword-only
        The step-size controller (default: :data:`lnn.solvers.DEFAULT_CONTROLLER`,
        the one :func:`lnn.rollout` uses).

    Returns
    -------
    AdaptiveSolution

    Raises
    ------
    ValueError
        For an unknown ``method`` (the message lists the methods).
    TypeError
        For a ``controller`` that is not a :class:`StepController`, or if the
        system's ``acceleration`` does not accept TensorFlow tensors (a
        numpy-only ground-truth system): use a ``solve_ivp`` method.
    """
    tab = _tableau(method)
    if not isinstance(controller, StepController):
        raise TypeError(f"controller must be a lnn.solvers.StepController; got {type(controller).__name__}")
    dtype = tf.as_dtype(compute_dtype(system, like=y0) if dtype is None else dtype)
    n = int(system.n_dof)
    y0 = tf.convert_to_tensor(y0, dtype=dtype) if not isinstance(y0, tf.Tensor) else tf.cast(y0, dtype)
    t = tf.convert_to_tensor(t, dtype=dtype) if not isinstance(t, tf.Tensor) else tf.cast(t, dtype)
    batch = tf.shape(y0)[0]
    rtol = tf.broadcast_to(tf.cast(rtol, dtype), [batch])
    atol = tf.broadcast_to(tf.cast(atol, dtype), [batch])
    symbolic = not tf.executing_eagerly() or any(isinstance(x, tf.Tensor) and not hasattr(x, "numpy") for x in (y0, t))
    if jit_compile is None:
        jit_compile = not symbolic and not _runtime.tape_may_record()
    has_tau = tau_samples is not None
    run = _compiled(
        system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=bool(hold), jit=bool(jit_compile), controller=controller
    )
    args = [y0, t]
    if has_tau:
        args.append(tf.cast(tau_samples, dtype))
    args += [rtol, atol, tf.constant(min(float(max_step), 1e300), dtype), tf.constant(int(max_steps), tf.int32)]
    Y, qdd, energy, failed_at, status, n_acc, n_rej, nfev = run(*args)
    tau_all = tf.cast(tau_samples, dtype) if has_tau else tf.zeros(tf.concat([tf.shape(Y)[:2], [n]], axis=0), dtype)
    return AdaptiveSolution(
        q=Y[..., :n],
        qd=Y[..., n:],
        qdd=qdd,
        tau=tau_all,
        energy=energy,
        failed_at=failed_at,
        status=status,
        n_accepted=n_acc,
        n_rejected=n_rej,
        nfev=nfev,
    )


# ----------------------------------------------------------------------------- numpy


def solve_arrays(
    system,
    y0: np.ndarray,
    t: np.ndarray,
    *,
    method: str,
    rtol: np.ndarray,
    atol: np.ndarray,
    tau_samples: np.ndarray | None = None,
    hold: bool = False,
    max_step: float = math.inf,
    max_steps: int = 100_000,
    dtype: str = "float64",
    sample_block: int = 1024,
) -> ArraySolution:
    """A whole solve from numpy arrays to numpy arrays, scheduled for speed (the compiled rollouts' entry).

    Parameters
    ----------
    system : MechanicalSystem
        Its ``acceleration`` accepts TensorFlow tensors; a system computing in
        another dtype than ``dtype`` gets its inputs and outputs cast.
    y0 : numpy.ndarray, shape ``(B, 2n)``
    t : numpy.ndarray, shape ``(T,)``, ``T >= 2``
        Strictly increasing (checked by the caller).
    method : str, keyword-only
        A registered pair.
    rtol, atol : numpy.ndarray, shape ``(B,)``, keyword-only
    tau_samples : numpy.ndarray, shape ``(B, T, n)``, optional, keyword-only
    hold : bool, keyword-only
        Zero-order hold of the samples instead of linear interpolation.
    max_step : float, keyword-only
    max_steps : int, keyword-only
    dtype : {"float64", "float32"}, keyword-only
        The dtype of the state and of the solver's arithmetic.
    sample_block : int, keyword-only
        Samples per plain-graph call that evaluates ``qdd`` and the energy
        at the samples: one call over a 7-DOF learned chain's 256 x 101
        samples took 2.5 s the first time and 0.71 s after (its temporaries
        outgrow the caches and the allocator's pools); in blocks of 10
        trajectories of 101 samples 0.62 s and 0.48 s.

    Returns
    -------
    ArraySolution
    """
    tab = _tableau(method)
    tf_dtype = tf.as_dtype(dtype)
    n_np, n = tf_dtype.as_numpy_dtype, int(system.n_dof)
    has_tau = tau_samples is not None
    run = _scheduler(system, tab, n=n, dtype=tf_dtype, has_tau=has_tau, hold=bool(hold))
    arrays = [y0, t] + ([tau_samples] if has_tau else []) + [rtol, atol]
    args = [_runtime.eager_tensor(np.ascontiguousarray(a, dtype=n_np), tf_dtype) for a in arrays]
    args += [
        _runtime.eager_tensor(np.asarray(min(float(max_step), 1e300), n_np), tf_dtype),
        _runtime.eager_tensor(np.asarray(max_steps, np.int32), tf.int32),
    ]
    Y, failed_at, status, n_acc, n_rej, nfev = run(*args)
    qdd, energy = _samples_in_blocks(
        system, Y, args[0], args[2] if has_tau else None, n=n, dtype=tf_dtype, block=sample_block
    )
    return ArraySolution(
        Y=Y,
        qdd=qdd,
        energy=energy,
        failed_at=np.asarray(failed_at),
        status=np.asarray(status),
        n_accepted=np.asarray(n_acc),
        n_rejected=np.asarray(n_rej),
        nfev=int(nfev),
        max_steps=int(max_steps),
    )


def _scheduler(system, tab, *, n, dtype, has_tau, hold) -> RolloutScheduler:
    """The :class:`RolloutScheduler` of ``system`` and these options (cached per system)."""

    def build():
        options = dict(n=n, dtype=dtype, has_tau=has_tau, hold=hold, samples=False)
        begin = cached(
            system,
            (tab.name, n, dtype, has_tau, hold, "begin"),
            lambda: build_begin(system, tab, n=n, dtype=dtype, has_tau=has_tau, hold=hold),
        )
        graph = cached(
            system,
            (tab.name, n, dtype, has_tau, hold, False, False),
            lambda: build_run(system, tab, jit=False, **options),
        )
        xla = cached(
            system,
            (tab.name, n, dtype, has_tau, hold, True, False),
            lambda: build_run(system, tab, jit=True, **options),
        )
        return RolloutScheduler(begin, graph, xla)

    return cached(system, ("rollout", tab.name, n, dtype, has_tau, hold), build)


def _samples_in_blocks(system, Y, y0, tau, *, n, dtype, block: int):
    """``(qdd (B, T, n), energy (B, T))`` at the samples ``Y (B, T, 2n)``, in blocks of about ``block`` samples."""
    samples = _samples_caller(system, n=n, dtype=dtype, has_tau=tau is not None)
    B, T = Y.shape[0], Y.shape[1]
    rows = max(1, block // T)
    qdd, energy = np.empty((B, T, n), dtype=Y.dtype), np.empty((B, T), dtype=Y.dtype)
    for start in range(0, B, rows):
        part = slice(start, start + rows)
        extra = [] if tau is None else [tau[part]]
        q_dd, e = samples(_runtime.eager_tensor(Y[part], dtype), y0[part], *extra)
        qdd[part], energy[part] = q_dd.numpy(), e.numpy()
    return qdd, energy


def _samples_caller(system, *, n, dtype, has_tau):
    """``(Y (B, T, 2n), y0 (B, 2n), [tau (B, T, n)]) -> (qdd (B, T, n), energy (B, T))``, a plain graph.

    :func:`lnn.solvers._engine.at_samples` outside the XLA solve (no
    per-shape compilation), cached per system.
    """
    has_energy = callable(getattr(system, "energy", None))

    def build():
        def samples(Y, y0, *tau):
            tau_s = tau[0] if has_tau else None
            return at_samples(system, Y, y0, tau_s, n=n, dtype=dtype, has_tau=has_tau, has_energy=has_energy)

        signature = [tf.TensorSpec([None, None, 2 * n], dtype), tf.TensorSpec([None, 2 * n], dtype)]
        if has_tau:
            signature.append(tf.TensorSpec([None, None, n], dtype))
        function = tf.function(samples, input_signature=signature, autograph=False, reduce_retracing=True)
        return _runtime.fast_caller(function.get_concrete_function())

    return cached(system, ("samples", n, dtype, has_tau), build)
