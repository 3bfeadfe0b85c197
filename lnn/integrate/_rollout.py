"""Door one of the integration room: :func:`rollout` (numpy results, every method of the table)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from lnn.errors import IntegrationError, NoveltyWarning
from lnn.integrate import _scipy
from lnn.integrate._methods import AUTO, choose_method
from lnn.integrate._precision import for_solve
from lnn.integrate._problem import ON_FAILURE, Problem, Solution, finish, make_problem, trajectory
from lnn.trajectory import EnsembleTrajectory, Trajectory
from lnn.uncertainty import record_novelty

__all__ = ["rollout"]


def rollout(
    system,
    q0,
    qd0,
    t,
    *,
    tau=None,
    tau_interpolation: str = "linear",
    method: str = AUTO,
    rtol=None,
    atol=None,
    max_step: float = np.inf,
    on_failure: str = "raise",
    error_control: str | None = None,
    max_steps: int = 100_000,
    progress: Callable[..., None] | None = None,
) -> Trajectory:
    """Integrate a batch of initial states of a mechanical system; numpy results.

    One door for every method of the table (:func:`lnn.integrate.methods`):
    scipy's solvers, the compiled pairs of :mod:`lnn.solvers` and the
    fixed-step schemes. By default (``method="auto"``) the fastest path
    measured for the system, the batch and the tolerance.

    Parameters
    ----------
    system : MechanicalSystem
        Anything with ``n_dof`` and ``acceleration(q, qd, tau=None)`` (and
        ``energy(q, qd)``); ``numpy_acceleration`` is used instead of
        ``acceleration`` when present, ``acceleration_jacobian`` feeds the
        implicit methods when present. A ``numpy_snapshot()`` (learned
        models) is taken once and gives both the accelerations and the
        energies. A system with a ``members`` tuple (an :class:`lnn.Ensemble`)
        is rolled out member by member, with these options, into an
        :class:`lnn.EnsembleTrajectory`; a system with ``novelty(q, qd)``
        (learned models) gets its rollout's novelty recorded.
    q0, qd0 : array_like, shape ``(B, n)`` or ``(n,)``
        Initial coordinates and velocities; a single state ``(n,)`` gives
        ``B = 1``.
    t : array_like, shape ``(T,)``
        Strictly increasing sample times; the integration runs from ``t[0]``
        to ``t[-1]`` and the solution is evaluated at every ``t`` (the
        solver's own steps are independent of this grid).
    tau : None, array_like or callable, optional
        Generalized forces (the rule of :mod:`lnn._torque`, shared with
        :func:`lnn.odeint.odeint`). ``None``: unforced. An array of shape ``(T, n)``
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
        ``"auto"`` (the default): :func:`choose_method`, the fastest path
        measured: a compiled pair for a learned model (``"tsit5"`` for a
        few trajectories at loose tolerances, ``"dopri8"`` otherwise;
        docs/how-to/choose-a-solver.md has the table), ``"DOP853"`` for
        numpy systems (ground truth) and for a controller ``tau``.
        ``"RK23"``, ``"RK45"``, ``"DOP853"``, ``"Radau"``, ``"BDF"``,
        ``"LSODA"``: the ``solve_ivp`` method (numpy; the whole batch is one
        ODE state with one step size). ``"tsit5"``, ``"dopri5"``,
        ``"dopri8"``, ``"dopri853"`` (and any pair registered with
        :func:`lnn.solvers.register_tableau`): the compiled embedded
        Runge–Kutta pairs of :mod:`lnn.solvers` (Tsitouras 5(4),
        Dormand–Prince 5(4), Prince–Dormand 8(7) as diffrax's ``Dopri8``, and
        Dormand–Prince 8(5,3) with DOP853's coefficients), for systems whose
        ``acceleration`` accepts TensorFlow tensors (learned models): the
        whole solve runs in one TensorFlow graph, every trajectory with its
        own step size, the state in float64; XLA compiles an input shape
        (the batch padded to a power of two) once the steps run at it have
        cost about what compiling it costs, on a background thread, or at
        once on a single usable core. ``"rk4"``, ``"verlet"``: the fixed-step schemes of
        :func:`lnn.odeint.odeint` (one step per interval of ``t``, or
        ``ceil(interval / max_step)`` steps), for systems in TensorFlow.
    rtol, atol : float or array_like ``(B,)``, optional
        Relative and absolute tolerances of the adaptive methods (not
        accepted by the fixed-step ones); default
        :func:`default_tolerances` of ``system`` (``1e-8, 1e-10``, or
        ``1e-6, 1e-8`` for a float32 model). Any tolerance is met at the
        cost the method's order sets: a float32 learned model is solved
        through its float64 twin (:meth:`lnn.LagrangianNetwork.widened`,
        the weights cast once per rollout) on every path, because float32
        rounding noise (1.2e-7) would collapse the step size near its
        resolution; another float32 system is integrated at ``rtol >= 1e-6``,
        ``atol >= 1e-8`` with a :class:`lnn.PrecisionWarning`. An array gives every
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
        ``novelty (B, T)`` and ``novel_at (B,)`` (the first time a
        trajectory's ``novelty`` exceeds 1, NaN if never) when the system has
        a ``novelty`` method, else None. For an ensemble, an
        :class:`lnn.EnsembleTrajectory`: the members' mean, every member's
        rollout (``member_q (K, B, T, n)``, ...) and their bands; a sample's
        novelty is the median over the members of their states' novelty, and
        ``failed_at`` is the earliest failure of any member.

    Warns
    -----
    lnn.NoveltyWarning
        Once per call, when a trajectory left the states the model was
        trained on (``novelty > 1``).
    lnn.PrecisionWarning
        Once per call, when a float32 system that cannot be widened to
        float64 is asked for a tolerance below ``rtol=1e-6, atol=1e-8``
        (it is integrated at those; ``metadata["requested_rtol"]`` keeps
        what was asked).

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
    members = getattr(system, "members", None)
    if isinstance(members, tuple) and members:  # an ensemble: every member, then their mean and spread
        options = dict(tau_interpolation=tau_interpolation, method=method, rtol=rtol, atol=atol, max_step=max_step)
        options.update(error_control=error_control, max_steps=max_steps, progress=progress)
        return _ensemble_rollout(system, members, q0, qd0, t, tau=tau, on_failure=on_failure, options=options)
    if isinstance(method, str) and method == AUTO:
        batch = int(np.shape(q0)[0]) if np.ndim(q0) == 2 else 1
        tightest = None if rtol is None else float(np.min(rtol))
        method = choose_method(system, tau=tau, batch=batch, rtol=tightest)
    problem = make_problem(
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
        max_steps=max_steps,
        on_failure=on_failure,
        error_control=error_control,
    )
    problem, precision = for_solve(problem)
    solution = _backend(problem)(problem, progress)
    solution = replace(solution, metadata={**solution.metadata, **precision})
    result = finish(trajectory(problem, solution), problem, solution.cause)
    return record_novelty(system, result, stacklevel=3)


def _ensemble_rollout(system, members, q0, qd0, t, *, tau, on_failure: str, options: dict) -> EnsembleTrajectory:
    """Roll every member out (failures masked), stack them, record novelty, raise failures if asked."""
    if on_failure not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {ON_FAILURE}, got {on_failure!r}")
    progress, runs = options.pop("progress"), []
    with warnings.catch_warnings():  # the ensemble warns once, below, not once per member
        warnings.simplefilter("ignore", NoveltyWarning)
        for k, member in enumerate(members):
            step = (
                None
                if progress is None
                else (lambda done, total, k=k: progress(k * total + done, len(members) * total))
            )
            runs.append(rollout(member, q0, qd0, t, tau=tau, on_failure="mask", progress=step, **options))
    result = EnsembleTrajectory.of_members(runs, band_scale=float(getattr(system, "rollout_band_scale", 1.0)))
    result = record_novelty(system, result, stacklevel=4)
    if result.failures and on_failure == "raise":
        raise IntegrationError.of(result.failures, batch=result.n_trajectories, method=result.method, trajectory=result)
    return result


def _backend(problem: Problem) -> Callable[..., Solution]:
    """The backend that solves ``problem`` (TensorFlow is imported for the compiled and fixed-step ones only)."""
    if problem.t.shape[0] == 1:
        return _initial_only
    if problem.method.backend == "compiled":
        from lnn.integrate._compiled import solve

        return solve
    if problem.method.backend == "fixed-step":
        from lnn.integrate.graph import solve_fixed_step

        return solve_fixed_step
    return _scipy.solve


def _initial_only(problem: Problem, progress=None) -> Solution:
    """A grid of one time: the initial states, their accelerations and energies (no step)."""
    n = problem.n
    q, qd = problem.y0[:, None, :n], problem.y0[:, None, n:]
    tau = problem.torque.at_samples(q, qd)
    qdd, energy = _scipy.samples(_scipy.Functions.of(problem.system), q, qd, None if problem.torque.is_none else tau)
    return Solution(Y=problem.y0[:, None, :], qdd=qdd, energy=energy, nfev=0)
