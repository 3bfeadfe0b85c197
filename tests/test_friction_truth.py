"""Ground-truth friction outside the linear family (``simulations.StribeckFriction``) and the systems that carry it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import simulations
from simulations import Friction, PlanarArm, StribeckFriction, URDFRobot
from simulations.friction import as_friction

SEED = 20250301

# Three joints: a strong Stribeck peak, a friction that rises with speed (static below Coulomb), extreme terms.
STRIBECK = StribeckFriction(
    viscous=(0.1, 0.0, 0.2),
    coulomb=(0.3, 0.5, 0.2),
    static=(0.45, 0.3, 0.2),
    stribeck_velocity=(0.1, 0.05, 0.2),
    asymmetry=(0.2, -0.15, 1.0),
    modulation=(0.25, -0.1, 1.0),
    phase=(0.3, -1.0, 2.0),
    offset=(0.05, -0.1, 0.0),
    velocity=0.02,
)


def _states(n, size, seed=SEED, qd_scale=0.3):
    """Angles uniform in [-pi, pi), rates that visit the Stribeck region and beyond."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-np.pi, np.pi, (size, n))
    qd = qd_scale * rng.standard_normal((size, n)) * rng.choice([0.1, 1.0, 10.0], size=(size, n))
    return q, qd, rng.normal(0.0, 2.0, (size, n))


def _reference(friction, q, qd):
    """The class docstring's formula, written out joint by joint with ``math``."""
    out = np.empty_like(qd)
    for k in range(qd.shape[0]):
        for j in range(qd.shape[1]):
            b, c, s, vs, a, p, phi, o = (
                getattr(friction, name)[j]
                for name in ("viscous", "coulomb", "static", "stribeck_velocity")
                + ("asymmetry", "modulation", "phase", "offset")
            )
            v = qd[k, j]
            sign = math.tanh(v / friction.velocity)
            level = c + (s - c) * math.exp(-((v / vs) ** 2))
            out[k, j] = level * (1 + a * sign) * (1 + p * math.cos(q[k, j] + phi)) * sign + b * v + o
    return out


# ------------------------------------------------------------------ the model
def test_closed_form_at_chosen_states():
    f = STRIBECK
    # At rest: only the offset.
    np.testing.assert_array_equal(f.torque(np.zeros(3), q=np.ones(3)), [0.05, -0.1, 0.0])
    # Far above the Stribeck velocity, at the modulation's crest q = -phi: (1 + a)(1 + p) c + b qd + o.
    qd, q = np.full(3, 5.0), -np.array(f.phase)
    expected = (1 + np.array(f.asymmetry)) * (1 + np.array(f.modulation)) * np.array(f.coulomb)
    expected = expected + 5.0 * np.array(f.viscous) + np.array(f.offset)
    np.testing.assert_allclose(f.torque(qd, q=q), expected, rtol=1e-12)
    # Negative rates at the trough q = pi - phi: -(1 - a)(1 - p) c - b |qd| + o (joint 3's a = p = 1: only viscous).
    low = -(1 - np.array(f.asymmetry)) * (1 - np.array(f.modulation)) * np.array(f.coulomb)
    np.testing.assert_allclose(
        f.torque(-qd, q=np.pi - np.array(f.phase)),
        low - 5.0 * np.array(f.viscous) + np.array(f.offset),
        rtol=1e-12,
        atol=1e-15,
    )
    # At qd = vs, where the Stribeck curve is e^-1 of the way from c to s.
    q, qd, _ = _states(3, 40)
    qd[0] = f.stribeck_velocity
    np.testing.assert_allclose(f.torque(qd, q=q), _reference(f, q, qd), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(f.force(qd, q=q), -(_reference(f, q, qd) - np.array(f.offset)), rtol=1e-13, atol=1e-15)


def test_defaults_reduce_to_the_linear_friction():
    linear = Friction(viscous=(0.1, 0.3), coulomb=(0.2, 0.4), offset=(0.01, -0.02), velocity=0.05)
    stribeck = StribeckFriction(viscous=(0.1, 0.3), coulomb=(0.2, 0.4), offset=(0.01, -0.02), velocity=0.05)
    assert stribeck.static == (0.2, 0.4)
    q, qd, _ = _states(2, 50)
    np.testing.assert_allclose(stribeck.torque(qd, q=q), linear.torque(qd), rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(stribeck.torque_derivative(qd, q=q), linear.torque_derivative(qd), rtol=1e-14)
    np.testing.assert_array_equal(stribeck.position_derivative(qd, q=q), np.zeros_like(qd))
    # The linear friction takes q (ignored) so that systems call both alike.
    np.testing.assert_array_equal(linear.torque(qd, q=q), linear.torque(qd))
    np.testing.assert_array_equal(linear.position_derivative(qd, q=q), np.zeros_like(qd))


def test_derivatives_against_central_differences():
    f = STRIBECK
    q, qd, _ = _states(3, 200)
    h = 1e-6
    dqd = (f.torque(qd + h, q=q) - f.torque(qd - h, q=q)) / (2 * h)
    dq = (f.torque(qd, q=q + h) - f.torque(qd, q=q - h)) / (2 * h)
    np.testing.assert_allclose(f.torque_derivative(qd, q=q), dqd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f.position_derivative(qd, q=q), dq, rtol=1e-6, atol=1e-8)
    assert np.any(f.torque_derivative(qd, q=q) < 0)  # the falling Stribeck branch is really visited
    assert np.abs(dq).max() > 0.05


@pytest.mark.parametrize("extreme", [False, True])
def test_friction_is_passive_on_random_states(extreme):
    rng = np.random.default_rng(SEED + extreme)
    n = 7
    if extreme:  # every bound reached: |a| = |p| = 1, static far below and above Coulomb, no viscous part
        f = StribeckFriction(
            coulomb=(0.0, 0.5, 0.5, 2.0, 0.3, 0.0, 1.0),
            static=(1.0, 0.0, 5.0, 0.1, 0.3, 0.0, 1.0),
            stribeck_velocity=(1e-3, 0.05, 0.1, 1.0, 0.2, 0.1, 10.0),
            asymmetry=(1.0, -1.0, 0.5, -0.5, 1.0, 0.0, -1.0),
            modulation=(1.0, -1.0, 1.0, 0.3, -0.7, 0.0, 1.0),
            phase=(0.0, 1.0, -2.0, 3.0, 0.5, 0.0, 1.5),
            offset=5.0,
            velocity=1e-3,
        )
    else:
        f = StribeckFriction(
            viscous=rng.uniform(0, 0.3, n),
            coulomb=rng.uniform(0, 1, n),
            static=rng.uniform(0, 2, n),
            stribeck_velocity=rng.uniform(0.01, 0.5, n),
            asymmetry=rng.uniform(-1, 1, n),
            modulation=rng.uniform(-1, 1, n),
            phase=rng.uniform(-np.pi, np.pi, n),
            offset=rng.normal(0, 1, n),
        )
    q = rng.uniform(-10, 10, (100_000, n))
    qd = rng.standard_normal((100_000, n)) * 10.0 ** rng.uniform(-4, 1, (100_000, n))
    power = np.sum(qd * f.force(qd, q=q), axis=-1)
    assert power.max() <= 0.0
    assert np.all(qd * f.force(qd, q=q) <= 0.0)  # joint by joint, too
    assert power.min() < -1.0


def test_parameters_round_trip():
    params = STRIBECK.parameters()
    assert json.loads(json.dumps(params)) == params
    assert StribeckFriction(**params) == STRIBECK
    rebuilt = as_friction(params)
    assert isinstance(rebuilt, StribeckFriction) and rebuilt == STRIBECK
    # A dict of the linear model's keys stays a linear friction; one Stribeck key makes a StribeckFriction.
    assert isinstance(as_friction({"viscous": 0.1, "coulomb": 0.2}), Friction)
    assert as_friction({"coulomb": 0.2, "static": 0.3}) == StribeckFriction(coulomb=0.2, static=0.3)
    assert as_friction(STRIBECK) is STRIBECK and STRIBECK.n_joints == 3
    scalar = StribeckFriction(coulomb=0.2)
    assert scalar.n_joints is None and scalar.parameters()["static"] == 0.2
    assert StribeckFriction(**scalar.parameters()) == scalar


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(coulomb=-0.1), ValueError, r"StribeckFriction.coulomb must be >= 0 .*got -0.1"),
        (dict(static=(0.1, -0.2)), ValueError, r"StribeckFriction.static must be >= 0 .*got \(0.1, -0.2\)"),
        (dict(stribeck_velocity=0.0), ValueError, r"StribeckFriction.stribeck_velocity must be > 0; got 0.0"),
        (dict(asymmetry=1.5), ValueError, r"StribeckFriction.asymmetry must lie in \[-1, 1\] .*got 1.5"),
        (dict(modulation=(0.1, -2.0)), ValueError, r"StribeckFriction.modulation must lie in \[-1, 1\]"),
        (dict(phase=float("inf")), ValueError, r"StribeckFriction.phase must be finite"),
        (dict(velocity=-1.0), ValueError, r"StribeckFriction.velocity must be a finite number > 0; got -1.0"),
        (dict(coulomb=(0.1, 0.2), phase=(0.0, 0.1, 0.2)), ValueError, r"one length; got lengths"),
        (dict(viscous="0.1"), TypeError, r"StribeckFriction.viscous must be a number or a sequence"),
    ],
)
def test_bad_stribeck_friction_is_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        StribeckFriction(**kwargs)


def test_bad_calls_are_named():
    with pytest.raises(ValueError, match=r"StribeckFriction.torque needs the joint positions q"):
        STRIBECK.torque(np.zeros(3))
    with pytest.raises(ValueError, match=r"StribeckFriction.torque_derivative: qd of shape \(4, 3\) and q of shape"):
        STRIBECK.torque_derivative(np.zeros((4, 3)), q=np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"friction has 3 per-joint coefficients but planar-arm has n_dof=2"):
        PlanarArm(friction=STRIBECK)
    with pytest.raises(TypeError, match=r"friction has unknown keys \['stiction'\]"):
        PlanarArm(friction={"coulomb": 0.1, "stiction": 0.1})


# ------------------------------------------------------------ in the systems
def _two_joints():
    return StribeckFriction(
        viscous=(0.1, 0.05),
        coulomb=(0.3, 0.2),
        static=(0.45, 0.3),
        stribeck_velocity=(0.1, 0.05),
        asymmetry=(0.15, -0.1),
        modulation=(0.2, 0.3),
        phase=(0.5, -0.4),
        offset=(0.02, -0.03),
        velocity=0.02,
    )


def test_planar_arm_with_stribeck_friction():
    friction = _two_joints()
    arm = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), friction=friction)
    bare = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6))
    q, qd, qdd = _states(2, 60)
    tau = arm.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(tau, bare.inverse_dynamics(q, qd, qdd) + _reference(friction, q, qd), rtol=1e-12)
    np.testing.assert_allclose(arm.acceleration(q, qd, tau), qdd, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(arm.bias_force(q, qd), arm.inverse_dynamics(q, qd, np.zeros_like(q)), atol=1e-13)
    params = arm.parameters()
    assert json.loads(json.dumps(params)) == params
    assert simulations.make_system("planar-arm", **params) == arm


def test_unforced_planar_arm_with_stribeck_friction_loses_energy():
    friction = StribeckFriction(coulomb=0.2, static=0.3, stribeck_velocity=0.1, asymmetry=0.2, modulation=0.5)
    arm = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), friction=friction)

    def rhs(_t, y):
        return np.concatenate([y[2:], arm.acceleration(y[:2], y[2:])])

    t = np.linspace(0.0, 5.0, 501)
    sol = solve_ivp(rhs, (0.0, 5.0), [1.5, -0.5, 0.0, 1.0], method="LSODA", rtol=1e-10, atol=1e-12, t_eval=t)
    assert sol.success, sol.message
    energy = arm.energy(sol.y[:2].T, sol.y[2:].T)
    assert np.diff(energy).max() <= 1e-8 * abs(energy[0])
    assert energy[-1] < energy[0] - 1.0


# ---------------------------------------------------------- URDF robots
def _arm_urdf(path, masses, lengths):
    """A planar arm of uniform rods hanging along -z, joints about -y (PlanarArm's conventions)."""
    parts = ['<?xml version="1.0"?>', '<robot name="planar_arm">', '  <link name="base"/>']
    parent, offset = "base", 0.0
    for i, (m, l) in enumerate(zip(masses, lengths)):
        inertia = m * l**2 / 12
        parts.append(
            f'<link name="link{i + 1}"><inertial><origin xyz="0 0 {-l / 2!r}" rpy="0 0 0"/>'
            f'<mass value="{m!r}"/><inertia ixx="{inertia!r}" ixy="0" ixz="0" iyy="{inertia!r}" iyz="0" izz="0"/>'
            f"</inertial></link>"
        )
        parts.append(
            f'<joint name="joint{i + 1}" type="revolute"><parent link="{parent}"/><child link="link{i + 1}"/>'
            f'<origin xyz="0 0 {-offset!r}" rpy="0 0 0"/><axis xyz="0 -1 0"/>'
            f'<limit lower="-3.14" upper="3.14" effort="100" velocity="10"/></joint>'
        )
        parent, offset = f"link{i + 1}", l
    parts.append("</robot>")
    path.write_text("\n".join(parts))
    return path


def _central_jacobian(system, q, qd, tau, h=1e-6):
    """``d qdd / d [q, qd]`` by central differences, column by column."""
    n = q.shape[-1]
    columns = []
    for k in range(2 * n):
        step = np.zeros(2 * n)
        step[k] = h
        plus = system.acceleration(q + step[:n], qd + step[n:], tau)
        minus = system.acceleration(q - step[:n], qd - step[n:], tau)
        columns.append((plus - minus) / (2 * h))
    return np.stack(columns, axis=-1)


@pytest.mark.robots
def test_urdf_robot_with_stribeck_friction(tmp_path):
    pytest.importorskip("pinocchio")
    friction = _two_joints()
    path = _arm_urdf(tmp_path / "arm.urdf", (1.2, 0.8), (1.0, 0.6))
    robot = URDFRobot.from_urdf(path, friction=friction)
    rigid = URDFRobot.from_urdf(path)
    q, qd, qdd = _states(2, 40)
    tau = robot.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(tau, rigid.inverse_dynamics(q, qd, qdd) + _reference(friction, q, qd), rtol=1e-11)
    np.testing.assert_allclose(robot.acceleration(q, qd, tau), qdd, rtol=1e-9, atol=1e-9)
    arm = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), friction=friction)
    np.testing.assert_allclose(robot.acceleration(q, qd, tau), arm.acceleration(q, qd, tau), rtol=1e-9, atol=1e-9)
    jacobian = robot.acceleration_jacobian(q, qd, tau)
    np.testing.assert_allclose(jacobian, _central_jacobian(robot, q, qd, tau), rtol=1e-6, atol=1e-5)
    # The position term exactly: d qdd / d q gains -M^-1 diag(d tau_f / d q) over the rigid body's at equal net torque.
    position_term = jacobian[..., :2] - rigid.acceleration_jacobian(q, qd, tau - friction.torque(qd, q=q))[..., :2]
    expected = -np.linalg.inv(robot.mass_matrix(q)) * friction.position_derivative(qd, q=q)[:, None, :]
    np.testing.assert_allclose(position_term, expected, rtol=1e-9, atol=1e-12)
    assert np.abs(expected).max() > 0.01
    params = robot.parameters()
    assert json.loads(json.dumps(params)) == params and URDFRobot(**params) == robot
    assert isinstance(URDFRobot(**params).friction, StribeckFriction)


@pytest.mark.robots
def test_panda_with_stribeck_friction_and_payload():
    pytest.importorskip("pinocchio")
    try:
        nominal = simulations.panda()
    except ImportError as exc:  # example-robot-data not installed
        pytest.skip(str(exc))
    friction = StribeckFriction(
        viscous=0.1, coulomb=0.4, static=0.55, stribeck_velocity=0.1, asymmetry=0.15, modulation=0.2, velocity=0.01
    )
    payload = simulations.Payload(mass=0.8, com=(0.0, 0.0, 0.1))
    truth = simulations.panda(friction=friction, payload=payload)
    loaded = simulations.panda(payload=payload)
    state = truth.sample_state(4, rng=SEED, velocity_scale=0.3)
    qdd = np.random.default_rng(SEED).normal(size=(4, 7))
    tau = truth.inverse_dynamics(state.q, state.qd, qdd)
    np.testing.assert_allclose(
        tau, loaded.inverse_dynamics(state.q, state.qd, qdd) + friction.torque(state.qd, q=state.q), rtol=1e-12
    )
    assert np.abs(tau - nominal.inverse_dynamics(state.q, state.qd, qdd)).max() > 0.5
    np.testing.assert_allclose(truth.acceleration(state.q, state.qd, tau), qdd, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(
        truth.acceleration_jacobian(state.q, state.qd, tau),
        _central_jacobian(truth, state.q, state.qd, tau),
        rtol=1e-5,
        atol=1e-4,
    )
    params = truth.parameters()
    assert json.loads(json.dumps(params)) == params and simulations.make_system("panda", **params) == truth
