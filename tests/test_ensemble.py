"""lnn.Ensemble: one compiled training step, predictions with their spread, calibration, rollouts, files, plots, CLI."""

from __future__ import annotations

import importlib
import json
import warnings
from statistics import NormalDist
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import t as student_t

pytest.importorskip("tensorflow")

import lnn  # noqa: E402
import simulations  # noqa: E402
from lnn import uncertainty  # noqa: E402
from lnn.models.ensemble import EnsembleCalibration  # noqa: E402
from lnn.train import _ensemble  # noqa: E402

OPTIONS = dict(angular=True, dtype="float64", hidden=(16, 16))
#: For tests whose subject is not XLA (the weights, the calibration): plain graphs, no XLA compilation (10-15 s
#: an ensemble). The ``trained`` ensemble keeps the defaults (``xla=True``): it covers XLA's training step and calls.
PLAIN = dict(OPTIONS, xla=False)


@pytest.fixture(scope="module")
def data():
    return lnn.generate(simulations.DoublePendulum(g=9.8), n_trajectories=24, duration=1.0, dt=0.05, seed=0)


@pytest.fixture(scope="module")
def trained(data):
    """A 3-member ensemble after two epochs (members' initial weights kept for the checks)."""
    ensemble = lnn.Ensemble(2, 3, seed=0, **OPTIONS)
    before = [[v.numpy().copy() for v in m.trainable_variables] for m in ensemble.members]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.IdentifiabilityWarning)
        history = lnn.fit(ensemble, data, epochs=2, batch_size=64, validation=0.25, seed=0)
    return SimpleNamespace(ensemble=ensemble, history=history, before=before)


def _states(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-np.pi, np.pi, (n, 2)), rng.normal(0.0, 1.0, (n, 2))


# -- construction ---------------------------------------------------------------------------


def test_members_share_a_configuration_and_differ_by_seed():
    ensemble = lnn.Ensemble(2, 4, seed=7, kind="kinetic-potential", **OPTIONS)
    assert ensemble.n_members == 4 and ensemble.kind == "kinetic-potential" and ensemble.angular == (True, True)
    assert [m.seed for m in ensemble.members] == [7, 8, 9, 10]
    configs = [{k: v for k, v in m.get_config().items() if k not in ("seed", "name")} for m in ensemble.members]
    assert all(c == configs[0] for c in configs)
    first = [m.trainable_variables[0].numpy() for m in ensemble.members]
    assert not np.allclose(first[0], first[1])


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(members=1), ValueError),
        (dict(members=2, kind="no-such-kind"), ValueError),
        (dict(members=2, seed=1.5), TypeError),
    ],
)
def test_bad_options_are_refused(kwargs, error):
    with pytest.raises(error):
        lnn.Ensemble(2, **kwargs)


# -- training --------------------------------------------------------------------------------


def test_fit_trains_every_member_in_one_traced_step(trained):
    assert trained.history.traces == 1
    for member, before in zip(trained.ensemble.members, trained.before):
        moved = [not np.allclose(v.numpy(), b) for v, b in zip(member.trainable_variables, before)]
        assert all(moved)
    assert np.all(np.isfinite(trained.history.train["total"]))


def test_fit_calibrates_on_its_validation_data(trained):
    ensemble = trained.ensemble
    assert ensemble.calibrated
    assert np.all(ensemble.qdd_scale.numpy() > 0) and np.all(ensemble.qdd_floor.numpy() >= 0)
    assert float(ensemble.disagreement_scale.numpy()) > 0


def test_bootstrap_weights_resample_trajectories_or_blocks():
    ids = np.repeat(np.arange(20), 7)
    weights = _ensemble.bootstrap_weights(ids, 4, seed=3)
    assert weights.shape == (140, 4)
    for k in range(4):
        per_trajectory = weights[:, k].reshape(20, 7)
        assert np.all(per_trajectory == per_trajectory[:, :1])  # one count per trajectory
        assert per_trajectory[:, 0].sum() == 20  # a resample of 20 trajectories
    assert not np.array_equal(weights[:, 0], weights[:, 1])
    np.testing.assert_array_equal(weights, _ensemble.bootstrap_weights(ids, 4, seed=3))
    one_log = _ensemble.bootstrap_weights(np.zeros(100, int), 2, seed=0)  # one recording: 10 blocks of 10
    assert np.all(one_log[:, 0].reshape(10, 10) == one_log[:, :1].reshape(10, 10)[:, :1])
    assert one_log[:, 0].sum() == 100
    np.testing.assert_array_equal(_ensemble.bootstrap_weights(ids, 3, seed=0, bootstrap=False), 1.0)


def test_the_step_is_the_sum_of_the_members_weighted_losses(data):
    """Each member's gradient is that of its own bootstrap-weighted loss (no coupling through the mean)."""
    import tensorflow as tf

    from lnn.train import _data, _model
    from lnn.train._losses import loss_weights

    ensemble = lnn.Ensemble(2, 2, seed=0, **PLAIN)
    prepared = _data.prepare(data, None, seed=0, horizon=5, rollout=False)
    strategy, dtype = _model.prepare(ensemble, prepared, strategy=None, adapt=True, initialization=None, seed=0)
    prepared = _ensemble.weighted(prepared, ensemble, seed=0)
    pipeline = _data.Pipeline(prepared, batch_size=32, dtype=dtype, strategy=strategy)
    options = dict(data=prepared, signature=pipeline.element_spec, optimizer=None, strategy=strategy, dtype=dtype)
    trainer = _ensemble.build_trainer(ensemble, loss_weights("acceleration"), xla=False, clipnorm=None, **options)
    batch = next(iter(pipeline.epoch(0, shuffle=False, seed=0)))
    sums, rows, grads = trainer.local_gradients(*batch)
    scale = trainer.scales["qdd"]
    for k, member in enumerate(ensemble.members):
        with tf.GradientTape() as tape:
            qdd = member((batch[0], batch[1], batch[3]))
            loss = tf.reduce_sum(batch[4][:, k] * tf.reduce_mean(((qdd - batch[2]) / scale) ** 2, axis=-1))
        expected = tape.gradient(loss, member.trainable_variables)
        for i, g in zip(trainer.groups[k], expected):
            np.testing.assert_allclose(grads[i].numpy() * 2, g.numpy(), rtol=1e-9, atol=1e-12)


# -- predictions --------------------------------------------------------------------------------


def test_predict_is_the_members_mean_and_spread(trained):
    ensemble = trained.ensemble
    q, qd = _states(50)
    tau, qdd = np.random.default_rng(1).normal(size=(2, 50, 2))
    prediction = ensemble.predict(q, qd, tau=tau, qdd=qdd)
    members_qdd = np.stack([m.acceleration(q, qd, tau).numpy() for m in ensemble.members])
    members_tau = np.stack([m.inverse_dynamics(q, qd, qdd).numpy() for m in ensemble.members])
    np.testing.assert_allclose(prediction.qdd_members, members_qdd, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(prediction.qdd, members_qdd.mean(0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(prediction.qdd_spread, members_qdd.std(0, ddof=1), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(prediction.tau, members_tau.mean(0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(prediction.tau_spread, members_tau.std(0, ddof=1), rtol=1e-8, atol=1e-10)
    a, b = ensemble.qdd_scale.numpy(), ensemble.qdd_floor.numpy()
    np.testing.assert_allclose(prediction.qdd_std, np.sqrt((a * prediction.qdd_spread) ** 2 + b**2), rtol=1e-12)
    band = prediction.interval("qdd", level=0.9)
    dof = ensemble.qdd_dof.numpy().astype(np.float64)
    np.testing.assert_array_equal(prediction.qdd_dof, dof)
    half = np.where(np.isinf(dof), 1.6448536269514722, student_t.ppf(0.95, np.minimum(dof, 1e9)) * np.sqrt(1 - 2 / dof))
    np.testing.assert_allclose(band.upper - band.mean, half * prediction.qdd_std, rtol=1e-12)
    assert ensemble.predict(q, qd).tau is None
    with pytest.raises(ValueError, match="no tau"):
        ensemble.predict(q, qd).interval("tau")


def test_the_mean_mechanics_are_the_members_means(trained):
    ensemble = trained.ensemble
    q, qd = _states(5, seed=2)
    for method, args in (("acceleration", (q, qd)), ("mass_matrix", (q, qd)), ("energy", (q, qd))):
        expected = np.mean([getattr(m, method)(*args).numpy() for m in ensemble.members], axis=0)
        np.testing.assert_allclose(getattr(ensemble, method)(*args).numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ensemble((q, qd)).numpy(), ensemble.acceleration(q, qd).numpy(), rtol=1e-10)


def test_the_mean_is_differentiable_and_integrates_in_tensorflow():
    """The mean's gradient is the members' mean gradient; odeint integrates the mean (any weights serve: plain
    graphs, the XLA calls under a tape are test_compiled's)."""
    import tensorflow as tf

    from lnn.odeint import odeint

    ensemble = lnn.Ensemble(2, 3, seed=0, **PLAIN)
    q, qd = (tf.constant(x) for x in _states(4, seed=11))
    with tf.GradientTape() as tape:
        tape.watch(q)
        qdd = ensemble.acceleration(q, qd)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(q)
        members = [m.acceleration(q, qd) for m in ensemble.members]
        mean = ensemble.acceleration(q, qd)
    expected = sum(tape.gradient(m, q).numpy() for m in members) / len(members)
    np.testing.assert_allclose(tape.gradient(mean, q).numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(qdd.numpy(), ensemble.predict(q.numpy(), qd.numpy()).qdd, rtol=1e-10, atol=1e-12)
    path = odeint(ensemble, q, qd, np.linspace(0.0, 0.1, 3))
    assert path.q.shape == (4, 3, 2)


def test_predict_refuses_bad_shapes(trained):
    with pytest.raises(ValueError, match="qd"):
        trained.ensemble.predict(np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="batch"):
        trained.ensemble.predict(np.zeros(2), np.zeros(2))


# -- calibration ---------------------------------------------------------------------------------


def test_fit_calibration_recovers_a_known_scale_and_floor():
    rng = np.random.default_rng(0)
    spread = rng.lognormal(0.0, 0.8, (40_000, 2))
    scale, floor = np.array([2.5, 0.7]), np.array([0.3, 1.2])
    mean = rng.normal(size=spread.shape)
    truth = mean + np.sqrt((scale * spread) ** 2 + floor**2) * rng.normal(size=spread.shape)
    fitted = uncertainty.fit_calibration("qdd", truth, mean, spread)
    np.testing.assert_allclose(fitted.scale, scale, rtol=0.03)
    np.testing.assert_allclose(fitted.floor, floor, rtol=0.06)
    np.testing.assert_allclose(fitted.coverage[0.9], 0.9, atol=0.01)
    np.testing.assert_allclose(fitted.coverage[0.5], 0.5, atol=0.01)
    assert np.all(fitted.nll < fitted.raw_nll)


def test_the_tails_half_widths_and_likelihoods_are_the_student_t_closed_forms():
    """A Student-t of nu degrees of freedom scaled to unit variance: its central interval of probability p is
    +-t_nu(0.5 + p / 2) sqrt((nu - 2) / nu) standard deviations, the Gaussian's z(p) when nu is inf."""
    dof = np.array([3.0, 6.0, 50.0, np.inf])
    for level in (0.5, 0.9):
        half = uncertainty.standard_quantile(level, dof)
        np.testing.assert_allclose(half[:3], student_t.ppf(0.5 + level / 2, dof[:3]) * np.sqrt((dof[:3] - 2) / dof[:3]))
        assert half[3] == uncertainty.z_value(level)
        scaled = half[:3] / np.sqrt((dof[:3] - 2) / dof[:3])  # back in the t's own units: probability p inside
        np.testing.assert_allclose(student_t.cdf(scaled, dof[:3]) - student_t.cdf(-scaled, dof[:3]), level)
    np.testing.assert_allclose(uncertainty.standard_quantile(0.9, 6.0), 1.5866, atol=1e-4)  # narrower than 1.645
    np.testing.assert_allclose(uncertainty.standard_quantile(0.5, 6.0), 0.5859, atol=1e-4)  # narrower than 0.674
    with pytest.raises(ValueError, match=r"dof must be above 2 \(or inf for Gaussian tails\), got"):
        uncertainty.standard_quantile(0.9, [2.0, 5.0])
    rng = np.random.default_rng(5)
    truth, mean = rng.normal(size=(2, 500, 2))
    std = rng.uniform(0.5, 2.0, (500, 2))
    np.testing.assert_allclose(
        uncertainty.predictive_nll(truth, mean, std), uncertainty.gaussian_nll(truth, mean, std), rtol=1e-12
    )
    nu = np.array([4.0, np.inf])
    nll = uncertainty.predictive_nll(truth, mean, std, nu)
    scale = std[:, 0] * np.sqrt((nu[0] - 2) / nu[0])
    np.testing.assert_allclose(nll[0], -np.mean(student_t.logpdf(truth[:, 0], nu[0], loc=mean[:, 0], scale=scale)))
    np.testing.assert_allclose(nll[1], uncertainty.gaussian_nll(truth, mean, std)[1], rtol=1e-12)
    inside = uncertainty.coverage(truth, mean, std, 0.9, nu)
    k = uncertainty.standard_quantile(0.9, nu)
    np.testing.assert_array_equal(inside, np.mean(np.abs(truth - mean) <= k * std, axis=0))


def test_fit_calibration_recovers_heavy_tails_and_keeps_gaussian_ones():
    """Errors of standard deviation sqrt((a s)² + b²) whose shape is a Student-t of 5 degrees of freedom on one
    output and Gaussian on the other: the fit finds the standard deviation, nu near 5 and inf, and its intervals
    cover their nominal level where the Gaussian ones of the same standard deviation over-cover at 50 %."""
    rng = np.random.default_rng(6)
    spread = rng.lognormal(0.0, 0.5, (60_000, 2))
    scale, floor = np.array([1.5, 0.8]), np.array([0.4, 0.6])
    std = np.sqrt((scale * spread) ** 2 + floor**2)
    shape = np.stack([rng.standard_t(5.0, 60_000) * np.sqrt(3.0 / 5.0), rng.normal(size=60_000)], axis=1)
    error = std * shape
    fitted = uncertainty.fit_calibration("tau", error, np.zeros_like(error), spread)
    np.testing.assert_allclose(fitted.scale, scale, rtol=0.05)
    np.testing.assert_allclose(fitted.floor, floor, rtol=0.12)
    np.testing.assert_allclose(fitted.dof[0], 5.0, rtol=0.15)
    assert np.isinf(fitted.dof[1])
    for level in uncertainty.LEVELS:
        np.testing.assert_allclose(fitted.coverage[level], level, atol=0.01)
    assert uncertainty.coverage(error, np.zeros_like(error), std, 0.5)[0] > 0.53  # Gaussian, the true std: too wide
    gaussian = uncertainty.fit_calibration("tau", error, np.zeros_like(error), spread, tails="gaussian")
    assert np.all(np.isinf(gaussian.dof)) and gaussian.coverage[0.5][0] > 0.53
    assert gaussian.nll[0] > fitted.nll[0]  # the Student-t is the likelier
    np.testing.assert_allclose(gaussian.nll[1], fitted.nll[1], rtol=1e-9)
    with pytest.raises(ValueError, match="tails must be 'student' or 'gaussian', got 'laplace'"):
        uncertainty.fit_calibration("tau", error, np.zeros_like(error), spread, tails="laplace")


def test_an_ensemble_saved_before_the_tails_loads_with_gaussian_ones(trained):
    """A file of six own variables (scales, floors, disagreement, the flag; no degrees of freedom) loads them and
    leaves the tails Gaussian."""
    ensemble = lnn.Ensemble.from_members(trained.ensemble.members)
    ensemble.qdd_dof.assign(np.array([4.0, 7.0], ensemble.qdd_dof.dtype))
    old = [np.array([2.0, 3.0]), np.array([0.1, 0.2]), np.array([4.0, 5.0]), np.array([0.3, 0.4]), 1.5, 1.0]
    ensemble.load_own_variables({str(k): np.asarray(v, np.float32) for k, v in enumerate(old)})
    np.testing.assert_allclose(ensemble.qdd_scale.numpy(), [2.0, 3.0])
    np.testing.assert_allclose(ensemble.tau_floor.numpy(), [0.3, 0.4])
    assert ensemble.calibrated and float(ensemble.disagreement_scale.numpy()) == 1.5
    assert np.all(np.isinf(ensemble.qdd_dof.numpy())) and np.all(np.isinf(ensemble.tau_dof.numpy()))
    q, qd = _states(5, seed=3)
    prediction = ensemble.predict(q, qd)
    band = prediction.interval("qdd", level=0.5)
    np.testing.assert_allclose(band.upper - band.mean, uncertainty.z_value(0.5) * prediction.qdd_std, rtol=1e-12)


def test_fit_calibration_covers_each_recording_by_the_others():
    """Three recordings with errors of size 1 and one of size 2, no spread: calibrated on the other three (Gaussian)
    the hard one is covered as |N(0, 4)| < 1.645 (59 %); each easy one by the fit on the two others and the hard one
    (heavy tails: two scales pooled), as that fit covers it when made alone."""
    rng = np.random.default_rng(1)
    sizes = np.array([1.0, 1.0, 1.0, 2.0])
    recording = np.repeat(["c", "a", "b", "hard"], 20_000)
    error = np.repeat(sizes, 20_000)[:, None] * rng.normal(size=(80_000, 2))
    zero = np.zeros_like(error)
    fitted = uncertainty.fit_calibration("tau", error, zero, zero, recording=recording)
    assert fitted.recordings == ("a", "b", "c", "hard")  # sorted labels, the rows of recording_coverage
    assert set(fitted.recording_coverage) == set(uncertainty.LEVELS)
    for level in uncertainty.LEVELS:
        hard = 2 * NormalDist().cdf(uncertainty.z_value(level) * 0.5) - 1
        np.testing.assert_allclose(fitted.recording_coverage[level][3], hard, atol=0.012)
    for r, label in enumerate(("a", "b", "c")):
        mine = recording == label
        others = uncertainty.fit_calibration("tau", error[~mine], zero[~mine], zero[~mine])
        assert np.all(others.dof < uncertainty.GAUSSIAN_DOF)
        std = uncertainty.interval_std(zero[mine], others.scale, others.floor)
        for level in uncertainty.LEVELS:
            alone = uncertainty.coverage(error[mine], zero[mine], std, level, others.dof)
            np.testing.assert_allclose(fitted.recording_coverage[level][r], alone, rtol=1e-12)
            assert fitted.recording_coverage[level][r].min() > level  # an easy recording: covered beyond nominal
    np.testing.assert_allclose(fitted.coverage[0.9], 0.9, atol=0.02)  # the pooled fit, on its own data
    alone = uncertainty.fit_calibration("tau", error, zero, zero)
    assert alone.recordings == () and alone.recording_coverage == {}
    np.testing.assert_allclose(alone.floor, fitted.floor)
    one = uncertainty.fit_calibration("tau", error, zero, zero, recording=np.full(80_000, 7))
    assert one.recordings == ("7",) and one.recording_coverage == {}
    with pytest.raises(ValueError, match=r"recording must have shape \(N,\) = \(80000,\), got \(3,\)"):
        uncertainty.fit_calibration("tau", error, zero, zero, recording=np.arange(3))


def test_many_recordings_are_left_out_in_at_most_ten_groups(monkeypatch):
    """25 recordings cost the pooled fit and 10 fits without a group each, not 25; every recording gets its cover,
    and a recording in a group of easy ones is still judged by a fit that never saw it."""
    fits = []
    columns = uncertainty._fit_columns

    def count(error, spread, heavy=True):
        fits.append(error.shape[0])
        return columns(error, spread, heavy)

    monkeypatch.setattr(uncertainty, "_fit_columns", count)
    rng = np.random.default_rng(2)
    sizes = np.where(np.arange(25) == 24, 3.0, 1.0)  # the last recording three times as hard
    error = np.repeat(sizes, 2000)[:, None] * rng.normal(size=(50_000, 1))
    zero = np.zeros_like(error)
    fitted = uncertainty.fit_calibration("tau", error, zero, zero, recording=np.repeat(np.arange(25), 2000))
    assert len(fits) == 1 + uncertainty.RECORDING_FOLDS and fits[0] == 50_000
    assert fitted.recording_coverage[0.9].shape == (25, 1)
    assert fitted.recording_coverage[0.9][24, 0] < 0.6 < fitted.recording_coverage[0.9][:24].min()


def test_calibration_metrics_cover_each_recording():
    """Three recordings whose errors are 0.5, 1 and 3 interval standard deviations exactly: inside a 90 % interval
    (z = 1.645) the first two, outside the third; the pooled coverage is their mean weighted by length."""
    lengths, errors = (100, 200, 100), (0.5, 1.0, 3.0)
    truth = np.concatenate([np.full((m, 2), e) for m, e in zip(lengths, errors)])
    recording = np.repeat([7, 2, 5], lengths)
    measured = lnn.metrics.calibration(truth, np.zeros_like(truth), np.ones_like(truth), recording=recording)
    assert measured.recordings == (2, 5, 7)
    np.testing.assert_array_equal(measured.recording_coverage[0.9], [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    np.testing.assert_array_equal(measured.recording_coverage[0.5], [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    np.testing.assert_allclose(measured.coverage[0.9], 0.75)
    assert lnn.metrics.calibration(truth, truth, np.ones_like(truth)).recording_coverage == {}
    with pytest.raises(ValueError, match=r"recording must label every sample, shape \(400,\), got shape \(3,\)"):
        lnn.metrics.calibration(truth, truth, np.ones_like(truth), recording=[1, 2, 3])


def test_calibrate_finds_the_noise_of_the_targets(trained):
    """Targets = the ensemble's mean plus Gaussian noise of known size: the floor is that noise."""
    ensemble = lnn.Ensemble.from_members(trained.ensemble.members)
    q, qd = _states(6000, seed=3)
    rng = np.random.default_rng(4)
    tau = rng.normal(size=q.shape)
    mean = ensemble.predict(q, qd, tau=tau).qdd
    sigma = np.array([0.5, 2.0]) * np.abs(mean).mean(axis=0)
    qdd = mean + sigma * rng.normal(size=q.shape)
    result = ensemble.calibrate(SimpleNamespace(q=q, qd=qd, qdd=qdd, tau=tau))
    np.testing.assert_allclose(result.qdd.floor, sigma, rtol=0.05)
    np.testing.assert_allclose(ensemble.qdd_floor.numpy(), result.qdd.floor)
    held_q, held_qd = _states(6000, seed=5)
    held = ensemble.predict(held_q, held_qd, tau=tau)
    truth = held.qdd + sigma * rng.normal(size=held_q.shape)
    covered = lnn.metrics.calibration(truth, held.qdd, held.qdd_std)
    np.testing.assert_allclose(covered.coverage[0.9], 0.9, atol=0.015)
    np.testing.assert_allclose(covered.coverage[0.5], 0.5, atol=0.02)
    # The torques: the inverse dynamics at the data's qdd plus noise of 0.1.
    torque = ensemble.predict(q, qd, qdd=qdd).tau + 0.1 * rng.normal(size=q.shape)
    result = ensemble.calibrate(SimpleNamespace(q=q, qd=qd, qdd=qdd, tau=torque))
    np.testing.assert_allclose(result.tau.floor, 0.1, rtol=0.05)
    np.testing.assert_allclose(result.tau.coverage[0.9], 0.9, atol=0.015)


def test_the_reliability_diagram_lies_on_the_diagonal_for_truths_drawn_from_the_intervals(trained):
    """Calibrated on accelerations with Gaussian noise of a known size, the ensemble's intervals cover fresh noisy
    truths at their nominal level: every point of the diagram near the diagonal, on each of three recordings."""
    import matplotlib

    matplotlib.use("Agg")
    ensemble = lnn.Ensemble.from_members(trained.ensemble.members)
    rng = np.random.default_rng(30)
    q, qd = _states(6000, seed=31)
    tau = rng.normal(size=q.shape)
    mean = ensemble.predict(q, qd, tau=tau).qdd
    sigma = np.array([0.5, 2.0]) * np.abs(mean).mean(axis=0)
    ensemble.calibrate(SimpleNamespace(q=q, qd=qd, qdd=mean + sigma * rng.normal(size=q.shape), tau=tau))
    held_q, held_qd = _states(6000, seed=32)
    held = ensemble.predict(held_q, held_qd, tau=tau)
    truth = held.qdd + sigma * rng.normal(size=q.shape)
    t = np.tile(np.arange(2000) * 0.01, 3)
    data = lnn.Dataset(t=t, q=held_q, qd=held_qd, qdd=truth, tau=tau, trajectory=np.repeat([3, 1, 2], 2000))
    drawn = lnn.plot.calibration(ensemble, data, output="qdd")
    levels = np.asarray(lnn.plot._calibration.LEVELS)
    np.testing.assert_array_equal(drawn.levels, levels)
    assert drawn.coverage.shape == (19, 2) and drawn.output == "qdd"
    np.testing.assert_allclose(drawn.coverage, np.repeat(levels[:, None], 2, axis=1), atol=0.025)
    direct = uncertainty.coverage(truth, held.qdd, held.qdd_std, 0.9, held.qdd_dof)
    np.testing.assert_array_equal(drawn.coverage[list(levels).index(0.9)], direct)
    assert drawn.recordings == (1, 2, 3) and drawn.recording_coverage.shape == (19, 3, 2)
    np.testing.assert_allclose(drawn.recording_coverage, np.broadcast_to(levels[:, None, None], (19, 3, 2)), atol=0.05)
    assert set(drawn.lines) == {0, 1} and len(drawn.ax.lines) == 1 + 2 * (3 + 1)  # diagonal; per coordinate 3 + 1
    fig = matplotlib.figure.Figure()
    ax = fig.subplots()
    mine = lnn.plot.calibration(ensemble, data, output="qdd", levels=[0.5, 0.9], coordinates=1, recordings=False, ax=ax)
    assert mine.ax is ax and mine.figure is fig and len(ax.lines) == 2 and mine.coverage.shape == (2, 2)
    with pytest.raises(TypeError, match="calibration draws an ensemble's intervals; got a LagrangianNetwork"):
        lnn.plot.calibration(ensemble.members[0], data)
    with pytest.raises(ValueError, match=r"levels must lie in \(0, 1\), got \[0.5, 1.2\]"):
        lnn.plot.calibration(ensemble, data, levels=[0.5, 1.2])
    with pytest.raises(ValueError, match="output must be 'qdd' or 'tau', got 'q'"):
        lnn.plot.calibration(ensemble, data, output="q")


def test_calibrate_pools_the_training_samples_out_of_each_members_bag(trained):
    """Held-out errors of 0.1 and out-of-bag errors of 0.3: the fit is that of both, each error taken against the
    mean of the members that never saw the sample (weight 0); samples every member saw do not calibrate."""
    ensemble = lnn.Ensemble.from_members(trained.ensemble.members)
    rng = np.random.default_rng(11)
    q, qd = _states(3000, seed=12)
    qdd = rng.normal(size=q.shape)
    held = ensemble.predict(q, qd, qdd=qdd)
    tau = held.tau + 0.1 * rng.normal(size=q.shape)
    held_out = SimpleNamespace(q=q, qd=qd, qdd=qdd, tau=tau)
    alone = ensemble.calibrate(held_out)
    tq, tqd = _states(3000, seed=13)
    tqdd = rng.normal(size=tq.shape)
    weights = rng.integers(0, 3, size=(3000, 3)).astype(float)
    weights[:500] = 1.0  # seen by every member: not out of bag
    members = ensemble.predict(tq, tqd, qdd=tqdd).tau_members  # (K, M, n)
    unseen = weights == 0
    oob_mean = np.array([members[unseen[i] if unseen[i].any() else slice(None), i].mean(axis=0) for i in range(3000)])
    ttau = oob_mean + 0.3 * rng.normal(size=tq.shape)
    training = SimpleNamespace(q=tq, qd=tqd, qdd=tqdd, tau=ttau)
    pooled = ensemble.calibrate(held_out, training=training, weights=weights)
    rows = np.flatnonzero(unseen.any(axis=1))
    assert pooled.out_of_bag == rows.size and alone.out_of_bag == 0
    assert pooled.tau.samples == 3000 + rows.size
    spread = np.concatenate([held.tau_spread, members[:, rows].std(axis=0, ddof=1)])
    expected = uncertainty.fit_calibration(
        "tau",
        np.concatenate([tau, ttau[rows]]),
        np.concatenate([held.tau, oob_mean[rows]]),
        spread,
    )
    # The errors do not follow the spread: the scale is degenerate (about 0) and the floor is the fit.
    np.testing.assert_allclose(pooled.tau.floor, expected.floor, rtol=1e-6)
    np.testing.assert_allclose(pooled.tau.scale, expected.scale, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(pooled.tau.dof, expected.dof, rtol=1e-6)
    np.testing.assert_allclose(alone.tau.floor, 0.1, rtol=0.08)
    assert np.all(np.isinf(alone.tau.dof))  # Gaussian noise: Gaussian tails
    sizes = np.sqrt(pooled.tau.scale**2 * np.mean(spread**2, axis=0) + pooled.tau.floor**2)
    pooled_rms = np.sqrt((3000 * 0.1**2 + rows.size * 0.3**2) / (3000 + rows.size))  # not the held-out one's 0.1
    # Two scales pooled have heavy tails (a Student-t of few degrees of freedom, MIN_DOF here), whose fitted
    # standard deviation is that of the pooled errors within 12 % (0.219 against 0.199).
    np.testing.assert_allclose(sizes, pooled_rms, rtol=0.12)
    assert np.all(pooled.tau.dof < 10)
    np.testing.assert_allclose(ensemble.tau_floor.numpy(), pooled.tau.floor)
    # the disagreement's scale: the 99th percentile of the relative qdd spread over every calibration state
    reference = ensemble.members[0].qdd_std.numpy()
    held_spread = ensemble.predict(q, qd, tau=tau, qdd=qdd).qdd_spread  # qdd's at the data's torques
    oob_spread = ensemble.predict(tq[rows], tqd[rows], tau=ttau[rows], qdd=tqdd[rows]).qdd_spread
    relative = np.sqrt(np.mean((np.concatenate([held_spread, oob_spread]) / reference) ** 2, axis=-1))
    assert pooled.disagreement_scale == pytest.approx(np.percentile(relative, 99.0), rel=1e-6)
    relative_held = np.sqrt(np.mean((held_spread / reference) ** 2, axis=-1))
    assert alone.disagreement_scale == pytest.approx(np.percentile(relative_held, 99.0), rel=1e-6)


def test_calibrate_refuses_training_without_weights_and_weights_of_another_shape(trained):
    ensemble = lnn.Ensemble.from_members(trained.ensemble.members)
    q, qd = _states(50, seed=14)
    data = SimpleNamespace(q=q, qd=qd, qdd=np.zeros_like(q), tau=np.zeros_like(q))
    with pytest.raises(ValueError, match="together"):
        ensemble.calibrate(data, training=data)
    with pytest.raises(ValueError, match=r"weights must have shape \(M, K\) = \(50, 3\).*got \(50, 2\)"):
        ensemble.calibrate(data, training=data, weights=np.zeros((50, 2)))
    with pytest.raises(TypeError, match="training must be an lnn.Dataset"):
        ensemble.calibrate(data, training=object(), weights=np.zeros((50, 3)))


@pytest.mark.parametrize(("bootstrap", "n_train"), [(True, 18), (False, 18), (True, 12)])
def test_fit_calibrates_on_the_samples_out_of_each_members_bag(data, monkeypatch, bootstrap, n_train):
    """With fewer than 10 validation trajectories fit calibrates on them and on every k-th training sample some
    member never saw, with the weights it trained with (lnn.train.member_weights gives them to a caller);
    without a bootstrap no sample is out of bag, and 12 validation trajectories calibrate alone."""
    seen, calls = [], []
    weighted, calibrate = _ensemble.weighted, lnn.Ensemble.calibrate

    def spy_weights(training_data, model, *, seed):
        out = weighted(training_data, model, seed=seed)
        seen.append(out.train["weights"])
        return out

    def spy_calibrate(self, held, **kwargs):
        calls.append((held, kwargs))
        return calibrate(self, held, **kwargs)

    monkeypatch.setattr(_ensemble, "weighted", spy_weights)
    monkeypatch.setattr(_ensemble, "OUT_OF_BAG_SAMPLES", 100)
    monkeypatch.setattr(lnn.Ensemble, "calibrate", spy_calibrate)
    train, held_out = data.subset(range(n_train)), data.subset(range(n_train, 24))
    ensemble = lnn.Ensemble(2, 3, seed=0, bootstrap=bootstrap, **PLAIN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.IdentifiabilityWarning)
        lnn.fit(ensemble, train, loss="acceleration", epochs=1, batch_size=64, validation=held_out, seed=5)
    expected = lnn.train.member_weights(ensemble, train.trajectory, seed=5)
    assert len(seen) == 1 and expected.shape == (len(train), 3)
    np.testing.assert_array_equal(seen[0], expected)
    ((held, kwargs),) = calls
    if not bootstrap:
        assert (expected == 1).all()
    if not bootstrap or n_train == 12:
        np.testing.assert_array_equal(held.q, held_out.q)
        assert kwargs == {} and ensemble.calibrated
        assert ensemble.calibration.out_of_bag == 0
        assert ensemble.calibration.tau.recordings == tuple(f"held-out {k}" for k in range(n_train, 24))
        return
    assert (expected == 0).any(axis=1).mean() > 0.5  # most samples are out of some member's bag
    step = -(-len(train) // 100)  # every step-th training sample, 100 at most
    assert step > 1 and len(kwargs["training"].q) <= 100
    np.testing.assert_array_equal(kwargs["weights"], expected[::step])
    np.testing.assert_array_equal(kwargs["training"].qd, train.qd[::step])
    np.testing.assert_array_equal(held.q, held_out.q[::step])  # thinned alike: a recording weighs by its length
    np.testing.assert_array_equal(held.trajectory, held_out.trajectory[::step])
    assert ensemble.calibrated
    labels = ensemble.calibration.tau.recordings  # every recording that calibrated, by kind and id
    assert {f"held-out {k}" for k in range(n_train, 24)} <= set(labels)
    assert {label.split()[0] for label in labels} == {"held-out", "training"}


def test_fit_leaves_the_calibration_to_the_caller_when_told(data, monkeypatch):
    """fit(..., calibrate=False) trains and does not calibrate; _ensemble.calibrate_on then calibrates as fit would
    on the caller's arrays (identify's torques as recorded), the held-out samples thinned like the training ones."""
    monkeypatch.setattr(_ensemble, "OUT_OF_BAG_SAMPLES", 100)
    train, held_out = data.subset(range(18)), data.subset(range(18, 24))
    ensemble = lnn.Ensemble(2, 3, seed=0, **PLAIN)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.IdentifiabilityWarning)
        lnn.fit(ensemble, train, loss="acceleration", epochs=1, batch_size=64, validation=held_out, calibrate=False)
    assert not ensemble.calibrated and ensemble.calibration is None
    weights = lnn.train.member_weights(ensemble, train.trajectory, seed=0)
    arrays = {k: np.asarray(getattr(train, k)) for k in ("q", "qd", "qdd", "tau", "trajectory")}  # a mapping serves
    result = _ensemble.calibrate_on(ensemble, held_out, arrays, weights)
    assert ensemble.calibrated and result is ensemble.calibration
    assert 0 < result.out_of_bag <= 100
    assert {label.split()[0] for label in result.tau.recordings} == {"held-out", "training"}


def test_from_members_copies_trained_networks_and_refuses_mixtures(trained):
    members = trained.ensemble.members
    copy = lnn.Ensemble.from_members(members)
    assert not copy.calibrated and not copy.bootstrap
    q, qd = _states(20, seed=6)
    np.testing.assert_array_equal(copy.predict(q, qd).qdd_members, trained.ensemble.predict(q, qd).qdd_members)
    np.testing.assert_array_equal(copy.novelty(q, qd, disagreement=False), members[0].novelty(q, qd))
    other = lnn.LagrangianNetwork(2, angular=True, dtype="float64", hidden=(8, 8))
    with pytest.raises(ValueError, match="hidden"):
        lnn.Ensemble.from_members([members[0], other])
    with pytest.raises(TypeError):
        lnn.Ensemble.from_members([members[0]])


def test_novelty_of_an_ensemble_adds_its_disagreement(trained):
    ensemble = trained.ensemble
    q, qd = _states(200, seed=7)
    distance = ensemble.novelty(q, qd, disagreement=False)
    np.testing.assert_array_equal(distance, ensemble.members[0].novelty(q, qd))
    combined = ensemble.novelty(q, qd)
    assert np.all(combined >= distance)
    spread = ensemble.predict(q, qd).qdd_spread
    relative = np.sqrt(np.mean((spread / ensemble.members[0].qdd_std.numpy()) ** 2, axis=1))
    np.testing.assert_allclose(
        combined, np.maximum(distance, relative / float(ensemble.disagreement_scale.numpy())), rtol=1e-6
    )


# -- files ---------------------------------------------------------------------------------------


def test_save_and_load_give_the_same_ensemble(trained, tmp_path):
    path = tmp_path / "ensemble.keras"
    trained.ensemble.save(path)
    loaded = lnn.load_model(path)
    assert isinstance(loaded, lnn.Ensemble) and loaded.n_members == 3 and loaded.calibrated
    q, qd = _states(30, seed=8)
    qdd = np.random.default_rng(9).normal(size=q.shape)
    a, b = trained.ensemble.predict(q, qd, qdd=qdd), loaded.predict(q, qd, qdd=qdd)
    for name in ("qdd", "qdd_std", "tau", "tau_std"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(loaded.novelty(q, qd), trained.ensemble.novelty(q, qd))
    for x, y in zip(trained.ensemble.variables, loaded.variables):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    _assert_same_calibration(loaded.calibration, trained.ensemble.calibration)


def _assert_same_calibration(a, b):
    """Two :class:`lnn.EnsembleCalibration` s are equal field by field (arrays exactly, NaN equal to NaN)."""
    assert a is not None and b is not None
    assert (a.disagreement_scale, a.out_of_bag) == (b.disagreement_scale, b.out_of_bag)
    for output in ("qdd", "tau"):
        x, y = getattr(a, output), getattr(b, output)
        assert (x.output, x.samples, x.recordings) == (y.output, y.samples, y.recordings)
        for name in ("scale", "floor", "dof", "nll", "raw_nll"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
        for name in ("coverage", "raw_coverage", "recording_coverage"):
            assert getattr(x, name).keys() == getattr(y, name).keys()
            for level in getattr(x, name):
                np.testing.assert_array_equal(getattr(x, name)[level], getattr(y, name)[level])


def test_a_file_saved_before_the_tails_loads_with_gaussian_ones(trained, tmp_path):
    """A .keras file as written before the tails: the ensemble's own weights without the last two (qdd_dof,
    tau_dof), no assets. It loads with its scales and floors and Gaussian tails."""
    import zipfile

    h5py = pytest.importorskip("h5py")
    path, old = tmp_path / "new.keras", tmp_path / "old.keras"
    trained.ensemble.save(path)
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.namelist():
            if item.startswith("assets"):
                continue
            data = source.read(item)
            if item == "model.weights.h5":
                weights = tmp_path / "model.weights.h5"
                weights.write_bytes(data)
                with h5py.File(weights, "a") as file:
                    assert sorted(file["vars"].keys()) == [str(k) for k in range(8)]
                    del file["vars/6"], file["vars/7"]
                data = weights.read_bytes()
            target.writestr(item, data)
    loaded = lnn.load_model(old)
    assert loaded.calibration is None and loaded.calibrated
    assert np.all(np.isinf(loaded.qdd_dof.numpy())) and np.all(np.isinf(loaded.tau_dof.numpy()))
    np.testing.assert_array_equal(loaded.tau_scale.numpy(), trained.ensemble.tau_scale.numpy())
    np.testing.assert_array_equal(loaded.qdd_floor.numpy(), trained.ensemble.qdd_floor.numpy())


def test_the_calibration_summary_is_saved_and_an_uncalibrated_ensemble_has_none(trained, tmp_path):
    fitted = trained.ensemble.calibration
    assert fitted.tau.recordings and fitted.tau.recording_coverage  # a summary with every field filled
    _assert_same_calibration(EnsembleCalibration.from_json(json.loads(json.dumps(fitted.to_json()))), fitted)
    fresh = lnn.Ensemble(2, 2, angular=True, seed=3)
    fresh.predict(*_states(2, seed=1))  # built
    fresh.save(tmp_path / "fresh.keras")
    assert lnn.load_model(tmp_path / "fresh.keras").calibration is None
    with pytest.raises(ValueError, match="not a calibration written by Calibration.to_json: KeyError"):
        uncertainty.Calibration.from_json({"output": "tau"})


# -- rollouts -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ensemble_rollout(trained):
    q, qd = _states(4, seed=10)
    t = np.linspace(0.0, 0.5, 11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.NoveltyWarning)
        path = lnn.rollout(trained.ensemble, q, qd, t, method="RK45", rtol=1e-9, atol=1e-9)
    return SimpleNamespace(path=path, q=q, qd=qd, t=t)


def test_rollout_of_an_ensemble_rolls_every_member_out(trained, ensemble_rollout):
    path = ensemble_rollout.path
    assert isinstance(path, lnn.EnsembleTrajectory) and isinstance(path, lnn.Trajectory)
    assert path.member_q.shape == (3, 4, 11, 2) and path.member_energy.shape == (3, 4, 11)
    for k, member in enumerate(trained.ensemble.members):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", lnn.NoveltyWarning)
            alone = lnn.rollout(
                member, ensemble_rollout.q, ensemble_rollout.qd, ensemble_rollout.t, method="RK45", rtol=1e-9, atol=1e-9
            )
        np.testing.assert_array_equal(path.member_q[k], alone.q)
        np.testing.assert_array_equal(path.member(k).qd, alone.qd)
    np.testing.assert_allclose(path.q, path.member_q.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(path.std("qd"), path.member_qd.std(axis=0, ddof=1), rtol=1e-12)
    band = path.band("q", level=0.5)
    np.testing.assert_allclose(band.upper - path.q, 0.6744897501960817 * path.std("q"), rtol=1e-12, atol=1e-14)
    assert path.novelty.shape == (4, 11) and path.novel_at.shape == (4,)
    assert path.metadata["members"] == 3


def test_an_ensemble_rollout_selects_cuts_and_saves_with_its_members(ensemble_rollout, tmp_path):
    path = ensemble_rollout.path
    part = path[1:3].until(0.2)
    assert isinstance(part, lnn.EnsembleTrajectory) and part.member_q.shape == (3, 2, 5, 2)
    np.testing.assert_array_equal(part.member_qd, path.member_qd[:, 1:3, :5])
    path.save(tmp_path / "e.npz")
    loaded = lnn.Trajectory.load(tmp_path / "e.npz")
    assert isinstance(loaded, lnn.EnsembleTrajectory)
    np.testing.assert_array_equal(loaded.member_q, path.member_q)
    np.testing.assert_array_equal(loaded.novelty, path.novelty)
    from lnn.plot import RolloutPair

    pair = RolloutPair(path.member(0), path, {"system": "double-pendulum"})
    pair.save(tmp_path / "pair.npz")
    back = RolloutPair.load(tmp_path / "pair.npz")
    assert isinstance(back.learned, lnn.EnsembleTrajectory) and not isinstance(back.true, lnn.EnsembleTrajectory)
    np.testing.assert_array_equal(back.learned.member_qdd, path.member_qdd)


def test_band_coverage_counts_the_truth_inside_the_band(ensemble_rollout):
    path = ensemble_rollout.path
    inside = path.member(0)
    far = lnn.Trajectory(t=path.t, q=path.q + 1e3, qd=path.qd, qdd=path.qdd, tau=path.tau, energy=path.energy)
    assert np.all(lnn.metrics.band_coverage(path, far) == 0.0)
    coverage = lnn.metrics.band_coverage(path, inside, level=0.999999)
    assert coverage.shape == (2,) and np.all(coverage > 0.9)


# -- plots ----------------------------------------------------------------------------------------


def test_plots_draw_bands_for_an_ensemble(trained, ensemble_rollout):
    from lnn import plot

    path = ensemble_rollout.path
    true = path.member(0)
    drawn = plot.trajectories(true, path)
    assert len(drawn.band_artists) == 2 and all(len(row) == 4 for row in drawn.band_artists)
    assert plot.trajectories(true, true).band_artists == []
    phase = plot.phase_portraits(true, path, max_lines=2)
    assert len(phase.member_artists) == 2 and all(len(p) == 3 * 2 for p in phase.member_artists)
    energy = plot.energy_error({"ensemble": path}, summary="lines")
    assert len(energy.bands["ensemble"]) == 4
    torques = plot.torques(simulations.DoublePendulum(g=9.8), true, trained.ensemble)
    assert len(torques.bands) == 2
    single = plot.torques(simulations.DoublePendulum(g=9.8), true, trained.ensemble.members[0])
    assert single.bands == []


# -- evaluation -----------------------------------------------------------------------------------


def test_evaluate_reports_calibration_and_novelty_of_an_ensemble(trained, data):
    held = lnn.generate(simulations.DoublePendulum(g=9.8), n_trajectories=3, duration=0.5, dt=0.05, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.NoveltyWarning)
        table = lnn.evaluate(trained.ensemble, held, n_rollouts=2, method="RK45")
    values = table.as_dict()
    for name in ("qdd_coverage_50", "qdd_coverage_90", "rollout_band_coverage_90"):
        assert 0.0 <= values[name] <= 1.0
    assert np.isfinite(values["qdd_nll"]) and 0.0 <= values["novel_fraction"] <= 1.0
    assert "tau_coverage_90" not in values  # unforced data: no torque interval to check
    per_recording = table.details["qdd_calibration"].recording_coverage[0.9]  # (3 trajectories, 2 coordinates)
    assert table.details["qdd_calibration"].recordings == tuple(np.unique(held.trajectory).tolist())
    assert values["qdd_coverage_90_recording_min"] == pytest.approx(per_recording.mean(axis=1).min())
    assert values["qdd_coverage_90_recording_max"] == pytest.approx(per_recording.mean(axis=1).max())
    single = lnn.evaluate(trained.ensemble.members[0], held, n_rollouts=0).as_dict()
    assert "qdd_coverage_90" not in single and "novel_fraction" in single


# -- command line ---------------------------------------------------------------------------------


def test_lnn_identify_ensemble_prints_how_each_recording_was_covered(trained, tmp_path, monkeypatch, capsys):
    """``lnn identify --ensemble K`` prints the calibration: scale and floor, and the range over the calibration
    recordings of their coverage by intervals fitted on the others (identify itself is stubbed: its CLI only)."""
    from lnn.cli import main

    ensemble = lnn.Ensemble.from_members(trained.ensemble.members)
    q, qd = _states(600, seed=20)
    qdd = np.random.default_rng(21).normal(size=q.shape)
    tau = ensemble.predict(q, qd, qdd=qdd).tau + np.repeat([0.05, 0.1, 0.2], 200)[:, None]
    ensemble.calibrate(SimpleNamespace(q=q, qd=qd, qdd=qdd, tau=tau, trajectory=np.repeat([4, 7, 9], 200)))  # 3 logs
    asked = {}

    def identify(dataset, **options):
        asked.update(options)
        report = SimpleNamespace(format=lambda: "stages ...", chosen="residual")
        return SimpleNamespace(network=ensemble, report=report, save=lambda path, overwrite: None)

    monkeypatch.setattr(importlib.import_module("lnn.identification"), "identify", identify)
    trajectory = np.repeat([4, 7, 9], 200)
    data = lnn.Dataset(t=np.tile(np.arange(200) * 0.01, 3), q=q, qd=qd, qdd=qdd, tau=tau, trajectory=trajectory)
    data.save(tmp_path / "data.npz")
    assert main(["identify", str(tmp_path / "data.npz"), "-o", str(tmp_path / "m.keras"), "--ensemble", "3"]) == 0
    out = capsys.readouterr().out
    assert asked["ensemble"] == 3 and asked["residual_lagrangian"] is None  # the library's default
    assert "tau intervals calibrated on the validation data: scale" in out
    assert "nominal 90%: each of 3 recordings, calibrated on the others, covered per coordinate" in out
    for flag, value in (("both", "both"), ("yes", True), ("no", False)):
        arguments = ["identify", str(tmp_path / "data.npz"), "-o", str(tmp_path / "m.keras")]
        assert main([*arguments, "--residual-lagrangian", flag, "--force"]) == 0
        assert asked["residual_lagrangian"] == value and asked["residual_lagrangian"] is value
    capsys.readouterr()
    uncalibrated = lnn.Ensemble.from_members(trained.ensemble.members)
    from lnn.cli._common import print_calibration

    print_calibration(uncalibrated)
    assert "not calibrated" in capsys.readouterr().out


@pytest.mark.slow
def test_lnn_train_ensemble_writes_a_model_that_loads(data, tmp_path, capsys):
    from lnn.cli import main

    data_path, model_path = tmp_path / "data.npz", tmp_path / "ensemble.keras"
    data.save(data_path)
    code = main(
        ["train", str(data_path), "-o", str(model_path), "--ensemble", "2", "--hidden", "8,8", "--epochs", "1"]
        + ["--dtype", "float64"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "ensemble of 2 structured models" in out and "intervals calibrated" in out
    assert "recordings, calibrated on the others, covered per coordinate" in out
    model = lnn.load_model(model_path)
    assert isinstance(model, lnn.Ensemble) and model.n_members == 2 and model.calibrated
    assert main(["evaluate", str(model_path), str(data_path), "--rollouts", "0"]) == 0
    out = capsys.readouterr().out
    assert "qdd_coverage_90" in out and "novel states:" in out
    figure = tmp_path / "calibration.png"
    assert main(["plot", "calibration", str(model_path), str(data_path), "-o", str(figure)]) == 0
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert main(["plot", "calibration", str(model_path), "-o", str(tmp_path / "c.png")]) == 2
    assert "plot calibration needs exactly one held-out dataset .npz" in capsys.readouterr().err
    assert main(["train", str(data_path), "-o", str(tmp_path / "x.keras"), "--ensemble", "1"]) == 2
    assert "lnn train: error: --ensemble must be at least 2 members, got 1" in capsys.readouterr().err
    assert not (tmp_path / "x.keras").exists() and not (tmp_path / "c.png").exists()
