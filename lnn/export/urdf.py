"""A URDF with the identified inertial parameters: :func:`write_urdf`.

The rigid-body kind (:mod:`lnn.models.rigid_body`) identifies, for every
moving joint ``j``, the ten inertial parameters of the body that joint moves,
at the joint frame's origin and in its axes (:mod:`lnn.inertia`). In a URDF
that body is the joint's child link together with every link rigidly attached
to it (children by ``fixed`` joints, and the subtrees of the joints the
dataset did not move, which the model locks at zero). :func:`write_urdf`
copies the template URDF and replaces each moving joint's child link's
``<inertial>`` by the identified body less the template's inertias of the
links rigidly attached to it (those keep their template values, so that the
sum the file describes is the identified body), written as URDF wants it:
the mass, the centre of mass as ``<origin xyz>`` with ``rpy="0 0 0"``, and
the inertia tensor about the centre of mass in the link frame's axes. (A
template's ``<origin rpy>`` rotates its tensor: it is read as ``R I R^T``,
Pinocchio's and MuJoCo's convention, and written unrotated.)

Only physically consistent parameters are written. The rigid-body kind keeps
every body's pseudo-inertia ``J = U U^T`` with ``U`` upper triangular with a
positive diagonal (log-Cholesky coordinates, :mod:`lnn.inertia`), so each
identified body is positive definite by construction; the link written is
that body less its attached template links, which :func:`write_urdf` checks
again (:func:`lnn.inertia.physical_consistency`: mass > 0 and pseudo-inertia
positive definite) and refuses with a ``ValueError`` naming the link when it
fails.

The linear joint friction goes where URDF consumers read it: the viscous
coefficient to ``<dynamics damping>`` and the Coulomb level to ``<dynamics
friction>`` (Pinocchio's URDF parser reads both into ``model.damping`` and
``model.friction``; MuJoCo's into the joint's ``damping`` and
``frictionloss``). No URDF field carries the armature (the rotor inertia the
joint adds to ``M``'s diagonal): urdfdom's ``<dynamics>`` has ``damping`` and
``friction`` only, Pinocchio's URDF parser leaves ``model.armature`` at zero
and MuJoCo's sets no ``armature``. It is written as a comment in the joint
and returned in :class:`URDFExport` (set ``model.armature`` in Pinocchio,
``<joint armature>`` in MJCF). A comment at the top of the file says which
model and stage produced the numbers, which links keep template values and
which learned parts a URDF cannot carry.
"""

from __future__ import annotations

import dataclasses
import os
import xml.etree.ElementTree as ElementTree

import numpy as np

from lnn.inertia import parameters_of_pseudo_inertia, physical_consistency, pseudo_inertia

__all__ = ["URDFExport", "write_urdf"]

#: Forces whose parameters a URDF carries: name -> the ``<dynamics>`` attribute.
CARRIED_FORCES = {"viscous": "damping", "coulomb": "friction"}
#: Tolerance of the template's kinematics against the model's (m and unitless rotation entries).
_KINEMATICS_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class URDFExport:
    """What :func:`write_urdf` wrote.

    Attributes
    ----------
    path : str
        The URDF written.
    template : str
        The template it was copied from.
    stage : str
        The model (and stage) whose numbers it holds.
    links : dict of str to str
        Joint name -> the link whose ``<inertial>`` was replaced.
    parameters : numpy.ndarray, shape ``(n, 10)``
        The inertial parameters written for those links, in each link's frame
        (:mod:`lnn.inertia` order).
    kept : tuple of str
        Links that keep their template values (the base and the links before
        the first moving joint, links of locked joints, links rigidly attached
        to a moving joint's child unless merged).
    merged : dict of str to tuple of str
        Child link -> the links fixed to it whose inertia it took (their
        ``<inertial>`` removed), where the identified body less their template
        values would not have been physical.
    locked_joints : tuple of str
        Template joints that the model does not move (locked at zero).
    armature : dict of str to float
        Joint -> armature (kg m² or kg), which no URDF field carries.
    damping, friction : dict of str to float
        Joint -> the viscous coefficient and the Coulomb level written to ``<dynamics>``.
    not_carried : tuple of str
        The learned parts a URDF cannot carry.
    """

    path: str
    template: str
    stage: str
    links: dict
    parameters: np.ndarray
    kept: tuple[str, ...]
    merged: dict
    locked_joints: tuple[str, ...]
    armature: dict
    damping: dict
    friction: dict
    not_carried: tuple[str, ...]


def _rpy(rpy) -> np.ndarray:
    """URDF's fixed-axis roll-pitch-yaw: ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _floats(text, default, count: int, what: str) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=float)
    values = np.array([float(v) for v in text.split()])
    if values.shape != (count,):
        raise ValueError(f"{what} must hold {count} numbers; got {text!r}")
    return values


def _link_parameters(link) -> np.ndarray:
    """The ten inertial parameters of a URDF ``<link>`` at its frame's origin, in its axes (zeros without)."""
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros(10)
    name = link.get("name")
    origin = inertial.find("origin")
    xyz = _floats(None if origin is None else origin.get("xyz"), (0, 0, 0), 3, f"link {name!r} inertial origin xyz")
    rpy = _floats(None if origin is None else origin.get("rpy"), (0, 0, 0), 3, f"link {name!r} inertial origin rpy")
    mass_element = inertial.find("mass")
    mass = 0.0 if mass_element is None else float(mass_element.get("value", 0.0))
    element = inertial.find("inertia")
    get = (lambda key: 0.0) if element is None else (lambda key: float(element.get(key, 0.0)))  # noqa: E731
    tensor = np.array(
        [
            [get("ixx"), get("ixy"), get("ixz")],
            [get("ixy"), get("iyy"), get("iyz")],
            [get("ixz"), get("iyz"), get("izz")],
        ]
    )
    rotation = _rpy(rpy)
    about_com = rotation @ tensor @ rotation.T
    about_origin = about_com + mass * (xyz @ xyz * np.eye(3) - np.outer(xyz, xyz))
    return _theta(mass, mass * xyz, about_origin)


def _theta(mass, h, inertia) -> np.ndarray:
    i = inertia
    return np.array([mass, *h, i[0, 0], i[0, 1], i[1, 1], i[0, 2], i[1, 2], i[2, 2]])


def _set_inertial(link, theta: np.ndarray) -> None:
    """Replace ``link``'s ``<inertial>`` by ``theta``: mass, COM as the origin, inertia about the COM in link axes."""
    mass, h = theta[0], theta[1:4]
    com = h / mass
    inertia = np.array([[theta[4], theta[5], theta[7]], [theta[5], theta[6], theta[8]], [theta[7], theta[8], theta[9]]])
    about_com = inertia - mass * (com @ com * np.eye(3) - np.outer(com, com))
    old = link.find("inertial")
    index = list(link).index(old) if old is not None else 0
    if old is not None:
        link.remove(old)
    inertial = ElementTree.Element("inertial")
    inertial.text, inertial.tail = "\n      ", (old.tail if old is not None else "\n    ")
    fmt = lambda v: repr(float(v))  # noqa: E731  (round-trip exact decimal of a float64)
    ElementTree.SubElement(inertial, "origin", {"xyz": " ".join(map(fmt, com)), "rpy": "0 0 0"}).tail = "\n      "
    ElementTree.SubElement(inertial, "mass", {"value": fmt(mass)}).tail = "\n      "
    keys = {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2), "izz": (2, 2)}
    ElementTree.SubElement(inertial, "inertia", {k: fmt(about_com[a, b]) for k, (a, b) in keys.items()}).tail = "\n    "
    link.insert(index, inertial)


def _origin(element) -> np.ndarray:
    """The 4x4 transform of a joint's ``<origin xyz rpy>``."""
    origin = element.find("origin")
    what = f"joint {element.get('name')!r} origin"
    T = np.eye(4)
    T[:3, :3] = _rpy(_floats(None if origin is None else origin.get("rpy"), (0, 0, 0), 3, what + " rpy"))
    T[:3, 3] = _floats(None if origin is None else origin.get("xyz"), (0, 0, 0), 3, what + " xyz")
    return T


def _fixed_descendants(link: str, root) -> list:
    """``(name, T)`` of the links fixed to ``link`` (through ``fixed`` joints only), ``T`` their frame in its."""
    out, stack = [], [(link, np.eye(4))]
    while stack:
        parent, T = stack.pop()
        for joint in root.findall("joint"):
            if joint.get("type") == "fixed" and joint.find("parent").get("link") == parent:
                child, T_child = joint.find("child").get("link"), T @ _origin(joint)
                out.append((child, T_child))
                stack.append((child, T_child))
    return out


def _moved(theta: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Inertial parameters of a body given in a frame placed at ``T``, in the parent frame: ``J' = T J T^T``."""
    return parameters_of_pseudo_inertia(T @ pseudo_inertia(theta) @ T.T)


def _empty_inertial(link, into: str) -> None:
    """Remove ``link``'s ``<inertial>`` and say where its inertia went."""
    old = link.find("inertial")
    if old is not None:
        link.remove(old)
    note = ElementTree.Comment(f" lnn: this link's inertia is merged into {into}'s <inertial> ")
    note.tail = "\n    "
    link.insert(0, note)


def _rigid_body(network):
    """``(members, kind name)`` of a model: every member must be of kind ``rigid-body``."""
    members = tuple(getattr(network, "members", None) or (network,))
    kinds = {getattr(m, "kind", type(m).__name__) for m in members}
    if kinds != {"rigid-body"}:
        raise ValueError(
            f"the model has no rigid-body stage (kind {', '.join(sorted(map(str, kinds)))!r}): there is no URDF to "
            "write; only a model identified with a URDF prior (lnn identify --urdf, "
            "lnn.identify(..., prior=URDFRobot)) has the inertial parameters of the robot's links"
        )
    return members


def _template_model(root, template: str, names: tuple[str, ...]):
    """Pinocchio's model of the template with the joints outside ``names`` locked at zero, and those joints."""
    try:
        import pinocchio as pin
    except ImportError as exc:
        raise ImportError("writing a URDF needs Pinocchio (PyPI 'pin'): pip install 'lnn[robots]'") from exc
    defined = {link.get("name") for link in root.findall("link")}
    root = ElementTree.fromstring(ElementTree.tostring(root))
    for joint in root.findall("joint"):  # links the joints name but never define (Drake's 'world'), added empty
        for end in ("parent", "child"):
            element = joint.find(end)
            name = None if element is None else element.get("link")
            if name is not None and name not in defined:
                root.insert(0, ElementTree.Element("link", {"name": name}))
                defined.add(name)
    try:
        full = pin.buildModelFromXML(ElementTree.tostring(root, encoding="unicode"))
    except Exception as exc:  # Pinocchio raises ValueError/RuntimeError on bad files
        raise ValueError(f"cannot read the template URDF {template}: {exc}") from exc
    joints = tuple(full.names[1:])
    missing = [n for n in names if n not in joints]
    if missing:
        raise ValueError(
            f"the template URDF {template} does not match the model: it has no joint(s) {missing}; the model's joints "
            f"are {list(names)}, the template's movable joints are {list(joints)}"
        )
    locked = tuple(j for j in joints if j not in names)
    model = full
    if locked:
        model = pin.buildReducedModel(full, [full.getJointId(j) for j in locked], pin.neutral(full))
    if tuple(model.names[1:]) != tuple(names):
        raise ValueError(
            f"the template URDF {template} does not match the model: its joints come in the order "
            f"{list(model.names[1:])}, the model's are {list(names)}"
        )
    return model, locked


def _check_kinematics(chain, model, template: str) -> None:
    """Raise naming the joints whose placement, axis or type differ between the template and the model."""
    from lnn.models.chain import RigidBodyChain

    other = RigidBodyChain.from_pinocchio(model)
    wrong = []
    for i, name in enumerate(chain.names):
        same = (
            chain.parents[i] == other.parents[i]
            and chain.prismatic[i] == other.prismatic[i]
            and np.allclose(chain.rotations[i], other.rotations[i], atol=_KINEMATICS_TOLERANCE)
            and np.allclose(chain.translations[i], other.translations[i], atol=_KINEMATICS_TOLERANCE)
            and np.allclose(chain.axes[i], other.axes[i], atol=_KINEMATICS_TOLERANCE)
        )
        if not same:
            wrong.append(
                f"{name} (model: origin {np.round(chain.translations[i], 6).tolist()}, axis "
                f"{np.round(chain.axes[i], 6).tolist()}; template: origin "
                f"{np.round(other.translations[i], 6).tolist()}, "
                f"axis {np.round(other.axes[i], 6).tolist()})"
            )
    if wrong:
        raise ValueError(
            f"the template URDF {template} does not match the model's kinematics at joint(s): {'; '.join(wrong)}"
        )


def _not_carried(network, members) -> tuple[str, ...]:
    parts = []
    forces = {term.name for m in members for term in m.forces}
    for name in sorted(forces - set(CARRIED_FORCES)):
        parts.append(f"the learned force '{name}'")
    if "coulomb" in forces:
        parts.append("the Coulomb friction's smoothing velocity (URDF friction is the level only)")
    if any(getattr(m.kind_model, "residual", False) for m in members):
        parts.append("the residual Lagrangian (its mass matrix and potential are networks)")
    parts.append("the armature (no URDF field: in a comment per joint)")
    if len(members) > 1:
        parts.append(f"the ensemble's spread (the file holds the mean of its {len(members)} members' parameters)")
    return tuple(parts)


def _link_inertia(body, template_body, joint: str, child: str, root, links):
    """The child link's parameters: the identified ``body`` less the template's links rigidly attached to it.

    Where that is not physical, the links fixed to the child join it (their ``<inertial>`` removed, their
    names returned) and only the locked joints' links are subtracted; a ValueError names the link when even
    that is not physical.
    """
    attached = template_body - _link_parameters(links[child])
    theta, lumped = body - attached, ()
    fixed = _fixed_descendants(child, root)
    if not physical_consistency(theta).all and fixed:
        welded = sum((_moved(_link_parameters(links[n]), T) for n, T in fixed), np.zeros(10))
        attached = attached - welded
        theta = body - attached
        for n, _ in fixed:
            _empty_inertial(links[n], child)
        lumped = tuple(n for n, _ in fixed)
    check = physical_consistency(theta)
    if not check.all:
        raise ValueError(
            f"link {child!r} (joint {joint!r}) would not be physically consistent: the identified body of "
            f"{body[0]:.6g} kg less the template's links rigidly attached to it that keep their values "
            f"({attached[0]:.6g} kg) leaves mass {theta[0]:.6g} kg, smallest pseudo-inertia eigenvalue "
            f"{check.pseudo_inertia_eigenvalue[0]:.3g}; the URDF would not describe the identified body"
        )
    return theta, lumped


def _child(joint, template: str) -> str:
    """The name of the link a URDF ``<joint>`` moves."""
    element = joint.find("child")
    name = None if element is None else element.get("link")
    if name is None:
        raise ValueError(f"the template URDF {template}: joint {joint.get('name')!r} has no <child link=...>")
    return name


def _set_dynamics(joint, values: dict, armature: float, *, prismatic: bool) -> None:
    """Write ``<dynamics damping friction>`` (``values``) and the armature's comment into ``joint``."""
    dynamics = joint.find("dynamics")
    if values:
        if dynamics is None:
            dynamics = ElementTree.SubElement(joint, "dynamics")
            dynamics.tail = "\n  "
        for attr, value in values.items():
            dynamics.set(attr, repr(float(value)))
    note = ElementTree.Comment(
        f" lnn: armature {armature!r} ({'kg' if prismatic else 'kg m^2'}; no URDF field carries it: "
        "Pinocchio model.armature, MuJoCo MJCF <joint armature>) "
    )
    note.tail = "\n  "
    joint.insert(0, note)


def write_urdf(model, path, *, template, force: bool = False, stage: str | None = None) -> URDFExport:
    """Write the template URDF with the model's identified inertial parameters and linear joint friction.

    Parameters
    ----------
    model : lnn.IdentifiedModel, lnn.LagrangianNetwork or lnn.Ensemble
        A model of kind ``rigid-body`` (an :class:`lnn.IdentifiedModel`'s
        ``network``: the chosen stage; an ensemble: the mean of its members'
        parameters, exact for the rigid-body dynamics, which are linear in them).
    path : str or os.PathLike
        The URDF to write.
    template : str or os.PathLike, keyword-only
        The robot's URDF (the prior's): joints, geometry and every value the
        model does not identify are copied from it.
    force : bool, keyword-only
        Replace ``path`` if it exists.
    stage : str, optional
        Which stage produced the numbers, for the file's comment (default: an
        IdentifiedModel's ``report.chosen``).

    Returns
    -------
    URDFExport

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``force`` is False.
    FileNotFoundError
        If the template does not exist.
    ValueError
        For a model without a rigid-body stage, a template whose joints or
        kinematics differ from the model's (naming the joints), or a link whose
        parameters would not be physically consistent (naming it).
    """
    network = getattr(model, "network", model)
    if stage is None:
        report = getattr(model, "report", None)
        stage = f"stage '{report.chosen}' of lnn.identify" if report is not None else "the rigid-body model"
    members = _rigid_body(network)
    path, template = os.fspath(path), os.fspath(template)
    if not os.path.isfile(template):
        raise FileNotFoundError(f"template URDF not found: {template}")
    if os.path.exists(path) and not force:
        raise FileExistsError(f"{path} exists; pass force=True (--force) to replace it")
    try:
        tree = ElementTree.parse(template)
    except ElementTree.ParseError as exc:
        raise ValueError(f"cannot read the template URDF {template}: {exc}") from exc
    root = tree.getroot()
    kinds = [m.kind_model for m in members]
    chain = kinds[0].chain0
    names = tuple(chain.names)
    pin_model, locked = _template_model(root, template, names)
    _check_kinematics(chain, pin_model, template)

    J = np.mean([np.asarray(k.pseudo_inertias(), np.float64) for k in kinds], axis=0)
    armature = np.mean([np.asarray(k.armature(), np.float64) for k in kinds], axis=0)
    bodies = parameters_of_pseudo_inertia(J)
    if not physical_consistency(bodies).all:
        raise ValueError(f"the model's bodies are not physically consistent: {physical_consistency(bodies)!r}")
    coefficients = {}
    for name in CARRIED_FORCES:
        values = [m.friction_parameters().get(name) for m in members]
        if all(v is not None for v in values):
            coefficients[name] = np.mean([np.asarray(v, np.float64) for v in values], axis=0)

    joints = {j.get("name"): j for j in root.findall("joint")}
    links = {str(link.get("name")): link for link in root.findall("link")}
    written: dict[str, str] = {}
    parameters: list[np.ndarray] = []
    merged: dict[str, tuple[str, ...]] = {}
    for i, name in enumerate(names):
        child = _child(joints[name], template)
        if child not in links:
            raise ValueError(f"the template URDF {template}: joint {name!r} moves link {child!r}, never defined")
        link = links[child]
        template_body = np.array(pin_model.inertias[i + 1].toDynamicParameters())
        theta, lumped = _link_inertia(bodies[i], template_body, name, child, root, links)
        if lumped:
            merged[child] = lumped
        _set_inertial(link, theta)
        written[name] = child
        parameters.append(theta)
        carried = {attr: coefficients[force][i] for force, attr in CARRIED_FORCES.items() if force in coefficients}
        _set_dynamics(joints[name], carried, armature[i], prismatic=chain.prismatic[i])

    lumped = {n for group in merged.values() for n in group}
    kept = tuple(n for n in links if n not in written.values() and n not in lumped)
    not_carried = _not_carried(network, members)
    header = (
        f" Written by lnn.export.write_urdf from {os.path.basename(template)}: the <inertial> of the links "
        f"{', '.join(written.values())} are the inertial parameters identified by {stage} (each the identified "
        "body less the template's links rigidly attached to it; physically consistent: pseudo-inertias positive "
        "definite); <dynamics damping friction> of their joints are the identified viscous and Coulomb coefficients"
        f"{'' if coefficients else ' (none identified: template values kept)'}. "
        + "".join(
            f"Links {', '.join(g)} (fixed to {c}) are merged into {c}'s inertial (their sum is what the data "
            "identify; subtracting their template values left no physical body). "
            for c, g in merged.items()
        )
        + f"Template values kept: links {', '.join(kept) or '(none)'}"
        f"{'; locked joints (not moved by the dataset) ' + ', '.join(locked) if locked else ''}. "
        f"A URDF cannot carry: {'; '.join(not_carried)}. "
    )
    comment = ElementTree.Comment(header.replace("--", "- -"))
    comment.tail = "\n  "
    root.insert(0, comment)
    text = ElementTree.tostring(root, encoding="unicode", xml_declaration=False)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n")
    damping = {n: float(coefficients["viscous"][i]) for i, n in enumerate(names)} if "viscous" in coefficients else {}
    friction = {n: float(coefficients["coulomb"][i]) for i, n in enumerate(names)} if "coulomb" in coefficients else {}
    return URDFExport(
        path=path,
        template=template,
        stage=stage,
        links=written,
        parameters=np.array(parameters),
        kept=kept,
        merged=merged,
        locked_joints=locked,
        armature={n: float(a) for n, a in zip(names, armature)},
        damping=damping,
        friction=friction,
        not_carried=not_carried,
    )
