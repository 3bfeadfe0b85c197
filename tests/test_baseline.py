"""The plain-MLP baseline: trains with lnn.fit, rolls out with lnn.rollout, saves and loads."""

import numpy as np
import pytest

import lnn
import simulations
from lnn.baseline import AccelerationMLP


@pytest.fixture(scope="module")
def pendulum_data():
    system = simulations.Pendulum()
    return system, lnn.generate(system, n_trajectories=16, duration=2.0, dt=0.05, seed=0)


def test_baseline_learns_pendulum_accelerations(pendulum_data):
    """Against the pendulum's own qdd on states it never saw: 102 % error untrained, 2.1 % after 30 epochs."""
    system, data = pendulum_data
    held_out = lnn.generate(system, n_trajectories=8, duration=2.0, dt=0.05, seed=1)
    model = AccelerationMLP(1, hidden=(32, 32), angular=system.angular, dtype="float64", seed=0)

    def relative_error():
        qdd = model.numpy_acceleration(held_out.q, held_out.qd)
        return np.linalg.norm(qdd - held_out.qdd) / np.linalg.norm(held_out.qdd)

    untrained = relative_error()
    history = lnn.fit(model, data, epochs=30, batch_size=64, learning_rate=3e-3, seed=0)
    losses = history.train["acceleration-l2"]
    assert losses.shape == (30,) and losses[-1] < 1e-2 * losses[0], losses
    assert untrained > 0.9 and relative_error() < 0.05, (untrained, relative_error())


def test_baseline_rolls_out_like_any_system(pendulum_data):
    system, _ = pendulum_data
    model = AccelerationMLP(1, hidden=(8,), angular=system.angular, dtype="float64", seed=1)
    t = np.linspace(0.0, 0.5, 11)
    trajectory = lnn.rollout(model, np.array([[0.3]]), np.array([[0.0]]), t)
    np.testing.assert_allclose(
        trajectory.qdd[0], model.numpy_acceleration(trajectory.q[0], trajectory.qd[0]), rtol=1e-12
    )


def test_baseline_save_load_bit_identical(tmp_path):
    model = AccelerationMLP(2, hidden=(16,), angular=(True, False), dtype="float64", seed=3)
    rng = np.random.default_rng(0)
    q, qd = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    model.adapt(q * 2 + 1, qd * 3, qd * 5)
    before = model.numpy_acceleration(q, qd)
    path = tmp_path / "mlp.keras"
    model.save(path)
    loaded = lnn.load_model(path)
    assert isinstance(loaded, AccelerationMLP)
    np.testing.assert_array_equal(loaded.numpy_acceleration(q, qd), before)
    assert loaded.angular == (True, False)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_dof": 0}, "n_dof"),
        ({"n_dof": 2, "hidden": ()}, "hidden"),
        ({"n_dof": 2, "activation": "cubic"}, "activation"),
        ({"n_dof": 2, "angular": (True,)}, "angular"),
    ],
)
def test_baseline_rejects_bad_configuration(kwargs, match):
    n_dof = kwargs.pop("n_dof")
    with pytest.raises(ValueError, match=match):
        AccelerationMLP(n_dof, **kwargs)


def test_baseline_rejects_bad_states():
    model = AccelerationMLP(2, hidden=(4,), dtype="float64")
    with pytest.raises(ValueError, match=r"shape \(B, 2\)"):
        model.numpy_acceleration(np.zeros((3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        model.numpy_acceleration(np.full((1, 2), np.nan), np.zeros((1, 2)))
