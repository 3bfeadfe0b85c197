"""The cost of a tighter tolerance for a trained model (issue 54): time, evaluations and energy error per decade.

Trains the README's model on the LNN paper's double pendulum
(``generate(DoublePendulum(g=9.8), n_trajectories=256, duration=5.0, dt=0.02,
seed=0)``, ``LagrangianNetwork(2, angular=system.angular)``,
``fit(model, data, time_limit=T, seed=0)``; ``--model PATH`` saves it there,
and a later run loads it instead of training again), then rolls out 40
dataset states (rows drawn with seed 0) for 10 s / 30 s / 100 s (samples
every 0.05 s) at ``rtol = atol = 1e-6, 1e-7, 1e-8`` with ``method="DOP853"``
and the default method (``"auto"``), ``on_failure="mask"``, for the trained
float32 model and for a float64 copy of it (the same weights, ``--dtypes``);
``--dtypes truth`` rolls out the true double pendulum the same way, the control
for how a method's evaluations grow per decade on the exact dynamics.

Each row prints the method, the dtype, the sizes, the tolerance, the median
and total wall time of ``--repeats`` rollouts (one batched call of 40
states each; the first call of a shape is included: it is what a user
waits for), the process's CPU time of the median one (all its threads: under
``taskset -c 1`` on a loaded machine, about the wall time the rollout would
take on an idle core), the right-hand-side evaluations (``Trajectory.nfev``: batched
calls), the ratio of time and of evaluations to the previous tolerance
(per decade) and the true energy error at the end (``lnn.metrics.energy_error``:
the true system's energy on the learned rollout against the true rollout's,
divided by the maximum potential energy 29.4, mean over the 40 states; NaN
for trajectories that failed are left out and counted).

A row whose shorter rollout took longer than ``--skip-after`` seconds is
skipped at the longer durations (the code before issue 54 crawled there).

Usage::

    taskset -c 1 python benchmarks/bench_tolerance.py --model /tmp/lnn_dp_420.keras          # trains once
    taskset -c 1 python benchmarks/bench_tolerance.py --model /tmp/lnn_dp_420.keras \\
        --durations 100 --tols 1e-7                                                           # the acceptance cells
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

DP_SCALE = 29.4  # g (m1 l1 + m2 (l1 + l2)): the double pendulum's maximum potential energy


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--time-limit", type=float, default=420.0, help="fit's time_limit (s), default 420")
    parser.add_argument("--model", help="a .keras file: loaded if it exists, else the trained model is saved there")
    parser.add_argument("--force", action="store_true", help="train again and overwrite --model")
    parser.add_argument("--states", type=int, default=40)
    parser.add_argument("--durations", type=float, nargs="+", default=[10.0, 30.0, 100.0])
    parser.add_argument("--tols", type=float, nargs="+", default=[1e-6, 1e-7, 1e-8])
    parser.add_argument("--methods", nargs="+", default=["DOP853", "auto"])
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32", "float64"],
        choices=["float32", "float64", "truth"],
        help="the trained model, its float64 copy, and/or the true double pendulum (the control: how a "
        "method's evaluations grow per decade on the exact dynamics)",
    )
    parser.add_argument("--dt", type=float, default=0.05, help="sample interval of the rollouts (s)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-after", type=float, default=600.0, help="skip longer rollouts of a row past this (s)")
    return parser.parse_args(argv)


def trained_model(args, system, data):
    import lnn

    if args.model and os.path.exists(args.model) and not args.force:
        return lnn.load_model(args.model), "loaded"
    model = lnn.LagrangianNetwork(2, angular=system.angular)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.IdentifiabilityWarning)
        history = lnn.fit(model, data, time_limit=args.time_limit, seed=0)
    if args.model:
        if os.path.exists(args.model):
            os.remove(args.model)  # --force
        model.save(args.model)
    return model, f"trained {len(history.epoch)} epochs ({history.stopped_reason}), best epoch {history.best_epoch}"


def float64_copy(model):
    import lnn

    copy = lnn.LagrangianNetwork.from_config(dict(model.get_config(), dtype="float64"))
    copy.set_weights([np.asarray(w, np.float64) for w in model.get_weights()])
    return copy


def main(argv=None) -> int:
    args = parse(argv)
    import lnn
    import simulations
    from lnn.metrics import energy_error

    system = simulations.DoublePendulum(g=9.8)
    data = lnn.generate(system, n_trajectories=256, duration=5.0, dt=0.02, seed=0)
    model, how = trained_model(args, system, data)
    models = {"float32": model, "float64": float64_copy(model), "truth": system}
    rows = np.random.default_rng(0).choice(len(data), args.states, replace=False)
    q0, qd0 = data.q[rows], data.qd[rows]
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(
        f"# model: {how} (time_limit {args.time_limit:g} s); {args.states} dataset states; cpus {cpus}; "
        f"load {os.getloadavg()[0]:.2f} at start"
    )
    header = (
        f"{'method':>7} {'dtype':>7} {'B':>3} {'T (s)':>6} {'tol':>6} {'median (s)':>10} {'total (s)':>9} "
        f"{'cpu (s)':>8} {'nfev':>7} {'x time':>6} {'x nfev':>6} {'E err end':>9} {'failed':>6} {'used':>7}"
    )
    print(header)
    slow: set = set()
    for method in args.methods:
        for dtype in args.dtypes:
            for duration in args.durations:
                t = np.arange(0.0, duration + args.dt / 2, args.dt)
                reference = lnn.rollout(system, q0, qd0, t, method="DOP853", rtol=1e-10, atol=1e-10)
                previous = None
                for tol in args.tols:
                    if (method, dtype, tol) in slow:
                        print(
                            f"{method:>7} {dtype:>7} {args.states:>3} {duration:>6g} {tol:>6g}   skipped "
                            f"(a shorter rollout took over {args.skip_after:g} s)",
                            flush=True,
                        )
                        previous = None
                        continue
                    times, cpu, result = [], [], None
                    for _ in range(args.repeats):
                        start, start_cpu = time.perf_counter(), time.process_time()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", lnn.NoveltyWarning)
                            result = lnn.rollout(
                                models[dtype], q0, qd0, t, method=method, rtol=tol, atol=tol, on_failure="mask"
                            )
                        times.append(time.perf_counter() - start)
                        cpu.append(time.process_time() - start_cpu)
                    if sum(times) / len(times) > args.skip_after:
                        slow.add((method, dtype, tol))
                    ok = np.isfinite(result.q[:, -1]).all(axis=1)
                    error = energy_error(system, result, reference, scale=DP_SCALE)
                    final = float(np.mean(error.final[ok])) if ok.any() else float("nan")
                    median = statistics.median(times)
                    ratio_t = f"{median / previous[0]:6.2f}" if previous else f"{'':>6}"
                    ratio_n = f"{result.nfev / previous[1]:6.2f}" if previous else f"{'':>6}"
                    used = result.method
                    print(
                        f"{method:>7} {dtype:>7} {args.states:>3} {duration:>6g} {tol:>6g} {median:>10.2f} "
                        f"{sum(times):>9.2f} {statistics.median(cpu):>8.2f} {result.nfev:>7d} {ratio_t} {ratio_n} "
                        f"{final:>9.2e} "
                        f"{int((~ok).sum()):>6d} {used:>7}",
                        flush=True,
                    )
                    previous = (median, result.nfev)
    print(f"# load {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
