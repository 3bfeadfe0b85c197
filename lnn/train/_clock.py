"""Wall time of a fit against its ``time_limit``: when to stop, how far the run is."""

from __future__ import annotations

import time

__all__ = ["Clock"]


class Clock:
    """The wall-time budget of one fit, started at construction.

    Parameters
    ----------
    time_limit : float or None, keyword-only
        Budget in seconds (None: no limit).
    epochs : int, keyword-only
        Epochs of the run (the unit of :meth:`done`).
    """

    def __init__(self, *, time_limit: float | None, epochs: int) -> None:
        self.start = time.monotonic()
        self.time_limit = time_limit
        self.epochs = epochs
        #: Seconds recorded by the run this one resumes (added to :meth:`stamp`).
        self.offset = 0.0
        self._epoch_start = self.start
        self._epoch_seconds = None

    def elapsed(self) -> float:
        """Seconds since the start of this call."""
        return time.monotonic() - self.start

    def stamp(self) -> float:
        """Seconds since the start of the run (of the first call when resumed)."""
        return self.offset + self.elapsed()

    def over(self) -> bool:
        """Whether the time limit is exceeded."""
        return self.time_limit is not None and self.elapsed() > self.time_limit

    def room_for_epoch(self) -> bool:
        """Whether another epoch, as long as the last, fits in the time limit."""
        if self.time_limit is None or self._epoch_seconds is None:
            return True
        return self.elapsed() + self._epoch_seconds <= self.time_limit

    def start_epoch(self) -> None:
        self._epoch_start = time.monotonic()

    def end_epoch(self, *, first: bool) -> None:
        """Time the epoch; the first of a call (tracing, XLA compilation) does not predict the next."""
        self._epoch_seconds = None if first else time.monotonic() - self._epoch_start

    def fraction(self, step: int, total_steps: int) -> float:
        """Fraction of the run done at ``step``: of the steps, or of the time limit when larger."""
        fraction = step / total_steps
        if self.time_limit is not None:
            fraction = max(fraction, self.elapsed() / self.time_limit)
        return fraction

    def done(self, epochs_done: float) -> float:
        """Progress in epochs, or the elapsed share of the time limit (in epochs) when larger."""
        if self.time_limit is None:
            return epochs_done
        return max(epochs_done, min(1.0, self.elapsed() / self.time_limit) * self.epochs)
