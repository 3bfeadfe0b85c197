"""One multi-panel figure of an experiment: trajectory, phase portrait, energy, error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lnn.plot import _checks
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
from lnn.plot._style import PAGE_WIDTH, new_figure, style
from lnn.trajectory import Trajectory

__all__ = ["PaperFigure", "paper_figure"]


@dataclass(frozen=True)
class PaperFigure:
    """What :func:`paper_figure` drew: one figure, four panels (a)–(d).

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    trajectory : TrajectoryPlot
        (a) coordinates over time.
    phase : PhasePlot
        (b) phase portrait.
    energy : EnergyErrorPlot
        (c) energy error.
    error : RolloutErrorPlot
        (d) rollout error and valid prediction time.
    """

    figure: Any
    trajectory: TrajectoryPlot
    phase: PhasePlot
    energy: EnergyErrorPlot
    error: RolloutErrorPlot


def paper_figure(
    true: Trajectory,
    learned: Trajectory,
    *,
    system=None,
    coordinates=None,
    threshold: float = 0.1,
    angular=None,
    scale: float | None = None,
    fig=None,
) -> PaperFigure:
    """A page-wide 2 × 2 figure of one experiment, panels lettered (a)–(d).

    (a) :func:`trajectories`, (b) :func:`phase_portraits` of the first plotted
    coordinate, (c) :func:`energy_error` of the learned rollouts (against the
    true ones if ``system`` is given, else the energy drift of both), (d)
    :func:`rollout_error` with the valid prediction time.

    Parameters
    ----------
    true, learned : lnn.Trajectory
        Rollouts from the same initial states, ``q`` of shape ``(B, T, n)``.
    system : lnn.MechanicalSystem, keyword-only, optional
        The true system, for Cranmer et al.'s energy error.
    coordinates : int or sequence of int, keyword-only
        Coordinates in panel (a) (default: the first two).
    threshold : float, keyword-only
        Error level of the valid prediction time.
    angular : sequence of bool, keyword-only
        Which coordinates are angles (default from metadata or ``system``).
    scale : float, keyword-only
        Energy normaliser (see :func:`energy_error`).
    fig : matplotlib.figure.Figure, keyword-only
        Draw into this (empty) figure; default 7.0 × 4.6 inches.

    Returns
    -------
    PaperFigure
        The figure and the result of each panel.
    """
    true = _checks.as_trajectory(true, "true")
    learned = _checks.as_trajectory(learned, "learned")
    _checks.check_pair(true, learned)
    rows = _checks.coordinates(coordinates, true.n_dof, default_max=2)
    angular = _checks.angular_flags(angular, true.n_dof, true, system)
    with style():
        fig = fig if fig is not None else new_figure(PAGE_WIDTH, 4.6)
        top, bottom = fig.subfigures(2, 1, height_ratios=(1.15, 1.0))
        (a, b), (c, d) = top.subfigures(1, 2), bottom.subfigures(1, 2)
        panel_a = trajectories(true, learned, coordinates=rows, angular=angular, fig=a)
        panel_b = phase_portraits(true, learned, coordinates=rows[0], angular=angular, fig=b)
        if system is not None:
            panel_c = energy_error({"learned": learned}, reference=true, system=system, scale=scale, ax=c.add_subplot())
        else:
            panel_c = energy_error({"true": true, "learned": learned}, scale=scale, ax=c.add_subplot())
        panel_d = rollout_error(true, learned, threshold=threshold, angular=angular, ax=d.add_subplot())
        for letter, sub in zip("abcd", (a, b, c, d)):
            sub.suptitle(f"({letter})", x=0.0, ha="left", fontweight="bold")
    return PaperFigure(fig, panel_a, panel_b, panel_c, panel_d)
