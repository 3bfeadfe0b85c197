"""Names the command line shows before it imports TensorFlow (this module imports nothing).

``lnn --help`` and the verbs that never need TensorFlow (``systems``,
``simulate``, ``import``) build the whole parser, every verb's help
included, so the helps can name only what is known without the models:
the built-in forces and the default of ``identify``. The package reads
them from here too, so that the two never differ: the force registry
(:mod:`lnn.models.forces`) imports its built-in forces in
:data:`BUILT_IN_FORCES`' order, and :func:`lnn.identify`'s default
``friction`` is :data:`DEFAULT_FRICTION`.
"""

from __future__ import annotations

__all__ = ["BUILT_IN_FORCES", "DEFAULT_FRICTION"]

#: The built-in forces, each the module ``lnn.models.forces.<name>`` registering the force ``<name>``, in
#: registration order (= the order of the terms in ``friction=`` and of their variables: saved files depend
#: on it).
BUILT_IN_FORCES = (
    "damping",
    "viscous",
    "coulomb",
    "offset",
    "network",
    "joint_network",
    "stribeck",
    "position_coulomb",
)
#: The forces of :func:`lnn.identify`'s default (why these: :data:`lnn.identification.DEFAULT_FRICTION`).
DEFAULT_FRICTION = "viscous+coulomb+stribeck+position_coulomb+joint_network"
