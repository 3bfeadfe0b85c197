"""lnn.fit: convergence, a single tracing, exact resume, NaN stop, distribution, options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from lnn.data import Dataset  # noqa: E402
from lnn.models import LagrangianNetwork  # noqa: E402
from lnn.train import History, TrainingDivergedError, _clock, cranmer_initialization, fit  # noqa: E402

G = 9.81


def _pendulum_data(n=512, seed=0, *, trajectories=8):
    """Random pendulum states with exact accelerations qdd = -g sin q + tau (unit mass and length)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-np.pi, np.pi, (n, 1))
    qd = rng.normal(0.0, 2.0, (n, 1))
    tau = rng.normal(0.0, 1.0, (n, 1))
    qdd = -G * np.sin(q) + tau
    ids = np.arange(n) * trajectories // n
    t = (np.arange(n) - np.searchsorted(ids, ids)) * 0.01
    return Dataset(t=t, q=q, qd=qd, qdd=qdd, tau=tau, trajectory=ids, angular=(True,))


def _model(seed=1, hidden=(16, 16), kind="structured", xla=False):
    """Plain graphs unless asked: XLA's train step (the default) is the subject of the tests that say ``xla=True``
    (the default recipe converges and traces once; the step compiles once); elsewhere its compilation (5-10 s a
    fit) proves nothing."""
    return LagrangianNetwork(1, kind=kind, hidden=hidden, angular=(True,), dtype="float64", seed=seed, xla=xla)


def _weights(model):
    return [np.array(v.numpy()) for v in model.variables]


def test_loss_decreases_and_step_traces_once(tmp_path):
    data = _pendulum_data(500)  # 500 % 64 != 0: a smaller last batch must not retrace
    model = _model(xla=True)  # the defaults: XLA's train step
    history = fit(
        model,
        data,
        epochs=4,
        batch_size=64,
        learning_rate=3e-3,
        validation=0.25,
        loss={"acceleration": 1.0, "acceleration-l1": 0.5, "torque": 0.1, "energy": 0.01},
        tensorboard_dir=tmp_path / "tb",
    )
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert isinstance(history, History)
    assert history.traces == 1
    assert set(history.train) == {"acceleration-l2", "acceleration-l1", "torque", "energy", "total"}
    assert set(history.validation) == set(history.train)
    assert history.train["total"][-1] < 0.7 * history.train["total"][0]
    assert history.validation["total"][-1] < history.validation["total"][0]
    assert history.stopped_reason == "epochs"
    assert np.all(np.diff(history.time) > 0) and history.lr[-1] < history.lr[0]
    total = sum(history.weights[k] * history.train[k] for k in history.weights)
    np.testing.assert_allclose(history.train["total"], total)


_XLA_COMPILATIONS = textwrap.dedent("""
    import glob, json, os, sys
    import numpy as np
    from lnn.data import Dataset
    from lnn.models import LagrangianNetwork
    from lnn.train import fit

    rng = np.random.default_rng(0)
    q = rng.uniform(-3, 3, (64, 2)); qd = rng.normal(size=(64, 2))
    qdd = -np.sin(q) - 0.1 * qd
    data = Dataset(t=np.arange(64) * 0.01, q=q, qd=qd, qdd=qdd, tau=np.zeros_like(q),
                   trajectory=np.zeros(64, int), angular=(True, True))
    kind = sys.argv[2]
    extra = {"convex": True} if kind == "kinetic-potential" else {}
    model = LagrangianNetwork(2, kind=kind, hidden=(8, 8), angular=(True, True), seed=1, **extra)
    counts = []
    count = lambda: len(glob.glob(os.path.join(sys.argv[1], "*before_optimizations.txt")))
    fit(model, data, epochs=3, batch_size=16, validation=None, xla=True,
        callbacks=[lambda epoch, logs: counts.append(count())])
    print(json.dumps(counts))
""")


@pytest.mark.parametrize("kind", ["kinetic-potential", "structured"])
def test_xla_train_step_is_compiled_once_not_per_weight_update(tmp_path, kind):
    """fit's XLA step must not recompile when the weights change (a fresh process, XLA dumps).

    Under XLA, a step built on the nested-tape engine (lnn.mechanics) recompiled after
    every update (0.6-0.9 s a step); this test fails with _Trainer(engine="tapes").
    """
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={tmp_path}", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, "-c", _XLA_COMPILATIONS, str(tmp_path), kind],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(counts) == 3 and counts[0] >= 1, counts  # 4 updates per epoch
    assert counts[-1] == counts[0], f"XLA modules compiled after each epoch: {counts}"


@pytest.mark.parametrize("kind", ["kinetic-potential", "structured", "black-box"])
def test_both_train_engines_give_the_same_loss_and_gradients(kind):
    import tensorflow as tf

    from lnn.train import _Trainer

    model = LagrangianNetwork(
        2, kind=kind, hidden=(8, 6), angular=(True, False), dtype="float64", damping=kind == "kinetic-potential", seed=2
    )
    rng = np.random.default_rng(0)
    batch = [tf.constant(rng.normal(size=(5, 2))) for _ in range(4)]  # q, qd, qdd, tau
    spec = [tf.TensorSpec((None, 2), tf.float64)] * 4
    out = {}
    for engine in ("tapes", "closed-form"):
        trainer = _Trainer(
            model,
            {"acceleration-l2": 1.0},
            n=2,
            dtype=tf.float64,
            scales={"qdd": 1.0},
            strategy=tf.distribute.get_strategy(),
            optimizer=None,
            horizon=1,
            dt=1.0,
            signature=spec,
            engine=engine,
        )
        out[engine] = trainer._local(*batch)
    (s1, r1, g1), (s2, r2, g2) = out["tapes"], out["closed-form"]
    np.testing.assert_allclose(s1["acceleration-l2"].numpy(), s2["acceleration-l2"].numpy(), rtol=1e-10)
    assert float(r1) == float(r2) == 5.0
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-8, atol=1e-12)


def test_checkpoints_resume_bit_identically(tmp_path):
    data = _pendulum_data(256)
    options = dict(
        epochs=4,
        batch_size=64,
        learning_rate=3e-3,
        validation=None,
        seed=3,
        restore_best=False,
        loss={"acceleration": 1.0, "torque": 0.5},
    )
    straight = _model()
    h_straight = fit(straight, data, checkpoint_dir=tmp_path / "a", **options)

    interrupted = _model()
    h_first = fit(
        interrupted, data, checkpoint_dir=tmp_path / "b", callbacks=[lambda epoch, logs: epoch == 1], **options
    )
    assert h_first.stopped_reason == "callback" and len(h_first.epoch) == 2
    resumed = _model(seed=99)  # different initial weights: everything must come from the checkpoint
    h_resumed = fit(resumed, data, checkpoint_dir=tmp_path / "b", **options)

    for a, b in zip(_weights(straight), _weights(resumed)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(h_resumed.epoch, [0, 1, 2, 3])
    np.testing.assert_array_equal(h_resumed.train["total"], h_straight.train["total"])


def test_nan_batch_stops_with_clear_error_and_keeps_last_good_weights():
    clean = _pendulum_data(256)
    qdd = clean.qdd.copy()
    qdd[130] = np.nan  # in batch 2 of 64 without shuffling
    data = SimpleNamespace(q=clean.q, qd=clean.qd, qdd=qdd, tau=clean.tau)
    model = _model()
    snapshots = []
    with pytest.raises(TrainingDivergedError, match="epoch 0, batch 2") as info:
        fit(
            model,
            data,
            epochs=3,
            batch_size=64,
            validation=None,
            shuffle=False,
            adapt=False,
            progress=lambda done, total, message="": snapshots.append(_weights(model)),
        )
    assert info.value.epoch == 0 and info.value.batch == 2
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, FloatingPointError)
    assert len(snapshots) == 2  # progress after the two good batches
    for kept, good in zip(_weights(model), snapshots[-1]):
        assert np.all(np.isfinite(kept))
        np.testing.assert_array_equal(kept, good)


def test_time_limit_and_early_stopping_keep_best_weights(monkeypatch):
    # The wall clock is injected (one second per finished epoch): the budget's logic, not this machine's speed.
    seconds = [0.0]
    monkeypatch.setattr(_clock, "now", lambda: seconds[0])

    def tick(epoch, logs):
        seconds[0] += 1.0

    data = _pendulum_data(256)
    model = _model()
    reports = []
    history = fit(
        model,
        data,
        epochs=10_000,
        batch_size=64,
        validation=0.25,
        time_limit=4.5,  # on the injected clock above: 4.5 epochs' worth
        callbacks=[tick],
        progress=lambda done, total, message="": reports.append(done / total),
    )
    assert history.stopped_reason == "time_limit"
    assert len(history.epoch) == 5 and seconds[0] == 5.0  # epoch 5 would start at 5 s > 4.5 s
    # Progress follows the time budget that ends the run, not the 10 000 epochs it never reaches.
    assert reports[-1] == 1.0 and reports == sorted(reports) and reports[0] > 0.0
    assert history.best_epoch == int(np.argmin(history.validation["total"]))
    # patience: a learning rate of ~0 never improves after the first epoch
    history = fit(
        _model(),
        data,
        epochs=50,
        batch_size=64,
        validation=0.25,
        patience=2,
        learning_rate=1e-12,
        schedule="constant",
        warmup=0.0,
        min_delta=1e-6,
    )
    assert history.stopped_reason == "early_stopping"
    assert len(history.epoch) <= 4


def test_rollout_loss_trains_through_the_integrator():
    dt = 0.05
    t = np.arange(21) * dt
    q, qd = np.zeros((4, 21, 1)), np.zeros((4, 21, 1))
    amplitude = np.array([0.2, 0.4, 0.6, 0.8])
    omega = np.sqrt(G)  # small-angle pendulum
    q[:, :, 0] = amplitude[:, None] * np.cos(omega * t)
    qd[:, :, 0] = -amplitude[:, None] * omega * np.sin(omega * t)
    data = Dataset(
        t=np.tile(t, 4),
        q=q.reshape(-1, 1),
        qd=qd.reshape(-1, 1),
        qdd=(-G * q).reshape(-1, 1),
        tau=np.zeros((84, 1)),
        trajectory=np.repeat(np.arange(4), 21),
        angular=(True,),
    )
    history = fit(
        _model(hidden=(8, 8)),
        data,
        loss={"rollout": 1.0, "acceleration": 1.0},
        horizon=3,
        epochs=3,
        batch_size=32,
        learning_rate=3e-3,
        validation=None,
    )
    assert history.traces == 1
    assert history.train["rollout"][-1] < history.train["rollout"][0]


def test_cranmer_initialization_scales_layers():
    model = LagrangianNetwork(2, kind="black-box", hidden=(300, 300), dtype="float64", seed=0)
    assert cranmer_initialization(model, seed=0) == 1
    layers = model.mlp_layers()["lagrangian"]
    n_first = max(layers[0].kernel.shape)
    assert np.std(layers[0].kernel) == pytest.approx(2.2 / np.sqrt(n_first), rel=0.05)
    assert np.std(layers[1].kernel) == pytest.approx(0.58 / np.sqrt(300), rel=0.05)
    assert np.std(layers[2].kernel) == pytest.approx(np.sqrt(300), rel=0.2)  # n / sqrt(n)
    assert all(np.all(layer.bias == 0) for layer in layers)


def test_bad_arguments_are_named():
    data = _pendulum_data(64)
    with pytest.raises(ValueError, match="unknown loss term 'acceleration-l3'"):
        fit(_model(), data, loss="acceleration-l3")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        fit(_model(), data, batch_size=0)
    with pytest.raises(ValueError, match="validation fraction"):
        fit(_model(), data, validation=1.5)
    with pytest.raises(ValueError, match="model.n_dof is 2"):
        fit(LagrangianNetwork(2, kind="kinetic-potential", dtype="float64"), data)
    with pytest.raises(TypeError, match="lnn.Dataset"):
        fit(_model(), np.zeros((3, 1)))


_MIRRORED = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import numpy as np
    from types import SimpleNamespace
    from lnn.models import LagrangianNetwork
    from lnn.train import fit

    rng = np.random.default_rng(0)
    q = rng.uniform(-3, 3, (300, 1)); qd = rng.normal(size=(300, 1)); tau = rng.normal(size=(300, 1))
    data = SimpleNamespace(q=q, qd=qd, qdd=-9.81 * np.sin(q) + tau, tau=tau)

    def run(strategy):
        def build():
            return LagrangianNetwork(1, kind="structured", hidden=(8, 8), angular=(True,),
                                     dtype="float64", seed=1)
        if strategy is None:
            model = build()
        else:
            with strategy.scope():
                model = build()
        history = fit(model, data, epochs=2, batch_size=64, validation=None, strategy=strategy,
                      loss={"acceleration": 1.0, "torque": 0.5})
        return history, [np.asarray(v).tolist() for v in model.variables]

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    one, w_one = run(None)
    two, w_two = run(strategy)
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "traces": two.traces,
                      "one": one.train["total"].tolist(), "two": two.train["total"].tolist(),
                      "dw": max(float(np.max(np.abs(np.subtract(a, b)))) for a, b in zip(w_one, w_two))}))
""")


def test_mirrored_strategy_matches_one_device():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", _MIRRORED], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2 and result["traces"] == 1
    np.testing.assert_allclose(result["two"], result["one"], rtol=1e-10)
    assert result["dw"] < 1e-10


def test_model_built_outside_the_strategy_scope_is_refused():
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with pytest.raises(ValueError, match="strategy.scope"):
        fit(_model(), _pendulum_data(64), strategy=strategy, epochs=1)


@pytest.mark.slow
def test_pendulum_learned_to_two_percent_in_twenty_epochs():
    """The default recipe on 4000 pendulum states; held-out median error 0.60 % (float32, seed 0)."""
    import simulations
    from lnn import metrics

    pendulum = simulations.Pendulum()
    rng = np.random.default_rng(0)
    q = rng.uniform(-np.pi, np.pi, (4000, 1))
    qd = rng.uniform(-6.0, 6.0, (4000, 1))
    data = Dataset(
        t=np.zeros(4000),
        q=q,
        qd=qd,
        qdd=pendulum.acceleration(q, qd),
        tau=np.zeros_like(q),
        trajectory=np.arange(4000),
        angular=(True,),
    )
    model = LagrangianNetwork(1, kind="structured", hidden=(32, 32), angular=(True,), dtype="float32", seed=0)
    history = fit(model, data, epochs=20, batch_size=256, learning_rate=3e-3, validation=0.1)
    assert len(history.epoch) == 20 and history.stopped_reason == "epochs"
    q_test = rng.uniform(-np.pi, np.pi, (2000, 1))
    qd_test = rng.uniform(-6.0, 6.0, (2000, 1))
    error = metrics.acceleration_error(
        model.numpy_acceleration(q_test, qd_test), pendulum.acceleration(q_test, qd_test)
    )
    assert error.median < 0.02, error.median
