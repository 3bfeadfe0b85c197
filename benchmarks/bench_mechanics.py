"""Speed of the mechanics of a Lagrangian network: M, qdd and one training step.

One table, measured in one run on the same weights (a float32
``LagrangianNetwork(kind="kinetic-potential", convex=True)`` with two hidden
layers, every coordinate angular), for batch 1 and 1024, ``n_dof`` 2 and 7,
hidden width 32 and 128. Methods:

  a        naive eager nested ``GradientTape`` + ``batch_jacobian`` (the seed
           questions' code: full mixed block, ``tf.linalg.solve``)
  b        ``tf.function`` of the engine (nested tapes, mixed term as a JVP,
           Cholesky), called through its concrete function (``lnn.mechanics.fast_caller``, as every
           compiled method here)
  c        (b) with ``jit_compile=True`` (XLA)
  d        forward-over-reverse Hessian (``ForwardAccumulator``), ``tf.function``
  d-xla    (d) with XLA
  e        closed-form MLP Hessian (forward Jacobians + backward adjoints),
           ``tf.function``, concrete function
  e-xla    (e) with XLA
  e-hyb    (e) with XLA for the derivatives and TensorFlow's batched Cholesky
           outside (under XLA, c/d-xla/e-xla factorise with the unrolled
           Cholesky of ``lnn.mechanics.solve_cholesky``)
  package  the public call: ``model.mass_matrix(q, qd)`` / ``model.acceleration``
           on numpy inputs (validation included: whole-XLA, unrolled Cholesky,
           dispatched past TensorFlow's Python call path when no tape
           records, the inputs packed into one tensor); for the training step,
           the gradient function ``lnn.fit`` compiles for that batch size (XLA
           for this kinetic-potential model; nested tapes or the closed form as
           ``lnn.train.train_engine`` chooses)
  f        JAX ``jit(vmap(...))`` of the LNN paper's code path (``jax.hessian``,
           ``jacobian(jacobian)`` mixed block, solve), same weights
  floor    a trivial ``tf.function`` (``q + qd``) called like the package
           (numpy in): the dispatch floor

Every method is called on the same float32 numpy arrays each time (fresh
tensors for TensorFlow, numpy arrays for JAX), as a script or an integrator
calls them. Methods are timed round-robin (one call each per round, in a shuffled order) so that a shared,
noisy machine slows them alike; (a) is timed apart (seconds per call).
Columns: median time per call, ratio to (a) and to (f). Run
``python benchmarks/bench_mechanics.py`` (5-10 minutes on 2 cores: XLA
compilations and the eager baseline dominate) or with ``--quick`` (width 32).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from lnn import LagrangianNetwork, mechanics  # noqa: E402


# -- timing ------------------------------------------------------------------------

def median_times(calls: dict, *, budget: float, min_rounds: int = 5,
                 max_rounds: int = 300) -> dict:
    """Median wall time of each ``calls[name]()``, timed round-robin.

    Two warm-up calls each (tracing, XLA compilation); then rounds of one
    call per method until ``budget`` seconds per method have passed.
    """
    for fn in calls.values():
        fn()
        fn()
    times = {name: [] for name in calls}
    start = time.perf_counter()
    rounds = 0
    order = list(calls)
    shuffle = random.Random(0).shuffle
    while rounds < max_rounds and (rounds < min_rounds
                                   or time.perf_counter() - start < budget * len(calls)):
        shuffle(order)  # no method always runs right after the same neighbour
        for name in order:
            fn = calls[name]
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    return {name: statistics.median(t) for name, t in times.items()}


def slow_median_time(fn, reps: int = 3) -> float:
    """Median of a few calls of a slow eager function (one warm-up call)."""
    fn()
    return median_times({"x": fn}, budget=0.0, min_rounds=reps, max_rounds=reps)["x"]


# -- TensorFlow methods ----------------------------------------------------------------

def naive_mass_matrix(kinetic, q, qd):
    with tf.GradientTape() as t2:
        t2.watch(qd)
        with tf.GradientTape() as t1:
            t1.watch(qd)
            value = kinetic(q, qd)
        g = t1.gradient(value, qd)
    return t2.batch_jacobian(g, qd)


def naive_acceleration(lagrangian, q, qd):
    with tf.GradientTape(persistent=True) as t2:
        t2.watch([q, qd])
        with tf.GradientTape() as t1:
            t1.watch([q, qd])
            value = lagrangian(q, qd)
        gq, gqd = t1.gradient(value, [q, qd])
    m = t2.batch_jacobian(gqd, qd)
    mixed_block = t2.batch_jacobian(gqd, q)
    del t2
    rhs = gq - tf.linalg.matvec(mixed_block, qd)
    return tf.linalg.solve(m, rhs[..., None])[..., 0]


def compiled(fn, n, n_args, jit):
    spec = [tf.TensorSpec((None, n), tf.float32)] * n_args
    return mechanics.fast_caller(tf.function(fn, input_signature=spec, jit_compile=jit,
                                             autograph=False).get_concrete_function())


def train_step(qdd_fn, variables):
    def step(q, qd, target):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((qdd_fn(q, qd) - target) ** 2)
        return loss, tape.gradient(loss, variables)
    return step


def tf_methods(model, n):
    """name -> (mass_matrix, acceleration, train_step) callables on tensors."""
    kin, lag = model._kinetic, model._lagrangian
    variables = model.trainable_variables

    def engine_m(method):
        return lambda q, qd: mechanics._mass_matrix_body(kin, q, qd, method)

    def engine_a(method):
        return lambda q, qd: mechanics._acceleration_body(
            mechanics.separable(kin, model._potential), q, qd, tf.zeros_like(q), method, None)

    closed_m = model._mass_matrix_graph
    closed_a = model._acceleration_graph
    methods = {
        "a": (lambda q, qd: naive_mass_matrix(kin, q, qd),
              lambda q, qd: naive_acceleration(lag, q, qd),
              train_step(lambda q, qd: naive_acceleration(lag, q, qd), variables)),
    }
    for name, jit, method in (("b", False, "reverse"), ("c", True, "reverse"),
                              ("d", False, "forward-over-reverse"),
                              ("d-xla", True, "forward-over-reverse")):
        methods[name] = (compiled(engine_m(method), n, 2, jit), compiled(engine_a(method), n, 2, jit),
                         compiled(train_step(engine_a(method), variables), n, 3, jit))
    for name, jit in (("e", False), ("e-xla", True)):
        methods[name] = (compiled(closed_m, n, 2, jit), compiled(closed_a, n, 2, jit),
                         compiled(train_step(closed_a, variables), n, 3, jit))
    system = tf.function(model._linear_system, jit_compile=True, autograph=False)

    def hybrid(q, qd):
        return mechanics.solve_cholesky(*system(q, qd))

    methods["e-hyb"] = (methods["e-xla"][0], compiled(hybrid, n, 2, False),
                        compiled(train_step(hybrid, variables), n, 3, False))
    steps = {batch: package_train_step(model, n, batch) for batch in (1, 1024)}
    methods["package"] = (model.mass_matrix, model.acceleration,
                          lambda q, qd, target: steps[q.shape[0]](q, qd, target))
    return methods


def package_train_step(model, n, batch):
    """The gradient computation ``lnn.fit`` compiles (its ``_Trainer``) for ``batch_size=batch``.

    An L2 loss on qdd; XLA and the engine as ``fit`` chooses them for this
    model and batch size (``lnn.train.train_engine``).
    """
    from lnn.train import _Trainer, train_engine

    spec = [tf.TensorSpec((None, n), tf.float32)] * 4
    xla = model.kind == "kinetic-potential"  # fit's default
    trainer = _Trainer(model, {"acceleration-l2": 1.0}, n=n, dtype=tf.float32,
                       scales={"qdd": 1.0}, strategy=tf.distribute.get_strategy(),
                       optimizer=None, horizon=1, dt=1.0, signature=spec, jit_compile=xla,
                       engine=train_engine(model, batch, xla=xla))
    step = mechanics.fast_caller(trainer._local.get_concrete_function(*spec))
    zeros = {}

    def run(q, qd, target):
        tau = zeros.get(q.shape)
        if tau is None:
            tau = zeros[q.shape] = tf.zeros_like(q)
        return step(q, qd, target, tau)
    return run


# -- JAX peer ------------------------------------------------------------------------------

def jax_methods(model):
    """The same network in JAX, differentiated like the LNN paper's code."""
    import jax
    import jax.numpy as jnp

    layers = model.mlp_layers()
    fmap = model.feature_map()
    eps = model.epsilon if model.convex else 0.0
    params = {
        "A": jnp.asarray(fmap.A), "S": jnp.asarray(fmap.B_sin), "C": jnp.asarray(fmap.B_cos),
        "c": jnp.asarray(fmap.c), "s": jnp.asarray(fmap.qd_scale),
        "T": [(jnp.asarray(layer.kernel), jnp.asarray(layer.bias)) for layer in layers["kinetic"]],
        "V": [(jnp.asarray(layer.kernel), jnp.asarray(layer.bias)) for layer in layers["potential"]],
    }

    def mlp(weights, x):
        for k, b in weights[:-1]:
            x = jax.nn.softplus(x @ k + b)
        k, b = weights[-1]
        return (x @ k + b)[0]

    def lagrangian(p, q, qd):  # one sample
        x = q @ p["A"] + jnp.sin(q) @ p["S"] + jnp.cos(q) @ p["C"] + p["c"]
        t = mlp(p["T"], jnp.concatenate([x, qd / p["s"]])) + 0.5 * eps * qd @ qd
        return t - mlp(p["V"], x)

    def acc(p, q, qd):
        m = jax.hessian(lagrangian, 2)(p, q, qd)
        mixed = jax.jacobian(jax.jacobian(lagrangian, 2), 1)(p, q, qd)
        rhs = jax.grad(lagrangian, 1)(p, q, qd) - mixed @ qd
        return jnp.linalg.solve(m, rhs)

    mass = jax.jit(jax.vmap(lambda p, q, qd: jax.hessian(lagrangian, 2)(p, q, qd), (None, 0, 0)))
    accel = jax.jit(jax.vmap(acc, (None, 0, 0)))

    def loss(p, q, qd, target):
        return jnp.mean((jax.vmap(acc, (None, 0, 0))(p, q, qd) - target) ** 2)

    step = jax.jit(jax.value_and_grad(loss))

    def block(x):
        return jax.block_until_ready(x)

    return params, (lambda p, q, qd: block(mass(p, q, qd)), lambda p, q, qd: block(accel(p, q, qd)),
                    lambda p, q, qd, t: block(step(p, q, qd, t)))


# -- main --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="width 32 only, shorter timing")
    parser.add_argument("--no-jax", action="store_true", help="skip the JAX peer")
    parser.add_argument("--no-naive", action="store_true", help="skip (a) at batch 1024 (slow)")
    args = parser.parse_args(argv)
    budget = 0.15 if args.quick else 0.3
    widths = (32,) if args.quick else (32, 128)
    jax_ok = not args.no_jax
    if jax_ok:
        try:
            import jax  # noqa: F401
        except ImportError:
            print("# jax not installed (pip install lnn[bench]): column f skipped", file=sys.stderr)
            jax_ok = False

    print(f"# bench_mechanics: tensorflow {tf.__version__}, float32, {os.cpu_count()} CPUs, "
          f"2 hidden layers, convex kinetic-potential model, all coordinates angular")
    header = f"{'quantity':<8} {'batch':>5} {'n':>2} {'width':>5} {'method':<8} {'median':>11} {'vs a':>8} {'vs f':>8}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    trivial = tf.function(lambda q, qd: q + qd,
                          input_signature=[tf.TensorSpec((None, None), tf.float32)] * 2)
    summary = []
    for n in (2, 7):
        for width in widths:
            model = LagrangianNetwork(n, hidden=(width, width), angular=(True,) * n, convex=True,
                                      seed=1)
            methods = tf_methods(model, n)
            peer = jax_methods(model) if jax_ok else None
            for batch in (1, 1024):
                q_np = rng.uniform(-np.pi, np.pi, (batch, n)).astype(np.float32)
                qd_np = rng.normal(0, 1, (batch, n)).astype(np.float32)
                target_np = rng.normal(0, 1, (batch, n)).astype(np.float32)
                q, qd, target = (tf.constant(a) for a in (q_np, qd_np, target_np))
                const = tf.constant
                for qi, quantity in enumerate(("M", "qdd", "train")):
                    calls = {}
                    # Every method takes the same numpy arrays each call (as a user's script
                    # or an integrator does): the TF methods convert them to fresh tensors,
                    # the package converts and validates them, JAX converts them itself.
                    for name, fns in methods.items():
                        fn = fns[qi]
                        if name == "a":
                            calls[name] = ((lambda fn=fn: fn(q, qd, target)) if quantity == "train"
                                           else (lambda fn=fn: fn(q, qd)))
                        elif name == "package" and quantity != "train":
                            calls[name] = (lambda fn=fn: fn(q_np, qd_np))
                        elif quantity == "train":
                            calls[name] = (lambda fn=fn: fn(const(q_np), const(qd_np),
                                                            const(target_np)))
                        else:
                            calls[name] = (lambda fn=fn: fn(const(q_np), const(qd_np)))
                    naive = calls.pop("a")
                    if peer is not None:
                        p, (jm, ja, jt) = peer
                        calls["f"] = {"M": lambda: jm(p, q_np, qd_np), "qdd": lambda: ja(p, q_np, qd_np),
                                      "train": lambda: jt(p, q_np, qd_np, target_np)}[quantity]
                    if quantity != "train":
                        calls["floor"] = lambda: trivial(q_np, qd_np)
                    times = {}
                    if not (batch > 1 and args.no_naive):
                        times["a"] = slow_median_time(naive, 3 if batch > 1 else 5)
                    times.update(median_times(calls, budget=budget))
                    for name, t in times.items():
                        vs_a = f"{t / times['a']:8.3f}" if "a" in times else f"{'-':>8}"
                        vs_f = f"{t / times['f']:8.3f}" if "f" in times else f"{'-':>8}"
                        print(f"{quantity:<8} {batch:>5} {n:>2} {width:>5} {name:<8} "
                              f"{t * 1e6:9.1f}us {vs_a} {vs_f}", flush=True)
                    tf_only = {k: v for k, v in times.items() if k not in ("f", "floor", "package")}
                    fastest = min(tf_only, key=tf_only.get)
                    summary.append((quantity, batch, n, width, fastest, times))
    print()
    print("# summary: fastest raw TF formulation; package vs it, vs JAX (f) and vs the dispatch floor")
    for quantity, batch, n, width, fastest, times in summary:
        pkg = times["package"]
        parts = [f"{quantity:<6} B={batch:<5} n={n} w={width:<4} fastest TF={fastest:<6}",
                 f"package/fastest TF={pkg / times[fastest]:5.2f}"]
        if "f" in times:
            parts.append(f"package/f={pkg / times['f']:6.2f}")
        if "floor" in times:
            parts.append(f"package/floor={pkg / times['floor']:6.2f}")
        print("  ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
