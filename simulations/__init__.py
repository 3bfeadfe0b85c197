"""Ground-truth mechanical systems in pure numpy (no TensorFlow, no ``lnn``).

Every system is a frozen dataclass of its physical parameters with the
``lnn.MechanicalSystem`` interface, vectorised over any leading batch shape:
``mass_matrix``, ``potential_energy``, ``kinetic_energy``, ``energy``,
``acceleration``, ``inverse_dynamics``, ``acceleration_jacobian``,
``positions``, ``sample_state`` and ``parameters``. :class:`PlanarArm` and
:class:`URDFRobot` accept joint friction (:class:`Friction`: viscous, smooth
Coulomb and a torque offset, the model of ``lnn``'s friction terms and of
``lnn.baseline.least_squares``; or :class:`StribeckFriction`: Stribeck,
asymmetric and position-dependent, a ground truth outside that family);
:func:`panda` accepts a :class:`Payload`.

:data:`SYSTEMS` maps each built-in name to a factory;
:func:`make_system` builds one by name with keyword parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulations.base import State
from simulations.cart_pole import CartPole
from simulations.friction import FRICTION_VELOCITY, Friction, StribeckFriction
from simulations.pendulum import DoublePendulum, NPendulum, Pendulum
from simulations.planar_arm import PlanarArm
from simulations.urdf import Payload, URDFRobot, example_robot_data_path, panda, undefined_links

__all__ = [
    "State",
    "Friction",
    "StribeckFriction",
    "FRICTION_VELOCITY",
    "Payload",
    "undefined_links",
    "Pendulum",
    "DoublePendulum",
    "NPendulum",
    "CartPole",
    "PlanarArm",
    "URDFRobot",
    "panda",
    "example_robot_data_path",
    "SYSTEMS",
    "make_system",
]

#: Built-in systems: name -> factory accepting the system's parameters as keywords.
SYSTEMS: dict[str, Callable[..., Any]] = {
    Pendulum.name: Pendulum,
    DoublePendulum.name: DoublePendulum,
    NPendulum.name: NPendulum,
    CartPole.name: CartPole,
    PlanarArm.name: PlanarArm,
    "panda": panda,
}


def make_system(name: str, **params: Any) -> Any:
    """Build a built-in system by name.

    Parameters
    ----------
    name : str
        One of ``SYSTEMS`` (e.g. ``"double-pendulum"``).
    **params
        The system's physical parameters, as returned by its ``parameters()``.

    Returns
    -------
    system
        A frozen dataclass satisfying ``lnn.MechanicalSystem``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    TypeError
        For a parameter that the system does not have.
    """
    try:
        factory = SYSTEMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown system {name!r}; known systems: {', '.join(SYSTEMS)}") from None
    return factory(**params)
