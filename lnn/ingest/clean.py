"""The first step of the import: one log's samples, cleaned (:func:`clean`).

Repeated time stamps are dropped, held samples (the previous measurement
under a new stamp) are marked as not new, angles are unwrapped. See
:mod:`lnn.ingest` for the rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "HOLD_LIMIT",
    "MISSING_SHARE",
    "CleanLog",
    "RawLog",
    "clean",
    "missing_rows",
    "nominal_step",
    "too_many_missing",
]

#: A run of repeated rows lasting longer than this many typical intervals between new samples is a
#: rest (the value was current all along), not a sensor that did not update: its rows are kept.
HOLD_LIMIT = 4.0


#: A log where more than this share of the rows (messages) miss a value is no log that dropped a sample now and
#: then (those rows are dropped and counted) but a table that merges streams row by row, or a joint its driver
#: does not measure: the readers refuse it by name.
MISSING_SHARE = 0.5


def missing_rows(values: np.ndarray) -> np.ndarray:
    """Which rows of ``values (N, k)`` miss a value (NaN or infinite), ``(N,)`` bool."""
    return ~np.all(np.isfinite(values), axis=1)


def too_many_missing(missing: np.ndarray) -> bool:
    """Whether more than :data:`MISSING_SHARE` of the rows miss a value (``missing`` from :func:`missing_rows`)."""
    return bool(np.count_nonzero(missing) > MISSING_SHARE * missing.size)


@dataclass(frozen=True, eq=False)
class RawLog:
    """One log as read from its file, before cleaning.

    Attributes
    ----------
    path : str
        The file (for messages).
    t : ndarray, shape ``(N,)``
        Time stamps (s), non-decreasing (the reader checks it, naming the row).
    q, tau : ndarray, shape ``(N, n)``
        Positions and generalized forces.
    qd : ndarray, shape ``(N, n)``, or None
        Measured velocities, if read.
    origin : float
        Time (s) to add to ``t`` to get the log's own clock (for the report's gap times).
    missing : int
        Rows the reader dropped because they missed a value (counted, not in ``t``).
    """

    path: str
    t: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    qd: np.ndarray | None = None
    origin: float = 0.0
    missing: int = 0


@dataclass(frozen=True, eq=False)
class CleanLog:
    """One log after :func:`clean`.

    Attributes
    ----------
    path : str
    t : ndarray, shape ``(N,)``
        Distinct time stamps (s) from 0.
    fresh : ndarray of bool, shape ``(N,)``
        Which rows are samples (new measurements, or rows of a long run of
        repeated values: a rest); the others are held rows, not used as samples.
    q, tau : ndarray, shape ``(N, n)``
        Positions (angles unwrapped) and generalized forces.
    qd : ndarray, shape ``(N, n)``, or None
        Measured velocities.
    t0 : float
        The log's clock at ``t = 0`` (s).
    rows, repeated, identical, held : int
        Rows read, rows dropped for a repeated stamp (and how many of those
        repeated every value), held rows (not used as samples).
    missing : int
        Rows the reader dropped for a missing value (not counted in ``rows``).
    median_step, nominal_step : float
        Median and nominal (:func:`nominal_step`) steps of ``t`` (s).
    """

    path: str
    t: np.ndarray
    fresh: np.ndarray
    q: np.ndarray
    tau: np.ndarray
    qd: np.ndarray | None
    t0: float
    rows: int
    repeated: int
    identical: int
    held: int
    median_step: float
    nominal_step: float
    missing: int = 0


def clean(raw: RawLog, *, angular: tuple) -> CleanLog:
    """Drop repeated stamps, mark held samples, unwrap angles.

    Parameters
    ----------
    raw : RawLog
        With ``t (N,)`` non-decreasing and ``q, tau (N, n)``.
    angular : tuple of bool, length ``n``
        Which coordinates to unwrap.

    Returns
    -------
    CleanLog

    Raises
    ------
    ValueError
        If fewer than 2 distinct time stamps remain (naming the file).
    """
    t_raw = np.asarray(raw.t, dtype=np.float64)
    columns = [raw.q, raw.tau] + ([raw.qd] if raw.qd is not None else [])
    values = np.column_stack(columns).astype(np.float64)
    rows = t_raw.shape[0]
    repeated = np.concatenate([[False], np.diff(t_raw) == 0])
    # A repeated row is identical when it equals the last kept row in every column read.
    kept_index = np.maximum.accumulate(np.where(~repeated, np.arange(rows), 0))
    identical = int(np.sum(repeated & np.all(values == values[kept_index], axis=1)))
    t, values = t_raw[~repeated], values[~repeated]
    if t.shape[0] < 2:
        raise ValueError(f"{raw.path}: the log is too short: {t.shape[0]} distinct time stamp(s) in {rows} row(s)")
    fresh = _fresh(t, np.concatenate([[False], np.all(values[1:] == values[:-1], axis=1)]))
    n = raw.q.shape[1]
    q = values[:, :n].copy()
    for j in range(n):
        if angular[j]:
            q[:, j] = np.unwrap(q[:, j])
    t0 = float(t[0])
    t = t - t0
    return CleanLog(
        path=raw.path,
        t=t,
        fresh=fresh,
        q=q,
        tau=values[:, n : 2 * n].copy(),
        qd=values[:, 2 * n :].copy() if raw.qd is not None else None,
        t0=t0 + float(raw.origin),
        rows=rows,
        repeated=int(repeated.sum()),
        identical=identical,
        held=int((~fresh).sum()),
        median_step=float(np.median(np.diff(t))),
        nominal_step=nominal_step(t),
        missing=int(raw.missing),
    )


def _fresh(t: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Rows used as samples: the new ones, and the runs of repeated rows longer than ``HOLD_LIMIT`` intervals.

    ``held (N,)`` marks the rows equal to the previous one. The typical interval is the median time
    between new rows; a run lasts from the new row before it to the new row after it (or the log's end).
    """
    fresh = ~held
    if not held.any():
        return fresh
    intervals = np.diff(t[fresh])
    typical = float(np.median(intervals)) if intervals.size else float(np.median(np.diff(t)))
    edges = np.diff(np.concatenate([[0], held.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1  # runs of held rows, inclusive
    after = np.minimum(ends + 1, t.shape[0] - 1)  # the next new row (or the last row)
    rest = t[after] - t[starts - 1] > HOLD_LIMIT * typical  # the sensors repeat the same reading
    marks = np.zeros(t.shape[0] + 1, dtype=np.int64)
    np.add.at(marks, starts[rest], 1)
    np.add.at(marks, ends[rest] + 1, -1)
    return fresh | (np.cumsum(marks)[:-1] > 0)


def nominal_step(t: np.ndarray) -> float:
    """The mean of the steps of ``t (N,)`` within 0.5-1.5 times their median.

    Under jitter this is a far more precise estimate of the logger's period
    than the median (the jitter averages out), and holes do not bias it.
    """
    steps = np.diff(t)
    median = float(np.median(steps))
    regular = steps[(steps >= 0.5 * median) & (steps <= 1.5 * median)]
    return float(regular.mean()) if regular.size else median
