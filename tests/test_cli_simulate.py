"""End-to-end tests of `lnn simulate`, run in-process through lnn.cli.main."""

from __future__ import annotations

import re

import numpy as np
import pytest

import simulations
from lnn.cli import main
from lnn.cli._common import parse_params
from lnn.data import Dataset


def _simulate(tmp_path, *extra, name="pendulum", output="data.npz"):
    path = tmp_path / output
    code = main(
        [
            "simulate",
            name,
            "--trajectories",
            "3",
            "--duration",
            "0.5",
            "--dt",
            "0.05",
            "--seed",
            "2",
            "-o",
            str(path),
            *extra,
        ]
    )
    return code, path


def test_simulate_pendulum_writes_a_dataset(tmp_path, capsys):
    code, path = _simulate(tmp_path)
    assert code == 0
    out = capsys.readouterr()
    assert out.out.count("\n") == 1
    assert "wrote" in out.out and "3 trajectories x 11 samples of pendulum" in out.out
    assert "100.0%" in out.err  # the progress bar ran to the end
    data = Dataset.load(path)
    assert data.system == "pendulum" and data.n_trajectories == 3 and len(data) == 33
    system = simulations.make_system(data.system, **data.parameters)
    np.testing.assert_allclose(data.qdd, system.acceleration(data.q, data.qd), atol=1e-12)
    np.testing.assert_array_equal(data.tau, 0.0)


def test_simulate_double_pendulum_with_parameters(tmp_path, capsys):
    code, path = _simulate(
        tmp_path, "--param", "m2=2", "--param", "l1=0.5", "--method", "Radau", name="double-pendulum"
    )
    assert code == 0
    data = Dataset.load(path)
    assert data.parameters["m2"] == 2.0 and data.parameters["l1"] == 0.5
    system = simulations.make_system("double-pendulum", **data.parameters)
    energy = data.energy.reshape(3, -1)
    np.testing.assert_allclose(energy, energy[:, :1] * np.ones(energy.shape[1]), rtol=1e-5)
    np.testing.assert_allclose(system.energy(data.q, data.qd), data.energy)


def test_simulate_robot_defaults_to_sinusoid_excitation(tmp_path, capsys):
    code, path = _simulate(tmp_path, "--param", "masses=1,2", name="planar-arm")
    assert code == 0
    assert "excitation=gravity-sinusoids" in capsys.readouterr().out
    data = Dataset.load(path)
    assert data.parameters["masses"] == [1.0, 2.0]
    assert np.abs(data.tau).max() > 0
    code, path = _simulate(tmp_path, "--excitation", "none", name="planar-arm", output="free.npz")
    assert code == 0 and np.all(Dataset.load(path).tau == 0)


def test_simulate_refuses_to_overwrite_without_force(tmp_path, capsys):
    code, path = _simulate(tmp_path)
    first = Dataset.load(path)
    capsys.readouterr()
    code, _ = _simulate(tmp_path, "--seed", "9")
    assert code == 2
    assert "exists; pass --force" in capsys.readouterr().err
    np.testing.assert_array_equal(Dataset.load(path).q, first.q)
    code, _ = _simulate(tmp_path, "--seed", "9", "--force")
    assert code == 0
    assert not np.array_equal(Dataset.load(path).q, first.q)


@pytest.mark.parametrize(
    ("name", "extra", "message"),
    [
        ("pendulums", (), "unknown system 'pendulums'; known systems: pendulum, double-pendulum"),
        ("pendulum", ("--param", "mass=2"), "unknown parameter 'mass'.*m, l, g, damping"),
        ("pendulum", ("--param", "m"), "--param must look like KEY=VALUE; got 'm'"),
        ("pendulum", ("--param", "m=-1"), "m must be a finite number > 0; got -1.0"),
        ("pendulum", ("--dt", "0"), "dt must be a finite number > 0"),
    ],
)
def test_simulate_reports_bad_input(tmp_path, capsys, name, extra, message):
    code, path = _simulate(tmp_path, *extra, name=name)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("lnn simulate: error: ")
    assert re.search(message, err), err
    assert not path.exists()


def test_parse_params_types():
    factory = simulations.SYSTEMS["n-pendulum"]
    assert parse_params(["masses=1,2", "g=9.8"], factory) == {"masses": [1.0, 2.0], "g": 9.8}
    assert parse_params(["names=a,b", "k=1"]) == {"names": ["a", "b"], "k": 1.0}
    # A list-valued parameter stays a list with a single value.
    assert parse_params(["lengths=2"], simulations.SYSTEMS["planar-arm"]) == {"lengths": [2.0]}


@pytest.mark.parametrize("name", list(simulations.SYSTEMS))
def test_simulate_every_built_in_system(tmp_path, capsys, name):
    if name == "panda":
        pytest.importorskip("pinocchio", reason="the panda needs the robots extra")
    path = tmp_path / f"{name}.npz"
    code = main(["simulate", name, "--trajectories", "2", "--duration", "0.2", "--dt", "0.05", "-o", str(path)])
    assert code == 0, capsys.readouterr().err
    data = Dataset.load(path)
    system = simulations.make_system(name, **data.parameters)
    assert data.system == name and data.n_dof == system.n_dof and len(data) == 2 * 5
    np.testing.assert_allclose(system.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, atol=1e-8)


def test_simulate_arm_excitations_gravity_sinusoids_and_sinusoids(tmp_path, capsys):
    arm = simulations.make_system("planar-arm")
    code, path = _simulate(tmp_path, "--excitation", "gravity-sinusoids", name="planar-arm", output="gs.npz")
    assert code == 0 and "excitation=gravity-sinusoids" in capsys.readouterr().out
    data = Dataset.load(path)
    np.testing.assert_allclose(arm.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, atol=1e-8)
    code, path = _simulate(tmp_path, "--excitation", "sinusoids", name="planar-arm", output="s.npz")
    assert code == 0 and "excitation=sinusoids" in capsys.readouterr().out


def test_simulate_arm_with_prescribed_joint_motions(tmp_path, capsys):
    code, path = _simulate(tmp_path, "--excitation", "joint", name="planar-arm")
    assert code == 0
    out = capsys.readouterr()
    assert "excitation=joint, inverse dynamics" in out.out and "100.0%" in out.err
    data = Dataset.load(path)
    arm = simulations.make_system(data.system, **data.parameters)
    # The recorded torques produce the recorded accelerations, and the arm moves.
    np.testing.assert_allclose(arm.acceleration(data.q, data.qd, data.tau), data.qdd, atol=1e-9)
    assert np.abs(data.qd).max() > 0.05
