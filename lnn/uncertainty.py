"""Uncertainty of learned models in numpy: Gaussian intervals, their calibration, novelty along rollouts.

The pieces that :class:`lnn.Ensemble`, :func:`lnn.rollout` and
:func:`lnn.evaluate` share, without TensorFlow:

- :func:`z_value`, :func:`coverage`, :func:`gaussian_nll`: the nominal
  ``level`` Gaussian interval ``mean ± z std`` (``z = 1.645`` for 90 %,
  ``0.674`` for 50 %), the fraction of truths inside it, and the negative
  log-likelihood of the truths under ``N(mean, std²)``;
- :func:`fit_calibration` and :class:`Calibration`: the method that turns a
  member disagreement into an interval. An ensemble's spread ``s`` (the
  standard deviation of its members' predictions) is a *relative* measure of
  doubt: members trained on the same data agree more than their common
  error says, and they cannot see noise in the targets. So the predictive
  standard deviation is ``sqrt((a s)² + b²)`` per output, with a scale ``a``
  and a floor ``b`` (the error that remains where the members agree: noise
  of the measured torques, of estimated accelerations) fitted on held-out
  data by maximum likelihood (the Gaussian NLL, minimised over ``log a`` and
  ``log b``); the nominal 50 % and 90 % intervals then cover what they claim
  when the errors are Gaussian given that variance, which the calibration
  result reports (its coverages on the data it was fitted on). Given the
  recording of every sample, it also reports each recording's coverage when
  ``a`` and ``b`` are fitted on the *other* recordings (leave one recording
  out): how far from the nominal level a new recording may fall, since one
  recording can be harder than the rest;
- :func:`record_novelty`: a rollout's ``novelty (B, T)`` and ``novel_at
  (B,)`` from the system's ``novelty(q, qd)``, and one
  :class:`lnn.errors.NoveltyWarning` per call when a trajectory left the
  training states.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from statistics import NormalDist

import numpy as np

from lnn.errors import NoveltyWarning

__all__ = [
    "LEVELS",
    "NOVELTY_THRESHOLD",
    "RECORDING_FOLDS",
    "Calibration",
    "coverage",
    "coverage_by_recording",
    "fit_calibration",
    "gaussian_nll",
    "interval_std",
    "record_novelty",
    "z_value",
]

#: The nominal interval levels that calibration and evaluation report.
LEVELS = (0.5, 0.9)
#: At most this many fits for the recordings' coverages: with more recordings, they are left out in this many
#: groups (each recording covered by the fit on the other groups), so that 100 recordings of 1 000 samples
#: cost 10 fits, not 100 (16 s per output).
RECORDING_FOLDS = 10
#: A state is novel (outside the training states) when ``novelty`` exceeds this (the 99th percentile).
NOVELTY_THRESHOLD = 1.0


def z_value(level: float) -> float:
    """Half-width of the central Gaussian interval of probability ``level`` in standard deviations.

    Parameters
    ----------
    level : float
        In ``(0, 1)``: ``0.9`` gives 1.645, ``0.5`` gives 0.674.
    """
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + 0.5 * level)


def interval_std(spread, scale, floor) -> np.ndarray:
    """The calibrated predictive standard deviation ``sqrt((scale spread)² + floor²)``.

    Parameters
    ----------
    spread : array_like, shape ``(..., n)``
        The members' standard deviation.
    scale, floor : array_like, shape ``(n,)``
    """
    spread = np.asarray(spread, np.float64)
    return np.sqrt((np.asarray(scale, np.float64) * spread) ** 2 + np.asarray(floor, np.float64) ** 2)


def coverage(truth, mean, std, level: float) -> np.ndarray:
    """Fraction of the samples whose truth lies in ``mean ± z(level) std``, per output.

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
        Rows with a non-finite entry are left out (per output).
    level : float

    Returns
    -------
    numpy.ndarray, shape ``(n,)``
        NaN for an output without finite rows.
    """
    truth, mean, std = (np.asarray(x, np.float64) for x in (truth, mean, std))
    ok = np.isfinite(truth) & np.isfinite(mean) & np.isfinite(std)
    inside = (np.abs(truth - mean) <= z_value(level) * std) & ok
    with np.errstate(invalid="ignore", divide="ignore"):
        return inside.sum(axis=0) / np.where(ok.sum(axis=0) > 0, ok.sum(axis=0), np.nan)


def coverage_by_recording(truth, mean, std, recording, level: float) -> np.ndarray:
    """:func:`coverage` of each recording's samples.

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
    recording : array_like, shape ``(N,)``
        The recording of every sample (any labels).
    level : float

    Returns
    -------
    numpy.ndarray, shape ``(R, n)``
        One row per recording, in the order of ``numpy.unique(recording)``.

    Raises
    ------
    ValueError
        If ``recording`` does not label every sample.
    """
    truth, mean, std = (np.asarray(x, np.float64) for x in (truth, mean, std))
    recording = np.asarray(recording)
    if recording.shape != truth.shape[:1]:
        raise ValueError(f"recording must label every sample, shape ({truth.shape[0]},), got shape {recording.shape}")
    labels, which = np.unique(recording, return_inverse=True)
    rows = [which == r for r in range(labels.size)]
    return np.stack([coverage(truth[mine], mean[mine], std[mine], level) for mine in rows])


def gaussian_nll(truth, mean, std) -> np.ndarray:
    """Mean negative log-likelihood of the truths under ``N(mean, std²)``, per output (nats).

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
        Rows with a non-finite entry or ``std <= 0`` are left out (per output).

    Returns
    -------
    numpy.ndarray, shape ``(n,)``
    """
    truth, mean, std = (np.asarray(x, np.float64) for x in (truth, mean, std))
    ok = np.isfinite(truth) & np.isfinite(mean) & np.isfinite(std) & (std > 0)
    safe = np.where(ok, std, 1.0)
    terms = 0.5 * np.log(2.0 * np.pi) + np.log(safe) + 0.5 * ((truth - mean) / safe) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, terms, 0.0).sum(axis=0) / np.where(ok.sum(axis=0) > 0, ok.sum(axis=0), np.nan)


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The calibration of one output of an ensemble (:meth:`lnn.Ensemble.calibrate`).

    Attributes
    ----------
    output : str
        ``"qdd"`` or ``"tau"``.
    scale, floor : numpy.ndarray, shape ``(n,)``
        The fitted ``a`` and ``b`` of the predictive standard deviation
        ``sqrt((a s)² + b²)`` (``s`` the members' spread).
    coverage : dict of float to numpy.ndarray ``(n,)``
        Nominal level -> fraction of the calibration samples inside the
        calibrated interval.
    raw_coverage : dict of float to numpy.ndarray ``(n,)``
        The same for the raw spread (``a = 1``, ``b = 0``).
    nll, raw_nll : numpy.ndarray, shape ``(n,)``
        Gaussian negative log-likelihood per sample, calibrated and raw.
    samples : int
        Calibration samples.
    recordings : tuple of str
        The calibration samples' recordings (empty without ``recording=``).
    recording_coverage : dict of float to numpy.ndarray ``(R, n)``
        Nominal level -> each recording's coverage (rows in the order of
        ``recordings``) by the interval whose scale and floor were fitted on
        the other recordings (empty for fewer than two recordings).
    """

    output: str
    scale: np.ndarray
    floor: np.ndarray
    coverage: dict
    raw_coverage: dict
    nll: np.ndarray
    raw_nll: np.ndarray
    samples: int
    recordings: tuple = ()
    recording_coverage: dict = dataclasses.field(default_factory=dict)


def _fit_column(error: np.ndarray, spread: np.ndarray) -> tuple[float, float]:
    """``(a, b)`` minimising the Gaussian NLL of ``error`` under variance ``(a spread)² + b²``."""
    from scipy.optimize import minimize

    ok = np.isfinite(error) & np.isfinite(spread)
    e2, s2 = error[ok] ** 2, spread[ok] ** 2
    if e2.size == 0:
        return 1.0, 0.0
    var = float(np.mean(e2))
    if var == 0.0:
        return 1.0, 0.0
    tiny = 1e-12 * var

    def nll(x):
        a2, b2 = math.exp(x[0]), math.exp(x[1])
        v = a2 * s2 + b2 + tiny
        return float(np.mean(np.log(v) + e2 / v))

    positive = s2 > 0
    starts = [(math.log(var), math.log(var))]
    if positive.any():
        ratio = float(np.mean(e2[positive] / s2[positive]))
        starts += [(math.log(ratio), math.log(1e-6 * var)), (math.log(ratio), math.log(0.1 * var))]
    best = min((minimize(nll, np.array(x0), method="Nelder-Mead") for x0 in starts), key=lambda r: r.fun)
    a, b = math.exp(0.5 * best.x[0]), math.exp(0.5 * best.x[1])
    if not positive.any():
        a = 1.0
    return a, b


def fit_calibration(output: str, truth, mean, spread, *, recording=None) -> Calibration:
    """Fit the scale and floor of every output on held-out samples (see the module docstring).

    Parameters
    ----------
    output : str
        Name recorded in the result (``"qdd"``, ``"tau"``).
    truth, mean, spread : array_like, shape ``(N, n)``
        The held-out targets, the ensemble mean and the members' standard
        deviation. Non-finite rows are left out.
    recording : array_like, shape ``(N,)``, optional, keyword-only
        The recording of every sample (any labels): also report each
        recording's coverage when calibrated on the others
        (``Calibration.recording_coverage``; beyond :data:`RECORDING_FOLDS`
        recordings, on the other groups of recordings).

    Returns
    -------
    Calibration
    """
    truth, mean, spread = (np.asarray(x, np.float64) for x in (truth, mean, spread))
    if truth.ndim != 2 or truth.shape != mean.shape or truth.shape != spread.shape:
        raise ValueError(
            f"truth, mean and spread must have one shape (N, n), got {truth.shape}, {mean.shape} and {spread.shape}"
        )
    error = truth - mean
    scale, floor = _fit_columns(error, spread)
    std = interval_std(spread, scale, floor)
    recordings, left_out = _left_out_coverage(error, spread, recording)
    return Calibration(
        output=output,
        scale=scale,
        floor=floor,
        coverage={level: coverage(truth, mean, std, level) for level in LEVELS},
        raw_coverage={level: coverage(truth, mean, spread, level) for level in LEVELS},
        nll=gaussian_nll(truth, mean, std),
        raw_nll=gaussian_nll(truth, mean, spread),
        samples=int(np.sum(np.all(np.isfinite(error) & np.isfinite(spread), axis=1))),
        recordings=recordings,
        recording_coverage=left_out,
    )


def _fit_columns(error: np.ndarray, spread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The scale and floor ``(n,)`` of every column of ``error`` and ``spread`` ``(N, n)``."""
    pairs = [_fit_column(error[:, j], spread[:, j]) for j in range(error.shape[1])]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def _left_out_coverage(error: np.ndarray, spread: np.ndarray, recording) -> tuple[tuple, dict]:
    """Every recording's coverage by the interval fitted on the other recordings: ``(labels, {level: (R, n)})``."""
    if recording is None:
        return (), {}
    recording = np.asarray(recording)
    if recording.shape != error.shape[:1]:
        raise ValueError(f"recording must have shape (N,) = ({error.shape[0]},), got {recording.shape}")
    labels, which = np.unique(recording, return_inverse=True)
    names = tuple(str(label) for label in labels)
    if labels.size < 2:
        return names, {}
    std = np.empty_like(error)  # each sample's interval fitted without its recording's group
    fold = (np.arange(labels.size) * min(RECORDING_FOLDS, labels.size)) // labels.size  # of each recording
    for f in np.unique(fold):
        left_out = np.isin(which, np.flatnonzero(fold == f))
        scale, floor = _fit_columns(error[~left_out], spread[~left_out])
        std[left_out] = interval_std(spread[left_out], scale, floor)
    zero = np.zeros_like(error)
    return names, {level: coverage_by_recording(error, zero, std, recording, level) for level in LEVELS}


# ----------------------------------------------------------------------------- novelty along rollouts


def _novelty_of_states(system, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """``system.novelty`` at states of any leading shape ``(..., n)`` (NaN at non-finite states)."""
    n = q.shape[-1]
    flat_q, flat_qd = q.reshape(-1, n), qd.reshape(-1, n)
    out = np.full(flat_q.shape[0], np.nan)
    finite = np.all(np.isfinite(flat_q) & np.isfinite(flat_qd), axis=1)
    if finite.any():
        out[finite] = np.asarray(system.novelty(flat_q[finite], flat_qd[finite]), np.float64).reshape(-1)
    return out.reshape(q.shape[:-1])


def record_novelty(system, trajectory, *, stacklevel: int = 3):
    """``trajectory`` with its ``novelty (B, T)`` and ``novel_at (B,)`` when ``system`` has a ``novelty``.

    For an :class:`lnn.EnsembleTrajectory` the novelty of a sample is the
    median over the members of the novelty of each member's state. Warns
    :class:`lnn.errors.NoveltyWarning` once when a trajectory's novelty
    exceeds :data:`NOVELTY_THRESHOLD`.

    Parameters
    ----------
    system : MechanicalSystem
    trajectory : lnn.Trajectory
    stacklevel : int, keyword-only
        Of the warning.

    Returns
    -------
    lnn.Trajectory
        The same trajectory (same type), or a copy with the two fields.
    """
    if not callable(getattr(system, "novelty", None)):
        return trajectory
    member_q = getattr(trajectory, "member_q", None)
    if member_q is not None:
        values = _novelty_of_states(system, member_q, trajectory.member_qd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN samples (failed members)
            values = np.nanmedian(values, axis=0)
    else:
        values = _novelty_of_states(system, np.asarray(trajectory.q), np.asarray(trajectory.qd))
    t = np.asarray(trajectory.t, np.float64)
    novel = np.nan_to_num(values, nan=-np.inf) > NOVELTY_THRESHOLD
    first = np.argmax(novel, axis=1)
    novel_at = np.where(novel.any(axis=1), t[first], np.nan)
    if np.isfinite(novel_at).any():
        left = int(np.isfinite(novel_at).sum())
        warnings.warn(
            f"{left} of {novel_at.size} trajectory(ies) left the states the model was trained on "
            f"(novelty > {NOVELTY_THRESHOLD:g}, first at t = {np.nanmin(novel_at):.4g} s): its predictions "
            "there are extrapolations; see Trajectory.novel_at and Trajectory.novelty",
            NoveltyWarning,
            stacklevel=stacklevel,
        )
    return dataclasses.replace(trajectory, novelty=values, novel_at=novel_at)
