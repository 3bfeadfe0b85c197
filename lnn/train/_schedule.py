"""The learning-rate schedule of :func:`lnn.fit`: a linear warm-up, then a cosine, exponential or
constant decay."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["SCHEDULES", "Schedule", "learning_rate"]

#: Learning-rate schedules accepted by :func:`lnn.fit`.
SCHEDULES = ("cosine", "exponential", "constant")


def learning_rate(schedule: str, base: float, progress: float, *, final_factor: float, warmup: float) -> float:
    """Learning rate at ``progress`` in [0, 1] of the run.

    Parameters
    ----------
    schedule : {"cosine", "exponential", "constant"}
        Shape of the decay after the warm-up.
    base : float
        Peak learning rate.
    progress : float
        Fraction of the run done (clipped to [0, 1]).
    final_factor : float, keyword-only
        Final learning rate as a fraction of ``base``.
    warmup : float, keyword-only
        Fraction of the run spent rising linearly from ``0.1 base`` to ``base``.

    Returns
    -------
    float
    """
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return base * (0.1 + 0.9 * progress / warmup)
    if schedule == "constant":
        return base
    p = (progress - warmup) / max(1.0 - warmup, 1e-12)
    if schedule == "cosine":
        return base * (final_factor + (1.0 - final_factor) * 0.5 * (1.0 + math.cos(math.pi * p)))
    return base * final_factor**p  # exponential


@dataclass(frozen=True)
class Schedule:
    """A checked learning-rate schedule: ``schedule(progress) -> learning rate``.

    Attributes
    ----------
    kind : {"cosine", "exponential", "constant"}
    base : float
        Peak learning rate (positive).
    final_factor : float
        Final learning rate as a fraction of ``base``, in (0, 1].
    warmup : float
        Fraction of the run spent warming up, in [0, 1).
    """

    kind: str
    base: float
    final_factor: float
    warmup: float

    def __post_init__(self) -> None:
        if not 0 < self.final_factor <= 1:
            raise ValueError(f"final_learning_rate must be in (0, 1], got {self.final_factor!r}")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"warmup must be in [0, 1), got {self.warmup!r}")
        if self.kind not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.kind!r}")

    def __call__(self, progress: float) -> float:
        """The learning rate at ``progress`` in [0, 1] of the run."""
        return learning_rate(self.kind, self.base, progress, final_factor=self.final_factor, warmup=self.warmup)
