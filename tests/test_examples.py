"""Every example runs end to end with its small settings, so that none can rot."""

import pytest

from conftest import ROOT, load_script

EXAMPLES = ROOT / "examples"


def _load(name: str):
    return load_script(EXAMPLES / f"{name}.py")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, outputs",
    [
        ("custom_system", ["mass_matrix.png", "spring_pendulum.png", "spring_pendulum.keras"]),
        ("from_logged_data", ["double_pendulum_log.csv", "from_logs.keras", "from_logs.png"]),
        ("robot_arm", ["planar-arm.keras", "tracking.png"]),
        ("double_pendulum", ["energy_error.png"]),
    ],
)
def test_example_runs(name, outputs, tmp_path, capsys):
    assert _load(name).main(["--quick", "--output-dir", str(tmp_path)]) == 0
    for output in outputs:
        assert (tmp_path / output).stat().st_size > 0, output
    out = capsys.readouterr().out
    assert any(word in out for word in ("acceleration_error_median", "RMS tracking error", "energy error / 29.4"))


def test_custom_system_is_consistent():
    """The example's hand-written spring pendulum: ID(FD(tau)) = tau and energy conservation."""
    import numpy as np

    import lnn

    system = _load("custom_system").SpringPendulum()
    state = system.sample_state(5, rng=0)
    tau = np.random.default_rng(1).normal(size=(5, 2))
    qdd = system.acceleration(state.q, state.qd, tau)
    np.testing.assert_allclose(system.inverse_dynamics(state.q, state.qd, qdd), tau, atol=1e-12)
    t = np.linspace(0.0, 5.0, 51)
    trajectory = lnn.rollout(system, state.q, state.qd, t, rtol=1e-11, atol=1e-11)
    drift = np.abs(trajectory.energy - trajectory.energy[:, :1]).max()
    assert drift < 1e-7 * np.abs(trajectory.energy).max()


def test_log_reader_rejects_foreign_csv(tmp_path):
    module = _load("from_logged_data")
    path = tmp_path / "bad.csv"
    path.write_text("time,q0\n0,1\n")
    with pytest.raises(ValueError, match="t, trajectory"):
        module.read_log(path)
    with pytest.raises(FileNotFoundError, match="no such log file"):
        module.read_log(tmp_path / "missing.csv")
