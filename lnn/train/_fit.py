""":func:`fit`: the training loop over the parts of :mod:`lnn.train`."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from lnn.train import _data, _ensemble, _identifiability, _model, _options
from lnn.train._callbacks import Callbacks
from lnn.train._checkpoints import Best, Checkpoints
from lnn.train._clock import Clock
from lnn.train._epoch_logs import EpochLogs
from lnn.train._history import History, Record
from lnn.train._loop import EpochLoop
from lnn.train._steps import build_trainer, make_optimizer

__all__ = ["fit"]


def fit(
    model,
    dataset,
    *,
    loss="auto",
    epochs: int | None = None,
    batch_size: int = 512,
    learning_rate: float = 1e-2,
    validation=0.1,
    seed: int = 0,
    time_limit: float | None = None,
    callbacks: Sequence[Callable[[int, dict], Any]] = (),
    checkpoint_dir=None,
    strategy: tf.distribute.Strategy | None = None,
    progress: Callable[..., None] | None = None,
    schedule: str = "cosine",
    final_learning_rate: float = 1e-2,
    warmup: float = 0.02,
    clipnorm: float | None = 10.0,
    patience: int | None = None,
    min_delta: float = 0.0,
    horizon: int = 5,
    initialization: str | None = None,
    adapt: bool = True,
    shuffle: bool = True,
    restore_best: bool = True,
    calibrate: bool = True,
    tensorboard_dir=None,
    csv_log=None,
    xla: bool | None = None,
) -> History:
    """Train a dynamics model on a dataset of states, accelerations and torques.

    Parameters
    ----------
    model : keras.Model
        ``model((q, qd, tau)) -> qdd`` for batches of shape ``(B, n)``; a
        :class:`lnn.LagrangianNetwork` or any Keras model with that call
        (see :mod:`lnn.train` for what each loss needs).
    dataset : lnn.Dataset
        Training data: ``q, qd, qdd, tau`` of shape ``(N, n)``, trajectory ids
        ``(N,)`` and times ``t (N,)`` (the rollout loss needs the last two).
    loss : str or dict of str to float, keyword-only
        A term name or ``{term: weight}``; terms ``"acceleration"`` (=
        ``"acceleration-l2"``), ``"acceleration-l1"``, ``"torque"`` (=
        ``"inverse-dynamics"``), ``"energy"`` (= ``"power"``), ``"rollout"``
        (:data:`lnn.train.LOSSES`). ``"auto"`` (the default):
        :func:`lnn.train.default_loss` of the dataset and the model
        (``"acceleration"`` for unforced data, ``"torque"`` for data with
        torques). A loss the data cannot identify (a torque or energy loss on
        data without torques; an acceleration or rollout loss on unforced
        data, which fixes the Lagrangian only up to a factor) is trained, with
        an :class:`lnn.train.IdentifiabilityWarning`.
    epochs : int or None, keyword-only
        Number of passes over the training data. None (the default): 100
        epochs without a ``time_limit``; with one, as many as the budget
        allows (the time limit alone ends the run, and the learning-rate
        schedule spans the budget). Given both, the first limit reached
        ends the run.
    batch_size : int, keyword-only
        Global batch size (split over the replicas of ``strategy``).
    learning_rate : float, keyword-only
        Peak learning rate of Adam. The default, 1e-2, was the best measured
        for the default model on the double pendulum, the planar arm and the
        cart-pole (``benchmarks/bench_defaults.py``: 2-3x lower held-out
        torque errors than 3e-3 in the same time budget).
    validation : lnn.Dataset, float or None, keyword-only
        Validation data, a fraction of the trajectories of ``dataset`` to hold
        out (``dataset.split``), or None. With fewer than ``1 / validation``
        trajectories (one recording), contiguous time blocks kept a derivative
        window apart are held out instead (``dataset.split(by="auto")``), with
        a :class:`lnn.data.TimeSplitWarning` saying so.
    seed : int, keyword-only
        Seed of the data split, the shuffling and ``initialization``.
    time_limit : float, optional, keyword-only
        Wall-time budget in seconds: training stops cleanly before exceeding
        it. The learning-rate schedule then follows the larger of the epoch
        and the time fraction (the time fraction alone when ``epochs`` is
        None), so that it decays within the budget.
    callbacks : sequence of callable or keras.callbacks.Callback, keyword-only
        A callable is called as ``callback(epoch, logs)`` after every epoch
        with the epoch's row of :meth:`History.as_rows`; returning True stops
        training. A ``keras.callbacks.Callback`` (``EarlyStopping``,
        ``CSVLogger``, ``ModelCheckpoint``, ``BackupAndRestore``,
        ``TerminateOnNaN``, ``TensorBoard``) gets the calls of Keras's
        ``Model.fit``; its logs hold the row's columns but ``epoch``, and
        ``loss`` / ``val_loss`` (the totals; monitor other columns with
        ``mode="min"``), ``model.optimizer`` is fit's optimizer, and setting
        ``model.stop_training`` stops training after the batch or epoch.
        ``LearningRateScheduler`` and ``ReduceLROnPlateau`` are refused (the
        ``schedule`` sets the learning rate).
    checkpoint_dir : str or Path, optional, keyword-only
        Save ``tf.train.Checkpoint`` s (model, optimizer, epoch, seed, history)
        every epoch, and resume from the latest one when it exists: a resumed
        run reproduces an uninterrupted one bit for bit (without a
        ``time_limit``, whose schedule depends on wall time).
    strategy : tf.distribute.Strategy, optional, keyword-only
        Distribute the batches over its replicas; the model must have been
        created inside ``strategy.scope()``.
    progress : callable, optional, keyword-only
        ``progress(done, total, message)`` with epochs done (fractional) out
        of ``epochs`` and the latest losses; under a ``time_limit`` that
        ends the run sooner, ``done / total`` is the elapsed fraction of it
        (so a progress bar's time left is right either way); without an
        epoch count, ``total`` is 1 and ``done`` that fraction.
    schedule : {"cosine", "exponential", "constant"}, keyword-only
        Learning-rate schedule over the run (after a linear warm-up).
    final_learning_rate : float, keyword-only
        Final learning rate as a fraction of ``learning_rate``.
    warmup : float, keyword-only
        Fraction of the run spent warming the learning rate up from 10 %.
    clipnorm : float or None, keyword-only
        Clip the global gradient norm to this value.
    patience : int, optional, keyword-only
        Stop when the monitored loss has not improved for this many epochs.
    min_delta : float, keyword-only
        An epoch improves on the best one when its monitored loss is lower by
        more than this.
    horizon : int, keyword-only
        Steps of the rollout loss.
    initialization : {None, "cranmer"}, keyword-only
        Re-initialise the model's MLPs (:func:`cranmer_initialization`).
    adapt : bool, keyword-only
        Call ``model.adapt(q, qd, qdd)`` on the training data (input scaling
        stored in the model) when the model has it.
    shuffle : bool, keyword-only
        Shuffle the samples every epoch.
    restore_best : bool, keyword-only
        Return the model with the weights of the best epoch.
    calibrate : bool, keyword-only
        Calibrate an :class:`lnn.Ensemble`'s intervals after training (see
        Notes). False leaves that to the caller, e.g. on other calibration
        data (:func:`lnn.identify` calibrates on the torques as recorded,
        where it trained on them less each log's bias).
    tensorboard_dir : str or Path, optional, keyword-only
        Write the epoch scalars for TensorBoard there.
    csv_log : str or Path, optional, keyword-only
        Write one CSV row per epoch there (appended when resuming; an existing
        file is otherwise refused).
    xla : bool, optional, keyword-only
        Compile the loss and its gradient with XLA (``jit_compile=True``).
        Default: on for :class:`lnn.LagrangianNetwork` models with
        ``xla=True`` whose kind compiles well (``Kind.xla_train``: the
        ``"structured"`` default, 1.7x faster steps, and
        ``"kinetic-potential"``, 1.3-1.6x, after a few seconds of
        compilation) unless the loss has a rollout term; the optimizer update
        runs outside XLA either way.

    Returns
    -------
    History

    Notes
    -----
    An :class:`lnn.Ensemble` is trained in one compiled step for all its
    members, each on its own bootstrap of the training trajectories (seeded
    by ``seed``; :mod:`lnn.train`), each member's gradient clipped by
    ``clipnorm`` on its own; the losses reported are the members' mean. After
    training it is calibrated on the validation data, and on the training
    samples out of some member's bag too when the validation data are fewer
    than 10 trajectories (:meth:`lnn.Ensemble.calibrate`; not without
    ``validation``).

    Raises
    ------
    TrainingDivergedError
        When a batch gives a non-finite loss or gradient (the model keeps the
        weights before that batch).
    ValueError, TypeError
        For bad arguments, naming the argument and the value received.

    Warns
    -----
    IdentifiabilityWarning
        When the training data cannot identify what ``loss`` asks for.
    """
    if isinstance(loss, str) and loss == "auto":
        loss = _identifiability.default_loss(dataset, model)
    options = _options.check(
        loss=loss,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        time_limit=time_limit,
        clipnorm=clipnorm,
        patience=patience,
        horizon=horizon,
        min_delta=min_delta,
        schedule=schedule,
        final_learning_rate=final_learning_rate,
        warmup=warmup,
        initialization=initialization,
    )
    _model.require_callable(model)
    clock = Clock(time_limit=options.time_limit, epochs=options.epochs)
    data = _data.prepare(dataset, validation, seed=seed, horizon=options.horizon, rollout=options.rollout)
    if _ensemble.is_ensemble(model):
        data = _ensemble.weighted(data, model, seed=seed)
    _identifiability.check(options.weights, data.train["tau"])
    strategy, dtype = _model.prepare(
        model, data, strategy=strategy, adapt=adapt, initialization=initialization, seed=seed
    )
    training = _Training(
        model,
        data,
        options,
        strategy=strategy,
        dtype=dtype,
        xla=xla,
        clock=clock,
        callbacks=callbacks,
        checkpoint_dir=checkpoint_dir,
        seed=seed,
        restore_best=restore_best,
        progress=progress,
        shuffle=shuffle,
    )
    with EpochLogs(csv_log=csv_log, tensorboard_dir=tensorboard_dir, resume=len(training.record) > 0) as logs:
        with training.hooks:
            stopped = training.run(logs)
            if restore_best:
                training.best.restore(model)
            if calibrate and _ensemble.is_ensemble(model):
                _ensemble.calibrate(model, data)
            training.hooks.train_end()
    return training.record.history(
        best_epoch=training.best.epoch,
        best_loss=training.best.loss,
        stopped_reason=stopped,
        traces=training.trainer.traces,
        weights=options.weights,
    )


class _Training:
    """The parts of one :func:`fit` (trainer, pipeline, optimizer, records, checkpoints, callbacks) and its epochs."""

    def __init__(
        self,
        model,
        data,
        options,
        *,
        strategy,
        dtype,
        xla,
        clock,
        callbacks,
        checkpoint_dir,
        seed,
        restore_best,
        progress,
        shuffle,
    ) -> None:
        self.model, self.options, self.clock, self.progress = model, options, clock, progress
        self.pipeline = _data.Pipeline(data, batch_size=options.batch_size, dtype=dtype, strategy=strategy)
        ensemble = _ensemble.is_ensemble(model)  # its members are clipped one by one, by its trainer
        clipnorm = None if ensemble else options.clipnorm
        self.optimizer = make_optimizer(model, strategy, learning_rate=options.schedule.base, clipnorm=clipnorm)
        build = functools.partial(_ensemble.build_trainer, clipnorm=options.clipnorm) if ensemble else build_trainer
        self.trainer = build(
            model,
            options.weights,
            data=data,
            signature=self.pipeline.element_spec,
            optimizer=self.optimizer,
            strategy=strategy,
            dtype=dtype,
            xla=xla,
        )
        self.record = Record(self.trainer.terms, validation=data.validation is not None)
        self.best = Best(min_delta=options.min_delta)
        self.saver = None
        if checkpoint_dir is not None:
            self.saver = Checkpoints(
                checkpoint_dir, model=model, optimizer=self.optimizer, seed=seed, strategy=strategy
            )
        self.first = self.saver.resume(self.record, self.best, restore_best=restore_best) if self.saver else 0
        clock.offset = self.record.elapsed
        self.validation_batches = self.pipeline.validation()
        self.hooks = Callbacks(
            callbacks, model=model, optimizer=self.optimizer, epochs=options.epochs, steps=self.pipeline.steps_per_epoch
        )
        self.loop = EpochLoop(
            self.trainer,
            self.pipeline,
            optimizer=self.optimizer,
            schedule=options.schedule,
            clock=clock,
            callbacks=self.hooks,
            progress=progress,
            epochs=options.epochs,
            shuffle=shuffle,
            seed=seed,
        )

    def run(self, logs) -> str:
        """Train epoch after epoch; return why it stopped (``History.stopped_reason``)."""
        first = self.hooks.train_begin(self.first)
        return _run_epochs(
            self.loop,
            self.trainer,
            self.record,
            self.best,
            first=first,
            epochs=self.options.epochs,
            patience=self.options.patience,
            clock=self.clock,
            hooks=self.hooks,
            logs=logs,
            saver=self.saver,
            model=self.model,
            optimizer=self.optimizer,
            validation_batches=self.validation_batches,
            progress=self.progress,
        )


def _run_epochs(
    loop,
    trainer,
    record,
    best,
    *,
    first,
    epochs,
    patience,
    clock,
    hooks,
    logs,
    saver,
    model,
    optimizer,
    validation_batches,
    progress,
) -> str:
    """Train epoch after epoch from ``first``; return why it stopped (``History.stopped_reason``)."""
    for epoch in itertools.count(first) if epochs is None else range(first, epochs):
        if not clock.room_for_epoch():
            if progress is not None and len(record):
                progress(clock.total, clock.total, record.message(len(record) - 1))  # the budget is spent
            return "time_limit"
        clock.start_epoch()
        hooks.epoch_begin(epoch)
        means, cut = loop.run(epoch, record.message(epoch))
        val_means = trainer.eval_sums(validation_batches) if validation_batches is not None else None
        row = record.add(
            epoch, lr=float(np.asarray(optimizer.learning_rate)), time=clock.stamp(), train=means, validation=val_means
        )
        improved = best.update(epoch, (val_means or means)["total"], model)
        if saver is not None:
            saver.save(epoch, record, best, improved=improved)
        logs.write(row)
        if progress is not None:
            progress(clock.done(epoch + 1), clock.total, record.message(epoch))
        clock.end_epoch(first=epoch == first)
        stop = hooks.epoch_end(epoch, row)  # every callback sees every epoch
        cut = cut or ("callback" if stop else None)
        if cut is None and patience is not None and best.since >= patience:
            cut = "early_stopping"
        if cut is not None:
            return cut
    return "epochs"
