"""Training curves from a :class:`lnn.train.History` or the CSV log of ``lnn train``."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lnn.plot._style import COLUMN_WIDTH, PALETTE, new_figure, style

__all__ = ["HistoryPlot", "history"]


@dataclass(frozen=True)
class HistoryPlot:
    """What :func:`history` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    ax : matplotlib.axes.Axes
    lines : dict of str to matplotlib.lines.Line2D
        ``"train_<term>"`` and ``"val_<term>"`` curves.
    best_epoch : int or None
        Epoch of the lowest validation total (training total without
        validation), marked with a dot; ``None`` if there is no total.
    """

    figure: Any
    ax: Any
    lines: dict
    best_epoch: int | None


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise FileNotFoundError(f"no such training log: {str(path)!r}")
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"cannot read {str(path)!r} as a CSV training log: {exc}") from exc
    if not rows or "epoch" not in rows[0]:
        raise ValueError(
            f"{str(path)!r} is not a training log: it needs a header with an 'epoch' column and at least one row"
        )
    columns = {}
    for name in rows[0]:
        try:
            columns[name] = np.array([float(row[name]) if row[name] not in ("", None) else math.nan for row in rows])
        except ValueError as exc:
            raise ValueError(f"{str(path)!r}: column {name!r} is not numeric ({exc})") from None
    return columns


def _columns(source) -> dict[str, np.ndarray]:
    """``epoch`` and ``train_<term>`` / ``val_<term>`` columns from any supported source."""
    if isinstance(source, (str, Path)):
        columns = _read_csv(Path(source))
    elif hasattr(source, "epoch") and hasattr(source, "train"):
        columns = {"epoch": np.asarray(source.epoch, dtype=float)}
        columns.update({f"train_{k}": np.asarray(v, dtype=float) for k, v in source.train.items()})
        columns.update({f"val_{k}": np.asarray(v, dtype=float) for k, v in getattr(source, "validation", {}).items()})
    elif isinstance(source, Mapping):
        columns = {str(k): np.asarray(v, dtype=float) for k, v in source.items()}
    else:
        raise TypeError(f"source must be a History, a CSV path or a mapping of columns, got {type(source).__name__}")
    if "epoch" not in columns:
        raise ValueError(f"source needs an 'epoch' column, got columns {sorted(columns)}")
    length = columns["epoch"].shape
    for name, values in columns.items():
        if values.shape != length:
            raise ValueError(f"column {name!r} must have shape {length} like 'epoch', got {values.shape}")
    # A log written by hand may name training columns without the prefix.
    for name in list(columns):
        if name not in ("epoch", "time", "lr") and not name.startswith(("train_", "val_")):
            columns[f"train_{name}"] = columns.pop(name)
    return columns


def history(source, *, terms=None, log_scale: bool = True, ax=None) -> HistoryPlot:
    """Training (solid) and validation (dashed) loss per epoch.

    Parameters
    ----------
    source : lnn.train.History, str, os.PathLike or mapping
        A ``History`` returned by :func:`lnn.fit`, the path of the CSV log of
        ``fit(csv_log=...)`` / ``lnn train`` (columns ``epoch``,
        ``train_<term>``..., ``val_<term>``...), or a mapping of such columns,
        each of shape ``(E,)``.
    terms : sequence of str, keyword-only
        Loss terms to plot (e.g. ``["total"]``); default all (only ``"total"``
        when it is the weighted sum of a single term).
    log_scale : bool, keyword-only
        Logarithmic loss axis.
    ax : matplotlib.axes.Axes, keyword-only
        Draw into these axes.

    Returns
    -------
    HistoryPlot
        Figure, axes, the lines by column name and the best epoch.
    """
    columns = _columns(source)
    available = sorted(
        {name.split("_", 1)[1] for name in columns if name.startswith(("train_", "val_"))},
        key=lambda term: (term != "total", term),
    )
    if not available:
        raise ValueError(f"source has no loss columns (train_<term>, val_<term>), got {sorted(columns)}")
    if terms is None:
        # With a single loss term its total is the same curve: draw it once.
        terms = ["total"] if len(available) == 2 and "total" in available else available
    else:
        terms = [terms] if isinstance(terms, str) else list(terms)
        unknown = [t for t in terms if t not in available]
        if unknown or not terms:
            raise ValueError(f"terms must be among {available}, got {terms!r}")
    epoch = columns["epoch"]
    lines = {}
    best = None
    with style():
        if ax is None:
            fig = new_figure(COLUMN_WIDTH, 2.2)
            ax = fig.add_subplot()
        fig = ax.figure
        colors = list(PALETTE.values())
        for k, term in enumerate(terms):
            color = colors[k % len(colors)]
            for prefix, linestyle, suffix in (("train", "-", ""), ("val", "--", " (val.)")):
                values = columns.get(f"{prefix}_{term}")
                if values is not None:
                    (lines[f"{prefix}_{term}"],) = ax.plot(
                        epoch, values, color=color, linestyle=linestyle, label=term + suffix
                    )
        monitored = columns.get("val_total", columns.get("train_total"))
        if monitored is not None and np.isfinite(monitored).any():
            i = int(np.nanargmin(monitored))
            best = int(epoch[i])
            ax.plot(epoch[i], monitored[i], "o", color=PALETTE["black"], zorder=3, label=f"best (epoch {best})")
        if log_scale:
            ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss [a.u.]")
        ax.legend(loc="upper right")
    return HistoryPlot(fig, ax, lines, best)
