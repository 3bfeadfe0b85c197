"""lnn.residuals.analyze and lnn.plot.residuals on residuals with planted structure.

The data are exact: each joint follows a sum of sinusoids (closed-form ``q``,
``qd``, ``qdd``), the torque is the true double pendulum's inverse dynamics
plus a planted term, and the model is the true system, so the residual is the
planted term to rounding.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import lnn
import lnn.plot
import simulations
from lnn import residuals

DT, DURATION, RECORDINGS = 0.005, 20.0, 4
SYSTEM = simulations.DoublePendulum()


def _motion(t: np.ndarray, seed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q, qd, qdd (T, 2)``: four sinusoids per joint, 0.2-1.5 Hz, from ``seed``."""
    rng = np.random.default_rng(seed)
    frequency, amplitude, phase = (
        rng.uniform(0.2, 1.5, (4, 2)),
        rng.uniform(0.2, 0.6, (4, 2)),
        rng.uniform(0, 6, (4, 2)),
    )
    w = 2 * np.pi * frequency
    angle = w * t[:, None, None] + phase
    q = np.sum(amplitude * np.sin(angle), 1)
    return q, np.sum(amplitude * w * np.cos(angle), 1), -np.sum(amplitude * w**2 * np.sin(angle), 1)


def _data(*, seed=0, lag=0.0, planted=None, bias=None, noise=0.0, recordings=RECORDINGS) -> lnn.Dataset:
    """Recordings of the true system whose torque is read ``lag`` s late, plus planted terms and noise."""
    rng = np.random.default_rng([seed, 99])
    t = np.arange(int(round(DURATION / DT))) * DT
    parts = []
    for k in range(recordings):
        q, qd, qdd = _motion(t, [seed, k])
        tau = SYSTEM.inverse_dynamics(*_motion(t - lag, [seed, k]))
        if planted is not None:
            tau = tau + planted(q, qd)
        if bias is not None:
            tau = tau + bias[k]
        tau = tau + noise * rng.standard_normal(tau.shape)
        parts.append((t, q, qd, qdd, tau, np.full(t.size, k)))
    t, q, qd, qdd, tau, ids = (np.concatenate(x) for x in zip(*parts))
    return lnn.Dataset(t=t, q=q, qd=qd, qdd=qdd, tau=tau, trajectory=ids, angular=(True, True), dt=DT)


def _stribeck(q, qd):
    """Stribeck friction on joint 0, a position-dependent torque on joint 1."""
    v = qd[:, 0]
    friction = np.sign(v) * (0.2 + 0.3 * np.exp(-((v / 0.3) ** 2))) + 0.05 * v
    return np.stack([friction, 0.3 * np.sin(2 * q[:, 1])], -1)


@pytest.fixture(scope="module")
def planted():
    return residuals.analyze(SYSTEM, _data(planted=_stribeck, noise=0.05))


def test_the_residual_is_the_planted_term(planted):
    data = _data(planted=_stribeck)
    analysis = residuals.analyze(SYSTEM, data)
    np.testing.assert_allclose(analysis.residual, _stribeck(data.q, data.qd), rtol=0, atol=1e-10)
    np.testing.assert_allclose(analysis.mse, np.mean(_stribeck(data.q, data.qd) ** 2, 0), rtol=1e-9)
    assert analysis.n_dof == 2 and analysis.n_recordings == RECORDINGS and analysis.dt == pytest.approx(DT)


def test_stribeck_friction_is_a_function_of_qd_not_of_q(planted):
    assert planted.qd_share[0] > 0.9
    assert abs(planted.q_share[0]) < 0.05
    assert planted.qd_q_share[0] > 0.9
    assert abs(planted.bias_share[0]) < 0.02 and planted.lag_share[0] < 0.02


def test_a_position_dependent_term_is_a_function_of_q_not_of_qd(planted):
    assert planted.q_share[1] > 0.9
    assert abs(planted.qd_share[1]) < 0.05
    curve = planted.q_mean[1]
    inside = (curve.centers > -1.0) & (curve.centers < 1.0)  # the bins where the data are dense
    np.testing.assert_allclose(curve.mean[inside], 0.3 * np.sin(2 * curve.centers[inside]), atol=0.05)
    np.testing.assert_allclose(curve(curve.centers), curve.mean)


@pytest.mark.parametrize("lag", [0.03, -0.02])
def test_a_lag_between_the_streams_is_found_within_one_sample(lag):
    analysis = residuals.analyze(SYSTEM, _data(lag=lag, noise=0.01))
    np.testing.assert_allclose(analysis.lag, lag, atol=DT + 1e-12)
    assert np.all(analysis.lag_share > 0.95)  # reading the torque stream at t + lag removes the residual
    assert np.all(analysis.shift_share[np.argmin(np.abs(analysis.lags))] == 0.0)


def test_a_bias_per_recording_is_found():
    bias = np.array([[0.1, -0.05], [-0.1, 0.0], [0.05, 0.1], [0.0, -0.1]])
    noise = 0.05
    analysis = residuals.analyze(SYSTEM, _data(bias=bias, noise=noise))
    np.testing.assert_allclose(analysis.recording_mean, bias, atol=4 * noise / np.sqrt(DURATION / DT))
    explained = np.var(bias, 0) / (np.var(bias, 0) + noise**2)  # the share a constant per recording can explain
    np.testing.assert_allclose(analysis.bias_share, explained, atol=0.03)
    assert np.all(np.abs(analysis.qd_share) < 0.03) and np.all(np.abs(analysis.q_share) < 0.03)


def test_white_noise_leaves_every_share_near_zero():
    analysis = residuals.analyze(SYSTEM, _data(noise=0.1))
    for name in ("qd_share", "q_share", "qd_q_share", "qdd_share", "bias_share", "lag_share", "xcorr_share"):
        share = getattr(analysis, name)
        assert np.all(np.abs(share) < 0.01), (name, share)  # held out: 32 bins do not fit noise
    assert np.all(np.abs(analysis.xcorr_qd) < 0.05)
    nyquist = 0.5 / DT
    np.testing.assert_allclose(analysis.median_frequency, nyquist / 2, rtol=0.1)  # a flat spectrum
    np.testing.assert_allclose(analysis.power(), analysis.mse, rtol=0.05)  # Welch integrates to the mean square
    np.testing.assert_allclose(analysis.power(of="tau"), analysis.power(of="predicted") + analysis.mse, rtol=0.05)
    np.testing.assert_allclose(analysis.power_share(0, nyquist / 2), 0.5, atol=0.05)


def test_recordings_are_never_crossed_and_sample_order_does_not_matter():
    one = _data(lag=0.02, noise=0.01, recordings=1)
    copy = dataclasses.replace(one, trajectory=np.ones_like(one.trajectory))
    two = lnn.Dataset(
        t=np.r_[one.t, copy.t],
        q=np.r_[one.q, copy.q],
        qd=np.r_[one.qd, copy.qd],
        qdd=np.r_[one.qdd, copy.qdd],
        tau=np.r_[one.tau, copy.tau],
        trajectory=np.r_[one.trajectory, copy.trajectory],
    )
    half = one.tau.shape[0]
    assert np.all(np.abs(two.tau[half] - two.tau[half - 1]) > 5.0)  # the jump a shift across the boundary would see
    a, b = residuals.analyze(SYSTEM, one), residuals.analyze(SYSTEM, two)
    np.testing.assert_allclose(b.residual[half:], a.residual, atol=1e-12)
    np.testing.assert_allclose(b.shift_share, a.shift_share, rtol=1e-9)  # pooled over two identical recordings
    np.testing.assert_allclose(b.xcorr_qd, a.xcorr_qd, rtol=1e-9)
    np.testing.assert_allclose(b.psd, a.psd, rtol=1e-9)
    order = np.random.default_rng(0).permutation(2 * half)
    shuffled = lnn.Dataset(**{name: getattr(two, name)[order] for name in ("t", "q", "qd", "qdd", "tau", "trajectory")})
    c = residuals.analyze(SYSTEM, shuffled)
    np.testing.assert_array_equal(c.residual, b.residual)
    np.testing.assert_array_equal(c.qd_share, b.qd_share)


def test_by_recordings_scores_what_carries_over_to_a_recording_not_fitted_on():
    """Joint 0's Stribeck friction is the same in every recording, joint 1's position term changes sign from
    one recording to the next: held-out blocks see the friction and nothing of the position term (the pooled
    function of q1 is zero); held-out recordings see the friction and that a fitted position term makes a new
    recording worse (fitted on three recordings, a third of the term with the wrong sign: 1 - (4/3)^2)."""
    data = _data(planted=_stribeck, noise=0.05)
    sign = np.where(data.trajectory % 2 == 0, 1.0, -1.0)
    position = 0.3 * np.sin(2 * data.q[:, 1])
    flipped = dataclasses.replace(data, tau=data.tau + np.stack([0 * sign, (sign - 1.0) * position], -1))
    blocks = residuals.analyze(SYSTEM, flipped)
    recordings = residuals.analyze(SYSTEM, flipped, by="recordings")
    assert recordings.by == "recordings" and recordings.folds == RECORDINGS
    np.testing.assert_array_equal(recordings.fold, data.trajectory)
    assert recordings.qd_share[0] > 0.9 and blocks.qd_share[0] > 0.9
    assert abs(blocks.q_share[1]) < 0.05
    assert recordings.q_share[1] == pytest.approx(1 - (4 / 3) ** 2, abs=0.1)
    assert np.all(np.isnan(recordings.bias_share)) and np.all(np.isfinite(blocks.bias_share))
    np.testing.assert_array_equal(recordings.residual, blocks.residual)
    assert "held-out recordings" in recordings.format() and "held-out recordings" not in blocks.format()
    with pytest.raises(ValueError, match="at least two recordings, got 1"):
        residuals.analyze(SYSTEM, _data(recordings=1), by="recordings")
    with pytest.raises(ValueError, match="by must be"):
        residuals.analyze(SYSTEM, data, by="logs")


def test_a_lagrangian_network_returns_tensors_that_are_converted():
    data = _data(noise=0.05, recordings=2)
    model = lnn.LagrangianNetwork(2, hidden=(8,), angular=(True, True), dtype="float64", seed=0)
    analysis = residuals.analyze(model, data)
    expected = data.tau - model.inverse_dynamics(data.q, data.qd, data.qdd).numpy()
    np.testing.assert_allclose(analysis.residual, expected, rtol=1e-12, atol=1e-12)


def test_format_has_a_header_and_four_lines_per_joint(planted):
    text = planted.format()
    lines = text.splitlines()
    assert len(lines) == 1 + 4 * 2
    assert lines[1].startswith("joint 1: MSE") and lines[5].startswith("joint 2: MSE")
    assert f"f(qd) {100 * planted.qd_share[0]:.1f} %" in lines[2]
    assert "0-2 / 2-20 / >20 Hz" in planted.format(bands=(2, 20))
    with pytest.raises(ValueError, match="bands"):
        planted.format(bands=(5, 1))


def test_bad_input_is_refused_with_the_name_and_value():
    data = _data(recordings=1)
    with pytest.raises(TypeError, match="inverse_dynamics"):
        residuals.analyze(object(), data)
    with pytest.raises(TypeError, match="'tau'"):
        residuals.analyze(SYSTEM, type("NoTau", (), {"t": data.t, "q": data.q, "qd": data.qd, "qdd": data.qdd})())
    with pytest.raises(ValueError, match="n_dof is 1"):
        residuals.analyze(simulations.Pendulum(), data)
    jittered = dataclasses.replace(data, t=data.t + np.r_[0.0, 1e-3, np.zeros(data.t.size - 2)])
    with pytest.raises(ValueError, match="uniformly sampled"):
        residuals.analyze(SYSTEM, jittered)
    for options, match in (({"folds": 1}, "folds"), ({"bins": 0}, "bins"), ({"max_lag": -1.0}, "max_lag")):
        with pytest.raises(ValueError, match=match):
            residuals.analyze(SYSTEM, data, **options)
    with pytest.raises(TypeError, match="block"):
        residuals.analyze(SYSTEM, data, block="2 s")


def test_recordings_at_other_rates_join_the_shares_not_the_spectra():
    # Files on their own grids: 0.03 % apart (the DFKI logs) is one rate; a log at 1.3x the step is another,
    # whose states still tell what a function of them explains, but whose lags in samples and spectrum do not
    # add to the others'. Its recording is the planted Stribeck friction's too.
    three = _data(recordings=3, planted=_stribeck)
    last = three.trajectory == 2
    for scale, spectral in ((1.0003, [True, True, True]), (1.3, [True, True, False])):
        t = np.where(last, three.t * scale, three.t)
        analysis = residuals.analyze(SYSTEM, dataclasses.replace(three, t=t, dt=float("nan")), by="recordings")
        assert analysis.spectral.tolist() == spectral
        np.testing.assert_allclose(analysis.recording_step, [DT, DT, DT * scale], rtol=1e-9)
        assert analysis.dt == pytest.approx(DT, rel=1e-3)
        assert analysis.qd_share[0] > 0.9  # the friction carries to each recording, whatever its rate
        assert analysis.block == pytest.approx(DURATION * scale, rel=1e-2)
    assert "at several rates (lags and spectra: the 2 recording(s) at 5 ms)" in analysis.format()
    alone = residuals.analyze(SYSTEM, dataclasses.replace(three.subset([0, 1])), by="recordings")
    np.testing.assert_allclose(analysis.psd, alone.psd)  # the spectrum is the two recordings' at 5 ms
    np.testing.assert_allclose(analysis.shift_share, alone.shift_share, atol=1e-12)
    blocks = residuals.analyze(SYSTEM, dataclasses.replace(three, t=t, dt=float("nan")))
    assert blocks.qd_share[0] > 0.9 and blocks.fold[last].min() == 0 and np.unique(blocks.fold[last]).size == 5


# -------------------------------------------------------------------- plot


def test_plot_draws_rows_of_joints_and_five_panels(planted):
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    result = lnn.plot.residuals(planted)
    assert plt.get_fignums() == open_before  # no pyplot figure, nothing shown
    assert result.panels == ("qd", "q", "time", "spectrum", "lag")
    assert result.coordinates == [0, 1] and result.analysis is planted
    assert len(result.axes) == 2 and all(len(row) == 5 for row in result.axes)
    assert set(result.figure.axes) == {ax for row in result.axes for ax in row}
    qd_axes = result.axes[0][0]
    assert qd_axes.get_xlabel() == "$\\dot q_{1}$ [rad/s]"
    assert len(qd_axes.collections) >= 1 and len(qd_axes.patches) == 1  # the scatter and the conditional mean
    lag_axes = result.axes[1][4]
    assert lag_axes.get_xlabel() == "lag $\\ell$ [ms]"
    np.testing.assert_allclose(lag_axes.lines[0].get_ydata(), planted.xcorr_qd[:, 1])


def test_plot_from_a_model_into_given_axes_and_one_joint():
    from matplotlib.figure import Figure

    data = _data(planted=_stribeck, noise=0.05, recordings=2)
    fig = Figure()
    axes = fig.subplots(1, 5)
    result = lnn.plot.residuals(SYSTEM, data, coordinates=1, axes=axes, max_points=100)
    assert result.figure is fig and result.coordinates == [1]
    assert [list(row) for row in result.axes] == [list(axes)]
    assert len(axes[0].collections[0].get_offsets()) == 100
    with pytest.raises(ValueError, match=r"\(2, 5\) grid"):
        lnn.plot.residuals(SYSTEM, data, axes=axes)
    with pytest.raises(ValueError, match="data must be None"):
        lnn.plot.residuals(result.analysis, data)
    with pytest.raises(TypeError, match="needs data"):
        lnn.plot.residuals(SYSTEM)
    fig = Figure()
    new_logs = lnn.plot.residuals(SYSTEM, data, coordinates=0, axes=fig.subplots(1, 5), by="recordings")
    assert new_logs.analysis.by == "recordings"
    label = new_logs.axes[0][0].texts[0].get_text()
    assert label == f"explained {100 * new_logs.analysis.qd_share[0]:.0f} %\non new logs"
    assert result.axes[0][0].texts[0].get_text().startswith("explained ")
    assert "new logs" not in result.axes[0][0].texts[0].get_text()
