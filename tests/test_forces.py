"""Learned generalized forces: the registry, dissipation, TF = numpy, inverse = forward, save/load (float64).

Also: a force registered from this file (one file, outside the package) works
through ``friction=``; the least-squares interface of the linear forces; the
passive network friction (passivity on 1e5 wide states for every built-in
kind, unforced rollouts that never gain energy, gradients against finite
differences, XLA, its numpy twin, a bit-exact save/load round trip).
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import lnn
import simulations
from lnn.models.forces import FORCES, Force, LinearForce, friction_names, register_force
from lnn.models.forces.base import softplus_inverse
from lnn.models.support import TrainingBox

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- a force from outside the package


# --8<-- [start:force]
@register_force
class ToyDrag(LinearForce):
    """Quadratic drag ``-k qd |qd|`` per joint, ``k >= 0``: a linear friction force in one file."""

    name = "toy"
    variable = "friction_toy"

    @staticmethod
    def columns(xp, q, qd, velocity):
        return qd * xp.abs(qd)


# --8<-- [end:force]


@register_force
class ToySpring(Force):
    """``-k sin(q)`` (a position-dependent force without a numpy twin: the default one calls TensorFlow)."""

    name = "toy-spring"
    dissipative = False
    needs_q = True

    def __init__(self, model) -> None:
        super().__init__(model)
        model.toy_spring = model.add_weight(name="toy_spring", shape=(model.n_dof,), initializer="ones")

    def force(self, q, qd):
        return -self.model.toy_spring * tf.sin(q)


def _model(friction, kind="structured", **options):
    options.setdefault("hidden", (8,))
    model = lnn.LagrangianNetwork(2, kind=kind, friction=friction, dtype="float64", seed=0, xla=False, **options)
    rng = np.random.default_rng(1)
    for name in ("friction_viscous", "friction_coulomb", "friction_offset", "friction_toy", "toy_spring"):
        if hasattr(model, name):
            getattr(model, name).assign(rng.normal(size=2))
    return model


#: The learned friction networks and the model attribute holding each one's layer.
NETWORK_FORCES = {"network": "friction_net", "joint_network": "joint_friction_net"}


def _scale_up_network(model, seed, scale=2.0, force="network"):
    """Random weights for a friction network, scaled up so that the force matters."""
    rng = np.random.default_rng(seed)
    for var in getattr(model, NETWORK_FORCES[force]).weights:
        var.assign(scale * rng.normal(size=var.shape))


# ----------------------------------------------------------------------------- registry and configuration


def test_the_friction_argument_names_registered_terms():
    assert {"damping", "viscous", "coulomb", "offset", "network", "toy"} <= set(FORCES)
    assert friction_names("coulomb+viscous") == ("viscous", "coulomb")
    assert friction_names("network+damping") == ("damping", "network")
    assert friction_names(None) == ()
    with pytest.raises(ValueError, match="unknown: 'hysteresis'"):
        friction_names("viscous+hysteresis")
    with pytest.raises(TypeError, match="friction must be None or a string"):
        friction_names(["viscous"])


def test_damping_is_a_force_like_the_others_and_the_config_keeps_its_shorthand():
    by_name = lnn.LagrangianNetwork(2, friction="damping+viscous", hidden=(4,), dtype="float64", seed=0, xla=False)
    by_flag = lnn.LagrangianNetwork(
        2, damping=True, friction="viscous", hidden=(4,), dtype="float64", seed=0, xla=False
    )
    for model in (by_name, by_flag):
        config = model.get_config()
        assert (config["damping"], config["friction"]) == (True, "viscous")
        assert [term.name for term in model.forces] == ["damping", "viscous"]
        assert model.damping and model.friction_terms == "viscous"
    # configurations as saved models carry them
    old = dict(by_flag.get_config(), damping=False, friction="viscous+coulomb")
    assert [t.name for t in lnn.LagrangianNetwork.from_config(old).forces] == ["viscous", "coulomb"]
    # damping_matrix() sums the forces that are exactly -D qd: D and diag(b)
    d = by_name.forces[0].damping_matrix().numpy()
    b = by_name.forces[1].coefficients()
    np.testing.assert_allclose(by_name.damping_matrix().numpy(), d + np.diag(b), rtol=0, atol=1e-15)
    with pytest.warns(DeprecationWarning, match="damping_force"):
        assert by_name.damping_force is by_name.forces[0]


def test_the_forces_package_has_no_cycle_and_one_damping_module():
    """A force module imports the base only; nothing imports a second damping module."""
    package = ROOT / "lnn" / "models" / "forces"
    assert not (ROOT / "lnn" / "models" / "damping.py").exists()
    for path in package.glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "lnn.models.forces", f"{path.name} imports the forces package"
    for path in (ROOT / "lnn").rglob("*.py"):
        assert "lnn.models.damping" not in path.read_text(), path


# ----------------------------------------------------------------------------- the built-in and the toy forces


@pytest.mark.parametrize("friction", ["viscous", "coulomb", "viscous+coulomb", "toy", "network"])
def test_friction_is_dissipative_at_every_state(friction):
    model = _model(friction, damping=True)
    if "network" in friction:
        _scale_up_network(model, 0)
    rng = np.random.default_rng(2)
    qd = np.concatenate([rng.normal(size=(200, 2)), 1e-4 * rng.normal(size=(50, 2))])
    q = rng.normal(size=qd.shape)
    f = model._friction_force(qd, q).numpy()
    assert np.all(np.sum(qd * f, axis=-1) <= 1e-15)


def test_forces_in_tensorflow_equal_numpy_and_inverse_dynamics_inverts_the_forward():
    model = _model("viscous+coulomb+offset+toy", damping=True)
    rng = np.random.default_rng(3)
    q, qd, qdd = rng.normal(size=(3, 7, 2))
    tau = model.inverse_dynamics(q, qd, qdd).numpy()
    np.testing.assert_allclose(model.acceleration(q, qd, tau).numpy(), qdd, atol=1e-10)
    snapshot = model.numpy_snapshot()
    np.testing.assert_allclose(snapshot.inverse_dynamics(q, qd, qdd), tau, atol=1e-10)
    np.testing.assert_allclose(snapshot.acceleration(q, qd, tau), qdd, atol=1e-10)
    # the forces are what separates inverse dynamics from the Lagrangian's own terms
    b = model.friction_parameters()
    expected = b["damping"] @ qd.T
    expected = expected.T + b["viscous"] * qd + b["coulomb"] * np.tanh(qd / model.friction_velocity) + b["offset"]
    expected = expected + b["toy"] * qd * np.abs(qd)
    np.testing.assert_allclose(-model._friction_force(qd).numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(model.friction(qd).numpy(), expected, atol=1e-12)


def test_a_force_registered_outside_the_package_trains_rolls_out_and_saves(tmp_path):
    model = _model("viscous+toy+toy-spring")
    rng = np.random.default_rng(4)
    q, qd, qdd = rng.normal(size=(3, 6, 2))
    expected = model.friction_parameters()["viscous"] * qd + model.friction_parameters()["toy"] * qd * np.abs(qd)
    expected = expected + np.asarray(model.toy_spring) * np.sin(q)
    np.testing.assert_allclose(model.friction(qd, q=q).numpy(), expected, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="'toy-spring' of this model depend on q"):
        model.friction(qd)
    # numpy path (the spring through the default twin) = TensorFlow
    tau = model.inverse_dynamics(q, qd, qdd).numpy()
    np.testing.assert_allclose(model.numpy_snapshot().inverse_dynamics(q, qd, qdd), tau, rtol=1e-12, atol=1e-12)
    # gradients reach the toy variables through the model's acceleration
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model((tf.constant(q), tf.constant(qd), tf.constant(tau))) ** 2)
    grads = tape.gradient(loss, [model.friction_toy, model.toy_spring])
    assert all(g is not None and np.all(np.isfinite(g)) and np.any(g.numpy() != 0) for g in grads)
    model.save(tmp_path / "toy.keras")
    loaded = lnn.load_model(tmp_path / "toy.keras")
    assert loaded.friction_terms == "viscous+toy+toy-spring"
    np.testing.assert_array_equal(loaded.inverse_dynamics(q, qd, qdd).numpy(), tau)


def test_linear_forces_give_least_squares_their_columns():
    rng = np.random.default_rng(5)
    q, qd = rng.normal(size=(2, 9, 2))
    v0 = 0.05
    model = _model("viscous+coulomb+offset+toy+network", damping=True, friction_velocity=v0)
    expected_basis = {
        "viscous": qd,
        "coulomb": np.tanh(qd / v0),
        "offset": np.ones_like(qd),
        "toy": qd * np.abs(qd),
    }
    nonnegative = {"viscous": True, "coulomb": True, "offset": False, "toy": True}
    linear = [term for term in model.forces if term.linear]
    assert [term.name for term in linear] == ["viscous", "coulomb", "offset", "toy"]
    assert not FORCES["damping"].linear and not FORCES["network"].linear
    for term in linear:
        basis = type(term).basis(q, qd, velocity=v0)
        assert basis.dtype == np.float64 and basis.shape == qd.shape
        np.testing.assert_allclose(basis, expected_basis[term.name], rtol=0, atol=1e-15)
        assert term.nonnegative is nonnegative[term.name]
        values = np.array([0.3, 1.7]) if term.nonnegative else np.array([-0.4, 0.9])
        term.assign(values)
        np.testing.assert_allclose(term.coefficients(), values, rtol=1e-12)
        # the torque the term costs at joint j is coefficient_j * basis[:, j]
        np.testing.assert_allclose(-term.force(tf.constant(q), tf.constant(qd)).numpy(), values * basis, rtol=1e-12)


# ----------------------------------------------------------------------------- refinements of Coulomb


REFINEMENTS = {  # name -> (features, its closed form: the bases (features, N, n) at v0)
    "stribeck": (
        3,
        lambda q, qd, v0: np.stack([np.exp(-((qd / vs) ** 2)) * np.tanh(qd / v0) for vs in (0.03, 0.1, 0.3)]),
    ),
    "position_coulomb": (
        4,
        lambda q, qd, v0: (
            np.stack([(1 + np.cos(q)) / 2, (1 - np.cos(q)) / 2, (1 + np.sin(q)) / 2, (1 - np.sin(q)) / 2])
            * np.tanh(qd / v0)
        ),
    ),
}


@pytest.mark.parametrize("name", list(REFINEMENTS))
def test_the_refinements_of_coulomb_are_linear_passive_and_twinned(name, tmp_path):
    """Stribeck and the position-dependent Coulomb level: several features per joint, each column with the
    sign of ``qd``, coefficients ``>= 0``; passive on 1e5 wide states, TF = numpy = the least-squares torque."""
    features, closed_form = REFINEMENTS[name]
    v0 = 0.02
    model = _model(f"viscous+{name}", friction_velocity=v0)
    term = next(t for t in model.forces if t.name == name)
    cls = type(term)
    assert cls.linear and cls.nonnegative and cls.dissipative and cls.refinement and cls.features == features
    assert cls.blocks() == tuple(f"{name}[{k}]" for k in range(features))
    rng = np.random.default_rng(21)
    k = rng.uniform(0.0, 2.0, (features, 2))
    term.assign(k)
    np.testing.assert_allclose(term.coefficients(), k, rtol=1e-12, atol=1e-12)
    q = rng.uniform(-2 * np.pi, 2 * np.pi, (WIDE_STATES, 2))
    qd = rng.uniform(-1.0, 1.0, (WIDE_STATES, 2)) * 10.0 ** rng.uniform(-6, 1, (WIDE_STATES, 1))
    bases = cls.bases(q, qd, velocity=v0)
    assert bases.shape == (features, WIDE_STATES, 2) and bases.dtype == np.float64
    np.testing.assert_allclose(bases, closed_form(q, qd, v0), rtol=0, atol=1e-15)
    with pytest.raises(TypeError, match=f"{features} features per joint"):
        cls.basis(q, qd, velocity=v0)
    f_tf = term.force(tf.constant(q), tf.constant(qd)).numpy()
    f_np = term.numpy(np.float64).force(q, qd)
    expected = -np.einsum("kj,knj->nj", k, bases)
    for f in (f_tf, f_np, -cls.torque(k, q, qd, velocity=v0)):
        np.testing.assert_allclose(f, expected, rtol=1e-12, atol=1e-14)
        assert np.all(qd * f <= 0.0)  # every joint, every state: passive
    total = -model.friction(qd, q=q).numpy()
    assert np.count_nonzero(np.sum(qd * total, axis=-1) > 1e-12) == 0
    model.save(tmp_path / "refined.keras")
    loaded = lnn.load_model(tmp_path / "refined.keras")
    again = next(t for t in loaded.forces if t.name == name)
    np.testing.assert_array_equal(again.coefficients(), term.coefficients())
    np.testing.assert_array_equal(loaded.friction(qd[:50], q=q[:50]).numpy(), model.friction(qd[:50], q=q[:50]).numpy())


def _never_gains_energy(model, seed):
    """Along the model's own unforced dynamics, dE/dt = qd . f <= 0 at every state of a wide sample.

    What a long rollout shows (the energy never rises), at every state at once: the power balance
    ``dE/dt = qd . f`` holds to rounding (the forces enter the dynamics as they should) and ``qd . f`` is
    never positive (they only dissipate). One long LSODA rollout keeps the integrated check (below).
    """
    rng = np.random.default_rng(seed)
    q = rng.uniform(-2 * np.pi, 2 * np.pi, (2000, 2))
    qd = rng.normal(0.0, 2.0, (2000, 2)) * 10.0 ** rng.uniform(-4, 0.5, (2000, 1))  # near rest to fast
    balance = model.power_balance(q, qd)
    scale = np.abs(balance.energy_rate).max()
    np.testing.assert_allclose(balance.energy_rate, balance.input_power, rtol=1e-7, atol=1e-9 * scale)
    assert np.all(balance.input_power <= 1e-12 * scale)
    assert np.all(balance.energy_rate <= 1e-9 * scale), balance.energy_rate.max()
    assert np.mean(balance.input_power < -1e-6 * scale) > 0.5  # and they do dissipate


def test_unforced_dynamics_with_the_refinements_never_gain_energy():
    model = _model("viscous+coulomb+stribeck+position_coulomb", friction_velocity=0.01)
    rng = np.random.default_rng(13)
    for term in model.forces:
        term.assign(rng.uniform(0.0, 0.3, np.shape(term.coefficients())))
    _never_gains_energy(model, seed=13)


# ----------------------------------------------------------------------------- the network force

WIDE_STATES = 100_000


def _network_model(kind, seed=0, scale=2.0, force="network", **options):
    n = 2
    if kind == "rigid-body":
        arm = simulations.PlanarArm(masses=(1.2, 0.6), lengths=(0.9, 0.7))
        options.update(prior=arm, residual=True)
    if kind == "kinetic-potential":
        options.update(convex=True)
    model = lnn.LagrangianNetwork(
        n,
        kind=kind,
        hidden=(8, 8),
        angular=True,
        friction=f"viscous+coulomb+{force}",
        damping=True,
        dtype="float64",
        seed=seed,
        xla=False,
        **options,
    )
    model.adapt(
        np.random.default_rng(seed).normal(size=(100, n)), np.random.default_rng(seed + 1).normal(size=(100, n))
    )
    _scale_up_network(model, seed + 2, scale, force)
    return model


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
@pytest.mark.parametrize("kind", ["structured", "kinetic-potential", "black-box", "rigid-body"])
def test_the_network_force_is_passive_at_every_state_of_a_wide_sample(kind, force):
    model = _network_model(kind, force=force)
    rng = np.random.default_rng(6)
    scale = 10.0 * np.asarray(model.qd_std)  # 10x the data scale, and some states near rest
    q = rng.uniform(-2 * np.pi, 2 * np.pi, (WIDE_STATES, 2))
    qd = rng.uniform(-1.0, 1.0, (WIDE_STATES, 2)) * scale * 10.0 ** rng.uniform(-6, 0, (WIDE_STATES, 1))
    network = next(term for term in model.forces if term.name == force)
    f_tf = network.force(tf.constant(q), tf.constant(qd)).numpy()
    f_np = network.numpy(np.float64).force(q, qd)
    total = -model.friction(qd, q=q).numpy()
    assert np.abs(f_tf).max() > 1.0  # the force matters at these weights
    for f in (f_tf, f_np, total):
        assert np.count_nonzero(np.sum(qd * f, axis=-1) > 1e-12) == 0
    for f in (f_tf, f_np):  # the network's power is <= 0 at every joint, exactly
        assert np.all(qd * f <= 0.0)
    np.testing.assert_allclose(f_np, f_tf, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
def test_the_network_force_starts_near_zero(force):
    model = lnn.LagrangianNetwork(
        2, friction=f"viscous+coulomb+{force}", hidden=(8,), angular=True, dtype="float64", seed=3, xla=False
    )
    rng = np.random.default_rng(7)
    q, qd = rng.normal(0.0, 3.0, (2, 500, 2))
    network = next(term for term in model.forces if term.name == force)
    f = network.force(tf.constant(q), tf.constant(qd)).numpy()
    assert np.abs(f).max() <= 1.0001e-3
    np.testing.assert_allclose(network.level(tf.constant(q), tf.constant(qd)).numpy(), 1e-3, rtol=1e-9)


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
@pytest.mark.parametrize("kind", ["structured", "rigid-body"])
def test_the_network_force_and_its_numpy_twin_agree_in_the_models_dynamics(kind, force):
    model = _network_model(kind, seed=1, force=force)
    rng = np.random.default_rng(8)
    q, qd, qdd = rng.normal(size=(3, 11, 2))
    tau = model.inverse_dynamics(q, qd, qdd).numpy()
    snapshot = model.numpy_snapshot()
    np.testing.assert_allclose(snapshot.inverse_dynamics(q, qd, qdd), tau, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(snapshot.acceleration(q, qd, tau), qdd, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.acceleration(q, qd, tau).numpy(), qdd, rtol=1e-9, atol=1e-9)
    # the parts still add up, with the network's friction in friction(qd, q=q)
    parts = (
        np.einsum("bij,bj->bi", model.mass_matrix(q, qd).numpy(), qdd)
        + model.coriolis(q, qd).numpy()
        + model.gravity(q).numpy()
        + model.friction(qd, q=q).numpy()
    )
    np.testing.assert_allclose(parts, tau, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match=f"'{force}' of this model depend on q"):
        model.friction(qd)
    balance = model.power_balance(q, qd, tau)
    np.testing.assert_allclose(balance.residual, 0.0, atol=1e-8)


def test_the_joint_network_force_of_a_joint_depends_on_that_joints_state_alone():
    model = _network_model("structured", seed=7, force="joint_network", scale=0.5)  # levels 0.1-2 N m
    joint = next(term for term in model.forces if term.name == "joint_network")
    rng = np.random.default_rng(13)
    q, qd = rng.normal(size=(2, 64, 2))
    f = joint.force(tf.constant(q), tf.constant(qd)).numpy()
    for j in range(2):
        other = 1 - j
        q_moved, qd_moved = q.copy(), qd.copy()
        q_moved[:, other] = rng.permutation(q[:, other])  # other states of the same range (inside the box)
        qd_moved[:, other] = -rng.permutation(qd[:, other])
        moved = joint.force(tf.constant(q_moved), tf.constant(qd_moved)).numpy()
        np.testing.assert_array_equal(moved[:, j], f[:, j])  # joint j feels nothing of the other joint
        assert np.abs(moved[:, other] - f[:, other]).max() > 1e-3  # but the other joint does
    # and a linear (not angular) coordinate enters through its scaled value
    linear = lnn.LagrangianNetwork(2, friction="joint_network", hidden=(8,), angular=False, dtype="float64", seed=1)
    linear.adapt(rng.normal(size=(100, 2)), rng.normal(size=(100, 2)))
    _scale_up_network(linear, 3, force="joint_network")
    term = next(term for term in linear.forces if term.name == "joint_network")
    np.testing.assert_allclose(
        term.numpy(np.float64).force(q, qd), term.force(tf.constant(q), tf.constant(qd)).numpy(), rtol=1e-12
    )


def test_the_joint_network_level_is_a_function_of_the_rate_plus_one_of_the_angle():
    """No interaction: at an angle and a rate never seen together the logit is what the rate gives at
    another angle plus the change along the angle at another rate (``y(a, v) + y(b, w) = y(a, w) + y(b, v)``)."""
    model = _network_model("structured", seed=8, force="joint_network", scale=0.5)
    joint = next(term for term in model.forces if term.name == "joint_network")
    rng = np.random.default_rng(17)
    q_a, q_b, qd_v, qd_w = rng.normal(size=(4, 32, 2))

    def logit(q, qd):
        return softplus_inverse(joint.level(tf.constant(q), tf.constant(qd)).numpy())

    both = logit(q_a, qd_v) + logit(q_b, qd_w)
    np.testing.assert_allclose(logit(q_a, qd_w) + logit(q_b, qd_v), both, rtol=1e-9, atol=1e-9)
    assert np.abs(logit(q_a, qd_w) - logit(q_a, qd_v)).max() > 1e-2  # both paths matter
    assert np.abs(logit(q_b, qd_v) - logit(q_a, qd_v)).max() > 1e-2


def test_the_training_box_is_the_range_of_the_data_and_a_full_turn_is_not_bounded():
    rng = np.random.default_rng(4)
    q = np.column_stack([rng.uniform(-1.0, 2.0, 200), rng.uniform(-4.0, 3.0, 200), rng.uniform(-4.0, 3.0, 200)])
    qd = rng.normal(size=(200, 3))
    box = TrainingBox.of(q, qd, angular=(True, True, False))
    np.testing.assert_array_equal(box.q_low, [q[:, 0].min(), -np.inf, q[:, 2].min()])  # 7 rad > 2 pi: a full turn
    np.testing.assert_array_equal(box.q_high, [q[:, 0].max(), np.inf, q[:, 2].max()])  # a linear one is bounded
    np.testing.assert_array_equal(box.qd_low, qd.min(axis=0))
    np.testing.assert_array_equal(box.qd_high, qd.max(axis=0))
    model = lnn.LagrangianNetwork(3, hidden=(8,), angular=(True, True, False), dtype="float64", seed=0)
    assert np.all(np.isinf(model.training_box().q_low)) and np.all(np.isinf(model.training_box().qd_high))
    assert all(np.all(np.isfinite(v.numpy())) for v in model.variables)  # stored as the largest finite numbers
    model.adapt(q, qd)
    for name in ("q_low", "q_high", "qd_low", "qd_high"):
        np.testing.assert_array_equal(getattr(model.training_box(), name), getattr(box, name))


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
def test_a_learned_force_holds_its_edge_value_beyond_the_training_states(force):
    """Beyond the box of the states the model adapted to (N(0, 1), 100 samples), the level is the edge's, in TF
    and in its numpy twin, and the force still opposes the true rate; inside, nothing is clipped."""
    model = _network_model("structured", seed=3, force=force)
    term = next(term for term in model.forces if term.name == force)
    box = model.training_box()
    rng = np.random.default_rng(21)
    q, qd = 4.0 * rng.normal(size=(2, 256, 2))
    outside = (q < box.q_low) | (q > box.q_high) | (qd < box.qd_low) | (qd > box.qd_high)
    assert outside.any(axis=1).mean() > 0.5
    level = term.level(tf.constant(q), tf.constant(qd)).numpy()
    edge = term.level(tf.constant(box.clip_q(q)), tf.constant(box.clip_qd(qd))).numpy()
    np.testing.assert_array_equal(level, edge)
    twin = term.numpy(np.float64)
    np.testing.assert_allclose(twin.level(q, qd), level, rtol=1e-12, atol=1e-300)
    f = term.force(tf.constant(q), tf.constant(qd)).numpy()
    np.testing.assert_allclose(twin.force(q, qd), f, rtol=1e-12, atol=1e-300)
    assert np.all(qd * f <= 0.0)
    unclipped = _network_model("structured", seed=3, force=force)
    for name in ("q_low", "q_high", "qd_low", "qd_high"):
        getattr(unclipped, name).assign(np.full(2, np.inf if name.endswith("high") else -np.inf))
    free = next(term for term in unclipped.forces if term.name == force)
    inside = ~outside.any(axis=1)
    np.testing.assert_array_equal(free.level(tf.constant(q), tf.constant(qd)).numpy()[inside], level[inside])
    assert not np.allclose(free.level(tf.constant(q), tf.constant(qd)).numpy(), level)


def test_a_file_saved_before_the_training_box_loads_with_none(tmp_path):
    """A .keras file as written before the box: the model's own weights without the last four. It loads with
    an unbounded box and predicts what it predicted then (its force unclipped)."""
    import zipfile

    h5py = pytest.importorskip("h5py")
    model = _network_model("structured", seed=5, force="joint_network")
    path, old = tmp_path / "new.keras", tmp_path / "old.keras"
    model.save(path)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.namelist():
            data = source.read(item)
            if item == "model.weights.h5":
                weights = tmp_path / "model.weights.h5"
                weights.write_bytes(data)
                with h5py.File(weights, "a") as file:
                    count = len(file["vars"].keys())
                    for k in range(count - 4, count):
                        del file[f"vars/{k}"]
                data = weights.read_bytes()
            target.writestr(item, data)
    loaded = lnn.load_model(old)
    assert np.all(np.isinf(loaded.training_box().q_low)) and np.all(np.isinf(loaded.training_box().qd_high))
    np.testing.assert_array_equal(lnn.load_model(path).training_box().qd_high, model.training_box().qd_high)
    rng = np.random.default_rng(2)
    q, qd, qdd = 3.0 * rng.normal(size=(3, 16, 2))
    for name in ("q_low", "q_high", "qd_low", "qd_high"):
        getattr(model, name).assign(np.full(2, np.inf if name.endswith("high") else -np.inf))
    np.testing.assert_allclose(loaded.inverse_dynamics(q, qd, qdd), model.inverse_dynamics(q, qd, qdd), rtol=1e-12)


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
def test_the_network_force_gradients_match_finite_differences(force):
    model = _network_model("structured", seed=2, force=force)
    network = next(term for term in model.forces if term.name == force)
    rng = np.random.default_rng(9)
    q, qd, w = rng.normal(size=(3, 5, 2))
    q, qd, w = (tf.constant(x) for x in (q, qd, w))
    variables = getattr(model, NETWORK_FORCES[force]).trainable_weights

    def objective(q, qd):
        return tf.reduce_sum(w * network.force(q, qd))

    with tf.GradientTape() as tape:
        tape.watch([q, qd])
        value = objective(q, qd)
    grads = tape.gradient(value, [q, qd, *variables])
    h = 1e-6
    for k, x in enumerate((q, qd)):  # inputs, along a random direction
        u = tf.constant(rng.normal(size=x.shape))
        args_plus, args_minus = [q, qd], [q, qd]
        args_plus[k], args_minus[k] = x + h * u, x - h * u
        fd = (objective(*args_plus) - objective(*args_minus)).numpy() / (2 * h)
        np.testing.assert_allclose(np.sum(grads[k].numpy() * u.numpy()), fd, rtol=1e-6, atol=1e-8)
    for var, grad in zip(variables, grads[2:]):  # every weight, along a random direction
        u = rng.normal(size=var.shape)
        base = var.numpy()
        var.assign(base + h * u)
        plus = objective(q, qd).numpy()
        var.assign(base - h * u)
        minus = objective(q, qd).numpy()
        var.assign(base)
        np.testing.assert_allclose(np.sum(grad.numpy() * u), (plus - minus) / (2 * h), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
def test_the_network_force_trains_under_xla_as_in_graph_mode(force):
    model = _network_model("structured", seed=3, force=force)
    rng = np.random.default_rng(10)
    q, qd, tau = (tf.constant(x) for x in rng.normal(size=(3, 16, 2)))

    def step(q, qd, tau):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model((q, qd, tau)) ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)

    graph_loss, graph_grads = tf.function(step)(q, qd, tau)
    xla_loss, xla_grads = tf.function(step, jit_compile=True)(q, qd, tau)
    np.testing.assert_allclose(xla_loss.numpy(), graph_loss.numpy(), rtol=1e-10)
    for a, b in zip(xla_grads, graph_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-8, atol=1e-12)
    names = [v.path for v, g in zip(model.trainable_variables, graph_grads) if g is not None]
    layer = {"network": "friction_network/", "joint_network": "joint_friction_network/"}[force]
    assert any(name.startswith(layer) for name in names)


@pytest.mark.parametrize("force", list(NETWORK_FORCES))
def test_the_network_force_saves_and_loads_bit_for_bit(tmp_path, force):
    model = _network_model("structured", seed=4, force=force)
    rng = np.random.default_rng(11)
    q, qd, qdd = rng.normal(size=(3, 7, 2))
    model.save(tmp_path / "network.keras")
    loaded = lnn.load_model(tmp_path / "network.keras")
    assert loaded.friction_terms == f"viscous+coulomb+{force}" and loaded.damping
    np.testing.assert_array_equal(loaded.friction(qd, q=q).numpy(), model.friction(qd, q=q).numpy())
    np.testing.assert_array_equal(
        loaded.inverse_dynamics(q, qd, qdd).numpy(), model.inverse_dynamics(q, qd, qdd).numpy()
    )
    np.testing.assert_array_equal(
        loaded.numpy_snapshot().acceleration(q, qd), model.numpy_snapshot().acceleration(q, qd)
    )


def test_verlet_carries_every_learned_force():
    """odeint's verlet adds the model's forces (not only the damping matrix) and agrees with rk4."""
    from lnn.odeint import odeint

    model = _network_model("structured", seed=5, scale=0.5, friction_velocity=0.5)
    q0, qd0 = np.array([[0.4, -0.3]]), np.array([[1.0, 0.5]])
    t = np.linspace(0.0, 1.0, 201)
    verlet = odeint(model, q0, qd0, t, method="verlet")
    rk4 = odeint(model, q0, qd0, t, method="rk4")
    np.testing.assert_allclose(verlet.q.numpy(), rk4.q.numpy(), rtol=0, atol=2e-4)
    free = lnn.LagrangianNetwork.from_config(dict(model.get_config(), friction=None, damping=False))
    mine = {var.path: var for var in model.variables}
    for var in free.variables:  # the same Lagrangian without the forces
        var.assign(mine[var.path])
    assert np.abs(odeint(free, q0, qd0, t, method="verlet").q.numpy() - verlet.q.numpy()).max() > 1e-2


@pytest.mark.parametrize(
    ("kind", "force"), [("structured", "network"), ("kinetic-potential", "network"), ("structured", "joint_network")]
)
def test_unforced_dynamics_with_the_network_force_never_gain_energy(kind, force):
    _never_gains_energy(_network_model(kind, seed=6, force=force), seed=12)


@pytest.mark.slow  # the integrated check: 100 s through sticking, which no state-wise check sees
def test_an_unforced_rollout_with_the_network_force_never_gains_energy():
    model = _network_model("structured", seed=6, force="network")
    rng = np.random.default_rng(12)
    q0 = rng.uniform(-np.pi, np.pi, (4, 2))
    qd0 = rng.normal(0.0, 2.0, (4, 2))
    t = np.linspace(0.0, 100.0, 2001)
    # Sticking (|qd| ~ v0 = 0.01 under gravity) is stiff: an explicit pair took > 1e5 steps, LSODA ~10 s.
    trajectory = lnn.rollout(model, q0, qd0, t, method="LSODA", rtol=1e-10, atol=1e-10)
    energy = np.asarray(trajectory.energy)
    gain = energy - np.minimum.accumulate(energy, axis=1)  # above the lowest energy reached so far
    tolerance = 1e-7 * np.abs(energy[:, :1]).max()
    assert gain.max() <= tolerance, gain.max()
    assert np.all(energy[:, -1] < energy[:, 0] - 1e-3)  # and the friction did dissipate
