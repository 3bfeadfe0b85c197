"""The result of :func:`lnn.identify`: :class:`IdentifiedModel`, the ``lnn.MechanicalSystem`` protocol in numpy."""

from __future__ import annotations

import os

import numpy as np

from lnn.identification._report import IdentificationReport

__all__ = ["IdentifiedModel"]


class IdentifiedModel:
    """A model returned by :func:`identify`: the ``lnn.MechanicalSystem`` protocol in numpy.

    Every method takes numpy arrays ``(B, n)`` (or ``(n,)``) and returns numpy
    arrays; :attr:`network` is the :class:`lnn.LagrangianNetwork` underneath
    (save it, train it further, evaluate it in TensorFlow).

    Attributes
    ----------
    network : lnn.LagrangianNetwork
    report : IdentificationReport
    candidates : dict of str to lnn.LagrangianNetwork
        The model of every stage (``network`` is ``candidates[report.chosen]``).
    """

    def __init__(self, network, report: IdentificationReport, *, candidates=None) -> None:
        self.network = network
        self.report = report
        self.candidates = dict(candidates or {report.chosen: network})

    @property
    def n_dof(self) -> int:
        """Number of joints."""
        return self.network.n_dof

    @property
    def angular(self) -> tuple[bool, ...]:
        """Which coordinates are angles."""
        return self.network.angular

    def mass_matrix(self, q, qd=None) -> np.ndarray:
        """``M``, shape ``(B, n, n)``."""
        return np.asarray(self.network.mass_matrix(q, qd))

    def acceleration(self, q, qd, tau=None):
        """Forward dynamics with the friction forces, shape ``(B, n)`` (tensors for tensors: a compiled rollout)."""
        return _like(self.network.acceleration(q, qd, tau), q)

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """The motor torques ``tau``, shape ``(B, n)``."""
        return np.asarray(self.network.inverse_dynamics(q, qd, qdd))

    def energy(self, q, qd):
        """``E = T + V``, shape ``(B,)`` (tensors for tensors)."""
        return _like(self.network.energy(q, qd), q)

    def novelty(self, q, qd):
        """How far states lie from the states the model was fitted on (1.0: their 99th percentile).

        :meth:`lnn.LagrangianNetwork.novelty` of :attr:`network` (of an
        ensemble: its distance and its members' disagreement). The linear
        stages' models are adapted to the data they were fitted on, the learned
        ones by :func:`lnn.fit`; :func:`lnn.rollout` records when a trajectory
        first leaves them. States ``q, qd`` of shape ``(B, n)`` give ``(B,)``,
        one state ``(n,)`` a float.
        """
        return self.network.novelty(q, qd)

    def predict(self, q, qd, *, tau=None, qdd=None):
        """The ensemble's mean and calibrated spread (:meth:`lnn.Ensemble.predict`; ``identify(..., ensemble=K)``).

        Raises
        ------
        TypeError
            If the model is a single network (``identify`` without ``ensemble=``).
        """
        predict = getattr(self.network, "predict", None)
        if not hasattr(self.network, "members") or predict is None:
            raise TypeError(
                f"predict gives an ensemble's spread; this model is one {type(self.network).__name__} "
                "(identify(..., ensemble=K) returns an ensemble)"
            )
        return predict(q, qd, tau=tau, qdd=qdd)

    def widened(self, dtype: str = "float64"):
        """The network computing in ``dtype`` (:meth:`lnn.LagrangianNetwork.widened`): what ``lnn.rollout`` solves."""
        widen = getattr(self.network, "widened", None)
        return self.network if widen is None else widen(dtype)

    def numpy_snapshot(self):
        """The network's numpy snapshot (:meth:`lnn.LagrangianNetwork.numpy_snapshot`).

        It marks the model as learned in TensorFlow, so ``lnn.rollout``'s
        default integrates :attr:`network` with a compiled pair.
        """
        return self.network.numpy_snapshot()

    @property
    def dtype(self) -> str:
        """The network's dtype."""
        return self.network.dtype

    @property
    def numpy_acceleration(self):
        """The network's fast numpy right-hand side (for :func:`lnn.rollout`)."""
        return self.network.numpy_acceleration

    def save(self, path, *, overwrite: bool = False) -> None:
        """Save the network (``.keras``; :func:`lnn.load_model` reads it back).

        Raises
        ------
        FileExistsError
            If ``path`` exists and ``overwrite`` is False.
        """
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
        self.network.save(path)

    def export(self, path, *, force: bool = False, xla: bool = False):
        """Write the model as a TensorFlow SavedModel a controller calls without ``lnn``.

        :func:`lnn.export.export_savedmodel` of :attr:`network` (the chosen
        stage, its learned forces included; an ensemble's mean): signatures
        ``inverse_dynamics(q, qd, qdd) -> tau``, ``acceleration(q, qd, tau) ->
        qdd``, ``mass_matrix(q) -> M``, batch dimension free, the model's dtype.

        Parameters
        ----------
        path : str or os.PathLike
            The SavedModel directory.
        force : bool, keyword-only
            Replace ``path`` if it exists (else ``FileExistsError``).
        xla : bool, keyword-only
            Signature functions marked ``jit_compile=True`` (compiled by the
            loading runtime at their first call per batch size; faster calls,
            ``docs/how-to/export.md``).

        Returns
        -------
        lnn.export.ExportedModel
        """
        from lnn.export import export_savedmodel

        return export_savedmodel(self.network, path, force=force, xla=xla)

    def to_urdf(self, path, *, template, force: bool = False):
        """Write the template URDF with the identified inertial parameters (:func:`lnn.export.write_urdf`).

        Every moving joint's child link gets the identified body (less the
        template's links rigidly attached to it, which keep their values), the
        joints' ``<dynamics damping friction>`` the identified viscous and
        Coulomb coefficients, and comments the armature (no URDF field carries
        it), the stage (``report.chosen``) and what a URDF cannot carry.

        Parameters
        ----------
        path : str or os.PathLike
            The URDF to write.
        template : str or os.PathLike, keyword-only
            The robot's URDF, the prior the model was identified with.
        force : bool, keyword-only
            Replace ``path`` if it exists (else ``FileExistsError``).

        Returns
        -------
        lnn.export.URDFExport

        Raises
        ------
        ValueError
            For a model without a rigid-body stage (identified without a URDF
            prior), a template that does not match the model's joints, or a link
            that would not be physically consistent.
        """
        from lnn.export import write_urdf

        return write_urdf(self, path, template=template, force=force)


def _like(value, q):
    """``value`` as a numpy array, or as it is when ``q`` is a TensorFlow tensor (inside a compiled solve)."""
    return value if type(q).__module__.startswith("tensorflow") else np.asarray(value)
