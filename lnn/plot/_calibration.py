"""The reliability diagram of an ensemble's intervals: the share of held-out truths inside each nominal level."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lnn import uncertainty
from lnn.plot import _checks
from lnn.plot._style import COLUMN_WIDTH, PALETTE, new_figure, style

__all__ = ["LEVELS", "CalibrationPlot", "calibration"]

#: The nominal levels drawn by default: 5 % to 95 % in steps of 5 %.
LEVELS = tuple(round(0.05 * k, 2) for k in range(1, 20))
#: The outputs' symbols in the legend.
_SYMBOLS = {"qdd": r"\ddot q", "tau": r"\tau"}
#: One colour per coordinate.
_COLORS = (PALETTE["blue"], PALETTE["vermillion"], PALETTE["bluish green"], PALETTE["reddish purple"])


@dataclass(frozen=True)
class CalibrationPlot:
    """What :func:`calibration` drew and the coverages it drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    ax : matplotlib.axes.Axes
    output : str
        ``"qdd"`` or ``"tau"``.
    levels : numpy.ndarray, shape ``(L,)``
        The nominal levels.
    coverage : numpy.ndarray, shape ``(L, n)``
        Share of the samples' truths inside each level's interval, per coordinate.
    recordings : tuple
        The data's recordings (trajectory ids), when there are several (else empty).
    recording_coverage : numpy.ndarray ``(L, R, n)`` or None
        The same per recording (rows of ``recordings``).
    lines : dict of int to matplotlib.lines.Line2D
        The pooled curve of each plotted coordinate.
    """

    figure: Any
    ax: Any
    output: str
    levels: np.ndarray
    coverage: np.ndarray
    recordings: tuple
    recording_coverage: np.ndarray | None
    lines: dict


def calibration(
    model,
    data,
    *,
    output: str | None = None,
    levels=None,
    coordinates=None,
    recordings: bool = True,
    ax=None,
) -> CalibrationPlot:
    """Reliability diagram of an ensemble's calibrated intervals on held-out data.

    For each nominal level ``p`` the share of the truths inside the interval
    ``mean ± k std`` of :meth:`lnn.Ensemble.predict` (its calibrated tails),
    per coordinate; a calibrated model lies on the diagonal. With several
    recordings in ``data`` each one's curve is drawn thin beside the pooled
    one: how far one recording falls from the diagonal is what a user of one
    robot sees.

    Parameters
    ----------
    model : lnn.Ensemble or lnn.IdentifiedModel
        A model with ``predict(q, qd, *, tau, qdd)`` giving intervals
        (an ensemble, or ``identify(..., ensemble=K)``'s model).
    data : lnn.Dataset
        Held-out samples ``q, qd, qdd, tau`` ``(N, n)`` and ``trajectory``
        ``(N,)``.
    output : {"qdd", "tau"}, optional, keyword-only
        Which prediction (default ``"tau"`` when the data's torques vary,
        else ``"qdd"``).
    levels : sequence of float, optional, keyword-only
        Nominal levels in ``(0, 1)`` (default :data:`LEVELS`).
    coordinates : int or sequence of int, optional, keyword-only
        Coordinates to draw (default all, at most 4).
    recordings : bool, keyword-only
        Draw each recording's curve too (when there are several).
    ax : matplotlib.axes.Axes, optional, keyword-only
        Draw here (default a new figure).

    Returns
    -------
    CalibrationPlot

    Raises
    ------
    TypeError
        If ``model`` gives no intervals or ``data`` is not a dataset.
    ValueError
        If ``output`` or a level is not one of its values.
    """
    predict = getattr(model, "predict", None)
    if not callable(predict) or not hasattr(getattr(model, "network", model), "members"):
        raise TypeError(
            f"calibration draws an ensemble's intervals; got a {type(model).__name__} "
            "(train lnn.Ensemble, or identify(..., ensemble=K))"
        )
    try:
        q, qd, qdd, tau = (np.asarray(getattr(data, name), np.float64) for name in ("q", "qd", "qdd", "tau"))
    except AttributeError:
        raise TypeError(f"data must be an lnn.Dataset (q, qd, qdd, tau), got {type(data).__name__}") from None
    if output is None:
        output = "tau" if np.any(np.var(tau, axis=0) > 0) else "qdd"
    if output not in ("qdd", "tau"):
        raise ValueError(f"output must be 'qdd' or 'tau', got {output!r}")
    levels = np.asarray(LEVELS if levels is None else levels, np.float64).reshape(-1)
    if levels.size == 0 or np.any(~((levels > 0) & (levels < 1))):
        raise ValueError(f"levels must lie in (0, 1), got {levels.tolist()}")
    n = q.shape[-1]
    shown = _checks.coordinates(coordinates, n, default_max=4)

    prediction = predict(q, qd, tau=tau, qdd=qdd)
    truth = qdd if output == "qdd" else tau
    mean, std = getattr(prediction, output), getattr(prediction, f"{output}_std")
    dof = getattr(prediction, f"{output}_dof", None)
    dof = np.inf if dof is None else dof
    covered = np.stack([uncertainty.coverage(truth, mean, std, level, dof) for level in levels])
    trajectory = getattr(data, "trajectory", None)
    labels = () if trajectory is None else tuple(label.item() for label in np.unique(trajectory))
    by_recording = None
    if len(labels) > 1:
        by_recording = np.stack(
            [uncertainty.coverage_by_recording(truth, mean, std, trajectory, level, dof) for level in levels]
        )
    else:
        labels = ()

    lines = {}
    with style():
        if ax is None:
            ax = new_figure(COLUMN_WIDTH, COLUMN_WIDTH).subplots()
        ax.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=0.8, label="nominal")
        for k, j in enumerate(shown):
            color = _COLORS[k % len(_COLORS)]
            if recordings and by_recording is not None:
                for r in range(by_recording.shape[1]):
                    ax.plot(levels, by_recording[:, r, j], color=color, linewidth=0.5, alpha=0.35)
            label = f"${_SYMBOLS[output]}_{j + 1}$"
            (lines[j],) = ax.plot(levels, covered[:, j], color=color, marker="o", markersize=2.5, label=label)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("nominal level")
        ax.set_ylabel("share of truths inside")
        title = "thin: each recording" if recordings and by_recording is not None else None
        ax.legend(loc="upper left", fontsize="small", title=title, title_fontsize="small")
    return CalibrationPlot(
        figure=ax.figure,
        ax=ax,
        output=output,
        levels=levels,
        coverage=covered,
        recordings=labels,
        recording_coverage=by_recording,
        lines=lines,
    )
