"""Ground-truth systems: invariants, closed forms, consistency and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import simulations
from simulations import DoublePendulum, NPendulum, Pendulum

RNG_SEED = 20240611


def _rollout_energy_drift(system, q0, qd0, duration):
    """Relative energy drift of an unforced rollout with DOP853 at rtol=atol=1e-12."""
    n = system.n_dof

    def rhs(_t, y):
        return np.concatenate([y[n:], system.acceleration(y[:n], y[n:])])

    t_eval = np.linspace(0.0, duration, 201)
    sol = solve_ivp(rhs, (0.0, duration), np.concatenate([q0, qd0]), method="DOP853",
                    rtol=1e-12, atol=1e-12, t_eval=t_eval)
    assert sol.success, sol.message
    energy = system.energy(sol.y[:n].T, sol.y[n:].T)
    scale = max(abs(energy[0]), np.abs(system.kinetic_energy(sol.y[:n].T, sol.y[n:].T)).max())
    return np.abs(energy - energy[0]).max() / scale


def test_npendulum_with_two_links_equals_double_pendulum():
    dp = DoublePendulum(m1=1.3, m2=0.7, l1=0.9, l2=1.4, g=9.81)
    chain = NPendulum(masses=(1.3, 0.7), lengths=(0.9, 1.4), g=9.81)
    state = dp.sample_state(50, rng=RNG_SEED)
    tau = np.random.default_rng(RNG_SEED).normal(size=(50, 2))
    np.testing.assert_allclose(chain.mass_matrix(state.q), dp.mass_matrix(state.q), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(chain.acceleration(state.q, state.qd, tau), dp.acceleration(state.q, state.qd, tau),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chain.energy(state.q, state.qd), dp.energy(state.q, state.qd), rtol=1e-14, atol=1e-13)
    np.testing.assert_allclose(chain.positions(state.q), dp.positions(state.q), rtol=1e-14, atol=1e-14)


def test_small_angle_pendulum_period():
    pendulum = Pendulum(m=0.5, l=2.0, g=9.81)
    expected = 2 * np.pi * np.sqrt(pendulum.l / pendulum.g)

    def rhs(_t, y):
        return [y[1], pendulum.acceleration([y[0]], [y[1]])[0]]

    def upward_crossing(_t, y):
        return y[0]

    upward_crossing.direction = 1.0
    sol = solve_ivp(rhs, (0, 3.5 * expected), [-1e-4, 0.0], method="DOP853", rtol=1e-12, atol=1e-14,
                    events=upward_crossing)
    crossings = sol.t_events[0]
    assert len(crossings) >= 3
    np.testing.assert_allclose(np.diff(crossings), expected, rtol=1e-8)


@pytest.mark.parametrize("system", [Pendulum(), DoublePendulum(), NPendulum()], ids=lambda s: s.name)
def test_energy_conserved(system):
    state = system.sample_state(1, rng=RNG_SEED)
    assert _rollout_energy_drift(system, state.q[0], state.qd[0], 10.0) < 1e-8
