"""Input checks shared by the plotting functions (private)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lnn.trajectory import Trajectory


def as_trajectory(value, name: str) -> Trajectory:
    """Return ``value`` if it is a :class:`~lnn.Trajectory`, else raise ``TypeError``."""
    if not isinstance(value, Trajectory):
        raise TypeError(f"{name} must be an lnn.Trajectory, got {type(value).__name__}")
    return value


def as_labelled(value, name: str, default_label: str) -> dict[str, Trajectory]:
    """Normalise a Trajectory or a mapping ``label -> Trajectory`` to a dict."""
    if isinstance(value, Trajectory):
        return {default_label: value}
    if isinstance(value, Mapping):
        if not value:
            raise ValueError(f"{name} must hold at least one trajectory, got an empty mapping")
        return {str(k): as_trajectory(v, f"{name}[{k!r}]") for k, v in value.items()}
    raise TypeError(f"{name} must be an lnn.Trajectory or a mapping label -> Trajectory, got {type(value).__name__}")


def check_pair(true: Trajectory, learned: Trajectory, name: str = "learned") -> None:
    """Check that ``learned`` has the batch, time grid and coordinates of ``true``."""
    if learned.q.shape != true.q.shape:
        raise ValueError(f"{name}.q must have the shape of true.q {true.q.shape}, got {learned.q.shape}")
    if not np.allclose(learned.t, true.t, rtol=1e-9, atol=1e-12):
        raise ValueError(
            f"{name}.t must be the time grid of true.t (T={true.t.shape[0]}, "
            f"t[-1]={true.t[-1]:g} s); got T={learned.t.shape[0]}, t[-1]={learned.t[-1]:g} s"
        )


def coordinates(value, n_dof: int, *, default_max: int | None = None) -> list[int]:
    """Validate a selection of coordinate indices (``None``: all, or the first ``default_max``)."""
    if value is None:
        count = n_dof if default_max is None else min(n_dof, default_max)
        return list(range(count))
    if isinstance(value, (int, np.integer)):
        value = [value]
    out = []
    for index in value:
        if not isinstance(index, (int, np.integer)) or not -n_dof <= index < n_dof:
            raise ValueError(f"coordinates must be indices in [0, {n_dof}) of the {n_dof} coordinates, got {value!r}")
        out.append(int(index) % n_dof)
    if not out:
        raise ValueError("coordinates must select at least one coordinate, got an empty list")
    return out


def angular_flags(angular, n_dof: int, *sources) -> tuple[bool, ...] | None:
    """Which coordinates are angles: ``angular`` if given, else from a system or metadata."""
    if angular is None:
        for source in sources:
            if source is None:
                continue
            if isinstance(source, Trajectory):
                candidate = source.metadata.get("angular")
            else:
                candidate = getattr(source, "angular", None)
            if candidate is not None:
                angular = candidate
                break
    if angular is None:
        return None
    flags = tuple(bool(a) for a in np.atleast_1d(angular))
    if len(flags) != n_dof:
        raise ValueError(f"angular must have one flag per coordinate (n_dof={n_dof}), got {tuple(angular)!r}")
    return flags


def positive(value: float, name: str) -> float:
    """Check that ``value`` is a finite positive number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be finite and positive, got {value!r}")
    return number


def to_numpy(value) -> np.ndarray:
    """Convert a tensor or array-like returned by a system or model to float64 numpy."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value, dtype=np.float64)
