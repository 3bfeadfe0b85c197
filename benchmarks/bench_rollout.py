"""Speed of scipy rollouts of learned models: numpy fast path vs TensorFlow vs JAX.

One run, the same weights everywhere. For a learned double pendulum and a
learned 7-DOF chain (``LagrangianNetwork``, convex kinetic-potential kind, so
that ``M`` is positive definite; optionally trained for a few seconds on the
ground truth) it measures

1. the cost of one right-hand-side call (``qdd`` for a batch) at batch 1 and
   at the rollout batch, for every way of evaluating the learned dynamics:

   - ``numpy-fast``: ``model.numpy_acceleration`` (:mod:`lnn.fast`,
     closed-form derivatives in numpy);
   - ``tf-compiled``: ``model.acceleration(...).numpy()`` (one compiled
     ``tf.function`` call per stage);
   - ``tf-eager``: the naive adapter, the same TensorFlow mathematics run
     eagerly op by op at every stage;
   - ``jax-jit``: the textbook Euler–Lagrange right-hand side in JAX
     (``jax.hessian``, ``jax.grad``, ``jax.jvp`` of the same Lagrangian with
     the same weights, ``vmap`` + ``jit``), the peer;

2. ``lnn.rollout`` over ``--duration`` seconds with DOP853 and Radau for each
   batch size: wall time, right-hand-side calls, microseconds per call, and the
   ratio to the ground-truth system's rollout of the same batch measured in the
   same run (``simulations.DoublePendulum`` / ``simulations.NPendulum`` with 7
   links). The batch-1 rows are the mean over ``--solo`` trajectories of the
   batch (evenly spread) rolled out one by one: the cost per trajectory of not
   batching (the naive eager adapter: the first of them only). Compilation
   (per shape, for TF's XLA and JAX) is warmed up and not timed. Radau gets each way's exact
   Jacobian (TensorFlow autodiff for the
   TF ways and ``numpy-fast``, ``jax.jacfwd`` for JAX). The naive eager adapter
   is rolled out at batch 1 with DOP853 only (elsewhere its per-call cost times
   the calls of the same solve is reported, marked ``est``).

numpy's BLAS runs on one thread unless ``OPENBLAS_NUM_THREADS`` is set (see below).

   python benchmarks/bench_rollout.py            # 10 s rollouts, batch 1 and 256
   python benchmarks/bench_rollout.py --quick    # 2 s rollouts, batch 1 and 32, no training
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# numpy's OpenBLAS threads spin-wait for cores that TensorFlow's and JAX's pools (and any
# other process) hold: on a small shared machine a 256 x 64 matmul then takes ms instead of
# tens of µs. One BLAS thread is the robust setting for many small products; override by
# exporting OPENBLAS_NUM_THREADS before running.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import simulations  # noqa: E402
from lnn import rollout  # noqa: E402
from lnn.integrate import choose_method, default_tolerances  # noqa: E402
from lnn.integrate._problem import SAMPLE_BLOCK  # noqa: E402
from lnn.models import LagrangianNetwork, compiled  # noqa: E402

#: Training epochs of each learned model (fixed seeds: the same weights in every run).
TRAIN_EPOCHS = 100

# ----------------------------------------------------------------------------- the peer


def jax_lagrangian(model):
    """``(params, lagrangian(p, q, qd))``: the model's Lagrangian in JAX, one sample, same weights.

    The weights are the model's effective layers (:meth:`LagrangianNetwork.mlp_layers`) and
    its input map (:meth:`LagrangianNetwork.feature_map`), as in ``bench_mechanics.py``.
    """
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    if model.kind != "kinetic-potential" or model.activation_name != "softplus":
        raise ValueError(
            f"the JAX peer covers the softplus kinetic-potential kind, got {model.kind!r} / {model.activation_name!r}"
        )
    layers = model.mlp_layers()
    fmap = model.feature_map()
    eps = model.epsilon if model.convex else 0.0
    params = {
        "A": jnp.asarray(fmap.A),
        "S": jnp.asarray(fmap.B_sin),
        "C": jnp.asarray(fmap.B_cos),
        "c": jnp.asarray(fmap.c),
        "s": jnp.asarray(fmap.qd_scale),
        "T": [(jnp.asarray(layer.kernel), jnp.asarray(layer.bias)) for layer in layers["kinetic"]],
        "V": [(jnp.asarray(layer.kernel), jnp.asarray(layer.bias)) for layer in layers["potential"]],
    }

    def mlp(weights, x):
        for k, b in weights[:-1]:
            x = jax.nn.softplus(x @ k + b)
        k, b = weights[-1]
        return (x @ k + b)[0]

    def lagrangian(p, q, qd):
        x = q @ p["A"] + jnp.sin(q) @ p["S"] + jnp.cos(q) @ p["C"] + p["c"]
        kinetic = mlp(p["T"], jnp.concatenate([x, qd / p["s"]])) + 0.5 * eps * qd @ qd
        return kinetic - mlp(p["V"], x)

    return params, lagrangian


def jax_acceleration(model):
    """``(params, acceleration(p, q, qd, tau))`` of one sample: the textbook Euler–Lagrange RHS."""
    import jax
    import jax.numpy as jnp

    params, lagrangian = jax_lagrangian(model)
    damping = None
    if model.damping:
        damping = jnp.asarray(np.asarray(model.damping_matrix(), np.float64))

    def acceleration(p, q, qd, tau):
        mass = jax.hessian(lagrangian, 2)(p, q, qd)
        mixed = jax.jacobian(jax.grad(lagrangian, 2), 1)(p, q, qd)
        rhs = jax.grad(lagrangian, 1)(p, q, qd) - mixed @ qd + tau
        if damping is not None:
            rhs = rhs - damping @ qd
        return jnp.linalg.solve(mass, rhs)

    return params, acceleration


def jax_dynamics(model):
    """JAX ``(acceleration, jacobian)`` of ``model``'s Lagrangian, batched and jitted (numpy in/out)."""
    import jax

    params, acceleration = jax_acceleration(model)
    n = model.n_dof
    batched = jax.jit(jax.vmap(lambda q, qd, tau: acceleration(params, q, qd, tau)))
    jac = jax.jit(jax.vmap(jax.jacfwd(lambda y, tau: acceleration(params, y[:n], y[n:], tau))))

    def numpy_acceleration(q, qd, tau=None):
        tau = np.zeros_like(q) if tau is None else tau
        return np.asarray(batched(q, qd, tau))

    def acceleration_jacobian(q, qd, tau=None):
        tau = np.zeros_like(q) if tau is None else tau
        return np.asarray(jac(np.concatenate([q, qd], axis=1), tau))

    return numpy_acceleration, acceleration_jacobian


def diffrax_fields(model):
    """``(field, stacked_field)``: the model's ``y' = [qd, qdd]`` in JAX, for a state ``(2n,)`` / ``(B, 2n)``."""
    import jax
    import jax.numpy as jnp

    params, acceleration = jax_acceleration(model)
    n = model.n_dof
    zero = jnp.zeros(n)

    def field(s, y, args):
        return jnp.concatenate([y[n:], acceleration(params, y[:n], y[n:], zero)])

    def stacked_field(s, Y, args):
        qdd = jax.vmap(lambda y: acceleration(params, y[:n], y[n:], zero))(Y)
        return jnp.concatenate([Y[:, n:], qdd], axis=1)

    return field, stacked_field


def diffrax_solve(vector_field, method, ts, *, rtol, atol):
    """``y0 -> diffrax.Solution``: one adaptive solve saved at ``ts``, diffrax's default controller."""
    import diffrax

    def solve(y0):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(vector_field),
            method,
            ts[0],
            ts[-1],
            None,
            y0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
            max_steps=100_000,
        )

    return solve


def diffrax_solvers(model, t, *, rtol, atol):
    """``name -> solve(y0 (B, 2n)) -> ys (B, T, 2n)``: diffrax on the same weights, jit-compiled.

    ``"diffrax Dopri8 vmap"``, ``"diffrax Tsit5 vmap"``: one adaptive solve per trajectory
    (``jax.vmap`` of ``diffeqsolve``, every trajectory its own steps, as lnn's compiled
    methods); ``"... stacked"``: one solve of the stacked ``(B, 2n)`` state (one step size,
    diffrax's RMS norm over it: the worst trajectory sets everyone's step, so the others are
    solved more accurately than asked).
    """
    import diffrax
    import jax
    import jax.numpy as jnp

    field, stacked_field = diffrax_fields(model)  # first: it turns on JAX's float64
    ts = jnp.asarray(t)

    def solver(vector_field, method):
        solve = diffrax_solve(vector_field, method, ts, rtol=rtol, atol=atol)
        return lambda y0: solve(y0).ys

    one = solver(field, diffrax.Dopri8())
    vmapped = jax.jit(jax.vmap(one))
    vmapped5 = jax.jit(jax.vmap(solver(field, diffrax.Tsit5())))
    stacked8 = jax.jit(solver(stacked_field, diffrax.Dopri8()))
    stacked5 = jax.jit(solver(stacked_field, diffrax.Tsit5()))

    def run(fn, layout):
        def call(y0):
            ys = jax.block_until_ready(fn(jnp.asarray(y0)))
            ys = np.asarray(ys)
            return ys if layout == "vmap" else ys.transpose(1, 0, 2)

        return call

    return {
        "diffrax Dopri8 vmap": run(vmapped, "vmap"),
        "diffrax Dopri8 stacked": run(stacked8, "stacked"),
        "diffrax Tsit5 stacked": run(stacked5, "stacked"),
        "diffrax Tsit5 vmap": run(vmapped5, "vmap"),
    }


# ----------------------------------------------------------------------------- adapters


class Adapter:
    """A ``MechanicalSystem`` view of ``model`` whose hot path is ``accel``."""

    def __init__(self, model, accel, jacobian, energy):
        self.model, self.n_dof, self.angular = model, model.n_dof, model.angular
        self.numpy_acceleration = accel
        self.acceleration_jacobian = jacobian
        self.energy_at = energy

    def acceleration(self, q, qd, tau=None):
        """``qdd`` through this adapter's hot path, shape ``(B, n)``."""
        return self.numpy_acceleration(q, qd, tau)

    def energy(self, q, qd):
        """The model's energy at the samples (the same numpy snapshot for every way), ``(B,)``."""
        return self.energy_at(q, qd)


def ways(model):
    """``name -> (acceleration, jacobian)`` for every way of evaluating the model."""
    import tensorflow as tf

    def tf_compiled(q, qd, tau=None):
        return model.acceleration(q, qd, tau).numpy()

    def tf_eager(q, qd, tau=None):
        tau = None if tau is None else tf.constant(tau)
        return model._acceleration_graph(tf.constant(q), tf.constant(qd), tau).numpy()

    jax_accel, jax_jac = jax_dynamics(model)
    exact = model.acceleration_jacobian
    return {
        "numpy-fast": (model.numpy_acceleration, exact),
        "tf-compiled": (tf_compiled, exact),
        "tf-eager": (tf_eager, exact),
        "jax-jit": (jax_accel, jax_jac),
    }


# ----------------------------------------------------------------------------- measurements


def per_call(fn, q, qd, *, budget: float, repeats: int = 5) -> float:
    """Median wall time of one call ``fn(q, qd)`` in microseconds."""
    fn(q, qd)
    start = time.perf_counter()
    fn(q, qd)
    once = max(time.perf_counter() - start, 1e-7)
    calls = int(min(max(budget / repeats / once, 1), 2000))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(q, qd)
        times.append((time.perf_counter() - start) / calls)
    return 1e6 * statistics.median(times)


def timed_rollout(system, q0, qd0, t, method, rtol, atol):
    """``(wall seconds, right-hand-side calls)`` of one :func:`lnn.rollout`."""
    start = time.perf_counter()
    trajectory = rollout(system, q0, qd0, t, method=method, rtol=rtol, atol=atol)
    return time.perf_counter() - start, trajectory.nfev


def one_by_one(system, q0, qd0, t, method, rtol, atol):
    """Mean ``(wall seconds, right-hand-side calls)`` of rolling the rows of ``q0`` out one by one."""
    runs = [timed_rollout(system, q0[i : i + 1], qd0[i : i + 1], t, method, rtol, atol) for i in range(q0.shape[0])]
    return statistics.fmean(w for w, _ in runs), round(statistics.fmean(c for _, c in runs))


def learned_model(truth, name, *, hidden, train_epochs, seed, train_seconds=None):
    """A convex kinetic-potential model of ``truth`` (scales adapted; optionally trained).

    ``train_epochs`` epochs (the same model in every run: fixed seeds, no time limit), or,
    given ``train_seconds``, as many as fit in that time (a model that depends on the machine).
    """
    model = LagrangianNetwork(
        truth.n_dof,
        kind="kinetic-potential",
        convex=True,
        hidden=hidden,
        angular=truth.angular,
        dtype="float64",
        seed=seed,
        name=name,
    )
    state = truth.sample_state(512, rng=seed)
    model.adapt(state.q, state.qd, truth.acceleration(state.q, state.qd))
    if train_epochs > 0 or train_seconds:
        from lnn import fit, generate

        data = generate(truth, n_trajectories=32, duration=2.0, dt=0.05, seed=seed)
        if train_seconds:
            fit(model, data, epochs=10_000, time_limit=train_seconds, seed=seed)
        else:
            fit(model, data, epochs=train_epochs, seed=seed)
    return model


@contextlib.contextmanager
def _compile_every_shape():
    """Within it, lnn's compiled rollouts compile every shape's XLA form at their first decision."""
    from lnn.solvers import _scheduler

    saved = _scheduler.XLA_AFTER_ITERATIONS
    _scheduler.XLA_AFTER_ITERATIONS = 0
    try:
        yield
    finally:
        _scheduler.XLA_AFTER_ITERATIONS = saved


def compiled_vs_diffrax(model, q_all, qd_all, t, *, batches, rtol, atol, repeats):
    """Print the compiled integrators of :mod:`lnn.solvers` against diffrax, round-robin.

    For every batch size: the call a user makes, ``lnn.rollout(model, q0, qd0, t)`` with every
    default (``method="auto"`` and the model's default tolerances: the row ``lnn default -> ...``,
    shown when ``rtol, atol`` are those defaults), lnn's ``dopri8``, ``dopri853``, ``dopri5``,
    ``tsit5`` (compiled) and ``DOP853`` (scipy, per-trajectory error control), diffrax's Dopri8
    (``vmap`` and stacked) and Tsit5 (stacked), each timed ``repeats`` times in turn after
    a first, compiling call (its excess over the median, ``1st call +s``, is what compilation
    costs the caller: diffrax compiles before it solves; lnn runs a new shape as a plain graph
    until the steps run at that shape repay XLA's compilation, a few calls of a short rollout, so
    one more call, untimed (``bg XLA s``), compiles lnn's shape before the timed runs: they time
    the steady state of a recurring shape);
    the maximum error of ``q`` against a DOP853 reference at ``rtol = 1e-11``.
    """
    peers = diffrax_solvers(model, t, rtol=rtol, atol=atol)
    print(
        f"\ncompiled integrators vs diffrax 0.7 (rtol={rtol:g}, atol={atol:g}, wall time "
        f"median of {repeats}, round-robin; ratio: to the fastest diffrax in this run)"
    )
    print(
        f"{'B':>5}  {'integrator':<24}{'wall s':>9}{'ratio':>8}{'1st call +s':>12}{'bg XLA s':>10}{'max |q err|':>13}"
    )
    n = model.n_dof
    for batch in batches:
        q0, qd0 = q_all[:batch], qd_all[:batch]
        reference = rollout(model, q0, qd0, t, method="DOP853", rtol=1e-11, atol=1e-13).q
        y0 = np.concatenate([q0, qd0], axis=1)
        contenders = {}
        if (rtol, atol) == default_tolerances(model):
            chosen = choose_method(model, batch=batch)
            contenders[f"lnn default -> {chosen}"] = lambda: rollout(model, q0, qd0, t).q
        for method in ("dopri8", "dopri853", "dopri5", "tsit5", "DOP853"):
            contenders[f"lnn {method}"] = lambda m=method: rollout(model, q0, qd0, t, method=m, rtol=rtol, atol=atol).q
        for name, fn in peers.items():
            if batch == 1 and name in ("diffrax Dopri8 stacked", "diffrax Tsit5 vmap"):
                continue  # the same solve as vmap (Dopri8) or stacked (Tsit5) at B = 1
            contenders[name] = lambda f=fn: f(y0)[..., :n]
        first, walls, errors, background = {}, {name: [] for name in contenders}, {}, {}
        for name, fn in contenders.items():
            start = time.perf_counter()
            q = fn()
            first[name] = time.perf_counter() - start
            errors[name] = float(np.nanmax(np.abs(q - reference)))
            # lnn's compiled methods run a new shape as a plain graph until the steps run at it
            # repay XLA's compilation (a few calls of a short rollout: _scheduler.compile_after);
            # the steady state of a recurring shape is compiled: compile it here, untimed.
            start = time.perf_counter()
            if name.startswith("lnn") and not name.endswith("DOP853"):
                with _compile_every_shape():
                    fn()
            compiled.wait()
            background[name] = time.perf_counter() - start
        for _ in range(repeats):
            for name, fn in contenders.items():
                start = time.perf_counter()
                fn()
                walls[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(w) for name, w in walls.items()}
        best = min(v for k, v in medians.items() if k.startswith("diffrax"))
        for name in contenders:
            wall = medians[name]
            compile_s = max(first[name] - wall, 0.0)
            print(
                f"{batch:>5}  {name:<24}{wall:>9.4f}{wall / best:>8.2f}{compile_s:>12.2f}"
                f"{background[name]:>10.2f}{errors[name]:>13.2e}"
            )


def accuracy_vs_diffrax(model, q_all, qd_all, t, *, tolerances):
    """Print the per-trajectory errors of lnn's ``tsit5`` and ``dopri8`` against diffrax's same pairs.

    Every trajectory of ``q_all`` (``B`` of them) is solved by each pair, one adaptive solve per
    trajectory (lnn's batch has per-trajectory step sizes; diffrax ``vmap``). Its error is the
    maximum of ``|q - q_ref|`` over the samples, against a DOP853 reference at ``rtol = 1e-11``.
    The table gives, per tolerance, the median, 90th percentile and maximum of those ``B``
    errors, the mean accepted and rejected steps per trajectory, and for the other rows the
    geometric mean of the ratio ``error / diffrax's error`` of the same trajectory (with its 95 %
    confidence interval, from the spread of the log ratios), the share of
    the trajectories on which that error is the smaller, and the ratios of the median, p90 and
    maximum to diffrax's. The row ``diffrax ... x1.02`` is diffrax itself with its tolerances
    multiplied by 1.02: the same algorithm with slightly different steps, so its ratios show how
    far a statistic moves by chance (on a chaotic system, chiefly the maximum). The timing
    table's error column is the maximum over a batch of 1 or 16 trajectories: on a chaotic
    system one draw from this distribution.
    """
    import diffrax
    import jax
    import jax.numpy as jnp

    from lnn.solvers import solve

    field, _ = diffrax_fields(model)  # first: it turns on JAX's float64
    n, batch = model.n_dof, q_all.shape[0]
    ts = jnp.asarray(t)
    y0 = np.concatenate([q_all, qd_all], axis=1)

    reference = rollout(model, q_all, qd_all, t, method="DOP853", rtol=1e-11, atol=1e-13).q
    print(
        f"\naccuracy per trajectory ({batch} trajectories, each its own steps; error: max |q - q_ref| "
        "over the samples; vs diffrax: geometric mean of the error ratio to diffrax's same pair on "
        "the same trajectory, the share of trajectories where the error is smaller, and the ratios "
        "of the median, p90 and max to diffrax's; x1.02: diffrax at 1.02 times the tolerances)"
    )
    print(
        f"{'rtol':>7}{'atol':>8}  {'integrator':<22}{'median':>10}{'p90':>10}{'max':>10}"
        f"{'accepted':>10}{'rejected':>10}{'vs diffrax [95% CI]':>21}{'smaller':>9}{'median':>8}{'p90':>7}{'max':>7}"
    )
    for rtol, atol in tolerances:
        rows = {}
        for pair, method in (("Tsit5", diffrax.Tsit5()), ("Dopri8", diffrax.Dopri8())):
            for label, scale in (("", 1.0), (" x1.02", 1.02)):

                def one(y, solve_one=diffrax_solve(field, method, ts, rtol=rtol * scale, atol=atol * scale)):
                    solution = solve_one(y)
                    return solution.ys, solution.stats["num_accepted_steps"], solution.stats["num_rejected_steps"]

                ys, accepted, rejected = jax.jit(jax.vmap(one))(jnp.asarray(y0))
                rows[f"diffrax {pair}{label}"] = (np.asarray(ys)[..., :n], np.asarray(accepted), np.asarray(rejected))
        for method in ("tsit5", "dopri8"):
            solution = solve(model, y0, t, method=method, rtol=np.full(batch, rtol), atol=np.full(batch, atol))
            rows[f"lnn {method}"] = (solution.q.numpy(), solution.n_accepted.numpy(), solution.n_rejected.numpy())
        errors = {name: np.nanmax(np.abs(q - reference), axis=(1, 2)) for name, (q, _, _) in rows.items()}
        for name in (
            "lnn tsit5",
            "diffrax Tsit5",
            "diffrax Tsit5 x1.02",
            "lnn dopri8",
            "diffrax Dopri8",
            "diffrax Dopri8 x1.02",
        ):
            err, (_, accepted, rejected) = errors[name], rows[name]
            versus = ""
            if name not in ("diffrax Tsit5", "diffrax Dopri8"):
                peer = errors["diffrax " + ("Tsit5" if "tsit5" in name.lower() else "Dopri8")]
                log_ratio = np.log(err / peer)
                half = 1.96 * np.std(log_ratio, ddof=1) / np.sqrt(log_ratio.size)
                low, mean, high = np.exp(np.mean(log_ratio) + np.array([-half, 0.0, half]))
                versus = (
                    f"{mean:>7.2f} [{low:.2f}, {high:.2f}]{np.mean(log_ratio < 0):>9.0%}"
                    f"{np.median(err) / np.median(peer):>8.2f}{np.quantile(err, 0.9) / np.quantile(peer, 0.9):>7.2f}"
                    f"{err.max() / peer.max():>7.2f}"
                )
            print(
                f"{rtol:>7.0e}{atol:>8.0e}  {name:<22}{np.median(err):>10.2e}{np.quantile(err, 0.9):>10.2e}"
                f"{err.max():>10.2e}{accepted.mean():>10.1f}{rejected.mean():>10.1f}{versus}"
            )


def main() -> None:
    """Parse the options, run every measurement and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s rollouts, batch 1 and 32, no training")
    parser.add_argument("--duration", type=float, default=None, help="rollout length in s (10)")
    parser.add_argument("--batch", type=int, default=None, help="large batch (256)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument(
        "--train-epochs", type=int, default=None, help="training epochs per model (TRAIN_EPOCHS; --quick: 0)"
    )
    parser.add_argument(
        "--train-seconds",
        type=float,
        default=None,
        help="train for this long instead of --train-epochs (the model then depends on the machine)",
    )
    parser.add_argument(
        "--rtol", type=float, default=None, help="relative tolerance (default: the models' own, 1e-8 in float64)"
    )
    parser.add_argument("--atol", type=float, default=None, help="absolute tolerance (default: the models' own, 1e-10)")
    parser.add_argument(
        "--peer-rtols",
        type=float,
        nargs="+",
        default=None,
        help="relative tolerances of the table against diffrax, each with atol = rtol / 100 (default: --rtol, --atol)",
    )
    parser.add_argument(
        "--amplitude", type=float, default=1.0, help="initial angles uniform in [-amplitude, amplitude] rad"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--solo",
        type=int,
        default=None,
        help="trajectories of the batch (evenly spread) rolled out one by one to "
        "measure the batch-1 rows: their mean is reported (8; --quick: 2)",
    )
    parser.add_argument(
        "--peer-only", action="store_true", help="only the table of the compiled integrators against diffrax"
    )
    parser.add_argument(
        "--peer-batches", type=int, nargs="+", default=[1, 16, 256], help="batch sizes of that table (1 16 256)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per contender (3)")
    parser.add_argument(
        "--accuracy-only", action="store_true", help="only the per-trajectory accuracy table against diffrax"
    )
    parser.add_argument(
        "--accuracy-batch",
        type=int,
        default=None,
        help="trajectories of the per-trajectory accuracy table against diffrax (64; --quick: 8; 0: no table)",
    )
    parser.add_argument(
        "--accuracy-rtols",
        type=float,
        nargs="+",
        default=None,
        help="relative tolerances of that table, each with atol = rtol / 100 (default: --rtol, --atol)",
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        default=["double-pendulum", "chain"],
        choices=["double-pendulum", "chain", "cart-pole", "planar-arm"],
        help="learned systems (double-pendulum chain; cart-pole and planar-arm: the step controller's held-out checks)",
    )
    args = parser.parse_args()
    duration = args.duration if args.duration is not None else (2.0 if args.quick else 10.0)
    big = args.batch if args.batch is not None else (32 if args.quick else 256)
    train_epochs = args.train_epochs if args.train_epochs is not None else (0 if args.quick else TRAIN_EPOCHS)
    train_seconds = args.train_seconds
    solo = args.solo if args.solo is not None else (2 if args.quick else 8)
    accuracy_batch = args.accuracy_batch if args.accuracy_batch is not None else (8 if args.quick else 64)
    t = np.linspace(0.0, duration, int(round(duration * 10)) + 1)
    systems = [
        ("double pendulum", simulations.DoublePendulum()),
        ("7-DOF chain", simulations.NPendulum(masses=[1.0] * 7, lengths=[0.5] * 7)),
        ("cart-pole", simulations.CartPole()),
        ("planar arm", simulations.PlanarArm()),
    ]
    chosen = {
        "double-pendulum": "double pendulum",
        "chain": "7-DOF chain",
        "cart-pole": "cart-pole",
        "planar-arm": "planar arm",
    }
    systems = [(label, truth) for label, truth in systems if label in {chosen[name] for name in args.systems}]

    given = args.rtol is not None and args.atol is not None
    tolerance_text = f"rtol={args.rtol:g}, atol={args.atol:g}" if given else "the models' default tolerances"
    print(
        f"lnn rollout benchmark: {duration:g} s, {tolerance_text}, "
        f"hidden={tuple(args.hidden)}, float64, training "
        f"{f'{train_seconds:g} s' if train_seconds else f'{train_epochs} epochs'} per model, "
        f"|q0| <= {args.amplitude:g} rad, batch-1 rows: mean of {solo} trajectories rolled out "
        f"one by one, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
    )
    for label, truth in systems:
        model = learned_model(
            truth,
            label.replace(" ", "-"),
            hidden=tuple(args.hidden),
            train_epochs=train_epochs,
            train_seconds=train_seconds,
            seed=args.seed,
        )
        print(f"\n## {label} (n = {truth.n_dof})\n")
        args.rtol, args.atol = (args.rtol, args.atol) if given else default_tolerances(model)
        rng = np.random.default_rng(args.seed)
        q_all = rng.uniform(
            -args.amplitude, args.amplitude, (max(big, accuracy_batch, *args.peer_batches), truth.n_dof)
        )
        qd_all = 0.5 * rng.normal(size=q_all.shape)
        if not args.accuracy_only:
            peer_tolerances = (
                [(rtol, rtol / 100) for rtol in args.peer_rtols] if args.peer_rtols else [(args.rtol, args.atol)]
            )
            for rtol, atol in peer_tolerances:
                compiled_vs_diffrax(
                    model, q_all, qd_all, t, batches=args.peer_batches, rtol=rtol, atol=atol, repeats=args.repeats
                )
        if accuracy_batch > 0:
            tolerances = (
                [(rtol, rtol / 100) for rtol in args.accuracy_rtols]
                if args.accuracy_rtols
                else [(args.rtol, args.atol)]
            )
            accuracy_vs_diffrax(model, q_all[:accuracy_batch], qd_all[:accuracy_batch], t, tolerances=tolerances)
        if args.peer_only or args.accuracy_only:
            continue
        available = ways(model)
        energy = model.numpy_snapshot().energy
        print("per right-hand-side call (median, µs)")
        print(f"{'way':<13}{'B=1':>12}{'ratio':>8}{f'B={big}':>12}{'ratio':>8}")
        # Moderate initial states (|q| <= amplitude rad, qd ~ N(0, 0.5 rad/s)): a robot's
        # working range, where the chain is not violently chaotic and the solvers' step
        # counts measure the cost of the dynamics rather than of chaos.
        rng = np.random.default_rng(args.seed)
        q_all = rng.uniform(-args.amplitude, args.amplitude, (big, truth.n_dof))
        qd_all = 0.5 * rng.normal(size=(big, truth.n_dof))
        calls = {}
        for name, (accel, _) in available.items():
            budget = 0.5 if name != "tf-eager" else 0.3
            calls[name] = (
                per_call(accel, q_all[:1], qd_all[:1], budget=budget),
                per_call(accel, q_all, qd_all, budget=budget),
            )
        base = calls["jax-jit"]
        for name, (one, many) in calls.items():
            print(f"{name:<13}{one:>12.1f}{one / base[0]:>8.2f}{many:>12.1f}{many / base[1]:>8.2f}")
        print("(ratio: to jax-jit in this run)")

        print(f"\nrollouts of {duration:g} s (wall time median of 1; ratio to the ground truth)")
        print(
            f"{'method':<8}{'B':>5}  {'way':<13}{'wall s':>9}{'ratio':>8}{'RHS calls':>11}"
            f"{'µs/call':>10}{'per traj ms':>13}"
        )
        summary = {}
        picks = np.unique(np.linspace(0, big - 1, solo).round().astype(int))
        for method in ("DOP853", "Radau"):
            for batch in (1, big):
                # Batch 1: the mean over `picks` of solo rollouts (the one-by-one cost per
                # trajectory); eager TF: only the first of them (it is seconds per rollout).
                q0, qd0 = (q_all[picks], qd_all[picks]) if batch == 1 else (q_all, qd_all)
                run = one_by_one if batch == 1 else timed_rollout
                wall_truth, nfev_truth = run(truth, q0, qd0, t, method, args.rtol, args.atol)
                rows = [("ground truth", wall_truth, nfev_truth, False)]
                for name, (accel, jac) in available.items():
                    if name == "tf-eager" and (method != "DOP853" or batch != 1):
                        rows.append((name, None, None, True))
                        continue
                    # Warm-up: tracing and compilation (per shape, for TF's XLA and JAX) are
                    # not timed: the solver's batch, and the blocks in which rollout evaluates
                    # the accelerations at the samples afterwards.
                    samples = batch * t.size
                    for size in {batch, min(samples, SAMPLE_BLOCK), samples % SAMPLE_BLOCK} - {0}:
                        accel(np.resize(q0, (size, q0.shape[1])), np.resize(qd0, (size, q0.shape[1])))
                    if method == "Radau":
                        # The model's Jacobian turns to XLA once its batch size recurs,
                        # compiled in the background (a rollout gets there in its first
                        # steps): warm up to that steady state.
                        for _ in range(compiled.XLA_AFTER_CALLS if name != "jax-jit" else 1):
                            jac(q0[:batch], qd0[:batch])
                        compiled.wait()
                    system = Adapter(model, accel, jac, energy)
                    if name == "tf-eager":
                        wall, nfev = timed_rollout(system, q0[:1], qd0[:1], t, method, args.rtol, args.atol)
                    else:
                        wall, nfev = run(system, q0, qd0, t, method, args.rtol, args.atol)
                    rows.append((name, wall, nfev, False))
                nfev_fast = next(r[2] for r in rows if r[0] == "numpy-fast")
                for name, wall, nfev, estimated in rows:
                    if estimated:
                        nfev = nfev_fast
                        wall = calls[name][0 if batch == 1 else 1] * 1e-6 * nfev
                    summary[(method, batch, name)] = wall
                    tag = " est" if estimated else ""
                    print(
                        f"{method:<8}{batch:>5}  {name:<13}{wall:>9.3f}{wall / wall_truth:>8.2f}"
                        f"{nfev:>11d}{1e6 * wall / max(nfev, 1):>10.1f}"
                        f"{1e3 * wall / batch:>13.2f}{tag}"
                    )
        print(f"\nbatch {big} vs rolling its trajectories one by one (per-trajectory speed-up):")
        for method in ("DOP853", "Radau"):
            fast_big = summary[(method, big, "numpy-fast")] / big
            for name in ("numpy-fast", "tf-compiled", "tf-eager"):
                one = summary[(method, 1, name)]
                print(
                    f"  {method:<7} one-by-one {name:<12}: {one / fast_big:8.1f}x slower per "
                    f"trajectory than numpy-fast at B={big}"
                )
        one_call, big_call = calls["numpy-fast"]
        print(
            f"  (batching the right-hand side alone: {big} x {one_call:.0f} µs / {big_call:.0f} µs "
            f"= {big * one_call / big_call:.1f}x per call for numpy-fast; a rollout adds the "
            f"solver's own work, shared by the batch, and the batch's extra steps)"
        )


if __name__ == "__main__":
    main()
