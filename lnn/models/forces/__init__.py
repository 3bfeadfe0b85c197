"""Generalized forces beside the Lagrangian: a registry of learned force terms.

A *force* is a generalized force ``f(q, qd)`` (shape ``(B, n)``) added to the
right-hand side of the Euler-Lagrange equations::

    M qdd = dL/dq - (d2L/dqd dq) qd + tau + sum_k f_k(q, qd)

so the motors must supply ``tau = ... - sum_k f_k`` (inverse dynamics).
Each term is one module holding its TensorFlow and its numpy mathematics
side by side, a subclass of :class:`Force` registered under its name
(:mod:`lnn.models.forces.base` holds the base classes and the registry; a
force module imports that module only):

====================  ========================================================================  ===========  ======
name                  force                                                                     dissipative  linear
====================  ========================================================================  ===========  ======
``damping``           ``-D qd``, ``D`` a constant SPD matrix (``damping=True``)                 yes          no
``viscous``           ``-b_j qd_j`` per joint, ``b_j >= 0``                                     yes          yes
``coulomb``           ``-c_j tanh(qd_j / v0)`` per joint, ``c_j >= 0``                          yes          yes
``offset``            ``-o_j`` per joint, a constant torque bias (any sign)                     no           yes
``network``           ``-g_j(q, qd) tanh(qd_j / v0)``, ``g = softplus(MLP) >= 0``               yes          no
``joint_network``     ``-g_j(q_j, qd_j) tanh(qd_j / v0)``, one small MLP per joint              yes          no
``stribeck``          ``-sum_k s_jk exp(-(qd_j / vs_k)^2) tanh(qd_j / v0)``, ``s_jk >= 0``      yes          yes
``position_coulomb``  ``-c_j(q_j) tanh(qd_j / v0)``, ``c_j(q) >= 0`` a first harmonic of ``q``  yes          yes
====================  ========================================================================  ===========  ======

``LagrangianNetwork(..., friction="viscous+coulomb+network")`` names the
terms joined by ``+`` (:func:`friction_names` parses it, the one parser);
``damping=True`` is short for the ``damping`` term. The smoothing velocity
``v0`` is the model's ``friction_velocity`` (default
:data:`FRICTION_VELOCITY`). The dissipative terms satisfy ``qd . f <= 0`` for
every state. Linear terms give least squares their columns
(:meth:`LinearForce.basis`); a new one is a few lines
(:class:`LinearForce`, example in :mod:`lnn.models.forces.base`).
"""

from __future__ import annotations

import importlib

from lnn._catalog import BUILT_IN_FORCES
from lnn.models.forces.base import (
    FORCES,
    FRICTION_VELOCITY,
    Force,
    LinearForce,
    NumpyForce,
    NumpyLinearForce,
    assign_positive,
    force_names,
    friction_names,
    joint_vector,
    positive,
    register_force,
    softplus_inverse,
)

__all__ = [
    "BUILT_IN_FORCES",
    "FORCES",
    "FRICTION_VELOCITY",
    "Force",
    "LinearForce",
    "NumpyForce",
    "NumpyLinearForce",
    "assign_positive",
    "force_names",
    "friction_names",
    "joint_vector",
    "positive",
    "register_force",
    "softplus_inverse",
]

# Registration order = the order of the terms in ``friction=`` and of their variables (saved
# files depend on it): imported one by one, in this order.
for _module in ("damping", "viscous", "coulomb", "offset", "network", "joint_network", "stribeck", "position_coulomb"):
    importlib.import_module(f"lnn.models.forces.{_module}")
