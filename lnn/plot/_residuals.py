"""The torque residual a model leaves, per joint: against qd and q, over time, its spectrum and lags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lnn import residuals as _analysis
from lnn.plot import _checks
from lnn.plot._style import LEARNED_COLOR, PAGE_WIDTH, PALETTE, coordinate_units, force_units, new_figure, style

__all__ = ["PANELS", "ResidualPlot", "residuals"]

#: The panels of each row, in order.
PANELS = ("qd", "q", "time", "spectrum", "lag")


@dataclass(frozen=True)
class ResidualPlot:
    """What :func:`residuals` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    axes : list of list of matplotlib.axes.Axes
        One row per plotted joint, one axes per panel of :data:`panels`.
    panels : tuple of str
        The panels of a row: ``"qd"``, ``"q"``, ``"time"``, ``"spectrum"``, ``"lag"``.
    coordinates : list of int
        The joint of each row.
    analysis : lnn.residuals.ResidualAnalysis
        The analysis drawn.
    """

    figure: Any
    axes: list
    panels: tuple
    coordinates: list
    analysis: Any


def _axes_grid(axes, fig, rows: int):
    """The ``(rows, panels)`` axes to draw into: the given ones, or a new figure's."""
    if axes is not None:
        grid = np.asarray(axes, dtype=object)
        if grid.ndim == 1 and rows == 1:
            grid = grid[None]
        if grid.shape != (rows, len(PANELS)):
            raise ValueError(
                f"axes must be a ({rows}, {len(PANELS)}) grid of Axes (rows: joints, columns: {', '.join(PANELS)}), "
                f"got shape {grid.shape}"
            )
        return grid[0, 0].figure, [list(row) for row in grid]
    fig = fig if fig is not None else new_figure(PAGE_WIDTH, 0.5 + 1.55 * rows)
    grid = fig.subplots(rows, len(PANELS), squeeze=False)
    for column in (2, 3, 4):  # time, spectrum and lag share their x axes down the rows
        for row in range(1, rows):
            grid[row, column].sharex(grid[0, column])
    return fig, [list(row) for row in grid]


def _label(ax, text: str) -> None:
    """A label in the panel's top left corner, left out of the layout (a long one must not shrink the panels)."""
    label = ax.text(
        0.02,
        0.97,
        text,
        transform=ax.transAxes,
        va="top",
        ha="left",
        fontsize="small",
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1.0},
    )
    label.set_in_layout(False)


def _scatter(ax, x, y, curve, share: float, max_points: int, where: str = "") -> None:
    from matplotlib.ticker import MaxNLocator

    keep = np.unique(np.linspace(0, x.shape[0] - 1, min(x.shape[0], max_points)).astype(int))
    ax.scatter(x[keep], y[keep], s=1.0, color="0.6", linewidths=0, rasterized=True)
    ax.stairs(curve.mean, curve.edges, color=LEARNED_COLOR, linewidth=1.2, baseline=None)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    _label(ax, f"explained {100 * share:.0f} %{where}" if np.isfinite(share) else "")


def _time(ax, analysis, j: int) -> None:
    """The residual over the recordings laid end to end (a gap between two), each recording's mean."""
    bounds = np.r_[np.flatnonzero(np.r_[True, np.diff(analysis.trajectory) != 0]), analysis.trajectory.shape[0]]
    offset = 0.0
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        t = analysis.t[a:b] - analysis.t[a] + offset
        ax.plot(t, analysis.residual[a:b, j], color="0.45", linewidth=0.4, rasterized=True)
        ax.plot([t[0], t[-1]], [analysis.recording_mean[k, j]] * 2, color=LEARNED_COLOR, linewidth=1.2)
        if k:
            ax.axvline(offset, color="0.2", linewidth=0.5, linestyle=":")
        offset = t[-1] + analysis.dt
    share = analysis.bias_share[j]
    _label(ax, f"bias per recording {100 * share:.0f} %" if np.isfinite(share) else "")


def _spectrum(ax, analysis, j: int, first_row: bool) -> None:
    """Welch spectra (the zero frequency left out of the log axis): residual, measured torque, model."""
    frequency, floor = analysis.frequency[1:], np.finfo(float).tiny
    spectra = (
        ("measured $\\tau$", analysis.tau_psd, "0.6", "-"),
        ("model", analysis.predicted_psd, LEARNED_COLOR, ":"),
        ("residual", analysis.psd, PALETTE["blue"], "-"),
    )
    for label, psd, color, linestyle in spectra:
        ax.loglog(frequency, np.maximum(psd[1:, j], floor), color=color, linestyle=linestyle, label=label)
    ax.axvline(analysis.median_frequency[j], color=PALETTE["blue"], linewidth=0.8, linestyle="--")
    spectral = analysis.n_recordings if analysis.spectral is None else int(np.sum(analysis.spectral))
    which = "" if spectral == analysis.n_recordings else f"\n{spectral} of {analysis.n_recordings} logs (one rate)"
    _label(ax, f"half below {analysis.median_frequency[j]:.2g} Hz{which}")
    if first_row:
        ax.legend(loc="lower left", fontsize="x-small")


def _lags(ax, analysis, j: int, first_row: bool) -> None:
    lags = analysis.lags * 1e3
    corr, shift = analysis.xcorr_qd[:, j], analysis.shift_share[:, j]
    ax.plot(lags, corr, color=PALETTE["blue"], label=r"corr$(r, \dot q(t + \ell))$")
    ax.plot(lags, shift, color=PALETTE["bluish green"], label=r"share won, $\tau(t + \ell)$")
    peak = int(np.argmax(np.abs(corr)))
    best = int(np.argmax(shift))
    ax.plot(lags[peak], corr[peak], "o", color=PALETTE["blue"], markersize=4)
    ax.plot(lags[best], shift[best], "s", color=PALETTE["bluish green"], markersize=4)
    ax.axvline(0.0, color="0.2", linewidth=0.5)
    ax.set_ylim(-1.05, 1.05)  # a share and a correlation: shifts far from the best are far below -1
    if first_row:
        ax.legend(loc="lower left", fontsize="x-small")


def residuals(
    model,
    data=None,
    *,
    coordinates=None,
    folds: int = 5,
    bins: int = 32,
    max_lag: float = 0.1,
    block: float = 2.0,
    segment: float = 4.0,
    by: str = "blocks",
    max_points: int = 4000,
    axes=None,
    fig=None,
) -> ResidualPlot:
    """The torque residual of a model on a dataset, one row per joint, five panels per row.

    Panels (:data:`PANELS`): the residual against ``qd_j`` with its binned
    conditional mean (the share a function of ``qd_j`` explains on held-out
    blocks), against ``q_j`` (same), over time (the recordings end to end, a
    dotted line between two, each recording's mean), its Welch spectrum
    (dashed: the frequency below which half its power lies), and at lags
    ``l``: its correlation with ``qd_j(t + l)`` (circle: the peak) and the
    share of its variance won by reading the torque stream at ``t + l``
    (square: the best lag). The numbers are those of
    :func:`lnn.residuals.analyze`.

    Parameters
    ----------
    model : object or lnn.residuals.ResidualAnalysis
        Anything with ``inverse_dynamics(q, qd, qdd)``; or an analysis
        already made (then ``data`` must be ``None``).
    data : lnn.Dataset
        ``t (N,)``, ``q, qd, qdd, tau (N, n)``, recording ids ``trajectory (N,)``.
    coordinates : int or sequence of int, keyword-only
        Joints to plot, one row each (default: all, at most 4).
    folds, bins, max_lag, block, segment, by : keyword-only
        Options of :func:`lnn.residuals.analyze` (unused with an analysis);
        ``by="recordings"``: the shares of whole recordings held out (what
        carries over to a new log), labelled "on new logs".
    max_points : int, keyword-only
        Most samples drawn in each scatter panel (evenly strided).
    axes : array_like of matplotlib.axes.Axes, shape ``(rows, 5)``, keyword-only
        Draw into these axes (a row per joint of ``coordinates``); by default a new figure.
    fig : matplotlib.figure.Figure or SubFigure, keyword-only
        Draw into this (empty) figure instead of a new one (ignored with ``axes``).

    Returns
    -------
    ResidualPlot
        Figure, axes ``(rows, 5)``, panel names, the joints and the analysis.
    """
    if isinstance(model, _analysis.ResidualAnalysis):
        if data is not None:
            raise ValueError("data must be None when model is a ResidualAnalysis (it holds its data)")
        analysis = model
    else:
        if data is None:
            raise TypeError("residuals needs data (an lnn.Dataset) to analyse the model on")
        analysis = _analysis.analyze(
            model, data, folds=folds, bins=bins, max_lag=max_lag, block=block, segment=segment, by=by
        )
    if isinstance(max_points, (bool, np.bool_)) or not isinstance(max_points, (int, np.integer)) or max_points < 2:
        raise ValueError(f"max_points must be an integer >= 2, got {max_points!r}")
    n = analysis.n_dof
    rows = _checks.coordinates(coordinates, n, default_max=4)
    q_units, tau_units = coordinate_units(analysis.angular, n), force_units(analysis.angular, n)
    with style():
        figure, grid = _axes_grid(axes, fig, len(rows))
        for r, j in enumerate(rows):
            ax = dict(zip(PANELS, grid[r]))
            y = analysis.residual[:, j]
            where = "\non new logs" if analysis.by == "recordings" else ""
            _scatter(ax["qd"], analysis.qd[:, j], y, analysis.qd_mean[j], analysis.qd_share[j], max_points, where)
            _scatter(ax["q"], analysis.q[:, j], y, analysis.q_mean[j], analysis.q_share[j], max_points, where)
            _time(ax["time"], analysis, j)
            _spectrum(ax["spectrum"], analysis, j, r == 0)
            _lags(ax["lag"], analysis, j, r == 0)
            ax["qd"].set_ylabel(f"$r_{{{j + 1}}}$ [{tau_units[j]}]")
            ax["qd"].set_xlabel(f"$\\dot q_{{{j + 1}}}$ [{q_units[j]}/s]")
            ax["q"].set_xlabel(f"$q_{{{j + 1}}}$ [{q_units[j]}]")
            ax["spectrum"].set_ylabel(f"PSD [{tau_units[j]}$^2$/Hz]")
        bottom = dict(zip(PANELS, grid[-1]))
        bottom["time"].set_xlabel("time, recordings end to end [s]")
        bottom["spectrum"].set_xlabel("frequency [Hz]")
        bottom["lag"].set_xlabel(r"lag $\ell$ [ms]")
    return ResidualPlot(figure, grid, PANELS, rows, analysis)
