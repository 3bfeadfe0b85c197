"""Real robots: the import's derivative window, chosen by the torques or by the positions' spectrum.

``lnn import`` (``lnn.logs.import_csv``) differentiates the positions with one
Savitzky-Golay window for all the files, the one with which the motion
explains the measured torques best (``lnn.ingest.choose_window_by_torque``);
``window="spectrum"`` asks for the positions' spectral rule instead (a window
per coordinate, ``lnn.ingest.choose_window``). This benchmark reads the same
logs with both and with fixed windows, and scores what every model of the
dynamics is fed with: the held-out torque MSE (N^2 m^2) of least squares
(``lnn.baseline.least_squares``, ``friction="viscous+coulomb"``), and on the
simulated arm of the true model itself.

- DFKI double pendulum (``--data``, the measured logs; BSD-3, not shipped):
  the eight training logs of ``benchmarks/_dfki.py`` read in one call, the
  test log trajectory_03 read on its own (its own choice) and with the
  training logs' window; least squares on the URDF's chain, its mean
  leave-one-log-out MSE on the training logs and its MSE on the test log.
- The simulated 7-DOF Panda of ``benchmarks/_panda.py``, one 21 s log at 1 kHz
  (Stribeck and position-dependent friction, a payload, encoder and torque
  noise, a bias), its first 70 % read as one file and the rest as another
  with the training part's window (read alone, its window would be chosen by
  its own torques, the score's targets): the true model's torque MSE on both
  parts and least squares' (the truth's ``v0``) on the held-out part.

Usage::

    python benchmarks/bench_windows.py --data ../shared/data/dfki_double_pendulum [--seeds 0 1 2]
    python benchmarks/bench_windows.py --panda-only --seeds 0
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: Fixed windows compared on each robot (samples).
DFKI_WINDOWS = (81, 101, 121, 141, 161, 181, 201)
PANDA_WINDOWS = (101, 201, 301, 401, 801)


def dfki(folder: Path) -> None:
    import _dfki

    import simulations
    from lnn.baseline import least_squares

    os.environ["LNN_DFKI_DATA"] = str(folder)
    robot = simulations.URDFRobot.from_urdf(str(_dfki.urdf_path()), missing_links="add")
    print(
        "DFKI double pendulum, read by lnn.logs.import_csv (8 training logs in one call, trajectory_03 alone); "
        "least squares on the URDF's chain, viscous + Coulomb + offset; MSE N^2 m^2"
    )
    print("| window (qdd, samples) | rule | s | train LOLO mean | test J1 | test J2 | test mean |")
    print("|---|---|---|---|---|---|---|")
    for window in (None, "spectrum", *DFKI_WINDOWS):
        t0 = time.perf_counter()
        result = _dfki.imported(_dfki.TRAIN, window=window)
        seconds = time.perf_counter() - t0
        train = result.dataset
        lolo = []
        for k in range(train.n_trajectories):
            others = [i for i in range(train.n_trajectories) if i != k]
            fit = least_squares(train.subset(others), robot, friction="viscous+coulomb")
            lolo.append(np.mean(_dfki.torque_mse(fit, train.subset([k]))))
        fit = least_squares(train, robot, friction="viscous+coulomb")
        windows = sorted({w for f in result.report.files for w in f.window_qdd})
        rule = result.report.files[0].window_rule
        tests = [("", _dfki.imported(_dfki.TEST, window=window))]
        if window is None:  # the test log with the training logs' window too
            same = _dfki.imported(_dfki.TEST, window=result.dataset.window_rule)
            tests.append((f" (test with the training's {same.report.files[0].window_qdd[0]})", same))
        for note, test in tests:
            mse = _dfki.torque_mse(fit, test.dataset)
            shown = f"{_span(windows)}; test {test.report.files[0].window_qdd[0]}{note}"
            print(
                f"| {shown} | {rule} | {seconds:.1f} | {np.mean(lolo):.4f} | {mse[0]:.4f} | {mse[1]:.4f} | "
                f"{mse.mean():.4f} |",
                flush=True,
            )
        for choice in result.report.torque_windows:
            best = np.argsort(choice.score)[:5]
            print(
                "    torques' criterion (residual relative to the best): "
                + ", ".join(f"{choice.candidates[i]} {choice.score[i]:.3f}" for i in sorted(best))
                + f"; explained {', '.join(f'{e:.1%}' for e in choice.explained)}"
            )


def panda(seed: int) -> None:
    import _panda

    from lnn.baseline import least_squares
    from lnn.logs import import_csv

    logs = _panda.simulated_panda_log(seed=seed, window="spectrum")
    try:
        columns = dict(time="time", q=_panda._COLUMNS[:7], tau=_panda._COLUMNS[7:], angular=True)
        v0 = logs.truth.friction.velocity
        print(
            f"\nsimulated Panda, one 21 s log at 1 kHz (seed {seed}), its first 70 % and the rest read as two files; "
            f"MSE N^2 m^2, mean of 7 joints"
        )
        print("| window (qdd, samples) | rule | s | truth, train part | truth, held out | least squares, held out |")
        print("|---|---|---|---|---|---|")
        for window in (None, "spectrum", *PANDA_WINDOWS):
            t0 = time.perf_counter()
            train = import_csv(logs.train_files[0], window=window, **columns)
            seconds = time.perf_counter() - t0
            test = import_csv(logs.test_files[0], window=train.dataset.window_rule, **columns)  # not its torques
            fit = least_squares(train.dataset, logs.nominal, friction="viscous+coulomb", friction_velocity=v0)
            truth_train = np.mean(_panda.torque_mse(logs.truth, train.dataset))
            truth_test = np.mean(_panda.torque_mse(logs.truth, test.dataset))
            mse = np.mean(_panda.torque_mse(fit, test.dataset))
            shown = f"{_span(train.report.files[0].window_qdd)}; held out {_span(test.report.files[0].window_qdd)}"
            rule = train.report.files[0].window_rule
            print(
                f"| {shown} | {rule} | {seconds:.1f} | {truth_train:.5f} | {truth_test:.5f} | {mse:.5f} |",
                flush=True,
            )
    finally:
        shutil.rmtree(logs.folder, ignore_errors=True)


def _span(windows) -> str:
    values = sorted(set(int(w) for w in windows))
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="the DFKI double pendulum's folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="simulated Panda logs")
    parser.add_argument("--panda-only", action="store_true", help="skip the DFKI logs")
    args = parser.parse_args(argv)
    if not args.panda_only:
        if args.data is None:
            parser.error("--data is required unless --panda-only")
        dfki(args.data)
    for seed in args.seeds:
        panda(seed)


if __name__ == "__main__":
    main()
