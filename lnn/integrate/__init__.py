"""The integration room: one contract, two doors, one table of methods.

=========================================  ================================================================
module                                     holds
=========================================  ================================================================
:mod:`lnn.integrate._problem`              the problem: input checks, tolerances, the result assembly
                                           (a backend hands back a ``Solution``; a ``Trajectory`` leaves)
:mod:`lnn.integrate._methods`              the one table of methods (name, backend, order) and
                                           ``method="auto"``'s measured choices
:mod:`lnn.integrate._rollout`              door one, :func:`rollout`: numpy results, every method
:mod:`lnn.integrate.graph`                door two, :func:`lnn.odeint.odeint`: tensors, differentiable
                                           (fixed-step schemes and the compiled pairs)
:mod:`lnn.integrate._scipy`                the scipy backend (``solve_ivp``'s solvers over the batch)
:mod:`lnn.integrate._compiled`             the compiled backend (:func:`lnn.solvers.solve_arrays`)
:mod:`lnn.integrate._masked`               batch evaluations that mask failing samples
=========================================  ================================================================

Below the room: :mod:`lnn.solvers` (the Runge–Kutta engine, which knows
nothing of this package), :mod:`lnn._schemes` (the fixed-step schemes),
:mod:`lnn._torque` (the rule of sampled forces and controllers),
:mod:`lnn.trajectory` (the result) and :func:`lnn.system.compute_dtype` (the
dtype rule). TensorFlow is imported only when a compiled or fixed-step method
runs, so that ``import lnn`` stays light.
"""

from __future__ import annotations

import importlib
import warnings

from lnn.errors import IntegrationError
from lnn.integrate._masked import MaskedEvaluation, evaluate_masked
from lnn.integrate._methods import AUTO, AUTO_TABLE, BACKENDS, Method, choose_method, method, method_names, methods
from lnn.integrate._problem import ERROR_CONTROL, ON_FAILURE, default_tolerances
from lnn.integrate._rollout import rollout
from lnn.trajectory import Failure

__all__ = [
    "AUTO",
    "AUTO_TABLE",
    "BACKENDS",
    "ERROR_CONTROL",
    "IMPLICIT_METHODS",
    "METHODS",
    "ON_FAILURE",
    "Failure",
    "IntegrationError",
    "MaskedEvaluation",
    "Method",
    "choose_method",
    "default_tolerances",
    "evaluate_masked",
    "method",
    "method_names",
    "methods",
    "odeint",
    "rollout",
]

#: scipy's methods (:func:`scipy.integrate.solve_ivp`), accepted by :func:`rollout` (``method_names("scipy")``).
METHODS = method_names("scipy")
#: The methods that use a Jacobian of the vector field.
IMPLICIT_METHODS = tuple(name for name, row in methods().items() if row.implicit)


def __getattr__(name):
    """``odeint`` (door two, imported with TensorFlow on first use); ``COMPILED_METHODS`` (deprecated)."""
    if name == "odeint":
        return importlib.import_module("lnn.integrate.graph").odeint
    if name == "COMPILED_METHODS":
        warnings.warn(
            "lnn.integrate.COMPILED_METHODS is deprecated: use lnn.integrate.method_names('compiled') "
            "(it includes pairs registered later)",
            DeprecationWarning,
            stacklevel=2,
        )
        return method_names("compiled")
    raise AttributeError(f"module 'lnn.integrate' has no attribute {name!r}")
