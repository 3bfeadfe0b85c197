"""lnn.fit with Keras's own callbacks (keras.callbacks.Callback) beside plain callables."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import keras  # noqa: E402

from lnn.data import Dataset  # noqa: E402
from lnn.models import LagrangianNetwork, load_model  # noqa: E402
from lnn.train import fit  # noqa: E402

G = 9.81


def _data(n=192, seed=0, trajectories=6):
    """Pendulum states with exact accelerations qdd = -g sin q + tau."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-np.pi, np.pi, (n, 1))
    qd = rng.normal(0.0, 2.0, (n, 1))
    tau = rng.normal(0.0, 1.0, (n, 1))
    ids = np.arange(n) * trajectories // n
    t = (np.arange(n) - np.searchsorted(ids, ids)) * 0.01
    return Dataset(t=t, q=q, qd=qd, qdd=-G * np.sin(q) + tau, tau=tau, trajectory=ids, angular=(True,))


def _model(seed=1):
    """Plain graphs (``xla=False``): the callbacks' calls are this file's subject; XLA's step is test_train's."""
    return LagrangianNetwork(
        1, kind="structured", hidden=(8, 8), angular=(True,), dtype="float64", seed=seed, xla=False
    )


def _weights(model):
    return [np.array(v.numpy()) for v in model.variables]


class _Recorder(keras.callbacks.Callback):
    """Records every call Keras's fit would make, and what the model looks like then."""

    def __init__(self):
        super().__init__()
        self.events, self.optimizers = [], []

    def set_model(self, model):
        super().set_model(model)
        self.events.append(("set_model", model))

    def on_train_begin(self, logs=None):
        self.events.append(("train_begin", None))
        self.optimizers.append(self.model.optimizer)

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(("epoch_begin", epoch))

    def on_train_batch_begin(self, batch, logs=None):
        self.events.append(("batch_begin", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(("batch_end", dict(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(("epoch_end", epoch, dict(logs)))

    def on_train_end(self, logs=None):
        self.events.append(("train_end", dict(logs)))


def test_keras_callbacks_get_the_calls_of_keras_fit_and_plain_callables_their_rows():
    model = _model()
    recorder, rows = _Recorder(), []
    history = fit(
        model,
        _data(),
        epochs=2,
        batch_size=64,
        validation=0.25,
        loss={"acceleration": 1.0, "torque": 0.5},
        callbacks=[recorder, lambda epoch, row: rows.append((epoch, row))],
    )
    kinds = [e[0] for e in recorder.events]
    steps = recorder.params["steps"]
    assert recorder.params["epochs"] == 2 and steps >= 2
    assert recorder.events[0] == ("set_model", model)
    assert kinds == (
        ["set_model", "train_begin"]
        + (["epoch_begin"] + ["batch_begin", "batch_end"] * steps + ["epoch_end"]) * 2
        + ["train_end"]
    )
    # model.optimizer is fit's Adam during the fit, and is gone again afterwards
    assert isinstance(recorder.optimizers[0], keras.optimizers.Adam)
    assert not hasattr(model, "optimizer")
    epoch_ends = [e for e in recorder.events if e[0] == "epoch_end"]
    for (_, epoch, logs), (plain_epoch, row), i in zip(epoch_ends, rows, range(2)):
        assert epoch == plain_epoch == history.epoch[i]
        assert row == history.as_rows()[i]  # plain callables: the History row, as before
        assert "epoch" not in logs
        assert logs["loss"] == row["train_total"] == history.train["total"][i]
        assert logs["val_loss"] == row["val_total"] == history.validation["total"][i]
        assert logs["val_torque"] == row["val_torque"]
    batch_logs = [e[1] for e in recorder.events if e[0] == "batch_end"]
    assert {"loss", "train_total", "train_acceleration-l2", "train_torque"} <= set(batch_logs[0])
    # batch logs are running means: the last of an epoch is the epoch's mean
    assert batch_logs[steps - 1]["loss"] == pytest.approx(history.train["total"][0], rel=1e-12)
    assert recorder.events[-1][1]["loss"] == history.train["total"][-1]


@pytest.mark.parametrize("monitor, validation", [("val_total", 0.25), ("loss", None)])
def test_keras_early_stopping_stops_the_fit(monitor, validation):
    # a learning rate of ~0 never improves after the first epoch
    stopper = keras.callbacks.EarlyStopping(monitor=monitor, mode="min", patience=1, min_delta=1e-6)
    history = fit(
        _model(),
        _data(),
        epochs=50,
        batch_size=64,
        validation=validation,
        learning_rate=1e-12,
        schedule="constant",
        warmup=0.0,
        callbacks=[stopper],
    )
    assert history.stopped_reason == "callback"
    assert len(history.epoch) == 2
    assert stopper.stopped_epoch == history.epoch[-1] == 1


def test_keras_csv_logger_and_model_checkpoints_write_loadable_files(tmp_path):
    data = _data()
    model = _model()
    callbacks = [
        keras.callbacks.CSVLogger(str(tmp_path / "log.csv")),
        keras.callbacks.ModelCheckpoint(str(tmp_path / "epoch-{epoch:02d}.weights.h5"), save_weights_only=True),
        keras.callbacks.ModelCheckpoint(
            str(tmp_path / "best.weights.h5"), save_weights_only=True, monitor="val_loss", save_best_only=True
        ),
        keras.callbacks.ModelCheckpoint(str(tmp_path / "best.keras"), monitor="val_loss", save_best_only=True),
    ]
    ends = []  # the weights at the end of every epoch (plain callables run after Keras's)
    callbacks.append(lambda epoch, row: ends.append(_weights(model)))
    history = fit(model, data, epochs=3, batch_size=64, validation=0.25, callbacks=callbacks, restore_best=True)
    with open(tmp_path / "log.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["epoch"]) for r in rows] == history.epoch.tolist()
    np.testing.assert_allclose([float(r["loss"]) for r in rows], history.train["total"], rtol=1e-12)
    np.testing.assert_allclose([float(r["val_loss"]) for r in rows], history.validation["total"], rtol=1e-12)
    np.testing.assert_allclose([float(r["lr"]) for r in rows], history.lr, rtol=1e-12)
    # Keras numbers the files from 1, one per epoch
    assert sorted(p.name for p in tmp_path.glob("epoch-*.weights.h5")) == [
        "epoch-01.weights.h5",
        "epoch-02.weights.h5",
        "epoch-03.weights.h5",
    ]
    # the best epoch by val_loss is fit's best epoch (validation total): restore_best's weights
    for a, b in zip(_weights(model), ends[history.best_epoch]):
        np.testing.assert_array_equal(a, b)
    fresh = _model(seed=7)
    fresh((data.q[:2], data.qd[:2], data.tau[:2]))
    fresh.load_weights(str(tmp_path / "best.weights.h5"))
    for a, b in zip(_weights(fresh), _weights(model)):
        np.testing.assert_array_equal(a, b)
    fresh.load_weights(str(tmp_path / "epoch-03.weights.h5"))
    for a, b in zip(_weights(fresh), ends[-1]):
        np.testing.assert_array_equal(a, b)
    loaded = load_model(tmp_path / "best.keras")
    x = (data.q[:16], data.qd[:16], data.tau[:16])
    np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


def test_keras_terminate_on_nan_stops_cleanly_with_the_last_good_weights():
    clean = _data(256)
    qdd = clean.qdd.copy()
    qdd[130] = np.nan  # in batch 2 of 64 without shuffling
    data = SimpleNamespace(q=clean.q, qd=clean.qd, qdd=qdd, tau=clean.tau)
    model = _model()
    snapshots = []
    history = fit(
        model,
        data,
        epochs=3,
        batch_size=64,
        validation=None,
        shuffle=False,
        adapt=False,
        restore_best=False,
        callbacks=[keras.callbacks.TerminateOnNaN()],
        progress=lambda done, total, message="": snapshots.append(_weights(model)),
    )
    assert history.stopped_reason == "callback"
    assert history.epoch.tolist() == [0] and np.isnan(history.train["total"][0])
    assert len(snapshots) == 3  # after the two good batches, and at the end of the epoch
    for kept, good in zip(_weights(model), snapshots[1]):
        assert np.all(np.isfinite(kept))
        np.testing.assert_array_equal(kept, good)


class _Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 2:
            raise KeyboardInterrupt("interrupted")


def test_keras_backup_and_restore_resumes_bit_identically(tmp_path):
    data = _data()
    options = dict(
        epochs=4, batch_size=64, validation=0.25, seed=3, restore_best=False, loss={"acceleration": 1.0, "torque": 0.5}
    )
    straight = _model()
    h_straight = fit(straight, data, **options)

    backup = tmp_path / "backup"
    interrupted = _model()
    with pytest.raises(KeyboardInterrupt):
        fit(interrupted, data, callbacks=[keras.callbacks.BackupAndRestore(str(backup)), _Interrupt()], **options)
    assert (backup / "latest.weights.h5").exists()  # kept: on_train_end is not called on failure
    resumed = _model(seed=99)  # other initial weights: everything comes from the backup
    h_resumed = fit(resumed, data, callbacks=[keras.callbacks.BackupAndRestore(str(backup))], **options)
    assert h_resumed.epoch.tolist() == [2, 3]
    np.testing.assert_array_equal(h_resumed.train["total"], h_straight.train["total"][2:])
    for a, b in zip(_weights(straight), _weights(resumed)):
        np.testing.assert_array_equal(a, b)
    assert not backup.exists()  # deleted after the completed run (delete_checkpoint=True)


def test_keras_tensorboard_callback_writes_epoch_scalars(tmp_path):
    pytest.importorskip("tensorboard")  # Keras's TensorBoard needs the package (fit's own does not)
    import tensorflow as tf

    fit(
        _model(),
        _data(),
        epochs=2,
        batch_size=64,
        validation=0.25,
        callbacks=[keras.callbacks.TensorBoard(str(tmp_path), write_graph=False)],
    )
    tags = set()
    for path in tmp_path.rglob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    assert {"epoch_loss", "epoch_train_total", "epoch_learning_rate"} <= tags


def test_bad_callbacks_are_named():
    with pytest.raises(TypeError, match=r"callbacks\[1\] must be a callable"):
        fit(_model(), _data(64), epochs=1, callbacks=[lambda epoch, row: False, 3])
    with pytest.raises(ValueError, match="LearningRateScheduler, but fit sets the learning rate"):
        fit(_model(), _data(64), epochs=1, callbacks=[keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr)])
