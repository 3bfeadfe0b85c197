"""The result type of every integrator: a batch of trajectories on one time grid."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trajectory"]


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

    def __post_init__(self) -> None:
        t = _static_shape(self.t)
        if t is None or len(t) != 1:
            raise ValueError(f"Trajectory.t must have shape (T,), got shape {_shown(t)}")
        expected = _static_shape(self.q)
        if expected is None or len(expected) != 3 or not _fits(expected[1:2], t):
            raise ValueError(
                f"Trajectory.q must have shape (B, T={t[0]}, n), got shape {_shown(expected)}"
            )
        for name in ("qd", "qdd", "tau"):
            shape = _static_shape(getattr(self, name))
            if not _fits(shape, expected):
                raise ValueError(f"Trajectory.{name} must have shape {_shown(expected)}, "
                                 f"got shape {_shown(shape)}")
        shape = _static_shape(self.energy)
        if not _fits(shape, expected[:2]):
            raise ValueError(
                f"Trajectory.energy must have shape {_shown(expected[:2])}, "
                f"got shape {_shown(shape)}"
            )

    @property
    def symbolic(self) -> bool:
        """Whether the fields are symbolic tensors (a trajectory built inside a ``tf.function``)."""
        return any(_is_symbolic(getattr(self, name)) for name in ("t", "q"))

    def _require_values(self, what: str) -> None:
        if self.symbolic:
            raise TypeError(f"Trajectory.{what} needs values; this trajectory holds symbolic "
                            "tensors (it was built inside a tf.function): call it outside")

    @property
    def n_trajectories(self) -> int:
        """Number of trajectories ``B``."""
        return self.q.shape[0]

    @property
    def n_dof(self) -> int:
        """Number of degrees of freedom ``n``."""
        return self.q.shape[2]

    def __getitem__(self, index) -> "Trajectory":
        """Select trajectories (an int, slice or index array over ``B``), keeping the batch axis."""
        if isinstance(index, (int, np.integer)):
            index = slice(index, index + 1 if index != -1 else None)
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
        )

    def until(self, t_stop: float) -> "Trajectory":
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
            t=self.t[:k], q=self.q[:, :k], qd=self.qd[:, :k], qdd=self.qdd[:, :k],
            tau=self.tau[:, :k], energy=self.energy[:, :k], nfev=self.nfev,
            method=self.method, metadata=dict(self.metadata),
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
                "t": self.t, "q": self.q, "qd": self.qd, "qdd": self.qdd,
                "tau": self.tau, "energy": self.energy,
                "nfev": np.asarray(self.nfev), "method": np.asarray(self.method),
            },
            kind="trajectory",
            metadata=self.metadata,
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path) -> "Trajectory":
        """Read a trajectory written by :meth:`save`."""
        from lnn._io import read_npz

        arrays, metadata = read_npz(path, kind="trajectory",
                                    required=("t", "q", "qd", "qdd", "tau", "energy"))
        return cls(
            t=arrays["t"], q=arrays["q"], qd=arrays["qd"], qdd=arrays["qdd"],
            tau=arrays["tau"], energy=arrays["energy"],
            nfev=int(arrays.get("nfev", 0)), method=str(arrays.get("method", "")),
            metadata=metadata,
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
    return (shape is not None and expected is not None and len(shape) == len(expected)
            and all(a is None or b is None or a == b for a, b in zip(shape, expected)))


def _shown(shape) -> str:
    """A static shape for a message (``None`` for unknown dimensions)."""
    return "of unknown rank" if shape is None else str(shape)


def _is_symbolic(x) -> bool:
    """A graph tensor: it has a static shape but no value (no ``numpy()``) until the graph runs."""
    return (not isinstance(x, np.ndarray) and hasattr(x, "shape") and hasattr(x, "dtype")
            and not hasattr(x, "numpy"))
