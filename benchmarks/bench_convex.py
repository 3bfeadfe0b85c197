"""What the input-convex kinetic energy costs in accuracy (a script, not a test).

``LagrangianNetwork(kind="kinetic-potential", convex=True)`` constrains the
kinetic MLP's weights after the first layer to be non-negative (a softplus
parametrisation) with convex, non-decreasing activations, so that ``T`` is
convex in ``qd`` and ``M = d2T/dqd2`` is positive semi-definite by
construction (plus ``eps I``). This script trains the default unconstrained
kinetic-potential model and the convex one on the same data, with the same
seed and wall-time budget, and compares on held-out data (the double pendulum
of ``bench_accuracy.py`` case 1: m = l = 1, g = 9.8, random states, exact
accelerations):

- median relative acceleration error on 10 000 held-out states;
- the fraction of held-out states whose learned ``M`` is not positive
  definite, and the smallest eigenvalue (the failure the constraint removes);
- energy error / 29.4 after 10 s over 40 held-out initial states (``inf``
  when a rollout fails, e.g. on an indefinite ``M``).

Usage::

    python benchmarks/bench_convex.py              # 150 s of training per model
    python benchmarks/bench_convex.py --budget 30  # quick look
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_accuracy import _dp_dataset, _dp_evaluate, _dp_states, _float64_copy  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=150.0, help="training seconds per model")
    parser.add_argument("--samples", type=int, default=50_000, help="training states")
    parser.add_argument("--hidden", type=int, default=128, help="width of the two hidden layers")
    args = parser.parse_args(argv)

    import simulations
    from lnn import mechanics
    from lnn.models import LagrangianNetwork
    from lnn.train import fit

    system = simulations.DoublePendulum(m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=9.8)
    data = _dp_dataset(system, args.samples, 0)
    q_test, qd_test = _dp_states(10_000, 1, rates=(-10.0, 10.0))
    print(
        f"# bench_convex: double pendulum, {args.samples} training states, "
        f"{args.hidden}x{args.hidden} kinetic-potential models, {args.budget:.0f} s each"
    )
    header = (
        f"{'model':<22} {'median qdd err':>14} {'non-PD M':>9} {'min eig M':>10} "
        f"{'energy err':>11} {'epochs':>6} {'train s':>7}"
    )
    print(header)
    print("-" * len(header))
    rows = {}
    for label, convex in (("unconstrained", False), ("convex (convex=True)", True)):
        model = LagrangianNetwork(
            2,
            kind="kinetic-potential",
            hidden=(args.hidden, args.hidden),
            angular=system.angular,
            convex=convex,
            dtype="float32",
            seed=0,
        )
        start = time.monotonic()
        history = fit(
            model,
            data,
            loss="acceleration",
            epochs=100_000,
            batch_size=512,
            learning_rate=3e-3,
            validation=0.05,
            seed=0,
            time_limit=args.budget,
        )
        seconds = time.monotonic() - start
        exact = _float64_copy(model)
        health = mechanics.mass_matrix_health(np.asarray(exact.mass_matrix(q_test, qd_test)))
        try:
            acc, energy, _ = _dp_evaluate(exact, system)
            median = acc.median
        except ValueError:  # an indefinite M on a held-out state
            median, energy = float("nan"), float("inf")
        rows[label] = median
        print(
            f"{label:<22} {median:>14.5f} {health.fraction_not_positive_definite:>9.4f} "
            f"{health.min_eigenvalue:>10.3g} {energy:>11.5f} {len(history.epoch):>6} "
            f"{seconds:>7.0f}",
            flush=True,
        )
    base, convex = rows["unconstrained"], rows["convex (convex=True)"]
    print(f"\nconvex / unconstrained median qdd error: {convex / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
