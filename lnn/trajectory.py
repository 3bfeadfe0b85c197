"""The result type of every integrator: a batch of trajectories on one time grid."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Trajectory"]


@dataclass(frozen=True)
class Trajectory:
    """A batch of ``B`` trajectories sampled on a common time grid.

    Attributes
    ----------
    t : ndarray, shape ``(T,)``
        Sample times in seconds, strictly increasing.
    q, qd, qdd, tau : ndarray, shape ``(B, T, n)``
        Coordinates, velocities, accelerations and generalized forces.
    energy : ndarray, shape ``(B, T)``
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
        t = np.asarray(self.t)
        if t.ndim != 1:
            raise ValueError(f"Trajectory.t must have shape (T,), got shape {t.shape}")
        expected = self.q.shape
        if len(expected) != 3 or expected[1] != t.shape[0]:
            raise ValueError(
                f"Trajectory.q must have shape (B, T={t.shape[0]}, n), got shape {expected}"
            )
        for name in ("qd", "qdd", "tau"):
            shape = np.shape(getattr(self, name))
            if shape != expected:
                raise ValueError(f"Trajectory.{name} must have shape {expected}, got shape {shape}")
        if np.shape(self.energy) != expected[:2]:
            raise ValueError(
                f"Trajectory.energy must have shape {expected[:2]}, got shape {np.shape(self.energy)}"
            )

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
        """
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
