"""How the mechanics scale with the degrees of freedom: M, qdd and a training step at n = 2 to 64.

One table, measured in one run, float32, two hidden layers of width 128
(``--width``), batch 256 (``--batch``), every coordinate angular, for

  default    ``LagrangianNetwork(n)``: the default kind (``"structured"``,
             ``M = C C^T + eps I`` from a Cholesky network), the public calls
             ``model.mass_matrix`` / ``model.acceleration`` on numpy inputs,
             and the training step ``lnn.fit`` compiles (its ``_Trainer``, XLA as
             ``fit`` decides, with a plain gradient-descent update)
  kp         the same for ``kind="kinetic-potential", convex=True``
             (``M = d^2 T / dqd^2`` of a kinetic-energy MLP)
  jax-*      JAX ``jit(vmap(...))`` of the textbook code on the same weights:
             ``jax.hessian`` of the Lagrangian for ``M``, ``jacobian(jacobian)``
             for the mixed block, ``grad``, ``solve`` (the LNN paper's path),
             and ``value_and_grad`` of the same L2 loss for the step

Columns: median wall time per call (calls timed round-robin, see
``bench_mechanics.median_times``), and the ratios lnn / JAX of the same kind
and default / kinetic-potential. Before timing, each JAX function is checked
against the package on the same inputs (the largest relative difference of
``qdd`` is printed), so both sides compute the same thing.

Run it pinned to one core, as the speed tables are::

    taskset -c 1 python benchmarks/bench_scaling.py [--figure docs/figures/scaling.png]

JAX is optional (``pip install -e '.[bench]'``); without it the JAX columns
are left out. With ``--figure`` it draws time against ``n`` on log axes.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from bench_mechanics import jax_peer, median_times, package_train_step, warm  # noqa: E402

from lnn import LagrangianNetwork  # noqa: E402

QUANTITIES = ("M", "qdd", "train")


def build(kind: str, n: int, width: int) -> LagrangianNetwork:
    """The model of one column: the default kind, or the convex kinetic-potential one.

    The default kind's Cholesky network draws the strictly lower entries of
    ``C`` at its initial scale, and a random lower-triangular ``C`` with
    entries of order one is ill-conditioned exponentially in ``n``: at ``n = 8``
    ``C C^T`` is already indefinite in float32 after rounding. The last
    kernel's lower-entry columns are scaled by ``0.1 / sqrt(n)`` so that ``M``
    is as well-conditioned as a trained robot's and every call succeeds; the
    work per call does not depend on the values.
    """
    options = {"kind": "kinetic-potential", "convex": True} if kind == "kinetic-potential" else {}
    model = LagrangianNetwork(n, hidden=(width, width), angular=(True,) * n, seed=1, **options)
    if kind == "structured":
        last = model.cholesky_net._raw_kernels[-1]
        kernel = np.asarray(last).copy()
        kernel[:, n:] *= 0.1 / np.sqrt(n)
        last.assign(kernel)
    return model


def measure(n: int, *, width: int, batch: int, budget: float, use_jax: bool, rng) -> dict:
    """Median seconds per call, ``{(kind, side, quantity): t}``, and the JAX check, for one ``n``."""
    q = rng.uniform(-np.pi, np.pi, (batch, n)).astype(np.float32)
    qd = rng.normal(0, 1, (batch, n)).astype(np.float32)
    calls, checks = {}, {}
    for kind in ("structured", "kinetic-potential"):
        model = build(kind, n, width)
        warm(model, q, qd)
        # The step's target is the model's own qdd: the loss starts at zero and the
        # updates stay small, so many timed steps never carry the weights away (an
        # untrained default model at n >= 8 has |qdd| ~ 1e3, whose gradients would).
        target = np.asarray(model.acceleration(q, qd))
        step = package_train_step(model, n)
        calls[(kind, "lnn", "M")] = lambda m=model: m.mass_matrix(q, qd)
        calls[(kind, "lnn", "qdd")] = lambda m=model: m.acceleration(q, qd)
        calls[(kind, "lnn", "train")] = lambda s=step, y=target: s(q, qd, y)
        if use_jax:
            jm, ja, jt = jax_peer(model, kind)  # the weights as they are now, before any timed step
            ours = np.asarray(model.acceleration(q, qd))
            checks[kind] = float(np.max(np.abs(np.asarray(ja(q, qd)) - ours)) / np.max(np.abs(ours)))
            calls[(kind, "jax", "M")] = lambda f=jm: f(q, qd)
            calls[(kind, "jax", "qdd")] = lambda f=ja: f(q, qd)
            calls[(kind, "jax", "train")] = lambda f=jt, y=target: f(q, qd, y)
    return median_times(calls, budget=budget), checks


def draw(results: dict, path: str) -> None:
    """Time against ``n`` on log axes, one panel per quantity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sizes = sorted(results)
    fig, axes = plt.subplots(1, len(QUANTITIES), figsize=(11, 3.4), sharex=True)
    styles = {
        ("structured", "lnn"): ("default (structured), lnn", "C0", "-"),
        ("kinetic-potential", "lnn"): ("kinetic-potential, lnn", "C1", "-"),
        ("structured", "jax"): ("default (structured), JAX", "C0", "--"),
        ("kinetic-potential", "jax"): ("kinetic-potential, JAX", "C1", "--"),
    }
    for ax, quantity in zip(axes, QUANTITIES):
        for (kind, side), (label, color, line) in styles.items():
            ts = [results[n].get((kind, side, quantity)) for n in sizes]
            if all(t is not None for t in ts):
                ax.loglog(sizes, np.asarray(ts) * 1e3, line, color=color, marker="o", ms=3, label=label)
        ax.set_title({"M": "mass matrix", "qdd": "accelerations", "train": "training step"}[quantity])
        ax.set_xlabel("degrees of freedom n")
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # only the sizes measured are labelled
        ax.set_xticks(sizes, [str(n) for n in sizes])
    axes[0].set_ylabel("median time per call (ms)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=150)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 16, 32, 64])
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of timing per method (default 0.5)")
    parser.add_argument("--no-jax", action="store_true", help="leave out the JAX peer")
    parser.add_argument("--figure", help="write time against n (log axes) to this image")
    args = parser.parse_args(argv)
    use_jax = not args.no_jax
    if use_jax:
        try:
            import jax  # noqa: F401
        except ImportError:
            print("# jax not installed (pip install -e '.[bench]'): JAX columns left out", file=sys.stderr)
            use_jax = False
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"# bench_scaling: tensorflow {tf.__version__}, float32, {affinity} core(s) usable, width {args.width}, "
        f"batch {args.batch}, all coordinates angular"
    )
    header = (
        f"{'n':>3} {'quantity':<6} {'default':>10} {'kp':>10} {'jax-def':>10} {'jax-kp':>10} "
        f"{'def/jax':>8} {'kp/jax':>8} {'def/kp':>7}"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    results = {}
    for n in args.sizes:
        times, checks = measure(n, width=args.width, batch=args.batch, budget=args.budget, use_jax=use_jax, rng=rng)
        results[n] = times
        for quantity in QUANTITIES:
            d, k = times[("structured", "lnn", quantity)], times[("kinetic-potential", "lnn", quantity)]
            jd, jk = times.get(("structured", "jax", quantity)), times.get(("kinetic-potential", "jax", quantity))

            def ms(t):
                return f"{t * 1e3:8.2f}ms" if t is not None else f"{'-':>10}"

            def ratio(a, b):
                return f"{a / b:8.2f}" if b is not None else f"{'-':>8}"

            print(
                f"{n:>3} {quantity:<6} {ms(d)} {ms(k)} {ms(jd)} {ms(jk)} {ratio(d, jd)} {ratio(k, jk)} {d / k:7.2f}",
                flush=True,
            )
        if checks:
            print(
                f"#   n={n}: JAX against lnn, largest relative qdd difference: "
                + ", ".join(f"{kind} {err:.1e}" for kind, err in checks.items())
            )
    if len(args.sizes) >= 2:
        lo, hi = args.sizes[-3] if len(args.sizes) >= 3 else args.sizes[0], args.sizes[-1]
        for kind in ("structured", "kinetic-potential"):
            t_lo, t_hi = results[lo][(kind, "lnn", "qdd")], results[hi][(kind, "lnn", "qdd")]
            print(f"# {kind} qdd grows as n^{np.log(t_hi / t_lo) / np.log(hi / lo):.2f} between n={lo} and n={hi}")
    if args.figure:
        draw(results, args.figure)
        print(f"# figure: {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
