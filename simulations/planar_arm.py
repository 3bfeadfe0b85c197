"""An n-link planar robot arm of uniform rods in a vertical plane."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulations.base import (
    MechanicalBase,
    State,
    as_rng,
    check_nonnegative,
    check_positive_sequence,
)
from simulations.friction import FrictionModel
from simulations.pendulum import chain_bias, chain_mass_matrix, chain_points, chain_potential

__all__ = ["PlanarArm"]


def _rcumsum(x: np.ndarray, axis: int) -> np.ndarray:
    """Reverse cumulative sum: ``out[k] = sum_{j >= k} x[j]`` along ``axis``."""
    return np.flip(np.cumsum(np.flip(x, axis=axis), axis=axis), axis=axis)


@dataclass(frozen=True)
class PlanarArm(MechanicalBase):
    """An n-link planar arm of uniform rods with motors at the joints.

    Joint angles ``q`` are **relative** to the previous link, the first one
    measured from the downward vertical (``q = 0`` hangs straight down);
    ``tau`` are the motor torques at the joints; ``damping`` adds viscous
    joint friction ``-damping * qd`` and ``friction`` per-joint friction
    torques (:class:`simulations.Friction`: viscous, Coulomb and offset, or
    :class:`simulations.StribeckFriction`). Link ``i`` is a uniform rod of mass
    ``m_i`` and length ``l_i`` (inertia ``m_i l_i^2 / 12`` about its centre).

    The dynamics are in closed form. In absolute link angles
    ``phi = S q`` (``S`` the lower-triangular matrix of ones) the arm is a
    planar chain with ``M_phi[j, k] = A_jk cos(phi_j - phi_k)`` and
    ``V = -g sum_j b_j cos(phi_j)``, where, with ``r_ij`` the lever of link
    ``j`` in the centre of link ``i`` (``l_j`` for ``j < i``, ``l_i / 2``
    for ``j = i``, 0 otherwise)::

        A_jk = sum_i m_i r_ij r_ik + delta_jk m_j l_j^2 / 12,   b_j = sum_i m_i r_ij.

    In joint coordinates ``M = S^T M_phi S`` and the bias force is
    ``S^T b_phi(phi, S qd) + damping qd``.

    Parameters
    ----------
    masses : sequence of float, length ``n``
        Link masses in kg (> 0), from the base outwards.
    lengths : sequence of float, length ``n``
        Link lengths in m (> 0).
    g : float
        Gravitational acceleration in m/s^2 (>= 0).
    damping : float
        Viscous joint friction coefficient in N m s/rad (>= 0), the same for every joint.
    friction : Friction, StribeckFriction or dict, optional
        Per-joint friction ``tau_f(q, qd) + o`` that the motors must overcome, on
        top of ``damping`` (a dict is the model's ``parameters()``, as stored in
        datasets). ``energy`` ignores it.

    Notes
    -----
    ``positions`` returns the base and the end of each link (the last one is
    the end effector), shape ``(..., n + 1, 2)``.
    """

    masses: tuple[float, ...] = (1.0, 1.0)
    lengths: tuple[float, ...] = (1.0, 1.0)
    g: float = 9.81
    damping: float = 0.0
    friction: FrictionModel | None = None
    _a: np.ndarray = field(init=False, repr=False, compare=False)
    _b: np.ndarray = field(init=False, repr=False, compare=False)

    name = "planar-arm"

    def __post_init__(self) -> None:
        masses = check_positive_sequence("masses", self.masses)
        lengths = check_positive_sequence("lengths", self.lengths)
        if len(masses) != len(lengths):
            raise ValueError(
                f"masses and lengths must have the same length; got {len(masses)} masses "
                f"{self.masses!r} and {len(lengths)} lengths {self.lengths!r}"
            )
        object.__setattr__(self, "masses", masses)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "g", check_nonnegative("g", self.g))
        object.__setattr__(self, "damping", check_nonnegative("damping", self.damping))
        self._check_friction()
        if self.friction is not None:
            self.friction.check_joints(len(masses), self.name)
        m = np.array(masses)
        l = np.array(lengths)  # noqa: E741
        n = len(m)
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        lever = np.where(j < i, l[j], np.where(j == i, 0.5 * l[j], 0.0))  # r_ij
        a = np.einsum("i,ij,ik->jk", m, lever, lever) + np.diag(m * l**2 / 12.0)
        object.__setattr__(self, "_a", a)
        object.__setattr__(self, "_b", m @ lever)

    @property
    def n_dof(self) -> int:
        """Number of links and joints ``n``."""
        return len(self.masses)

    @property
    def angular(self) -> tuple[bool, ...]:
        """All coordinates are joint angles."""
        return (True,) * self.n_dof

    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:
        phi = np.cumsum(q, axis=-1)
        mass = _rcumsum(_rcumsum(chain_mass_matrix(self._a, phi), -1), -2)
        return 0.5 * (mass + np.swapaxes(mass, -1, -2))  # exactly symmetric despite summation order

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        phi = np.cumsum(q, axis=-1)
        phid = np.cumsum(qd, axis=-1)
        bias = _rcumsum(chain_bias(self._a, self._b, self.g, phi, phid), -1)
        if self.damping:
            bias = bias + self.damping * qd
        return bias

    def _potential(self, q: np.ndarray) -> np.ndarray:
        return chain_potential(self._b, self.g, np.cumsum(q, axis=-1))

    def _positions(self, q: np.ndarray) -> np.ndarray:
        return chain_points(np.array(self.lengths), np.cumsum(q, axis=-1))

    def sample_state(self, n: int, *, rng: Any = None, velocity_scale: float = 1.0) -> State:
        """Sample ``n`` states spread over the arm's workspace.

        The first joint is uniform in ``[-pi, pi)`` (the whole circle), the
        others uniform in ``[-2 pi / 3, 2 pi / 3]`` (the arm does not fold onto
        itself); joint rates are normal with standard deviation
        ``velocity_scale`` rad/s.

        Parameters
        ----------
        n : int
            Number of states.
        rng : numpy.random.Generator or int, optional
            Random generator or seed.
        velocity_scale : float
            Standard deviation of the joint rates in rad/s (>= 0).

        Returns
        -------
        State
            ``q`` and ``qd`` of shape ``(n, n_dof)``.
        """
        n = self._check_sample_size(n)
        scale = check_nonnegative("velocity_scale", velocity_scale)
        generator = as_rng(rng)
        limits = np.full(self.n_dof, 2.0 * np.pi / 3.0)
        q = generator.uniform(-limits, limits, size=(n, self.n_dof))
        q[:, 0] = generator.uniform(-np.pi, np.pi, size=n)
        qd = scale * generator.standard_normal(size=(n, self.n_dof))
        return State(q=q, qd=qd)
