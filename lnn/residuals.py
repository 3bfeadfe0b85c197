"""What a model leaves: the structure of its torque residual, before anyone models it.

:func:`analyze` computes ``r = tau - inverse_dynamics(q, qd, qdd)`` on a
dataset and asks, per joint ``j``, how much of the residual's variance a
simple term would explain on data it was not fitted to:

- a function of ``qd_j`` (friction that the model lacks: Stribeck, asymmetric
  Coulomb), of ``q_j`` (a gravity or cogging error), of both (additive), and
  of ``qdd_j`` (an inertia it lacks);
- a constant per recording (a torque-sensor bias that differs between logs);
- a lag between the torque and the position streams (the torque stream
  shifted by a few samples), and a delayed velocity ``qd_j(t + lag)``;

and where the residual's power lies in frequency (Welch), beside the measured
torque's and the model's: residual power in a band where the measured torque
has none is torque the model predicts and the robot did not need.

Every share is a held-out score: the samples of each recording are cut into
contiguous time blocks dealt to ``folds`` folds, each term is fitted on all
folds but one and scored on that one, so that noise is not counted as
explained (a share of pure noise is near zero, slightly negative). Nothing is ever correlated across the
boundary between two recordings. With ``by="recordings"`` each recording is a
fold of its own: a share then counts only what carries over to a recording
the term was not fitted on, which is what a model of the term would gain on
the robot's next log (the two can differ widely on a real robot:
``docs/benchmarks/real-robots.md``).

The module is numpy and scipy only: any system with ``inverse_dynamics``
(a :class:`lnn.LagrangianNetwork`, whose tensors are converted, an
:class:`lnn.IdentifiedModel`, an :class:`lnn.baseline.IdentifiedRobot`, a
ground-truth system) can be analysed. :func:`lnn.plot.residuals` draws the
result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["STEP_TOLERANCE", "ConditionalMean", "ResidualAnalysis", "analyze", "common_rate"]


@dataclass(frozen=True)
class ConditionalMean:
    """A binned conditional mean ``E[r | x]`` (equal-count bins of ``x``), fitted on all samples.

    Attributes
    ----------
    edges : ndarray, shape ``(B + 1,)``
        Bin edges (quantiles of ``x``; repeated quantiles merged).
    centers : ndarray, shape ``(B,)``
        The median of ``x`` within each bin.
    mean : ndarray, shape ``(B,)``
        The mean residual within each bin.
    count : ndarray of int, shape ``(B,)``
        Samples per bin.
    """

    edges: np.ndarray
    centers: np.ndarray
    mean: np.ndarray
    count: np.ndarray

    def __call__(self, x) -> np.ndarray:
        """The conditional mean at ``x`` (any shape): the mean of the bin holding each value, end bins beyond."""
        x = np.asarray(x, dtype=np.float64)
        index = np.clip(np.searchsorted(self.edges, x, side="right") - 1, 0, self.mean.size - 1)
        return self.mean[index]


@dataclass(frozen=True)
class ResidualAnalysis:
    """The torque residual of a model on a dataset and the shares of its variance that simple terms explain.

    Samples are ordered by recording, then time. Shares are fractions of the
    residual's variance (its mean removed; ``mse = mean**2 + variance``)
    explained on held-out time blocks; they can be slightly negative when a
    term explains nothing.

    Attributes
    ----------
    t : ndarray, shape ``(N,)``
        Sample times (s).
    trajectory : ndarray of int, shape ``(N,)``
        Recording id of each sample.
    q, qd, qdd : ndarray, shape ``(N, n)``
        Coordinates (angles wrapped to ``[-pi, pi)``), velocities and accelerations.
    residual : ndarray, shape ``(N, n)``
        ``tau - inverse_dynamics(q, qd, qdd)``.
    fold : ndarray of int, shape ``(N,)``
        The held-out fold of each sample (its recording's index with
        ``by == "recordings"``).
    dt : float
        Sampling interval (s) of the recordings the lags and spectra read
        (``spectral``).
    folds : int
        Number of folds (the number of recordings with ``by == "recordings"``).
    block : float
        Length of the longest time block dealt to the folds (s; with
        ``by == "recordings"``, the longest recording).
    angular : tuple of bool, length ``n``
        Which coordinates are angles (torques in N m, else forces in N).
    mse, mean, variance : ndarray, shape ``(n,)``
        Mean square, mean and variance of the residual per joint.
    qd_share, q_share, qd_q_share : ndarray, shape ``(n,)``
        Share explained by a binned function of ``qd_j``, of ``q_j``, and by
        their sum ``f(qd_j) + g(q_j)`` (backfitted).
    qdd_share : ndarray, shape ``(n,)``
        Share explained by a binned function of ``qdd_j`` (an inertia the
        model lacks, e.g. a motor's reflected inertia, or a distortion of the
        estimated accelerations).
    bias_share : ndarray, shape ``(n,)``
        Share explained by a constant per recording (NaN for one recording,
        and with ``by == "recordings"``: no recording's constant is known
        before it is seen).
    recordings : ndarray of int, shape ``(K,)``
        The recording ids.
    recording_mean : ndarray, shape ``(K, n)``
        The mean residual of each recording.
    qd_mean, q_mean, qdd_mean : tuple of ConditionalMean, length ``n``
        ``E[r_j | qd_j]``, ``E[r_j | q_j]`` and ``E[r_j | qdd_j]`` fitted on
        all samples (for plotting, or to score on other data).
    lags : ndarray, shape ``(L,)``
        The lags probed (s), symmetric around zero.
    shift_share : ndarray, shape ``(L, n)``
        Share of the variance removed by reading the torque stream ``lag``
        later, ``r_lag(t) = tau(t + lag) - inverse_dynamics(t)`` (in-sample,
        on the samples every lag can reach).
    lag : ndarray, shape ``(n,)``
        The lag of largest ``shift_share`` (s); positive: the torque stream is
        late (``tau`` recorded at ``t`` belongs to the state at ``t - lag``).
    lag_share : ndarray, shape ``(n,)``
        Held-out share removed by the shift (the lag chosen on the other folds).
    xcorr_qd : ndarray, shape ``(L, n)``
        Correlation of ``r_j(t)`` with ``qd_j(t + lag)``.
    xcorr_lag : ndarray, shape ``(n,)``
        The lag of largest ``|xcorr_qd|`` (s).
    xcorr_share : ndarray, shape ``(n,)``
        Held-out share explained by ``a + b qd_j(t + lag)`` (lag chosen on the other folds).
    frequency : ndarray, shape ``(F,)``
        Frequencies of the spectrum (Hz).
    psd : ndarray, shape ``(F, n)``
        Welch power spectral density of the residual (units²/Hz, mean not
        removed), averaged over the recordings weighted by their length.
    tau_psd, predicted_psd : ndarray, shape ``(F, n)``
        The same of the measured torque ``tau`` and of the model's
        ``inverse_dynamics``: residual power in a band where the measured
        torque has none is torque the model predicts that was not measured.
    median_frequency : ndarray, shape ``(n,)``
        The frequency below which half of the residual's power lies (Hz).
    by : {"blocks", "recordings"}
        What the shares held out: time blocks of every recording, or whole
        recordings (every share then scored on each recording's residual
        less its own mean).
    recording_step : ndarray, shape ``(K,)``
        Each recording's sampling interval (s).
    spectral : ndarray of bool, shape ``(K,)``
        Which recordings the lags, correlations and spectra read: those at
        the common rate ``dt`` (the rate that holds the most samples; steps
        within :data:`STEP_TOLERANCE`). Every recording when they share one
        rate; the shares and conditional means read every recording.
    """

    t: np.ndarray
    trajectory: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    residual: np.ndarray
    fold: np.ndarray
    dt: float
    folds: int
    block: float
    angular: tuple
    mse: np.ndarray
    mean: np.ndarray
    variance: np.ndarray
    qd_share: np.ndarray
    q_share: np.ndarray
    qd_q_share: np.ndarray
    qdd_share: np.ndarray
    bias_share: np.ndarray
    recordings: np.ndarray
    recording_mean: np.ndarray
    qd_mean: tuple
    q_mean: tuple
    qdd_mean: tuple
    lags: np.ndarray
    shift_share: np.ndarray
    lag: np.ndarray
    lag_share: np.ndarray
    xcorr_qd: np.ndarray
    xcorr_lag: np.ndarray
    xcorr_share: np.ndarray
    frequency: np.ndarray
    psd: np.ndarray
    tau_psd: np.ndarray
    predicted_psd: np.ndarray
    median_frequency: np.ndarray
    by: str = "blocks"
    recording_step: np.ndarray | None = None
    spectral: np.ndarray | None = None

    @property
    def n_dof(self) -> int:
        """Number of joints ``n``."""
        return self.residual.shape[1]

    @property
    def n_recordings(self) -> int:
        """Number of recordings ``K``."""
        return int(self.recordings.shape[0])

    def power(self, low: float = 0.0, high: float = math.inf, *, of: str = "residual") -> np.ndarray:
        """Power (mean square, units²) between ``low`` and ``high`` Hz per joint, shape ``(n,)``.

        Parameters
        ----------
        low, high : float
            The band ``[low, high)`` in Hz.
        of : {"residual", "tau", "predicted"}, keyword-only
            The residual, the measured torque, or the model's inverse dynamics.
        """
        spectra = {"residual": self.psd, "tau": self.tau_psd, "predicted": self.predicted_psd}
        if of not in spectra:
            raise ValueError(f"of must be one of {sorted(spectra)}, got {of!r}")
        if not (low >= 0 and high > low):
            raise ValueError(f"need 0 <= low < high, got low={low!r}, high={high!r}")
        inside = (self.frequency >= low) & (self.frequency < high)
        step = self.frequency[1] - self.frequency[0] if self.frequency.size > 1 else 0.0
        return np.sum(spectra[of][inside], axis=0) * step

    def power_share(self, low: float = 0.0, high: float = math.inf) -> np.ndarray:
        """Share of the residual's power between ``low`` and ``high`` Hz, per joint, shape ``(n,)``."""
        total = self.power()
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.power(low, high) / total

    def format(self, *, bands=(1.0, 10.0)) -> str:
        """A summary for a terminal: a header line and four lines per joint.

        Parameters
        ----------
        bands : sequence of float, keyword-only
            Increasing band edges (Hz) of the spectrum line: the power of the
            residual, the measured torque and the model in each band.
        """
        edges = [0.0, *(float(b) for b in bands), math.inf]
        if any(not b > a for a, b in zip(edges[:-1], edges[1:])):
            raise ValueError(f"bands must be increasing positive frequencies, got {bands!r}")
        names = [f"{a:g}-{b:g}" if math.isfinite(b) else f">{a:g}" for a, b in zip(edges[:-1], edges[1:])]
        units = ["N m" if a else "N" for a in self.angular]
        held_out = (
            "held-out recordings, each recording's mean removed"
            if self.by == "recordings"
            else f"held-out {self.block:.3g} s blocks"
        )
        spectral = self.n_recordings if self.spectral is None else int(np.sum(self.spectral))
        rate = (
            f"at {self.dt * 1e3:.3g} ms"
            if spectral == self.n_recordings
            else f"at several rates (lags and spectra: the {spectral} recording(s) at {self.dt * 1e3:.3g} ms)"
        )
        lines = [
            f"residual of {self.n_dof} joint(s) over {self.n_recordings} recording(s), {self.t.shape[0]} samples "
            f"{rate}; shares of its variance explained on {held_out} ({self.folds} folds)"
        ]
        for j in range(self.n_dof):
            mean_share = self.mean[j] ** 2 / self.mse[j] if self.mse[j] > 0 else math.nan
            bias = "one recording" if self.n_recordings < 2 else _percent(self.bias_share[j])
            if self.by == "recordings":
                bias = "not known before a recording is seen"
            power = {
                of: " / ".join(f"{self.power(a, b, of=of)[j]:.2g}" for a, b in zip(edges[:-1], edges[1:]))
                for of in ("residual", "tau", "predicted")
            }
            lines += [
                f"joint {j + 1}: MSE {self.mse[j]:.4g} ({units[j]})^2, mean {self.mean[j]:+.3g} {units[j]} "
                f"({_percent(mean_share)} of the MSE), std {math.sqrt(self.variance[j]):.3g} {units[j]}",
                f"  f(qd) {_percent(self.qd_share[j])}, f(q) {_percent(self.q_share[j])}, "
                f"f(qd) + g(q) {_percent(self.qd_q_share[j])}, f(qdd) {_percent(self.qdd_share[j])}, "
                f"bias per recording {bias}",
                f"  torque stream {self.lag[j] * 1e3:+.3g} ms: {_percent(self.lag_share[j])}; "
                f"qd(t {self.xcorr_lag[j] * 1e3:+.3g} ms): corr {self.xcorr_qd[self._lag_index(j)]:+.2f}, "
                f"{_percent(self.xcorr_share[j])}",
                f"  spectrum: half the residual's power below {self.median_frequency[j]:.3g} Hz; "
                f"power in {' / '.join(names)} Hz, ({units[j]})^2: residual {power['residual']}, "
                f"measured {power['tau']}, model {power['predicted']}",
            ]
        return "\n".join(lines)

    def _lag_index(self, j: int) -> tuple[int, int]:
        return int(np.argmin(np.abs(self.lags - self.xcorr_lag[j]))), j


def _percent(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{100 * value:.1f} %"


# ----------------------------------------------------------------- inputs


def _array(data, name: str) -> np.ndarray:
    if not hasattr(data, name):
        raise TypeError(f"data must be a dataset with t, q, qd, qdd and tau (an lnn.Dataset); it has no {name!r}")
    value = getattr(data, name)
    if hasattr(value, "numpy"):
        value = value.numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"data.{name} must be numeric, got {type(value).__name__}") from None
    if not np.isfinite(array).all():
        raise ValueError(f"data.{name} contains NaN or infinite values")
    return array


def _read_data(data):
    """Arrays of ``data`` sorted by recording then time, and the recording boundaries."""
    t = _array(data, "t")
    q, qd, qdd, tau = (_array(data, name) for name in ("q", "qd", "qdd", "tau"))
    if t.ndim != 1 or t.shape[0] < 2:
        raise ValueError(f"data.t must have shape (N,) with N >= 2, got shape {t.shape}")
    if q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise ValueError(f"data.q must have shape (N={t.shape[0]}, n), got shape {q.shape}")
    for name, array in (("qd", qd), ("qdd", qdd), ("tau", tau)):
        if array.shape != q.shape:
            raise ValueError(f"data.{name} must have the shape of data.q {q.shape}, got shape {array.shape}")
    ids = getattr(data, "trajectory", None)
    ids = np.zeros(t.shape[0], dtype=np.int64) if ids is None else np.asarray(ids)
    if ids.shape != t.shape or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"data.trajectory must be integer ids of shape {t.shape}, got {ids.dtype} {ids.shape}")
    order = np.lexsort((t, ids))
    ids = ids[order].astype(np.int64)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    bounds = np.r_[starts, ids.shape[0]]
    angular = tuple(bool(a) for a in getattr(data, "angular", ()) or ())
    if len(angular) != q.shape[1]:
        angular = (False,) * q.shape[1]
    return t[order], q[order], qd[order], qdd[order], tau[order], ids, bounds, angular


#: Recordings' steps may differ by this fraction and count as one rate (the import's files, each on its own
#: grid, do by 0.03 %).
STEP_TOLERANCE = 0.01


def common_rate(steps, sizes) -> np.ndarray:
    """Which recordings lie at the rate that holds the most samples: steps within :data:`STEP_TOLERANCE` of
    one recording's, the largest such group in samples (the first of equal ones).

    Parameters
    ----------
    steps : array_like, shape ``(K,)``
        Each recording's sampling interval (s); NaN for a recording of one sample, which joins no group.
    sizes : array_like, shape ``(K,)``
        Each recording's number of samples.

    Returns
    -------
    numpy.ndarray of bool, shape ``(K,)``
        All False when no recording has a step.
    """
    steps, sizes = np.asarray(steps, np.float64), np.asarray(sizes)
    groups = [np.abs(steps - h) <= STEP_TOLERANCE * h for h in steps if np.isfinite(h)]
    return max(groups, key=lambda group: int(sizes[group].sum()), default=np.zeros(steps.shape, bool))


def _steps(t: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Each recording's sampling interval ``(K,)``, which recordings share the common rate ``(K,)`` bool, and
    that rate's step.

    Every recording must be uniformly sampled (ValueError otherwise). The common rate is the one (steps
    within :data:`STEP_TOLERANCE` of one of them) that holds the most samples; its step is the median of
    its recordings' steps. Lags and spectra in samples need one rate, so they read those recordings; the
    shares, functions of the state, read every recording (a log at 1.5 ms beside logs at 2 ms).
    """
    lengths = np.diff(bounds)
    if not np.any(lengths > 1):
        raise ValueError("data must hold a recording of at least 2 samples")
    steps = [np.diff(t[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    own = np.array([float(np.median(s)) if s.size else np.nan for s in steps])
    uneven = [s.size > 0 and np.max(np.abs(s - h)) > 1e-6 * h + 1e-12 for s, h in zip(steps, own)]
    if not np.all(own[lengths > 1] > 0) or any(uneven):
        every = np.concatenate(steps)
        raise ValueError(
            f"data.t must be uniformly sampled within each recording (for lags and spectra); steps range "
            f"from {every.min():.6g} to {every.max():.6g} s: resample first (lnn.Dataset.from_csv does)"
        )
    common = common_rate(own, lengths)
    dt = float(np.median(own[common]))
    own = np.where(np.isfinite(own), own, dt)  # a recording of one sample: any step
    return own, common, dt


def _predict(model, q, qd, qdd) -> np.ndarray:
    inverse = getattr(model, "inverse_dynamics", None)
    if not callable(inverse):
        raise TypeError(f"model must have an inverse_dynamics(q, qd, qdd) method, got {type(model).__name__}")
    n = getattr(model, "n_dof", q.shape[1])
    if isinstance(n, (int, np.integer)) and n != q.shape[1]:
        raise ValueError(f"model.n_dof is {n} but the data have {q.shape[1]} coordinates")
    value = inverse(q, qd, qdd)
    if hasattr(value, "numpy"):
        value = value.numpy()
    value = np.asarray(value, dtype=np.float64)
    if value.shape != q.shape:
        raise ValueError(f"model.inverse_dynamics returned shape {value.shape}, expected {q.shape}")
    return value


def _block_samples(bounds: np.ndarray, steps: np.ndarray, folds: int, block: float) -> np.ndarray:
    """Each recording's time block in samples: ``block`` s at its own step, at most a ``1 / folds`` of it."""
    return np.array([max(1, min(int(round(block / h)), n // folds)) for n, h in zip(np.diff(bounds), steps)])


def _folds(bounds: np.ndarray, steps: np.ndarray, folds: int, block: float) -> np.ndarray:
    """Fold of each sample: each recording cut into blocks of ``block`` s (at its own step ``steps[k]``),
    dealt to the folds in turn."""
    fold = np.empty(bounds[-1], dtype=np.int64)
    lengths = _block_samples(bounds, steps, folds, block)
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        fold[a:b] = (np.arange(b - a) // lengths[k] + k) % folds
    missing = np.setdiff1d(np.arange(folds), fold)
    if missing.size:
        raise ValueError(f"data has too few samples for folds={folds}: fold(s) {missing.tolist()} would be empty")
    return fold


# --------------------------------------------------------- binned functions


def _codes(x: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Equal-count bin index of every sample of ``x (N,)``, and the edges ``(B + 1,)``."""
    edges = np.unique(np.quantile(x, np.linspace(0.0, 1.0, bins + 1)))
    if edges.size < 2:
        return np.zeros(x.shape[0], dtype=np.int64), np.array([edges[0], edges[0]])
    codes = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, edges.size - 2)
    return codes, edges


def _backfit(codes: list[np.ndarray], sizes: list[int], y: np.ndarray, sweeps: int) -> list[np.ndarray]:
    """Bin effects of the additive model ``y ~ sum_i e_i[codes_i]`` (``y`` centred), by backfitting."""
    effects = [np.zeros(size) for size in sizes]
    counts = [np.maximum(np.bincount(c, minlength=s), 1) for c, s in zip(codes, sizes)]
    fitted = np.zeros_like(y)
    for _ in range(sweeps if len(codes) > 1 else 1):
        for i, (c, size) in enumerate(zip(codes, sizes)):
            partial = y - fitted + effects[i][c]
            new = np.bincount(c, weights=partial, minlength=size) / counts[i]
            fitted += new[c] - effects[i][c]
            effects[i] = new
    return effects


def _binned_share(codes: list[np.ndarray], r: np.ndarray, fold: np.ndarray, folds: int, sweeps: int = 10) -> float:
    """Held-out share of the variance of ``r (N,)`` explained by an additive binned model of ``codes``."""
    sizes = [int(c.max()) + 1 for c in codes]
    sse_model = sse_constant = 0.0
    for f in range(folds):
        train, test = fold != f, fold == f
        mu = float(np.mean(r[train]))
        effects = _backfit([c[train] for c in codes], sizes, r[train] - mu, sweeps)
        prediction = mu + sum(e[c[test]] for e, c in zip(effects, codes))
        sse_model += float(np.sum((r[test] - prediction) ** 2))
        sse_constant += float(np.sum((r[test] - mu) ** 2))
    return 1.0 - sse_model / sse_constant if sse_constant > 0 else math.nan


def _conditional_mean(x: np.ndarray, r: np.ndarray, bins: int) -> ConditionalMean:
    codes, edges = _codes(x, bins)
    size = edges.size - 1
    count = np.bincount(codes, minlength=size)
    mean = np.bincount(codes, weights=r, minlength=size) / np.maximum(count, 1)
    centers = np.array([np.median(x[codes == b]) if count[b] else 0.5 * (edges[b] + edges[b + 1]) for b in range(size)])
    return ConditionalMean(edges=edges, centers=centers, mean=mean, count=count)


# ------------------------------------------------------------------- lags


def _lag_positions(spans: list[tuple[int, int]], K: int) -> np.ndarray:
    """The samples of the recordings ``spans`` (``(start, stop)`` rows) from which every shift in ``[-K, K]``
    stays inside their own recording."""
    return np.concatenate([np.arange(a + K, b - K, dtype=np.int64) for a, b in spans])


def _fold_sums(values: np.ndarray, fold: np.ndarray, folds: int) -> np.ndarray:
    """Sums of ``values (M, n)`` per fold, shape ``(folds, n)``."""
    return np.stack([np.bincount(fold, weights=values[:, j], minlength=folds) for j in range(values.shape[1])], -1)


def _shift(tau, predicted, base, fold_base, K, folds, dt):
    """The torque stream read ``k`` samples later, ``k`` in ``[-K, K]``: in-sample curve, best lag, held-out share."""
    r0 = tau[base] - predicted[base]
    count = np.bincount(fold_base, minlength=folds).astype(float)[:, None]
    s1, s2 = [], []
    for k in range(-K, K + 1):
        rk = tau[base + k] - predicted[base]
        s1.append(_fold_sums(rk, fold_base, folds))
        s2.append(_fold_sums(rk**2, fold_base, folds))
    s1, s2 = np.array(s1), np.array(s2)  # (L, folds, n)
    total = s2.sum(1) - s1.sum(1) ** 2 / count.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = 1.0 - total / total[K]
    best = np.argmax(curve, axis=0)
    held, base_sse = np.zeros(r0.shape[1]), np.zeros(r0.shape[1])
    for f in range(folds):
        n_train = count.sum() - count[f]
        train1, train2 = s1.sum(1) - s1[:, f], s2.sum(1) - s2[:, f]
        k = np.argmin(train2 - train1**2 / n_train, axis=0)
        columns = np.arange(r0.shape[1])
        c = train1[k, columns] / n_train
        held += s2[k, f, columns] - 2 * c * s1[k, f, columns] + c**2 * count[f]
        c0 = train1[K] / n_train
        base_sse += s2[K, f] - 2 * c0 * s1[K, f] + c0**2 * count[f]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = 1.0 - held / base_sse
    return curve, (best - K) * dt, share


def _xcorr(r, qd, base, fold_base, K, folds, dt):
    """Correlation of ``r(t)`` with ``qd(t + k dt)``; the held-out share of ``a + b qd(t + k* dt)``."""
    y = r[base]
    count = np.bincount(fold_base, minlength=folds).astype(float)[:, None]
    sy, syy = _fold_sums(y, fold_base, folds), _fold_sums(y**2, fold_base, folds)
    sx, sxx, sxy = [], [], []
    for k in range(-K, K + 1):
        x = qd[base + k]
        sx.append(_fold_sums(x, fold_base, folds))
        sxx.append(_fold_sums(x**2, fold_base, folds))
        sxy.append(_fold_sums(x * y, fold_base, folds))
    sx, sxx, sxy = np.array(sx), np.array(sxx), np.array(sxy)  # (L, folds, n)

    def regression(n, x1, x2, xy, y1):
        cxx, cxy = x2 - x1**2 / n, xy - x1 * y1 / n
        with np.errstate(invalid="ignore", divide="ignore"):
            b = np.where(cxx > 0, cxy / cxx, 0.0)
        return b, (y1 - b * x1) / n, cxx, cxy

    n_all = count.sum()
    _, _, cxx, cxy = regression(n_all, sx.sum(1), sxx.sum(1), sxy.sum(1), sy.sum(0))
    cyy = syy.sum(0) - sy.sum(0) ** 2 / n_all
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where((cxx > 0) & (cyy > 0), cxy / np.sqrt(cxx * cyy), 0.0)
    peak = np.argmax(np.abs(corr), axis=0)
    held, base_sse, columns = np.zeros(y.shape[1]), np.zeros(y.shape[1]), np.arange(y.shape[1])
    for f in range(folds):
        n = n_all - count[f]
        tx, txx, txy = (s.sum(1) - s[:, f] for s in (sx, sxx, sxy))
        ty = sy.sum(0) - sy[f]
        b, a, txx_c, txy_c = regression(n, tx, txx, txy, ty)
        k = np.argmax(np.where(txx_c > 0, b * txy_c, 0.0), axis=0)  # largest explained sum of squares
        a, b = a[k, columns], b[k, columns]
        x1, x2, xy = sx[k, f, columns], sxx[k, f, columns], sxy[k, f, columns]
        m = count[f]
        held += syy[f] + m * a**2 + b**2 * x2 - 2 * a * sy[f] - 2 * b * xy + 2 * a * b * x1
        c0 = ty / n
        base_sse += syy[f] - 2 * c0 * sy[f] + c0**2 * m
    with np.errstate(invalid="ignore", divide="ignore"):
        share = 1.0 - held / base_sse
    return corr, (peak - K) * dt, share


# --------------------------------------------------------------- spectrum


def _spectrum(signals: list[np.ndarray], spans: list[tuple[int, int]], dt: float, segment: float):
    """Welch PSD of each signal ``(N, n)`` over the recordings ``spans`` (``(start, stop)`` rows, all at step
    ``dt``), averaged weighted by length; frequencies ``(F,)``."""
    from scipy.signal import welch

    lengths = np.array([b - a for a, b in spans])
    nperseg = int(max(2, min(round(segment / dt), lengths.min())))
    spectra = []
    for x in signals:
        psd = 0.0
        for a, b in spans:
            frequency, part = welch(x[a:b], fs=1.0 / dt, nperseg=nperseg, detrend=False, axis=0)
            psd = psd + (b - a) * part
        spectra.append(psd / lengths.sum())
    return frequency, spectra


def _median_frequency(frequency: np.ndarray, psd: np.ndarray) -> np.ndarray:
    """The frequency below which half of the power of each column of ``psd (F, n)`` lies."""
    cumulative = np.cumsum(psd, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cumulative = cumulative / cumulative[-1]
    return np.array(
        [frequency[min(int(np.searchsorted(cumulative[:, j], 0.5)), frequency.size - 1)] for j in range(psd.shape[1])]
    )


# ---------------------------------------------------------------- analyze


def _options(folds, bins, max_lag, block, segment, by="blocks"):
    if by not in ("blocks", "recordings"):
        raise ValueError(f'by must be "blocks" or "recordings", got {by!r}')
    if isinstance(folds, (bool, np.bool_)) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    for name, value in (("max_lag", max_lag), ("block", block), ("segment", segment)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__} {value!r}")
        if not (math.isfinite(value) and (value >= 0 if name == "max_lag" else value > 0)):
            raise ValueError(
                f"{name} must be a finite number of seconds {'>= 0' if name == 'max_lag' else '> 0'}, got {value!r}"
            )
    return int(folds), int(bins), float(max_lag), float(block), float(segment)


def analyze(
    model,
    data,
    *,
    folds: int = 5,
    bins: int = 32,
    max_lag: float = 0.1,
    block: float = 2.0,
    segment: float = 4.0,
    by: str = "blocks",
) -> ResidualAnalysis:
    """Analyse the torque residual ``tau - inverse_dynamics(q, qd, qdd)`` of ``model`` on ``data``.

    Per joint: the residual's mean square, mean and variance; the held-out
    shares of its variance explained by a binned function of ``qd_j``
    (``bins`` equal-count bins: a piecewise-constant conditional mean), of
    ``q_j`` (angles wrapped to ``[-pi, pi)``), of their sum, of ``qdd_j``,
    and by a constant per recording; the lag of the torque stream (shifts of up to
    ``max_lag`` in either direction) that removes most of the variance and
    the held-out share it removes; the correlation of the residual with the
    joint velocity at lags; the Welch spectra of the residual, the measured
    torque and the model's torque.

    Folds are contiguous blocks of ``block`` seconds (at most a ``1 / folds``
    of a recording) of each recording, dealt to the folds in turn; every term
    is fitted on ``folds - 1`` folds and scored on the last, so a share
    counts only structure that carries over to unseen stretches of the same
    recordings. Shifts and correlations never cross from one recording into
    another. With ``by="recordings"`` every recording is a fold of its own
    (``folds`` and ``block`` are not used): a share counts only structure
    that carries over to a recording it was not fitted on, and every share
    is scored on each recording's residual less its own mean (a new
    recording's bias is not known before it is seen, so ``bias_share`` is
    NaN).

    Parameters
    ----------
    model : object
        Anything with ``inverse_dynamics(q, qd, qdd)`` returning ``(N, n)``
        (an array, or a tensor with ``.numpy()``).
    data : lnn.Dataset
        ``t (N,)``, ``q, qd, qdd, tau (N, n)``, ``trajectory (N,)``
        (recording ids; all samples one recording if absent) and
        ``angular``; uniformly sampled within each recording. Recordings
        at different rates are welcome: the shares read them all, the lags,
        correlations and spectra those at the rate that holds the most
        samples (``ResidualAnalysis.spectral``).
    folds : int, keyword-only
        Number of folds (>= 2).
    bins : int, keyword-only
        Equal-count bins of the functions of ``qd_j`` and ``q_j``.
    max_lag : float, keyword-only
        Largest lag probed (s); capped at a quarter of the shortest recording.
    block : float, keyword-only
        Length of the time blocks dealt to the folds (s).
    segment : float, keyword-only
        Length of the Welch segments (s); capped at the shortest recording.
    by : {"blocks", "recordings"}, keyword-only
        Hold out time blocks of every recording (the default) or whole
        recordings (at least two).

    Returns
    -------
    ResidualAnalysis
        The residual, the shares, the curves behind them, ``format()`` for a terminal.

    Raises
    ------
    TypeError
        If ``model`` has no ``inverse_dynamics`` or ``data`` lacks an array.
    ValueError
        For arrays of mismatched shapes, NaN, non-uniform sampling within a
        recording, too few samples for the folds, or bad options.
    """
    folds, bins, max_lag, block, segment = _options(folds, bins, max_lag, block, segment, by)
    t, q, qd, qdd, tau, ids, bounds, angular = _read_data(data)
    steps, common, dt = _steps(t, bounds)
    predicted = _predict(model, q, qd, qdd)
    residual = tau - predicted
    q = np.where(np.array(angular), (q + np.pi) % (2 * np.pi) - np.pi, q)
    n = q.shape[1]
    recordings = ids[bounds[:-1]]
    recording_mean = np.stack([residual[a:b].mean(0) for a, b in zip(bounds[:-1], bounds[1:])])
    recording_code = np.repeat(np.arange(recordings.size), np.diff(bounds))
    if by == "recordings":
        if recordings.size < 2:
            raise ValueError(f'by="recordings" needs at least two recordings, got {recordings.size}')
        fold, folds, block = recording_code, int(recordings.size), float(np.max(np.diff(bounds) * steps))
        own_mean = recording_mean[recording_code]  # what is scored is each recording's residual less its mean
    else:
        fold, own_mean = _folds(bounds, steps, folds, block), np.zeros_like(residual)
        block = float(np.max(_block_samples(bounds, steps, folds, block) * steps))
    scored = residual - own_mean
    shares: dict[str, list[float]] = {"qd": [], "q": [], "qd_q": [], "qdd": [], "bias": []}
    for j in range(n):
        qd_codes, q_codes = _codes(qd[:, j], bins)[0], _codes(q[:, j], bins)[0]
        shares["qd"].append(_binned_share([qd_codes], scored[:, j], fold, folds))
        shares["q"].append(_binned_share([q_codes], scored[:, j], fold, folds))
        shares["qd_q"].append(_binned_share([qd_codes, q_codes], scored[:, j], fold, folds))
        shares["qdd"].append(_binned_share([_codes(qdd[:, j], bins)[0]], scored[:, j], fold, folds))
        known = recordings.size > 1 and by == "blocks"
        shares["bias"].append(_binned_share([recording_code], residual[:, j], fold, folds) if known else math.nan)
    spans = [(int(a), int(b)) for a, b, at_dt in zip(bounds[:-1], bounds[1:], common) if at_dt]
    K = max(0, min(int(round(max_lag / dt)), (min(b - a for a, b in spans) - 1) // 4))
    base = _lag_positions(spans, K)
    shift_curve, lag, lag_share = _shift(tau - own_mean, predicted, base, fold[base], K, folds, dt)
    corr, xcorr_lag, xcorr_share = _xcorr(scored, qd, base, fold[base], K, folds, dt)
    frequency, (psd, tau_psd, predicted_psd) = _spectrum([residual, tau, predicted], spans, dt, segment)
    return ResidualAnalysis(
        t=t,
        trajectory=ids,
        q=q,
        qd=qd,
        qdd=qdd,
        residual=residual,
        fold=fold,
        dt=dt,
        folds=folds,
        block=block,
        angular=angular,
        mse=np.mean(residual**2, axis=0),
        mean=np.mean(residual, axis=0),
        variance=np.var(residual, axis=0),
        qd_share=np.array(shares["qd"]),
        q_share=np.array(shares["q"]),
        qd_q_share=np.array(shares["qd_q"]),
        qdd_share=np.array(shares["qdd"]),
        bias_share=np.array(shares["bias"]),
        recordings=recordings,
        recording_mean=recording_mean,
        qd_mean=tuple(_conditional_mean(qd[:, j], residual[:, j], bins) for j in range(n)),
        q_mean=tuple(_conditional_mean(q[:, j], residual[:, j], bins) for j in range(n)),
        qdd_mean=tuple(_conditional_mean(qdd[:, j], residual[:, j], bins) for j in range(n)),
        lags=np.arange(-K, K + 1) * dt,
        shift_share=shift_curve,
        lag=lag,
        lag_share=lag_share,
        xcorr_qd=corr,
        xcorr_lag=xcorr_lag,
        xcorr_share=xcorr_share,
        frequency=frequency,
        psd=psd,
        tau_psd=tau_psd,
        predicted_psd=predicted_psd,
        median_frequency=_median_frequency(frequency, psd),
        by=by,
        recording_step=steps,
        spectral=common,
    )
