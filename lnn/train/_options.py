"""The checked options of :func:`lnn.fit` (one frozen :class:`Options`)."""

from __future__ import annotations

from dataclasses import dataclass

from lnn import _validate
from lnn.train._initialization import INITIALIZATIONS
from lnn.train._losses import TERMS, loss_weights
from lnn.train._schedule import Schedule

__all__ = ["DEFAULT_EPOCHS", "Options", "check", "resolve_epochs"]

#: The epochs of a fit given neither ``epochs`` nor ``time_limit``.
DEFAULT_EPOCHS = 100


def resolve_epochs(epochs, time_limit) -> int | None:
    """fit's rule for ``epochs``: as given; None means :data:`DEFAULT_EPOCHS` without a
    ``time_limit`` and no epoch limit with one (the budget decides).

    Parameters
    ----------
    epochs : int or None
    time_limit : float or None
        Already checked (positive or None).

    Returns
    -------
    int or None
        The epoch count, or None for a run that only the time limit ends.
    """
    if epochs is None:
        return DEFAULT_EPOCHS if time_limit is None else None
    return _validate.positive("epochs", epochs, integer=True)


@dataclass(frozen=True)
class Options:
    """fit's numeric options, checked.

    Attributes
    ----------
    weights : dict of str to float
        Loss weights by canonical term name.
    epochs : int or None
        None: no epoch limit (the time limit ends the run).
    batch_size, horizon : int
    time_limit, clipnorm : float or None
    patience : int or None
    min_delta : float
    schedule : lnn.train._schedule.Schedule
    """

    weights: dict
    epochs: int | None
    batch_size: int
    time_limit: float | None
    clipnorm: float | None
    patience: int | None
    horizon: int
    min_delta: float
    schedule: Schedule

    @property
    def rollout(self) -> bool:
        """Whether a term of positive weight needs rollout windows."""
        return any(TERMS[k].windows for k, w in self.weights.items() if w > 0)


def check(
    *,
    loss,
    epochs,
    batch_size,
    learning_rate,
    time_limit,
    clipnorm,
    patience,
    horizon,
    min_delta,
    schedule,
    final_learning_rate,
    warmup,
    initialization,
) -> Options:
    """fit's options as :class:`Options`; ``ValueError``/``TypeError`` naming a bad one."""
    weights = loss_weights(loss)
    time_limit = _validate.positive("time_limit", time_limit, allow_none=True)
    epochs = resolve_epochs(epochs, time_limit)
    batch_size = _validate.positive("batch_size", batch_size, integer=True)
    learning_rate = _validate.positive("learning_rate", learning_rate)
    clipnorm = _validate.positive("clipnorm", clipnorm, allow_none=True)
    patience = _validate.positive("patience", patience, integer=True, allow_none=True)
    horizon = _validate.positive("horizon", horizon, integer=True)
    schedule = Schedule(schedule, learning_rate, final_learning_rate, warmup)
    if initialization not in INITIALIZATIONS:
        raise ValueError(f"initialization must be None or 'cranmer', got {initialization!r}")
    return Options(
        weights=weights,
        epochs=epochs,
        batch_size=batch_size,
        time_limit=time_limit,
        clipnorm=clipnorm,
        patience=patience,
        horizon=horizon,
        min_delta=float(min_delta),
        schedule=schedule,
    )
