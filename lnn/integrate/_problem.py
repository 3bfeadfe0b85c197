"""The problem a rollout solves, for every backend: checked inputs in, a :class:`lnn.Trajectory` out.

- :func:`make_problem` checks the inputs of :func:`lnn.rollout` once (shapes,
  finiteness, the time grid, tolerances, the forces' rule of
  :mod:`lnn._torque`, the method against the table of
  :mod:`lnn.integrate._methods`) and returns a :class:`Problem`;
- :func:`default_tolerances` and :func:`lnn.system.compute_dtype` are the
  package's one rule for tolerances and dtypes (both doors use them);
- a backend returns a :class:`Solution` (the states, accelerations and
  energies at the samples, its failures and counters), and
  :func:`trajectory` assembles the :class:`lnn.Trajectory`; :func:`finish`
  raises the :class:`lnn.IntegrationError` of its failures when asked to.

numpy only (no TensorFlow, no solver).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lnn import _validate
from lnn._grid import time_grid
from lnn._torque import NumpyTorque, check_interpolation
from lnn.errors import IntegrationError
from lnn.integrate._methods import Method, method
from lnn.system import compute_dtype
from lnn.trajectory import Trajectory

__all__ = [
    "ERROR_CONTROL",
    "ON_FAILURE",
    "SAMPLE_BLOCK",
    "Problem",
    "Solution",
    "default_tolerances",
    "finish",
    "make_problem",
    "trajectory",
]

#: What :func:`lnn.rollout` does with a trajectory that fails.
ON_FAILURE = ("raise", "mask")
#: Whose local error the step-size control of :func:`lnn.rollout`'s scipy methods bounds.
ERROR_CONTROL = ("trajectory", "batch")
#: Samples per call when the accelerations and energies are evaluated at the samples after a solve.
#: One call over 256 x 101 samples of a learned 64x64 model allocates ~40 MB of temporaries and took
#: 0.50 s; blocks of 1024 rows stay in cache: 0.22 s (4096 rows: 0.29 s).
SAMPLE_BLOCK = 1024


def default_tolerances(system) -> tuple[float, float]:
    """``(rtol, atol)`` that suit ``system``'s arithmetic (:func:`lnn.system.compute_dtype`).

    Parameters
    ----------
    system : MechanicalSystem

    Returns
    -------
    tuple of float
        ``(1e-6, 1e-8)`` for a float32 system, whose own arithmetic is
        accurate to ~1e-7 (a float32 learned model is solved in float64,
        :mod:`lnn.integrate._precision`, so tighter tolerances cost only what
        the method's order sets; other float32 systems cannot go below
        these); ``(1e-8, 1e-10)`` otherwise.
    """
    if compute_dtype(system) == "float32":
        return 1e-6, 1e-8
    return 1e-8, 1e-10


@dataclass(frozen=True, eq=False)
class Problem:
    """The checked inputs of one :func:`lnn.rollout`.

    Attributes
    ----------
    system : MechanicalSystem
    n, B : int
        Degrees of freedom and batch size.
    t : numpy.ndarray, shape ``(T,)``
    y0 : numpy.ndarray, shape ``(B, 2n)``
        The initial states ``[q, qd]``.
    method : Method
        The row of the table.
    rtol, atol : numpy.ndarray, shape ``(B,)``
        Per-trajectory tolerances.
    max_step : float
    max_steps : int
        Step attempts per trajectory of the compiled methods.
    on_failure, error_control, tau_interpolation : str
    torque : lnn._torque.NumpyTorque
    """

    system: Any
    n: int
    B: int
    t: np.ndarray
    y0: np.ndarray
    method: Method
    rtol: np.ndarray
    atol: np.ndarray
    max_step: float
    max_steps: int
    on_failure: str
    error_control: str
    tau_interpolation: str
    torque: NumpyTorque

    @property
    def name(self) -> str:
        """The method's name."""
        return self.method.name


def make_problem(
    system,
    q0,
    qd0,
    t,
    *,
    tau,
    tau_interpolation,
    method: str,
    rtol,
    atol,
    max_step,
    max_steps=100_000,
    on_failure="raise",
    error_control=None,
) -> Problem:
    """Check the inputs of :func:`lnn.rollout` (raising its ``ValueError`` / ``TypeError``)."""
    row = _method(method)
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {ON_FAILURE}; got {on_failure!r}")
    if error_control is None:
        error_control = "batch" if row.implicit else "trajectory"
    if error_control not in ERROR_CONTROL:
        raise ValueError(f"error_control must be one of {ERROR_CONTROL}; got {error_control!r}")
    check_interpolation(tau_interpolation)
    n = check_system(system)
    q0, _ = _validate.state("q0", q0, n)
    qd0, _ = _validate.state("qd0", qd0, n)
    if q0.shape != qd0.shape:
        raise ValueError(f"q0 and qd0 must have the same shape; got {q0.shape} and {qd0.shape}")
    B = q0.shape[0]
    t = time_grid(t)
    rtol, atol = _tolerances(system, row, rtol, atol, B)
    max_step = np.inf if max_step == np.inf else _validate.positive("max_step", max_step)
    return Problem(
        system=system,
        n=n,
        B=B,
        t=t,
        y0=np.concatenate([q0, qd0], axis=1),
        method=row,
        rtol=rtol,
        atol=atol,
        max_step=float(max_step),
        max_steps=_validate.positive("max_steps", max_steps, integer=True),
        on_failure=on_failure,
        error_control=error_control,
        tau_interpolation=tau_interpolation,
        torque=NumpyTorque.build(tau, t, batch=B, n=n, interpolation=tau_interpolation),
    )


def _method(name) -> Method:
    if isinstance(name, Method):
        return name
    return method(name)


def _tolerances(system, row: Method, rtol, atol, B: int):
    """``(rtol (B,), atol (B,))``: the given tolerances or the system's defaults, checked."""
    if not row.adaptive:
        if rtol is not None or atol is not None:
            raise ValueError(
                f"rtol and atol apply to the adaptive methods; {row.name!r} is fixed-step "
                "(its steps are the intervals of t, shortened by max_step)"
            )
        return np.full(B, np.nan), np.full(B, np.nan)
    default_rtol, default_atol = default_tolerances(system)
    rtol = tolerance("rtol", default_rtol if rtol is None else rtol, B)
    atol = tolerance("atol", default_atol if atol is None else atol, B)
    if row.backend == "scipy" and np.ptp(rtol) > 0:
        raise ValueError(
            f"a per-trajectory rtol needs a compiled method; {row.name} takes one rtol (per-trajectory "
            f"atol is accepted); got rtol of {rtol.min():g} to {rtol.max():g}"
        )
    return rtol, atol


def tolerance(name: str, value, B: int) -> np.ndarray:
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


def check_system(system) -> int:
    """``system.n_dof``, once ``system`` has what :func:`lnn.rollout` calls."""
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


# ----------------------------------------------------------------------------- the result


@dataclass(frozen=True, eq=False)
class Solution:
    """What a backend hands back: the states, accelerations and energies at the samples.

    Attributes
    ----------
    Y : numpy.ndarray, shape ``(B, T, 2n)``
        ``[q, qd]`` at the samples, NaN after a trajectory's failure.
    qdd : numpy.ndarray, shape ``(B, T, n)``
    energy : numpy.ndarray, shape ``(B, T)``
        NaN for a system without one.
    nfev : int
        Right-hand-side evaluations of the solve.
    failures : tuple of lnn.trajectory.Failure
    metadata : dict
        The backend's counters and options (merged into ``Trajectory.metadata``).
    cause : BaseException or None
        The first exception the system raised (the ``__cause__`` of the error).
    """

    Y: np.ndarray
    qdd: np.ndarray
    energy: np.ndarray
    nfev: int
    failures: tuple = ()
    metadata: dict = field(default_factory=dict)
    cause: BaseException | None = None


def trajectory(problem: Problem, solution: Solution) -> Trajectory:
    """The :class:`lnn.Trajectory` of a solve."""
    n = problem.n
    Y = np.asarray(solution.Y, dtype=np.float64)
    q, qd = np.ascontiguousarray(Y[..., :n]), np.ascontiguousarray(Y[..., n:])
    failed_at = np.full(problem.B, np.nan)
    for failure in solution.failures:
        failed_at[failure.index] = failure.time
    metadata = {"max_step": problem.max_step, "tau_interpolation": problem.tau_interpolation}
    if problem.method.adaptive:
        metadata.update(tolerance_metadata(problem), error_control=problem.error_control)
    return Trajectory(
        t=problem.t,
        q=q,
        qd=qd,
        qdd=np.asarray(solution.qdd, dtype=np.float64),
        tau=problem.torque.at_samples(q, qd),
        energy=np.asarray(solution.energy, dtype=np.float64),
        nfev=int(solution.nfev),
        method=problem.name,
        metadata={**metadata, **solution.metadata},
        failed_at=failed_at,
        failures=tuple(sorted(solution.failures, key=lambda f: f.index)),
    )


def tolerance_metadata(problem: Problem) -> dict:
    """``rtol`` and ``atol`` as floats when shared by the batch, else as lists."""
    return {
        name: (float(value[0]) if np.ptp(value) == 0 else value.tolist())
        for name, value in (("rtol", problem.rtol), ("atol", problem.atol))
    }


def finish(result: Trajectory, problem: Problem, cause: BaseException | None) -> Trajectory:
    """``result``, or the :class:`lnn.IntegrationError` of its failures under ``on_failure="raise"``."""
    if result.failures and problem.on_failure == "raise":
        error = IntegrationError.of(result.failures, batch=problem.B, method=problem.name, trajectory=result)
        raise error from cause
    return result
