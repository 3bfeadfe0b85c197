"""Regenerate the README figures in ``docs/figures/`` with the public API.

A double pendulum is simulated, a small structured Lagrangian network is
trained on it for a fixed time budget (``--train-seconds``), and both are
rolled out from the same initial states; every figure kind of :mod:`lnn.plot`
is drawn from these rollouts, plus two GIF animations (the double pendulum,
true against learned, and the 7-DOF Panda arm falling under gravity, a 3-D
skeleton that needs the robots extra).

With ``--no-train`` (or when the training budget is 0) the "learned" system
is a perturbed true system (second bob 10 % heavier), which is enough to
check the figures and takes seconds; the history figure is then left out.

Usage::

    python examples/make_figures.py                 # about 2-3 minutes on 2 CPU cores
    python examples/make_figures.py --no-train      # seconds
    python examples/make_figures.py --out /tmp/figs --force
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

import lnn
import simulations
from lnn import plot

#: README figures are written at this resolution: crisp on screen, each well under 300 KB.
README_DPI = 150


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "docs" / "figures",
        help="output directory (default: docs/figures of this repository)",
    )
    parser.add_argument(
        "--train-seconds", type=float, default=60.0, help="training time budget in seconds (default 60)"
    )
    parser.add_argument(
        "--no-train", action="store_true", help="use a perturbed true system instead of a trained model"
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing figures")
    return parser.parse_args(argv)


def learned_system(system, args):
    """Train a small structured LNN (or perturb the system); return (model, history, label)."""
    if args.no_train or args.train_seconds <= 0:
        return dataclasses.replace(system, m2=1.1 * system.m2), None, "perturbed system"
    data = lnn.generate(system, n_trajectories=128, duration=2.0, dt=0.05, seed=0)
    model = lnn.LagrangianNetwork(system.n_dof, kind="structured", hidden=(64, 64), angular=system.angular, seed=0)
    history = lnn.fit(
        model,
        data,
        loss="acceleration",
        epochs=100_000,
        batch_size=256,
        learning_rate=3e-3,
        time_limit=args.train_seconds,
        seed=0,
    )
    return model, history, f"LNN, {len(history.epoch)} epochs in {args.train_seconds:g} s"


def main(argv=None) -> int:
    """Build the model and rollouts, write every figure into ``--out``; return the exit code."""
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    written = []

    def save(result, name: str) -> None:
        written.append(plot.save(result.figure, args.out / name, overwrite=args.force, dpi=README_DPI))

    system = simulations.DoublePendulum()
    model, history, label = learned_system(system, args)
    print(f"learned model: {label} ({time.monotonic() - start:.0f} s)")

    state = system.sample_state(6, rng=1, velocity_scale=0.5)
    t = np.linspace(0.0, 4.0, 201)
    true = lnn.rollout(system, state.q, state.qd, t)
    learned = lnn.rollout(model, state.q, state.qd, t)

    save(plot.paper_figure(true, learned, system=system), "paper.png")
    save(plot.trajectories(true, learned), "trajectories.png")
    save(plot.phase_portraits(true, learned), "phase.png")
    save(plot.energy_error({"learned": learned}, reference=true, system=system), "energy.png")
    save(plot.rollout_error(true, learned), "error.png")
    save(plot.mass_matrix(system, model), "mass_matrix.png")
    save(plot.potential(system, model, coordinates=(0, 1)), "potential.png")
    save(plot.torques(system, true, model, index=0), "torques.png")
    if history is not None:
        save(plot.history(history), "history.png")

    short = lnn.rollout(system, state.q[:1], state.qd[:1], np.linspace(0.0, 3.0, 61))
    short_learned = lnn.rollout(model, state.q[:1], state.qd[:1], short.t)
    animation = plot.animate(system, short, short_learned, fps=20)
    written.append(plot.save_animation(animation, args.out / "double_pendulum.gif", overwrite=args.force, dpi=60))
    try:
        panda = simulations.panda()
    except ImportError as exc:  # the robots extra (Pinocchio, example-robot-data) is missing
        print(f"skipping the Panda animation: {exc}")
    else:
        q0 = np.zeros((1, panda.n_dof))
        q0[0, 1], q0[0, 3] = 0.3, -1.5
        fall = lnn.rollout(panda, q0, np.zeros_like(q0), np.linspace(0.0, 1.5, 31))
        written.append(
            plot.save_animation(plot.animate(panda, fall, fps=20), args.out / "panda.gif", overwrite=args.force, dpi=60)
        )

    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KB)")
    print(f"done in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
