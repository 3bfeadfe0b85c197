"""The metrics of lnn.metrics against values computed by hand on small arrays."""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np
import pytest

from lnn import metrics
from lnn.trajectory import Trajectory


def _trajectory(t, q, qd):
    q = np.asarray(q, dtype=np.float64)
    qd = np.asarray(qd, dtype=np.float64)
    return Trajectory(
        t=np.asarray(t, dtype=np.float64),
        q=q,
        qd=qd,
        qdd=np.zeros_like(q),
        tau=np.zeros_like(q),
        energy=np.zeros(q.shape[:2]),
    )


def test_acceleration_error_by_hand():
    true = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])
    pred = np.array([[3.0, 4.5], [1.0, 0.1], [0.0, 2.0]])
    result = metrics.acceleration_error(pred, true)
    np.testing.assert_allclose(result.relative, [0.5 / 5.0, 0.1, 0.0])
    assert result.median == pytest.approx(0.1)
    assert result.mean == pytest.approx((0.1 + 0.1 + 0.0) / 3)


def test_acceleration_error_ignores_zero_true_acceleration():
    result = metrics.acceleration_error([[1.0], [2.0]], [[0.0], [4.0]])
    assert np.isnan(result.relative[0])
    assert result.median == pytest.approx(0.5)


def test_torque_error_matches_delan_definition_and_normalisation():
    true = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 10.0]])
    pred = np.array([[1.5, 10.0], [3.0, 9.0], [4.0, 10.0]])
    result = metrics.torque_error(pred, true)
    # DeLaN: mean over samples of the squared error summed over joints.
    assert result.mse == pytest.approx((0.25 + 1.0 + 1.0) / 3)
    np.testing.assert_allclose(result.mse_per_joint, [(0.25 + 0 + 1.0) / 3, 1.0 / 3])
    var0 = np.var([1.0, 3.0, 5.0])  # 8/3
    assert result.nmse_per_joint[0] == pytest.approx((1.25 / 3) / var0)
    assert np.isnan(result.nmse_per_joint[1])  # constant true torque: undefined
    assert result.nmse == pytest.approx((1.25 / 3) / var0)


def test_relative_error_and_valid_prediction_time():
    x_true = np.array([[1.0, 0.0], [0.0, 0.0]])
    x_pred = np.array([[0.0, 1.0], [0.0, 0.0]])
    # sqrt(2) / (1 + 1), and 0 where both vanish.
    np.testing.assert_allclose(metrics.relative_error(x_pred, x_true), [np.sqrt(2) / 2, 0.0])
    rel = np.array([[0.0, 0.05, 0.2, 0.01], [0.0, 0.0, 0.0, 0.0]])
    vpt = metrics.valid_prediction_time(rel, np.array([1.0, 1.5, 2.0, 2.5]), threshold=0.1)
    np.testing.assert_allclose(vpt, [1.0, 1.5])


def test_rollout_error_geometric_mean():
    t = [0.0, 1.0]
    ref = _trajectory(t, [[[1.0], [1.0]], [[2.0], [2.0]]], [[[0.0], [0.0]], [[0.0], [0.0]]])
    pred = _trajectory(t, [[[1.0], [3.0]], [[2.0], [2.0 / 3.0]]], [[[0.0], [0.0]], [[0.0], [0.0]]])
    result = metrics.rollout_error(pred, ref, threshold=0.4)
    # trajectory 0: errors 0 and 2/4; trajectory 1: 0 and (4/3)/(8/3) = 1/2.
    np.testing.assert_allclose(result.relative, [[0.0, 0.5], [0.0, 0.5]])
    np.testing.assert_allclose(result.per_trajectory, [0.25, 0.25])
    assert result.geometric_mean == pytest.approx(0.25)
    np.testing.assert_allclose(result.valid_time, [1.0, 1.0])


def test_rollout_error_wraps_angles():
    t = [0.0, 1.0]
    ref = _trajectory(t, [[[0.1], [0.2]]], [[[1.0], [1.0]]])
    pred = _trajectory(t, [[[0.1 + 2 * np.pi], [0.2]]], [[[1.0], [1.0]]])
    assert metrics.rollout_error(pred, ref, angular=(True,)).geometric_mean < 1e-12
    assert metrics.rollout_error(pred, ref).geometric_mean > 0.1


@dataclass(frozen=True)
class _Spring:
    """E = qd²/2 + q²/2, V = q²/2."""

    n_dof: int = 1

    def energy(self, q, qd):
        return 0.5 * (np.asarray(q) ** 2 + np.asarray(qd) ** 2).sum(-1)

    def potential_energy(self, q):
        return 0.5 * (np.asarray(q) ** 2).sum(-1)


def test_energy_error_as_cranmer():
    t = [0.0, 1.0, 2.0]
    ref = _trajectory(t, [[[1.0], [0.0], [-1.0]]], [[[0.0], [1.0], [0.0]]])  # E = 0.5 throughout
    pred = _trajectory(t, [[[1.0], [0.0], [-2.0]]], [[[0.0], [1.0], [0.0]]])  # E(2) = 2
    result = metrics.energy_error(_Spring(), pred, ref, scale=29.4)
    np.testing.assert_allclose(result.error, [[0.0, 0.0, 1.5 / 29.4]])
    assert result.mean == pytest.approx(1.5 / 29.4)
    # default scale: largest |V| over the reference states = 0.5
    assert metrics.energy_error(_Spring(), pred, ref).scale == pytest.approx(0.5)


def test_mass_matrix_report():
    m_true = np.array([[[2.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    m_pred = np.array([[[2.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, -1.0]]])
    report = metrics.mass_matrix_report(m_pred, m_true)
    np.testing.assert_allclose(report.relative_error, [0.0, 2.0 / np.sqrt(2.0)])
    assert report.fraction_positive_definite == pytest.approx(0.5)
    assert report.min_eigenvalue == pytest.approx(-1.0)
    assert report.max_condition == np.inf
    assert report.max_asymmetry == 0.0
    healthy = metrics.mass_matrix_report(m_true[:1])
    assert healthy.max_condition == pytest.approx(2.0)
    assert np.isnan(healthy.median_relative_error)


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="qdd_pred and qdd_true"):
        metrics.acceleration_error(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="m_pred"):
        metrics.mass_matrix_report(np.zeros((3, 2, 3)))


def test_table_csv_round_trip(tmp_path):
    table = metrics.MetricsTable(rows=(metrics.MetricRow("a", 0.5, "first"), metrics.MetricRow("b", 1e-9, "second")))
    assert table.as_dict() == {"a": 0.5, "b": 1e-9}
    assert table["b"] == 1e-9
    path = table.to_csv(tmp_path / "m.csv")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["metric"], float(r["value"])) for r in rows] == [("a", 0.5), ("b", 1e-9)]
    with pytest.raises(FileExistsError, match="m.csv"):
        table.to_csv(path)
    table.to_csv(path, overwrite=True)
    assert "a" in table.format()


def test_evaluate_true_system_against_itself_is_exact():
    import simulations
    from lnn.data import generate

    pendulum = simulations.DoublePendulum()
    table = metrics.evaluate(pendulum, pendulum, n_rollouts=3, duration=1.0, dt=0.1, seed=0)
    values = table.as_dict()
    assert values["acceleration_error_median"] < 1e-12
    assert values["mass_matrix_error_median"] == 0.0
    assert values["mass_matrix_positive_definite"] == 1.0
    assert values["rollout_error_geometric_mean"] < 1e-12
    assert values["valid_prediction_time_mean"] == pytest.approx(1.0)
    assert values["energy_error_mean"] < 1e-12
    assert {"acceleration", "torque", "mass_matrix", "rollout", "energy"} <= set(table.details)

    data = generate(simulations.PlanarArm(), n_trajectories=2, duration=0.5, dt=0.05, seed=1, tau="sinusoids")
    table = metrics.evaluate(simulations.PlanarArm(), data, true_system=simulations.PlanarArm(), n_rollouts=2)
    assert table["torque_mse"] < 1e-16
    assert table["torque_nmse"] < 1e-16
    assert table["acceleration_error_median"] < 1e-10
    assert table["rollout_error_geometric_mean"] < 1e-12


def test_evaluate_rolls_out_the_recordings_of_the_first_ones_rate_only():
    """An import puts each file on its own grid: a recording at another rate is not replayed on the first one's."""
    import simulations
    from lnn.data import Dataset, generate

    arm = simulations.PlanarArm()
    parts = [
        generate(arm, n_trajectories=1, duration=1.0, dt=dt, seed=seed, tau="sinusoids")
        for dt, seed in ((0.01, 1), (0.015, 2), (0.01, 3))
    ]
    columns = {k: np.concatenate([getattr(p, k) for p in parts]) for k in ("t", "q", "qd", "qdd", "tau")}
    ids = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts)])
    mixed = Dataset(**columns, trajectory=ids, angular=arm.angular)
    table = metrics.evaluate(arm, mixed, n_rollouts=3, rtol=1e-10, atol=1e-12)
    assert table.details["reference"].q.shape[0] == 2  # the 15 ms recording left out
    assert table["rollout_error_geometric_mean"] < 1e-3  # the truth replays its own (linearly interpolated) torques


def test_rollout_error_wraps_angle_differences_across_pi():
    """One trajectory just below +pi, the other just above -pi: the same configuration."""
    from lnn import Trajectory
    from lnn.metrics import rollout_error

    t = np.array([0.0, 1.0])
    q_true = np.array([[[np.pi - 1e-3], [np.pi - 1e-3]]])
    q_pred = np.array([[[np.pi - 1e-3], [-np.pi + 1e-3]]])
    zeros = np.zeros_like(q_true)

    def trajectory(q):
        return Trajectory(t=t, q=q, qd=zeros, qdd=zeros, tau=zeros, energy=np.zeros((1, 2)))

    result = rollout_error(trajectory(q_pred), trajectory(q_true), angular=(True,))
    # |difference| = 2e-3 on the circle, norms ~pi each.
    np.testing.assert_allclose(result.relative[0, 1], 2e-3 / (2 * (np.pi - 1e-3)), rtol=1e-9)
    unwrapped = rollout_error(trajectory(q_pred), trajectory(q_true))
    assert unwrapped.relative[0, 1] > 0.99  # without angular, opposite signs are far apart
