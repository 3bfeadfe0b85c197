"""``lnn.identify``: the recommended recipe for learning a robot from torque data.

With a rigid-body prior (a URDF robot, a planar arm, a
:class:`lnn.models.RigidBodyChain`) it does not trust the prior's numbers:

1. **nominal**: the prior's inertias as they are, friction fitted to what they
   leave (for the report: how wrong the prior is);
2. **rigid body**: every body's inertial parameters identified by least
   squares on the torques, with the friction terms and the armature; the
   Coulomb smoothing velocity (and, for priors without a Pinocchio model, a
   ridge weight towards the prior) chosen by leave-one-recording-out
   validation of the linear fit; then made physical (each body's
   pseudo-inertia positive definite, in log-Cholesky coordinates, friction
   coefficients >= 0): for a URDF robot by
   :func:`lnn.baseline.least_squares` (``physical=True``), for other chains
   by ``scipy.optimize.least_squares`` from the nearest physical bodies;
3. **residual**: a ``"rigid-body"`` :class:`lnn.LagrangianNetwork` started from
   stage 2 with a structured residual Lagrangian, trained on the torques by
   :func:`lnn.fit` for the rest of the time budget (best validation epoch kept);

and returns the stage with the lowest validation torque error. Without a
prior, a structured Lagrangian network with the friction forces is trained by
:func:`lnn.fit`. The validation set is whole trajectories, or time blocks of a
single recording (:func:`lnn.train._data.validation_split`).

The torque of the rigid body is linear in each body's pseudo-inertia ``J``
(and the armature, and the friction coefficients): its regressor comes from
the model's own Newton-Euler recursion applied to a basis of ``J``, so any
chain works, with or without Pinocchio.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import numpy as np

__all__ = ["IdentificationReport", "IdentifiedModel", "Stage", "identify"]

#: Smoothing velocities ``v0`` (rad/s) of ``tanh(qd / v0)`` tried on the validation data.
FRICTION_VELOCITIES = (0.003, 0.01, 0.03, 0.1)
#: Ridge weights towards the prior tried on the validation data, relative to the
#: regressor's column norms (``1e-9``: the data alone; ``1``: close to the prior).
RIDGE_WEIGHTS = (1e-9, 1e-6, 1e-4, 1e-2, 1.0)
#: Smallest eigenvalue of a body's pseudo-inertia after projection, relative to its trace.
PHYSICAL_FLOOR = 1e-6
#: Hidden widths of the residual Lagrangian (and of the prior-free network).
HIDDEN = (64, 64)
#: Time budget (s) of the trained stages when ``time_limit`` is None.
DEFAULT_TIME = 120.0

_UPPER = [(a, b) for a in range(4) for b in range(a, 4)]  # the 10 entries of a symmetric 4x4


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of :func:`identify`.

    Attributes
    ----------
    name : str
        ``"nominal"``, ``"rigid body"``, ``"residual"`` or ``"network"``.
    validation_mse : ndarray, shape ``(n,)``
        Held-out torque mean squared error per joint.
    seconds : float
        Wall time of the stage.
    detail : str
        What was chosen (ridge weight, smoothing velocity, epochs).
    """

    name: str
    validation_mse: np.ndarray
    seconds: float
    detail: str = ""

    @property
    def mean_mse(self) -> float:
        """The validation MSE averaged over the joints."""
        return float(np.mean(self.validation_mse))


@dataclasses.dataclass(frozen=True)
class IdentificationReport:
    """What :func:`identify` did.

    Attributes
    ----------
    stages : tuple of Stage
    chosen : str
        The stage whose model is returned (lowest mean validation MSE).
    split : str
        How the validation data were held out.
    prior_masses, masses : ndarray or None, shape ``(n,)``
        Body masses of the prior and of the returned rigid body (None without a prior).
    """

    stages: tuple
    chosen: str
    split: str
    prior_masses: np.ndarray | None = None
    masses: np.ndarray | None = None

    def format(self) -> str:
        """A few lines for a terminal."""
        lines = [f"validation: {self.split}"]
        for s in self.stages:
            mark = "*" if s.name == self.chosen else " "
            per_joint = " ".join(f"{v:.3g}" for v in s.validation_mse)
            lines.append(
                f"{mark} {s.name:<10} torque MSE {s.mean_mse:.4g} (joints {per_joint}) {s.seconds:.1f} s  {s.detail}"
            )
        if self.masses is not None:
            lines.append(
                "body masses (kg), prior -> identified: "
                + ", ".join(f"{a:.3g} -> {b:.3g}" for a, b in zip(self.prior_masses, self.masses))
            )
        return "\n".join(lines)


class IdentifiedModel:
    """A model returned by :func:`identify`: the ``lnn.MechanicalSystem`` protocol in numpy.

    Every method takes numpy arrays ``(B, n)`` (or ``(n,)``) and returns numpy
    arrays; :attr:`network` is the :class:`lnn.LagrangianNetwork` underneath
    (save it, train it further, evaluate it in TensorFlow).

    Attributes
    ----------
    network : lnn.LagrangianNetwork
    report : IdentificationReport
    candidates : dict of str to lnn.LagrangianNetwork
        The model of every stage (``network`` is ``candidates[report.chosen]``).
    """

    def __init__(self, network, report: IdentificationReport, *, candidates=None) -> None:
        self.network = network
        self.report = report
        self.candidates = dict(candidates or {report.chosen: network})

    @property
    def n_dof(self) -> int:
        """Number of joints."""
        return self.network.n_dof

    @property
    def angular(self) -> tuple[bool, ...]:
        """Which coordinates are angles."""
        return self.network.angular

    def mass_matrix(self, q, qd=None) -> np.ndarray:
        """``M``, shape ``(B, n, n)``."""
        return np.asarray(self.network.mass_matrix(q, qd))

    def acceleration(self, q, qd, tau=None) -> np.ndarray:
        """Forward dynamics with the friction forces, shape ``(B, n)``."""
        return np.asarray(self.network.acceleration(q, qd, tau))

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """The motor torques ``tau``, shape ``(B, n)``."""
        return np.asarray(self.network.inverse_dynamics(q, qd, qdd))

    def energy(self, q, qd) -> np.ndarray:
        """``E = T + V``, shape ``(B,)``."""
        return np.asarray(self.network.energy(q, qd))

    @property
    def numpy_acceleration(self):
        """The network's fast numpy right-hand side (for :func:`lnn.rollout`)."""
        return self.network.numpy_acceleration

    def save(self, path, *, overwrite: bool = False) -> None:
        """Save the network (``.keras``; :func:`lnn.load_model` reads it back).

        Raises
        ------
        FileExistsError
            If ``path`` exists and ``overwrite`` is False.
        """
        import os

        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
        self.network.save(path)


def identify(
    dataset,
    *,
    prior=None,
    friction: str | None = "viscous+coulomb",
    time_limit: float | None = None,
    seed: int = 0,
    validation: float = 0.1,
    residual: bool = True,
    progress: Callable[[str], None] | None = None,
) -> IdentifiedModel:
    """Learn a robot's dynamics from torque data (module docstring: the recipe).

    Parameters
    ----------
    dataset : lnn.Dataset
        Samples ``q, qd, qdd, tau`` of shape ``(N, n)`` with measured torques.
    prior : simulations.URDFRobot, simulations.PlanarArm or lnn.models.RigidBodyChain, optional
        The robot's kinematic chain and nominal inertias (not trusted: identified).
    friction : str or None
        The friction terms (:mod:`lnn.models.forces`): ``"viscous+coulomb"``,
        ``"viscous"``, ``"coulomb"``, any ``+ "offset"``, or None.
    time_limit : float, optional
        Wall-time budget (s) of the trained stages (default :data:`DEFAULT_TIME`).
    seed : int
        Seed of the validation split and of the networks.
    validation : float
        Fraction of the data held out to choose between stages and settings.
    residual : bool
        With a prior, train the residual stage.
    progress : callable, optional
        ``progress(message)`` after each stage (the library prints nothing).

    Returns
    -------
    IdentifiedModel

    Raises
    ------
    ValueError
        If the dataset has no torques, or the prior's joints do not match it.
    """
    from lnn.models.forces import friction_names

    tau = getattr(dataset, "tau", None)
    if tau is None or not hasattr(dataset, "qdd"):
        raise TypeError(f"identify needs an lnn.Dataset with q, qd, qdd and tau; got {type(dataset).__name__}")
    if not np.any(np.asarray(tau)):
        raise ValueError(
            "identify needs measured torques: dataset.tau is all zeros (a dataset of free "
            "motion fixes a Lagrangian only up to scale; use lnn.fit with an acceleration loss)"
        )
    friction = "+".join(friction_names(friction)) or None
    budget = DEFAULT_TIME if time_limit is None else float(time_limit)
    start = time.perf_counter()
    split = _split(dataset, validation, seed)
    train, held_out = split.train, split.validation
    note = progress or (lambda message: None)
    if prior is None:
        return _without_prior(dataset, train, held_out, split, friction, budget, seed, note)
    from lnn.models import RigidBodyChain

    chain = RigidBodyChain.from_system(prior)
    if chain.n_dof != dataset.n_dof:
        raise ValueError(
            f"the prior has {chain.n_dof} joints ({', '.join(chain.names)}); the dataset has "
            f"n = {dataset.n_dof} coordinates"
        )
    stages, models = [], {}
    fitter = _RigidFit(chain, train, held_out, friction, robot=prior if hasattr(prior, "pinocchio_model") else None)
    t0 = time.perf_counter()
    model = fitter.nominal()
    stages.append(Stage("nominal", _mse(model, held_out), time.perf_counter() - t0, "prior inertias"))
    models["nominal"] = model
    note(f"nominal: validation torque MSE {stages[-1].mean_mse:.4g}")
    t0 = time.perf_counter()
    model, detail = fitter.identified()
    stages.append(
        Stage("rigid body", _mse(model, held_out), time.perf_counter() - t0, detail + "; refitted to every sample")
    )
    models["rigid body"] = fitter.refit(dataset)  # judged on the held-out part, then fitted to all
    note(f"rigid body: validation torque MSE {stages[-1].mean_mse:.4g} ({detail})")
    remaining = budget - (time.perf_counter() - start)
    if residual and remaining > 5.0:
        t0 = time.perf_counter()
        from lnn.train import TrainingDivergedError

        try:
            network, detail = _train_residual(model, chain, train, held_out, remaining, seed)
        except TrainingDivergedError as exc:  # the rigid body stands; say why the residual does not
            note(f"residual: not trained ({exc})")
        else:
            stages.append(Stage("residual", _mse(network, held_out), time.perf_counter() - t0, detail))
            models["residual"] = network
            note(f"residual: validation torque MSE {stages[-1].mean_mse:.4g} ({detail})")
    best = min(stages, key=lambda s: s.mean_mse)
    chosen = models[best.name]
    masses = chosen.kind_model.chain().inertias[:, 0]
    report = IdentificationReport(
        tuple(stages), best.name, split.describe(), prior_masses=chain.inertias[:, 0].copy(), masses=masses
    )
    return IdentifiedModel(chosen, report, candidates=models)


# -- stages ---------------------------------------------------------------------------


def _split(dataset, fraction: float, seed: int):
    """Whole recordings held out when there are at least three (a robot's logs differ: sensor bias,
    temperature), else time blocks of the one or two recordings (:func:`lnn.train._data.validation_split`)."""
    from lnn.train._data import validation_split

    K = dataset.n_trajectories
    if K >= 3:
        share = max(fraction, 1.0 / K)  # at least one whole recording
        return dataset.split(fractions=(1.0 - share, share, 0.0), seed=seed, by="trajectory")
    return validation_split(dataset, fraction, seed=seed, stacklevel=4)


def _mse(model, data) -> np.ndarray:
    pred = np.asarray(model.inverse_dynamics(data.q, data.qd, data.qdd), np.float64)
    return np.mean((pred - data.tau) ** 2, axis=0)


def _without_prior(dataset, train, held_out, split, friction, budget, seed, note) -> IdentifiedModel:
    import lnn

    t0 = time.perf_counter()
    model = lnn.LagrangianNetwork(
        dataset.n_dof, kind="structured", hidden=HIDDEN, angular=dataset.angular, friction=friction, seed=seed
    )
    # The learning rate this stage was measured with (bench_real.py), not fit's default.
    history = lnn.fit(model, train, validation=held_out, time_limit=budget, seed=seed, learning_rate=3e-3)
    stage = Stage(
        "network",
        _mse(model, held_out),
        time.perf_counter() - t0,
        f"structured {HIDDEN}, {len(history.epoch)} epochs (best {history.best_epoch})",
    )
    note(f"network: validation torque MSE {stage.mean_mse:.4g}")
    return IdentifiedModel(
        model, IdentificationReport((stage,), stage.name, split.describe()), candidates={stage.name: model}
    )


def _train_residual(model, chain, train, held_out, seconds, seed):
    """Stage 3: the identified rigid body plus a residual Lagrangian, trained on the torques."""
    import lnn

    network = lnn.LagrangianNetwork(
        chain.n_dof,
        kind="rigid-body",
        prior=chain,
        residual=True,
        hidden=HIDDEN,
        angular=chain.angular,
        friction=model.friction_terms,
        friction_velocity=model.friction_velocity,
        dtype="float64",
        seed=seed,
    )
    network.adapt(train.q, train.qd, train.qdd)
    trained = {v.path.split("/")[-1]: v for v in model.weights}
    for var in network.weights:
        key = var.path.split("/")[-1]
        if key in trained and trained[key].shape == var.shape and not key.startswith(("q_", "qd_", "qdd_")):
            var.assign(np.asarray(trained[key]))
    history = lnn.fit(
        network,
        train,
        loss="torque",
        validation=held_out,
        time_limit=seconds,
        seed=seed,
        learning_rate=1e-3,
        adapt=False,
    )
    return network, f"{len(history.epoch)} epochs (best {history.best_epoch}), residual {HIDDEN}"


def _ridge(A, b, prior, weight):
    """``argmin |A z - b|^2 + weight |D (z - prior)|^2`` with ``D`` the column norms of ``A``."""
    scale = np.linalg.norm(A, axis=0) + 1e-300
    As = A / scale
    gram = As.T @ As + weight * np.eye(A.shape[1])
    return np.linalg.solve(gram, As.T @ (b - A @ prior)) / scale + prior


class _RigidFit:
    """Least squares of a chain's inertias, armature and friction on torque data."""

    def __init__(self, chain, train, held_out, friction, *, robot=None) -> None:
        import lnn

        self.chain, self.friction, self.train, self.held_out = chain, friction, train, held_out
        self.chosen, self.robot = None, robot
        self.terms = tuple(friction.split("+")) if friction else ()
        self._probe = lnn.LagrangianNetwork(
            chain.n_dof, kind="rigid-body", prior=chain, angular=chain.angular, dtype="float64", xla=False
        )
        self.x0 = self._coordinates(chain.inertias)
        self.y_train = self._regressor(train)
        self.y_val = self._regressor(held_out)

    # -- the linear model: tau = Y_J x + armature * qdd + friction columns ----------------
    def _coordinates(self, inertias) -> np.ndarray:
        from lnn.inertia import pseudo_inertia

        J = pseudo_inertia(inertias)
        return np.concatenate([[Jk[a, b] for a, b in _UPPER] for Jk in J])

    def _pseudo(self, x) -> np.ndarray:
        n = self.chain.n_dof
        J = np.zeros((n, 4, 4))
        for i in range(n):
            for k, (a, b) in enumerate(_UPPER):
                J[i, a, b] = J[i, b, a] = x[10 * i + k]
        return J

    def _regressor(self, data) -> np.ndarray:
        """``Y (N n, 10 n)``: the rigid torque's columns for the entries of every ``J``."""
        import tensorflow as tf

        n = self.chain.n_dof
        kind = self._probe.kind_model
        q, qd, qdd = (tf.constant(np.asarray(a, np.float64)) for a in (data.q, data.qd, data.qdd))
        columns = []
        zero_armature = tf.zeros(n, tf.float64)
        run = tf.function(lambda J: kind._newton_euler(q, qd, qdd, J=J, armature=zero_armature))
        for i in range(n):
            for a, b in _UPPER:
                E = np.zeros((n, 4, 4))
                E[i, a, b] = E[i, b, a] = 1.0
                columns.append(np.asarray(run(tf.constant(E))).reshape(-1))
        return np.stack(columns, axis=1)

    def _extra(self, data, velocity) -> tuple[np.ndarray, list]:
        """Armature and friction columns ``(N n, k)`` and their kinds (``"+"``: >= 0)."""
        n = self.chain.n_dof
        blocks, signs = [], []

        def per_joint(values, sign):
            for j in range(n):
                col = np.zeros_like(values)
                col[:, j] = values[:, j]
                blocks.append(col.reshape(-1))
                signs.append(sign)

        per_joint(np.asarray(data.qdd, np.float64), "+")
        qd = np.asarray(data.qd, np.float64)
        if "viscous" in self.terms:
            per_joint(qd, "+")
        if "coulomb" in self.terms:
            per_joint(np.tanh(qd / velocity), "+")
        if "offset" in self.terms:
            per_joint(np.ones_like(qd), "")
        return np.stack(blocks, axis=1), signs

    # -- stages ----------------------------------------------------------------------------
    def nominal(self):
        """The prior's inertias; armature and friction by bounded least squares."""
        from scipy.optimize import lsq_linear

        from lnn.models.forces import FRICTION_VELOCITY

        tau = np.asarray(self.train.tau, np.float64).reshape(-1)
        extra, signs = self._extra(self.train, FRICTION_VELOCITY)
        lower = np.array([0.0 if s == "+" else -np.inf for s in signs])
        fit = lsq_linear(extra, tau - self.y_train @ self.x0, bounds=(lower, np.inf))
        return self._model(self.x0, fit.x, FRICTION_VELOCITY)

    def identified(self):
        """Ridge towards the prior (weight and ``v0`` chosen by cross-validation), then the physical fit.

        The candidates are judged leaving one training recording out at a
        time when there are at least three (a setting must hold on a log it
        has not seen), else on the held-out part.
        """
        tau = np.asarray(self.train.tau, np.float64).reshape(-1)
        rows = np.repeat(np.asarray(self.train.trajectory), self.chain.n_dof)
        ids = np.unique(rows)
        best = None
        for velocity in FRICTION_VELOCITIES if "coulomb" in self.terms else (None,):
            v0 = velocity or 0.01
            extra, signs = self._extra(self.train, v0)
            A = np.concatenate([self.y_train, extra], axis=1)
            prior = np.concatenate([self.x0, np.zeros(extra.shape[1])])
            scale = np.linalg.norm(A, axis=0) + 1e-300
            b = tau - A @ prior  # solve for the deviation from the prior, in scaled columns
            As = A / scale
            if len(ids) >= 3:  # per-recording normal equations: each fold is a sum of the others
                parts = [
                    (
                        As[rows == k].T @ As[rows == k],
                        As[rows == k].T @ b[rows == k],
                        b[rows == k] @ b[rows == k],
                        int(np.sum(rows == k)),
                    )
                    for k in ids
                ]
            else:
                extra_val, _ = self._extra(self.held_out, v0)
                Av = np.concatenate([self.y_val, extra_val], axis=1) / scale
                bv = np.asarray(self.held_out.tau, np.float64).reshape(-1) - Av * scale @ prior
                parts = [
                    (As.T @ As + Av.T @ Av, As.T @ b + Av.T @ bv, None, 0),
                    (Av.T @ Av, Av.T @ bv, bv @ bv, len(bv)),
                ]
            gram_all = sum(p[0] for p in parts)
            rhs_all = sum(p[1] for p in parts)
            folds = [p for p in parts if p[2] is not None]
            for weight in RIDGE_WEIGHTS:
                errors = []
                for G, r, c, count in folds:
                    u = np.linalg.solve(gram_all - G + weight * np.eye(len(G)), rhs_all - r)
                    errors.append((u @ G @ u - 2 * u @ r + c) / count)
                error = float(np.mean(errors))
                if best is None or error < best[0]:
                    best = (error, v0, weight, signs)
        folds = len(ids) >= 3
        _, v0, weight, signs = best
        self.chosen = (v0, weight)
        how = "leave-one-recording-out" if folds else "held-out"
        smoothing = f"v0 {v0:g} rad/s ({how})" if "coulomb" in self.terms else ""
        if self.robot is not None:  # the ridge weight only scored the settings; Pinocchio's fit follows
            return self._pinocchio_fit(self.train, v0), (smoothing + ", " if smoothing else "") + (
                "physical fit by lnn.baseline.least_squares"
            )
        detail = f"ridge {weight:g}" + (f", {smoothing}" if smoothing else f" ({how})")
        return self._ridge_physical(self.train, self.y_train, v0, weight), detail

    def _pinocchio_fit(self, data, velocity):
        """The physically consistent least squares of :func:`lnn.baseline.least_squares` (URDF robots)."""
        from lnn.baseline import least_squares
        from lnn.inertia import pseudo_inertia

        terms = [t for t in self.terms if t in ("viscous", "coulomb")]
        fit = least_squares(
            data,
            self.robot,
            friction="+".join(terms) or None,
            friction_velocity=velocity,
            offset="offset" in self.terms,
            armature=True,
            physical=True,
        )
        x = np.concatenate([[Jk[a, b] for a, b in _UPPER] for Jk in pseudo_inertia(fit.link_parameters)])
        parts = [np.asarray(fit.armature, np.float64)]
        for name in ("viscous", "coulomb", "offset"):
            if name in self.terms:
                parts.append(np.asarray(getattr(fit.friction, name), np.float64))
        return self._model(x, np.concatenate(parts), velocity)

    def refit(self, data):
        """The identified stage's settings (ridge weight, ``v0``) fitted to ``data`` (every sample)."""
        v0, weight = self.chosen
        if self.robot is not None:
            return self._pinocchio_fit(data, v0)
        self.train, self.y_train = data, self._regressor(data)
        return self._ridge_physical(data, self.y_train, v0, weight)

    def _ridge_physical(self, data, regressor, v0, weight):
        """The ridge solution towards the prior on ``data`` (rigid columns ``regressor``), made physical."""
        tau = np.asarray(data.tau, np.float64).reshape(-1)
        extra, signs = self._extra(data, v0)
        A = np.concatenate([regressor, extra], axis=1)
        z = _ridge(A, tau, np.concatenate([self.x0, np.zeros(extra.shape[1])]), weight)
        x, extra = self._physical(z, v0, weight, signs)
        return self._model(x, extra, v0)

    def _physical(self, z, velocity, weight, signs):
        """Project onto physical bodies, then refine by least squares in log-Cholesky coordinates."""
        from scipy.optimize import least_squares

        from lnn.models.chain import from_log_cholesky, log_cholesky, standard_parameters

        n = self.chain.n_dof
        J = self._pseudo(z[: 10 * n])
        for i in range(n):  # nearest positive-definite pseudo-inertia (eigenvalues clipped)
            w, V = np.linalg.eigh(J[i])
            J[i] = (V * np.maximum(w, PHYSICAL_FLOOR * max(np.trace(J[i]), 1e-12))) @ V.T
        theta0 = log_cholesky(standard_parameters(J))
        extra0 = np.maximum(z[10 * n :], [0.0 if s == "+" else -np.inf for s in signs])
        positive = np.array([s == "+" for s in signs])
        tau = np.asarray(self.train.tau, np.float64).reshape(-1)
        extra_cols, _ = self._extra(self.train, velocity)
        A = np.concatenate([self.y_train, extra_cols], axis=1)
        scale = np.linalg.norm(A, axis=0) + 1e-300
        # |A z - tau|^2 = |R z - Q^T tau|^2 + const: the fit runs on the p x p factor (Gautier's trick)
        Q, R = np.linalg.qr(A)
        target = Q.T @ tau
        rows = math.sqrt(len(tau))

        def unpack(p):
            theta = p[: 10 * n].reshape(n, 10)
            x = np.concatenate([[Jk[a, b] for a, b in _UPPER] for Jk in from_log_cholesky(theta)])
            e = p[10 * n :].copy()
            e[positive] = np.square(e[positive])
            return x, e

        def residual(p):
            x, e = unpack(p)
            zz = np.concatenate([x, e])
            prior = np.concatenate([self.x0, np.zeros(len(e))])
            return np.concatenate([(R @ zz - target) / rows, math.sqrt(weight) * scale * (zz - prior) / rows])

        start = np.concatenate([theta0.reshape(-1), np.where(positive, np.sqrt(extra0), extra0)])
        with np.errstate(all="ignore"):  # a trial step may overflow exp(); the trust region steps back
            fit = least_squares(residual, start, method="trf", x_scale="jac", max_nfev=200 * len(start))
        start_cost = 0.5 * float(np.sum(residual(start) ** 2))
        if not (np.isfinite(fit.cost) and fit.cost <= start_cost):  # never worse than the projection
            return unpack(start)
        return unpack(fit.x)

    def _model(self, x, extra, velocity):
        """A ``"rigid-body"`` network with these inertias, armature and friction."""
        import lnn
        from lnn.models.chain import standard_parameters

        n = self.chain.n_dof
        model = lnn.LagrangianNetwork(
            n,
            kind="rigid-body",
            prior=self.chain,
            angular=self.chain.angular,
            friction=self.friction,
            friction_velocity=velocity,
            dtype="float64",
        )
        model.kind_model.assign(standard_parameters(self._pseudo(x)), extra[:n])
        k = n
        for term in model.forces:
            if hasattr(term, "assign"):
                term.assign(extra[k : k + n])
                k += n
        return model
