"""Figures of trajectories over time: states, phase portraits, energy and rollout error."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lnn import metrics
from lnn.plot import _checks
from lnn.plot._style import COLUMN_WIDTH, LEARNED_COLOR, PALETTE, TRUE_COLOR, coordinate_units, new_figure, style
from lnn.trajectory import EnsembleTrajectory, Trajectory

__all__ = [
    "TrajectoryPlot",
    "PhasePlot",
    "EnergyErrorPlot",
    "RolloutErrorPlot",
    "trajectories",
    "phase_portraits",
    "energy_error",
    "rollout_error",
]

_SUMMARIES = ("auto", "lines", "band")
#: Batches larger than this are summarised by a median and band under ``summary="auto"``.
_MAX_LINES = 8
_BAND = (25.0, 75.0)


@dataclass(frozen=True)
class TrajectoryPlot:
    """What :func:`trajectories` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    axes : list of matplotlib.axes.Axes
        One row per plotted coordinate, sharing the time axis.
    true_artists, learned_artists : list of list of matplotlib.artist.Artist
        Per row, the lines (and bands) of the true and learned trajectories.
    band_artists : list of list of matplotlib.artist.Artist
        Per row, the members' 90 % bands around the learned mean, one per
        trajectory (``learned`` an :class:`lnn.EnsembleTrajectory` drawn as
        lines); empty otherwise.
    """

    figure: Any
    axes: list
    true_artists: list
    learned_artists: list = field(default_factory=list)
    band_artists: list = field(default_factory=list)


@dataclass(frozen=True)
class PhasePlot:
    """What :func:`phase_portraits` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    axes : list of matplotlib.axes.Axes
        One panel ``(q_i, qd_i)`` per plotted coordinate.
    true_artists, learned_artists : list of list of matplotlib.artist.Artist
        Per panel, the curves of the true and learned trajectories.
    member_artists : list of list of matplotlib.artist.Artist
        Per panel, every member's curve (thin) when ``learned`` is an
        :class:`lnn.EnsembleTrajectory`; empty otherwise.
    """

    figure: Any
    axes: list
    true_artists: list
    learned_artists: list = field(default_factory=list)
    member_artists: list = field(default_factory=list)


@dataclass(frozen=True)
class EnergyErrorPlot:
    """What :func:`energy_error` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    ax : matplotlib.axes.Axes
    lines : dict of str to list of matplotlib.artist.Artist
        Per label, its curve(s) and band.
    errors : dict of str to ndarray, shape ``(B, T)``
        Per label, the normalised energy error that was plotted.
    bands : dict of str to list of matplotlib.artist.Artist
        Per label of an :class:`lnn.EnsembleTrajectory`, the band between the
        smallest and largest of its members' errors, per trajectory (lines only).
    """

    figure: Any
    ax: Any
    lines: dict
    errors: dict
    bands: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RolloutErrorPlot:
    """What :func:`rollout_error` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    ax : matplotlib.axes.Axes
    lines : dict of str to list of matplotlib.artist.Artist
        Per label, its curve(s), band and valid-time marker.
    errors : dict of str to ndarray, shape ``(B, T)``
        Per label, the relative state error of each trajectory.
    valid_time : dict of str to float
        Per label, the median over the batch of the valid prediction time in
        seconds (:func:`lnn.metrics.valid_prediction_time`; the rollout's
        duration for a trajectory whose error never exceeds ``threshold``).
    """

    figure: Any
    ax: Any
    lines: dict
    errors: dict
    valid_time: dict


# --------------------------------------------------------------------------- helpers
def _summary(summary: str, batch: int) -> str:
    if summary not in _SUMMARIES:
        raise ValueError(f"summary must be one of {_SUMMARIES}, got {summary!r}")
    if summary == "auto":
        return "lines" if batch <= _MAX_LINES else "band"
    return summary


def _center(values: np.ndarray, how: str) -> np.ndarray:
    """Median (or geometric mean of the positive values) over the batch; all-NaN columns give NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if how == "geometric":
            return np.exp(np.nanmean(np.log(np.where(values > 0, values, np.nan)), axis=0))
        return np.nanmedian(values, axis=0)


def _draw_batch(ax, t, values, *, color, linestyle, summary, label, center="median"):
    """Draw ``values`` ``(B, T)`` over ``t`` as thin lines or as a centre line with a band."""
    artists = []
    if summary == "lines":
        alpha = 1.0 if values.shape[0] == 1 else max(0.25, 1.0 / np.sqrt(values.shape[0]))
        for b, row in enumerate(values):
            (line,) = ax.plot(t, row, color=color, linestyle=linestyle, alpha=alpha, label=label if b == 0 else None)
            artists.append(line)
        return artists
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (e.g. zero error at t=0)
        low, high = np.nanpercentile(values, _BAND, axis=0)
    artists.append(ax.fill_between(t, low, high, color=color, alpha=0.2, linewidth=0))
    (line,) = ax.plot(t, _center(values, center), color=color, linestyle=linestyle, label=label)
    artists.append(line)
    return artists


def _member_band(ax, t, learned, name: str, index: int, *, color, level: float = 0.9) -> list:
    """The members' nominal ``level`` band of ``name[..., index]`` of an ensemble rollout, one per trajectory."""
    band = learned.band(name, level=level)
    return [
        ax.fill_between(
            t, low, high, color=color, alpha=0.18, linewidth=0, label=f"{100 * level:g} % band" if b == 0 else None
        )
        for b, (low, high) in enumerate(zip(band.lower[..., index], band.upper[..., index]))
    ]


def _label_color(label: str, k: int) -> str:
    """Black for "true", vermillion for "learned", else the k-th palette colour."""
    fixed = {"true": TRUE_COLOR, "learned": LEARNED_COLOR}
    if label in fixed:
        return fixed[label]
    others = [c for c in PALETTE.values() if c not in fixed.values()]
    return others[k % len(others)]


def _figure(fig, width, height):
    return new_figure(width, height) if fig is None else fig


def _axes(ax, width=COLUMN_WIDTH, height=2.2):
    if ax is None:
        fig = new_figure(width, height)
        return fig, fig.add_subplot()
    return ax.figure, ax


def _dot(units: str) -> str:
    return f"{units}/s"


# --------------------------------------------------------------------------- figures
def trajectories(
    true: Trajectory,
    learned: Trajectory | None = None,
    *,
    coordinates=None,
    velocities: bool = False,
    summary: str = "auto",
    angular=None,
    fig=None,
) -> TrajectoryPlot:
    """Coordinates over time, true (solid black) against learned (dashed vermillion).

    Parameters
    ----------
    true : lnn.Trajectory
        Ground-truth rollouts, ``q`` of shape ``(B, T, n)``.
    learned : lnn.Trajectory, optional
        Learned-model rollouts from the same initial states, same shapes and
        time grid. An :class:`lnn.EnsembleTrajectory` (the rollout of an
        :class:`lnn.Ensemble`) is drawn as its mean with the members' 90 %
        band around each trajectory.
    coordinates : int or sequence of int, keyword-only
        Which coordinates to plot, one row each (default: all).
    velocities : bool, keyword-only
        Plot ``qd`` instead of ``q``.
    summary : {"auto", "lines", "band"}, keyword-only
        Several trajectories as transparent lines, or as the median with the
        interquartile band; ``"auto"`` picks lines for up to 8 trajectories.
    angular : sequence of bool, keyword-only
        Which coordinates are angles (labels in rad, else m); default from
        ``true.metadata["angular"]``, else all angles.
    fig : matplotlib.figure.Figure or SubFigure, keyword-only
        Draw into this (empty) figure; a new single-column figure by default.

    Returns
    -------
    TrajectoryPlot
        The figure, one axes per coordinate (shared time axis) and the artists.
    """
    true = _checks.as_trajectory(true, "true")
    if learned is not None:
        learned = _checks.as_trajectory(learned, "learned")
        _checks.check_pair(true, learned)
    rows = _checks.coordinates(coordinates, true.n_dof)
    mode = _summary(summary, true.n_trajectories)
    units = coordinate_units(_checks.angular_flags(angular, true.n_dof, true), true.n_dof)
    with style():
        fig = _figure(fig, COLUMN_WIDTH, 0.4 + 1.0 * len(rows))
        axes = list(np.atleast_1d(fig.subplots(len(rows), 1, sharex=True, squeeze=False)[:, 0]))
        true_artists, learned_artists, band_artists = [], [], []
        for ax, i in zip(axes, rows):
            field_name = "qd" if velocities else "q"
            if isinstance(learned, EnsembleTrajectory) and mode == "lines":
                band_artists.append(_member_band(ax, learned.t, learned, field_name, i, color=LEARNED_COLOR))
            true_artists.append(
                _draw_batch(
                    ax,
                    true.t,
                    getattr(true, field_name)[..., i],
                    color=TRUE_COLOR,
                    linestyle="-",
                    summary=mode,
                    label="true",
                )
            )
            if learned is not None:
                learned_artists.append(
                    _draw_batch(
                        ax,
                        learned.t,
                        getattr(learned, field_name)[..., i],
                        color=LEARNED_COLOR,
                        linestyle="--",
                        summary=mode,
                        label="learned",
                    )
                )
            symbol = rf"\dot q_{{{i + 1}}}" if velocities else rf"q_{{{i + 1}}}"
            unit = _dot(units[i]) if velocities else units[i]
            ax.set_ylabel(f"${symbol}$ [{unit}]")
        axes[-1].set_xlabel("time $t$ [s]")
        axes[0].set_xlim(true.t[0], true.t[-1])
        if learned is not None:
            axes[0].legend(loc="upper right", ncols=2)
    return TrajectoryPlot(fig, axes, true_artists, learned_artists, band_artists)


def phase_portraits(
    true: Trajectory,
    learned: Trajectory | None = None,
    *,
    coordinates=None,
    angular=None,
    max_lines: int = _MAX_LINES,
    fig=None,
) -> PhasePlot:
    """Phase portraits ``(q_i, qd_i)``, one panel per coordinate, true against learned.

    Parameters
    ----------
    true : lnn.Trajectory
        Ground-truth rollouts, ``q`` and ``qd`` of shape ``(B, T, n)``.
    learned : lnn.Trajectory, optional
        Learned rollouts from the same initial states, same shapes; an
        :class:`lnn.EnsembleTrajectory` adds every member's curve, thin.
    coordinates : int or sequence of int, keyword-only
        Coordinates to plot, one panel each (default: all, at most 4).
    angular : sequence of bool, keyword-only
        Which coordinates are angles (for units); default from metadata.
    max_lines : int, keyword-only
        Plot at most this many trajectories of the batch (the first ones).
    fig : matplotlib.figure.Figure or SubFigure, keyword-only
        Draw into this (empty) figure.

    Returns
    -------
    PhasePlot
        The figure, one axes per coordinate and the artists; a circle marks
        each initial state.
    """
    true = _checks.as_trajectory(true, "true")
    if learned is not None:
        learned = _checks.as_trajectory(learned, "learned")
        _checks.check_pair(true, learned)
    if not isinstance(max_lines, (int, np.integer)) or max_lines < 1:
        raise ValueError(f"max_lines must be a positive integer, got {max_lines!r}")
    cols = _checks.coordinates(coordinates, true.n_dof, default_max=4)
    units = coordinate_units(_checks.angular_flags(angular, true.n_dof, true), true.n_dof)
    count = min(true.n_trajectories, int(max_lines))
    alpha = 1.0 if count == 1 else max(0.3, 1.0 / np.sqrt(count))
    with style():
        fig = _figure(fig, COLUMN_WIDTH if len(cols) <= 2 else 1.6 * len(cols), 1.9)
        axes = list(fig.subplots(1, len(cols), squeeze=False)[0])
        true_artists, learned_artists, member_artists = [], [], []
        for ax, i in zip(axes, cols):
            if isinstance(learned, EnsembleTrajectory):
                member_artists.append(_member_curves(ax, learned, i, count))
            drawn = []
            for b in range(count):
                drawn += ax.plot(
                    true.q[b, :, i], true.qd[b, :, i], color=TRUE_COLOR, alpha=alpha, label="true" if b == 0 else None
                )
            drawn.append(ax.scatter(true.q[:count, 0, i], true.qd[:count, 0, i], s=8, color=TRUE_COLOR, zorder=3))
            true_artists.append(drawn)
            if learned is not None:
                drawn = []
                for b in range(count):
                    drawn += ax.plot(
                        learned.q[b, :, i],
                        learned.qd[b, :, i],
                        color=LEARNED_COLOR,
                        linestyle="--",
                        alpha=alpha,
                        label="learned" if b == 0 else None,
                    )
                learned_artists.append(drawn)
            ax.set_xlabel(f"$q_{{{i + 1}}}$ [{units[i]}]")
            ax.set_ylabel(rf"$\dot q_{{{i + 1}}}$ [{_dot(units[i])}]")
        if learned is not None:
            axes[0].legend(loc="best")
    return PhasePlot(fig, axes, true_artists, learned_artists, member_artists)


def _member_curves(ax, learned: EnsembleTrajectory, i: int, count: int) -> list:
    """Every member's phase curve ``(q_i, qd_i)`` of the first ``count`` trajectories, thin and faint."""
    drawn = []
    for k in range(learned.n_members):
        for b in range(count):
            drawn += ax.plot(
                learned.member_q[k, b, :, i],
                learned.member_qd[k, b, :, i],
                color=LEARNED_COLOR,
                linewidth=0.4,
                alpha=0.3,
                label="members" if k == 0 and b == 0 else None,
            )
    return drawn


def _energies(trajectory: Trajectory, system) -> np.ndarray:
    if system is None:
        return np.asarray(trajectory.energy, dtype=float)
    energy = _checks.to_numpy(system.energy(trajectory.q, trajectory.qd))
    if energy.shape != trajectory.energy.shape:
        raise ValueError(f"system.energy(q, qd) must have shape {trajectory.energy.shape}, got {energy.shape}")
    return energy


def energy_error(
    rollouts,
    *,
    reference: Trajectory | None = None,
    system=None,
    scale: float | None = None,
    summary: str = "auto",
    ax=None,
) -> EnergyErrorPlot:
    """Normalised energy error over time (log scale) of one or several models.

    Without ``reference`` the error is the drift ``|E(t) - E(0)| / scale``
    of each rollout. With a ``reference`` (the true rollouts from the same
    initial states) and the true ``system`` it is Cranmer et al.'s
    ``|E(x_pred(t)) - E(x_true(t))| / scale`` of :func:`lnn.metrics.energy_error`;
    both agree for a conservative system, the latter also holds with damping
    or torques.

    Parameters
    ----------
    rollouts : lnn.Trajectory or mapping of str to lnn.Trajectory
        One curve (or median and band) per label, e.g. ``{"LNN": ..., "MLP": ...}``;
        each ``q``, ``qd`` of shape ``(B, T, n)``. An
        :class:`lnn.EnsembleTrajectory` is drawn as the error of its mean with
        the band between its members' smallest and largest errors.
    reference : lnn.Trajectory, keyword-only, optional
        True rollouts ``(B, T, n)`` from the same initial states; needs ``system``.
    system : lnn.MechanicalSystem, keyword-only, optional
        The true system: the energy is evaluated as ``system.energy(q, qd)``
        along every rollout (e.g. the true energy along a learned rollout);
        without it each trajectory's own ``energy`` ``(B, T)`` is used.
    scale : float, keyword-only, optional
        Normaliser, e.g. the maximal potential energy (29.4 J for Cranmer's
        double pendulum). Default: with ``reference``, the largest ``|V|``
        along it; otherwise, per label, the largest ``|E(0)|`` of the batch.
    summary : {"auto", "lines", "band"}, keyword-only
        Several trajectories as lines, or median with the interquartile band.
    ax : matplotlib.axes.Axes, keyword-only
        Draw into these axes (a new single-column figure by default).

    Returns
    -------
    EnergyErrorPlot
        The figure, axes, the artists and the plotted errors per label.
    """
    rollouts = _checks.as_labelled(rollouts, "rollouts", "rollout")
    if scale is not None:
        scale = _checks.positive(scale, "scale")
    if reference is not None:
        reference = _checks.as_trajectory(reference, "reference")
        if system is None:
            raise ValueError("energy_error with a reference needs the true system=, got system=None")
    errors, lines, bands = {}, {}, {}
    with style():
        fig, ax = _axes(ax)
        for k, (label, trajectory) in enumerate(rollouts.items()):
            error = _energy_error(trajectory, reference, system, scale)
            errors[label] = error
            mode = _summary(summary, trajectory.n_trajectories)
            if isinstance(trajectory, EnsembleTrajectory) and mode == "lines":
                members = np.stack(
                    [_energy_error(trajectory.member(m), reference, system, scale) for m in range(trajectory.n_members)]
                )
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    low, high = np.nanmin(members, axis=0), np.nanmax(members, axis=0)
                color = _label_color(label, k)
                bands[label] = [
                    ax.fill_between(
                        trajectory.t, np.where(lo > 0, lo, np.nan), hi, color=color, alpha=0.18, linewidth=0
                    )
                    for lo, hi in zip(low, high)
                ]
            lines[label] = _draw_batch(
                ax,
                trajectory.t,
                np.where(error > 0, error, np.nan),
                color=_label_color(label, k),
                linestyle="-",
                summary=mode,
                label=label,
            )
        ax.set_yscale("log")
        ax.set_xlim(trajectory.t[0], trajectory.t[-1])
        ax.set_xlabel("time $t$ [s]")
        if reference is not None:
            what = r"|E(\hat x(t)) - E(x(t))|\,/\,V_\mathrm{max}"
        elif scale is None:
            what = r"|E(t) - E(0)|\,/\,|E_0|"
        else:
            what = r"|E(t) - E(0)|\,/\,E_\mathrm{ref}"
        ax.set_ylabel(f"${what}$ [1]")
        if len(rollouts) > 1 or next(iter(rollouts)) != "rollout":
            ax.legend(loc="lower right")
    return EnergyErrorPlot(fig, ax, lines, errors, bands)


def _energy_error(trajectory: Trajectory, reference, system, scale) -> np.ndarray:
    """The normalised energy error ``(B, T)`` of :func:`energy_error` (against ``reference`` or the drift)."""
    if reference is not None:
        return metrics.energy_error(system, trajectory, reference, scale=scale).error
    energy = _energies(trajectory, system)
    norm = scale if scale is not None else float(np.max(np.abs(energy[:, 0]))) or 1.0
    return np.abs(energy - energy[:, :1]) / norm


def rollout_error(
    true: Trajectory, learned, *, threshold: float = 0.1, angular=None, summary: str = "band", ax=None
) -> RolloutErrorPlot:
    """Growth of the rollout error over time (log scale), valid prediction time marked.

    The error is :func:`lnn.metrics.rollout_error`: the bounded relative
    error ``||x_learned - x_true|| / (||x_true|| + ||x_learned||)`` of the
    state ``x = [q, qd]`` (Finzi et al. 2020), angles wrapped. The centre line
    is the geometric mean over the batch; a dotted vertical line marks the
    median over the batch of the valid prediction time, the first time each
    trajectory's error exceeds ``threshold`` (the rollout's duration if never).

    Parameters
    ----------
    true : lnn.Trajectory
        Ground-truth rollouts, ``q``, ``qd`` of shape ``(B, T, n)``.
    learned : lnn.Trajectory or mapping of str to lnn.Trajectory
        Rollouts of one or several models from the same initial states.
    threshold : float, keyword-only
        Error level (in ``(0, 1)``) that ends the valid prediction time.
    angular : sequence of bool, keyword-only
        Which coordinates are angles; default from ``true.metadata["angular"]``,
        else none are wrapped.
    summary : {"auto", "lines", "band"}, keyword-only
        Geometric mean with interquartile band, or one line per trajectory.
    ax : matplotlib.axes.Axes, keyword-only
        Draw into these axes.

    Returns
    -------
    RolloutErrorPlot
        Figure, axes, artists, errors ``(B, T)`` and valid prediction time per label.
    """
    true = _checks.as_trajectory(true, "true")
    learned = _checks.as_labelled(learned, "learned", "learned")
    threshold = _checks.positive(threshold, "threshold")
    if threshold >= 1:
        raise ValueError(f"threshold must lie in (0, 1) (the error is bounded by 1), got {threshold!r}")
    flags = _checks.angular_flags(angular, true.n_dof, true)
    errors, lines, valid = {}, {}, {}
    with style():
        fig, ax = _axes(ax)
        for k, (label, rollout) in enumerate(learned.items()):
            _checks.check_pair(true, rollout, f"learned[{label!r}]")
            measured = metrics.rollout_error(rollout, true, threshold=threshold, angular=flags)
            errors[label] = measured.relative
            color = _label_color(label, k)
            drawn = _draw_batch(
                ax,
                true.t,
                np.where(measured.relative > 0, measured.relative, np.nan),
                color=color,
                linestyle="-",
                summary=_summary(summary, true.n_trajectories),
                label=label,
                center="geometric",
            )
            valid[label] = float(np.median(measured.valid_time))
            at = true.t[0] + valid[label]
            right = at > 0.5 * (true.t[0] + true.t[-1])
            drawn.append(ax.axvline(at, color=color, linestyle=":", linewidth=1.0))
            drawn.append(
                ax.annotate(
                    f"$t_\\mathrm{{valid}}$ = {valid[label]:.2g} s",
                    (at, 1.0),
                    xycoords=ax.get_xaxis_transform(),
                    xytext=(-3 if right else 3, -3 - 9 * k),
                    textcoords="offset points",
                    ha="right" if right else "left",
                    va="top",
                    color=color,
                    fontsize="small",
                )
            )
            lines[label] = drawn
        ax.axhline(threshold, color=TRUE_COLOR, linestyle=":", linewidth=0.6)
        ax.set_yscale("log")
        ax.set_xlim(true.t[0], true.t[-1])
        ax.set_xlabel("time $t$ [s]")
        ax.set_ylabel(r"relative state error [1]")
        if len(learned) > 1 or next(iter(learned)) != "learned":
            ax.legend(loc="lower right")
    return RolloutErrorPlot(fig, ax, lines, errors, valid)
