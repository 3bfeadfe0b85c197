"""``lnn.identify``: the recommended recipe for learning a robot from torque data.

===========================================  ==========================================================
module                                       holds
===========================================  ==========================================================
:mod:`lnn.identification._recipe`            :func:`identify`: the stages in order, the split, the choice
:mod:`lnn.identification._linear`            the linear stages: the layout of the parameters (bodies,
                                             armature, the registry's linear forces, offsets per
                                             recording), the validation of the settings, the fits
:mod:`lnn.identification._learned`           the residual stage and the prior-free network
:mod:`lnn.identification._report`            :class:`Stage`, :class:`ResidualFindings`,
                                             :class:`JointChoice`, :class:`IdentificationReport`
:mod:`lnn.identification._model`             :class:`IdentifiedModel`
===========================================  ==========================================================

Shared with :func:`lnn.baseline.least_squares`: the physically consistent fit
(:mod:`lnn.physical_fit`), the inertia coordinates (:mod:`lnn.inertia`) and
the force registry (:mod:`lnn.models.forces`, one parser of ``friction=``).
"""

from lnn.identification._model import IdentifiedModel
from lnn.identification._recipe import DEFAULT_FRICTION, DEFAULT_TIME, OFFSETS, STATE_SHARE, identify
from lnn.identification._report import IdentificationReport, JointChoice, ResidualFindings, Stage

__all__ = [
    "DEFAULT_FRICTION",
    "STATE_SHARE",
    "DEFAULT_TIME",
    "OFFSETS",
    "IdentificationReport",
    "IdentifiedModel",
    "JointChoice",
    "ResidualFindings",
    "Stage",
    "identify",
]
