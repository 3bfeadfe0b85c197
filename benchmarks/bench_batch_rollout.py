"""Batched ``lnn.rollout`` against a plain per-trajectory ``solve_ivp`` loop.

Rolls out ``B`` random double pendulums for ``S`` seconds both ways, with the
same system, method and tolerances, and prints one row per way: method, B,
median wall time over the repeats, the ratio to the loop's time (measured in
the same run), the right-hand-side evaluations, the largest energy error
``max |E(t) - E(0)|`` divided by the largest potential energy ``(m1 + m2) g l1
+ m2 g l2`` (the accuracy of each way on its own), and the median over
trajectories of the largest ``|q_batched - q_loop|`` (the double pendulum is
chaotic: over 10 s tolerance-level differences grow to O(1) for a few
trajectories, so the median is the meaningful agreement figure).

    python benchmarks/bench_batch_rollout.py            # B = 256, 10 s (about 2-4 min)
    python benchmarks/bench_batch_rollout.py --quick    # B = 32, 2 s, 1 repeat
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.integrate import solve_ivp

import simulations
from lnn import rollout


def loop_rollout(system, q0, qd0, t, *, method, rtol, atol):
    """The baseline: one ``solve_ivp`` per trajectory; returns ``q, qd (B, T, n)`` and total nfev."""
    n = system.n_dof

    def rhs(_, y):
        return np.concatenate([y[n:], system.acceleration(y[:n], y[n:])])

    qs, qds, nfev = [], [], 0
    for q, qd in zip(q0, qd0):
        sol = solve_ivp(rhs, (t[0], t[-1]), np.concatenate([q, qd]), method=method, t_eval=t, rtol=rtol, atol=atol)
        if sol.status != 0:
            raise RuntimeError(sol.message)
        qs.append(sol.y[:n].T)
        qds.append(sol.y[n:].T)
        nfev += sol.nfev
    return np.stack(qs), np.stack(qds), nfev


def timed(fn, repeats):
    """Median wall time of ``repeats`` calls and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv=None) -> None:
    """Parse the options, time both ways for each method and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256, help="trajectories B (default 256)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds simulated (default 10)")
    parser.add_argument("--dt", type=float, default=0.01, help="output sampling (default 0.01 s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of lnn.rollout (default 3)")
    parser.add_argument("--loop-repeats", type=int, default=1, help="timed repeats of the ~40x slower loop (default 1)")
    parser.add_argument("--methods", nargs="+", default=["DOP853"], help="solve_ivp methods (default DOP853)")
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--atol", type=float, default=1e-10)
    parser.add_argument("--quick", action="store_true", help="B = 32, 2 s, 1 repeat")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.duration, args.repeats, args.loop_repeats = 32, 2.0, 1, 1

    system = simulations.DoublePendulum()
    state = system.sample_state(args.batch, rng=0)
    t = np.arange(int(round(args.duration / args.dt)) + 1) * args.dt
    print(
        f"double pendulum, B = {args.batch}, {args.duration:g} s, samples every {args.dt:g} s, "
        f"rtol = {args.rtol:g}, atol = {args.atol:g}, median of {args.repeats} (batched) and "
        f"{args.loop_repeats} (loop) runs"
    )
    v_max = (system.m1 + system.m2) * system.g * system.l1 + system.m2 * system.g * system.l2

    def energy_error(q, qd):
        energy = system.energy(q, qd)
        return np.abs(energy - energy[:, :1]).max() / v_max

    header = (
        f"{'method':8s} {'way':22s} {'B':>5s} {'median s':>9s} {'ratio':>7s} {'nfev':>9s} "
        f"{'max dE/Vmax':>11s} {'median |dq|':>11s}"
    )
    print(header)
    print("-" * len(header))
    for method in args.methods:
        options = dict(method=method, rtol=args.rtol, atol=args.atol)
        loop_time, (q_loop, qd_loop, loop_nfev) = timed(
            lambda: loop_rollout(system, state.q, state.qd, t, **options), args.loop_repeats
        )
        batch_time, traj = timed(lambda: rollout(system, state.q, state.qd, t, **options), args.repeats)
        difference = np.median(np.abs(traj.q - q_loop).max(axis=(1, 2)))
        rows = [
            ("solve_ivp loop (base)", loop_time, loop_nfev, energy_error(q_loop, qd_loop), 0.0),
            ("lnn.rollout (batched)", batch_time, traj.nfev, energy_error(traj.q, traj.qd), difference),
        ]
        for way, seconds, nfev, d_energy, diff in rows:
            print(
                f"{method:8s} {way:22s} {args.batch:5d} {seconds:9.3f} {seconds / loop_time:7.3f} "
                f"{nfev:9d} {d_energy:11.2e} {diff:11.2e}"
            )


if __name__ == "__main__":
    main()
