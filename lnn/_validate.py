"""Checks of the public boundary, in one place (numpy only: no TensorFlow).

Every public function of the package checks its inputs with these, so that a
bad value gets the same clear message everywhere: what was wrong, and what was
received.

- :func:`positive` — a finite positive number (or integer).
- :func:`float_dtype` — ``"float32"`` or ``"float64"``.
- :func:`numeric_array` — anything array-like (tensors included) as a float numpy array.
- :func:`state` / :func:`states` — batches of ``(B, n)`` (or one ``(n,)``) states.
- :func:`same_shape` — a pair of results (true and learned trajectories, say).
- :func:`spread` — the per-coordinate scale used for input and loss scaling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["float_dtype", "numeric_array", "positive", "same_shape", "spread", "state", "states"]

#: The floating dtypes of models and computations.
FLOAT_DTYPES = ("float32", "float64")


def positive(name: str, value, *, integer: bool = False, allow_none: bool = False):
    """``value`` as a finite positive ``float`` (or ``int``), else a clear error.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : number
    integer : bool
        Require a whole number (``int`` or numpy integer), returned as ``int``.
    allow_none : bool
        Let ``None`` through (returned as ``None``).

    Raises
    ------
    ValueError
        ``"<name> must be a positive integer; got <value>"`` for a whole number
        that is not one (bools included), ``"<name> must be a finite number > 0;
        got <value>"`` for a number that is not positive and finite.
    TypeError
        A value that is not a number at all (for ``integer=False``).
    """
    if value is None and allow_none:
        return None
    if integer:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}")
        return int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def float_dtype(value, name: str = "dtype") -> str:
    """``"float32"`` or ``"float64"`` from a dtype name or object, else ``ValueError``."""
    text = getattr(value, "name", value)
    text = str(np.dtype(text)) if isinstance(text, type) else str(text)
    if text not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be 'float32' or 'float64', got {value!r}")
    return text


def numeric_array(value, name: str, dtype=np.float64) -> np.ndarray:
    """``value`` (array, list, tensor) as a numpy array of ``dtype``; ``TypeError`` if not numeric."""
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged or otherwise not an array
        raise TypeError(f"{name} must be a numeric array, got {type(value).__name__}") from None
    if array.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be a numeric array, got {type(value).__name__} of dtype {array.dtype}")
    return array.astype(dtype, copy=False)


def state(
    name: str,
    value,
    n: int | None,
    *,
    dtype=np.float64,
    batch: int | None = None,
    finite: bool = True,
    allow_empty: bool = False,
    first: str = "the first input",
):
    """One batch of states as ``(array (B, n), single)``; a single ``(n,)`` state becomes ``(1, n)``.

    Parameters
    ----------
    name : str
        The argument's name, for the messages.
    value : array_like or tensor, shape ``(B, n)`` or ``(n,)``
    n : int or None
        Required number of columns (``n_dof``); None accepts any.
    dtype : numpy dtype
    batch : int, optional
        Required batch size (that of the first input of a call).
    finite : bool
        Refuse NaN and inf (naming how many samples hold them).
    allow_empty : bool
        Accept ``B = 0``.
    first : str
        Name of the input whose batch size is ``batch`` (for the message).

    Returns
    -------
    array : numpy.ndarray, shape ``(B, n)``
    single : bool
        Whether ``value`` was one state of shape ``(n,)``.
    """
    if value is None:
        raise ValueError(f"{name} is required, got None")
    array = numeric_array(value, name, dtype)
    single = array.ndim == 1
    if single:
        array = array[None, :]
    cols = "n" if n is None else str(n)
    if array.ndim != 2 or (n is not None and array.shape[1] != n):
        raise ValueError(f"{name} must have shape (B, {cols}) or ({cols},), got shape {np.shape(value)}")
    if array.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} is an empty batch (shape {np.shape(value)})")
    if batch is not None and array.shape[0] != batch:
        raise ValueError(
            f"{name} has batch size {array.shape[0]} but {first} has batch size "
            f"{batch}: inputs must have the same batch size (shape {np.shape(value)})"
        )
    if finite and not np.isfinite(array).all():
        bad = np.flatnonzero(~np.isfinite(array).all(axis=1))
        raise ValueError(
            f"{name} contains NaN or infinite values in {bad.size} of {array.shape[0]} "
            f"samples (rows {bad[:10].tolist()}{'...' if bad.size > 10 else ''})"
        )
    return array, single


def states(
    pairs: Sequence[tuple[str, object]],
    n: int | None,
    *,
    dtype=np.float64,
    finite: bool = True,
    allow_empty: bool = False,
):
    """Several inputs of one call checked against the first: ``(arrays, single)``.

    ``pairs`` is ``[(name, value), ...]``; a value of None (an omitted
    ``tau``) stays None (the first is required). All must be ``(B, n)``
    batches of one ``B``, or all single ``(n,)`` states.

    Returns
    -------
    arrays : list of numpy.ndarray (or None), each ``(B, n)``
    single : bool
    """
    (name0, value0), rest = pairs[0], pairs[1:]
    first, single = state(name0, value0, n, dtype=dtype, finite=finite, allow_empty=allow_empty)
    out = [first]
    for name, value in rest:
        if value is None:
            out.append(None)
            continue
        array, one = state(
            name,
            value,
            first.shape[1],
            dtype=dtype,
            batch=first.shape[0],
            finite=finite,
            allow_empty=allow_empty,
            first=name0,
        )
        if one != single:
            raise ValueError(
                f"{name} has shape {tuple(np.shape(value))} but {name0} has shape "
                f"{tuple(np.shape(value0))}: pass both as (B, n) or both as (n,)"
            )
        out.append(array)
    return out, single


def same_shape(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str, *, min_ndim: int = 1) -> None:
    """Refuse a pair of arrays of different shapes (or of fewer than ``min_ndim`` dimensions)."""
    if a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must have the same shape, got {a.shape} and {b.shape}")
    if a.ndim < min_ndim:
        raise ValueError(f"{name_a} must have at least {min_ndim} dimension(s), got shape {a.shape}")


def spread(x, *, center: bool = True, floor: float = 1e-8) -> np.ndarray:
    """Per-column scale of samples ``x (N, k)``: the standard deviation, or the RMS about 0.

    The one convention of the package's input and loss scaling: ``center``
    gives the standard deviation (positions, accelerations, torques), without
    it the root mean square about zero (velocities, whose mean is not an
    offset of the physics). Columns whose scale is at most ``floor`` (constant
    or all-zero data) get the mean scale of the others, or 1 if none has one,
    so that nothing is divided by zero. NaN entries are ignored.

    Returns
    -------
    numpy.ndarray, shape ``(k,)``
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        s = np.nanstd(x, axis=0) if center else np.sqrt(np.nanmean(x * x, axis=0))
    ok = np.isfinite(s) & (s > floor)
    fallback = float(s[ok].mean()) if ok.any() else 1.0
    return np.where(ok, s, fallback)
