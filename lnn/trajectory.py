"""The result type of every integrator: a batch of trajectories on one time grid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

__all__ = ["Failure", "Trajectory"]


class Failure(NamedTuple):
    """One trajectory of a batch that stopped before the end of its rollout.

    Attributes
    ----------
    index : int
        Its index over the batch ``B``.
    time : float
        The time (s) of the failure (the stage at which the solver found it;
        the samples after the last accepted step before it are NaN).
    reason : str
        What failed (a mass matrix that is not positive definite, a
        non-finite state, a step size that became too small, ...).
    """

    index: int
    time: float
    reason: str


@dataclass(frozen=True)
class Trajectory:
    """A batch of ``B`` trajectories sampled on a common time grid.

    The fields are numpy arrays (:func:`lnn.rollout`, datasets, files) or
    TensorFlow tensors (:func:`lnn.integrate.odeint`, so that losses on them
    can be differentiated). Inside a ``tf.function`` they may be symbolic
    tensors whose unknown dimensions (``None``) pass the shape checks; such a
    trajectory (:attr:`symbolic`) can be indexed but not cut with
    :meth:`until` or saved.

    Attributes
    ----------
    t : ndarray or tensor, shape ``(T,)``
        Sample times in seconds, strictly increasing.
    q, qd, qdd, tau : ndarray or tensor, shape ``(B, T, n)``
        Coordinates, velocities, accelerations and generalized forces.
    energy : ndarray or tensor, shape ``(B, T)``
        The system's energy ``E(q, qd)`` at each sample.
    nfev : int
        Number of right-hand-side evaluations the solver made (0 if unknown).
    method : str
        The integration method that produced it.
    metadata : dict
        The solver's counters and options.
    failed_at : ndarray, shape ``(B,)``
        The time (s) at which each trajectory failed and stopped (its samples
        from the solver's last accepted step before that time on are NaN; see
        ``on_failure`` of :func:`lnn.rollout`), NaN for a trajectory that
        reached ``t[-1]``. Default: all NaN (None
        while the batch size of symbolic tensors is unknown).
    failures : tuple of lnn.integrate.Failure
        One record ``(index, time, reason)`` per failed trajectory (empty when
        every trajectory finished).
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    energy: np.ndarray
    nfev: int = 0
    method: str = ""
    metadata: dict = field(default_factory=dict, compare=False)
    failed_at: np.ndarray | None = field(default=None, compare=False)
    failures: tuple = field(default=(), compare=False)

    def __post_init__(self) -> None:
        t = _static_shape(self.t)
        if t is None or len(t) != 1:
            raise ValueError(f"Trajectory.t must have shape (T,), got shape {_shown(t)}")
        expected = _static_shape(self.q)
        if expected is None or len(expected) != 3 or not _fits(expected[1:2], t):
            raise ValueError(f"Trajectory.q must have shape (B, T={t[0]}, n), got shape {_shown(expected)}")
        for name in ("qd", "qdd", "tau"):
            shape = _static_shape(getattr(self, name))
            if not _fits(shape, expected):
                raise ValueError(f"Trajectory.{name} must have shape {_shown(expected)}, got shape {_shown(shape)}")
        shape = _static_shape(self.energy)
        if not _fits(shape, expected[:2]):
            raise ValueError(f"Trajectory.energy must have shape {_shown(expected[:2])}, got shape {_shown(shape)}")
        batch = expected[0]
        if self.failed_at is None:
            if batch is not None and not self.symbolic:
                object.__setattr__(self, "failed_at", np.full(batch, np.nan))
        else:
            failed_at = np.asarray(self.failed_at, dtype=np.float64)
            if failed_at.shape != (batch,) and batch is not None:
                raise ValueError(f"Trajectory.failed_at must have shape ({batch},), got shape {failed_at.shape}")
            object.__setattr__(self, "failed_at", failed_at)
        object.__setattr__(self, "failures", tuple(self.failures))

    @property
    def failed(self) -> np.ndarray:
        """Which trajectories failed before ``t[-1]``, boolean ``(B,)`` (``~isnan(failed_at)``)."""
        self._require_values("failed")
        return ~np.isnan(self.failed_at)

    @property
    def symbolic(self) -> bool:
        """Whether the fields are symbolic tensors (a trajectory built inside a ``tf.function``)."""
        return any(_is_symbolic(getattr(self, name)) for name in ("t", "q"))

    def _require_values(self, what: str) -> None:
        if self.symbolic:
            raise TypeError(
                f"Trajectory.{what} needs values; this trajectory holds symbolic "
                "tensors (it was built inside a tf.function): call it outside"
            )

    @property
    def n_trajectories(self) -> int:
        """Number of trajectories ``B``."""
        return self.q.shape[0]

    @property
    def n_dof(self) -> int:
        """Number of degrees of freedom ``n``."""
        return self.q.shape[2]

    def __getitem__(self, index) -> Trajectory:
        """Select trajectories (an int, slice or index array over ``B``), keeping the batch axis."""
        if isinstance(index, (int, np.integer)):
            index = slice(index, index + 1 if index != -1 else None)
        failed_at = None if self.failed_at is None else self.failed_at[index]
        kept = np.arange(self.q.shape[0])[index] if self.failed_at is not None else ()
        return Trajectory(
            t=self.t,
            q=self.q[index],
            qd=self.qd[index],
            qdd=self.qdd[index],
            tau=self.tau[index],
            energy=self.energy[index],
            nfev=self.nfev,
            method=self.method,
            metadata=dict(self.metadata),
            failed_at=failed_at,
            failures=_renumbered(self.failures, kept),
        )

    def until(self, t_stop: float) -> Trajectory:
        """The samples with ``t <= t_stop`` (a prefix in time, all trajectories).

        Parameters
        ----------
        t_stop : float
            Last time kept (s); must be at or after ``t[0]``.
        """
        self._require_values("until")
        if not np.isfinite(t_stop) or t_stop < self.t[0]:
            raise ValueError(f"t_stop must be a finite time >= t[0] = {self.t[0]:g}, got {t_stop!r}")
        k = int(np.searchsorted(self.t, t_stop, side="right"))
        return Trajectory(
            t=self.t[:k],
            q=self.q[:, :k],
            qd=self.qd[:, :k],
            qdd=self.qdd[:, :k],
            tau=self.tau[:, :k],
            energy=self.energy[:, :k],
            nfev=self.nfev,
            method=self.method,
            metadata=dict(self.metadata),
            failed_at=np.where(self.failed_at <= t_stop, self.failed_at, np.nan),
            failures=tuple(f for f in self.failures if f.time <= t_stop),
        )

    def save(self, path, *, overwrite: bool = False) -> None:
        """Write the trajectory to an ``.npz`` file (no pickle).

        Raises
        ------
        FileExistsError
            If ``path`` exists and ``overwrite`` is false.
        TypeError
            For a trajectory of symbolic tensors (see :attr:`symbolic`).
        """
        self._require_values("save")
        from lnn._io import write_npz

        write_npz(
            path,
            {
                "t": self.t,
                "q": self.q,
                "qd": self.qd,
                "qdd": self.qdd,
                "tau": self.tau,
                "energy": self.energy,
                "nfev": np.asarray(self.nfev),
                "method": np.asarray(self.method),
                "failed_at": np.asarray(self.failed_at, dtype=np.float64),
            },
            kind="trajectory",
            metadata=self.metadata,
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path) -> Trajectory:
        """Read a trajectory written by :meth:`save`."""
        from lnn._io import read_npz

        arrays, metadata = read_npz(path, kind="trajectory", required=("t", "q", "qd", "qdd", "tau", "energy"))
        return cls(
            t=arrays["t"],
            q=arrays["q"],
            qd=arrays["qd"],
            qdd=arrays["qdd"],
            tau=arrays["tau"],
            energy=arrays["energy"],
            nfev=int(arrays.get("nfev", 0)),
            method=str(arrays.get("method", "")),
            metadata=metadata,
            failed_at=arrays.get("failed_at"),
        )


def _renumbered(failures: tuple, kept) -> tuple:
    """The failure records of the trajectories ``kept`` (old indices), renumbered in their order."""
    if not failures:
        return ()
    position = {int(old): new for new, old in enumerate(np.atleast_1d(kept))}
    return tuple(
        type(f)(index=position[f.index], time=f.time, reason=f.reason) for f in failures if f.index in position
    )


# ----------------------------------------------------------------------------- shapes (no TF)


def _static_shape(x) -> tuple | None:
    """The shape of an array, list or tensor: a tuple whose unknown dimensions are None,
    or None for a tensor of unknown rank."""
    shape = getattr(x, "shape", None)
    if shape is None:
        return tuple(np.shape(x))
    if getattr(shape, "rank", 0) is None:  # a tf.TensorShape of unknown rank
        return None
    return tuple(None if d is None else int(d) for d in shape)


def _fits(shape, expected) -> bool:
    """Whether two static shapes agree wherever both dimensions are known."""
    return (
        shape is not None
        and expected is not None
        and len(shape) == len(expected)
        and all(a is None or b is None or a == b for a, b in zip(shape, expected))
    )


def _shown(shape) -> str:
    """A static shape for a message (``None`` for unknown dimensions)."""
    return "of unknown rank" if shape is None else str(shape)


def _is_symbolic(x) -> bool:
    """A graph tensor: it has a static shape but no value (no ``numpy()``) until the graph runs."""
    return not isinstance(x, np.ndarray) and hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "numpy")
