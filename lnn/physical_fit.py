"""The one physically consistent least-squares fit of a robot's torques (numpy + scipy).

The torques of a rigid-body robot are linear in its parameters::

    tau = A z,    z = [theta_1, ..., theta_nb, e]

with ``theta_i`` the ten inertial parameters of body ``i`` (Pinocchio's order,
:mod:`lnn.inertia`) and ``e`` the other linear terms (armature, the linear
forces of :mod:`lnn.models.forces`, offsets), ``A`` a regressor that the
caller builds (Pinocchio's joint-torque regressor in
:func:`lnn.baseline.least_squares`, the rigid-body model's own Newton-Euler
recursion in :func:`lnn.identify`). :func:`physical_least_squares` solves

    min  (|A z - b|^2 + lambda |D (z - z_prior)|^2) / |b|^2 + epsilon |eta - eta_prior|^2

(``D``: the column norms of ``A``; ``eta`` the bodies' log-Cholesky
coordinates)
over **physical** bodies (every pseudo-inertia positive definite: each body in
the log-Cholesky coordinates of :func:`lnn.inertia.log_cholesky_to_parameters`,
Rucker & Wensing 2022) and extras that are ``>= 0`` where asked (written as
squares): unconstrained coordinates, so MINPACK's Levenberg-Marquardt solves
it, with the analytic Jacobian. ``lambda`` is relative to unit column norms:
it is the ridge weight of :func:`ridge` (the linear problem without the
physical constraint), so a weight chosen by cross-validation on the linear
problem means the same here (:func:`lnn.identify`). ``epsilon`` pulls the
bodies' log-Cholesky coordinates towards the prior's (the regulariser of
:func:`lnn.baseline.least_squares`, its ``regularization``): it keeps the
bodies off the boundary of the physical set and the directions the data
cannot see near the prior. The residual runs on the ``p x p`` triangle of a
QR decomposition of ``[A, b]``, which has the same minimiser as the ``rows``
of ``A``.

The fit runs twice, from the nearest physical bodies to ``start`` (the
ridge solution, say: each pseudo-inertia's eigenvalues raised to a floor) and
from the prior's bodies (a fit from the projection of an unphysical start can
stop in a worse minimum: on exact Panda data it did, at a cost where the
prior's start reached zero), and keeps the better, never worse than either start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lnn.inertia import (
    log_cholesky_to_parameters,
    parameters_of_pseudo_inertia,
    parameters_to_log_cholesky,
    pseudo_inertia,
)

__all__ = ["PHYSICAL_FLOOR", "STRICT_FLOOR", "PhysicalFit", "nearest_physical", "physical_least_squares", "ridge"]

#: Smallest eigenvalue of a body's pseudo-inertia after projecting a start, relative to its trace.
PHYSICAL_FLOOR = 1e-6
#: Smallest eigenvalue of a fitted body's pseudo-inertia, relative to its trace.
STRICT_FLOOR = 1e-9


@dataclass(frozen=True, eq=False)
class PhysicalFit:
    """The result of :func:`physical_least_squares`.

    Attributes
    ----------
    bodies : numpy.ndarray, shape ``(n_bodies, 10)``
        Physically consistent inertial parameters.
    extras : numpy.ndarray, shape ``(k,)``
        The other coefficients (``>= 0`` where asked).
    cost : float
        ``|A z - b|^2 + lambda |D (z - z_prior)|^2`` at the solution.
    success : bool
        The solver converged.
    message : str
        The solver's message.
    """

    bodies: np.ndarray
    extras: np.ndarray
    cost: float
    success: bool
    message: str

    @property
    def z(self) -> np.ndarray:
        """All parameters ``[theta_1, ..., theta_nb, e]``, shape ``(10 n_bodies + k,)``."""
        return np.concatenate([self.bodies.reshape(-1), self.extras])


def ridge(A, b, prior, weight: float) -> np.ndarray:
    """``argmin |A z - b|^2 + weight |D (z - prior)|^2`` with ``D`` the column norms of ``A``.

    Parameters
    ----------
    A : numpy.ndarray, shape ``(rows, p)``
    b : numpy.ndarray, shape ``(rows,)``
    prior : numpy.ndarray, shape ``(p,)``
    weight : float
        ``>= 0``, relative to unit column norms.

    Returns
    -------
    numpy.ndarray, shape ``(p,)``
    """
    scale = _column_scale(A)
    As = A / scale
    gram = As.T @ As + weight * np.eye(A.shape[1])
    return np.linalg.solve(gram, As.T @ (b - A @ prior)) / scale + prior


def nearest_physical(bodies, *, floor: float = PHYSICAL_FLOOR) -> np.ndarray:
    """Physical bodies near ``bodies (n, 10)``: each pseudo-inertia's eigenvalues raised to ``floor`` of its trace.

    A body whose mass is not positive becomes a point of ``1e-6`` of the
    heaviest body's mass at its frame's origin (a 1 cm sphere).
    """
    bodies = np.array(bodies, dtype=np.float64).reshape(-1, 10)
    J = pseudo_inertia(bodies)
    w, V = np.linalg.eigh(J)
    trace = np.maximum(np.trace(J, axis1=-2, axis2=-1), 1e-12)
    J = (V * np.maximum(w, floor * trace[:, None])[:, None, :]) @ np.swapaxes(V, -1, -2)
    out = parameters_of_pseudo_inertia(J)
    light = out[:, 0] <= 0
    if np.any(light):
        mass = 1e-6 * max(float(out[~light, 0].sum()) if np.any(~light) else 1.0, 1e-12)
        moment = 0.4 * mass * 0.01**2
        out[light] = [mass, 0, 0, 0, moment, 0, moment, 0, 0, moment]
    return out


def physical_least_squares(
    A,
    b,
    *,
    n_bodies: int,
    start,
    nonnegative,
    prior=None,
    regularization: float = 0.0,
    log_cholesky_regularization: float = 1e-10,
    max_nfev: int = 1000,
) -> PhysicalFit:
    """Fit physical bodies and constrained extras to ``A z = b`` (see the module docstring).

    Parameters
    ----------
    A : numpy.ndarray, shape ``(rows, 10 n_bodies + k)``
        The regressor: the bodies' ten columns each, then the extras'.
    b : numpy.ndarray, shape ``(rows,)``
        The torques (weighted by the caller if it weighs rows).
    n_bodies : int, keyword-only
    start : numpy.ndarray, shape ``(10 n_bodies + k,)``
        Where to start (e.g. the :func:`ridge` solution); its bodies are made
        physical (:func:`nearest_physical`), its constrained extras clipped at 0.
    nonnegative : array_like of bool, shape ``(k,)``, keyword-only
        Which extras must be ``>= 0`` (armature, viscous, Coulomb).
    prior : numpy.ndarray, shape ``(10 n_bodies + k,)``, optional, keyword-only
        What the regularisation pulls towards (default: ``start``).
    regularization : float, keyword-only
        ``lambda >= 0`` of the module docstring: the ridge towards ``prior``
        in the regressor's scaled columns (the weight of :func:`ridge`).
    log_cholesky_regularization : float, keyword-only
        ``epsilon >= 0``: a pull of every body's log-Cholesky coordinates
        towards the prior body's, ``epsilon |eta - eta_prior|^2`` beside the
        normalised torque residual ``|A z - b|^2 / |b|^2``. It keeps the fit
        off the boundary of the physical set (a body the data see only in a
        plane, a point mass) and the directions no torque sees near the prior.
    max_nfev : int, keyword-only
        Evaluation budget of the solver.

    Returns
    -------
    PhysicalFit
    """
    A, b = np.asarray(A, np.float64), np.asarray(b, np.float64)
    inertial = 10 * n_bodies
    squared = np.asarray(nonnegative, dtype=bool)
    start = np.asarray(start, np.float64)
    prior = start if prior is None else np.asarray(prior, np.float64)
    scale = _column_scale(A)
    norm_b = max(float(np.linalg.norm(b)), np.finfo(float).tiny)
    R, target = _triangle(A, b)
    root = math.sqrt(max(float(regularization), 0.0))
    root_eta = math.sqrt(max(float(log_cholesky_regularization), 0.0))
    eta_prior = parameters_to_log_cholesky(nearest_physical(prior[:inertial], floor=STRICT_FLOOR)).reshape(-1)

    def unpack(x):
        theta, jac = log_cholesky_to_parameters(x[:inertial].reshape(n_bodies, 10), jacobian=True)
        e = x[inertial:]
        return np.concatenate([theta.reshape(-1), np.where(squared, e * e, e)]), jac

    def fun(x):
        z, _ = unpack(x)
        fit = np.concatenate([R @ z - target, root * scale * (z - prior)]) / norm_b
        return np.concatenate([fit, root_eta * (x[:inertial] - eta_prior)])

    def jac(x):
        _, block = unpack(x)
        dz = np.zeros((len(x), len(x)))
        for i in range(n_bodies):
            dz[10 * i : 10 * i + 10, 10 * i : 10 * i + 10] = block[i]
        dz[inertial:, inertial:] = np.diag(np.where(squared, 2.0 * x[inertial:], 1.0))
        fit = np.concatenate([R @ dz, root * scale[:, None] * dz]) / norm_b
        return np.concatenate([fit, root_eta * np.eye(inertial, len(x))])

    extras0 = np.where(squared, np.maximum(start[inertial:], 0.0), start[inertial:])
    floor = 1e-6 * max(float(np.abs(extras0).max(initial=0.0)), 1e-3)
    extras_x = np.where(squared, np.sqrt(np.maximum(extras0, floor)), extras0)
    best = None
    for bodies0 in (start[:inertial], prior[:inertial]):  # from the start made physical, and from the prior
        x0 = np.concatenate([parameters_to_log_cholesky(nearest_physical(bodies0)).reshape(-1), extras_x])
        result = _levenberg_marquardt(fun, jac, x0, max_nfev, A.shape[1])
        for x, ok, message in ((result.x, result.status > 0, result.message), (x0, True, "the start")):
            cost = float(np.sum(fun(x) ** 2))
            if np.isfinite(cost) and (best is None or cost < best[0]):  # never worse than a physical start
                best = (cost, x, bool(ok), str(message))
    cost, x, success, message = best
    z, _ = unpack(x)
    return PhysicalFit(
        bodies=z[:inertial].reshape(n_bodies, 10),
        extras=z[inertial:],
        cost=cost * norm_b**2,
        success=success,
        message=message,
    )


def _levenberg_marquardt(fun, jac, x0, max_nfev: int, fitted: int):
    """MINPACK's Levenberg-Marquardt. A run that spends its evaluations counts as converged when 20 more
    evaluations change the fit to the torques (the first ``fitted`` residuals, normalised by ``|b|``) by
    less than 1e-12: its last steps crawl along the nearly flat valley of a weak regulariser, where the
    torques are fitted to rounding (on exact Panda data the base parameters agree to 1e-10); its status
    and message then say so. A run still improving the fit keeps scipy's status 0."""
    import scipy.optimize

    def run(x, budget):
        with np.errstate(over="ignore", invalid="ignore"):  # a trial step may overflow exp(); LM steps back
            return scipy.optimize.least_squares(
                fun, x, jac=jac, method="lm", x_scale="jac", max_nfev=budget, xtol=1e-15, ftol=1e-15, gtol=1e-15
            )

    result = run(x0, max_nfev)
    if result.status == 0:  # out of evaluations: still fitting, or crawling?
        more = run(result.x, 20)
        before, after = (float(np.sum(r.fun[:fitted] ** 2)) for r in (result, more))
        if np.isfinite(after) and abs(before - after) <= 1e-12:
            more.status, more.message = 2, "the fit changes by less than 1e-12 over 20 more evaluations"
        result = more
    return result


def _column_scale(A) -> np.ndarray:
    """``D``: the column norms of ``A``, floored at ``1e-6`` of the largest.

    A parameter that no torque sees (a zero column: a body's mass moment
    along a vertical first axis) still has a pull towards the prior, so the
    fit has no flat direction.
    """
    scale = np.linalg.norm(A, axis=0)
    return np.maximum(scale, 1e-6 * max(float(scale.max(initial=0.0)), np.finfo(float).tiny))


def _triangle(A, b):
    """``(R (p, p), Q^T b (p,))`` of ``A = Q R``: ``|A z - b|`` and ``|R z - Q^T b|`` differ by a constant."""
    r = np.linalg.qr(np.column_stack([A, b]), mode="r")
    p = A.shape[1]
    R = np.zeros((p, p))
    k = min(p, r.shape[0])
    R[:k] = r[:k, :p]
    target = np.zeros(p)
    target[:k] = r[:k, p]
    return R, target
