"""The learned stages of :func:`lnn.identify`: the residual on top of the rigid body, and the prior-free network.

**Residual** (with a prior): a ``"rigid-body"`` :class:`lnn.LagrangianNetwork`
holding the physical linear stage as it is (its bodies, armature, linear force
coefficients and constant offset: :func:`freeze_linear_part`, so that the
learned force can be kept per joint), with the learned forces named in
``friction=`` that no linear fit can take (by default the passive friction
of each joint's own state ``"joint_network"`` of :mod:`lnn.models.forces`:
Stribeck, asymmetric and position-dependent friction, which dissipates by
construction) and, on
request, a structured residual Lagrangian (``T_r = 1/2 |C(q)^T qd|^2``,
``V_r(q)``, both starting near zero), trained on the torques by
:func:`lnn.fit` (torque loss, its best validation epoch kept). The residual
Lagrangian is trained on request (``residual_lagrangian=True``, or
``"both"`` to let the validation choose), not a part of every stage: its
forward-over-reverse pass costs about 4x the forces' and its extra freedom
fits what a new log does not repeat (docs/benchmarks/real-robots.md, "Why
identify's defaults", with the peak learning rate's measurements).
The training torques have each recording's offset deviation (fitted by the
linear stage) taken out, so the network does not learn one log's sensor
bias as physics; the held-out recordings keep theirs (a new recording's
bias is unknown), and so do the training samples that calibrate an
ensemble. The rigid body's torque is
its Newton-Euler recursion (O(n), no mass matrix), so the stage trains a
7-DOF arm at the rate of a small network.

**Without a prior** the same stages start from the trigonometric Lagrangian
that least squares fitted in place of the rigid body
(:mod:`lnn.models.trigonometric`: ``M(q)`` and ``V(q)`` linear in their
parameters over products of ``cos q_i, sin q_i``), and the residual Lagrangian
corrects what its basis misses. **Network** (without a prior, when the
basis misses the physics): a structured Lagrangian network with the forces,
trained from scratch the same way, is a candidate only where a function of
the state explains much of what the trigonometric stage leaves
(:data:`lnn.identification._recipe.STATE_SHARE`): a 7-DOF arm's basis of
single coordinates cannot write its gravity. Where it explains little, the
network only finds one log to fit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lnn.models.ensemble import Ensemble
from lnn.models.forces import FORCES
from lnn.models.network import LagrangianNetwork
from lnn.train import fit, member_weights
from lnn.train._ensemble import calibrate_on

__all__ = [
    "HIDDEN",
    "RESIDUAL_LEARNING_RATE",
    "NETWORK_LEARNING_RATE",
    "OFF_LOGIT",
    "freeze_linear_part",
    "mask_joint_forces",
    "refit_linear_part",
    "train_network",
    "train_residual",
]

#: Hidden widths of the residual Lagrangian and of the prior-free network.
HIDDEN = (64, 64)
#: Peak learning rates of the residual stages and of the prior-free network (measured with
#: benchmarks/bench_real.py).
RESIDUAL_LEARNING_RATE = 3e-3
NETWORK_LEARNING_RATE = 3e-3
#: The logit of the friction level of a joint whose learned force is switched off (:func:`mask_joint_forces`):
#: ``softplus(-100) = 4e-44`` N m, nothing in float64 or float32.
OFF_LOGIT = -100.0
#: The name prefixes of the linear part's weights (the kinds' inertial parameters; the linear forces' are
#: ``friction_<name>``): what :func:`freeze_linear_part` keeps as least squares left it.
_LINEAR_PREFIXES = ("rigid_body_", "trigonometric_")


def train_residual(
    solution,
    train,
    held_out,
    *,
    chain=None,
    harmonics: int | None = None,
    learned: tuple,
    lagrangian: bool,
    seconds: float | None,
    seed: int,
    dtype: str,
    members: int | None = None,
    epochs: int | None = None,
):
    """The residual stage on the linear stage's model: ``(network, detail)``.

    With ``chain`` a ``"rigid-body"`` model of the identified bodies; without,
    the ``"trigonometric"`` model of the prior-free stage. One model's linear
    part (bodies or trigonometric parameters, armature, linear forces, offset)
    stays where least squares put it (:func:`freeze_linear_part`): the
    learned force then adds to the linear stage's torque joint by joint, so
    that :func:`lnn.identify` can keep it on the joints where held-out
    recordings show it helps and off elsewhere. An ensemble's members train
    their linear parts along (their spread is the point of an ensemble).

    Parameters
    ----------
    solution : lnn.identification._linear.LinearSolution
        The linear stage, fitted on ``train``.
    train, held_out : lnn.Dataset
    chain : lnn.models.RigidBodyChain, optional
        The prior's chain (None: the trigonometric Lagrangian of ``solution``).
    harmonics : int, optional
        Without ``chain``: the trigonometric basis's harmonics.
    learned : tuple of str
        The non-linear forces to learn (e.g. ``("joint_network",)``).
    lagrangian : bool
        Add the residual Lagrangian.
    seconds : float or None
        Time budget of :func:`lnn.fit` (None with ``epochs``).
    seed : int
    dtype : {"float64", "float32"}
    members : int, optional
        Train an :class:`lnn.Ensemble` of this many members (bootstraps of
        the training recordings), calibrated by :func:`lnn.fit` on
        ``held_out`` and on the training samples out of each member's bag.
    epochs : int, optional
        Train exactly this many epochs (instead of ``seconds``).
    """
    start = None
    if chain is not None:
        identified = chain.with_parameters(inertias=solution.bodies, armature=solution.get("armature"))
        base = dict(kind="rigid-body", prior=identified, angular=chain.angular)
    else:
        base = dict(kind="trigonometric", angular=train.angular, harmonics=harmonics)

        def start(member) -> None:
            member.kind_model.assign(solution.z[: solution.layout.inertial])
            member.trigonometric_mass.trainable = False  # least squares' optimum, not the optimiser's
            member.trigonometric_potential.trainable = False

    base.update(residual=lagrangian, hidden=HIDDEN)
    lagrangian_text = f", residual Lagrangian {HIDDEN}" if lagrangian else ""
    return _train_forces(
        base, solution, train, held_out, learned, seconds, seed, dtype, members, lagrangian_text, start, epochs
    )


def _train_forces(
    base: dict, solution, train, held_out, learned, seconds, seed, dtype, members, text, start=None, epochs=None
):
    """A model of ``base`` with the linear stage's forces and the ``learned`` ones, trained on the torques."""
    layout = solution.layout
    terms = layout.forces + (("offset",) if layout.offset else ()) + tuple(learned)
    network = _network(
        members,
        layout.n,
        friction="+".join(terms) or None,
        friction_velocity=solution.velocity,
        dtype=dtype,
        seed=seed,
        **base,
    )
    for member in getattr(network, "members", (network,)):
        if start is not None:
            start(member)
        solution.assign_forces(member)
    if members is None:  # one model: the learned parts on the linear stage as it is (see freeze_linear_part)
        freeze_linear_part(network)
    history = _fit_unbiased(
        network,
        solution,
        train,
        held_out,
        loss="torque",
        seconds=seconds,
        seed=seed,
        rate=RESIDUAL_LEARNING_RATE,
        epochs=epochs,
    )
    forces = f", forces {'+'.join(learned)}" if learned else ""
    detail = f"{len(history.epoch)} epochs (best {history.best_epoch}){text}{forces}, {dtype}"
    return network, detail


def train_network(
    solution, train, held_out, *, friction: str | None, seconds: float | None, seed: int, members=None, epochs=None
):
    """The prior-free network: a structured Lagrangian network with ``friction`` trained from scratch on the
    torques less each recording's offset deviation that the linear ``solution`` found, ``(network, detail)``."""
    network = _network(
        members, train.n_dof, kind="structured", hidden=HIDDEN, angular=train.angular, friction=friction, seed=seed
    )
    history = _fit_unbiased(
        network,
        solution,
        train,
        held_out,
        loss="auto",
        seconds=seconds,
        seed=seed,
        rate=NETWORK_LEARNING_RATE,
        epochs=epochs,
    )
    return network, f"structured {HIDDEN}, {len(history.epoch)} epochs (best {history.best_epoch})"


def _fit_unbiased(network, solution, train, held_out, *, loss, seconds, seed: int, rate: float, epochs=None):
    """:func:`lnn.fit` on the training torques less each recording's offset deviation that the linear
    ``solution`` found (a log's sensor bias is not physics); an ensemble is then calibrated here, not by fit, with
    the deviations kept, since a new recording's bias is unknown and its error includes it
    (:func:`lnn.train._ensemble.calibrate_on`; the held-out recordings keep theirs throughout)."""
    deviation = solution.deviation(train.trajectory)
    corrected = dataclasses.replace(train, tau=np.asarray(train.tau) - deviation)
    recalibrate = isinstance(network, Ensemble) and bool(np.any(deviation != 0.0))
    history = fit(
        network,
        corrected,
        validation=held_out,
        time_limit=seconds,
        epochs=epochs,
        seed=seed,
        learning_rate=rate,
        loss=loss,
        calibrate=not recalibrate,
    )
    if recalibrate:
        calibrate_on(network, held_out, train, member_weights(network, train.trajectory, seed=seed))
    return history


def freeze_linear_part(network) -> None:
    """Keep the linear part of a residual stage (the rigid body's or the trigonometric Lagrangian's parameters,
    the armature, the linear forces' coefficients and the offset) where least squares put it: only the learned
    parts train.

    Why: the model's torque on joint ``j`` is then the linear stage's plus the
    learned force of joint ``j`` (a ``joint_network`` force reads that joint's
    state alone), so switching the force off on a joint
    (:func:`mask_joint_forces`) gives back exactly the linear stage's torque
    there, and :func:`lnn.identify` can keep the force on the joints where
    held-out recordings show that it helps, and off elsewhere, with one
    model (one Lagrangian). Trained along, the rigid body trades its
    parameters against the learned force on every joint and is stopped by
    the validation data as a whole; a joint that the force does not help
    can then be worse than the linear stage (docs/benchmarks/real-robots.md).
    """
    linear = tuple(f"friction_{name}" for name in FORCES if FORCES[name].linear)
    for variable in network.trainable_variables:
        leaf = variable.path.rsplit("/", 1)[-1]
        if leaf.startswith(_LINEAR_PREFIXES) or leaf in linear:
            variable.trainable = False


def mask_joint_forces(network, keep) -> None:
    """Switch the learned ``joint_network`` force off on the joints where ``keep`` is False: their friction
    level becomes ``softplus(OFF_LOGIT)`` (zero to the arithmetic), the other joints' as trained.

    The model stays one Lagrangian with a passive force (every joint's level
    ``>= 0``), saved, loaded and rolled out as any other.

    Parameters
    ----------
    network : lnn.LagrangianNetwork
        With the force ``joint_network``.
    keep : array_like of bool, shape ``(n,)``

    Raises
    ------
    ValueError
        If the network has no ``joint_network`` force or ``keep`` has not ``n`` entries.
    """
    keep = np.asarray(keep, bool)
    net = getattr(network, "joint_friction_net", None)
    if net is None:
        raise ValueError("mask_joint_forces needs a network with the learned force 'joint_network'")
    if keep.shape != (network.n_dof,):
        raise ValueError(f"keep must have one entry per joint ({network.n_dof}); got shape {keep.shape}")
    off = ~keep
    for weights in net.w_out.values():
        value = np.asarray(weights)
        value[off] = 0.0
        weights.assign(value)
    bias = np.asarray(net.b_out)
    bias[off] = OFF_LOGIT
    net.b_out.assign(bias)


def refit_linear_part(network, data, fit) -> LagrangianNetwork:
    """The residual stage's linear part (rigid body or trigonometric Lagrangian, linear forces) refitted to
    ``data`` by the linear stage's least squares, its learned parts (forces, residual Lagrangian) as trained;
    ``network`` is changed and returned.

    What the linear stage gets after the validation has judged it ("refitted to all"), for the learned
    stage that the validation chose: trained on the training part, its linear parameters leave out the
    held-out part. Its learned parts fixed, the torque is linear in the rest: the torque of the learned parts
    (the network's less that of its linear part alone) comes off the measured torque, and ``fit`` fits the
    rest on all the data. The learned parts keep their input scaling and training box (they were not
    trained on the held-out states).

    Why: on one recording the held-out blocks and the margins around them are a large part of the motion,
    which the linear part fitted to the training part never saw. ``identify`` refits where the validation
    was made of time blocks (:func:`lnn.identification._recipe._refits`).

    Parameters
    ----------
    network : lnn.LagrangianNetwork
        A ``"rigid-body"`` or ``"trigonometric"`` residual stage (one model, not an ensemble).
    data : lnn.Dataset
    fit : callable
        ``fit(data) -> LinearSolution``: the linear stage's least squares on all the data (its layout's
        recordings those of ``data``).
    """
    q, qd, qdd = (np.asarray(getattr(data, k), np.float64) for k in ("q", "qd", "qdd"))
    learned = np.asarray(network.inverse_dynamics(q, qd, qdd), np.float64) - np.asarray(
        _linear_twin(network).inverse_dynamics(q, qd, qdd), np.float64
    )
    solution = fit(dataclasses.replace(data, tau=np.asarray(data.tau, np.float64) - learned))
    if network.kind == "rigid-body":
        network.kind_model.assign(solution.bodies, solution.get("armature"))
    else:
        network.kind_model.assign(solution.z[: solution.layout.inertial])
    solution.assign_forces(network)
    return network


def _linear_twin(network) -> LagrangianNetwork:
    """A network of ``network``'s kind with its current linear part alone: the bodies and armature (or the
    trigonometric Lagrangian's parameters) and the linear forces, no residual Lagrangian, no learned force."""
    linear = [term.name for term in network.forces if FORCES[term.name].linear]
    options = dict(friction="+".join(linear) or None, friction_velocity=network.friction_velocity, dtype="float64")
    if network.kind == "rigid-body":
        chain = network.kind_model.chain()
        twin = LagrangianNetwork(network.n_dof, kind="rigid-body", prior=chain, angular=network.angular, **options)
        twin.kind_model.assign(chain.inertias, chain.armature)
    elif network.kind == "trigonometric":
        harmonics = network.kind_model.basis.harmonics
        twin = LagrangianNetwork(
            network.n_dof, kind="trigonometric", angular=network.angular, harmonics=harmonics, **options
        )
        twin.kind_model.assign(network.kind_model.parameters())
    else:
        raise ValueError(f"a residual stage is a 'rigid-body' or 'trigonometric' network; got {network.kind!r}")
    parameters = network.friction_parameters()
    for term in twin.forces:
        term.assign(parameters[term.name])
    return twin


def _network(members: int | None, n_dof: int, **options):
    """A :class:`lnn.LagrangianNetwork`, or an :class:`lnn.Ensemble` of ``members`` of them."""
    if members is None:
        return LagrangianNetwork(n_dof, **options)
    return Ensemble(n_dof, members, **options)
