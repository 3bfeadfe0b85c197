"""Classical identification (lnn.baseline.least_squares) against simulated robots with known answers."""

from __future__ import annotations

import numpy as np
import pytest

import lnn
import simulations
from lnn.baseline import (
    IdentifiedRobot,
    least_squares,
    log_cholesky_to_parameters,
    parameters_to_log_cholesky,
    physical_consistency,
    pseudo_inertia,
)
from simulations import Friction, Payload, PlanarArm, URDFRobot

pin = pytest.importorskip("pinocchio")
pytestmark = pytest.mark.robots

SEED = 16
PANDA_FRICTION = Friction(
    viscous=(0.3, 0.2, 0.25, 0.1, 0.05, 0.04, 0.02),
    coulomb=(0.5, 0.4, 0.3, 0.3, 0.1, 0.1, 0.05),
    offset=(0.1, -0.2, 0.05, 0.0, 0.02, -0.01, 0.03),
)
PAYLOAD = Payload(mass=0.8, com=(0.01, -0.02, 0.1), inertia=(1e-3, 0.0, 0.0, 1.5e-3, 0.0, 2e-3), frame="panda_hand")


def _dataset(q, qd, qdd, tau) -> lnn.Dataset:
    return lnn.Dataset(t=np.arange(len(q)) * 0.01, q=q, qd=qd, qdd=qdd, tau=tau, trajectory=np.zeros(len(q), dtype=int))


def _samples(system, size, seed=SEED):
    """Random states and accelerations with the system's exact torques (noise free)."""
    state = system.sample_state(size, rng=seed)
    qdd = np.random.default_rng(seed + 1).normal(size=state.q.shape)
    return state.q, state.qd, qdd, system.inverse_dynamics(state.q, state.qd, qdd)


def _true_parameters(model, friction: Friction, n: int) -> np.ndarray:
    """The parameter vector in least_squares' layout (links, viscous, coulomb, offset)."""
    links = np.concatenate([model.inertias[i].toDynamicParameters() for i in range(1, model.njoints)])
    per_joint = [
        np.broadcast_to(np.asarray(getattr(friction, k), float), (n,)) for k in ("viscous", "coulomb", "offset")
    ]
    return np.concatenate([links, *per_joint])


# ----------------------------------------------------------------- the Panda
@pytest.fixture(scope="module")
def panda_case():
    try:
        truth = simulations.panda(friction=PANDA_FRICTION, payload=PAYLOAD)
        nominal = simulations.panda()
    except ImportError as exc:
        pytest.skip(str(exc))
    q, qd, qdd, tau = _samples(truth, 250)
    return truth, nominal, least_squares(_dataset(q, qd, qdd, tau), nominal)


def test_panda_base_parameters_recovered_exactly(panda_case):
    truth, nominal, ident = panda_case
    assert isinstance(ident, lnn.MechanicalSystem) and isinstance(ident, IdentifiedRobot)
    expected = ident.base_projection @ _true_parameters(truth.pinocchio_model, PANDA_FRICTION, 7)
    assert ident.statistics.rank == ident.statistics.data_rank == len(ident.base_parameters)
    # 7 x 10 link parameters, 43 identifiable combinations (joint 1 vertical), plus 3 x 7 friction terms.
    assert ident.base_projection.shape == (43 + 21, 70 + 21)
    np.testing.assert_allclose(ident.base_parameters, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    np.testing.assert_allclose(ident.friction.viscous, PANDA_FRICTION.viscous, atol=1e-9)
    np.testing.assert_allclose(ident.friction.coulomb, PANDA_FRICTION.coulomb, atol=1e-9)
    np.testing.assert_allclose(ident.friction.offset, PANDA_FRICTION.offset, atol=1e-9)
    assert ident.statistics.mse.max() < 1e-20 and np.all(ident.statistics.r_squared > 1 - 1e-12)
    # The payload is identified too: the last link's base parameters differ from the nominal robot's.
    nominal_base = ident.base_projection @ _true_parameters(nominal.pinocchio_model, PANDA_FRICTION, 7)
    assert np.abs(nominal_base - expected).max() > 0.05


def test_panda_identified_robot_reproduces_the_dynamics(panda_case):
    truth, _, ident = panda_case
    q, qd, qdd, tau = _samples(truth, 20, seed=SEED + 10)
    np.testing.assert_allclose(ident.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-9 * np.abs(tau).max())
    np.testing.assert_allclose(ident.acceleration(q, qd, tau), qdd, rtol=0, atol=1e-7)
    np.testing.assert_allclose(ident.mass_matrix(q), truth.mass_matrix(q), rtol=0, atol=1e-9)
    # Energies agree up to a constant (the potential of an unidentifiable mass along the gravity axis).
    difference = ident.energy(q, qd) - truth.energy(q, qd)
    assert np.ptp(difference) < 1e-9 * np.abs(truth.energy(q, qd)).max()
    assert ident.inverse_dynamics(q[0], qd[0], qdd[0]).shape == (7,)
    assert ident.energy(q.reshape(4, 5, 7), qd.reshape(4, 5, 7)).shape == (4, 5)


def test_panda_physical_fit_is_consistent_and_exact(panda_case):
    truth, nominal, plain = panda_case
    q, qd, qdd, tau = _samples(truth, 250)
    ident = least_squares(_dataset(q, qd, qdd, tau), nominal, physical=True, regularization=1e-12)
    assert ident.statistics.success
    report = ident.physical_consistency()
    assert report.all and np.all(report.mass > 0) and np.all(report.triangle_margin >= -1e-12)
    assert not plain.physical_consistency().all  # the plain fit's nearest-to-nominal links are not all physical
    np.testing.assert_allclose(
        ident.base_parameters, plain.base_parameters, rtol=0, atol=1e-6 * np.abs(plain.base_parameters).max()
    )
    q, qd, qdd, tau = _samples(truth, 20, seed=SEED + 10)
    np.testing.assert_allclose(ident.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-6 * np.abs(tau).max())
    np.testing.assert_allclose(ident.acceleration(q, qd, tau), qdd, rtol=0, atol=1e-4)
    assert np.all(np.sum(qd * ident.friction.force(qd), axis=-1) <= 0)


# -------------------------------------------------------- a planar arm URDF
def _link(name, mass, length):
    """A rod of radius length / 20: m l^2 / 12 about the joint axis (y) as PlanarArm's, never a thin line."""
    inertia, axial = mass * length**2 / 12, mass * (length / 20) ** 2 / 2
    return f"""
  <link name="{name}">
    <inertial>
      <origin xyz="0 0 {-length / 2!r}" rpy="0 0 0"/>
      <mass value="{mass!r}"/>
      <inertia ixx="{inertia!r}" ixy="0" ixz="0" iyy="{inertia!r}" iyz="0" izz="{axial!r}"/>
    </inertial>
  </link>"""


def _arm_urdf(path, masses, lengths, *, world=False):
    """A planar arm hanging along -z, axes -y (the layout of PlanarArm); ``world``: a Drake-style weld."""
    parts = ['<?xml version="1.0"?>', '<robot name="planar_arm">', '  <link name="base"/>']
    if world:
        parts.append('  <joint name="weld" type="fixed"><parent link="world"/><child link="base"/></joint>')
    parent, offset = "base", 0.0
    for i, (m, l) in enumerate(zip(masses, lengths)):
        parts.append(_link(f"link{i + 1}", m, l))
        parts.append(f"""
  <joint name="joint{i + 1}" type="revolute">
    <parent link="{parent}"/><child link="link{i + 1}"/>
    <origin xyz="0 0 {-offset!r}" rpy="0 0 0"/><axis xyz="0 -1 0"/>
    <limit lower="-3.14" upper="3.14" effort="100" velocity="10"/>
  </joint>""")
        parent, offset = f"link{i + 1}", l
    parts.append("</robot>")
    path.write_text("\n".join(parts))
    return path


MASSES, LENGTHS = (1.2, 0.8, 0.5), (1.0, 0.6, 0.4)
ARM_FRICTION = Friction(viscous=(0.2, 0.1, 0.05), coulomb=(0.3, 0.2, 0.1), offset=(0.05, -0.03, 0.02))


@pytest.fixture(scope="module")
def arm_case(tmp_path_factory):
    """Truth: the closed-form PlanarArm with friction; prior: a URDF of the same arm with wrong masses."""
    folder = tmp_path_factory.mktemp("arms")
    truth = PlanarArm(masses=MASSES, lengths=LENGTHS, friction=ARM_FRICTION)
    exact = URDFRobot.from_urdf(_arm_urdf(folder / "exact.urdf", MASSES, LENGTHS))
    prior = URDFRobot.from_urdf(_arm_urdf(folder / "prior.urdf", (2.0, 0.5, 1.0), LENGTHS))
    data = _dataset(*_samples(truth, 200))
    return truth, exact, prior, data


def test_planar_arm_base_parameters_recovered_exactly(arm_case):
    truth, exact, prior, data = arm_case
    ident = least_squares(data, prior)
    expected = ident.base_projection @ _true_parameters(exact.pinocchio_model, ARM_FRICTION, 3)
    assert ident.statistics.rank == 3 * 3 + 9  # planar chain: 3 base parameters per link
    np.testing.assert_allclose(ident.base_parameters, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    q, qd, qdd, tau = _samples(truth, 30, seed=SEED + 20)
    np.testing.assert_allclose(ident.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ident.acceleration(q, qd, tau), qdd, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ident.mass_matrix(q), truth.mass_matrix(q), rtol=0, atol=1e-10)


def test_identified_robot_rolls_out_like_the_truth(arm_case):
    """Without friction (whose smooth Coulomb term is stiff), a short rollout of both systems."""
    _, _, prior, _ = arm_case
    truth = PlanarArm(masses=MASSES, lengths=LENGTHS)
    ident = least_squares(_dataset(*_samples(truth, 100)), prior, friction=None)
    q, qd, _, _ = _samples(truth, 2, seed=SEED + 50)
    t = np.linspace(0.0, 0.5, 11)
    rollout, reference = lnn.rollout(ident, q, qd, t), lnn.rollout(truth, q, qd, t)
    np.testing.assert_allclose(rollout.q, reference.q, atol=1e-6)
    np.testing.assert_allclose(
        rollout.energy - rollout.energy[:, :1], reference.energy - reference.energy[:, :1], atol=1e-6
    )


@pytest.mark.parametrize("friction, columns", [(None, 0), ("viscous", 6), ("coulomb", 6), ("viscous+coulomb", 9)])
def test_friction_options_choose_the_columns(arm_case, friction, columns):
    truth, _, prior, data = arm_case
    ident = least_squares(data, prior, friction=friction)
    assert ident.statistics.rank == 9 + columns
    assert (ident.friction is None) == (friction is None)
    if friction == "viscous+coulomb":
        assert ident.statistics.mse.max() < 1e-20
    else:  # a missing term leaves a residual
        assert ident.statistics.mse.max() > 1e-6
    offset_only = least_squares(data, prior, friction=None, offset=True)
    assert offset_only.statistics.rank == 9 + 3


def test_armature_is_identified(arm_case, tmp_path):
    truth, exact, prior, _ = arm_case
    armature = np.array([0.0, 0.03, 0.01])
    model = pin.Model(exact.pinocchio_model)
    model.armature = armature
    data_pin = model.createData()
    q, qd, qdd, _ = _samples(truth, 150)
    tau = np.array([pin.rnea(model, data_pin, a, b, c) for a, b, c in zip(q, qd, qdd)])
    tau = tau + ARM_FRICTION.torque(qd)
    ident = least_squares(_dataset(q, qd, qdd, tau), prior, armature=True)
    assert ident.statistics.mse.max() < 1e-20
    # Joint 1's rotor inertia adds to link 1's inertia about the same axis; the others are identifiable.
    np.testing.assert_allclose(ident.armature[1:], armature[1:], atol=1e-9)
    np.testing.assert_allclose(ident.inverse_dynamics(q, qd, qdd), tau, atol=1e-10)


def test_weights_do_not_change_an_exact_fit(arm_case):
    _, _, prior, data = arm_case
    plain = least_squares(data, prior)
    weighted = least_squares(data, prior, torque_std=(0.1, 0.05, 0.01))
    np.testing.assert_allclose(weighted.base_parameters, plain.base_parameters, rtol=1e-9, atol=1e-12)


def test_noisy_fit_is_unbiased_within_its_noise(arm_case):
    truth, exact, prior, data = arm_case
    rng = np.random.default_rng(SEED)
    noisy = _dataset(data.q, data.qd, data.qdd, data.tau + rng.normal(0.0, 0.01, data.tau.shape))
    ident = least_squares(noisy, prior)
    expected = ident.base_projection @ _true_parameters(exact.pinocchio_model, ARM_FRICTION, 3)
    assert np.abs(ident.base_parameters - expected).max() < 0.01
    np.testing.assert_allclose(ident.statistics.rmse, 0.01, rtol=0.2)


# ------------------------------------------------------- physical consistency
def test_physical_fit_is_consistent_and_exact_on_consistent_data(arm_case):
    truth, _, prior, data = arm_case
    ident = least_squares(data, prior, physical=True, regularization=1e-12)
    assert ident.physical and ident.statistics.success
    report = ident.physical_consistency()
    assert report.all and np.all(report.mass > 0) and np.all(report.pseudo_inertia_eigenvalue > 0)
    assert np.all(report.triangle_margin >= -1e-12)
    assert np.all(ident.friction.viscous >= 0) and np.all(ident.friction.coulomb >= 0)
    q, qd, qdd, tau = _samples(truth, 30, seed=SEED + 30)
    np.testing.assert_allclose(ident.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-6 * np.abs(tau).max())
    np.testing.assert_allclose(ident.acceleration(q, qd, tau), qdd, rtol=0, atol=1e-5)
    force = ident.friction.force(qd)
    assert np.all(np.sum(qd * force, axis=-1) <= 0)


def test_physical_fit_keeps_bodies_physical_where_plain_least_squares_does_not(arm_case):
    """Noisy torques from few samples: the plain fit's nearest-to-prior links are not all physical."""
    truth, _, prior, _ = arm_case
    q, qd, qdd, tau = _samples(truth, 40, seed=SEED + 40)
    rng = np.random.default_rng(SEED + 41)
    noisy = _dataset(q, qd, qdd, tau + rng.normal(0.0, 0.3, tau.shape))
    plain = least_squares(noisy, prior)
    physical = least_squares(noisy, prior, physical=True)
    assert not plain.physical_consistency().all
    report = physical.physical_consistency()
    assert report.all and np.all(report.triangle_margin >= -1e-12)
    assert np.all(physical.friction.viscous >= 0) and np.all(physical.friction.coulomb >= 0)
    # Its fit is close to the unconstrained optimum.
    assert physical.statistics.mse.mean() < 1.5 * plain.statistics.mse.mean()


def test_indefinite_mass_matrix_is_reported(arm_case, tmp_path):
    """Torques of a non-physical arm (a link with negative inertia): the plain fit says so."""
    truth, exact, prior, _ = arm_case
    model = pin.Model(exact.pinocchio_model)
    theta = model.inertias[3].toDynamicParameters()
    theta[6] = -1.0  # I_yy about the joint axis: M[2, 2] < 0
    model.inertias[3] = pin.Inertia.FromDynamicParameters(theta)
    data_pin = model.createData()
    q, qd, qdd, _ = _samples(truth, 100)
    tau = np.array([pin.rnea(model, data_pin, a, b, c) for a, b, c in zip(q, qd, qdd)])
    ident = least_squares(_dataset(q, qd, qdd, tau), prior, friction=None)
    np.testing.assert_allclose(ident.inverse_dynamics(q, qd, qdd), tau, atol=1e-10)
    assert not ident.physical_consistency().all
    with pytest.raises(
        lnn.baseline.NonPhysicalMassMatrixError, match=r"mass matrix is not positive definite .*physical=True"
    ):
        ident.acceleration(q[:3], qd[:3])


# ------------------------------------------------------------- log-Cholesky
def test_log_cholesky_round_trip_jacobian_and_consistency():
    rng = np.random.default_rng(SEED)
    eta = 0.5 * rng.normal(size=(6, 10))
    theta, jac = log_cholesky_to_parameters(eta, jacobian=True)
    assert physical_consistency(theta).all
    np.testing.assert_allclose(parameters_to_log_cholesky(theta), eta, atol=1e-10)
    h = 1e-6
    numeric = np.stack(
        [
            (log_cholesky_to_parameters(eta + h * e) - log_cholesky_to_parameters(eta - h * e)) / (2 * h)
            for e in np.eye(10)
        ],
        axis=-1,
    )
    np.testing.assert_allclose(jac, numeric, rtol=0, atol=1e-8 * np.abs(jac).max())
    inertia = pin.Inertia.Random()
    np.testing.assert_allclose(pseudo_inertia(inertia.toDynamicParameters()), inertia.toPseudoInertia(), atol=1e-14)
    moments = np.linalg.eigvalsh(inertia.inertia)
    np.testing.assert_allclose(
        physical_consistency(inertia.toDynamicParameters()).principal_moments[0], moments, atol=1e-12
    )


# ------------------------------------------------------------------ bad input
def test_bad_input_is_named(arm_case):
    _, _, prior, data = arm_case
    zero = _dataset(data.q, data.qd, data.qdd, np.zeros_like(data.tau))
    with pytest.raises(ValueError, match=r"dataset\.tau is all zero"):
        least_squares(zero, prior)

    class NoTorques:
        q, qd, qdd, tau = data.q, data.qd, data.qdd, None

    with pytest.raises(ValueError, match=r"dataset\.tau is missing"):
        least_squares(NoTorques(), prior)
    with pytest.raises(ValueError, match=r"friction must be None or terms joined by .*got 'hysteresis'"):
        least_squares(data, prior, friction="hysteresis")
    with pytest.raises(ValueError, match=r"friction_velocity must be a finite number > 0.*got 0"):
        least_squares(data, prior, friction_velocity=0)
    with pytest.raises(TypeError, match=r"robot must be a simulations.URDFRobot .*got PlanarArm"):
        least_squares(data, PlanarArm())
    with pytest.raises(ValueError, match=r"dataset\.q must have shape \(N, 2\) .*got shape \(200, 3\)"):
        least_squares(data, URDFRobot.from_urdf(prior.path, locked_joints=("joint3",)))
    with pytest.raises(ValueError, match=r"torque_std must be finite and > 0"):
        least_squares(data, prior, torque_std=(1.0, 0.0, 1.0))


def test_without_pinocchio_the_error_names_the_extra(arm_case, monkeypatch):
    _, _, prior, data = arm_case
    prior.pinocchio_model  # parsed before Pinocchio disappears
    monkeypatch.setitem(__import__("sys").modules, "pinocchio", None)
    with pytest.raises(ImportError, match=r"least_squares needs Pinocchio .*pip install 'lnn\[robots\]'"):
        least_squares(data, prior)
