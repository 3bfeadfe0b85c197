"""Every exception and warning that ``lnn`` raises on purpose, in one hierarchy.

========================================  ==========================================  ==================
class                                     when                                         also a
========================================  ==========================================  ==================
:class:`LNNError`                         the base of the package's errors             ``Exception``
:class:`MassMatrixError`                  a mass matrix that is not symmetric          ``ValueError``
                                          positive definite where one is needed
:class:`IndefiniteMassMatrixError`        the same during a numpy rollout (names the   ``ValueError``
                                          trajectories)
:class:`NonPhysicalMassMatrixError`       identified parameters whose mass matrix is   ``ValueError``
                                          not positive definite
:class:`IntegrationError`                 trajectories of a rollout failed             ``RuntimeError``
:class:`TrainingDivergedError`            a non-finite loss or gradient stopped a fit  ``RuntimeError``,
                                                                                       ``FloatingPointError``
:class:`LNNWarning`                       the base of the package's warnings           ``UserWarning``
:class:`TimeSplitWarning`                 a validation set made of time blocks
:class:`IdentifiabilityWarning`           data that cannot identify what a loss asks
:class:`RuntimeFallbackWarning`           a private TensorFlow path fell back to the   ``RuntimeWarning``
                                          public one
:class:`CompilationWarning`               a faster compiled form failed; the slower    ``RuntimeWarning``
                                          form is used (same results)
:class:`NoveltyWarning`                   a rollout left the states a model was
                                          trained on (``novelty > 1``)
:class:`PrecisionWarning`                 a rollout asked a float32 system for a
                                          tolerance its arithmetic cannot meet
========================================  ==========================================  ==================

``except lnn.LNNError`` catches every error the package raises on purpose;
each is also the built-in exception its meaning implies (a bad mass matrix
is a ``ValueError``), so code written against those keeps working. The old
homes (``lnn.mechanics.MassMatrixError``, ``lnn.integrate.IntegrationError``,
...) re-export these classes.

This module imports nothing of the package: every other module may import it.
"""

from __future__ import annotations

__all__ = [
    "CompilationWarning",
    "IdentifiabilityWarning",
    "IndefiniteMassMatrixError",
    "IntegrationError",
    "LNNError",
    "LNNWarning",
    "MassMatrixError",
    "NonPhysicalMassMatrixError",
    "NoveltyWarning",
    "PrecisionWarning",
    "RuntimeFallbackWarning",
    "TimeSplitWarning",
    "TrainingDivergedError",
]


class LNNError(Exception):
    """The base class of every error that ``lnn`` raises on purpose."""


class MassMatrixError(LNNError, ValueError):
    """A mass matrix that is not symmetric positive definite where one is needed.

    Attributes
    ----------
    health : lnn.mechanics.MassMatrixHealth or None
        The health report of the offending batch (None where none was computed).
    """

    def __init__(self, message: str, health=None) -> None:
        super().__init__(message)
        self.health = health


class IndefiniteMassMatrixError(MassMatrixError):
    """A learned mass matrix that is not positive definite during inference.

    Attributes
    ----------
    trajectories : tuple of int
        Batch indices whose ``M`` is not positive definite (the rollout
        reports them with the time).
    health : lnn.mechanics.MassMatrixHealth
        Health report of the whole batch.
    """

    def __init__(self, message: str, health, trajectories) -> None:
        super().__init__(message, health)
        self.trajectories = tuple(int(i) for i in trajectories)


class NonPhysicalMassMatrixError(MassMatrixError):
    """The identified parameters give a mass matrix that is not positive definite."""


class IntegrationError(LNNError, RuntimeError):
    """A rollout in which some trajectories failed (``on_failure="raise"``).

    Attributes
    ----------
    failures : tuple of lnn.trajectory.Failure
        One ``(index, time, reason)`` per failed trajectory, by index.
    time : float
        The earliest failure time (s).
    trajectories : tuple of int
        Indices (over the batch ``B``) of the failed trajectories.
    trajectory : lnn.Trajectory or None
        The masked result (what ``on_failure="mask"`` returns), when the solve
        got that far.
    """

    def __init__(self, message: str, *, time: float, trajectories=(), failures=(), trajectory=None) -> None:
        super().__init__(message)
        self.time = float(time)
        self.trajectories = tuple(int(i) for i in trajectories)
        self.failures = tuple(failures)
        self.trajectory = trajectory

    @classmethod
    def of(cls, failures, *, batch: int, method: str, trajectory=None) -> IntegrationError:
        """The error naming every one of ``failures`` (``Failure``) of a batch of ``batch``."""
        failures = tuple(sorted(failures, key=lambda f: f.index))
        lines = "; ".join(f"trajectory {f.index} at t = {f.time:.6g} s: {f.reason}" for f in failures)
        indices = [f.index for f in failures]
        return cls(
            f"{len(failures)} of {batch} trajectory(ies) {indices} failed ({method}): {lines}",
            time=min(f.time for f in failures),
            trajectories=tuple(indices),
            failures=failures,
            trajectory=trajectory,
        )


class TrainingDivergedError(LNNError, RuntimeError, FloatingPointError):
    """A non-finite loss or gradient stopped training.

    The update of the offending batch is not applied, so the model keeps the
    weights of the last good step.

    Attributes
    ----------
    epoch : int
        Epoch (0-based) of the offending batch.
    batch : int
        Batch index (0-based) within the epoch.
    terms : dict
        The loss terms of that batch (some non-finite).
    """

    def __init__(self, message: str, *, epoch: int, batch: int, terms: dict) -> None:
        super().__init__(message)
        self.epoch = int(epoch)
        self.batch = int(batch)
        self.terms = dict(terms)


class LNNWarning(UserWarning):
    """The base class of every warning that ``lnn`` issues."""


class TimeSplitWarning(LNNWarning):
    """A validation set was made of time blocks, the data having too few trajectories (``Dataset.split``)."""


class IdentifiabilityWarning(LNNWarning):
    """The training data cannot identify what the loss asks for (see :mod:`lnn.train`)."""


class RuntimeFallbackWarning(LNNWarning, RuntimeWarning):
    """A private TensorFlow path is unavailable; the public (slower) one is used."""


class CompilationWarning(LNNWarning, RuntimeWarning):
    """A faster compiled form (an XLA compilation, a model's compiled call) failed; the slower one is used.

    Issued once per operation and kind of failure, with the exception's type
    and message: the results are those of the slower form, so only the speed
    changes, but a user who asked for XLA learns why it is not used.
    """


class NoveltyWarning(LNNWarning):
    """A rollout left the support of the model's training states (``model.novelty(q, qd) > 1``).

    Issued once per :func:`lnn.rollout` call; ``Trajectory.novel_at`` holds,
    per trajectory, the first time its state was novel (NaN for those that
    stayed inside). ``novelty`` is 1.0 at the 99th percentile of the training
    states' distances to each other (:meth:`lnn.LagrangianNetwork.novelty`),
    so a learned model's predictions beyond it are extrapolations.
    """


class PrecisionWarning(LNNWarning):
    """A rollout asked a float32 system for a tolerance that its arithmetic cannot meet.

    A float32 vector field is smooth only to float32's resolution (1.2e-7):
    below a relative tolerance of about 1e-6 an adaptive solver's error
    estimate measures the right-hand side's rounding noise, and its step size
    collapses. :func:`lnn.rollout` integrates a learned model
    (:class:`lnn.LagrangianNetwork`) in float64 instead
    (:meth:`lnn.LagrangianNetwork.widened`), so it never warns for one; a
    float32 system that cannot be widened (a system written in TensorFlow, an
    :class:`lnn.baseline.AccelerationMLP`) is integrated at the tolerance it
    can reach, and this warning, issued once per call, names the system's
    dtype, the tolerance asked and the one used (``Trajectory.metadata``
    keeps both).
    """
