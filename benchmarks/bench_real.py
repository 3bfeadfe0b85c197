r"""Real robots: held-out torque error of lnn.identify against classical identification.

The DFKI double pendulum (real hardware, measured motor torques; BSD-3 data
kept outside the project, path given by ``--data``): train on
trajectory_00-02, 04, 05, 11-13, test on trajectory_03, read as a user reads
them (``lnn import``'s defaults: the training logs in one call, the test log
with their derivative window; ``_dfki.imported``), or with ``--protocol``
under issue 16's protocol (a uniform 2 ms grid, derivatives by Savitzky-Golay
101/4; ``_dfki.load``). Held-out torque MSE (N^2 m^2) per joint and mean:

- the lab's identified model (``model_2.0_parameters.yml``, the plant of the
  lab's repository) with and without its friction ``b qd + cf atan(100 qd)``;
- least squares (``lnn.baseline.least_squares``: the 10 base parameters of the
  URDF's chain with viscous + Coulomb friction) and its physically consistent
  variant;
- ``lnn.identify`` with the URDF prior and without a prior.

``--panda`` runs the same comparison on the simulated 7-DOF Panda of
``benchmarks/_panda.py``: Stribeck, asymmetric and position-dependent friction
(outside the linear family), a 0.8 kg payload its URDF does not know, encoder
and torque noise, a torque bias per recording, 1 kHz logs. ``--single-log``
runs it on one 21 s log of that Panda, trained on its first 70 % and tested
on the last 30 % (issue 30's real 7-DOF case: the held-out part is later and
reaches states the training part did not). ``--leave-one-out`` holds out
each of the nine DFKI logs in turn (the eight others read in one import):
the ratio to least squares, and with ``--ensemble K`` the intervals' cover,
over the logs rather than on trajectory_03 alone (``--no-prior``: ``identify``
without the URDF).

Usage::

    python benchmarks/bench_real.py --data ../shared/data/dfki_double_pendulum [--time 120] [--panda] [--protocol]
    python benchmarks/bench_real.py --data ../shared/data/dfki_double_pendulum --leave-one-out \
        [--ensemble 5] [--no-prior]
    python benchmarks/bench_real.py --single-log [--seed 0] [--time 120]   # no DFKI data needed
"""

from __future__ import annotations

import argparse
import os
import sys
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


def dfki(folder: Path, seconds: float, *, imported: bool = False) -> None:
    import _dfki

    import lnn
    import simulations
    from lnn.baseline import least_squares

    os.environ["LNN_DFKI_DATA"] = str(folder)
    if imported:  # as a user reads them: the training logs in one call, the test log with their window
        split = _dfki.imported_split()
        train, test = split.train, split.test
        alone = _dfki.imported(_dfki.TEST).dataset  # its window chosen by its own torques, the score's targets
        reading = (
            f"read by lnn.logs.import_csv's defaults: window {split.window} samples at 2 ms "
            f"({split.report.files[0].window_rule}), the test log read with it; in brackets the test log read "
            f"alone (its own torques chose {alone.derivative_span / alone.dt:.0f})"
        )
    else:
        train, test, alone = _dfki.load(_dfki.TRAIN), _dfki.load(_dfki.TEST), None
        reading = "2 ms grid, Savitzky-Golay 101/4 (the issue's protocol)"
    robot = simulations.URDFRobot.from_urdf(str(_dfki.urdf_path()), missing_links="add")
    print(
        f"DFKI double pendulum: train {len(train)} samples ({train.n_trajectories} logs), "
        f"test {len(test)} samples; {reading}"
    )

    def _row(name, system, seconds=None):
        mse = _dfki.torque_mse(system, test)
        extra = "" if alone is None else f" [{np.mean(_dfki.torque_mse(system, alone)):.4f}]"
        timing = "" if seconds is None else f"{seconds:8.1f}"
        print(f"| {name:<58} | {mse[0]:.4f} | {mse[1]:.4f} | {np.mean(mse):.4f}{extra} | {timing} |", flush=True)

    print("| model | J1 | J2 | mean | s |\n|---|---|---|---|---|")
    lab = _read_yaml(folder / "model_2.0_parameters.yml")
    _row("the lab's identified model + friction", _lab_model(lab, friction=True))
    _row("the same without friction", _lab_model(lab, friction=False))
    for label, options in (
        ("least squares (base parameters, viscous + Coulomb + offset)", {}),
        ("least squares, + armature, no offset", {"armature": True, "offset": False}),
        ("least squares, physically consistent", {"physical": True}),
    ):
        t0 = time.perf_counter()
        fit = least_squares(train, robot, friction="viscous+coulomb", **options)
        _row(label, fit, time.perf_counter() - t0)
    for label, prior, options in (
        ("lnn.identify, URDF prior", robot, {}),
        ("lnn.identify, URDF prior, + residual Lagrangian", robot, {"residual_lagrangian": True}),
        ("lnn.identify, no prior", None, {}),
    ):
        t0 = time.perf_counter()
        model = lnn.identify(train, prior=prior, time_limit=seconds, seed=0, **options)
        _row(f"{label} (chose {model.report.chosen})", model, time.perf_counter() - t0)
        for stage, network in model.candidates.items():
            _row(f"    its stage {stage!r}", lnn.IdentifiedModel(network, model.report))
        print("\n".join("    " + line for line in model.report.format().splitlines()), flush=True)


def leave_one_out(folder: Path, seconds: float, *, names=None, members: int | None = None, prior: bool = True) -> None:
    """Each of the nine DFKI logs held out in turn, ``identify`` (URDF prior, or none) against least squares.

    The protocol's one test log is one number: this reads the eight other logs as a user does (one
    ``lnn import`` call), the held-out log with their window, and scores least squares (viscous +
    Coulomb + offset), ``identify`` with its default options and each of its stages on it. With
    ``members``, ``identify(..., ensemble=members)`` and the cover of its 50 % and 90 % torque
    intervals on the held-out log too. Without ``prior``, ``identify`` without the URDF (the
    trigonometric stages; least squares keeps it, as the baseline). The summary is over the logs: the
    median ratio to least squares, the ratio of the summed errors, and the median and range of the covers.
    """
    import _dfki

    import lnn
    import simulations
    from lnn.baseline import least_squares
    from lnn.uncertainty import LEVELS

    os.environ["LNN_DFKI_DATA"] = str(folder)
    logs = sorted(_dfki.TRAIN + _dfki.TEST)
    robot = simulations.URDFRobot.from_urdf(str(_dfki.urdf_path()), missing_links="add")
    options = {} if members is None else {"ensemble": members}
    print(
        f"DFKI double pendulum, each log held out of the other {len(logs) - 1}; "
        f"identify {seconds:.0f} s, seed 0, {'URDF prior' if prior else 'no prior'}"
        f"{'' if members is None else f', ensemble={members}'}"
    )
    covers_head = "" if members is None else " 50 % cover J1, J2 | 90 % cover J1, J2 | std x for 50 % |"
    print(f"| held out | samples | window | least squares | identify (stage) | ratio | its stages | s |{covers_head}")
    print("|---|---|---|---|---|---|---|---|" + ("" if members is None else "---|---|---|"))
    rows, covers, factors = [], [], []
    for held in names or logs:
        split = _dfki.imported_split(tuple(n for n in logs if n != held), (held,))
        test = split.test
        baseline = np.mean(_dfki.torque_mse(least_squares(split.train, robot, friction="viscous+coulomb"), test))
        t0 = time.perf_counter()
        model = lnn.identify(split.train, prior=robot if prior else None, time_limit=seconds, seed=0, **options)
        elapsed = time.perf_counter() - t0
        error = np.mean(_dfki.torque_mse(model, test))
        stages = {
            stage: np.mean(_dfki.torque_mse(lnn.IdentifiedModel(network, model.report), test))
            for stage, network in model.candidates.items()
        }
        rows.append((baseline, error, stages))
        listed = ", ".join(f"{stage} {value:.4f}" for stage, value in stages.items())
        shown = ""
        if members is not None:
            p = model.predict(test.q, test.qd, qdd=test.qdd)
            cover = lnn.metrics.calibration(test.tau, p.tau, p.tau_std, output="tau", dof=p.tau_dof).coverage
            covers.append([cover[level] for level in LEVELS])
            factors.append(_nominal_factor(test.tau, p.tau, p.tau_std, p.tau_dof))
            shown = "".join(f" {cover[level][0]:.1%}, {cover[level][1]:.1%} |" for level in LEVELS)
            shown += f" {', '.join(f'{f:.2f}' for f in factors[-1])} |"
        print(
            f"| {held} | {len(test)} | {split.window} | {baseline:.4f} | {error:.4f} ({model.report.chosen}) "
            f"| {error / baseline:.2f} | {listed} | {elapsed:.0f} |{shown}",
            flush=True,
        )
    baseline, error = (np.array([r[i] for r in rows]) for i in (0, 1))
    print(
        f"over {len(rows)} held-out logs: identify / least squares median {np.median(error / baseline):.2f} "
        f"(range {np.min(error / baseline):.2f}-{np.max(error / baseline):.2f}), summed errors "
        f"{error.sum() / baseline.sum():.2f}"
    )
    for stage in dict.fromkeys(stage for r in rows for stage in r[2]):
        values = np.array([r[2].get(stage, np.nan) for r in rows])
        print(
            f"  stage {stage!r} alone: median ratio {np.nanmedian(values / baseline):.2f} ({np.sum(values > 0)} logs)"
        )
    if covers:
        covered = np.array(covers)  # (logs, level, joint)
        for i, level in enumerate(LEVELS):
            spans = ", ".join(
                f"J{j + 1} median {np.median(covered[:, i, j]):.1%} "
                f"({np.min(covered[:, i, j]):.1%}-{np.max(covered[:, i, j]):.1%})"
                for j in range(covered.shape[2])
            )
            print(f"  {level:.0%} intervals cover: {spans}")
        spread = np.array(factors)  # (logs, joint)
        print(
            "  the factor on the calibrated std that puts a log's 50 % cover at 50 %: "
            + ", ".join(
                f"J{j + 1} median {np.median(spread[:, j]):.2f} (range {spread[:, j].min():.2f}-"
                f"{spread[:, j].max():.2f}, log-std {np.std(np.log(spread[:, j])):.2f}; "
                f"{np.sum(np.abs(np.log(spread[:, j])) <= np.log(1.1))} of {len(spread)} logs within 10 %)"
                for j in range(spread.shape[1])
            )
        )


def _nominal_factor(truth, mean, std, dof) -> np.ndarray:
    """Per joint, the factor on ``std`` that would put the 50 % interval's cover of these samples at 50 %: the
    median of ``|truth - mean| / std`` over the interval's half-width in standard deviations. Within 10 % of 1,
    the cover is within about 5 points of 50 % (for Gaussian tails, 46.0-54.2 %); how far a new log's factor
    falls from its median over the logs is what no calibration on other logs can know."""
    from lnn.uncertainty import standard_quantile

    z = np.abs(np.asarray(truth, np.float64) - mean) / std
    return np.median(z, axis=0) / standard_quantile(0.5, dof)


def calibration(
    folder: Path,
    seconds: float,
    members: int,
    *,
    figure: Path | None = None,
    force: bool = False,
    imported: bool = False,
) -> None:
    """``identify(..., ensemble=K)`` with the URDF prior: coverage of its torque intervals on trajectory_03.

    The intervals are calibrated on the validation log that ``identify`` holds
    out of the training logs and on the training samples out of each member's
    bag; trajectory_03 is never seen. First, what one log says of the next:
    the least squares' error on each training log left out of the others. Issue 31: the
    nominal 90 % intervals must cover 85-95 % of the test samples on each
    joint, the 50 % ones 45-55 %, and the ensemble's mean be no worse than a
    single member.
    """
    import _dfki

    import lnn
    import simulations
    from lnn import uncertainty

    os.environ["LNN_DFKI_DATA"] = str(folder)
    if imported:  # as a user reads them (lnn.logs.import_csv's defaults), the test log with the training's window
        split = _dfki.imported_split()
        train, test = split.train, split.test
    else:
        train, test = _dfki.load(_dfki.TRAIN), _dfki.load(_dfki.TEST)
    robot = simulations.URDFRobot.from_urdf(str(_dfki.urdf_path()), missing_links="add")
    print(f"\nDFKI read {'by lnn.logs.import_csv' if imported else 'under the protocol'}")
    print("\nDFKI, least squares (viscous + Coulomb + offset), each training log left out of the others:")
    ids = np.unique(train.trajectory)
    for k, name in zip(ids, _dfki.TRAIN):
        fit = lnn.baseline.least_squares(
            train.subset([i for i in ids if i != k]), robot, friction="viscous+coulomb+offset"
        )
        mse = _dfki.torque_mse(fit, train.subset([k]))
        print(f"  {name}: torque MSE J1 {mse[0]:.4f}, J2 {mse[1]:.4f}")
    fitted_on = []  # the torque calibrations' samples, to compare the tails on the same ones after
    fit_calibration = uncertainty.fit_calibration

    def keeping_samples(output, truth, mean, spread, **options):
        result = fit_calibration(output, truth, mean, spread, **options)
        if output == "tau":
            fitted_on.append((result, (truth, mean, spread), options))
        return result

    t0 = time.perf_counter()
    uncertainty.fit_calibration = keeping_samples
    try:
        model = lnn.identify(train, prior=robot, time_limit=seconds, seed=0, ensemble=members)
    finally:
        uncertainty.fit_calibration = fit_calibration
    prediction = model.predict(test.q, test.qd, qdd=test.qdd)
    print(
        f"\nDFKI, identify(..., ensemble={members}), URDF prior, {time.perf_counter() - t0:.0f} s "
        f"(chose {model.report.chosen}); on trajectory_03 (J1, J2):"
    )
    held_out = lnn.metrics.calibration(
        test.tau, prediction.tau, prediction.tau_std, output="tau", dof=prediction.tau_dof
    )
    for level, covered in held_out.coverage.items():
        print(f"  {level:.0%} torque intervals cover {covered[0]:.1%}, {covered[1]:.1%}")
    nll = held_out.nll
    print(f"  negative log-likelihood per sample {nll[0]:.3f}, {nll[1]:.3f} nats")
    members_mse = np.mean((prediction.tau_members - np.asarray(test.tau)[None]) ** 2, axis=1)  # (K, n)
    mean_mse = np.mean((prediction.tau - test.tau) ** 2, axis=0)
    print(
        f"  torque MSE of the ensemble's mean {mean_mse.mean():.4f} (J1 {mean_mse[0]:.4f}, J2 {mean_mse[1]:.4f}); "
        f"of its members {', '.join(f'{m:.4f}' for m in members_mse.mean(axis=1))}"
    )
    fitted = model.network.calibration.tau
    print("  each calibration recording's torque cover by intervals fitted on the others (J1, J2):")
    for r, label in enumerate(fitted.recordings):
        covers = "; ".join(
            f"{level:.0%}: {c[r, 0]:.1%}, {c[r, 1]:.1%}" for level, c in fitted.recording_coverage.items()
        )
        print(f"    {label:<12s} {covers}")
    print("\n".join("    " + line for line in model.report.format().splitlines()), flush=True)
    chosen = [f for f in fitted_on if np.allclose(f[0].floor, model.network.tau_floor.numpy(), rtol=1e-6)]
    if chosen:
        _compare_tails(*chosen[-1][1:], test, prediction)
    if figure is not None:
        from lnn import plot

        drawn = plot.calibration(model, test, output="tau")
        drawn.ax.set_title("DFKI trajectory_03, identify(..., ensemble=5)", fontsize="small")
        plot.save(drawn.figure, figure, overwrite=force)
        print(f"wrote {figure}")


def _compare_tails(samples, options, test, prediction) -> None:
    """The chosen stage's torque intervals with Gaussian and with Student-t tails, fitted on the same samples:
    the mean and range of the calibration logs' cover (each fitted on the others) and the test log's."""
    from lnn import uncertainty

    print("  tails fitted on the same calibration samples (J1, J2):")
    for tails in ("gaussian", "student"):
        fitted = uncertainty.fit_calibration("tau", *samples, tails=tails, **options)
        std = uncertainty.interval_std(prediction.tau_spread, fitted.scale, fitted.floor)
        nll = uncertainty.predictive_nll(test.tau, prediction.tau, std, fitted.dof)
        print(f"    {tails} (dof {', '.join(f'{v:.3g}' for v in fitted.dof)}); test NLL {nll[0]:.3f}, {nll[1]:.3f}")
        for level in uncertainty.LEVELS:
            logs = fitted.recording_coverage[level]
            test_cover = uncertainty.coverage(test.tau, prediction.tau, std, level, fitted.dof)
            print(
                f"      {level:.0%}: calibration logs mean {logs.mean(axis=0)[0]:.1%}, {logs.mean(axis=0)[1]:.1%} "
                f"(ranges {logs[:, 0].min():.1%}-{logs[:, 0].max():.1%}, {logs[:, 1].min():.1%}-"
                f"{logs[:, 1].max():.1%}); trajectory_03 {test_cover[0]:.1%}, {test_cover[1]:.1%}"
            )


def panda(seconds: float, *, seed: int = 0, single: bool = False) -> None:
    """The simulated 7-DOF Panda of ``benchmarks/_panda.py``: friction outside the linear family, a payload
    the URDF lacks, noise and a bias per recording, 1 kHz logs read by ``Dataset.from_csv``; ``single``: one
    log, its first 70 % to train on, its last 30 % held out."""
    import _panda

    import lnn

    logs = _panda.simulated_panda_log(seed=seed) if single else _panda.simulated_panda_logs(seed=seed)
    try:
        layout = "one log, the last 30 % held out" if single else "a bias per recording"
        print(
            f"\nsimulated Panda (benchmarks/_panda.py, seed {seed}): Stribeck, asymmetric, position-dependent "
            f"friction, 0.8 kg payload the URDF lacks, noise, {layout}, 1 kHz; train "
            f"{len(logs.train)} samples ({logs.train.n_trajectories} logs), test {len(logs.test)} "
            f"({logs.test.n_trajectories} logs); held-out states beyond the training ones (novelty > 1): "
            f"{np.mean(_novel(logs.train, logs.test)):.0%}"
        )
        print("| model | mean of 7 joints | vs least squares | s |\n|---|---|---|---|")
        baseline = _panda.least_squares_baseline(logs)
        v0 = logs.truth.friction.velocity
        reference = float(np.mean(baseline[f"least squares, v0 = {v0:g}"]))  # the same friction columns
        for label, mse in baseline.items():
            print(f"| {label} | {np.mean(mse):.5f} | {np.mean(mse) / reference:.2f} | |", flush=True)
        t0 = time.perf_counter()
        model = lnn.identify(logs.train, prior=logs.nominal, time_limit=seconds, seed=0)
        mse = float(np.mean(_panda.torque_mse(model, logs.test)))
        print(
            f"| lnn.identify, URDF prior (chose {model.report.chosen}) | {mse:.5f} | {mse / reference:.2f} | "
            f"{time.perf_counter() - t0:.1f} |",
            flush=True,
        )
        for stage, network in model.candidates.items():
            stage_mse = float(np.mean(_panda.torque_mse(network, logs.test)))
            print(f"|     its stage {stage!r} | {stage_mse:.5f} | {stage_mse / reference:.2f} | |")
        print("\n".join("    " + line for line in model.report.format().splitlines()), flush=True)
    finally:
        import shutil

        shutil.rmtree(logs.folder, ignore_errors=True)


def _novel(train, test) -> np.ndarray:
    """Which held-out states lie beyond the training states (novelty > 1 of a model adapted to ``train``)."""
    import lnn

    probe = lnn.LagrangianNetwork(train.n_dof, hidden=(8,), angular=train.angular, dtype="float64", seed=0)
    probe.adapt(train.q, train.qd)
    return probe.novelty(test.q, test.qd) > 1.0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="folder of the DFKI logs (not shipped)")
    parser.add_argument("--time", type=float, default=240.0, help="time budget of lnn.identify (s)")
    parser.add_argument("--panda", action="store_true", help="also the simulated Panda table")
    parser.add_argument("--panda-only", action="store_true", help="only the simulated Panda table")
    parser.add_argument(
        "--ensemble",
        type=int,
        default=None,
        metavar="K",
        help="only the DFKI calibration of identify(ensemble=K) (with --leave-one-out: on each log held out)",
    )
    parser.add_argument(
        "--figure", type=Path, default=None, help="with --ensemble: the reliability diagram on trajectory_03 (.png)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite the figure")
    parser.add_argument(
        "--single-log", action="store_true", help="only the simulated Panda's one log, its last 30 %% held out"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated Panda's logs")
    parser.add_argument(
        "--leave-one-out",
        nargs="*",
        metavar="LOG",
        default=None,
        help="only the DFKI logs each held out of the others (all nine, or the named ones), as a user reads them",
    )
    parser.add_argument("--no-prior", action="store_true", help="with --leave-one-out: identify without the URDF prior")
    reading = parser.add_mutually_exclusive_group()
    reading.add_argument(
        "--imported",
        action="store_true",
        help="read the DFKI logs as a user does, lnn.logs.import_csv's defaults (the default)",
    )
    reading.add_argument(
        "--protocol",
        action="store_true",
        help="read the DFKI logs under issue 16's protocol instead (2 ms grid, Savitzky-Golay 101/4)",
    )
    args = parser.parse_args(argv)
    args.imported = not args.protocol
    if args.single_log:
        panda(args.time, seed=args.seed, single=True)
        return
    if args.data is None and not args.panda_only:
        parser.error("--data is required (the folder of the DFKI logs) unless --panda-only or --single-log")
    if args.leave_one_out is not None:
        leave_one_out(
            args.data, args.time, names=args.leave_one_out or None, members=args.ensemble, prior=not args.no_prior
        )
        return
    if args.ensemble is not None:
        calibration(args.data, args.time, args.ensemble, figure=args.figure, force=args.force, imported=args.imported)
        return
    if not args.panda_only:
        dfki(args.data, args.time, imported=args.imported)
    args.panda = args.panda or args.panda_only
    if args.panda:
        panda(args.time, seed=args.seed)


if __name__ == "__main__":
    main()
