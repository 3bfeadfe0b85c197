"""Classical identification of a rigid-body robot from measured torques (least squares).

The inverse dynamics of a rigid-body tree is linear in its inertial
parameters: ``tau = Y(q, qd, qdd) theta`` with ``Y`` Pinocchio's joint-torque
regressor (``pinocchio.computeJointTorqueRegressor``, shape ``(n, 10 n_links)``)
and ``theta`` the 10 parameters of every link in Pinocchio's order
``[m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]`` (``I`` about
the link's joint frame; see :mod:`lnn.inertia`). Every linear force of
the force registry (:mod:`lnn.models.forces`: ``viscous`` with the column
``qd_j``, ``coulomb`` with ``tanh(qd_j / v0)``, and any registered
``LinearForce``, read from its own ``basis``) adds one column per joint, the
offset ``o_j`` the column ``1``, and an optional rotor inertia (armature
``I_a,j``) the column ``qdd_j``::

    tau_j = (Y theta)_j + I_a,j qdd_j + b_j qd_j + c_j tanh(qd_j / v0) + ... + o_j.

Only some combinations of ``theta`` act on the joints (the *base
parameters*, Gautier 1990): they are found numerically by a QR decomposition
with column pivoting of the regressor stacked over random states, and fitted
by linear least squares (:func:`least_squares`), or fitted as physically
consistent bodies in log-Cholesky coordinates (``physical=True``: the fit of
:mod:`lnn.physical_fit`, the one :func:`lnn.identify` uses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lnn.errors import NonPhysicalMassMatrixError
from lnn.inertia import PhysicalConsistency, physical_consistency
from lnn.models.forces import FORCES, friction_names
from lnn.physical_fit import nearest_physical, physical_least_squares

__all__ = ["least_squares", "IdentifiedRobot", "IdentifiedFriction", "FitStatistics", "NonPhysicalMassMatrixError"]

_HINT = "install the robots extra: pip install 'lnn[robots]'"
_LINK_PARAMETERS = ("m", "mc_x", "mc_y", "mc_z", "I_xx", "I_xy", "I_yy", "I_xz", "I_yz", "I_zz")


def _import_pinocchio():
    try:
        import pinocchio
    except ImportError as exc:
        raise ImportError(f"lnn.baseline.least_squares needs Pinocchio (PyPI 'pin'); {_HINT}") from exc
    return pinocchio


# ------------------------------------------------------------------ results
@dataclass(frozen=True, eq=False)
class IdentifiedFriction:
    """Identified joint friction ``tau_f(q, qd) + o = sum_f k_f basis_f(q, qd) + o`` (``b qd + c tanh(qd / v0) + o``).

    Attributes
    ----------
    viscous, coulomb, offset : ndarray, shape ``(n,)``
        ``b``, ``c`` and ``o`` per joint (zero for the terms not fitted).
    velocity : float
        The smoothing velocity ``v0``.
    coefficients : dict of str to ndarray
        Every linear force fitted (the registry's name -> its coefficients,
        ``(n,)``, or ``(features, n)`` for a force of several features such as
        ``stribeck``), ``viscous`` and ``coulomb`` included.
    """

    viscous: np.ndarray
    coulomb: np.ndarray
    offset: np.ndarray
    velocity: float
    coefficients: dict = field(default_factory=dict)

    def torque(self, qd, q=None) -> np.ndarray:
        """``sum_f k_f basis_f(q, qd) + o``, shape ``(..., n)`` for ``qd`` of shape ``(..., n)``."""
        qd = np.asarray(qd, dtype=np.float64)
        return -self.force(qd, q) + self.offset

    def force(self, qd, q=None) -> np.ndarray:
        """The friction force on the joints without the offset, ``-sum_f k_f basis_f(q, qd)``.

        Dissipative (``qd · force <= 0``) when every force is and its coefficients are ``>= 0``
        (always for ``physical=True``).
        """
        qd = np.asarray(qd, dtype=np.float64)
        flat = qd.reshape(-1, qd.shape[-1])
        q_flat = np.zeros_like(flat) if q is None else np.asarray(q, np.float64).reshape(flat.shape)
        total = np.zeros_like(flat)
        for name, k in self._terms().items():
            total += FORCES[name].torque(k, q_flat, flat, velocity=self.velocity)
        return -total.reshape(qd.shape)

    def _terms(self) -> dict:
        terms = dict(self.coefficients)
        terms.setdefault("viscous", self.viscous)
        terms.setdefault("coulomb", self.coulomb)
        return terms

    def parameters(self) -> dict:
        """JSON-serialisable: ``simulations.Friction(**friction.parameters())`` rebuilds its viscous, Coulomb
        and offset terms (the other forces are in :attr:`coefficients`)."""
        return {
            "viscous": self.viscous.tolist(),
            "coulomb": self.coulomb.tolist(),
            "offset": self.offset.tolist(),
            "velocity": float(self.velocity),
        }


@dataclass(frozen=True, eq=False)
class FitStatistics:
    """How well the identified model explains the training torques.

    Attributes
    ----------
    mse, rmse : ndarray, shape ``(n,)``
        Torque mean squared error (N^2 m^2) and its root, per joint.
    r_squared : ndarray, shape ``(n,)``
        ``1 - mse / var(tau)`` per joint.
    n_samples : int
        Number of samples ``N`` used.
    rank : int
        Number of base parameters (identifiable combinations).
    data_rank : int
        Numerical rank of the base regressor on the data (``< rank`` when the
        data do not excite every base parameter).
    condition_number : float
        Condition number of the column-normalised base regressor on the data.
    cost : float
        Half the weighted residual sum of squares at the solution (the
        regulariser of the physical fit not included).
    success : bool
        The solver converged.
    message : str
        The solver's message.
    """

    mse: np.ndarray
    rmse: np.ndarray
    r_squared: np.ndarray
    n_samples: int
    rank: int
    data_rank: int
    condition_number: float
    cost: float
    success: bool
    message: str


@dataclass(frozen=True, eq=False)
class IdentifiedRobot:
    """A rigid-body robot with identified inertial parameters, armature and friction.

    Satisfies :class:`lnn.MechanicalSystem` (numpy in, numpy out, any
    leading batch shape), so it rolls out with :func:`lnn.rollout` and is
    evaluated by :mod:`lnn.metrics`. ``inverse_dynamics`` and
    ``acceleration`` include the armature and the friction; ``energy`` is
    the rigid body's ``T + V``.

    Attributes
    ----------
    n_dof : int
    angular : tuple of bool
    joint_names : tuple of str
        The joints, in the order of ``q``.
    link_names : tuple of str
        The bodies, named by their joints, in the order of ``link_parameters``.
    link_parameters : ndarray, shape ``(n_links, 10)``
        Per link ``[m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``
        (``I`` about the joint frame). For ``physical=True`` every link is
        physically consistent. For the plain fit they are not unique: the
        parameters closest (Euclidean) to the robot's nominal ones whose base
        projection equals ``base_parameters``; any such vector has the same
        dynamics.
    armature : ndarray, shape ``(n,)``
        Rotor inertia per joint (zero when not fitted).
    friction : IdentifiedFriction or None
        ``None`` for ``friction=None`` without offset.
    base_parameters : ndarray, shape ``(rank,)``
        The identified base parameters ``base_projection @ parameters``.
    base_names : tuple of str
        Name of the regressor column that carries each base parameter.
    parameter_names : tuple of str
        Names of all ``10 n_links + n_extra`` parameters, e.g. ``"Joint2.I_xx"``,
        ``"Joint1.viscous"``.
    base_projection : ndarray, shape ``(rank, 10 n_links + n_extra)``
        Base parameters from all parameters: the identifiable combinations.
    statistics : FitStatistics
        Residuals on the training data.
    physical : bool
        Fitted with the physically consistent parametrisation.
    """

    n_dof: int
    angular: tuple[bool, ...]
    joint_names: tuple[str, ...]
    link_names: tuple[str, ...]
    link_parameters: np.ndarray
    armature: np.ndarray
    friction: IdentifiedFriction | None
    base_parameters: np.ndarray
    base_names: tuple[str, ...]
    parameter_names: tuple[str, ...]
    base_projection: np.ndarray
    statistics: FitStatistics
    physical: bool
    _model: Any = field(repr=False)

    # ------------------------------------------------------------- helpers
    @property
    def pinocchio_model(self):
        """A Pinocchio ``Model`` loaded with the identified inertias and armature (do not modify)."""
        return self._model

    def physical_consistency(self) -> PhysicalConsistency:
        """Link-by-link check of ``link_parameters`` (mass, pseudo-inertia, triangle inequalities)."""
        return physical_consistency(self.link_parameters)

    def _check(self, **arrays) -> list[np.ndarray]:
        checked = {}
        for name, value in arrays.items():
            if value is None:
                continue
            array = np.asarray(value, dtype=np.float64)
            if array.ndim == 0 or array.shape[-1] != self.n_dof:
                raise ValueError(f"{name} must have shape (..., {self.n_dof}); got shape {array.shape}")
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{name} contains NaN or infinite values (shape {array.shape})")
            checked[name] = array
        try:
            batch = np.broadcast_shapes(*(a.shape[:-1] for a in checked.values()))
        except ValueError:
            shapes = ", ".join(f"{k} {a.shape}" for k, a in checked.items())
            raise ValueError(f"mismatched batch shapes: {shapes}") from None
        shape = batch + (self.n_dof,)
        return [np.broadcast_to(checked[k], shape) if k in checked else None for k in arrays]

    def _loop(self, fn, out_shape, *arrays):
        batch = arrays[0].shape[:-1]
        flat = [np.ascontiguousarray(a.reshape(-1, a.shape[-1])) for a in arrays]
        out = np.empty((flat[0].shape[0],) + tuple(out_shape))
        for k in range(out.shape[0]):
            out[k] = fn(*(a[k] for a in flat))
        return out.reshape(batch + tuple(out_shape))

    def _friction_torque(self, qd: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.zeros_like(qd) if self.friction is None else self.friction.torque(qd, q)

    # ------------------------------------------------------------ protocol
    def mass_matrix(self, q, qd=None) -> np.ndarray:
        """Mass matrix ``M(q)`` (armature included), shape ``(..., n, n)``.

        Parameters
        ----------
        q : array_like, shape ``(..., n)``
        qd : array_like, shape ``(..., n)``, optional
            Ignored (validated when given).
        """
        q, _ = self._check(q=q, qd=qd)
        pin, model = _import_pinocchio(), self._model
        data = model.createData()

        def _one(qi):
            upper = np.triu(pin.crba(model, data, qi))
            return upper + np.triu(upper, 1).T

        return self._loop(_one, (self.n_dof, self.n_dof), q)

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """Joint torques ``tau = M qdd + C qd + g + I_a qdd + tau_f(qd) + o``.

        Equal to the regressor times the parameters (hence to the base
        regressor times ``base_parameters``).

        Parameters
        ----------
        q, qd, qdd : array_like, shape ``(..., n)``

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        q, qd, qdd = self._check(q=q, qd=qd, qdd=qdd)
        pin, model = _import_pinocchio(), self._model
        data = model.createData()
        tau = self._loop(lambda a, b, c: pin.rnea(model, data, a, b, c), (self.n_dof,), q, qd, qdd)
        return tau + self._friction_torque(qd, q)

    def acceleration(self, q, qd, tau=None) -> np.ndarray:
        """Forward dynamics ``qdd = M^-1 (tau - C qd - g - tau_f(qd) - o)``.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n)``
        tau : array_like, shape ``(..., n)``, optional
            Joint torques (zero when ``None``).

        Returns
        -------
        ndarray, shape ``(..., n)``

        Raises
        ------
        NonPhysicalMassMatrixError
            (a ``ValueError``) When the mass matrix of the plain fit is not
            positive definite at a state: its parameters are not physically
            consistent there (``physical=True`` never is).
        """
        q, qd, tau = self._check(q=q, qd=qd, tau=tau)
        rhs = -self._friction_torque(qd, q) + (0.0 if tau is None else tau)
        pin, model = _import_pinocchio(), self._model
        data = model.createData()
        if self.physical:
            return self._loop(lambda a, b, c: pin.aba(model, data, a, b, c), (self.n_dof,), q, qd, rhs)

        def _one(qi, vi, ti):
            upper = np.triu(pin.crba(model, data, qi))
            mass = upper + np.triu(upper, 1).T
            try:
                factor = np.linalg.cholesky(mass)
            except np.linalg.LinAlgError:
                raise NonPhysicalMassMatrixError(
                    f"the identified mass matrix is not positive definite at q={qi.tolist()} (eigenvalues "
                    f"{np.linalg.eigvalsh(mass).tolist()}): the least-squares parameters are not physically "
                    f"consistent; fit with least_squares(..., physical=True)"
                ) from None
            b = ti - pin.nonLinearEffects(model, data, qi, vi)
            return np.linalg.solve(factor.T, np.linalg.solve(factor, b))

        return self._loop(_one, (self.n_dof,), q, qd, rhs)

    def energy(self, q, qd) -> np.ndarray:
        """Rigid-body energy ``T + V`` (armature in ``T``), shape ``(...)``.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n)``
        """
        q, qd = self._check(q=q, qd=qd)
        pin, model = _import_pinocchio(), self._model
        data = model.createData()

        def _one(qi, vi):
            upper = np.triu(pin.crba(model, data, qi))
            mass = upper + np.triu(upper, 1).T
            return 0.5 * vi @ mass @ vi + pin.computePotentialEnergy(model, data, qi)

        return self._loop(_one, (), q, qd)


# ------------------------------------------------------------- the regressor
@dataclass(frozen=True)
class _Columns:
    """The layout of the parameter vector: links, then armature, the linear forces (registry order), offset."""

    n_links: int
    n_dof: int
    extras: tuple[str, ...]  # "armature"?, the linear forces' blocks (a block per feature), "offset"?

    @property
    def size(self) -> int:
        return 10 * self.n_links + self.n_dof * len(self.extras)

    def slice(self, extra: str) -> slice:
        start = 10 * self.n_links + self.n_dof * self.extras.index(extra)
        return slice(start, start + self.n_dof)


def _regressor(pin, model, columns: _Columns, q, qd, qdd, velocity: float) -> np.ndarray:
    """The full regressor, shape ``(N, n, p)``: ``tau[k] = W[k] @ parameters``."""
    n, count = columns.n_dof, len(q)
    out = np.zeros((count, n, columns.size))
    data = model.createData()
    inertial = 10 * columns.n_links
    for k in range(count):
        out[k, :, :inertial] = pin.computeJointTorqueRegressor(model, data, q[k], qd[k], qdd[k])
    rows = np.arange(n)
    values = {"armature": qdd, "offset": np.ones_like(qd)}
    for name in dict.fromkeys(_force_of(e) for e in columns.extras if e not in values):
        values.update(zip(FORCES[name].blocks(), FORCES[name].bases(q, qd, velocity=velocity)))
    for extra in columns.extras:
        out[:, rows, columns.slice(extra).start + rows] = values[extra]
    return out


def _force_of(block: str) -> str:
    """The force of a least-squares block (``"stribeck[1]"`` -> ``"stribeck"``)."""
    return block.split("[", 1)[0]


def _probe_states(model, n_states: int, rng: np.random.Generator):
    """Random ``(q, qd, qdd)`` within the joint limits (``[-pi, pi]`` where unlimited)."""
    lower, upper = np.array(model.lowerPositionLimit), np.array(model.upperPositionLimit)
    bad = ~(np.isfinite(lower) & np.isfinite(upper) & (upper > lower)) | (upper - lower > 1e3)
    lower, upper = np.where(bad, -np.pi, lower), np.where(bad, np.pi, upper)
    q = rng.uniform(lower, upper, size=(n_states, model.nv))
    return q, rng.normal(size=q.shape), rng.normal(size=q.shape)


def _base_structure(pin, model, columns: _Columns, velocity: float, tolerance: float, seed: int):
    """Independent columns and ``K`` with ``W[:, dependent] = W[:, independent] K`` (probe states)."""
    import scipy.linalg

    n_states = max(40, 3 * columns.size // max(1, columns.n_dof) + 10)
    q, qd, qdd = _probe_states(model, n_states, np.random.default_rng(seed))
    stacked = _regressor(pin, model, columns, q, qd, qdd, velocity)
    stacked = stacked.reshape(-1, columns.size)
    norms = np.linalg.norm(stacked, axis=0)
    # Columns that vanish structurally are round-off (1e-16) on the probes: zero them, never normalise them.
    zero = norms <= 1e-11 * norms.max()
    stacked[:, zero] = 0.0
    scaled = stacked / np.where(zero, 1.0, norms)
    _, r, pivot = scipy.linalg.qr(scaled, mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(r))
    rank = int(np.sum(diagonal > tolerance * diagonal[0]))
    independent, dependent = np.sort(pivot[:rank]), np.sort(pivot[rank:])
    k = np.linalg.lstsq(stacked[:, independent], stacked[:, dependent], rcond=None)[0]
    k[np.abs(k) < 1e-10 * max(1.0, np.abs(k).max(initial=0.0))] = 0.0
    projection = np.zeros((rank, columns.size))
    projection[:, independent] = np.eye(rank)
    projection[:, dependent] = k
    return independent, projection


# ----------------------------------------------------------------- checks
def _parse_friction(friction, offset) -> tuple[tuple[str, ...], bool]:
    """The linear forces of ``friction`` (the registry's one parser) and whether an offset is fitted."""
    names = friction_names(friction)
    learned = [name for name in names if not FORCES[name].linear]
    if learned:
        raise ValueError(
            f"least_squares fits the forces linear in their coefficients; {', '.join(map(repr, learned))} "
            f"of friction={friction!r} is not (lnn.identify learns it); linear forces: "
            f"{', '.join(n for n, c in FORCES.items() if c.linear and n != 'offset')}"
        )
    if offset is None:
        offset = bool(names)
    if not isinstance(offset, (bool, np.bool_)):
        raise TypeError(f"offset must be True, False or None; got {offset!r}")
    return tuple(n for n in names if n != "offset"), bool(offset) or "offset" in names


def _dataset_arrays(dataset, n: int):
    arrays = {}
    for name in ("q", "qd", "qdd", "tau"):
        value = getattr(dataset, name, None)
        if value is None:
            raise ValueError(
                f"dataset.{name} is missing: least_squares needs q, qd, qdd and measured "
                f"joint torques tau; got a {type(dataset).__name__} without {name}"
            )
        array = np.asarray(value, dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != n:
            raise ValueError(
                f"dataset.{name} must have shape (N, {n}) for this robot (n_dof={n}); got shape {array.shape}"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"dataset.{name} contains NaN or infinite values")
        arrays[name] = array
    shapes = {a.shape for a in arrays.values()}
    if len(shapes) != 1:
        raise ValueError(f"dataset arrays disagree in shape: { {k: a.shape for k, a in arrays.items()} }")
    if len(arrays["q"]) == 0:
        raise ValueError("dataset has no samples")
    if not np.any(arrays["tau"]):
        raise ValueError(
            "dataset.tau is all zero: least_squares identifies the robot from measured joint "
            "torques; generate the data with torques (lnn.generate(..., tau=...)) or load a log "
            "with its torque columns"
        )
    return arrays["q"], arrays["qd"], arrays["qdd"], arrays["tau"]


def _weights(torque_std, tau: np.ndarray) -> np.ndarray:
    """``1 / sigma_j`` per joint, shape ``(n,)``."""
    n = tau.shape[1]
    if torque_std is None:
        return np.ones(n)
    if isinstance(torque_std, str):
        raise TypeError(f"torque_std must be None or an array of {n} standard deviations; got {torque_std!r}")
    std = np.broadcast_to(np.asarray(torque_std, dtype=np.float64), (n,))
    if not np.all(np.isfinite(std) & (std > 0)):
        raise ValueError(f"torque_std must be finite and > 0 per joint; got {torque_std!r}")
    return 1.0 / std


# ------------------------------------------------------------------ solvers
def _plain_solution(regressor, tau, weights, independent):
    """Weighted linear least squares on the base regressor: base parameters, data rank, condition."""
    rows = (regressor[:, :, independent] * weights[None, :, None]).reshape(-1, len(independent))
    target = (tau * weights).reshape(-1)
    norms = np.linalg.norm(rows, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    solution, _, data_rank, singular = np.linalg.lstsq(rows / scale, target, rcond=None)
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else math.inf
    return solution / scale, int(data_rank), condition


def _nearest(projection: np.ndarray, base: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """The parameter vector closest to ``prior`` with ``projection @ theta = base``."""
    correction = np.linalg.lstsq(projection, base - projection @ prior, rcond=None)[0]
    return prior + correction


def _physical(regressor, tau, weights, columns: _Columns, theta, prior, regularization, max_nfev):
    """The physically consistent fit (:func:`lnn.physical_fit.physical_least_squares`) from the plain one.

    The bodies are pulled towards the nominal (URDF) ones (made physical: an
    empty link becomes a tiny sphere), the extras towards the plain fit's.
    """
    inertial = 10 * columns.n_links
    rows = (regressor * weights[None, :, None]).reshape(-1, columns.size)
    target = (tau * weights).reshape(-1)
    nonnegative = np.concatenate(
        [np.zeros(0, bool)]
        + [
            np.full(columns.n_dof, e == "armature" or (e != "offset" and FORCES[_force_of(e)].nonnegative))
            for e in columns.extras
        ]
    )
    pull = np.concatenate([nearest_physical(prior[:inertial]).reshape(-1), theta[inertial:]])
    fit = physical_least_squares(
        rows,
        target,
        n_bodies=columns.n_links,
        start=theta,
        nonnegative=nonnegative,
        prior=pull,
        regularization=0.0,
        log_cholesky_regularization=float(regularization),
        max_nfev=int(max_nfev),
    )
    return fit.z, fit.success, fit.message


def _validated_options(friction_velocity, regularization, max_nfev, tolerance):
    for name, value in (
        ("friction_velocity", friction_velocity),
        ("regularization", regularization),
        ("rank_tolerance", tolerance),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not math.isfinite(value)
            or value < 0
            or (value == 0 and name != "regularization")
        ):
            raise ValueError(f"{name} must be a finite number > 0 (>= 0 for regularization); got {value!r}")
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) or max_nfev < 1:
        raise ValueError(f"max_nfev must be a positive integer; got {max_nfev!r}")


def least_squares(
    dataset,
    robot,
    *,
    friction: str | None = "viscous+coulomb",
    friction_velocity: float = 0.01,
    offset: bool | None = None,
    armature: bool = False,
    physical: bool = False,
    torque_std=None,
    regularization: float = 1e-8,
    rank_tolerance: float = 1e-8,
    max_nfev: int = 1000,
    seed: int = 0,
) -> IdentifiedRobot:
    """Identify a rigid-body robot's base parameters and joint friction from measured torques.

    The classical recipe (Gautier & Khalil; Swevers et al.): the joint-torque
    regressor of every sample, reduced to the base parameters (the
    identifiable combinations, found by a QR decomposition with column
    pivoting of the regressor at random states), solved by linear least
    squares, optionally weighted per joint by ``1 / torque_std``.

    With ``physical=True`` every link is instead parametrised by the
    log-Cholesky factor of its pseudo-inertia (Rucker & Wensing 2022), so
    the identified bodies are physically consistent; the armature and the
    coefficients of the nonnegative forces (viscous, Coulomb) are kept
    ``>= 0`` (written as squares), the offsets are free. This is the fit of
    :func:`lnn.physical_fit.physical_least_squares` (Levenberg-Marquardt on
    the ``p x p`` triangle of a QR decomposition of the regressor, the one
    :func:`lnn.identify` uses), started from the plain fit made physical,
    with the regulariser ``regularization * |eta - eta_nominal|^2`` in
    log-Cholesky coordinates that keeps the directions the data cannot see
    near the nominal (URDF) bodies. The cost is ``|w * residual|^2 / |w *
    tau|^2 + regularization * |eta - eta_nominal|^2``, so ``regularization``
    is relative to the mean squared relative torque error: the default
    ``1e-8`` biases a noise-free fit by about ``1e-5`` of the torques; pass
    ``1e-12`` to reproduce exact data to ``1e-8``.

    The plain fit's ``link_parameters`` are the vector closest to the
    nominal one among those with the identified base parameters (any of
    them gives the same dynamics); they may be physically inconsistent, and
    ``IdentifiedRobot.acceleration`` raises when the mass matrix is not
    positive definite. The offset column ``1`` per joint is fitted by
    default whenever friction is (``offset=None``); pass ``offset=False``
    when the sensor bias is known to drift between logs.

    Parameters
    ----------
    dataset : lnn.Dataset
        Samples with ``q``, ``qd``, ``qdd`` and measured ``tau``, each of shape ``(N, n)``.
    robot : simulations.URDFRobot
        The robot's kinematics and nominal inertias: anything with a
        ``pinocchio_model`` (joint placements and axes are taken as exact).
    friction : str or None, keyword-only
        The linear forces fitted per joint, registered names joined by ``+``
        (:mod:`lnn.models.forces`): ``"viscous"`` (``b qd``), ``"coulomb"``
        (``c tanh(qd / v0)``), ``"offset"``, and any registered ``LinearForce``
        (its own ``basis``); forces that are not linear in one coefficient per
        joint (``"network"``) are refused.
    friction_velocity : float, keyword-only
        The smoothing velocity ``v0 > 0`` of the Coulomb term (rad/s).
    offset : bool, optional, keyword-only
        Fit a constant torque offset ``o`` per joint (a torque-sensor bias).
        Default: ``True`` when ``friction`` is not ``None``, ``False`` otherwise.
    armature : bool, keyword-only
        Fit a rotor inertia ``I_a`` per joint (the term ``I_a qdd``).
    physical : bool, keyword-only
        Physically consistent fit (see above) instead of linear least squares.
    torque_std : array_like, shape ``(n,)``, optional, keyword-only
        Torque noise standard deviation per joint: rows are weighted by its
        inverse (default: unweighted).
    regularization : float, keyword-only
        Weight (>= 0) of the pull towards the nominal inertias (``physical=True`` only).
    rank_tolerance : float, keyword-only
        Relative threshold on the pivots of the QR decomposition that decides
        the number of base parameters.
    max_nfev : int, keyword-only
        Evaluation budget of the physical fit.
    seed : int, keyword-only
        Seeds the random states of the base-parameter analysis.

    Returns
    -------
    IdentifiedRobot

    Raises
    ------
    ValueError
        When ``dataset.tau`` is missing or all zero, when the dataset does not
        fit the robot, or for a bad option (the message names it).
    TypeError
        When ``robot`` has no Pinocchio model.
    ImportError
        Without Pinocchio (the ``robots`` extra).
    """
    extras_friction, fit_offset = _parse_friction(friction, offset)
    _validated_options(friction_velocity, regularization, max_nfev, rank_tolerance)
    try:
        source = robot.pinocchio_model
    except AttributeError:
        raise TypeError(
            f"robot must be a simulations.URDFRobot (anything with a pinocchio_model); got {type(robot).__name__}"
        ) from None
    pin = _import_pinocchio()
    model = pin.Model(source)
    n = model.nv
    q, qd, qdd, tau = _dataset_arrays(dataset, n)
    weights = _weights(torque_std, tau)
    blocks = tuple(block for name in extras_friction for block in FORCES[name].blocks())
    extras = (("armature",) if armature else ()) + blocks + (("offset",) if fit_offset else ())
    columns = _Columns(n_links=model.njoints - 1, n_dof=n, extras=extras)
    independent, projection = _base_structure(
        pin, model, columns, float(friction_velocity), float(rank_tolerance), int(seed)
    )
    regressor = _regressor(pin, model, columns, q, qd, qdd, float(friction_velocity))
    links = [model.inertias[i].toDynamicParameters() for i in range(1, model.njoints)]
    prior = np.concatenate([*links, np.zeros(columns.size - 10 * columns.n_links)])
    base, data_rank, condition = _plain_solution(regressor, tau, weights, independent)
    theta = _nearest(projection, base, prior)
    cost, success, message = 0.0, True, "linear least squares (numpy.linalg.lstsq)"
    if physical:
        theta, success, message = _physical(regressor, tau, weights, columns, theta, prior, regularization, max_nfev)
        base = projection @ theta
    residual = np.einsum("nip,p->ni", regressor, theta) - tau
    cost = 0.5 * float(np.sum((residual * weights) ** 2))
    return _assemble(
        pin,
        model,
        columns,
        theta,
        base,
        projection,
        independent,
        residual,
        tau,
        float(friction_velocity),
        fit_offset or bool(extras_friction),
        physical,
        dict(
            rank=len(independent),
            data_rank=data_rank,
            condition_number=condition,
            cost=cost,
            success=success,
            message=message,
        ),
    )


def _force_coefficients(extra: dict) -> dict:
    """Force name -> its coefficients, ``(n,)`` or ``(features, n)``, from the blocks' ``(n,)`` each."""
    names = dict.fromkeys(_force_of(e) for e in extra if e not in ("armature", "offset"))
    return {name: FORCES[name].gather(extra.__getitem__) for name in names}


def _assemble(
    pin,
    model,
    columns: _Columns,
    theta,
    base,
    projection,
    independent,
    residual,
    tau,
    velocity,
    has_friction,
    physical,
    fit,
) -> IdentifiedRobot:
    """Load the parameters into the model copy and build the named result."""
    n, n_links = columns.n_dof, columns.n_links
    links = theta[: 10 * n_links].reshape(n_links, 10)
    for i in range(n_links):
        params = links[i]
        if params[0] == 0.0:  # FromDynamicParameters divides by the mass
            params = params.copy()
            params[0] = np.finfo(float).tiny
        model.inertias[i + 1] = pin.Inertia.FromDynamicParameters(params)
    extra = {e: theta[columns.slice(e)].copy() for e in columns.extras}
    zeros = np.zeros(n)
    model.armature = extra.get("armature", zeros).copy()
    friction = (
        IdentifiedFriction(
            viscous=extra.get("viscous", zeros),
            coulomb=extra.get("coulomb", zeros),
            offset=extra.get("offset", zeros),
            velocity=velocity,
            coefficients=_force_coefficients(extra),
        )
        if has_friction
        else None
    )
    names = tuple(f"{model.names[i + 1]}.{p}" for i in range(n_links) for p in _LINK_PARAMETERS) + tuple(
        f"{model.names[j + 1]}.{e}" for e in columns.extras for j in range(n)
    )
    mse = np.mean(residual**2, axis=0)
    variance = np.var(tau, axis=0)
    statistics = FitStatistics(
        mse=mse,
        rmse=np.sqrt(mse),
        r_squared=np.where(variance > 0, 1.0 - mse / np.where(variance > 0, variance, 1.0), np.nan),
        n_samples=len(tau),
        **fit,
    )
    angular = tuple(j.shortname().startswith(("JointModelR", "JointModelRevolute")) for j in model.joints[1:])
    return IdentifiedRobot(
        n_dof=n,
        angular=angular,
        joint_names=tuple(model.names[1:]),
        link_names=tuple(model.names[1:]),
        link_parameters=links.copy(),
        armature=model.armature.copy(),
        friction=friction,
        base_parameters=np.asarray(base),
        base_names=tuple(names[i] for i in independent),
        parameter_names=names,
        base_projection=projection,
        statistics=statistics,
        physical=bool(physical),
        _model=model,
    )
