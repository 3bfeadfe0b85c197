"""Tutorial: a double pendulum end to end — simulate, train, check, roll out, plot, save.

Each step is one block between ``--8<-- [start:NAME]`` and ``--8<-- [end:NAME]``
markers, which the page ``docs/tutorials/double-pendulum.md`` includes, so the
page shows exactly the code that runs (``tests/test_docs.py`` runs the quick mode).

    python docs/tutorials/tutorial_double_pendulum.py            # about 3 minutes on 2 cores
    python docs/tutorials/tutorial_double_pendulum.py --quick    # a smoke test (seconds)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    """Run every step of the tutorial and print what each one produced."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="double-pendulum-tutorial", type=Path)
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    args = parser.parse_args(argv)
    quick = args.quick
    out = args.output_dir
    out.mkdir(parents=True, exist_ok=True)

    # --8<-- [start:data]
    import lnn
    import simulations

    system = simulations.DoublePendulum(g=9.8)  # m1 = m2 = l1 = l2 = 1, absolute angles
    data = lnn.generate(system, n_trajectories=8 if quick else 200, duration=2.0 if quick else 5.0, dt=0.05, seed=0)
    held_out = lnn.generate(system, n_trajectories=4 if quick else 20, duration=2.0 if quick else 5.0, dt=0.05, seed=1)
    print(
        f"{len(data.t)} samples of {len(np.unique(data.trajectory))} trajectories; "
        f"q {data.q.shape}, qdd {data.qdd.shape}"
    )
    # --8<-- [end:data]

    # --8<-- [start:train]
    model = lnn.LagrangianNetwork(
        system.n_dof, kind="structured", angular=system.angular, hidden=(32, 32) if quick else (128, 128), seed=0
    )
    history = lnn.fit(
        model, data, loss="acceleration", epochs=100 if quick else None, time_limit=None if quick else 120.0, seed=0
    )
    print(f"trained {len(history.epoch)} epochs in {history.time[-1]:.0f} s ({history.stopped_reason})")
    # --8<-- [end:train]

    # --8<-- [start:health]
    health = model.mass_matrix_health(held_out.q)
    print(
        f"M positive definite on {1 - health.fraction_not_positive_definite:.0%} of the held-out "
        f"states; smallest eigenvalue {health.min_eigenvalue:.3g}, "
        f"largest condition number {health.condition_number:.3g}"
    )
    # --8<-- [end:health]

    # --8<-- [start:evaluate]
    table = lnn.evaluate(model, held_out, true_system=system, n_rollouts=4 if quick else 20)
    print(table.format())
    print(f"median relative qdd error: {table['acceleration_error_median']:.3g}")
    # --8<-- [end:evaluate]

    # --8<-- [start:rollout]
    state = system.sample_state(4 if quick else 8, rng=2)
    t = np.linspace(0.0, 2.0 if quick else 5.0, 201)
    true = lnn.rollout(system, state.q, state.qd, t)
    learned = lnn.rollout(model, state.q, state.qd, t)
    drift = np.abs(learned.energy - learned.energy[:, :1]).max()
    print(
        f"rolled out {learned.q.shape[0]} trajectories of {t[-1]:g} s; "
        f"largest drift of the learned energy {drift:.3g} J"
    )
    # --8<-- [end:rollout]

    # --8<-- [start:plot]
    figure = lnn.plot.paper_figure(true, learned, system=system)
    lnn.plot.save(figure.figure, out / "double_pendulum.png", overwrite=True)
    # --8<-- [end:plot]

    # --8<-- [start:save]
    model.save(out / "double_pendulum.keras")
    again = lnn.load_model(out / "double_pendulum.keras")
    same = np.array_equal(
        np.asarray(again.acceleration(state.q, state.qd)), np.asarray(model.acceleration(state.q, state.qd))
    )
    print(f"saved and reloaded: identical accelerations {same}")
    # --8<-- [end:save]
    print(f"wrote {out}/double_pendulum.png and {out}/double_pendulum.keras")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
