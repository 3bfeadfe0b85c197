"""lnn.metrics.torque_bands: the torque error in the band of the kinematics' filter and the floor above it."""

from __future__ import annotations

import numpy as np
import pytest

import lnn
from lnn.ingest import WindowRule, savgol
from lnn.metrics import band_windows, in_band, torque_bands


def _dataset(tau, t, trajectory, rule=None):
    n = tau.shape[1]
    zeros = np.zeros((t.size, n))
    return lnn.Dataset(t=t, q=zeros, qd=zeros, qdd=zeros, tau=tau, trajectory=trajectory, window_rule=rule)


def test_a_polynomial_torque_is_all_in_band_and_the_floor_is_what_the_filter_removes():
    # Two recordings at 2 ms and 1 ms: the torque rule's window at each step (lnn.ingest.window_at).
    t = np.concatenate([np.arange(400) * 2e-3, np.arange(700) * 1e-3])
    ids = np.repeat([0, 1], [400, 700])
    cubic = np.column_stack([1.0 + t - 2.0 * t**2 + 0.5 * t**3, 3.0 * t**2])
    noise = 0.1 * np.random.default_rng(0).standard_normal(cubic.shape)
    rule = WindowRule("torque", window=51, step=2e-3, order=4)
    data = _dataset(cubic + noise, t, ids, rule)
    wide = rule.window_at(1e-3)
    assert band_windows(data) == {0: 51, 1: wide} and 95 < wide < 111
    # a polynomial of degree <= order passes the filter unchanged (its ends too: "interp" fits the polynomial)
    np.testing.assert_allclose(in_band(cubic, data), cubic, atol=1e-12)
    # the filter is the import's, per recording
    smooth = in_band(cubic + noise, data)
    np.testing.assert_allclose(smooth[:400], savgol((cubic + noise)[:400], 51, 4), atol=1e-12)
    np.testing.assert_allclose(smooth[400:], savgol((cubic + noise)[400:], wide, 4), atol=1e-12)
    # a model that predicts the smoothed torque exactly: nothing in band, its raw error is the floor
    bands = torque_bands(smooth, data)
    np.testing.assert_allclose(bands.in_band_per_joint, 0.0, atol=1e-24)
    np.testing.assert_allclose(bands.mse_per_joint, bands.floor_per_joint, rtol=1e-12)
    # white noise of variance s^2 through a filter of gain g^2 = sum(c^2) leaves s^2 (1 - g^2) out of band
    # (interior; within 5 % over 1100 samples of which 150 are ends)
    c = np.linalg.pinv(np.vander(np.arange(-25, 26) / 25.0, 5, increasing=True))[0]
    expected = 0.01 * (1.0 - np.sum(c**2))
    np.testing.assert_allclose(torque_bands(cubic, data).floor_per_joint, expected, rtol=0.1)
    # the truth itself errs in band exactly by what the filter keeps of the noise
    assert np.all(torque_bands(cubic, data).in_band_per_joint < 0.2 * bands.floor_per_joint)


def test_held_out_time_blocks_are_filtered_as_pieces_and_bad_input_is_named():
    t = np.concatenate([np.arange(100), np.arange(300, 400)]) * 1e-2  # one recording, a gap: two pieces
    ids = np.zeros(200, int)
    tau = np.column_stack([np.where(t < 2.0, 1.0, 5.0)])  # a step across the gap: each piece is constant
    data = _dataset(tau, t, ids)
    np.testing.assert_allclose(in_band(tau, data, window=21), tau, atol=1e-12)
    with pytest.raises(ValueError, match="records no window rule"):
        in_band(tau, data)
    with pytest.raises(ValueError, match="window must be an odd integer > order"):
        in_band(tau, data, window=20)
    spectral = _dataset(tau, t, ids, WindowRule("spectrum"))
    with pytest.raises(ValueError, match="spectral window rule"):
        torque_bands(tau, spectral)
    with pytest.raises(ValueError, match="same shape"):
        torque_bands(tau[:10], data, window=21)


def test_evaluate_reports_the_band_rows_on_an_imported_dataset_only():
    import dataclasses

    import simulations

    arm = simulations.PlanarArm()
    data = lnn.generate(arm, n_trajectories=2, duration=2.0, dt=0.01, seed=0, tau="gravity-sinusoids")
    noisy = dataclasses.replace(data, tau=data.tau + 0.05 * np.random.default_rng(1).standard_normal(data.tau.shape))
    assert "torque_mse_in_band" not in lnn.evaluate(arm, noisy, n_rollouts=0).as_dict()  # no window recorded
    imported = dataclasses.replace(noisy, window_rule=WindowRule("given", window=31, order=4))
    table = lnn.evaluate(arm, imported, n_rollouts=0)
    bands = torque_bands(arm.inverse_dynamics(data.q, data.qd, data.qdd), imported)
    np.testing.assert_allclose(table["torque_mse_in_band"], 2 * bands.in_band, rtol=1e-12)
    np.testing.assert_allclose(table["torque_mse_floor"], 2 * bands.floor, rtol=1e-12)
    np.testing.assert_allclose(table["torque_mse_in_band_1"], bands.in_band_per_joint[1], rtol=1e-12)
    # the truth's raw error is the noise; in band it is what the filter keeps of it: far less
    assert table["torque_mse_in_band"] < 0.3 * table["torque_mse"]
