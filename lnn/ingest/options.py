"""The cleaning options of the import, shared by every source (CSV files, ROS bags): :class:`Cleaning`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lnn.ingest.windows import DEFAULT_ORDER

__all__ = ["VELOCITY_SOURCES", "WINDOW_RULE_SPECTRUM", "Cleaning"]

#: Where ``qd`` may come from: the positions' derivative, or the measured velocities.
VELOCITY_SOURCES = ("q", "measured")
#: ``window=`` naming the spectral rule (per coordinate, from the positions alone).
WINDOW_RULE_SPECTRUM = "spectrum"


@dataclass(frozen=True)
class Cleaning:
    """How logs are cleaned, resampled and differentiated (the options of ``Dataset.from_csv`` / ``from_rosbag``).

    Attributes
    ----------
    angular : bool or tuple of bool
        Which coordinates are angles that may wrap (unwrapped); one bool for
        all coordinates or one per coordinate (checked against ``n`` by the
        pipeline).
    step : float or None
        Step of the uniform grid (s); None: the logs' nominal step.
    max_gap : float or None
        Holes longer than this (s) split a log; None: ``max(3 h, W h / 4)``.
    window : None, "spectrum" or int
        Savitzky–Golay window of ``qd`` and ``qdd``. None (default): one
        window for every coordinate, chosen where the motion explains the
        torques best (:func:`lnn.ingest.choose_window_by_torque`; the
        spectral rule where the torques cannot decide); ``"spectrum"``: per
        coordinate from the positions alone (:func:`lnn.ingest.choose_window`);
        an odd int: that window for every coordinate.
    order : int
        Degree of the Savitzky–Golay polynomials (at least 2).
    trim : bool
        Cut half a window at each end of each piece.
    velocity : {"q", "measured"}
        Where ``qd`` comes from.
    lag : None, "auto", float or tuple of float
        Shift of the torque stream before resampling: None (default) shifts
        nothing (the lag is still estimated and reported); ``"auto"`` shifts
        each torque column by its estimated lag where that is known to half
        a sample (standard error at most ``h / 2``); a number (s) shifts every
        column by it, a tuple of ``n`` numbers each column by its own. A
        positive lag means the torques were logged late: the torque logged
        at ``t`` is taken as the one applied at ``t - lag``.

    Raises
    ------
    ValueError, TypeError
        For an invalid option, naming it and the value received.
    """

    angular: object = False
    step: float | None = None
    max_gap: float | None = None
    window: int | str | None = None
    order: int = DEFAULT_ORDER
    trim: bool = True
    velocity: str = "q"
    lag: object = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "step", None if self.step is None else positive("step", self.step))
        set_(self, "max_gap", None if self.max_gap is None else positive("max_gap", self.max_gap))
        order = self.order
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 2:
            raise ValueError(f"order must be an integer >= 2; got {order!r}")
        set_(self, "order", int(order))
        window = self.window
        if window is not None and window != WINDOW_RULE_SPECTRUM:
            if (
                isinstance(window, bool)
                or not isinstance(window, (int, np.integer))
                or window % 2 == 0
                or window <= order
            ):
                raise ValueError(
                    f"window must be None, {WINDOW_RULE_SPECTRUM!r} or an odd integer > order ({order}); got {window!r}"
                )
            set_(self, "window", int(window))
        if self.velocity not in VELOCITY_SOURCES:
            raise ValueError(f"velocity must be 'q' or 'measured'; got {self.velocity!r}")
        set_(self, "trim", bool(self.trim))
        set_(self, "lag", _lag_option(self.lag))
        if not isinstance(self.angular, (bool, np.bool_)):
            try:
                set_(self, "angular", tuple(self.angular))
            except TypeError:
                raise TypeError(f"angular must be a bool or one bool per coordinate; got {self.angular!r}") from None

    def angular_flags(self, n: int) -> tuple:
        """``angular`` as ``n`` bools; ValueError naming it when it has the wrong length."""
        if isinstance(self.angular, (bool, np.bool_)):
            return (bool(self.angular),) * n
        values = self.angular
        if len(values) != n or not all(isinstance(v, (bool, np.bool_)) for v in values):
            raise ValueError(f"angular must be a bool or {n} bools (one per q column); got {values!r}")
        return tuple(bool(v) for v in values)

    def torque_shift(self, estimated, errors, step: float, n: int) -> tuple:
        """The shift (s) per torque column that ``lag`` asks for.

        Parameters
        ----------
        estimated, errors : array_like, shape ``(n,)``
            The estimated lags (s) and their standard errors (s); NaN where unknown.
        step : float
            The grid's step (s): ``"auto"`` applies an estimate only where its
            standard error is at most half of it (a shift known less well
            than that could add more error than it removes).
        n : int
            Number of torque columns.
        """
        if self.lag is None:
            return (0.0,) * n
        if self.lag == "auto":
            return tuple(
                float(lag) if math.isfinite(lag) and math.isfinite(error) and error <= 0.5 * step else 0.0
                for lag, error in zip(estimated, errors)
            )
        if isinstance(self.lag, float):
            return (self.lag,) * n
        if len(self.lag) != n:
            raise ValueError(f"lag must be None, 'auto', a number or {n} numbers (one per joint); got {self.lag!r}")
        return self.lag


def _lag_option(lag):
    if lag is None or (isinstance(lag, str) and lag == "auto"):
        return lag
    if isinstance(lag, str):
        raise ValueError(f"lag must be None, 'auto', a number of seconds or one per joint; got {lag!r}")
    if isinstance(lag, (int, float, np.integer, np.floating)) and not isinstance(lag, bool):
        return finite("lag", lag)
    try:
        values = tuple(lag)
    except TypeError:
        raise TypeError(f"lag must be None, 'auto', a number of seconds or one per joint; got {lag!r}") from None
    return tuple(finite("lag", v) for v in values)


def finite(name: str, value) -> float:
    """``value`` as a finite float; ValueError naming ``name`` otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(float(value))
    ):
        raise ValueError(f"{name} must be a finite number; got {value!r}")
    return float(value)


def positive(name: str, value) -> float:
    """``value`` as a finite float > 0; ValueError naming ``name`` otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)
