"""One epoch of :func:`lnn.fit`: the batch loop (schedule, step, divergence, callbacks, progress)."""

from __future__ import annotations

from lnn.train._history import TrainingDivergedError

__all__ = ["EpochLoop"]


def _means(sums: dict, rows: float, weights: dict) -> dict:
    """Mean of every term over ``rows`` samples, and the weighted ``"total"``."""
    means = {k: v / max(rows, 1.0) for k, v in sums.items()}
    means["total"] = sum(weights[k] * means[k] for k in sums)
    return means


class EpochLoop:
    """Runs the training batches of one epoch.

    Parameters
    ----------
    trainer : lnn.train._steps._Trainer
    pipeline : lnn.train._data.Pipeline
    optimizer : keras.optimizers.Optimizer
        Its learning rate is set before every step.
    schedule : lnn.train._schedule.Schedule
    clock : lnn.train._clock.Clock
    callbacks : lnn.train._callbacks.Callbacks
    progress : callable or None
        ``progress(done, total, message)`` after every applied step.
    epochs : int or None
        None for a run that only the clock's time limit ends.
    shuffle : bool
    seed : int
    """

    def __init__(
        self,
        trainer,
        pipeline,
        *,
        optimizer,
        schedule,
        clock,
        callbacks,
        progress,
        epochs: int | None,
        shuffle: bool,
        seed: int,
    ) -> None:
        self.trainer = trainer
        self.pipeline = pipeline
        self.optimizer = optimizer
        self.schedule = schedule
        self.clock = clock
        self.callbacks = callbacks
        self.progress = progress
        self.epochs = epochs
        self.shuffle = shuffle
        self.seed = seed

    def run(self, epoch: int, message: str) -> tuple[dict, str | None]:
        """Train on every batch of ``epoch``.

        Returns
        -------
        means : dict of str to float
            Mean training loss per term over the epoch's samples, and ``"total"``.
        cut : str or None
            ``"time_limit"`` or ``"callback"`` when the epoch ended early.

        Raises
        ------
        TrainingDivergedError
            On a non-finite loss or gradient (unless a Keras callback such as
            ``TerminateOnNaN`` then stops training): that update is not applied.
        """
        trainer, steps, callbacks = self.trainer, self.pipeline.steps_per_epoch, self.callbacks
        total_steps = None if self.epochs is None else self.epochs * steps
        sums = {k: 0.0 for k in trainer.terms}
        rows = 0.0
        for b, batch in enumerate(self.pipeline.epoch(epoch, shuffle=self.shuffle, seed=self.seed)):
            callbacks.batch_begin(b)
            fraction = self.clock.fraction(epoch * steps + b, total_steps)
            self.optimizer.learning_rate = self.schedule(fraction)
            batch_sums, batch_rows, applied = trainer.train_step(batch)
            for k in trainer.terms:
                sums[k] += batch_sums[k]
            rows += batch_rows
            if callbacks.keras is not None:
                callbacks.batch_end(b, _means(sums, rows, trainer.weights))
            if not applied and not callbacks.stop_requested:
                terms = {k: v / max(batch_rows, 1.0) for k, v in batch_sums.items()}
                raise TrainingDivergedError(
                    f"non-finite loss or gradient at epoch {epoch}, batch {b} (terms {terms}); "
                    "the update was not applied and the model keeps the last good weights. "
                    "Check the data for NaN/inf, or lower learning_rate / clipnorm",
                    epoch=epoch,
                    batch=b,
                    terms=terms,
                )
            if applied and self.progress is not None:
                self.progress(self.clock.done(epoch + (b + 1) / steps), self.clock.total, message)
            if callbacks.stop_requested:
                return _means(sums, rows, trainer.weights), "callback"
            if self.clock.over():
                return _means(sums, rows, trainer.weights), "time_limit"
        return _means(sums, rows, trainer.weights), None
