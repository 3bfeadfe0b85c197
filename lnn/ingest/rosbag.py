"""ROS bags in: :func:`read_rosbag` reads ``sensor_msgs/msg/JointState`` messages and runs the pipeline.

Bags are read with the `rosbags <https://gitlab.com/ternaris/rosbags>`_
library (pure Python, the optional extra ``lnn[ros]``): ROS 2 bags (a
directory with ``metadata.yaml``, or a single ``.mcap`` or ``.db3`` file)
and ROS 1 bags (``.bag``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lnn.ingest.clean import RawLog, missing_rows, too_many_missing
from lnn.ingest.options import Cleaning, WindowRule
from lnn.ingest.pipeline import ImportedLogs, process
from lnn.ingest.tables import joint_names_of, paths_of
from lnn.ingest.windows import DEFAULT_ORDER

__all__ = ["BAG_SUFFIXES", "JOINT_STATE", "is_rosbag", "read_rosbag"]

#: File suffixes of the bags that :func:`read_rosbag` reads (besides ROS 2 bag directories).
BAG_SUFFIXES = (".mcap", ".db3", ".bag")
#: The message type read (rosbags names ROS 1's ``sensor_msgs/JointState`` the same way).
JOINT_STATE = "sensor_msgs/msg/JointState"


def is_rosbag(path) -> bool:
    """Whether ``path`` names a ROS bag: a ``.mcap``, ``.db3`` or ``.bag`` file, or a directory with metadata.yaml."""
    path = Path(path)
    if path.is_dir():
        return (path / "metadata.yaml").is_file()
    return path.suffix.lower() in BAG_SUFFIXES


def read_rosbag(
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
) -> ImportedLogs:
    """Read ``JointState`` messages of ROS bags and clean, resample and differentiate them.

    The arrays of :meth:`lnn.Dataset.from_rosbag`, where the parameters are described.

    Returns
    -------
    ImportedLogs

    Raises
    ------
    ImportError
        Without the rosbags package.
    FileNotFoundError, ValueError, TypeError
        As :meth:`lnn.Dataset.from_rosbag`.
    """
    files = paths_of(paths, kind="ROS bag")
    if not isinstance(topic, str) or not topic.strip():
        raise TypeError(f"topic must be the name of a topic (str), e.g. '/joint_states'; got {topic!r}")
    joints = joint_names_of(joints, None)
    cleaning = Cleaning(
        angular=angular, step=step, max_gap=max_gap, window=window, order=order, trim=trim, velocity=velocity, lag=lag
    )
    raws = []
    for path in files:
        raw, names = _read_bag(path, topic, joints)
        joints = names  # every bag must hold the joints of the first
        raws.append(raw)
    if velocity == "measured" and any(raw.qd is None for raw in raws):
        missing = [raw.path for raw in raws if raw.qd is None]
        raise ValueError(
            f"velocity='measured' needs velocities in every message; the messages of {', '.join(missing)} have none"
        )
    return process(raws, cleaning, joint_names=joints)


def _read_bag(path: str, topic: str, joints):
    """The messages of ``topic`` in one bag as a :class:`RawLog`, and the joint names read."""
    try:
        from rosbags.highlevel import AnyReader, AnyReaderError
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:  # the optional extra
        raise ImportError("reading ROS bags needs the rosbags package: pip install 'lnn[ros]'") from exc
    bag = Path(path)
    if not bag.exists():
        raise FileNotFoundError(f"no such ROS bag: {path!r}")
    if not is_rosbag(bag):
        raise ValueError(
            f"{path}: not a ROS bag: expected a .mcap, .db3 or .bag file or a directory with metadata.yaml"
        )
    try:
        with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
            connections = [c for c in reader.connections if c.topic == topic]
            if not connections:
                topics = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections})
                raise ValueError(f"{path}: no topic {topic!r}; the bag has: {', '.join(topics) or 'no topics'}")
            types = {c.msgtype for c in connections}
            if types != {JOINT_STATE}:
                raise ValueError(f"{path}: topic {topic!r} carries {', '.join(sorted(types))}, not {JOINT_STATE}")
            columns = _Columns(path, topic, joints)
            for connection, received, data in reader.messages(connections=connections):
                columns.add(reader.deserialize(data, connection.msgtype), received)
    except AnyReaderError as exc:
        raise ValueError(f"{path}: cannot read the bag: {exc}") from exc
    return columns.raw(), columns.joints


class _Columns:
    """The arrays of the ``JointState`` messages of one topic, message by message, checked."""

    def __init__(self, path: str, topic: str, joints) -> None:
        self.path, self.topic, self.joints = path, topic, joints
        self.stamps: list[int] = []
        self.q: list = []
        self.qd: list = []
        self.tau: list = []
        self.velocities = True

    def add(self, message, received: int) -> None:
        """Append one message (``received``: the bag's receive time, ns)."""
        index = len(self.stamps)
        names = list(message.name)
        if self.joints is None:
            if not names:
                raise ValueError(f"{self.path}: message 0 on {self.topic!r} names no joints")
            self.joints = tuple(names)
        if tuple(names) == self.joints:
            select = slice(None)
        else:
            missing = [j for j in self.joints if j not in names]
            if missing:
                raise ValueError(
                    f"{self.path}: message {index} on {self.topic!r} lacks joint(s) {missing}: it names {names}"
                )
            select = [names.index(j) for j in self.joints]
        arrays = {}
        for field in ("position", "velocity", "effort"):
            values = np.asarray(getattr(message, field), dtype=np.float64)
            if field == "velocity" and values.size == 0:
                self.velocities = False  # ROS leaves arrays that were not measured empty
                continue
            if values.shape[0] < len(names):
                raise ValueError(
                    f"{self.path}: message {index} on {self.topic!r} has {len(names)} joint names but "
                    f"{values.shape[0]} {field} values"
                )
            arrays[field] = values[select]
        stamp = message.header.stamp
        nanoseconds = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
        self.stamps.append(nanoseconds if nanoseconds != 0 else int(received))
        self.q.append(arrays["position"])
        self.tau.append(arrays["effort"])
        if self.velocities:
            self.qd.append(arrays["velocity"])

    def raw(self) -> RawLog:
        """The messages as a :class:`RawLog` (ValueError when none, or when the stamps go backwards)."""
        if not self.stamps:
            raise ValueError(f"{self.path}: no message on {self.topic!r}")
        stamps = np.asarray(self.stamps, dtype=np.int64)
        backwards = np.flatnonzero(np.diff(stamps) < 0)
        if backwards.size:
            i = int(backwards[0])
            raise ValueError(
                f"{self.path}: the time stamps on {self.topic!r} go backwards at message {i + 1} "
                f"({stamps[i]} then {stamps[i + 1]} ns; {backwards.size} such step(s))"
            )
        q, tau = np.array(self.q), np.array(self.tau)
        qd = np.array(self.qd) if self.velocities else None
        missing = missing_rows(np.column_stack([q, tau] + ([qd] if qd is not None else [])))
        complete = ~missing
        if too_many_missing(missing):
            raise ValueError(
                f"{self.path}: {int(missing.sum())} of {missing.size} messages on {self.topic!r} carry NaN or "
                f"infinite positions, velocities or efforts of the joints read (the first is message "
                f"{int(np.flatnonzero(missing)[0])}): pick joints that are measured (joints=...)"
            )
        stamps = stamps[complete]  # a message that misses a value is a sample the driver missed
        return RawLog(
            path=self.path,
            t=(stamps - stamps[0]).astype(np.float64) * 1e-9,
            q=q[complete],
            tau=tau[complete],
            qd=qd[complete] if qd is not None else None,
            origin=float(stamps[0]) * 1e-9,
            missing=int(missing.sum()),
        )
