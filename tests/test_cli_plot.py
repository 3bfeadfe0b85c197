"""``lnn rollout`` and ``lnn plot`` in-process: files written, read back and drawn."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image, ImageSequence

import lnn
import simulations
from lnn.cli import main
from lnn.plot import RolloutPair

from conftest import check_png

pytestmark = pytest.mark.filterwarnings("ignore:Animation was deleted:UserWarning")

DURATION, DT, SEED, B = 0.4, 0.05, 3, 2


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small untrained float64 model, its rollout pair, a training log and a dataset."""
    root = tmp_path_factory.mktemp("cli_plot")
    model = lnn.LagrangianNetwork(2, kind="structured", hidden=(8, 8), angular=(True, True), dtype="float64", seed=0)
    model.mass_matrix(np.zeros((1, 2)), np.zeros((1, 2)))  # build the weights
    model.save(root / "model.keras")
    code = main(
        [
            "rollout",
            str(root / "model.keras"),
            "--system",
            "double-pendulum",
            "--param",
            "m2=1.5",
            "--trajectories",
            str(B),
            "--duration",
            str(DURATION),
            "--dt",
            str(DT),
            "--seed",
            str(SEED),
            "-o",
            str(root / "rollout.npz"),
        ]
    )
    assert code == 0
    history = lnn.History(
        epoch=np.arange(5),
        train={"total": np.linspace(1, 0.2, 5), "acceleration": np.linspace(1, 0.2, 5)},
        validation={"total": np.array([1.1, 0.6, 0.4, 0.45, 0.5])},
        lr=np.full(5, 1e-3),
        time=np.arange(5.0),
        best_epoch=2,
        best_loss=0.4,
        stopped_reason="epochs",
        traces=1,
    )
    rows = history.as_rows()
    with open(root / "log.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    dataset = lnn.generate(simulations.DoublePendulum(), n_trajectories=2, duration=0.3, dt=0.05, seed=0)
    dataset.save(root / "dataset.npz")
    return root


@pytest.mark.slow
def test_rollout_writes_true_and_learned_from_the_same_states(files):
    pair = RolloutPair.load(files / "rollout.npz")
    t = np.arange(int(round(DURATION / DT)) + 1) * DT
    np.testing.assert_allclose(pair.true.t, t)
    system = simulations.make_system("double-pendulum", m2=1.5)
    state = system.sample_state(B, rng=SEED)
    np.testing.assert_allclose(pair.learned.q[:, 0], state.q)
    np.testing.assert_allclose(pair.learned.qd[:, 0], state.qd)
    expected = lnn.rollout(system, state.q, state.qd, t)
    np.testing.assert_allclose(pair.true.q, expected.q, rtol=1e-10, atol=1e-12)
    assert pair.metadata["system"] == "double-pendulum"
    assert pair.metadata["parameters"]["m2"] == 1.5
    assert pair.metadata["angular"] == [True, True]
    assert pair.metadata["model"].endswith("model.keras")


CASES = {
    "trajectory": ["rollout.npz"],
    "phase": ["rollout.npz"],
    "energy": ["rollout.npz"],
    "error": ["rollout.npz"],
    "paper": ["rollout.npz"],
    "history": ["log.csv"],
    "mass-matrix": ["model.keras", "rollout.npz"],
    "potential": ["model.keras", "--system", "double-pendulum"],
    "torques": ["model.keras", "rollout.npz"],
    "residuals": ["model.keras", "dataset.npz"],
}


#: The lnn.plot function each kind draws with.
DRAWN_BY = {
    "trajectory": "trajectories",
    "phase": "phase_portraits",
    "energy": "energy_error",
    "error": "rollout_error",
    "paper": "paper_figure",
    "history": "history",
    "mass-matrix": "mass_matrix",
    "potential": "potential",
    "torques": "torques",
    "residuals": "residuals",
}


def _same_model(drawn, files):
    """The model the CLI drew is the saved one: same energies at a few states."""
    saved = lnn.load_model(files / "model.keras")
    q, qd = np.array([[0.3, -1.2], [2.0, 0.5]]), np.array([[0.4, -0.1], [1.5, 2.0]])
    np.testing.assert_array_equal(drawn.lagrangian(q, qd).numpy(), saved.lagrangian(q, qd).numpy())


def _check_drawn(kind, files, args, kwargs):
    """What the CLI passed to the lnn.plot function is what the files hold (the figures' values: test_plot.py)."""
    pair = RolloutPair.load(files / "rollout.npz")
    truth = simulations.make_system("double-pendulum", m2=1.5).parameters()  # named by the rollout's metadata
    if kind in ("trajectory", "phase", "paper", "error"):
        np.testing.assert_array_equal(args[0].q, pair.true.q)
        learned = args[1]["learned"] if kind == "error" else args[1]
        np.testing.assert_array_equal(learned.q, pair.learned.q)
        if kind == "paper":
            assert kwargs["system"].parameters() == truth
    elif kind == "energy":
        np.testing.assert_array_equal(args[0]["learned"].q, pair.learned.q)
        np.testing.assert_array_equal(kwargs["reference"].q, pair.true.q)
        assert kwargs["system"].parameters() == truth
    elif kind == "history":
        assert args[0] == files / "log.csv"  # the log is read by lnn.plot.history (test_plot.py)
    elif kind in ("mass-matrix", "torques"):
        assert args[0].parameters() == truth
        _same_model(args[2] if kind == "torques" else args[1], files)
        if kind == "torques":
            np.testing.assert_array_equal(args[1].q, pair.true.q)
    elif kind == "potential":
        assert args[0].parameters() == simulations.DoublePendulum().parameters()  # --system, default parameters
        _same_model(args[1], files)
    else:
        _same_model(args[0], files)
        np.testing.assert_array_equal(args[1].q, lnn.Dataset.load(files / "dataset.npz").q)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_plot_every_kind_from_the_files(kind, files, capsys, monkeypatch):
    from lnn import plot

    calls = []
    real = getattr(plot, DRAWN_BY[kind])

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(plot, DRAWN_BY[kind], spy)
    inputs = [str(files / a) if "." in a else a for a in CASES[kind]]
    suffix = ".pdf" if kind == "history" else ".png"
    output = files / f"{kind}{suffix}"
    assert main(["plot", kind, *inputs, "-o", str(output)]) == 0
    assert f"wrote {output}" in capsys.readouterr().out
    assert len(calls) == 1, calls
    _check_drawn(kind, files, *calls[0])
    if suffix == ".png":
        check_png(output)
    else:
        assert output.read_bytes().startswith(b"%PDF-")


@pytest.mark.slow
def test_a_model_without_a_known_system_is_drawn_alone_over_its_training_range(files, capsys):
    from lnn.cli.plot import _training_range

    for kind in ("mass-matrix", "potential"):
        output = files / f"alone-{kind}.png"
        assert main(["plot", kind, str(files / "model.keras"), "-o", str(output)]) == 0  # no --system, no .npz
        check_png(output)
    model = lnn.load_model(files / "model.keras")
    low, high = _training_range(model)
    box = model.training_box()
    if np.isfinite(box.q_low).all() and np.isfinite(box.q_high).all():
        np.testing.assert_array_equal(low, box.q_low)
        np.testing.assert_array_equal(high, box.q_high)
    else:  # an angle that turned fully: the plots' default range
        assert low is None and high is None
    assert _training_range(object()) == (None, None)


@pytest.mark.slow
def test_rollout_replays_a_datasets_recordings_with_their_torques(files, capsys):
    """A robot learned from logs has no true system to roll out: its logs are the truth, driven by their torques."""
    output = files / "replay.npz"
    assert main(["rollout", str(files / "model.keras"), "--data", str(files / "dataset.npz"), "-o", str(output)]) == 0
    assert "2 recordings x 7 samples of" in capsys.readouterr().out
    pair = RolloutPair.load(output)
    data = lnn.Dataset.load(files / "dataset.npz")
    np.testing.assert_array_equal(pair.true.q, data.as_trajectory().q)
    np.testing.assert_allclose(pair.learned.q[:, 0], data.as_trajectory().q[:, 0])
    expected = lnn.rollout(lnn.load_model(files / "model.keras"), pair.true.q[:, 0], pair.true.qd[:, 0], pair.true.t)
    np.testing.assert_allclose(pair.learned.q, expected.q, rtol=1e-5, atol=1e-6)  # unforced data: tau = 0
    assert pair.metadata["system"] is None and pair.metadata["data"].endswith("dataset.npz")
    assert main(["plot", "trajectory", str(output), "-o", str(files / "replay.png")]) == 0
    for extra in ([], ["--system", "double-pendulum", "--data", str(files / "dataset.npz")]):
        assert main(["rollout", str(files / "model.keras"), *extra, "-o", str(files / "bad.npz")]) == 2
        assert "give --system NAME (roll out the true system) or --data DATA.npz" in capsys.readouterr().err
    replay = ["rollout", str(files / "model.keras"), "--data", str(files / "dataset.npz"), "-o", str(files / "b.npz")]
    assert main([*replay, "--dt", "0.1", "--seed", "3"]) == 2
    assert "--dt and --seed apply to --system: --data replays the recordings on their grid" in capsys.readouterr().err


@pytest.mark.slow
def test_plot_animate_writes_a_gif_with_one_frame_per_sample(files):
    output = files / "pendulum.gif"
    assert (
        main(
            [
                "plot",
                "animate",
                str(files / "rollout.npz"),
                "-o",
                str(output),
                "--fps",
                "20",
                "--layout",
                "side-by-side",
            ]
        )
        == 0
    )
    with Image.open(output) as image:
        frames = sum(1 for _ in ImageSequence.Iterator(image))
    assert frames == int(round(DURATION / DT)) + 1  # dt = 1 / fps: every sample is a frame


def test_plot_reads_trajectory_and_dataset_files(files, tmp_path):
    dataset = lnn.Dataset.load(files / "dataset.npz")
    true = dataset.as_trajectory()
    learned = lnn.rollout(simulations.DoublePendulum(m2=1.2), true.q[:, 0], true.qd[:, 0], true.t)
    true.save(tmp_path / "true.npz")
    learned.save(tmp_path / "learned.npz")
    for kind in ("trajectory", "error"):
        output = tmp_path / f"{kind}.png"
        assert main(["plot", kind, str(tmp_path / "true.npz"), str(tmp_path / "learned.npz"), "-o", str(output)]) == 0
        check_png(output)
    assert main(["plot", "energy", str(files / "dataset.npz"), "-o", str(tmp_path / "e.svg")]) == 0
    assert "<svg" in (tmp_path / "e.svg").read_text()[:500]
    assert main(["plot", "phase", str(files / "dataset.npz"), "-o", str(tmp_path / "p.png")]) == 0


def test_plot_refuses_to_overwrite_and_reports_bad_input(files, tmp_path, capsys):
    dataset = str(files / "dataset.npz")
    output = tmp_path / "t.png"
    assert main(["plot", "trajectory", dataset, "-o", str(output)]) == 0
    stamp = output.stat().st_mtime_ns
    assert main(["plot", "trajectory", dataset, "-o", str(output)]) == 2
    assert "--force" in capsys.readouterr().err
    assert output.stat().st_mtime_ns == stamp
    assert main(["plot", "trajectory", dataset, "-o", str(output), "--force"]) == 0
    assert main(["plot", "trajectory", dataset, "-o", str(tmp_path / "t.gif")]) == 2
    assert "-o must end in one of .png, .pdf, .svg" in capsys.readouterr().err
    assert main(["plot", "animate", dataset, "-o", str(tmp_path / "a.png")]) == 2
    assert f"-o must end in one of .gif, .mp4, got '{tmp_path / 'a.png'}'" in capsys.readouterr().err
    assert main(["plot", "history", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "h.png")]) == 2
    assert "no such input file" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["plot", "trajectory", str(tmp_path / "notes.txt"), "-o", str(tmp_path / "n.png")]) == 2
    assert "expected .npz, .keras or .csv" in capsys.readouterr().err
    bare = tmp_path / "bare.npz"
    replace(lnn.Dataset.load(dataset).as_trajectory(), metadata={}).save(bare)  # no system named
    assert main(["plot", "animate", str(bare), "-o", str(tmp_path / "a.gif")]) == 2
    assert "--system" in capsys.readouterr().err


def test_plot_residuals_of_a_model_on_a_dataset(files, tmp_path, capsys):
    output = tmp_path / "residuals.pdf"
    argv = ["plot", "residuals", str(files / "model.keras"), str(files / "dataset.npz"), "-o", str(output)]
    assert main(argv) == 0
    assert f"wrote {output}" in capsys.readouterr().out
    assert output.read_bytes().startswith(b"%PDF-")
    stamp = output.stat().st_mtime_ns
    assert main(argv) == 2
    assert "--force" in capsys.readouterr().err
    assert output.stat().st_mtime_ns == stamp
    assert main(argv + ["--force", "--coordinate", "1"]) == 0
    assert output.stat().st_mtime_ns != stamp
    assert main(argv + ["--force", "--by", "recordings"]) == 0  # the dataset's two trajectories, each held out
    assert main(["plot", "residuals", str(files / "model.keras"), "-o", str(tmp_path / "r.png")]) == 2
    assert "needs exactly one dataset" in capsys.readouterr().err
    assert main(["plot", "residuals", str(files / "dataset.npz"), "-o", str(tmp_path / "r.png")]) == 2
    assert "needs exactly one model" in capsys.readouterr().err
    assert not (tmp_path / "r.png").exists()


def test_plot_residuals_reads_logs_of_different_lengths_and_rates(files, tmp_path, capsys):
    # Imported logs as robots write them: one recording of 12 s at 5 ms, one of 9 s at 6.5 ms. They are no
    # batch on one time grid (the kinds that draw trajectories say so), but the residual reads them all.
    system, parts = simulations.DoublePendulum(), []
    for k, (step, duration) in enumerate(((5e-3, 12.0), (6.5e-3, 9.0))):
        t = np.arange(0.0, duration, step)
        q = np.column_stack([np.sin(0.7 * t + k), 0.8 * np.cos(1.1 * t)])
        qd = np.column_stack([0.7 * np.cos(0.7 * t + k), -0.88 * np.sin(1.1 * t)])
        qdd = np.column_stack([-0.49 * np.sin(0.7 * t + k), -0.968 * np.cos(1.1 * t)])
        parts.append((t, q, qd, qdd, system.inverse_dynamics(q, qd, qdd), np.full(t.size, k)))
    t, q, qd, qdd, tau, ids = (np.concatenate(x) for x in zip(*parts))
    logs = tmp_path / "logs.npz"
    lnn.Dataset(t=t, q=q, qd=qd, qdd=qdd, tau=tau, trajectory=ids, angular=(True, True)).save(logs)
    for by in ("blocks", "recordings"):
        output = tmp_path / f"{by}.png"
        assert main(["plot", "residuals", str(files / "model.keras"), str(logs), "--by", by, "-o", str(output)]) == 0
        assert output.exists()
    capsys.readouterr()
    assert main(["plot", "trajectory", str(logs), "-o", str(tmp_path / "t.png")]) == 2
    err = capsys.readouterr().err
    assert "plot trajectory draws trajectories on one time grid, but the dataset" in err and "lnn rollout" in err


def test_rollout_rejects_bad_options(files, tmp_path, capsys):
    model = str(files / "model.keras")
    assert (
        main(["rollout", model, "--system", "double-pendulum", "--duration", "-1", "-o", str(tmp_path / "r.npz")]) == 2
    )
    assert "--duration must be a positive number" in capsys.readouterr().err
    assert main(["rollout", model, "--system", "no-such-system", "-o", str(tmp_path / "r.npz")]) == 2
    assert "known systems" in capsys.readouterr().err
    assert main(["rollout", model, "--system", "double-pendulum", "-o", str(tmp_path / "r.txt")]) == 2
    assert f"lnn rollout: error: -o must end in one of .npz, got '{tmp_path / 'r.txt'}'" in capsys.readouterr().err
    assert (
        main(
            [
                "rollout",
                model,
                "--system",
                "cart-pole",
                "--trajectories",
                "1",
                "--duration",
                "0.1",
                "-o",
                str(files / "rollout.npz"),
            ]
        )
        == 2
    )
    assert "refusing to overwrite" in capsys.readouterr().err


def test_rollout_with_a_compiled_method_rolls_the_truth_out_with_dop853(files, tmp_path):
    out = tmp_path / "compiled.npz"
    argv = ["rollout", str(files / "model.keras"), "--system", "double-pendulum", "--param", "m2=1.5"]
    argv += ["--trajectories", str(B), "--duration", str(DURATION), "--dt", str(DT), "--seed", str(SEED)]
    assert main(argv + ["--method", "tsit5", "-o", str(out)]) == 0
    pair = RolloutPair.load(out)
    assert (pair.metadata["method"], pair.metadata["truth_method"]) == ("tsit5", "DOP853")
    reference = RolloutPair.load(files / "rollout.npz")  # DOP853 for both, default tolerances
    np.testing.assert_allclose(pair.true.q, reference.true.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair.learned.q, reference.learned.q, rtol=0, atol=1e-6)
