"""Ensembles and novelty (issue 31): what they cost, whether their intervals hold, and the docs' figure.

A script, not a test. Sections (``--section``, default all):

``cost``
    The compiled train step of ``lnn.Ensemble(2, 5, angular=True)`` against one
    member's (``LagrangianNetwork(2, angular=True)``, the defaults: structured,
    128 x 128, float32, XLA), at batch 1024 (and 64), each member on a full
    batch weighted by its own bootstrap, as ``lnn.fit`` calls its step; and
    ``ensemble.predict(q, qd)`` against one model's ``acceleration(q, qd)`` at
    B = 1024 (and 64), after their XLA forms compiled. Round-robin timing,
    medians.
    Then the bound: the default network's train-step products alone for one
    member, five looped in one graph (``lnn.Ensemble``'s layout) and five
    stacked on a weight axis (batched matmuls), and the machine's float32
    rate of one and of five stacked matrix products.
``accuracy`` (calibration, novelty, rollouts; one trained ensemble)
    The LNN paper's double pendulum, the default data:
    ``generate(DoublePendulum(g=9.8), n_trajectories=256, duration=5.0,
    dt=0.02, seed=0)``; ``fit(Ensemble(2, 5, angular=True), data,
    time_limit=--budget)`` (validation 10 % of the trajectories, on which
    fit calibrates the intervals). Held out: ``generate(..., n_trajectories=32,
    seed=1)``.

    - calibration: coverage of the nominal 50 % and 90 % ``qdd`` intervals
      on the held-out samples, per coordinate, calibrated and raw, and the
      NLL; the ensemble mean's median relative ``qdd`` error beside each
      member's;
    - novelty: AUROC between held-out in-box states and out-of-box states
      (angles beyond the training data's range, rates 3x the data's standard
      deviation with random signs; also rates N(0, (3 std)²)), for the
      distance novelty, the members' disagreement and the ensemble's
      ``novelty`` (their maximum);
    - rollouts: 10 s from the 32 held-out initial states (truth: DOP853 at
      1e-10), the fraction of (trajectory, time, coordinate) samples of ``q``
      inside the members' 90 % band (``band_scale`` 1 and the ``qdd``
      calibration's scale), and how many rollouts left the training states;
    - the figure (``--figure``): one learned rollout with its band against
      the truth, leaving the data, and its novelty over time.

Usage::

    python benchmarks/bench_ensemble.py                        # everything (~20 min on 2 cores)
    python benchmarks/bench_ensemble.py --section cost
    python benchmarks/bench_ensemble.py --section accuracy --budget 900 --save ens.keras \\
        --figure docs/figures/ensemble_band.png
    python benchmarks/bench_ensemble.py --section accuracy --model ens.keras   # re-measure a saved ensemble
    python benchmarks/bench_ensemble.py --quick                 # small data, 60 s budget
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

K = 5
#: The initial state of the figure (q0, qd0): of 64 random states (angles uniform, rates N(0, 1.6²); seed 11),
#: one that starts inside the training states and grazes their edge after 4 s with the ensemble of the docs.
FIGURE_STATE = ((-2.71786134, -0.60294962), (0.58439833, 2.70872888))


# ----------------------------------------------------------------------------- cost


def _trainer(model, dataset, batch_size: int, seed: int = 0):
    """fit's compiled step for ``model`` on ``dataset`` (the parts of lnn.fit), and one batch."""
    import tensorflow as tf

    from lnn.train import _data, _ensemble, _model, _steps
    from lnn.train._losses import loss_weights

    weights = loss_weights("acceleration")
    data = _data.prepare(dataset, None, seed=seed, horizon=5, rollout=False)
    strategy, dtype = _model.prepare(model, data, strategy=None, adapt=True, initialization=None, seed=seed)
    ensemble = _ensemble.is_ensemble(model)
    if ensemble:
        data = _ensemble.weighted(data, model, seed=seed)
    pipeline = _data.Pipeline(data, batch_size=batch_size, dtype=dtype, strategy=strategy)
    optimizer = _steps.make_optimizer(model, strategy, learning_rate=1e-3, clipnorm=None if ensemble else 10.0)
    options = dict(data=data, signature=pipeline.element_spec, optimizer=optimizer, strategy=strategy, dtype=dtype)
    if ensemble:
        trainer = _ensemble.build_trainer(model, weights, xla=None, clipnorm=10.0, **options)
    else:
        trainer = _steps.build_trainer(model, weights, xla=None, **options)
    batch = next(iter(pipeline.epoch(0, shuffle=True, seed=seed)))
    del tf
    return trainer, batch


def _round_robin(calls: dict, rounds: int) -> dict:
    """Median seconds per call of every callable, called in turn (a shared machine slows all alike)."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(v)) for name, v in times.items()}


def section_cost(args, results):
    import simulations
    from lnn import generate
    from lnn.models import Ensemble, LagrangianNetwork, compiled

    system = simulations.DoublePendulum(g=9.8)
    data = generate(system, n_trajectories=32, duration=5.0, dt=0.02, seed=0)
    rows = []
    for batch in (1024, 64):
        single, ensemble = LagrangianNetwork(2, angular=True, seed=0), Ensemble(2, K, angular=True, seed=0)
        steps = {"one": _trainer(single, data, batch), f"K={K}": _trainer(ensemble, data, batch)}
        for trainer, b in steps.values():
            for _ in range(5):  # trace, compile, warm
                trainer.train_step(b)
        median = _round_robin({k: (lambda t=t, b=b: t.train_step(b)) for k, (t, b) in steps.items()}, args.rounds)
        rows.append(("train step", batch, median["one"], median[f"K={K}"]))
        rng = np.random.default_rng(0)
        q = rng.uniform(-np.pi, np.pi, (batch, 2)).astype("float32")
        qd = rng.normal(size=(batch, 2)).astype("float32")
        for _ in range(4):
            single.acceleration(q, qd)
            ensemble.predict(q, qd)
        compiled.wait()  # both XLA forms compiled (off the caller's path) before timing
        calls = {"one": lambda: single.acceleration(q, qd), f"K={K}": lambda: ensemble.predict(q, qd)}
        for call in calls.values():
            call()
        median = _round_robin(calls, args.rounds * 2)
        rows.append(("predict vs acceleration", batch, median["one"], median[f"K={K}"]))
    print(f"\ncost of K = {K} members against one (medians of {args.rounds} round-robin calls)")
    print(f"{'what':<26s} {'batch':>6s} {'one (ms)':>10s} {'K=5 (ms)':>10s} {'ratio':>7s}  target")
    for what, batch, one, many in rows:
        target = "<= 2x" if batch == 1024 else ""
        print(f"{what:<26s} {batch:>6d} {1e3 * one:>10.2f} {1e3 * many:>10.2f} {many / one:>7.2f}  {target}")
        results[f"{what} B={batch}"] = {"one_ms": 1e3 * one, "ensemble_ms": 1e3 * many, "ratio": many / one}
    section_member_axis(args, results)


def _network_step(members: int, *, stacked: bool, batch: int = 1024, hidden: int = 128, features: int = 4):
    """A compiled train step of the structured kind's network work, for ``members`` members.

    Per member, the two MLPs of the default network (``features -> hidden -> hidden``, tanh): the
    Cholesky net's value, tangent and input pullback (3 outputs) and the potential's value and input
    gradient (1 output), a loss of them all and its reverse pass, plain SGD. ``stacked``: the members
    are a leading axis of every weight (one batched matmul per layer, the "batch axis" design);
    else a Python loop of members inside the one graph (``lnn.Ensemble``'s design).
    """
    import tensorflow as tf

    rng = np.random.default_rng(0)
    axis = members if stacked else 1

    def weights(out):
        shapes = ((features, hidden), (hidden, hidden), (hidden, out))
        return [tf.Variable((rng.normal(size=(axis, a, b)) / np.sqrt(a)).astype("float32")) for a, b in shapes]

    def jet(w, x, u):
        """Value, tangent along u and input pullback of the output."""
        z1, t1 = tf.matmul(x, w[0]), tf.matmul(u, w[0])
        a1 = tf.tanh(z1)
        s1 = 1.0 - a1 * a1
        z2, t2 = tf.matmul(a1, w[1]), tf.matmul(s1 * t1, w[1])
        a2 = tf.tanh(z2)
        s2 = 1.0 - a2 * a2
        y, ty = tf.matmul(a2, w[2]), tf.matmul(s2 * t2, w[2])
        g2 = tf.matmul(y, w[2], transpose_b=True) * s2
        g1 = tf.matmul(g2, w[1], transpose_b=True) * s1
        return y, ty, tf.matmul(g1, w[0], transpose_b=True)

    nets = [(weights(3), weights(1)) for _ in range(1 if stacked else members)]
    variables = [v for pair in nets for w in pair for v in w]
    x = tf.constant(rng.normal(size=(axis, batch, features)).astype("float32"))
    u = tf.constant(rng.normal(size=(axis, batch, features)).astype("float32"))

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            loss = 0.0
            for cholesky, potential in nets:
                y, ty, g = jet(cholesky, x, u)
                v, _, gv = jet(potential, x, u)
                loss += tf.reduce_mean(y * y) + tf.reduce_mean(ty * ty) + tf.reduce_mean((g - gv) ** 2)
                loss += tf.reduce_mean(v * v)
        for var, grad in zip(variables, tape.gradient(loss, variables)):
            var.assign_sub(1e-6 * grad)
        return loss

    return lambda: step().numpy()


def section_member_axis(args, results):
    """Would members as a batch axis meet the 2x? The network work alone, looped and stacked, at batch 1024.

    At batch 1024 the step is arithmetic: five members are five times the
    matrix products whatever their layout. This times the products of the
    default network's train step (``_network_step``) for one member, five
    looped in one graph and five stacked on a weight axis, beside the
    machine's float32 rate of one and of five stacked ``1024 x 128 x 128``
    products (a stacked product gains only what one product leaves of the
    two cores).
    """
    import tensorflow as tf

    calls = {
        "one member": _network_step(1, stacked=False),
        f"K={K} looped": _network_step(K, stacked=False),
        f"K={K} stacked": _network_step(K, stacked=True),
    }
    for call in calls.values():
        for _ in range(5):  # trace, compile, warm
            call()
    median = _round_robin(calls, args.rounds)
    rates = {}
    for name, shape in (("one 1024x128 @ 128x128", (1,)), (f"{K} stacked", (K,))):
        a = tf.constant(np.random.default_rng(1).normal(size=(*shape, 1024, 128)).astype("float32"))
        b = tf.constant(np.random.default_rng(2).normal(size=(*shape, 128, 128)).astype("float32"))
        product = tf.function(lambda a=a, b=b: tf.matmul(a, b), jit_compile=True)
        for _ in range(5):
            product().numpy()
        seconds = _round_robin({name: lambda: product().numpy()}, 20 * args.rounds)[name]
        rates[name] = 2 * shape[0] * 1024 * 128 * 128 / seconds / 1e9
    one = median["one member"]
    print("\nthe default network's train-step products alone (batch 1024, XLA), members looped or stacked")
    print(f"{'layout':<16s} {'ms':>8s} {'ratio':>7s}")
    for name, seconds in median.items():
        print(f"{name:<16s} {1e3 * seconds:>8.2f} {seconds / one:>7.2f}")
        results[f"network products {name}"] = {"ms": 1e3 * seconds, "ratio": seconds / one}
    print("float32 matrix-product rate: " + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in rates.items()))
    results["matmul GFLOP/s"] = rates


# ----------------------------------------------------------------------------- accuracy


def _auroc(inside: np.ndarray, outside: np.ndarray) -> float:
    """P(score of an outside state > score of an inside one), ties counted half (Mann-Whitney)."""
    from scipy.stats import rankdata

    scores = np.concatenate([inside, outside])
    ranks = rankdata(scores)
    n_in, n_out = inside.size, outside.size
    return float((ranks[n_in:].sum() - n_out * (n_out + 1) / 2) / (n_in * n_out))


def _out_of_box(data, n: int, rng, *, signs: bool):
    """Angles beyond the training data's range, rates 3x its standard deviation."""
    q_max, qd_std = data.q.max(axis=0), data.qd.std(axis=0)
    q = q_max + rng.uniform(0.0, np.pi, (n, 2))
    if signs:
        qd = 3.0 * qd_std * rng.choice([-1.0, 1.0], (n, 2))
    else:
        qd = rng.normal(0.0, 3.0 * qd_std, (n, 2))
    return q, qd


def _calibration(ensemble, held, results):
    from lnn import metrics

    prediction = ensemble.predict(held.q, held.qd, tau=held.tau, qdd=held.qdd)
    cal = metrics.calibration(held.qdd, prediction.qdd, prediction.qdd_std, output="qdd", dof=prediction.qdd_dof)
    raw = metrics.calibration(held.qdd, prediction.qdd, prediction.qdd_spread, output="qdd")
    member_errors = [metrics.acceleration_error(m, held.qdd).median for m in prediction.qdd_members]
    mean_error = metrics.acceleration_error(prediction.qdd, held.qdd).median
    print(f"\ncalibration of qdd on {held.n_trajectories} held-out trajectories ({cal.samples} samples)")
    print(
        f"  scale {np.round(ensemble.qdd_scale.numpy(), 3)}, floor {np.round(ensemble.qdd_floor.numpy(), 4)}, "
        f"tails' degrees of freedom {np.round(ensemble.qdd_dof.numpy(), 2)} (inf: Gaussian)"
    )
    for level in (0.5, 0.9):
        print(
            f"  {100 * level:.0f} % interval covers {np.round(100 * cal.coverage[level], 1)} % "
            f"(raw spread: {np.round(100 * raw.coverage[level], 1)} %)   target {'85-95' if level == 0.9 else '45-55'}"
        )
    print(f"  NLL per coordinate {np.round(cal.nll, 3)} (raw {np.round(raw.nll, 3)})")
    print(
        f"  median relative qdd error: ensemble mean {mean_error:.4g}, members "
        + ", ".join(f"{e:.4g}" for e in member_errors)
    )
    results["calibration"] = {
        "coverage_50": cal.coverage[0.5].tolist(),
        "coverage_90": cal.coverage[0.9].tolist(),
        "raw_coverage_50": raw.coverage[0.5].tolist(),
        "raw_coverage_90": raw.coverage[0.9].tolist(),
        "nll": cal.nll.tolist(),
        "scale": ensemble.qdd_scale.numpy().tolist(),
        "floor": ensemble.qdd_floor.numpy().tolist(),
        "dof": ensemble.qdd_dof.numpy().tolist(),
        "mean_error": mean_error,
        "member_errors": member_errors,
    }


def _compare_tails(ensemble, held, results, *, trajectories: int):
    """Gaussian and Student-t tails fitted on the same other trajectories (seed 2), judged on the held-out ones."""
    import lnn
    import simulations
    from lnn import uncertainty

    other = lnn.generate(simulations.DoublePendulum(g=9.8), n_trajectories=trajectories, duration=5.0, dt=0.02, seed=2)
    fitted_on = ensemble.predict(other.q, other.qd, tau=other.tau)
    prediction = ensemble.predict(held.q, held.qd, tau=held.tau)
    print(f"\nqdd tails fitted on {trajectories} other trajectories (seed 2), judged on the held-out ones")
    for tails in ("gaussian", "student"):
        fit = uncertainty.fit_calibration("qdd", other.qdd, fitted_on.qdd, fitted_on.qdd_spread, tails=tails)
        std = uncertainty.interval_std(prediction.qdd_spread, fit.scale, fit.floor)
        cover = {level: uncertainty.coverage(held.qdd, prediction.qdd, std, level, fit.dof) for level in (0.5, 0.9)}
        nll = uncertainty.predictive_nll(held.qdd, prediction.qdd, std, fit.dof)
        print(
            f"  {tails:<8s} dof {np.round(fit.dof, 2)}: 50 % covers {np.round(100 * cover[0.5], 1)} %, "
            f"90 % {np.round(100 * cover[0.9], 1)} %, NLL {np.round(nll, 3)}"
        )
        results[f"tails {tails}"] = {
            "dof": fit.dof.tolist(),
            "coverage_50": cover[0.5].tolist(),
            "coverage_90": cover[0.9].tolist(),
            "nll": nll.tolist(),
        }


def _novelty(ensemble, data, held, results):
    rng = np.random.default_rng(3)
    pick = rng.choice(len(held.q), size=min(5000, len(held.q)), replace=False)
    q_in, qd_in = held.q[pick], held.qd[pick]
    print(f"\nnovelty: AUROC of {len(pick)} held-out in-box states against 5000 out-of-box states")
    results["novelty"] = {}
    for label, signs in (("rates +-3 std", True), ("rates N(0, 3 std)", False)):
        q_out, qd_out = _out_of_box(data, 5000, rng, signs=signs)
        scores = {}
        for name, fn in (
            ("distance", lambda q, qd: ensemble.members[0].novelty(q, qd)),
            ("disagreement", lambda q, qd: _disagreement(ensemble, q, qd)),
            ("ensemble.novelty", lambda q, qd: ensemble.novelty(q, qd)),
        ):
            scores[name] = _auroc(fn(q_in, qd_in), fn(q_out, qd_out))
        spread_in = np.median(ensemble.predict(q_in, qd_in).qdd_spread, axis=0)
        spread_out = np.median(ensemble.predict(q_out, qd_out).qdd_spread, axis=0)
        share_in = float(np.mean(ensemble.novelty(q_in, qd_in) > 1))
        share_out = float(np.mean(ensemble.novelty(q_out, qd_out) > 1))
        print(
            f"  {label:<18s} AUROC "
            + ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
            + f"; novel: {100 * share_in:.1f} % in-box, {100 * share_out:.1f} % out-of-box; median qdd spread "
            f"{np.round(spread_in, 3)} in-box, {np.round(spread_out, 3)} out-of-box   target AUROC >= 0.95"
        )
        results["novelty"][label] = {
            "auroc": scores,
            "novel_in": share_in,
            "novel_out": share_out,
            "spread_in": spread_in.tolist(),
            "spread_out": spread_out.tolist(),
        }


def _disagreement(ensemble, q, qd):
    spread = ensemble.predict(q, qd).qdd_spread
    reference = np.asarray(ensemble.members[0].qdd_std.numpy(), np.float64)
    return np.sqrt(np.mean((spread / reference) ** 2, axis=1))


def _rollouts(ensemble, system, held, results, duration: float):
    import lnn
    from lnn.uncertainty import z_value

    starts = np.array([np.flatnonzero(held.trajectory == i)[0] for i in np.unique(held.trajectory)])
    q0, qd0 = held.q[starts], held.qd[starts]
    t = np.linspace(0.0, duration, int(round(duration / 0.05)) + 1)
    truth = lnn.rollout(system, q0, qd0, t, rtol=1e-10, atol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.NoveltyWarning)
        start = time.perf_counter()
        learned = lnn.rollout(ensemble, q0, qd0, t, on_failure="mask")
        seconds = time.perf_counter() - start
    std = learned.std("q")
    scales = {"raw spread (band_scale 1)": 1.0, "x qdd calibration scale": float(np.mean(ensemble.qdd_scale.numpy()))}
    print(f"\nrollouts: {len(starts)} held-out initial states, {duration:g} s ({seconds:.1f} s for {K} members)")
    results["rollouts"] = {"failed": int(np.sum(learned.failed)), "seconds": seconds}
    for label, scale in scales.items():
        half = z_value(0.9) * scale * std
        inside = np.abs(truth.q - learned.q) <= half
        per_time = inside.mean(axis=(0, 2))
        print(
            f"  90 % band, {label:<26s} (x{scale:.3g}): truth inside {100 * inside.mean():.1f} % of the samples "
            f"(first 5 s {100 * per_time[t <= 5].mean():.1f} %, last 5 s {100 * per_time[t > 5].mean():.1f} %)"
            "   target >= 80 %"
        )
        results["rollouts"][label] = float(inside.mean())
    left = int(np.sum(np.isfinite(learned.novel_at)))
    print(
        f"  {left} of {len(starts)} rollouts left the training states (novelty > 1); "
        f"{int(np.sum(learned.failed))} failed"
    )
    results["rollouts"]["left"] = left
    return truth, learned


def _figure(ensemble, system, path, force: bool):
    """A rollout that leaves the data: its band against the truth, and its novelty."""
    import lnn
    from lnn import plot

    q0, qd0 = np.array([FIGURE_STATE[0]]), np.array([FIGURE_STATE[1]])
    t = np.linspace(0.0, 10.0, 501)
    truth = lnn.rollout(system, q0, qd0, t, rtol=1e-10, atol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lnn.NoveltyWarning)
        learned = lnn.rollout(ensemble, q0, qd0, t, on_failure="mask")
    with plot.style():
        fig = plot.new_figure(plot.COLUMN_WIDTH, 3.6)
        top, bottom = fig.subfigures(2, 1, height_ratios=[2.2, 1.0])
        drawn = plot.trajectories(truth, learned, fig=top)
        ax = bottom.subplots()
        ax.plot(t, learned.novelty[0], color=plot.LEARNED_COLOR, linewidth=1.0)
        ax.axhline(1.0, color=plot.TRUE_COLOR, linestyle=":", linewidth=0.8)
        if np.isfinite(learned.novel_at[0]):
            for a in [*drawn.axes, ax]:
                a.axvline(learned.novel_at[0], color="0.5", linestyle="--", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xlim(t[0], t[-1])
        ax.set_xlabel("time $t$ [s]")
        ax.set_ylabel("novelty [1]")
    plot.save(fig, path, overwrite=force)
    print(f"\nwrote {path} (novel from t = {learned.novel_at[0]:.2f} s)")


def section_accuracy(args, results):
    import lnn
    import simulations

    system = simulations.DoublePendulum(g=9.8)
    n_traj = 32 if args.quick else 256
    data = lnn.generate(system, n_trajectories=n_traj, duration=5.0, dt=0.02, seed=0)
    held = lnn.generate(system, n_trajectories=32 if not args.quick else 8, duration=5.0, dt=0.02, seed=1)
    if args.model:
        ensemble = lnn.load_model(args.model)
        print(f"loaded {args.model}")
    else:
        ensemble = lnn.Ensemble(2, K, angular=True, seed=0)
        start = time.perf_counter()
        history = lnn.fit(ensemble, data, time_limit=args.budget)
        print(
            f"trained {K} members for {time.perf_counter() - start:.0f} s: {len(history.epoch)} epochs, "
            f"validation loss {history.best_loss:.4g}, traces {history.traces}"
        )
        results["epochs"] = len(history.epoch)
        if args.save:
            ensemble.save(args.save)
    _calibration(ensemble, held, results)
    _compare_tails(ensemble, held, results, trajectories=8 if args.quick else 26)
    _novelty(ensemble, data, held, results)
    _rollouts(ensemble, system, held, results, duration=10.0)
    if args.figure:
        _figure(ensemble, system, args.figure, args.force)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=("all", "cost", "accuracy"), default="all")
    parser.add_argument("--budget", type=float, default=900.0, help="training time limit (s)")
    parser.add_argument("--rounds", type=int, default=30, help="round-robin rounds of the cost timing")
    parser.add_argument("--model", default=None, help="a saved ensemble to measure instead of training one")
    parser.add_argument("--save", default=None, help="save the trained ensemble here (.keras)")
    parser.add_argument("--figure", default=None, help="write the docs' figure here (.png)")
    parser.add_argument("--force", action="store_true", help="overwrite the figure")
    parser.add_argument("--quick", action="store_true", help="small data and a 60 s budget")
    parser.add_argument("--json", default=None, help="append the results as one JSON line here")
    args = parser.parse_args(argv)
    if args.quick:
        args.budget, args.rounds = min(args.budget, 60.0), min(args.rounds, 10)
    results: dict = {"budget": args.budget, "quick": args.quick}
    if args.section in ("all", "cost"):
        section_cost(args, results)
    if args.section in ("all", "accuracy"):
        section_accuracy(args, results)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
