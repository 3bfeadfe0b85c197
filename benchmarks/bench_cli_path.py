r"""The user's command-line path on real logs: ``lnn import``, ``lnn import --like``, ``lnn identify --urdf``.

What a robotics user does with the DFKI double pendulum's measured logs
(BSD-3 data kept outside the project, path given by ``--data``): import the
training logs in one call, import the held-out log with their derivative
windows (``--like``), identify with the URDF, and score the held-out log.
Scored on the same imported data, against the strongest classical
identification:

- **lab structure, refitted**: the lab's own model of the robot
  (``model_2.0_parameters.yml``'s plant: two links, a rotor inertia through
  the gear, viscous and ``atan(100 qd)`` friction per joint), its 10
  parameters fitted by ordinary least squares to the training logs;
- **least squares, armature + viscous + Coulomb**: ``lnn.baseline.least_squares``
  on the URDF's chain (base parameters, armature, viscous + Coulomb, no offset).

Held-out torque MSE (N^2 m^2) per joint: **raw** (against the measured torque)
and **in band** (against the measured torque smoothed by the Savitzky–Golay
filter that gave ``qd`` and ``qdd``: what a model of the smoothed state can
reduce), and the **floor** (the torque less its smoothed self, no model's reach;
``lnn.metrics.torque_bands``). Ratios are ``identify`` over the better of the
two baselines on that log, per joint and for the mean over the joints.

Usage::

    python benchmarks/bench_cli_path.py --data ../shared/data/dfki_double_pendulum [--test trajectory_03] \
        [--time 240 | --epochs N] [--seed 0]
    python benchmarks/bench_cli_path.py --data ../shared/data/dfki_double_pendulum --leave-one-out [--time 240]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _dfki import TEST, TRAIN

LOGS = TEST + TRAIN  # trajectory_03 first: the protocol's test log, reported first by --leave-one-out
COLUMNS = ["--time", "time", "--q", "pos_meas1,pos_meas2", "--tau", "tau_meas1,tau_meas2", "--angular", "all"]


def _lnn(*args: str) -> str:
    """Run ``python -m lnn ARGS`` (the worktree's lnn, as the console script would) and return its output."""
    done = subprocess.run([sys.executable, "-m", "lnn", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"lnn {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _lab_regressor(q, qd, qdd) -> np.ndarray:
    """``Y (N, 2, 10)``: the lab's double-pendulum plant linear in its 10 parameters ``(P1 m11 constant, P2 m2 l1
    r2, P3 m12 constant, P4 m22, P5 g (m1 r1 + m2 l1), P6 g m2 r2, b1, b2, cf1, cf2)``; the rotor inertia through
    the gear is in P1, P3, P4 (benchmarks/bench_real.py's ``_lab_model`` with these parameters)."""
    c2, s2 = np.cos(q[:, 1]), np.sin(q[:, 1])
    s1, s12 = np.sin(q[:, 0]), np.sin(q[:, 0] + q[:, 1])
    Y = np.zeros((q.shape[0], 2, 10))
    Y[:, 0, 0] = qdd[:, 0]
    Y[:, 0, 1] = 2 * c2 * qdd[:, 0] + c2 * qdd[:, 1] - s2 * (2 * qd[:, 0] * qd[:, 1] + qd[:, 1] ** 2)
    Y[:, 0, 2] = qdd[:, 1]
    Y[:, 0, 4] = s1
    Y[:, 0, 5] = s12
    Y[:, 0, 6] = qd[:, 0]
    Y[:, 0, 8] = np.arctan(100 * qd[:, 0])
    Y[:, 1, 1] = c2 * qdd[:, 0] + s2 * qd[:, 0] ** 2
    Y[:, 1, 2] = qdd[:, 0]
    Y[:, 1, 3] = qdd[:, 1]
    Y[:, 1, 5] = s12
    Y[:, 1, 7] = qd[:, 1]
    Y[:, 1, 9] = np.arctan(100 * qd[:, 1])
    return Y


class LabStructure:
    """The lab's model structure with its 10 parameters fitted by least squares (``inverse_dynamics`` only)."""

    def __init__(self, data) -> None:
        Y = _lab_regressor(np.asarray(data.q), np.asarray(data.qd), np.asarray(data.qdd))
        tau = np.asarray(data.tau, np.float64)
        self.theta = np.linalg.lstsq(Y.reshape(-1, 10), tau.reshape(-1), rcond=None)[0]

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        return _lab_regressor(np.asarray(q), np.asarray(qd), np.asarray(qdd)) @ self.theta


def held_out(folder: Path, test: str, work: Path, *, seconds: float | None, epochs: int | None, seed: int) -> dict:
    """The CLI path with ``test`` held out of the nine logs: per model, its ``TorqueBandMetrics`` on the test log."""
    import lnn
    import simulations
    from lnn.baseline import least_squares
    from lnn.metrics import torque_bands

    train_logs = [str(folder / f"{name}.csv") for name in LOGS if name != test]
    train_file, test_file, model_file = work / f"train-{test}.npz", work / f"{test}.npz", work / f"{test}.keras"
    _lnn("import", *train_logs, *COLUMNS, "-o", str(train_file))
    _lnn("import", str(folder / f"{test}.csv"), *COLUMNS, "--like", str(train_file), "-o", str(test_file))
    work_option = ["--epochs", str(epochs)] if epochs is not None else ["--time-limit", str(seconds)]
    urdf = str(folder / "double_pendulum.urdf")
    t0 = time.perf_counter()
    printed = _lnn(
        "identify", str(train_file), "--urdf", urdf, "--add-missing-links", "-o", str(model_file),
        "--seed", str(seed), *work_option,
    )  # fmt: skip
    took = time.perf_counter() - t0
    train, data = lnn.Dataset.load(train_file), lnn.Dataset.load(test_file)
    robot = simulations.URDFRobot.from_urdf(urdf, missing_links="add")
    model = lnn.load_model(model_file)
    systems = {
        "identify": model,
        "lab structure": LabStructure(train),
        "LS armature": least_squares(train, robot, friction="viscous+coulomb", armature=True, offset=False),
    }
    out = {}
    for name, system in systems.items():
        predicted = np.asarray(system.inverse_dynamics(data.q, data.qd, data.qdd), np.float64)
        out[name] = torque_bands(predicted, data)
    out["seconds"] = took
    out["report"] = printed
    return out


def _row(name: str, bands) -> str:
    raw, band = bands.mse_per_joint, bands.in_band_per_joint
    return (
        f"| {name:<14} | {raw[0]:.4f} | {raw[1]:.4f} | {bands.mse:.4f} | {band[0]:.4f} | {band[1]:.4f} | "
        f"{bands.in_band:.4f} |"
    )


def _ratios(result: dict) -> dict:
    """identify over the better baseline on this log (by the mean raw MSE), raw and in band, per joint and mean."""
    base = min(("lab structure", "LS armature"), key=lambda k: result[k].mse)
    ours, theirs = result["identify"], result[base]
    return {
        "baseline": base,
        "raw": ours.mse / theirs.mse,
        "in band": ours.in_band / theirs.in_band,
        "raw joints": ours.mse_per_joint / theirs.mse_per_joint,
        "band joints": ours.in_band_per_joint / theirs.in_band_per_joint,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="the DFKI double-pendulum folder")
    parser.add_argument("--test", default="trajectory_03", help="the held-out log (default trajectory_03)")
    parser.add_argument("--leave-one-out", action="store_true", help="hold out each of the nine logs in turn")
    parser.add_argument("--time", type=float, default=240.0, help="identify's --time-limit (s, default 240)")
    parser.add_argument("--epochs", type=int, default=None, help="identify's --epochs instead of a time budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print identify's report of each run")
    args = parser.parse_args(argv)
    tests = LOGS if args.leave_one_out else (args.test,)
    seconds = None if args.epochs is not None else args.time
    print(
        f"DFKI double pendulum, the CLI path: lnn import (8 logs), lnn import --like (the held-out log), "
        f"lnn identify --urdf ({'--epochs ' + str(args.epochs) if args.epochs else f'--time-limit {seconds:g}'}, "
        f"--seed {args.seed}); held-out torque MSE (N^2 m^2)",
        flush=True,
    )
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for test in tests:
            result = held_out(args.data, test, Path(tmp), seconds=seconds, epochs=args.epochs, seed=args.seed)
            floor = result["identify"].floor_per_joint
            print(
                f"\n{test} held out (identify {result['seconds']:.0f} s; out-of-band floor J1 {floor[0]:.4f}, "
                f"J2 {floor[1]:.4f}, mean {np.mean(floor):.4f})"
            )
            print("| model | raw J1 | raw J2 | raw | in band J1 | in band J2 | in band |")
            print("|---|---|---|---|---|---|---|")
            for name in ("lab structure", "LS armature", "identify"):
                print(_row(name, result[name]))
            r = _ratios(result)
            ratios.append((test, r))
            print(
                f"identify / {r['baseline']}: raw {r['raw']:.3f} (J1 {r['raw joints'][0]:.3f}, J2 "
                f"{r['raw joints'][1]:.3f}), in band {r['in band']:.3f} (J1 {r['band joints'][0]:.3f}, J2 "
                f"{r['band joints'][1]:.3f})",
                flush=True,
            )
            chosen = [line for line in result["report"].splitlines() if line.startswith("*") or "joint " in line]
            print("identify chose: " + "; ".join(line.strip() for line in chosen[:4]))
            if args.verbose:
                print(result["report"])
    if len(ratios) > 1:
        raw = np.array([r["raw"] for _, r in ratios])
        band = np.array([r["in band"] for _, r in ratios])
        joints = np.array([r["raw joints"] for _, r in ratios])
        print("\n| log | baseline | raw ratio | in-band ratio | raw J1 | raw J2 |\n|---|---|---|---|---|---|")
        for test, r in ratios:
            print(
                f"| {test} | {r['baseline']} | {r['raw']:.3f} | {r['in band']:.3f} | {r['raw joints'][0]:.3f} | "
                f"{r['raw joints'][1]:.3f} |"
            )
        print(
            f"over the {len(ratios)} logs: raw median {np.median(raw):.3f} (range {raw.min():.3f}-{raw.max():.3f}), "
            f"in band median {np.median(band):.3f} (range {band.min():.3f}-{band.max():.3f}); "
            f"logs with a joint worse than the baseline (raw): {int(np.sum(np.any(joints > 1.0, axis=1)))}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
