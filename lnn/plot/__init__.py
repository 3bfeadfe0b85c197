"""Figures and animations for papers and talks.

Every function builds its figure without ``pyplot`` (a
:class:`matplotlib.figure.Figure`, or the ``ax``/``fig`` you pass), applies the
publication style of :func:`style` only while drawing (your ``rcParams`` are
left untouched), never shows anything, and returns a small frozen dataclass
naming what it drew. Write figures with :func:`save` (PNG at 300 dpi, PDF or
SVG by suffix) and animations with :func:`save_animation` (GIF, or MP4 where
ffmpeg exists).

Importing this module is light: matplotlib is imported when a function runs.

==============================  ===============================================
:func:`trajectories`            coordinates over time, true vs learned
:func:`phase_portraits`         ``(q_i, qd_i)`` per coordinate
:func:`energy_error`            normalised energy drift of several models (log)
:func:`rollout_error`           error growth with the valid prediction time (log)
:func:`mass_matrix`             learned vs true ``M(q)`` along a configuration slice
:func:`potential`               ``V(q)`` landscape for one or two coordinates
:func:`torques`                 inertial / Coriolis / gravity / friction torques
:func:`history`                 training curves from a ``History`` or CSV log
:func:`animate`                 pendulums, cart-pole, arms (2-D) or robots (3-D)
:func:`paper_figure`            trajectory, phase, energy and error in one figure
:func:`residuals`               a model's torque residual vs qd and q, in time, spectrum, lags
:func:`calibration`             reliability diagram of an ensemble's intervals on held-out data
:class:`RolloutPair`            true and learned rollouts from the same states (.npz)
==============================  ===============================================
"""

from lnn.plot._animation import Animation, animate, save_animation
from lnn.plot._calibration import CalibrationPlot, calibration
from lnn.plot._history import HistoryPlot, history
from lnn.plot._mechanics import (
    MassMatrixPlot,
    PotentialPlot,
    TorqueDecomposition,
    TorquePlot,
    mass_matrix,
    potential,
    torque_decomposition,
    torques,
)
from lnn.plot._pair import RolloutPair
from lnn.plot._paper import PaperFigure, paper_figure
from lnn.plot._residuals import ResidualPlot, residuals
from lnn.plot._series import (
    EnergyErrorPlot,
    PhasePlot,
    RolloutErrorPlot,
    TrajectoryPlot,
    energy_error,
    phase_portraits,
    rollout_error,
    trajectories,
)
from lnn.plot._style import COLUMN_WIDTH, LEARNED_COLOR, PAGE_WIDTH, PALETTE, TRUE_COLOR, new_figure, save, style

__all__ = [
    "PALETTE",
    "TRUE_COLOR",
    "LEARNED_COLOR",
    "COLUMN_WIDTH",
    "PAGE_WIDTH",
    "style",
    "save",
    "new_figure",
    "trajectories",
    "phase_portraits",
    "energy_error",
    "rollout_error",
    "TrajectoryPlot",
    "PhasePlot",
    "EnergyErrorPlot",
    "RolloutErrorPlot",
    "mass_matrix",
    "potential",
    "torques",
    "torque_decomposition",
    "MassMatrixPlot",
    "PotentialPlot",
    "TorquePlot",
    "TorqueDecomposition",
    "history",
    "HistoryPlot",
    "animate",
    "save_animation",
    "Animation",
    "paper_figure",
    "PaperFigure",
    "residuals",
    "ResidualPlot",
    "calibration",
    "CalibrationPlot",
    "RolloutPair",
]
