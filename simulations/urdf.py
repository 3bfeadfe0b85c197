"""Fixed-base URDF robots through Pinocchio (the ``robots`` extra), and the Franka Panda.

Pinocchio's Python API evaluates one configuration per call, so every method
loops over the flattened batch and restores the batch shape; the model is
parsed once, lazily, and cached on the (frozen) instance
(:attr:`URDFRobot.pinocchio_model`). A robot may carry joint friction
(:class:`simulations.Friction` or :class:`simulations.StribeckFriction`) and a rigid payload the URDF does not know
(:class:`Payload`).
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import site
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulations.base import MechanicalBase, State, as_rng, check_nonnegative, check_positive
from simulations.friction import FrictionModel

__all__ = ["URDFRobot", "Payload", "panda", "example_robot_data_path", "undefined_links"]

_MISSING_LINKS = ("error", "add")

_EXTRA_HINT = "install the robots extra: pip install 'lnn[robots]'"
_PANDA_URDF = "panda_description/urdf/panda.urdf"
_PANDA_FINGERS = ("panda_finger_joint1", "panda_finger_joint2")


def _import_pinocchio():
    try:
        import pinocchio
    except ImportError as exc:
        raise ImportError(f"URDF robots need Pinocchio (PyPI 'pin'); {_EXTRA_HINT}") from exc
    return pinocchio


def example_robot_data_path(relative: str) -> Path:
    """Locate a file of the installed ``example-robot-data`` package.

    Parameters
    ----------
    relative : str
        Path below the package's ``robots`` folder, e.g.
        ``"panda_description/urdf/panda.urdf"``.

    Returns
    -------
    pathlib.Path
        The absolute path of the file.

    Raises
    ------
    ImportError
        When ``example-robot-data`` is not installed or lacks the file.
    """
    suffix = "example-robot-data/robots/" + relative.strip("/")
    try:
        for entry in importlib.metadata.files("example-robot-data") or ():
            if str(entry).replace("\\", "/").endswith(suffix):
                return Path(entry.locate()).resolve()
    except importlib.metadata.PackageNotFoundError:
        pass
    roots = [sys.prefix, *site.getsitepackages(), site.getusersitepackages()]
    for root in roots:
        for prefix in ("cmeel.prefix/share", "share", "lib/python3/site-packages/cmeel.prefix/share"):
            candidate = Path(root) / prefix / suffix
            if candidate.is_file():
                return candidate.resolve()
    raise ImportError(f"example-robot-data file {relative!r} not found; {_EXTRA_HINT}")


@dataclass(frozen=True)
class Payload:
    """A rigid body the URDF does not know, attached to a link of the robot.

    Parameters
    ----------
    mass : float
        Mass in kg (> 0).
    com : sequence of 3 float
        Centre of mass in the frame ``frame``, m.
    inertia : sequence of 6 float
        Rotational inertia about the centre of mass, in the axes of
        ``frame``, in the URDF order ``(ixx, ixy, ixz, iyy, iyz, izz)``
        (kg m^2); it must be positive semi-definite. Default: a point mass.
    frame : str, optional
        A Pinocchio frame (a URDF link or joint name, e.g. ``"panda_hand"``)
        in which ``com`` and ``inertia`` are expressed; the body is rigidly
        attached to that frame's parent joint. ``None`` (the default): the
        frame of the last joint of the model.

    Raises
    ------
    ValueError
        For a mass <= 0, a non-finite entry or an inertia that is not positive
        semi-definite.
    """

    mass: float
    com: tuple[float, float, float] = (0.0, 0.0, 0.0)
    inertia: tuple[float, float, float, float, float, float] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    frame: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mass", check_positive("Payload.mass", self.mass))
        for name, size in (("com", 3), ("inertia", 6)):
            value = getattr(self, name)
            if isinstance(value, str) or np.shape(value) != (size,):
                raise ValueError(f"Payload.{name} must be a sequence of {size} numbers; got {value!r}")
            numbers = tuple(float(v) for v in value)
            if not all(math.isfinite(v) for v in numbers):
                raise ValueError(f"Payload.{name} must be finite; got {value!r}")
            object.__setattr__(self, name, numbers)
        if np.linalg.eigvalsh(self.inertia_matrix).min() < -1e-12 * max(1.0, max(map(abs, self.inertia))):
            raise ValueError(f"Payload.inertia must be positive semi-definite; got {self.inertia!r}")
        if self.frame is not None and not isinstance(self.frame, str):
            raise TypeError(f"Payload.frame must be a frame name or None; got {self.frame!r}")

    @property
    def inertia_matrix(self) -> np.ndarray:
        """The rotational inertia about the centre of mass, shape ``(3, 3)``."""
        xx, xy, xz, yy, yz, zz = self.inertia
        return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])

    def parameters(self) -> dict:
        """JSON-serialisable fields: ``Payload(**payload.parameters()) == payload``."""
        return {"mass": self.mass, "com": list(self.com), "inertia": list(self.inertia), "frame": self.frame}


def _as_payload(value: Any) -> Payload | None:
    if value is None or isinstance(value, Payload):
        return value
    if isinstance(value, dict):
        return Payload(**value)
    raise TypeError(f"payload must be a simulations.Payload, its parameters() dict or None; got {value!r}")


def undefined_links(path: str | os.PathLike) -> tuple[str, ...]:
    """Links that the joints of a URDF file name but that the file never defines.

    Exporters for Drake weld the base to a ``world`` link that they leave
    undefined; strict parsers (urdfdom, hence Pinocchio) refuse such a file.

    Parameters
    ----------
    path : str or os.PathLike
        The URDF file.

    Returns
    -------
    tuple of str
        The undefined link names, in the order of first use.

    Raises
    ------
    ValueError
        When the file is not XML.
    """
    try:
        root = ElementTree.parse(os.fspath(path)).getroot()
    except ElementTree.ParseError as exc:
        raise ValueError(f"cannot read URDF file {os.fspath(path)}: {exc}") from exc
    defined = {link.get("name") for link in root.iter("link")}
    missing: list[str] = []
    for joint in root.iter("joint"):
        for end in ("parent", "child"):
            element = joint.find(end)
            name = None if element is None else element.get("link")
            if name is not None and name not in defined and name not in missing:
                missing.append(name)
    return tuple(missing)


def _urdf_text(path: str, missing_links: str) -> str | None:
    """The URDF text with the undefined links added (``"add"``), ``None`` when none is missing.

    Raises the explanatory ``ValueError`` for ``missing_links="error"``.
    """
    missing = undefined_links(path)
    if not missing:
        return None
    if missing_links == "error":
        names = ", ".join(repr(m) for m in missing)
        tags = " ".join(f'<link name="{m}"/>' for m in missing)
        raise ValueError(
            f"URDF file {path} names the link(s) {names} in its joints but never defines them "
            f"(a Drake habit: the base welded to an undefined 'world'); Pinocchio refuses such a file. "
            f"Fix the file (add {tags} inside <robot>, or drop the joints that use them), or load it "
            f"with URDFRobot.from_urdf(path, missing_links='add'), which adds the empty link(s) in memory."
        )
    tree = ElementTree.parse(path)
    root = tree.getroot()
    for index, name in enumerate(missing):
        root.insert(index, ElementTree.Element("link", {"name": name}))
    return ElementTree.tostring(root, encoding="unicode")


@dataclass(frozen=True)
class URDFRobot(MechanicalBase):
    """A fixed-base robot described by a URDF file, simulated by Pinocchio.

    ``q`` are the joint positions of the unlocked joints in the model's
    order (radians for revolute joints, metres for prismatic ones), ``tau``
    the joint torques/forces. The dynamics are those of the rigid-body tree
    (``crba``, ``nonLinearEffects``, ``aba``, ``rnea``) plus, when given, the
    joint friction ``friction``; the URDF's own ``<dynamics damping friction>``
    are **not** read, so without ``friction`` unforced motion conserves
    energy.

    Parameters
    ----------
    path : str
        Path of the URDF file (meshes are not needed: no geometry is loaded).
    locked_joints : tuple of str
        Names of joints locked at their neutral (zero) position and removed
        from the coordinates (``pinocchio.buildReducedModel``).
    gravity : tuple of 3 float
        Gravity vector in the base frame, m/s^2.
    name : str
        Registry name of the robot (``"urdf"``, or ``"panda"`` for :func:`panda`).
    friction : Friction, StribeckFriction or dict, optional
        Joint friction ``tau_f(q, qd) + o`` that the motors must overcome
        (:class:`simulations.Friction` or :class:`simulations.StribeckFriction`,
        or its ``parameters()`` dict); ``energy`` ignores it.
    payload : Payload or dict, optional
        A rigid body added to the model (:class:`Payload`), e.g. a tool or a
        grasped object that the URDF does not know.
    missing_links : {"error", "add"}
        What to do with links that the joints name but the file never
        defines (:func:`undefined_links`): ``"error"`` (the default) raises a
        ``ValueError`` naming them and the fix; ``"add"`` adds them as empty
        links, in memory (the file is not changed).

    Notes
    -----
    ``positions`` returns the joint origins in the base frame, the base
    first: shape ``(..., n_joints + 1, 3)``. Only one-degree-of-freedom
    joints (revolute, prismatic) are supported; continuous and floating
    joints raise ``ValueError``.
    """

    path: str
    locked_joints: tuple[str, ...] = ()
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    name: str = "urdf"
    friction: FrictionModel | None = None
    payload: Payload | None = None
    missing_links: str = "error"
    _cache: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike; got {self.path!r}")
        object.__setattr__(self, "path", os.fspath(self.path))
        locked = self.locked_joints
        if isinstance(locked, str) or not all(isinstance(j, str) for j in tuple(locked)):
            raise TypeError(f"locked_joints must be a sequence of joint names; got {locked!r}")
        object.__setattr__(self, "locked_joints", tuple(locked))
        if isinstance(self.gravity, str) or np.shape(self.gravity) != (3,):
            raise ValueError(f"gravity must be a 3-vector; got {self.gravity!r}")
        gravity = tuple(float(v) for v in self.gravity)
        if not all(math.isfinite(v) for v in gravity):
            raise ValueError(f"gravity must be finite; got {self.gravity!r}")
        object.__setattr__(self, "gravity", gravity)
        self._check_friction()
        object.__setattr__(self, "payload", _as_payload(self.payload))
        if self.missing_links not in _MISSING_LINKS:
            raise ValueError(f"missing_links must be one of {_MISSING_LINKS}; got {self.missing_links!r}")
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"URDF file not found: {self.path}")

    @classmethod
    def from_urdf(
        cls,
        path: str | os.PathLike,
        locked_joints: tuple[str, ...] = (),
        gravity: tuple[float, float, float] = (0.0, 0.0, -9.81),
        *,
        name: str = "urdf",
        friction: FrictionModel | None = None,
        payload: Payload | None = None,
        missing_links: str = "error",
    ) -> URDFRobot:
        """Load a robot from a URDF file and parse it at once (errors surface here).

        Parameters
        ----------
        path : str or os.PathLike
            The URDF file.
        locked_joints : sequence of str
            Joints locked at zero and removed from the coordinates.
        gravity : sequence of 3 float
            Gravity vector in the base frame, m/s^2.
        name : str
            Registry name recorded with datasets.
        friction : Friction or StribeckFriction, optional
            Joint friction (:class:`simulations.Friction`, :class:`simulations.StribeckFriction`).
        payload : Payload, optional
            A rigid body added to the model (:class:`Payload`).
        missing_links : {"error", "add"}
            ``"add"`` loads a file whose joints name undefined links (the
            ``world`` of Drake exports) by adding them as empty links in memory;
            ``"error"`` raises a ``ValueError`` that names them.

        Returns
        -------
        URDFRobot

        Raises
        ------
        ValueError
            When the file cannot be parsed (the message names the file and, for
            undefined links, the links and the fix).
        """
        robot = cls(
            path=path,
            locked_joints=tuple(locked_joints),
            gravity=tuple(gravity),
            name=name,
            friction=friction,
            payload=payload,
            missing_links=missing_links,
        )
        robot._model()
        return robot

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cache"] = None
        return state

    # ----------------------------------------------------------------- model
    def _model(self):
        cache = self._cache
        if cache is None:
            pin = _import_pinocchio()
            text = _urdf_text(self.path, self.missing_links)
            try:
                full = pin.buildModelFromUrdf(self.path) if text is None else pin.buildModelFromXML(text)
            except Exception as exc:  # pinocchio raises ValueError/RuntimeError on bad files
                raise ValueError(f"cannot read URDF file {self.path}: {exc}") from exc
            known = [n for n in full.names[1:]]
            unknown = [j for j in self.locked_joints if j not in known]
            if unknown:
                raise ValueError(f"locked_joints {unknown} not in {self.path}; its joints are {known}")
            if self.locked_joints:
                ids = [full.getJointId(j) for j in self.locked_joints]
                model = pin.buildReducedModel(full, ids, pin.neutral(full))
            else:
                model = full
            unsupported = [
                f"{name!r} ({j.shortname()}, nq={j.nq}, nv={j.nv})"
                for name, j in zip(model.names[1:], model.joints[1:])
                if j.nq != 1 or j.nv != 1
            ]
            if unsupported:
                raise ValueError(
                    f"only revolute and prismatic joints are supported (a continuous joint can be given "
                    f"limits as a revolute one, or locked); {self.path} has {', '.join(unsupported)}"
                )
            model.gravity.linear = np.array(self.gravity)
            if self.payload is not None:
                self._attach(pin, model, self.payload)
            if self.friction is not None:
                self.friction.check_joints(model.nv, f"{self.name} robot {self.path}")
            angular = tuple(j.shortname().startswith(("JointModelR", "JointModelRevolute")) for j in model.joints[1:])
            cache = (pin, model, model.createData(), angular)
            object.__setattr__(self, "_cache", cache)
        return cache

    def _attach(self, pin, model, payload: Payload) -> None:
        """Add the payload's inertia to the joint that carries its frame."""
        if payload.frame is None:
            joint, placement = model.njoints - 1, pin.SE3.Identity()
        else:
            if not model.existFrame(payload.frame):
                frames = [f.name for f in model.frames]
                raise ValueError(
                    f"payload frame {payload.frame!r} is not a frame of {self.path}; its frames are {frames}"
                )
            frame = model.frames[model.getFrameId(payload.frame)]
            joint, placement = frame.parentJoint, frame.placement
        body = pin.Inertia(payload.mass, np.array(payload.com), payload.inertia_matrix)
        model.appendBodyToJoint(joint, body, placement)

    @property
    def pinocchio_model(self):
        """The Pinocchio ``Model`` of the robot, parsed once and cached.

        Locked joints removed, the payload added to its joint's inertia and the
        gravity set; friction is not part of it. Read joint placements
        (``model.jointPlacements``), axes (``model.joints``) and inertias
        (``model.inertias``) from it; it is shared by the robot's methods, so
        copy it (``pinocchio.Model(robot.pinocchio_model)``) before changing it.

        Returns
        -------
        pinocchio.Model
        """
        return self._model()[1]

    @property
    def n_dof(self) -> int:
        """Number of unlocked joints."""
        return self._model()[1].nv

    @property
    def angular(self) -> tuple[bool, ...]:
        """``True`` for revolute joints, ``False`` for prismatic ones."""
        return self._model()[3]

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Names of the unlocked joints, in the order of ``q``."""
        return tuple(self._model()[1].names[1:])

    @property
    def position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper joint limits from the URDF, each of shape ``(n_dof,)``."""
        model = self._model()[1]
        return np.array(model.lowerPositionLimit), np.array(model.upperPositionLimit)

    def parameters(self) -> dict:
        """The robot's parameters, JSON-serialisable.

        Returns
        -------
        dict
            ``path``, ``locked_joints`` and ``gravity``, and ``friction``,
            ``payload`` and ``missing_links`` when they differ from their
            defaults; for :func:`panda` the path is left out when it is the
            installed example-robot-data file, so that
            ``make_system("panda", **params)`` works on any machine.
        """
        params = {"path": self.path, "locked_joints": list(self.locked_joints), "gravity": list(self.gravity)}
        if self.friction is not None:
            params["friction"] = self.friction.parameters()
        if self.payload is not None:
            params["payload"] = self.payload.parameters()
        if self.missing_links != "error":
            params["missing_links"] = self.missing_links
        if self.name == "panda":
            try:
                default = str(example_robot_data_path(_PANDA_URDF))
            except ImportError:
                default = None
            if default is not None and os.path.realpath(self.path) == os.path.realpath(default):
                del params["path"]
        return params

    # -------------------------------------------------------------- dynamics
    def _loop(self, fn, out_shape: tuple[int, ...], *arrays: np.ndarray) -> np.ndarray:
        """Apply ``fn(*rows) -> array of out_shape`` over the flattened batch."""
        batch = arrays[0].shape[:-1]
        flat = [np.ascontiguousarray(a.reshape(-1, a.shape[-1])) for a in arrays]
        out = np.empty((flat[0].shape[0],) + out_shape)
        for k in range(out.shape[0]):
            out[k] = fn(*(a[k] for a in flat))
        return out.reshape(batch + out_shape)

    def _mass_matrix(self, q: np.ndarray) -> np.ndarray:
        pin, model, data, _ = self._model()
        n = model.nv

        def _one(qi):
            upper = np.triu(pin.crba(model, data, qi))  # crba fills the upper triangle only
            return upper + np.triu(upper, 1).T

        return self._loop(_one, (n, n), q)

    def _bias(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        pin, model, data, _ = self._model()
        return self._loop(lambda qi, vi: pin.nonLinearEffects(model, data, qi, vi), (model.nv,), q, qd)

    def _acceleration(self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None) -> np.ndarray:
        pin, model, data, _ = self._model()
        if tau is None:
            tau = np.zeros_like(q)
        return self._loop(lambda qi, vi, ti: pin.aba(model, data, qi, vi, ti), (model.nv,), q, qd, tau)

    def _inverse_dynamics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        pin, model, data, _ = self._model()
        return self._loop(lambda qi, vi, ai: pin.rnea(model, data, qi, vi, ai), (model.nv,), q, qd, qdd)

    def _potential(self, q: np.ndarray) -> np.ndarray:
        pin, model, data, _ = self._model()
        return self._loop(lambda qi: pin.computePotentialEnergy(model, data, qi), (), q)

    def _positions(self, q: np.ndarray) -> np.ndarray:
        pin, model, data, _ = self._model()

        def _one(qi):
            pin.forwardKinematics(model, data, qi)
            return np.array([data.oMi[i].translation for i in range(model.njoints)])

        return self._loop(_one, (model.njoints, 3), q)

    def acceleration_jacobian(self, q: Any, qd: Any, tau: Any = None) -> np.ndarray:
        """Exact Jacobian ``d qdd / d [q, qd]`` from ``pinocchio.computeABADerivatives``.

        Parameters
        ----------
        q, qd : array_like, shape ``(..., n_dof)``
        tau : array_like, shape ``(..., n_dof)``, optional

        Returns
        -------
        ndarray, shape ``(..., n_dof, 2 n_dof)``
        """
        q, qd, tau = self._check_many(q=q, qd=qd, tau=tau)
        pin, model, data, _ = self._model()
        if tau is None:
            tau = np.zeros_like(q)
        n = model.nv
        friction = self.friction
        if friction is None:

            def _one(qi, vi, ti):
                ddq_dq, ddq_dv, _ = pin.computeABADerivatives(model, data, qi, vi, ti)
                return np.concatenate([ddq_dq, ddq_dv], axis=1)

            return self._loop(_one, (n, 2 * n), q, qd, tau)
        # qdd = aba(q, qd, tau - tau_f(q, qd) - o): d/dq gains -M^-1 diag(d tau_f / d q) and
        # d/dqd gains -M^-1 diag(d tau_f / d qd) (friction acts per joint: both Jacobians are diagonal).
        torque = friction.torque(qd, q=q)
        slope = friction.torque_derivative(qd, q=q)
        position_slope = friction.position_derivative(qd, q=q)

        def _with_friction(qi, vi, ti, si, di):
            ddq_dq, ddq_dv, minv = pin.computeABADerivatives(model, data, qi, vi, ti)
            minv = np.triu(minv) + np.triu(minv, 1).T
            return np.concatenate([ddq_dq - minv * di[None, :], ddq_dv - minv * si[None, :]], axis=1)

        return self._loop(_with_friction, (n, 2 * n), q, qd, tau - torque, slope, position_slope)

    def sample_state(self, n: int, *, rng: Any = None, margin: float = 0.05, velocity_scale: float = 1.0) -> State:
        """Sample ``n`` states uniformly within the joint limits.

        Each joint is uniform in its URDF limits shrunk by ``margin`` times the
        range at both ends (``[-pi, pi)`` for a revolute joint, ``[-1, 1]`` m
        for a prismatic one, where the URDF gives no finite limits); joint
        rates are normal with standard deviation ``velocity_scale``.

        Parameters
        ----------
        n : int
            Number of states.
        rng : numpy.random.Generator or int, optional
            Random generator or seed.
        margin : float
            Fraction of each joint's range kept clear of its limits, in ``[0, 0.5)``.
        velocity_scale : float
            Standard deviation of the joint rates (rad/s or m/s, >= 0).

        Returns
        -------
        State
            ``q`` and ``qd`` of shape ``(n, n_dof)``.
        """
        n = self._check_sample_size(n)
        margin = check_nonnegative("margin", margin)
        if margin >= 0.5:
            raise ValueError(f"margin must be in [0, 0.5); got {margin!r}")
        scale = check_nonnegative("velocity_scale", velocity_scale)
        lower, upper = self.position_limits
        default = np.where(self.angular, np.pi, 1.0)
        unlimited = ~(np.isfinite(lower) & np.isfinite(upper) & (upper > lower))
        lower = np.where(unlimited, -default, lower)
        upper = np.where(unlimited, default, upper)
        span = upper - lower
        generator = as_rng(rng)
        q = generator.uniform(lower + margin * span, upper - margin * span, size=(n, self.n_dof))
        qd = scale * generator.standard_normal(size=(n, self.n_dof))
        return State(q=q, qd=qd)


def panda(
    *,
    path: str | os.PathLike | None = None,
    locked_joints: tuple[str, ...] = _PANDA_FINGERS,
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81),
    friction: FrictionModel | None = None,
    payload: Payload | None = None,
) -> URDFRobot:
    """The 7-DOF Franka Emika Panda of ``example-robot-data``, fingers locked closed.

    Parameters
    ----------
    path : str or os.PathLike, optional
        A Panda URDF; by default ``panda_description/urdf/panda.urdf`` of the
        installed ``example-robot-data`` package.
    locked_joints : sequence of str
        Joints locked at zero: by default the two finger joints, leaving the
        seven arm joints (``n_dof = 7``).
    gravity : sequence of 3 float
        Gravity vector in the base frame, m/s^2.
    friction : Friction, StribeckFriction or dict, optional
        Joint friction of the seven joints (:class:`simulations.Friction` or
        :class:`simulations.StribeckFriction`).
    payload : Payload or dict, optional
        A load the URDF does not know, e.g.
        ``Payload(mass=0.8, com=(0, 0, 0.1), frame="panda_hand")`` for 0.8 kg
        10 cm beyond the hand's frame (default frame: the frame of
        ``panda_joint7``).

    Returns
    -------
    URDFRobot
        With ``name = "panda"``.

    Raises
    ------
    ImportError
        When Pinocchio or example-robot-data (the ``robots`` extra) is missing.
    """
    _import_pinocchio()
    if path is None:
        path = example_robot_data_path(_PANDA_URDF)
    return URDFRobot.from_urdf(
        path, tuple(locked_joints), tuple(gravity), name="panda", friction=friction, payload=payload
    )
