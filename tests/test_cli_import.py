"""End-to-end tests of `lnn import`, run in-process through lnn.cli.main."""

from __future__ import annotations

import numpy as np
import pytest

from lnn.cli import main
from lnn.data import Dataset
from lnn.logs import import_csv


def _log(path, *, duration=3.0, step=2e-3, seed=0, gap=None):
    """A jittered, noisy two-joint log with columns time, pos1, pos2, vel1, vel2, tau1, tau2."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(duration / step)) + 1) * step
    t = t + np.concatenate([[0.0], rng.uniform(-2e-4, 2e-4, t.shape[0] - 1)])
    if gap is not None:
        t = t[(t < gap[0]) | (t >= gap[0] + gap[1])]
    t = np.concatenate([t[:10], t[9:]])  # one repeated sample
    q = np.column_stack([np.sin(2 * np.pi * 0.8 * t), 0.5 * np.cos(2 * np.pi * 1.3 * t)])
    qd = np.column_stack(
        [2 * np.pi * 0.8 * np.cos(2 * np.pi * 0.8 * t), -0.5 * 2 * np.pi * 1.3 * np.sin(2 * np.pi * 1.3 * t)]
    )
    q = q + rng.normal(0.0, 1e-4, q.shape)
    tau = np.column_stack([np.cos(t), np.sin(t)])
    table = np.column_stack([t, q, qd, tau])
    np.savetxt(path, table, delimiter=",", header="time,pos1,pos2,vel1,vel2,tau1,tau2", comments="", fmt="%.17g")
    return path


ARGS = ["--time", "time", "--q", "pos1,pos2", "--qd", "vel1,vel2", "--tau", "tau1,tau2"]


def test_import_writes_the_dataset_of_import_csv_and_prints_the_report(tmp_path, capsys):
    logs = [_log(tmp_path / "a.csv", gap=(1.5, 0.2)), _log(tmp_path / "b.csv", seed=1)]
    output = tmp_path / "data.npz"
    code = main(["import", *map(str, logs), *ARGS, "-o", str(output)])
    assert code == 0
    out = capsys.readouterr().out
    assert "a.csv: " in out and "1 repeated samples dropped" in out and "1 gap(s) split" in out
    assert "gap after t=1.49" in out and "windows qd" in out and "step 2 ms" in out
    assert "measured qd vs d(q)/dt: lag" in out
    assert f"wrote {output}: 3 trajectory(ies)" in out and "dt=0.002" in out
    data = Dataset.load(output)
    expected = import_csv(logs, time="time", q=["pos1", "pos2"], qd=["vel1", "vel2"], tau=["tau1", "tau2"]).dataset
    np.testing.assert_array_equal(data.qdd, expected.qdd)
    np.testing.assert_array_equal(data.trajectory, expected.trajectory)
    assert data.dt == pytest.approx(2e-3, rel=1e-4)  # the jitter averages out


def test_import_refuses_to_overwrite_without_overwrite(tmp_path, capsys):
    log = _log(tmp_path / "a.csv")
    output = tmp_path / "data.npz"
    output.write_bytes(b"precious")
    assert main(["import", str(log), *ARGS, "-o", str(output)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert output.read_bytes() == b"precious"
    assert main(["import", str(log), *ARGS, "-o", str(output), "--overwrite"]) == 0
    assert Dataset.load(output).n_trajectories == 1


def test_import_options_reach_the_library(tmp_path, capsys):
    log = _log(tmp_path / "a.csv")
    output = tmp_path / "data.npz"
    code = main(
        [
            "import",
            str(log),
            "--time",
            "0",
            "--q",
            "1,2",
            "--tau",
            "5,6",
            "-o",
            str(output),
            "--window",
            "51",
            "--angular",
            "1,0",
            "--no-trim",
        ]
    )
    assert code == 0
    assert "windows qd 51,51, qdd 51,51" in capsys.readouterr().out
    data = Dataset.load(output)
    assert data.angular == (True, False)
    assert abs(len(data) - 1501) <= 1  # 3 s at 2 ms, untrimmed


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--q", "pos1,nope"], "no column named 'nope'; the columns are: time, pos1, pos2"),
        (["--angular", "1"], "--angular must be all, none or 2 comma-separated 0/1"),
        (["--q", "pos1,,pos2"], "--q must be comma-separated column names or indices"),
    ],
)
def test_import_errors_are_one_line_naming_what_was_wrong(tmp_path, capsys, extra, message):
    log = _log(tmp_path / "a.csv")
    args = ["--time", "time", "--q", "pos1,pos2", "--tau", "tau1,tau2", *extra]
    assert main(["import", str(log), *args, "-o", str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lnn import: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "x.npz").exists()


def test_import_needs_an_npz_output(tmp_path, capsys):
    log = _log(tmp_path / "a.csv")
    assert main(["import", str(log), *ARGS, "-o", str(tmp_path / "x.csv")]) == 2
    assert "must end in '.npz'" in capsys.readouterr().err


def test_import_joint_names_and_lag_reach_the_library(tmp_path, capsys):
    log = _log(tmp_path / "a.csv")
    output = tmp_path / "data.npz"
    code = main(["import", str(log), *ARGS, "-o", str(output), "--joints", "Joint1,Joint2", "--lag", "0.001"])
    assert code == 0
    out = capsys.readouterr().out
    assert "tau lag behind q:" in out and "shifted by 1 ms, 1 ms" in out and "joints Joint1,Joint2" in out
    assert Dataset.load(output).joint_names == ("Joint1", "Joint2")
    expected = import_csv(
        log, time="time", q=["pos1", "pos2"], qd=["vel1", "vel2"], tau=["tau1", "tau2"], lag=1e-3
    ).dataset
    np.testing.assert_array_equal(Dataset.load(output).tau, expected.tau)
    assert main(["import", str(log), *ARGS, "-o", str(tmp_path / "b.npz"), "--lag", "auto"]) == 0
    assert Dataset.load(tmp_path / "b.npz").joint_names == ("pos1", "pos2")  # the named --q columns


@pytest.mark.parametrize(
    "args, message",
    [
        (["--q", "pos1,pos2", "--tau", "tau1,tau2"], "CSV logs need --time (the columns of the time"),
        (ARGS + ["--topic", "/joint_states"], "--topic applies to ROS bags"),
        (ARGS + ["--lag", "soon"], "--lag must be auto, a number of seconds or one per joint"),
    ],
)
def test_import_options_that_do_not_fit_are_refused(tmp_path, capsys, args, message):
    log = _log(tmp_path / "a.csv")
    assert main(["import", str(log), *args, "-o", str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lnn import: error: ") and message in err


def test_import_like_reads_held_out_logs_with_the_training_imports_windows(tmp_path, capsys):
    train_log, held_log = _log(tmp_path / "a.csv", duration=6.0), _log(tmp_path / "b.csv", step=1e-3, seed=1)
    train = tmp_path / "train.npz"
    assert main(["import", str(train_log), *ARGS, "-o", str(train)]) == 0
    assert f"read held-out logs of this robot with --like {train}" in capsys.readouterr().out
    rule = Dataset.load(train).window_rule
    held = tmp_path / "held.npz"
    assert main(["import", str(held_log), *ARGS, "--like", str(train), "-o", str(held)]) == 0
    assert f"derivative windows: {train}'s rule, " in capsys.readouterr().out
    expected = import_csv(
        held_log, time="time", q=["pos1", "pos2"], qd=["vel1", "vel2"], tau=["tau1", "tau2"], window=rule
    ).dataset
    np.testing.assert_array_equal(Dataset.load(held).qdd, expected.qdd)
    assert Dataset.load(held).window_rule == rule


def test_import_like_refuses_what_does_not_fit(tmp_path, capsys):
    log = _log(tmp_path / "a.csv")
    train = tmp_path / "train.npz"
    assert main(["import", str(log), *ARGS, "-o", str(train)]) == 0
    capsys.readouterr()
    for extra, message in (
        (["--window", "41"], f"give --window or --like, not both; got --window 41 and --like {train}"),
        (["--order", "3"], f"--order 3 differs from the order of {train}'s import (4)"),
    ):
        assert main(["import", str(log), *ARGS, "--like", str(train), *extra, "-o", str(tmp_path / "x.npz")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("lnn import: error: ") and message in err
    plain = tmp_path / "plain.npz"
    Dataset(**{k: getattr(Dataset.load(train), k) for k in ("t", "q", "qd", "qdd", "tau", "trajectory")}).save(plain)
    assert main(["import", str(log), *ARGS, "--like", str(plain), "-o", str(tmp_path / "x.npz")]) == 2
    assert "records no derivative windows" in capsys.readouterr().err
