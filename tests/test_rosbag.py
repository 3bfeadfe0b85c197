"""ROS bags in (lnn.Dataset.from_rosbag, lnn.logs.import_rosbag, lnn import): bags written with rosbags' own writers.

ROS 1 (.bag), ROS 2 sqlite3 and MCAP (bag directories and single files) hold JointState messages of a planted
motion; the import must give it back, from the joints selected, in the order given.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

rosbags = pytest.importorskip("rosbags")

from rosbags.rosbag1 import Writer as Writer1  # noqa: E402
from rosbags.rosbag2 import StoragePlugin  # noqa: E402
from rosbags.rosbag2 import Writer as Writer2  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

import lnn  # noqa: E402
from lnn.cli import main  # noqa: E402
from lnn.logs import import_rosbag  # noqa: E402

TOPIC = "/joint_states"
#: The bag's joints, in the messages' order; the dataset asks for two of them in another order.
NAMES = ("shoulder", "elbow", "gripper")
EPOCH = 1_700_000_000_000_000_000  # ns: stamps of the 2020s, where float seconds lose precision


def motion(t, derivative=0):
    """``(T, 3)`` positions (or derivatives): two joints moving as sums of sinusoids, the gripper still."""
    t = np.asarray(t, dtype=np.float64)
    columns = []
    for terms in (((0.5, 0.4, 0.2), (0.2, 1.7, 1.0)), ((0.4, 0.6, 0.5), (0.1, 2.3, 2.0)), ()):
        value = np.zeros_like(t)
        for a, f, phi in terms:
            w = 2 * np.pi * f
            value = value + a * w**derivative * np.sin(w * t + phi + derivative * np.pi / 2)
        columns.append(value)
    return np.column_stack(columns)


def effort(t):
    """``(T, 3)`` torques."""
    return np.column_stack([np.cos(2 * np.pi * 0.7 * t), 0.5 * np.sin(2 * np.pi * 1.1 * t), np.zeros_like(t)])


def messages(store, t, *, zero_stamps=False, velocity=True, edit=None):
    """``(receive time ns, JointState)`` at times ``t (T,)``; receive times 3 ms after the header stamps."""
    joint_state, header, time = (
        store.types[name]
        for name in ("sensor_msgs/msg/JointState", "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    q, qd, tau = motion(t), motion(t, 1), effort(t)
    ros1 = "seq" in header.__dataclass_fields__
    for k in range(t.shape[0]):
        stamp = EPOCH + int(round(t[k] * 1e9))
        fields = dict(stamp=time(sec=0, nanosec=0) if zero_stamps else time(sec=stamp // 10**9, nanosec=stamp % 10**9))
        message = dict(
            header=header(**fields, frame_id="", **({"seq": k} if ros1 else {})),
            name=list(NAMES),
            position=q[k].copy(),
            velocity=qd[k].copy() if velocity else np.zeros(0),
            effort=tau[k].copy(),
        )
        if edit is not None:
            edit(k, message)
        yield (stamp if zero_stamps else stamp + 3_000_000), joint_state(**message)


def write_bag(path: Path, t, *, kind, **options):
    """Write a bag of ``kind`` ("ros1", "sqlite3" or "mcap") at ``path`` with :func:`messages`."""
    if kind == "ros1":
        store = get_typestore(Stores.ROS1_NOETIC)
        with Writer1(path) as writer:
            connection = writer.add_connection(TOPIC, "sensor_msgs/msg/JointState", typestore=store)
            for received, message in messages(store, t, **options):
                writer.write(connection, received, store.serialize_ros1(message, connection.msgtype))
        return path
    store = get_typestore(Stores.ROS2_HUMBLE)
    plugin = StoragePlugin.MCAP if kind == "mcap" else StoragePlugin.SQLITE3
    with Writer2(path, version=9, storage_plugin=plugin) as writer:
        connection = writer.add_connection(TOPIC, "sensor_msgs/msg/JointState", typestore=store)
        other = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
        writer.write(other, EPOCH, store.serialize_cdr(store.types["std_msgs/msg/String"](data="hello"), other.msgtype))
        for received, message in messages(store, t, **options):
            writer.write(connection, received, store.serialize_cdr(message, connection.msgtype))
    return path


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    """The same 4 s of 500 Hz motion (jittered stamps) in a ROS 1 bag and ROS 2 sqlite3 and MCAP bags."""
    folder = tmp_path_factory.mktemp("bags")
    rng = np.random.default_rng(0)
    t = np.arange(2001) * 2e-3 + np.concatenate([[0.0], rng.uniform(-2e-4, 2e-4, 2000)])
    return {
        "ros1": write_bag(folder / "run.bag", t, kind="ros1"),
        "sqlite3": write_bag(folder / "run_sqlite3", t, kind="sqlite3"),
        "mcap": write_bag(folder / "run_mcap", t, kind="mcap"),
    }


def check_motion(data, columns=(0, 1), *, tau_atol=2e-5):
    """The dataset's q, qd, qdd and tau against the planted motion at its times (from the first stamp)."""
    t = data.t
    for k, name in enumerate(("q", "qd", "qdd")):
        truth = motion(t, k)[:, columns]
        error = np.sqrt(np.mean((getattr(data, name) - truth) ** 2, axis=0)) / np.sqrt(np.mean(truth**2, axis=0))
        assert (error < (1e-6, 1e-5, 2e-3)[k]).all(), (name, error)
    # Torques resampled linearly over the jittered 2 ms stamps: h^2 tau'' / 8 = 1e-5 at most.
    np.testing.assert_allclose(data.tau, effort(t)[:, columns], atol=tau_atol)


@pytest.mark.parametrize("kind", ["ros1", "sqlite3", "mcap"])
def test_a_bag_gives_back_the_planted_motion_of_the_joints_asked_for(bags, kind):
    result = import_rosbag(bags[kind], topic=TOPIC, joints=["elbow", "shoulder"])
    data, report = result.dataset, result.report.files[0]
    assert data.joint_names == ("elbow", "shoulder") and data.n_dof == 2
    assert report.rows == 2001 and report.gaps == () and data.dt == pytest.approx(2e-3, rel=1e-3)
    assert report.velocity_lag and np.abs(report.velocity_lag).max() < 1e-4  # the messages' velocities compared
    check_motion(data, columns=(1, 0))
    same = lnn.Dataset.from_rosbag(bags[kind], topic=TOPIC, joints=("elbow", "shoulder"))
    np.testing.assert_array_equal(same.qdd, data.qdd)


def test_by_default_every_joint_of_the_first_message_is_read(bags):
    data = import_rosbag(bags["mcap"], topic=TOPIC, window=31).dataset
    assert data.joint_names == NAMES
    np.testing.assert_allclose(data.q[:, 2], 0.0, atol=1e-12)


def test_single_storage_files_and_several_bags(bags):
    mcap = next(bags["mcap"].glob("*.mcap"))
    db3 = next(bags["sqlite3"].glob("*.db3"))
    result = import_rosbag([mcap, db3, bags["ros1"]], topic=TOPIC, joints=["shoulder", "elbow"])
    assert result.dataset.n_trajectories == 3 and [f.path for f in result.report.files] == [
        str(mcap),
        str(db3),
        str(bags["ros1"]),
    ]
    check_motion(result.dataset)


def test_zero_header_stamps_fall_back_to_the_receive_time(tmp_path):
    t = np.arange(1501) * 2e-3
    bag = write_bag(tmp_path / "zero", t, kind="mcap", zero_stamps=True, velocity=False)
    result = import_rosbag(bag, topic=TOPIC, joints=["shoulder", "elbow"])
    assert not result.report.files[0].resampled  # the receive times are the exact 2 ms grid
    assert result.report.files[0].velocity_lag == ()  # empty velocity arrays: none measured
    check_motion(result.dataset)
    with pytest.raises(ValueError, match=r"velocity='measured' needs velocities in every message"):
        import_rosbag(bag, topic=TOPIC, velocity="measured")


def _drop_elbow(k, message):
    if k == 7:
        message["name"] = ["shoulder", "gripper"]
        message["position"] = message["position"][[0, 2]]
        message["effort"] = message["effort"][[0, 2]]
        message["velocity"] = message["velocity"][[0, 2]]


def _short_effort(k, message):
    if k == 11:
        message["effort"] = message["effort"][:2]


@pytest.mark.parametrize(
    "edit, message",
    [
        (_drop_elbow, r"message 7 on '/joint_states' lacks joint\(s\) \['elbow'\]: it names \['shoulder', 'gripper'\]"),
        (_short_effort, r"message 11 on '/joint_states' has 3 joint names but 2 effort values"),
    ],
)
def test_a_bad_message_is_named_by_its_index(tmp_path, edit, message):
    bag = write_bag(tmp_path / "bad", np.arange(200) * 2e-3, kind="sqlite3", edit=edit)
    with pytest.raises(ValueError, match=message):
        import_rosbag(bag, topic=TOPIC, joints=["shoulder", "elbow"])


def test_messages_with_nan_values_are_samples_the_driver_missed(tmp_path):
    """A driver that publishes NaN for an unmeasured joint, or now and then for one that is: those messages go,
    counted; a joint that is NaN in most messages is refused by name."""

    def nan(k, message):
        message["effort"][2] = np.nan  # the gripper: never measured
        if k in (300, 900, 1500):
            message["position"][0] = np.nan

    bag = write_bag(tmp_path / "nan", np.arange(2001) * 2e-3, kind="mcap", edit=nan)
    result = import_rosbag(bag, topic=TOPIC, joints=["shoulder", "elbow"])
    report = result.report.files[0]
    assert report.missing == 3 and report.rows == 1998 and report.bridged == 3 and report.gaps == ()
    check_motion(result.dataset, tau_atol=1e-4)  # interpolated over 4 ms where a message went: h^2 tau'' / 8
    with pytest.raises(ValueError, match=r"2001 of 2001 messages on '/joint_states' carry NaN .*pick joints"):
        import_rosbag(bag, topic=TOPIC)  # every joint, the gripper's effort included


def test_bad_bags_and_arguments_are_named(bags, tmp_path):
    with pytest.raises(ValueError, match=r"no topic '/joints'; the bag has: /chatter \(std_msgs/msg/String\), "):
        import_rosbag(bags["mcap"], topic="/joints")
    with pytest.raises(
        ValueError, match=r"topic '/chatter' carries std_msgs/msg/String, not sensor_msgs/msg/JointState"
    ):
        import_rosbag(bags["mcap"], topic="/chatter")
    with pytest.raises(FileNotFoundError, match=r"no such ROS bag: .*nothere\.mcap"):
        import_rosbag(tmp_path / "nothere.mcap", topic=TOPIC)
    (tmp_path / "log.csv").write_text("t,q\n")
    with pytest.raises(ValueError, match=r"log\.csv: not a ROS bag"):
        import_rosbag(tmp_path / "log.csv", topic=TOPIC)
    with pytest.raises(TypeError, match=r"topic must be the name of a topic \(str\)"):
        import_rosbag(bags["mcap"], topic=None)
    with pytest.raises(ValueError, match=r"joints must be distinct names"):
        import_rosbag(bags["mcap"], topic=TOPIC, joints=["elbow", "elbow"])


def test_lnn_import_reads_a_bag(bags, tmp_path, capsys):
    output = tmp_path / "data.npz"
    mcap = next(bags["mcap"].glob("*.mcap"))
    assert main(["import", str(mcap), "--topic", TOPIC, "--joints", "shoulder,elbow", "-o", str(output)]) == 0
    out = capsys.readouterr().out
    assert "2001 rows" in out and "joints shoulder,elbow" in out
    data = lnn.Dataset.load(output)
    assert data.joint_names == ("shoulder", "elbow")
    check_motion(data)
    assert main(["import", str(mcap), "-o", str(tmp_path / "x.npz")]) == 2
    assert "ROS bags need --topic" in capsys.readouterr().err
    csv = tmp_path / "log.csv"
    csv.write_text("t,q,tau\n0,0,0\n")
    assert main(["import", str(mcap), str(csv), "--topic", TOPIC, "-o", str(tmp_path / "x.npz")]) == 2
    assert "give either CSV logs or ROS bags, not both" in capsys.readouterr().err
    assert main(["import", str(bags["ros1"]), "--topic", TOPIC, "--q", "a", "-o", str(tmp_path / "x.npz")]) == 2
    assert "--q apply to CSV logs, not to ROS bags" in capsys.readouterr().err
