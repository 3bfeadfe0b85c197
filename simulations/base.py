"""Shared machinery of the ground-truth systems: validation, energies, dynamics.

Every system writes its equations of motion as

    M(q) qdd + b(q, qd) = tau,

with ``b`` the bias force (Coriolis, centrifugal, gravity and friction
terms). A system implements four private hooks, ``_mass_matrix(q)``,
``_bias(q, qd)``, ``_potential(q)`` and ``_positions(q)`` on validated
float64 arrays, and :class:`MechanicalBase` derives the public, validated,
vectorised interface of the ``lnn.MechanicalSystem`` protocol from them:
energies, forward dynamics (``np.linalg.solve`` on the stacked mass
matrices), inverse dynamics and a finite-difference acceleration Jacobian.

A system with a ``friction`` field (a :class:`simulations.Friction`, a
:class:`simulations.StribeckFriction` or ``None``) gets joint friction in
every public dynamics method: the hooks describe the frictionless rigid body,
and the base adds the friction torque ``tau_f(q, qd) + o`` to ``bias_force``
and ``inverse_dynamics`` and subtracts it from the applied torque in
``acceleration`` and ``acceleration_jacobian``.
The energy is unchanged (friction is a generalized force, not a potential).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulations.friction import Friction, StribeckFriction, as_friction

__all__ = ["MechanicalBase", "State", "as_rng"]


@dataclass(frozen=True)
class State:
    """A batch of states of a mechanical system.

    Attributes
    ----------
    q : ndarray, shape ``(n, n_dof)``
        Generalized coordinates.
    qd : ndarray, shape ``(n, n_dof)``
        Generalized velocities.
    """

    q: np.ndarray
    qd: np.ndarray


def as_rng(rng: Any) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a generator, an int seed or ``None``.

    Parameters
    ----------
    rng : numpy.random.Generator, int or None
        An existing generator (returned as is), a seed, or ``None`` for fresh
        OS entropy.

    Returns
    -------
    numpy.random.Generator
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy.random.Generator, an int seed or None; got {type(rng).__name__}")


def check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking that it is finite and > 0.

    Parameters
    ----------
    name : str
        The parameter's name, used in the error message.
    value : float
        The value to check.

    Returns
    -------
    float
    """
    number = _as_float(name, value)
    if not number > 0 or not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return number


def check_nonnegative(name: str, value: Any) -> float:
    """Return ``value`` as a float after checking that it is finite and >= 0.

    Parameters
    ----------
    name : str
        The parameter's name, used in the error message.
    value : float
        The value to check.

    Returns
    -------
    float
    """
    number = _as_float(name, value)
    if not number >= 0 or not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return number


def check_positive_sequence(name: str, values: Any, *, min_length: int = 1) -> tuple[float, ...]:
    """Return ``values`` as a tuple of floats, each finite and > 0.

    Parameters
    ----------
    name : str
        The parameter's name, used in the error message.
    values : sequence of float, length ``>= min_length``
        The values to check.
    min_length : int
        The smallest accepted length.

    Returns
    -------
    tuple of float
    """
    if isinstance(values, (str, bytes)) or np.ndim(values) != 1:
        raise TypeError(f"{name} must be a sequence of numbers; got {values!r}")
    result = tuple(_as_float(f"{name}[{i}]", v) for i, v in enumerate(values))
    if len(result) < min_length:
        raise ValueError(f"{name} must have at least {min_length} entries; got {len(result)}: {values!r}")
    for i, v in enumerate(result):
        if not v > 0 or not math.isfinite(v):
            raise ValueError(f"{name}[{i}] must be a finite number > 0; got {v!r} in {name}={values!r}")
    return result


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    return float(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (Friction, StribeckFriction)):
        return value.parameters()
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value)
    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    return value


class MechanicalBase:
    """Mixin giving a system the validated, vectorised ``MechanicalSystem`` API.

    Subclasses are frozen dataclasses that set ``name`` (class attribute),
    ``n_dof`` and ``angular`` and implement ``_mass_matrix``, ``_bias``,
    ``_potential`` and ``_positions``. All public methods accept any leading
    batch shape ``...`` and return float64 arrays.
    """

    name: str = ""

    # ------------------------------------------------------------------ hooks
    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _potential(self, q: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _positions(self, q: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _inverse_dynamics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        return np.einsum("...ij,...j->...i", self._mass_matrix(q), qdd) + self._bias(q, qd)

    def _acceleration(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        rhs = -self._bias(q, qd)
        if tau is not None:
            rhs = rhs + tau
        return np.linalg.solve(self._mass_matrix(q), rhs[..., None])[..., 0]

    # --------------------------------------------------------------- friction
    def _friction_torque(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray | None:
        """``tau_f(q, qd) + o`` of the system's ``friction`` field, ``None`` without friction."""
        friction = getattr(self, "friction", None)
        return None if friction is None else friction.torque(qd, q=q)

    def _forward(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        """Forward dynamics with friction: ``_acceleration`` of ``tau - tau_f(q, qd) - o``."""
        torque = self._friction_torque(q, qd)
        if torque is not None:
            tau = -torque if tau is None else tau - torque
        return self._acceleration(q, qd, tau)

    def _check_friction(self) -> None:
        """Normalise the ``friction`` field (a friction model, its dict or ``None``) in ``__post_init__``."""
        friction = as_friction(getattr(self, "friction", None))
        object.__setattr__(self, "friction", friction)

    # ------------------------------------------------------------- validation
    def _check(self, name: str, value: Any) -> np.ndarray:
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an array of real numbers; got {type(value).__name__}") from exc
        if array.ndim == 0 or array.shape[-1] != self.n_dof:
            raise ValueError(
                f"{name} must have shape (..., {self.n_dof}) for {self.name} "
                f"(n_dof={self.n_dof}); got shape {array.shape}"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite values (shape {array.shape})")
        return array

    def _check_many(self, **arrays: Any) -> list[np.ndarray]:
        checked = {k: self._check(k, v) for k, v in arrays.items() if v is not None}
        shapes = {a.shape for a in checked.values()}
        if len(shapes) == 1:  # the common case: nothing to broadcast
            return [checked.get(k) for k in arrays]
        try:
            batch = np.broadcast_shapes(*(a.shape[:-1] for a in checked.values()))
        except ValueError:
            shapes = ", ".join(f"{k} {a.shape}" for k, a in checked.items())
            raise ValueError(f"mismatched batch shapes: {shapes}") from None
        shape = batch + (self.n_dof,)
        return [np.broadcast_to(checked[k], shape) if k in checked else None for k in arrays]

    # ------------------------------------------------------------- public API
    def parameters(self) -> dict:
        """The physical parameters, JSON-serialisable.

        Returns
        -------
        dict
            ``make_system(self.name, **self.parameters())`` rebuilds the system.
        """
        return {
            f.name: _jsonable(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.init and f.compare and f.name != "name"
        }

    def mass_matrix(self, q: Any, qd: Any = None) -> np.ndarray:
        """Mass matrix ``M(q)``: symmetric positive definite.

        Parameters
        ----------
        q : array_like, shape ``(..., n_dof)``
            Generalized coordinates.
        qd : array_like, shape ``(..., n_dof)``, optional
            Ignored (the mass matrix of these systems depends on ``q`` only);
            validated when given.

        Returns
        -------
        ndarray, shape ``(..., n_dof, n_dof)``
        """
        if qd is None:
            q = self._check("q", q)
        else:
            q, _ = self._check_many(q=q, qd=qd)
        return self._mass_matrix(q)

    def potential_energy(self, q: Any) -> np.ndarray:
        """Potential energy ``V(q)`` (gravity), in joules.

        Parameters
        ----------
        q : array_like, shape ``(..., n_dof)``

        Returns
        -------
        ndarray, shape ``(...)``
        """
        return self._potential(self._check("q", q))

    def kinetic_energy(self, q: Any, qd: Any) -> np.ndarray:
        """Kinetic energy ``T = qd · M(q) qd / 2``.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n_dof)``

        Returns
        -------
        ndarray, shape ``(...)``
        """
        q, qd = self._check_many(q=q, qd=qd)
        return 0.5 * np.einsum("...i,...ij,...j->...", qd, self._mass_matrix(q), qd)

    def energy(self, q: Any, qd: Any) -> np.ndarray:
        """Total mechanical energy ``E = T + V``.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n_dof)``

        Returns
        -------
        ndarray, shape ``(...)``
        """
        q, qd = self._check_many(q=q, qd=qd)
        kinetic = 0.5 * np.einsum("...i,...ij,...j->...", qd, self._mass_matrix(q), qd)
        return kinetic + self._potential(q)

    def acceleration(self, q: Any, qd: Any, tau: Any = None) -> np.ndarray:
        """Forward dynamics ``qdd = M(q)^-1 (tau - b(q, qd))`` (``b`` includes friction).

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n_dof)``
        tau : array_like, shape ``(..., n_dof)``, optional
            Generalized forces on the coordinates (zero when ``None``).

        Returns
        -------
        ndarray, shape ``(..., n_dof)``
        """
        q, qd, tau = self._check_many(q=q, qd=qd, tau=tau)
        return self._forward(q, qd, tau)

    def inverse_dynamics(self, q: Any, qd: Any, qdd: Any) -> np.ndarray:
        """Inverse dynamics ``tau = M(q) qdd + b(q, qd)`` (``b`` includes friction).

        Parameters
        ----------
        q, qd, qdd : array_like, shape ``(..., n_dof)``

        Returns
        -------
        ndarray, shape ``(..., n_dof)``
            The generalized force that produces ``qdd``.
        """
        q, qd, qdd = self._check_many(q=q, qd=qd, qdd=qdd)
        tau = self._inverse_dynamics(q, qd, qdd)
        torque = self._friction_torque(q, qd)
        return tau if torque is None else tau + torque

    def bias_force(self, q: Any, qd: Any) -> np.ndarray:
        """Bias force ``b(q, qd) = tau - M qdd``: Coriolis, gravity and friction.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n_dof)``

        Returns
        -------
        ndarray, shape ``(..., n_dof)``
        """
        q, qd = self._check_many(q=q, qd=qd)
        bias = self._bias(q, qd)
        torque = self._friction_torque(q, qd)
        return bias if torque is None else bias + torque

    def positions(self, q: Any) -> np.ndarray:
        """Cartesian points of the system: the pivot or base first, then one per body.

        Parameters
        ----------
        q : array_like, shape ``(..., n_dof)``

        Returns
        -------
        ndarray, shape ``(..., n_points, d)``
            ``d = 2`` (x right, y up) for planar systems, 3 for URDF robots.
        """
        return self._positions(self._check("q", q))

    def acceleration_jacobian(self, q: Any, qd: Any, tau: Any = None) -> np.ndarray:
        """Jacobian ``d qdd / d [q, qd]`` by central finite differences.

        The step is ``eps**(1/3) * max(1, |x|)`` per coordinate, so the
        relative error is about ``1e-10`` for these smooth systems.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n_dof)``
        tau : array_like, shape ``(..., n_dof)``, optional

        Returns
        -------
        ndarray, shape ``(..., n_dof, 2 n_dof)``
        """
        q, qd, tau = self._check_many(q=q, qd=qd, tau=tau)
        return self._fd_jacobian(q, qd, tau)

    def _fd_jacobian(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        n = self.n_dof
        x = np.concatenate([q, qd], axis=-1)
        step = np.finfo(np.float64).eps ** (1.0 / 3.0) * np.maximum(1.0, np.abs(x))  # (..., 2n)
        delta = step[..., None, :] * np.eye(2 * n)  # (..., 2n, 2n): row j perturbs x_j
        xp = x[..., None, :] + delta
        xm = x[..., None, :] - delta
        tau_b = None if tau is None else np.broadcast_to(tau[..., None, :], xp.shape[:-1] + (n,))
        ap = self._forward(xp[..., :n], xp[..., n:], tau_b)
        am = self._forward(xm[..., :n], xm[..., n:], tau_b)
        # (x+h) - (x-h) is not exactly 2h in floating point: divide by the true difference.
        h2 = np.diagonal(xp - xm, axis1=-2, axis2=-1)  # (..., 2n)
        jac_t = (ap - am) / h2[..., :, None]  # (..., 2n, n)
        return np.swapaxes(jac_t, -1, -2)

    def _check_sample_size(self, n: Any) -> int:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer; got {n!r}")
        return int(n)
