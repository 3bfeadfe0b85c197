"""The arithmetic a rollout's right-hand side runs in: float64 for every solve, or the reachable tolerance.

A float32 vector field is smooth only to float32's resolution (1.2e-7). At
tolerances within a factor of it the solvers' error estimates measure the
right-hand side's rounding noise and the step size collapses (issue 54: the
trained default model's DOP853 rollouts at ``rtol = 1e-7`` took 5.6x the
time of ``1e-6``; at 100 s one never ended). :func:`for_solve` is the rule,
applied once per :func:`lnn.rollout`, after its inputs are checked and before
any backend runs:

- a float64 system is solved as it is (its results are unchanged);
- a float32 system with ``widened(dtype)`` (:meth:`lnn.LagrangianNetwork.widened`)
  is solved by its float64 twin, on every path: scipy's methods (its numpy
  snapshot), the compiled pairs of :mod:`lnn.solvers` and the Jacobian of
  the implicit methods;
- any other float32 system asked for a relative tolerance below
  :data:`REACHABLE_RTOL` is solved at :data:`REACHABLE_RTOL` (and an
  absolute tolerance below :data:`REACHABLE_ATOL` at that), with one
  :class:`lnn.PrecisionWarning` naming its dtype, the tolerance asked and
  the one used, instead of crawling. :func:`lnn.integrate.odeint`'s adaptive
  pairs, which stay in the system's dtype so that gradients reach its
  float32 variables, apply the same rule (:func:`reachable`) to numeric
  tolerances.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from lnn.errors import PrecisionWarning
from lnn.integrate._problem import Problem
from lnn.system import compute_dtype

__all__ = ["REACHABLE_ATOL", "REACHABLE_RTOL", "for_solve", "reachable"]

#: The tightest relative tolerance a float32 right-hand side supports (about 8x its resolution, 1.2e-7):
#: the default of :func:`lnn.integrate.default_tolerances` for a float32 system.
REACHABLE_RTOL = 1e-6
#: The tightest absolute tolerance used with a float32 right-hand side (its default atol).
REACHABLE_ATOL = 1e-8


def for_solve(problem: Problem, *, stacklevel: int = 3) -> tuple[Problem, dict]:
    """``problem`` with the system and tolerances its solve uses, and what to add to the metadata.

    Parameters
    ----------
    problem : Problem
        The checked inputs of :func:`lnn.rollout`.
    stacklevel : int, keyword-only
        Of the :class:`lnn.PrecisionWarning` (the user's call).

    Returns
    -------
    problem : Problem
        The same problem, its ``system`` replaced by the float64 twin of a
        float32 learned model, or its tolerances raised to the reachable
        ones for another float32 system; ``problem`` itself otherwise.
    metadata : dict
        ``{"solve_dtype": ...}`` (and ``"requested_rtol"`` / ``"requested_atol"``
        where a tolerance was raised).
    """
    system = problem.system
    if compute_dtype(system) != "float32":
        return problem, {"solve_dtype": compute_dtype(system)}
    widen = getattr(system, "widened", None)
    if callable(widen):
        try:
            twin = widen("float64")
        except ValueError:  # a model whose configuration does not rebuild it: the rule for the others
            twin = None
        if twin is not None:
            return dataclasses.replace(problem, system=twin), {"solve_dtype": "float64"}
    metadata = {"solve_dtype": "float32"}
    if not problem.method.adaptive:
        return problem, metadata
    rtol, atol = problem.rtol, problem.atol
    reached = reachable(system, rtol, atol, stacklevel=stacklevel + 1)
    if reached is None:
        return problem, metadata
    metadata.update(requested_rtol=_value(rtol), requested_atol=_value(atol))
    return dataclasses.replace(problem, rtol=reached[0], atol=reached[1]), metadata


def reachable(system, rtol, atol, *, stacklevel: int = 2, where: str = "integrating"):
    """``(rtol, atol)`` raised to what float32 arithmetic reaches, with one warning; None if already there.

    Parameters
    ----------
    system : object
        A float32 system (named in the warning).
    rtol, atol : float or numpy.ndarray ``(B,)``
    stacklevel : int, keyword-only
        ``warnings.warn``'s, counted from this function (2: its caller).
    where : str, keyword-only
        The start of the warning's last clause (what is done at the reachable tolerances).

    Returns
    -------
    tuple of numpy.ndarray or None
    """
    rtol, atol = np.asarray(rtol, np.float64), np.asarray(atol, np.float64)
    if np.min(rtol) >= REACHABLE_RTOL and np.min(atol) >= REACHABLE_ATOL:
        return None
    raised = np.maximum(rtol, REACHABLE_RTOL), np.maximum(atol, REACHABLE_ATOL)
    warnings.warn(
        f"{type(system).__name__} computes in float32, whose vector field is smooth only to ~1.2e-7: "
        f"rtol={_tol(rtol)}, atol={_tol(atol)} cannot be met (the step size would collapse on rounding noise); "
        f"{where} at the reachable rtol={_tol(raised[0])}, atol={_tol(raised[1])}. "
        "A float64 system meets tighter tolerances",
        PrecisionWarning,
        stacklevel=stacklevel,
    )
    return raised


def _value(array: np.ndarray):
    return float(array[0]) if np.ptp(array) == 0 else array.tolist()


def _tol(array: np.ndarray) -> str:
    flat = np.ravel(array)
    return f"{float(flat[0]):g}" if np.ptp(flat) == 0 else f"{float(flat.min()):g}..{float(flat.max()):g}"
