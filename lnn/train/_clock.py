"""Wall time of a fit against its ``time_limit``: when to stop, how far the run is."""

from __future__ import annotations

import time

__all__ = ["Clock", "now"]


def now() -> float:
    """Seconds of a monotonic clock: the one time source of :class:`Clock` (tests replace it)."""
    return time.monotonic()


class Clock:
    """The wall-time budget of one fit, started at construction.

    Every reading goes through the module's :func:`now`, so a test can run a
    fit on a fake clock (``monkeypatch.setattr(lnn.train._clock, "now", counter)``).

    Parameters
    ----------
    time_limit : float or None, keyword-only
        Budget in seconds (None: no limit).
    epochs : int or None, keyword-only
        Epochs of the run (the unit of :meth:`done`); None for a run that only
        the time limit ends (then :meth:`done` is the elapsed share of it).
    """

    def __init__(self, *, time_limit: float | None, epochs: int | None) -> None:
        if epochs is None and time_limit is None:
            raise ValueError("a run without an epoch count needs a time_limit")
        self.start = now()
        self.time_limit = time_limit
        self.epochs = epochs
        #: Seconds recorded by the run this one resumes (added to :meth:`stamp`).
        self.offset = 0.0
        self._epoch_start = self.start
        self._epoch_seconds = None

    def elapsed(self) -> float:
        """Seconds since the start of this call."""
        return now() - self.start

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
        self._epoch_start = now()

    def end_epoch(self, *, first: bool) -> None:
        """Time the epoch; the first of a call (tracing, XLA compilation) does not predict the next."""
        self._epoch_seconds = None if first else now() - self._epoch_start

    @property
    def total(self) -> float:
        """The unit of :meth:`done`: the epochs of the run, or 1 for a run that the time limit ends."""
        return 1.0 if self.epochs is None else float(self.epochs)

    def fraction(self, step: int, total_steps: int | None) -> float:
        """Fraction of the run done at ``step``: of the steps (``total_steps``, None for a run
        without an epoch count), or of the time limit when larger."""
        fraction = 0.0 if total_steps is None else step / total_steps
        if self.time_limit is not None:
            fraction = max(fraction, self.elapsed() / self.time_limit)
        return fraction

    def done(self, epochs_done: float) -> float:
        """Progress in units of :attr:`total`: epochs, or the elapsed share of the time limit
        (in epochs) when larger; without an epoch count, the elapsed share of the time limit."""
        if self.time_limit is None:
            return epochs_done
        share = min(1.0, self.elapsed() / self.time_limit)
        if self.epochs is None:
            return share
        return max(epochs_done, share * self.epochs)
