"""Tutorial: a robot arm from a measured log — ``lnn import``, ``lnn.identify``, computed-torque control.

Each step is one block between ``--8<-- [start:NAME]`` and ``--8<-- [end:NAME]``
markers, which the page ``docs/tutorials/robot-from-a-log.md`` includes
(``tests/test_docs.py`` runs the quick mode).

    python docs/tutorials/tutorial_robot_log.py            # about 2 minutes on 2 cores
    python docs/tutorials/tutorial_robot_log.py --quick    # a smoke test
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    """Run every step of the tutorial and print what each one produced."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="robot-log-tutorial", type=Path)
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    args = parser.parse_args(argv)
    quick, out = args.quick, args.output_dir
    out.mkdir(parents=True, exist_ok=True)

    # --8<-- [start:robot]
    import lnn
    import simulations

    # The "real" robot: a 2-link arm with joint friction and a 0.3 kg payload on its last link...
    friction = simulations.Friction(viscous=(0.05, 0.03), coulomb=(0.1, 0.08))
    robot = simulations.PlanarArm(masses=(1.0, 0.8), lengths=(0.6, 0.5), friction=friction)
    # ...and what its data sheet says (no friction, no payload): the prior we do not trust.
    nominal = simulations.PlanarArm(masses=(1.0, 0.5), lengths=(0.6, 0.5))
    # --8<-- [end:robot]

    # --8<-- [start:logs]
    rng = np.random.default_rng(0)
    runs = lnn.generate(
        robot, n_trajectories=4 if quick else 8, duration=4.0, dt=0.002, seed=0, tau="gravity-sinusoids"
    )
    logs = []
    for k, run in enumerate(runs.trajectories()):  # what a controller writes at 500 Hz
        t = run.t + 2e-5 * rng.standard_normal(run.t.shape)  # time-stamp jitter
        q = run.q[0] + 3e-5 * rng.standard_normal(run.q[0].shape)  # encoder noise (rad), a 16-bit encoder
        tau = run.tau[0] + 0.01 * rng.standard_normal(run.tau[0].shape)  # torque-sensor noise (N m)
        rows = np.column_stack([t, q, tau])
        rows = np.insert(rows, 100, rows[100], axis=0)  # a repeated sample
        path = out / f"log_{k}.csv"
        np.savetxt(path, rows, delimiter=",", header="time,q1,q2,tau1,tau2", comments="")
        logs.append(str(path))
    # --8<-- [end:logs]

    # --8<-- [start:import]
    from lnn.cli import main as lnn_cli

    data_path = out / "data.npz"
    lnn_cli(
        [
            "import",
            *logs,
            "--time",
            "time",
            "--q",
            "q1,q2",
            "--tau",
            "tau1,tau2",
            "--angular",
            "all",
            "-o",
            str(data_path),
            "--overwrite",
        ]
    )
    data = lnn.Dataset.load(data_path)
    # --8<-- [end:import]

    # --8<-- [start:identify]
    model = lnn.identify(data, prior=nominal, time_limit=10 if quick else 60, residual=not quick, seed=0)
    print(model.report.format())
    model.save(out / "robot.keras", overwrite=True)
    # --8<-- [end:identify]

    # --8<-- [start:control]
    def computed_torque(dynamics, gains=(100.0, 20.0)):
        """tau = ID(q, qd, qdd_ref + Kd (qd_ref - qd) + Kp (q_ref - q)) along a reference."""
        kp, kd = gains

        def reference(t):
            w = 2 * np.pi * 0.5
            return (
                0.8 * np.sin(w * t) * np.ones(2),
                0.8 * w * np.cos(w * t) * np.ones(2),
                -0.8 * w * w * np.sin(w * t) * np.ones(2),
            )

        def tau(t, q, qd):  # q, qd of shape (B, n)
            q_ref, qd_ref, qdd_ref = reference(t)
            qdd = qdd_ref + kd * (qd_ref - qd) + kp * (q_ref - q)
            return np.asarray(dynamics.inverse_dynamics(q, qd, qdd))

        return tau, reference

    t = np.linspace(0.0, 1.0 if quick else 4.0, 101)
    for name, dynamics in (("data sheet", nominal), ("identified", model)):
        controller, reference = computed_torque(dynamics)
        run = lnn.rollout(robot, np.zeros(2), np.array([0.8 * np.pi, 0.8 * np.pi]), t=t, tau=controller)
        error = run.q[0] - np.stack([reference(ti)[0] for ti in t])
        print(
            f"computed-torque control with the {name} model: RMS tracking error "
            f"{np.sqrt(np.mean(error[len(t) // 4 :] ** 2)):.2e} rad"
        )
    # --8<-- [end:control]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
