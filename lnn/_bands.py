"""The torque error in the band of the kinematics and the floor above it (re-exported by :mod:`lnn.metrics`).

An imported log's ``qd`` and ``qdd`` are Savitzky–Golay derivatives of the
positions over a window (:mod:`lnn.ingest`): the state a model sees holds
nothing faster than that filter passes. The measured torque does: sensor
noise, vibration, the motor's current ripple. So the raw torque error
``mean((tau_pred - tau)²)`` mixes two things:

- **in band**: ``mean((tau_pred - S tau)²)``, the error against the torque
  seen through the same filter ``S`` as the kinematics (the import's window
  and order, at derivative 0), which a model of the smoothed state can
  reduce;
- **the out-of-band floor**: ``mean((tau - S tau)²)``, what lies above the
  filter's band, which no model of the smoothed state predicts (its part of
  the raw error is the same for every such model).

Classical identification filters both sides of the equations alike for the
same reason (the torques by the filter that differentiated the positions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lnn import _validate

__all__ = ["TorqueBandMetrics", "band_windows", "in_band", "torque_bands"]

#: A sample further than this many steps from the one before starts a new piece (a gap the import left).
_GAP_STEPS = 1.5


@dataclass(frozen=True)
class TorqueBandMetrics:
    """The torque error of a model split by the band of the kinematics (:func:`torque_bands`).

    Attributes
    ----------
    mse_per_joint : ndarray, shape ``(n,)``
        ``mean((tau_pred - tau)²)`` per joint: the raw error.
    in_band_per_joint : ndarray, shape ``(n,)``
        ``mean((tau_pred - S tau)²)`` per joint, ``S`` the Savitzky–Golay
        smoothing of the derivatives' window and order.
    floor_per_joint : ndarray, shape ``(n,)``
        ``mean((tau - S tau)²)`` per joint: the out-of-band floor (the same for
        every model of the smoothed state).
    windows : dict of int to int
        The window (samples) of each recording id.
    order : int
        The filter's polynomial degree.
    """

    mse_per_joint: np.ndarray
    in_band_per_joint: np.ndarray
    floor_per_joint: np.ndarray
    windows: dict
    order: int

    @property
    def mse(self) -> float:
        """The raw error averaged over the joints."""
        return float(np.mean(self.mse_per_joint))

    @property
    def in_band(self) -> float:
        """The in-band error averaged over the joints."""
        return float(np.mean(self.in_band_per_joint))

    @property
    def floor(self) -> float:
        """The out-of-band floor averaged over the joints."""
        return float(np.mean(self.floor_per_joint))


def band_windows(data, *, window: int | None = None, order: int | None = None) -> dict[int, int]:
    """The Savitzky–Golay window (samples) of each recording of ``data``: ``window`` if given, else the one
    the import's rule gives at the recording's step (:meth:`lnn.ingest.WindowRule.window_at`), cut to the
    largest odd length the recording holds.

    Parameters
    ----------
    data : lnn.Dataset
        With ``t (N,)`` and recording ids ``trajectory (N,)``; ``window_rule``
        when ``window`` is not given.
    window : int, optional
        One odd window for every recording.
    order : int, optional
        The polynomials' degree (default: the rule's).

    Raises
    ------
    ValueError
        Without ``window``, if the dataset records no window rule or the
        spectral one (whose windows are per coordinate and log, not recorded).
    """
    order = _order(data, order)
    if window is None:
        rule = getattr(data, "window_rule", None)
        if rule is None or rule.window is None:
            what = "no window rule (not imported by lnn import)" if rule is None else "the spectral window rule"
            raise ValueError(
                f"the in-band torque error needs the derivatives' Savitzky-Golay window: the dataset records {what}; "
                "pass window= (samples)"
            )
    elif isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window % 2 == 0 or window <= order:
        raise ValueError(f"window must be an odd integer > order ({order}); got {window!r}")
    t = np.asarray(data.t, np.float64)
    ids = np.asarray(data.trajectory)
    out = {}
    for k in np.unique(ids):
        times = t[ids == k]
        step = float(np.median(np.diff(times))) if times.size > 1 else 1.0
        w = int(window) if window is not None else int(data.window_rule.window_at(step))
        out[int(k)] = w
    return out


def in_band(values, data, *, window: int | None = None, order: int | None = None) -> np.ndarray:
    """``values (N, n)`` (e.g. the measured torques) smoothed by the Savitzky–Golay filter of the derivatives
    (derivative 0; ``scipy.signal.savgol_filter``'s ``"interp"`` ends, :func:`lnn.ingest.savgol`), within
    each contiguous piece of each recording of ``data`` (windows of :func:`band_windows`; a piece shorter than
    its window gets the longest odd window it holds, one not longer than the order is left as it is).

    Returns
    -------
    ndarray, shape ``(N, n)``
    """
    from lnn.ingest.windows import savgol

    x = _validate.numeric_array(values, "values")
    if x.ndim != 2 or x.shape[0] != np.asarray(data.t).shape[0]:
        raise ValueError(f"values must have shape (N, n) with the dataset's N = {len(data.t)}; got {x.shape}")
    degree = _order(data, order)
    windows = band_windows(data, window=window, order=degree)
    out = x.copy()
    for rows, k in _pieces(np.asarray(data.t, np.float64), np.asarray(data.trajectory)):
        w = min(windows[k], rows.size if rows.size % 2 else rows.size - 1)
        if w > degree:
            out[rows] = savgol(x[rows], w, degree)
    return out


def torque_bands(tau_pred, data, *, window: int | None = None, order: int | None = None) -> TorqueBandMetrics:
    """The raw, in-band and out-of-band (floor) torque errors of ``tau_pred (N, n)`` on ``data``'s torques.

    In band: against the measured torque smoothed by the filter of the derivatives (:func:`in_band`); the
    floor: the measured torque less its smoothed self, which no model of the smoothed state predicts.

    Parameters
    ----------
    tau_pred : array_like, shape ``(N, n)``
    data : lnn.Dataset
        The measured ``tau (N, n)``, ``t``, ``trajectory`` and (without ``window``) ``window_rule``.
    window, order : int, optional
        As in :func:`band_windows`.

    Returns
    -------
    TorqueBandMetrics
    """
    pred = _validate.numeric_array(tau_pred, "tau_pred")
    tau = np.asarray(data.tau, np.float64)
    _validate.same_shape(pred, tau, "tau_pred", "data.tau")
    degree = _order(data, order)
    smooth = in_band(tau, data, window=window, order=degree)
    return TorqueBandMetrics(
        mse_per_joint=np.mean((pred - tau) ** 2, axis=0),
        in_band_per_joint=np.mean((pred - smooth) ** 2, axis=0),
        floor_per_joint=np.mean((tau - smooth) ** 2, axis=0),
        windows=band_windows(data, window=window, order=degree),
        order=degree,
    )


def _order(data, order: int | None) -> int:
    from lnn.ingest.windows import DEFAULT_ORDER

    if order is None:
        rule = getattr(data, "window_rule", None)
        return DEFAULT_ORDER if rule is None else int(rule.order)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"order must be an integer >= 0; got {order!r}")
    return int(order)


def _pieces(t: np.ndarray, ids: np.ndarray):
    """``(rows, recording id)`` of every contiguous run of one recording without a gap (held-out time blocks are
    pieces of their own)."""
    starts = [0]
    for i in range(1, t.size):
        if ids[i] != ids[i - 1]:
            starts.append(i)
    starts.append(t.size)
    for a, b in zip(starts[:-1], starts[1:]):
        rows = np.arange(a, b)
        steps = np.diff(t[rows])
        if steps.size:
            typical = np.median(steps)
            cuts = np.flatnonzero((steps > _GAP_STEPS * typical) | (steps <= 0)) + 1
        else:
            cuts = np.array([], int)
        for part in np.split(rows, cuts):
            if part.size:
                yield part, int(ids[a])
