"""Measured logs in, one call: the dataset and the report of what was done (:func:`import_csv`, :func:`import_rosbag`).

:meth:`lnn.Dataset.from_csv` and :meth:`lnn.Dataset.from_rosbag` return the
dataset only; these return it with the :class:`ImportReport` (rows dropped,
held samples, gaps, the step, the windows, the torque lag), which ``lnn
import`` prints. The pipeline itself (numpy only, below :mod:`lnn.data`) is
:mod:`lnn.ingest`, where each step and the rules behind the defaults are
described; its report classes, :class:`WindowRule` and :func:`choose_window` are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from lnn.data import Dataset
from lnn.ingest import (
    DEFAULT_ORDER,
    FileReport,
    Gap,
    ImportReport,
    WindowChoice,
    WindowRule,
    choose_window,
    read_csv,
    read_rosbag,
)

__all__ = [
    "FileReport",
    "Gap",
    "ImportReport",
    "ImportResult",
    "WindowChoice",
    "WindowRule",
    "choose_window",
    "import_csv",
    "import_rosbag",
]


@dataclass(frozen=True, eq=False)
class ImportResult:
    """What :func:`import_csv` and :func:`import_rosbag` return.

    Attributes
    ----------
    dataset : lnn.Dataset
    report : ImportReport
    """

    dataset: Dataset
    report: ImportReport


def import_csv(
    paths,
    *,
    time,
    q,
    qd=None,
    tau,
    joints=None,
    angular=False,
    time_scale: float = 1.0,
    delimiter: str | None = None,
    step: float | None = None,
    max_gap: float | None = None,
    window: int | str | WindowRule | None = None,
    order: int = DEFAULT_ORDER,
    trim: bool = True,
    velocity: str = "q",
    lag=None,
) -> ImportResult:
    """Read CSV logs into a :class:`lnn.Dataset`, with a report of what was done.

    Each file becomes one or more trajectories (split at gaps); see
    :mod:`lnn.ingest` for every step and the rules behind the defaults.

    Parameters
    ----------
    paths : str, os.PathLike or sequence of them
        The CSV files; several files are several trajectories.
    time, q, qd, tau, joints, angular, time_scale, delimiter, step, max_gap, window, order, trim, velocity, lag
        As in :meth:`lnn.Dataset.from_csv`.

    Returns
    -------
    ImportResult
        ``dataset`` (as :meth:`lnn.Dataset.from_csv` returns it) and
        ``report`` (:class:`ImportReport`).

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError, TypeError
        For a missing column, a non-numeric or infinite cell, most rows missing a value, time going
        backwards, a log too short for the derivative window, or a bad
        argument; the message names the file, the line, the column or the
        argument, and what was received.
    """
    logs = read_csv(
        paths,
        time=time,
        q=q,
        qd=qd,
        tau=tau,
        joints=joints,
        angular=angular,
        time_scale=time_scale,
        delimiter=delimiter,
        step=step,
        max_gap=max_gap,
        window=window,
        order=order,
        trim=trim,
        velocity=velocity,
        lag=lag,
    )
    return ImportResult(dataset=Dataset.from_imported(logs), report=logs.report)


def import_rosbag(
    paths,
    *,
    topic: str,
    joints=None,
    angular=False,
    step: float | None = None,
    max_gap: float | None = None,
    window: int | str | WindowRule | None = None,
    order: int = DEFAULT_ORDER,
    trim: bool = True,
    velocity: str = "q",
    lag=None,
) -> ImportResult:
    """Read the ``sensor_msgs/msg/JointState`` messages of ROS bags into a :class:`lnn.Dataset`, with a report.

    Parameters
    ----------
    paths : str, os.PathLike or sequence of them
        The bags (ROS 2: a directory with ``metadata.yaml``, a ``.mcap`` or
        ``.db3`` file; ROS 1: a ``.bag`` file); several are several trajectories.
    topic, joints, angular, step, max_gap, window, order, trim, velocity, lag
        As in :meth:`lnn.Dataset.from_rosbag`.

    Returns
    -------
    ImportResult
        ``dataset`` (with ``joint_names`` the joints read) and ``report``.

    Raises
    ------
    ImportError
        Without the rosbags package (``pip install 'lnn[ros]'``).
    FileNotFoundError, ValueError, TypeError
        As :meth:`lnn.Dataset.from_rosbag`.
    """
    logs = read_rosbag(
        paths,
        topic=topic,
        joints=joints,
        angular=angular,
        step=step,
        max_gap=max_gap,
        window=window,
        order=order,
        trim=trim,
        velocity=velocity,
        lag=lag,
    )
    return ImportResult(dataset=Dataset.from_imported(logs), report=logs.report)
