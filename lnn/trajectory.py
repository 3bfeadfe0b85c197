"""The result type of every integrator: a batch of trajectories on one time grid.

:class:`Trajectory` is the one result of every integrator;
:class:`EnsembleTrajectory` is a :class:`Trajectory` (the members' mean) that
also holds every member's rollout along a member axis, the result of
:func:`lnn.rollout` of an :class:`lnn.Ensemble`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from lnn.uncertainty import z_value

__all__ = ["Band", "EnsembleTrajectory", "Failure", "Trajectory"]


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
    novelty : ndarray, shape ``(B, T)``, or None
        How far each sample lies from the states the system was trained on
        (``system.novelty(q, qd)``, 1.0 the training data's 99th percentile;
        :meth:`lnn.LagrangianNetwork.novelty`), recorded by :func:`lnn.rollout`;
        None for a system without novelty (ground truth), NaN for a model
        that has not seen data.
    novel_at : ndarray, shape ``(B,)``, or None
        Per trajectory, the first sample time at which ``novelty > 1`` (it
        left the training states), NaN for a trajectory that stayed inside;
        None with ``novelty``.
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
    novelty: np.ndarray | None = field(default=None, compare=False)
    novel_at: np.ndarray | None = field(default=None, compare=False)

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
        self._check_novelty(expected[:2])

    def _check_novelty(self, shape) -> None:
        for name, wanted in (("novelty", shape), ("novel_at", shape[:1])):
            value = getattr(self, name)
            if value is not None:
                value = np.asarray(value, dtype=np.float64)
                if not _fits(value.shape, wanted):
                    raise ValueError(f"Trajectory.{name} must have shape {_shown(wanted)}, got shape {value.shape}")
                object.__setattr__(self, name, value)

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
        return dataclasses.replace(
            self,
            q=self.q[index],
            qd=self.qd[index],
            qdd=self.qdd[index],
            tau=self.tau[index],
            energy=self.energy[index],
            metadata=dict(self.metadata),
            failed_at=failed_at,
            failures=_renumbered(self.failures, kept),
            novelty=None if self.novelty is None else self.novelty[index],
            novel_at=None if self.novel_at is None else self.novel_at[index],
            **self._selected(index, slice(None)),
        )

    def _selected(self, batch, time) -> dict:
        """The other fields of a subclass for the trajectories ``batch`` and the samples ``time``."""
        return {}

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
        novel_at = self.novel_at
        if novel_at is not None:
            novel_at = np.where(novel_at <= t_stop, novel_at, np.nan)
        return dataclasses.replace(
            self,
            t=self.t[:k],
            q=self.q[:, :k],
            qd=self.qd[:, :k],
            qdd=self.qdd[:, :k],
            tau=self.tau[:, :k],
            energy=self.energy[:, :k],
            metadata=dict(self.metadata),
            failed_at=np.where(self.failed_at <= t_stop, self.failed_at, np.nan),
            failures=tuple(f for f in self.failures if f.time <= t_stop),
            novelty=None if self.novelty is None else self.novelty[:, :k],
            novel_at=novel_at,
            **self._selected(slice(None), slice(None, k)),
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

        arrays = {
            "t": self.t,
            "q": self.q,
            "qd": self.qd,
            "qdd": self.qdd,
            "tau": self.tau,
            "energy": self.energy,
            "nfev": np.asarray(self.nfev),
            "method": np.asarray(self.method),
            "failed_at": np.asarray(self.failed_at, dtype=np.float64),
        }
        for name in ("novelty", "novel_at"):
            if getattr(self, name) is not None:
                arrays[name] = np.asarray(getattr(self, name), dtype=np.float64)
        arrays.update(self._saved_fields())
        write_npz(path, arrays, kind="trajectory", metadata=self.metadata, overwrite=overwrite)

    def _saved_fields(self) -> dict:
        """The arrays of a subclass's own fields, for :meth:`save`."""
        return {}

    @classmethod
    def load(cls, path) -> Trajectory:
        """Read a trajectory written by :meth:`save` (an :class:`EnsembleTrajectory` when it holds members)."""
        from lnn._io import read_npz

        arrays, metadata = read_npz(path, kind="trajectory", required=("t", "q", "qd", "qdd", "tau", "energy"))
        fields = dict(
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
            novelty=arrays.get("novelty"),
            novel_at=arrays.get("novel_at"),
        )
        if "member_q" in arrays:
            members = {name: arrays[name] for name in _MEMBER_FIELDS}
            return EnsembleTrajectory(**fields, **members, band_scale=float(arrays.get("band_scale", 1.0)))
        return cls(**fields)


#: The per-member arrays of an :class:`EnsembleTrajectory`.
_MEMBER_FIELDS = ("member_q", "member_qd", "member_qdd", "member_energy")


@dataclass(frozen=True)
class Band:
    """A central band around a mean (:meth:`EnsembleTrajectory.band`).

    Attributes
    ----------
    mean, lower, upper : ndarray, shape ``(B, T, n)`` (``(B, T)`` for the energy)
    level : float
        Its nominal probability.
    """

    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float

    def contains(self, values) -> np.ndarray:
        """Whether ``values`` (the shape of :attr:`mean`) lie in the band (False where anything is NaN)."""
        values = np.asarray(values, np.float64)
        with np.errstate(invalid="ignore"):
            return (values >= self.lower) & (values <= self.upper)


@dataclass(frozen=True)
class EnsembleTrajectory(Trajectory):
    """The rollouts of an ensemble's members from the same initial states (:func:`lnn.rollout` of an ensemble).

    A :class:`Trajectory` whose fields are the **mean over the members**
    (so every consumer of trajectories, plots, metrics and files, sees the
    ensemble's central prediction), with every member's rollout along a
    leading member axis and the bands between them.

    Attributes
    ----------
    member_q, member_qd, member_qdd : ndarray, shape ``(K, B, T, n)``
        Every member's rollout (NaN after a member's failure).
    member_energy : ndarray, shape ``(K, B, T)``
        Every member's own energy along its rollout.
    band_scale : float
        Multiplies the members' standard deviation in :meth:`band` (1.0: the
        raw spread; :func:`lnn.rollout` passes the ensemble's
        :attr:`lnn.Ensemble.rollout_band_scale`).

    Notes
    -----
    ``failed_at`` is, per trajectory, the earliest failure of any member
    (the mean is NaN from there on); ``failures`` name the member.
    """

    member_q: np.ndarray | None = field(default=None, compare=False)
    member_qd: np.ndarray | None = field(default=None, compare=False)
    member_qdd: np.ndarray | None = field(default=None, compare=False)
    member_energy: np.ndarray | None = field(default=None, compare=False)
    band_scale: float = field(default=1.0, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        shape = tuple(np.shape(self.q))
        if self.member_q is None:
            raise ValueError("EnsembleTrajectory needs member_q of shape (K, B, T, n), got None")
        k = np.shape(self.member_q)[0] if np.ndim(self.member_q) == 4 else None
        for name in _MEMBER_FIELDS:
            value = np.asarray(getattr(self, name), dtype=np.float64)
            wanted = (k, *shape[:2]) if name == "member_energy" else (k, *shape)
            if k is None or value.shape != wanted:
                raise ValueError(
                    f"EnsembleTrajectory.{name} must have shape (K, {', '.join(map(str, wanted[1:]))}), "
                    f"got shape {value.shape}"
                )
            object.__setattr__(self, name, value)
        object.__setattr__(self, "band_scale", float(self.band_scale))

    @classmethod
    def of_members(cls, runs, *, band_scale: float = 1.0) -> EnsembleTrajectory:
        """Stack the rollouts of ``K`` members from the same initial states and times.

        Parameters
        ----------
        runs : sequence of Trajectory
            One per member, each ``q (B, T, n)`` on the same ``t``.
        band_scale : float, keyword-only

        Returns
        -------
        EnsembleTrajectory
        """
        runs = list(runs)
        if not runs:
            raise ValueError("an EnsembleTrajectory needs at least one member's rollout, got none")
        members = {
            name: np.stack([np.asarray(getattr(r, name[7:]), np.float64) for r in runs]) for name in _MEMBER_FIELDS
        }
        failures = {}
        for k, run in enumerate(runs):
            for f in run.failures:
                if f.index not in failures or f.time < failures[f.index].time:
                    failures[f.index] = Failure(f.index, f.time, f"member {k}: {f.reason}")
        failed_at = np.full(runs[0].n_trajectories, np.nan)
        for index, f in failures.items():
            failed_at[index] = f.time
        return cls(
            t=runs[0].t,
            q=members["member_q"].mean(axis=0),
            qd=members["member_qd"].mean(axis=0),
            qdd=members["member_qdd"].mean(axis=0),
            tau=np.mean([np.asarray(r.tau, np.float64) for r in runs], axis=0),
            energy=members["member_energy"].mean(axis=0),
            nfev=sum(int(r.nfev) for r in runs),
            method=runs[0].method,
            metadata={**runs[0].metadata, "members": len(runs)},
            failed_at=failed_at,
            failures=tuple(failures[i] for i in sorted(failures)),
            band_scale=band_scale,
            **members,
        )

    @property
    def n_members(self) -> int:
        """Number of members ``K``."""
        return int(self.member_q.shape[0])

    def member(self, k: int) -> Trajectory:
        """Member ``k``'s rollout as a plain :class:`Trajectory` (``tau`` the mean's)."""
        if not isinstance(k, (int, np.integer)) or not -self.n_members <= k < self.n_members:
            raise ValueError(f"k must select one of the {self.n_members} members, got {k!r}")
        return Trajectory(
            t=self.t,
            q=self.member_q[k],
            qd=self.member_qd[k],
            qdd=self.member_qdd[k],
            tau=self.tau,
            energy=self.member_energy[k],
            method=self.method,
            metadata=dict(self.metadata),
        )

    def std(self, name: str = "q") -> np.ndarray:
        """The members' standard deviation (``ddof=1``) of ``name`` (``"q"``, ``"qd"``, ``"qdd"``, ``"energy"``).

        Returns
        -------
        ndarray, shape ``(B, T, n)`` (``(B, T)`` for ``"energy"``); zeros for one member.
        """
        values = self._members_of(name)
        if values.shape[0] < 2:
            return np.zeros(values.shape[1:])
        return np.std(values, axis=0, ddof=1)

    def band(self, name: str = "q", *, level: float = 0.9) -> Band:
        """The nominal ``level`` band ``mean ± z(level) band_scale std`` of ``name``.

        Parameters
        ----------
        name : {"q", "qd", "qdd", "energy"}
        level : float, keyword-only
            In ``(0, 1)`` (``z = 1.645`` for 0.9).

        Returns
        -------
        Band
        """
        mean = np.asarray(getattr(self, name), np.float64)
        half = z_value(level) * self.band_scale * self.std(name)
        return Band(mean=mean, lower=mean - half, upper=mean + half, level=float(level))

    def _members_of(self, name: str) -> np.ndarray:
        if name not in ("q", "qd", "qdd", "energy"):
            raise ValueError(f"name must be one of 'q', 'qd', 'qdd', 'energy', got {name!r}")
        return getattr(self, f"member_{name}")

    def _selected(self, batch, time) -> dict:
        out = {}
        for name in _MEMBER_FIELDS:
            value = getattr(self, name)[:, batch]
            out[name] = value[:, :, time]
        return out

    def _saved_fields(self) -> dict:
        return {**{name: getattr(self, name) for name in _MEMBER_FIELDS}, "band_scale": np.asarray(self.band_scale)}


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
