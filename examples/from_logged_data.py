"""Learn from logged positions only: estimate velocities and accelerations, then learn.

Real robots log joint positions (encoders), not accelerations. This example
reads a CSV of positions — columns ``t, trajectory, q0, q1, ...`` with one
row per sample — estimates ``qd`` and ``qdd`` with a Savitzky–Golay filter
(:func:`lnn.estimate_derivatives`; a 31-sample window of quartics, which at
1 mrad of noise and 100 Hz measured a 2.7 % median acceleration error
against 12 % for a 15-sample window), trains a Lagrangian network and evaluates
it against the true system.

Without ``--csv`` it first writes such a file itself: a double pendulum
simulated and sampled at 100 Hz with 1 mrad of encoder noise, standing in for
your logs. With ``--csv`` give your own file (and ``--angular`` to say which
columns are angles); the true-system comparison is then skipped.

    python examples/from_logged_data.py                       # about 3 minutes
    python examples/from_logged_data.py --csv my_log.csv --angular 1,1
    python examples/from_logged_data.py --quick               # a smoke test
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import lnn
import simulations
from lnn.metrics import acceleration_error, evaluate


def write_demo_log(path: Path, *, n_trajectories: int, duration: float, noise: float, seed: int) -> None:
    """Simulate a double pendulum and write its noisy positions as a CSV log."""
    system = simulations.DoublePendulum()
    state = system.sample_state(n_trajectories, rng=seed)
    t = np.arange(int(round(duration / 0.01)) + 1) * 0.01
    trajectory = lnn.rollout(system, 0.5 * state.q, 0.5 * state.qd, t)
    rng = np.random.default_rng(seed + 1)
    q = trajectory.q + rng.normal(0.0, noise, trajectory.q.shape)
    B, T, n = q.shape
    table = np.column_stack([np.tile(t, B), np.repeat(np.arange(B), T), q.reshape(B * T, n)])
    header = "t,trajectory," + ",".join(f"q{i}" for i in range(n))
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt="%.9g")


def read_log(path: Path):
    """Read ``t, trajectory, q0, ...`` columns of a CSV log; returns ``t (N,)``, ids ``(N,)``, ``q (N, n)``."""
    if not path.exists():
        raise FileNotFoundError(f"no such log file: {str(path)!r}")
    with open(path) as handle:
        header = handle.readline().strip().split(",")
    if header[:2] != ["t", "trajectory"] or len(header) < 3:
        raise ValueError(f"{str(path)!r} must have the columns t, trajectory, q0, ...; got {header}")
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return table[:, 0], table[:, 1].astype(int), table[:, 2:]


def main(argv=None) -> int:
    """Estimate derivatives from a position log, learn, evaluate."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--csv", type=Path, help="position log (default: simulate one)")
    parser.add_argument("--angular", default=None, help="comma-separated 0/1 per coordinate")
    parser.add_argument("--output-dir", default="logged-data-output", type=Path)
    parser.add_argument("--time-limit", type=float, default=120.0, help="training budget (s)")
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)

    simulated = args.csv is None
    log = args.csv or args.output_dir / "double_pendulum_log.csv"
    if simulated:
        write_demo_log(
            log, n_trajectories=6 if args.quick else 60, duration=2.0 if args.quick else 6.0, noise=1e-3, seed=0
        )
        print(f"wrote a simulated position log to {log}")
    t, ids, q = read_log(log)
    n = q.shape[1]
    angular = (
        ((True,) * n if simulated else (False,) * n)
        if args.angular is None
        else tuple(bool(int(a)) for a in args.angular.split(","))
    )

    data = lnn.Dataset.from_positions(
        t,
        q,
        trajectory=ids,
        method="savgol",
        window=31,
        order=4,
        angular=angular,
        system="double-pendulum" if simulated else "",
    )
    print(f"{len(data)} samples in {data.n_trajectories} trajectories, n_dof = {data.n_dof}")
    if simulated:
        truth = simulations.DoublePendulum()
        qdd_true = truth.acceleration(data.q, data.qd)
        est = acceleration_error(data.qdd, qdd_true)
        print(
            f"estimated accelerations vs the Euler–Lagrange ones at the estimated states: "
            f"median relative error {est.median:.3%}"
        )

    split = data.split(fractions=(0.8, 0.1, 0.1), seed=0)
    model = lnn.LagrangianNetwork(
        n, kind="structured", angular=angular, hidden=(32, 32) if args.quick else (128, 128), seed=0
    )
    history = lnn.fit(
        model,
        split.train,
        validation=split.validation,
        epochs=100 if args.quick else 500,
        time_limit=None if args.quick else args.time_limit,
        seed=0,
    )
    print(f"trained {len(history.epoch)} epochs ({history.stopped_reason})")
    model.save(args.output_dir / "from_logs.keras")
    if simulated:
        table = evaluate(
            model, split.test, true_system=simulations.DoublePendulum(), n_rollouts=min(4, split.test.n_trajectories)
        )
        print(table.format())
        lnn.plot.save(
            lnn.plot.paper_figure(
                table.details["reference"], table.details["predicted"], system=simulations.DoublePendulum()
            ).figure,
            args.output_dir / "from_logs.png",
            overwrite=True,
        )
        print(f"wrote {args.output_dir}/from_logs.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
