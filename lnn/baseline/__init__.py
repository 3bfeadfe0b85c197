"""Baselines that ``lnn``'s models are measured against.

- :class:`AccelerationMLP` — the field's plain MLP ``qdd = f(q, qd, tau)``
  (TensorFlow), trained by :func:`lnn.fit` and rolled out by :func:`lnn.rollout`.
- :func:`least_squares` — classical identification of a rigid-body robot's
  base inertial parameters (plus joint friction) from measured torques through
  Pinocchio's joint-torque regressor, plain or physically consistent
  (log-Cholesky); it returns an :class:`IdentifiedRobot`, which satisfies
  :class:`lnn.MechanicalSystem`. Needs the ``robots`` extra (Pinocchio),
  imported on first use.

Both load on first access, so ``import lnn.baseline`` imports neither
TensorFlow nor Pinocchio.
"""

from __future__ import annotations

__all__ = [
    "AccelerationMLP",
    "least_squares",
    "IdentifiedRobot",
    "IdentifiedFriction",
    "FitStatistics",
    "PhysicalConsistency",
    "NonPhysicalMassMatrixError",
    "log_cholesky_to_parameters",
    "parameters_to_log_cholesky",
    "pseudo_inertia",
    "physical_consistency",
]

_LAZY = {
    "AccelerationMLP": "lnn.baseline._mlp",
    "least_squares": "lnn.baseline._identification",
    "IdentifiedRobot": "lnn.baseline._identification",
    "IdentifiedFriction": "lnn.baseline._identification",
    "FitStatistics": "lnn.baseline._identification",
    "NonPhysicalMassMatrixError": "lnn.baseline._identification",
    "PhysicalConsistency": "lnn.inertia",
    "log_cholesky_to_parameters": "lnn.inertia",
    "parameters_to_log_cholesky": "lnn.inertia",
    "pseudo_inertia": "lnn.inertia",
    "physical_consistency": "lnn.inertia",
}


def __getattr__(name):
    """Import the lazily exported names (see ``_LAZY``) on first access."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lnn.baseline' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
