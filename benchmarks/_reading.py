"""Held-out logs read as a model is fed new logs of its robot: with the derivative window the training logs got.

Read alone, a held-out log's window would be chosen by its own torques
(``lnn.logs.import_csv``'s default), the very targets of the score: a
one-number leak. So it is read by the rule the training logs were read by.
"""

from __future__ import annotations

from collections.abc import Callable

from lnn.ingest.consistency import window_at
from lnn.logs import ImportReport, ImportResult
from lnn.residuals import STEP_TOLERANCE

__all__ = ["read_held_out"]


def read_held_out(read: Callable[..., ImportResult], paths, report: ImportReport) -> ImportResult:
    """``read(paths, window=...)`` with the window of the training logs' import ``report``.

    The torques' window is carried over as a span (the same seconds at the held-out log's own step, as
    the import carries it across the files of one call); a given window as the same samples; the
    spectral rule as the spectral rule (per coordinate, from the held-out positions alone).

    Parameters
    ----------
    read : callable
        ``read(paths, window=...)`` returning an :class:`lnn.logs.ImportResult`, e.g. a partial of
        :func:`lnn.logs.import_csv` with the columns.
    paths
        The held-out logs, all at one rate, as ``read`` takes them (paths, or names for
        ``_dfki.imported``).
    report : lnn.logs.ImportReport
        The training logs' import.

    Returns
    -------
    lnn.logs.ImportResult
    """
    first = report.files[0]
    if first.window_rule == "spectrum":
        return read(paths, window="spectrum")
    held = read(paths, window=first.window_qdd[0])
    step = held.report.files[0].step
    if first.window_rule != "torque" or abs(step - first.step) <= STEP_TOLERANCE * first.step:
        return held
    return read(paths, window=window_at(first.window_qdd[0], first.step, step))
