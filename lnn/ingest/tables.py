"""CSV logs in: :func:`read_csv` reads the named (or indexed) columns of each file and runs the pipeline."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np

from lnn.ingest.clean import RawLog, missing_rows, too_many_missing
from lnn.ingest.options import Cleaning, WindowRule, positive
from lnn.ingest.pipeline import ImportedLogs, process
from lnn.ingest.windows import DEFAULT_ORDER

__all__ = ["read_csv", "paths_of", "joint_names_of"]


def read_csv(
    paths,
    *,
    time,
    q,
    qd=None,
    tau,
    joints=None,
    angular=False,
    time_scale: float = 1.0,
    delimiter: str | None = None,
    step: float | None = None,
    max_gap: float | None = None,
    window: int | str | WindowRule | None = None,
    order: int = DEFAULT_ORDER,
    trim: bool = True,
    velocity: str = "q",
    lag=None,
) -> ImportedLogs:
    """Read CSV logs and clean, resample and differentiate them (the arrays of :meth:`lnn.Dataset.from_csv`).

    Parameters
    ----------
    paths, time, q, qd, tau, angular, time_scale, delimiter, step, max_gap, window, order, trim, velocity, lag
        As in :meth:`lnn.Dataset.from_csv`.
    joints : sequence of str, optional
        Names of the ``n`` joints of the ``q`` columns; default: the ``q``
        column names when ``q`` names its columns (None for indices).

    Returns
    -------
    ImportedLogs

    Raises
    ------
    FileNotFoundError, ValueError, TypeError
        As :meth:`lnn.Dataset.from_csv`.
    """
    files = paths_of(paths)
    time_col = _column_spec("time", time, single=True)
    q_cols = _column_spec("q", q)
    tau_cols = _column_spec("tau", tau)
    qd_cols = None if qd is None else _column_spec("qd", qd)
    n = len(q_cols)
    if len(tau_cols) != n:
        raise ValueError(f"tau must name {n} columns like q ({q_cols}); got {len(tau_cols)}: {tau_cols}")
    if qd_cols is not None and len(qd_cols) != n:
        raise ValueError(f"qd must name {n} columns like q ({q_cols}); got {len(qd_cols)}: {qd_cols}")
    cleaning = Cleaning(
        angular=angular, step=step, max_gap=max_gap, window=window, order=order, trim=trim, velocity=velocity, lag=lag
    )
    if velocity == "measured" and qd_cols is None:
        raise ValueError("velocity='measured' needs the measured velocity columns (qd=...)")
    cleaning.angular_flags(n)
    time_scale = positive("time_scale", time_scale)
    default_names = tuple(q_cols) if all(isinstance(c, str) for c in q_cols) else None
    names = joint_names_of(joints, n, default=default_names)
    raws = []
    for path in files:
        table, columns, header = _read_table(
            path, [time_col, *q_cols, *tau_cols, *(qd_cols or [])], delimiter=delimiter
        )
        table, missing = _complete_rows(path, table, header)
        _check_order(path, table[:, 0], columns[0])
        raws.append(
            RawLog(
                path=path,
                t=table[:, 0] * time_scale,
                q=table[:, 1 : 1 + n],
                tau=table[:, 1 + n : 1 + 2 * n],
                qd=table[:, 1 + 2 * n : 1 + 3 * n] if qd_cols is not None else None,
                missing=missing,
            )
        )
    return process(raws, cleaning, joint_names=names)


def joint_names_of(joints, n: int | None, *, default: tuple | None = None) -> tuple | None:
    """``joints`` as a tuple of ``n`` (any number if None) distinct non-empty str, ``default`` when None."""
    if joints is None:
        return default
    if isinstance(joints, str):
        joints = [joints]
    try:
        names = tuple(joints)
    except TypeError:
        raise TypeError(f"joints must be a sequence of joint names (str); got {joints!r}") from None
    if not all(isinstance(name, str) and name.strip() for name in names):
        raise TypeError(f"joints must be a sequence of non-empty joint names (str); got {joints!r}")
    if n is not None and len(names) != n:
        raise ValueError(f"joints must be {n} names (one per coordinate); got {list(names)!r}")
    if not names or len(set(names)) != len(names):
        raise ValueError(f"joints must be distinct names, at least one; got {list(names)!r}")
    return names


def _check_order(path: str, stamps: np.ndarray, name: str) -> None:
    """ValueError naming the first data row where the time column goes backwards."""
    backwards = np.flatnonzero(np.diff(stamps) < 0)
    if backwards.size:
        i = int(backwards[0])
        raise ValueError(
            f"{path}: the time column {name!r} goes backwards at data row {i + 2} "
            f"({stamps[i]!r} then {stamps[i + 1]!r}; {backwards.size} such step(s)); sort the "
            f"log or split it into files"
        )


def _read_table(path: str, columns: list, *, delimiter: str | None):
    """The ``columns`` of a CSV file as floats, ``(rows, len(columns))`` (NaN where a cell is empty), their
    names, and whether the file has a header row."""
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
    options = dict(
        delimiter=sep if sep.strip() else None,
        skiprows=int(header),
        usecols=indices,
        ndmin=2,
        dtype=np.float64,
        comments=None,
        quotechar='"',
    )
    try:
        table = np.loadtxt(path, **options)
    except ValueError:
        _locate_bad_cell(path, sep, indices, names, header)  # raises for a cell that is not a number
        table = np.loadtxt(path, converters=_number_or_missing, **options)  # empty cells: missing values
    if table.shape[0] == 0:
        raise ValueError(f"{path}: the file has no data rows")
    if np.isinf(table).any():
        row, col = np.argwhere(np.isinf(table))[0]
        raise ValueError(
            f"{path}: line {row + 1 + int(header)}, column {names[indices[col]]!r}: "
            f"the value {float(table[row, col])} is not finite"
        )
    return table, [names[i] for i in indices], header


def _number_or_missing(cell: str) -> float:
    """A cell's number, NaN for an empty one (a sample the logger missed)."""
    return float(cell) if cell.strip() else math.nan


def _complete_rows(path: str, table: np.ndarray, header: bool) -> tuple[np.ndarray, int]:
    """``table`` without its rows that miss a value (empty or NaN), and how many there were.

    A logger that drops a sample now and then leaves a hole the import bridges or splits at (as any
    other); most rows missing a value (:func:`lnn.ingest.clean.too_many_missing`) is a table that merges
    streams row by row (one stream per row, e.g. a plotting tool's export), which dropping rows would not read.
    """
    missing = missing_rows(table)
    count = int(missing.sum())
    if too_many_missing(missing):
        first = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"{path}: {count} of {table.shape[0]} data rows miss a value in the columns read (the first at line "
            f"{first + 1 + int(header)}): a table that merges streams row by row; write each stream's columns "
            f"on common time stamps (interpolated or held) first"
        )
    return table[~missing], count


def _locate_bad_cell(path, sep, indices, names, header) -> None:
    """Raise a ValueError naming the first cell of ``indices`` that is not a number (an empty one is a missing
    value, read as NaN)."""
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
                if cells[i].strip() and not _is_number(cells[i]):
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


def paths_of(paths, *, kind: str = "CSV file") -> list[str]:
    """One path or a sequence of them, as a list of str; TypeError / ValueError naming ``paths``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    try:
        files = [os.fspath(p) for p in paths]
    except TypeError as exc:
        raise TypeError(f"paths must be a path or a sequence of paths; got {paths!r}") from exc
    if not files:
        raise ValueError(f"paths must name at least one {kind}; got none")
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
