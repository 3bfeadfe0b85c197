"""Systems against Pinocchio: models built in the test, URDF files written in the test, the Panda."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import simulations
from simulations import DoublePendulum, PlanarArm, URDFRobot

pin = pytest.importorskip("pinocchio")
pytestmark = pytest.mark.robots

SEED = 99
MINUS_Y = np.array([0.0, -1.0, 0.0])  # rotating about -y maps the hanging link -z to (sin q, 0, -cos q)


def _chain_model(masses, lengths, *, rods, axis=MINUS_Y):
    """A planar chain hanging along -z in the x-z plane, gravity -z, relative joint angles."""
    model = pin.Model()
    parent, placement = 0, pin.SE3.Identity()
    for i, (m, l) in enumerate(zip(masses, lengths)):
        joint = model.addJoint(parent, pin.JointModelRevoluteUnaligned(axis), placement, f"joint{i}")
        if rods:  # uniform rod: centre at -l/2, m l^2 / 12 about the axes normal to the rod
            inertia = pin.Inertia(m, np.array([0.0, 0.0, -l / 2]), np.diag([m * l**2 / 12, m * l**2 / 12, 0.0]))
        else:  # point mass at the end of a massless rod
            inertia = pin.Inertia(m, np.array([0.0, 0.0, -l]), np.zeros((3, 3)))
        model.appendBodyToJoint(joint, inertia, pin.SE3.Identity())
        parent, placement = joint, pin.SE3(np.eye(3), np.array([0.0, 0.0, -l]))
    return model


def _pinocchio_dynamics(model, q, qd, tau):
    """Per-sample M (symmetrised crba), qdd (aba), energy and joint origins of a pinocchio model."""
    data = model.createData()
    out = {"M": [], "qdd": [], "E": [], "points": []}
    for qi, vi, ti in zip(q, qd, tau):
        upper = np.triu(pin.crba(model, data, qi))
        out["M"].append(upper + np.triu(upper, 1).T)
        out["qdd"].append(pin.aba(model, data, qi, vi, ti).copy())
        out["E"].append(pin.computeKineticEnergy(model, data, qi, vi) + pin.computePotentialEnergy(model, data, qi))
        pin.forwardKinematics(model, data, qi)
        out["points"].append([data.oMi[j].translation.copy() for j in range(model.njoints)])
    return {k: np.array(v) for k, v in out.items()}


def _states(system, size=30):
    state = system.sample_state(size, rng=SEED)
    return state.q, state.qd, np.random.default_rng(SEED).normal(0, 3, (size, system.n_dof))


def test_double_pendulum_matches_pinocchio():
    masses, lengths = (1.3, 0.7), (0.9, 1.4)
    system = DoublePendulum(m1=masses[0], m2=masses[1], l1=lengths[0], l2=lengths[1])
    theta, thetad, tau = _states(system)
    # Pinocchio's joints are relative: q_rel = (theta1, theta2 - theta1). The
    # generalized forces transform with the transpose: tau_rel = (tau1 + tau2, tau2).
    q_rel = np.stack([theta[:, 0], theta[:, 1] - theta[:, 0]], -1)
    qd_rel = np.stack([thetad[:, 0], thetad[:, 1] - thetad[:, 0]], -1)
    tau_rel = np.stack([tau[:, 0] + tau[:, 1], tau[:, 1]], -1)
    ref = _pinocchio_dynamics(_chain_model(masses, lengths, rods=False), q_rel, qd_rel, tau_rel)
    qdd = np.cumsum(ref["qdd"], axis=-1)  # theta = S q_rel with S lower-triangular ones
    s_inv = np.array([[1.0, 0.0], [-1.0, 1.0]])
    mass = s_inv.T @ ref["M"] @ s_inv
    np.testing.assert_allclose(system.mass_matrix(theta), mass, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(system.acceleration(theta, thetad, tau), qdd, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(system.energy(theta, thetad), ref["E"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(system.positions(theta)[:, :2], ref["points"][:, 1:, [0, 2]], atol=1e-12)


@pytest.mark.parametrize("n, axis", [(2, MINUS_Y), (3, MINUS_Y), (3, np.array([0.0, 1.0, 0.0]))])
def test_planar_arm_matches_pinocchio(n, axis):
    rng = np.random.default_rng(n)
    masses, lengths = tuple(rng.uniform(0.5, 2.0, n)), tuple(rng.uniform(0.3, 1.2, n))
    arm = PlanarArm(masses=masses, lengths=lengths)
    q, qd, tau = _states(arm)
    ref = _pinocchio_dynamics(_chain_model(masses, lengths, rods=True, axis=axis), q, qd, tau)
    # A mirror image (axis +y) has the same M, qdd and energy.
    np.testing.assert_allclose(arm.mass_matrix(q), ref["M"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(arm.acceleration(q, qd, tau), ref["qdd"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(arm.energy(q, qd), ref["E"], rtol=1e-10, atol=1e-10)
    if axis[1] < 0:
        np.testing.assert_allclose(arm.positions(q)[:, :n], ref["points"][:, 1:, [0, 2]], atol=1e-12)


def _link(name, mass, length):
    inertia = mass * length**2 / 12
    return f"""
  <link name="{name}">
    <inertial>
      <origin xyz="0 0 {-length / 2!r}" rpy="0 0 0"/>
      <mass value="{mass!r}"/>
      <inertia ixx="{inertia!r}" ixy="0" ixz="0" iyy="{inertia!r}" iyz="0" izz="0"/>
    </inertial>
  </link>"""


def _joint(name, parent, child, offset, kind="revolute"):
    limit = '<limit lower="-3.14" upper="3.14" effort="100" velocity="10"/>' if kind == "revolute" else ""
    return f"""
  <joint name="{name}" type="{kind}">
    <parent link="{parent}"/>
    <child link="{child}"/>
    <origin xyz="0 0 {-offset!r}" rpy="0 0 0"/>
    <axis xyz="0 -1 0"/>
    {limit}
  </joint>"""


def _arm_urdf(path, masses, lengths, *, kinds=None):
    kinds = kinds or ["revolute"] * len(masses)
    parts = ['<?xml version="1.0"?>', '<robot name="planar_arm">', '  <link name="base"/>']
    parent, offset = "base", 0.0
    for i, (m, l) in enumerate(zip(masses, lengths)):
        parts.append(_link(f"link{i + 1}", m, l))
        parts.append(_joint(f"joint{i + 1}", parent, f"link{i + 1}", offset, kinds[i]))
        parent, offset = f"link{i + 1}", l
    parts.append("</robot>")
    path.write_text("\n".join(parts))
    return path


def test_two_link_urdf_equals_planar_arm(tmp_path):
    masses, lengths = (1.2, 0.8), (1.0, 0.6)
    robot = URDFRobot.from_urdf(_arm_urdf(tmp_path / "arm.urdf", masses, lengths))
    arm = PlanarArm(masses=masses, lengths=lengths)
    assert robot.n_dof == 2 and robot.angular == (True, True)
    assert robot.joint_names == ("joint1", "joint2")
    q, qd, tau = _states(arm)
    np.testing.assert_allclose(robot.mass_matrix(q), arm.mass_matrix(q), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(robot.acceleration(q, qd, tau), arm.acceleration(q, qd, tau), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        robot.inverse_dynamics(q, qd, tau), arm.inverse_dynamics(q, qd, tau), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(robot.energy(q, qd), arm.energy(q, qd), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(robot.potential_energy(q), arm.potential_energy(q), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        robot.acceleration_jacobian(q, qd, tau), arm.acceleration_jacobian(q, qd, tau), rtol=1e-6, atol=1e-6
    )
    points = robot.positions(q)
    assert points.shape == (30, 3, 3)  # base, joint1, joint2 origins
    np.testing.assert_allclose(points[:, 1:, [0, 2]], arm.positions(q)[:, :2], atol=1e-12)
    np.testing.assert_allclose(points[:, :, 1], 0.0, atol=1e-12)
    # Gravity is a parameter.
    moon = URDFRobot.from_urdf(robot.path, gravity=(0.0, 0.0, -1.62))
    np.testing.assert_allclose(
        moon.acceleration(q, qd, tau),
        PlanarArm(masses=masses, lengths=lengths, g=1.62).acceleration(q, qd, tau),
        rtol=1e-10,
        atol=1e-10,
    )
    # Parameters rebuild the robot; the cached model is not part of equality.
    params = robot.parameters()
    assert json.loads(json.dumps(params)) == params
    assert URDFRobot(**params) == robot and hash(URDFRobot(**params)) == hash(robot)


def test_locked_joint_gives_the_sub_dynamics(tmp_path):
    masses, lengths = (1.0, 0.7, 0.4), (0.8, 0.6, 0.5)
    path = _arm_urdf(tmp_path / "arm3.urdf", masses, lengths)
    robot = URDFRobot.from_urdf(path, locked_joints=("joint3",))
    full = PlanarArm(masses=masses, lengths=lengths)
    assert robot.n_dof == 2 and robot.joint_names == ("joint1", "joint2")
    q, qd, _ = _states(robot)
    q3, qd3 = np.concatenate([q, np.zeros((30, 1))], -1), np.concatenate([qd, np.zeros((30, 1))], -1)
    np.testing.assert_allclose(robot.mass_matrix(q), full.mass_matrix(q3)[:, :2, :2], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(robot.bias_force(q, qd), full.bias_force(q3, qd3)[:, :2], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(robot.energy(q, qd), full.energy(q3, qd3), rtol=1e-10, atol=1e-10)


def test_urdf_errors_name_the_problem(tmp_path):
    path = _arm_urdf(tmp_path / "arm.urdf", (1.0, 1.0), (1.0, 1.0))
    with pytest.raises(
        ValueError,
        match=r"locked_joints \['elbow'\] not in .*arm.urdf; its joints are "
        r"\['joint1', 'joint2'\]",
    ):
        URDFRobot.from_urdf(path, locked_joints=("elbow",))
    continuous = _arm_urdf(tmp_path / "wheel.urdf", (1.0,), (1.0,), kinds=["continuous"])
    with pytest.raises(
        ValueError,
        match=r"only revolute and prismatic joints are supported.*wheel.urdf has 'joint1' "
        r"\(JointModelRevoluteUnboundedUnaligned, nq=2, nv=1\)",
    ):
        URDFRobot.from_urdf(continuous)
    garbage = tmp_path / "garbage.urdf"
    garbage.write_text("this is not xml")
    with pytest.raises(ValueError, match=r"cannot read URDF file .*garbage.urdf"):
        URDFRobot.from_urdf(garbage)
    with pytest.raises(ValueError, match=r"gravity must be a 3-vector; got \(0.0, -9.81\)"):
        URDFRobot(path=str(path), gravity=(0.0, -9.81))
    robot = URDFRobot.from_urdf(path)
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 2\) for urdf .*got shape \(4, 7\)"):
        robot.mass_matrix(np.zeros((4, 7)))
    with pytest.raises(ValueError, match=r"qd contains NaN"):
        robot.acceleration(np.zeros(2), np.array([0.0, np.nan]))


@pytest.fixture(scope="module")
def panda():
    try:
        return simulations.panda()
    except ImportError as exc:  # example-robot-data not installed
        pytest.skip(str(exc))


def test_panda_model(panda):
    assert panda.name == "panda" and panda.n_dof == 7 and all(panda.angular)
    assert panda.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    params = panda.parameters()
    assert "path" not in params and params["locked_joints"] == ["panda_finger_joint1", "panda_finger_joint2"]
    assert simulations.make_system("panda", **params) == panda
    state = panda.sample_state(100, rng=SEED)
    lower, upper = panda.position_limits
    assert np.all((state.q > lower) & (state.q < upper))
    mass = panda.mass_matrix(state.q)
    np.testing.assert_array_equal(mass, np.swapaxes(mass, -1, -2))
    assert np.linalg.eigvalsh(mass).min() > 0
    points = panda.positions(state.q[:3])
    assert points.shape == (3, 8, 3)
    np.testing.assert_array_equal(points[:, 0], 0.0)
    np.testing.assert_allclose(panda.positions(np.zeros(7))[1], [0.0, 0.0, 0.333], atol=1e-12)  # panda_joint1 height


def test_panda_dynamics_are_consistent(panda):
    q, qd, tau = _states(panda, size=10)
    qdd = panda.acceleration(q, qd, tau)
    np.testing.assert_allclose(panda.inverse_dynamics(q, qd, qdd), tau, rtol=1e-9, atol=1e-9)
    bias = panda.bias_force(q, qd)
    np.testing.assert_allclose(
        np.linalg.solve(panda.mass_matrix(q), (tau - bias)[..., None])[..., 0], qdd, rtol=1e-9, atol=1e-9
    )
    jac = panda.acceleration_jacobian(q[:3], qd[:3], tau[:3])
    assert jac.shape == (3, 7, 14)
    x, h = np.concatenate([q[:3], qd[:3]], -1), 1e-6
    for j in range(14):
        xp, xm = x.copy(), x.copy()
        xp[:, j] += h
        xm[:, j] -= h
        column = (
            panda.acceleration(xp[:, :7], xp[:, 7:], tau[:3]) - panda.acceleration(xm[:, :7], xm[:, 7:], tau[:3])
        ) / (2 * h)
        np.testing.assert_allclose(jac[:, :, j], column, rtol=1e-5, atol=1e-5 * np.abs(jac).max())


def test_panda_rollout_conserves_energy(panda):
    state = panda.sample_state(1, rng=SEED, velocity_scale=0.5)

    def rhs(_t, y):
        return np.concatenate([y[7:], panda.acceleration(y[:7], y[7:])])

    sol = solve_ivp(
        rhs,
        (0.0, 1.5),
        np.concatenate([state.q[0], state.qd[0]]),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=np.linspace(0.0, 1.5, 31),
    )
    assert sol.success, sol.message
    q, qd = sol.y[:7].T, sol.y[7:].T
    energy = panda.energy(q, qd)
    scale = max(abs(energy[0]), panda.kinetic_energy(q, qd).max())
    assert np.abs(energy - energy[0]).max() / scale < 1e-8
    assert np.ptp(panda.potential_energy(q)) > 1.0  # the arm really fell and exchanged energy


# ------------------------------------------------------- friction and payload
def test_urdf_friction_and_its_exact_jacobian(tmp_path):
    friction = simulations.Friction(viscous=(0.2, 0.1), coulomb=(0.3, 0.2), offset=(0.05, -0.02), velocity=0.2)
    path = _arm_urdf(tmp_path / "arm.urdf", (1.2, 0.8), (1.0, 0.6))
    robot = URDFRobot.from_urdf(path, friction=friction)
    arm = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), friction=friction)
    q, qd, tau = _states(arm)
    np.testing.assert_allclose(
        robot.inverse_dynamics(q, qd, tau), arm.inverse_dynamics(q, qd, tau), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(robot.acceleration(q, qd, tau), arm.acceleration(q, qd, tau), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(robot.bias_force(q, qd), robot.inverse_dynamics(q, qd, np.zeros_like(q)), atol=1e-12)
    np.testing.assert_allclose(
        robot.acceleration_jacobian(q, qd, tau), arm.acceleration_jacobian(q, qd, tau), rtol=1e-6, atol=1e-6
    )
    params = robot.parameters()
    assert json.loads(json.dumps(params)) == params and URDFRobot(**params) == robot
    with pytest.raises(ValueError, match=r"friction has 3 per-joint coefficients but urdf robot .*n_dof=2"):
        URDFRobot.from_urdf(path, friction=simulations.Friction(coulomb=(0.1, 0.1, 0.1)))


def test_panda_payload_is_a_rigid_body_on_the_hand(panda):
    payload = simulations.Payload(
        mass=0.8, com=(0.01, 0.0, 0.1), inertia=(1e-3, 0.0, 0.0, 1e-3, 0.0, 2e-3), frame="panda_hand"
    )
    loaded = simulations.panda(payload=payload)
    # Reference: the same body appended by hand at the hand frame's placement.
    reference = pin.Model(panda.pinocchio_model)
    frame = reference.frames[reference.getFrameId("panda_hand")]
    body = pin.Inertia(0.8, np.array([0.01, 0.0, 0.1]), np.diag([1e-3, 1e-3, 2e-3]))
    reference.inertias[frame.parentJoint] = reference.inertias[frame.parentJoint] + frame.placement.act(body)
    total = sum(reference.inertias[i].mass for i in range(1, reference.njoints))
    assert sum(loaded.pinocchio_model.inertias[i].mass for i in range(1, 8)) == pytest.approx(total, rel=1e-14)
    assert total == pytest.approx(sum(panda.pinocchio_model.inertias[i].mass for i in range(1, 8)) + 0.8)
    q, qd, tau = _states(panda, size=5)
    data = reference.createData()
    expected = np.array([pin.rnea(reference, data, a, b, c) for a, b, c in zip(q, qd, tau)])
    np.testing.assert_allclose(loaded.inverse_dynamics(q, qd, tau), expected, rtol=1e-10, atol=1e-10)
    assert np.abs(loaded.inverse_dynamics(q, qd, tau) - panda.inverse_dynamics(q, qd, tau)).max() > 0.1
    params = loaded.parameters()
    assert json.loads(json.dumps(params)) == params and simulations.make_system("panda", **params) == loaded
    # The default frame is the last joint's.
    at_joint = simulations.panda(payload=simulations.Payload(mass=0.8))
    assert at_joint.pinocchio_model.inertias[7].mass == pytest.approx(panda.pinocchio_model.inertias[7].mass + 0.8)
    with pytest.raises(ValueError, match=r"payload frame 'gripper' is not a frame of .*panda.urdf"):
        simulations.panda(payload=simulations.Payload(mass=1.0, frame="gripper"))
    with pytest.raises(ValueError, match=r"Payload.mass must be a finite number > 0; got -1"):
        simulations.Payload(mass=-1)
    with pytest.raises(ValueError, match=r"Payload.inertia must be positive semi-definite"):
        simulations.Payload(mass=1.0, inertia=(-1.0, 0.0, 0.0, 1.0, 0.0, 1.0))


def test_pinocchio_model_is_the_parsed_model(panda):
    model = panda.pinocchio_model
    assert model is panda.pinocchio_model and model.nv == panda.n_dof == 7
    assert tuple(model.names[1:]) == panda.joint_names
    np.testing.assert_array_equal(model.gravity.linear, [0.0, 0.0, -9.81])


# ------------------------------------------------------ undefined world link
def test_undefined_world_link_is_explained_and_can_be_added(tmp_path):
    source = _arm_urdf(tmp_path / "arm.urdf", (1.2, 0.8), (1.0, 0.6)).read_text()
    drake = tmp_path / "drake.urdf"
    drake.write_text(
        source.replace(
            '<link name="base"/>',
            '<link name="base"/>\n  <joint name="weld" type="fixed"><parent link="world"/><child link="base"/></joint>',
        )
    )
    assert simulations.undefined_links(drake) == ("world",)
    assert simulations.undefined_links(tmp_path / "arm.urdf") == ()
    with pytest.raises(
        ValueError,
        match=r"URDF file .*drake.urdf names the link\(s\) 'world' .*never defines them"
        r".*add <link name=\"world\"/> .*missing_links='add'",
    ):
        URDFRobot.from_urdf(drake)
    robot = URDFRobot.from_urdf(drake, missing_links="add")
    reference = URDFRobot.from_urdf(tmp_path / "arm.urdf")
    assert robot.n_dof == 2 and robot.joint_names == ("joint1", "joint2")
    q, qd, tau = _states(reference)
    np.testing.assert_allclose(robot.acceleration(q, qd, tau), reference.acceleration(q, qd, tau), atol=1e-12)
    assert robot.parameters()["missing_links"] == "add" and URDFRobot(**robot.parameters()) == robot
    assert drake.read_text().count("<link") == source.count("<link")  # the file is not changed
    with pytest.raises(ValueError, match=r"missing_links must be one of \('error', 'add'\); got 'ignore'"):
        URDFRobot(path=str(drake), missing_links="ignore")


DFKI_URDF = (
    __import__("pathlib").Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "dfki_double_pendulum"
    / "double_pendulum.urdf"
)


@pytest.mark.skipif(not DFKI_URDF.is_file(), reason="the shared DFKI data are not beside the repository")
def test_dfki_double_pendulum_urdf():
    with pytest.raises(ValueError, match=r"double_pendulum.urdf names the link\(s\) 'world'"):
        URDFRobot.from_urdf(DFKI_URDF)
    robot = URDFRobot.from_urdf(DFKI_URDF, missing_links="add")
    assert robot.n_dof == 2 and robot.joint_names == ("Joint1", "Joint2") and robot.angular == (True, True)
    # Hanging down at q = 0 (gravity -z, links along -z): no gravity torque there, the least potential energy.
    np.testing.assert_allclose(robot.bias_force(np.zeros(2), np.zeros(2)), 0.0, atol=1e-3)
    angles = np.linspace(-np.pi, np.pi, 73)
    grid = np.stack(np.meshgrid(angles, angles), -1).reshape(-1, 2)
    assert np.allclose(grid[np.argmin(robot.potential_energy(grid))], 0.0, atol=0.09)
    # Swinging joint 1 by +pi/2 raises the arm: gravity torque (bias) positive, of m g r size.
    assert 0.5 < robot.bias_force(np.array([np.pi / 2, 0.0]), np.zeros(2))[0] < 5.0
