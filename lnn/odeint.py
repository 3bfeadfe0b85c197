"""Door two of the integration room: :func:`odeint`, differentiable rollouts in TensorFlow.

:func:`odeint` integrates any :class:`lnn.MechanicalSystem` whose
``acceleration`` accepts TensorFlow tensors (a :class:`lnn.LagrangianNetwork`,
or a system written in TensorFlow) on a time grid, inside one compiled
``tf.function``, with a fixed-step scheme (``"rk4"``, the symplectic
``"verlet"``) or a compiled adaptive pair of :mod:`lnn.solvers`. Gradients
of the result reach the initial state, sampled forces and every variable
the system reads, so losses on multi-step rollouts can be trained. The
mathematics and the full documentation are in :mod:`lnn.integrate.graph`;
the numpy door is :func:`lnn.rollout`.
"""

from __future__ import annotations

import warnings

from lnn.integrate import method_names
from lnn.integrate.graph import odeint

__all__ = ["METHODS", "odeint"]

#: Names of the fixed-step methods of :func:`odeint`.
METHODS = method_names("fixed-step")


def __getattr__(name):
    """``ADAPTIVE_METHODS``: the compiled pairs (live); ``OdeintResult``: deprecated alias of ``lnn.Trajectory``."""
    if name == "ADAPTIVE_METHODS":
        return method_names("compiled")
    if name == "OdeintResult":
        warnings.warn(
            "lnn.odeint.OdeintResult is deprecated: odeint returns an lnn.Trajectory", DeprecationWarning, stacklevel=2
        )
        from lnn.trajectory import Trajectory

        return Trajectory
    raise AttributeError(f"module 'lnn.odeint' has no attribute {name!r}")
