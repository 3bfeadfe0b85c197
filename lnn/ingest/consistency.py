"""The derivative window chosen by the torques: :func:`choose_window_by_torque` (numpy and scipy only).

The spectral rule (:func:`lnn.ingest.choose_window`) judges a window by the
positions alone: it differentiates the band that holds all but 0.01 % of
the positions' variance. What a model of the dynamics needs is different:
accelerations that explain the *torques*. Where the torques have content
above that band (a closed loop's friction transients, a pendulum's
harmonics) the rule's windows are too long; where the positions carry
quantisation and vibration that the torques do not, a longer window than
the noise level suggests pays. The torques say which: the window with which
a generic linear model of the motion (:func:`lnn.ingest.regression.rigid_body_features`)
explains the measured torques best is the one whose ``q, qd, qdd`` are most
consistent with them.

How well it chooses, on real and simulated logs against fixed windows and
the spectral rule: ``benchmarks/bench_windows.py`` and
``docs/benchmarks/real-robots.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lnn.ingest.regression import normal_sums, residual_sum, rigid_body_features
from lnn.ingest.windows import DEFAULT_ORDER, _detrended, _interior, _smallest_window

__all__ = ["TorqueWindow", "choose_window_by_torque", "window_at"]

#: Ratio between neighbouring windows of the first, coarse search.
COARSE_RATIO = 1.2
#: Ratio between neighbouring windows of the second search, between the coarse best's neighbours.
FINE_RATIO = 1.04
#: Rows times features squared per regression: longer logs are subsampled evenly (the features are smooth).
#: 3e9: a 2-DOF log (44 features) keeps 1.5 million rows, a 7-DOF one (267 features) 42 000.
ROW_BUDGET = 3e9
#: The torques decide only with at least this many rows per feature (else the regression fits noise).
MIN_ROWS_PER_FEATURE = 10
#: ... and where the motion explains at least this share of the torques' variance (mean over joints).
MIN_EXPLAINED = 0.5
#: Friction's velocity scale of the features: this fraction of each coordinate's RMS velocity.
FRICTION_SCALE = 0.05


@dataclass(frozen=True)
class TorqueWindow:
    """The window of :func:`choose_window_by_torque` and the evidence for it.

    Attributes
    ----------
    window : int
        Odd Savitzky–Golay window (samples) for ``qd`` and ``qdd`` of every
        coordinate.
    candidates : ndarray of int, shape ``(K,)``
        The windows compared, increasing.
    residuals : ndarray, shape ``(K, n)``
        Mean square residual of each joint's torque regressed on the
        motion's features, per window (torque units squared).
    variance : ndarray, shape ``(n,)``
        Variance of each joint's torque over the rows compared.
    rows : int
        Samples the regressions used.
    features : int
        Columns of the regression.
    step : float
        The step (s) at which ``window`` and ``candidates`` count samples
        (the median of the pieces' steps).
    """

    window: int
    candidates: np.ndarray
    residuals: np.ndarray
    variance: np.ndarray
    rows: int
    features: int
    step: float

    @property
    def score(self) -> np.ndarray:
        """Per window, the mean over joints of the residual relative to that joint's lowest, shape ``(K,)``."""
        return _scores(self.residuals)

    @property
    def explained(self) -> np.ndarray:
        """Share of each joint's torque variance the motion explains with the chosen window, shape ``(n,)``."""
        best = int(np.flatnonzero(self.candidates == self.window)[0])
        return 1.0 - self.residuals[best] / np.maximum(self.variance, 1e-300)

    @property
    def informative(self) -> bool:
        """Whether the torques decide: a minimum between the shortest and longest window, enough rows, a fit.

        The residual must be lowest strictly inside the windows searched
        (a trade-off between the noise of short windows and the distortion
        of long ones; a torque that is no function of the motion keeps
        improving as the motion is smoothed more, and the search's edge is
        no choice), with at least 10 rows per feature, and the motion must
        explain on average half of the torques' variance.
        """
        interior = self.candidates[0] < self.window < self.candidates[-1]
        enough = self.rows >= MIN_ROWS_PER_FEATURE * self.features
        return bool(interior and enough and float(np.mean(self.explained)) >= MIN_EXPLAINED)


def choose_window_by_torque(q, tau, step, *, order: int = DEFAULT_ORDER, max_window: int) -> TorqueWindow | None:
    """The Savitzky–Golay window whose ``q, qd, qdd`` explain the torques best.

    For each candidate window ``w`` the velocities and accelerations of every
    coordinate are estimated with it, the torques are regressed (least
    squares, per joint) on :func:`lnn.ingest.regression.rigid_body_features`
    of the motion, and the residual is scored: the mean over joints of each
    joint's residual relative to its lowest over the windows (so each joint
    counts alike, and a joint whose torque is mostly noise, flat in ``w``,
    does not decide). A window too short passes the positions' noise into
    ``qdd`` (a noisy regressor); one too long distorts the motion the
    torques follow; both leave more of the torques unexplained. Every
    window is judged on the same rows: those at least ``max_window // 2``
    from the ends of their piece (where each filter is the interior one),
    subsampled evenly to at most ``3e9 / p^2`` rows for ``p`` features.

    All pieces are pooled into one regression, whatever log they come from:
    one log's few seconds let the regression's coefficients adapt to the
    filter's distortion of its narrow band (one log at a time, the criterion
    can be nearly flat, its minimum anywhere); logs of different motions do not. Pieces sampled at different steps
    share the window's span in seconds.

    The search runs over odd windows from the smallest (more than ``order + 1``) to ``max_window``,
    20 % apart, then 4 % apart between the best one's neighbours. The
    regression has the same ``p`` columns for every window, so its in-sample
    residual compares them fairly; :attr:`TorqueWindow.informative` says
    whether it should decide (a minimum inside the windows searched, at
    least 10 rows per column, and the motion explaining on average half of
    the torques' variance).

    Parameters
    ----------
    q, tau : sequence of array_like, each of shape ``(T_i, n)``
        Pieces of the logs on uniform grids: positions and torques (several
        logs of one robot pooled).
    step : float or sequence of float
        The grid's step (s), or each piece's.
    order : int
        Degree of the Savitzky–Golay polynomials.
    max_window : int
        Largest window to consider (samples at the median step).

    Returns
    -------
    TorqueWindow or None
        The window in samples at the median step of the pieces
        (:func:`window_at` converts it to another step). None when no piece
        is longer than ``max_window`` or there are no more rows than features.
    """
    w_min = _smallest_window(order)
    pieces = [(np.asarray(a, np.float64), np.asarray(b, np.float64)) for a, b in zip(q, tau)]
    steps = np.broadcast_to(np.asarray(step, np.float64), (len(pieces),))
    if not pieces:
        return None
    reference = float(np.median(steps))
    max_window = int(max_window) - (1 - int(max_window) % 2)
    if max_window < w_min:
        return None
    margins = [window_at(max_window, reference, h, order=order) // 2 for h in steps]
    kept = [i for i, (a, _) in enumerate(pieces) if a.shape[0] > 2 * margins[i]]
    if not kept:
        return None
    pieces, steps, margins = [pieces[i] for i in kept], steps[kept], [margins[i] for i in kept]
    n = pieces[0][0].shape[1]
    p = rigid_body_features(*(np.zeros((1, n)),) * 3, np.ones(n)).shape[1]
    total = sum(a.shape[0] - 2 * m for (a, _), m in zip(pieces, margins))
    stride = max(1, math.ceil(total / max(MIN_ROWS_PER_FEATURE * p, ROW_BUDGET / p**2)))
    rows = [np.arange(m, a.shape[0] - m, stride) for (a, _), m in zip(pieces, margins)]
    count = sum(r.shape[0] for r in rows)
    if count <= p:
        return None
    target = np.concatenate([b[r] for (_, b), r in zip(pieces, rows)])
    q_rows = np.concatenate([a[r] for (a, _), r in zip(pieces, rows)])
    detrended = [_detrended(a) for a, _ in pieces]
    evaluated: dict[int, np.ndarray] = {}

    def residual(w: int) -> np.ndarray:
        if w not in evaluated:
            qd, qdd = [], []
            for (x, slope), r, h in zip(detrended, rows, steps):
                w_h = window_at(w, reference, h, order=order)
                qd.append(_at(x, r, w_h, order, 1, h) + slope / h)
                qdd.append(_at(x, r, w_h, order, 2, h))
            qd, qdd = np.concatenate(qd), np.concatenate(qdd)
            v = FRICTION_SCALE * np.sqrt(np.mean(qd**2, axis=0)) + 1e-12
            phi = rigid_body_features(q_rows, qd, qdd, v)
            scale = phi.std(axis=0)
            scale[scale == 0] = 1.0
            evaluated[w] = np.maximum(residual_sum(*normal_sums(phi / scale, target)), 0.0) / count
        return evaluated[w]

    coarse = _odd_grid(w_min, max_window, COARSE_RATIO)
    scores = _scores([residual(w) for w in coarse])
    best = int(np.argmin(scores))
    low, high = coarse[max(best - 1, 0)], coarse[min(best + 1, len(coarse) - 1)]
    for w in _odd_grid(low, high, FINE_RATIO):
        residual(w)
    candidates = np.array(sorted(evaluated))
    residuals = np.stack([evaluated[int(w)] for w in candidates])
    return TorqueWindow(
        window=int(candidates[int(np.argmin(_scores(residuals)))]),
        candidates=candidates,
        residuals=residuals,
        variance=np.var(target, axis=0),
        rows=count,
        features=p,
        step=reference,
    )


def window_at(window: int, step: float, other: float, *, order: int = DEFAULT_ORDER) -> int:
    """The odd window (samples) at step ``other`` spanning what ``window`` samples span at ``step``."""
    w_min = _smallest_window(order)
    w = int(round(window * step / other))
    return max(w_min, w if w % 2 else w + 1)


def _scores(residuals) -> np.ndarray:
    """Mean over joints of each window's residual relative to the joint's lowest, shape ``(K,)``."""
    residuals = np.asarray(residuals)
    floor = np.maximum(residuals.min(axis=0), 1e-300)
    return np.mean(residuals / floor, axis=1)


def _odd_grid(low: int, high: int, ratio: float) -> list[int]:
    """Odd integers from ``low`` to ``high`` (both odd), about ``ratio`` apart (at least 2)."""
    count = max(2, int(math.ceil(math.log(max(high, low + 1) / low) / math.log(ratio))) + 1)
    grid = np.round(np.geomspace(low, high, count)).astype(int)
    grid = np.where(grid % 2, grid, grid + 1).clip(low, high)
    return sorted({int(w) for w in grid})


def _at(x: np.ndarray, rows: np.ndarray, w: int, order: int, derivative: int, step: float) -> np.ndarray:
    """The Savitzky–Golay ``derivative`` of ``x (T, n)`` (window ``w``) at interior ``rows``, shape ``(R, n)``."""
    return _interior(x, w, order, derivative, step)[rows - w // 2]  # the interior starts at w // 2
