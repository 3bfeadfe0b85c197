"""One evaluation harness for learned and true systems: the field's metrics.

Every metric is a small numpy function on arrays or :class:`lnn.Trajectory`
objects, so it serves any :class:`lnn.MechanicalSystem` (a ground-truth
system from ``simulations`` or a learned :class:`lnn.LagrangianNetwork`).
:func:`evaluate` runs them all on one model and one held-out dataset (or a
true system it samples from) and returns a :class:`MetricsTable`.

Definitions (each reproduces its source):

- acceleration error: ``||qdd_pred - qdd_true|| / ||qdd_true||`` per sample,
  its median and mean;
- torque error: DeLaN's MSE, ``mean over samples of sum over joints of
  (tau_pred - tau_true)²`` (Lutter et al. 2019, ``example_DeLaN.py``), the
  MSE per joint and the normalised MSE per joint ``MSE_j / Var(tau_true_j)``;
- relative rollout error ``||x_pred - x_true|| / (||x_pred|| + ||x_true||)``
  on the state ``x = [q, qd]``, averaged over time per trajectory, with its
  geometric mean over trajectories (Finzi et al. 2020);
- valid prediction time: the first time the relative rollout error exceeds a
  threshold;
- energy error: the true system's energy evaluated on the predicted and the
  true states, ``|E(x_pred(t)) - E(x_true(t))| / scale`` with the scale the
  maximum potential energy, reported at the last time and averaged over the
  initial states (Cranmer et al. 2020, ``notebooks/DoublePendulum.ipynb``:
  ``abs((E_pred - E_true)[-1]) / 29.4``);
- mass-matrix error and health: relative Frobenius error to the true ``M``,
  asymmetry, fraction positive definite, smallest eigenvalue, largest
  condition number;
- calibration of an ensemble's intervals (:class:`lnn.Ensemble`): the
  fraction of held-out truths inside the nominal 50 % and 90 % intervals
  (of the calibrated tails: Student-t or Gaussian), and the negative
  log-likelihood per sample; for its
  rollouts, the fraction of true samples inside the members' 90 % band;
- novelty: the fraction of held-out states a model calls novel
  (``model.novelty(q, qd) > 1``: beyond the training states' 99th percentile);
- torque error in band and the out-of-band floor (imported logs): the error
  against the measured torque smoothed by the Savitzky–Golay filter that gave
  ``qd`` and ``qdd`` (derivative 0), and the torque less its smoothed self,
  which no model of the smoothed state predicts (:func:`torque_bands`).
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lnn import _validate, uncertainty
from lnn._bands import TorqueBandMetrics, band_windows, in_band, torque_bands
from lnn.errors import NoveltyWarning
from lnn.trajectory import EnsembleTrajectory, Trajectory

__all__ = [
    "AccelerationMetrics",
    "TorqueMetrics",
    "TorqueBandMetrics",
    "RolloutMetrics",
    "EnergyMetrics",
    "MassMatrixReport",
    "CalibrationMetrics",
    "MetricRow",
    "MetricsTable",
    "acceleration_error",
    "torque_error",
    "torque_bands",
    "in_band",
    "band_windows",
    "relative_error",
    "valid_prediction_time",
    "rollout_error",
    "energy_error",
    "mass_matrix_report",
    "calibration",
    "band_coverage",
    "novel_fraction",
    "masked_acceleration",
    "evaluate",
]


#: Old names of the result classes (until 0.1: they are results, not exceptions), kept one release.
_DEPRECATED = {
    "AccelerationError": "AccelerationMetrics",
    "TorqueError": "TorqueMetrics",
    "RolloutError": "RolloutMetrics",
    "EnergyError": "EnergyMetrics",
}


def __getattr__(name):
    """The deprecated names of the result classes (:data:`_DEPRECATED`), with a warning."""
    if name in _DEPRECATED:
        import warnings

        warnings.warn(
            f"lnn.metrics.{name} is deprecated: it is a result, not an exception; use lnn.metrics.{_DEPRECATED[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[_DEPRECATED[name]]
    raise AttributeError(f"module 'lnn.metrics' has no attribute {name!r}")


# Input checks shared by the package (lnn._validate).
_array = _validate.numeric_array
_same_shape = _validate.same_shape


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class AccelerationMetrics:
    """Relative acceleration error of a model.

    Attributes
    ----------
    relative : ndarray, shape ``(N,)``
        ``||qdd_pred - qdd_true|| / ||qdd_true||`` per sample (NaN where the
        true acceleration is exactly zero).
    median, mean : float
        Median and mean of ``relative`` over the samples where it is defined.
    """

    relative: np.ndarray
    median: float
    mean: float


@dataclass(frozen=True)
class TorqueMetrics:
    """Inverse-dynamics (torque) error of a model.

    Attributes
    ----------
    mse : float
        DeLaN's torque MSE: the mean over samples of the squared error summed
        over joints.
    mse_per_joint : ndarray, shape ``(n,)``
        Mean squared error of each joint.
    nmse_per_joint : ndarray, shape ``(n,)``
        ``mse_per_joint / Var(tau_true)`` per joint (NaN for a joint whose true
        torque is constant).
    nmse : float
        Mean of ``nmse_per_joint`` over the joints.
    """

    mse: float
    mse_per_joint: np.ndarray
    nmse_per_joint: np.ndarray
    nmse: float


@dataclass(frozen=True)
class RolloutMetrics:
    """Relative error of predicted trajectories against reference ones.

    Attributes
    ----------
    t : ndarray, shape ``(T,)``
        Sample times.
    relative : ndarray, shape ``(B, T)``
        ``||x_pred - x_true|| / (||x_pred|| + ||x_true||)`` with ``x = [q, qd]``.
    per_trajectory : ndarray, shape ``(B,)``
        Time average of ``relative`` for each trajectory.
    geometric_mean : float
        Geometric mean of ``per_trajectory`` over the trajectories (Finzi et al.).
    valid_time : ndarray, shape ``(B,)``
        Valid prediction time of each trajectory for ``threshold``.
    threshold : float
        The threshold used for ``valid_time``.
    """

    t: np.ndarray
    relative: np.ndarray
    per_trajectory: np.ndarray
    geometric_mean: float
    valid_time: np.ndarray
    threshold: float


@dataclass(frozen=True)
class EnergyMetrics:
    """Energy error of predicted trajectories, normalised as Cranmer et al.

    Attributes
    ----------
    t : ndarray, shape ``(T,)``
        Sample times.
    error : ndarray, shape ``(B, T)``
        ``|E(x_pred(t)) - E(x_true(t))| / scale`` with ``E`` the true system's energy.
    final : ndarray, shape ``(B,)``
        ``error`` at the last time, per trajectory.
    mean : float
        Mean of ``final`` over the trajectories (the LNN paper's figure).
    scale : float
        The normalisation: the maximum potential energy.
    """

    t: np.ndarray
    error: np.ndarray
    final: np.ndarray
    mean: float
    scale: float


@dataclass(frozen=True)
class MassMatrixReport:
    """Error and health of a (learned) mass matrix over a set of states.

    Attributes
    ----------
    relative_error : ndarray or None, shape ``(N,)``
        ``||M_pred - M_true||_F / ||M_true||_F`` per state, or None without a reference.
    median_relative_error : float
        Median of ``relative_error`` (NaN without a reference).
    max_asymmetry : float
        Largest ``||M - M^T||_F / ||M||_F``.
    fraction_positive_definite : float
        Fraction of states whose symmetric part has only positive eigenvalues.
    min_eigenvalue : float
        Smallest eigenvalue over all states.
    max_condition : float
        Largest condition number ``lambda_max / lambda_min`` over the states
        (``inf`` if some ``M`` is not positive definite).
    """

    relative_error: np.ndarray | None
    median_relative_error: float
    max_asymmetry: float
    fraction_positive_definite: float
    min_eigenvalue: float
    max_condition: float


@dataclass(frozen=True)
class CalibrationMetrics:
    """How well predictive intervals cover held-out truths (:func:`calibration`).

    Attributes
    ----------
    output : str
        What was predicted (``"qdd"``, ``"tau"``).
    coverage : dict of float to ndarray, shape ``(n,)``
        Nominal level (0.5, 0.9) -> fraction of the truths inside ``mean ±
        k std``, per output coordinate (``k``:
        :func:`lnn.uncertainty.standard_quantile`; ``z(level)`` for Gaussian
        tails).
    nll : ndarray, shape ``(n,)``
        Negative log-likelihood per sample (nats), per coordinate
        (:func:`lnn.uncertainty.predictive_nll`).
    samples : int
        Samples with finite values.
    recordings : tuple
        The recordings (trajectory ids) of the samples, in order (empty
        without ``recording=``).
    recording_coverage : dict of float to ndarray, shape ``(R, n)``
        Nominal level -> each recording's coverage, rows in the order of
        ``recordings``: one recording may be harder than the rest, and its
        coverage then falls below the pooled one (empty without
        ``recording=``).
    """

    output: str
    coverage: dict
    nll: np.ndarray
    samples: int
    recordings: tuple = ()
    recording_coverage: dict = field(default_factory=dict)


@dataclass(frozen=True)
class MetricRow:
    """One line of a :class:`MetricsTable`.

    Attributes
    ----------
    name : str
        Metric name (a stable identifier, e.g. ``"acceleration_error_median"``).
    value : float
        Its value.
    description : str
        What it measures, in a few words.
    """

    name: str
    value: float
    description: str = ""


@dataclass(frozen=True)
class MetricsTable:
    """The result of :func:`evaluate`: named metric rows, printable and writable.

    Attributes
    ----------
    rows : tuple of MetricRow
        The metrics, in a stable order.
    details : dict
        The full per-sample results (``AccelerationMetrics``, ``TorqueMetrics``,
        ``RolloutMetrics``, ``EnergyMetrics``, ``MassMatrixReport``) by name, and
        the learned and true rollouts (``"predicted"``, ``"reference"``:
        :class:`lnn.Trajectory`) when rollouts were made.
    """

    rows: tuple[MetricRow, ...]
    details: dict = field(default_factory=dict, compare=False, repr=False)

    def as_dict(self) -> dict[str, float]:
        """Return ``{name: value}`` for every row, in order."""
        return {row.name: row.value for row in self.rows}

    def __getitem__(self, name: str) -> float:
        """Value of the row called ``name``."""
        for row in self.rows:
            if row.name == name:
                return row.value
        raise KeyError(f"no metric {name!r}; known metrics: {[r.name for r in self.rows]}")

    def format(self) -> str:
        """The table as aligned text, one metric per line."""
        width = max((len(r.name) for r in self.rows), default=10)
        lines = [f"{'metric':<{width}}  {'value':>12}  description"]
        for row in self.rows:
            lines.append(f"{row.name:<{width}}  {row.value:>12.5g}  {row.description}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def to_csv(self, path, *, overwrite: bool = False) -> Path:
        """Write the rows to a CSV file with columns ``metric, value, description``.

        Parameters
        ----------
        path : str or Path
            Output file.
        overwrite : bool, keyword-only
            Replace an existing file (refused otherwise).

        Raises
        ------
        FileExistsError
            If ``path`` exists and ``overwrite`` is false.
        """
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(
                f"refusing to overwrite existing file {str(path)!r}; pass overwrite=True "
                "(or --force on the command line) to replace it"
            )
        if not path.parent.exists():
            raise FileNotFoundError(f"directory {str(path.parent)!r} does not exist (writing {str(path)!r})")
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["metric", "value", "description"])
            for row in self.rows:
                writer.writerow([row.name, repr(float(row.value)), row.description])
        return path


# --------------------------------------------------------------------------- metrics


def acceleration_error(qdd_pred, qdd_true) -> AccelerationMetrics:
    """Relative acceleration error per sample, with median and mean.

    Parameters
    ----------
    qdd_pred, qdd_true : array_like, shape ``(N, n)``
        Predicted and true accelerations (any leading shape is flattened).

    Returns
    -------
    AccelerationMetrics
    """
    pred = _array(qdd_pred, "qdd_pred")
    true = _array(qdd_true, "qdd_true")
    _same_shape(pred, true, "qdd_pred", "qdd_true")
    n = true.shape[-1]
    pred, true = pred.reshape(-1, n), true.reshape(-1, n)
    norm = np.linalg.norm(true, axis=-1)
    diff = np.linalg.norm(pred - true, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(norm > 0, diff / np.where(norm > 0, norm, 1.0), np.nan)
    defined = relative[np.isfinite(relative)]
    median = float(np.median(defined)) if defined.size else math.nan
    mean = float(np.mean(defined)) if defined.size else math.nan
    return AccelerationMetrics(relative=relative, median=median, mean=mean)


def torque_error(tau_pred, tau_true) -> TorqueMetrics:
    """Torque MSE (DeLaN's definition) and normalised MSE per joint.

    Parameters
    ----------
    tau_pred, tau_true : array_like, shape ``(N, n)``
        Predicted and true generalized forces.

    Returns
    -------
    TorqueMetrics
    """
    pred = _array(tau_pred, "tau_pred")
    true = _array(tau_true, "tau_true")
    _same_shape(pred, true, "tau_pred", "tau_true")
    n = true.shape[-1]
    pred, true = pred.reshape(-1, n), true.reshape(-1, n)
    squared = (pred - true) ** 2
    mse_per_joint = squared.mean(axis=0)
    variance = true.var(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        nmse_per_joint = np.where(variance > 0, mse_per_joint / np.where(variance > 0, variance, 1.0), np.nan)
    finite = nmse_per_joint[np.isfinite(nmse_per_joint)]
    return TorqueMetrics(
        mse=float(squared.sum(axis=1).mean()),
        mse_per_joint=mse_per_joint,
        nmse_per_joint=nmse_per_joint,
        nmse=float(finite.mean()) if finite.size else math.nan,
    )


def relative_error(x_pred, x_true) -> np.ndarray:
    """Relative error ``||x_pred - x_true|| / (||x_pred|| + ||x_true||)`` over the last axis.

    Parameters
    ----------
    x_pred, x_true : array_like, shape ``(..., d)``
        Predicted and reference states.

    Returns
    -------
    ndarray, shape ``(...)``
        In ``[0, 1]``; 0 where both states are zero.
    """
    pred = _array(x_pred, "x_pred")
    true = _array(x_true, "x_true")
    _same_shape(pred, true, "x_pred", "x_true")
    return _relative(pred - true, pred, true)


def _relative(difference: np.ndarray, pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """``||difference|| / (||pred|| + ||true||)`` over the last axis, 0 where both are zero."""
    numerator = np.linalg.norm(difference, axis=-1)
    denominator = np.linalg.norm(pred, axis=-1) + np.linalg.norm(true, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), 0.0)


def _wrap(angle: np.ndarray) -> np.ndarray:
    """Angles to ``(-pi, pi]``."""
    return np.arctan2(np.sin(angle), np.cos(angle))


def valid_prediction_time(relative, t, *, threshold: float) -> np.ndarray:
    """First time at which a relative error exceeds ``threshold``.

    Parameters
    ----------
    relative : array_like, shape ``(B, T)``
        Relative error over time for ``B`` trajectories.
    t : array_like, shape ``(T,)``
        Sample times.
    threshold : float, keyword-only
        Error level that ends the valid prediction.

    Returns
    -------
    ndarray, shape ``(B,)``
        ``t[k] - t[0]`` for the first ``k`` with ``relative[:, k] > threshold``,
        or ``t[-1] - t[0]`` if the error never exceeds it.
    """
    rel = _array(relative, "relative")
    times = _array(t, "t")
    if rel.ndim != 2 or times.ndim != 1 or rel.shape[1] != times.shape[0]:
        raise ValueError(f"relative must have shape (B, T) and t shape (T,), got {rel.shape} and {times.shape}")
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold!r}")
    exceeded = rel > threshold
    first = np.argmax(exceeded, axis=1)
    valid = times[first] - times[0]
    valid[~exceeded.any(axis=1)] = times[-1] - times[0]
    return valid


def _state(trajectory: Trajectory, angular) -> np.ndarray:
    q = np.asarray(trajectory.q, dtype=np.float64)
    if angular is not None and any(angular):
        mask = np.asarray(angular, dtype=bool)
        q = q.copy()
        q[..., mask] = _wrap(q[..., mask])
    return np.concatenate([q, np.asarray(trajectory.qd, dtype=np.float64)], axis=-1)


def _check_pair(predicted: Trajectory, reference: Trajectory) -> None:
    for name, value in (("predicted", predicted), ("reference", reference)):
        if not isinstance(value, Trajectory):
            raise TypeError(f"{name} must be an lnn.Trajectory, got {type(value).__name__}")
    if predicted.q.shape != reference.q.shape:
        raise ValueError(
            f"predicted and reference trajectories must have the same shape (B, T, n), got "
            f"{predicted.q.shape} and {reference.q.shape}"
        )
    if not np.allclose(predicted.t, reference.t):
        raise ValueError("predicted and reference trajectories must share the same time grid t")


def rollout_error(
    predicted: Trajectory, reference: Trajectory, *, threshold: float = 0.1, angular=None
) -> RolloutMetrics:
    """Relative rollout error over time, its geometric mean and the valid prediction time.

    Parameters
    ----------
    predicted, reference : Trajectory
        Trajectories from the same initial states on the same time grid,
        ``q``/``qd`` of shape ``(B, T, n)``.
    threshold : float, keyword-only
        Relative-error level that ends the valid prediction time.
    angular : sequence of bool, length ``n``, optional
        Angular coordinates: their norms use angles wrapped to ``(-pi, pi]``
        and their differences are wrapped too, so that neither a full turn
        nor one trajectory crossing ``±pi`` while the other does not counts
        as an error.

    Returns
    -------
    RolloutMetrics
    """
    _check_pair(predicted, reference)
    pred, true = _state(predicted, angular), _state(reference, angular)
    difference = pred - true
    if angular is not None and any(angular):
        n = predicted.q.shape[-1]
        mask = np.concatenate([np.asarray(angular, dtype=bool), np.zeros(n, dtype=bool)])
        difference[..., mask] = _wrap(difference[..., mask])
    relative = _relative(difference, pred, true)
    per_trajectory = relative.mean(axis=1)
    positive = np.maximum(per_trajectory, np.finfo(np.float64).tiny)
    geometric = float(np.exp(np.mean(np.log(positive)))) if per_trajectory.size else math.nan
    return RolloutMetrics(
        t=np.asarray(reference.t),
        relative=relative,
        per_trajectory=per_trajectory,
        geometric_mean=geometric,
        valid_time=valid_prediction_time(relative, reference.t, threshold=threshold),
        threshold=float(threshold),
    )


def energy_error(system, predicted: Trajectory, reference: Trajectory, *, scale: float | None = None) -> EnergyMetrics:
    """Energy error normalised by the maximum potential energy (Cranmer et al.).

    The true system's energy is evaluated on the predicted and on the
    reference states; the error ``|E(x_pred(t)) - E(x_true(t))| / scale`` is
    reported over time and at the last time (the paper's figure is the mean of
    the last-time error over the initial states).

    Parameters
    ----------
    system : MechanicalSystem
        The true system; needs ``energy(q, qd)`` (and ``potential_energy(q)``
        when ``scale`` is None).
    predicted, reference : Trajectory
        Learned and true rollouts from the same initial states, ``(B, T, n)``.
    scale : float, optional, keyword-only
        The normalisation. The paper uses the maximum potential energy of the
        double pendulum, ``g (m1 l1 + m2 (l1 + l2)) = 29.4``. Default: the
        largest ``|V(q)|`` over the reference states.

    Returns
    -------
    EnergyMetrics
    """
    _check_pair(predicted, reference)
    e_pred = _array(system.energy(predicted.q, predicted.qd), "system.energy(predicted)")
    e_true = _array(system.energy(reference.q, reference.qd), "system.energy(reference)")
    if scale is None:
        if not hasattr(system, "potential_energy"):
            raise TypeError(f"scale=None needs system.potential_energy; {type(system).__name__} has none: pass scale=")
        scale = float(np.max(np.abs(_array(system.potential_energy(reference.q), "V"))))
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    error = np.abs(e_pred - e_true) / scale
    final = error[:, -1]
    return EnergyMetrics(
        t=np.asarray(reference.t), error=error, final=final, mean=float(np.mean(final)), scale=float(scale)
    )


def mass_matrix_report(m_pred, m_true=None) -> MassMatrixReport:
    """Error and health of mass matrices.

    Parameters
    ----------
    m_pred : array_like, shape ``(N, n, n)``
        Mass matrices to check (e.g. a learned model's).
    m_true : array_like, shape ``(N, n, n)``, optional
        Reference mass matrices at the same states.

    Returns
    -------
    MassMatrixReport
    """
    m = _array(m_pred, "m_pred")
    if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
        raise ValueError(f"m_pred must have shape (N, n, n), got {m.shape}")
    n = m.shape[-1]
    m = m.reshape(-1, n, n)
    norm = np.linalg.norm(m, axis=(1, 2))
    asym = np.linalg.norm(m - np.swapaxes(m, 1, 2), axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        asymmetry = np.where(norm > 0, asym / np.where(norm > 0, norm, 1.0), 0.0)
    eig = np.linalg.eigvalsh(0.5 * (m + np.swapaxes(m, 1, 2)))
    positive = eig[:, 0] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        condition = np.where(positive, eig[:, -1] / np.where(positive, eig[:, 0], 1.0), np.inf)
    relative = None
    median_relative = math.nan
    if m_true is not None:
        ref = _array(m_true, "m_true")
        if ref.size != m.size:
            raise ValueError(f"m_true must have the shape of m_pred {m.shape}, got {ref.shape}")
        ref = ref.reshape(-1, n, n)
        relative = np.linalg.norm(m - ref, axis=(1, 2)) / np.linalg.norm(ref, axis=(1, 2))
        median_relative = float(np.median(relative))
    return MassMatrixReport(
        relative_error=relative,
        median_relative_error=median_relative,
        max_asymmetry=float(asymmetry.max()) if asymmetry.size else math.nan,
        fraction_positive_definite=float(positive.mean()) if positive.size else math.nan,
        min_eigenvalue=float(eig[:, 0].min()) if eig.size else math.nan,
        max_condition=float(condition.max()) if condition.size else math.nan,
    )


def calibration(truth, mean, std, *, output: str = "qdd", recording=None, dof=None) -> CalibrationMetrics:
    """Coverage of the nominal 50 % and 90 % intervals and the negative log-likelihood.

    Parameters
    ----------
    truth, mean, std : array_like, shape ``(N, n)``
        Held-out values, predicted means and predictive standard deviations
        (e.g. :class:`lnn.models.EnsemblePrediction` ``qdd`` and ``qdd_std``).
    output : str, keyword-only
        Name recorded in the result.
    recording : array_like, shape ``(N,)``, optional, keyword-only
        The recording (trajectory id) of every sample: also report each
        recording's coverage (``CalibrationMetrics.recording_coverage``).
    dof : array_like, shape ``(n,)``, optional, keyword-only
        Degrees of freedom of the predictive distribution's Student-t tails
        per coordinate (``EnsemblePrediction.qdd_dof``); None or inf:
        Gaussian.

    Returns
    -------
    CalibrationMetrics

    Raises
    ------
    ValueError
        If the shapes differ, or ``recording`` does not label every sample.
    """
    truth, mean, std = (_array(x, name) for x, name in ((truth, "truth"), (mean, "mean"), (std, "std")))
    if truth.ndim != 2 or truth.shape != mean.shape or truth.shape != std.shape:
        raise ValueError(
            f"truth, mean and std must have one shape (N, n), got {truth.shape}, {mean.shape}, {std.shape}"
        )
    ok = np.all(np.isfinite(truth) & np.isfinite(mean) & np.isfinite(std), axis=1)
    dof = np.inf if dof is None else np.asarray(dof, np.float64)
    recordings, by_recording = (), {}
    if recording is not None:
        by_recording = {
            level: uncertainty.coverage_by_recording(truth, mean, std, recording, level, dof)
            for level in uncertainty.LEVELS
        }
        recordings = tuple(label.item() for label in np.unique(recording))
    return CalibrationMetrics(
        output=output,
        coverage={level: uncertainty.coverage(truth, mean, std, level, dof) for level in uncertainty.LEVELS},
        nll=uncertainty.predictive_nll(truth, mean, std, dof),
        samples=int(ok.sum()),
        recordings=recordings,
        recording_coverage=by_recording,
    )


def band_coverage(predicted: EnsembleTrajectory, reference: Trajectory, *, level: float = 0.9, name: str = "q"):
    """Fraction of the reference's samples inside an ensemble rollout's ``level`` band, per coordinate.

    Parameters
    ----------
    predicted : lnn.EnsembleTrajectory
        Rollouts of an ensemble (:func:`lnn.rollout`), ``(B, T, n)``.
    reference : lnn.Trajectory
        True rollouts from the same initial states.
    level : float, keyword-only
        Nominal level of the band (:meth:`lnn.EnsembleTrajectory.band`).
    name : {"q", "qd"}, keyword-only

    Returns
    -------
    ndarray, shape ``(n,)``
        Over every trajectory and sample time (a sample where the band is NaN,
        after a member failed, counts as outside).
    """
    if not isinstance(predicted, EnsembleTrajectory):
        raise TypeError(f"predicted must be an lnn.EnsembleTrajectory, got {type(predicted).__name__}")
    _check_pair(predicted, reference)
    inside = predicted.band(name, level=level).contains(getattr(reference, name))
    return inside.reshape(-1, inside.shape[-1]).mean(axis=0)


def novel_fraction(model, q, qd) -> float:
    """Fraction of states that ``model`` calls novel (``model.novelty(q, qd) > 1``), NaN without novelty.

    Parameters
    ----------
    model : MechanicalSystem
        With ``novelty(q, qd)`` (:meth:`lnn.LagrangianNetwork.novelty`).
    q, qd : array_like, shape ``(N, n)``
    """
    fn = getattr(model, "novelty", None)
    if not callable(fn):
        return math.nan
    values = np.asarray(fn(np.asarray(q, np.float64), np.asarray(qd, np.float64)), np.float64)
    finite = np.isfinite(values)
    return float(np.mean(values[finite] > uncertainty.NOVELTY_THRESHOLD)) if finite.any() else math.nan


# --------------------------------------------------------------------------- the harness

_CHUNK = 4096


def _batched(fn, *arrays, chunk: int = _CHUNK) -> np.ndarray:
    """Apply ``fn`` to row chunks of ``arrays`` and stack the numpy results."""
    n = arrays[0].shape[0]
    parts = [_array(fn(*(a[i : i + chunk] for a in arrays)), "model output") for i in range(0, n, chunk)]
    return np.concatenate(parts, axis=0)


def _model_acceleration(model, q, qd, tau) -> tuple[np.ndarray, int]:
    """Accelerations chunk by chunk; the samples the model refuses (``M`` not positive
    definite) become NaN, one by one (:func:`lnn.integrate.evaluate_masked`): the rest of
    their chunk is evaluated."""
    from lnn.integrate import evaluate_masked

    fn = getattr(model, "numpy_acceleration", None) or model.acceleration
    out, failed = np.full(q.shape, np.nan), 0
    for i in range(0, q.shape[0], _CHUNK):
        sl = slice(i, i + _CHUNK)
        masked = evaluate_masked(lambda *x: _array(fn(*x), "model acceleration"), q[sl], qd[sl], tau[sl])
        out[sl] = masked.values
        failed += masked.n_failed
    return out, failed


def masked_acceleration(system, q, qd, tau=None):
    """A system's accelerations on a batch, the samples it refuses set to NaN (not the batch).

    Parameters
    ----------
    system : MechanicalSystem
        ``numpy_acceleration`` is used when present, else ``acceleration``.
    q, qd : array_like, shape ``(N, n)``
    tau : array_like, shape ``(N, n)``, optional

    Returns
    -------
    lnn.integrate.MaskedEvaluation
        ``values (N, n)`` (NaN in the failed rows), ``failed (N,)``, and
        ``reasons`` (row -> message: a mass matrix that is not positive
        definite, a non-finite result).
    """
    from lnn.integrate import evaluate_masked

    fn = getattr(system, "numpy_acceleration", None) or system.acceleration
    q2, qd2 = np.atleast_2d(np.asarray(q, np.float64)), np.atleast_2d(np.asarray(qd, np.float64))
    tau2 = None if tau is None else np.atleast_2d(np.asarray(tau, np.float64))
    return evaluate_masked(lambda *x: _array(fn(*x), "system acceleration"), q2, qd2, tau2)


def _is_dataset(data) -> bool:
    return all(hasattr(data, k) for k in ("q", "qd", "qdd", "tau", "trajectory"))


def _dataset_rollouts(data, n_rollouts: int):
    """Initial states, common time grid and torques of the first ``n_rollouts`` trajectories sampled at the
    first one's rate (within 1 %: an import puts each file on its own grid), cut to the shortest."""
    data = data.at_first_rate(limit=n_rollouts) if hasattr(data, "at_first_rate") else data  # an lnn.Dataset
    rows = [np.flatnonzero(data.trajectory == i) for i in np.unique(data.trajectory)][:n_rollouts]
    length = min(r.size for r in rows)
    if length < 2:
        return None
    rows = np.stack([r[:length] for r in rows])  # (B, T)
    t = data.t[rows[0]] - data.t[rows[0, 0]]
    return (data.q[rows[:, 0]], data.qd[rows[:, 0]], t, data.tau[rows], _trajectory_of(data, rows, t))


def _trajectory_of(data, rows, t) -> Trajectory:
    energy = getattr(data, "energy", None)
    energy = np.full(rows.shape, np.nan) if energy is None else np.asarray(energy)[rows]
    return Trajectory(t=t, q=data.q[rows], qd=data.qd[rows], qdd=data.qdd[rows], tau=data.tau[rows], energy=energy)


def evaluate(
    model,
    data,
    *,
    true_system=None,
    initial_states=None,
    n_rollouts: int = 40,
    duration: float = 10.0,
    dt: float = 0.1,
    seed: int = 0,
    threshold: float = 0.1,
    energy_scale: float | None = None,
    n_mass_samples: int = 2000,
    method: str = "auto",
    rtol: float | None = None,
    atol: float | None = None,
    progress: Callable[..., None] | None = None,
) -> MetricsTable:
    """Evaluate a model against held-out data or a true system with every metric.

    Parameters
    ----------
    model : MechanicalSystem
        The learned system (``acceleration``, ``inverse_dynamics``,
        ``mass_matrix``; ``numpy_acceleration`` is used when present).
    data : lnn.Dataset or MechanicalSystem
        Held-out samples ``q, qd, qdd, tau (N, n)`` with trajectory ids, or a
        true system to roll out from sampled (or given) initial states.
    true_system : MechanicalSystem, optional, keyword-only
        The true system of a dataset: enables the mass-matrix error and the
        energy error, and the reference rollouts are then recomputed with it
        from the same initial states and torques as the model's. Implied when
        ``data`` is a system.
    initial_states : (q0, qd0), arrays of shape ``(B, n)``, optional, keyword-only
        Initial states of the rollouts when ``data`` is a system (default:
        ``data.sample_state(n_rollouts, rng=seed)``).
    n_rollouts : int, keyword-only
        Number of trajectories rolled out (the first ones of a dataset).
    duration, dt : float, keyword-only
        Rollout length and sampling (s) when ``data`` is a system.
    seed : int, keyword-only
        Seed of the sampled initial states.
    threshold : float, keyword-only
        Relative-error threshold of the valid prediction time.
    energy_scale : float, optional, keyword-only
        Normalisation of the energy error (:func:`energy_error`).
    n_mass_samples : int, keyword-only
        States (the first ones) at which the mass matrices are compared.
    method, rtol, atol : keyword-only
        Passed to :func:`lnn.rollout` for both systems (``"auto"``: the
        fastest path for each, a compiled pair for the model and DOP853 for a
        numpy reference). Default tolerances: the model's
        (:func:`lnn.integrate.default_tolerances`: ``rtol=1e-6, atol=1e-8``
        for a float32 model, whose vector field is smooth only to ~1e-7,
        ``1e-8, 1e-10`` otherwise), for both systems.
    progress : callable, optional, keyword-only
        ``progress(done, total, message)`` over the evaluation stages.

    Returns
    -------
    MetricsTable
        Rows (when computable): ``acceleration_error_median/mean``,
        ``acceleration_failures`` (per sample), ``rollout_failures`` (the
        fraction of the model's rollouts that stopped early; the rollout and
        energy errors are over those that finished), ``torque_mse``, ``torque_nmse`` and
        ``torque_nmse_<j>`` (only for joints whose true torque varies), ``rollout_error_geometric_mean``,
        ``valid_prediction_time_mean``, ``energy_error_mean``,
        ``torque_mse_in_band``, ``torque_mse_floor`` and ``torque_mse_in_band_<j>``
        (an imported dataset, whose window rule is known: :func:`torque_bands`),
        ``mass_matrix_error_median``, ``mass_matrix_positive_definite``,
        ``mass_matrix_min_eigenvalue``, ``mass_matrix_max_condition``;
        ``novel_fraction`` (held-out states with ``novelty > 1``, for models
        with a novelty) and ``rollout_novel_fraction`` (rollouts that left
        the training states); for an :class:`lnn.Ensemble`,
        ``qdd_coverage_50``, ``qdd_coverage_90``, ``qdd_nll`` (and the same
        for ``tau`` when the data's torques vary; means over the
        coordinates), with several recordings (trajectories, or rollouts of
        a true system) the lowest and highest recording's coverage
        (``qdd_coverage_90_recording_min``, ``..._max``, per level and
        output; ``details["qdd_calibration"].recording_coverage`` holds
        each), and ``rollout_band_coverage_90`` (true samples inside the
        members' 90 % band of ``q``); ``details`` holds the full results.
    """
    from lnn.integrate import default_tolerances

    default_rtol, default_atol = default_tolerances(model)
    solver = _Solver(
        method=method,
        rtol=default_rtol if rtol is None else rtol,
        atol=default_atol if atol is None else atol,
    )
    n_rollouts = int(n_rollouts)
    if n_rollouts < 0:
        raise ValueError(f"n_rollouts must be >= 0, got {n_rollouts!r}")
    report = progress or (lambda *args, **kwargs: None)
    samples = _samples(data, true_system, solver, n_rollouts, initial_states, seed, duration, dt)
    details: dict = {}
    rows: list[MetricRow] = []
    for stage, (label, measure) in enumerate(
        (
            ("accelerations", _acceleration_rows),
            ("torques", _torque_rows),
            ("mass matrices", lambda m, s, d: _mass_rows(m, s, d, n_mass_samples)),
            ("calibration", _calibration_rows),
            ("novelty", _novelty_rows),
            ("rollouts", lambda m, s, d: _rollout_rows(m, s, d, solver, threshold, energy_scale, data)),
        )
    ):
        report(stage, 6, label)
        rows += measure(model, samples, details)
    report(6, 6, "done")
    return MetricsTable(rows=tuple(rows), details=details)


@dataclass(frozen=True)
class _Solver:
    """How :func:`evaluate` rolls both systems out."""

    method: str
    rtol: float
    atol: float

    def rollout(self, system, q0, qd0, t, **options) -> Trajectory:
        from lnn.integrate import rollout

        return rollout(system, q0, qd0, t, method=self.method, rtol=self.rtol, atol=self.atol, **options)


@dataclass(frozen=True, eq=False)
class _Samples:
    """The held-out samples ``(N, n)`` of :func:`evaluate`, its rollouts and its reference system."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    runs: tuple | None  # (q0, qd0, t, tau (B, T, n) or None, reference Trajectory)
    reference_system: object
    true_system: object
    from_dataset: bool
    recording: np.ndarray | None = None  # (N,): each sample's trajectory id (a dataset's) or rollout index
    dataset: object = None  # the held-out dataset itself (None for a true system's rollouts)


def _samples(data, true_system, solver: _Solver, n_rollouts, initial_states, seed, duration, dt) -> _Samples:
    """The samples of a dataset, or the rollouts of a true system from sampled (or given) initial states."""
    if _is_dataset(data):
        q, qd, qdd, tau = (np.asarray(getattr(data, k), dtype=np.float64) for k in ("q", "qd", "qdd", "tau"))
        runs = _dataset_rollouts(data, n_rollouts) if n_rollouts else None
        recording = np.asarray(data.trajectory)
        return _Samples(q, qd, qdd, tau, runs, true_system, true_system, True, recording, data)
    if not (hasattr(data, "acceleration") and hasattr(data, "n_dof")):
        raise TypeError(f"data must be an lnn.Dataset or a MechanicalSystem, got {type(data).__name__}")
    true_system = data if true_system is None else true_system
    if initial_states is None:
        state = data.sample_state(n_rollouts, rng=seed)
        q0, qd0 = np.asarray(state.q, np.float64), np.asarray(state.qd, np.float64)
    else:
        q0, qd0 = (np.asarray(x, dtype=np.float64) for x in initial_states)
    t = np.arange(int(round(duration / dt)) + 1) * dt
    reference = solver.rollout(data, q0, qd0, t)
    n = reference.q.shape[-1]
    flat = [getattr(reference, k).reshape(-1, n) for k in ("q", "qd", "qdd", "tau")]
    recording = np.repeat(np.arange(reference.q.shape[0]), reference.q.shape[1])
    return _Samples(*flat, (q0, qd0, t, None, reference), true_system, true_system, False, recording)


def _acceleration_rows(model, s: _Samples, details: dict) -> list[MetricRow]:
    qdd_pred, failed = _model_acceleration(model, s.q, s.qd, s.tau)
    acc = acceleration_error(qdd_pred, s.qdd)
    details["acceleration"] = acc
    return [
        MetricRow("acceleration_error_median", acc.median, "median ||qdd_pred - qdd|| / ||qdd||"),
        MetricRow("acceleration_error_mean", acc.mean, "mean ||qdd_pred - qdd|| / ||qdd||"),
        MetricRow(
            "acceleration_failures",
            float(failed) / s.q.shape[0],
            "fraction of samples whose learned M could not be solved",
        ),
    ]


def _torque_rows(model, s: _Samples, details: dict) -> list[MetricRow]:
    if not hasattr(model, "inverse_dynamics"):
        return []
    predicted = _batched(model.inverse_dynamics, s.q, s.qd, s.qdd)
    torque = torque_error(predicted, s.tau)
    details["torque"] = torque
    rows = [MetricRow("torque_mse", torque.mse, "DeLaN torque MSE (sum over joints)")]
    if np.isfinite(torque.nmse):  # unforced data: no torque variance to normalise by
        rows.append(MetricRow("torque_nmse", torque.nmse, "mean over joints of MSE_j / Var(tau_j)"))
        rows += [
            MetricRow(f"torque_nmse_{j}", float(v), f"MSE / Var(tau) of joint {j}")
            for j, v in enumerate(torque.nmse_per_joint)
            if np.isfinite(v)
        ]
    return rows + _band_rows_of(predicted, s, details)


def _band_rows_of(predicted: np.ndarray, s: _Samples, details: dict) -> list[MetricRow]:
    """The in-band torque error and the out-of-band floor, on an imported dataset (its window rule known)."""
    data = s.dataset
    rule = getattr(data, "window_rule", None)
    if data is None or rule is None or rule.window is None:
        return []
    bands = torque_bands(predicted, data)
    details["torque_bands"] = bands
    n = bands.mse_per_joint.shape[0]
    return [
        MetricRow("torque_mse_in_band", n * bands.in_band, "torque MSE against tau smoothed as qd, qdd were"),
        MetricRow("torque_mse_floor", n * bands.floor, "MSE of tau less its smoothed self: no model's reach"),
    ] + [
        MetricRow(f"torque_mse_in_band_{j}", float(v), f"in-band torque MSE of joint {j}")
        for j, v in enumerate(bands.in_band_per_joint)
    ]


def _mass_rows(model, s: _Samples, details: dict, n_mass_samples: int) -> list[MetricRow]:
    if not hasattr(model, "mass_matrix"):
        return []
    k = min(int(n_mass_samples), s.q.shape[0])
    m_pred = _batched(model.mass_matrix, s.q[:k], s.qd[:k])
    truth = s.true_system
    m_true = _array(truth.mass_matrix(s.q[:k], s.qd[:k]), "true mass matrix") if truth is not None else None
    mass = mass_matrix_report(m_pred, m_true)
    details["mass_matrix"] = mass
    return [
        MetricRow("mass_matrix_error_median", mass.median_relative_error, "median ||M_pred - M||_F / ||M||_F"),
        MetricRow(
            "mass_matrix_positive_definite",
            mass.fraction_positive_definite,
            "fraction of states with positive definite learned M",
        ),
        MetricRow("mass_matrix_min_eigenvalue", mass.min_eigenvalue, "smallest eigenvalue of learned M"),
        MetricRow("mass_matrix_max_condition", mass.max_condition, "largest condition number of learned M"),
    ]


def _ensemble_prediction(model, s: _Samples):
    """The ensemble's prediction on the samples, and which rows it covers (those whose members' ``M`` solve)."""
    keep = np.all(np.isfinite(s.q) & np.isfinite(s.qd) & np.isfinite(s.qdd) & np.isfinite(s.tau), axis=1)
    try:
        return model.predict(s.q[keep], s.qd[keep], tau=s.tau[keep], qdd=s.qdd[keep]), keep
    except ValueError:  # a member's mass matrix is not positive definite somewhere: leave those rows out
        for member in model.members:
            keep[keep] &= ~masked_acceleration(member, s.q[keep], s.qd[keep], s.tau[keep]).failed
        return model.predict(s.q[keep], s.qd[keep], tau=s.tau[keep], qdd=s.qdd[keep]), keep


def _calibration_rows(model, s: _Samples, details: dict) -> list[MetricRow]:
    """Coverage of the nominal 50/90 % intervals and the NLL of ``qdd`` (and ``tau``), for an ensemble."""
    if not (callable(getattr(model, "predict", None)) and isinstance(getattr(model, "members", None), tuple)):
        return []
    prediction, keep = _ensemble_prediction(model, s)
    outputs = [("qdd", s.qdd[keep], prediction.qdd, prediction.qdd_std, prediction.qdd_dof)]
    if np.any(np.var(s.tau[keep], axis=0) > 0):  # unforced data: the torques identify nothing
        outputs.append(("tau", s.tau[keep], prediction.tau, prediction.tau_std, prediction.tau_dof))
    recording = None if s.recording is None else s.recording[keep]
    rows = []
    for name, truth, mean, std, dof in outputs:
        measured = calibration(truth, mean, std, output=name, recording=recording, dof=dof)
        details[f"{name}_calibration"] = measured
        for level in uncertainty.LEVELS:
            percent = int(round(100 * level))
            rows.append(
                MetricRow(
                    f"{name}_coverage_{percent}",
                    float(np.nanmean(measured.coverage[level])),
                    f"fraction of true {name} inside the nominal {percent} % interval (mean over coordinates)",
                )
            )
            if len(measured.recordings) > 1:  # one recording can be harder than the rest: show the range
                per_recording = np.nanmean(measured.recording_coverage[level], axis=1)
                rows += [
                    MetricRow(
                        f"{name}_coverage_{percent}_recording_{end}",
                        float(reduce(per_recording)),
                        f"the {end} of the recordings' {percent} % coverage (each a mean over coordinates)",
                    )
                    for end, reduce in (("min", np.nanmin), ("max", np.nanmax))
                ]
        nll = float(np.nanmean(measured.nll))
        rows.append(MetricRow(f"{name}_nll", nll, f"negative log-likelihood per {name} coordinate (nats)"))
    return rows


def _novelty_rows(model, s: _Samples, details: dict) -> list[MetricRow]:
    """The fraction of held-out states that the model calls novel."""
    share = novel_fraction(model, s.q, s.qd)
    if not np.isfinite(share):
        return []
    details["novel_fraction"] = share
    return [
        MetricRow("novel_fraction", share, "fraction of held-out states with novelty > 1 (beyond the training data)")
    ]


def _band_rows(predicted, reference, details: dict) -> list[MetricRow]:
    """Rows of an ensemble's rollouts (band coverage) and of any rollout's novelty."""
    rows = []
    if isinstance(predicted, EnsembleTrajectory):
        covered = band_coverage(predicted, reference, level=0.9)
        details["rollout_band_coverage"] = covered
        rows.append(
            MetricRow(
                "rollout_band_coverage_90",
                float(np.mean(covered)),
                "fraction of true q samples inside the members' 90 % band",
            )
        )
    if predicted.novel_at is not None and predicted.novelty is not None and np.isfinite(predicted.novelty).any():
        rows.append(
            MetricRow(
                "rollout_novel_fraction",
                float(np.mean(np.isfinite(predicted.novel_at))),
                "fraction of the model's rollouts that left the training states (novelty > 1)",
            )
        )
    return rows


def _rollout_rows(model, s: _Samples, details: dict, solver: _Solver, threshold, energy_scale, data) -> list:
    """Rollout failures, the rollout error and valid time, the energy error (of the rollouts that finished)."""
    if s.runs is None:
        return []
    q0, qd0, t, tau_runs, reference = s.runs
    tau = tau_runs if tau_runs is not None and np.any(tau_runs != 0) else None
    if s.reference_system is not None and s.from_dataset:
        reference = solver.rollout(s.reference_system, q0, qd0, t, tau=tau)
    with warnings.catch_warnings():  # the novelty of the rollouts is a row of the table
        warnings.simplefilter("ignore", NoveltyWarning)
        predicted = solver.rollout(model, q0, qd0, t, tau=tau, on_failure="mask")
    finished = ~predicted.failed
    rows = [
        MetricRow(
            "rollout_failures",
            float(np.mean(~finished)),
            "fraction of the model's rollouts that failed (M not positive definite, non-finite state) before the end",
        )
    ]
    if not finished.any():
        return rows
    if not finished.all():  # the errors of the rollouts that finished; failures counted above
        keep = np.flatnonzero(finished)
        predicted, reference = predicted[keep], reference[keep]
    angular = getattr(data, "angular", None) or getattr(model, "angular", None)
    roll = rollout_error(predicted, reference, threshold=threshold, angular=angular)
    rows += _band_rows(predicted, reference, details)
    details["rollout"] = roll
    details["predicted"], details["reference"] = predicted, reference
    rows += [
        MetricRow(
            "rollout_error_geometric_mean",
            roll.geometric_mean,
            "geometric mean over trajectories of the time-averaged relative error",
        ),
        MetricRow(
            "valid_prediction_time_mean",
            float(np.mean(roll.valid_time)),
            f"mean time (s) until the relative error exceeds {threshold:g}",
        ),
    ]
    if s.reference_system is not None and hasattr(s.reference_system, "energy"):
        energy = energy_error(s.reference_system, predicted, reference, scale=energy_scale)
        details["energy"] = energy
        rows.append(
            MetricRow(
                "energy_error_mean", energy.mean, f"mean |E(pred) - E(true)| / {energy.scale:.4g} at t = {t[-1]:g} s"
            )
        )
    return rows
