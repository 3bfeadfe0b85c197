"""Pendulums: single, double and n-link chains of point masses on massless rods.

Angles are measured from the downward vertical (``q = 0`` hangs at rest),
counter-clockwise positive; Cartesian positions have ``x`` to the right and
``y`` up with the pivot at the origin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulations.base import (
    MechanicalBase,
    State,
    as_rng,
    check_nonnegative,
    check_positive,
    check_positive_sequence,
)

__all__ = ["Pendulum", "DoublePendulum", "NPendulum"]


def _sample_angles(system: MechanicalBase, n: Any, rng: Any, velocity_scale: float) -> State:
    """Angles uniform in ``[-pi, pi)``, velocities normal with std ``velocity_scale``."""
    n = system._check_sample_size(n)
    scale = check_nonnegative("velocity_scale", velocity_scale)
    generator = as_rng(rng)
    q = generator.uniform(-np.pi, np.pi, size=(n, system.n_dof))
    qd = scale * generator.standard_normal(size=(n, system.n_dof))
    return State(q=q, qd=qd)


# ------------------------------------------------------------------------------------------
# Chains in absolute angles phi: M_jk = A_jk cos(phi_j - phi_k), V = -g sum_j b_j cos(phi_j).
# Shared by NPendulum (point masses) and PlanarArm (uniform rods, after a change of variables).
# ------------------------------------------------------------------------------------------
def chain_mass_matrix(a: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Mass matrix ``A_jk cos(phi_j - phi_k)`` of a planar chain in absolute angles.

    Parameters
    ----------
    a : ndarray, shape ``(n, n)``
        Constant symmetric inertia coefficients of the chain.
    phi : ndarray, shape ``(..., n)``
        Absolute link angles from the downward vertical.

    Returns
    -------
    ndarray, shape ``(..., n, n)``
    """
    return a * np.cos(phi[..., :, None] - phi[..., None, :])


def chain_bias(a: np.ndarray, b: np.ndarray, g: float, phi: np.ndarray, phid: np.ndarray) -> np.ndarray:
    """Centrifugal and gravity forces of a planar chain in absolute angles.

    ``c_j = sum_k A_jk sin(phi_j - phi_k) phid_k**2 + g b_j sin(phi_j)``.

    Parameters
    ----------
    a : ndarray, shape ``(n, n)``
        Inertia coefficients (see :func:`chain_mass_matrix`).
    b : ndarray, shape ``(n,)``
        Gravity coefficients: ``V = -g sum_j b_j cos(phi_j)``.
    g : float
        Gravitational acceleration.
    phi, phid : ndarray, shape ``(..., n)``
        Absolute angles and their rates.

    Returns
    -------
    ndarray, shape ``(..., n)``
    """
    s = a * np.sin(phi[..., :, None] - phi[..., None, :])
    return np.einsum("...jk,...k->...j", s, phid * phid) + g * b * np.sin(phi)


def chain_potential(b: np.ndarray, g: float, phi: np.ndarray) -> np.ndarray:
    """Gravitational potential ``-g sum_j b_j cos(phi_j)`` of a planar chain.

    Parameters
    ----------
    b : ndarray, shape ``(n,)``
    g : float
    phi : ndarray, shape ``(..., n)``

    Returns
    -------
    ndarray, shape ``(...)``
    """
    return -g * np.cos(phi) @ b


def chain_points(lengths: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Pivot and link ends of a planar chain.

    Parameters
    ----------
    lengths : ndarray, shape ``(n,)``
    phi : ndarray, shape ``(..., n)``
        Absolute angles from the downward vertical.

    Returns
    -------
    ndarray, shape ``(..., n + 1, 2)``
        The pivot ``(0, 0)`` first, then the end of each link.
    """
    steps = lengths[:, None] * np.stack([np.sin(phi), -np.cos(phi)], axis=-1)  # (..., n, 2)
    ends = np.cumsum(steps, axis=-2)
    return np.concatenate([np.zeros_like(ends[..., :1, :]), ends], axis=-2)


# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pendulum(MechanicalBase):
    """A point mass on a massless rod with optional viscous damping at the pivot.

    ``m l^2 qdd + m g l sin(q) + damping qd = tau``, ``q`` from the downward vertical.

    Parameters
    ----------
    m : float
        Mass of the bob in kg (> 0).
    l : float
        Rod length in m (> 0).
    g : float
        Gravitational acceleration in m/s^2 (>= 0).
    damping : float
        Viscous friction coefficient in N m s/rad (>= 0).

    Notes
    -----
    ``q``, ``qd``, ``tau`` have shape ``(..., 1)``; ``positions`` returns the
    pivot and the bob, shape ``(..., 2, 2)``.
    """

    m: float = 1.0
    l: float = 1.0  # noqa: E741 - the textbook name
    g: float = 9.81
    damping: float = 0.0

    name = "pendulum"
    n_dof = 1
    angular = (True,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "m", check_positive("m", self.m))
        object.__setattr__(self, "l", check_positive("l", self.l))
        object.__setattr__(self, "g", check_nonnegative("g", self.g))
        object.__setattr__(self, "damping", check_nonnegative("damping", self.damping))

    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:
        return np.full(q.shape[:-1] + (1, 1), self.m * self.l**2)

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return self.m * self.g * self.l * np.sin(q) + self.damping * qd

    def _potential(self, q: np.ndarray) -> np.ndarray:
        return -self.m * self.g * self.l * np.cos(q[..., 0])

    def _positions(self, q: np.ndarray) -> np.ndarray:
        return chain_points(np.array([self.l]), q)

    def _acceleration(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        rhs = -self._bias(q, qd) if tau is None else tau - self._bias(q, qd)
        return rhs / (self.m * self.l**2)

    def acceleration_jacobian(self, q: Any, qd: Any, tau: Any = None) -> np.ndarray:
        """Exact Jacobian ``d qdd / d [q, qd] = [-g cos(q) / l, -damping / (m l^2)]``.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., 1)``
        tau : array_like, shape ``(..., 1)``, optional
            Does not enter the Jacobian (validated only).

        Returns
        -------
        ndarray, shape ``(..., 1, 2)``
        """
        q, qd, _ = self._check_many(q=q, qd=qd, tau=tau)
        dq = -self.g / self.l * np.cos(q)
        dqd = np.full_like(qd, -self.damping / (self.m * self.l**2))
        return np.stack([dq, dqd], axis=-1)

    def sample_state(self, n: int, *, rng: Any = None, velocity_scale: float = 1.0) -> State:
        """Sample ``n`` states: angle uniform in ``[-pi, pi)``, rate normal (std ``velocity_scale`` rad/s).

        Parameters
        ----------
        n : int
            Number of states.
        rng : numpy.random.Generator or int, optional
            Random generator or seed.
        velocity_scale : float
            Standard deviation of the angular velocity in rad/s.

        Returns
        -------
        State
            ``q`` and ``qd`` of shape ``(n, 1)``.
        """
        return _sample_angles(self, n, rng, velocity_scale)


@dataclass(frozen=True)
class DoublePendulum(MechanicalBase):
    """Two point masses on massless rods; ``q = (theta1, theta2)`` absolute angles.

    Both angles are measured from the downward vertical (the convention of
    the LNN literature); ``tau`` is the generalized force on those
    coordinates. The equations of motion are written out in closed form::

        M = [[(m1 + m2) l1^2,            m2 l1 l2 cos(t1 - t2)],
             [m2 l1 l2 cos(t1 - t2),     m2 l2^2             ]]
        b = [ m2 l1 l2 sin(t1 - t2) t2d^2 + (m1 + m2) g l1 sin(t1),
             -m2 l1 l2 sin(t1 - t2) t1d^2 + m2 g l2 sin(t2)]

    Parameters
    ----------
    m1, m2 : float
        Masses of the two bobs in kg (> 0).
    l1, l2 : float
        Rod lengths in m (> 0).
    g : float
        Gravitational acceleration in m/s^2 (>= 0).

    Notes
    -----
    ``positions`` returns the pivot and the two bobs, shape ``(..., 3, 2)``.
    """

    m1: float = 1.0
    m2: float = 1.0
    l1: float = 1.0
    l2: float = 1.0
    g: float = 9.81

    name = "double-pendulum"
    n_dof = 2
    angular = (True, True)

    def __post_init__(self) -> None:
        for key in ("m1", "m2", "l1", "l2"):
            object.__setattr__(self, key, check_positive(key, getattr(self, key)))
        object.__setattr__(self, "g", check_nonnegative("g", self.g))

    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:
        m1, m2, l1, l2 = self.m1, self.m2, self.l1, self.l2
        mass = np.empty(q.shape + (2,))
        mass[..., 0, 0] = (m1 + m2) * l1 * l1
        mass[..., 0, 1] = mass[..., 1, 0] = m2 * l1 * l2 * np.cos(q[..., 0] - q[..., 1])
        mass[..., 1, 1] = m2 * l2 * l2
        return mass

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        m1, m2, l1, l2, g = self.m1, self.m2, self.l1, self.l2, self.g
        k = m2 * l1 * l2 * np.sin(q[..., 0] - q[..., 1])
        bias = np.empty(q.shape)
        bias[..., 0] = k * qd[..., 1] ** 2 + (m1 + m2) * g * l1 * np.sin(q[..., 0])
        bias[..., 1] = -k * qd[..., 0] ** 2 + m2 * g * l2 * np.sin(q[..., 1])
        return bias

    def _acceleration(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        # Closed-form 2x2 solve (Cramer's rule): the integrator's hot path.
        m1, m2, l1, l2, g = self.m1, self.m2, self.l1, self.l2, self.g
        delta = q[..., 0] - q[..., 1]
        k = m2 * l1 * l2
        b = k * np.cos(delta)
        ks = k * np.sin(delta)
        a, d = (m1 + m2) * l1 * l1, m2 * l2 * l2
        r1 = -ks * qd[..., 1] ** 2 - (m1 + m2) * g * l1 * np.sin(q[..., 0])
        r2 = ks * qd[..., 0] ** 2 - m2 * g * l2 * np.sin(q[..., 1])
        if tau is not None:
            r1 = r1 + tau[..., 0]
            r2 = r2 + tau[..., 1]
        det = a * d - b * b
        qdd = np.empty(q.shape)
        qdd[..., 0] = (d * r1 - b * r2) / det
        qdd[..., 1] = (a * r2 - b * r1) / det
        return qdd

    def _potential(self, q: np.ndarray) -> np.ndarray:
        m1, m2, l1, l2, g = self.m1, self.m2, self.l1, self.l2, self.g
        return -(m1 + m2) * g * l1 * np.cos(q[..., 0]) - m2 * g * l2 * np.cos(q[..., 1])

    def _positions(self, q: np.ndarray) -> np.ndarray:
        return chain_points(np.array([self.l1, self.l2]), q)

    def _acceleration(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        # Closed-form 2x2 solve (Cramer's rule): the integrator's hot path.
        mass = self._mass_matrix(q)
        rhs = -self._bias(q, qd) if tau is None else tau - self._bias(q, qd)
        a, b, d = mass[..., 0, 0], mass[..., 0, 1], mass[..., 1, 1]
        det = a * d - b * b
        qdd1 = (d * rhs[..., 0] - b * rhs[..., 1]) / det
        qdd2 = (a * rhs[..., 1] - b * rhs[..., 0]) / det
        return np.stack([qdd1, qdd2], axis=-1)

    def sample_state(self, n: int, *, rng: Any = None, velocity_scale: float = 1.0) -> State:
        """Sample ``n`` states: angles uniform in ``[-pi, pi)``, rates normal (std ``velocity_scale`` rad/s).

        Parameters
        ----------
        n : int
            Number of states.
        rng : numpy.random.Generator or int, optional
            Random generator or seed.
        velocity_scale : float
            Standard deviation of the angular velocities in rad/s.

        Returns
        -------
        State
            ``q`` and ``qd`` of shape ``(n, 2)``.
        """
        return _sample_angles(self, n, rng, velocity_scale)


@dataclass(frozen=True)
class NPendulum(MechanicalBase):
    """A chain of ``n >= 2`` point masses on massless rods, absolute angles.

    With ``mu_jk = sum_{i >= max(j, k)} m_i`` (the mass hanging below both
    rods ``j`` and ``k``)::

        M_jk = mu_jk l_j l_k cos(q_j - q_k)
        b_j  = sum_k mu_jk l_j l_k sin(q_j - q_k) qd_k^2 + g mu_jj l_j sin(q_j)
        V    = -g sum_j mu_jj l_j cos(q_j)

    For ``n = 2`` these are the equations of :class:`DoublePendulum`.

    Parameters
    ----------
    masses : sequence of float, length ``n``
        Bob masses in kg (> 0), from the pivot outwards.
    lengths : sequence of float, length ``n``
        Rod lengths in m (> 0).
    g : float
        Gravitational acceleration in m/s^2 (>= 0).

    Notes
    -----
    ``positions`` returns the pivot and the ``n`` bobs, shape ``(..., n + 1, 2)``.
    """

    masses: tuple[float, ...] = (1.0, 1.0, 1.0)
    lengths: tuple[float, ...] = (1.0, 1.0, 1.0)
    g: float = 9.81
    _a: np.ndarray = field(init=False, repr=False, compare=False)
    _b: np.ndarray = field(init=False, repr=False, compare=False)

    name = "n-pendulum"

    def __post_init__(self) -> None:
        masses = check_positive_sequence("masses", self.masses, min_length=2)
        lengths = check_positive_sequence("lengths", self.lengths, min_length=2)
        if len(masses) != len(lengths):
            raise ValueError(
                f"masses and lengths must have the same length; got {len(masses)} masses "
                f"{self.masses!r} and {len(lengths)} lengths {self.lengths!r}"
            )
        object.__setattr__(self, "masses", masses)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "g", check_nonnegative("g", self.g))
        m = np.array(masses)
        l = np.array(lengths)  # noqa: E741
        below = np.cumsum(m[::-1])[::-1]  # below[j] = sum_{i >= j} m_i
        n = len(m)
        idx = np.arange(n)
        mu = below[np.maximum(idx[:, None], idx[None, :])]
        object.__setattr__(self, "_a", mu * l[:, None] * l[None, :])
        object.__setattr__(self, "_b", below * l)

    @property
    def n_dof(self) -> int:
        """Number of links ``n``."""
        return len(self.masses)

    @property
    def angular(self) -> tuple[bool, ...]:
        """All coordinates are angles."""
        return (True,) * self.n_dof

    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:
        return chain_mass_matrix(self._a, q)

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        return chain_bias(self._a, self._b, self.g, q, qd)

    def _potential(self, q: np.ndarray) -> np.ndarray:
        return chain_potential(self._b, self.g, q)

    def _positions(self, q: np.ndarray) -> np.ndarray:
        return chain_points(np.array(self.lengths), q)

    def sample_state(self, n: int, *, rng: Any = None, velocity_scale: float = 1.0) -> State:
        """Sample ``n`` states: angles uniform in ``[-pi, pi)``, rates normal (std ``velocity_scale`` rad/s).

        Parameters
        ----------
        n : int
            Number of states.
        rng : numpy.random.Generator or int, optional
            Random generator or seed.
        velocity_scale : float
            Standard deviation of the angular velocities in rad/s.

        Returns
        -------
        State
            ``q`` and ``qd`` of shape ``(n, n_dof)``.
        """
        return _sample_angles(self, n, rng, velocity_scale)
