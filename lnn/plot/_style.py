"""Publication style, figure creation and saving for :mod:`lnn.plot`.

The style is applied through :func:`style`, a context manager built on
:func:`matplotlib.rc_context`, so the user's global ``rcParams`` are never
changed. Figures are :class:`matplotlib.figure.Figure` objects created
without ``pyplot``, so no global figure state is touched either.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from lnn import _validate

__all__ = ["PALETTE", "TRUE_COLOR", "LEARNED_COLOR", "COLUMN_WIDTH", "PAGE_WIDTH", "style", "save", "new_figure"]

#: Okabe–Ito colour-blind-safe palette (Okabe & Ito 2008), in cycle order.
PALETTE: dict[str, str] = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish green": "#009E73",
    "orange": "#E69F00",
    "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}
#: Colour of ground-truth curves.
TRUE_COLOR = PALETTE["black"]
#: Colour of learned-model curves.
LEARNED_COLOR = PALETTE["vermillion"]
#: Single-column width of a two-column paper, inches.
COLUMN_WIDTH = 3.4
#: Full page (double-column) width, inches.
PAGE_WIDTH = 7.0
#: Resolution of raster output, dots per inch.
RASTER_DPI = 300
#: Suffixes :func:`save` can write.
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")

_ACTIVE = contextvars.ContextVar("lnn_plot_style_active", default=False)


def _rc(font_size: float) -> dict:
    from cycler import cycler

    return {
        "font.size": font_size,
        "axes.titlesize": font_size,
        "axes.labelsize": font_size,
        "xtick.labelsize": font_size - 1,
        "ytick.labelsize": font_size - 1,
        "legend.fontsize": font_size - 1,
        "figure.titlesize": font_size + 1,
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans"],
        "mathtext.fontset": "dejavusans",
        "text.usetex": False,
        "axes.prop_cycle": cycler(color=list(PALETTE.values())),
        "axes.linewidth": 0.6,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.linewidth": 0.4,
        "grid.alpha": 0.4,
        "lines.linewidth": 1.0,
        "lines.markersize": 3.0,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "xtick.major.size": 2.5,
        "ytick.major.size": 2.5,
        "legend.frameon": False,
        "legend.handlelength": 1.6,
        "image.cmap": "cividis",
        "figure.dpi": 100,
        "figure.constrained_layout.use": True,
        "savefig.dpi": RASTER_DPI,
        "savefig.bbox": None,
        "pdf.fonttype": 42,
        "ps.fonttype": 42,
        "svg.fonttype": "path",
    }


@contextlib.contextmanager
def style(*, font_size: float = 8.0) -> Iterator[None]:
    """Apply the lnn publication style inside a ``with`` block.

    Okabe–Ito colours, ``font_size``-point DejaVu Sans with mathtext (no LaTeX
    install needed), thin lines sized for a 3.4-inch column, 300-dpi raster
    output and TrueType fonts embedded in PDF. The user's ``rcParams`` are
    restored on exit (:func:`matplotlib.rc_context`). Nested calls inside an
    active style keep the outer settings, so ``with style(font_size=10):``
    around any :mod:`lnn.plot` function wins over its default.

    Parameters
    ----------
    font_size : float, keyword-only
        Base font size in points (tick labels and legends are one point smaller).

    Examples
    --------
    >>> import lnn.plot
    >>> with lnn.plot.style():
    ...     result = lnn.plot.trajectories(true, learned)   # doctest: +SKIP
    """
    if not np.isfinite(font_size) or font_size <= 1:
        raise ValueError(f"font_size must be a finite number of points > 1, got {font_size!r}")
    import matplotlib

    if _ACTIVE.get():
        yield
        return
    token = _ACTIVE.set(True)
    try:
        with matplotlib.rc_context(_rc(float(font_size))):
            yield
    finally:
        _ACTIVE.reset(token)


def new_figure(width: float = COLUMN_WIDTH, height: float = 2.4):
    """A new :class:`matplotlib.figure.Figure` (no ``pyplot``) in constrained layout.

    Call it inside :func:`style` so that the figure picks up the style.

    Parameters
    ----------
    width, height : float
        Size in inches.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    for name, value in (("width", width), ("height", height)):
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a positive number of inches, got {value!r}")
    return Figure(figsize=(width, height), layout="constrained")


def save(fig, path, *, overwrite: bool = False, dpi: int = RASTER_DPI) -> Path:
    """Write a figure as PNG (``dpi`` dots per inch), PDF or SVG, chosen by suffix.

    The figure is rendered inside :func:`style`, so draw-time settings
    (mathtext fonts, embedded font type) follow the publication style. The
    page size is the figure size: no tight bounding box, so a 3.4 × 2.4 inch
    figure gives a 1020 × 720 pixel PNG.

    Parameters
    ----------
    fig : matplotlib.figure.Figure or matplotlib.figure.SubFigure
        The figure to write (a sub-figure writes its parent figure).
    path : str or os.PathLike
        Output file; the suffix (``.png``, ``.pdf`` or ``.svg``) picks the format.
    overwrite : bool, keyword-only
        Replace an existing file; by default refuse.
    dpi : int, keyword-only
        Raster resolution for PNG output.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    ValueError
        For an unsupported suffix or a non-positive ``dpi``.
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    FileNotFoundError
        If the directory of ``path`` does not exist.
    TypeError
        If ``fig`` is not a matplotlib figure.
    """
    from matplotlib.figure import FigureBase

    if not isinstance(fig, FigureBase):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    fig = fig.figure if fig.figure is not None else fig
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise ValueError(f"path must end in one of {', '.join(FIGURE_SUFFIXES)}, got {str(path)!r}")
    _validate.positive("dpi", dpi, integer=True)
    writable_path(path, overwrite=overwrite)
    with style():
        fig.savefig(path, format=suffix[1:], dpi=int(dpi), metadata=_metadata(suffix))
    return path


def _metadata(suffix: str) -> dict:
    # Reproducible vector output: no creation date in PDF/SVG.
    if suffix == ".pdf":
        return {"Creator": "lnn.plot", "CreationDate": None}
    if suffix == ".svg":
        return {"Creator": "lnn.plot", "Date": None}
    return {"Software": "lnn.plot"}


def writable_path(path: Path, *, overwrite: bool) -> None:
    """Raise unless ``path`` may be written: it must not exist (unless ``overwrite``), its directory must."""
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"refusing to overwrite existing file {str(path)!r}; pass overwrite=True "
            "(or --force on the command line) to replace it"
        )
    if not path.parent.exists():
        raise FileNotFoundError(f"directory {str(path.parent)!r} does not exist (writing {str(path)!r})")


def coordinate_units(angular: Sequence[bool] | None, n_dof: int) -> list[str]:
    """Units of each coordinate: ``rad`` for angles, ``m`` otherwise."""
    if angular is None:
        return ["rad"] * n_dof
    return ["rad" if a else "m" for a in angular]


def force_units(angular: Sequence[bool] | None, n_dof: int) -> list[str]:
    """Units of each generalized force: ``N m`` for angles, ``N`` otherwise."""
    return ["N m" if u == "rad" else "N" for u in coordinate_units(angular, n_dof)]
