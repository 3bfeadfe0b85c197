"""Speed of the mechanics of a Lagrangian network: M, qdd and one training step.

One table, measured in one run on the same weights (a float32
``LagrangianNetwork(kind="kinetic-potential", convex=True)`` with two hidden
layers, every coordinate angular), for batch 1 and 1024, ``n_dof`` 2 and 7,
hidden width 32 and 128. Methods:

  a        naive eager nested ``GradientTape`` + ``batch_jacobian`` (the seed
           questions' code: full mixed block, ``tf.linalg.solve``)
  b        ``tf.function`` of the engine (nested tapes, mixed term as a JVP,
           Cholesky) with a fixed ``input_signature``, called as a user calls
           it: ``f(tf.constant(q), tf.constant(qd))`` (so are c to e-hyb)
  c        (b) with ``jit_compile=True`` (XLA)
  d        forward-over-reverse Hessian (``ForwardAccumulator``), ``tf.function``
  d-xla    (d) with XLA
  e        closed-form MLP Hessian (forward Jacobians + backward adjoints),
           ``tf.function``
  e-xla    (e) with XLA
  e-hyb    (e) with XLA for the derivatives and TensorFlow's batched Cholesky
           outside (under XLA, c/d-xla/e-xla factorise with the unrolled
           Cholesky of ``lnn.mechanics.solve_cholesky``)
  package  the public call: ``model.mass_matrix(q, qd)`` / ``model.acceleration``
           on numpy inputs (validation included: whole-XLA closed form,
           unrolled Cholesky, the inputs packed into one tensor, dispatched
           past TensorFlow's Python call path when no tape records); for the
           training step, the gradient function ``lnn.fit`` compiles (XLA and
           the closed form for this kinetic-potential model) with the same
           update as the others, called as ``fit`` calls its step
  nocheck  the package's own compiled function of ``package`` called through
           its dispatcher on the packed inputs, without any check: what the
           validation costs (not a path offered to users)
  f        JAX ``jit(vmap(...))`` of the LNN paper's code path (``jax.hessian``,
           ``jacobian(jacobian)`` mixed block, solve), same weights
  floor    a trivial ``tf.function`` (``q + qd``) called like (b) (numpy in):
           the dispatch floor

A training step is the loss on qdd, its gradient with respect to the weights
and a plain gradient-descent update of the weights (learning rate 1e-7), so
that the weights change between calls as in training: XLA functions that
contain ``ForwardAccumulator`` or ``batch_jacobian`` (c, d-xla) treat the
weights as compile-time constants and recompile on every update, which a
benchmark with frozen weights would hide. JAX's step returns the updated
weights, used by its next call.

Every method is called on the same float32 numpy arrays each time, as a
script or an integrator calls them. Methods are timed round-robin (one call
each per round, in a shuffled order) so that a shared, noisy machine slows
them alike; (a), and any method whose warm call takes over 50 ms (an XLA
recompilation), are timed apart (a few calls).
Columns: median time per call, ratio to (a) and to (f). Run
``python benchmarks/bench_mechanics.py`` (about 17 minutes on one core: XLA
recompilations of (c) and (d-xla) and the eager baseline dominate) or with
``--quick`` (width 32, about 5 minutes). The summary compares the package with
the fastest of (b) to (e-hyb), with its own unchecked call, with JAX and with
the dispatch floor.
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

from lnn import LagrangianNetwork, _runtime, mechanics  # noqa: E402
from lnn.models import compiled as compiled_ops  # noqa: E402

# -- timing ------------------------------------------------------------------------


def median_times(calls: dict, *, budget: float, min_rounds: int = 5, max_rounds: int = 300) -> dict:
    """Median wall time of each ``calls[name]()``, timed round-robin.

    Two warm-up calls each (tracing, XLA compilation); then rounds of one
    call per method until ``budget`` seconds per method have passed. A
    method whose first call raises is left out of the table, and the reason
    printed: the others are still timed.
    """
    slow, failed = {}, set()
    for name, fn in calls.items():
        try:
            fn()
        except Exception as exc:  # e.g. TensorFlow: no gradient for an op that XLA's context emitted
            print(f"  {name}: not timed, its first call raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            failed.add(name)
            continue
        t0 = time.perf_counter()
        fn()
        if time.perf_counter() - t0 > SLOW:
            slow[name] = fn
    calls = {name: fn for name, fn in calls.items() if name not in slow and name not in failed}
    times = {name: [] for name in calls}
    start = time.perf_counter()
    rounds = 0
    order = list(calls)
    shuffle = random.Random(0).shuffle
    while rounds < max_rounds and (rounds < min_rounds or time.perf_counter() - start < budget * len(calls)):
        shuffle(order)  # no method always runs right after the same neighbour
        for name in order:
            fn = calls[name]
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
        rounds += 1
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, fn in slow.items():
        medians[name] = slow_median_time(fn)
    return medians


#: A warm call longer than this (s) is timed apart, a few calls (see median_times).
SLOW = 0.05


def slow_median_time(fn, reps: int = 3) -> float:
    """Median of a few calls of a slow function (after one warm-up call)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    """``fn`` under ``tf.function`` with a fixed signature, to be called as users call it."""
    spec = [tf.TensorSpec((None, n), tf.float32)] * n_args
    # Under XLA the mathematics picks its XLA forms (unrolled Cholesky, fused Grams) from
    # the flag the package's own XLA functions set while tracing.
    body = _runtime.xla_body(fn) if jit else fn
    return tf.function(body, input_signature=spec, jit_compile=jit, autograph=False)


#: Batch sizes of the "new batch size" table, in call order (the first call of each method is
#: at batch 1, before these).
NEW_SIZES = (7, 1024, 13, 300, 1, 4096, 2)

#: Learning rate of the benchmark's training steps (small: thousands of steps must not
#: move the weights far).
LEARNING_RATE = 1e-7


def descend(variables, grads, scale=1.0):
    """A plain gradient-descent update, so that the weights change between steps."""
    for v, g in zip(variables, grads):
        v.assign_sub((LEARNING_RATE * scale) * g)


def train_step(qdd_fn, variables):
    def step(q, qd, target):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((qdd_fn(q, qd) - target) ** 2)
        descend(variables, tape.gradient(loss, variables))
        return loss

    return step


def tf_methods(model, n):
    """name -> (mass_matrix, acceleration, train_step) callables on tensors."""
    kin, lag = model._kinetic, model._lagrangian
    variables = model.trainable_variables

    def engine_m(method):
        return lambda q, qd: mechanics._mass_matrix_body(kin, q, qd, method)

    def engine_a(method):
        return lambda q, qd: mechanics._acceleration_body(
            mechanics.separable(kin, model._potential), q, qd, tf.zeros_like(q), method, None
        )

    closed_m = model._mass_matrix_graph
    closed_a = model._acceleration_graph
    methods = {
        "a": (
            lambda q, qd: naive_mass_matrix(kin, q, qd),
            lambda q, qd: naive_acceleration(lag, q, qd),
            train_step(lambda q, qd: naive_acceleration(lag, q, qd), variables),
        ),
    }
    for name, jit, method in (
        ("b", False, "reverse"),
        ("c", True, "reverse"),
        ("d", False, "forward-over-reverse"),
        ("d-xla", True, "forward-over-reverse"),
    ):
        methods[name] = (
            compiled(engine_m(method), n, 2, jit),
            compiled(engine_a(method), n, 2, jit),
            compiled(train_step(engine_a(method), variables), n, 3, jit),
        )
    for name, jit in (("e", False), ("e-xla", True)):
        methods[name] = (
            compiled(closed_m, n, 2, jit),
            compiled(closed_a, n, 2, jit),
            compiled(train_step(closed_a, variables), n, 3, jit),
        )
    system = tf.function(_runtime.xla_body(model._linear_system), jit_compile=True, autograph=False)

    def hybrid(q, qd):
        return mechanics.solve_cholesky(*system(q, qd))

    methods["e-hyb"] = (
        methods["e-xla"][0],
        compiled(hybrid, n, 2, False),
        compiled(train_step(hybrid, variables), n, 3, False),
    )
    methods["package"] = (model.mass_matrix, model.acceleration, package_train_step(model, n))
    return methods


def package_train_step(model, n):
    """The gradient computation ``lnn.fit`` compiles (its ``_Trainer``), with the update.

    An L2 loss on qdd (and ``fit``'s zero torques), XLA as ``fit`` chooses it
    for this model; the same plain update as the other methods in the same
    compiled function; called as ``fit`` calls its step (through
    ``lnn.mechanics.fast_caller``) on tensors of the numpy batch.
    """
    from lnn.train import _Trainer
    from lnn.train._steps import use_xla

    spec = [tf.TensorSpec((None, n), tf.float32)] * 4
    xla = use_xla(model, {"acceleration-l2": 1.0}, None)  # fit's default for this model
    trainer = _Trainer(
        model,
        {"acceleration-l2": 1.0},
        n=n,
        dtype=tf.float32,
        scales={"qdd": 1.0},
        strategy=tf.distribute.get_strategy(),
        optimizer=None,
        horizon=1,
        dt=1.0,
        signature=spec,
        jit_compile=xla,
    )
    variables = model.trainable_variables

    def update(q, qd, target, tau):
        sums, rows, grads = trainer._local(q, qd, target, tau)
        descend(variables, grads, 1.0 / rows)  # fit's gradients are sums over the rows
        return sums

    body = _runtime.xla_body(update) if xla else update
    step = _runtime.fast_caller(
        tf.function(body, input_signature=spec, jit_compile=xla, autograph=False).get_concrete_function()
    )
    zeros = {}

    def run(q, qd, target):
        tau = zeros.get(q.shape)
        if tau is None:
            tau = zeros[q.shape] = np.zeros_like(q)
        return step(*(tf.constant(a) for a in (q, qd, target, tau)))

    return run


def warm(model, q, qd):
    """Call ``M`` and ``qdd`` until their XLA forms for this batch size are compiled (background)."""
    for _ in range(compiled_ops.XLA_AFTER_CALLS):
        model.mass_matrix(q, qd)
        model.acceleration(q, qd)
    compiled_ops.wait()


def nocheck_calls(model, q, qd):
    """The package's compiled ``M`` and ``qdd`` on packed inputs, without any check.

    After :func:`warm`, the XLA forms (the batch sizes 1 and 1024 are on the padding
    ladder); their graph forms where XLA is off (public-only mode keeps XLA).
    """
    calls = []
    for op in ("mass_matrix", "acceleration_free"):
        entry = model._compiled_op(op)
        fn = entry._xla if entry.ready else entry._graph
        calls.append(lambda fn=fn: fn(tf.constant(np.concatenate([q, qd], axis=1))))
    return tuple(calls)


def new_size_costs(model, n, sizes, rng):
    """First call at each new batch size against a call at a size already seen (the same size, again).

    Returns rows ``(quantity, batch, first, again)`` in seconds: ``first`` is the first
    call of the public method at that batch size (after the method's own first call at
    another size), ``again`` the median of 5 calls at the same size afterwards.
    """
    rows = []
    for quantity, method in (("M", model.mass_matrix), ("qdd", model.acceleration)):
        q = rng.uniform(-np.pi, np.pi, (1, n)).astype(np.float32)
        method(q, q)  # the method's first call (tracing)
        for batch in sizes:
            q = rng.uniform(-np.pi, np.pi, (batch, n)).astype(np.float32)
            qd = rng.normal(0, 1, (batch, n)).astype(np.float32)
            start = time.perf_counter()
            method(q, qd)
            first = time.perf_counter() - start
            again = []
            for _ in range(5):
                start = time.perf_counter()
                method(q, qd)
                again.append(time.perf_counter() - start)
            rows.append((quantity, batch, first, statistics.median(again)))
    compiled_ops.wait()
    return rows


# -- JAX peer ------------------------------------------------------------------------------


def jax_peer(model, kind: str):
    """``(M, qdd, train)`` of the same network in JAX, differentiated the textbook way."""
    import jax
    import jax.numpy as jnp

    n = model.n_dof
    layers = model.mlp_layers()
    fmap = model.feature_map()
    rows, cols = np.tril_indices(n, -1)

    def weights(name):
        return [(jnp.asarray(layer.kernel), jnp.asarray(layer.bias)) for layer in layers[name]]

    params = {
        "A": jnp.asarray(fmap.A),
        "S": jnp.asarray(fmap.B_sin),
        "C": jnp.asarray(fmap.B_cos),
        "c": jnp.asarray(fmap.c),
        "s": jnp.asarray(fmap.qd_scale),
    }
    nets = ("kinetic", "potential") if kind == "kinetic-potential" else ("cholesky", "potential")
    params.update({name: weights(name) for name in nets})
    eps = float(model.epsilon) if (kind != "kinetic-potential" or model.convex) else 0.0

    def mlp(layers_, x):
        for k, b in layers_[:-1]:
            x = jax.nn.softplus(x @ k + b)
        k, b = layers_[-1]
        return x @ k + b

    def kinetic(p, x, qd):
        if kind == "kinetic-potential":
            return mlp(p["kinetic"], jnp.concatenate([x, qd / p["s"]]))[0] + 0.5 * eps * qd @ qd
        raw = mlp(p["cholesky"], x)
        chol = jnp.diag(jax.nn.softplus(raw[:n])).at[rows, cols].set(raw[n:])
        w = chol.T @ qd
        return 0.5 * (w @ w + eps * qd @ qd)

    def lagrangian(p, q, qd):  # one sample
        x = q @ p["A"] + jnp.sin(q) @ p["S"] + jnp.cos(q) @ p["C"] + p["c"]
        return kinetic(p, x, qd) - mlp(p["potential"], x)[0]

    def acc(p, q, qd):
        mass = jax.hessian(lagrangian, 2)(p, q, qd)
        mixed = jax.jacobian(jax.jacobian(lagrangian, 2), 1)(p, q, qd)
        rhs = jax.grad(lagrangian, 1)(p, q, qd) - mixed @ qd
        return jnp.linalg.solve(mass, rhs)

    mass = jax.jit(jax.vmap(lambda p, q, qd: jax.hessian(lagrangian, 2)(p, q, qd), (None, 0, 0)))
    accel = jax.jit(jax.vmap(acc, (None, 0, 0)))

    def loss(p, q, qd, target):
        return jnp.mean((jax.vmap(acc, (None, 0, 0))(p, q, qd) - target) ** 2)

    def update(p, q, qd, target):
        value, grads = jax.value_and_grad(loss)(p, q, qd, target)
        new = dict(p)
        for name in nets:
            new[name] = [
                (k - LEARNING_RATE * gk, b - LEARNING_RATE * gb) for (k, b), (gk, gb) in zip(p[name], grads[name])
            ]
        return value, new

    step = jax.jit(update)
    state = {"p": params}

    def train(q, qd, target):  # the updated weights feed the next step
        value, state["p"] = step(state["p"], q, qd, target)
        return jax.block_until_ready(value)

    return (
        lambda q, qd: jax.block_until_ready(mass(params, q, qd)),
        lambda q, qd: jax.block_until_ready(accel(params, q, qd)),
        train,
    )


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

    print(
        f"# bench_mechanics: tensorflow {tf.__version__}, float32, {os.cpu_count()} CPUs, "
        f"2 hidden layers, convex kinetic-potential model, all coordinates angular, "
        f"LNN_PUBLIC_TF={'1' if _runtime.PUBLIC_ONLY else 'unset'}"
    )
    header = f"{'quantity':<8} {'batch':>5} {'n':>2} {'width':>5} {'method':<8} {'median':>11} {'vs a':>8} {'vs f':>8}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    trivial = tf.function(lambda q, qd: q + qd, input_signature=[tf.TensorSpec((None, None), tf.float32)] * 2)
    summary = []
    new_sizes = []
    for n in (2, 7):
        for width in widths:
            fresh = LagrangianNetwork(
                n, kind="kinetic-potential", hidden=(width, width), angular=(True,) * n, convex=True, seed=1
            )
            new_sizes += [(n, width) + row for row in new_size_costs(fresh, n, NEW_SIZES, rng)]
            model = LagrangianNetwork(
                n, kind="kinetic-potential", hidden=(width, width), angular=(True,) * n, convex=True, seed=1
            )
            methods = tf_methods(model, n)
            peer = jax_peer(model, "kinetic-potential") if jax_ok else None
            for batch in (1, 1024):
                q_np = rng.uniform(-np.pi, np.pi, (batch, n)).astype(np.float32)
                qd_np = rng.normal(0, 1, (batch, n)).astype(np.float32)
                target_np = rng.normal(0, 1, (batch, n)).astype(np.float32)
                q, qd, target = (tf.constant(a) for a in (q_np, qd_np, target_np))
                warm(model, q_np, qd_np)
                nocheck = nocheck_calls(model, q_np, qd_np)
                const = tf.constant
                for qi, quantity in enumerate(("M", "qdd", "train")):
                    calls = {}
                    # Every method takes the same numpy arrays each call (as a user's script
                    # or an integrator does): the tf.functions get fresh tensors of them
                    # (tf.constant: faster than letting the call convert numpy), the package
                    # converts and validates them itself, JAX converts them.
                    for name, fns in methods.items():
                        fn = fns[qi]
                        if name == "a":
                            calls[name] = (
                                (lambda fn=fn: fn(q, qd, target)) if quantity == "train" else (lambda fn=fn: fn(q, qd))
                            )
                        elif name == "package":
                            calls[name] = (
                                (lambda fn=fn: fn(q_np, qd_np, target_np))
                                if quantity == "train"
                                else (lambda fn=fn: fn(q_np, qd_np))
                            )
                        elif quantity == "train":
                            calls[name] = lambda fn=fn: fn(const(q_np), const(qd_np), const(target_np))
                        else:
                            calls[name] = lambda fn=fn: fn(const(q_np), const(qd_np))
                    if quantity != "train":
                        calls["nocheck"] = nocheck[qi]
                    naive = calls.pop("a")
                    if peer is not None:
                        jm, ja, jt = peer
                        calls["f"] = {
                            "M": lambda: jm(q_np, qd_np),
                            "qdd": lambda: ja(q_np, qd_np),
                            "train": lambda: jt(q_np, qd_np, target_np),
                        }[quantity]
                    if quantity != "train":
                        calls["floor"] = lambda: trivial(q_np, qd_np)
                    times = {}
                    if not (batch > 1 and args.no_naive):
                        times["a"] = slow_median_time(naive, 3 if batch > 1 else 5)
                    times.update(median_times(calls, budget=budget))
                    for name, t in times.items():
                        vs_a = f"{t / times['a']:8.3f}" if "a" in times else f"{'-':>8}"
                        vs_f = f"{t / times['f']:8.3f}" if "f" in times else f"{'-':>8}"
                        print(
                            f"{quantity:<8} {batch:>5} {n:>2} {width:>5} {name:<8} {t * 1e6:9.1f}us {vs_a} {vs_f}",
                            flush=True,
                        )
                    tf_only = {k: v for k, v in times.items() if k not in ("f", "floor", "package", "nocheck")}
                    fastest = min(tf_only, key=tf_only.get)
                    summary.append((quantity, batch, n, width, fastest, times))
    print()
    print(
        "# new batch sizes: the public call's first time at a batch size not seen before, "
        "against the same call again (median of 5); target: at most 50 ms more"
    )
    print(f"{'quantity':<8} {'n':>2} {'width':>5} {'batch':>5} {'first':>10} {'again':>10} {'extra':>10}")
    for n, width, quantity, batch, first, again in new_sizes:
        print(
            f"{quantity:<8} {n:>2} {width:>5} {batch:>5} {first * 1e3:8.2f}ms {again * 1e3:8.2f}ms "
            f"{(first - again) * 1e3:8.2f}ms"
        )
    worst = max(first - again for *_, first, again in new_sizes)
    print(f"# worst extra cost of a new batch size: {worst * 1e3:.1f} ms")
    print()
    print(
        "# summary: fastest other TF path (b to e-hyb); package vs it, vs its unchecked call, "
        "vs JAX (f) and vs the dispatch floor"
    )
    for quantity, batch, n, width, fastest, times in summary:
        pkg = times["package"]
        parts = [
            f"{quantity:<6} B={batch:<5} n={n} w={width:<4} fastest TF={fastest:<6}",
            f"package/fastest TF={pkg / times[fastest]:5.2f}",
        ]
        if "nocheck" in times:
            parts.append(f"package/nocheck={pkg / times['nocheck']:5.2f}")
        if "f" in times:
            parts.append(f"package/f={pkg / times['f']:6.2f}")
        if "floor" in times:
            parts.append(f"package/floor={pkg / times['floor']:6.2f}")
        print("  ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
