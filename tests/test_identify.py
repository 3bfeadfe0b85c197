"""lnn.identify: the recipe for robots, on simulated data with known friction and a wrong prior."""

from __future__ import annotations

import numpy as np
import pytest

import lnn
import simulations
from lnn.cli import main

TRUE = simulations.PlanarArm(
    masses=(1.0, 0.8), lengths=(0.6, 0.5), friction=simulations.Friction(viscous=(0.05, 0.03), coulomb=(0.1, 0.08))
)
WRONG_PAYLOAD = simulations.PlanarArm(masses=(1.0, 0.5), lengths=(0.6, 0.5))  # link 2 is 0.3 kg heavier


@pytest.fixture(scope="module")
def data():
    return lnn.generate(TRUE, n_trajectories=10, duration=3.0, dt=0.01, seed=0, tau="gravity-sinusoids")


@pytest.fixture(scope="module")
def held_out():
    return lnn.generate(TRUE, n_trajectories=3, duration=3.0, dt=0.01, seed=1, tau="gravity-sinusoids")


def test_identify_does_not_trust_a_wrong_prior(data, held_out):
    model = lnn.identify(data, prior=WRONG_PAYLOAD, residual=False, seed=0)
    report = model.report
    assert [s.name for s in report.stages] == ["nominal", "rigid body"]
    assert report.chosen == "rigid body"
    nominal, identified = report.stages
    assert identified.mean_mse < 1e-3 * nominal.mean_mse
    pred = model.inverse_dynamics(held_out.q, held_out.qd, held_out.qdd)
    assert isinstance(pred, np.ndarray)
    relative = np.mean((pred - held_out.tau) ** 2, axis=0) / held_out.tau.var(axis=0)
    assert np.all(relative < 1e-3)
    # the friction found is the simulated one's order, and dissipative
    params = model.network.friction_parameters()
    assert np.all(params["viscous"] >= 0) and np.all(params["coulomb"] >= 0)
    np.testing.assert_allclose(params["coulomb"], (0.1, 0.08), rtol=0.2)
    # every body of the returned rigid body is physical
    J = np.asarray(model.network.kind_model.pseudo_inertias())
    assert np.all(np.linalg.eigvalsh(J) > 0)
    # it satisfies the protocol: it rolls out
    trajectory = lnn.rollout(model, held_out.q[:1], held_out.qd[:1], t=np.linspace(0, 0.5, 11))
    assert np.isfinite(trajectory.q).all()


def test_identify_refuses_data_without_torques(data):
    free = lnn.Dataset(
        t=data.t, q=data.q, qd=data.qd, qdd=data.qdd, tau=np.zeros_like(data.tau), trajectory=data.trajectory
    )
    with pytest.raises(ValueError, match="dataset.tau is all zeros"):
        lnn.identify(free, prior=WRONG_PAYLOAD)
    with pytest.raises(TypeError, match="needs an lnn.Dataset"):
        lnn.identify(object())
    with pytest.raises(ValueError, match="prior has 2 joints"):
        lnn.identify(
            lnn.Dataset(
                t=data.t,
                q=np.tile(data.q, 2)[:, :3],
                qd=np.tile(data.qd, 2)[:, :3],
                qdd=np.tile(data.qdd, 2)[:, :3],
                tau=np.tile(data.tau, 2)[:, :3],
                trajectory=data.trajectory,
            ),
            prior=WRONG_PAYLOAD,
        )


@pytest.mark.slow
def test_cli_identify_without_a_prior_writes_a_model_and_never_overwrites(data, tmp_path, capsys):
    path = tmp_path / "data.npz"
    data.save(path)
    out = tmp_path / "model.keras"
    assert main(["identify", str(path), "-o", str(out), "--time-limit", "6"]) == 0
    printed = capsys.readouterr().out
    assert "network" in printed and out.exists()
    loaded = lnn.load_model(out)
    assert loaded.friction_terms == "viscous+coulomb+offset+network"  # the default forces and offsets
    assert main(["identify", str(path), "-o", str(out), "--time-limit", "6"]) != 0
    assert "refusing to overwrite" in capsys.readouterr().err
