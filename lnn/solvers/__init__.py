"""Compiled adaptive integrators: embedded explicit Runge–Kutta pairs written in TensorFlow.

One engine (:mod:`lnn.solvers._embedded`: per-trajectory step sizes under a
:class:`StepController` (:mod:`lnn.solvers._controller`; the default,
:data:`DEFAULT_CONTROLLER`, is diffrax's integral controller with a safety of
0.75), the error norm of every trajectory against its own tolerance,
dense output at the requested times, the whole step loop one
``tf.while_loop`` in one ``tf.function``, compiled with XLA) and one module
per tableau, found through :data:`REGISTRY`:

``"tsit5"``
    Tsitouras 5(4), seven stages (FSAL), 4th-order dense output
    (:mod:`lnn.solvers.tsit5`).
``"dopri5"``
    Dormand–Prince 5(4), seven stages (FSAL), Shampine's dense output
    (:mod:`lnn.solvers.dopri5`; scipy's ``RK45``).
``"dopri8"``
    Prince–Dormand 8(7) (``RK8(7)13M``), thirteen stages, the 7th-order
    embedded solution as the error estimate, a 5th-order dense output from
    the step's own stages (:mod:`lnn.solvers.dopri8`; diffrax's ``Dopri8``).
``"dopri853"``
    Dormand–Prince 8(5,3), twelve stages, DOP853's combined 5th/3rd-order
    error estimate, 7th-order dense output from three extra stages
    (:mod:`lnn.solvers.dopri853`; Hairer's ``DOP853``, scipy's ``DOP853``):
    larger steps than ``"dopri8"`` at the same tolerance (a less
    conservative error estimate).

They serve :func:`lnn.rollout` (``method="tsit5" | "dopri5" | "dopri8" | "dopri853"``,
numpy results) and :func:`lnn.integrate.odeint` (the same names, tensors,
differentiable with respect to the initial state and the weights). This
module imports neither TensorFlow nor the engine until a solve is asked for,
so that :mod:`lnn.integrate` stays numpy + scipy at import.
"""

from __future__ import annotations

import importlib

__all__ = [
    "NAMES",
    "REGISTRY",
    "tableau",
    "solve",
    "compiled_rollout",
    "AdaptiveSolution",
    "StepController",
    "DEFAULT_CONTROLLER",
]

#: name -> the module holding its :class:`lnn.solvers._tableau.Tableau` as ``TABLEAU``.
REGISTRY = {
    "tsit5": "lnn.solvers.tsit5",
    "dopri5": "lnn.solvers.dopri5",
    "dopri8": "lnn.solvers.dopri8",
    "dopri853": "lnn.solvers.dopri853",
}
#: The registered names, in order.
NAMES = tuple(REGISTRY)


def tableau(name: str):
    """The :class:`lnn.solvers._tableau.Tableau` registered as ``name``.

    Raises
    ------
    ValueError
        For a name that is not registered (the message lists the names).
    """
    if name not in REGISTRY:
        raise ValueError(f"method must be one of {', '.join(NAMES)}; got {name!r}")
    return importlib.import_module(REGISTRY[name]).TABLEAU


def __getattr__(name):
    if name in ("solve", "compiled_rollout", "AdaptiveSolution"):
        return getattr(importlib.import_module("lnn.solvers._embedded"), name)
    if name in ("StepController", "DEFAULT_CONTROLLER"):
        return getattr(importlib.import_module("lnn.solvers._controller"), name)
    raise AttributeError(f"module 'lnn.solvers' has no attribute {name!r}")
