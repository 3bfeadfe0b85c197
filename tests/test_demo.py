"""``lnn demo`` and :func:`lnn.demo.run_demo`: every file written, nothing overwritten unasked."""

import csv
import dataclasses

import numpy as np
import pytest
from PIL import Image

import lnn
import simulations
from lnn.cli import main
from lnn.demo import DEMOS, DemoConfig, run_demo
from lnn.plot import RolloutPair

TINY = dict(
    hidden=(16, 16),
    n_trajectories=6,
    duration=1.0,
    dt=0.05,
    epochs=2,
    time_limit=None,  # the epochs alone end the training: the same run on any machine
    n_rollouts=2,
    rollout_duration=0.5,
    rollout_dt=0.05,
    animation_duration=0.3,
)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_writes_every_output(name, tmp_path):
    config = dataclasses.replace(DEMOS[name], **TINY)
    calls = []
    result = run_demo(
        simulations.make_system(config.system),
        config=config,
        output_dir=tmp_path,
        progress=lambda done, total, message="": calls.append((done, total)),
    )
    for path in (
        result.dataset,
        result.model,
        result.rollouts,
        result.metrics_csv,
        result.history_csv,
        result.figure_png,
        result.figure_pdf,
        result.animation,
    ):
        assert path.parent == tmp_path and path.stat().st_size > 0, path
    assert lnn.Dataset.load(result.dataset).system == config.system
    assert isinstance(lnn.load_model(result.model), lnn.LagrangianNetwork)
    with Image.open(result.figure_png) as image:
        assert np.asarray(image.convert("L")).std() > 5  # not blank
    with Image.open(result.animation) as gif:
        assert gif.n_frames >= 2
    assert result.figure_pdf.read_bytes().startswith(b"%PDF")
    assert calls[-1][0] == calls[-1][1]  # progress reached the end
    # The values in the files: learning itself is checked where it has the epochs to show (test_examples.py,
    # test_docs.py); here, that the demo's files hold the truth and the saved model, consistently.
    system = simulations.make_system(config.system)
    pair = RolloutPair.load(result.rollouts)
    n = system.n_dof
    np.testing.assert_array_equal(pair.learned.q[:, 0], pair.true.q[:, 0])  # from the same held-out states
    for dynamics, path, rtol in ((system, pair.true, 1e-6), (lnn.load_model(result.model), pair.learned, 1e-3)):
        # Each rollout solves its own Euler-Lagrange equations under the recorded torques (zero if unforced).
        q, qd, qdd = (np.reshape(x, (-1, n)) for x in (path.q, path.qd, path.qdd))
        tau = np.zeros_like(q) if path.tau is None else np.reshape(path.tau, (-1, n))
        scale = np.abs(np.asarray(dynamics.inverse_dynamics(q, qd, np.zeros_like(q)))).max()
        got = np.asarray(dynamics.inverse_dynamics(q, qd, qdd))
        np.testing.assert_allclose(got, tau, rtol=0, atol=rtol * scale)
    assert len(result.history.epoch) == TINY["epochs"] and result.history.stopped_reason == "epochs"
    assert result.history.train["total"][-1] < result.history.train["total"][0]
    with open(result.metrics_csv, newline="") as handle:
        written = {row["metric"]: float(row["value"]) for row in csv.DictReader(handle)}
    assert written["acceleration_error_median"] == pytest.approx(result.metrics["acceleration_error_median"])


def test_demo_refuses_to_overwrite_before_any_work(tmp_path, capsys):
    (tmp_path / "model.keras").write_bytes(b"the user's model")
    assert main(["demo", "-o", str(tmp_path)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (tmp_path / "model.keras").read_bytes() == b"the user's model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]


def test_demo_rejects_a_bad_config():
    with pytest.raises(TypeError, match="DemoConfig"):
        run_demo(simulations.Pendulum(), config={"system": "pendulum"})
    assert isinstance(DEMOS["double-pendulum"], DemoConfig)
