"""The nested-tape engine's products: reverse Hessian-vector products against forward-mode tangents.

:mod:`lnn.mechanics` computes, for any TensorFlow-differentiable Lagrangian,
the mixed term ``(d2L/dqd dq) qd`` of the accelerations, the inverse dynamics
``d/dt (dL/dqd) - dL/dq`` and the energy rate ``dE/dt`` as reverse
Hessian-vector products (by the Hessian's symmetry, a gradient in ``qd`` of a
gradient dotted with a held vector). The baseline, built here in the same
run on the same Lagrangian, is the textbook forward-over-reverse form that
the engine used before: ``tf.autodiff.ForwardAccumulator`` tangents over the
reverse gradient (and, for the inverse dynamics, ``M`` formed by
``batch_jacobian`` and multiplied by ``qdd``).

The Lagrangian is a generic one, not a built-in kind (those use closed
forms): ``L = ½ |qd|² (1 + 0.1 tanh(MLP(sin q, qd))) - Σ cos q``, a
two-layer softplus MLP of width 128, float64, random weights (seed 0), batch
256 of states uniform in [-1, 1]. Each row prints the operation, ``n``,
``B``, the first call (tracing and graph optimisation: what a user waits for
at the first call of a shape), the median of ``--repeats`` later calls, and
the ratio of each to the baseline's::

    taskset -c 1 python benchmarks/bench_engine.py
    taskset -c 1 python benchmarks/bench_engine.py --dofs 2 7 --repeats 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dofs", type=int, nargs="+", default=[2, 7, 16])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=30, help="timed calls after the first (median)")
    return parser.parse_args(argv)


def lagrangian(n: int, width: int):
    """A generic MLP Lagrangian of ``n`` coordinates, float64, fixed weights."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w1 = tf.constant(rng.normal(size=(2 * n, width)) / np.sqrt(2 * n))
    w2 = tf.constant(rng.normal(size=(width, width)) / np.sqrt(width))
    w3 = tf.constant(rng.normal(size=(width, 1)) / np.sqrt(width))

    def lag(q, qd):
        h = tf.nn.softplus(tf.concat([tf.sin(q), qd], -1) @ w1)
        h = tf.nn.softplus(h @ w2)
        scale = 1.0 + 0.1 * tf.tanh((h @ w3)[:, 0])
        return 0.5 * tf.reduce_sum(qd * qd, -1) * scale - tf.reduce_sum(tf.cos(q), -1)

    return lag


def forward_mode(lag, n: int):
    """The baseline: the same three operations by forward-mode tangents (the engine's former bodies)."""
    import tensorflow as tf

    zero = tf.UnconnectedGradients.ZERO
    spec = [tf.TensorSpec((None, n), tf.float64)]

    def gradients(q, qd):
        with tf.GradientTape() as tape:
            tape.watch([q, qd])
            value = lag(q, qd)
        return tape.gradient(value, [q, qd], unconnected_gradients=zero)

    def terms(q, qd):
        with tf.GradientTape() as outer:
            outer.watch(qd)
            with tf.autodiff.ForwardAccumulator(q, qd) as acc:
                grad_q, grad_qd = gradients(q, qd)
            mixed = acc.jvp(grad_qd, unconnected_gradients=zero)
        m = outer.batch_jacobian(grad_qd, qd, unconnected_gradients=zero)
        return 0.5 * (m + tf.linalg.matrix_transpose(m)), grad_q, mixed

    @tf.function(input_signature=spec * 2, autograph=False)
    def acceleration(q, qd):
        m, grad_q, mixed = terms(q, qd)
        chol = tf.linalg.cholesky(m)
        return tf.linalg.cholesky_solve(chol, (grad_q - mixed)[..., None])[..., 0]

    @tf.function(input_signature=spec * 3, autograph=False)
    def inverse_dynamics(q, qd, qdd):
        m, grad_q, mixed = terms(q, qd)
        return tf.linalg.matvec(m, qdd) + mixed - grad_q

    @tf.function(input_signature=spec * 3, autograph=False)
    def energy_rate(q, qd, qdd):
        with tf.autodiff.ForwardAccumulator([q, qd], [qd, qdd]) as acc:
            with tf.GradientTape() as tape:
                tape.watch(qd)
                value = lag(q, qd)
            e = tf.reduce_sum(qd * tape.gradient(value, qd, unconnected_gradients=zero), -1) - value
        return acc.jvp(e, unconnected_gradients=zero)

    return {"acceleration": acceleration, "inverse_dynamics": inverse_dynamics, "energy_rate": energy_rate}


def timed(call, repeats: int) -> tuple[float, float, np.ndarray]:
    """The first call's seconds, the median of ``repeats`` later calls' seconds, and the first call's value."""
    start = time.perf_counter()
    first = np.asarray(call())
    first_s = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.asarray(call())
        times.append(time.perf_counter() - start)
    return first_s, statistics.median(times), first


def main(argv=None) -> int:
    args = parse(argv)
    import tensorflow as tf

    from lnn import mechanics

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(f"# generic MLP Lagrangian, width {args.width}, float64, B = {args.batch}; cpus {cpus}; TF {tf.__version__}")
    print(
        f"{'operation':>17} {'n':>3} {'B':>4} {'engine 1st (s)':>14} {'baseline 1st':>12} {'x 1st':>6} "
        f"{'engine (ms)':>11} {'baseline (ms)':>13} {'x':>5} {'max rel diff':>12}"
    )
    for n in args.dofs:
        lag = lagrangian(n, args.width)
        base = forward_mode(lag, n)
        rng = np.random.default_rng(1)
        q, qd, qdd = (tf.constant(x) for x in rng.uniform(-1, 1, (3, args.batch, n)))
        engine = {
            "acceleration": lambda: mechanics.acceleration(lag, q, qd),
            "inverse_dynamics": lambda: mechanics.inverse_dynamics(lag, q, qd, qdd),
            "energy_rate": lambda: mechanics.energy_rate(lag, q, qd, qdd),
        }
        baseline = {
            "acceleration": lambda: base["acceleration"](q, qd),
            "inverse_dynamics": lambda: base["inverse_dynamics"](q, qd, qdd),
            "energy_rate": lambda: base["energy_rate"](q, qd, qdd),
        }
        for name in engine:
            first_e, median_e, value_e = timed(engine[name], args.repeats)
            first_b, median_b, value_b = timed(baseline[name], args.repeats)
            diff = float(np.max(np.abs(value_e - value_b)) / np.max(np.abs(value_b)))
            print(
                f"{name:>17} {n:>3} {args.batch:>4} {first_e:>14.2f} {first_b:>12.2f} {first_e / first_b:>6.2f} "
                f"{median_e * 1e3:>11.2f} {median_b * 1e3:>13.2f} {median_e / median_b:>5.2f} {diff:>12.1e}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
