"""The compiled backend of :func:`lnn.rollout`: the checked problem handed to :func:`lnn.solvers.solve_arrays`.

The state is integrated in float64 whatever the system's dtype (a float32
learned model arrives as its float64 twin, :mod:`lnn.integrate._precision`;
another float32 system computes its accelerations in float32, cast at the
boundary), as scipy's methods do: the rollout's result does not depend on which backend
``method="auto"`` picked beyond the solvers' tolerances. Sampled forces are
accepted; a controller ``tau(t, q, qd)`` is not (every trajectory has its own
times), which :func:`lnn.integrate.choose_method` respects.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lnn.integrate._problem import SAMPLE_BLOCK, Problem, Solution
from lnn.solvers import solve_arrays
from lnn.trajectory import Failure

__all__ = ["solve"]


def solve(problem: Problem, progress: Callable[..., None] | None = None) -> Solution:
    """Integrate ``problem`` with its compiled pair (the states, accelerations and energies at the samples)."""
    torque = problem.torque
    if torque.controller is not None:
        raise TypeError(
            f"method {problem.name!r} takes tau as samples on t (or None); a "
            "controller tau(t, q, qd) needs a solve_ivp method such as 'DOP853'"
        )
    result = solve_arrays(
        problem.system,
        problem.y0,
        problem.t,
        method=problem.name,
        rtol=problem.rtol,
        atol=problem.atol,
        tau_samples=torque.samples,
        hold=torque.hold,
        max_step=problem.max_step,
        max_steps=problem.max_steps,
        dtype="float64",
        sample_block=SAMPLE_BLOCK,
    )
    failures = tuple(
        Failure(index=int(b), time=float(result.failed_at[b]), reason=result.reason(int(b), problem.name))
        for b in np.flatnonzero(result.failed)
    )
    if progress is not None:
        span = float(problem.t[-1] - problem.t[0])
        progress(span, span)
    return Solution(
        Y=result.Y,
        qdd=result.qdd,
        energy=result.energy,
        nfev=result.nfev,
        failures=failures,
        metadata={
            "max_steps": problem.max_steps,
            "n_accepted": result.n_accepted.tolist(),
            "n_rejected": result.n_rejected.tolist(),
        },
    )
