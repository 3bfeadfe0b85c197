"""The data of :func:`lnn.fit`: arrays from a Dataset, the validation split, rollout windows, tf.data.

:func:`prepare` turns fit's ``dataset`` and ``validation`` into a
:class:`TrainingData` of numpy arrays (and, for the rollout loss, the windows
of consecutive samples); a :class:`Pipeline` batches them as (distributed)
``tf.data`` datasets, one shuffled pass per epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

__all__ = ["Pipeline", "TrainingData", "arrays", "prepare", "rollout_windows", "split", "validation_split"]

_KEYS = ("q", "qd", "qdd", "tau")


def arrays(data, name: str) -> dict[str, np.ndarray]:
    """``q, qd, qdd, tau (N, n)``, trajectory ids and times ``t (N,)`` of a Dataset-like object."""
    try:
        out = {k: np.asarray(getattr(data, k), dtype=np.float64) for k in _KEYS}
    except AttributeError as exc:
        raise TypeError(f"{name} must be an lnn.Dataset (with q, qd, qdd, tau), got {type(data).__name__}") from exc
    shape = out["q"].shape
    if len(shape) != 2 or shape[0] == 0:
        raise ValueError(f"{name}.q must have shape (N, n) with N > 0, got {shape}")
    for key, value in out.items():
        if value.shape != shape:
            raise ValueError(f"{name}.{key} must have shape {shape} like {name}.q, got {value.shape}")
    ids = getattr(data, "trajectory", None)
    if ids is None:
        ids = getattr(data, "trajectory_ids", None)
    out["trajectory"] = (
        np.zeros(shape[0], dtype=np.int64) if ids is None else np.asarray(ids).astype(np.int64).reshape(shape[0])
    )
    out["t"] = np.asarray(getattr(data, "t", np.arange(shape[0], dtype=np.float64)), dtype=np.float64).reshape(shape[0])
    return out


def split(dataset, validation, seed: int):
    """``(train, validation or None)`` from fit's ``validation`` argument."""
    if not all(hasattr(dataset, k) for k in _KEYS):
        raise TypeError(f"dataset must be an lnn.Dataset (with q, qd, qdd, tau), got {type(dataset).__name__}")
    if validation is None:
        return dataset, None
    if isinstance(validation, (float, np.floating)) and not isinstance(validation, bool):
        fraction = float(validation)
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"validation fraction must be in (0, 1), got {validation!r}")
        if not hasattr(dataset, "split"):
            raise TypeError(f"validation={validation!r} needs a dataset with split(), got {type(dataset).__name__}")
        parts = validation_split(dataset, fraction, seed=seed)
        return parts.train, parts.validation
    if hasattr(validation, "q"):
        return dataset, validation
    raise TypeError(f"validation must be a Dataset, a fraction in (0, 1) or None, got {type(validation).__name__}")


def validation_split(dataset, fraction: float, *, seed: int, stacklevel: int = 5):
    """Hold out ``fraction`` of a Dataset for validation: whole trajectories, or time blocks.

    ``dataset.split(fractions=(1 - fraction, fraction, 0), seed=seed, by="auto")``:
    whole trajectories when there are at least ``1 / fraction`` of them, else
    contiguous time blocks kept a derivative window apart
    (:meth:`lnn.Dataset.split`), with a :class:`lnn.data.TimeSplitWarning`
    saying so (the library prints nothing; warnings reach the CLI's stderr).
    On time blocks the validation set holds ``fraction`` of the samples (to
    the sample), and only the training samples within the dataset's
    ``derivative_span`` of a boundary between the two are dropped: on one
    13 500-sample log with a 0.92 s window, ``fraction=0.1`` holds out
    exactly 10 % and drops 920 or 1 840 samples (one or two boundaries),
    where it held out 26.5 % and dropped 1 840 before (seed 0).
    :func:`lnn.fit` and ``lnn.identify`` share it.

    Parameters
    ----------
    dataset : lnn.Dataset
    fraction : float
        In ``(0, 1)``.
    seed : int
        Seed of the split.
    stacklevel : int
        Of the warning (5: the caller of :func:`lnn.fit`, through ``prepare`` and ``split``).

    Returns
    -------
    lnn.DatasetSplit
    """
    import warnings

    from lnn.data import TimeSplitWarning

    try:
        parts = dataset.split(fractions=(1.0 - fraction, fraction, 0.0), seed=seed, by="auto")
    except TypeError:  # a Dataset-like object whose split() knows trajectories only
        return dataset.split(fractions=(1.0 - fraction, fraction, 0.0), seed=seed)
    if getattr(parts, "by", "trajectory") == "time":
        warnings.warn(
            f"validation={fraction!r}: the dataset has {dataset.n_trajectories} trajectory(ies), "
            f"fewer than 1/{fraction!r}, so the validation set is made of time blocks: "
            f"{parts.describe()}",
            TimeSplitWarning,
            stacklevel=stacklevel,
        )
    return parts


def rollout_windows(arrays: dict, horizon: int) -> tuple[np.ndarray, float]:
    """Start indices of windows of ``horizon + 1`` equally spaced samples of one trajectory, and ``dt``.

    Parameters
    ----------
    arrays : dict
        With ``trajectory (N,)`` and ``t (N,)``.
    horizon : int

    Returns
    -------
    starts : ndarray of int, shape ``(W,)``
    dt : float
        The median time step within trajectories (NaN without windows).
    """
    ids, t = arrays["trajectory"], arrays["t"]
    n = ids.shape[0]
    if n <= horizon:
        return np.zeros(0, dtype=np.int64), math.nan
    starts = np.arange(n - horizon)
    same = ids[starts] == ids[starts + horizon]
    steps = np.diff(t)
    dt = float(np.median(steps[ids[1:] == ids[:-1]])) if n > 1 else math.nan
    if not (math.isfinite(dt) and dt > 0):
        return np.zeros(0, dtype=np.int64), math.nan
    ok = same & np.isclose(t[starts + horizon] - t[starts], horizon * dt, rtol=1e-6, atol=1e-9)
    return starts[ok], dt


@dataclass(frozen=True)
class TrainingData:
    """The arrays of one fit.

    Attributes
    ----------
    train : dict of str to ndarray
        ``q, qd, qdd, tau`` of shape ``(N, n)``, ``trajectory`` and ``t`` of shape ``(N,)``.
    validation : dict of str to ndarray or None
        The same for the validation data.
    n : int
        Degrees of freedom.
    horizon : int
        Steps of the rollout windows.
    windows : ndarray of int, shape ``(W,)``, or None
        Start indices of the training windows (None without the rollout loss).
    val_windows : ndarray of int or None
        The same for the validation data.
    dt : float
        Time step of the windows (NaN without the rollout loss).
    """

    train: dict
    validation: dict | None
    n: int
    horizon: int
    windows: np.ndarray | None = None
    val_windows: np.ndarray | None = None
    dt: float = math.nan


def prepare(dataset, validation, *, seed: int, horizon: int, rollout: bool) -> TrainingData:
    """Check and split fit's data; find the rollout windows when ``rollout``."""
    train_data, val_data = split(dataset, validation, seed)
    train = arrays(train_data, "dataset")
    val = arrays(val_data, "validation") if val_data is not None else None
    n = train["q"].shape[1]
    if val is not None and val["q"].shape[1] != n:
        raise ValueError(f"validation has {val['q'].shape[1]} coordinates, the dataset {n}")
    if not rollout:
        return TrainingData(train, val, n, horizon)
    windows, dt = rollout_windows(train, horizon)
    if windows.size == 0:
        raise ValueError(
            f"the rollout loss needs trajectories of more than horizon={horizon} equally "
            "spaced samples; the dataset has none"
        )
    val_windows = rollout_windows(val, horizon)[0] if val is not None else None
    return TrainingData(train, val, n, horizon, windows, val_windows, dt)


def _dataset(arrays: dict, index: np.ndarray, batch_size: int, dtype, windows, horizon: int):
    """A batched ``tf.data`` pipeline of ``(q, qd, qdd, tau[, q_win, qd_win, tau_win][, weights])``."""
    np_dtype = dtype.as_numpy_dtype
    rows = index if windows is None else windows[index]
    if windows is None:
        tensors = tuple(arrays[k][index].astype(np_dtype) for k in _KEYS)
    else:
        span = rows[:, None] + np.arange(horizon + 1)[None, :]
        tensors = tuple(arrays[k][rows].astype(np_dtype) for k in _KEYS) + tuple(
            arrays[k][span].astype(np_dtype) for k in ("q", "qd", "tau")
        )
    if "weights" in arrays:  # an ensemble's per-member sample weights (lnn.train._ensemble), last
        tensors += (arrays["weights"][rows].astype(np_dtype),)
    return tf.data.Dataset.from_tensor_slices(tensors).batch(batch_size).prefetch(tf.data.AUTOTUNE)


class Pipeline:
    """Batches of a :class:`TrainingData` as distributed ``tf.data`` datasets.

    Parameters
    ----------
    data : TrainingData
    batch_size : int
        Global batch size (split over the replicas of ``strategy``).
    dtype : tf.DType
        The model's dtype.
    strategy : tf.distribute.Strategy
    """

    def __init__(self, data: TrainingData, *, batch_size: int, dtype, strategy) -> None:
        self.data = data
        self.batch_size = batch_size
        self.dtype = dtype
        self.strategy = strategy
        #: Training samples (or rollout windows) per epoch.
        self.n_train = data.windows.size if data.windows is not None else data.train["q"].shape[0]
        self.steps_per_epoch = max(1, math.ceil(self.n_train / batch_size))

    def _distribute(self, arrays: dict, windows, index: np.ndarray):
        return self.strategy.experimental_distribute_dataset(
            _dataset(arrays, index, self.batch_size, self.dtype, windows, self.data.horizon)
        )

    @property
    def element_spec(self):
        """The spec of a training batch (TensorSpecs with batch ``None``, or per-replica specs)."""
        index = np.arange(min(self.n_train, self.batch_size))
        return self._distribute(self.data.train, self.data.windows, index).element_spec

    def epoch(self, epoch: int, *, shuffle: bool, seed: int):
        """The training batches of ``epoch``, shuffled by ``(seed, epoch)`` when ``shuffle``."""
        order = (
            np.random.default_rng([int(seed), epoch]).permutation(self.n_train) if shuffle else np.arange(self.n_train)
        )
        return self._distribute(self.data.train, self.data.windows, order)

    def validation(self):
        """The validation batches, or None without validation data (or windows)."""
        val = self.data.validation
        if val is None:
            return None
        windows = self.data.val_windows
        index = np.arange(windows.size) if windows is not None else np.arange(val["q"].shape[0])
        return self._distribute(val, windows, index) if index.size else None
