"""Real robots: what least squares leaves on the DFKI double pendulum, before anyone models it.

The protocol of ``benchmarks/_dfki.py`` (train on trajectory_00-02, 04, 05,
11-13, test on trajectory_03; a 2 ms grid, Savitzky-Golay 101/4 derivatives).
Fits ``lnn.baseline.least_squares(train, robot, friction="viscous+coulomb")``
on the URDF's chain (the ``bench_real.py`` row "least squares") and analyses
its torque residual with :func:`lnn.residuals.analyze` on the training logs
and on the test log. Prints, per joint:

- the residual's MSE (N^2 m^2) and mean;
- the held-out shares of its variance explained by a binned function of
  ``qd_j``, of ``q_j``, of both (additive), of ``qdd_j``, by a constant per
  recording, and by the best shift of the torque stream (lag in ms);
- the same functions of ``qd_j``, ``q_j`` and ``qdd_j`` fitted on the training
  residual and scored on the test log's (what a learned term would carry over);
- the residual's power below and above ``--band`` Hz beside the measured
  torque's and the model's;
- what a zero-phase low-pass filter of the model's torque (2nd-order
  Butterworth, cutoff chosen on the training logs) does to the MSE;
- least squares with longer Savitzky-Golay windows (order 4): the training
  logs' leave-one-log-out MSE, which chooses the window, and the test MSE.

Usage::

    python benchmarks/bench_residuals.py --data ../shared/data/dfki_double_pendulum [--figures docs/figures]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CUTOFFS = (2.0, 3.0, 5.0, 7.0, 10.0, 15.0)


def _transfer(curve, x_train, r_train, x_test, r_test) -> float:
    """Share of the test residual's variance removed by ``curve`` (fitted on training), centred on training's mean."""
    centre = np.mean(r_train - curve(x_train))
    base = np.sum((r_test - np.mean(r_train)) ** 2)
    return 1.0 - np.sum((r_test - centre - curve(x_test)) ** 2) / base


def _low_pass(torque: np.ndarray, ids: np.ndarray, cutoff: float, dt: float) -> np.ndarray:
    """Zero-phase 2nd-order Butterworth of ``torque (N, n)`` within each recording."""
    from scipy.signal import butter, sosfiltfilt

    sos = butter(2, cutoff, fs=1.0 / dt, output="sos")
    out = np.empty_like(torque)
    for k in np.unique(ids):
        rows = ids == k
        out[rows] = sosfiltfilt(sos, torque[rows], axis=0)
    return out


def _table(analyses, band: float) -> None:
    a_train, a_test = analyses
    print(
        "| data | joint | MSE | mean | f(qd) | f(q) | f(qd)+g(q) | f(qdd) | bias per log | lag ms (share) "
        f"| residual <{band:g} / >{band:g} Hz | measured >{band:g} Hz | model >{band:g} Hz |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, a in (("train (8 logs)", a_train), ("test (trajectory_03)", a_test)):
        for j in range(a.n_dof):
            print(
                f"| {label} | {j + 1} | {a.mse[j]:.4f} | {a.mean[j]:+.3f} | {_pct(a.qd_share[j])} | "
                f"{_pct(a.q_share[j])} | {_pct(a.qd_q_share[j])} | {_pct(a.qdd_share[j])} | {_pct(a.bias_share[j])} | "
                f"{a.lag[j] * 1e3:+.0f} ({_pct(a.lag_share[j])}) | {a.power(0, band)[j]:.4f} / "
                f"{a.power(band)[j]:.4f} | {a.power(band, of='tau')[j]:.4f} | {a.power(band, of='predicted')[j]:.4f} |"
            )
    print("\nfitted on the training residual, scored on the test log's (share of its variance):")
    print("| joint | f(qd) | f(q) | f(qdd) | mean of the test log (share of its MSE) |\n|---|---|---|---|---|")
    for j in range(a_test.n_dof):
        shares = [
            _transfer(
                getattr(a_train, f"{name}_mean")[j],
                getattr(a_train, name)[:, j],
                a_train.residual[:, j],
                getattr(a_test, name)[:, j],
                a_test.residual[:, j],
            )
            for name in ("qd", "q", "qdd")
        ]
        mean_share = a_test.mean[j] ** 2 / a_test.mse[j]
        print(
            f"| {j + 1} | " + " | ".join(_pct(s) for s in shares) + f" | {a_test.mean[j]:+.3f} ({_pct(mean_share)}) |"
        )


def _pct(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{100 * value:.1f} %"


def _parts(train, fit) -> None:
    """RMS of the model's torque parts on the training logs beside the measured torque's."""
    import lnn.plot

    parts = lnn.plot.torque_decomposition(fit, train.q, train.qd, train.qdd)
    rms = {name: np.sqrt(np.mean(getattr(parts, name) ** 2, 0)) for name in ("inertial", "gravity", "coriolis")}
    rms["measured"] = np.sqrt(np.mean(train.tau**2, 0))
    print(
        "RMS on the training logs (N m), J1 / J2: " + ", ".join(f"{k} {v[0]:.3f} / {v[1]:.3f}" for k, v in rms.items())
    )


def _filtered(train, test, fit) -> None:
    """MSE of a low-pass filtered model torque; the cutoff chosen on the training logs."""
    predicted = {name: fit.inverse_dynamics(d.q, d.qd, d.qdd) for name, d in (("train", train), ("test", test))}
    scores = {}
    for cutoff in CUTOFFS:
        smooth = _low_pass(predicted["train"], train.trajectory, cutoff, train.dt)
        scores[cutoff] = np.mean((train.tau - smooth) ** 2, axis=0)
    best = min(scores, key=lambda c: np.mean(scores[c]))
    test_raw = np.mean((test.tau - predicted["test"]) ** 2, axis=0)
    test_smooth = np.mean((test.tau - _low_pass(predicted["test"], test.trajectory, best, test.dt)) ** 2, axis=0)
    train_raw = np.mean((train.tau - predicted["train"]) ** 2, axis=0)
    print(
        "\nthe model's torque low-passed (zero-phase 2nd-order Butterworth, no refit), MSE J1 / J2 / mean; "
        "cutoff by training MSE: " + ", ".join(f"{c:g} Hz {np.mean(s):.4f}" for c, s in scores.items())
    )
    print(f"| data | as fitted | low-passed at {best:g} Hz |\n|---|---|---|")
    for label, raw, smooth in (("train", train_raw, scores[best]), ("test", test_raw, test_smooth)):
        print(
            f"| {label} | {raw[0]:.4f} / {raw[1]:.4f} / {np.mean(raw):.4f} | "
            f"{smooth[0]:.4f} / {smooth[1]:.4f} / {np.mean(smooth):.4f} |"
        )


def _inputs(band: float) -> None:
    """The commanded torque's power above ``band`` Hz, and the Savitzky-Golay filters' gains."""
    import _dfki
    from scipy.signal import freqz, savgol_coeffs, welch

    quiet, loud = [], []
    for name in _dfki.TRAIN + _dfki.TEST:
        columns = _dfki._read(_dfki.data_folder() / f"{name}.csv")
        commanded = np.stack([columns["tau_con1"], columns["tau_con2"]], -1)[1:]  # the first step is longer
        step = float(np.median(np.diff(columns["time"])))
        frequency, psd = welch(commanded, fs=1.0 / step, nperseg=min(1000, len(commanded)), axis=0, detrend=False)
        power = np.sum(psd[frequency >= band], 0) * frequency[1]
        if np.max(power) > 1e-4:
            loud.append(f"{name[-2:]} (J1 {power[0]:.3f}, J2 {power[1]:.3f}, {step * 1e3:.2f} ms steps)")
        else:
            quiet.append(name[-2:])
    print(
        f"\ncommanded torque (tau_con, raw logs) above {band:g} Hz: below 1e-4 N^2 m^2 in trajectory "
        f"{', '.join(quiet)}; above in {', '.join(loud) or 'none'}"
    )
    frequencies = np.array([2.0, 3.0, 5.0, 7.0, 10.0])
    for deriv, name in ((1, "qd"), (2, "qdd")):
        taps = savgol_coeffs(_dfki.WINDOW, _dfki.ORDER, deriv=deriv, delta=_dfki.STEP, use="conv")
        _, response = freqz(taps, worN=2 * np.pi * frequencies * _dfki.STEP)
        gain = np.abs(response / (2j * np.pi * frequencies) ** deriv)
        print(
            f"Savitzky-Golay {_dfki.WINDOW}/{_dfki.ORDER} gain of {name} at "
            + ", ".join(f"{f:g} Hz {g:.2f}" for f, g in zip(frequencies, gain))
        )


def _windows(robot, windows) -> None:
    """Least squares on derivatives of several Savitzky-Golay windows: leave-one-log-out on training, and test."""
    import _dfki

    from lnn.baseline import least_squares

    print(
        "\nleast squares with other Savitzky-Golay windows (order 4), MSE J1 / J2 / mean:\n"
        "| window (samples, s) | leave-one-log-out on the 8 training logs | test |\n|---|---|---|"
    )
    for window in windows:
        train, test = _dfki.load(_dfki.TRAIN, window=window), _dfki.load(_dfki.TEST, window=window)
        held = []
        for k in train.trajectory_ids:
            fit = least_squares(
                train.subset(np.setdiff1d(train.trajectory_ids, [k])), robot, friction="viscous+coulomb"
            )
            part = train.subset([k])
            held.append(np.mean((part.tau - fit.inverse_dynamics(part.q, part.qd, part.qdd)) ** 2, axis=0))
        held = np.mean(held, axis=0)
        fit = least_squares(train, robot, friction="viscous+coulomb")
        mse = _dfki.torque_mse(fit, test)
        print(
            f"| {window} ({window * train.dt:.2f} s) | {held[0]:.4f} / {held[1]:.4f} / {np.mean(held):.4f} | "
            f"{mse[0]:.4f} / {mse[1]:.4f} / {np.mean(mse):.4f} |",
            flush=True,
        )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of the DFKI logs (not shipped)")
    parser.add_argument("--figures", type=Path, default=None, help="write residuals_dfki_{train,test}.png here")
    parser.add_argument("--band", type=float, default=5.0, help="band edge (Hz) of the spectrum columns")
    parser.add_argument("--force", action="store_true", help="overwrite existing figures")
    parser.add_argument(
        "--windows", type=int, nargs="*", default=[101, 125, 151, 175, 201], help="Savitzky-Golay windows to probe"
    )
    args = parser.parse_args(argv)
    os.environ["LNN_DFKI_DATA"] = str(args.data)
    import _dfki

    import lnn.plot
    import simulations
    from lnn import residuals
    from lnn.baseline import least_squares

    train, test = _dfki.load(_dfki.TRAIN), _dfki.load(_dfki.TEST)
    robot = simulations.URDFRobot.from_urdf(str(_dfki.urdf_path()), missing_links="add")
    fit = least_squares(train, robot, friction="viscous+coulomb")
    analyses = (residuals.analyze(fit, train), residuals.analyze(fit, test))
    print(
        f"DFKI double pendulum, least squares (viscous + Coulomb + offset) fitted on the training logs; "
        f"residual analysis: {analyses[0].folds} folds of {analyses[0].block:g} s blocks, 32 bins, lags to 100 ms\n"
    )
    _table(analyses, args.band)
    _inputs(args.band)
    _parts(train, fit)
    _filtered(train, test, fit)
    if args.windows:
        _windows(robot, args.windows)
    for label, analysis in zip(("train", "test"), analyses):
        print(f"\n{label}:\n" + analysis.format(bands=(1.0, args.band, 10.0)))
        if args.figures is not None:
            path = args.figures / f"residuals_dfki_{label}.png"
            figure = lnn.plot.residuals(analysis, max_points=3000).figure
            lnn.plot.save(figure, path, overwrite=args.force, dpi=200)
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
