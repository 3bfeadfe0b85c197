"""The DFKI double pendulum's measured logs under the protocol of issue 16 (numpy only).

The data (BSD-3, github:dfki-ric-underactuated-lab/double_pendulum) stay where
they are: ``../shared/data/dfki_double_pendulum/`` beside the repository (or
the folder given by ``LNN_DFKI_DATA``); nothing is copied.

Protocol: train on trajectory_00-02, 04, 05, 11-13, test on trajectory_03;
each file resampled (linear interpolation) to a uniform 2 ms grid;
``q, qd, qdd`` from ``pos_meas`` by Savitzky-Golay (window 101, order 4);
``tau = tau_meas``; the score is the held-out torque MSE (N^2 m^2) per joint
and its mean over the two joints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import lnn

__all__ = [
    "DATA",
    "TRAIN",
    "TEST",
    "STEP",
    "WINDOW",
    "ORDER",
    "data_folder",
    "imported",
    "imported_split",
    "ImportedSplit",
    "load",
    "urdf_path",
    "torque_mse",
]

TRAIN = (
    "trajectory_00",
    "trajectory_01",
    "trajectory_02",
    "trajectory_04",
    "trajectory_05",
    "trajectory_11",
    "trajectory_12",
    "trajectory_13",
)
TEST = ("trajectory_03",)
STEP = 0.002
WINDOW = 101
ORDER = 4
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dfki_double_pendulum"


def data_folder() -> Path:
    """The folder holding the CSV files and ``double_pendulum.urdf`` (``LNN_DFKI_DATA`` overrides).

    Raises
    ------
    FileNotFoundError
        When the folder or its README is missing.
    """
    folder = Path(os.environ.get("LNN_DFKI_DATA", DATA))
    if not (folder / "README.md").is_file():
        raise FileNotFoundError(f"DFKI double-pendulum data not found in {folder} (set LNN_DFKI_DATA)")
    return folder


def urdf_path() -> Path:
    """The nominal CAD URDF (load it with ``URDFRobot.from_urdf(path, missing_links="add")``)."""
    return data_folder() / "double_pendulum.urdf"


def _read(path: Path) -> dict[str, np.ndarray]:
    with open(path, encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    values = np.loadtxt(path, delimiter=",", skiprows=1)
    if values.ndim != 2 or values.shape[1] != len(header):
        raise ValueError(f"{path}: expected {len(header)} columns, got shape {values.shape}")
    return {name: values[:, i] for i, name in enumerate(header)}


def load(names=TRAIN, *, step: float = STEP, window: int = WINDOW, order: int = ORDER) -> lnn.Dataset:
    """One :class:`lnn.Dataset` of the named logs, one trajectory id per file.

    Parameters
    ----------
    names : sequence of str
        File stems, e.g. :data:`TRAIN` or :data:`TEST`.
    step : float
        The uniform grid (s).
    window, order : int
        Savitzky-Golay window (samples, odd) and polynomial order.

    Returns
    -------
    lnn.Dataset
        ``t, q, qd, qdd, tau`` with ``n = 2``, angular coordinates.
    """
    from scipy.signal import savgol_filter

    parts = []
    for index, name in enumerate(names):
        columns = _read(data_folder() / f"{name}.csv")
        t_raw = columns["time"]
        keep = np.concatenate([[True], np.diff(t_raw) > 0])  # drop repeated time stamps
        t_raw = t_raw[keep]
        t = np.arange(0.0, t_raw[-1] - t_raw[0] + 0.5 * step, step)[:-1] + t_raw[0]
        q_raw = np.stack([columns["pos_meas1"], columns["pos_meas2"]], -1)[keep]
        tau_raw = np.stack([columns["tau_meas1"], columns["tau_meas2"]], -1)[keep]
        q = np.stack([np.interp(t, t_raw, q_raw[:, j]) for j in range(2)], -1)
        tau = np.stack([np.interp(t, t_raw, tau_raw[:, j]) for j in range(2)], -1)
        smooth = savgol_filter(q, window, order, deriv=0, axis=0)
        qd = savgol_filter(q, window, order, deriv=1, delta=step, axis=0)
        qdd = savgol_filter(q, window, order, deriv=2, delta=step, axis=0)
        parts.append((t - t[0], smooth, qd, qdd, tau, np.full(len(t), index)))
    t, q, qd, qdd, tau, ids = (np.concatenate(x) for x in zip(*parts))
    return lnn.Dataset(
        t=t, q=q, qd=qd, qdd=qdd, tau=tau, trajectory=ids, system="dfki-double-pendulum", angular=(True, True), dt=step
    )


def imported(names=TRAIN, *, window=None) -> lnn.logs.ImportResult:
    """The named logs as a user reads them: ``lnn.logs.import_csv`` in one call, its defaults.

    ``q`` from ``pos_meas*``, ``tau`` from ``tau_meas*``, both angles wrapping;
    the import cleans, resamples each file onto its own grid (2 ms; 1.5 ms for
    trajectory_11) and differentiates with one window for all the files, the
    one where the motion explains the torques best (``window`` overrides it).

    Returns
    -------
    lnn.logs.ImportResult
        The dataset (one trajectory per file) and the import's report.
    """
    from lnn.logs import import_csv

    paths = [data_folder() / f"{name}.csv" for name in names]
    columns = dict(time="time", q=["pos_meas1", "pos_meas2"], tau=["tau_meas1", "tau_meas2"], angular=True)
    return import_csv(paths, window=window, **columns)


@dataclass(frozen=True)
class ImportedSplit:
    """The protocol's training and test logs read as a user reads them (:func:`imported_split`)."""

    train: lnn.Dataset
    test: lnn.Dataset
    report: lnn.logs.ImportReport  # the training logs' import
    window: int  # the training logs' window (samples at 2 ms), with which the test log was read


def imported_split(train=TRAIN, test=TEST) -> ImportedSplit:
    """The ``train`` logs in one :func:`imported` call and the ``test`` logs read by their import's rule
    (``window=`` the training dataset's ``window_rule``: the span their torques chose, at a test log's own step),
    not by windows the test logs' own torques would choose."""
    read = imported(train)
    held = imported(test, window=read.dataset.window_rule)
    return ImportedSplit(read.dataset, held.dataset, read.report, read.report.files[0].window_qdd[0])


def torque_mse(system, dataset: lnn.Dataset) -> np.ndarray:
    """Held-out torque MSE per joint (N^2 m^2): ``mean((inverse_dynamics - tau)^2)``, shape ``(n,)``."""
    predicted = system.inverse_dynamics(dataset.q, dataset.qd, dataset.qdd)
    return np.mean((predicted - dataset.tau) ** 2, axis=0)
