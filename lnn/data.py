"""Datasets of trajectories: generation, ``.npz`` storage, splits, derivatives from positions.

A :class:`Dataset` is a flat table of ``N`` samples ``(t, q, qd, qdd, tau)``
with the id of the trajectory each sample belongs to, plus the name and
parameters of the system that produced it. :func:`generate` fills one with
rollouts of a true system (:func:`lnn.rollout`); :meth:`Dataset.from_positions`
builds one from logged positions only, estimating ``qd`` and ``qdd`` with
:func:`estimate_derivatives` (Savitzky–Golay filters or splines).

Excitation torques for robots come from :class:`Sinusoids`: per trajectory and
joint, a random sum of sinusoids ``tau_j(t) = A_j sum_k c_k sin(2 pi f_k t +
phi_k)`` with weights ``c_k >= 0`` summing to one (so ``|tau_j| <= A_j``),
frequencies ``f_k`` uniform in a band (0.1–2 Hz by default) and phases
uniform in ``[0, 2 pi)``. :class:`GravityCompensation` adds the gravity torque
``g(q)`` to them (``generate(..., tau="gravity-sinusoids")``), so that arms
move smoothly instead of falling and whirling.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lnn import _validate
from lnn.errors import TimeSplitWarning
from lnn.ingest import ImportedLogs, WindowRule, read_csv, read_rosbag
from lnn.integrate import rollout
from lnn.residuals import STEP_TOLERANCE, common_rate
from lnn.trajectory import Trajectory

__all__ = [
    "Dataset",
    "DatasetSplit",
    "TimeSplitWarning",
    "Derivatives",
    "GravityCompensation",
    "Sinusoids",
    "estimate_derivatives",
    "excitation_trajectories",
    "generate",
    "sum_of_sinusoids",
]

_KIND = "dataset"
_ARRAYS = ("t", "q", "qd", "qdd", "tau", "trajectory", "energy")
#: Default frequency band (Hz) and number of components of the sinusoid excitation.
DEFAULT_FREQUENCIES = (0.1, 2.0)
DEFAULT_COMPONENTS = 5
#: Names of the built-in excitations of :func:`generate`.
_EXCITATIONS = ("sinusoids", "gravity-sinusoids")
#: Standard deviation (rad/s) of the initial rates of ``tau="gravity-sinusoids"``.
GRAVITY_SINUSOIDS_VELOCITY_SCALE = 0.2
#: Default peak sinusoid of ``tau="gravity-sinusoids"``, per unit of the median ``M_jj`` (s^-2).
#: Larger values let the light distal joints of a 7-DOF arm whirl (2 s^-2 max M_jj drove the
#: Panda's wrist to 60 rad/s); 0.5 keeps the Panda within ~2-7 rad/s and the planar arm ~1-2 rad/s.
GRAVITY_SINUSOIDS_ACCELERATION = 0.5
#: Defaults of :func:`excitation_trajectories`: peak excursion per joint (rad), band (Hz), components.
EXCITATION_AMPLITUDE = 0.3
EXCITATION_FREQUENCIES = (0.1, 1.0)
EXCITATION_COMPONENTS = 3


@dataclass(frozen=True, eq=False)
class Dataset:
    """``N`` samples of trajectories of one mechanical system.

    Attributes
    ----------
    t : ndarray, shape ``(N,)``
        Sample times (s), strictly increasing within each trajectory.
    q, qd, qdd, tau : ndarray, shape ``(N, n)``
        Coordinates, velocities, accelerations and generalized forces.
    trajectory : ndarray of int, shape ``(N,)``
        Id of the trajectory each sample belongs to.
    energy : ndarray, shape ``(N,)``
        The true system's energy at each sample (NaN where unknown, e.g. for
        logged data); ``None`` on construction means unknown.
    system : str
        Name of the system (e.g. ``"double-pendulum"``), ``""`` if unknown.
    parameters : dict
        JSON-serialisable parameters that rebuild the system with
        ``simulations.make_system(system, **parameters)``.
    angular : tuple of bool, length ``n``
        Which coordinates are angles; ``()`` on construction means none.
    dt : float
        Sampling interval (s) when uniform, NaN otherwise.
    derivative_span : float
        Time span (s) of the filter windows that estimated ``qd`` and ``qdd``
        from positions (the widest), NaN when unknown or exact (simulated
        data). :meth:`split` keeps time blocks of different parts at least
        this far apart, so that no sample's derivatives share a raw sample
        with another part's.
    joint_names : tuple of str or None
        Names of the ``n`` joints (e.g. a robot's URDF joints), in the order
        of the coordinates; None when unknown. Imported logs fill it from a
        ROS bag's joint names or from named CSV position columns.
    window_rule : lnn.ingest.WindowRule or None
        How the import chose the Savitzky–Golay windows of ``qd`` and
        ``qdd`` (imported logs; None otherwise): ``window=dataset.window_rule``
        (``lnn import --like``) reads held-out logs of the robot with the
        windows the training logs got, not windows their own torques chose.

    Raises
    ------
    ValueError
        If the arrays' shapes disagree or contain NaN/inf, ``angular`` has
        the wrong length, or ``joint_names`` is not ``n`` distinct names.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    trajectory: np.ndarray
    energy: np.ndarray | None = None
    system: str = ""
    parameters: dict = field(default_factory=dict)
    angular: tuple = ()
    dt: float = math.nan
    derivative_span: float = math.nan
    joint_names: tuple | None = None
    window_rule: WindowRule | None = None

    def __post_init__(self) -> None:
        t = _float_array(self.t, "t")
        q = _float_array(self.q, "q")
        if t.ndim != 1:
            raise ValueError(f"Dataset.t must have shape (N,); got shape {t.shape}")
        N = t.shape[0]
        if q.ndim != 2 or q.shape[0] != N or q.shape[1] < 1:
            raise ValueError(f"Dataset.q must have shape (N={N}, n); got shape {q.shape}")
        arrays = {"t": t, "q": q}
        for name in ("qd", "qdd", "tau"):
            arrays[name] = _float_array(getattr(self, name), name)
            if arrays[name].shape != q.shape:
                raise ValueError(f"Dataset.{name} must have the shape of q, {q.shape}; got shape {arrays[name].shape}")
        for name, array in arrays.items():
            if not np.isfinite(array).all():
                raise ValueError(f"Dataset.{name} contains NaN or infinite values")
        trajectory = np.asarray(self.trajectory)
        if trajectory.shape != (N,) or not (trajectory.size == 0 or np.issubdtype(trajectory.dtype, np.integer)):
            raise ValueError(
                f"Dataset.trajectory must be integer ids of shape (N={N},); got shape "
                f"{trajectory.shape} and dtype {trajectory.dtype}"
            )
        energy = np.full(N, np.nan) if self.energy is None else _float_array(self.energy, "energy")
        if energy.shape != (N,):
            raise ValueError(f"Dataset.energy must have shape (N={N},); got shape {energy.shape}")
        n = q.shape[1]
        angular = tuple(bool(a) for a in self.angular) if len(self.angular) else (False,) * n
        if len(angular) != n:
            raise ValueError(f"Dataset.angular must have {n} entries; got {self.angular!r}")
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "trajectory", trajectory.astype(np.int64))
        object.__setattr__(self, "energy", energy)
        object.__setattr__(self, "angular", angular)
        object.__setattr__(self, "parameters", _jsonable(dict(self.parameters)))
        object.__setattr__(self, "dt", float(self.dt) if self.dt is not None else math.nan)
        span = math.nan if self.derivative_span is None else float(self.derivative_span)
        if not (math.isnan(span) or (math.isfinite(span) and span >= 0)):
            raise ValueError(f"Dataset.derivative_span must be >= 0 seconds or NaN; got {span!r}")
        object.__setattr__(self, "derivative_span", span)
        object.__setattr__(self, "joint_names", _joint_names(self.joint_names, n))
        if self.window_rule is not None and not isinstance(self.window_rule, WindowRule):
            raise TypeError(
                f"Dataset.window_rule must be an lnn.ingest.WindowRule or None; got {type(self.window_rule).__name__}"
            )

    # ------------------------------------------------------------------ sizes
    @property
    def n_dof(self) -> int:
        """Number of degrees of freedom ``n``."""
        return self.q.shape[1]

    @property
    def trajectory_ids(self) -> np.ndarray:
        """The distinct trajectory ids, sorted, shape ``(n_trajectories,)``."""
        return np.unique(self.trajectory)

    @property
    def n_trajectories(self) -> int:
        """Number of distinct trajectories."""
        return int(self.trajectory_ids.shape[0])

    def __len__(self) -> int:
        """Number of samples ``N``."""
        return self.t.shape[0]

    # -------------------------------------------------------------- selection
    def at_first_rate(self, *, limit: int | None = None) -> Dataset:
        """The trajectories sampled at the first one's rate (steps within
        :data:`lnn.residuals.STEP_TOLERANCE`, 1 %), the first ``limit`` of them:
        what a batch of replays on one grid can hold (an import puts each
        file on its own grid, 0.03 % apart at one rate, 29 % at another).

        Parameters
        ----------
        limit : int, optional, keyword-only
            At most this many trajectories (in id order).

        Returns
        -------
        Dataset
        """
        ids = [int(self.trajectory[rows[0]]) for rows in _rows_at_first_rate(self.t, self.trajectory)]
        return self.subset(ids[:limit])

    def at_common_rate(self) -> Dataset:
        """The trajectories sampled at the rate that holds the most samples
        (steps within :data:`lnn.residuals.STEP_TOLERANCE`, 1 %, of one of
        them): what one spectrum or one lag in samples can read. The dataset
        itself when every trajectory is at that rate.

        Returns
        -------
        Dataset
        """
        groups = _groups(self.trajectory)
        steps = [_mean_step(self.t[rows]) for _, rows in groups]
        common = common_rate(steps, [rows.shape[0] for _, rows in groups])
        best = [i for (i, _), at_rate in zip(groups, common) if at_rate]
        return self if not best or len(best) == self.n_trajectories else self.subset(best)

    def subset(self, trajectory_ids) -> Dataset:
        """The samples of the given trajectories, in their original order.

        Parameters
        ----------
        trajectory_ids : array_like of int, shape ``(k,)``
            Ids to keep; ids absent from the dataset raise.

        Returns
        -------
        Dataset
        """
        ids = np.asarray(trajectory_ids, dtype=np.int64).reshape(-1)
        missing = np.setdiff1d(ids, self.trajectory_ids)
        if missing.size:
            raise ValueError(f"trajectory_ids {missing.tolist()} are not in this dataset")
        keep = np.isin(self.trajectory, ids)
        return Dataset(
            t=self.t[keep],
            q=self.q[keep],
            qd=self.qd[keep],
            qdd=self.qdd[keep],
            tau=self.tau[keep],
            trajectory=self.trajectory[keep],
            energy=self.energy[keep],
            system=self.system,
            parameters=self.parameters,
            angular=self.angular,
            dt=self.dt,
            derivative_span=self.derivative_span,
            joint_names=self.joint_names,
            window_rule=self.window_rule,
        )

    def _rows(self, keep: np.ndarray, ids: np.ndarray) -> Dataset:
        """The samples where ``keep (N,)`` holds, with new trajectory ids ``ids (N,)``."""
        return Dataset(
            t=self.t[keep],
            q=self.q[keep],
            qd=self.qd[keep],
            qdd=self.qdd[keep],
            tau=self.tau[keep],
            trajectory=ids[keep],
            energy=self.energy[keep],
            system=self.system,
            parameters=self.parameters,
            angular=self.angular,
            dt=self.dt,
            derivative_span=self.derivative_span,
            joint_names=self.joint_names,
            window_rule=self.window_rule,
        )

    def split(
        self,
        *,
        fractions=(0.8, 0.1, 0.1),
        seed: int = 0,
        by: str = "trajectory",
        block: float | None = None,
        margin: float | None = None,
    ) -> DatasetSplit:
        """Split into disjoint training, validation and test sets, by trajectory or by time block.

        ``by="trajectory"``: trajectories (never single samples) are shuffled
        with ``seed`` and cut in the given proportions, so no trajectory leaks
        across the parts.

        ``by="time"``: for a few long recordings (one robot log). The
        samples of the trajectories, one after the other, are dealt to the
        parts in contiguous blocks: a part of fraction ``f`` gets ``f N`` of
        the ``N`` samples (rounded), in ``max(1, round(f D / block))`` blocks
        of equal size (``D`` the total duration); the blocks are shuffled
        with ``seed``. At every boundary between blocks of different parts
        within a trajectory, the samples of the part with the larger fraction
        that lie within ``margin`` of the boundary are dropped (of both parts
        within ``margin / 2`` when their fractions are equal), so the parts'
        samples are at least ``margin`` apart in time (with ``margin`` the
        span of the derivative filter, no sample's ``qd``/``qdd`` shares a
        raw sample with another part's), the smaller parts keep their share,
        and each boundary costs ``margin`` of samples, no more. Each
        contiguous run of kept samples becomes a trajectory with a new id
        (ids are unique across the parts). Holding out ``f = 0.1`` of one
        recording thus keeps 10 % of its samples for validation (one block
        when ``block`` is at least a tenth of the recording) and drops one
        or two ``margin`` s of training samples.

        ``by="auto"``: by trajectory when every part with a positive fraction
        ``f`` would get at least one whole trajectory (``f K >= 1`` for ``K``
        trajectories), else by time. This is what :func:`lnn.fit` (with
        ``validation=`` a fraction) and ``lnn.identify`` use.

        Parameters
        ----------
        fractions : sequence of 3 floats
            Non-negative proportions for (train, validation, test), summing
            to 1. A part with a positive fraction gets at least one
            trajectory (or block).
        seed : int
            Seed of the shuffle; the same seed gives the same split.
        by : {"trajectory", "time", "auto"}
            See above.
        block : float, optional
            Length of the time blocks (s); default: a tenth of the total
            duration, and at least ``5 margin`` (but no more than the total
            duration over the number of parts).
        margin : float, optional
            Least time (s) between samples of different parts; default
            :attr:`derivative_span` (0 when unknown).

        Returns
        -------
        DatasetSplit
            With ``by`` the method used, ``margin`` and the number of samples
            dropped between blocks.

        Raises
        ------
        ValueError
            For invalid fractions or options, or fewer trajectories (blocks)
            than parts with a positive fraction.
        """
        fractions = np.asarray(fractions, dtype=np.float64)
        if (
            fractions.shape != (3,)
            or not np.isfinite(fractions).all()
            or (fractions < 0).any()
            or abs(fractions.sum() - 1.0) > 1e-9
        ):
            raise ValueError(f"fractions must be 3 non-negative numbers summing to 1; got {fractions.tolist()}")
        if by not in ("trajectory", "time", "auto"):
            raise ValueError(f"by must be 'trajectory', 'time' or 'auto'; got {by!r}")
        ids = self.trajectory_ids
        K = ids.shape[0]
        if by == "auto":
            positive = fractions[fractions > 0]
            by = "trajectory" if (positive * K >= 1.0 - 1e-9).all() else "time"
        if by == "time":
            return self._split_time(fractions, seed=seed, block=block, margin=margin)
        if block is not None or margin is not None:
            raise ValueError("block and margin apply to by='time' (or 'auto' on few trajectories)")
        wanted = int((fractions > 0).sum())
        if K < wanted:
            raise ValueError(
                f"cannot split {K} trajectory(ies) into {wanted} non-empty parts "
                f"(fractions {fractions.tolist()}); use by='time' or by='auto' for time blocks"
            )
        counts = _apportion(fractions, K)
        shuffled = np.random.default_rng(seed).permutation(ids)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        train, validation, test = (self.subset(np.sort(shuffled[a:b])) for a, b in zip(bounds[:-1], bounds[1:]))
        return DatasetSplit(train=train, validation=validation, test=test)

    def _split_time(self, fractions: np.ndarray, *, seed: int, block, margin) -> DatasetSplit:
        """:meth:`split` by time blocks (see there)."""
        if margin is None:
            margin = 0.0 if math.isnan(self.derivative_span) else self.derivative_span
        margin = _validate_seconds("margin", margin, zero=True)
        groups = _groups(self.trajectory)
        if not groups:
            raise ValueError("the dataset is empty: it has no trajectory to split")
        groups = [(i, rows[np.argsort(self.t[rows], kind="stable")]) for i, rows in groups]
        total = sum(float(self.t[rows].max() - self.t[rows].min()) for _, rows in groups)
        wanted = int((fractions > 0).sum())
        if block is None:
            block = min(max(total / 10.0, 5.0 * margin), total / wanted)
        else:
            block = _validate_seconds("block", block)
        if block <= 0 or round(total / block) < wanted:
            raise ValueError(
                f"cannot split {len(groups)} trajectory(ies) of {total:.4g} s in total into "
                f"{wanted} non-empty parts of time blocks of {block:.4g} s (margin {margin:.4g} s); "
                f"give a shorter block"
            )
        order = np.concatenate([rows for _, rows in groups])  # the samples, trajectory by trajectory
        part = np.empty(len(self), dtype=np.int64)
        part[order] = _deal_blocks(fractions, order.shape[0], total / block, seed=seed)
        keep = np.ones(len(self), dtype=bool)
        run = np.empty(len(self), dtype=np.int64)
        next_run = 0
        for _, rows in groups:
            t, p = self.t[rows], part[rows]
            changes = np.flatnonzero(p[1:] != p[:-1])
            for c in changes:  # the boundary halfway between the two samples
                boundary = 0.5 * (t[c] + t[c + 1])
                left, right = fractions[p[c]], fractions[p[c + 1]]
                if left > right:  # the larger part gives the whole margin
                    zone = (t > boundary - margin) & (t < boundary)
                elif right > left:
                    zone = (t > boundary) & (t < boundary + margin)
                else:
                    zone = np.abs(t - boundary) < 0.5 * margin
                keep[rows[zone]] = False
            starts = np.concatenate([[0], changes + 1])
            for a, b in zip(starts, np.concatenate([changes + 1, [rows.size]])):
                run[rows[a:b]] = next_run
                next_run += 1
        parts = []
        for k in range(3):
            selected = keep & (part == k)
            if fractions[k] > 0 and not selected.any():
                raise ValueError(
                    f"the time blocks of part {('train', 'validation', 'test')[k]} lie entirely "
                    f"within the margin ({margin:.4g} s) of their neighbours; give a longer block "
                    f"(got {block:.4g} s)"
                )
            parts.append(self._rows(selected, run))
        return DatasetSplit(
            train=parts[0],
            validation=parts[1],
            test=parts[2],
            by="time",
            margin=margin,
            dropped=int((~keep).sum()),
            block=block,
        )

    # ---------------------------------------------------------- trajectories
    def trajectories(self) -> list[Trajectory]:
        """One :class:`lnn.Trajectory` (``B = 1``) per trajectory id, in id order.

        Returns
        -------
        list of Trajectory
            Each with ``t (T_i,)``, ``q, qd, qdd, tau (1, T_i, n)``,
            ``energy (1, T_i)``; the id is in ``metadata["trajectory_id"]``.
        """
        result = []
        for i, rows in _groups(self.trajectory):
            result.append(
                Trajectory(
                    t=self.t[rows],
                    q=self.q[rows][None],
                    qd=self.qd[rows][None],
                    qdd=self.qdd[rows][None],
                    tau=self.tau[rows][None],
                    energy=self.energy[rows][None],
                    metadata={"system": self.system, "trajectory_id": int(i)},
                )
            )
        return result

    def as_trajectory(self, *, truncate: bool = False) -> Trajectory:
        """All trajectories as one batch ``(B, T, n)`` on their common time grid.

        Parameters
        ----------
        truncate : bool, keyword-only
            Recordings of one rate but different lengths and start times
            (logs): all cut to the shortest one's ``T`` samples, on the
            first one's grid from its start (steps within
            :data:`lnn.residuals.STEP_TOLERANCE`, 1 %, of each other).

        Returns
        -------
        Trajectory
            Batch in id order; ``metadata["trajectory_ids"]`` lists the ids.

        Raises
        ------
        ValueError
            If the trajectories do not share one time grid (with
            ``truncate``: one step).
        """
        parts = self.trajectories()
        if not parts:
            raise ValueError("the dataset is empty: it has no trajectory")
        if truncate:
            return _truncated_batch(parts, self.system, self.trajectory_ids)
        t = parts[0].t
        for part in parts[1:]:
            if part.t.shape != t.shape or not np.array_equal(part.t, t):
                raise ValueError(
                    f"trajectories {parts[0].metadata['trajectory_id']} and "
                    f"{part.metadata['trajectory_id']} have different time grids "
                    f"({t.shape[0]} and {part.t.shape[0]} samples); use trajectories() instead"
                )
        stack = {
            name: np.concatenate([getattr(p, name) for p in parts]) for name in ("q", "qd", "qdd", "tau", "energy")
        }
        return Trajectory(
            t=t, **stack, metadata={"system": self.system, "trajectory_ids": self.trajectory_ids.tolist()}
        )

    @classmethod
    def from_trajectory(
        cls, trajectory: Trajectory, *, system: str = "", parameters: dict | None = None, angular=()
    ) -> Dataset:
        """Flatten a batch of trajectories ``(B, T, n)`` into a dataset of ``B T`` samples.

        Parameters
        ----------
        trajectory : Trajectory
            ``t (T,)``, ``q, qd, qdd, tau (B, T, n)``, ``energy (B, T)``.
        system : str, optional
            Name of the system that produced it.
        parameters : dict, optional
            Its parameters (JSON-serialisable).
        angular : tuple of bool, optional
            Which coordinates are angles.

        Returns
        -------
        Dataset
            Trajectory ids ``0 .. B-1``; ``dt`` is the grid spacing when uniform.
        """
        if not isinstance(trajectory, Trajectory):
            raise TypeError(f"trajectory must be an lnn.Trajectory; got {type(trajectory).__name__}")
        B, T, n = trajectory.q.shape
        return cls(
            t=np.tile(trajectory.t, B),
            q=trajectory.q.reshape(B * T, n),
            qd=trajectory.qd.reshape(B * T, n),
            qdd=trajectory.qdd.reshape(B * T, n),
            tau=trajectory.tau.reshape(B * T, n),
            trajectory=np.repeat(np.arange(B), T),
            energy=trajectory.energy.reshape(B * T),
            system=system,
            parameters=parameters or {},
            angular=angular,
            dt=_uniform_step(trajectory.t),
        )

    @classmethod
    def from_positions(
        cls,
        t,
        q,
        *,
        trajectory=None,
        tau=None,
        method: str = "savgol",
        window: int | None = None,
        order: int | None = None,
        smoothing: float | None = None,
        system: str = "",
        parameters: dict | None = None,
        angular=(),
    ) -> Dataset:
        """Build a dataset from logged positions, estimating ``qd`` and ``qdd``.

        Parameters
        ----------
        t : array_like, shape ``(N,)``
            Sample times, strictly increasing within each trajectory.
        q : array_like, shape ``(N, n)``
            Logged coordinates.
        trajectory : array_like of int, shape ``(N,)``, optional
            Trajectory ids; ``None`` means one trajectory.
        tau : array_like, shape ``(N, n)``, optional
            Logged generalized forces; ``None`` means none applied (zeros).
        method, window, order, smoothing
            Passed to :func:`estimate_derivatives`, trajectory by trajectory.
        system, parameters, angular
            As in :class:`Dataset`.

        Returns
        -------
        Dataset
            With ``energy`` unknown (NaN).
        """
        t = _float_array(t, "t")
        q = _float_array(q, "q")
        if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.shape[0]:
            raise ValueError(f"t must have shape (N,) and q shape (N, n); got shapes {t.shape} and {q.shape}")
        N = t.shape[0]
        ids = np.zeros(N, dtype=np.int64) if trajectory is None else np.asarray(trajectory)
        if ids.shape != (N,) or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"trajectory must be integer ids of shape ({N},); got shape {ids.shape}")
        tau = np.zeros_like(q) if tau is None else _float_array(tau, "tau")
        qd, qdd = np.empty_like(q), np.empty_like(q)
        steps = []
        for i, rows in _groups(ids):
            if rows.shape[0] > 1 and not (np.diff(t[rows]) > 0).all():
                raise ValueError(f"t must be strictly increasing within trajectory {int(i)}")
            estimate = estimate_derivatives(
                t[rows], q[rows], method=method, window=window, order=order, smoothing=smoothing
            )
            qd[rows], qdd[rows] = estimate.qd, estimate.qdd
            steps.append(_uniform_step(t[rows]))
        dt = steps[0] if steps and all(s == steps[0] for s in steps) else math.nan
        span = math.nan
        if method == "savgol":
            used = (
                window
                if window is not None
                else min(11, max(int(rows.shape[0]) - 1 + int(rows.shape[0]) % 2 for _, rows in _groups(ids)))
            )
            span = used * float(np.nanmax(steps)) if not all(math.isnan(x) for x in steps) else math.nan
        return cls(
            t=t,
            q=q,
            qd=qd,
            qdd=qdd,
            tau=tau,
            trajectory=ids,
            system=system,
            parameters=parameters or {},
            angular=angular,
            dt=dt,
            derivative_span=span,
        )

    @classmethod
    def from_csv(
        cls,
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
        order: int = 4,
        trim: bool = True,
        velocity: str = "q",
        lag=None,
    ) -> Dataset:
        """Read measured CSV logs: drop repeated and held samples, split at gaps, resample, differentiate.

        The dataset of :func:`lnn.logs.import_csv` (which also returns the
        :class:`lnn.logs.ImportReport`: rows dropped, gaps, the step, the
        windows, the torque lag); :mod:`lnn.ingest` documents each step and
        the rules behind the defaults (the Savitzky–Golay windows follow from
        the sampling rate, the noise and the motion's bandwidth).

        Parameters
        ----------
        paths : str, os.PathLike or sequence of them
            CSV files; several files are several trajectories (and a file
            with gaps several more).
        time : str or int
            The time column: header name or 0-based index.
        q, tau : sequence of str or int
            The ``n`` position and generalized-force columns.
        qd : sequence of str or int, optional
            ``n`` measured velocity columns (compared with the derivative of
            the positions; used for ``qd`` when ``velocity="measured"``).
        joints : sequence of str, optional
            Names of the ``n`` joints (:attr:`joint_names`); default: the
            ``q`` column names when ``q`` names columns, else None.
        angular : bool or sequence of bool
            Which coordinates are angles that may wrap (unwrapped); default
            False: none (nothing is guessed about the robot).
        time_scale : float
            Seconds per unit of the time column (1e-3 for milliseconds, 1e-9
            for nanosecond stamps). Times start at 0 at each file's first sample.
        delimiter : str, optional
            Column separator; default: sniffed from the first line.
        step : float, optional
            Step of the uniform grid (s); default: the files' nominal step.
        max_gap : float, optional
            Holes longer than this (s) split a log; default ``max(3 h, W h / 4)``.
        window : int, "spectrum" or lnn.ingest.WindowRule, optional
            Odd Savitzky–Golay window (samples) for ``qd`` and ``qdd`` of every
            coordinate; ``"spectrum"``: per coordinate from the positions
            (:func:`lnn.ingest.choose_window`); a rule (another import's
            :attr:`window_rule`): the windows it gives at each file's step,
            so that held-out logs are read as the training logs were; default:
            one window, where the motion explains the torques best
            (:class:`lnn.ingest.Cleaning`).
        order : int
            Degree of the Savitzky–Golay polynomials (at least 2).
        trim : bool
            Cut half a window at each end of each piece.
        velocity : {"q", "measured"}
            Where ``qd`` comes from (``"measured"`` needs ``qd=`` columns).
        lag : None, "auto", float or sequence of float
            Shift of the torque stream before resampling (:class:`lnn.ingest.Cleaning`):
            None (default) shifts nothing, ``"auto"`` each torque column by its
            estimated lag behind the positions (reported either way), a number
            of seconds every column, a sequence one per column.

        Returns
        -------
        Dataset
            ``t (N,)`` (from 0 at each file's first sample), ``q, qd, qdd,
            tau (N, n)``, trajectory ids through the files in order, ``dt``
            the step when all files share it, ``derivative_span`` the widest
            window's span, energy unknown.

        Raises
        ------
        FileNotFoundError, ValueError, TypeError
            For missing files or columns, non-numeric cells, time going
            backwards, logs too short for the window, a bad argument (naming
            the file, line, column or argument, and what was received).
        """
        return cls.from_imported(
            read_csv(
                paths,
                time=time,
                q=q,
                qd=qd,
                tau=tau,
                joints=joints,
                angular=angular,
                time_scale=time_scale,
                delimiter=delimiter,
                step=step,
                max_gap=max_gap,
                window=window,
                order=order,
                trim=trim,
                velocity=velocity,
                lag=lag,
            )
        )

    @classmethod
    def from_rosbag(
        cls,
        paths,
        *,
        topic: str,
        joints=None,
        angular=False,
        step: float | None = None,
        max_gap: float | None = None,
        window: int | str | WindowRule | None = None,
        order: int = 4,
        trim: bool = True,
        velocity: str = "q",
        lag=None,
    ) -> Dataset:
        """Read ``sensor_msgs/msg/JointState`` messages of ROS bags, cleaned as :meth:`from_csv` cleans CSV logs.

        Needs the rosbags package (``pip install 'lnn[ros]'``). ROS 2 bags (a
        directory with ``metadata.yaml``, or a single ``.mcap`` or ``.db3``
        file) and ROS 1 bags (``.bag``) are read. Each message's header stamp
        is its time (the bag's receive time where the stamp is zero); its
        ``position``, ``effort`` and, when every message has them,
        ``velocity`` (measured velocities: compared, or used with
        ``velocity="measured"``) give ``q``, ``tau`` and the measured ``qd``
        of the selected joints. Then the same pipeline as for CSV logs
        (:mod:`lnn.ingest`).

        Parameters
        ----------
        paths : str, os.PathLike or sequence of them
            The bags; several bags are several trajectories.
        topic : str
            The topic of the ``JointState`` messages, e.g. ``"/joint_states"``.
        joints : sequence of str, optional
            The joints to read, in this order (:attr:`joint_names`); default:
            every joint of the first message, in its order.
        angular, step, max_gap, window, order, trim, velocity, lag
            As in :meth:`from_csv`.

        Returns
        -------
        Dataset
            As :meth:`from_csv`'s, with :attr:`joint_names` the joints read.

        Raises
        ------
        ImportError
            Without the rosbags package.
        FileNotFoundError
            For a missing bag.
        ValueError, TypeError
            For a file that is not a bag, a missing topic or one of another
            type, a message that lacks a selected joint or whose arrays are
            shorter than its names (naming the message's index and what it
            had), time stamps going backwards, a bad argument.
        """
        return cls.from_imported(
            read_rosbag(
                paths,
                topic=topic,
                joints=joints,
                angular=angular,
                step=step,
                max_gap=max_gap,
                window=window,
                order=order,
                trim=trim,
                velocity=velocity,
                lag=lag,
            )
        )

    @classmethod
    def from_imported(cls, logs: ImportedLogs) -> Dataset:
        """The dataset of logs imported by :func:`lnn.ingest.read_csv` or :func:`lnn.ingest.read_rosbag`.

        Parameters
        ----------
        logs : lnn.ingest.ImportedLogs

        Returns
        -------
        Dataset
            Energy unknown, no system name.
        """
        if not isinstance(logs, ImportedLogs):
            raise TypeError(f"logs must be an lnn.ingest.ImportedLogs; got {type(logs).__name__}")
        return cls(
            t=logs.t,
            q=logs.q,
            qd=logs.qd,
            qdd=logs.qdd,
            tau=logs.tau,
            trajectory=logs.trajectory,
            angular=logs.angular,
            dt=logs.dt,
            derivative_span=logs.derivative_span,
            joint_names=logs.joint_names,
            window_rule=logs.window_rule,
        )

    # --------------------------------------------------------------------- I/O
    def save(self, path, *, overwrite: bool = False) -> None:
        """Write the dataset to an ``.npz`` file (format-versioned, no pickle).

        Parameters
        ----------
        path : str or os.PathLike
            Destination ending in ``.npz``; its directory must exist.
        overwrite : bool
            Replace an existing file.

        Raises
        ------
        FileExistsError
            If ``path`` exists and ``overwrite`` is false.
        """
        from lnn._io import write_npz

        write_npz(
            path,
            {name: getattr(self, name) for name in _ARRAYS},
            kind=_KIND,
            metadata={
                "system": self.system,
                "parameters": self.parameters,
                "angular": list(self.angular),
                "dt": None if math.isnan(self.dt) else self.dt,
                "derivative_span": None if math.isnan(self.derivative_span) else self.derivative_span,
                "joint_names": None if self.joint_names is None else list(self.joint_names),
                "window_rule": None if self.window_rule is None else self.window_rule.to_json(),
            },
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path) -> Dataset:
        """Read a dataset written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        Dataset

        Raises
        ------
        FileNotFoundError
            If the file does not exist.
        ValueError
            If it is not an lnn dataset file of this format version, or its
            contents are inconsistent (the message names the file).
        """
        from lnn._io import read_npz

        arrays, metadata = read_npz(path, kind=_KIND, required=_ARRAYS)
        try:
            return cls(
                **{name: arrays[name] for name in _ARRAYS},
                system=str(metadata.get("system", "")),
                parameters=metadata.get("parameters") or {},
                angular=tuple(metadata.get("angular") or ()),
                dt=metadata.get("dt"),
                derivative_span=metadata.get("derivative_span"),
                joint_names=metadata.get("joint_names"),  # absent from files written before: None
                window_rule=_window_rule(metadata.get("window_rule")),  # likewise
            )
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{str(path)!r} holds an invalid dataset: {exc}") from exc


@dataclass(frozen=True)
class DatasetSplit:
    """A split of a :class:`Dataset` (:meth:`Dataset.split`).

    Attributes
    ----------
    train, validation, test : Dataset
        Disjoint sets of whole trajectories (``by="trajectory"``) or of
        contiguous time blocks, each block a trajectory (``by="time"``).
    by : str
        ``"trajectory"`` or ``"time"``.
    margin : float
        Least time (s) between samples of different parts (0 by trajectory).
    dropped : int
        Samples dropped within the margin of the boundaries between blocks.
    block : float
        Length of the time blocks (s); NaN by trajectory.
    """

    train: Dataset
    validation: Dataset
    test: Dataset
    by: str = "trajectory"
    margin: float = 0.0
    dropped: int = 0
    block: float = math.nan

    def describe(self) -> str:
        """One line saying how the split was made (what :func:`lnn.fit` warns on time blocks)."""
        sizes = [len(p) for p in (self.train, self.validation, self.test)]
        total = sum(sizes) + self.dropped
        share = ", ".join(
            f"{name} {size / total:.1%}" for name, size in zip(("train", "validation", "test"), sizes) if size
        )
        if self.by == "trajectory":
            return (
                f"split by trajectory: {self.train.n_trajectories}/"
                f"{self.validation.n_trajectories}/{self.test.n_trajectories} trajectories "
                f"({share} of the samples)"
            )
        return (
            f"split by time blocks of {self.block:.4g} s ({share} of the samples), "
            f"{self.dropped} samples dropped within {self.margin:.4g} s between parts"
        )


# ------------------------------------------------------------------- generation


def _time_grid(duration, dt) -> np.ndarray:
    """The sample times ``0, dt, ..., T dt`` with ``T = round(duration / dt) >= 1``."""
    for name, value in (("duration", duration), ("dt", dt)):
        try:
            _validate.positive(name, value)
        except TypeError as exc:  # the grid's arguments: a ValueError either way
            raise ValueError(f"{name} must be a finite number > 0; got {value!r}") from exc
    steps = int(round(duration / dt))
    if steps < 1:
        raise ValueError(f"duration must be at least dt; got duration={duration!r}, dt={dt!r}")
    return np.arange(steps + 1) * float(dt)


def generate(
    system,
    *,
    n_trajectories: int,
    duration: float,
    dt: float,
    seed: int,
    tau=None,
    amplitude=None,
    frequencies=DEFAULT_FREQUENCIES,
    n_components: int = DEFAULT_COMPONENTS,
    method: str = "DOP853",
    rtol: float = 1e-8,
    atol: float = 1e-10,
    batch_size: int = 256,
    progress: Callable[..., None] | None = None,
) -> Dataset:
    """Roll out random initial states of a system and sample them every ``dt``.

    Parameters
    ----------
    system : MechanicalSystem
        Must also have ``sample_state(n, rng=...)`` (returning ``.q, .qd`` of
        shape ``(n, n_dof)``); ``name`` and ``parameters()`` are recorded
        when present.
    n_trajectories : int
        Number of trajectories ``B``.
    duration : float
        Length of each trajectory (s); the samples are ``0, dt, ..., T dt``
        with ``T = round(duration / dt)``.
    dt : float
        Sampling interval (s); the solver's steps are adaptive and independent.
    seed : int
        Seeds the initial states and the excitation: equal seeds give equal
        datasets.
    tau : None, "sinusoids", "gravity-sinusoids", callable or array_like, optional
        ``None``: unforced. ``"sinusoids"``: random sums of sinusoids per
        trajectory and joint (:class:`Sinusoids`, with ``amplitude``,
        ``frequencies`` and ``n_components``); under gravity a robot arm
        falls and whirls (tens of rad/s). ``"gravity-sinusoids"``: the
        controller ``tau(t, q, qd) = g(q) + s(t)`` (:class:`GravityCompensation`)
        with ``g(q) = system.inverse_dynamics(q, 0, 0)`` the gravity torque and
        ``s`` random sums of sinusoids as above, from initial rates of
        standard deviation 0.2 rad/s (``system.sample_state(..., velocity_scale=0.2)``,
        which the system must accept): the arm moves smoothly through its
        workspace (the excitation of DeLaN, Lutter et al. 2019). The
        recorded ``tau`` is the applied ``g(q) + s(t)`` at the samples. A callable ``tau(t, q, qd) ->
        (b, n)`` (a controller, called on batches of at most ``batch_size``).
        An array ``(T + 1, n)`` or ``(n_trajectories, T + 1, n)`` sampled on
        the output grid and interpolated linearly.
    amplitude : float or array_like ``(n,)``, optional
        Peak torque per joint of the sinusoids. ``None`` scales it to the
        system: ``0.5 max|g_j(q)| + 5 s^-2 max M_jj(q)`` over the sampled
        initial states for ``"sinusoids"``, with ``g`` the gravity torque
        ``inverse_dynamics(q, 0, 0)``; ``0.5 s^-2 median M_jj(q)`` for
        ``"gravity-sinusoids"`` (gravity is compensated, so the sinusoids
        only accelerate; the light distal joints of long arms are thrown
        around by the proximal ones' motion when these are large).
    frequencies : (float, float)
        Frequency band (Hz) of the sinusoids.
    n_components : int
        Number of sinusoids per joint.
    method, rtol, atol
        Passed to :func:`lnn.rollout`.
    batch_size : int
        Trajectories integrated together as one ODE state; smaller batches
        let each trajectory keep its own step size, larger ones cut Python
        overhead.
    progress : callable, optional
        ``progress(done, total)`` in trajectories (fractional within a batch).

    Returns
    -------
    Dataset
        ``N = n_trajectories (T + 1)`` samples with ids ``0 .. B-1``.

    Raises
    ------
    ValueError, TypeError
        For invalid arguments (named in the message).
    lnn.integrate.IntegrationError
        If a rollout fails.
    """
    B = _validate.positive("n_trajectories", n_trajectories, integer=True)
    batch_size = _validate.positive("batch_size", batch_size, integer=True)
    t = _time_grid(duration, dt)
    if not hasattr(system, "sample_state"):
        raise TypeError(f"system must have sample_state(n, rng=...); {type(system).__name__} has not")
    if isinstance(tau, str) and tau not in _EXCITATIONS:
        raise ValueError(f"tau must be None, {', '.join(map(repr, _EXCITATIONS))}, a callable or an array; got {tau!r}")
    gravity_compensated = isinstance(tau, str) and tau == "gravity-sinusoids"
    rng = np.random.default_rng(seed)
    if gravity_compensated:
        state = system.sample_state(B, rng=rng, velocity_scale=GRAVITY_SINUSOIDS_VELOCITY_SCALE)
    else:
        state = system.sample_state(B, rng=rng)
    q0 = np.asarray(state.q, dtype=np.float64)
    qd0 = np.asarray(state.qd, dtype=np.float64)
    n = system.n_dof
    if isinstance(tau, str):
        if amplitude is None:
            amplitude = _inertia_amplitude(system, q0) if gravity_compensated else _default_amplitude(system, q0)
        tau = Sinusoids.random(B, n, amplitude=amplitude, frequencies=frequencies, n_components=n_components, rng=rng)
    elif tau is not None and not callable(tau):
        tau = np.asarray(tau, dtype=np.float64)
        if tau.shape == (t.shape[0], n):
            tau = np.broadcast_to(tau, (B,) + tau.shape)
        if tau.shape != (B, t.shape[0], n):
            raise ValueError(
                f"tau must have shape (T, n) = ({t.shape[0]}, {n}) or (n_trajectories, T, n) = "
                f"({B}, {t.shape[0]}, {n}); got shape {tau.shape}"
            )
    chunks = []
    for start in range(0, B, batch_size):
        stop = min(start + batch_size, B)
        if gravity_compensated:
            chunk_tau = GravityCompensation(system, tau[start:stop])
        elif isinstance(tau, (Sinusoids, np.ndarray)):
            chunk_tau = tau[start:stop]
        else:
            chunk_tau = tau
        chunk_progress = None
        if progress is not None:

            def chunk_progress(done, total, _start=start, _size=stop - start):
                progress(_start + _size * (done / total if total else 1.0), B)

        chunks.append(
            rollout(
                system,
                q0[start:stop],
                qd0[start:stop],
                t,
                tau=chunk_tau,
                method=method,
                rtol=rtol,
                atol=atol,
                progress=chunk_progress,
            )
        )
    merged = Trajectory(
        t=t,
        **{name: np.concatenate([getattr(c, name) for c in chunks]) for name in ("q", "qd", "qdd", "tau", "energy")},
    )
    parameters = system.parameters() if hasattr(system, "parameters") else {}
    return Dataset.from_trajectory(
        merged,
        system=getattr(system, "name", type(system).__name__),
        parameters=parameters,
        angular=tuple(getattr(system, "angular", ())),
    )


def excitation_trajectories(
    system,
    *,
    n_trajectories: int,
    duration: float,
    dt: float,
    seed: int,
    amplitude=EXCITATION_AMPLITUDE,
    frequencies=EXCITATION_FREQUENCIES,
    n_components: int = EXCITATION_COMPONENTS,
    margin: float = 0.05,
    batch_size: int = 1024,
    progress: Callable[..., None] | None = None,
) -> Dataset:
    """Joint-space excitation trajectories and the torques that produce them (system identification's data).

    Instead of applying torques and integrating (:func:`generate`), the motion
    is prescribed, as robot identification does (Swevers et al. 1997): per
    trajectory and joint ``q_j(t) = c_j + s_j(t)``, with ``s`` a random sum
    of sinusoids (:class:`Sinusoids`, ``|s_j| <= amplitude_j``), so ``qd``
    and ``qdd`` are its exact derivatives, and
    ``tau = system.inverse_dynamics(q, qd, qdd)`` is the torque that makes the
    system follow it (what a perfectly tracking controller applies). No ODE
    is solved.

    Why: torque excitation accelerates an arm mostly along the directions its
    mass matrix makes cheap (on the Panda, joints 1 and 3 counter-rotating,
    with 3-4 rad/s^2 against about 1 elsewhere); the inertia of the other
    directions then barely shows in the torques, and a model fits them with a
    mass matrix 30x too small (measured: held-out normalised torque MSE 0.09,
    joint 1 at 0.44). Prescribed motions give every joint accelerations of
    the same size (0.04 after the same 60 s of training).

    Parameters
    ----------
    system : MechanicalSystem
        Needs ``inverse_dynamics`` and ``n_dof``; ``energy``, ``angular``,
        ``name`` and ``parameters()`` are used when present. The centres
        ``c`` are uniform within ``system.position_limits`` (lower and upper,
        ``(n,)`` each: URDF robots), shrunk by ``margin`` of each range and by
        the amplitude, so that ``q(t)`` stays inside them; coordinates
        without finite limits take theirs from ``system.sample_state``.
    n_trajectories : int
        Number of trajectories ``B``.
    duration, dt : float
        Length (s) and sampling interval (s): samples ``0, dt, ..., T dt``.
    seed : int
        Equal seeds give equal datasets.
    amplitude : float or array_like ``(n,)``
        Peak excursion per joint around its centre (rad, or m for a prismatic
        joint); reduced where a joint's limits are narrower.
    frequencies : (float, float)
        Frequency band (Hz) of the sinusoids. The defaults give rates of
        about 0.5 rad/s and accelerations of about 2.6 rad/s^2 (standard
        deviations; peaks about 3x that), within a Panda's limits.
    n_components : int
        Number of sinusoids per joint.
    margin : float
        Fraction of each limited joint's range kept clear at both ends, in ``[0, 0.5)``.
    batch_size : int
        Trajectories per call of ``inverse_dynamics``.
    progress : callable, optional
        ``progress(done, total)`` in trajectories.

    Returns
    -------
    Dataset
        ``N = n_trajectories (T + 1)`` samples with ids ``0 .. B-1``.

    Raises
    ------
    ValueError, TypeError
        For invalid arguments (named in the message).
    """
    B = _validate.positive("n_trajectories", n_trajectories, integer=True)
    batch_size = _validate.positive("batch_size", batch_size, integer=True)
    t = _time_grid(duration, dt)
    if (
        not isinstance(margin, (int, float, np.integer, np.floating))
        or isinstance(margin, bool)
        or not 0.0 <= float(margin) < 0.5
    ):
        raise ValueError(f"margin must be a number in [0, 0.5); got {margin!r}")
    if not hasattr(system, "inverse_dynamics"):
        raise TypeError(f"system must have inverse_dynamics(q, qd, qdd); {type(system).__name__} has not")
    n = system.n_dof
    rng = np.random.default_rng(seed)
    motion = Sinusoids.random(B, n, amplitude=amplitude, frequencies=frequencies, n_components=n_components, rng=rng)
    peak = motion.amplitude.sum(axis=-1)  # (B, n): the largest possible excursion
    lower, upper = (np.full(n, -np.inf), np.full(n, np.inf))
    if hasattr(system, "position_limits"):
        lower, upper = (np.asarray(x, dtype=np.float64) for x in system.position_limits)
    limited = np.isfinite(lower) & np.isfinite(upper) & (upper > lower)
    if limited.any():
        lower, upper = np.where(limited, lower, 0.0), np.where(limited, upper, 1.0)
        span = upper - lower
        half_room = (1.0 - 2.0 * float(margin)) * span / 2.0
        shrink = np.where(limited & (peak > half_room), half_room / np.maximum(peak, 1e-300), 1.0)
        motion = Sinusoids(
            amplitude=motion.amplitude * shrink[..., None], frequency=motion.frequency, phase=motion.phase
        )
        peak = peak * shrink
        low = lower + float(margin) * span + peak
        high = upper - float(margin) * span - peak
        limited_centre = low + rng.uniform(size=(B, n)) * np.maximum(high - low, 0.0)
    else:
        limited_centre = np.zeros((B, n))
    if not limited.all():
        if not hasattr(system, "sample_state"):
            raise TypeError(
                f"system must have sample_state(n, rng=...) or finite position_limits; "
                f"{type(system).__name__} has neither"
            )
        free_centre = np.asarray(system.sample_state(B, rng=rng).q, dtype=np.float64)
    else:
        free_centre = limited_centre
    centre = np.where(limited, limited_centre, free_centre)
    q = centre[:, None, :] + motion.sample(t)
    qd, qdd = motion.sample(t, derivative=1), motion.sample(t, derivative=2)
    T = t.shape[0]
    tau = np.empty_like(q)
    energy = np.full((B, T), np.nan)
    for start in range(0, B, batch_size):
        stop = min(start + batch_size, B)
        flat = [x[start:stop].reshape(-1, n) for x in (q, qd, qdd)]
        tau[start:stop] = np.asarray(system.inverse_dynamics(*flat), dtype=np.float64).reshape(-1, T, n)
        if hasattr(system, "energy"):
            energy[start:stop] = np.asarray(system.energy(flat[0], flat[1]), dtype=np.float64).reshape(-1, T)
        if progress is not None:
            progress(stop, B)
    parameters = system.parameters() if hasattr(system, "parameters") else {}
    return Dataset.from_trajectory(
        Trajectory(t=t, q=q, qd=qd, qdd=qdd, tau=tau, energy=energy),
        system=getattr(system, "name", type(system).__name__),
        parameters=parameters,
        angular=tuple(getattr(system, "angular", ())),
    )


def _inertia_amplitude(system, q: np.ndarray) -> np.ndarray:
    """Peak sinusoid torque per joint on top of gravity compensation, ``(n,)``: ``0.5 s^-2 median M_jj``."""
    inertia = np.diagonal(np.asarray(system.mass_matrix(q), dtype=np.float64), axis1=-2, axis2=-1)
    return GRAVITY_SINUSOIDS_ACCELERATION * np.median(inertia, axis=0)


class GravityCompensation:
    """The controller ``tau(t, q, qd) = g(q) + s(t)`` of ``generate(..., tau="gravity-sinusoids")``.

    ``g(q) = system.inverse_dynamics(q, 0, 0)`` (the torque that holds the
    system still at ``q``) and ``s`` a :class:`Sinusoids` excitation. Usable
    as the ``tau`` callable of :func:`lnn.rollout`.

    Parameters
    ----------
    system : MechanicalSystem
        The system to compensate (its ``inverse_dynamics``).
    excitation : Sinusoids
        ``B`` trajectories' sinusoids, shape ``(B, n, K)``.
    """

    def __init__(self, system, excitation: Sinusoids) -> None:
        self.system = system
        self.excitation = excitation

    def gravity(self, q) -> np.ndarray:
        """``g(q)``, shape of ``q (..., n)``."""
        q = np.asarray(q, dtype=np.float64)
        zeros = np.zeros_like(q)
        return np.asarray(self.system.inverse_dynamics(q, zeros, zeros), dtype=np.float64)

    def __call__(self, t: float, q, qd=None) -> np.ndarray:
        """Torques ``g(q) + s(t)`` at time ``t`` (s) and coordinates ``q (B, n)``, shape ``(B, n)``."""
        return self.gravity(q) + self.excitation(t)


def _default_amplitude(system, q: np.ndarray) -> np.ndarray:
    """Peak excitation torque per joint, ``(n,)``, scaled to the system's gravity and inertia."""
    zeros = np.zeros_like(q)
    gravity = np.abs(np.asarray(system.inverse_dynamics(q, zeros, zeros), dtype=np.float64))
    inertia = np.diagonal(np.asarray(system.mass_matrix(q), dtype=np.float64), axis1=-2, axis2=-1)
    return 0.5 * gravity.max(axis=0) + 5.0 * inertia.max(axis=0)


@dataclass(frozen=True, eq=False)
class Sinusoids:
    """Excitation torques: per trajectory and joint, a sum of ``K`` sinusoids.

    ``tau[b, j](t) = sum_k amplitude[b, j, k] sin(2 pi frequency[b, j, k] t + phase[b, j, k])``.
    Usable as the ``tau`` callable of :func:`lnn.rollout`.

    Attributes
    ----------
    amplitude, frequency, phase : ndarray, shape ``(B, n, K)``
        In N·m (or N), Hz and rad.
    """

    amplitude: np.ndarray
    frequency: np.ndarray
    phase: np.ndarray

    def __post_init__(self) -> None:
        shapes = {np.shape(self.amplitude), np.shape(self.frequency), np.shape(self.phase)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 3:
            raise ValueError(
                "Sinusoids.amplitude, frequency and phase must share one shape (B, n, K); got "
                f"{np.shape(self.amplitude)}, {np.shape(self.frequency)}, {np.shape(self.phase)}"
            )

    @classmethod
    def random(
        cls,
        n_trajectories: int,
        n_dof: int,
        *,
        amplitude,
        frequencies=DEFAULT_FREQUENCIES,
        n_components: int = DEFAULT_COMPONENTS,
        rng,
    ) -> Sinusoids:
        """Draw random sums of sinusoids bounded by ``amplitude``.

        Parameters
        ----------
        n_trajectories, n_dof : int
            ``B`` and ``n``.
        amplitude : float or array_like, shape ``(n,)``
            Peak value per joint: component weights are uniform, normalised
            to sum to one, so ``|tau_j(t)| <= amplitude_j``.
        frequencies : (float, float)
            Band ``[f_min, f_max]`` (Hz) of the uniform frequencies.
        n_components : int
            ``K``.
        rng : numpy.random.Generator or int
            Random source (or seed).

        Returns
        -------
        Sinusoids
        """
        B = _validate.positive("n_trajectories", n_trajectories, integer=True)
        n = _validate.positive("n_dof", n_dof, integer=True)
        K = _validate.positive("n_components", n_components, integer=True)
        amplitude = (
            np.broadcast_to(np.asarray(amplitude, dtype=np.float64), (n,))
            if np.ndim(amplitude) in (0, 1) and np.size(amplitude) in (1, n)
            else None
        )
        if amplitude is None or not np.isfinite(amplitude).all() or (amplitude < 0).any():
            raise ValueError(f"amplitude must be a non-negative number or {n} of them")
        low, high = (float(f) for f in frequencies)
        if not 0 < low <= high < math.inf:
            raise ValueError(f"frequencies must be a band 0 < f_min <= f_max (Hz); got {frequencies!r}")
        rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        weights = rng.uniform(size=(B, n, K))
        weights /= weights.sum(axis=-1, keepdims=True)
        return cls(
            amplitude=amplitude[None, :, None] * weights,
            frequency=rng.uniform(low, high, size=(B, n, K)),
            phase=rng.uniform(0.0, 2 * np.pi, size=(B, n, K)),
        )

    def __call__(self, t: float, q=None, qd=None) -> np.ndarray:
        """Torques at time ``t`` (s), shape ``(B, n)``; ``q, qd`` are ignored."""
        return np.einsum("bjk,bjk->bj", self.amplitude, np.sin(2 * np.pi * self.frequency * t + self.phase))

    def sample(self, t, *, derivative: int = 0) -> np.ndarray:
        """Values (or their ``derivative``-th time derivative) on a grid ``t (T,)``, shape ``(B, T, n)``.

        ``d^m/dt^m A sin(w t + phi) = A w^m sin(w t + phi + m pi / 2)``, exact.
        """
        if isinstance(derivative, bool) or not isinstance(derivative, (int, np.integer)) or derivative < 0:
            raise ValueError(f"derivative must be an integer >= 0; got {derivative!r}")
        t = np.asarray(t, dtype=np.float64)
        omega = 2 * np.pi * self.frequency
        angle = omega[:, None] * t[None, :, None, None] + self.phase[:, None] + derivative * np.pi / 2
        return np.einsum("bjk,btjk->btj", self.amplitude * omega**derivative, np.sin(angle))

    def __getitem__(self, index) -> Sinusoids:
        """The sinusoids of a subset of trajectories (slice or index array over ``B``)."""
        return Sinusoids(self.amplitude[index], self.frequency[index], self.phase[index])


def sum_of_sinusoids(
    t,
    n_dof: int,
    *,
    n_trajectories: int,
    amplitude,
    frequencies=DEFAULT_FREQUENCIES,
    n_components: int = DEFAULT_COMPONENTS,
    rng,
) -> np.ndarray:
    """Random excitation torques sampled on a grid (see :class:`Sinusoids`).

    Parameters
    ----------
    t : array_like, shape ``(T,)``
        Times (s).
    n_dof : int
        ``n``.
    n_trajectories : int
        ``B``.
    amplitude, frequencies, n_components, rng
        As in :meth:`Sinusoids.random`.

    Returns
    -------
    ndarray, shape ``(B, T, n)``
    """
    return Sinusoids.random(
        n_trajectories, n_dof, amplitude=amplitude, frequencies=frequencies, n_components=n_components, rng=rng
    ).sample(t)


# ---------------------------------------------------------------- derivatives


@dataclass(frozen=True)
class Derivatives:
    """Velocities and accelerations estimated from positions.

    Attributes
    ----------
    qd, qdd : ndarray, shape of the positions ``(..., T, n)``
    """

    qd: np.ndarray
    qdd: np.ndarray


def estimate_derivatives(
    t, q, *, method: str = "savgol", window: int | None = None, order: int | None = None, smoothing: float | None = None
) -> Derivatives:
    """Estimate ``qd`` and ``qdd`` from sampled positions.

    Parameters
    ----------
    t : array_like, shape ``(T,)``
        Strictly increasing sample times (s); uniform for ``"savgol"``.
    q : array_like, shape ``(T, n)`` or ``(B, T, n)``
        Positions; time is the second-to-last axis.
    method : {"savgol", "spline"}
        ``"savgol"``: Savitzky–Golay filter (local least-squares
        polynomials of degree ``order`` over ``window`` samples; polynomial
        fits at the edges: :func:`scipy.signal.savgol_filter`'s ``"interp"``
        mode, computed by :func:`lnn.ingest.savgol`, exact for the long
        windows where scipy's coefficients lose their digits). ``"spline"``: a cubic
        spline, smoothed (:func:`scipy.interpolate.make_smoothing_spline`,
        ``smoothing`` its ``lam``, chosen per coordinate by generalised
        cross-validation when ``None``) or interpolating
        (:class:`scipy.interpolate.CubicSpline`) when ``smoothing=0``, for
        noise-free data and non-uniform times.
    window : int, optional
        Odd window length of ``"savgol"`` (samples), ``> order``; default 11
        (or the largest odd number ``<= T``).
    order : int, optional
        Polynomial degree of ``"savgol"``, at least 2; default 4.
    smoothing : float, optional
        ``lam`` of the smoothing spline (``"spline"`` only).

    Returns
    -------
    Derivatives
        ``qd`` and ``qdd`` of the shape of ``q``.

    Raises
    ------
    ValueError
        For a bad method, shapes, non-uniform times with ``"savgol"``, or
        options that do not apply to the method.
    """
    from scipy import interpolate

    t = _float_array(t, "t")
    q = _float_array(q, "q")
    if t.ndim != 1 or q.ndim not in (2, 3) or q.shape[-2] != t.shape[0]:
        raise ValueError(f"t must have shape (T,) and q shape (T, n) or (B, T, n); got shapes {t.shape} and {q.shape}")
    if not (np.isfinite(t).all() and np.isfinite(q).all()):
        raise ValueError("t and q must be finite (no NaN or inf)")
    T = t.shape[0]
    if T > 1 and not (np.diff(t) > 0).all():
        raise ValueError("t must be strictly increasing")
    if method == "savgol":
        if smoothing is not None:
            raise ValueError("smoothing applies to method='spline'; use window and order for 'savgol'")
        order = 4 if order is None else _validate.positive("order", order, integer=True)
        if order < 2:
            raise ValueError(f"order must be >= 2 to estimate qdd; got {order}")
        if window is None:
            window = min(11, T if T % 2 else T - 1)
        window = _validate.positive("window", window, integer=True)
        if window % 2 == 0 or window <= order or window > T:
            raise ValueError(f"window must be odd, > order ({order}) and <= T ({T}) samples; got {window}")
        step = _uniform_step(t)
        if math.isnan(step):
            raise ValueError("method='savgol' needs uniformly sampled t; use method='spline'")
        from lnn.ingest.windows import savgol

        columns = np.moveaxis(q, -2, 0).reshape(T, -1)  # (T, B n)
        shape = np.moveaxis(q, -2, 0).shape
        qd, qdd = (np.moveaxis(savgol(columns, window, order, k, step).reshape(shape), 0, -2) for k in (1, 2))
        return Derivatives(qd=qd, qdd=qdd)
    if method == "spline":
        if window is not None or order is not None:
            raise ValueError("window and order apply to method='savgol'; use smoothing for 'spline'")
        if T < 5:
            raise ValueError(f"method='spline' needs at least 5 samples; got T={T}")
        columns = np.moveaxis(q, -2, 0).reshape(T, -1)  # (T, B n)
        qd, qdd = np.empty_like(columns), np.empty_like(columns)
        for j in range(columns.shape[1]):
            if smoothing == 0:
                spline = interpolate.CubicSpline(t, columns[:, j])
            else:
                spline = interpolate.make_smoothing_spline(t, columns[:, j], lam=smoothing)
            qd[:, j] = spline.derivative(1)(t)
            qdd[:, j] = spline.derivative(2)(t)
        shape = np.moveaxis(q, -2, 0).shape
        return Derivatives(qd=np.moveaxis(qd.reshape(shape), 0, -2), qdd=np.moveaxis(qdd.reshape(shape), 0, -2))
    raise ValueError(f"method must be 'savgol' or 'spline'; got {method!r}")


# -------------------------------------------------------------------- helpers


def _window_rule(record) -> WindowRule | None:
    """The :class:`lnn.ingest.WindowRule` a dataset file recorded (None: none recorded)."""
    return None if record is None else WindowRule.from_json(record)


def _float_array(value, name: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of real numbers; got {type(value).__name__}") from exc


def _mean_step(t: np.ndarray) -> float:
    """The mean step of one recording's times ``t (T,)`` (NaN for a single sample)."""
    return float(t[-1] - t[0]) / (t.shape[0] - 1) if t.shape[0] > 1 else math.nan


def _same_rate(step: float, reference: float) -> bool:
    """Whether ``step`` is within :data:`lnn.residuals.STEP_TOLERANCE` (1 %) of ``reference``."""
    return abs(step - reference) <= STEP_TOLERANCE * reference


def _rows_at_first_rate(t: np.ndarray, trajectory: np.ndarray) -> list[np.ndarray]:
    """The rows of each trajectory (in id order) sampled at the first one's rate (:func:`_same_rate`; the first
    alone when it has a single sample)."""
    rows = [r for _, r in _groups(np.asarray(trajectory))]
    first = _mean_step(t[rows[0]])
    return rows[:1] + [r for r in rows[1:] if _same_rate(_mean_step(t[r]), first)]


def _truncated_batch(parts: list, system, ids) -> Trajectory:
    """Recordings of one step cut to the shortest one's samples, on the first one's grid from its start."""
    steps = [_mean_step(p.t) for p in parts]
    if not all(_same_rate(h, steps[0]) for h in steps):
        listed = ", ".join(f"{p.metadata['trajectory_id']}: {h:.6g} s" for p, h in zip(parts, steps))
        raise ValueError(
            f"the trajectories' steps differ by more than {STEP_TOLERANCE:.0%} ({listed}): pick "
            f"recordings of one rate (subset) or use trajectories() instead"
        )
    length = min(p.t.shape[0] for p in parts)
    stack = {
        name: np.concatenate([getattr(p, name)[:, :length] for p in parts])
        for name in ("q", "qd", "qdd", "tau", "energy")
    }
    t = parts[0].t[:length] - parts[0].t[0]
    return Trajectory(t=t, **stack, metadata={"system": system, "trajectory_ids": np.asarray(ids).tolist()})


def _groups(ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(id, rows)`` for each distinct id of ``ids (N,)`` in sorted order, rows in original order."""
    order = np.argsort(ids, kind="stable")
    unique, starts = np.unique(ids[order], return_index=True)
    return [(int(i), rows) for i, rows in zip(unique, np.split(order, starts[1:]))]


def _uniform_step(t: np.ndarray) -> float:
    """The spacing of ``t (T,)`` if uniform (to 1e-9 relative), else NaN."""
    if t.shape[0] < 2:
        return math.nan
    steps = np.diff(t)
    step = float(np.mean(steps))
    return step if np.abs(steps - step).max() <= 1e-9 * max(abs(step), np.abs(t).max()) else math.nan


def _validate_seconds(name: str, value, *, zero: bool = False) -> float:
    """A finite duration in seconds, > 0 (or >= 0 with ``zero``)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(float(value))
        or float(value) < 0
        or (float(value) == 0 and not zero)
    ):
        raise ValueError(f"{name} must be a finite number of seconds {'>=' if zero else '>'} 0; got {value!r}")
    return float(value)


def _deal_blocks(fractions: np.ndarray, N: int, blocks: float, *, seed: int) -> np.ndarray:
    """The part (0, 1, 2) of each of ``N`` consecutive samples, dealt in shuffled contiguous blocks.

    Part ``k`` gets ``fractions[k] N`` samples (:func:`_apportion`) in
    ``max(1, round(fractions[k] blocks))`` blocks of near-equal size.
    """
    sizes = _apportion(fractions, N)
    labels, lengths = [], []
    for k in np.flatnonzero(sizes > 0):
        count = int(min(sizes[k], max(1, round(fractions[k] * blocks))))
        split = np.full(count, sizes[k] // count) + (np.arange(count) < sizes[k] % count)
        labels.extend([k] * count)
        lengths.extend(split.tolist())
    shuffled = np.random.default_rng(seed).permutation(len(labels))
    return np.repeat(np.asarray(labels)[shuffled], np.asarray(lengths)[shuffled])


def _apportion(fractions: np.ndarray, K: int) -> np.ndarray:
    """Integer counts summing to ``K`` close to ``fractions K``, >= 1 where the fraction is > 0."""
    exact = fractions * K
    counts = np.floor(exact).astype(np.int64)
    for i in np.argsort(-(exact - counts), kind="stable")[: K - counts.sum()]:
        counts[i] += 1
    for i in np.flatnonzero((fractions > 0) & (counts == 0)):
        counts[i] += 1
        counts[np.argmax(counts)] -= 1
    return counts


def _joint_names(names, n: int) -> tuple | None:
    """``Dataset.joint_names``: None, or ``n`` distinct non-empty str."""
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"Dataset.joint_names must be a sequence of {n} names or None; got {names!r}")
    names = tuple(names)
    if len(names) != n or not all(isinstance(x, str) and x for x in names) or len(set(names)) != n:
        raise ValueError(f"Dataset.joint_names must be {n} distinct non-empty names or None; got {list(names)!r}")
    return names


def _jsonable(value):
    """Convert numpy scalars/arrays and tuples inside ``value`` to JSON types."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
