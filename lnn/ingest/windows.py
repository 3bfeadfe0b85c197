"""Savitzky–Golay windows chosen from the data: :func:`choose_window` and its spectral estimate.

The rule (noise plus bias of the derivative of the motion within its band,
estimated from the measured spectrum) is in :func:`choose_window`; the
pipeline of :mod:`lnn.ingest` calls it per coordinate and derivative.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_ORDER", "WindowChoice", "choose_window", "savgol"]

#: Default polynomial degree of the Savitzky–Golay filters.
DEFAULT_ORDER = 4
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
    window's main lobe (five frequency bins) (on a real log a tenth of a
    percent of the velocity variance can spread far above the motion's band,
    so a velocity-weighted band would not be stable);
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
        If no piece has the smallest odd window's samples (``order + 2`` or
        ``order + 3``, more than ``order + 1``).
    """
    pieces = [np.asarray(p, dtype=np.float64).reshape(-1) for p in pieces]
    if derivative not in (0, 1, 2) or order <= derivative:
        raise ValueError(
            f"derivative must be 0, 1 or 2 and order > derivative; got derivative={derivative!r}, order={order!r}"
        )
    w_min = _smallest_window(order)
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


def savgol(x, window: int, order: int, derivative: int = 0, step: float = 1.0) -> np.ndarray:
    """The Savitzky–Golay filter of ``x`` along its first axis, as ``scipy.signal.savgol_filter(...,
    mode="interp")`` computes it, but exact for long windows and high orders.

    scipy's coefficients come from a least-squares fit on the unscaled
    abscissae ``-m .. m``, whose powers ``m^order`` lose the digits: the
    second derivative's coefficients are off by 60 % at order 4 and 3 201
    samples, order 5 and 801, order 6 and 401 (relative to the largest;
    order 7 at 203 samples, 120 %), windows the import chooses for fast logs
    of slow motions. Here the interior is the correlation with
    :func:`_coefficients` (abscissae scaled to ``[-1, 1]``; overlap-add FFT
    convolution), and each end, as scipy's ``"interp"`` mode does, the
    polynomial of degree ``order`` fitted to the first (last) ``window``
    samples, on the scaled abscissae (:class:`numpy.polynomial.Polynomial`).

    Parameters
    ----------
    x : array_like, shape ``(T,)`` or ``(T, k)``
        Uniformly sampled signal(s).
    window : int
        Odd window, ``order < window <= T`` samples.
    order : int
        Degree of the polynomials, at least ``derivative``.
    derivative : int
        0 (smoothing), 1 or 2.
    step : float
        Sampling step (the derivative is per unit of it).

    Returns
    -------
    ndarray, the shape of ``x``
    """
    x = np.asarray(x, dtype=np.float64)
    flat = x.ndim == 1
    y = x[:, None] if flat else x
    T = y.shape[0]
    if window % 2 != 1 or window <= order or window > T or derivative > order:
        raise ValueError(
            f"a Savitzky-Golay filter needs an odd window with order < window <= the signal's {T} samples "
            f"and derivative <= order; got window={window}, order={order}, derivative={derivative}"
        )
    m = window // 2
    out = np.empty_like(y)
    out[m : T - m] = _interior(y, window, order, derivative, step)
    abscissae = np.arange(window, dtype=np.float64)
    for rows, fitted, at in (
        (slice(0, m), slice(0, window), slice(0, m)),
        (slice(T - m, T), slice(T - window, T), slice(window - m, window)),
    ):
        for j in range(y.shape[1]):
            polynomial = np.polynomial.Polynomial.fit(abscissae, y[fitted, j], order).deriv(derivative)
            out[rows, j] = polynomial(abscissae[at]) / step**derivative
    return out[:, 0] if flat else out


def _interior(x: np.ndarray, window: int, order: int, derivative: int, step: float) -> np.ndarray:
    """The Savitzky–Golay ``derivative`` of ``x (T, k)`` at its interior samples ``window // 2 .. T - 1 -
    window // 2``, shape ``(T - window + 1, k)``: the correlation ``y[i] = sum_j c[j] x[i - window // 2 + j]``
    with :func:`_coefficients`, by overlap-add FFT convolution (``O(T log window)``, the direct sum
    ``O(T window)``)."""
    from scipy.signal import oaconvolve

    c = _coefficients(window, order, derivative) / step**derivative
    return oaconvolve(x, c[::-1, None], mode="valid", axes=0)


def _smallest_window(order: int) -> int:
    """The smallest odd Savitzky–Golay window that fits more than a polynomial of degree ``order`` (``> order + 1``)."""
    return order + 3 - order % 2


def _detrended(q: np.ndarray) -> tuple:
    """``q (T, n)`` less its mean and straight line, and the line's slope per sample ``(n,)``.

    The filters are exact for straight lines, so one is taken out first: with it go the large values
    (angles of many turns) that the rounding of long windows' coefficients would amplify. The
    derivative of the line, ``slope / step``, is added back to ``qd``.
    """
    T = q.shape[0]
    x = np.arange(T) - 0.5 * (T - 1)
    slope = (x @ q) / (x @ x)
    return q - q.mean(axis=0) - x[:, None] * slope, slope


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
