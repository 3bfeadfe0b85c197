"""Kind "trigonometric": closed forms against the nested tapes and numpy, exactness on planar chains,
the regressor against the model's own inverse dynamics, saving, and identify without a prior."""

from __future__ import annotations

import numpy as np
import pytest

import lnn
import simulations
from lnn import mechanics
from lnn.models import LagrangianNetwork
from lnn.models.trigonometric import MAX_PARAMETERS, Basis, choose_basis

from conftest import random_states, record_returns

ANGULAR = (True, False, True)


def _model(angular=ANGULAR, *, residual=False, harmonics=None, seed=3):
    """A float64 model with random parameters and a mass matrix that is positive definite on the test states."""
    model = LagrangianNetwork(
        len(angular),
        kind="trigonometric",
        angular=angular,
        residual=residual,
        harmonics=harmonics,
        dtype="float64",
        seed=seed,
        xla=False,
    )
    basis = model.kind_model.basis
    theta, beta = basis.split(np.random.default_rng(seed).normal(0.0, 0.1, basis.n_parameters))
    rows, cols = basis.pairs
    theta[rows == cols, 0] += 4.0  # a dominant constant diagonal
    model.kind_model.assign(np.concatenate([theta.reshape(-1), beta]))
    return model


@pytest.mark.parametrize("residual", [False, True])
def test_closed_form_equals_nested_tapes_and_numpy(residual):
    """M, qdd, tau and E of the closed form = nested tapes of the kind's energies (= numpy twin), float64."""
    model = _model(residual=residual)
    q, qd, tau = random_states(3, 9, 1)
    lagrangian = model.kind_model.tape_lagrangian()
    mass = model.mass_matrix(q, qd).numpy()
    assert np.linalg.eigvalsh(mass).min() > 0
    qdd = model.acceleration(q, qd, tau).numpy()
    energy = model.energy(q, qd).numpy()
    np.testing.assert_allclose(mechanics.mass_matrix(lagrangian, q, qd).numpy(), mass, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mechanics.acceleration(lagrangian, q, qd, tau).numpy(), qdd, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(mechanics.energy(lagrangian, q, qd).numpy(), energy, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.inverse_dynamics(q, qd, qdd).numpy(), tau, rtol=1e-9, atol=1e-9)
    snapshot = model.numpy_snapshot()
    assert (snapshot.mechanics is None) == residual  # the residual's networks run in TensorFlow
    np.testing.assert_allclose(snapshot.acceleration(q, qd, tau), qdd, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(snapshot.mass_matrix(q, qd), mass, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(snapshot.energy(q, qd), energy, rtol=1e-10, atol=1e-12)


def test_the_regressor_is_the_models_inverse_dynamics():
    model = _model()
    q, qd, qdd = random_states(3, 11, 2)
    Y = model.kind_model.regressor(q, qd, qdd)
    assert Y.shape == (11, 3, model.kind_model.basis.n_parameters)
    expected = model.inverse_dynamics(q, qd, qdd).numpy()
    np.testing.assert_allclose(Y @ model.kind_model.parameters(), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "system",
    [
        simulations.DoublePendulum(m1=1.3, m2=0.7, l1=0.9, l2=0.6, g=9.81),
        simulations.PlanarArm(masses=(1.0, 0.8), lengths=(0.6, 0.5)),
        simulations.CartPole(),
    ],
    ids=lambda s: s.name,
)
def test_least_squares_on_the_basis_is_exact_for_planar_chains(system):
    """No kinematics given: the torques of planar chains (and the cart-pole) lie in the regressor's span."""
    state = system.sample_state(300, rng=0)
    qdd = np.random.default_rng(1).normal(0.0, 2.0, state.q.shape)
    tau = system.inverse_dynamics(state.q, state.qd, qdd)
    basis = Basis.of(system.angular)
    Y = basis.regressor(state.q, state.qd, qdd)
    z, *_ = np.linalg.lstsq(Y.reshape(-1, Y.shape[-1]), tau.reshape(-1), rcond=None)
    np.testing.assert_allclose(Y @ z, tau, atol=1e-9 * np.abs(tau).max())
    model = LagrangianNetwork(system.n_dof, kind="trigonometric", angular=system.angular, dtype="float64", xla=False)
    model.kind_model.assign(z)
    other = system.sample_state(20, rng=2)  # states the fit never saw
    np.testing.assert_allclose(model.mass_matrix(other.q).numpy(), system.mass_matrix(other.q), atol=1e-9)
    np.testing.assert_allclose(
        model.acceleration(other.q, other.qd).numpy(), system.acceleration(other.q, other.qd), rtol=1e-7, atol=1e-8
    )


def test_the_default_basis_keeps_the_parameters_bounded():
    chosen = [choose_basis((True,) * n) for n in range(1, 8)]
    assert chosen == [(2, 1), (2, 2), (2, 3), (1, 4), (1, 2), (1, 1), (1, 1)]
    for n, (harmonics, order) in zip(range(1, 8), chosen):
        basis = Basis.of((True,) * n)
        assert basis.n_parameters <= MAX_PARAMETERS and (basis.harmonics, basis.order) == (harmonics, order)
        assert len(basis.codes) == len({tuple(c) for c in basis.codes})  # no function twice
        assert np.all(basis.codes[0] == 0) and np.all(np.count_nonzero(basis.codes, axis=1) <= basis.order)
    assert Basis.of((True, True)).size == 25  # {1, cos, sin, cos 2q, sin 2q}^2
    assert Basis.of((True, True), harmonics=1).size == 9  # {1, cos, sin}^2
    assert Basis.of((False, True)).size == 15  # {1, x, x^2} x {1, cos, sin, cos 2q, sin 2q}
    with pytest.raises(ValueError, match="order must be in 1..2"):
        Basis.of((True, True), order=3)
    with pytest.raises(ValueError, match="harmonics must be 1 or 2"):
        Basis.of((True, True), harmonics=3)
    with pytest.raises(ValueError, match="expected 99 parameters"):
        Basis.of((True, True)).split(np.zeros(3))


@pytest.mark.parametrize("residual, harmonics", [(False, None), (True, None), (False, 1)])
def test_saved_and_loaded_bit_for_bit(tmp_path, residual, harmonics):
    model = _model(residual=residual, harmonics=harmonics)
    q, qd, qdd = random_states(3, 5, 4)
    path = tmp_path / "trigonometric.keras"
    model.save(path)
    loaded = lnn.load_model(path)
    assert loaded.kind == "trigonometric" and loaded.kind_model.residual == residual
    assert loaded.kind_model.basis.harmonics == model.kind_model.basis.harmonics == (harmonics or 2)
    np.testing.assert_array_equal(loaded.inverse_dynamics(q, qd, qdd).numpy(), model.inverse_dynamics(q, qd, qdd))


def test_residual_and_harmonics_are_refused_by_kinds_without_them():
    with pytest.raises(ValueError, match="residual= applies to kind"):
        LagrangianNetwork(2, kind="black-box", residual=True)
    with pytest.raises(ValueError, match="harmonics= applies to kind 'trigonometric' only"):
        LagrangianNetwork(2, kind="structured", harmonics=1)
    with pytest.raises(ValueError, match="harmonics must be 1 or 2"):
        LagrangianNetwork(2, kind="trigonometric", harmonics=3)


def test_identify_without_a_prior_fits_the_trigonometric_lagrangian_and_its_residual_stages(
    tmp_path, capsys, monkeypatch
):
    """A planar arm with viscous and Coulomb friction, no URDF: the linear stage alone is exact to the noise.

    Run through ``lnn identify`` (one identification for what this test and the CLI's test checked): the verb
    writes the chosen model, a trigonometric Lagrangian with the fitted friction, and never overwrites it.
    """
    from lnn import identification
    from lnn.cli import main

    true = simulations.PlanarArm(
        masses=(1.0, 0.8),
        lengths=(0.6, 0.5),
        friction=simulations.Friction(viscous=(0.05, 0.03), coulomb=(0.1, 0.08)),
    )
    data = lnn.generate(true, n_trajectories=6, duration=2.0, dt=0.01, seed=0, tau="gravity-sinusoids")
    test = lnn.generate(true, n_trajectories=2, duration=2.0, dt=0.01, seed=1, tau="gravity-sinusoids")
    runs = record_returns(monkeypatch, identification, "identify")  # the models the verb's lnn.identify returns
    path = tmp_path / "data.npz"
    data.save(path)
    out = tmp_path / "model.keras"
    # a fixed amount of work (epochs, not a wall-time budget): the stages trained do not depend on the load
    assert main(["identify", str(path), "-o", str(out), "--epochs", "20"]) == 0  # = lnn.identify(data, epochs=20)
    printed = capsys.readouterr().out
    assert "trigonometric" in printed and "residual" in printed and out.exists()
    (model,) = runs
    names = [s.name for s in model.report.stages]
    assert names[0] == "trigonometric" and "residual" in names
    assert "1 harmonics" in model.report.stages[0].detail  # two were worse on these few short logs
    linear = model.candidates["trigonometric"]
    assert linear.kind == "trigonometric" and set(linear.friction_terms.split("+")) >= {"viscous", "coulomb"}
    pred = np.asarray(linear.inverse_dynamics(test.q, test.qd, test.qdd))
    assert np.mean((pred - test.tau) ** 2) < 1e-8 * np.mean(test.tau**2)
    friction = linear.friction_parameters()
    np.testing.assert_allclose(friction["viscous"], [0.05, 0.03], atol=1e-4)
    np.testing.assert_allclose(friction["coulomb"], [0.1, 0.08], atol=1e-4)
    chosen = np.asarray(model.inverse_dynamics(test.q, test.qd, test.qdd))
    assert np.mean((chosen - test.tau) ** 2) < 1e-4 * np.mean(test.tau**2)
    # the model written
    loaded = lnn.load_model(out)
    assert loaded.kind == "trigonometric"  # no URDF: the trigonometric Lagrangian in the rigid body's place
    assert loaded.friction_terms.startswith("viscous+coulomb")  # the default linear forces, fitted
    assert main(["identify", str(path), "-o", str(out), "--epochs", "1"]) != 0
    assert "refusing to overwrite" in capsys.readouterr().err
    # --time-limit only to check that it is refused beside --epochs (before any training: no clock decides)
    assert main(["identify", str(path), "-o", str(out), "--epochs", "1", "--time-limit", "5", "--force"]) != 0
    assert "time_limit or as epochs, not both" in capsys.readouterr().err
    assert len(runs) == 1  # both refused before identifying


def test_identify_without_a_prior_trains_the_network_only_where_the_basis_misses_the_physics():
    """A pendulum whose angle is declared a linear coordinate: {1, x, x^2} cannot write -m g l cos x, a function
    of q explains most of what the linear stage leaves, and the network from scratch becomes a candidate."""
    import dataclasses

    pendulum = simulations.Pendulum(m=1.0, l=1.0, g=9.81)
    data = lnn.generate(pendulum, n_trajectories=6, duration=2.0, dt=0.01, seed=0, tau="gravity-sinusoids")
    linear = dataclasses.replace(data, angular=(False,))
    # what is proved is which stages are trained (the linear stage's findings decide), not how well: one epoch
    model = lnn.identify(linear, epochs=1, seed=0, residual=False)
    assert model.report.findings.state_share() >= lnn.identification.STATE_SHARE
    assert [s.name for s in model.report.stages] == ["trigonometric", "network"]
    # declared an angle, the basis writes it exactly: what it leaves is the sensor's noise, no network
    noise = np.random.default_rng(3).normal(0.0, 0.01, data.tau.shape)
    exact = lnn.identify(dataclasses.replace(data, tau=data.tau + noise), epochs=1, seed=0, residual=False)
    assert [s.name for s in exact.report.stages] == ["trigonometric"]
    assert exact.report.findings.state_share() < lnn.identification.STATE_SHARE


def test_the_bounded_fit_keeps_the_friction_dissipative_when_the_data_ask_for_negative_damping():
    """Torques with an energy-injecting viscous term (-0.2 qd on joint 1): the bounded ridge fit clamps that
    coefficient at zero (passive friction) and fits the rest; with honest friction it is the plain ridge."""
    from lnn.identification import _linear

    system = simulations.DoublePendulum(m1=1.0, m2=0.5, l1=1.0, l2=0.7, g=9.81)
    rng = np.random.default_rng(4)
    state = system.sample_state(400, rng=4)
    qdd = rng.normal(0.0, 2.0, state.q.shape)
    basis = Basis.of(system.angular)
    Y = basis.regressor(state.q, state.qd, qdd)
    zeros = np.zeros((1, basis.n_parameters))
    layout = _linear.Layout(2, 1, ("viscous",), False, body_columns=basis.n_parameters, armature=False)
    settings = _linear.Settings(velocity=0.1, weight=1e-9, how="given", layout=layout)
    for b1, expected in ((0.3, 0.3), (-0.2, 0.0)):
        tau = system.inverse_dynamics(state.q, state.qd, qdd) + np.array([b1, 0.1]) * state.qd
        data = lnn.Dataset(
            t=np.arange(400) * 0.01, q=state.q, qd=state.qd, qdd=qdd, tau=tau, trajectory=np.zeros(400, int)
        )
        viscous = _linear.fit_bounded(layout, zeros, Y, data, settings).get("viscous")
        assert viscous[0] >= 0.0 and viscous[0] == pytest.approx(expected, abs=1e-6)
        # clamped, joint 1's misfit moves the shared basis a little, and so joint 2's coefficient
        assert viscous[1] == pytest.approx(0.1, abs=1e-6 if b1 > 0 else 1e-2)


SPATIAL_URDF = """<?xml version="1.0"?>
<robot name="spatial">
  <link name="base"/>
  <link name="a"><inertial><origin xyz="0.03 0.01 0.1"/><mass value="1.2"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.01"/></inertial></link>
  <link name="b"><inertial><origin xyz="0.2 0.0 0.02"/><mass value="0.8"/>
    <inertia ixx="0.004" ixy="0" ixz="0.0005" iyy="0.02" iyz="0" izz="0.021"/></inertial></link>
  <link name="c"><inertial><origin xyz="0.15 0.01 0.0"/><mass value="0.5"/>
    <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.01" iyz="0.0003" izz="0.011"/></inertial></link>
  <joint name="pan" type="revolute"><parent link="base"/><child link="a"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="50" velocity="10"/></joint>
  <joint name="tilt" type="revolute"><parent link="a"/><child link="b"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="50" velocity="10"/></joint>
  <joint name="roll" type="revolute"><parent link="b"/><child link="c"/>
    <origin xyz="0.4 0 0"/><axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="50" velocity="10"/></joint>
</robot>
"""


@pytest.mark.robots
@pytest.mark.parametrize("locked", [(), ("roll",)], ids=["3 joints", "2 joints"])
def test_two_harmonics_are_exact_for_spatial_chains_where_one_is_not(tmp_path, locked):
    """A 3-D chain (perpendicular axes, Pinocchio's dynamics): its mass matrix has cos^2 terms, which the
    first harmonics cannot write and the default basis (two harmonics) writes exactly."""
    pytest.importorskip("pinocchio")
    path = tmp_path / "spatial.urdf"
    path.write_text(SPATIAL_URDF)
    robot = simulations.URDFRobot.from_urdf(path, locked_joints=locked)
    rng = np.random.default_rng(5)
    n = robot.n_dof
    q, qd, qdd = (rng.uniform(-3.0, 3.0, (1200, n)) for _ in range(3))
    tau = robot.inverse_dynamics(q, qd, qdd)

    def misfit(basis):
        Y = basis.regressor(q, qd, qdd)
        z, *_ = np.linalg.lstsq(Y.reshape(-1, Y.shape[-1]), tau.reshape(-1), rcond=None)
        return np.sqrt(np.mean((Y @ z - tau) ** 2) / np.mean(tau**2))

    assert Basis.of(robot.angular).harmonics == 2
    assert misfit(Basis.of(robot.angular)) < 1e-8
    assert misfit(Basis.of(robot.angular, harmonics=1)) > 1e-3
