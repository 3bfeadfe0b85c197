"""The defaults a user gets, measured on issue 17's acceptance protocol (a script, not a test).

Every case trains one model with the **default call** (the user names only
``n_dof``, ``angular``, the data and a time budget) and evaluates it on data
it never saw, in float64 (``model.astype("float64")``):

``dp``
    The LNN paper's double pendulum (m = l = 1, g = 9.8):
    ``generate(DoublePendulum(g=9.8), n_trajectories=256, duration=5.0,
    dt=0.02, seed=0)``, ``fit(model, data, time_limit=420)``. Figures: the
    median relative ``qdd`` error on 2000 held-out states (a second dataset,
    seed 1; target <= 0.5 %) and on 10 000 random states of the paper's box
    (angles uniform in [-pi, pi], rates N(0, 1); target <= 1 %); the number
    of those 10 000 states where the learned ``M`` is not positive definite
    (target 0); the energy error ``|E(x_pred(t)) - E(x_true(t))| / 29.4``
    (true energy on both), mean over 40 initial states (angles uniform in
    [0, 2 pi), rates uniform in [0, 0.1), as the LNN paper), at t = 10 s
    (target <= 4.3e-4) and t = 100 s (the paper's horizon, <= 4.3e-3).
``arm``
    The 2-link planar arm under gravity compensation plus random sinusoid
    torques (DeLaN's setting; 100 trajectories x 5 s at 100 Hz),
    ``fit(model, train, time_limit=240)`` on 80 % of the trajectories;
    torque MSE (squared error summed over joints, mean over samples) on 10 %
    held out (target <= 4.33e-5, DeLaN's 4.33e-4 / 10).
``cartpole``
    The cart-pole (unforced pole under random pushes of the cart: random
    sinusoid forces), 100 trajectories x 5 s at 100 Hz, ``time_limit=240``;
    torque MSE and median relative ``qdd`` error on held-out trajectories.

Experiments override the defaults: ``--model kind=structured`` or
``--fit learning_rate=1e-2 batch_size=256`` (Python literals; several
``key=value`` pairs after one flag). Each run appends one JSON line to
``--out`` (default ``defaults_runs.jsonl``) with the settings, the number of
epochs and the figures, so that a sweep of runs can be tabulated afterwards.

Usage::

    python benchmarks/bench_defaults.py --case dp                # the acceptance run
    python benchmarks/bench_defaults.py --case arm --model kind=kinetic-potential
    python benchmarks/bench_defaults.py --case dp --budget 60    # a shorter experiment
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

DP_SCALE = 29.4  # g (m1 l1 + m2 (l1 + l2)): the double pendulum's maximum potential energy
BUDGETS = {"dp": 420.0, "arm": 240.0, "cartpole": 240.0}
TARGETS = {
    "held-out qdd median": 0.005,
    "paper-box qdd median": 0.01,
    "paper-box indefinite M": 0,
    "energy error 10 s": 4.3e-4,
    "energy error 100 s": 4.3e-3,
    "torque MSE": 4.33e-5,
}


def _settings(pairs):
    """``["kind=structured", "hidden=(64, 64)"]`` -> ``{"kind": "structured", "hidden": (64, 64)}``."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"a setting is key=value; got {pair!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def _train(system, data, *, budget, model_options, fit_options, progress):
    from lnn.models import LagrangianNetwork
    from lnn.train import fit

    model = LagrangianNetwork(system.n_dof, angular=data.angular, **model_options)
    start = time.monotonic()
    history = fit(model, data, time_limit=budget, progress=progress, **fit_options)
    return model, len(history.epoch), time.monotonic() - start


def _paper_box(n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-np.pi, np.pi, (n, 2)), rng.normal(0.0, 1.0, (n, 2))


def _median_qdd_error(model, system, q, qd):
    """Median relative error over the states where the learned M is positive definite."""
    from lnn import metrics

    qdd = model.numpy_acceleration(q, qd, on_failure="mask")
    good = np.all(np.isfinite(qdd), axis=1)
    return metrics.acceleration_error(qdd[good], system.acceleration(q[good], qd[good])).median


def _indefinite(model, q, qd):
    m = np.asarray(model.mass_matrix(q, qd))
    return int(np.sum(np.linalg.eigvalsh(0.5 * (m + np.swapaxes(m, 1, 2)))[:, 0] <= 0.0))


def _energy_errors(model, system, *, horizon=100.0, n=40):
    from lnn import metrics
    from lnn.integrate import rollout

    rng = np.random.default_rng(2)
    q0, qd0 = rng.uniform(0.0, 2.0 * np.pi, (n, 2)), rng.uniform(0.0, 0.1, (n, 2))
    t = np.linspace(0.0, horizon, int(round(horizon * 10)) + 1)
    # DOP853 for both, as when the figures of README and docs/benchmarks/accuracy.md were measured
    # (rollout's default became method="auto" after them).
    reference = rollout(system, q0, qd0, t, rtol=1e-10, atol=1e-10, method="DOP853")
    predicted = rollout(model, q0, qd0, t, rtol=1e-9, atol=1e-9, on_failure="mask", method="DOP853")
    error = metrics.energy_error(system, predicted, reference, scale=DP_SCALE).error
    at = {s: int(np.argmin(np.abs(t - s))) for s in sorted({min(10.0, horizon), horizon})}
    failed = int(np.sum(np.isfinite(np.asarray(predicted.failed_at))))
    # A failed trajectory counts as an unbounded error (the figure is a mean over all 40).
    return {
        f"energy error {s:.0f} s": float(np.mean(np.where(np.isfinite(error[:, i]), error[:, i], np.inf)))
        for s, i in at.items()
    } | {"rollouts failed": failed}


def case_dp(budget, model_options, fit_options, progress, *, horizon=100.0):
    import simulations
    from lnn.data import generate

    system = simulations.DoublePendulum(g=9.8)
    data = generate(system, n_trajectories=256, duration=5.0, dt=0.02, seed=0)
    held_out = generate(system, n_trajectories=32, duration=5.0, dt=0.02, seed=1)
    model, epochs, seconds = _train(
        system, data, budget=budget, model_options=model_options, fit_options=fit_options, progress=progress
    )
    m64 = model.astype("float64")
    pick = np.random.default_rng(3).choice(len(held_out.q), size=2000, replace=False)
    q_box, qd_box = _paper_box(10_000, 4)
    figures = {
        "held-out qdd median": _median_qdd_error(m64, system, held_out.q[pick], held_out.qd[pick]),
        "paper-box qdd median": _median_qdd_error(m64, system, q_box, qd_box),
        "paper-box indefinite M": _indefinite(m64, q_box, qd_box),
    }
    if horizon:
        figures |= _energy_errors(m64, system, horizon=horizon)
    return figures, epochs, seconds


def _torque_case(system, data, budget, model_options, fit_options, progress):
    from lnn import metrics

    parts = data.split(fractions=(0.8, 0.1, 0.1), seed=0)
    model, epochs, seconds = _train(
        system, parts.train, budget=budget, model_options=model_options, fit_options=fit_options, progress=progress
    )
    m64, test = model.astype("float64"), parts.test
    tau = m64.inverse_dynamics(test.q, test.qd, test.qdd).numpy()
    figures = {
        "torque MSE": metrics.torque_error(tau, test.tau).mse,
        "held-out qdd median": _median_qdd_error_forced(m64, test),
    }
    return figures, epochs, seconds


def _median_qdd_error_forced(model, test):
    from lnn import metrics

    qdd = model.numpy_acceleration(test.q, test.qd, test.tau, on_failure="mask")
    good = np.all(np.isfinite(qdd), axis=1)
    return metrics.acceleration_error(qdd[good], test.qdd[good]).median


def case_arm(budget, model_options, fit_options, progress, **_):
    import simulations
    from lnn.data import generate

    arm = simulations.PlanarArm()
    data = generate(
        arm, n_trajectories=100, duration=5.0, dt=0.01, seed=0, tau="gravity-sinusoids", amplitude=(2.0, 0.7)
    )
    return _torque_case(arm, data, budget, model_options, fit_options, progress)


def case_cartpole(budget, model_options, fit_options, progress, **_):
    import simulations
    from lnn.data import generate

    system = simulations.CartPole()
    data = generate(system, n_trajectories=100, duration=5.0, dt=0.01, seed=0, tau="sinusoids")
    return _torque_case(system, data, budget, model_options, fit_options, progress)


CASES = {"dp": case_dp, "arm": case_arm, "cartpole": case_cartpole}


def main(argv=None) -> int:
    """Run one case with the defaults (or the given overrides) and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), default="dp")
    parser.add_argument("--budget", type=float, default=None, help="training seconds (default: the issue's)")
    parser.add_argument("--model", nargs="*", default=(), help="LagrangianNetwork overrides, key=value")
    parser.add_argument("--fit", nargs="*", default=(), help="fit overrides, key=value")
    parser.add_argument("--out", default="defaults_runs.jsonl", help="JSON lines file the run is appended to")
    parser.add_argument(
        "--horizon", type=float, default=100.0, help="dp: seconds of the energy rollouts (0: none; 100 is the issue's)"
    )
    parser.add_argument("--label", default="", help="a name for this run in the output")
    args = parser.parse_args(argv)
    budget = args.budget or BUDGETS[args.case]
    model_options, fit_options = _settings(args.model), _settings(args.fit)

    def progress(epoch, total, logs=None, **_):
        print(f"\r  epoch {epoch}", end="", file=sys.stderr, flush=True)

    start = time.monotonic()
    figures, epochs, seconds = CASES[args.case](budget, model_options, fit_options, None, horizon=args.horizon)
    record = {
        "case": args.case,
        "label": args.label,
        "budget": budget,
        "model": {k: repr(v) for k, v in model_options.items()},
        "fit": {k: repr(v) for k, v in fit_options.items()},
        "epochs": epochs,
        "train_seconds": round(seconds, 1),
        "total_seconds": round(time.monotonic() - start, 1),
        "cpus": len(os.sched_getaffinity(0)),
        "figures": figures,
    }
    with open(args.out, "a") as handle:
        handle.write(json.dumps(record) + "\n")
    settings = " ".join(f"{k}={v}" for k, v in {**model_options, **fit_options}.items()) or "defaults"
    print(f"\n{args.case}: {settings}; {epochs} epochs in {seconds:.0f} s on {record['cpus']} cores")
    print(f"{'figure':<26s} {'value':>11s} {'target':>10s} ok")
    for name, value in figures.items():
        target = TARGETS.get(name) if args.case == "dp" or name == "torque MSE" else None
        ok = "-" if target is None or args.case == "cartpole" else ("yes" if value <= target else "NO")
        shown = "-" if target is None else f"{target:.3g}"
        print(f"{name:<26s} {value:>11.4g} {shown:>10s} {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
