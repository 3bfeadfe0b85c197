"""The lag of a torque stream behind the positions: :func:`estimate_torque_lag`.

A robot's torque and position streams often come from different sensors or
drivers, and one may be logged a few milliseconds after the other. For the
identification of inertias that lag matters: a torque ``tau(t - lambda)``
regressed on ``qdd(t)`` misses ``lambda M dqdd/dt``, which at the top of the
motion's band is as large as the noise of a well-filtered ``qdd``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lnn.ingest.regression import normal_sums, residual_sum, rigid_body_features

__all__ = ["TorqueLag", "estimate_torque_lag"]

#: Blocks of the log over which the spread of the estimates gives its standard error.
LAG_BLOCKS = 8
#: Fewest samples in a block (fewer blocks on short logs; no error below 3 blocks).
LAG_BLOCK_SAMPLES = 500
#: Samples times features squared per evaluation of the regression: longer logs (or more joints)
#: are subsampled evenly (the features are smooth). 2e8: a 2-DOF log (44 features) keeps 100 000
#: samples; a 7-DOF one (267 features) 2 800, which keeps its estimate to a few seconds.
LAG_BUDGET = 2e8
#: Fewest samples kept by that subsampling.
LAG_MIN_ROWS = 2000


@dataclass(frozen=True)
class TorqueLag:
    """The result of :func:`estimate_torque_lag`.

    Attributes
    ----------
    lag : ndarray, shape ``(n,)``
        Lag (s) of each torque column behind the positions: the torque logged
        at ``t`` matches the motion at ``t - lag``. NaN where no minimum was
        found within the searched shifts.
    error : ndarray, shape ``(n,)``
        Standard error (s) of each lag: the delete-one-block jackknife's
        over ``blocks`` contiguous blocks of the log. NaN when fewer than 3
        blocks fit.
    blocks : int
        Number of blocks.
    max_shift : int
        Largest shift searched (samples, both signs).
    """

    lag: np.ndarray
    error: np.ndarray
    blocks: int
    max_shift: int


def estimate_torque_lag(q, qd, qdd, tau, step: float, *, max_shift: int, skip: int = 0) -> TorqueLag:
    """Estimate the lag of each torque column behind the positions, to a fraction of a sample.

    The torque is regressed on features of the motion, shifted in time,
    ``tau_j(t) ~ phi(t - lambda) theta_j``, and ``lambda_j`` minimises the
    least-squares residual over the log (profiled over ``theta_j``). The
    features span the rigid-body torque of an arm of up to three revolute
    joints in relative coordinates (in the trigonometric functions of each
    coordinate, ``g in {1, cos q_l, sin q_l}``):

    - ``g qdd_k`` (inertia ``M(q) qdd``, ``M`` of first order in each ``g``);
    - ``g qd_k qd_m`` (Coriolis and centrifugal; without ``g`` beyond
      three coordinates, to keep the regression small);
    - ``g g'`` (gravity, e.g. ``sin(q1 + q2)``);
    - ``qd_k`` and ``tanh(qd_k / v_k)`` (viscous and Coulomb friction,
      ``v_k`` a twentieth of the RMS velocity).

    Shifting by ``delta`` changes the torque by ``delta dtau/dt``; the parts
    of that change along the features (friction, gravity) are absorbed by
    ``theta``, so what fixes ``lambda`` is the rate of the inertial torque,
    ``M dqdd/dt``: this is the cross-correlation of the torque with ``qdd``
    in the band where the inertial torque dominates, without having to find
    that band. Features the torque needs but that are missing bias the
    estimate (with only ``qdd, qd, q, sin q, cos q`` it was 1-2 samples off
    on simulated two- and three-link arms; with these, at most 0.3). The
    torque's own noise adds the same amount to the residual at every shift
    (the smooth motion is what is interpolated, by cubic splines), so it
    does not bias the minimum.

    The residual is scanned over at most 17 whole shifts within
    ``+-max_shift`` and followed downhill from the best of them one sample
    at a time; a parabola through the minimum and its two neighbours gives
    the fraction of a sample (the cost is quadratic
    there, the motion's band lying far below the sampling rate). The
    standard error is the larger of two: the half-width of the profile
    interval (the shifts whose residual stays within one unit of chi-square
    of the minimum, counting the residual's samples as independent only as
    far as its autocorrelation allows, and widened to any other evaluated
    shift under that level: a flat residual or a second valley shows), and
    the delete-one-block jackknife's over up to 8 contiguous blocks of the
    log (the estimate repeated without each block). Long logs of many
    joints are subsampled evenly for the regression (at most ``2e8 / p^2``
    samples for ``p`` features, and at least 2 000), which bounds its cost.

    Parameters
    ----------
    q, qd, qdd, tau : sequence of array_like, each of shape ``(T_i, n)``
        Pieces of the log on a uniform grid of step ``step``: positions,
        their derivatives and the torques.
    step : float
        The grid's step (s).
    max_shift : int
        Largest shift to search (samples, both signs, >= 1).
    skip : int
        Samples left out at each end of each piece (e.g. where the
        derivative filters are one-sided).

    Returns
    -------
    TorqueLag
    """
    from scipy.interpolate import CubicSpline

    max_shift = max(1, int(max_shift))
    margin = int(skip) + max_shift + 2
    pieces = [
        (np.asarray(a, float), np.asarray(b, float), np.asarray(c, float), np.asarray(d, float))
        for a, b, c, d in zip(q, qd, qdd, tau)
    ]
    pieces = [p for p in pieces if p[0].shape[0] > 2 * margin + 1]
    n = np.shape(tau[0])[1] if len(tau) else 0
    nan = np.full(n, math.nan)
    if not pieces:
        return TorqueLag(lag=nan, error=nan, blocks=0, max_shift=max_shift)
    total = sum(p[0].shape[0] - 2 * margin for p in pieces)
    v = 0.05 * np.sqrt(np.mean(np.concatenate([p[1] for p in pieces]) ** 2, axis=0)) + 1e-12

    def features(shift: float) -> np.ndarray:
        """The features at the kept rows, shifted (the motion interpolated, then its features)."""
        motion = np.concatenate([s(r - shift) for s, r in zip(splines, rows)])
        return rigid_body_features(*np.split(motion, 3, axis=1), v)

    p = rigid_body_features(*(np.zeros((1, n)),) * 3, np.ones(n)).shape[1]
    stride = max(1, math.ceil(total / max(LAG_MIN_ROWS, LAG_BUDGET / p**2)))
    splines, rows, targets = [], [], []
    for q_i, qd_i, qdd_i, tau_i in pieces:
        T = q_i.shape[0]
        splines.append(CubicSpline(np.arange(T, dtype=np.float64), np.column_stack([q_i, qd_i, qdd_i]), axis=0))
        kept = np.arange(margin, T - margin, stride)
        rows.append(kept.astype(np.float64))
        targets.append(tau_i[kept])
    target = np.concatenate(targets)
    count = max(1, min(LAG_BLOCKS, target.shape[0] // LAG_BLOCK_SAMPLES))
    labels = np.minimum((np.arange(target.shape[0]) * count) // target.shape[0], count - 1)
    scale = features(0.0).std(axis=0)
    scale[scale == 0] = 1.0  # the constant column
    cache: dict = {}

    def cost(shift: int, *, blocks: bool = False) -> np.ndarray:
        """Residuals ``(n,)`` at a shift; ``blocks``: ``(count + 1, n)``, each block left out, then none."""
        key = (shift, blocks)
        if key not in cache:
            phi = features(shift) / scale
            if not blocks:
                cache[key] = residual_sum(*normal_sums(phi, target))
            else:
                sums = [normal_sums(phi[labels == b], target[labels == b]) for b in range(count)]
                whole = [sum(parts) for parts in zip(*sums)]
                rest = [[w - part for w, part in zip(whole, block)] for block in sums]
                cache[key] = np.vstack([residual_sum(*parts) for parts in (*rest, whole)])
        return cache[key]

    lag, error = nan.copy(), nan.copy()
    for j in range(n):
        best = _search(lambda s, j=j: cost(s)[j], max_shift)
        if best is None:
            continue  # the minimum lies at the edge of the search: no estimate
        values = np.array([cost(best + d, blocks=count >= 3)[..., j] for d in (-1, 0, 1)])  # (3, [count + 1])
        values = values.reshape(3, -1)
        vertex = best + _vertex(values[:, -1], 1.0)
        lag[j] = vertex * step
        phi = features(best) / scale
        spread = _profile_halfwidth(
            {shift: v[j] for (shift, blocks), v in cache.items() if not blocks},
            vertex,
            values[:, -1],
            _effective_count(phi, target[:, j]),
        )
        if count >= 3:  # delete-one-block jackknife
            others = np.array([best + _vertex(values[:, b], max_shift) for b in range(count)])
            spread = max(spread, math.sqrt((count - 1) / count * float(np.sum((others - others.mean()) ** 2))))
        error[j] = spread * step
    return TorqueLag(lag=lag, error=error, blocks=count, max_shift=max_shift)


def _effective_count(phi: np.ndarray, target: np.ndarray) -> float:
    """Independent samples in the residual of ``target (N,)`` on ``phi (N, p)``: ``N / tau``.

    ``tau = 1 + 2 sum_k rho_k`` is the residual's integrated autocorrelation time (summed up to
    the first lag where ``rho_k < 0.05``): white torque noise leaves ``N``; what the features miss
    of a smooth torque is correlated over several samples, and counts for fewer.
    """
    coefficients = np.linalg.lstsq(phi, target, rcond=None)[0]
    residual = target - phi @ coefficients
    residual = residual - residual.mean()
    N = residual.shape[0]
    spectrum = np.fft.rfft(residual, 2 * N)
    correlation = np.fft.irfft(spectrum * np.conj(spectrum))[:N]
    if correlation[0] <= 0:
        return float(N)
    correlation = correlation / correlation[0]
    small = np.flatnonzero(correlation < 0.05)
    stop = int(small[0]) if small.size else N
    return max(1.0, N / (1.0 + 2.0 * float(correlation[1:stop].sum())))


def _profile_halfwidth(costs: dict, vertex: float, values: np.ndarray, count: float) -> float:
    """Half-width (samples) of the shifts whose residual lies within one standard deviation of the minimum's.

    The residual sum of squares ``J`` of ``count`` independent samples rises by ``J_min / count``
    (one unit of chi-square) over the 68 % interval of the shift: from the parabola through
    ``values (3,)`` around the minimum, widened to every evaluated shift (``costs``: shift ->
    ``J``) that stays under that level, so that a flat cost or a second valley shows.
    """
    curvature = 0.5 * (values[0] - 2.0 * values[1] + values[2])
    offset = vertex - round(vertex)
    minimum = values[1] - curvature * offset**2 if curvature > 0 else values.min()
    level = minimum * (1.0 + 1.0 / count)
    width = math.sqrt((level - minimum) / curvature) if curvature > 0 else math.inf
    within = [abs(shift - vertex) for shift, value in costs.items() if value <= level]
    return max([width, *within])


def _search(cost, max_shift: int):
    """The whole shift ``|s| < max_shift`` of the smallest ``cost(s)``; None when it lies at the edge.

    ``cost`` is scanned on a grid of at most 17 shifts over ``[-max_shift, max_shift]``, then
    followed downhill from the grid's best one sample at a time.
    """
    stride = max(1, max_shift // 8)
    grid = sorted(set(range(0, max_shift + 1, stride)) | set(range(0, -max_shift - 1, -stride)))
    best = min(grid, key=cost)
    while abs(best) < max_shift:
        left, here, right = cost(best - 1), cost(best), cost(best + 1)
        if here <= left and here <= right:
            return best
        best += -1 if left < right else 1
    return None


def _vertex(values: np.ndarray, limit: float) -> float:
    """Offset of the minimum of the parabola through ``values (3,)`` at -1, 0, 1, within ``+-limit``."""
    curvature = values[0] - 2.0 * values[1] + values[2]
    if curvature <= 0:  # no minimum: the farther edge on the lower side
        return math.copysign(limit, values[0] - values[2]) if values[0] != values[2] else 0.0
    return float(np.clip(0.5 * (values[0] - values[2]) / curvature, -limit, limit))
