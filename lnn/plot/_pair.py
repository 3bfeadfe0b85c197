"""True and learned rollouts from the same initial states, stored in one ``.npz`` file."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lnn.plot import _checks
from lnn.trajectory import EnsembleTrajectory, Trajectory

__all__ = ["RolloutPair"]

_FIELDS = ("q", "qd", "qdd", "tau", "energy")
#: Written when present: novelty, and an ensemble rollout's members (:class:`lnn.EnsembleTrajectory`).
_OPTIONAL = ("novelty", "novel_at", "member_q", "member_qd", "member_qdd", "member_energy", "band_scale")


@dataclass(frozen=True)
class RolloutPair:
    """Rollouts of the true system and of a learned model from the same initial states.

    This is what ``lnn rollout`` writes and what ``lnn plot`` reads. The file
    is an lnn ``.npz`` of kind ``"rollout-pair"`` (:mod:`lnn._io`: format
    header, JSON metadata, no pickle) holding the arrays ``t`` ``(T,)``,
    ``true_q``, ``true_qd``, ``true_qdd``, ``true_tau`` ``(B, T, n)``,
    ``true_energy`` ``(B, T)``, the same five with the prefix ``learned_``,
    and ``true_nfev``/``learned_nfev``/``true_method``/``learned_method``; when
    present, ``<prefix>_novelty``/``_novel_at`` and an ensemble's members
    (``learned_member_q`` ... ``(K, B, T, n)``, ``learned_band_scale``), read
    back as an :class:`lnn.EnsembleTrajectory`.
    The metadata records at least ``system`` (name), ``parameters`` (to
    rebuild it with ``simulations.make_system``), ``angular`` and ``model``
    (the model file).

    Attributes
    ----------
    true, learned : lnn.Trajectory
        Same batch ``B``, time grid ``t`` ``(T,)`` and ``n`` coordinates.
    metadata : dict
        JSON-serialisable description of the experiment.
    """

    true: Trajectory
    learned: Trajectory
    metadata: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _checks.as_trajectory(self.true, "true")
        _checks.as_trajectory(self.learned, "learned")
        _checks.check_pair(self.true, self.learned)

    def save(self, path, *, overwrite: bool = False) -> None:
        """Write both rollouts to one ``.npz`` file.

        Parameters
        ----------
        path : str or os.PathLike
            Output file ending in ``.npz``.
        overwrite : bool, keyword-only
            Replace an existing file; by default refuse.

        Raises
        ------
        FileExistsError
            If ``path`` exists and ``overwrite`` is false.
        """
        from lnn._io import write_npz

        arrays = {"t": self.true.t}
        for prefix, trajectory in (("true", self.true), ("learned", self.learned)):
            for name in _FIELDS:
                arrays[f"{prefix}_{name}"] = getattr(trajectory, name)
            arrays[f"{prefix}_nfev"] = np.asarray(trajectory.nfev)
            arrays[f"{prefix}_method"] = np.asarray(trajectory.method)
            for name in _OPTIONAL:
                if getattr(trajectory, name, None) is not None:
                    arrays[f"{prefix}_{name}"] = np.asarray(getattr(trajectory, name), np.float64)
        write_npz(path, arrays, kind="rollout-pair", metadata=self.metadata, overwrite=overwrite)

    @classmethod
    def load(cls, path) -> RolloutPair:
        """Read a file written by :meth:`save` (or ``lnn rollout``).

        Parameters
        ----------
        path : str or os.PathLike
            An lnn ``.npz`` file of kind ``"rollout-pair"``.

        Returns
        -------
        RolloutPair
            Both trajectories carry the file's metadata.
        """
        from lnn._io import read_npz

        required = ("t",) + tuple(f"{p}_{n}" for p in ("true", "learned") for n in _FIELDS)
        arrays, metadata = read_npz(path, kind="rollout-pair", required=required)

        def trajectory(prefix: str) -> Trajectory:
            fields = dict(
                t=arrays["t"],
                **{n: arrays[f"{prefix}_{n}"] for n in _FIELDS},
                nfev=int(arrays.get(f"{prefix}_nfev", 0)),
                method=str(arrays.get(f"{prefix}_method", "")),
                metadata=dict(metadata),
                novelty=arrays.get(f"{prefix}_novelty"),
                novel_at=arrays.get(f"{prefix}_novel_at"),
            )
            if f"{prefix}_member_q" not in arrays:
                return Trajectory(**fields)
            members = {n: arrays[f"{prefix}_{n}"] for n in _OPTIONAL if n.startswith("member_")}
            return EnsembleTrajectory(**fields, **members, band_scale=float(arrays.get(f"{prefix}_band_scale", 1.0)))

        return cls(trajectory("true"), trajectory("learned"), metadata)
