"""Joint friction of the ground-truth systems: viscous, smooth Coulomb and a torque offset.

Two models: :class:`Friction` (below), the family of ``lnn``'s linear
friction terms, and :class:`StribeckFriction`, a ground truth outside that
family (Stribeck, asymmetric, position-dependent) for benchmarks that ask what
a linear model cannot fit. Both give ``torque(qd, q=q)``, its derivatives in
``qd`` and ``q``, ``check_joints`` and a ``parameters()`` dict that
:func:`as_friction` turns back into the same model.

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
from typing import Any, ClassVar

import numpy as np

__all__ = ["Friction", "StribeckFriction", "FrictionModel", "FRICTION_VELOCITY", "as_friction"]

#: Default smoothing velocity ``v0`` of the Coulomb term (rad/s or m/s).
FRICTION_VELOCITY = 0.01

_FIELDS = ("viscous", "coulomb", "offset", "velocity")


def _coefficients(
    name: str, value: Any, *, nonnegative: bool, owner: str = "Friction", bound: float | None = None
) -> float | tuple[float, ...]:
    """A scalar or a per-joint tuple of finite floats (``>= 0`` when ``nonnegative``, ``|v| <= bound``)."""
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise TypeError(f"{owner}.{name} must be a number or a sequence of numbers; got {value!r}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{owner}.{name} must be a number or a sequence of numbers; got {value!r}") from exc
    if array.ndim > 1 or (array.ndim == 1 and array.size == 0):
        raise ValueError(f"{owner}.{name} must be a number or a non-empty 1-d sequence; got {value!r}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{owner}.{name} must be finite; got {value!r}")
    if nonnegative and np.any(array < 0):
        raise ValueError(f"{owner}.{name} must be >= 0 (friction dissipates); got {value!r}")
    if bound is not None and np.any(np.abs(array) > bound):
        raise ValueError(f"{owner}.{name} must lie in [-{bound:g}, {bound:g}] (friction dissipates); got {value!r}")
    if array.ndim == 0:
        return float(array)
    return tuple(float(v) for v in array)


def _velocity(owner: str, value: Any) -> float:
    """A smoothing velocity: a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}.velocity must be a real number; got {value!r}")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{owner}.velocity must be a finite number > 0; got {value!r}")
    return float(value)


def _joint_count(owner: str, values: dict[str, Any]) -> int | None:
    """The common length of the per-joint tuples among ``values`` (``None``: all scalars)."""
    lengths = {name: len(v) for name, v in values.items() if isinstance(v, tuple)}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{owner}'s per-joint coefficients must have one length; got lengths {lengths}")
    return next(iter(lengths.values()), None)


class _JointFriction:
    """What both friction models share: their fields (``FIELDS``, the per-joint coefficients first and the
    smoothing ``velocity`` last), the joint count and its check, and ``parameters()``."""

    FIELDS: ClassVar[tuple[str, ...]]

    @property
    def n_joints(self) -> int | None:
        """Length of the per-joint coefficients, ``None`` when all are scalars."""
        return _joint_count(type(self).__name__, {name: getattr(self, name) for name in self.FIELDS[:-1]})

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

    def parameters(self) -> dict:
        """JSON-serialisable fields: ``type(friction)(**friction.parameters()) == friction``.

        Returns
        -------
        dict
            Every field (floats or lists), in ``FIELDS`` order.
        """
        values = {name: getattr(self, name) for name in self.FIELDS}
        return {name: list(v) if isinstance(v, tuple) else v for name, v in values.items()}


@dataclass(frozen=True)
class Friction(_JointFriction):
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

    FIELDS: ClassVar[tuple[str, ...]] = _FIELDS

    def __post_init__(self) -> None:
        for name, nonnegative in (("viscous", True), ("coulomb", True), ("offset", False)):
            object.__setattr__(self, name, _coefficients(name, getattr(self, name), nonnegative=nonnegative))
        object.__setattr__(self, "velocity", _velocity("Friction", self.velocity))
        _joint_count("Friction", {name: getattr(self, name) for name in _FIELDS[:3]})

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.asarray(self.viscous), np.asarray(self.coulomb), np.asarray(self.offset))

    def torque(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The torque the motors must supply against friction: ``tau_f(qd) + o``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``
            Joint velocities.
        q : array_like, shape ``(..., n)``, optional
            Joint positions; ignored (this friction depends on ``qd`` only),
            accepted so that every friction model is called alike.

        Returns
        -------
        ndarray, shape ``(..., n)``
            ``b qd + c tanh(qd / v0) + o``.
        """
        qd = np.asarray(qd, dtype=np.float64)
        b, c, o = self._arrays()
        return b * qd + c * np.tanh(qd / self.velocity) + o

    def force(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The dissipative generalized force of friction on the joints, ``-tau_f(qd)`` (no offset).

        ``qd · force(qd) <= 0`` for every ``qd``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``
        q : array_like, shape ``(..., n)``, optional
            Ignored (see :meth:`torque`).

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        qd = np.asarray(qd, dtype=np.float64)
        b, c, _ = self._arrays()
        return -(b * qd + c * np.tanh(qd / self.velocity))

    def torque_derivative(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The diagonal of ``d torque / d qd``: ``b + c (1 - tanh(qd / v0)^2) / v0``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``
        q : array_like, shape ``(..., n)``, optional
            Ignored (see :meth:`torque`).

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        qd = np.asarray(qd, dtype=np.float64)
        b, c, _ = self._arrays()
        return b + c * (1.0 - np.tanh(qd / self.velocity) ** 2) / self.velocity + 0.0 * qd

    def position_derivative(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The diagonal of ``d torque / d q``: zero (this friction does not depend on ``q``).

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``
        q : array_like, shape ``(..., n)``, optional
            Ignored; the result has the broadcast shape of ``qd`` (and ``q``).

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        qd = np.asarray(qd, dtype=np.float64)
        zeros = np.zeros(np.broadcast_shapes(qd.shape, np.shape(self._arrays()[0])))
        return zeros if q is None else zeros + 0.0 * np.asarray(q, dtype=np.float64)


_STRIBECK_FIELDS = (
    "viscous",
    "coulomb",
    "static",
    "stribeck_velocity",
    "asymmetry",
    "modulation",
    "phase",
    "offset",
    "velocity",
)


@dataclass(frozen=True)
class StribeckFriction(_JointFriction):
    """Stribeck, asymmetric and position-dependent joint friction: a ground truth outside ``lnn``'s linear family.

    Per joint ``j`` the motor must overcome the friction torque

        tau_f_j(q, qd) = G_j(q_j, qd_j) tanh(qd_j / v0) + b_j qd_j,

        G_j = g_j(qd_j) (1 + a_j tanh(qd_j / v0)) (1 + p_j cos(q_j + phi_j)),

        g_j(qd_j) = c_j + (s_j - c_j) exp(-(qd_j / vs_j)^2),

    plus a constant offset ``o_j`` (any sign), entering the dynamics as
    :class:`Friction`'s does: ``tau = M qdd + C qd + g + tau_f + o``. The
    terms are

    - ``g_j``, the Stribeck curve: the static level ``s_j`` at rest, falling
      (or rising, for ``s_j < c_j``) to the Coulomb level ``c_j`` over the
      Stribeck velocity ``vs_j``;
    - ``1 + a_j tanh(qd_j / v0)``, the asymmetry: levels ``(1 + a_j) g_j``
      for positive and ``(1 - a_j) g_j`` for negative rates, written smoothly;
    - ``1 + p_j cos(q_j + phi_j)``, a modulation with the joint's position
      (a gear's or a seal's friction that changes along the stroke);
    - ``b_j qd_j``, viscous friction; ``tanh(qd_j / v0)``, the smoothed sign.

    With every optional term at its default (``static = coulomb``,
    ``asymmetry = modulation = 0``) it is :class:`Friction` exactly.

    **Passivity.** Let ``D_j`` be ``tau_f_j`` without the offset, and
    ``e = exp(-(qd_j / vs_j)^2)``, which lies in ``(0, 1]``.

    - ``g_j = c_j (1 - e) + s_j e`` is a convex combination of
      ``c_j >= 0`` and ``s_j >= 0``, so ``g_j >= 0``;
    - ``|a_j| <= 1`` and ``|tanh| < 1`` give ``1 + a_j tanh(qd_j / v0) >= 0``;
    - ``|p_j| <= 1`` gives ``1 + p_j cos(q_j + phi_j) >= 0``.

    Hence ``G_j >= 0``; with ``qd_j tanh(qd_j / v0) >= 0`` and
    ``b_j qd_j^2 >= 0`` every joint has ``qd_j D_j >= 0`` in every state,
    and summing over the joints

        qd · (-tau_f + o) = -sum_j qd_j D_j <= 0:

    the friction force never puts energy into the system.

    Parameters
    ----------
    viscous : float or sequence of float, length ``n``
        Viscous coefficients ``b_j >= 0`` (N m s/rad).
    coulomb : float or sequence of float, length ``n``
        Coulomb levels ``c_j >= 0`` (N m), reached at rates well above ``vs_j``.
    static : float or sequence of float, length ``n``, optional
        Static (breakaway) levels ``s_j >= 0`` (N m); ``None`` (the default):
        ``s_j = c_j``, no Stribeck effect.
    stribeck_velocity : float or sequence of float, length ``n``
        Stribeck velocities ``vs_j > 0`` (rad/s), default 0.1.
    asymmetry : float or sequence of float, length ``n``
        ``a_j`` in ``[-1, 1]``: the friction at positive rates is ``(1 + a_j) /
        (1 - a_j)`` times that at negative rates.
    modulation : float or sequence of float, length ``n``
        Relative amplitudes ``p_j`` in ``[-1, 1]`` of the position modulation.
    phase : float or sequence of float, length ``n``
        Phases ``phi_j`` of the position modulation (rad).
    offset : float or sequence of float, length ``n``
        Constant torque offsets ``o_j`` (N m, any sign).
    velocity : float
        Smoothing velocity ``v0 > 0`` of ``tanh(qd / v0)`` (rad/s), default 0.01.

    Raises
    ------
    ValueError
        For negative ``viscous``, ``coulomb`` or ``static``, a
        ``stribeck_velocity`` or ``velocity <= 0``, ``|asymmetry| > 1``,
        ``|modulation| > 1``, non-finite values or per-joint sequences of
        different lengths.
    TypeError
        For values that are not numbers.

    Examples
    --------
    >>> f = StribeckFriction(coulomb=0.3, static=0.45, stribeck_velocity=0.1, asymmetry=0.2)
    >>> f.torque([[0.05, 5.0, -5.0]], q=[[0.0, 0.0, 0.0]]).round(3)
    array([[ 0.5 ,  0.36, -0.24]])
    """

    viscous: float | tuple[float, ...] = 0.0
    coulomb: float | tuple[float, ...] = 0.0
    static: float | tuple[float, ...] | None = None
    stribeck_velocity: float | tuple[float, ...] = 0.1
    asymmetry: float | tuple[float, ...] = 0.0
    modulation: float | tuple[float, ...] = 0.0
    phase: float | tuple[float, ...] = 0.0
    offset: float | tuple[float, ...] = 0.0
    velocity: float = FRICTION_VELOCITY

    FIELDS: ClassVar[tuple[str, ...]] = _STRIBECK_FIELDS

    def __post_init__(self) -> None:
        owner = "StribeckFriction"
        if self.static is None:
            object.__setattr__(self, "static", self.coulomb)
        # (field, >= 0, bound on |value|)
        rules = (
            ("viscous", True, None),
            ("coulomb", True, None),
            ("static", True, None),
            ("stribeck_velocity", False, None),
            ("asymmetry", False, 1.0),
            ("modulation", False, 1.0),
            ("phase", False, None),
            ("offset", False, None),
        )
        for name, nonnegative, bound in rules:
            value = _coefficients(name, getattr(self, name), nonnegative=nonnegative, owner=owner, bound=bound)
            object.__setattr__(self, name, value)
        if np.any(np.asarray(self.stribeck_velocity) <= 0):
            raise ValueError(f"{owner}.stribeck_velocity must be > 0; got {self.stribeck_velocity!r}")
        object.__setattr__(self, "velocity", _velocity(owner, self.velocity))
        _joint_count(owner, {name: getattr(self, name) for name in _STRIBECK_FIELDS[:-1]})

    def _terms(self, qd: Any, q: Any, method: str) -> dict[str, np.ndarray]:
        """The factors of ``tau_f`` and their slopes at the broadcast states."""
        if q is None:
            raise ValueError(f"StribeckFriction.{method} needs the joint positions q (its level depends on them)")
        qd = np.asarray(qd, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        b, c, s, vs, a, p, phi = (np.asarray(getattr(self, name)) for name in _STRIBECK_FIELDS[:7])
        try:
            shape = np.broadcast_shapes(qd.shape, q.shape, *(x.shape for x in (b, c, s, vs, a, p, phi)))
        except ValueError:
            raise ValueError(
                f"StribeckFriction.{method}: qd of shape {qd.shape} and q of shape {q.shape} do not broadcast "
                f"with each other and with {self.n_joints} per-joint coefficients"
            ) from None
        qd, q = np.broadcast_to(qd, shape), np.broadcast_to(q, shape)
        t = np.tanh(qd / self.velocity)
        e = np.exp(-((qd / vs) ** 2))
        angle = q + phi
        return {
            "qd": qd,
            "b": b + 0.0 * qd,
            "a": a + 0.0 * qd,
            "t": t,  # smoothed sign
            "dt": (1.0 - t**2) / self.velocity,  # its slope in qd
            "g": c + (s - c) * e,  # Stribeck level
            "dg": -2.0 * (s - c) * e * qd / vs**2,  # its slope in qd
            "A": 1.0 + a * t,  # asymmetry
            "P": 1.0 + p * np.cos(angle),  # position modulation
            "dP": -p * np.sin(angle),  # its slope in q
        }

    def torque(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The torque the motors must supply against friction: ``tau_f(q, qd) + o``.

        Parameters
        ----------
        qd : array_like, shape ``(..., n)``
            Joint velocities.
        q : array_like, shape ``(..., n)``
            Joint positions (required: the modulation depends on them).

        Returns
        -------
        ndarray, shape ``(..., n)``
            ``G(q, qd) tanh(qd / v0) + b qd + o``.

        Raises
        ------
        ValueError
            When ``q`` is missing or does not broadcast with ``qd``.
        """
        return self._dissipative(qd, q, "torque") + np.asarray(self.offset)

    def force(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The dissipative generalized force of friction, ``-tau_f(q, qd)`` (no offset).

        ``qd · force(qd, q=q) <= 0`` for every state (see the class docstring).

        Parameters
        ----------
        qd, q : array_like, shape ``(..., n)``

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        return -self._dissipative(qd, q, "force")

    def _dissipative(self, qd: Any, q: Any, method: str) -> np.ndarray:
        """``tau_f(q, qd)`` without the offset: ``G tanh(qd / v0) + b qd``."""
        x = self._terms(qd, q, method)
        return x["g"] * x["A"] * x["P"] * x["t"] + x["b"] * x["qd"]

    def torque_derivative(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The diagonal of ``d torque / d qd``: ``P (g' A t + g t' (1 + 2 a t)) + b``.

        With ``t = tanh(qd / v0)``, ``t' = (1 - t^2) / v0``, ``g`` the
        Stribeck level and ``g'`` its slope, ``A = 1 + a t`` and ``P = 1 + p
        cos(q + phi)`` (``d(A t)/d qd = t' (1 + 2 a t)``). Negative where the
        Stribeck curve falls faster than the rest rises.

        Parameters
        ----------
        qd, q : array_like, shape ``(..., n)``

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        x = self._terms(qd, q, "torque_derivative")
        return x["P"] * (x["dg"] * x["A"] * x["t"] + x["g"] * x["dt"] * (1.0 + 2.0 * x["a"] * x["t"])) + x["b"]

    def position_derivative(self, qd: Any, *, q: Any = None) -> np.ndarray:
        """The diagonal of ``d torque / d q``: ``-p sin(q + phi) g A tanh(qd / v0)``.

        Parameters
        ----------
        qd, q : array_like, shape ``(..., n)``

        Returns
        -------
        ndarray, shape ``(..., n)``
        """
        x = self._terms(qd, q, "position_derivative")
        return x["dP"] * x["g"] * x["A"] * x["t"]


#: A friction model of the ground-truth systems.
FrictionModel = Friction | StribeckFriction


def as_friction(value: Any) -> FrictionModel | None:
    """``None``, a friction model or its ``parameters()`` dict -> the model or ``None``.

    A dict whose keys are among :class:`Friction`'s fields builds a
    ``Friction``; one with any of :class:`StribeckFriction`'s other fields
    (``static``, ``stribeck_velocity``, ``asymmetry``, ``modulation``,
    ``phase``) builds a ``StribeckFriction``.

    Parameters
    ----------
    value : Friction, StribeckFriction, dict or None

    Returns
    -------
    Friction, StribeckFriction or None

    Raises
    ------
    TypeError
        For any other type, or a dict with unknown keys.
    """
    if value is None or isinstance(value, (Friction, StribeckFriction)):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(_STRIBECK_FIELDS))
        if unknown:
            raise TypeError(
                f"friction has unknown keys {unknown}; expected some of {list(_FIELDS)} (Friction) "
                f"or of {list(_STRIBECK_FIELDS)} (StribeckFriction)"
            )
        if set(value) <= set(_FIELDS):
            return Friction(**value)
        return StribeckFriction(**value)
    raise TypeError(
        f"friction must be a simulations.Friction, its parameters() dict, a simulations.StribeckFriction, "
        f"its parameters() dict or None; got {type(value).__name__}: {value!r}"
    )
