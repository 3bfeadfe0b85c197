"""What the import of measured logs did, file by file: :class:`FileReport`, :class:`ImportReport`."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["FileReport", "Gap", "ImportReport"]


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
class FileReport:
    """What the import (:func:`lnn.logs.import_csv`, :func:`lnn.logs.import_rosbag`) did to one file.

    Attributes
    ----------
    path : str
        The file (or bag).
    rows : int
        Data rows (messages) read.
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
        The spectral rule's estimated RMS errors of ``qd`` and ``qdd`` with
        them (NaN when the windows were given or chosen by the torques).
    velocity_lag : tuple of float
        Lag (s) of the measured velocities behind the derivative of the
        positions, per coordinate (empty without measured velocities).
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
    held : int
        Rows that repeat the previous row's measurement (every column read
        identical) under a later time stamp: the logger ran faster than the
        sensors updated. Not new measurements, so not used as samples, and
        not holes either (see :mod:`lnn.ingest`). Counted apart from
        ``repeated`` (equal time stamps).
    torque_lag : tuple of float
        Estimated lag (s) of each torque column behind the positions (the
        torque logged at ``t`` was applied at ``t - lag``); NaN where it
        could not be estimated. See :func:`lnn.ingest.estimate_torque_lag`.
    torque_lag_error : tuple of float
        Standard error (s) of each estimate, from its spread over blocks of
        the log; NaN when unknown.
    torque_shift : tuple of float
        The shift (s) applied to each torque column before resampling
        (zeros unless the import's ``lag`` asked for it).
    window_rule : str
        How the windows were chosen: ``"torque"`` (where the motion explains
        the torques best, :func:`lnn.ingest.choose_window_by_torque`),
        ``"spectrum"`` (from the positions alone, :func:`lnn.ingest.choose_window`),
        ``"given"``, or ``"carried"`` (another import's torque-chosen or given
        window, ``window=`` a :class:`lnn.ingest.WindowRule`).
    missing : int
        Data rows dropped because a column read was empty or NaN (a sample
        the logger missed; the hole is bridged or split like any other).
        Not counted in ``rows``.
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
    held: int = 0
    torque_lag: tuple = ()
    torque_lag_error: tuple = ()
    torque_shift: tuple = ()
    window_rule: str = "spectrum"
    missing: int = 0

    def format(self) -> str:
        """A few lines of text describing the file's import (what ``lnn import`` prints)."""

        def ints(values):
            return ",".join(str(v) for v in values)

        spans = ",".join(f"{w * self.step:.3g}" for w in self.window_qdd)
        lines = [
            f"{self.path}: {self.rows} rows"
            + (f" ({self.missing} more missed a value: dropped)" if self.missing else "")
            + f", {self.repeated} repeated samples dropped "
            f"({self.identical} identical rows), {self.held} held samples (sensors not updated) "
            f"not used, {len(self.gaps)} gap(s) split, "
            f"{self.bridged} hole(s) bridged (longest {self.longest_bridged * 1e3:.3g} ms, "
            f"max gap {self.max_gap * 1e3:.3g} ms)",
            f"  step {self.step * 1e3:.4g} ms (median {self.median_step * 1e3:.4g} ms, jitter "
            f"{self.jitter:.2%}), {'resampled' if self.resampled else 'on the grid'}; noise "
            f"{', '.join(f'{s:.2g}' for s in self.noise)}",
            f"  windows qd {ints(self.window_qd)}, qdd {ints(self.window_qdd)} samples "
            f"(qdd {spans} s; {_RULES.get(self.window_rule, self.window_rule)}); "
            f"-> {len(self.trajectories)} trajectory(ies), {self.samples} samples"
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
        if self.torque_lag:
            shifted = any(s != 0 for s in self.torque_shift)
            lines.append(
                "  tau lag behind q: "
                + ", ".join(_lag_text(lag, err) for lag, err in zip(self.torque_lag, self.torque_lag_error))
                + (
                    "; shifted by " + ", ".join(f"{s * 1e3:.3g} ms" for s in self.torque_shift)
                    if shifted
                    else " (not applied)"
                )
            )
        return "\n".join(lines)


_RULES = {
    "torque": "where the motion explains the torques best",
    "spectrum": "from the positions' spectrum",
    "given": "given",
    "carried": "another import's rule",
}


def _lag_text(lag: float, error: float) -> str:
    if math.isnan(lag):
        return "unknown"
    return f"{lag * 1e3:.3g} ms" + ("" if math.isnan(error) else f" +- {error * 1e3:.2g}")


@dataclass(frozen=True)
class ImportReport:
    """What the import did, file by file.

    Attributes
    ----------
    files : tuple of FileReport
    order : int
        Degree of the Savitzky–Golay polynomials.
    velocity : str
        Where ``qd`` came from: ``"q"`` (derivative of the positions) or
        ``"measured"`` (the measured velocities, filtered).
    torque_windows : tuple of TorqueWindow
        The torques' evidence for the windows, one per group of files
        sharing a step (:func:`lnn.ingest.choose_window_by_torque`; empty
        when the windows were given or asked of the spectral rule). A
        choice that is not :attr:`~lnn.ingest.TorqueWindow.informative` left
        the spectral rule's windows in place.
    """

    files: tuple
    order: int
    velocity: str
    torque_windows: tuple = ()

    @property
    def rows(self) -> int:
        """Data rows read, over all files."""
        return sum(f.rows for f in self.files)

    @property
    def missing(self) -> int:
        """Rows dropped for a missing value (not counted in :attr:`rows`), over all files."""
        return sum(f.missing for f in self.files)

    @property
    def repeated(self) -> int:
        """Repeated samples (equal time stamps) dropped, over all files."""
        return sum(f.repeated for f in self.files)

    @property
    def held(self) -> int:
        """Held samples (the previous measurement under a new stamp) not used, over all files."""
        return sum(f.held for f in self.files)

    @property
    def gaps(self) -> int:
        """Gaps split at, over all files."""
        return sum(len(f.gaps) for f in self.files)

    @property
    def torque_lag(self) -> tuple:
        """The torque lag (s) per joint over all files (a random-effects mean of the files' estimates).

        Each file's estimate is weighted by ``1 / (error^2 + s^2)``, with ``s``
        the spread between the files beyond their own errors
        (:attr:`torque_lag_spread`; DerSimonian and Laird's estimate): a lag
        that is a property of the robot should not change from log to log,
        and where the files disagree, their spread, not the most confident
        file, decides. NaN for a joint without an estimate in any file.
        """
        return tuple(mean for mean, _, _ in self._pooled_lags())

    @property
    def torque_lag_error(self) -> tuple:
        """Standard error (s) of :attr:`torque_lag` per joint (including the spread between the files)."""
        return tuple(error for _, error, _ in self._pooled_lags())

    @property
    def torque_lag_spread(self) -> tuple:
        """Standard deviation (s) of the lag between the files beyond their own errors, per joint (0: they agree)."""
        return tuple(spread for _, _, spread in self._pooled_lags())

    def _pooled_lags(self) -> list:
        """``(mean, error, spread)`` per joint, in seconds (see :attr:`torque_lag`)."""
        n = max((len(f.torque_lag) for f in self.files), default=0)
        pooled = []
        for j in range(n):
            pairs = [
                (f.torque_lag[j], max(f.torque_lag_error[j], 1e-12))
                for f in self.files
                if len(f.torque_lag) > j and math.isfinite(f.torque_lag[j]) and math.isfinite(f.torque_lag_error[j])
            ]
            if not pairs:
                pooled.append((math.nan, math.nan, math.nan))
                continue
            lags = [lag for lag, _ in pairs]
            weights = [1.0 / error**2 for _, error in pairs]
            fixed = sum(w * x for w, x in zip(weights, lags)) / sum(weights)
            q = sum(w * (x - fixed) ** 2 for w, x in zip(weights, lags))
            c = sum(weights) - sum(w * w for w in weights) / sum(weights)
            spread2 = max(0.0, (q - (len(pairs) - 1)) / c) if c > 0 else 0.0
            weights = [1.0 / (error**2 + spread2) for _, error in pairs]
            mean = sum(w * x for w, x in zip(weights, lags)) / sum(weights)
            pooled.append((mean, 1.0 / math.sqrt(sum(weights)), math.sqrt(spread2)))
        return pooled

    @property
    def samples(self) -> int:
        """Samples of the dataset."""
        return sum(f.samples for f in self.files)

    def format(self) -> str:
        """The report as text, one block per file and a total line."""
        trajectories = sum(len(f.trajectories) for f in self.files)
        total = (
            f"total: {self.rows} rows"
            + (f" ({self.missing} more missed a value: dropped)" if self.missing else "")
            + f" -> {trajectories} trajectory(ies), {self.samples} "
            f"samples; {self.repeated} repeated samples dropped, {self.held} held samples not used, "
            f"{self.gaps} gap(s); Savitzky-Golay order {self.order}, qd from "
            f"{'the positions' if self.velocity == 'q' else 'the measured velocities'}"
        )
        lines = [f.format() for f in self.files] + [total]
        for choice in self.torque_windows:
            explained = ", ".join(f"{share:.1%}" for share in choice.explained)
            scores = choice.score
            lines.append(
                f"window by the torques: {choice.window} samples; the motion explains {explained} of "
                f"the torques' variance ({choice.rows} rows, {choice.features} features); residual "
                f"relative to the best: "
                + ", ".join(f"{w} {s:.3g}" for w, s in zip(choice.candidates, scores) if s < 1.5)
                + ("" if choice.informative else "; not informative: the spectral rule's windows kept")
            )
        if len(self.files) > 1 and self.torque_lag:
            lines.append(
                "tau lag behind q over the files: "
                + ", ".join(
                    _lag_text(lag, err)
                    + ("" if math.isnan(spread) else f" (spread between files {spread * 1e3:.2g} ms)")
                    for lag, err, spread in self._pooled_lags()
                )
            )
        return "\n".join(lines)
