"""lnn: Lagrangian neural networks on TensorFlow 2.

Learn the dynamics of mechanical systems from trajectory data, simulate the
learned systems with scipy's ODE solvers, and plot the results for papers.

Public API (see each object's docstring):

- :class:`MechanicalSystem` — the protocol shared by true systems and learned models
- :func:`rollout`, :class:`Trajectory` — integrate any system with ``solve_ivp``
- :func:`generate`, :func:`excitation_trajectories`, :class:`Dataset` — datasets of simulated
  or logged trajectories
- :class:`LagrangianNetwork`, :func:`load_model` — the learned Lagrangian
- :class:`Ensemble`, :class:`EnsembleTrajectory` — several networks as one model: predictions
  with calibrated intervals, rollouts with bands (:mod:`lnn.uncertainty`)
- :class:`AccelerationMLP` — the field's plain-MLP baseline (:mod:`lnn.baseline`, which also holds
  :func:`lnn.baseline.least_squares`, classical identification of a robot's base parameters)
- :mod:`lnn.mechanics` — mass matrix, accelerations, torques, energies of any Lagrangian
- :func:`identify` — the recipe for robots with measured torques (:mod:`lnn.identification`)
- :mod:`lnn.export` — a TensorFlow SavedModel a controller calls without ``lnn``, a URDF with the
  identified inertias
- :func:`fit`, :class:`History` — training; :func:`evaluate`, :mod:`lnn.metrics` — evaluation
- :mod:`lnn.plot` — figures and animations
- the exceptions and warnings a user can meet (:mod:`lnn.errors`, one hierarchy under
  :class:`LNNError` and :class:`LNNWarning`): :class:`IntegrationError`,
  :class:`MassMatrixError`, :class:`IndefiniteMassMatrixError`,
  :class:`NonPhysicalMassMatrixError`, :class:`TrainingDivergedError`,
  :class:`IdentifiabilityWarning`, :class:`TimeSplitWarning`, :class:`RuntimeFallbackWarning`,
  :class:`CompilationWarning`, :class:`NoveltyWarning`, :class:`PrecisionWarning`
"""

from typing import TYPE_CHECKING

from lnn import logs
from lnn._version import __version__
from lnn.data import (
    Dataset,
    DatasetSplit,
    Derivatives,
    estimate_derivatives,
    excitation_trajectories,
    generate,
)
from lnn.errors import (
    CompilationWarning,
    IdentifiabilityWarning,
    IndefiniteMassMatrixError,
    IntegrationError,
    LNNError,
    LNNWarning,
    MassMatrixError,
    NonPhysicalMassMatrixError,
    NoveltyWarning,
    PrecisionWarning,
    RuntimeFallbackWarning,
    TimeSplitWarning,
    TrainingDivergedError,
)
from lnn.integrate import rollout
from lnn.system import MechanicalSystem
from lnn.trajectory import EnsembleTrajectory, Trajectory

if TYPE_CHECKING:  # the lazy names below, for type checkers and the API reference
    from lnn import baseline, export, mechanics, metrics, plot
    from lnn.baseline._mlp import AccelerationMLP
    from lnn.identification import IdentifiedModel, identify
    from lnn.metrics import evaluate
    from lnn.models import Ensemble, LagrangianNetwork, load_model
    from lnn.train import History, fit

__all__ = [
    "__version__",
    "MechanicalSystem",
    "Trajectory",
    "EnsembleTrajectory",
    "rollout",
    "IntegrationError",
    "excitation_trajectories",
    "generate",
    "Dataset",
    "DatasetSplit",
    "Derivatives",
    "estimate_derivatives",
    "logs",
    "TimeSplitWarning",
    "LagrangianNetwork",
    "Ensemble",
    "load_model",
    "AccelerationMLP",
    "baseline",
    "export",
    "mechanics",
    "fit",
    "History",
    "identify",
    "IdentifiedModel",
    "evaluate",
    "metrics",
    "plot",
    "LNNError",
    "LNNWarning",
    "MassMatrixError",
    "IndefiniteMassMatrixError",
    "NonPhysicalMassMatrixError",
    "TrainingDivergedError",
    "IdentifiabilityWarning",
    "RuntimeFallbackWarning",
    "CompilationWarning",
    "NoveltyWarning",
    "PrecisionWarning",
]

# TensorFlow- and matplotlib-heavy parts load on first use, so ``import lnn``
# stays light: name -> the module that defines it, and the lazily imported modules.
_LAZY = {
    "LagrangianNetwork": "lnn.models",
    "Ensemble": "lnn.models",
    "load_model": "lnn.models",
    "AccelerationMLP": "lnn.baseline",
    "fit": "lnn.train",
    "History": "lnn.train",
    "evaluate": "lnn.metrics",
    "identify": "lnn.identification",
    "IdentifiedModel": "lnn.identification",
}
_LAZY_MODULES = {
    "mechanics": "lnn.mechanics",
    "metrics": "lnn.metrics",
    "plot": "lnn.plot",
    "baseline": "lnn.baseline",
    "export": "lnn.export",
}


def __getattr__(name):
    """Import the lazily exported names (see ``_LAZY``) on first access."""
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(_LAZY_MODULES[name])
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lnn' has no attribute {name!r}")
