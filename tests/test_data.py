"""Tests of lnn.data: generation, .npz storage, splits, excitation, derivative estimation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import simulations
from lnn import Trajectory, rollout
from lnn._io import write_npz
from lnn.data import Dataset, Sinusoids, estimate_derivatives, generate, sum_of_sinusoids


@pytest.fixture(scope="module")
def double_pendulum():
    return simulations.DoublePendulum()


@pytest.fixture(scope="module")
def small(double_pendulum):
    return generate(double_pendulum, n_trajectories=5, duration=1.0, dt=0.05, seed=3)


# ------------------------------------------------------------------ generate


def test_generate_samples_true_unforced_rollouts(double_pendulum, small):
    T = 21
    assert len(small) == 5 * T and small.n_trajectories == 5 and small.n_dof == 2
    np.testing.assert_array_equal(small.trajectory, np.repeat(np.arange(5), T))
    np.testing.assert_allclose(small.t, np.tile(np.arange(T) * 0.05, 5), atol=1e-15)
    assert small.dt == pytest.approx(0.05)
    assert small.system == "double-pendulum"
    assert small.parameters == double_pendulum.parameters()
    assert small.angular == (True, True)
    np.testing.assert_array_equal(small.tau, 0.0)
    np.testing.assert_allclose(small.qdd, double_pendulum.acceleration(small.q, small.qd), rtol=1e-12, atol=1e-12)
    energy = small.energy.reshape(5, T)
    np.testing.assert_allclose(energy, energy[:, :1] * np.ones(T), rtol=1e-6, atol=1e-6)
    # The samples are the system's own initial states and rollouts.
    state = double_pendulum.sample_state(5, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(small.q[::T], state.q)
    np.testing.assert_array_equal(small.qd[::T], state.qd)


def test_generate_is_reproducible_and_seeded(double_pendulum, small):
    again = generate(double_pendulum, n_trajectories=5, duration=1.0, dt=0.05, seed=3)
    np.testing.assert_array_equal(again.q, small.q)
    other = generate(double_pendulum, n_trajectories=5, duration=1.0, dt=0.05, seed=4)
    assert not np.allclose(other.q, small.q)


def test_generate_in_batches_matches_one_batch(double_pendulum):
    options = dict(n_trajectories=7, duration=1.0, dt=0.1, seed=0, rtol=1e-11, atol=1e-12)
    one = generate(double_pendulum, batch_size=7, **options)
    reports = []
    chunked = generate(double_pendulum, batch_size=3, progress=lambda d, n: reports.append((d, n)), **options)
    np.testing.assert_allclose(chunked.q, one.q, atol=1e-8)
    assert reports[-1] == (7, 7)
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)


def test_generate_with_sinusoid_excitation_satisfies_inverse_dynamics():
    arm = simulations.make_system("planar-arm")
    data = generate(arm, n_trajectories=3, duration=1.0, dt=0.02, seed=1, tau="sinusoids", amplitude=[4.0, 2.0])
    assert (np.abs(data.tau).max(axis=0) <= np.array([4.0, 2.0]) + 1e-12).all()
    assert (np.abs(data.tau).max(axis=0) > 0.3).all()
    np.testing.assert_allclose(arm.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, atol=1e-9)
    # The automatic amplitude scales with the system.
    auto = generate(arm, n_trajectories=2, duration=0.2, dt=0.1, seed=1, tau="sinusoids")
    assert (np.abs(auto.tau) > 0).any()


def _gravity_sinusoids(arm, **options):
    kwargs = (
        dict(n_trajectories=4, duration=5.0, dt=0.01, seed=7, tau="gravity-sinusoids", amplitude=[2.0, 0.7]) | options
    )
    return generate(arm, **kwargs)


def test_gravity_sinusoids_record_gravity_compensation_plus_sinusoids():
    arm = simulations.PlanarArm()
    data = _gravity_sinusoids(arm)
    # Rebuild the draws from the seed: initial states (rates of std 0.2 rad/s), then sinusoids.
    rng = np.random.default_rng(7)
    state = arm.sample_state(4, rng=rng, velocity_scale=0.2)
    sines = Sinusoids.random(4, 2, amplitude=[2.0, 0.7], rng=rng)
    trajectory = data.as_trajectory()
    np.testing.assert_array_equal(trajectory.q[:, 0], state.q)
    np.testing.assert_array_equal(trajectory.qd[:, 0], state.qd)
    zeros = np.zeros_like(trajectory.q)
    gravity = arm.inverse_dynamics(trajectory.q, zeros, zeros)
    np.testing.assert_allclose(trajectory.tau, gravity + sines.sample(trajectory.t), rtol=0, atol=1e-12)
    assert np.abs(gravity).max() > 1.0  # the compensation is really there


def test_gravity_sinusoids_satisfy_the_true_inverse_dynamics_and_stay_slow():
    arm = simulations.PlanarArm()
    data = _gravity_sinusoids(arm)
    np.testing.assert_allclose(arm.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, rtol=0, atol=1e-8)
    assert np.abs(data.qd).max() < 15.0  # "sinusoids" alone let the arm whirl at ~50 rad/s
    assert np.abs(data.qd).max() > 0.5  # but it moves
    # The automatic amplitude keeps the motion bounded too.
    auto = _gravity_sinusoids(arm, amplitude=None)
    assert 0.5 < np.abs(auto.qd).max() < 15.0


def test_gravity_sinusoids_are_reproducible_and_batch_independent():
    arm = simulations.PlanarArm()
    first, second = _gravity_sinusoids(arm, duration=1.0), _gravity_sinusoids(arm, duration=1.0)
    for name in ("t", "q", "qd", "qdd", "tau", "trajectory", "energy"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    other = _gravity_sinusoids(arm, duration=1.0, seed=8)
    assert not np.allclose(first.q, other.q)
    chunked = _gravity_sinusoids(arm, duration=1.0, batch_size=3)
    np.testing.assert_allclose(chunked.q, first.q, atol=1e-7)
    np.testing.assert_allclose(chunked.tau, first.tau, atol=1e-6)


def test_generate_with_array_torques(double_pendulum):
    t = np.arange(11) * 0.1
    tau = np.stack([np.sin(t), np.cos(t)], axis=-1)
    data = generate(double_pendulum, n_trajectories=2, duration=1.0, dt=0.1, seed=0, tau=tau)
    np.testing.assert_array_equal(data.tau, np.tile(tau, (2, 1)))


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"n_trajectories": 0}, ValueError, "n_trajectories must be a positive integer; got 0"),
        ({"dt": -0.1}, ValueError, "dt must be a finite number > 0; got -0.1"),
        ({"duration": 0.01}, ValueError, "duration must be at least dt"),
        ({"tau": "noise"}, ValueError, "'sinusoids'.*got 'noise'"),
        ({"tau": np.zeros((3, 2))}, ValueError, r"tau must have shape \(T, n\) = \(11, 2\)"),
        ({"batch_size": 0}, ValueError, "batch_size must be a positive integer"),
    ],
)
def test_generate_rejects_bad_arguments(double_pendulum, options, error, message):
    kwargs = dict(n_trajectories=2, duration=1.0, dt=0.1, seed=0) | options
    with pytest.raises(error, match=message):
        generate(double_pendulum, **kwargs)


# ----------------------------------------------------------------- save / load


def test_save_load_round_trip(tmp_path, small):
    path = tmp_path / "data.npz"
    small.save(path)
    loaded = Dataset.load(path)
    for name in ("t", "q", "qd", "qdd", "tau", "trajectory", "energy"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(small, name))
    assert loaded.system == small.system and loaded.parameters == small.parameters
    assert loaded.angular == small.angular and loaded.dt == small.dt


def test_save_refuses_to_overwrite(tmp_path, small):
    path = tmp_path / "data.npz"
    small.save(path)
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        small.save(path)
    small.subset([0]).save(path, overwrite=True)
    assert Dataset.load(path).n_trajectories == 1


def test_load_rejects_missing_foreign_corrupt_and_wrong_files(tmp_path, small):
    with pytest.raises(FileNotFoundError, match="no such dataset file"):
        Dataset.load(tmp_path / "absent.npz")
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.arange(3))
    with pytest.raises(ValueError, match=r"not an lnn dataset file.*\['x'\]"):
        Dataset.load(foreign)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"this is not a zip archive")
    with pytest.raises(ValueError, match="cannot read .*corrupt.npz"):
        Dataset.load(corrupt)
    trajectory = tmp_path / "trajectory.npz"
    small.as_trajectory().save(trajectory)
    with pytest.raises(ValueError, match="holds an lnn 'trajectory' file, expected a 'dataset'"):
        Dataset.load(trajectory)
    inconsistent = tmp_path / "inconsistent.npz"
    arrays = {name: getattr(small, name) for name in ("t", "q", "qd", "qdd", "tau", "trajectory", "energy")}
    arrays["qd"] = arrays["qd"][:, :1]
    write_npz(inconsistent, arrays, kind="dataset")
    with pytest.raises(ValueError, match=r"inconsistent.npz' holds an invalid dataset.*qd"):
        Dataset.load(inconsistent)
    future = tmp_path / "future.npz"
    np.savez(
        future,
        __lnn_header__=np.asarray(json.dumps({"format": "lnn", "kind": "dataset", "version": 99, "metadata": {}})),
        **arrays,
    )
    with pytest.raises(ValueError, match="format version 99"):
        Dataset.load(future)


def test_dataset_validates_its_arrays():
    q = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"Dataset.qd must have the shape of q, \(4, 2\)"):
        Dataset(t=np.arange(4.0), q=q, qd=np.zeros((4, 3)), qdd=q, tau=q, trajectory=np.zeros(4, int))
    with pytest.raises(ValueError, match="Dataset.q contains NaN"):
        Dataset(t=np.arange(4.0), q=q + np.nan, qd=q, qdd=q, tau=q, trajectory=np.zeros(4, int))
    with pytest.raises(ValueError, match="Dataset.trajectory must be integer ids"):
        Dataset(t=np.arange(4.0), q=q, qd=q, qdd=q, tau=q, trajectory=np.zeros(4))
    with pytest.raises(ValueError, match="Dataset.angular must have 2 entries"):
        Dataset(t=np.arange(4.0), q=q, qd=q, qdd=q, tau=q, trajectory=np.zeros(4, int), angular=(True,))


# -------------------------------------------------------------------- splits


def test_split_by_trajectory_is_disjoint_complete_and_reproducible(double_pendulum):
    data = generate(double_pendulum, n_trajectories=20, duration=0.2, dt=0.1, seed=0)
    split = data.split(fractions=(0.7, 0.2, 0.1), seed=5)
    parts = [set(p.trajectory_ids.tolist()) for p in (split.train, split.validation, split.test)]
    assert [len(p) for p in parts] == [14, 4, 2]
    assert set.union(*parts) == set(range(20))
    assert sum(len(p) for p in parts) == 20
    assert sum(len(p) for p in (split.train, split.validation, split.test)) == len(data)
    again = data.split(fractions=(0.7, 0.2, 0.1), seed=5)
    np.testing.assert_array_equal(again.test.trajectory_ids, split.test.trajectory_ids)
    other = data.split(fractions=(0.7, 0.2, 0.1), seed=6)
    assert set(other.train.trajectory_ids) != parts[0]
    # Each sample keeps its trajectory's values.
    rows = data.trajectory == split.test.trajectory_ids[0]
    np.testing.assert_array_equal(split.test.subset(split.test.trajectory_ids[:1]).q, data.q[rows])


def test_split_keeps_positive_parts_non_empty_and_rejects_bad_fractions(small):
    split = small.split(fractions=(0.9, 0.05, 0.05))
    assert [p.n_trajectories for p in (split.train, split.validation, split.test)] == [3, 1, 1]
    everything = small.split(fractions=(1.0, 0.0, 0.0))
    assert everything.train.n_trajectories == 5 and len(everything.test) == 0
    with pytest.raises(ValueError, match="3 non-negative numbers summing to 1"):
        small.split(fractions=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="cannot split 1 trajectory"):
        small.subset([2]).split()


def _recording(duration=10.0, dt=0.01, *, span=0.2, trajectories=1):
    """A long recording (as imported from a log) with a known derivative span."""
    t = np.arange(int(round(duration / dt))) * dt
    T = t.shape[0]
    q = np.column_stack([np.sin(t), np.cos(t)])
    return Dataset(
        t=np.tile(t, trajectories),
        q=np.tile(q, (trajectories, 1)),
        qd=np.tile(q, (trajectories, 1)),
        qdd=np.tile(q, (trajectories, 1)),
        tau=np.tile(q, (trajectories, 1)),
        trajectory=np.repeat(np.arange(trajectories), T),
        dt=dt,
        derivative_span=span,
    )


def test_split_by_time_holds_out_contiguous_blocks_a_window_apart():
    data = _recording()
    split = data.split(fractions=(0.7, 0.2, 0.1), seed=1, by="time")
    assert split.by == "time" and split.margin == 0.2 and split.block == 1.0  # 5 margins
    parts = (split.train, split.validation, split.test)
    # Ids are unique across the parts; every new trajectory is a contiguous, uniform run.
    ids = [set(p.trajectory_ids.tolist()) for p in parts]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    for part in parts:
        for piece in part.trajectories():
            np.testing.assert_allclose(np.diff(piece.t), 0.01, atol=1e-12)
    # 10 blocks of 1 s dealt 7/2/1; samples of different parts at least the span apart.
    sizes = np.array([len(p) for p in parts])
    assert sizes.sum() + split.dropped == len(data)
    np.testing.assert_allclose(sizes / sizes.sum(), [0.7, 0.2, 0.1], atol=0.04)
    for a in range(3):
        for b in range(a + 1, 3):
            gap = np.abs(parts[a].t[:, None] - parts[b].t[None, :]).min()
            assert gap >= 0.2 - 1e-9
    assert 0 < split.dropped <= 9 * 20  # at most 9 boundaries of 0.2 s at 100 Hz
    # Each sample keeps its values.
    rows = np.searchsorted(data.t, split.validation.t)
    np.testing.assert_array_equal(split.validation.q, data.q[rows])
    again = data.split(fractions=(0.7, 0.2, 0.1), seed=1, by="time")
    np.testing.assert_array_equal(again.validation.t, split.validation.t)
    other = data.split(fractions=(0.7, 0.2, 0.1), seed=2, by="time")
    assert not np.array_equal(other.validation.t, split.validation.t)
    assert "split by time blocks of 1 s" in split.describe()
    assert f"{split.dropped} samples dropped within 0.2 s between parts" in split.describe()


def test_split_auto_uses_trajectories_when_there_are_enough():
    many = _recording(duration=1.0, trajectories=10)
    assert many.split(fractions=(0.9, 0.1, 0.0), by="auto").by == "trajectory"
    few = _recording(duration=2.0, trajectories=3)
    split = few.split(fractions=(0.9, 0.1, 0.0), by="auto", margin=0.0)
    assert split.by == "time" and split.dropped == 0
    assert len(split.validation) + len(split.train) == len(few)
    assert split.validation.n_trajectories >= 1 and len(split.test) == 0


def test_split_by_time_rejects_what_cannot_be_split():
    data = _recording(duration=1.0, span=0.0)
    with pytest.raises(
        ValueError,
        match=r"cannot split 1 trajectory\(ies\) of 0.99 s .* give a "
        r"shorter block",
    ):
        data.split(fractions=(0.8, 0.2, 0.0), by="time", block=5.0)
    with pytest.raises(ValueError, match="margin must be a finite number of seconds >= 0; got -1"):
        data.split(by="time", margin=-1)
    with pytest.raises(ValueError, match="by must be 'trajectory', 'time' or 'auto'; got 'blocks'"):
        data.split(by="blocks")
    with pytest.raises(ValueError, match="block and margin apply to by='time'"):
        data.split(by="trajectory", block=1.0)
    wide = _recording(duration=1.0, span=0.3)
    with pytest.raises(ValueError, match="lie entirely within the margin"):
        wide.split(fractions=(0.5, 0.5, 0.0), by="time", block=0.1)


def test_derivative_span_is_saved_and_set_by_from_positions(tmp_path):
    data = _recording(span=0.25)
    data.save(tmp_path / "d.npz")
    assert Dataset.load(tmp_path / "d.npz").derivative_span == 0.25
    assert data.subset([0]).derivative_span == 0.25
    t = np.arange(200) * 0.01
    q = np.sin(t)[:, None]
    assert Dataset.from_positions(t, q, window=31).derivative_span == pytest.approx(0.31)
    assert Dataset.from_positions(t, q).derivative_span == pytest.approx(0.11)
    assert np.isnan(Dataset.from_positions(t, q, method="spline").derivative_span)
    with pytest.raises(ValueError, match="derivative_span must be >= 0 seconds or NaN"):
        Dataset(t=t, q=q, qd=q, qdd=q, tau=q, trajectory=np.zeros(200, int), derivative_span=-1.0)


def test_fit_validation_on_one_recording_holds_out_time_blocks_and_warns():
    from lnn.data import TimeSplitWarning
    from lnn.train._data import split, validation_split

    data = _recording(span=0.2)
    with pytest.warns(
        TimeSplitWarning,
        match=r"validation=0.1: the dataset has 1 trajectory"
        r"\(ies\), fewer than 1/0.1, so the validation set is "
        r"made of time blocks: split by time blocks",
    ):
        train, validation = split(data, 0.1, seed=0)
    assert len(validation) > 0 and len(train) > 0
    assert np.abs(train.t[:, None] - validation.t[None, :]).min() >= 0.2 - 1e-9
    many = _recording(duration=1.0, trajectories=10)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parts = validation_split(many, 0.1, seed=0)
    assert parts.by == "trajectory" and parts.validation.n_trajectories == 1


# -------------------------------------------------------------- trajectories


def test_trajectory_views_round_trip(small):
    batch = small.as_trajectory()
    assert batch.q.shape == (5, 21, 2)
    back = Dataset.from_trajectory(batch, system=small.system, parameters=small.parameters, angular=small.angular)
    np.testing.assert_array_equal(back.q, small.q)
    np.testing.assert_array_equal(back.energy, small.energy)
    parts = small.trajectories()
    assert len(parts) == 5 and all(isinstance(p, Trajectory) for p in parts)
    np.testing.assert_array_equal(parts[3].qd[0], batch.qd[3])
    mixed = Dataset(
        t=np.r_[small.t[:21], small.t[21:31]],
        q=small.q[:31],
        qd=small.qd[:31],
        qdd=small.qdd[:31],
        tau=small.tau[:31],
        trajectory=small.trajectory[:31],
    )
    with pytest.raises(ValueError, match="different time grids"):
        mixed.as_trajectory()
    assert [p.t.shape[0] for p in mixed.trajectories()] == [21, 10]


def test_logs_of_one_rate_batch_cut_to_the_shortest_from_their_starts():
    """Recordings of different lengths and start times, on grids 0.03 % apart (an import's files)."""
    rng = np.random.default_rng(0)
    lengths, starts, steps = (30, 24, 27), (0.144, 3.0, 0.5), (0.002, 0.0020006, 0.0019994)
    t = np.concatenate([s + h * np.arange(k) for k, s, h in zip(lengths, starts, steps)])
    ids = np.repeat(np.arange(3), lengths)
    q, qd, qdd, tau = (rng.standard_normal((t.size, 2)) for _ in range(4))
    logs = Dataset(t=t, q=q, qd=qd, qdd=qdd, tau=tau, trajectory=ids)
    with pytest.raises(ValueError, match="different time grids"):
        logs.as_trajectory()
    batch = logs.as_trajectory(truncate=True)
    assert batch.q.shape == (3, 24, 2) and batch.metadata["trajectory_ids"] == [0, 1, 2]
    np.testing.assert_allclose(batch.t, 0.002 * np.arange(24), atol=1e-12)  # the first one's grid, from 0
    for k, rows in enumerate(np.split(np.arange(t.size), np.cumsum(lengths)[:-1])):
        np.testing.assert_array_equal(batch.tau[k], tau[rows[:24]])
        np.testing.assert_array_equal(batch.q[k], q[rows[:24]])
    other = Dataset(
        t=np.r_[t[:30], 0.003 * np.arange(24)], q=q[:54], qd=qd[:54], qdd=qdd[:54], tau=tau[:54], trajectory=ids[:54]
    )
    with pytest.raises(ValueError, match=r"steps differ by more than 1% \(0: 0.002 s, 1: 0.003 s\)"):
        other.as_trajectory(truncate=True)
    assert other.at_first_rate().trajectory_ids.tolist() == [0]  # what a batch on one grid can hold
    assert logs.at_first_rate(limit=2).trajectory_ids.tolist() == [0, 1]
    assert logs.at_first_rate().as_trajectory(truncate=True).q.shape == (3, 24, 2)
    assert logs.at_common_rate() is logs  # 0.03 % apart: one rate
    assert other.at_common_rate().trajectory_ids.tolist() == [0]  # 30 samples at 2 ms against 24 at 3 ms
    longer = Dataset(
        t=np.r_[t[:20], 0.003 * np.arange(34)],
        q=q[:54],
        qd=qd[:54],
        qdd=qdd[:54],
        tau=tau[:54],
        trajectory=np.repeat([0, 1], [20, 34]),
    )
    assert longer.at_common_rate().trajectory_ids.tolist() == [1]  # the first is not preferred


# ---------------------------------------------------------------- excitation


def test_sinusoids_are_bounded_seeded_and_consistent():
    t = np.linspace(0.0, 5.0, 501)
    excitation = Sinusoids.random(4, 3, amplitude=[1.0, 2.0, 0.5], rng=7)
    samples = excitation.sample(t)
    assert samples.shape == (4, 501, 3)
    np.testing.assert_allclose(excitation(1.23), excitation.sample([1.23])[:, 0], atol=1e-15)
    assert (np.abs(samples).max(axis=(0, 1)) <= [1.0, 2.0, 0.5]).all()
    np.testing.assert_array_equal(sum_of_sinusoids(t, 3, n_trajectories=4, amplitude=[1.0, 2.0, 0.5], rng=7), samples)
    assert (excitation.frequency >= 0.1).all() and (excitation.frequency <= 2.0).all()
    np.testing.assert_array_equal(excitation[1:3].sample(t), samples[1:3])
    with pytest.raises(ValueError, match="frequencies must be a band"):
        Sinusoids.random(1, 1, amplitude=1.0, frequencies=(2.0, 1.0), rng=0)
    with pytest.raises(ValueError, match="amplitude must be a non-negative number or 3"):
        Sinusoids.random(1, 3, amplitude=[1.0, 2.0], rng=0)


# --------------------------------------------------------------- derivatives


def _signal(t):
    """Positions with exact first and second derivatives, ``(T, 2)`` each."""
    q = np.stack([np.sin(3 * t), np.exp(-t) * np.cos(2 * t)], axis=-1)
    qd = np.stack([3 * np.cos(3 * t), -np.exp(-t) * (np.cos(2 * t) + 2 * np.sin(2 * t))], axis=-1)
    qdd = np.stack([-9 * np.sin(3 * t), np.exp(-t) * (-3 * np.cos(2 * t) + 4 * np.sin(2 * t))], axis=-1)
    return q, qd, qdd


@pytest.mark.parametrize(
    ("method", "options", "tol_qd", "tol_qdd"),
    [
        ("savgol", {}, 5e-6, 1e-5),
        ("savgol", {"window": 7, "order": 4}, 1e-6, 1e-6),
        ("spline", {"smoothing": 0}, 1e-7, 1e-3),
    ],
)
def test_derivatives_of_a_known_signal(method, options, tol_qd, tol_qdd):
    t = np.linspace(0.0, 4.0, 401)
    q, qd, qdd = _signal(t)
    estimate = estimate_derivatives(t, q, method=method, **options)
    inner = slice(10, -10)
    np.testing.assert_allclose(estimate.qd[inner], qd[inner], atol=tol_qd)
    np.testing.assert_allclose(estimate.qdd[inner], qdd[inner], atol=tol_qdd)
    # One-sided fits at the two ends are less accurate, still close.
    np.testing.assert_allclose(estimate.qd, qd, atol=5e-5)
    np.testing.assert_allclose(estimate.qdd, qdd, atol=5e-3)


def test_derivative_accuracy_converges_with_the_sampling_rate():
    errors = []
    for T in (101, 201, 401):
        t = np.linspace(0.0, 4.0, T)
        q, qd, qdd = _signal(t)
        estimate = estimate_derivatives(t, q, window=9, order=4)
        errors.append(np.abs(estimate.qdd - qdd)[10:-10].max())
    # Halving the step at least quarters the interior error: second-order convergence or better.
    assert errors[0] / errors[1] > 3.5 and errors[1] / errors[2] > 3.5


def test_smoothing_spline_filters_noise_on_non_uniform_times():
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0.0, 4.0, 400))
    q, qd, _ = _signal(t)
    noisy = q + 1e-4 * rng.normal(size=q.shape)
    estimate = estimate_derivatives(t, noisy, method="spline")
    inner = slice(20, -20)  # natural end conditions bias the ends
    assert np.abs(estimate.qd - qd)[inner].max() < 0.02
    naive = np.gradient(noisy, t, axis=0)
    assert np.abs(estimate.qd - qd)[inner].mean() < np.abs(naive - qd)[inner].mean() / 3


def test_derivatives_of_a_pendulum_rollout():
    pendulum = simulations.Pendulum()
    t = np.arange(501) * 0.01
    truth = rollout(pendulum, [[1.0], [2.5]], [[0.0], [1.0]], t, rtol=1e-11, atol=1e-12)
    estimate = estimate_derivatives(t, truth.q, window=7)
    np.testing.assert_allclose(estimate.qd, truth.qd, atol=1e-4)
    np.testing.assert_allclose(estimate.qdd, truth.qdd, atol=1e-2)
    logged = Dataset.from_positions(
        np.tile(t, 2), truth.q.reshape(-1, 1), trajectory=np.repeat([4, 9], 501), window=7, system="pendulum"
    )
    np.testing.assert_allclose(logged.qdd, truth.qdd.reshape(-1, 1), atol=1e-2)
    np.testing.assert_array_equal(logged.trajectory_ids, [4, 9])
    assert logged.dt == pytest.approx(0.01) and np.isnan(logged.energy).all()
    np.testing.assert_array_equal(logged.tau, 0.0)


def test_derivative_estimation_rejects_bad_input():
    t = np.linspace(0.0, 1.0, 21)
    q = np.zeros((21, 2))
    with pytest.raises(ValueError, match="window must be odd, > order"):
        estimate_derivatives(t, q, window=8)
    with pytest.raises(ValueError, match="needs uniformly sampled t"):
        estimate_derivatives(t**2, q)
    with pytest.raises(ValueError, match=r"q shape \(T, n\) or \(B, T, n\); got shapes \(21,\) and \(20, 2\)"):
        estimate_derivatives(t, q[:20])
    with pytest.raises(ValueError, match="method must be 'savgol' or 'spline'; got 'fd'"):
        estimate_derivatives(t, q, method="fd")
    with pytest.raises(ValueError, match="smoothing applies to method='spline'"):
        estimate_derivatives(t, q, smoothing=1.0)
    with pytest.raises(ValueError, match="strictly increasing within trajectory 0"):
        Dataset.from_positions(t[::-1], q)


def test_gravity_sinusoids_default_amplitude_keeps_the_panda_slow():
    # The light wrist joints (M_77 ~ 0.007 kg m^2) whirled at 60-200 rad/s under larger
    # excitations; the default (0.5 s^-2 median M_jj) keeps the Panda near its real speeds.
    try:
        robot = simulations.panda()
    except ImportError as exc:  # the robots extra is not installed
        pytest.skip(str(exc))
    data = generate(robot, n_trajectories=10, duration=4.0, dt=0.02, seed=0, tau="gravity-sinusoids")
    assert 0.2 < np.abs(data.qd).max() < 15.0
    np.testing.assert_allclose(robot.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, rtol=0, atol=1e-8)


# ------------------------------------------------------ excitation trajectories


def test_sinusoid_derivatives_are_exact():
    motion = Sinusoids.random(3, 2, amplitude=(0.4, 0.2), frequencies=(0.2, 1.5), n_components=4, rng=5)
    t, h = np.linspace(0.0, 2.0, 7), 1e-4
    for order in (1, 2):
        ahead = motion.sample(t + h, derivative=order - 1)
        behind = motion.sample(t - h, derivative=order - 1)
        np.testing.assert_allclose(motion.sample(t, derivative=order), (ahead - behind) / (2 * h), rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="derivative must be an integer >= 0; got -1"):
        motion.sample(t, derivative=-1)


class _LimitedArm(simulations.PlanarArm):
    """A planar arm whose second joint is limited to [-0.2, 0.4] rad (the first is free)."""

    @property
    def position_limits(self):
        return np.array([-np.inf, -0.2]), np.array([np.inf, 0.4])


def _excitation(system, **options):
    from lnn.data import excitation_trajectories

    settings = dict(n_trajectories=6, duration=2.0, dt=0.01, seed=2)
    return excitation_trajectories(system, **{**settings, **options})


def test_excitation_trajectories_are_motions_of_the_true_system():
    from lnn.data import EXCITATION_AMPLITUDE

    arm = simulations.PlanarArm()
    data = _excitation(arm)
    # The recorded torques drive the true system along the recorded motion.
    np.testing.assert_allclose(arm.acceleration(data.q, data.qd, data.tau), data.qdd, rtol=0, atol=1e-9)
    np.testing.assert_allclose(data.energy, arm.energy(data.q, data.qd), rtol=0, atol=1e-12)
    trajectories = data.as_trajectory()
    # qd and qdd are the time derivatives of q (second-order differences on the 0.01 s grid).
    step = trajectories.t[1] - trajectories.t[0]
    np.testing.assert_allclose(
        np.gradient(trajectories.q, step, axis=1)[:, 1:-1], trajectories.qd[:, 1:-1], rtol=0, atol=2e-3
    )
    np.testing.assert_allclose(
        np.gradient(trajectories.qd, step, axis=1)[:, 1:-1], trajectories.qdd[:, 1:-1], rtol=0, atol=2e-2
    )
    excursion = trajectories.q.max(axis=1) - trajectories.q.min(axis=1)
    assert (excursion <= 2 * EXCITATION_AMPLITUDE + 1e-12).all() and (excursion > 0.01).all()
    assert data.angular == arm.angular and data.system == arm.name


def test_excitation_trajectories_are_seeded_and_batch_independent():
    arm = simulations.PlanarArm()
    first, again = _excitation(arm), _excitation(arm, batch_size=4)
    for name in ("t", "q", "qd", "qdd", "tau", "trajectory", "energy"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert not np.allclose(first.q, _excitation(arm, seed=3).q)
    calls = []
    _excitation(arm, batch_size=4, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4, 6), (6, 6)]


def test_excitation_trajectories_stay_inside_position_limits():
    arm = _LimitedArm()
    data = _excitation(arm, n_trajectories=40, amplitude=0.5, margin=0.1)
    # Joint 2's range (0.6 rad) is narrower than twice the amplitude: it is shrunk to fit
    # inside the limits less 10 % of the range at each end.
    assert data.q[:, 1].min() >= -0.2 + 0.06 - 1e-12 and data.q[:, 1].max() <= 0.4 - 0.06 + 1e-12
    assert np.ptp(data.q[:, 1]) > 0.2
    # The free joint keeps its amplitude around centres drawn by sample_state.
    assert np.ptp(data.as_trajectory().q[:, :, 0], axis=1).max() > 0.5
    np.testing.assert_allclose(arm.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, rtol=0, atol=1e-10)


def test_excitation_trajectories_of_the_panda_respect_its_limits():
    try:
        robot = simulations.panda()
    except ImportError as exc:  # the robots extra is not installed
        pytest.skip(str(exc))
    data = _excitation(robot, n_trajectories=20, duration=1.0, dt=0.02)
    lower, upper = robot.position_limits
    assert (data.q > lower).all() and (data.q < upper).all()
    assert np.abs(data.qd).max() < 2.6  # the Panda's joint speed limits are 2.2-2.6 rad/s
    np.testing.assert_allclose(robot.inverse_dynamics(data.q, data.qd, data.qdd), data.tau, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"margin": 0.5}, ValueError, r"margin must be a number in \[0, 0.5\); got 0.5"),
        ({"dt": 0.0}, ValueError, "dt must be a finite number > 0; got 0.0"),
        ({"n_trajectories": 0}, ValueError, "n_trajectories"),
        ({"amplitude": -1.0}, ValueError, "amplitude must be a non-negative number"),
        ({"frequencies": (1.0, 0.5)}, ValueError, "frequencies must be a band"),
    ],
)
def test_excitation_trajectories_reject_bad_arguments(options, error, message):
    with pytest.raises(error, match=message):
        _excitation(simulations.PlanarArm(), **options)


def test_excitation_trajectories_need_inverse_dynamics():
    with pytest.raises(TypeError, match="system must have inverse_dynamics"):
        _excitation(object())


# -------------------------------------------------------------- joint names


def test_joint_names_are_checked_kept_saved_and_optional_in_old_files(tmp_path):
    data = _recording(duration=1.0)
    assert data.joint_names is None
    named = Dataset(
        t=data.t, q=data.q, qd=data.qd, qdd=data.qdd, tau=data.tau, trajectory=data.trajectory, joint_names=["a", "b"]
    )
    assert named.joint_names == ("a", "b") and named.subset([0]).joint_names == ("a", "b")
    assert named.split(fractions=(0.5, 0.5, 0.0), by="time").train.joint_names == ("a", "b")
    named.save(tmp_path / "named.npz")
    assert Dataset.load(tmp_path / "named.npz").joint_names == ("a", "b")
    for bad in (["a"], ["a", "a"], ["a", ""]):
        with pytest.raises(ValueError, match=r"Dataset.joint_names must be 2 distinct non-empty names or None"):
            Dataset(
                t=data.t, q=data.q, qd=data.qd, qdd=data.qdd, tau=data.tau, trajectory=data.trajectory, joint_names=bad
            )
    # A file written before datasets had joint names (no such metadata) still loads, with None.
    arrays = {name: getattr(data, name) for name in ("t", "q", "qd", "qdd", "tau", "trajectory", "energy")}
    write_npz(tmp_path / "old.npz", arrays, kind="dataset", metadata={"system": "", "parameters": {}, "angular": []})
    assert Dataset.load(tmp_path / "old.npz").joint_names is None


# ------------------------------------------------------ validation on one log


@pytest.mark.parametrize("span", [0.92, 0.25])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_validation_on_one_recording_holds_out_its_share_and_loses_only_the_window(span, seed):
    import warnings

    from lnn.train._data import validation_split

    # The log: 13 500 samples at 1 kHz; validation=0.1 held out 26.5 % and dropped 1 836 more samples.
    data = _recording(duration=13.5, dt=1e-3, span=span)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = validation_split(data, 0.1, seed=seed)
    assert parts.by == "time"
    # Stated tolerance: the validation share within 0.1 % of 10 % of the samples.
    assert abs(len(parts.validation) / len(data) - 0.1) < 1e-3
    # Lost: one derivative window per boundary between the parts (the validation block has one or two).
    boundaries = parts.validation.n_trajectories + parts.train.n_trajectories - 1
    assert parts.validation.n_trajectories == 1 and 1 <= boundaries <= 2
    assert parts.dropped <= boundaries * math.ceil(span / 1e-3)
    assert len(parts.train) + len(parts.validation) + parts.dropped == len(data)
    train = np.sort(parts.train.t)
    nearest = np.clip(np.searchsorted(train, parts.validation.t), 1, train.shape[0] - 1)
    gaps = np.minimum(np.abs(train[nearest] - parts.validation.t), np.abs(train[nearest - 1] - parts.validation.t))
    assert gaps.min() >= span - 1e-9


def test_validation_on_two_recordings_holds_out_its_share():
    import warnings

    from lnn.train._data import validation_split

    data = _recording(duration=6.0, dt=1e-3, span=0.3, trajectories=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = validation_split(data, 0.2, seed=0)
    assert abs(len(parts.validation) / len(data) - 0.2) < 1e-3
    assert parts.dropped <= (parts.validation.n_trajectories + parts.train.n_trajectories - 1) * 300
