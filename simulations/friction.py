"""Joint friction of the ground-truth systems: viscous, smooth Coulomb and a torque offset.

Per joint ``j`` the motor must overcome the friction torque

    tau_f_j(qd) = b_j qd_j + c_j tanh(qd_j / v0),     b_j >= 0, c_j >= 0, v0 > 0,

plus a constant offset ``o_j`` (a torque-sensor bias, any sign), so that

    tau = M qdd + C(q, qd) qd + g(q) + tau_f(qd) + o        (inverse dynamics)
    M qdd = tau - C qd - g - tau_f(qd) - o                  (forward dynamics).

The dissipative part ``-tau_f`` satisfies ``qd · (-tau_f) <= 0`` for every
state; the offset is not dissipative. This is the friction model of the
learned force terms of ``lnn`` (``friction="viscous+coulomb"``, with the
offset term ``offset``) and of ``lnn.baseline.least_squares``, so data
generated with a :class:`Friction` has a known answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Friction", "FRICTION_VELOCITY", "as_friction"]

#: Default smoothing velocity ``v0`` of the Coulomb term (rad/s or m/s).
FRICTION_VELOCITY = 0.01

_FIELDS = ("viscous", "coulomb", "offset", "velocity")


def _coefficients(name: str, value: Any, *, nonnegative: bool) -> float | tuple[float, ...]:
    """A scalar or a per-joint tuple of finite floats (``>= 0`` when ``nonnegative``)."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise TypeError(f"Friction.{name} must be a number or a sequence of numbers; got {value!r}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"Friction.{name} must be a number or a sequence of numbers; got {value!r}") from exc
    if array.ndim > 1 or (array.ndim == 1 and array.size == 0):
        raise ValueError(f"Friction.{name} must be a number or a non-empty 1-d sequence; got {value!r}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"Friction.{name} must be finite; got {value!r}")
    if nonnegative and np.any(array < 0):
        raise ValueError(f"Friction.{name} must be >= 0 (friction dissipates); got {value!r}")
    if array.ndim == 0:
        return float(array)
    return tuple(float(v) for v in array)


@dataclass(frozen=True)
class Friction:
    """Per-joint viscous + smooth Coulomb friction and a constant torque offset.

    Parameters
    ----------
    viscous : float or sequence of float, length ``n``
        Viscous coefficients ``b_j >= 0`` (N m s/rad); a scalar applies to every joint.
    coulomb : float or sequence of float, length ``n``
        Coulomb levels ``c_j >= 0`` (N m); a scalar applies to every joint.
    offset : float or sequence of float, length ``n``
        Constant torque offsets ``o_j`` (N m, any sign); a scalar applies to every joint.
    velocity : float
        Smoothing velocity ``v0 > 0`` of ``tanh(qd / v0)`` (rad/s), default 0.01.

    Raises
    ------
    ValueError
        For negative ``viscous`` or ``coulomb``, non-finite values, a
        ``velocity <= 0`` or per-joint sequences of different lengths.
    TypeError
        For values that are not numbers.

    Examples
    --------
    >>> Friction(viscous=(0.1, 0.05), coulomb=0.2).torque([[1.0, -1.0]]).round(3)
    array([[ 0.3 , -0.25]])
    """

    viscous: float | tuple[float, ...] = 0.0
    coulomb: float | tuple[float, ...] = 0.0
    offset: float | tuple[float, ...] = 0.0
    velocity: float = FRICTION_VELOCITY

    def __post_init__(self) -> None:
        for name, nonnegative in (("viscous", True), ("coulomb", True), ("offset", False)):
            object.__setattr__(self, name, _coefficients(name, getattr(self, name), nonnegative=nonnegative))
        velocity = self.velocity
        if isinstance(velocity, bool) or not isinstance(velocity, (int, float, np.integer, np.floating)):
            raise TypeError(f"Friction.velocity must be a real number; got {velocity!r}")
        if not (math.isfinite(float(velocity)) and float(velocity) > 0):
            raise ValueError(f"Friction.velocity must be a finite number > 0; got {velocity!r}")
        object.__setattr__(self, "velocity", float(velocity))
        lengths = {name: len(getattr(self, name)) for name in _FIELDS[:3] if isinstance(getattr(self, name), tuple)}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"Friction's per-joint coefficients must have one length; got lengths {lengths}")

    @property
    def n_joints(self) -> int | None:
        """Length of the per-joint coefficients, ``None`` when all are scalars."""
        for name in _FIELDS[:3]:
            value = getattr(self, name)
            if isinstance(value, tuple):
                return len(value)
        return None

    def check_joints(self, n_dof: int, owner: str) -> None:
        """Raise ``ValueError`` unless the per-joint coefficients fit ``n_dof`` joints.

        Parameters
        ----------
        n_dof : int
            Number of joints of the system.
        owner : str
            Name of the system, used in the message.
        """
        n = self.n_joints
        if n is not None and n != n_dof:
            raise ValueError(f"friction has {n} per-joint coefficients but {owner} has n_dof={n_dof}: {self!r}")

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.asarray(self.viscous), np.asarray(self.coulomb), np.asarray(self.offset))

    def torque(self, qd: Any) -> np.ndarray:
        """The torque the motors must supply against friction: ``tau_f(qd) + o``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``
            Joint velocities.

        Returns
        -------
        ndarray, shape ``(..., n)``
            ``b qd + c tanh(qd / v0) + o``.
        """
        qd = np.asarray(qd, dtype=np.float64)
        b, c, o = self._arrays()
        return b * qd + c * np.tanh(qd / self.velocity) + o

    def force(self, qd: Any) -> np.ndarray:
        """The dissipative generalized force of friction on the joints, ``-tau_f(qd)`` (no offset).

        ``qd · force(qd) <= 0`` for every ``qd``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        qd = np.asarray(qd, dtype=np.float64)
        b, c, _ = self._arrays()
        return -(b * qd + c * np.tanh(qd / self.velocity))

    def torque_derivative(self, qd: Any) -> np.ndarray:
        """The diagonal of ``d torque / d qd``: ``b + c (1 - tanh(qd / v0)^2) / v0``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        qd = np.asarray(qd, dtype=np.float64)
        b, c, _ = self._arrays()
        return b + c * (1.0 - np.tanh(qd / self.velocity) ** 2) / self.velocity + 0.0 * qd

    def parameters(self) -> dict:
        """JSON-serialisable fields: ``Friction(**friction.parameters()) == friction``.

        Returns
        -------
        dict
            ``viscous``, ``coulomb``, ``offset`` (floats or lists) and ``velocity``.
        """
        return {
            name: list(v) if isinstance(v, tuple) else v
            for name, v in ((name, getattr(self, name)) for name in _FIELDS)
        }


def as_friction(value: Any) -> Friction | None:
    """``None``, a :class:`Friction` or its ``parameters()`` dict -> ``Friction`` or ``None``.

    Parameters
    ----------
    value : Friction, dict or None

    Returns
    -------
    Friction or None

    Raises
    ------
    TypeError
        For any other type, or a dict with unknown keys.
    """
    if value is None or isinstance(value, Friction):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(_FIELDS))
        if unknown:
            raise TypeError(f"friction has unknown keys {unknown}; expected some of {list(_FIELDS)}")
        return Friction(**value)
    raise TypeError(
        f"friction must be a simulations.Friction, its parameters() dict or None; got {type(value).__name__}: {value!r}"
    )
