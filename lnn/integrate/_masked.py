"""Batch evaluations that mask the samples that fail instead of refusing the batch.

A system's batch call (``acceleration``, ``numpy_acceleration``) refuses the
whole batch when one sample's learned mass matrix is not positive definite;
:func:`evaluate_masked` finds the failing rows (:class:`lnn.errors.IndefiniteMassMatrixError`
names them; otherwise the error's health report, or row by row), sets them to
NaN and evaluates the others again. Shared by the scipy backend (which drops
the failing trajectories of a solve) and :mod:`lnn.metrics`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["MaskedEvaluation", "evaluate_masked", "failing_rows", "short"]


def short(exc: BaseException) -> str:
    """The message of ``exc``, or its class name when it has none."""
    return str(exc) or type(exc).__name__


def failing_rows(exc: BaseException, fn: Callable, q, qd, tau) -> np.ndarray:
    """The rows of a batch call ``fn(q, qd, tau)`` that raised ``exc``.

    From the exception's ``trajectories`` attribute
    (:class:`lnn.errors.IndefiniteMassMatrixError`), else its ``health``'s
    per-sample eigenvalues (:class:`lnn.mechanics.MassMatrixError`), else by
    calling ``fn`` row by row.
    """
    rows = getattr(exc, "trajectories", None)
    if rows:
        return np.unique(np.asarray(rows, dtype=np.int64))
    health = getattr(exc, "health", None)
    eigenvalues = getattr(health, "min_eigenvalues", None)
    if eigenvalues is not None and np.shape(eigenvalues) == (q.shape[0],):
        bad = np.flatnonzero(~(np.asarray(eigenvalues) > 0))
        if bad.size:
            return bad
    if q.shape[0] == 1:
        return np.zeros(1, dtype=np.int64)
    bad = []
    for i in range(q.shape[0]):
        try:
            value = fn(q[i : i + 1], qd[i : i + 1], None if tau is None else tau[i : i + 1])
            if not np.all(np.isfinite(value)):
                bad.append(i)
        except (ArithmeticError, ValueError):
            bad.append(i)
    return np.asarray(bad if bad else range(q.shape[0]), dtype=np.int64)


@dataclass(frozen=True)
class MaskedEvaluation:
    """A batch evaluation in which the samples that failed are NaN instead of refusing the batch.

    Attributes
    ----------
    values : numpy.ndarray, shape ``(N, n)``
        The results, NaN in the failed rows.
    failed : numpy.ndarray of bool, shape ``(N,)``
    reasons : dict
        Row index -> the reason it failed (the system's message, or
        ``"non-finite result"``).
    """

    values: np.ndarray
    failed: np.ndarray
    reasons: dict

    @property
    def n_failed(self) -> int:
        """Number of failed rows."""
        return int(self.failed.sum())


def evaluate_masked(fn: Callable, q, qd, tau=None) -> MaskedEvaluation:
    """``fn(q, qd, tau)`` on a batch, the rows that fail set to NaN (the others as computed).

    A system's batch call (``acceleration``, ``numpy_acceleration``) refuses
    the whole batch when one sample's learned mass matrix is not positive
    definite; here the failing rows are found (:class:`lnn.errors.IndefiniteMassMatrixError`
    names them; otherwise the error's health report, or row by row), set to
    NaN and recorded, and the other rows are evaluated again.

    Parameters
    ----------
    fn : callable
        ``fn(q, qd, tau) -> (N, n)`` (``tau`` may be None).
    q, qd : numpy.ndarray, shape ``(N, n)``
    tau : numpy.ndarray, shape ``(N, n)``, optional

    Returns
    -------
    MaskedEvaluation
    """
    q, qd = np.asarray(q, dtype=np.float64), np.asarray(qd, dtype=np.float64)
    tau = None if tau is None else np.asarray(tau, dtype=np.float64)
    N = q.shape[0]
    values = np.full(q.shape, np.nan)
    failed = ~(np.isfinite(q).all(axis=1) & np.isfinite(qd).all(axis=1))
    reasons = {int(i): "non-finite state" for i in np.flatnonzero(failed)}
    while True:
        rows = np.flatnonzero(~failed)
        if rows.size == 0:
            break
        sub_tau = None if tau is None else tau[rows]
        try:
            out = np.asarray(fn(q[rows], qd[rows], sub_tau), dtype=np.float64)
        except (ArithmeticError, ValueError) as exc:
            bad = rows[failing_rows(exc, fn, q[rows], qd[rows], sub_tau)]
            failed[bad] = True
            reasons.update({int(i): short(exc) for i in bad})
            continue
        if out.shape != (rows.size,) + q.shape[1:]:
            raise ValueError(
                f"the evaluated function must return shape {(rows.size,) + q.shape[1:]}; got shape {out.shape}"
            )
        values[rows] = out
        bad = rows[~np.isfinite(out).all(axis=1)]
        values[bad] = np.nan
        failed[bad] = True
        reasons.update({int(i): "non-finite result" for i in bad})
        break
    assert values.shape[0] == N
    return MaskedEvaluation(values=values, failed=failed, reasons=reasons)
