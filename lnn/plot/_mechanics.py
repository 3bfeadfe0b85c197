"""Figures of the learned mechanics: mass matrix, potential landscape, torque decomposition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lnn.plot import _checks
from lnn.plot._style import (
    COLUMN_WIDTH,
    LEARNED_COLOR,
    PALETTE,
    TRUE_COLOR,
    coordinate_units,
    force_units,
    new_figure,
    style,
)
from lnn.trajectory import Trajectory

__all__ = [
    "MassMatrixPlot",
    "PotentialPlot",
    "TorqueDecomposition",
    "TorquePlot",
    "mass_matrix",
    "potential",
    "torque_decomposition",
    "torques",
]


@dataclass(frozen=True)
class MassMatrixPlot:
    """What :func:`mass_matrix` drew and the matrices it drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    axes : dict of str to matplotlib.axes.Axes
        ``"true"`` and ``"learned"`` for the systems given, and ``"error"``
        when both were.
    images : dict of str to matplotlib.image.AxesImage
        The heat maps, same keys.
    q : ndarray, shape ``(K, n)``
        The configurations of the slice.
    true, learned : ndarray, shape ``(K, n, n)``
        The mass matrices (``None`` for a system not given).
    """

    figure: Any
    axes: dict
    images: dict
    q: np.ndarray
    true: np.ndarray | None
    learned: np.ndarray | None


@dataclass(frozen=True)
class PotentialPlot:
    """What :func:`potential` drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    axes : list of matplotlib.axes.Axes
        One axes (1 coordinate) or one per system (2 coordinates).
    artists : dict of str to matplotlib.artist.Artist
        ``"true"`` and ``"learned"`` for the systems given: a line or a
        filled contour set.
    grid : tuple of ndarray
        The grid values of each varied coordinate, ``(R,)`` each.
    true, learned : ndarray, shape ``(R,)`` or ``(R, R)``
        ``V - min V`` on the grid (``None`` for a system not given).
    """

    figure: Any
    axes: list
    artists: dict
    grid: tuple
    true: np.ndarray | None
    learned: np.ndarray | None


@dataclass(frozen=True)
class TorqueDecomposition:
    """The generalized forces of a motion split by their physical origin.

    ``total = inertial + coriolis + gravity + friction`` for
    ``tau = M(q) qdd + C(q, qd) qd + g(q) + f(qd)``.

    Attributes
    ----------
    inertial : ndarray, shape ``(..., n)``
        ``M(q) qdd`` (``M(q, qd) qdd`` for a learned kinetic energy not quadratic in ``qd``).
    coriolis : ndarray, shape ``(..., n)``
        Coriolis and centrifugal forces ``C(q, qd) qd`` (even in ``qd`` for a
        true system; a learned model's also holds any gyroscopic part).
    gravity : ndarray, shape ``(..., n)``
        ``g(q) = dV/dq``.
    friction : ndarray, shape ``(..., n)``
        The torque that overcomes dissipative forces, ``f(qd)`` (odd in
        ``qd``, e.g. ``D qd``), zero for a conservative system.
    total : ndarray, shape ``(..., n)``
        Inverse dynamics ``tau(q, qd, qdd)``.
    """

    inertial: np.ndarray
    coriolis: np.ndarray
    gravity: np.ndarray
    friction: np.ndarray
    total: np.ndarray


def _state(value, name: str, n: int) -> np.ndarray:
    array = _checks.to_numpy(value)
    if array.ndim < 1 or array.shape[-1] != n:
        raise ValueError(f"{name} must have shape (..., {n}), got shape {array.shape}")
    return array


def _has_parts(system) -> bool:
    """Whether ``system`` names its torque parts (``gravity``, ``coriolis``, ``friction_torque``)."""
    return all(
        callable(getattr(system, name, None)) for name in ("gravity", "coriolis", "friction_torque", "mass_matrix")
    )


def torque_decomposition(system, q, qd, qdd) -> TorqueDecomposition:
    """Split the inverse dynamics of any system into its physical parts.

    A system that names its parts (a :class:`lnn.LagrangianNetwork`:
    ``mass_matrix``, ``coriolis(q, qd)``, ``gravity(q)``,
    ``friction_torque(qd)``, which add up to its ``inverse_dynamics``) gives
    them directly. For any other system only ``system.inverse_dynamics`` is
    called: ``gravity = ID(q, 0, 0)``, ``inertial = ID(q, 0, qdd) -
    gravity``, and the velocity terms ``ID(q, ±qd, 0) - gravity`` are split
    into their even part (Coriolis and centrifugal, quadratic in ``qd``) and
    odd part (friction, e.g. viscous ``D qd`` or Coulomb), exact for a true
    system whose kinetic energy is quadratic in ``qd``.

    Parameters
    ----------
    system : lnn.MechanicalSystem
        True system or learned model with ``n_dof`` and ``inverse_dynamics``.
    q, qd, qdd : array_like, shape ``(..., n)``
        Coordinates, velocities and accelerations.

    Returns
    -------
    TorqueDecomposition
        Float64 arrays of shape ``(..., n)``.
    """
    n = _n_dof(system, "system")
    q, qd, qdd = (_state(v, name, n) for v, name in ((q, "q"), (qd, "qd"), (qdd, "qdd")))
    if not q.shape == qd.shape == qdd.shape:
        raise ValueError(f"q, qd and qdd must have the same shape, got {q.shape}, {qd.shape} and {qdd.shape}")
    zero = np.zeros_like(q)

    def inverse(a, b, c):
        return _checks.to_numpy(system.inverse_dynamics(a, b, c)).reshape(q.shape)

    if _has_parts(system):
        flat = [x.reshape(-1, n) for x in (q, qd, qdd)]

        def part(values):
            return _checks.to_numpy(values).astype(np.float64).reshape(q.shape)

        mass = _checks.to_numpy(system.mass_matrix(flat[0], flat[1])).astype(np.float64)
        return TorqueDecomposition(
            inertial=np.einsum("bij,bj->bi", mass, flat[2]).reshape(q.shape),
            coriolis=part(system.coriolis(flat[0], flat[1])),
            gravity=part(system.gravity(flat[0])),
            friction=part(system.friction_torque(flat[1], q=flat[0])),
            total=inverse(*flat).astype(np.float64),
        )
    gravity = inverse(q, zero, zero)
    forward = inverse(q, qd, zero) - gravity
    backward = inverse(q, -qd, zero) - gravity
    return TorqueDecomposition(
        inertial=inverse(q, zero, qdd) - gravity,
        coriolis=0.5 * (forward + backward),
        gravity=gravity,
        friction=0.5 * (forward - backward),
        total=inverse(q, qd, qdd),
    )


def _n_dof(system, name: str) -> int:
    n = getattr(system, "n_dof", None)
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise TypeError(f"{name} must be a mechanical system with a positive n_dof, got {type(system).__name__}")
    return int(n)


def _systems(true, learned) -> tuple[int, object]:
    """``n`` and the system whose coordinates (angles or not) the axes follow: ``true``, else ``learned``."""
    if true is None and learned is None:
        raise ValueError("give the true system, the learned model or both; got neither")
    reference = true if true is not None else learned
    n = _n_dof(reference, "true" if true is not None else "learned")
    if true is not None and learned is not None and _n_dof(learned, "learned") != n:
        raise ValueError(f"learned.n_dof must equal true.n_dof={n}, got {learned.n_dof}")
    return n, reference


def _slice(system, coordinate, values, q_ref, n: int):
    angular = _checks.angular_flags(None, n, system)
    (index,) = _checks.coordinates(coordinate, n)
    if q_ref is None:
        q_ref = np.zeros(n)
    q_ref = _checks.to_numpy(q_ref)
    if q_ref.shape != (n,):
        raise ValueError(f"q_ref must have shape ({n},), got shape {q_ref.shape}")
    if values is None:
        span = np.pi if angular is None or angular[index] else 1.0
        values = np.linspace(-span, span, 61)
    values = _checks.to_numpy(values)
    if values.ndim != 1 or values.size < 2 or np.any(np.diff(values) <= 0):
        raise ValueError(
            f"values must be a strictly increasing 1-D array of at least 2 values, got shape {values.shape}"
        )
    q = np.repeat(q_ref[None], values.size, axis=0)
    q[:, index] = values
    return index, values, q, angular


def _mass_units(angular, n: int) -> str:
    units = {"kg m$^2$" if a else "kg" for a in (angular or (True,) * n)}
    if len(units) == 1:
        return units.pop()
    return "kg, kg m, kg m$^2$"


def _mass_matrices(system, q: np.ndarray, name: str) -> np.ndarray:
    n = q.shape[-1]
    matrices = _checks.to_numpy(system.mass_matrix(q, np.zeros_like(q)))
    if matrices.shape != q.shape[:-1] + (n, n):
        raise ValueError(f"{name}.mass_matrix(q) must have shape {q.shape[:-1] + (n, n)}, got shape {matrices.shape}")
    return matrices


def mass_matrix(true, learned=None, *, coordinate: int = 0, values=None, q_ref=None, fig=None) -> MassMatrixPlot:
    """Heat maps of the true and learned mass matrix, and of their difference.

    The configurations form a slice: ``q = q_ref`` except coordinate
    ``coordinate``, which runs over ``values``. Each heat map shows the
    entries ``M_ij`` (``i <= j``, rows) over the slice (columns); true and
    learned share one colour scale, the error ``M_learned - M_true`` a
    symmetric diverging one. ``qd = 0`` for a model whose ``M`` depends on it.

    Parameters
    ----------
    true : lnn.MechanicalSystem or None
        The true system (``n_dof``, ``mass_matrix``); None draws
        ``learned`` alone (a robot learned from logs has no truth).
    learned : lnn.MechanicalSystem, optional
        The learned model (same ``n_dof``).
    coordinate : int, keyword-only
        The coordinate varied along the slice.
    values : array_like, shape ``(K,)``, keyword-only
        Its values, increasing; default 61 points over ``[-pi, pi]`` (angles) or ``[-1, 1]`` m.
    q_ref : array_like, shape ``(n,)``, keyword-only
        The other coordinates (default zero).
    fig : matplotlib.figure.Figure or SubFigure, keyword-only
        Draw into this (empty) figure.

    Returns
    -------
    MassMatrixPlot
        Figure, axes and images by name, the configurations ``(K, n)`` and the
        matrices ``(K, n, n)`` (None for a system not given).
    """
    n, reference = _systems(true, learned)
    index, values, q, angular = _slice(reference, coordinate, values, q_ref, n)
    rows, cols = np.triu_indices(n)
    m_true = None if true is None else _mass_matrices(true, q, "true")
    m_learned = None if learned is None else _mass_matrices(learned, q, "learned")
    panels = {name: m[:, rows, cols].T for name, m in (("true", m_true), ("learned", m_learned)) if m is not None}
    if len(panels) == 2:
        panels["error"] = panels["learned"] - panels["true"]
    shared = np.concatenate([panels[name] for name in ("true", "learned") if name in panels])
    vmin, vmax = float(shared.min()), float(shared.max())
    if vmin == vmax:
        vmin, vmax = vmin - 1.0, vmax + 1.0
    units = _mass_units(angular, n)
    x_unit = coordinate_units(angular, n)[index]
    height = max(0.55, 0.16 * rows.size + 0.35)
    titles = {"true": "true $M(q)$", "learned": "learned $\\hat M(q)$", "error": "error $\\hat M - M$"}
    axes, images = {}, {}
    with style():
        fig = fig if fig is not None else new_figure(COLUMN_WIDTH, 0.5 + height * len(panels))
        grid = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        extent = (values[0], values[-1], rows.size - 0.5, -0.5)
        for ax, (name, data) in zip(grid, panels.items()):
            if name == "error":
                limit = float(np.max(np.abs(data))) or 1.0
                image = ax.imshow(
                    data, aspect="auto", extent=extent, cmap="PuOr", vmin=-limit, vmax=limit, interpolation="nearest"
                )
            else:
                image = ax.imshow(
                    data, aspect="auto", extent=extent, cmap="cividis", vmin=vmin, vmax=vmax, interpolation="nearest"
                )
            ax.set_yticks(range(rows.size), [f"$M_{{{i + 1}{j + 1}}}$" for i, j in zip(rows, cols)])
            ax.grid(False)
            ax.set_title(titles[name], loc="left")
            bar = fig.colorbar(image, ax=ax, pad=0.02, aspect=12)
            bar.set_label(f"[{units}]")
            axes[name], images[name] = ax, image
        grid[-1].set_xlabel(f"$q_{{{index + 1}}}$ [{x_unit}]")
    return MassMatrixPlot(fig, axes, images, q, m_true, m_learned)


def _potential(system, q: np.ndarray, name: str) -> np.ndarray:
    if not hasattr(system, "potential_energy"):
        raise TypeError(f"{name} must have a potential_energy(q) method, got {type(system).__name__}")
    flat = q.reshape(-1, q.shape[-1])  # models take a batch (B, n)
    energy = _checks.to_numpy(system.potential_energy(flat)).reshape(q.shape[:-1])
    return energy - np.min(energy)


def potential(
    true, learned=None, *, coordinates=(0,), bounds=None, q_ref=None, resolution: int = 61, fig=None
) -> PotentialPlot:
    """The potential energy ``V(q)`` over one or two coordinates, true vs learned.

    ``V`` is defined up to a constant, so each is shown as ``V - min V`` over
    the grid. One coordinate: a line plot; two: filled contour maps of the
    true and learned ``V`` on shared levels.

    Parameters
    ----------
    true : lnn.MechanicalSystem or None
        The true system (``n_dof``, ``potential_energy(q)``); None draws
        ``learned`` alone.
    learned : lnn.MechanicalSystem, optional
        The learned model (``potential_energy(q)``).
    coordinates : int or sequence of one or two int, keyword-only
        The coordinates varied.
    bounds : sequence of (low, high), keyword-only
        Range of each varied coordinate; default ``(-pi, pi)`` for angles, ``(-1, 1)`` m else.
    q_ref : array_like, shape ``(n,)``, keyword-only
        Value of the other coordinates (default zero).
    resolution : int, keyword-only
        Grid points per coordinate.
    fig : matplotlib.figure.Figure or SubFigure, keyword-only
        Draw into this (empty) figure.

    Returns
    -------
    PotentialPlot
        Figure, axes, artists, the grid and ``V - min V`` of each system.
    """
    n, reference = _systems(true, learned)
    chosen = _checks.coordinates(coordinates, n)
    if len(chosen) > 2:
        raise ValueError(f"coordinates must name one or two coordinates, got {coordinates!r}")
    if not isinstance(resolution, (int, np.integer)) or resolution < 3:
        raise ValueError(f"resolution must be an integer >= 3, got {resolution!r}")
    angular = _checks.angular_flags(None, n, reference)
    units = coordinate_units(angular, n)
    if bounds is None:
        bounds = [(-np.pi, np.pi) if units[i] == "rad" else (-1.0, 1.0) for i in chosen]
    bounds = np.asarray(bounds, dtype=float)
    if bounds.shape == (2,) and len(chosen) == 1:  # a single (low, high) pair
        bounds = bounds[None]
    if bounds.shape != (len(chosen), 2) or np.any(bounds[:, 1] <= bounds[:, 0]):
        raise ValueError(f"bounds must be {len(chosen)} pair(s) (low, high) with low < high, got {bounds!r}")
    q_ref = np.zeros(n) if q_ref is None else _checks.to_numpy(q_ref)
    if q_ref.shape != (n,):
        raise ValueError(f"q_ref must have shape ({n},), got shape {q_ref.shape}")
    grid = tuple(np.linspace(low, high, int(resolution)) for low, high in bounds)
    mesh = np.meshgrid(*grid, indexing="ij")
    q = np.broadcast_to(q_ref, mesh[0].shape + (n,)).copy()
    for i, values in zip(chosen, mesh):
        q[..., i] = values
    v_true = None if true is None else _potential(true, q, "true")
    v_learned = None if learned is None else _potential(learned, q, "learned")
    shown = {name: v for name, v in (("true", v_true), ("learned", v_learned)) if v is not None}
    artists = {}
    with style():
        if len(chosen) == 1:
            fig = fig if fig is not None else new_figure(COLUMN_WIDTH, 2.1)
            ax = fig.add_subplot()
            if v_true is not None:
                (artists["true"],) = ax.plot(grid[0], v_true, color=TRUE_COLOR, label="true")
            if v_learned is not None:
                (artists["learned"],) = ax.plot(
                    grid[0], v_learned, color=LEARNED_COLOR, linestyle="--", label="learned"
                )
            if len(shown) == 2:
                ax.legend(loc="best")
            ax.set_xlabel(f"$q_{{{chosen[0] + 1}}}$ [{units[chosen[0]]}]")
            ax.set_ylabel(r"$V - \min V$ [J]")
            axes = [ax]
        else:
            fig = fig if fig is not None else new_figure(COLUMN_WIDTH, 1.8)
            axes = list(fig.subplots(1, len(shown), sharey=True, squeeze=False)[0])
            top = max(float(np.max(v)) for v in shown.values()) or 1.0
            from matplotlib.ticker import MaxNLocator

            levels = MaxNLocator(12).tick_values(0.0, top)
            for ax, (name, values) in zip(axes, shown.items()):
                artists[name] = ax.contourf(grid[0], grid[1], values.T, levels=levels, cmap="cividis", extend="max")
                ax.set_title(name, loc="left")
                ax.set_xlabel(f"$q_{{{chosen[0] + 1}}}$ [{units[chosen[0]]}]")
                ax.grid(False)
            axes[0].set_ylabel(f"$q_{{{chosen[1] + 1}}}$ [{units[chosen[1]]}]")
            bar = fig.colorbar(next(iter(artists.values())), ax=axes, pad=0.02, aspect=15)
            bar.set_label(r"$V - \min V$ [J]")
    return PotentialPlot(fig, axes, artists, grid, v_true, v_learned)


_COMPONENTS = {
    "inertial": ("inertial $M\\ddot q$", PALETTE["blue"]),
    "coriolis": ("Coriolis $C\\dot q$", PALETTE["bluish green"]),
    "gravity": ("gravity $g(q)$", PALETTE["orange"]),
    "friction": ("friction", PALETTE["reddish purple"]),
    "total": ("total $\\tau$", TRUE_COLOR),
}


@dataclass(frozen=True)
class TorquePlot:
    """What :func:`torques` drew and the decompositions it drew.

    Attributes
    ----------
    figure : matplotlib.figure.Figure or SubFigure
    axes : list of matplotlib.axes.Axes
        One row per plotted coordinate, sharing the time axis.
    lines : dict of str to list of matplotlib.lines.Line2D
        Per component (``"inertial"``, ``"coriolis"``, ``"gravity"``,
        ``"friction"``, ``"total"``), the lines drawn (true, then learned, per row).
    true, learned : TorqueDecomposition
        Arrays of shape ``(T, n)`` along the trajectory (``learned`` is ``None``
        without a model).
    bands : list of matplotlib.artist.Artist
        The 90 % interval of the learned total torque, one per row, when the
        model is an :class:`lnn.Ensemble` (its calibrated
        :meth:`lnn.Ensemble.predict`); empty otherwise.
    """

    figure: Any
    axes: list
    lines: dict
    true: TorqueDecomposition
    learned: TorqueDecomposition | None
    bands: list = field(default_factory=list)


def torques(system, trajectory: Trajectory, learned=None, *, index: int = 0, coordinates=None, fig=None) -> TorquePlot:
    """Torque decomposition along a trajectory, true (solid) vs learned (dashed).

    Both decompositions (:func:`torque_decomposition`) are evaluated on the
    states and accelerations of one trajectory of ``trajectory`` (usually the
    true one), as in the DeLaN paper. Components that are zero for both
    systems (e.g. friction of a conservative arm) are left out.

    Parameters
    ----------
    system : lnn.MechanicalSystem
        The true system.
    trajectory : lnn.Trajectory
        States ``q``, ``qd``, ``qdd`` of shape ``(B, T, n)``.
    learned : lnn.MechanicalSystem, optional
        The learned model; for an :class:`lnn.Ensemble`, its mean with the
        90 % interval of its total torque.
    index : int, keyword-only
        Which trajectory of the batch.
    coordinates : int or sequence of int, keyword-only
        Joints to plot, one row each (default: all, at most 4).
    fig : matplotlib.figure.Figure or SubFigure, keyword-only
        Draw into this (empty) figure.

    Returns
    -------
    TorquePlot
        Figure, axes, lines per component and both decompositions ``(T, n)``.
    """
    trajectory = _checks.as_trajectory(trajectory, "trajectory")
    n = _n_dof(system, "system")
    if trajectory.n_dof != n:
        raise ValueError(f"trajectory has {trajectory.n_dof} coordinates, system.n_dof is {n}")
    if learned is not None and _n_dof(learned, "learned") != n:
        raise ValueError(f"learned.n_dof must equal system.n_dof={n}, got {learned.n_dof}")
    if not isinstance(index, (int, np.integer)) or not -trajectory.n_trajectories <= index < trajectory.n_trajectories:
        raise ValueError(f"index must select one of the {trajectory.n_trajectories} trajectories, got {index!r}")
    rows = _checks.coordinates(coordinates, n, default_max=4)
    q, qd, qdd = trajectory.q[index], trajectory.qd[index], trajectory.qdd[index]
    true = torque_decomposition(system, q, qd, qdd)
    model = None if learned is None else torque_decomposition(learned, q, qd, qdd)
    scale = max(float(np.max(np.abs(getattr(true, name)))) for name in _COMPONENTS) or 1.0
    shown = [
        name
        for name in _COMPONENTS
        if np.max(np.abs(getattr(true, name))) > 1e-9 * scale
        or (model is not None and np.max(np.abs(getattr(model, name))) > 1e-3 * scale)
    ]
    units = force_units(_checks.angular_flags(None, n, system, trajectory), n)
    lines = {name: [] for name in shown}
    interval = _torque_interval(learned, q, qd, qdd)
    bands = []
    with style():
        fig = fig if fig is not None else new_figure(COLUMN_WIDTH, 0.8 + 1.0 * len(rows))
        axes = list(fig.subplots(len(rows), 1, sharex=True, squeeze=False)[:, 0])
        for ax, j in zip(axes, rows):
            if interval is not None:
                color = _COMPONENTS["total"][1]
                bands.append(
                    ax.fill_between(
                        trajectory.t,
                        interval.lower[:, j],
                        interval.upper[:, j],
                        color=color,
                        alpha=0.2,
                        linewidth=0,
                        label="90 % interval",
                    )
                )
            for name in shown:
                label, color = _COMPONENTS[name]
                width = 0.8 if name == "total" else 1.0
                lines[name] += ax.plot(
                    trajectory.t, getattr(true, name)[:, j], color=color, linewidth=width, label=label
                )
                if model is not None:
                    lines[name] += ax.plot(
                        trajectory.t, getattr(model, name)[:, j], color=color, linewidth=width, linestyle="--"
                    )
            ax.set_ylabel(f"$\\tau_{{{j + 1}}}$ [{units[j]}]")
        axes[-1].set_xlabel("time $t$ [s]")
        axes[0].set_xlim(trajectory.t[0], trajectory.t[-1])
        handles, labels = axes[0].get_legend_handles_labels()
        if model is not None:
            from matplotlib.lines import Line2D

            handles += [Line2D([], [], color="0.3"), Line2D([], [], color="0.3", linestyle="--")]
            labels += ["true", "learned"]
        fig.legend(handles, labels, loc="outside upper center", ncols=3)
    return TorquePlot(fig, axes, lines, true, model, bands)


def _torque_interval(learned, q, qd, qdd):
    """The 90 % interval of an ensemble's inverse dynamics along ``(T, n)`` states, else None."""
    if learned is None or not (callable(getattr(learned, "predict", None)) and hasattr(learned, "members")):
        return None
    return learned.predict(q, qd, qdd=qdd).interval("tau", level=0.9)
