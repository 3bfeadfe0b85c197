"""The compiled adaptive integrators: embedded explicit Runge–Kutta pairs, one engine, written in TensorFlow.

=================================  ============================================================
module                             holds
=================================  ============================================================
:mod:`lnn.solvers.tableau`         :class:`Tableau`, the registry (:func:`register_tableau`)
``tsit5``, ``dopri5``, ``dopri8``,  one pair each: its coefficients and one registration line
``dopri853``
``_controller``                    :class:`StepController` (the step-size rules)
``_engine``                        the step loop of any pair (its state a named ``LoopState``)
``_scheduler``                     XLA scheduling: background compilation, compaction, costs
``_solve``                         the entries: :func:`solve` (tensors), :func:`solve_arrays` (numpy)
=================================  ============================================================

The built-in pairs:

``"tsit5"``
    Tsitouras 5(4), seven stages (FSAL), 4th-order dense output.
``"dopri5"``
    Dormand–Prince 5(4), seven stages (FSAL), Shampine's dense output (scipy's ``RK45``).
``"dopri8"``
    Prince–Dormand 8(7) (``RK8(7)13M``), thirteen stages, the 7th-order
    embedded solution as the error estimate, a 5th-order dense output from
    the step's own stages (diffrax's ``Dopri8``).
``"dopri853"``
    Dormand–Prince 8(5,3), twelve stages, DOP853's combined 5th/3rd-order
    error estimate, 7th-order dense output from three extra stages (Hairer's
    ``DOP853``, scipy's ``DOP853``): larger steps than ``"dopri8"`` at the
    same tolerance (a less conservative error estimate).

Every registered pair serves :func:`lnn.rollout` (numpy results) and
:func:`lnn.odeint.odeint` (tensors, differentiable with respect to the
initial state and the weights) under its name: a new pair is one file that
calls :func:`register_tableau` (``docs/how-to/extend.md``). This package
imports neither TensorFlow nor the engine until a solve is asked for, so
that :mod:`lnn.integrate` stays numpy + scipy at import. The engine knows
nothing of :mod:`lnn.integrate`: it takes arrays or tensors and returns them.
"""

from __future__ import annotations

import importlib
import warnings

from lnn.solvers.tableau import REGISTRY, Tableau, names, register_tableau, tableau

__all__ = [
    "REGISTRY",
    "STATUS",
    "AdaptiveSolution",
    "ArraySolution",
    "DEFAULT_CONTROLLER",
    "StepController",
    "Tableau",
    "names",
    "register_tableau",
    "solve",
    "solve_arrays",
    "tableau",
    "tracing_count",
]

for _pair in ("tsit5", "dopri5", "dopri8", "dopri853"):  # the built-in pairs register themselves, in this order
    importlib.import_module(f"lnn.solvers.{_pair}")

# name -> the module that defines it, imported on first use (TensorFlow).
_LAZY = {
    "solve": "lnn.solvers._solve",
    "solve_arrays": "lnn.solvers._solve",
    "AdaptiveSolution": "lnn.solvers._solve",
    "ArraySolution": "lnn.solvers._solve",
    "STATUS": "lnn.solvers._engine",
    "tracing_count": "lnn.solvers._engine",
    "StepController": "lnn.solvers._controller",
    "DEFAULT_CONTROLLER": "lnn.solvers._controller",
}


def __getattr__(name):
    """The lazily imported names (see ``_LAZY``); ``NAMES``: the registered pairs (deprecated, use :func:`names`)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "NAMES":
        warnings.warn(
            "lnn.solvers.NAMES is deprecated: use lnn.solvers.names() (it includes pairs registered later)",
            DeprecationWarning,
            stacklevel=2,
        )
        return names()
    raise AttributeError(f"module 'lnn.solvers' has no attribute {name!r}")
