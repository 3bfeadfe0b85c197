"""Novelty: the distance of states to a model's training states, and its record along rollouts."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import lnn  # noqa: E402
from lnn import uncertainty  # noqa: E402
from lnn.models import novelty  # noqa: E402
from lnn.trajectory import Trajectory  # noqa: E402

DATA = Path(__file__).parent / "data"


def _box_states(n, rng, scale=1.0):
    """States of a 2-DOF system with linear coordinates: q uniform in a box, qd normal."""
    q = rng.uniform(-1.0, 1.0, (n, 2)) * np.array([1.0, 2.0]) * scale + np.array([0.5, -1.0])
    qd = rng.normal(0.0, 1.0, (n, 2)) * np.array([3.0, 0.5]) * scale
    return q, qd


@pytest.fixture(scope="module")
def box_model():
    model = lnn.LagrangianNetwork(2, dtype="float64", seed=0, hidden=(8,))
    q, qd = _box_states(20_000, np.random.default_rng(0))
    model.adapt(q, qd)
    return model


def test_novelty_is_one_at_the_99th_percentile_of_states_drawn_like_the_training_data(box_model):
    q, qd = _box_states(20_000, np.random.default_rng(1))  # fresh states of the same distribution
    values = box_model.novelty(q, qd)
    assert values.shape == (20_000,) and np.all(values >= 0)
    assert np.percentile(values, 99) == pytest.approx(1.0, abs=0.12)
    assert np.mean(values > 1.0) == pytest.approx(0.01, abs=0.006)


def test_novelty_grows_away_from_the_training_states(box_model):
    rng = np.random.default_rng(2)
    medians = []
    for scale in (1.0, 2.0, 4.0, 8.0):
        q, qd = _box_states(2000, rng, scale=scale)
        medians.append(np.median(box_model.novelty(q, qd)))
    assert np.all(np.diff(medians) > 0)
    assert medians[-1] > 5.0 * medians[0]
    # Far away the distance grows linearly: doubling the offset of a far state doubles its novelty.
    far_q, far_qd = np.array([[50.0, 0.0]]), np.zeros((1, 2))
    ratio = box_model.novelty(2 * far_q, far_qd)[0] / box_model.novelty(far_q, far_qd)[0]
    assert ratio == pytest.approx(2.0, rel=0.05)


def test_novelty_is_the_kth_neighbour_distance_in_the_feature_space(box_model):
    reference = box_model.novelty_reference()
    assert reference.points.shape == (novelty.REFERENCE_SIZE, 2 + 2)
    q, qd = _box_states(50, np.random.default_rng(3))
    x = novelty.features(box_model.feature_map(), q, qd)
    distance = np.sqrt(((x[:, None, :] - reference.points[None]) ** 2).sum(-1))
    kth = np.sort(distance, axis=1)[:, novelty.NEIGHBOURS - 1]
    np.testing.assert_allclose(box_model.novelty(q, qd), kth / reference.scale, rtol=1e-9)
    assert box_model.novelty(q[0], qd[0]) == pytest.approx(kth[0] / reference.scale, rel=1e-9)


def test_angular_coordinates_wrap(box_model):
    model = lnn.LagrangianNetwork(1, angular=True, dtype="float64", seed=0, hidden=(4,))
    rng = np.random.default_rng(4)
    q, qd = rng.uniform(-np.pi, np.pi, (4000, 1)), rng.normal(size=(4000, 1))
    model.adapt(q, qd)
    np.testing.assert_allclose(model.novelty(q[:20] + 2 * np.pi, qd[:20]), model.novelty(q[:20], qd[:20]), atol=1e-9)


def test_a_model_without_data_has_nan_novelty_and_its_rollouts_do_not_warn():
    model = lnn.LagrangianNetwork(2, dtype="float64", seed=0, hidden=(4,))
    assert np.all(np.isnan(model.novelty(np.zeros((3, 2)), np.zeros((3, 2)))))
    with warnings.catch_warnings():
        warnings.simplefilter("error", lnn.NoveltyWarning)
        path = lnn.rollout(model, np.zeros((2, 2)), np.zeros((2, 2)), np.linspace(0, 0.1, 3), method="RK45")
    assert path.novelty.shape == (2, 3) and np.all(np.isnan(path.novelty)) and np.all(np.isnan(path.novel_at))


def test_the_summary_is_saved_with_the_model(box_model, tmp_path):
    path = tmp_path / "m.keras"
    box_model.save(path)
    loaded = lnn.load_model(path)
    q, qd = _box_states(100, np.random.default_rng(5), scale=2.0)
    np.testing.assert_array_equal(loaded.novelty(q, qd), box_model.novelty(q, qd))


def test_a_model_saved_before_novelty_existed_loads_without_it():
    model = lnn.load_model(DATA / "legacy_structured.keras")
    assert model.novelty_reference() is None
    assert np.all(np.isnan(model.novelty(np.zeros((2, model.n_dof)), np.zeros((2, model.n_dof)))))


def test_the_scale_leaves_out_neighbours_from_the_same_block():
    """States along one trajectory are dt apart: the scale is the distance to other trajectories' states."""
    angle = np.linspace(0.0, 2 * np.pi, 4000, endpoint=False)
    radii = 1.0 + 0.1 * np.arange(20)  # 20 trajectories (one per block), circles 0.1 apart
    x = np.concatenate([r * np.stack([np.cos(angle), np.sin(angle)], axis=1) for r in radii])
    step = 2 * np.pi * radii[-1] / 4000
    scale = novelty.build_reference(x, seed=0).scale
    assert 0.09 < scale < 0.6  # reference states of the next circles, not the next samples of the same one
    assert scale > 10 * novelty.NEIGHBOURS * step


def test_record_novelty_sets_the_first_exit_and_warns_once():
    class Box:
        def novelty(self, q, qd):
            return np.abs(q[:, 0])

    t = np.linspace(0.0, 1.0, 11)
    q = np.zeros((3, 11, 1))
    q[0, :, 0] = 2.0 * t  # leaves at t = 0.6 (novelty 1.2 > 1; 1.0 at t = 0.5 is not beyond)
    q[1, :, 0] = 0.5
    q[2, 7:, 0] = 3.0
    path = Trajectory(
        t=t, q=q, qd=np.zeros_like(q), qdd=np.zeros_like(q), tau=np.zeros_like(q), energy=np.zeros((3, 11))
    )
    with pytest.warns(lnn.NoveltyWarning, match="2 of 3 trajectory") as record:
        out = uncertainty.record_novelty(Box(), path)
    assert len(record) == 1
    np.testing.assert_allclose(out.novel_at, [0.6, np.nan, 0.7])
    np.testing.assert_allclose(out.novelty, np.abs(q[..., 0]))
    assert uncertainty.record_novelty(object(), path) is path


def test_the_novelty_fields_follow_selection_cuts_and_files(tmp_path):
    t = np.linspace(0.0, 1.0, 5)
    q = np.arange(30, dtype=float).reshape(3, 5, 2)
    path = Trajectory(
        t=t,
        q=q,
        qd=q,
        qdd=q,
        tau=q,
        energy=q[..., 0],
        novelty=q[..., 1] / 10,
        novel_at=np.array([0.25, np.nan, 1.0]),
    )
    np.testing.assert_array_equal(path[1:].novelty, q[1:, :, 1] / 10)
    np.testing.assert_array_equal(path[2].novel_at, [1.0])
    cut = path.until(0.5)
    assert cut.novelty.shape == (3, 3)
    np.testing.assert_array_equal(cut.novel_at, [0.25, np.nan, np.nan])
    path.save(tmp_path / "p.npz")
    loaded = Trajectory.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(loaded.novelty, path.novelty)
    np.testing.assert_array_equal(loaded.novel_at, path.novel_at)
    with pytest.raises(ValueError, match="novelty must have shape"):
        Trajectory(t=t, q=q, qd=q, qdd=q, tau=q, energy=q[..., 0], novelty=np.zeros((3, 4)))


def test_rollout_of_a_model_records_where_it_left_its_data():
    model = lnn.LagrangianNetwork(1, dtype="float64", seed=0, hidden=(8,))
    rng = np.random.default_rng(8)
    model.adapt(rng.uniform(-0.5, 0.5, (2000, 1)), rng.normal(0, 0.5, (2000, 1)))
    t = np.linspace(0.0, 0.5, 11)
    with pytest.warns(lnn.NoveltyWarning):
        path = lnn.rollout(model, np.array([[0.0], [10.0]]), np.zeros((2, 1)), t, method="RK45")
    assert path.novelty.shape == (2, 11)
    assert path.novel_at[1] == 0.0
    np.testing.assert_allclose(path.novelty[0], model.novelty(path.q[0], path.qd[0]))


def test_ground_truth_rollouts_have_no_novelty():
    import simulations

    path = lnn.rollout(simulations.Pendulum(), np.array([0.3]), np.array([0.0]), np.linspace(0, 0.1, 3))
    assert path.novelty is None and path.novel_at is None


def test_novel_fraction_metric(box_model):
    q, qd = _box_states(500, np.random.default_rng(9), scale=10.0)
    assert lnn.metrics.novel_fraction(box_model, q, qd) > 0.9
    assert np.isnan(lnn.metrics.novel_fraction(object(), q, qd))
