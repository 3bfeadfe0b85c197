"""The first ``lnn.rollout`` call at a new batch size, against the same call again (issue 51).

A user's plain call, ``lnn.rollout(model, q0, qd0, t)``, of the default model
(``LagrangianNetwork(n)``, untrained, float32, every default: ``method="auto"``
picks the compiled ``tsit5``), ``--duration`` seconds sampled at ``--samples``
points. In a fresh process: a warm-up at B = 1 (``--warm`` calls), then for
each of ``--batches`` (7, 64, 100, 256) the first call at that size and the
same call (the same initial states) ``--again`` times more; then the
trajectories of the B = 64 batch one by one (``--loop`` of them), for the
B = 64 comparison (64 calls of B = 1 against one call of B = 64), and
the XLA compilations and the loop iterations run in each form.

Each row: the policy, the batch size, the first call's wall time, the
median of the ``--again`` calls after it, the criterion of issue 51 (first
<= 1.5 x later + 50 ms), and the slowest of the later calls against their
median: a policy that compiles once the work at a shape has repaid it may
compile in a later call instead of the first, and this column shows it. Two policies run, each
in ``--repeats`` fresh processes (median and range over them):

- ``work``: the package's policy (compile a shape's XLA form once the plain
  graph's loop iterations at it repay a compilation:
  :func:`lnn.solvers._scheduler.compile_after`);
- ``at-once``: the baseline, the policy before it on one core (every new
  shape compiled by XLA at once, on the caller's thread): the same code with
  ``XLA_AFTER_ITERATIONS = 0``, except that the shapes are padded.

Pin it to one core, as the issue measures (``taskset -c 0``): the package sees
one usable core and compiles on the caller's thread.

    taskset -c 0 python benchmarks/bench_new_batch.py             # 3 processes per policy, about 2 min
    taskset -c 0 python benchmarks/bench_new_batch.py --repeats 1 --n-dof 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def one_process(args) -> dict:
    """The measurements of one fresh process (run by :func:`main` through a subprocess)."""
    import numpy as np

    import lnn
    from lnn.solvers import _scheduler

    made = []
    init = _scheduler.RolloutScheduler.__init__

    def remember(self, *a):  # the scheduler of the model's rollouts, to read its counts
        init(self, *a)
        made.append(self)

    _scheduler.RolloutScheduler.__init__ = remember
    if args.policy == "at-once":
        _scheduler.XLA_AFTER_ITERATIONS = 0
    model = lnn.LagrangianNetwork(args.n_dof, seed=args.seed)
    t = np.linspace(0.0, args.duration, args.samples)
    rng = np.random.default_rng(args.seed)

    n = args.n_dof
    states = {b: (rng.uniform(-1.0, 1.0, (b, n)), rng.uniform(-1.0, 1.0, (b, n))) for b in args.batches}

    def call(q0, qd0):
        start = time.perf_counter()
        lnn.rollout(model, q0, qd0, t)
        return time.perf_counter() - start

    warm = [call(rng.uniform(-1.0, 1.0, (1, n)), rng.uniform(-1.0, 1.0, (1, n))) for _ in range(args.warm)]
    rows = {}
    for b in args.batches:  # the same call again: the same initial states
        first = call(*states[b])
        later = [call(*states[b]) for _ in range(args.again)]
        rows[b] = {"first": first, "again": statistics.median(later), "worst_later": max(later)}
    # B = 1: the trajectories of the B = 64 batch (or of the largest) one by one
    q_all, qd_all = states[64] if 64 in states else states[max(states)]
    loop = [call(q_all[k : k + 1], qd_all[k : k + 1]) for k in range(min(args.loop, q_all.shape[0]))]
    scheduler = made[-1]
    return {
        "warm_first": warm[0],
        "rows": rows,
        "b1": statistics.median(loop),
        "b1_loop_total": sum(loop),
        "loop_calls": len(loop),
        "compilations": [c.rows for c in scheduler.compilations],
        "iterations": dict(scheduler.iterations),
    }


def main(argv=None) -> None:
    """Run each policy in fresh processes and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-dof", type=int, default=2)
    parser.add_argument("--duration", type=float, default=1.0, help="seconds simulated (default 1)")
    parser.add_argument("--samples", type=int, default=51, help="samples T (default 51)")
    parser.add_argument("--batches", type=int, nargs="+", default=[7, 64, 100, 256])
    parser.add_argument("--warm", type=int, default=3, help="calls at B = 1 first (default 3)")
    parser.add_argument("--again", type=int, default=4, help="calls after the first at each size (default 4)")
    parser.add_argument("--loop", type=int, default=64, help="calls at B = 1 after the batches (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per policy (default 3)")
    parser.add_argument("--policies", nargs="+", default=["work", "at-once"], choices=["work", "at-once"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", help=argparse.SUPPRESS)  # set in the subprocesses
    args = parser.parse_args(argv)
    if args.policy:
        print(json.dumps(one_process(args)))
        return
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    print(
        f"lnn.rollout(LagrangianNetwork({args.n_dof}), q0, qd0, t): untrained, float32, every default; "
        f"{args.duration:g} s, T = {args.samples}; {cores} usable core(s); {args.repeats} fresh process(es) per policy"
    )
    results = {}
    for policy in args.policies:
        results[policy] = []
        for r in range(args.repeats):
            command = [sys.executable, __file__, "--policy", policy, "--seed", str(args.seed + r)]
            command += ["--n-dof", str(args.n_dof), "--duration", str(args.duration), "--samples", str(args.samples)]
            command += ["--warm", str(args.warm), "--again", str(args.again), "--loop", str(args.loop)]
            command += ["--batches", *map(str, args.batches)]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            results[policy].append(json.loads(out.strip().splitlines()[-1]))

    def spread(values, scale=1e3, digits=0):
        m = statistics.median(values)
        return f"{m * scale:.{digits}f} ({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})"

    print()
    print(
        "| policy | B | first call, ms | later calls (median), ms | first / later | "
        "first <= 1.5 x later + 50 ms | slowest later call / later |"
    )
    print("|---|---|---|---|---|---|---|")
    for policy, runs in results.items():
        for b in args.batches:
            first = [run["rows"][str(b)]["first"] for run in runs]
            again = [run["rows"][str(b)]["again"] for run in runs]
            worst = [run["rows"][str(b)]["worst_later"] / run["rows"][str(b)]["again"] for run in runs]
            ok = sum(f <= 1.5 * a + 0.05 for f, a in zip(first, again))
            ratio = [f / a for f, a in zip(first, again)]
            print(
                f"| {policy} | {b} | {spread(first)} | {spread(again)} | {spread(ratio, 1, 2)} | "
                f"{ok}/{len(runs)} | {spread(worst, 1, 2)} |"
            )
    print()
    print(
        "| policy | B = 1, ms (median of the loop) | 64 x B = 1 / one B = 64 | "
        "XLA compilations (padded rows), per process | loop iterations graph / XLA, per process |"
    )
    print("|---|---|---|---|---|")
    for policy, runs in results.items():
        ratio = [64 * run["b1"] / run["rows"]["64"]["again"] for run in runs] if 64 in args.batches else [float("nan")]
        compilations = "; ".join(str(run["compilations"]) for run in runs)
        its = "; ".join(f"{run['iterations']['graph']} / {run['iterations']['xla']}" for run in runs)
        b1 = spread([run["b1"] for run in runs], 1e3, 1)
        print(f"| {policy} | {b1} | {spread(ratio, 1, 1)} | {compilations} | {its} |")
    print()
    print("The warm-up's first call at B = 1 (tracing; under at-once also the XLA compilation):")
    for policy, runs in results.items():
        print(f"  {policy}: {spread([run['warm_first'] for run in runs])} ms")


if __name__ == "__main__":
    main()
