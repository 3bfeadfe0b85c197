"""Generalized forces beside the Lagrangian: a registry of learned force terms.

A *force* is a generalized force ``f(q, qd)`` (shape ``(B, n)``) added to the
right-hand side of the Euler-Lagrange equations::

    M qdd = dL/dq - (d2L/dqd dq) qd + tau + sum_k f_k(q, qd)

so the motors must supply ``tau = ... - sum_k f_k`` (inverse dynamics).
Each term is one module holding its TensorFlow and its numpy mathematics
side by side, a subclass of :class:`Force` registered under its name:

=============  ======================================================  ============
name           force                                                   dissipative
=============  ======================================================  ============
``damping``    ``-D qd``, ``D`` a constant SPD matrix (``damping=True``)  yes
``viscous``    ``-b_j qd_j`` per joint, ``b_j >= 0``                    yes
``coulomb``    ``-c_j tanh(qd_j / v0)`` per joint, ``c_j >= 0``          yes
``offset``     ``-o_j`` per joint, a constant torque bias (any sign)     no
=============  ======================================================  ============

``LagrangianNetwork(..., friction="viscous+coulomb")`` names the friction
terms joined by ``+`` (:func:`friction_names` parses it); ``damping=True``
adds the ``damping`` term. The smoothing velocity ``v0`` of the Coulomb term
is the model's ``friction_velocity`` (default :data:`FRICTION_VELOCITY`).
The dissipative terms satisfy ``qd . f <= 0`` for every state.
"""

from __future__ import annotations

import importlib
from typing import ClassVar

import numpy as np
import tensorflow as tf

__all__ = ["FORCES", "FRICTION_VELOCITY", "Force", "NumpyForce", "force_names", "friction_names", "register_force"]

#: Default smoothing velocity ``v0`` of the Coulomb term ``c tanh(qd / v0)`` (rad/s or m/s):
#: below the velocity noise of joint encoders differentiated at 0.1-1 kHz, above its quantisation.
FRICTION_VELOCITY = 0.01


def softplus_inverse(value):
    """``x`` with ``softplus(x) = value`` (``value > 0``): ``value + log(1 - exp(-value))``, stable for any size."""
    value = np.asarray(value, np.float64)
    out = value + np.log(-np.expm1(-value))
    return float(out) if out.ndim == 0 else out


class NumpyForce:
    """The numpy twin of a force term (a snapshot of its variables)."""

    def force(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The generalized force, shape ``(B, n)``."""
        raise NotImplementedError


class Force:
    """A learned generalized-force term of one :class:`lnn.LagrangianNetwork`.

    The constructor creates the term's variables on the model (their names
    are part of saved files).

    Class attributes
    ----------------
    name : str
        The term's name in ``friction=`` (``"damping"`` comes from ``damping=True``).
    dissipative : bool
        True when ``qd . f(q, qd) <= 0`` for every state (a friction).
    """

    name: ClassVar[str] = ""
    dissipative: ClassVar[bool] = True

    def __init__(self, model) -> None:
        self.model = model

    def force(self, q, qd):
        """The generalized force ``f(q, qd)`` for tensors of shape ``(B, n)``."""
        raise NotImplementedError

    def numpy(self, dtype) -> NumpyForce:
        """A numpy snapshot of the current variables, computing in ``dtype``."""
        raise NotImplementedError

    def parameters(self) -> dict:
        """The term's physical parameters as numpy arrays (e.g. ``{"viscous": b}``)."""
        raise NotImplementedError


#: name -> :class:`Force` subclass, in registration order.
FORCES: dict[str, type] = {}


def register_force(cls: type) -> type:
    """Register a :class:`Force` subclass under ``cls.name`` (usable as a class decorator).

    Raises
    ------
    TypeError
        If ``cls`` is not a named :class:`Force` subclass.
    ValueError
        If another force holds that name.
    """
    from lnn.models.registry import register_named

    return register_named(FORCES, cls, base=Force, what="force")


def force_names() -> tuple[str, ...]:
    """The registered forces' names."""
    return tuple(FORCES)


def friction_names(friction) -> tuple[str, ...]:
    """The force terms named by a ``friction=`` argument.

    Parameters
    ----------
    friction : str or None
        ``None`` (no friction) or registered names joined by ``+``, e.g.
        ``"viscous+coulomb"``, ``"viscous"``, ``"coulomb"``,
        ``"viscous+coulomb+offset"``.

    Returns
    -------
    tuple of str
        The names, in registration order, without repeats.

    Raises
    ------
    ValueError
        For a name that is not a registered friction term (the message lists them).
    """
    if friction is None or friction == "" or friction == "none":
        return ()
    if not isinstance(friction, str):
        raise TypeError(f"friction must be None or a string like 'viscous+coulomb', got {friction!r}")
    names = [part.strip() for part in friction.split("+")]
    allowed = tuple(name for name in FORCES if name != "damping")
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(
            f"friction must be None or terms joined by '+' out of {allowed}; got "
            f"{friction!r} (unknown: {', '.join(map(repr, unknown))})"
        )
    return tuple(name for name in allowed if name in names)


def joint_vector(model, name: str, value: float, *, positive: bool):
    """A per-joint variable ``(n,)`` on ``model`` starting at ``value`` (softplus-raw when positive)."""
    n, dtype = model.n_dof, model.dtype
    var = model.add_weight(name=name, shape=(n,), initializer="zeros", dtype=dtype)
    var.assign(np.full(n, softplus_inverse(value) if positive else value, dtype=dtype))
    return var


def assign_positive(var, values) -> None:
    """Set a softplus-raw variable so that ``softplus(var) = values`` (``values > 0``, clipped at 1e-12)."""
    values = np.maximum(np.asarray(values, np.float64), 1e-12)
    var.assign(softplus_inverse(values).astype(np.dtype(str(var.dtype))))


def positive(var):
    """``softplus(var)`` as a tensor."""
    return tf.nn.softplus(var)


# Registration order = the order of the terms in ``friction=`` and of their variables (saved
# files depend on it): imported one by one, in this order.
for _module in ("damping", "viscous", "coulomb", "offset"):
    importlib.import_module(f"lnn.models.forces.{_module}")
