"""The cleaning options of the import, shared by every source (CSV files, ROS bags): :class:`Cleaning`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lnn.ingest.consistency import window_at
from lnn.ingest.windows import DEFAULT_ORDER

__all__ = ["VELOCITY_SOURCES", "WINDOW_RULES", "WINDOW_RULE_SPECTRUM", "Cleaning", "WindowRule"]

#: Where ``qd`` may come from: the positions' derivative, or the measured velocities.
VELOCITY_SOURCES = ("q", "measured")
#: ``window=`` naming the spectral rule (per coordinate, from the positions alone).
WINDOW_RULE_SPECTRUM = "spectrum"
#: The rules by which an import chooses its windows (:attr:`WindowRule.rule`).
WINDOW_RULES = ("torque", WINDOW_RULE_SPECTRUM, "given")


@dataclass(frozen=True)
class WindowRule:
    """How an import chose its Savitzky–Golay windows: what reads more logs of the robot the same way.

    A held-out log read alone would have its windows chosen by its own
    torques, the very targets a model is scored on (a leak), and its
    derivatives would differ from those the model was trained on. So a
    dataset keeps the rule of its import (:attr:`lnn.Dataset.window_rule`),
    and ``window=train.window_rule`` (``lnn import --like train.npz``) reads
    new logs by it:

    - ``"torque"``: the one window that the training logs' torques chose,
      as a span: ``window`` samples at ``step`` s, the same seconds at each
      new log's own step (:func:`lnn.ingest.window_at`);
    - ``"given"``: the window that was given, ``window`` samples at every step;
    - ``"spectrum"``: the spectral rule, per coordinate from each new log's
      positions alone (no torque is read to choose it).

    Attributes
    ----------
    rule : {"torque", "spectrum", "given"}
    window : int or None
        Odd window (samples); None for ``"spectrum"``.
    step : float or None
        The step (s) at which ``window`` spans the torques' choice
        (``"torque"``); None otherwise.
    order : int
        The degree of the Savitzky–Golay polynomials the windows are for.

    Raises
    ------
    ValueError
        For an unknown rule, or a window or step that does not fit it (the
        message names the field and the value received).
    """

    rule: str
    window: int | None = None
    step: float | None = None
    order: int = DEFAULT_ORDER

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.rule not in WINDOW_RULES:
            raise ValueError(f"WindowRule.rule must be one of {WINDOW_RULES}; got {self.rule!r}")
        order = self.order
        if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 2:
            raise ValueError(f"WindowRule.order must be an integer >= 2; got {order!r}")
        set_(self, "order", int(order))
        if self.rule == WINDOW_RULE_SPECTRUM:
            if self.window is not None or self.step is not None:
                raise ValueError(
                    f"WindowRule('spectrum') takes no window or step; got window={self.window!r}, step={self.step!r}"
                )
            return
        window = self.window
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window % 2 == 0 or window <= order:
            raise ValueError(f"WindowRule.window must be an odd integer > order ({order}); got {window!r}")
        set_(self, "window", int(window))
        if self.rule == "torque":
            set_(self, "step", positive("WindowRule.step", self.step))
        elif self.step is not None:
            raise ValueError(f"WindowRule('given') takes no step (the window is samples); got step={self.step!r}")

    def window_at(self, step: float) -> int | None:
        """The window (samples) of a log at ``step`` s under this rule; None for the spectral rule."""
        if self.window is None:
            return None
        if self.rule == "given" or self.step is None:
            return self.window
        return window_at(self.window, self.step, positive("step", step), order=self.order)

    def describe(self) -> str:
        """The rule in words, e.g. ``"145 samples at 2 ms (0.29 s) chosen by the torques"``."""
        if self.rule == WINDOW_RULE_SPECTRUM:
            return "the spectral rule (per coordinate, from the positions)"
        if self.rule == "given":
            return f"{self.window} samples (given)"
        span = self.window * self.step
        return f"{self.window} samples at {self.step * 1e3:.4g} ms ({span:.3g} s), chosen by the torques"

    def to_json(self) -> dict:
        """This rule as JSON types: :meth:`from_json`'s input."""
        return {"rule": self.rule, "window": self.window, "step": self.step, "order": self.order}

    @classmethod
    def from_json(cls, data: dict) -> WindowRule:
        """The rule :meth:`to_json` wrote.

        Raises
        ------
        ValueError
            If ``data`` is not such a record (the message says what it holds).
        """
        if not isinstance(data, dict) or "rule" not in data:
            raise ValueError(f"not a window rule written by WindowRule.to_json: {data!r}")
        return cls(
            rule=data["rule"], window=data.get("window"), step=data.get("step"), order=data.get("order", DEFAULT_ORDER)
        )


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
    window : None, "spectrum", int or WindowRule
        Savitzky–Golay window of ``qd`` and ``qdd``. None (default): one
        window for every coordinate, chosen where the motion explains the
        torques best (:func:`lnn.ingest.choose_window_by_torque`; the
        spectral rule where the torques cannot decide); ``"spectrum"``: per
        coordinate from the positions alone (:func:`lnn.ingest.choose_window`);
        an odd int: that window for every coordinate; a :class:`WindowRule`
        (another import's, ``dataset.window_rule``): the windows that rule
        gives at each log's step, so that held-out logs are read as the
        training logs were (its ``order`` must be ``order``).
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
    window: int | str | WindowRule | None = None
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
        if isinstance(window, WindowRule):
            if window.order != order:
                raise ValueError(
                    f"window is the rule of an import at Savitzky-Golay order {window.order}, but order={order}: "
                    f"pass order={window.order}"
                )
        elif window is not None and window != WINDOW_RULE_SPECTRUM:
            if (
                isinstance(window, bool)
                or not isinstance(window, (int, np.integer))
                or window % 2 == 0
                or window <= order
            ):
                raise ValueError(
                    f"window must be None, {WINDOW_RULE_SPECTRUM!r}, an odd integer > order ({order}) or a WindowRule; "
                    f"got {window!r}"
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
