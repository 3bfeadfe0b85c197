"""The linear stages of :func:`lnn.identify`: torques linear in the bodies, the armature, forces and offsets.

The torque of a rigid-body chain with linear friction is linear in its
parameters (the module docstring of :mod:`lnn.physical_fit`)::

    tau = Y_bodies(q, qd, qdd) theta + I_a qdd + sum_f k_f basis_f(q, qd) + o + o_k

with ``theta`` every body's ten standard parameters (``Y_bodies`` from the
rigid-body model's own Newton-Euler recursion,
:meth:`lnn.models.rigid_body.RigidBody.regressor`), the armature ``I_a``, the
coefficients ``k_f`` of the linear forces named in ``friction=`` (each force's
``basis``, read from the force registry of :mod:`lnn.models.forces`: a new
linear force is picked up from its own file), a constant torque offset ``o``
and a deviation ``o_k`` of it per recording (a torque-sensor bias that
differs between logs: a nuisance, fitted with the model and dropped for a new
recording, so a file's bias is not learned as physics). :class:`Layout` says
where each sits in the parameter vector ``z``; :func:`columns` builds the
matrix; :func:`choose_settings` picks the Coulomb smoothing velocity and the
ridge weight towards the prior by leave-one-recording-out validation of the
linear fit; :func:`fit_nominal` and :func:`fit_physical` are the two stages.
Nothing here keeps state: data go in, a :class:`LinearSolution` comes out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lnn.models.forces import FORCES, FRICTION_VELOCITY
from lnn.physical_fit import physical_least_squares, ridge

__all__ = [
    "FRICTION_VELOCITIES",
    "RIDGE_WEIGHTS",
    "Layout",
    "LinearSolution",
    "Settings",
    "choose_settings",
    "columns",
    "fit_bounded",
    "fit_nominal",
    "fit_physical",
]

#: Smoothing velocities ``v0`` (rad/s) of ``tanh(qd / v0)`` tried on the validation data.
FRICTION_VELOCITIES = (0.003, 0.01, 0.03, 0.1)
#: Ridge weights towards the prior tried on the validation data, relative to the
#: regressor's column norms (``1e-9``: the data alone; ``1``: close to the prior).
RIDGE_WEIGHTS = (1e-9, 1e-6, 1e-4, 1e-2, 1.0)
#: The physical fit's pull of the bodies' log-Cholesky coordinates towards the prior's (relative to the
#: mean squared relative torque error): only what keeps the bodies off the physical set's boundary.
LOG_CHOLESKY_WEIGHT = 1e-10


@dataclass(frozen=True)
class Layout:
    """Where every parameter sits in ``z = [theta (10 n_bodies), armature (n), forces (n each), o (n), o_k (n each)]``.

    Attributes
    ----------
    n : int
        Joints.
    n_bodies : int
    forces : tuple of str
        The linear forces fitted (registry order), without ``"offset"``.
    offset : bool
        A constant torque offset ``o`` per joint.
    recordings : tuple of int
        The recordings that get a deviation ``o_k`` of the offset (empty: none).
    body_columns : int
        Parameters of a body (10 standard parameters; a Lagrangian linear in
        its own parameters, :mod:`lnn.models.trigonometric`, is one "body" of
        all its parameters).
    armature : bool
        An armature block (its ``I_a qdd`` is already in the span of a
        trigonometric Lagrangian's constant mass).
    """

    n: int
    n_bodies: int
    forces: tuple[str, ...]
    offset: bool
    recordings: tuple[int, ...] = ()
    body_columns: int = 10
    armature: bool = True

    @property
    def inertial(self) -> int:
        """Columns of the bodies, ``body_columns n_bodies``."""
        return self.body_columns * self.n_bodies

    @property
    def blocks(self) -> tuple[str, ...]:
        """The per-joint blocks of the extras, in order (a force of several features has one block each)."""
        offsets = ("offset",) if self.offset else ()
        armature = ("armature",) if self.armature else ()
        forces = tuple(block for name in self.forces for block in FORCES[name].blocks())
        return (*armature, *forces, *offsets, *(f"recording {k}" for k in self.recordings))

    @property
    def size(self) -> int:
        """Length of ``z``."""
        return self.inertial + self.n * len(self.blocks)

    def nonnegative(self) -> np.ndarray:
        """Which extras are ``>= 0`` (the armature and the nonnegative forces), ``(size - inertial,)``."""
        flags = [True] * self.armature
        flags += [bool(FORCES[name].nonnegative) for name in self.forces for _ in FORCES[name].blocks()]
        flags += [False] * (len(self.blocks) - len(flags))
        return np.repeat(flags, self.n)

    def lower(self) -> np.ndarray:
        """The lower bound of every parameter of ``z``, ``(size,)``: 0 for the nonnegative extras, else ``-inf``."""
        return np.concatenate([np.full(self.inertial, -np.inf), np.where(self.nonnegative(), 0.0, -np.inf)])

    def block(self, name: str) -> slice:
        """The slice of ``z`` that holds the block ``name``."""
        start = self.inertial + self.n * self.blocks.index(name)
        return slice(start, start + self.n)


@dataclass(frozen=True, eq=False)
class Settings:
    """What the validation chose: the Coulomb smoothing velocity, the ridge weight, how it judged, the layout,
    and the validation's mean squared torque error with them (NaN when not validated)."""

    velocity: float
    weight: float
    how: str
    layout: Layout | None = None
    error: float = float("nan")


@dataclass(frozen=True, eq=False)
class LinearSolution:
    """The parameters of a linear stage.

    Attributes
    ----------
    layout : Layout
    z : numpy.ndarray, shape ``(layout.size,)``
    velocity : float
        The Coulomb smoothing velocity ``v0`` the force columns were built with.
    settings : Settings or None
    """

    layout: Layout
    z: np.ndarray
    velocity: float
    settings: Settings | None = field(default=None)

    @property
    def bodies(self) -> np.ndarray:
        """Parameters of every body, ``(n_bodies, body_columns)`` (standard parameters: ``(n_bodies, 10)``)."""
        return self.z[: self.layout.inertial].reshape(-1, self.layout.body_columns)

    def get(self, block: str) -> np.ndarray:
        """The coefficients ``(n,)`` of ``block`` (``"armature"``, a force's block, ``"offset"``; zeros if absent)."""
        if block not in self.layout.blocks:
            return np.zeros(self.layout.n)
        return self.z[self.layout.block(block)].copy()

    def force(self, name: str) -> np.ndarray:
        """The coefficients of the linear force ``name``: ``(n,)``, or ``(features, n)`` with several features."""
        return FORCES[name].gather(self.get)

    def assign_forces(self, model) -> None:
        """Set the coefficients of ``model``'s linear forces (its learned ones keep their weights)."""
        for term in model.forces:
            if FORCES[term.name].linear:
                term.assign(self.force(term.name))

    def recording_offsets(self) -> dict[int, np.ndarray]:
        """Recording id -> the deviation ``o_k (n,)`` of its torque offset."""
        return {k: self.get(f"recording {k}") for k in self.layout.recordings}

    def deviation(self, trajectory) -> np.ndarray:
        """Per sample, the deviation of its recording's offset, ``(N, n)`` (zero for other recordings)."""
        trajectory = np.asarray(trajectory)
        out = np.zeros((trajectory.shape[0], self.layout.n))
        for k, value in self.recording_offsets().items():
            out[trajectory == k] = value
        return out


def columns(layout: Layout, bodies: np.ndarray, data, velocity: float) -> np.ndarray:
    """The matrix ``A (N n, size)`` of ``tau = A z`` on ``data`` (``bodies``: its rigid regressor ``(N, n, 10 nb)``)."""
    q, qd, qdd = (np.asarray(getattr(data, k), np.float64) for k in ("q", "qd", "qdd"))
    N, n = q.shape
    forces = [basis for name in layout.forces for basis in FORCES[name].bases(q, qd, velocity=velocity)]
    blocks = [qdd] * layout.armature + forces
    if layout.offset:
        blocks.append(np.ones_like(q))
    trajectory = np.asarray(data.trajectory)
    blocks += [np.repeat((trajectory == k)[:, None], n, axis=1).astype(np.float64) for k in layout.recordings]
    extras = np.zeros((N, n, n * len(blocks)))
    rows = np.arange(n)
    for b, values in enumerate(blocks):  # one column per joint and block, nonzero in that joint's row
        extras[:, rows, b * n + rows] = values
    return np.concatenate([bodies, extras], axis=2).reshape(N * n, -1)


def _targets(data) -> np.ndarray:
    return np.asarray(data.tau, np.float64).reshape(-1)


def fit_nominal(layout: Layout, prior_bodies: np.ndarray, bodies: np.ndarray, data) -> LinearSolution:
    """The prior's bodies as they are; the extras by bounded least squares on what they leave."""
    from scipy.optimize import lsq_linear

    A = columns(layout, bodies, data, FRICTION_VELOCITY)
    inertial = layout.inertial
    theta = np.asarray(prior_bodies, np.float64).reshape(-1)
    lower = np.where(layout.nonnegative(), 0.0, -np.inf)
    # A ridge of the smallest weight tried (the offset and the deviations per recording are collinear)
    extras = A[:, inertial:]
    pull = np.sqrt(RIDGE_WEIGHTS[0]) * np.diag(np.linalg.norm(extras, axis=0) + 1e-300)
    target = np.concatenate([_targets(data) - A[:, :inertial] @ theta, np.zeros(extras.shape[1])])
    fit = lsq_linear(np.concatenate([extras, pull]), target, bounds=(lower, np.inf))
    return LinearSolution(layout, np.concatenate([theta, fit.x]), FRICTION_VELOCITY)


def choose_settings(layouts, prior_bodies, train_bodies, train, held_out=None, held_out_bodies=None) -> Settings:
    """The layout, smoothing velocity and ridge weight with the lowest validation error of the linear ridge fit.

    ``layouts`` are the candidates (with and without a deviation of the
    offset per recording: the deviations help only where they free the other
    parameters from the logs' biases, and with few or short logs they can
    trade against gravity instead; the validation decides). With at least
    three training recordings, leave-one-recording-out (a setting must hold on
    a log it has not seen, whose own deviation is then unknown: zero; the folds
    are sums of per-recording normal equations); else the held-out part.
    Each fold is fitted with the nonnegative coefficients ``>= 0``, as the
    stages that follow fit them: on the simulated Panda of
    ``benchmarks/_panda.py`` the unbounded fits chose ``v0 = 0.01`` rad/s,
    where a negative Stribeck coefficient undid a too sharp Coulomb edge, and
    the passive fit with that ``v0`` then erred 0.0115 N^2 m^2 on the test logs
    against 0.0068 with the truth's 0.03.
    """
    ids = np.unique(np.asarray(train.trajectory))
    folded = len(ids) >= 3 or held_out is None
    best = None
    for layout in layouts:
        prior = _prior(layout, prior_bodies)
        lower = layout.lower()
        for velocity in FRICTION_VELOCITIES if _uses_velocity(layout, train) else (FRICTION_VELOCITY,):
            parts = _normal_equations(layout, prior, train_bodies, train, velocity, held_out, held_out_bodies, folded)
            gram_all = sum(p[0] for p in parts)
            rhs_all = sum(p[1] for p in parts)
            for weight in RIDGE_WEIGHTS:
                errors = []
                for G, r, target in (p for p in parts if p[2] is not None):
                    u = _bounded_normal(gram_all - G + weight * np.eye(len(G)), rhs_all - r, lower)
                    errors.append((u @ G @ u - 2 * u @ r + target @ target) / len(target))
                if best is None or np.mean(errors) < best[0]:
                    best = (float(np.mean(errors)), velocity, weight, layout)
    how = "leave-one-recording-out" if folded and len(ids) >= 3 else "held-out"
    return Settings(velocity=float(best[1]), weight=float(best[2]), how=how, layout=best[3], error=best[0])


def _bounded_normal(H: np.ndarray, r: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """``argmin u'Hu - 2u'r`` subject to ``u >= lower`` (``H`` symmetric positive definite; the prior's extras
    are zero, so ``z >= 0`` is ``u >= 0`` in scaled columns).

    The solution of ``H u = r`` when it keeps the bounds; else a primal active-set method (the variables
    held at their bound are those the unconstrained step would push through it and whose gradient keeps
    them there: a few solves of the free block, where a general bounded solver on every fold and setting
    made the validation of a 2-joint arm 7x slower), with scipy's BVLS on the Cholesky factor as the
    fallback should it cycle."""
    u = np.linalg.solve(H, r)
    if np.all(u >= lower):
        return u
    held = u < lower  # never where the bound is -inf
    for _ in range(4 * len(u)):
        u = np.where(held, lower, 0.0)
        free = ~held
        u[free] = np.linalg.solve(H[np.ix_(free, free)], r[free] - H[np.ix_(free, held)] @ lower[held])
        below = free & (u < lower - 1e-12 * (1.0 + np.abs(lower)))
        if np.any(below):
            held |= below
            continue
        gradient = H @ u - r
        pulled = held & (gradient < -1e-12 * (1.0 + np.abs(r)))
        if not np.any(pulled):
            return np.maximum(u, lower)
        held[np.argmin(np.where(pulled, gradient, np.inf))] = False
    from scipy.linalg import cholesky, solve_triangular
    from scipy.optimize import lsq_linear

    L = cholesky(H, lower=True)
    return lsq_linear(L.T, solve_triangular(L, r, lower=True), bounds=(lower, np.inf), method="bvls").x


def _normal_equations(layout, prior, train_bodies, train, velocity, held_out, held_out_bodies, folded) -> list:
    """``(G, r, target)`` per validation fold (``target`` None for a part that is only trained on)."""
    rows = np.repeat(np.asarray(train.trajectory), layout.n)
    A = columns(layout, train_bodies, train, velocity)
    scale = np.linalg.norm(A, axis=0) + 1e-300
    As, b = A / scale, _targets(train) - A @ prior  # the deviation from the prior, in scaled columns
    if folded:
        return [
            (As[rows == k].T @ As[rows == k], As[rows == k].T @ b[rows == k], b[rows == k]) for k in np.unique(rows)
        ]
    Av = columns(layout, held_out_bodies, held_out, velocity)
    bv = _targets(held_out) - Av @ prior
    Av = Av / scale
    return [(As.T @ As + Av.T @ Av, As.T @ b + Av.T @ bv, None), (Av.T @ Av, Av.T @ bv, bv)]


def _uses_velocity(layout: Layout, data) -> bool:
    """Whether a force's columns depend on the smoothing velocity ``v0`` (Coulomb's ``tanh(qd / v0)``)."""
    q, qd = np.asarray(data.q, np.float64), np.asarray(data.qd, np.float64)
    low, high = FRICTION_VELOCITIES[0], FRICTION_VELOCITIES[-1]
    return any(
        not np.array_equal(FORCES[f].bases(q, qd, velocity=low), FORCES[f].bases(q, qd, velocity=high))
        for f in layout.forces
    )


def _prior(layout: Layout, prior_bodies) -> np.ndarray:
    return np.concatenate([np.asarray(prior_bodies, np.float64).reshape(-1), np.zeros(layout.size - layout.inertial)])


def fit_bounded(layout: Layout, prior_bodies, bodies: np.ndarray, data, settings: Settings) -> LinearSolution:
    """The ridge solution towards the prior with the nonnegative forces' coefficients ``>= 0`` and no other
    constraint: the fit of a Lagrangian linear in parameters that have no physical set of their own
    (:mod:`lnn.models.trigonometric`; the friction stays dissipative)."""
    from scipy.optimize import lsq_linear

    A = columns(layout, bodies, data, settings.velocity)
    b = _targets(data)
    prior = _prior(layout, prior_bodies)
    lower = layout.lower()
    start = ridge(A, b, prior, settings.weight)
    if np.all(start >= lower):
        return LinearSolution(layout, start, settings.velocity, settings)
    scale = np.linalg.norm(A, axis=0)  # the ridge of :func:`lnn.physical_fit.ridge`, as rows
    scale = np.maximum(scale, 1e-6 * scale.max())
    pull = np.sqrt(settings.weight) * scale
    fit = lsq_linear(
        np.concatenate([A, np.diag(pull)]), np.concatenate([b, pull * prior]), bounds=(lower, np.inf), method="bvls"
    )
    return LinearSolution(layout, fit.x, settings.velocity, settings)


def fit_physical(layout: Layout, prior_bodies, bodies: np.ndarray, data, settings: Settings) -> LinearSolution:
    """The ridge solution towards the prior made physical: every body's pseudo-inertia positive definite,
    the armature and the nonnegative forces' coefficients ``>= 0`` (:func:`lnn.physical_fit.physical_least_squares`)."""
    A = columns(layout, bodies, data, settings.velocity)
    b = _targets(data)
    prior = _prior(layout, prior_bodies)
    start = ridge(A, b, prior, settings.weight)
    fit = physical_least_squares(
        A,
        b,
        n_bodies=layout.n_bodies,
        start=start,
        nonnegative=layout.nonnegative(),
        prior=prior,
        regularization=settings.weight,
        log_cholesky_regularization=LOG_CHOLESKY_WEIGHT,
    )
    return LinearSolution(layout, fit.z, settings.velocity, settings)
