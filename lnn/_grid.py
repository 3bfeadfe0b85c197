"""The time grid of both integrators (numpy only): one check, one set of messages.

:func:`lnn.rollout` accepts a single time (``T = 1``: the initial state is the
whole answer); the fixed steps of :func:`lnn.odeint.odeint` need at least one
interval (``T >= 2``). A symbolic ``t`` inside a ``tf.function`` is checked by
run-time assertions in :mod:`lnn.odeint` instead (its value is not known
while tracing).
"""

from __future__ import annotations

import numpy as np

__all__ = ["time_grid"]


def time_grid(t, *, min_length: int = 1) -> np.ndarray:
    """``t`` as a float64 array ``(T,)``, finite and strictly increasing, else ``ValueError``.

    Parameters
    ----------
    t : array_like, shape ``(T,)``
        Sample times (s).
    min_length : int, keyword-only
        Smallest accepted ``T``.

    Returns
    -------
    numpy.ndarray, shape ``(T,)``

    Raises
    ------
    ValueError
        For another shape, fewer than ``min_length`` times, NaN or inf, or two
        consecutive times that do not increase (the first such pair is named).
    """
    t = np.array(t, dtype=np.float64, ndmin=1)
    if t.ndim != 1:
        raise ValueError(f"t must have shape (T,); got shape {t.shape}")
    if t.shape[0] < min_length:
        raise ValueError(f"t must have shape (T,) with T >= {min_length}, got shape {t.shape}")
    if not np.isfinite(t).all():
        raise ValueError("t has non-finite values (NaN or inf)")
    if t.shape[0] > 1 and not (np.diff(t) > 0).all():
        k = int(np.flatnonzero(np.diff(t) <= 0)[0])
        raise ValueError(
            f"t must be strictly increasing; got t[{k}] = {float(t[k])!r} >= t[{k + 1}] = {float(t[k + 1])!r}"
        )
    return t
