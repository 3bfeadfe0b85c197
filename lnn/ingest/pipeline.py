"""The import's pipeline: cleaned logs -> segments -> uniform grid -> ``qd``, ``qdd`` (:func:`process`).

numpy and scipy only: the arrays it returns (:class:`ImportedLogs`) become a
:class:`lnn.Dataset` in :mod:`lnn.data`. Every source (CSV files, ROS bags)
ends here, so the cleaning is the same whatever the file format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lnn.ingest.clean import CleanLog, RawLog, clean
from lnn.ingest.consistency import choose_window_by_torque, window_at
from lnn.ingest.lag import estimate_torque_lag
from lnn.ingest.options import WINDOW_RULE_SPECTRUM, Cleaning, WindowRule
from lnn.ingest.report import FileReport, Gap, ImportReport
from lnn.ingest.windows import _detrended, _smallest_window, choose_window, savgol

__all__ = ["ImportedLogs", "process"]

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
#: The torque lag is searched up to this fraction of the narrowest acceleration window (at least 3 samples).
LAG_WINDOW_FRACTION = 0.25
#: The torques' window is searched up to this multiple of the spectral rule's widest window ...
TORQUE_WINDOW_FACTOR = 4
#: ... and this fraction of the longest piece (the windows are compared away from the pieces' ends).
TORQUE_WINDOW_PIECE = 0.25


@dataclass(frozen=True, eq=False)
class ImportedLogs:
    """The arrays of imported logs, ready to become a :class:`lnn.Dataset` (:meth:`lnn.Dataset.from_imported`).

    Attributes
    ----------
    t : ndarray, shape ``(N,)``
        Sample times (s), from 0 at each file's first sample.
    q, qd, qdd, tau : ndarray, shape ``(N, n)``
        Positions, velocities, accelerations, generalized forces.
    trajectory : ndarray of int, shape ``(N,)``
        Trajectory ids, numbered through the files in order.
    angular : tuple of bool, length ``n``
    dt : float
        The grid's step when all files share it, else NaN.
    derivative_span : float
        The widest Savitzky–Golay window's span (s).
    joint_names : tuple of str or None
        Names of the ``n`` joints, when the source names them.
    report : ImportReport
        What was done, file by file.
    window_rule : WindowRule or None
        How the windows were chosen, to read more logs the same way
        (``window=logs.window_rule``).
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    trajectory: np.ndarray
    angular: tuple
    dt: float
    derivative_span: float
    joint_names: tuple | None
    report: ImportReport
    window_rule: WindowRule | None = None


@dataclass(frozen=True)
class _Windows:
    """Savitzky–Golay windows (samples) per coordinate, their estimated errors, the noise and the rule."""

    qd: tuple
    qdd: tuple
    error_qd: tuple
    error_qdd: tuple
    noise: tuple
    rule: str = "spectrum"


def process(raws: Sequence[RawLog], cleaning: Cleaning, *, joint_names: tuple | None = None) -> ImportedLogs:
    """Clean, segment, resample and differentiate logs; the arrays of the dataset and the report.

    Parameters
    ----------
    raws : sequence of RawLog
        The logs as read (each ``t (N_i,)`` non-decreasing, ``q, tau (N_i, n)``).
    cleaning : Cleaning
        The options.
    joint_names : tuple of str, optional
        Names of the ``n`` joints, passed through.

    Returns
    -------
    ImportedLogs

    Raises
    ------
    ValueError
        For an option that does not fit the logs (``angular``, ``lag``), a
        log too short for the derivative window (naming the file).
    """
    n = raws[0].q.shape[1]
    angular = cleaning.angular_flags(n)
    cleaning.torque_shift((math.nan,) * n, (math.nan,) * n, 1.0, n)  # checks the length of a per-joint lag
    logs = [clean(raw, angular=angular) for raw in raws]
    steps = [log.nominal_step for log in logs]
    common = float(np.median(steps))
    same = all(abs(s - common) <= COMMON_STEP_TOLERANCE * common for s in steps)
    steps = [cleaning.step if cleaning.step is not None else (common if same else s) for s in steps]
    windows, choices = _choose_windows(logs, steps, cleaning, n=n)
    reports, parts = [], []
    for log, h, chosen in zip(logs, steps, windows):
        first_id = sum(len(r.trajectories) for r in reports)
        part, report = _import_one(log, h, cleaning, chosen, n=n, first_id=first_id)
        parts.append(part)
        reports.append(report)
    stacked = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    grid_steps = {r.step for r in reports}
    return ImportedLogs(
        **stacked,
        angular=angular,
        dt=grid_steps.pop() if len(grid_steps) == 1 else math.nan,
        derivative_span=max(max(*r.window_qd, *r.window_qdd) * r.step for r in reports),
        joint_names=joint_names,
        report=ImportReport(
            files=tuple(reports), order=cleaning.order, velocity=cleaning.velocity, torque_windows=choices
        ),
        window_rule=_rule_of(cleaning, choices),
    )


def _rule_of(cleaning: Cleaning, choices: tuple) -> WindowRule:
    """The rule by which this import chose its windows (:class:`WindowRule`), to read more logs by it."""
    if isinstance(cleaning.window, WindowRule):
        return cleaning.window
    if isinstance(cleaning.window, int):
        return WindowRule("given", cleaning.window, order=cleaning.order)
    if cleaning.window is None and choices and choices[0].informative:
        return WindowRule("torque", choices[0].window, choices[0].step, order=cleaning.order)
    return WindowRule(WINDOW_RULE_SPECTRUM, order=cleaning.order)


def _import_one(log: CleanLog, h: float, cleaning: Cleaning, windows: _Windows, *, n: int, first_id: int):
    """Segment, resample and differentiate one cleaned log with its windows; its arrays and :class:`FileReport`."""
    t, order = log.t, cleaning.order
    raw_steps = np.diff(t)
    threshold = cleaning.max_gap
    if threshold is None:
        threshold = max(MIN_GAP_STEPS * h, GAP_WINDOW_FRACTION * min(windows.qdd) * h)
    pieces = _pieces(t, threshold)
    widest = max(max(windows.qd), max(windows.qdd))
    cut = widest // 2 if cleaning.trim else 0
    grids, dropped = [], 0
    for rows in pieces:
        grid = _resample(t, log, rows, h)
        if grid["t"].shape[0] < widest + 2 * cut:
            dropped += 1
            continue
        grid["qd_est"], grid["qdd"] = _derivatives(grid, h, windows, order=order, velocity=cleaning.velocity)
        grid["rows"] = rows
        grids.append(grid)
    if not grids:
        longest = max(rows.shape[0] for rows in pieces)
        raise ValueError(
            f"{log.path}: the log is too short for the derivative window: its longest piece between "
            f"gaps has about {longest} samples, and the window is {widest} samples "
            f"(plus {cut} trimmed at each end)" + ("" if cleaning.window is None else f" (window={cleaning.window})")
        )
    lag = estimate_torque_lag(
        *([g[k] for g in grids] for k in ("q", "qd_est", "qdd", "tau")),
        h,
        max_shift=max(3, int(LAG_WINDOW_FRACTION * min(windows.qdd))),
        skip=widest // 2,
    )
    shift = cleaning.torque_shift(lag.lag, lag.error, h, n)
    if any(s != 0 for s in shift):
        for grid in grids:
            grid["tau"] = _shifted_torque(t, log, grid["rows"], grid["t"], shift)
    out = {k: [] for k in ("t", "q", "qd", "qdd", "tau", "trajectory")}
    lags, mismatches = [], []
    for i, grid in enumerate(grids):
        if log.qd is not None:
            velocity_lag, mismatch = _velocity_check(grid, h, windows.qd, order=order)
            lags.append(velocity_lag)
            mismatches.append(mismatch)
        keep = slice(cut, grid["t"].shape[0] - cut)
        for key, source in (("t", "t"), ("q", "q"), ("qd", "qd_est"), ("qdd", "qdd"), ("tau", "tau")):
            out[key].append(grid[source][keep])
        out["trajectory"].append(np.full(out["t"][-1].shape[0], first_id + i, dtype=np.int64))
    within = np.concatenate([np.diff(t[rows]) for rows in pieces if rows.shape[0] > 1] or [[h]])
    holes = raw_steps[raw_steps > 1.5 * h]
    bridged = holes[holes <= threshold]
    report = FileReport(
        path=log.path,
        rows=log.rows,
        repeated=log.repeated,
        identical=log.identical,
        gaps=tuple(
            Gap(time=float(t[i] + log.t0), duration=float(raw_steps[i])) for i in np.flatnonzero(raw_steps > threshold)
        ),
        bridged=int(bridged.shape[0]),
        longest_bridged=float(bridged.max()) if bridged.size else 0.0,
        max_gap=float(threshold),
        step=float(h),
        median_step=log.median_step,
        jitter=float(np.abs(within - h).max() / h),
        resampled=any(g["resampled"] for g in grids),
        noise=windows.noise,
        window_qd=windows.qd,
        window_qdd=windows.qdd,
        error_qd=windows.error_qd,
        error_qdd=windows.error_qdd,
        window_rule=windows.rule,
        missing=log.missing,
        velocity_lag=tuple(np.mean(lags, axis=0).tolist()) if lags else (),
        velocity_mismatch=tuple(np.mean(mismatches, axis=0).tolist()) if mismatches else (),
        trajectories=tuple(range(first_id, first_id + len(grids))),
        dropped_pieces=dropped,
        trimmed=2 * cut * len(grids),
        samples=int(sum(a.shape[0] for a in out["t"])),
        held=log.held,
        torque_lag=tuple(lag.lag.tolist()),
        torque_lag_error=tuple(lag.error.tolist()),
        torque_shift=tuple(float(s) for s in shift),
    )
    return {k: np.concatenate(v) for k, v in out.items()}, report


def _choose_windows(logs, steps, cleaning: Cleaning, *, n: int) -> tuple[list[_Windows], tuple]:
    """The Savitzky–Golay windows of each log, and the torques' choices (:class:`lnn.ingest.TorqueWindow`).

    ``cleaning.window``: an int for every coordinate of every log; a :class:`WindowRule` the windows it
    gives at each log's step (the spectral rule where it is that rule); ``"spectrum"``: the spectral rule
    (:func:`choose_window`) per log and coordinate; None: one span for every coordinate of every
    log, chosen by the torques of all the logs pooled (:func:`choose_window_by_torque`, searched up
    to 4 times the spectral rule's widest window and a quarter of the longest piece), the spectral
    rule's windows where the torques cannot decide.
    """
    grids = [_provisional_grids(log, h, cleaning) for log, h in zip(logs, steps)]
    fixed = _rule_of(cleaning, ())  # a given window is the rule "given"; None: the torques' rule, still to run
    if fixed.window is not None:  # a given or carried window, at each log's step
        label = "carried" if isinstance(cleaning.window, WindowRule) else "given"
        windows = []
        for usable, h in zip(grids, steps):
            w = fixed.window_at(h)
            measured = cleaning.velocity == "measured" and fixed.rule == "torque"  # as the torques' own branch
            qd = _spectral_windows(usable, h, cleaning, n=n).qd if measured else (w,) * n
            noise = tuple(_noise([g["q"][:, j] for g in usable], h, cleaning.order) for j in range(n))
            nan = (math.nan,) * n
            windows.append(_Windows(qd, (w,) * n, nan, nan, noise, rule=label))
        return windows, ()
    spectral = [_spectral_windows(usable, h, cleaning, n=n) for usable, h in zip(grids, steps)]
    if cleaning.window is not None:  # the spectral rule, named or carried
        return spectral, ()
    pooled = [(g, h) for usable, h in zip(grids, steps) for g in usable]
    reference = float(np.median([h for _, h in pooled]))
    widest = max(window_at(max(*w.qd, *w.qdd), h, reference) for w, h in zip(spectral, steps))
    longest = max(window_at(g["t"].shape[0], h, reference) for g, h in pooled)
    choice = choose_window_by_torque(
        [g["q"] for g, _ in pooled],
        [g["tau"] for g, _ in pooled],
        [h for _, h in pooled],
        order=cleaning.order,
        max_window=min(TORQUE_WINDOW_FACTOR * widest, int(TORQUE_WINDOW_PIECE * longest)),
    )
    if choice is None:
        return spectral, ()
    if not choice.informative:
        return spectral, (choice,)
    windows = []
    for chosen, h in zip(spectral, steps):
        w = window_at(choice.window, choice.step, h, order=cleaning.order)
        qd = chosen.qd if cleaning.velocity == "measured" else (w,) * n
        nan = (math.nan,) * n
        windows.append(_Windows(qd, (w,) * n, nan, nan, chosen.noise, rule="torque"))
    return windows, (choice,)


def _provisional_grids(log: CleanLog, h: float, cleaning: Cleaning) -> list[dict]:
    """The log resampled in pieces split at 20 steps (or ``max_gap``), to choose the windows on.

    A log whose stamps jump by several steps now and then must still be long pieces.
    """
    order = cleaning.order
    provisional = cleaning.max_gap if cleaning.max_gap is not None else PROVISIONAL_GAP_STEPS * h
    grids = [_resample(log.t, log, rows, h) for rows in _pieces(log.t, provisional)]
    usable = [g for g in grids if g["t"].shape[0] >= _smallest_window(order)]
    if not usable:
        longest = max(g["t"].shape[0] for g in grids)
        raise ValueError(
            f"{log.path}: the log is too short for a derivative window: its longest piece between "
            f"gaps has {longest} samples at step {h:.4g} s, and a Savitzky-Golay filter of order "
            f"{order} needs at least {_smallest_window(order)}"
        )
    return usable


def _noise(pieces, h: float, order: int) -> float:
    """The white-noise standard deviation of one coordinate's positions (the spectral estimate's)."""
    return choose_window(pieces, h, derivative=2, order=order, max_window=_smallest_window(order)).noise


def _spectral_windows(usable: list[dict], h: float, cleaning: Cleaning, *, n: int) -> _Windows:
    """The spectral rule's windows of one log (:func:`choose_window` per coordinate and derivative)."""
    order = cleaning.order
    measured = cleaning.velocity == "measured"
    qdd = [choose_window([g["q"][:, j] for g in usable], h, derivative=2, order=order) for j in range(n)]
    qd = [
        choose_window(
            [g["qd" if measured else "q"][:, j] for g in usable], h, derivative=0 if measured else 1, order=order
        )
        for j in range(n)
    ]
    return _Windows(
        qd=tuple(c.window for c in qd),
        qdd=tuple(c.window for c in qdd),
        error_qd=tuple(c.error for c in qd),
        error_qdd=tuple(c.error for c in qdd),
        noise=tuple(c.noise for c in qdd),
    )


def _pieces(t: np.ndarray, threshold: float) -> list[np.ndarray]:
    """Row indices of the runs of ``t (N,)`` between steps longer than ``threshold``."""
    cuts = np.flatnonzero(np.diff(t) > threshold) + 1
    return np.split(np.arange(t.shape[0]), cuts)


def _samples(log: CleanLog, rows: np.ndarray) -> np.ndarray:
    """The rows of a piece used as samples: the fresh ones, and the piece's first and last rows."""
    use = log.fresh[rows].copy()
    use[0] = use[-1] = True
    return rows[use]


def _resample(t: np.ndarray, log: CleanLog, rows: np.ndarray, h: float) -> dict:
    """One piece on the uniform grid ``t0 + k h``: cubic splines for q (and qd), linear for tau.

    Only the piece's samples (:func:`_samples`) are interpolated: held rows
    are not measurements of their own time.
    """
    from scipy.interpolate import CubicSpline

    count = int(math.floor((t[rows[-1]] - t[rows[0]]) / h * (1 + 1e-12) + 1e-9)) + 1
    grid = t[rows[0]] + h * np.arange(count)
    rows = _samples(log, rows)
    ts = t[rows]
    snapped = count == ts.shape[0] and np.abs(ts - grid).max() <= SNAP_TOLERANCE * h
    result = {"t": grid, "resampled": not snapped}
    for name in ("q", "qd", "tau"):
        values = getattr(log, name)
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


def _shifted_torque(t: np.ndarray, log: CleanLog, rows: np.ndarray, grid: np.ndarray, shift: tuple) -> np.ndarray:
    """The torques of a piece on its grid ``(T,)``, each column's stamps moved back by its ``shift`` (s)."""
    rows = _samples(log, rows)
    return np.column_stack([np.interp(grid, t[rows] - s, log.tau[rows, j]) for j, s in enumerate(shift)])


def _derivatives(grid: dict, h: float, windows: _Windows, *, order: int, velocity: str):
    """``qd, qdd (T, n)`` of one resampled piece by Savitzky–Golay filters, window per coordinate."""
    q, slope = _detrended(grid["q"])  # the filters are exact for the straight line taken out
    qd, qdd = np.empty_like(q), np.empty_like(q)
    for j in range(q.shape[1]):
        if velocity == "measured":
            qd[:, j] = savgol(grid["qd"][:, j], windows.qd[j], order)
        else:
            qd[:, j] = savgol(q[:, j], windows.qd[j], order, 1, h) + slope[j] / h
        qdd[:, j] = savgol(q[:, j], windows.qdd[j], order, 2, h)
    return qd, qdd


def _velocity_check(grid: dict, h: float, w_qd, *, order: int):
    """Lag (s) and relative RMS mismatch of the measured velocities against ``d q / dt``, per coordinate."""
    lags, mismatches = [], []
    for j in range(grid["q"].shape[1]):
        w = w_qd[j]
        derived = savgol(grid["q"][:, j], w, order, 1, h)
        measured = savgol(grid["qd"][:, j], w, order)
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
