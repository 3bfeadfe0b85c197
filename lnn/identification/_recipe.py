"""``lnn.identify``: the recommended recipe for learning a robot from torque data (the stages, in order)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np

from lnn.errors import TimeSplitWarning
from lnn.identification import _learned, _linear
from lnn.identification._model import IdentifiedModel
from lnn.identification._report import IdentificationReport, ResidualFindings, Stage
from lnn.models.chain import RigidBodyChain
from lnn.models.forces import FORCES, friction_names
from lnn.models.network import LagrangianNetwork

__all__ = ["DEFAULT_FRICTION", "DEFAULT_TIME", "OFFSETS", "identify"]

#: Time budget (s) of the trained stages when ``time_limit`` is None.
DEFAULT_TIME = 120.0
#: The forces of ``identify``'s default: the linear viscous and Coulomb terms (least squares fits them),
#: and the passive friction network that the residual stage learns beside the residual Lagrangian.
DEFAULT_FRICTION = "viscous+coulomb+network"
#: How torque offsets are modelled (``offsets=``).
OFFSETS = ("recording", "constant", None)


def identify(
    dataset,
    *,
    prior=None,
    friction: str | None = DEFAULT_FRICTION,
    offsets: str | None = "recording",
    time_limit: float | None = None,
    seed: int = 0,
    validation: float = 0.1,
    residual: bool = True,
    residual_lagrangian: bool | None = None,
    dtype: str = "float64",
    ensemble: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> IdentifiedModel:
    """Learn a robot's dynamics from torque data.

    With a rigid-body prior (a URDF robot, a planar arm, a
    :class:`lnn.models.RigidBodyChain`) it does not trust the prior's numbers:

    1. **nominal**: the prior's inertias as they are, the armature, the linear
       forces and the offsets fitted to what they leave (for the report: how
       wrong the prior is);
    2. **rigid body**: every body's inertial parameters, the armature, the
       linear forces' coefficients and the offsets by least squares on the
       torques (:mod:`lnn.identification._linear`: the Coulomb smoothing
       velocity and a ridge weight towards the prior chosen by
       leave-one-recording-out validation), made physical (every
       pseudo-inertia positive definite, the armature and friction ``>= 0``:
       :func:`lnn.physical_fit.physical_least_squares`, the fit
       :func:`lnn.baseline.least_squares` uses too); judged on the held-out
       data, then fitted to every sample;
    3. **residual** (and **residual Lagrangian**): the rigid body plus the learned
       forces (the passive friction network), trained on the torques for the
       rest of the time budget (:mod:`lnn.identification._learned`);

    and returns the stage with the lowest validation torque error. Without a
    prior, a structured Lagrangian network with the forces is trained. The
    report says what the rigid body left (:class:`ResidualFindings`: the
    shares of its residual that a function of ``qd``, of ``q``, a lag or a
    bias per recording explain), the choices of every stage and the bias of
    every recording.

    Parameters
    ----------
    dataset : lnn.Dataset
        Samples ``q, qd, qdd, tau`` of shape ``(N, n)`` with measured torques
        and recording ids (``dataset.trajectory``).
    prior : simulations.URDFRobot, simulations.PlanarArm or lnn.models.RigidBodyChain, optional
        The robot's kinematic chain and nominal inertias (not trusted: identified).
    friction : str or None
        Forces of :mod:`lnn.models.forces` joined by ``+``: the linear ones
        (``"viscous"``, ``"coulomb"``, any registered ``LinearForce``) are
        fitted by least squares with the rigid body; the others
        (``"network"``, ``"damping"``) are learned by the residual stage.
    offsets : {"recording", "constant", None}
        ``"recording"`` (the default): a constant torque offset per joint in
        the model, and a deviation of it per recording fitted as a nuisance
        (with at least three recordings; dropped from the model: a new
        recording's bias is unknown); ``"constant"``: the constant offset
        only; None: no offset (unless ``friction`` names ``"offset"``).
    time_limit : float, optional
        Wall-time budget (s) of the trained stages (default :data:`DEFAULT_TIME`).
    seed : int
        Seed of the validation split and of the networks.
    validation : float
        Fraction of the data held out to choose between stages and settings
        (whole recordings when there are at least three, at least one;
        else time blocks of the recordings, a derivative window apart).
    residual : bool
        With a prior, train the residual stage.
    residual_lagrangian : bool, optional
        Whether the residual stage adds a residual Lagrangian to the learned
        forces. None (the default): both are trained, half of the remaining
        budget each, and the validation data choose (on the DFKI pendulum the
        residual Lagrangian helped, on a simulated robot whose rigid body the
        URDF describes it overfit: :mod:`lnn.identification._learned`).
    dtype : {"float64", "float32"}
        Of the trained stages.
    ensemble : int, optional
        Train the learned stages as an :class:`lnn.Ensemble` of this many
        members (bootstraps of the training recordings, in one compiled step),
        its intervals calibrated on the validation data; the returned model is
        then the best learned stage (the linear stages have no spread), an
        ensemble whose ``predict`` gives the mean and calibrated spread.
    progress : callable, optional
        ``progress(message)`` after each stage (the library prints nothing).

    Returns
    -------
    IdentifiedModel

    Raises
    ------
    TypeError
        If ``dataset`` is not a dataset with torques.
    ValueError
        If the dataset's torques are all zero, the prior's joints do not match
        it, or an option is not one of its values.
    """
    _check(dataset, offsets, ensemble)
    start = time.perf_counter()
    budget = DEFAULT_TIME if time_limit is None else float(time_limit)
    split = _split(dataset, validation, seed)
    terms = _Terms.of(friction, offsets)
    note = progress or (lambda message: None)
    if prior is None:
        network, detail = _learned.train_network(
            split.train,
            split.validation,
            friction=terms.model(learned=True),
            seconds=budget,
            seed=seed,
            members=ensemble,
        )
        stage = Stage("network", _mse(network, split.validation), time.perf_counter() - start, detail)
        note(f"network: validation torque MSE {stage.mean_mse:.4g} ({detail})")
        report = IdentificationReport((stage,), stage.name, split.describe())
        return IdentifiedModel(network, report, candidates={stage.name: network})
    chain = RigidBodyChain.from_system(prior)
    if chain.n_dof != dataset.n_dof:
        raise ValueError(
            f"the prior has {chain.n_dof} joints ({', '.join(chain.names)}); the dataset has "
            f"n = {dataset.n_dof} coordinates (lock the others: simulations.URDFRobot.from_urdf(..., "
            "locked_joints=...), or `lnn identify --joints`)"
        )
    learning = dict(residual=residual, lagrangian=residual_lagrangian, dtype=dtype, members=ensemble)
    remaining = budget - (time.perf_counter() - start)
    return _with_prior(dataset, split, chain, terms, remaining, seed, learning, note)


def _with_prior(dataset, split, chain, terms, budget, seed, learning: dict, note) -> IdentifiedModel:
    """Stages 1-3 of :func:`identify` (see its docstring)."""
    start = time.perf_counter()
    train, held_out = split.train, split.validation
    probe = LagrangianNetwork(chain.n_dof, kind="rigid-body", prior=chain, dtype="float64", xla=False).kind_model
    regress = {}  # the bodies' regressor of each dataset, computed once

    def bodies(data):
        if id(data) not in regress:
            regress[id(data)] = probe.regressor(data.q, data.qd, data.qdd)
        return regress[id(data)]

    prior_bodies = chain.inertias
    layout = terms.layout(chain, train)
    stages, models = [], {}

    def judge(name, model, seconds, detail):
        stages.append(Stage(name, _mse(model, held_out), seconds, detail))
        models[name] = model
        note(f"{name}: validation torque MSE {stages[-1].mean_mse:.4g} ({detail})")

    t0 = time.perf_counter()
    nominal = _linear.fit_nominal(layout, prior_bodies, bodies(train), train)
    judge("nominal", _rigid_model(chain, nominal, terms), time.perf_counter() - t0, "prior inertias")
    t0 = time.perf_counter()
    layouts = tuple(dict.fromkeys((layout, terms.layout(chain, train, per_recording=False))))
    settings = _linear.choose_settings(layouts, prior_bodies, bodies(train), train, held_out, bodies(held_out))
    fitted = _linear.fit_physical(settings.layout, prior_bodies, bodies(train), train, settings)
    per_log = "a bias per log" if settings.layout.recordings else "one offset"
    detail = f"ridge {settings.weight:g}, v0 {settings.velocity:g} rad/s, {per_log} ({settings.how}); refitted to all"
    judge("rigid body", _rigid_model(chain, fitted, terms), time.perf_counter() - t0, detail)
    final = terms.layout(chain, dataset, per_recording=bool(settings.layout.recordings))
    everything = _linear.fit_physical(final, prior_bodies, bodies(dataset), dataset, settings)
    models["rigid body"] = _rigid_model(chain, everything, terms)  # judged on the held-out part, fitted to all
    variants = _residual_variants(learning, terms)
    for k, lagrangian in enumerate(variants):
        seconds = (budget - (time.perf_counter() - start)) / (len(variants) - k)
        if seconds <= 5.0:
            break
        t0 = time.perf_counter()
        network, detail = _learned.train_residual(
            chain,
            fitted,
            train,
            held_out,
            learned=terms.learned,
            lagrangian=lagrangian,
            seconds=seconds,
            seed=seed,
            dtype=learning["dtype"],
            members=learning["members"],
        )
        judge("residual Lagrangian" if lagrangian else "residual", network, time.perf_counter() - t0, detail)
    candidates = [s for s in stages if s.name.startswith("residual")] if learning["members"] else []
    best = min(candidates or stages, key=lambda s: s.mean_mse)  # an ensemble asked for: the best learned one
    chosen = models[best.name]
    report = IdentificationReport(
        tuple(stages),
        best.name,
        split.describe(),
        prior_masses=chain.inertias[:, 0].copy(),
        masses=_chain(chosen).inertias[:, 0],
        findings=_findings(_rigid_model(chain, fitted, terms), train),
        recording_offsets=everything.recording_offsets(),
    )
    return IdentifiedModel(chosen, report, candidates=models)


def _residual_variants(learning: dict, terms) -> tuple[bool, ...]:
    """Which residual stages to train: with the residual Lagrangian or not (both when not told)."""
    if not learning["residual"]:
        return ()
    chosen = learning["lagrangian"]
    variants = (False, True) if chosen is None else (bool(chosen),)
    return tuple(v for v in variants if v or terms.learned)  # without learned forces only the Lagrangian learns


class _Terms:
    """The forces of ``friction=`` sorted by who fits them, and the offsets."""

    def __init__(self, linear: tuple, learned: tuple, offset: bool, per_recording: bool) -> None:
        self.linear, self.learned, self.offset, self.per_recording = linear, learned, offset, per_recording

    @classmethod
    def of(cls, friction, offsets) -> _Terms:
        names = friction_names(friction)
        linear = tuple(n for n in names if FORCES[n].linear and n != "offset")
        learned = tuple(n for n in names if not FORCES[n].linear)
        offset = offsets is not None or "offset" in names
        return cls(linear, learned, offset, offsets == "recording")

    def model(self, *, learned: bool) -> str | None:
        """The ``friction=`` of a model with these terms (the learned ones too, or not)."""
        names = self.linear + (("offset",) if self.offset else ()) + (self.learned if learned else ())
        return "+".join(n for n in FORCES if n in names) or None

    def layout(self, chain, data, *, per_recording: bool = True) -> _linear.Layout:
        """The linear layout on ``data``: a deviation of the offset per recording when it has at least three."""
        ids = tuple(int(k) for k in np.unique(np.asarray(data.trajectory)))
        recordings = ids if per_recording and self.offset and self.per_recording and len(ids) >= 3 else ()
        return _linear.Layout(chain.n_dof, chain.n_dof, self.linear, self.offset, recordings)


def _rigid_model(chain, solution, terms: _Terms) -> LagrangianNetwork:
    """A ``"rigid-body"`` network with the solution's bodies, armature, linear forces and constant offset."""
    model = LagrangianNetwork(
        chain.n_dof,
        kind="rigid-body",
        prior=chain,
        angular=chain.angular,
        friction=terms.model(learned=False),
        friction_velocity=solution.velocity,
        dtype="float64",
    )
    model.kind_model.assign(solution.bodies, solution.get("armature"))
    for term in model.forces:
        term.assign(solution.get(term.name))
    return model


def _chain(model):
    """The rigid-body chain of a ``"rigid-body"`` network, or of an ensemble's first member."""
    return getattr(model, "members", (model,))[0].kind_model.chain()


def _findings(model, data) -> ResidualFindings | None:
    """:class:`ResidualFindings` of ``model`` on ``data`` (None when the data are too short to analyse)."""
    from lnn.residuals import analyze

    try:
        return ResidualFindings.of(analyze(model, data))
    except ValueError:  # recordings too short for the folds and spectra
        return None


def _check(dataset, offsets, ensemble) -> None:
    tau = getattr(dataset, "tau", None)
    if tau is None or not hasattr(dataset, "qdd"):
        raise TypeError(f"identify needs an lnn.Dataset with q, qd, qdd and tau; got {type(dataset).__name__}")
    if not np.any(np.asarray(tau)):
        raise ValueError(
            "identify needs measured torques: dataset.tau is all zeros (a dataset of free "
            "motion fixes a Lagrangian only up to scale; use lnn.fit with an acceleration loss)"
        )
    if offsets not in OFFSETS:
        raise ValueError(f"offsets must be one of {OFFSETS}; got {offsets!r}")
    if ensemble is not None and (isinstance(ensemble, bool) or not isinstance(ensemble, int) or ensemble < 2):
        raise ValueError(f"ensemble must be None or an int >= 2 (members); got {ensemble!r}")


def _split(dataset, fraction: float, seed: int):
    """Whole recordings held out when there are at least three (a robot's logs differ: sensor bias,
    temperature), at least one; else time blocks of the one or two recordings, a derivative window apart."""
    K = dataset.n_trajectories
    if K >= 3:
        share = max(fraction, 1.0 / K)  # at least one whole recording
        return dataset.split(fractions=(1.0 - share, share, 0.0), seed=seed, by="trajectory")
    parts = dataset.split(fractions=(1.0 - fraction, fraction, 0.0), seed=seed, by="auto")
    warnings.warn(
        f"validation={fraction!r}: the dataset has {K} recording(s), fewer than 3, so the validation set is "
        f"made of time blocks: {parts.describe()}",
        TimeSplitWarning,
        stacklevel=3,
    )
    return parts


def _mse(model, data) -> np.ndarray:
    pred = np.asarray(model.inverse_dynamics(data.q, data.qd, data.qdd), np.float64)
    return np.mean((pred - data.tau) ** 2, axis=0)
