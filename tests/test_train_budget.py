"""lnn.fit's defaults: the time budget alone decides the epochs, the default loss, identifiability.

The budget runs on a fake clock (``lnn.train._clock.now`` replaced by a
counter of epochs), so the tests count epochs instead of timing them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from lnn.data import Dataset  # noqa: E402
from lnn.models import LagrangianNetwork  # noqa: E402
from lnn.train import (  # noqa: E402
    DEFAULT_EPOCHS,
    IdentifiabilityWarning,
    _clock,  # noqa: E402
    default_loss,
    fit,
)

G = 9.81


def _pendulum(n=32, *, forced=True, seed=0):
    """Random pendulum states, ``qdd = -g sin q + tau`` (unforced: ``tau = 0``)."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-np.pi, np.pi, (n, 1))
    qd = rng.normal(0.0, 2.0, (n, 1))
    tau = rng.normal(0.0, 1.0, (n, 1)) if forced else np.zeros((n, 1))
    return Dataset(
        t=np.zeros(n), q=q, qd=qd, qdd=-G * np.sin(q) + tau, tau=tau, trajectory=np.arange(n), angular=(True,)
    )


def _model(kind="black-box"):
    return LagrangianNetwork(1, kind=kind, hidden=(4,), angular=(True,), dtype="float64", seed=0, xla=False)


class EpochClock:
    """A fake ``now()``: one second per finished epoch (advanced by a fit callback)."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self):
        return self.seconds

    def tick(self, epoch, logs):
        self.seconds += 1.0


@pytest.fixture
def fake_clock(monkeypatch):
    clock = EpochClock()
    monkeypatch.setattr(_clock, "now", clock)
    return clock


def test_time_limit_without_epochs_runs_for_the_budget(fake_clock):
    reports = []
    history = fit(
        _model(),
        _pendulum(),
        loss="acceleration",
        batch_size=64,
        validation=None,
        time_limit=150.5,  # on the fake clock (fake_clock): seconds are epochs here
        callbacks=[fake_clock.tick],
        learning_rate=1e-3,
        progress=lambda done, total, message="": reports.append((done, total)),
    )
    # Epoch k starts at k seconds while k + (the last epoch's 0 s) <= 150.5: epochs 0 .. 150,
    # far past the 100 epochs of a fit without a budget.
    assert len(history.epoch) == 151 > DEFAULT_EPOCHS
    assert history.stopped_reason == "time_limit"
    assert fake_clock.seconds == 151.0
    # The schedule spans the budget: warm-up, peak near the start, decayed at the end.
    assert max(history.lr) == pytest.approx(1e-3, rel=0.01)
    assert history.lr[-1] < 0.02 * 1e-3
    assert history.lr[75] == pytest.approx(
        1e-3 * (0.01 + 0.99 * 0.5 * (1 + np.cos(np.pi * ((75 / 150.5 - 0.02) / 0.98)))), rel=1e-6
    )
    # Progress without an epoch count: the elapsed share of the budget, out of 1.
    assert {total for _, total in reports} == {1.0}
    shares = [done for done, _ in reports]
    assert shares == sorted(shares) and shares[-1] == 1.0


def test_without_epochs_or_time_limit_fit_runs_the_default_epochs():
    history = fit(_model(), _pendulum(8), loss="acceleration", batch_size=64, validation=None)
    assert len(history.epoch) == DEFAULT_EPOCHS == 100
    assert history.stopped_reason == "epochs"


def test_epochs_and_time_limit_stop_at_the_first_reached(fake_clock):
    history = fit(
        _model(),
        _pendulum(),
        loss="acceleration",
        batch_size=64,
        validation=None,
        epochs=7,
        time_limit=1000.0,  # on the fake clock (fake_clock): seconds are epochs here
        callbacks=[fake_clock.tick],
    )
    assert len(history.epoch) == 7 and history.stopped_reason == "epochs"
    fake_clock.seconds = 0.0
    history = fit(
        _model(),
        _pendulum(),
        loss="acceleration",
        batch_size=64,
        validation=None,
        epochs=1000,
        time_limit=4.5,  # on the fake clock (fake_clock): seconds are epochs here
        callbacks=[fake_clock.tick],
    )
    assert len(history.epoch) == 5 and history.stopped_reason == "time_limit"


def test_clock_needs_a_limit():
    with pytest.raises(ValueError, match="time_limit"):
        _clock.Clock(time_limit=None, epochs=None)
    with pytest.raises(ValueError, match="epochs"):
        fit(_model(), _pendulum(), epochs=0)


# ------------------------------------------------------------------------- default loss
def test_default_loss_follows_the_data_and_the_kind():
    forced, unforced = _pendulum(), _pendulum(forced=False)
    assert default_loss(unforced) == "acceleration"
    assert default_loss(unforced, _model("structured")) == "acceleration"
    assert _model().kind == "black-box"
    assert default_loss(forced) == "torque"
    assert default_loss(forced, _model("kinetic-potential")) == "torque"
    assert default_loss(forced, _model("black-box")) == "torque"
    # The structured kind's Cholesky factor collapses under the torque loss alone.
    assert default_loss(forced, _model("structured")) == {"torque": 1.0, "acceleration": 1.0}
    with pytest.raises(TypeError, match="tau"):
        default_loss(object())


def test_fit_default_loss_is_default_loss_of_the_data():
    forced = _pendulum()
    history = fit(_model("kinetic-potential"), forced, epochs=1, batch_size=64, validation=None)
    assert history.weights == {"torque": 1.0}
    history = fit(_model("structured"), forced, epochs=1, batch_size=64, validation=None)
    assert history.weights == {"torque": 1.0, "acceleration-l2": 1.0}


# ---------------------------------------------------------------------- identifiability
def _warnings_of(**kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(_model(), epochs=1, batch_size=64, validation=None, **kwargs)
    return [w for w in caught if issubclass(w.category, IdentifiabilityWarning)]


@pytest.mark.parametrize("loss", ["torque", "energy", {"torque": 1.0, "acceleration": 1.0}])
def test_a_torque_or_energy_loss_on_data_without_torques_warns(loss):
    caught = _warnings_of(dataset=_pendulum(forced=False), loss=loss)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "torques are all zero" in message and "L = 0" in message
    assert caught[0].filename == __file__  # points at the caller of fit
    assert issubclass(IdentifiabilityWarning, UserWarning)


@pytest.mark.parametrize("loss", ["acceleration", "acceleration-l1", "auto"])
def test_an_acceleration_loss_on_unforced_data_warns_of_the_free_scale(loss):
    caught = _warnings_of(dataset=_pendulum(forced=False), loss=loss)
    assert len(caught) == 1
    assert "only up to a factor" in str(caught[0].message)


@pytest.mark.parametrize("loss", ["acceleration", "torque", "energy", "auto"])
def test_forced_data_identify_every_loss(loss):
    assert _warnings_of(dataset=_pendulum(), loss=loss) == []


def test_the_scale_really_is_free_on_unforced_data():
    """What the warning says: c L has the same accelerations (not the same torques or energies)."""
    data = _pendulum(forced=False)
    model = _model("kinetic-potential")
    model.adapt(data.q, data.qd)
    scaled = LagrangianNetwork.from_config(model.get_config())
    for target, source in zip(scaled.variables, model.variables):
        target.assign(source)
    c = 3.0
    for net in (scaled.kinetic_net, scaled.potential_net):  # linear output layers, no bias
        net._raw_kernels[-1].assign(c * net._raw_kernels[-1])
    np.testing.assert_allclose(
        scaled.acceleration(data.q, data.qd).numpy(),
        model.acceleration(data.q, data.qd).numpy(),
        rtol=1e-10,
        atol=1e-10,
    )
    np.testing.assert_allclose(
        scaled.inverse_dynamics(data.q, data.qd, data.qdd).numpy(),
        c * model.inverse_dynamics(data.q, data.qd, data.qdd).numpy(),
        rtol=1e-10,
        atol=1e-10,
    )
    np.testing.assert_allclose(
        scaled.energy(data.q, data.qd).numpy(), c * model.energy(data.q, data.qd).numpy(), rtol=1e-10, atol=1e-10
    )
