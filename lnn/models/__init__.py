"""Lagrangian neural networks: the Keras model, its kinds and their mathematics.

=============================  ===============================================================
module                         holds
=============================  ===============================================================
:mod:`~lnn.models.network`     :class:`LagrangianNetwork` (configuration, scaling, saving,
                               public methods; no branch on a kind)
:mod:`~lnn.models.registry`    :class:`Kind`, :func:`register_kind`, :data:`KINDS`
:mod:`~lnn.models.kinetic_potential`, :mod:`~lnn.models.black_box`, :mod:`~lnn.models.structured`
                               the built-in kinds, TensorFlow and numpy side by side
:mod:`~lnn.models.scalar`      the closed form shared by kinds whose energy is one scalar MLP
:mod:`~lnn.models.mlp`         :class:`~lnn.models.mlp.MLP` and its numpy twin, closed-form
                               input derivatives
:mod:`~lnn.models.activations`  one table of activations (value, slope, curvature; TF and numpy)
:mod:`~lnn.models.features`    the one input map (``sin/cos`` of angles, affine scaling)
:mod:`~lnn.models.rigid_body`  the rigid-body prior kind (trainable physical inertias)
:mod:`~lnn.models.chain`       :class:`RigidBodyChain`, pseudo-inertias, log-Cholesky coordinates
:mod:`~lnn.models.trigonometric`  a Lagrangian linear in its parameters over a trigonometric
                               basis (least squares without a prior)
:mod:`~lnn.models.forces`      the registry of learned forces (damping, viscous, Coulomb, offset,
                               a passive friction network), one module each
:mod:`~lnn.models.compiled`    compiled calls: graph mode at once, XLA off the caller's path
:mod:`~lnn.models.ensemble`    :class:`Ensemble`: ``K`` networks trained, saved and evaluated as one
                               model; predictions with calibrated intervals
:mod:`~lnn.models.novelty`     the distance of states to the training states (``model.novelty``)
:mod:`~lnn.models.saving`      :func:`load_model`
=============================  ===============================================================

A new kind is one module defining a :class:`Kind` subclass decorated with
:func:`register_kind` (and, to be built in, one import line below).
"""

from lnn.models import (  # noqa: F401  (register the kinds)
    black_box,
    kinetic_potential,
    rigid_body,  # noqa: F401  (registers "rigid-body")
    structured,
    trigonometric,  # noqa: F401  (registers "trigonometric")
)
from lnn.models.chain import RigidBodyChain
from lnn.models.ensemble import Ensemble, EnsembleCalibration, EnsemblePrediction
from lnn.models.features import FeatureMap
from lnn.models.network import LagrangianNetwork
from lnn.models.registry import KINDS, Kind, NumpyKind, Terms, kind_names, register_kind
from lnn.models.saving import load_model

__all__ = [
    "Ensemble",
    "EnsembleCalibration",
    "EnsemblePrediction",
    "FeatureMap",
    "RigidBodyChain",
    "KINDS",
    "Kind",
    "LagrangianNetwork",
    "NumpyKind",
    "Terms",
    "kind_names",
    "load_model",
    "register_kind",
]
