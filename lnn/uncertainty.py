"""Uncertainty of learned models in numpy: intervals, their calibration, novelty along rollouts.

The pieces that :class:`lnn.Ensemble`, :func:`lnn.rollout` and
:func:`lnn.evaluate` share, without TensorFlow:

- :func:`standard_quantile`, :func:`coverage`, :func:`predictive_nll`: the
  nominal ``level`` interval ``mean ± k std`` of a predictive distribution of
  standard deviation ``std`` whose tails are a Student-t's of ``dof``
  degrees of freedom (``k = 1.645`` for 90 % and ``0.674`` for 50 % when
  Gaussian, ``dof = inf``: :func:`z_value`; ``1.59`` and ``0.59`` for
  ``dof = 6``), the fraction of truths inside it, and the negative
  log-likelihood of the truths (:func:`gaussian_nll` the Gaussian one);
- :func:`fit_calibration` and :class:`Calibration`: the method that turns a
  member disagreement into an interval. An ensemble's spread ``s`` (the
  standard deviation of its members' predictions) is a *relative* measure of
  doubt: members trained on the same data agree more than their common
  error says, and they cannot see noise in the targets. So the predictive
  standard deviation is ``sqrt((a s)² + b²)`` per output, with a scale ``a``
  and a floor ``b`` (the error that remains where the members agree: noise
  of the measured torques, of estimated accelerations), and the shape of
  the tails: the error over that standard deviation is a Student-t of
  ``ν`` degrees of freedom scaled to unit variance, ``ν = inf`` being the
  Gaussian. ``a``, ``b`` and ``ν`` are fitted on held-out data by maximum
  likelihood (``ν`` above :data:`GAUSSIAN_DOF` is taken as Gaussian). Why
  the tails: errors pooled over recordings of different difficulty, or
  over calm and violent stretches of one, are a mixture of scales, heavier
  tailed than a Gaussian of their variance, whose 50 % interval then covers
  more than half (``docs/how-to/uncertainty.md`` has the covers measured
  on a real robot's logs).
  The calibration result reports the coverages on the data it was fitted
  on. Given the recording of every sample, it also reports each
  recording's coverage when ``a``, ``b`` and ``ν`` are fitted on the
  *other* recordings (leave one recording out): how far from the nominal
  level a new recording may fall, since one recording can be harder than
  the rest;
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
    "GAUSSIAN_DOF",
    "LEVELS",
    "MIN_DOF",
    "NOVELTY_THRESHOLD",
    "RECORDING_FOLDS",
    "Calibration",
    "coverage",
    "coverage_by_recording",
    "fit_calibration",
    "gaussian_nll",
    "interval_std",
    "predictive_nll",
    "record_novelty",
    "standard_quantile",
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
#: A fitted Student-t with more degrees of freedom than this is taken as Gaussian (``dof = inf``): at 100 its
#: 90 % interval is 0.3 % wider than the Gaussian's, below what a calibration set can tell.
GAUSSIAN_DOF = 100.0
#: Fewest degrees of freedom fitted: 2 has no variance, and below 3 one outlier decides the fit.
MIN_DOF = 3.0


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


def standard_quantile(level: float, dof=math.inf) -> np.ndarray:
    """Half-width, in standard deviations, of the central interval of probability ``level`` of a Student-t of
    ``dof`` degrees of freedom scaled to unit variance (the Gaussian's :func:`z_value` where ``dof`` is inf).

    Parameters
    ----------
    level : float
        In ``(0, 1)``.
    dof : float or array_like, shape ``(n,)``
        Degrees of freedom, each above 2 or inf.

    Returns
    -------
    numpy.ndarray
        The shape of ``dof``: ``t_dof(0.5 + level / 2) sqrt((dof - 2) / dof)``.

    Raises
    ------
    ValueError
        If ``level`` is not in ``(0, 1)`` or a ``dof`` is not above 2.
    """
    from scipy.stats import t as student

    z = z_value(level)
    dof = _checked_dof(dof)
    finite = np.isfinite(dof)
    nu = np.where(finite, dof, 3.0)
    return np.where(finite, student.ppf(0.5 + 0.5 * float(level), nu) * np.sqrt((nu - 2.0) / nu), z)


def _checked_dof(dof) -> np.ndarray:
    """``dof`` as a float64 array, each above 2 or inf (a Student-t with a variance, or a Gaussian)."""
    dof = np.asarray(dof, np.float64)
    if np.any(~(dof > 2.0)):
        raise ValueError(f"dof must be above 2 (or inf for Gaussian tails), got {dof!r}")
    return dof


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


def coverage(truth, mean, std, level: float, dof=math.inf) -> np.ndarray:
    """Fraction of the samples whose truth lies in ``mean ± k std``, per output (``k``: :func:`standard_quantile`
    of ``level`` and ``dof``; the Gaussian ``z(level)`` by default).

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
        Rows with a non-finite entry are left out (per output).
    level : float
    dof : float or array_like, shape ``(n,)``
        The tails' degrees of freedom per output (inf: Gaussian).

    Returns
    -------
    numpy.ndarray, shape ``(n,)``
        NaN for an output without finite rows.
    """
    truth, mean, std = (np.asarray(x, np.float64) for x in (truth, mean, std))
    ok = np.isfinite(truth) & np.isfinite(mean) & np.isfinite(std)
    inside = (np.abs(truth - mean) <= standard_quantile(level, dof) * std) & ok
    with np.errstate(invalid="ignore", divide="ignore"):
        return inside.sum(axis=0) / np.where(ok.sum(axis=0) > 0, ok.sum(axis=0), np.nan)


def coverage_by_recording(truth, mean, std, recording, level: float, dof=math.inf) -> np.ndarray:
    """:func:`coverage` of each recording's samples.

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
    recording : array_like, shape ``(N,)``
        The recording of every sample (any labels).
    level : float
    dof : float or array_like, shape ``(n,)``
        As for :func:`coverage`.

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
    return np.stack([coverage(truth[mine], mean[mine], std[mine], level, dof) for mine in rows])


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
    return _mean_nll(truth, mean, std, lambda error2, var: _nll_terms(error2, var, math.inf))


def predictive_nll(truth, mean, std, dof=math.inf) -> np.ndarray:
    """Mean negative log-likelihood of the truths under the predictive distribution of mean ``mean``, standard
    deviation ``std`` and the tails of a Student-t of ``dof`` degrees of freedom, per output (nats; the Gaussian
    :func:`gaussian_nll` where ``dof`` is inf).

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
        Rows with a non-finite entry or ``std <= 0`` are left out (per output).
    dof : float or array_like, shape ``(n,)``
        Each above 2, or inf.

    Returns
    -------
    numpy.ndarray, shape ``(n,)``
    """
    dof = np.broadcast_to(_checked_dof(dof), np.shape(truth)[-1:])

    def terms(error2, var):
        return np.stack([_nll_terms(error2[:, j], var[:, j], float(nu)) for j, nu in enumerate(dof)], axis=-1)

    return _mean_nll(truth, mean, std, terms)


def _mean_nll(truth, mean, std, terms) -> np.ndarray:
    """The mean over samples of ``terms(error², std²)``, per output, leaving out the rows of an output with a
    non-finite entry or ``std <= 0``."""
    truth, mean, std = (np.asarray(x, np.float64) for x in (truth, mean, std))
    ok = np.isfinite(truth) & np.isfinite(mean) & np.isfinite(std) & (std > 0)
    safe = np.where(ok, std, 1.0)
    values = terms(np.where(ok, truth - mean, 0.0) ** 2, safe**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, values, 0.0).sum(axis=0) / np.where(ok.sum(axis=0) > 0, ok.sum(axis=0), np.nan)


def _nll_terms(error2: np.ndarray, var: np.ndarray, dof: float) -> np.ndarray:
    """Each sample's negative log-likelihood given its squared error and predictive variance: a Student-t of
    ``dof`` degrees of freedom scaled to variance ``var`` (scale² ``var (dof - 2) / dof``), Gaussian if inf."""
    if not math.isfinite(dof):
        return 0.5 * (math.log(2.0 * math.pi) + np.log(var) + error2 / var)
    from scipy.special import gammaln

    constant = gammaln(0.5 * dof) - gammaln(0.5 * (dof + 1.0)) + 0.5 * math.log(math.pi * (dof - 2.0))
    return constant + 0.5 * np.log(var) + 0.5 * (dof + 1.0) * np.log1p(error2 / (var * (dof - 2.0)))


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
    dof : numpy.ndarray, shape ``(n,)``
        The fitted degrees of freedom ``ν`` of the tails (a Student-t's;
        inf: Gaussian).
    coverage : dict of float to numpy.ndarray ``(n,)``
        Nominal level -> fraction of the calibration samples inside the
        calibrated interval.
    raw_coverage : dict of float to numpy.ndarray ``(n,)``
        The same for the raw spread (``a = 1``, ``b = 0``, Gaussian).
    nll, raw_nll : numpy.ndarray, shape ``(n,)``
        Negative log-likelihood per sample, calibrated (:func:`predictive_nll`)
        and raw (Gaussian of the spread).
    samples : int
        Calibration samples.
    recordings : tuple of str
        The calibration samples' recordings (empty without ``recording=``).
    recording_coverage : dict of float to numpy.ndarray ``(R, n)``
        Nominal level -> each recording's coverage (rows in the order of
        ``recordings``) by the interval whose scale, floor and tails were
        fitted on the other recordings (empty for fewer than two recordings).
    """

    output: str
    scale: np.ndarray
    floor: np.ndarray
    dof: np.ndarray
    coverage: dict
    raw_coverage: dict
    nll: np.ndarray
    raw_nll: np.ndarray
    samples: int
    recordings: tuple = ()
    recording_coverage: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        """This calibration as JSON types (arrays as nested lists, levels as strings): :meth:`from_json`'s input."""

        def levels(by_level: dict) -> dict:
            return {repr(float(level)): np.asarray(values, np.float64).tolist() for level, values in by_level.items()}

        return dict(
            output=self.output,
            scale=np.asarray(self.scale, np.float64).tolist(),
            floor=np.asarray(self.floor, np.float64).tolist(),
            dof=np.asarray(self.dof, np.float64).tolist(),
            coverage=levels(self.coverage),
            raw_coverage=levels(self.raw_coverage),
            nll=np.asarray(self.nll, np.float64).tolist(),
            raw_nll=np.asarray(self.raw_nll, np.float64).tolist(),
            samples=int(self.samples),
            recordings=list(self.recordings),
            recording_coverage=levels(self.recording_coverage),
        )

    @classmethod
    def from_json(cls, data: dict) -> Calibration:
        """The calibration :meth:`to_json` wrote.

        Raises
        ------
        ValueError
            If ``data`` lacks a field or a field is not of its type (the message names it).
        """

        def levels(by_level: dict) -> dict:
            return {float(level): np.asarray(values, np.float64) for level, values in by_level.items()}

        try:
            return cls(
                output=str(data["output"]),
                scale=np.asarray(data["scale"], np.float64),
                floor=np.asarray(data["floor"], np.float64),
                dof=np.asarray(data["dof"], np.float64),
                coverage=levels(data["coverage"]),
                raw_coverage=levels(data["raw_coverage"]),
                nll=np.asarray(data["nll"], np.float64),
                raw_nll=np.asarray(data["raw_nll"], np.float64),
                samples=int(data["samples"]),
                recordings=tuple(str(r) for r in data.get("recordings", ())),
                recording_coverage=levels(data.get("recording_coverage", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(
                f"not a calibration written by Calibration.to_json: {type(error).__name__}: {error}"
            ) from None


def _fit_column(error: np.ndarray, spread: np.ndarray, heavy: bool = True) -> tuple[float, float, float]:
    """``(a, b, ν)`` minimising the NLL of ``error`` under variance ``(a spread)² + b²`` and Student-t tails of
    ``ν`` degrees of freedom (:func:`predictive_nll`): the Gaussian fit (``ν`` inf) first, then the Student-t
    from it (unless not ``heavy``); ``ν`` above :data:`GAUSSIAN_DOF`, or no better likelihood, keeps the Gaussian."""
    from scipy.optimize import minimize

    ok = np.isfinite(error) & np.isfinite(spread)
    e2, s2 = error[ok] ** 2, spread[ok] ** 2
    if e2.size == 0:
        return 1.0, 0.0, math.inf
    var = float(np.mean(e2))
    if var == 0.0:
        return 1.0, 0.0, math.inf
    tiny = 1e-12 * var

    def nll(x, dof=math.inf):
        return float(np.mean(_nll_terms(e2, math.exp(x[0]) * s2 + math.exp(x[1]) + tiny, dof)))

    positive = s2 > 0
    starts = [(math.log(var), math.log(var))]
    if positive.any():
        ratio = float(np.mean(e2[positive] / s2[positive]))
        starts += [(math.log(ratio), math.log(1e-6 * var)), (math.log(ratio), math.log(0.1 * var))]
    gaussian = min((minimize(nll, np.array(x0), method="Nelder-Mead") for x0 in starts), key=lambda r: r.fun)
    x, dof = gaussian.x, math.inf
    if heavy and e2.size > 1:

        def student_nll(y):
            return nll(y[:2], MIN_DOF + math.exp(y[2]))

        tails_starts = (np.array([*gaussian.x, math.log(nu - MIN_DOF)]) for nu in (5.0, 30.0))
        student = min((minimize(student_nll, x0, method="Nelder-Mead") for x0 in tails_starts), key=lambda r: r.fun)
        nu = MIN_DOF + math.exp(student.x[2])
        if nu <= GAUSSIAN_DOF and student.fun < gaussian.fun:
            x, dof = student.x[:2], nu
    a, b = math.exp(0.5 * x[0]), math.exp(0.5 * x[1])
    if not positive.any():
        a = 1.0
    return a, b, dof


def fit_calibration(output: str, truth, mean, spread, *, recording=None, tails: str = "student") -> Calibration:
    """Fit the scale, floor and tails of every output on held-out samples (see the module docstring).

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
    tails : {"student", "gaussian"}, keyword-only
        ``"student"`` (the default): fit the degrees of freedom of Student-t
        tails (Gaussian when the data say so); ``"gaussian"``: Gaussian tails
        (``dof`` inf).

    Returns
    -------
    Calibration
    """
    truth, mean, spread = (np.asarray(x, np.float64) for x in (truth, mean, spread))
    if truth.ndim != 2 or truth.shape != mean.shape or truth.shape != spread.shape:
        raise ValueError(
            f"truth, mean and spread must have one shape (N, n), got {truth.shape}, {mean.shape} and {spread.shape}"
        )
    if tails not in ("student", "gaussian"):
        raise ValueError(f"tails must be 'student' or 'gaussian', got {tails!r}")
    heavy = tails == "student"
    error = truth - mean
    scale, floor, dof = _fit_columns(error, spread, heavy)
    std = interval_std(spread, scale, floor)
    recordings, left_out = _left_out_coverage(error, spread, recording, heavy)
    return Calibration(
        output=output,
        scale=scale,
        floor=floor,
        dof=dof,
        coverage={level: coverage(truth, mean, std, level, dof) for level in LEVELS},
        raw_coverage={level: coverage(truth, mean, spread, level) for level in LEVELS},
        nll=predictive_nll(truth, mean, std, dof),
        raw_nll=gaussian_nll(truth, mean, spread),
        samples=int(np.sum(np.all(np.isfinite(error) & np.isfinite(spread), axis=1))),
        recordings=recordings,
        recording_coverage=left_out,
    )


def _fit_columns(error: np.ndarray, spread: np.ndarray, heavy: bool = True) -> tuple[np.ndarray, ...]:
    """The scale, floor and degrees of freedom ``(n,)`` of every column of ``error`` and ``spread`` ``(N, n)``."""
    fits = np.array([_fit_column(error[:, j], spread[:, j], heavy) for j in range(error.shape[1])]).reshape(-1, 3)
    return fits[:, 0], fits[:, 1], fits[:, 2]


def _left_out_coverage(error: np.ndarray, spread: np.ndarray, recording, heavy: bool = True) -> tuple[tuple, dict]:
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
    half = {level: np.empty_like(error) for level in LEVELS}  # each sample's interval fitted without its group
    fold = (np.arange(labels.size) * min(RECORDING_FOLDS, labels.size)) // labels.size  # of each recording
    for f in np.unique(fold):
        left_out = np.isin(which, np.flatnonzero(fold == f))
        scale, floor, dof = _fit_columns(error[~left_out], spread[~left_out], heavy)
        std = interval_std(spread[left_out], scale, floor)
        for level in LEVELS:
            half[level][left_out] = standard_quantile(level, dof) * std
    zero = np.zeros_like(error)  # half / z: the Gaussian standard deviation whose interval is that half-width
    return names, {
        level: coverage_by_recording(error, zero, half[level] / z_value(level), recording, level) for level in LEVELS
    }


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
