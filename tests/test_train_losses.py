"""The parts of lnn.train: the loss-term registry, its scales and values, the schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from lnn import _validate  # noqa: E402
from lnn.train import LOSSES, SCHEDULES, TERMS, LossTerm, fit  # noqa: E402
from lnn.train._losses import Batch, loss_weights, term_scales  # noqa: E402
from lnn.train._schedule import Schedule, learning_rate  # noqa: E402


def test_losses_are_the_names_and_aliases_of_the_registered_terms():
    assert LOSSES == {
        "acceleration": "acceleration-l2",
        "acceleration-l2": "acceleration-l2",
        "acceleration-l1": "acceleration-l1",
        "torque": "torque",
        "inverse-dynamics": "torque",
        "energy": "energy",
        "power": "energy",
        "rollout": "rollout",
    }
    assert set(LOSSES.values()) == set(TERMS)
    assert all(isinstance(term, LossTerm) and term.name == name for name, term in TERMS.items())
    assert [name for name, term in TERMS.items() if term.windows] == ["rollout"]


def test_loss_weights_combine_aliases_and_name_bad_input():
    assert loss_weights("power") == {"energy": 1.0}
    assert loss_weights({"acceleration": 1.0, "acceleration-l2": 0.5, "torque": 0.0}) == {
        "acceleration-l2": 1.5,
        "torque": 0.0,
    }
    with pytest.raises(ValueError, match="unknown loss term 'huber'"):
        loss_weights({"huber": 1.0})
    with pytest.raises(ValueError, match="at least one loss weight must be positive"):
        loss_weights({"torque": 0.0})
    with pytest.raises(ValueError, match="loss weight of 'torque'"):
        loss_weights({"torque": -1.0})
    with pytest.raises(TypeError, match="loss must be"):
        loss_weights(3)


def test_each_term_asks_for_the_spread_of_its_data():
    rng = np.random.default_rng(0)
    train = {k: rng.normal(size=(50, 3)) * [1.0, 2.0, 3.0] for k in ("q", "qd", "qdd", "tau")}
    train["tau"][:, 1] = 0.0  # an unactuated joint: scaled by the mean spread of the others
    scales = term_scales(list(TERMS), train)
    assert set(scales) == {"qdd", "tau", "power", "q", "qd"}
    for key in ("q", "qd", "qdd", "tau"):
        np.testing.assert_array_equal(scales[key], _validate.spread(train[key], center=True))
    s = np.std(train["tau"], axis=0)
    np.testing.assert_allclose(scales["tau"], [s[0], (s[0] + s[2]) / 2, s[2]])
    power = np.sum(train["qd"] * train["tau"], axis=1)
    assert float(scales["power"]) == pytest.approx(np.std(power))
    # unforced data: the power scale is the spread of qd . qdd
    unforced = dict(train, tau=np.zeros((50, 3)))
    assert float(term_scales(["energy"], unforced)["power"]) == pytest.approx(
        np.std(np.sum(train["qd"] * train["qdd"], axis=1))
    )
    assert set(term_scales(["acceleration-l1"], train)) == {"qdd"}


class _Oscillator:
    """A stand-in model: unit harmonic oscillators, E = (|q|^2 + |qd|^2) / 2, qdd = -q + tau."""

    damping = False

    def __init__(self):
        self.calls = 0

    def __call__(self, inputs, training=False):
        self.calls += 1
        q, _, tau = inputs
        return -q + tau

    def inverse_dynamics(self, q, qd, qdd):
        return qdd + q

    def energy(self, q, qd):
        return 0.5 * tf.reduce_sum(q * q + qd * qd, axis=-1)


def test_term_values_per_sample_match_their_closed_forms():
    rng = np.random.default_rng(1)
    q, qd, qdd, tau = (rng.normal(size=(6, 2)) for _ in range(4))
    scales = {"qdd": np.array([2.0, 0.5]), "tau": np.array([1.5, 3.0]), "power": np.asarray(0.7)}
    model = _Oscillator()
    batch = Batch(model, [tf.constant(a) for a in (q, qd, qdd, tau)], scales=scales, training=False, horizon=1, dt=0.1)
    z = (-q + tau - qdd) / scales["qdd"]
    values = {
        name: TERMS[name].value(batch).numpy() for name in ("acceleration-l2", "acceleration-l1", "torque", "energy")
    }
    assert model.calls == 1  # the prediction is shared by the two acceleration terms
    np.testing.assert_allclose(values["acceleration-l2"], np.mean(z**2, axis=1), rtol=1e-12)
    np.testing.assert_allclose(values["acceleration-l1"], np.mean(np.abs(z), axis=1), rtol=1e-12)
    np.testing.assert_allclose(values["torque"], np.mean(((qdd + q - tau) / scales["tau"]) ** 2, axis=1), rtol=1e-12)
    residual = (np.sum(qd * (qdd + q), axis=1) - np.sum(qd * tau, axis=1)) / 0.7
    np.testing.assert_allclose(values["energy"], residual**2, rtol=1e-10)
    # on the true dynamics the power balance holds exactly
    exact = Batch(
        model, [tf.constant(a) for a in (q, qd, -q + tau, tau)], scales=scales, training=False, horizon=1, dt=0.1
    )
    np.testing.assert_allclose(TERMS["energy"].value(exact).numpy(), 0.0, atol=1e-24)


def test_a_new_term_is_one_registry_entry(monkeypatch):
    from lnn.data import Dataset
    from lnn.models import LagrangianNetwork

    def worst(batch):
        return tf.reduce_max(tf.abs(batch.predicted_qdd() - batch.qdd) / batch.scales["qdd"], axis=-1)

    term = LossTerm("acceleration-max", ("worst",), worst, TERMS["acceleration-l2"].scales)
    monkeypatch.setitem(TERMS, term.name, term)
    monkeypatch.setitem(LOSSES, term.name, term.name)
    monkeypatch.setitem(LOSSES, "worst", term.name)
    rng = np.random.default_rng(0)
    q, qd, tau = rng.uniform(-3, 3, (128, 1)), rng.normal(size=(128, 1)), rng.normal(size=(128, 1))
    data = Dataset(
        t=np.arange(128) * 0.01,
        q=q,
        qd=qd,
        qdd=-9.81 * np.sin(q) + tau,
        tau=tau,
        trajectory=np.zeros(128, int),
        angular=(True,),
    )
    model = LagrangianNetwork(1, kind="structured", hidden=(8, 8), angular=(True,), dtype="float64", seed=1)
    history = fit(
        model,
        data,
        loss={"worst": 1.0, "acceleration": 0.5},
        epochs=2,
        batch_size=64,
        validation=data,
        restore_best=False,
    )
    assert set(history.train) == set(history.validation) == {"acceleration-max", "acceleration-l2", "total"}
    assert history.weights == {"acceleration-max": 1.0, "acceleration-l2": 0.5}
    # the validation value is the mean over samples of the term, at the final weights
    error = np.abs(model((q, qd, tau)).numpy() - data.qdd) / _validate.spread(data.qdd, center=True)
    assert history.validation["acceleration-max"][-1] == pytest.approx(np.mean(np.max(error, axis=1)), rel=1e-10)


def test_schedule_warms_up_then_decays_to_its_final_factor():
    assert SCHEDULES == ("cosine", "exponential", "constant")
    cosine = Schedule("cosine", 1e-2, 0.1, 0.2)
    assert cosine(0.0) == pytest.approx(1e-3)  # warm-up starts at 10 %
    assert cosine(0.1) == pytest.approx(1e-3 + 0.9e-2 * 0.5)
    assert cosine(0.2) == pytest.approx(1e-2)
    assert cosine(0.6) == pytest.approx(1e-2 * (0.1 + 0.9 * 0.5))  # half-way down the cosine
    assert cosine(1.0) == pytest.approx(1e-3) and cosine(2.0) == cosine(1.0)
    exponential = Schedule("exponential", 1.0, 0.01, 0.0)
    assert exponential(0.5) == pytest.approx(0.1) and exponential(1.0) == pytest.approx(0.01)
    assert Schedule("constant", 0.5, 0.01, 0.0)(0.7) == 0.5
    assert learning_rate("cosine", 2.0, 1.0, final_factor=0.25, warmup=0.0) == pytest.approx(0.5)
    assert math.isclose(learning_rate("constant", 2.0, 0.0, final_factor=1.0, warmup=0.5), 0.2)


@pytest.mark.parametrize(
    "args, message",
    [
        (("linear", 1.0, 0.1, 0.0), "schedule must be one of"),
        (("cosine", 1.0, 0.0, 0.0), "final_learning_rate must be in"),
        (("cosine", 1.0, 0.1, 1.0), "warmup must be in"),
    ],
)
def test_schedule_names_bad_options(args, message):
    with pytest.raises(ValueError, match=message):
        Schedule(*args)
