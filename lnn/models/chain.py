"""Kinematic chains of rigid bodies: the description a rigid-body prior is built from.

A :class:`RigidBodyChain` lists, for each joint ``i`` (in the order of
``q``), its parent joint, its placement in the parent's frame, its axis,
whether it is prismatic, and the inertial parameters of the body it moves.
It is built from a Pinocchio model (:meth:`RigidBodyChain.from_pinocchio`,
e.g. of a ``simulations.URDFRobot``), from a built-in planar arm
(:meth:`RigidBodyChain.from_system`), or by hand, and is serialised in a
model's config (:meth:`to_dict`).

Inertial parameters are the standard ten per body, at the joint frame's origin
and in its axes (Pinocchio's ``Inertia.toDynamicParameters`` order)::

    pi = [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]

with ``I`` the rotational inertia about the origin. A body is physical when
its pseudo-inertia ``J = [[Sigma, h], [h^T, m]]`` (``Sigma = tr(I)/2 1 - I``,
``h = m c``) is positive definite (Wensing, Kim & Slotine 2017); the
log-Cholesky coordinates ``theta`` of :func:`log_cholesky` (Rucker & Wensing
2022) map every vector of ``R^10`` to a physical body and back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from lnn.inertia import (
    log_cholesky_to_parameters,
    parameters_of_pseudo_inertia,
    parameters_to_log_cholesky,
    pseudo_inertia,
)

__all__ = ["RigidBodyChain", "from_log_cholesky", "log_cholesky", "pseudo_inertia", "standard_parameters"]


def standard_parameters(J) -> np.ndarray:
    """The standard parameters ``pi (..., 10)`` of a pseudo-inertia ``J (..., 4, 4)``."""
    return parameters_of_pseudo_inertia(J)


def log_cholesky(pi, *, floor: float = 1e-15) -> np.ndarray:
    """Log-Cholesky coordinates ``theta (..., 10)`` of physical bodies ``pi (..., 10)``.

    :func:`lnn.inertia.parameters_to_log_cholesky`, with ``floor`` small
    enough that a body with the true parameters gives the true dynamics to
    rounding (a degenerate body, a thin rod or a point mass, has its
    pseudo-inertia's zero eigenvalues raised to ``floor`` times the largest);
    a body without mass (a URDF's empty link) becomes a point of ``1e-9``
    times the heaviest body's mass at its frame's origin.

    Raises
    ------
    ValueError
        If a body has a negative mass, naming it.
    """
    pi = np.array(pi, dtype=np.float64)
    flat = pi.reshape(-1, 10)
    if np.any(flat[:, 0] < 0):
        raise ValueError(f"body {int(np.argmax(flat[:, 0] < 0))} is not physical: masses {flat[:, 0]}")
    empty = flat[:, 0] <= 0
    if np.any(empty):
        flat[empty] = 0.0
        flat[empty, 0] = 1e-9 * max(float(flat[:, 0].max()), 1.0)
    return parameters_to_log_cholesky(flat, floor=floor).reshape(pi.shape)


def from_log_cholesky(theta) -> np.ndarray:
    """The pseudo-inertia ``J = U U^T (..., 4, 4)`` of log-Cholesky coordinates ``theta (..., 10)``."""
    return pseudo_inertia(log_cholesky_to_parameters(theta))


@dataclasses.dataclass(frozen=True, eq=False)
class RigidBodyChain:
    """A tree of ``n`` one-degree-of-freedom joints carrying rigid bodies.

    Attributes
    ----------
    parents : tuple of int, length ``n``
        Parent joint of each joint (``-1``: the fixed base); parents come first.
    rotations : ndarray, shape ``(n, 3, 3)``
        Orientation of each joint's frame in its parent's frame at ``q = 0``.
    translations : ndarray, shape ``(n, 3)``
        Origin of each joint's frame in its parent's frame.
    axes : ndarray, shape ``(n, 3)``
        Unit joint axis in the joint's frame.
    prismatic : tuple of bool, length ``n``
        True for a prismatic joint (``q`` in metres), False for a revolute one.
    inertias : ndarray, shape ``(n, 10)``
        Standard inertial parameters of the body each joint moves (module docstring).
    armature : ndarray, shape ``(n,)``
        Reflected rotor inertia of each joint's motor (``+ armature_j`` on ``M_jj``).
    gravity : ndarray, shape ``(3,)``
        Gravitational acceleration in the base frame (m/s^2).
    names : tuple of str, length ``n``
        Joint names.
    """

    parents: tuple
    rotations: np.ndarray
    translations: np.ndarray
    axes: np.ndarray
    prismatic: tuple
    inertias: np.ndarray
    armature: np.ndarray
    gravity: np.ndarray
    names: tuple = ()

    def __post_init__(self) -> None:
        parents = tuple(int(p) for p in self.parents)
        n = len(parents)
        if n < 1:
            raise ValueError("a rigid-body chain needs at least one joint")
        for i, p in enumerate(parents):
            if not -1 <= p < i:
                raise ValueError(f"joint {i}'s parent must be -1 (the base) or an earlier joint; got {p}")
        shapes = {
            "rotations": (n, 3, 3),
            "translations": (n, 3),
            "axes": (n, 3),
            "inertias": (n, 10),
            "armature": (n,),
            "gravity": (3,),
        }
        for name, shape in shapes.items():
            value = np.array(getattr(self, name), dtype=np.float64)
            if value.shape != shape or not np.isfinite(value).all():
                raise ValueError(f"RigidBodyChain.{name} must be finite with shape {shape}; got shape {value.shape}")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        axes = self.axes / np.linalg.norm(self.axes, axis=-1, keepdims=True)
        axes.setflags(write=False)
        object.__setattr__(self, "axes", axes)
        prismatic = tuple(bool(p) for p in self.prismatic)
        if len(prismatic) != n:
            raise ValueError(f"RigidBodyChain.prismatic must have {n} entries; got {self.prismatic!r}")
        if np.any(self.armature < 0):
            raise ValueError(f"RigidBodyChain.armature must be >= 0; got {self.armature}")
        names = tuple(str(s) for s in self.names) or tuple(f"joint{i + 1}" for i in range(n))
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "prismatic", prismatic)
        object.__setattr__(self, "names", names)

    @property
    def n_dof(self) -> int:
        """Number of joints ``n``."""
        return len(self.parents)

    @property
    def angular(self) -> tuple[bool, ...]:
        """True for the revolute joints."""
        return tuple(not p for p in self.prismatic)

    def with_parameters(self, *, inertias=None, armature=None) -> RigidBodyChain:
        """A copy with other inertial parameters ``(n, 10)`` and/or armature ``(n,)``."""
        return dataclasses.replace(
            self,
            inertias=self.inertias if inertias is None else inertias,
            armature=self.armature if armature is None else armature,
        )

    # -- serialisation -------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-serialisable fields (lists), for a model's config."""
        return {
            f.name: (
                getattr(self, f.name).tolist()
                if isinstance(getattr(self, f.name), np.ndarray)
                else list(getattr(self, f.name))
            )
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_dict(cls, data: dict) -> RigidBodyChain:
        """Rebuild from :meth:`to_dict`."""
        return cls(**{key: data[key] for key in (f.name for f in dataclasses.fields(cls)) if key in data})

    # -- constructors -------------------------------------------------------------
    @classmethod
    def from_pinocchio(cls, model) -> RigidBodyChain:
        """The chain of a Pinocchio ``Model`` of one-degree-of-freedom joints.

        Reads ``parents``, ``jointPlacements``, the joint types (``RX/RY/RZ``,
        ``RevoluteUnaligned``, ``PX/PY/PZ``, ``PrismaticUnaligned``),
        ``inertias``, ``armature`` and ``gravity``.

        Raises
        ------
        ValueError
            For a joint with more than one degree of freedom, naming it.
        """
        parents, rotations, translations, axes, prismatic, inertias = [], [], [], [], [], []
        for i in range(1, model.njoints):
            joint, name = model.joints[i], model.names[i]
            if joint.nq != 1 or joint.nv != 1:
                raise ValueError(
                    f"rigid-body chains take one-degree-of-freedom joints; joint {name!r} "
                    f"is {joint.shortname()} (nq={joint.nq}, nv={joint.nv})"
                )
            joint_type = joint.shortname()
            parents.append(int(model.parents[i]) - 1)
            placement = model.jointPlacements[i]
            rotations.append(np.array(placement.rotation))
            translations.append(np.array(placement.translation))
            axes.append(_axis(joint, joint_type, name))
            prismatic.append(joint_type.startswith("JointModelP"))
            inertias.append(np.array(model.inertias[i].toDynamicParameters()))
        return cls(
            parents=parents,
            rotations=rotations,
            translations=translations,
            axes=axes,
            prismatic=prismatic,
            inertias=inertias,
            armature=np.array(model.armature),
            gravity=np.array(model.gravity.linear),
            names=tuple(model.names[1:]),
        )

    @classmethod
    def from_system(cls, system: Any) -> RigidBodyChain:
        """The chain of a ground-truth system: a URDF robot or a planar arm.

        Parameters
        ----------
        system : simulations.URDFRobot, simulations.PlanarArm or RigidBodyChain
            A URDF robot gives its Pinocchio model (:meth:`from_pinocchio`); a
            planar arm of uniform rods (``masses``, ``lengths``, ``g``) becomes
            revolute joints about ``z`` with the links along ``-y`` and gravity
            along ``-y`` (``q = 0`` hangs down).

        Raises
        ------
        TypeError
            For a system that is neither.
        """
        if isinstance(system, cls):
            return system
        model = getattr(system, "pinocchio_model", None)
        if model is None and hasattr(system, "_model") and hasattr(system, "path"):
            model = system._model()[1]
        if model is not None:
            return cls.from_pinocchio(model)
        if all(hasattr(system, a) for a in ("masses", "lengths", "g")):
            return cls._planar_arm(np.asarray(system.masses, float), np.asarray(system.lengths, float), float(system.g))
        raise TypeError(
            "a rigid-body prior must be a RigidBodyChain, a URDF robot (with a Pinocchio "
            f"model) or a planar arm (masses, lengths, g); got {type(system).__name__}"
        )

    @classmethod
    def _planar_arm(cls, masses, lengths, g) -> RigidBodyChain:
        n = len(masses)
        inertias = []
        for m, l in zip(masses, lengths):
            c = np.array([0.0, -0.5 * l, 0.0])
            rod = m * l * l / 12.0
            about_origin = np.diag([rod, 0.0, rod]) + m * (c @ c * np.eye(3) - np.outer(c, c))
            inertias.append(
                [
                    m,
                    *(m * c),
                    about_origin[0, 0],
                    about_origin[0, 1],
                    about_origin[1, 1],
                    about_origin[0, 2],
                    about_origin[1, 2],
                    about_origin[2, 2],
                ]
            )
        translations = [np.zeros(3)] + [np.array([0.0, -lengths[i], 0.0]) for i in range(n - 1)]
        return cls(
            parents=tuple(range(-1, n - 1)),
            rotations=np.tile(np.eye(3), (n, 1, 1)),
            translations=translations,
            axes=np.tile([0.0, 0.0, 1.0], (n, 1)),
            prismatic=(False,) * n,
            inertias=inertias,
            armature=np.zeros(n),
            gravity=np.array([0.0, -g, 0.0]),
        )


def _axis(joint, joint_type: str, name: str) -> np.ndarray:
    for suffix, axis in (("X", (1.0, 0.0, 0.0)), ("Y", (0.0, 1.0, 0.0)), ("Z", (0.0, 0.0, 1.0))):
        if joint_type in (f"JointModelR{suffix}", f"JointModelP{suffix}"):
            return np.array(axis)
    if joint_type in ("JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned"):
        return np.array(joint.extract().axis)
    raise ValueError(f"rigid-body chains take revolute and prismatic joints; joint {name!r} is {joint_type}")
