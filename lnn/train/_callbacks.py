"""fit's ``callbacks``: plain callables and Keras's own ``keras.callbacks.Callback`` objects.

A plain callable is called as ``callback(epoch, row) -> stop?`` after every
epoch, with the epoch's row of :meth:`lnn.train.History.as_rows`.

A ``keras.callbacks.Callback`` sees the fit as Keras's own ``Model.fit``
shows it (through ``keras.callbacks.CallbackList``): ``set_model(model)``,
``set_params({"epochs", "steps", "verbose": 0})``, then ``on_train_begin``,
``on_epoch_begin``, ``on_train_batch_begin``/``on_train_batch_end`` and
``on_epoch_end`` with logs dicts, and ``on_train_end`` when the run ends
without an exception (a failed run keeps, e.g., ``BackupAndRestore``'s
backup, as under Keras). Their logs hold every column of the row but
``epoch``, plus Keras's names ``loss`` (the training total) and
``val_loss`` (the validation total); the batch logs are the running means of
the epoch so far. During the fit ``model.optimizer`` is fit's optimizer (as
after ``compile``; the previous value is put back afterwards), and
``model.stop_training = True`` (``EarlyStopping``, ``TerminateOnNaN``) stops
training at the end of the batch or epoch.

Keras's rules apply as under ``Model.fit``: ``EarlyStopping`` and
``ModelCheckpoint`` work out the direction of ``loss`` and ``val_loss``
themselves, other columns (``val_total``, ``val_torque``) need
``mode="min"``; Keras's ``TensorBoard`` needs the ``tensorboard`` package
(fit's own ``tensorboard_dir`` does not). Callbacks that set the learning
rate (``LearningRateScheduler``, ``ReduceLROnPlateau``) are refused: fit sets
it before every step from its own schedule. The ``on_test_*`` and
``on_predict_*`` hooks are not called (fit's validation is not a Keras
``evaluate``).
"""

from __future__ import annotations

import keras

__all__ = ["Callbacks"]

_MISSING = object()
#: Keras callbacks that set the learning rate, which fit's schedule sets before every step.
_LEARNING_RATE_CALLBACKS = (keras.callbacks.LearningRateScheduler, keras.callbacks.ReduceLROnPlateau)


def _keras_logs(row: dict) -> dict:
    """Keras's view of a row: no ``epoch`` (Keras passes it apart), plus ``loss`` and ``val_loss``."""
    logs = {k: v for k, v in row.items() if k != "epoch"}
    logs["loss"] = row["train_total"]
    if "val_total" in row:
        logs["val_loss"] = row["val_total"]
    return logs


def _split(callbacks) -> tuple[list, list]:
    """``(plain callables, keras.callbacks.Callback objects)`` of fit's ``callbacks``, checked."""
    if isinstance(callbacks, keras.callbacks.Callback) or callable(callbacks):
        callbacks = [callbacks]
    try:
        callbacks = list(callbacks)
    except TypeError:
        raise TypeError(f"callbacks must be a sequence of callbacks, got {type(callbacks).__name__}") from None
    plain, objects = [], []
    for i, callback in enumerate(callbacks):
        if isinstance(callback, _LEARNING_RATE_CALLBACKS):
            raise ValueError(
                f"callbacks[{i}] is a keras.callbacks.{type(callback).__name__}, but fit sets the "
                "learning rate before every step from its own schedule (schedule=, learning_rate=, "
                "final_learning_rate=, warmup=), which would override it"
            )
        if isinstance(callback, keras.callbacks.Callback):
            objects.append(callback)
        elif callable(callback):
            plain.append(callback)
        else:
            raise TypeError(
                f"callbacks[{i}] must be a callable callback(epoch, logs) or a "
                f"keras.callbacks.Callback, got {type(callback).__name__}"
            )
    return plain, objects


class Callbacks:
    """The callbacks of one fit; a context manager around the training loop.

    Parameters
    ----------
    callbacks : sequence
        Callables ``callback(epoch, logs) -> bool`` and ``keras.callbacks.Callback`` objects.
    model : keras.Model, keyword-only
    optimizer : keras.optimizers.Optimizer, keyword-only
        fit's optimizer (``model.optimizer`` for the Keras callbacks).
    epochs : int or None, keyword-only
        Epochs of the run (None: until the time limit).
    steps : int, keyword-only
        Batches per epoch.
    """

    def __init__(self, callbacks, *, model, optimizer, epochs: int | None, steps: int) -> None:
        self.plain, self.objects = _split(callbacks)
        self.model = model
        self.optimizer = optimizer
        self.params = {"epochs": epochs, "steps": steps, "verbose": 0}
        self.keras = None  # the keras.callbacks.CallbackList, inside the ``with`` block
        self.logs = None
        self._previous = _MISSING

    def __enter__(self) -> Callbacks:
        if self.objects:
            # Keras's callbacks read model.optimizer (BackupAndRestore saves and restores its
            # state with the weights; TensorBoard logs its learning rate). Set without TF
            # checkpoint tracking, so that fit's own tf.train.Checkpoints stay as they are.
            self._previous = getattr(self.model, "optimizer", _MISSING)
            object.__setattr__(self.model, "optimizer", self.optimizer)
            self.model.stop_training = False
            self.keras = keras.callbacks.CallbackList(self.objects, model=self.model, **self.params)
        return self

    def __exit__(self, *exc) -> None:
        if self.keras is None:
            return
        self.keras = None
        if self._previous is _MISSING:
            object.__delattr__(self.model, "optimizer")
        else:
            object.__setattr__(self.model, "optimizer", self._previous)

    @property
    def stop_requested(self) -> bool:
        """Whether a Keras callback set ``model.stop_training``."""
        return self.keras is not None and bool(getattr(self.model, "stop_training", False))

    def train_begin(self, first_epoch: int) -> int:
        """``on_train_begin``; return the first epoch (later if a callback restored a backup).

        ``keras.callbacks.BackupAndRestore`` restores the weights and the
        optimizer, whose step count then gives the epochs done (it backs up at
        the end of each epoch, or every ``save_freq`` batches; the epoch in
        progress then runs again, as under Keras).
        """
        if self.keras is None:
            return first_epoch
        before = int(self.optimizer.iterations.numpy())
        self.keras.on_train_begin()
        after = int(self.optimizer.iterations.numpy())
        return first_epoch if after == before else after // self.params["steps"]

    def epoch_begin(self, epoch: int) -> None:
        if self.keras is not None:
            self.keras.on_epoch_begin(epoch)

    def batch_begin(self, batch: int) -> None:
        if self.keras is not None:
            self.keras.on_train_batch_begin(batch)

    def batch_end(self, batch: int, means: dict) -> None:
        """``on_train_batch_end`` with the running means of the epoch's terms (and ``"total"``)."""
        if self.keras is not None:
            logs = {f"train_{k}": v for k, v in means.items()}
            logs["loss"] = means["total"]
            self.keras.on_train_batch_end(batch, logs)

    def epoch_end(self, epoch: int, row: dict) -> bool:
        """Call every callback with ``epoch``'s row; whether one asks to stop."""
        if self.keras is not None:
            self.logs = _keras_logs(row)
            self.keras.on_epoch_end(epoch, self.logs)
        stop = False
        for callback in self.plain:
            stop = bool(callback(epoch, row)) or stop
        return stop or self.stop_requested

    def train_end(self) -> None:
        """``on_train_end`` with the last epoch's logs (after a run that raised nothing)."""
        if self.keras is not None:
            self.keras.on_train_end(self.logs)
