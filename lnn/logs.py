"""Measured logs in, one call: read CSV logs, clean them, resample them, estimate ``qd`` and ``qdd``.

:func:`import_csv` (and :meth:`lnn.Dataset.from_csv`, which returns only the
dataset) turns CSV logs of a robot into a :class:`lnn.Dataset`, file by file:

1. **Read** the named (or 0-based indexed) columns with :func:`numpy.loadtxt`;
   a non-numeric or non-finite cell is an error naming the file, line, column
   and cell. The delimiter is sniffed from the first line (``,`` ``;`` tab or
   white space) unless given; a first line that does not parse as numbers
   is the header (a leading ``#`` is ignored).
2. **Repeated samples**: a row whose time stamp equals the previous one's is
   dropped (the first is kept); the report counts them, and how many were
   identical to the kept row in every column read. A time stamp smaller than
   the previous one is an error (the file is not sorted, or two logs were
   concatenated): nothing is re-ordered silently.
3. **Gaps**: the sampling step ``h`` is the mean of the time steps within
   0.5-1.5 times their median (jitter averages out; holes are left out), the
   median of the files' steps when they agree within 1 % (so that the
   dataset has one ``dt``); ``step=`` overrides it. A hole longer than
   ``max_gap`` splits the log into separate trajectories; shorter holes are
   interpolated over. The default ``max_gap`` is ``max(3 h, W h / 4)`` with
   ``W`` the smallest acceleration window of the file (step 5, chosen on
   pieces split at holes of more than 20 steps): a hole shorter than a
   quarter of the time over which the filter fits one polynomial costs the
   fit little, and a longer one would have the filter smooth across missing
   motion. The choice thus follows the signal's time scale, not a fixed
   number of samples.
4. **Resampling** onto the uniform grid ``t0 + k h`` of each piece: positions
   (and measured velocities) by a cubic spline through the samples (fourth
   order accurate, so the resampling error stays far below the noise and the
   estimated accelerations are not biased by the jitter, as linear
   interpolation's ``h^2 qdd / 8`` error pattern would be), torques linearly
   (a torque can jump; linear interpolation never overshoots). Time stamps
   within ``1e-6 h`` of the grid are snapped to it without interpolating.
   Coordinates marked ``angular`` are unwrapped first (jumps of more than
   ``pi`` between samples are taken as wraps of ``2 pi``).
5. **Derivatives** ``qd`` and ``qdd`` by Savitzky–Golay filters of degree
   ``order`` (4), with a window per coordinate and derivative chosen by
   :func:`choose_window` to minimise the estimated error (noise plus bias)
   of the derivative of the motion within its band (where 99.99 % of the
   signal's variance lies), from the sampling rate and the measured spectrum
   of the signal and its noise; ``window=`` overrides it. The dataset's
   ``derivative_span`` is the widest window's span (s), which
   :meth:`lnn.Dataset.split` keeps between time blocks of different parts. Half a window is cut from each end of
   each piece (``trim=True``), where the filter would fit one-sided
   polynomials with several times its error in the interior. Pieces shorter
   than the window (plus the trim) are dropped and counted.

The :class:`ImportReport` says what was done, per file: rows read, repeated
samples dropped, gaps (where and how long), holes bridged, the step, the
jitter, whether the data were resampled, the estimated noise, the windows
and, when measured velocities are given, how they compare with the
derivative of the positions (lag and relative mismatch).

Measured velocities (``qd=`` columns) are, by default (``velocity="q"``),
read and compared but not used: the dataset's ``qd`` and ``qdd`` are the
derivatives of the positions, which share the positions' time base. Motor
drivers often report a backward difference or a filtered velocity, which
lags the positions (half a step for a backward difference: on the DFKI
double pendulum the lag measured 0.5 step, an error of 1 ms times the
acceleration, larger than the filtered position derivative's noise).
``velocity="measured"`` uses the measured velocities instead, filtered by
the same rule (derivative 0); ``qdd`` always comes from the positions.
Torques are resampled but not filtered: their noise is the regression
target's and averages out in a least-squares fit, whereas filtering them
would not match the positions' filter.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "FileReport",
    "Gap",
    "ImportReport",
    "ImportResult",
    "WindowChoice",
    "choose_window",
    "import_csv",
]

#: Default polynomial degree of the Savitzky–Golay filters.
DEFAULT_ORDER = 4
#: The files' median steps are merged into one when they agree within this relative tolerance.
COMMON_STEP_TOLERANCE = 0.01
#: Holes bridged (in steps) for the spectral estimate that chooses the windows.
PROVISIONAL_GAP_STEPS = 20.0
#: Lower bound of the automatic ``max_gap``, in steps.
MIN_GAP_STEPS = 3.0
#: Fraction of the acceleration window's span that an automatic ``max_gap`` may bridge.
GAP_WINDOW_FRACTION = 0.25
#: Time stamps within this fraction of a step of the grid are snapped to it.
SNAP_TOLERANCE = 1e-6
#: Longest Welch segment (samples) of the spectral estimate; also bounds the windows.
#: Long segments resolve the motion's band finely (the band's edge decides the window).
SPECTRUM_SEGMENT = 16384
#: Window of the Welch segments: Kaiser, beta 14 (sidelobes below -130 dB, so that the motion's
#: power, 1e10 times the noise floor on real logs, does not leak above its band).
SPECTRUM_WINDOW = ("kaiser", 14.0)
#: Half-width (bins) of that window's main lobe, sqrt(1 + (beta / pi)^2) rounded up.
MAIN_LOBE = 5
#: Band (fractions of the Nyquist frequency) where the noise floor is measured.
NOISE_BAND = (0.4, 0.8)
#: Spectral bins count as signal where their power exceeds this multiple of the noise floor.
SIGNAL_THRESHOLD = 3.0
#: The motion's band holds all but this fraction of the variance of the signal above the noise.
BAND_FRACTION = 1e-4
_VELOCITY = ("q", "measured")


# ------------------------------------------------------------------- results


@dataclass(frozen=True)
class Gap:
    """A hole in a log where it was split into two trajectories.

    Attributes
    ----------
    time : float
        Time stamp (in the log's own clock, seconds) of the last sample before the hole.
    duration : float
        Length of the hole (s).
    """

    time: float
    duration: float


@dataclass(frozen=True)
class WindowChoice:
    """The Savitzky–Golay window of :func:`choose_window`.

    Attributes
    ----------
    window : int
        Odd window length (samples).
    error : float
        Estimated RMS error of the derivative with that window (units of the
        signal per second to the ``derivative``).
    noise : float
        Estimated standard deviation of the white noise of the signal.
    bandwidth : float
        The motion's band (Hz): below it lies all but 0.01 % of the variance
        of the signal's spectrum above the noise floor.
    candidates : ndarray of int, shape ``(K,)``
        The windows compared.
    errors : ndarray, shape ``(K,)``
        Their estimated RMS errors.
    """

    window: int
    error: float
    noise: float
    bandwidth: float
    candidates: np.ndarray
    errors: np.ndarray


@dataclass(frozen=True)
class FileReport:
    """What :func:`import_csv` did to one file.

    Attributes
    ----------
    path : str
        The file.
    rows : int
        Data rows read.
    repeated : int
        Rows dropped because their time stamp repeated the previous one's.
    identical : int
        How many of those were identical to the kept row in every column read.
    gaps : tuple of Gap
        Holes longer than ``max_gap``, where the log was split.
    bridged : int
        Holes longer than 1.5 steps but within ``max_gap``, interpolated over.
    longest_bridged : float
        The longest of those (s; 0 if none).
    max_gap : float
        The threshold used (s).
    step : float
        Step of the uniform grid (s).
    median_step : float
        Median time step of the file's samples (s).
    jitter : float
        Largest ``|raw step - step| / step`` within the pieces.
    resampled : bool
        Whether the samples were interpolated onto the grid (False: snapped).
    noise : tuple of float
        Estimated noise standard deviation of each position column.
    window_qd, window_qdd : tuple of int
        Savitzky–Golay windows (samples) per coordinate for ``qd`` and ``qdd``.
    error_qd, error_qdd : tuple of float
        The estimated RMS errors of ``qd`` and ``qdd`` with them (NaN when
        the windows were given).
    velocity_lag : tuple of float
        Lag (s) of the measured velocities behind the derivative of the
        positions, per coordinate (empty without ``qd=`` columns).
    velocity_mismatch : tuple of float
        RMS difference between the (filtered) measured velocities and the
        derivative of the positions, relative to the latter's RMS.
    trajectories : tuple of int
        Ids of the dataset's trajectories from this file.
    dropped_pieces : int
        Pieces between gaps too short for the window (dropped).
    trimmed : int
        Samples cut at the ends of the pieces (half a window each end).
    samples : int
        Samples of the dataset from this file.
    """

    path: str
    rows: int
    repeated: int
    identical: int
    gaps: tuple
    bridged: int
    longest_bridged: float
    max_gap: float
    step: float
    median_step: float
    jitter: float
    resampled: bool
    noise: tuple
    window_qd: tuple
    window_qdd: tuple
    error_qd: tuple
    error_qdd: tuple
    velocity_lag: tuple
    velocity_mismatch: tuple
    trajectories: tuple
    dropped_pieces: int
    trimmed: int
    samples: int

    def format(self) -> str:
        """A few lines of text describing the file's import (what ``lnn import`` prints)."""

        def ints(values):
            return ",".join(str(v) for v in values)

        spans = ",".join(f"{w * self.step:.3g}" for w in self.window_qdd)
        lines = [
            f"{self.path}: {self.rows} rows, {self.repeated} repeated samples dropped "
            f"({self.identical} identical rows), {len(self.gaps)} gap(s) split, "
            f"{self.bridged} hole(s) bridged (longest {self.longest_bridged * 1e3:.3g} ms, "
            f"max gap {self.max_gap * 1e3:.3g} ms)",
            f"  step {self.step * 1e3:.4g} ms (median {self.median_step * 1e3:.4g} ms, jitter "
            f"{self.jitter:.2%}), {'resampled' if self.resampled else 'on the grid'}; noise "
            f"{', '.join(f'{s:.2g}' for s in self.noise)}",
            f"  windows qd {ints(self.window_qd)}, qdd {ints(self.window_qdd)} samples "
            f"(qdd {spans} s); -> {len(self.trajectories)} trajectory(ies), {self.samples} samples"
            + (f", {self.dropped_pieces} short piece(s) dropped" if self.dropped_pieces else "")
            + f", {self.trimmed} edge samples trimmed",
        ]
        for gap in self.gaps:
            lines.append(f"  gap after t={gap.time:.6g} s: {gap.duration:.4g} s")
        if self.velocity_lag:
            lines.append(
                "  measured qd vs d(q)/dt: lag "
                + ", ".join(f"{lag * 1e3:.3g} ms" for lag in self.velocity_lag)
                + "; mismatch "
                + ", ".join(f"{m:.2%}" for m in self.velocity_mismatch)
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_csv` did, file by file.

    Attributes
    ----------
    files : tuple of FileReport
    order : int
        Degree of the Savitzky–Golay polynomials.
    velocity : str
        Where ``qd`` came from: ``"q"`` (derivative of the positions) or
        ``"measured"`` (the ``qd=`` columns, filtered).
    """

    files: tuple
    order: int
    velocity: str

    @property
    def rows(self) -> int:
        """Data rows read, over all files."""
        return sum(f.rows for f in self.files)

    @property
    def repeated(self) -> int:
        """Repeated samples dropped, over all files."""
        return sum(f.repeated for f in self.files)

    @property
    def gaps(self) -> int:
        """Gaps split at, over all files."""
        return sum(len(f.gaps) for f in self.files)

    @property
    def samples(self) -> int:
        """Samples of the dataset."""
        return sum(f.samples for f in self.files)

    def format(self) -> str:
        """The report as text, one block per file and a total line."""
        trajectories = sum(len(f.trajectories) for f in self.files)
        total = (
            f"total: {self.rows} rows -> {trajectories} trajectory(ies), {self.samples} "
            f"samples; {self.repeated} repeated samples dropped, {self.gaps} gap(s); "
            f"Savitzky-Golay order {self.order}, qd from "
            f"{'the positions' if self.velocity == 'q' else 'the measured velocities'}"
        )
        return "\n".join([f.format() for f in self.files] + [total])


@dataclass(frozen=True, eq=False)
class ImportResult:
    """What :func:`import_csv` returns.

    Attributes
    ----------
    dataset : lnn.Dataset
    report : ImportReport
    """

    dataset: object
    report: ImportReport


# -------------------------------------------------------------- the window


def choose_window(
    pieces, step: float, *, derivative: int, order: int = DEFAULT_ORDER, max_window: int | None = None
) -> WindowChoice:
    """The Savitzky–Golay window that minimises the estimated error of a derivative.

    The rule: the motion to differentiate is the signal's content within its
    band ``[0, f_b]``, and everything else (white noise, quantisation
    patterns, vibrations above the band) disturbs the estimate. For a linear
    filter with frequency response ``H_w(f)`` the mean squared error of the
    ``d``-th derivative of the motion is then

        E(w) = int_0^f_b |H_w(f) - (2 pi i f)^d|^2 S(f) df  +  int_0^(1/2h) |H_w(f)|^2 N(f) df

    (the motion the filter misses, plus the disturbance it passes). Both are
    estimated from the data: the power spectrum ``P`` of the pieces (Welch,
    Kaiser-windowed (beta 14, sidelobes below -130 dB) segments as long as the
    longest piece, up to 16384 samples, so that
    the band's edge is resolved finely; computed on the second difference
    and divided by its transfer function so that the low-frequency motion
    does not leak into the high frequencies); the white-noise floor ``N0``,
    its median over 40-80 % of the Nyquist frequency, divided by the median
    of its chi-square distribution (the noise standard
    deviation is ``sqrt(N0 / 2h)``); the signal ``S = P - N0`` where ``P``
    exceeds ``3 N0`` (0 elsewhere); the band ``f_b``, below which lies all
    but 0.01 % of the signal's variance ``int S df``, widened by the Kaiser
    window's main lobe (five frequency bins) (on the DFKI double
    pendulum's logs 2.4-4.8 Hz, where a tenth of a percent of the velocity
    variance is spread up to 200 Hz, so a velocity-weighted band would not be
    stable);
    ``N = N0`` within the band and ``P`` above it. The window (odd, more than
    ``order + 1`` samples, at most ``max_window``, the longest piece and the
    Welch segment) minimising ``E`` over a geometric grid of candidates
    (about 7 % apart) is returned. The window thus grows with the sampling
    rate and the noise and shrinks with the motion's bandwidth, whatever the
    robot. Why not track the content above ``f_b`` too: for the
    identification of inertias from torques, noise in the accelerations (a
    regressor) biases the estimates towards zero, while the torques'
    high-frequency content, left out of the accelerations, only adds noise
    to the target; and on real logs that content is largely quantisation
    (a slowly moving encoder's staircase) and structural vibration.

    Parameters
    ----------
    pieces : sequence of array_like, each of shape ``(T_i,)``
        Uniformly sampled pieces of one signal (e.g. one joint's positions
        between gaps), step ``step``.
    step : float
        Sampling step ``h`` (s).
    derivative : int
        0 (smoothing), 1 or 2.
    order : int
        Degree of the polynomials, ``> derivative``.
    max_window : int, optional
        Largest window to consider (default: the longest piece).

    Returns
    -------
    WindowChoice

    Raises
    ------
    ValueError
        If no piece has at least ``order + 3`` samples (the smallest window).
    """
    pieces = [np.asarray(p, dtype=np.float64).reshape(-1) for p in pieces]
    if derivative not in (0, 1, 2) or order <= derivative:
        raise ValueError(
            f"derivative must be 0, 1 or 2 and order > derivative; got derivative={derivative!r}, order={order!r}"
        )
    w_min = order + 2 + (order % 2 == 1)  # the smallest odd window > order + 1
    longest = max((p.shape[0] for p in pieces), default=0)
    if longest < w_min:
        raise ValueError(
            f"the signal needs at least {w_min} samples for a Savitzky-Golay window "
            f"of order {order}; the longest piece has {longest}"
        )
    segment = min(longest - 2, SPECTRUM_SEGMENT) // 2 * 2  # Welch on the second difference
    frequencies, power, noise_psd = _spectrum(pieces, step, segment)
    w_max = min(longest, segment - 1, max_window if max_window is not None else longest)
    w_max -= 1 - w_max % 2
    w_max = max(w_max, w_min)
    grid = np.unique(np.round(np.geomspace(w_min, w_max, 100)).astype(int))
    candidates = np.unique(np.where(grid % 2, grid, grid + 1).clip(w_min, w_max))
    signal_psd = np.where(power > SIGNAL_THRESHOLD * noise_psd, power - noise_psd, 0.0)
    df = frequencies[1] - frequencies[0]
    # The band, widened by the half-width of the Kaiser window's main lobe, which spreads the
    # power of a frequency over its neighbours.
    bandwidth = _bandwidth(frequencies, signal_psd) + MAIN_LOBE * df
    in_band = frequencies <= bandwidth * (1 + 1e-9)
    # Inside the band: the motion (S) and the white noise (N0); above it, all the measured power
    # disturbs the estimate of the motion's derivative (noise, quantisation patterns, vibrations).
    disturbance = np.where(in_band, noise_psd, np.maximum(power, noise_psd))
    target = (2j * np.pi * frequencies) ** derivative
    nfft = 2 * (frequencies.shape[0] - 1)
    errors = np.empty(candidates.shape[0])
    for i, w in enumerate(candidates):
        c = _coefficients(int(w), order, derivative) / step**derivative
        kernel = np.zeros(nfft)
        kernel[(-(np.arange(w) - w // 2)) % nfft] = c
        response = np.fft.rfft(kernel)
        bias = float(np.sum((np.abs(response - target) ** 2 * signal_psd)[in_band]))
        noise = float(np.sum(np.abs(response) ** 2 * disturbance))
        errors[i] = math.sqrt((bias + noise) * df)
    best = int(np.argmin(errors))
    return WindowChoice(
        window=int(candidates[best]),
        error=float(errors[best]),
        noise=math.sqrt(noise_psd / (2.0 * step)),
        bandwidth=float(bandwidth),
        candidates=candidates,
        errors=errors,
    )


@functools.lru_cache(maxsize=4096)
def _coefficients(window: int, order: int, derivative: int) -> np.ndarray:
    """Savitzky–Golay coefficients ``(window,)`` of the ``derivative`` at the centre, for a unit step.

    The same as ``scipy.signal.savgol_coeffs(window, order, deriv=derivative, use="dot")``,
    computed on the abscissae scaled to ``[-1, 1]`` (a well-conditioned 5 x 5 system instead
    of a least-squares problem per window): microseconds, and no rounding growth for the long
    windows of fast logs. Read-only: the cache shares it.
    """
    m = window // 2
    x = np.arange(-m, m + 1) / max(m, 1)
    vandermonde = x[:, None] ** np.arange(order + 1)[None, :]
    rows = np.linalg.solve(vandermonde.T @ vandermonde, vandermonde.T)  # (order + 1, window)
    c = math.factorial(derivative) * rows[derivative] / max(m, 1) ** derivative
    c.flags.writeable = False
    return c


def _bandwidth(frequencies: np.ndarray, signal_psd: np.ndarray) -> float:
    """The frequency below which ``1 - BAND_FRACTION`` of the signal's variance lies."""
    total = float(signal_psd.sum())
    if total <= 0:
        return float(frequencies[1])
    cumulative = np.cumsum(signal_psd) / total
    return float(frequencies[min(int(np.searchsorted(cumulative, 1.0 - BAND_FRACTION)), frequencies.shape[0] - 1)])


def _spectrum(pieces, step: float, segment: int):
    """One-sided PSD of the signal, ``(F,)`` frequencies and powers, and its noise floor."""
    from scipy import signal

    total, weight = None, 0
    for piece in pieces:
        if piece.shape[0] - 2 < segment:
            continue
        z = np.diff(piece, 2)
        frequencies, pz = signal.welch(z, fs=1.0 / step, window=SPECTRUM_WINDOW, nperseg=segment, detrend="constant")
        count = max(1, (z.shape[0] - segment) // (segment // 2) + 1)
        total = pz * count if total is None else total + pz * count
        weight += count
    pz = total / weight
    transfer = (2.0 - 2.0 * np.cos(2 * np.pi * frequencies * step)) ** 2
    power = np.zeros_like(pz)
    power[1:] = pz[1:] / transfer[1:]
    nyquist = 0.5 / step
    band = (frequencies >= NOISE_BAND[0] * nyquist) & (frequencies <= NOISE_BAND[1] * nyquist)
    noise = float(np.median(power[band])) if band.any() else float(np.median(power[1:]))
    # The median of an average of `weight` periodograms is (1 - 2 / 9 nu)^3 times its mean,
    # nu = 2 weight degrees of freedom (Wilson-Hilferty); correct it.
    nu = 2.0 * weight
    return frequencies, power, noise / (1.0 - 2.0 / (9.0 * nu)) ** 3


# -------------------------------------------------------------- import


def import_csv(
    paths,
    *,
    time,
    q,
    qd=None,
    tau,
    angular=False,
    time_scale: float = 1.0,
    delimiter: str | None = None,
    step: float | None = None,
    max_gap: float | None = None,
    window: int | None = None,
    order: int = DEFAULT_ORDER,
    trim: bool = True,
    velocity: str = "q",
) -> ImportResult:
    """Read CSV logs into a :class:`lnn.Dataset`, with a report of what was done.

    Each file becomes one or more trajectories (split at gaps); see
    :mod:`lnn.logs` for every step and the rules behind the defaults.

    Parameters
    ----------
    paths : str, os.PathLike or sequence of them
        The CSV files; several files are several trajectories.
    time : str or int
        The time column (its name in the header, or its 0-based index).
    q : sequence of str or int (or one of them)
        The ``n`` position columns.
    qd : sequence of str or int, optional
        ``n`` measured velocity columns: compared with the derivative of the
        positions (the report's ``velocity_lag`` and ``velocity_mismatch``),
        and used for ``qd`` when ``velocity="measured"``.
    tau : sequence of str or int
        The ``n`` generalized-force columns.
    angular : bool or sequence of bool
        Which coordinates are angles (one bool for all, or ``n``). The default
        False treats every coordinate as unbounded, which is right for any
        log whose angles do not wrap (and for prismatic joints); True marks
        angles that may wrap (they are unwrapped here, and models may use
        ``sin``/``cos`` features of them). It is required knowledge about the
        robot that the log does not carry, so nothing is guessed.
    time_scale : float
        Seconds per unit of the time column (1e-3 for milliseconds, 1e-9
        for nanosecond stamps). The dataset's times start at 0 at each
        file's first sample.
    delimiter : str, optional
        Column separator; default: sniffed from the first line.
    step : float, optional
        Step of the uniform grid (s); default: the files' nominal step (see
        :mod:`lnn.logs`).
    max_gap : float, optional
        Holes longer than this (s) split a log; default ``max(3 h, W h / 4)``.
    window : int, optional
        Odd Savitzky–Golay window (samples) for ``qd`` and ``qdd`` of every
        coordinate; default: per coordinate, :func:`choose_window`.
    order : int
        Degree of the Savitzky–Golay polynomials (at least 2).
    trim : bool
        Cut half a window at each end of each piece.
    velocity : {"q", "measured"}
        Where ``qd`` comes from (``"measured"`` needs ``qd=`` columns).

    Returns
    -------
    ImportResult
        ``dataset`` (``t (N,)``, ``q, qd, qdd, tau (N, n)``, trajectory ids
        numbered through the files in order, ``dt`` the step when all files
        share it, ``derivative_span`` the widest window's span, energy
        unknown) and ``report`` (:class:`ImportReport`).

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a missing column, a non-numeric or non-finite cell, time going
        backwards, a log too short for the derivative window, or a bad
        argument; the message names the file, the line, the column or the
        argument, and what was received.
    """
    from lnn.data import Dataset

    files = _paths(paths)
    time_col = _column_spec("time", time, single=True)
    q_cols = _column_spec("q", q)
    tau_cols = _column_spec("tau", tau)
    qd_cols = None if qd is None else _column_spec("qd", qd)
    n = len(q_cols)
    if len(tau_cols) != n:
        raise ValueError(f"tau must name {n} columns like q ({q_cols}); got {len(tau_cols)}: {tau_cols}")
    if qd_cols is not None and len(qd_cols) != n:
        raise ValueError(f"qd must name {n} columns like q ({q_cols}); got {len(qd_cols)}: {qd_cols}")
    if velocity not in _VELOCITY:
        raise ValueError(f"velocity must be 'q' or 'measured'; got {velocity!r}")
    if velocity == "measured" and qd_cols is None:
        raise ValueError("velocity='measured' needs the measured velocity columns (qd=...)")
    angular = _angular(angular, n)
    time_scale = _positive("time_scale", time_scale)
    step = None if step is None else _positive("step", step)
    max_gap = None if max_gap is None else _positive("max_gap", max_gap)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 2:
        raise ValueError(f"order must be an integer >= 2; got {order!r}")
    order = int(order)
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window % 2 == 0 or window <= order:
            raise ValueError(f"window must be an odd integer > order ({order}); got {window!r}")
        window = int(window)

    logs = []
    for path in files:
        columns = [time_col, *q_cols, *tau_cols, *(qd_cols or [])]
        table, names = _read_table(path, columns, delimiter=delimiter)
        logs.append(
            _clean(path, table, names, n=n, time_scale=time_scale, measured=qd_cols is not None, angular=angular)
        )
    steps = [log["nominal_step"] for log in logs]
    if step is None:
        common = float(np.median(steps))
        same = all(abs(s - common) <= COMMON_STEP_TOLERANCE * common for s in steps)
    reports, parts = [], []
    next_id = 0
    for log in logs:
        h = step if step is not None else (common if same else log["nominal_step"])
        part, report = _import_one(
            log, h, n=n, max_gap=max_gap, window=window, order=order, trim=trim, velocity=velocity, first_id=next_id
        )
        next_id += len(report.trajectories)
        parts.append(part)
        reports.append(report)
    stacked = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    grid_steps = {r.step for r in reports}
    span = max(max(*r.window_qd, *r.window_qdd) * r.step for r in reports)
    dataset = Dataset(
        t=stacked["t"],
        q=stacked["q"],
        qd=stacked["qd"],
        qdd=stacked["qdd"],
        tau=stacked["tau"],
        trajectory=stacked["trajectory"],
        angular=angular,
        dt=grid_steps.pop() if len(grid_steps) == 1 else math.nan,
        derivative_span=span,
    )
    return ImportResult(dataset=dataset, report=ImportReport(files=tuple(reports), order=order, velocity=velocity))


# ------------------------------------------------------------ the steps


def _import_one(log: dict, h: float, *, n: int, max_gap, window, order, trim, velocity, first_id: int):
    """Segment, resample and differentiate one cleaned log; its arrays and :class:`FileReport`."""
    path, t = log["path"], log["t"]
    raw_steps = np.diff(t)
    # Provisional pieces (split at 20 steps, or max_gap) to measure the spectrum and choose the
    # windows: a log whose stamps jump by several steps now and then must still be long pieces.
    provisional = max_gap if max_gap is not None else PROVISIONAL_GAP_STEPS * h
    pieces = _pieces(t, provisional)
    grids = [_resample(t, log, rows, h) for rows in pieces]
    usable = [g for g in grids if g["t"].shape[0] >= order + 3]
    if not usable:
        longest = max(g["t"].shape[0] for g in grids)
        raise ValueError(
            f"{path}: the log is too short for a derivative window: its longest piece between "
            f"gaps has {longest} samples at step {h:.4g} s, and a Savitzky-Golay filter of order "
            f"{order} needs at least {order + 3}"
        )
    nan = (math.nan,) * n
    if window is None:
        choice_qdd = [choose_window([g["q"][:, j] for g in usable], h, derivative=2, order=order) for j in range(n)]
        source = "qd" if velocity == "measured" else "q"
        choice_qd = [
            choose_window(
                [g[source][:, j] for g in usable], h, derivative=0 if velocity == "measured" else 1, order=order
            )
            for j in range(n)
        ]
        w_qdd = tuple(c.window for c in choice_qdd)
        w_qd = tuple(c.window for c in choice_qd)
        err_qdd = tuple(c.error for c in choice_qdd)
        err_qd = tuple(c.error for c in choice_qd)
        noise = tuple(c.noise for c in choice_qdd)
    else:
        w_qd = w_qdd = (window,) * n
        err_qd = err_qdd = nan
        noise = tuple(
            choose_window([g["q"][:, j] for g in usable], h, derivative=2, order=order, max_window=order + 3).noise
            for j in range(n)
        )
    threshold = max_gap if max_gap is not None else max(MIN_GAP_STEPS * h, GAP_WINDOW_FRACTION * min(w_qdd) * h)
    pieces = _pieces(t, threshold)
    widest = max(max(w_qd), max(w_qdd))
    cut = widest // 2 if trim else 0
    out = {k: [] for k in ("t", "q", "qd", "qdd", "tau", "trajectory")}
    ids, dropped, trimmed, resampled = [], 0, 0, False
    lags, mismatches = [], []
    for rows in pieces:
        grid = _resample(t, log, rows, h)
        T = grid["t"].shape[0]
        if T < widest + 2 * cut or T < widest:
            dropped += 1
            continue
        resampled = resampled or grid["resampled"]
        qd, qdd = _derivatives(grid, h, w_qd, w_qdd, order=order, velocity=velocity)
        if log["measured"]:
            lag, mismatch = _velocity_check(grid, h, w_qd, order=order)
            lags.append(lag)
            mismatches.append(mismatch)
        keep = slice(cut, T - cut)
        trimmed += 2 * cut
        tid = first_id + len(ids)
        ids.append(tid)
        out["t"].append(grid["t"][keep])
        out["q"].append(grid["q"][keep])
        out["qd"].append(qd[keep])
        out["qdd"].append(qdd[keep])
        out["tau"].append(grid["tau"][keep])
        out["trajectory"].append(np.full(T - 2 * cut, tid, dtype=np.int64))
    if not ids:
        longest = max(rows.shape[0] for rows in pieces)
        raise ValueError(
            f"{path}: the log is too short for the derivative window: its longest piece between "
            f"gaps has about {longest} samples, and the window is {widest} samples "
            f"(plus {cut} trimmed at each end)" + ("" if window is None else f" (window={window})")
        )
    holes = raw_steps[raw_steps > 1.5 * h]
    bridged = holes[holes <= threshold]
    gaps = tuple(
        Gap(time=float(t[i] + log["t0"]), duration=float(raw_steps[i])) for i in np.flatnonzero(raw_steps > threshold)
    )
    within = np.concatenate([np.diff(t[rows]) for rows in pieces if rows.shape[0] > 1] or [[h]])
    report = FileReport(
        path=path,
        rows=log["rows"],
        repeated=log["repeated"],
        identical=log["identical"],
        gaps=gaps,
        bridged=int(bridged.shape[0]),
        longest_bridged=float(bridged.max()) if bridged.size else 0.0,
        max_gap=float(threshold),
        step=float(h),
        median_step=float(log["median_step"]),
        jitter=float(np.abs(within - h).max() / h),
        resampled=bool(resampled),
        noise=noise,
        window_qd=w_qd,
        window_qdd=w_qdd,
        error_qd=err_qd,
        error_qdd=err_qdd,
        velocity_lag=tuple(np.mean(lags, axis=0).tolist()) if lags else (),
        velocity_mismatch=tuple(np.mean(mismatches, axis=0).tolist()) if mismatches else (),
        trajectories=tuple(ids),
        dropped_pieces=dropped,
        trimmed=trimmed,
        samples=int(sum(a.shape[0] for a in out["t"])),
    )
    return {k: np.concatenate(v) for k, v in out.items()}, report


def _pieces(t: np.ndarray, threshold: float) -> list[np.ndarray]:
    """Row indices of the runs of ``t (N,)`` between steps longer than ``threshold``."""
    cuts = np.flatnonzero(np.diff(t) > threshold) + 1
    return np.split(np.arange(t.shape[0]), cuts)


def _resample(t: np.ndarray, log: dict, rows: np.ndarray, h: float) -> dict:
    """One piece on the uniform grid ``t0 + k h``: cubic splines for q (and qd), linear for tau."""
    from scipy.interpolate import CubicSpline

    ts = t[rows]
    count = int(math.floor((ts[-1] - ts[0]) / h * (1 + 1e-12) + 1e-9)) + 1
    grid = ts[0] + h * np.arange(count)
    snapped = count == ts.shape[0] and np.abs(ts - grid).max() <= SNAP_TOLERANCE * h
    result = {"t": grid, "resampled": not snapped}
    for name in ("q", "qd", "tau"):
        values = log.get(name)
        if values is None:
            continue
        values = values[rows]
        if snapped:
            result[name] = values.copy()
        elif name == "tau" or ts.shape[0] < 4:
            result[name] = np.column_stack([np.interp(grid, ts, values[:, j]) for j in range(values.shape[1])])
        else:
            result[name] = CubicSpline(ts, values, axis=0)(grid)
    return result


def _derivatives(grid: dict, h: float, w_qd, w_qdd, *, order: int, velocity: str):
    """``qd, qdd (T, n)`` of one resampled piece by Savitzky–Golay filters, window per coordinate."""
    from scipy.signal import savgol_filter

    # The filters are exact for straight lines, so one is taken out first: with it go the large
    # values (angles of many turns) that the rounding of long windows' coefficients would amplify.
    T = grid["q"].shape[0]
    x = np.arange(T) - 0.5 * (T - 1)
    slope = (x @ grid["q"]) / (x @ x)
    q = grid["q"] - grid["q"].mean(axis=0) - x[:, None] * slope
    qd, qdd = np.empty_like(q), np.empty_like(q)
    for j in range(q.shape[1]):
        if velocity == "measured":
            qd[:, j] = savgol_filter(grid["qd"][:, j], w_qd[j], order, deriv=0, mode="interp")
        else:
            qd[:, j] = savgol_filter(q[:, j], w_qd[j], order, deriv=1, delta=h, mode="interp") + slope[j] / h
        qdd[:, j] = savgol_filter(q[:, j], w_qdd[j], order, deriv=2, delta=h, mode="interp")
    return qd, qdd


def _velocity_check(grid: dict, h: float, w_qd, *, order: int):
    """Lag (s) and relative RMS mismatch of the measured velocities against ``d q / dt``, per coordinate."""
    from scipy.signal import savgol_filter

    lags, mismatches = [], []
    for j in range(grid["q"].shape[1]):
        w = w_qd[j]
        derived = savgol_filter(grid["q"][:, j], w, order, deriv=1, delta=h, mode="interp")
        measured = savgol_filter(grid["qd"][:, j], w, order, deriv=0, mode="interp")
        m = w // 2 + 10
        if derived.shape[0] <= 2 * m + 1:
            lags.append(math.nan)
            mismatches.append(math.nan)
            continue
        core = slice(m, derived.shape[0] - m)
        shifts = np.arange(-10, 11)
        cost = np.array([np.mean((derived[m - s : derived.shape[0] - m - s] - measured[core]) ** 2) for s in shifts])
        k = int(np.argmin(cost))
        lag = float(shifts[k])
        if 0 < k < len(shifts) - 1:  # parabolic refinement of the minimum
            a, b, c = cost[k - 1], cost[k], cost[k + 1]
            denominator = a - 2 * b + c
            if denominator > 0:
                lag += 0.5 * (a - c) / denominator
        scale = math.sqrt(float(np.mean(derived[core] ** 2)))
        lags.append(lag * h)
        mismatches.append(math.sqrt(cost[shifts == 0][0]) / scale if scale > 0 else math.nan)
    return lags, mismatches


def _clean(
    path: str, table: np.ndarray, names: list[str], *, n: int, time_scale: float, measured: bool, angular: tuple
) -> dict:
    """Check the time column, drop repeated samples, unwrap angles; the log as arrays."""
    t_raw = table[:, 0] * time_scale
    rows = t_raw.shape[0]
    steps = np.diff(t_raw)
    backwards = np.flatnonzero(steps < 0)
    if backwards.size:
        i = int(backwards[0])
        raise ValueError(
            f"{path}: the time column {names[0]!r} goes backwards at data row {i + 2} "
            f"({table[i, 0]!r} then {table[i + 1, 0]!r}; {backwards.size} such step(s)); sort the "
            f"log or split it into files"
        )
    repeated = np.concatenate([[False], steps == 0])
    # A repeated row is identical when it equals the last kept row in every column read.
    kept_index = np.maximum.accumulate(np.where(~repeated, np.arange(rows), 0))
    identical = int(np.sum(repeated & np.all(table == table[kept_index], axis=1)))
    keep = ~repeated
    table = table[keep]
    t = t_raw[keep]
    if t.shape[0] < 2:
        raise ValueError(f"{path}: the log is too short: {t.shape[0]} distinct time stamp(s) in {rows} row(s)")
    t0 = float(t[0])
    q = table[:, 1 : 1 + n].copy()
    tau = table[:, 1 + n : 1 + 2 * n].copy()
    qd = table[:, 1 + 2 * n : 1 + 3 * n].copy() if measured else None
    for j in range(n):
        if angular[j]:
            q[:, j] = np.unwrap(q[:, j])
    return {
        "path": path,
        "t": t - t0,
        "t0": t0,
        "q": q,
        "qd": qd,
        "tau": tau,
        "rows": rows,
        "repeated": int(repeated.sum()),
        "identical": identical,
        "measured": measured,
        "median_step": float(np.median(np.diff(t))),
        "nominal_step": _nominal_step(t),
    }


def _nominal_step(t: np.ndarray) -> float:
    """The mean of the steps of ``t (N,)`` within 0.5-1.5 times their median.

    Under jitter this is a far more precise estimate of the logger's period
    than the median (the jitter averages out), and holes do not bias it.
    """
    steps = np.diff(t)
    median = float(np.median(steps))
    regular = steps[(steps >= 0.5 * median) & (steps <= 1.5 * median)]
    return float(regular.mean()) if regular.size else median


# ------------------------------------------------------------ reading


def _read_table(path: str, columns: list, *, delimiter: str | None):
    """The ``columns`` of a CSV file as floats, ``(rows, len(columns))``, and their names."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such log file: {path!r}")
    try:
        with open(path, newline="") as handle:
            first = handle.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the file: {exc}") from exc
    if not first.strip():
        raise ValueError(f"{path}: the file is empty (no header or data on its first line)")
    sep = delimiter if delimiter is not None else _sniff(first)
    cells = _split(first.lstrip("#"), sep)
    header = not all(_is_number(cell) for cell in cells)
    width = len(cells)
    names = [cell.strip() for cell in cells] if header else [str(i) for i in range(width)]
    indices = []
    for spec in columns:
        if isinstance(spec, str):
            if not header:
                raise ValueError(
                    f"{path}: the file has no header row, so column {spec!r} cannot be "
                    f"found by name; give 0-based column indices"
                )
            if spec not in names:
                raise ValueError(f"{path}: no column named {spec!r}; the columns are: {', '.join(names)}")
            indices.append(names.index(spec))
        else:
            if not 0 <= spec < width:
                raise ValueError(
                    f"{path}: column index {spec} is out of range: the file has {width} columns (0 to {width - 1})"
                )
            indices.append(spec)
    try:
        table = np.loadtxt(
            path,
            delimiter=sep if sep.strip() else None,
            skiprows=int(header),
            usecols=indices,
            ndmin=2,
            dtype=np.float64,
            comments=None,
            quotechar='"',
        )
    except ValueError:
        _locate_bad_cell(path, sep, indices, names, header)
        raise
    if table.shape[0] == 0:
        raise ValueError(f"{path}: the file has no data rows")
    bad = ~np.isfinite(table)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"{path}: line {row + 1 + int(header)}, column {names[indices[col]]!r}: "
            f"the value {float(table[row, col])} is not finite"
        )
    return table, [names[i] for i in indices]


def _locate_bad_cell(path, sep, indices, names, header) -> None:
    """Raise a ValueError naming the first cell of ``indices`` that is not a number."""
    with open(path, newline="") as handle:
        reader = csv.reader(handle, delimiter=sep) if sep.strip() else (line.split() for line in handle)
        for line, cells in enumerate(reader, start=1):
            if line == 1 and header:
                continue
            if not cells:
                raise ValueError(f"{path}: line {line} is empty")
            for i in indices:
                if i >= len(cells):
                    raise ValueError(
                        f"{path}: line {line} has {len(cells)} cells; column {names[i]!r} (index {i}) is missing"
                    )
                if not _is_number(cells[i]):
                    raise ValueError(f"{path}: line {line}, column {names[i]!r}: cannot read {cells[i]!r} as a number")


def _sniff(line: str) -> str:
    for candidate in (",", ";", "\t"):
        if candidate in line:
            return candidate
    return " "


def _split(line: str, sep: str) -> list[str]:
    line = line.rstrip("\r\n")
    if not sep.strip():
        return line.split()
    return next(csv.reader([line], delimiter=sep))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------ arguments


def _paths(paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    try:
        files = [os.fspath(p) for p in paths]
    except TypeError as exc:
        raise TypeError(f"paths must be a path or a sequence of paths; got {paths!r}") from exc
    if not files:
        raise ValueError("paths must name at least one CSV file; got none")
    return [str(Path(f)) for f in files]


def _column_spec(name: str, value, *, single: bool = False):
    """A column spec: a name (str) or 0-based index (int), or a list of them."""

    def one(item):
        if isinstance(item, bool) or not isinstance(item, (str, int, np.integer)):
            raise TypeError(f"{name} must name columns by header name (str) or 0-based index (int); got {item!r}")
        if isinstance(item, str) and not item.strip():
            raise ValueError(f"{name} has an empty column name")
        if not isinstance(item, str) and item < 0:
            raise ValueError(f"{name}: column indices are 0-based and >= 0; got {item!r}")
        return item.strip() if isinstance(item, str) else int(item)

    if single:
        if isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be one column (a name or an index); got {value!r}")
        return one(value)
    items = [value] if isinstance(value, (str, int, np.integer)) else list(value)
    if not items:
        raise ValueError(f"{name} must name at least one column; got {value!r}")
    return [one(item) for item in items]


def _angular(angular, n: int) -> tuple:
    if isinstance(angular, (bool, np.bool_)):
        return (bool(angular),) * n
    try:
        values = tuple(angular)
    except TypeError:
        raise TypeError(f"angular must be a bool or {n} bools; got {angular!r}") from None
    if len(values) != n or not all(isinstance(v, (bool, np.bool_)) for v in values):
        raise ValueError(f"angular must be a bool or {n} bools (one per q column); got {angular!r}")
    return tuple(bool(v) for v in values)


def _positive(name: str, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)
