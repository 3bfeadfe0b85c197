"""A float32 model integrates at tight tolerances without its step size collapsing (issue 54).

The float32 model has the default initial weights and the input scaling of
a double pendulum's data (``adapt``): dynamics that are not trivially
smooth, so that float32 rounding noise dominates the solvers' error
estimates at tolerance 1e-8; a float64 copy holds the same weights. Counted,
not timed: the number of right-hand-side evaluations (``Trajectory.nfev``)
of the float32 model's rollout at tolerance 1e-8 stays within 2x of the
float64 copy's. On the code before the change the float32 model needed 7x
as many with DOP853 and 13x with the default method (over 2 s; 1.7x with
Radau, whose test then failed on the solutions' agreement only).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lnn
import simulations
from lnn.integrate._precision import REACHABLE_ATOL, REACHABLE_RTOL

TOL = 1e-8


@pytest.fixture(scope="module")
def models():
    """A float32 model scaled to a double pendulum's data, and its float64 copy (same weights)."""
    system = simulations.DoublePendulum(g=9.8)
    data = lnn.generate(system, n_trajectories=8, duration=2.0, dt=0.05, seed=0)
    m32 = lnn.LagrangianNetwork(2, angular=system.angular, seed=0, hidden=(32, 32))
    m32.adapt(data.q, data.qd, data.qdd)
    m64 = lnn.LagrangianNetwork.from_config(dict(m32.get_config(), dtype="float64"))
    m64.set_weights([w.astype(np.float64) for w in m32.get_weights()])
    state = system.sample_state(4, rng=0)
    return m32, m64, state


@pytest.mark.parametrize(
    ("method", "span"), [("DOP853", 2.0), ("auto", 2.0), pytest.param("Radau", 0.5, marks=pytest.mark.slow)]
)
def test_float32_model_needs_no_more_evaluations_than_float64(models, method, span):
    m32, m64, state = models
    t = np.linspace(0.0, span, 21)
    runs = {
        name: lnn.rollout(model, state.q, state.qd, t, method=method, rtol=TOL, atol=TOL)
        for name, model in (("float32", m32), ("float64", m64))
    }
    assert runs["float32"].nfev <= 2 * runs["float64"].nfev, {k: r.nfev for k, r in runs.items()}
    assert runs["float32"].metadata["solve_dtype"] == "float64"
    # The same function in the same arithmetic: the same solution.
    np.testing.assert_allclose(runs["float32"].q, runs["float64"].q, rtol=0, atol=1e-9)


def test_float64_model_solved_as_it_is(models):
    _, m64, _ = models
    assert m64.widened("float64") is m64


def test_twin_follows_later_weights(models):
    m32, _, state = models
    twin = m32.widened()
    assert twin.dtype == "float64" and twin is m32.widened()
    for source, target in zip(m32.weights, twin.weights):
        finite = np.isfinite(target.numpy()) & (np.abs(source.numpy()) < np.finfo(np.float32).max)
        np.testing.assert_array_equal(target.numpy()[finite], source.numpy().astype(np.float64)[finite])
    kernel = m32.trainable_weights[0]
    saved = kernel.numpy()
    try:
        kernel.assign(saved * 1.5)
        twin = m32.widened()
        np.testing.assert_array_equal(twin.trainable_weights[0].numpy(), (saved * 1.5).astype(np.float64))
        qdd32 = np.asarray(m32.acceleration(state.q, state.qd), dtype=np.float64)
        qdd64 = np.asarray(twin.acceleration(state.q, state.qd))
        np.testing.assert_allclose(qdd64, qdd32, rtol=1e-4, atol=1e-4)
    finally:
        kernel.assign(saved)


class Float32Pendulum:
    """A pendulum whose right-hand side is computed in float32 and cannot be widened."""

    n_dof = 1
    angular = (True,)
    dtype = "float32"

    def acceleration(self, q, qd, tau=None):
        q = np.asarray(q, dtype=np.float32)
        return -9.81 * np.sin(q)

    def energy(self, q, qd):
        q, qd = np.asarray(q, np.float64), np.asarray(qd, np.float64)
        return 0.5 * qd[..., 0] ** 2 + 9.81 * (1 - np.cos(q[..., 0]))


def test_float32_system_without_twin_warns_once_and_uses_reachable_tolerance():
    t = np.linspace(0.0, 2.0, 21)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = lnn.rollout(Float32Pendulum(), [[1.0]], [[0.0]], t, method="DOP853", rtol=1e-10, atol=1e-12)
    precision = [w for w in caught if issubclass(w.category, lnn.PrecisionWarning)]
    assert len(precision) == 1
    message = str(precision[0].message)
    assert "float32" in message and "1e-10" in message and f"{REACHABLE_RTOL:g}" in message
    assert precision[0].filename == __file__
    assert result.metadata["rtol"] == REACHABLE_RTOL and result.metadata["atol"] == REACHABLE_ATOL
    assert result.metadata["requested_rtol"] == 1e-10 and result.metadata["solve_dtype"] == "float32"


def test_float32_system_at_reachable_tolerance_does_not_warn():
    t = np.linspace(0.0, 1.0, 11)
    with warnings.catch_warnings():
        warnings.simplefilter("error", lnn.PrecisionWarning)
        result = lnn.rollout(Float32Pendulum(), [[1.0]], [[0.0]], t, method="DOP853", rtol=1e-6, atol=1e-8)
    assert result.metadata["rtol"] == 1e-6


def test_odeint_of_float32_model_warns_and_uses_reachable_tolerance(models):
    from lnn.integrate import odeint

    m32, _, state = models
    t = np.linspace(0.0, 0.2, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = odeint(m32, state.q, state.qd, t, method="tsit5", rtol=1e-9, atol=1e-9)
    precision = [w for w in caught if issubclass(w.category, lnn.PrecisionWarning)]
    assert len(precision) == 1 and precision[0].filename == __file__
    assert "float32" in str(precision[0].message) and "1e-09" in str(precision[0].message)
    assert np.all(np.isfinite(np.asarray(result.q)))
