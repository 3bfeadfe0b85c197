"""The best weights of a fit and its ``tf.train.Checkpoint`` s, to resume from.

:class:`Best` keeps the weights of the epoch with the lowest monitored loss
(``restore_best``, ``patience``). :class:`Checkpoints` saves, every epoch,
the model, the optimizer, the epoch and the seed under ``checkpoint_dir /
"latest"``, the best weights under ``checkpoint_dir / "best"`` and the
running log in ``checkpoint_dir / "history.json"``; a new fit on the same
directory resumes from them, bit for bit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import tensorflow as tf

__all__ = ["Best", "Checkpoints"]


class Best:
    """The best epoch so far by the monitored loss, its weights, and the epochs since.

    Parameters
    ----------
    min_delta : float
        An epoch improves on the best one when its loss is lower by more than this.
    """

    def __init__(self, *, min_delta: float) -> None:
        self.min_delta = float(min_delta)
        self.loss = math.inf
        self.epoch = -1
        self.weights = None
        self.since = 0

    def update(self, epoch: int, loss: float, model) -> bool:
        """Record ``epoch``'s monitored ``loss``; keep the model's weights if it is the best."""
        if math.isfinite(loss) and loss < self.loss - self.min_delta:
            self.loss, self.epoch, self.since = loss, epoch, 0
            self.weights = [v.numpy() for v in model.variables]
            return True
        self.since += 1
        return False

    def restore(self, model) -> None:
        """Give the model the best weights (if an epoch finished)."""
        if self.weights is not None:
            for v, value in zip(model.variables, self.weights):
                v.assign(value)


class Checkpoints:
    """The checkpoints of a fit in ``directory`` (created if missing).

    Parameters
    ----------
    directory : str or Path
    model : keras.Model
    optimizer : keras.optimizers.Optimizer
    seed : int
        fit's seed: saved, and checked when resuming.
    strategy : tf.distribute.Strategy
        The epoch and seed variables are created in its scope.
    """

    def __init__(self, directory, *, model, optimizer, seed: int, strategy) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.model = model
        self.seed = int(seed)
        with strategy.scope():
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
            seed_var = tf.Variable(self.seed, dtype=tf.int64, trainable=False)
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=self.epoch, seed=seed_var)
        self.latest = tf.train.CheckpointManager(self.checkpoint, str(self.directory / "latest"), max_to_keep=2)
        self.best_checkpoint = tf.train.Checkpoint(model=model)
        self.best = tf.train.CheckpointManager(self.best_checkpoint, str(self.directory / "best"), max_to_keep=1)

    @property
    def history_file(self) -> Path:
        """The running log of the fit, ``history.json``."""
        return self.directory / "history.json"

    def resume(self, record, best: Best, *, restore_best: bool) -> int:
        """Restore the latest checkpoint (if any) into the model, ``record`` and ``best``.

        Returns
        -------
        int
            The first epoch to run (0 without a checkpoint).
        """
        path = self.latest.latest_checkpoint
        if not path:
            return 0
        saved = tf.Variable(0, dtype=tf.int64, trainable=False)  # read through the public API
        tf.train.Checkpoint(seed=saved).read(path).expect_partial()
        if int(saved.numpy()) != self.seed:
            raise ValueError(
                f"checkpoint_dir {str(self.directory)!r} holds a run with seed={int(saved.numpy())}, "
                f"but fit was called with seed={self.seed}; use another directory"
            )
        self.checkpoint.restore(path).assert_existing_objects_matched()
        first = int(self.epoch.numpy())
        if self.history_file.exists():
            state = json.loads(self.history_file.read_text())
            record.restore(state)
            best.loss, best.epoch = state["best_loss"], state["best_epoch"]
            best.since = 0 if best.epoch < 0 else first - 1 - best.epoch
        if self.best.latest_checkpoint and restore_best:
            current = [v.numpy() for v in self.model.variables]
            self.best_checkpoint.restore(self.best.latest_checkpoint)
            best.weights = [v.numpy() for v in self.model.variables]
            for v, value in zip(self.model.variables, current):
                v.assign(value)
        return first

    def save(self, epoch: int, record, best: Best, *, improved: bool) -> None:
        """Save the state at the end of ``epoch`` (and the best weights when it ``improved``)."""
        self.epoch.assign(epoch + 1)
        if improved:
            self.best.save(checkpoint_number=epoch)
        self.latest.save(checkpoint_number=epoch)
        self.history_file.write_text(json.dumps({**record.state(), "best_loss": best.loss, "best_epoch": best.epoch}))
