"""Real robots: held-out torque error of lnn.identify against classical identification.

The DFKI double pendulum (real hardware, measured motor torques; BSD-3 data
kept outside the project, path given by ``--data``): train on
trajectory_00-02, 04, 05, 11-13, test on trajectory_03; a uniform 2 ms grid,
derivatives by Savitzky-Golay (window 101, order 4) — the issue's protocol,
``benchmarks/_dfki.py``. Held-out torque MSE (N^2 m^2) per joint and mean:

- the lab's identified model (``model_2.0_parameters.yml``, the plant of the
  lab's repository) with and without its friction ``b qd + cf atan(100 qd)``;
- least squares (``lnn.baseline.least_squares``: the 10 base parameters of the
  URDF's chain with viscous + Coulomb friction) and its physically consistent
  variant;
- ``lnn.identify`` with the URDF prior and without a prior.

``--panda`` runs the same comparison on a simulated 7-DOF Panda with friction,
a 0.8 kg payload its URDF does not know and 1 kHz sensor noise.

Usage::

    python benchmarks/bench_real.py --data ../shared/data/dfki_double_pendulum [--time 120] [--panda]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _lab_model(parameters: dict, *, friction: bool):
    """The lab's double-pendulum plant (``DoublePendulumPlant``: motor inertia ``Ir``, gear ratio ``gr``)."""
    p = parameters
    m1, m2, l1, r1, r2, I1, I2 = (p[k] for k in ("m1", "m2", "l1", "r1", "r2", "I1", "I2"))
    Ir, gr, g = p["Ir"], p["gr"], p["g"]
    b = np.array([p["b1"], p["b2"]])
    cf = np.array([p["cf1"], p["cf2"]])

    class Lab:
        n_dof, angular = 2, (True, True)

        @staticmethod
        def inverse_dynamics(q, qd, qdd):
            c2, s2 = np.cos(q[:, 1]), np.sin(q[:, 1])
            m11 = I1 + I2 + m2 * l1**2 + 2 * m2 * l1 * r2 * c2 + gr**2 * Ir + Ir
            m12 = I2 + m2 * l1 * r2 * c2 - gr * Ir
            m22 = I2 + gr**2 * Ir
            h = m2 * l1 * r2 * s2
            coriolis = np.stack([-2 * h * qd[:, 1] * qd[:, 0] - h * qd[:, 1] ** 2, h * qd[:, 0] ** 2], -1)
            gravity = np.stack(
                [
                    m1 * g * r1 * np.sin(q[:, 0]) + m2 * g * (l1 * np.sin(q[:, 0]) + r2 * np.sin(q[:, 0] + q[:, 1])),
                    m2 * g * r2 * np.sin(q[:, 0] + q[:, 1]),
                ],
                -1,
            )
            tau = np.stack([m11 * qdd[:, 0] + m12 * qdd[:, 1], m12 * qdd[:, 0] + m22 * qdd[:, 1]], -1)
            tau = tau + coriolis + gravity
            if friction:
                tau = tau + b * qd + cf * np.arctan(100 * qd)
            return tau

    return Lab()


def _read_yaml(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            out[key.strip()] = float(value)
    return out


def _row(name, mse, seconds=None):
    extra = "" if seconds is None else f"{seconds:8.1f}"
    print(f"| {name:<58} | {mse[0]:.4f} | {mse[1]:.4f} | {np.mean(mse):.4f} | {extra} |", flush=True)


def dfki(folder: Path, seconds: float) -> None:
    import _dfki

    import lnn
    import simulations
    from lnn.baseline import least_squares

    os.environ["LNN_DFKI_DATA"] = str(folder)
    train, test = _dfki.load(_dfki.TRAIN), _dfki.load(_dfki.TEST)
    robot = simulations.URDFRobot.from_urdf(str(_dfki.urdf_path()), missing_links="add")
    print(
        f"DFKI double pendulum: train {len(train)} samples ({train.n_trajectories} logs), "
        f"test {len(test)} samples; 2 ms grid, Savitzky-Golay 101/4"
    )
    print("| model | J1 | J2 | mean | s |\n|---|---|---|---|---|")
    lab = _read_yaml(folder / "model_2.0_parameters.yml")
    _row("the lab's identified model + friction", _dfki.torque_mse(_lab_model(lab, friction=True), test))
    _row("the same without friction", _dfki.torque_mse(_lab_model(lab, friction=False), test))
    for label, options in (
        ("least squares (base parameters, viscous + Coulomb + offset)", {}),
        ("least squares, + armature, no offset", {"armature": True, "offset": False}),
        ("least squares, physically consistent", {"physical": True}),
    ):
        t0 = time.perf_counter()
        fit = least_squares(train, robot, friction="viscous+coulomb", **options)
        _row(label, _dfki.torque_mse(fit, test), time.perf_counter() - t0)
    for label, prior in (("lnn.identify, URDF prior", robot), ("lnn.identify, no prior", None)):
        t0 = time.perf_counter()
        model = lnn.identify(train, prior=prior, time_limit=seconds, seed=0)
        _row(f"{label} (chose {model.report.chosen})", _dfki.torque_mse(model, test), time.perf_counter() - t0)
        for stage, network in model.candidates.items():
            _row(f"    its stage {stage!r}", _dfki.torque_mse(lnn.IdentifiedModel(network, model.report), test))
        print("\n".join("    " + line for line in model.report.format().splitlines()), flush=True)


def panda(seconds: float) -> None:
    import lnn
    import simulations
    from lnn.baseline import least_squares

    friction = simulations.Friction(viscous=0.1, coulomb=0.3, velocity=0.01)
    payload = simulations.Payload(mass=0.8, com=(0.0, 0.0, 0.1))
    true = simulations.panda(friction=friction, payload=payload)
    nominal = simulations.panda()
    data = lnn.generate(true, n_trajectories=10, duration=4.0, dt=0.001, seed=0, tau="gravity-sinusoids")
    rng = np.random.default_rng(0)
    folder = Path(tempfile.mkdtemp(prefix="lnn-panda-logs-"))
    names = [f"q{j + 1}" for j in range(7)] + [f"tau{j + 1}" for j in range(7)]
    paths = []
    for k, part in enumerate(data.trajectories()):  # logs as a robot writes them: noisy encoders and torques
        q = part.q[0] + 1e-4 * rng.standard_normal(part.q[0].shape)  # encoder noise (rad), 1 kHz
        tau = part.tau[0] + 0.02 * rng.standard_normal(part.tau[0].shape)  # torque-sensor noise (N m)
        path = folder / f"log_{k:02d}.csv"
        np.savetxt(
            path, np.column_stack([part.t, q, tau]), delimiter=",", header=",".join(["time"] + names), comments=""
        )
        paths.append(path)
    columns = dict(time="time", q=names[:7], tau=names[7:], angular=True)
    train, test = lnn.Dataset.from_csv(paths[:8], **columns), lnn.Dataset.from_csv(paths[8:], **columns)
    print(
        f"\nsimulated Panda: friction, 0.8 kg payload the URDF lacks, 1e-4 rad encoder noise, "
        f"0.02 N m torque noise, 1 kHz logs read by Dataset.from_csv; train {len(train)}, test {len(test)} "
        f"samples"
    )
    print("| model | mean of 7 joints | s |\n|---|---|---|")
    for label, options in (("least squares", {}), ("least squares, physically consistent", {"physical": True})):
        t0 = time.perf_counter()
        fit = least_squares(train, nominal, friction="viscous+coulomb", **options)
        mse = np.mean((fit.inverse_dynamics(test.q, test.qd, test.qdd) - test.tau) ** 2)
        print(f"| {label} | {mse:.5f} | {time.perf_counter() - t0:.1f} |", flush=True)
    t0 = time.perf_counter()
    model = lnn.identify(train, prior=nominal, time_limit=seconds, seed=0)
    mse = np.mean((model.inverse_dynamics(test.q, test.qd, test.qdd) - test.tau) ** 2)
    print(
        f"| lnn.identify, URDF prior (chose {model.report.chosen}) | {mse:.5f} | {time.perf_counter() - t0:.1f} |",
        flush=True,
    )
    print("\n".join("    " + line for line in model.report.format().splitlines()), flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of the DFKI logs (not shipped)")
    parser.add_argument("--time", type=float, default=120.0, help="time budget of lnn.identify (s)")
    parser.add_argument("--panda", action="store_true", help="also the simulated Panda table")
    parser.add_argument("--panda-only", action="store_true", help="only the simulated Panda table")
    args = parser.parse_args(argv)
    if not args.panda_only:
        dfki(args.data, args.time)
    args.panda = args.panda or args.panda_only
    if args.panda:
        panda(args.time)


if __name__ == "__main__":
    main()
