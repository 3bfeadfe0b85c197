"""Animations of pendulums, cart-poles, planar arms (2-D) and URDF robots (3-D)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lnn import _validate
from lnn.plot import _checks
from lnn.plot._style import COLUMN_WIDTH, LEARNED_COLOR, TRUE_COLOR, new_figure, style, writable_path
from lnn.trajectory import Trajectory

__all__ = ["Animation", "animate", "save_animation"]

_LAYOUTS = ("overlay", "side-by-side")
#: Suffixes :func:`save_animation` can write.
ANIMATION_SUFFIXES = (".gif", ".mp4")


@dataclass(frozen=True)
class Animation:
    """What :func:`animate` built.

    Attributes
    ----------
    figure : matplotlib.figure.Figure
    axes : list of matplotlib.axes.Axes
        One axes (overlay) or two (side by side); 3-D axes for 3-D positions.
    animation : matplotlib.animation.FuncAnimation
        Call ``animation.to_jshtml()`` in a notebook, or :func:`save_animation`.
    n_frames : int
        Number of frames.
    fps : float
        Frames per second for real-time playback.
    positions : dict of str to ndarray, shape ``(n_frames, P, d)``
        The animated points (``"true"`` and ``"learned"``), base first.
    """

    figure: Any
    axes: list
    animation: Any
    n_frames: int
    fps: float
    positions: dict


def _positions(system, q: np.ndarray, name: str) -> np.ndarray:
    if not hasattr(system, "positions"):
        raise TypeError(f"system must have a positions(q) method to be animated, got {type(system).__name__}")
    points = _checks.to_numpy(system.positions(q))
    if points.ndim != 3 or points.shape[0] != q.shape[0] or points.shape[2] not in (2, 3):
        raise ValueError(
            f"system.positions(q) of the {name} trajectory must have shape "
            f"({q.shape[0]}, n_points, 2 or 3), got {points.shape}"
        )
    return points


def _limits(points: np.ndarray, margin: float = 0.08):
    low, high = points.reshape(-1, points.shape[-1]).min(0), points.reshape(-1, points.shape[-1]).max(0)
    center, half = 0.5 * (low + high), 0.5 * float(np.max(high - low)) or 0.5
    half *= 1 + 2 * margin
    return center - half, center + half


def animate(
    system,
    true: Trajectory,
    learned: Trajectory | None = None,
    *,
    index: int = 0,
    layout: str = "overlay",
    fps: float = 25.0,
    stride: int | None = None,
    trail: float = 0.5,
    fig=None,
) -> Animation:
    """Animate one trajectory from ``system.positions(q)``: true and learned.

    Links are drawn as a chain through the points (base or pivot first), the
    base as a square (a moving base, e.g. a cart, also gets its rail), and a
    fading trail follows the last point. Planar systems (2-D positions) get
    equal-aspect 2-D axes; URDF robots (3-D positions) a 3-D skeleton. The
    learned trajectory is drawn with the true system's kinematics.

    Parameters
    ----------
    system : object with ``positions(q) -> (..., P, 2 or 3)``
        The true system (kinematics).
    true : lnn.Trajectory
        True rollouts, ``q`` of shape ``(B, T, n)``.
    learned : lnn.Trajectory, optional
        Learned rollouts from the same initial states.
    index : int, keyword-only
        Which trajectory of the batch.
    layout : {"overlay", "side-by-side"}, keyword-only
        Both systems in one axes, or each in its own.
    fps : float, keyword-only
        Frames per second of the saved animation.
    stride : int, keyword-only
        Use every ``stride``-th sample; default: real-time playback at ``fps``.
    trail : float, keyword-only
        Length in seconds of the trail of the last point (0: none).
    fig : matplotlib.figure.Figure, keyword-only
        Draw into this (empty) figure.

    Returns
    -------
    Animation
        The figure, axes, ``FuncAnimation``, frame count, ``fps`` and positions.
    """
    from matplotlib.animation import FuncAnimation

    true = _checks.as_trajectory(true, "true")
    if learned is not None:
        learned = _checks.as_trajectory(learned, "learned")
        _checks.check_pair(true, learned)
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    if not isinstance(index, (int, np.integer)) or not -true.n_trajectories <= index < true.n_trajectories:
        raise ValueError(f"index must select one of the {true.n_trajectories} trajectories, got {index!r}")
    fps = _checks.positive(fps, "fps")
    if trail < 0:
        raise ValueError(f"trail must be >= 0 seconds, got {trail!r}")
    dt = float(np.median(np.diff(true.t))) if true.t.size > 1 else 1.0
    if stride is None:
        stride = max(1, int(round(1.0 / (fps * dt))))
    _validate.positive("stride", stride, integer=True)
    frames = np.arange(0, true.t.size, int(stride))
    points = {"true": _positions(system, true.q[index][frames], "true")}
    if learned is not None:
        points["learned"] = _positions(system, learned.q[index][frames], "learned")
    dim = points["true"].shape[-1]
    panels = [list(points)] if layout == "overlay" or learned is None else [[k] for k in points]
    trail_frames = int(round(trail / (dt * stride)))
    colors = {"true": TRUE_COLOR, "learned": LEARNED_COLOR}
    with style():
        width = COLUMN_WIDTH if len(panels) == 1 else 2 * COLUMN_WIDTH * 0.8
        fig = fig if fig is not None else new_figure(width, COLUMN_WIDTH * (0.85 if dim == 2 else 1.0))
        low, high = _limits(np.concatenate(list(points.values()), axis=1))
        axes, artists = [], []
        for k, keys in enumerate(panels):
            if dim == 3:
                ax = fig.add_subplot(1, len(panels), k + 1, projection="3d")
                ax.set_xlim(low[0], high[0])
                ax.set_ylim(low[1], high[1])
                ax.set_zlim(low[2], high[2])
                ax.set_box_aspect((1, 1, 1), zoom=0.85)
                ax.set_xlabel("$x$ [m]")
                ax.set_ylabel("$y$ [m]")
                ax.set_zlabel("$z$ [m]")
            else:
                ax = fig.add_subplot(1, len(panels), k + 1)
                ax.set_xlim(low[0], high[0])
                ax.set_ylim(low[1], high[1])
                ax.set_aspect("equal")
                ax.set_xlabel("$x$ [m]")
                ax.set_ylabel("$y$ [m]")
            for key in keys:
                base = points[key][:, 0]
                if dim == 2 and np.ptp(base, axis=0).max() > 1e-9:
                    ax.axhline(float(np.mean(base[:, 1])), color="0.6", linewidth=0.8, zorder=0)
                line_style = {"color": colors[key], "linestyle": "-" if key == "true" else "--"}
                (chain,) = ax.plot(*points[key][0].T, marker="o", markersize=4, linewidth=1.6, label=key, **line_style)
                (base_marker,) = ax.plot(
                    *points[key][0, :1].T, marker="s", markersize=7, color=colors[key], linestyle="none"
                )
                (tail,) = ax.plot(*points[key][:1, -1].T, color=colors[key], linewidth=0.7, alpha=0.6)
                artists.append((key, chain, base_marker, tail))
            if len(panels) > 1:
                ax.set_title(keys[0], loc="left")
            elif learned is not None:
                ax.legend(loc="upper right")
            axes.append(ax)
        label = (axes[0].text2D if dim == 3 else axes[0].text)(0.02, 0.96, "", transform=axes[0].transAxes, va="top")

        def draw(frame: int):
            changed = [label]
            for key, chain, base_marker, tail in artists:
                p = points[key]
                first = max(0, frame - trail_frames) if trail_frames else frame
                if dim == 3:
                    chain.set_data_3d(*p[frame].T)
                    base_marker.set_data_3d(*p[frame, :1].T)
                    tail.set_data_3d(*p[first : frame + 1, -1].T)
                else:
                    chain.set_data(*p[frame].T)
                    base_marker.set_data(*p[frame, :1].T)
                    tail.set_data(*p[first : frame + 1, -1].T)
                changed += [chain, base_marker, tail]
            label.set_text(f"$t$ = {true.t[frames[frame]]:.2f} s")
            return changed

        draw(0)
        animation = FuncAnimation(
            fig, draw, frames=len(frames), interval=1000.0 / fps, blit=False, cache_frame_data=False, repeat=True
        )
    return Animation(fig, axes, animation, len(frames), fps, points)


def save_animation(animation: Animation, path, *, overwrite: bool = False, dpi: int = 100) -> Path:
    """Write an :class:`Animation` as a GIF (Pillow) or an MP4 (ffmpeg), by suffix.

    Parameters
    ----------
    animation : Animation
        The result of :func:`animate`.
    path : str or os.PathLike
        Output file ending in ``.gif`` or ``.mp4``.
    overwrite : bool, keyword-only
        Replace an existing file; by default refuse.
    dpi : int, keyword-only
        Resolution of the frames.

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    ValueError
        For an unsupported suffix.
    RuntimeError
        For ``.mp4`` when ffmpeg is not installed.
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    """
    from matplotlib import animation as manimation

    if not isinstance(animation, Animation):
        raise TypeError(f"animation must be an lnn.plot.Animation, got {type(animation).__name__}")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in ANIMATION_SUFFIXES:
        raise ValueError(f"path must end in one of {', '.join(ANIMATION_SUFFIXES)}, got {str(path)!r}")
    _validate.positive("dpi", dpi, integer=True)
    writable_path(path, overwrite=overwrite)
    if suffix == ".gif":
        writer = manimation.PillowWriter(fps=animation.fps)
    else:
        if not manimation.writers.is_available("ffmpeg"):
            raise RuntimeError(f"writing {str(path)!r} needs ffmpeg on the PATH; install it or write a .gif instead")
        writer = manimation.FFMpegWriter(fps=animation.fps, codec="h264")
    with style():
        animation.animation.save(path, writer=writer, dpi=int(dpi))
    return path
