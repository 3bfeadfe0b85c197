"""``lnn.identify``: the recommended recipe for learning a robot from torque data (the stages, in order)."""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable

import numpy as np

from lnn import _catalog
from lnn.errors import TimeSplitWarning
from lnn.identification import _learned, _linear
from lnn.identification._model import IdentifiedModel
from lnn.identification._report import IdentificationReport, JointChoice, ResidualFindings, Stage
from lnn.models.chain import RigidBodyChain
from lnn.models.forces import FORCES, friction_names
from lnn.models.network import LagrangianNetwork
from lnn.models.trigonometric import Basis
from lnn.uncertainty import NOVELTY_THRESHOLD

__all__ = ["DEFAULT_FRICTION", "DEFAULT_TIME", "OFFSETS", "STATE_SHARE", "identify"]

#: Time budget (s) of the trained stages when ``time_limit`` is None.
DEFAULT_TIME = 120.0
#: The forces of ``identify``'s default: the linear viscous and Coulomb terms and their refinements, Stribeck
#: and a Coulomb level that changes with the joint's angle (least squares fits them; the refinements only
#: where the leave-one-recording-out validation keeps them), and the passive friction of each joint's own
#: state (``joint_network``) that the residual stage learns. A joint's friction rubs with that joint's own
#: rate and stroke: a network of the whole state can explain a few logs with the other joints' states, which
#: does not carry to a new log (the measurements: docs/benchmarks/real-robots.md, "Why identify's defaults").
DEFAULT_FRICTION = _catalog.DEFAULT_FRICTION
#: Without a prior, the structured network trained from scratch is a candidate stage when a function of
#: one joint's state explains at least this share of what the trigonometric stage leaves on the training
#: logs (:meth:`ResidualFindings.state_share`): then the basis misses the physics. A planar chain, which the
#: basis writes exactly, leaves a few per cent; an arm whose gravity the basis of single coordinates cannot
#: write leaves most of it to such a function (the measurements: docs/benchmarks/real-robots.md).
STATE_SHARE = 0.2
#: The shortest share of the budget (s) a learned stage is trained with (its first epoch traces and compiles).
MIN_STAGE_SECONDS = 5.0
#: How torque offsets are modelled (``offsets=``).
OFFSETS = ("auto", "recording", "constant", None)


def identify(
    dataset,
    *,
    prior=None,
    friction: str | None = DEFAULT_FRICTION,
    offsets: str | None = "auto",
    time_limit: float | None = None,
    epochs: int | None = None,
    seed: int = 0,
    validation: float = 0.1,
    residual: bool = True,
    residual_lagrangian: bool | str | None = None,
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

    and returns the simplest stage (the first of these) whose validation torque
    error is within one standard error of the lowest (the one-standard-error
    rule; :class:`_Stages`: a learned stage must beat the linear one by more
    than the validation data's own spread). Where the validation took time
    blocks out of the recordings (one or two logs), a learned stage
    returned (one model) is then fitted to every sample as the rigid body
    is: its rigid body and linear forces refitted by the same least squares
    to the torques less its learned parts, which stay as trained
    (:func:`lnn.identification._learned.refit_linear_part`; why only there:
    :func:`_refits`). Without a
    prior (no URDF: the kinematics unknown) the linear stage is a
    **trigonometric** Lagrangian (:mod:`lnn.models.trigonometric`: ``M(q)`` and
    ``V(q)`` linear in their parameters over products of ``cos q_i, sin q_i``,
    exact for planar chains of revolute joints) fitted by the same least
    squares, offsets and validation, and the residual stages start from it;
    where a function of the state explains much of what it leaves
    (:data:`STATE_SHARE`: the basis misses the physics, as for a 7-DOF arm),
    a structured Lagrangian network trained from scratch is a candidate too. The
    report says what the linear stage left (:class:`ResidualFindings`: the
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
        (``"joint_network"``, ``"network"``, ``"damping"``) are learned by
        the residual stage.
    offsets : {"auto", "recording", "constant", None}
        Torque offsets (a sensor's bias): ``"recording"``, a constant offset
        per joint in the model and a deviation of it per recording fitted as a
        nuisance (with at least three recordings; dropped from the model: a
        new recording's bias is unknown); ``"constant"``, the constant offset
        only; None, none (unless ``friction`` names ``"offset"``); ``"auto"``
        (the default): the three, chosen by the leave-one-recording-out
        validation of the linear fit (an offset fitted on some logs can hurt
        on a new one; on logs with a bias each, the deviations free the other
        parameters).
    time_limit : float, optional
        Wall-time budget (s) of the trained stages (default :data:`DEFAULT_TIME`):
        what the linear stages leave is shared equally by the residual
        stages; a share of :data:`MIN_STAGE_SECONDS` or less goes to the first
        one alone. Each stage's last epoch, calibration and judging run past
        its share; the last stage's share is shortened by what the one before
        ran past (mostly tracing the predictions that calibrate and judge
        it). Not with ``epochs``.
    epochs : int, optional
        Train each learned stage for exactly this many epochs instead of a
        share of a wall-time budget: the stages' work, and with ``seed`` their
        result, then depend neither on the machine nor on its load (tests,
        reproducible runs). Not with ``time_limit``.
    seed : int
        Seed of the validation split and of the networks.
    validation : float
        Fraction of the data held out to choose between stages and settings
        (whole recordings when there are at least three, at least one;
        else time blocks of the recordings, a derivative window apart).
    residual : bool
        Train the residual stages.
    residual_lagrangian : bool or "both", optional
        Whether the residual stage adds a residual Lagrangian to the learned
        forces. None (the default): not where ``friction`` names a learned
        force (the residual Lagrangian alone where it names none); ``"both"``:
        both are trained, half of the remaining budget each, and the
        validation data choose. Why not both by default: a residual
        Lagrangian can fit what one validation log rewards and transfer
        badly to the next log, where the learned forces alone stay close
        to the linear stage (docs/benchmarks/real-robots.md, "Why identify's
        defaults").
    dtype : {"float64", "float32"}
        Of the trained stages.
    ensemble : int, optional
        Train the learned stages as an :class:`lnn.Ensemble` of this many
        members (bootstraps of the training recordings, in one compiled step),
        its intervals calibrated on the validation data and on the training
        samples out of each member's bag (:meth:`lnn.Ensemble.calibrate`:
        one held-out recording alone is no measure of the next one); the
        returned model is
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
    _check(dataset, offsets, ensemble, residual_lagrangian)
    _check_work(time_limit, epochs)
    start = time.perf_counter()
    budget = DEFAULT_TIME if time_limit is None else float(time_limit)
    split = _split(dataset, validation, seed)
    terms = _Terms.of(friction, offsets)
    note = progress or (lambda message: None)
    learning = dict(residual=residual, lagrangian=residual_lagrangian, dtype=dtype, members=ensemble, epochs=epochs)
    if prior is None:
        remaining = budget - (time.perf_counter() - start)
        return _without_prior(dataset, split, terms, remaining, seed, learning, note)
    chain = RigidBodyChain.from_system(prior)
    if chain.n_dof != dataset.n_dof:
        raise ValueError(
            f"the prior has {chain.n_dof} joints ({', '.join(chain.names)}); the dataset has "
            f"n = {dataset.n_dof} coordinates (lock the others: simulations.URDFRobot.from_urdf(..., "
            "locked_joints=...), or `lnn identify --joints`)"
        )
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
    stages = _Stages(held_out, note)
    judge, models = stages.judge, stages.models
    t0 = time.perf_counter()
    settings = _linear.choose_settings(
        terms.layouts(chain.n_dof, train), prior_bodies, bodies(train), train, held_out, bodies(held_out)
    )
    layout, chosen_in = settings.layout, time.perf_counter() - t0
    t0 = time.perf_counter()
    nominal = _linear.fit_nominal(layout, prior_bodies, bodies(train), train)
    judge("nominal", _rigid_model(chain, nominal, terms, train), time.perf_counter() - t0, "prior inertias")
    t0 = time.perf_counter()
    fitted = _linear.fit_physical(layout, prior_bodies, bodies(train), train, settings)
    offsets = "a bias per log" if layout.recordings else ("one offset" if layout.offset else "no offset")
    detail = f"ridge {settings.weight:g}, v0 {settings.velocity:g} rad/s, {offsets} ({settings.how}); refitted to all"
    linear = _rigid_model(chain, fitted, terms, train)
    judge("rigid body", linear, chosen_in + time.perf_counter() - t0, detail)
    final = terms.like(layout, dataset)
    t0 = time.perf_counter()
    everything = _linear.fit_physical(final, prior_bodies, bodies(dataset), dataset, settings)
    refit = time.perf_counter() - t0 if _refits(split, learning) else 0.0  # a learned stage's refit: as long
    models["rigid body"] = _rigid_model(chain, everything, terms, dataset)  # judged on the held-out part, fitted to all
    findings, novel_share = _findings(linear, train), _novel_share(linear, held_out)  # within the budget
    train_one = _residual_trainer(fitted, split, terms, seed, learning, chain)
    stages.train(_residual_variants(learning, terms), budget - refit, start, train_one, epochs=learning["epochs"])
    joint_choice = stages.choose_joints("rigid body", learning["members"])
    best = stages.best(learning["members"])  # an ensemble asked for: the best learned one
    chosen = models[best.name]
    _refit_chosen(  # judged on the held-out part, fitted to all
        stages,
        best,
        split,
        learning,
        dataset,
        "rigid body",
        lambda data: _linear.fit_physical(final, prior_bodies, bodies(dataset), data, settings),
    )
    report = IdentificationReport(
        tuple(stages.judged),
        best.name,
        split.describe(),
        prior_masses=chain.inertias[:, 0].copy(),
        masses=_chain(chosen).inertias[:, 0],
        findings=findings,
        recording_offsets=everything.recording_offsets(),
        novel_share=novel_share,
        validation_floor=stages.floor,
        joint_choice=joint_choice,
    )
    return IdentifiedModel(chosen, report, candidates=models)


def _without_prior(dataset, split, terms, budget, seed, learning: dict, note) -> IdentifiedModel:
    """:func:`identify` without a prior: the trigonometric Lagrangian by least squares in place of the rigid
    body, the same residual stages on it, and the network from scratch where the basis misses the physics
    (:data:`STATE_SHARE`; see its docstring)."""
    start = time.perf_counter()
    train, held_out = split.train, split.validation
    stages = _Stages(held_out, note)
    t0 = time.perf_counter()
    basis, settings, regress = _choose_basis(dataset, split, terms)
    zeros = np.zeros((1, basis.n_parameters))
    fitted = _linear.fit_bounded(settings.layout, zeros, regress[id(train)], train, settings)
    layout = settings.layout
    offsets = "a bias per log" if layout.recordings else ("one offset" if layout.offset else "no offset")
    detail = (
        f"{basis.n_parameters} parameters (products of {basis.order} coordinates' {basis.harmonics} harmonics), "
        f"ridge {settings.weight:g}, v0 {settings.velocity:g}, {offsets} ({settings.how}); refitted to all"
    )
    linear = _trigonometric_model(fitted, terms, basis, train)
    stages.judge("trigonometric", linear, time.perf_counter() - t0, detail)
    final = terms.like(layout, dataset)
    t0 = time.perf_counter()
    everything = _linear.fit_bounded(final, zeros, regress[id(dataset)], dataset, settings)
    refit = time.perf_counter() - t0 if _refits(split, learning) else 0.0  # a learned stage's refit: as long
    # judged on the held-out part, then fitted to all
    stages.models["trigonometric"] = _trigonometric_model(everything, terms, basis, dataset)
    findings = _findings(linear, train)
    trained: list[bool | None] = list(_residual_variants(learning, terms))  # None: the network from scratch
    if _basis_misses(findings, train):
        trained.append(None)
    residual_stage = _residual_trainer(fitted, split, terms, seed, learning, harmonics=basis.harmonics)

    def train_one(lagrangian, seconds):
        if lagrangian is not None:
            return residual_stage(lagrangian, seconds)
        network, detail = _learned.train_network(
            fitted,
            train,
            held_out,
            friction=terms.network_friction(fitted.layout),
            seconds=seconds,
            seed=seed,
            members=learning["members"],
            epochs=learning["epochs"],
        )
        return "network", network, detail

    novel_share = _novel_share(linear, held_out)
    stages.train(trained, budget - refit, start, train_one, epochs=learning["epochs"])
    joint_choice = stages.choose_joints("trigonometric", learning["members"])
    best = stages.best(learning["members"])
    _refit_chosen(  # judged on the held-out part, fitted to all
        stages,
        best,
        split,
        learning,
        dataset,
        "trigonometric Lagrangian",
        lambda data: _linear.fit_bounded(final, zeros, regress[id(dataset)], data, settings),
    )
    report = IdentificationReport(
        tuple(stages.judged),
        best.name,
        split.describe(),
        findings=findings,
        recording_offsets=everything.recording_offsets(),
        novel_share=novel_share,
        validation_floor=stages.floor,
        joint_choice=joint_choice,
    )
    return IdentifiedModel(stages.models[best.name], report, candidates=stages.models)


#: The stages that learn (the candidates of an ensemble: the linear stages have no spread).
LEARNED_STAGES = ("residual", "residual Lagrangian", "network")
#: ``identify(residual_lagrangian=BOTH)``: train the residual stage with and without the residual Lagrangian.
BOTH = "both"
#: The learned stages on a linear one (rigid body or trigonometric Lagrangian): one model's is refitted to all.
RESIDUAL_STAGES = ("residual", "residual Lagrangian")
#: Contiguous blocks of the held-out data (within each recording, in proportion to its length) over which
#: the standard error of the difference between two stages' validation errors is estimated: neighbouring
#: samples err alike, so the samples themselves would understate it.
SELECTION_BLOCKS = 20


class _Stages:
    """The stages judged on the held-out data so far, and the model of each: what ``identify`` chooses from.

    The choice is the one-standard-error rule (Breiman et al. 1984; Hastie, Tibshirani & Friedman, *The
    Elements of Statistical Learning*, 7.10): of the stages whose validation error is within one standard
    error of the lowest, the first judged (the simplest: linear, then the learned forces, then the residual
    Lagrangian): a learned stage that beats the linear one by less than the validation data's own spread is
    noise that a new log does not repeat.
    """

    def __init__(self, held_out, note) -> None:
        self.held_out, self.note = held_out, note
        self.judged: list[Stage] = []
        self.models: dict = {}
        self.blocks: dict[str, np.ndarray] = {}
        self.joint_blocks: dict[str, np.ndarray] = {}  # (blocks, n): each joint's block means
        self.excluded: set[str] = set()  # judged, but not candidates (a residual stage with every force off)
        self.smooth = _smoothed_torque(held_out)  # the held-out torque in the kinematics' band, or None
        self.floor = None if self.smooth is None else np.mean((np.asarray(held_out.tau) - self.smooth) ** 2, axis=0)

    def judge(self, name: str, model, seconds: float, detail: str, *, replace: bool = False) -> None:
        """Score ``model`` on the held-out data as the stage ``name`` (``replace``: in place of the one judged)."""
        predicted = np.asarray(model.inverse_dynamics(self.held_out.q, self.held_out.qd, self.held_out.qdd))
        squared = (predicted - np.asarray(self.held_out.tau, np.float64)) ** 2
        band = None if self.smooth is None else np.mean((predicted - self.smooth) ** 2, axis=0)
        stage = Stage(name, squared.mean(axis=0), seconds, detail, validation_in_band=band)
        if replace:
            self.judged = [stage if s.name == name else s for s in self.judged]
        else:
            self.judged.append(stage)
        self.models[name] = model
        self.blocks[name] = _block_means(squared.mean(axis=1), self.held_out.trajectory)
        self.joint_blocks[name] = np.stack(
            [_block_means(squared[:, j], self.held_out.trajectory) for j in range(squared.shape[1])], axis=1
        )
        self.note(f"{name}: validation torque MSE {stage.mean_mse:.4g} ({detail})")

    def choose_joints(self, linear: str, members) -> JointChoice | None:
        """Keep the residual stage's learned force on the joints where it beats the ``linear`` stage on the
        held-out data by more than one standard error of their difference, and switch it off on the others
        (:func:`_learned.mask_joint_forces`), the stage judged again; None where there is nothing to choose (no
        residual stage, an ensemble, no ``joint_network`` force; the stage "residual" has no residual Lagrangian).

        Where no joint keeps it, the stage is the linear one to the arithmetic and is dropped from the choice.
        """
        name = "residual"
        model = self.models.get(name)
        if members is not None or model is None or getattr(model, "joint_friction_net", None) is None:
            return None
        difference = self.joint_blocks[name] - self.joint_blocks[linear]
        count = difference.shape[0]
        error = difference.std(axis=0, ddof=1) / np.sqrt(count) if count > 1 else np.zeros(difference.shape[1])
        keep = difference.mean(axis=0) < -error
        before = next(s for s in self.judged if s.name == name)
        choice = JointChoice(
            name,
            linear,
            tuple(bool(k) for k in keep),
            next(s for s in self.judged if s.name == linear).validation_mse,
            before.validation_mse,
            error,
        )
        if keep.all():
            return choice
        _learned.mask_joint_forces(model, keep)
        if not keep.any():  # the linear stage itself: reported as trained, not a candidate of its own
            self.excluded.add(name)
            self.amend(name, f"learned force off on every joint: the {linear} stage")
            return choice
        kept = ", ".join(str(j + 1) for j in np.flatnonzero(keep))
        self.judge(name, model, before.seconds, f"{before.detail}; learned force kept on joints: {kept}", replace=True)
        return choice

    def train(self, variants, budget: float, start: float, train_one, *, epochs: int | None = None) -> None:
        """Train and judge each variant with an equal share of what is left of ``budget`` since ``start``:
        ``train_one(variant, seconds) -> (name, model, detail)``; with ``epochs``, every variant, each for that
        many epochs (``seconds`` None: no clock decides anything). A share of :data:`MIN_STAGE_SECONDS` or less
        goes whole to the next variant alone (a budget too short for two stages trains one, not none); none is
        trained with less than that left.

        A stage runs past its share by its last epoch, its calibration and its judging. What one runs past comes
        out of the next one's share (the clock says so); the last stage's share is also shortened by what the
        stage before it ran past, its best guess of its own. Where the last stage runs past by more than the
        one before (an ensemble's residual Lagrangian traces more than its forces), the call still ends past the
        budget by the difference."""
        variants = tuple(variants)
        if epochs is not None:
            for variant in variants:
                t0 = time.perf_counter()
                name, model, detail = train_one(variant, None)
                self.judge(name, model, time.perf_counter() - t0, detail)
            return
        past = 0.0  # how far the last stage trained ran past its share
        for k, variant in enumerate(variants):
            left = budget - (time.perf_counter() - start)
            if left <= MIN_STAGE_SECONDS:
                break
            share = left / (len(variants) - k)
            alone = share <= MIN_STAGE_SECONDS
            seconds = left if alone else share
            if alone or k == len(variants) - 1:
                seconds = max(seconds - past, min(seconds, MIN_STAGE_SECONDS))
            t0 = time.perf_counter()
            name, model, detail = train_one(variant, seconds)
            trained = time.perf_counter() - t0
            self.judge(name, model, trained, detail)
            past = max(time.perf_counter() - t0 - seconds, 0.0)
            if alone:
                break

    def amend(self, name: str, text: str) -> None:
        """Add ``text`` to the detail of the stage ``name`` (what was done to it after it was judged)."""
        amended = [dataclasses.replace(s, detail=f"{s.detail}; {text}") if s.name == name else s for s in self.judged]
        self.judged = amended

    def best(self, learned_only) -> Stage:
        """The first stage judged whose mean validation error is within one standard error of the lowest
        (among the learned ones if ``learned_only`` and any); the standard error is that of the mean of the
        per-block differences to the lowest."""
        judged = [s for s in self.judged if s.name not in self.excluded]
        candidates = [s for s in judged if s.name in LEARNED_STAGES] if learned_only else []
        candidates = candidates or judged
        lowest = min(candidates, key=lambda s: s.mean_mse)
        for stage in candidates:
            difference = self.blocks[stage.name] - self.blocks[lowest.name]
            spread = difference.std(ddof=1) / np.sqrt(len(difference)) if len(difference) > 1 else 0.0
            if stage.mean_mse - lowest.mean_mse <= spread:
                return stage
        return lowest


def _choose_basis(dataset, split, terms):
    """``(basis, settings, regressors)``: the trigonometric basis (two harmonics where they fit, else one;
    then one harmonic too), the layout, smoothing velocity and ridge weight with the lowest validation
    error of the linear fit (:func:`_linear.choose_settings`), and the chosen basis's regressor of the
    training, held-out and whole data (by ``id``). More harmonics write more chains (3-D ones) and need more
    data, so the validation chooses."""
    train, held_out = split.train, split.validation
    first = Basis.of(train.angular)
    best = None
    for basis in (first, Basis.of(train.angular, harmonics=1)) if first.harmonics == 2 else (first,):
        regress = {id(d): basis.regressor(d.q, d.qd, d.qdd) for d in (train, held_out)}
        zeros = np.zeros((1, basis.n_parameters))
        layouts = terms.layouts(dataset.n_dof, train, n_bodies=1, body_columns=basis.n_parameters, armature=False)
        settings = _linear.choose_settings(layouts, zeros, regress[id(train)], train, held_out, regress[id(held_out)])
        if best is None or settings.error < best[1].error:
            best = (basis, settings, regress)
    basis, settings, regress = best
    regress[id(dataset)] = basis.regressor(dataset.q, dataset.qd, dataset.qdd)
    return basis, settings, regress


def _residual_trainer(fitted, split, terms, seed, learning: dict, chain=None, harmonics=None):
    """``train_one(lagrangian, seconds)`` of :meth:`_Stages.train` for the residual stages on ``fitted``."""

    def train_one(lagrangian: bool, seconds: float):
        network, detail = _learned.train_residual(
            fitted,
            split.train,
            split.validation,
            chain=chain,
            harmonics=harmonics,
            learned=terms.learned,
            lagrangian=lagrangian,
            seconds=seconds,
            seed=seed,
            dtype=learning["dtype"],
            members=learning["members"],
            epochs=learning["epochs"],
        )
        return ("residual Lagrangian" if lagrangian else "residual"), network, detail

    return train_one


def _basis_misses(findings: ResidualFindings | None, data) -> bool:
    """Whether the linear stage's basis misses the physics: a function of the state explains at least
    :data:`STATE_SHARE` of what it leaves, and what it leaves is more than rounding (``1e-12`` of the torques'
    power: a simulation the basis writes exactly leaves a residual that is a function of the state too).
    Unknown (data too short to analyse): True."""
    if findings is None:
        return True
    power = np.mean(np.asarray(data.tau, np.float64) ** 2, axis=0)
    return bool(np.any(findings.mse > 1e-12 * power) and findings.state_share() >= STATE_SHARE)


def _residual_variants(learning: dict, terms) -> tuple[bool, ...]:
    """Which residual stages to train: with the residual Lagrangian or not (``identify``'s ``residual_lagrangian``:
    not when not told, unless no force is learned; both on ``"both"``)."""
    if not learning["residual"]:
        return ()
    chosen = learning["lagrangian"]
    if not terms.learned:  # without learned forces only the Lagrangian learns
        return () if chosen is False else (True,)
    if chosen == BOTH:
        return (False, True)
    return (False,) if chosen is None else (bool(chosen),)


class _Terms:
    """The forces of ``friction=`` sorted by who fits them, and the offset layouts to choose from."""

    def __init__(self, linear: tuple, learned: tuple, offsets: tuple[str, ...]) -> None:
        self.linear, self.learned, self.offsets = linear, learned, offsets

    @classmethod
    def of(cls, friction, offsets) -> _Terms:
        names = friction_names(friction)
        linear = tuple(n for n in names if FORCES[n].linear and n != "offset")
        learned = tuple(n for n in names if not FORCES[n].linear)
        if offsets == "auto":
            choices = ("recording", "constant") + (() if "offset" in names else ("none",))
        elif offsets is None:
            choices = ("constant",) if "offset" in names else ("none",)
        else:
            choices = (offsets,)
        return cls(linear, learned, choices)

    def model(self, layout: _linear.Layout, *, learned: bool) -> str | None:
        """The ``friction=`` of a model with ``layout``'s linear forces and offset (the learned ones too, or not)."""
        names = layout.forces + (("offset",) if layout.offset else ()) + (self.learned if learned else ())
        return "+".join(n for n in FORCES if n in names) or None

    def network_friction(self, layout: _linear.Layout) -> str | None:
        """The ``friction=`` of the prior-free network: ``layout``'s linear forces, the learned ones, a constant
        offset unless told none."""
        names = layout.forces + (() if self.offsets == ("none",) else ("offset",)) + self.learned
        return "+".join(n for n in FORCES if n in names) or None

    def layouts(self, n: int, data, *, n_bodies: int | None = None, **shape) -> tuple[_linear.Layout, ...]:
        """The candidate layouts on ``data``: each choice of offsets (a deviation per recording only with at
        least three recordings), with the linear forces named and without their refinements
        (:attr:`lnn.models.forces.Force.refinement`: Stribeck, a position-dependent Coulomb level, which few
        or short logs can fit to noise); ``n_bodies`` (default ``n``) and ``shape`` (``body_columns``,
        ``armature``) as in :class:`_linear.Layout`."""
        ids = tuple(int(k) for k in np.unique(np.asarray(data.trajectory)))
        bodies = n if n_bodies is None else n_bodies
        plain = tuple(name for name in self.linear if not FORCES[name].refinement)
        out = []
        for forces in (self.linear, plain):
            for choice in self.offsets:
                recordings = ids if choice == "recording" and len(ids) >= 3 else ()
                out.append(_linear.Layout(n, bodies, forces, choice != "none", recordings, **shape))
        return tuple(dict.fromkeys(out))

    @staticmethod
    def like(layout: _linear.Layout, data) -> _linear.Layout:
        """``layout``'s choice of offsets on other ``data`` (its recordings)."""
        ids = tuple(int(k) for k in np.unique(np.asarray(data.trajectory)))
        return dataclasses.replace(layout, recordings=ids if layout.recordings else ())


def _rigid_model(chain, solution, terms: _Terms, data) -> LagrangianNetwork:
    """A ``"rigid-body"`` network with the solution's bodies, armature, linear forces and constant offset, adapted
    to the ``data`` it was fitted on (its novelty: the distance to their states)."""
    model = LagrangianNetwork(
        chain.n_dof,
        kind="rigid-body",
        prior=chain,
        angular=chain.angular,
        friction=terms.model(solution.layout, learned=False),
        friction_velocity=solution.velocity,
        dtype="float64",
    )
    model.kind_model.assign(solution.bodies, solution.get("armature"))
    solution.assign_forces(model)
    model.adapt(data.q, data.qd, data.qdd)
    return model


def _trigonometric_model(solution, terms: _Terms, basis: Basis, data) -> LagrangianNetwork:
    """A ``"trigonometric"`` network of ``basis`` with the solution's parameters, linear forces and offset, adapted
    to the ``data`` it was fitted on."""
    model = LagrangianNetwork(
        solution.layout.n,
        kind="trigonometric",
        angular=basis.angular,
        harmonics=basis.harmonics,
        friction=terms.model(solution.layout, learned=False),
        friction_velocity=solution.velocity,
        dtype="float64",
    )
    model.kind_model.assign(solution.z[: solution.layout.inertial])
    solution.assign_forces(model)
    model.adapt(data.q, data.qd, data.qdd)
    return model


def _chain(model):
    """The rigid-body chain of a ``"rigid-body"`` network, or of an ensemble's first member."""
    return getattr(model, "members", (model,))[0].kind_model.chain()


def _refits(split, learning: dict) -> bool:
    """Whether a learned stage chosen is refitted to all the data (:func:`_learned.refit_linear_part`): one
    model (an ensemble's members keep their bootstraps) validated on time blocks cut out of its recordings.

    On one recording the held-out blocks and the margins around them are a large part of the motion, which
    the linear part would otherwise never see; where every training recording was seen whole, refitting
    gains little (the measurements: docs/benchmarks/real-robots.md, "Why identify's defaults").
    """
    return learning["members"] is None and split.by == "time"


def _refit_chosen(stages, best: Stage, split, learning: dict, dataset, linear: str, fit) -> None:
    """Refit the chosen stage's ``linear`` part and its linear forces to ``dataset`` by ``fit`` (the linear
    stage's least squares) where :func:`_refits` says so and the stage is a residual one; the report says so."""
    if best.name in RESIDUAL_STAGES and _refits(split, learning):
        _learned.refit_linear_part(stages.models[best.name], dataset, fit)
        stages.amend(best.name, f"its {linear} and linear forces refitted to all")


def _novel_share(model, held_out) -> float:
    """The share of the held-out states beyond the training states of ``model`` (novelty above 1)."""
    return float(np.mean(model.novelty(held_out.q, held_out.qd) > NOVELTY_THRESHOLD))


def _findings(model, data) -> ResidualFindings | None:
    """:class:`ResidualFindings` of ``model`` on ``data`` (None when the data are too short to analyse).

    Every recording, with time blocks held out and, given two recordings or more, whole recordings. Recordings
    at different rates (files on their own grids, e.g. logs at 2 ms and one at 1.55 ms) all count in the
    shares; the lags and spectra read those at the rate that holds the most samples
    (:func:`lnn.residuals.analyze`).
    """
    from lnn.residuals import analyze

    try:
        blocks = analyze(model, data)
    except ValueError:  # recordings too short for the folds and spectra
        return None
    several = np.unique(np.asarray(data.trajectory)).size > 1
    return ResidualFindings.of(blocks, analyze(model, data, by="recordings") if several else None)


def _check(dataset, offsets, ensemble, residual_lagrangian) -> None:
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
    if residual_lagrangian not in (None, True, False, BOTH):
        raise ValueError(f"residual_lagrangian must be None, True, False or {BOTH!r}; got {residual_lagrangian!r}")


def _check_work(time_limit, epochs) -> None:
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
        raise ValueError(f"epochs must be None or an int >= 1; got {epochs!r}")
    if epochs is not None and time_limit is not None:
        raise ValueError(
            f"give the learned stages' work as time_limit or as epochs, not both; got time_limit={time_limit!r}, "
            f"epochs={epochs!r}"
        )


def _split(dataset, fraction: float, seed: int):
    """Whole recordings held out when there are at least three (a robot's logs differ: sensor bias,
    temperature), at least one; else time blocks of the one or two recordings, a derivative window apart.

    Of eight recordings the default holds out one (two did not help: docs/benchmarks/real-robots.md)."""
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


def _smoothed_torque(data) -> np.ndarray | None:
    """The torque of ``data`` through the Savitzky–Golay filter of its derivatives (:func:`lnn.metrics.in_band`),
    or None where the data record no window (simulated data, the spectral rule)."""
    from lnn.metrics import in_band

    rule = getattr(data, "window_rule", None)
    if rule is None or rule.window is None:
        return None
    return in_band(np.asarray(data.tau, np.float64), data)


def _block_means(values: np.ndarray, trajectory, blocks: int = SELECTION_BLOCKS) -> np.ndarray:
    """Means of ``values (N,)`` over contiguous blocks within each recording, about ``blocks`` in all
    (at least one a recording, in proportion to its samples)."""
    trajectory = np.asarray(trajectory)
    out = []
    for k in np.unique(trajectory):
        rows = np.flatnonzero(trajectory == k)
        count = max(1, min(len(rows), round(blocks * len(rows) / len(trajectory))))
        out += [values[part].mean() for part in np.array_split(rows, count)]
    return np.asarray(out)
