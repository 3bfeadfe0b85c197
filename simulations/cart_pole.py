"""The cart-pole: a cart on a horizontal rail carrying a uniform rod on a free pivot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simulations.base import MechanicalBase, State, as_rng, check_nonnegative, check_positive

__all__ = ["CartPole"]


@dataclass(frozen=True)
class CartPole(MechanicalBase):
    """A cart of mass ``cart_mass`` on a frictionless rail with a pole on a pivot.

    ``q = (x, theta)``: the cart position in m and the pole angle from the
    **downward** vertical (``theta = pi`` is upright), counter-clockwise
    positive, so the pole tip is at ``(x + l sin(theta), -l cos(theta))``.
    The pole is a **uniform rod** of mass ``pole_mass`` and length
    ``pole_length`` (centre of mass at ``a = l/2``, inertia ``m l^2 / 12``
    about its centre). With ``J = m a^2 + m l^2 / 12 = m l^2 / 3``::

        M = [[M_c + m,          m a cos(theta)],
             [m a cos(theta),   J             ]]
        b = [-m a sin(theta) thetad^2,  m g a sin(theta)]

    ``tau[..., 0]`` is the horizontal force on the cart in N (the control
    input); ``tau[..., 1]`` is a torque at the pivot in N m (zero for the
    classic problem).

    Parameters
    ----------
    cart_mass : float
        Mass of the cart in kg (> 0).
    pole_mass : float
        Mass of the pole in kg (> 0).
    pole_length : float
        Full length of the pole in m (> 0).
    g : float
        Gravitational acceleration in m/s^2 (>= 0).

    Notes
    -----
    ``positions`` returns the cart (pivot) and the pole tip, shape ``(..., 2, 2)``.
    """

    cart_mass: float = 1.0
    pole_mass: float = 0.1
    pole_length: float = 1.0
    g: float = 9.81

    name = "cart-pole"
    n_dof = 2
    angular = (False, True)

    def __post_init__(self) -> None:
        for key in ("cart_mass", "pole_mass", "pole_length"):
            object.__setattr__(self, key, check_positive(key, getattr(self, key)))
        object.__setattr__(self, "g", check_nonnegative("g", self.g))

    @property
    def _half(self) -> float:
        return 0.5 * self.pole_length

    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:
        m, a = self.pole_mass, self._half
        off = m * a * np.cos(q[..., 1])
        m11 = np.full_like(off, self.cart_mass + m)
        m22 = np.full_like(off, m * self.pole_length**2 / 3.0)
        return np.stack([np.stack([m11, off], -1), np.stack([off, m22], -1)], -2)

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        m, a = self.pole_mass, self._half
        s = np.sin(q[..., 1])
        return np.stack([-m * a * s * qd[..., 1] ** 2, m * self.g * a * s], axis=-1)

    def _potential(self, q: np.ndarray) -> np.ndarray:
        return -self.pole_mass * self.g * self._half * np.cos(q[..., 1])

    def _positions(self, q: np.ndarray) -> np.ndarray:
        x, theta = q[..., 0], q[..., 1]
        cart = np.stack([x, np.zeros_like(x)], axis=-1)
        tip = np.stack([x + self.pole_length * np.sin(theta), -self.pole_length * np.cos(theta)], axis=-1)
        return np.stack([cart, tip], axis=-2)

    def sample_state(
        self, n: int, *, rng: Any = None, position_range: float = 1.0, velocity_scale: float = 1.0
    ) -> State:
        """Sample ``n`` states around the rail's centre with any pole angle.

        ``x`` is uniform in ``[-position_range, position_range]`` m, ``theta``
        uniform in ``[-pi, pi)``, and both rates normal with standard
        deviation ``velocity_scale`` (m/s and rad/s).

        Parameters
        ----------
        n : int
            Number of states.
        rng : numpy.random.Generator or int, optional
            Random generator or seed.
        position_range : float
            Half-width of the cart's sampling interval in m (>= 0).
        velocity_scale : float
            Standard deviation of the velocities (>= 0).

        Returns
        -------
        State
            ``q`` and ``qd`` of shape ``(n, 2)``.
        """
        n = self._check_sample_size(n)
        half_width = check_nonnegative("position_range", position_range)
        scale = check_nonnegative("velocity_scale", velocity_scale)
        generator = as_rng(rng)
        x = generator.uniform(-half_width, half_width, size=n)
        theta = generator.uniform(-np.pi, np.pi, size=n)
        q = np.stack([x, theta], axis=-1)
        qd = scale * generator.standard_normal(size=(n, 2))
        return State(q=q, qd=qd)
