"""Ground-truth systems: invariants, closed forms, consistency and bad input."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import simulations
from simulations import CartPole, DoublePendulum, Friction, NPendulum, Pendulum, PlanarArm, URDFRobot

SEED = 20240611

# Every analytic system, with non-trivial parameters, undamped.
ANALYTIC = [
    Pendulum(m=0.7, l=1.3, g=9.81),
    DoublePendulum(m1=1.3, m2=0.7, l1=0.9, l2=1.4),
    NPendulum(masses=(1.0, 0.5, 0.8), lengths=(1.0, 0.7, 1.2)),
    NPendulum(masses=(1.0, 1.0, 1.0, 1.0, 1.0), lengths=(0.5, 0.5, 0.5, 0.5, 0.5)),
    CartPole(cart_mass=1.0, pole_mass=0.3, pole_length=0.8),
    PlanarArm(masses=(1.0,), lengths=(1.0,)),
    PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6)),
    PlanarArm(masses=(2.0, 1.0, 0.5), lengths=(0.8, 0.6, 0.4)),
]
DAMPED = [
    Pendulum(damping=0.3),
    PlanarArm(masses=(1.0, 2.0, 1.0), lengths=(1.0, 0.5, 0.7), damping=0.2),
    PlanarArm(
        masses=(1.2, 0.8),
        lengths=(1.0, 0.6),
        damping=0.05,
        friction=Friction(viscous=(0.2, 0.1), coulomb=(0.3, 0.1), velocity=0.1),
    ),
]


def _id(system):
    return f"{system.name}-{system.n_dof}"


def _random_state(system, size, seed=SEED):
    state = system.sample_state(size, rng=seed)
    tau = np.random.default_rng(seed + 1).normal(size=(size, system.n_dof))
    return state.q, state.qd, tau


def _energy_drift(system, q0, qd0, duration):
    """Relative energy drift of an unforced DOP853 rollout at rtol = atol = 1e-12."""
    n = system.n_dof

    def rhs(_t, y):
        return np.concatenate([y[n:], system.acceleration(y[:n], y[n:])])

    sol = solve_ivp(
        rhs,
        (0.0, duration),
        np.concatenate([q0, qd0]),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=np.linspace(0.0, duration, 201),
    )
    assert sol.success, sol.message
    q, qd = sol.y[:n].T, sol.y[n:].T
    energy = system.energy(q, qd)
    # Energy is defined up to a constant: measure the drift against the energy
    # actually exchanged (the largest kinetic energy on the trajectory).
    scale = max(abs(energy[0]), system.kinetic_energy(q, qd).max())
    return np.abs(energy - energy[0]).max() / scale


# ------------------------------------------------------------------ invariants
@pytest.mark.parametrize("system", ANALYTIC + DAMPED, ids=_id)
def test_mass_matrix_symmetric_positive_definite(system):
    q, qd, _ = _random_state(system, 200)
    mass = system.mass_matrix(q)
    assert mass.shape == (200, system.n_dof, system.n_dof)
    np.testing.assert_array_equal(mass, np.swapaxes(mass, -1, -2))
    assert np.linalg.eigvalsh(mass).min() > 0
    np.testing.assert_array_equal(system.mass_matrix(q, qd), mass)


@pytest.mark.parametrize("system", ANALYTIC, ids=_id)
def test_unforced_undamped_rollout_conserves_energy(system):
    q, qd, _ = _random_state(system, 1)
    assert _energy_drift(system, q[0], qd[0], 10.0) < 1e-8


@pytest.mark.parametrize("system", ANALYTIC + DAMPED, ids=_id)
def test_inverse_dynamics_inverts_acceleration(system):
    q, qd, tau = _random_state(system, 100)
    qdd = system.acceleration(q, qd, tau)
    np.testing.assert_allclose(system.inverse_dynamics(q, qd, qdd), tau, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        system.bias_force(q, qd), system.inverse_dynamics(q, qd, np.zeros_like(q)), rtol=1e-13, atol=1e-13
    )


@pytest.mark.parametrize("system", ANALYTIC + DAMPED, ids=_id)
def test_power_balance(system):
    """dE/dt = qd . tau - damping |qd|^2 along the flow (central differences in time)."""
    q, qd, tau = _random_state(system, 20)
    qdd = system.acceleration(q, qd, tau)
    h = 1e-5
    e_plus = system.energy(q + h * qd, qd + h * qdd)
    e_minus = system.energy(q - h * qd, qd - h * qdd)
    damping = getattr(system, "damping", 0.0)
    expected = np.sum(qd * tau, axis=-1) - damping * np.sum(qd * qd, axis=-1)
    if getattr(system, "friction", None) is not None:
        expected = expected - np.sum(qd * system.friction.torque(qd), axis=-1)
    np.testing.assert_allclose((e_plus - e_minus) / (2 * h), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("system", DAMPED, ids=_id)
def test_damping_dissipates_energy(system):
    q, qd, _ = _random_state(system, 1)
    n = system.n_dof
    sol = solve_ivp(
        lambda _t, y: np.concatenate([y[n:], system.acceleration(y[:n], y[n:])]),
        (0.0, 5.0),
        np.concatenate([q[0], qd[0]]),
        method="DOP853",
        rtol=1e-10,
        atol=1e-10,
        t_eval=np.linspace(0, 5, 51),
    )
    energy = system.energy(sol.y[:n].T, sol.y[n:].T)
    assert np.all(np.diff(energy) < 0)


@pytest.mark.parametrize("system", ANALYTIC + DAMPED, ids=_id)
def test_acceleration_jacobian_matches_central_differences(system):
    q, qd, tau = _random_state(system, 5)
    jac = system.acceleration_jacobian(q, qd, tau)
    n = system.n_dof
    assert jac.shape == (5, n, 2 * n)
    x = np.concatenate([q, qd], axis=-1)
    h = 1e-5
    expected = np.empty_like(jac)
    for j in range(2 * n):
        xp, xm = x.copy(), x.copy()
        xp[:, j] += h
        xm[:, j] -= h
        expected[:, :, j] = (
            system.acceleration(xp[:, :n], xp[:, n:], tau) - system.acceleration(xm[:, :n], xm[:, n:], tau)
        ) / (2 * h)
    np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())


# ---------------------------------------------------------------- closed forms
def test_npendulum_with_two_links_equals_double_pendulum():
    dp = DoublePendulum(m1=1.3, m2=0.7, l1=0.9, l2=1.4, g=9.81)
    chain = NPendulum(masses=(1.3, 0.7), lengths=(0.9, 1.4), g=9.81)
    q, qd, tau = _random_state(dp, 50)
    np.testing.assert_allclose(chain.mass_matrix(q), dp.mass_matrix(q), rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(chain.acceleration(q, qd, tau), dp.acceleration(q, qd, tau), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chain.energy(q, qd), dp.energy(q, qd), rtol=1e-14, atol=1e-13)
    np.testing.assert_allclose(chain.positions(q), dp.positions(q), rtol=1e-15, atol=1e-15)


def test_small_angle_pendulum_period():
    pendulum = Pendulum(m=0.5, l=2.0, g=9.81)
    expected = 2 * np.pi * np.sqrt(pendulum.l / pendulum.g)

    def upward_crossing(_t, y):
        return y[0]

    upward_crossing.direction = 1.0
    sol = solve_ivp(
        lambda _t, y: [y[1], pendulum.acceleration([y[0]], [y[1]])[0]],
        (0, 3.5 * expected),
        [-1e-4, 0.0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
        events=upward_crossing,
    )
    crossings = sol.t_events[0]
    assert len(crossings) == 4  # at T/4, 5T/4, 9T/4, 13T/4
    np.testing.assert_allclose(np.diff(crossings), expected, rtol=1e-8)


def test_pendulum_closed_form():
    pendulum = Pendulum(m=2.0, l=0.5, g=9.81, damping=0.1)
    q, qd, tau = _random_state(pendulum, 10)
    expected = (tau - 2.0 * 9.81 * 0.5 * np.sin(q) - 0.1 * qd) / (2.0 * 0.25)
    np.testing.assert_allclose(pendulum.acceleration(q, qd, tau), expected, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(pendulum.energy(q, qd), 0.25 * qd[:, 0] ** 2 - 9.81 * np.cos(q[:, 0]), rtol=1e-14)
    bob = pendulum.positions(q)[:, 1]
    np.testing.assert_allclose(bob, 0.5 * np.stack([np.sin(q[:, 0]), -np.cos(q[:, 0])], -1), rtol=1e-15)


def test_cart_pole_against_textbook_equations():
    """Florian (2007), 'Correct equations for the dynamics of the cart-pole system'.

    There the angle ``phi`` is measured from the upright, clockwise (the pole
    tip at ``x + a sin(phi)``, height ``a cos(phi)``) and ``a`` is the half
    length; ours is ``theta = pi - phi``.
    """
    cart = CartPole(cart_mass=1.5, pole_mass=0.4, pole_length=0.9, g=9.81)
    q, qd, _ = _random_state(cart, 100)
    force = np.random.default_rng(7).normal(size=100)
    mc, mp, a, g = 1.5, 0.4, 0.45, 9.81
    phi, phid = np.pi - q[:, 1], -qd[:, 1]
    phidd = (g * np.sin(phi) + np.cos(phi) * (-force - mp * a * phid**2 * np.sin(phi)) / (mc + mp)) / (
        a * (4.0 / 3.0 - mp * np.cos(phi) ** 2 / (mc + mp))
    )
    xdd = (force + mp * a * (phid**2 * np.sin(phi) - phidd * np.cos(phi))) / (mc + mp)
    tau = np.stack([force, np.zeros(100)], -1)
    qdd = cart.acceleration(q, qd, tau)
    np.testing.assert_allclose(qdd[:, 0], xdd, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(qdd[:, 1], -phidd, rtol=1e-11, atol=1e-11)
    energy = (
        0.5 * (mc + mp) * qd[:, 0] ** 2
        + mp * a * np.cos(q[:, 1]) * qd[:, 0] * qd[:, 1]
        + 0.5 * mp * 0.9**2 / 3 * qd[:, 1] ** 2
        - mp * g * a * np.cos(q[:, 1])
    )
    np.testing.assert_allclose(cart.energy(q, qd), energy, rtol=1e-13, atol=1e-13)
    points = cart.positions(q)
    np.testing.assert_allclose(points[:, 0], np.stack([q[:, 0], np.zeros(100)], -1))
    np.testing.assert_allclose(
        points[:, 1] - points[:, 0], 0.9 * np.stack([np.sin(q[:, 1]), -np.cos(q[:, 1])], -1), atol=1e-15
    )


def test_single_link_arm_is_a_compound_pendulum():
    arm = PlanarArm(masses=(3.0,), lengths=(0.6,), g=9.81, damping=0.2)
    q, qd, tau = _random_state(arm, 10)
    inertia = 3.0 * 0.6**2 / 3  # uniform rod about its end
    expected = (tau - 3.0 * 9.81 * 0.3 * np.sin(q) - 0.2 * qd) / inertia
    np.testing.assert_allclose(arm.acceleration(q, qd, tau), expected, rtol=1e-13, atol=1e-13)


def test_two_link_arm_textbook_mass_matrix():
    """Spong, Hutchinson & Vidyasagar, two-link planar arm with centred masses."""
    m1, m2, l1, l2 = 1.2, 0.8, 1.0, 0.6
    arm = PlanarArm(masses=(m1, m2), lengths=(l1, l2))
    q, _, _ = _random_state(arm, 20)
    lc1, lc2, i1, i2 = l1 / 2, l2 / 2, m1 * l1**2 / 12, m2 * l2**2 / 12
    c2 = np.cos(q[:, 1])
    d11 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2) + i1 + i2
    d12 = m2 * (lc2**2 + l1 * lc2 * c2) + i2
    d22 = np.full_like(c2, m2 * lc2**2 + i2)
    expected = np.stack([np.stack([d11, d12], -1), np.stack([d12, d22], -1)], -2)
    np.testing.assert_allclose(arm.mass_matrix(q), expected, rtol=1e-14, atol=1e-14)


def test_planar_arm_positions():
    arm = PlanarArm(masses=(1.0, 1.0, 1.0), lengths=(1.0, 0.5, 0.25))
    points = arm.positions([[0.0, 0.0, 0.0], [np.pi / 2, -np.pi / 2, np.pi]])
    assert points.shape == (2, 4, 2)
    np.testing.assert_allclose(points[0], [[0, 0], [0, -1], [0, -1.5], [0, -1.75]], atol=1e-15)
    np.testing.assert_allclose(points[1], [[0, 0], [1, 0], [1, -0.5], [1, -0.25]], atol=1e-15)


# ------------------------------------------------------------- batch and API
@pytest.mark.parametrize("system", ANALYTIC[:5], ids=_id)
def test_any_leading_batch_shape(system):
    q, qd, tau = _random_state(system, 6)
    n = system.n_dof
    flat = system.acceleration(q, qd, tau)
    shaped = system.acceleration(q.reshape(2, 3, n), qd.reshape(2, 3, n), tau.reshape(2, 3, n))
    np.testing.assert_array_equal(shaped.reshape(6, n), flat)
    single = system.acceleration(q[0], qd[0], tau[0])
    assert single.shape == (n,)
    np.testing.assert_allclose(single, flat[0], rtol=1e-15)
    assert system.energy(q.reshape(2, 3, n), qd.reshape(2, 3, n)).shape == (2, 3)
    assert system.acceleration_jacobian(q.reshape(3, 2, n), qd.reshape(3, 2, n)).shape == (3, 2, n, 2 * n)
    assert system.potential_energy(q[0]).shape == ()
    # A tau shared by the whole batch broadcasts.
    np.testing.assert_array_equal(
        system.acceleration(q, qd, np.broadcast_to(tau[0], q.shape)), system.acceleration(q, qd, tau[0])
    )


@pytest.mark.parametrize("name", [n for n in simulations.SYSTEMS if n != "panda"])
def test_registry_defaults_and_parameter_round_trip(name):
    system = simulations.make_system(name)
    assert system.name == name
    params = system.parameters()
    assert json.loads(json.dumps(params)) == params
    assert simulations.make_system(name, **params) == system
    assert len(system.angular) == system.n_dof
    with pytest.raises(dataclasses.FrozenInstanceError):
        system.g = 1.0


def test_registry_default_sizes():
    assert simulations.make_system("n-pendulum").n_dof == 3
    assert simulations.make_system("planar-arm") == PlanarArm(masses=(1.0, 1.0), lengths=(1.0, 1.0))
    assert simulations.make_system("cart-pole").angular == (False, True)
    assert set(simulations.SYSTEMS) == {"pendulum", "double-pendulum", "n-pendulum", "cart-pole", "planar-arm", "panda"}


@pytest.mark.parametrize("system", ANALYTIC, ids=_id)
def test_sample_state_is_reproducible_and_in_range(system):
    a = system.sample_state(64, rng=3)
    b = system.sample_state(64, rng=np.random.default_rng(3))
    assert a.q.shape == a.qd.shape == (64, system.n_dof)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.qd, b.qd)
    angles = a.q[:, np.array(system.angular)]
    assert np.all((angles >= -np.pi) & (angles < np.pi))
    assert not np.array_equal(system.sample_state(64, rng=4).q, a.q)


# ------------------------------------------------------------------ friction
def test_friction_torque_closed_form_and_dissipation():
    friction = Friction(viscous=(0.1, 0.0, 0.3), coulomb=0.2, offset=(0.05, -0.1, 0.0), velocity=0.02)
    qd = np.random.default_rng(SEED).normal(size=(50, 3))
    np.testing.assert_allclose(
        friction.torque(qd), np.array([0.1, 0.0, 0.3]) * qd + 0.2 * np.tanh(qd / 0.02) + [0.05, -0.1, 0.0], rtol=1e-15
    )
    force = friction.force(qd)
    np.testing.assert_allclose(force, -(friction.torque(qd) - np.array([0.05, -0.1, 0.0])), rtol=1e-15)
    assert np.all(np.sum(qd * force, axis=-1) <= 0)
    h = 1e-7
    np.testing.assert_allclose(
        friction.torque_derivative(qd),
        (friction.torque(qd + h) - friction.torque(qd - h)) / (2 * h),
        rtol=1e-5,
        atol=1e-6,
    )
    assert Friction().torque(np.ones((2, 4))).shape == (2, 4) and friction.n_joints == 3


def test_friction_enters_the_dynamics_of_a_planar_arm():
    friction = Friction(viscous=(0.2, 0.1), coulomb=(0.3, 0.2), offset=(0.05, -0.02))
    arm = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), friction=friction)
    bare = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6))
    q, qd, tau = _random_state(arm, 40)
    np.testing.assert_allclose(
        arm.inverse_dynamics(q, qd, tau),
        bare.inverse_dynamics(q, qd, tau) + friction.torque(qd),
        rtol=1e-14,
        atol=1e-14,
    )
    np.testing.assert_allclose(
        arm.acceleration(q, qd, tau), bare.acceleration(q, qd, tau - friction.torque(qd)), rtol=1e-14, atol=1e-14
    )
    np.testing.assert_array_equal(arm.energy(q, qd), bare.energy(q, qd))
    np.testing.assert_array_equal(arm.mass_matrix(q), bare.mass_matrix(q))
    # damping keeps its meaning: the same as a uniform viscous friction.
    damped = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), damping=0.3)
    viscous = PlanarArm(masses=(1.2, 0.8), lengths=(1.0, 0.6), friction=Friction(viscous=0.3))
    np.testing.assert_allclose(
        damped.acceleration(q, qd, tau), viscous.acceleration(q, qd, tau), rtol=1e-12, atol=1e-12
    )


def test_friction_round_trips_through_parameters_and_make_system():
    arm = PlanarArm(
        masses=(1.0, 2.0),
        lengths=(0.5, 0.5),
        friction=Friction(viscous=(0.1, 0.2), coulomb=0.3, offset=(0.0, -0.1), velocity=0.05),
    )
    params = arm.parameters()
    assert params["friction"] == {"viscous": [0.1, 0.2], "coulomb": 0.3, "offset": [0.0, -0.1], "velocity": 0.05}
    assert json.loads(json.dumps(params)) == params
    rebuilt = simulations.make_system("planar-arm", **params)
    assert rebuilt == arm and hash(rebuilt) == hash(arm) and isinstance(rebuilt.friction, Friction)
    assert PlanarArm().parameters()["friction"] is None
    assert simulations.make_system("planar-arm", **PlanarArm().parameters()) == PlanarArm()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(viscous=-0.1), ValueError, r"Friction.viscous must be >= 0 .*got -0.1"),
        (dict(coulomb=(0.1, -0.2)), ValueError, r"Friction.coulomb must be >= 0 .*got \(0.1, -0.2\)"),
        (dict(velocity=0.0), ValueError, r"Friction.velocity must be a finite number > 0; got 0.0"),
        (dict(offset=float("nan")), ValueError, r"Friction.offset must be finite"),
        (dict(viscous=(0.1, 0.2), coulomb=(0.1, 0.2, 0.3)), ValueError, r"one length; got lengths"),
        (dict(viscous="0.1"), TypeError, r"Friction.viscous must be a number or a sequence"),
    ],
)
def test_bad_friction_is_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        Friction(**kwargs)


def test_friction_must_fit_the_system():
    with pytest.raises(ValueError, match=r"friction has 3 per-joint coefficients but planar-arm has n_dof=2"):
        PlanarArm(friction=Friction(viscous=(0.1, 0.1, 0.1)))
    with pytest.raises(TypeError, match=r"friction must be a simulations.Friction, its parameters\(\) dict"):
        PlanarArm(friction=0.1)
    with pytest.raises(TypeError, match=r"friction has unknown keys \['stiction'\]"):
        PlanarArm(friction={"stiction": 0.1})


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "factory, message",
    [
        (lambda: Pendulum(m=-1.0), r"m must be .*> 0; got -1.0"),
        (lambda: Pendulum(l=0.0), r"l must be .*> 0; got 0.0"),
        (lambda: Pendulum(damping=-0.1), r"damping must be .*>= 0; got -0.1"),
        (lambda: DoublePendulum(m2=-2.0), r"m2 must be .*> 0; got -2.0"),
        (lambda: DoublePendulum(l1=float("nan")), r"l1 must be a finite number > 0; got nan"),
        (lambda: NPendulum(masses=(1.0, -1.0), lengths=(1.0, 1.0)), r"masses\[1\] must be .*> 0; got -1.0"),
        (lambda: NPendulum(masses=(1.0, 1.0), lengths=(1.0, 0.0)), r"lengths\[1\] must be .*> 0; got 0.0"),
        (lambda: NPendulum(masses=(1.0,), lengths=(1.0,)), r"masses must have at least 2 entries"),
        (lambda: NPendulum(masses=(1.0, 1.0), lengths=(1.0, 1.0, 1.0)), r"same length; got 2 masses"),
        (lambda: CartPole(pole_length=-0.5), r"pole_length must be .*> 0; got -0.5"),
        (lambda: CartPole(cart_mass=0), r"cart_mass must be .*> 0; got 0"),
        (lambda: PlanarArm(masses=(1.0, 0.0), lengths=(1.0, 1.0)), r"masses\[1\] must be .*> 0; got 0.0"),
        (lambda: PlanarArm(masses=(), lengths=()), r"masses must have at least 1 entries"),
        (lambda: PlanarArm(g=-9.81), r"g must be .*>= 0; got -9.81"),
    ],
)
def test_bad_parameters_raise_value_error(factory, message):
    with pytest.raises(ValueError, match=message):
        factory()


def test_bad_parameter_types_raise_type_error():
    with pytest.raises(TypeError, match="m must be a real number; got '1'"):
        Pendulum(m="1")
    with pytest.raises(TypeError, match="masses must be a sequence of numbers"):
        PlanarArm(masses=1.0, lengths=(1.0,))


def test_bad_shapes_and_values_raise_value_error():
    dp = DoublePendulum()
    q = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 2\).*got shape \(4, 3\)"):
        dp.acceleration(np.zeros((4, 3)), q)
    with pytest.raises(ValueError, match=r"qd must have shape \(\.\.\., 2\).*got shape \(\)"):
        dp.energy(q, 1.0)
    with pytest.raises(ValueError, match=r"tau must have shape \(\.\.\., 2\).*got shape \(4, 1\)"):
        dp.acceleration(q, q, np.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"mismatched batch shapes: q \(4, 2\), qd \(3, 2\)"):
        dp.acceleration(q, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"mismatched batch shapes: q \(4, 2\), qd \(4, 2\), qdd \(5, 2\)"):
        dp.inverse_dynamics(q, q, np.zeros((5, 2)))
    bad = q.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"q contains NaN or infinite values"):
        dp.mass_matrix(bad)
    with pytest.raises(ValueError, match=r"qd contains NaN"):
        dp.kinetic_energy(q, bad)
    with pytest.raises(ValueError, match=r"tau contains NaN"):
        dp.acceleration(q, q, np.full((4, 2), np.inf))
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 3\) for n-pendulum"):
        NPendulum().positions(q)
    with pytest.raises(TypeError, match="q must be an array of real numbers"):
        dp.potential_energy([["a", "b"]])


def test_bad_sampling_arguments():
    with pytest.raises(ValueError, match=r"n must be a positive integer; got 0"):
        Pendulum().sample_state(0, rng=0)
    with pytest.raises(ValueError, match=r"n must be a positive integer; got 2.5"):
        PlanarArm().sample_state(2.5, rng=0)
    with pytest.raises(TypeError, match=r"rng must be a numpy.random.Generator, an int seed or None; got str"):
        DoublePendulum().sample_state(3, rng="seed")
    with pytest.raises(ValueError, match=r"velocity_scale must be .*>= 0; got -1"):
        CartPole().sample_state(3, rng=0, velocity_scale=-1)


def test_unknown_system_name_lists_known_names():
    with pytest.raises(
        ValueError,
        match=r"unknown system 'tripple-pendulum'; known systems: pendulum, "
        r"double-pendulum, n-pendulum, cart-pole, planar-arm, panda",
    ):
        simulations.make_system("tripple-pendulum")
    with pytest.raises(TypeError):
        simulations.make_system("pendulum", mass=1.0)


def test_urdf_robot_without_pinocchio_names_the_extra(tmp_path, monkeypatch):
    urdf = tmp_path / "robot.urdf"
    urdf.write_text("<robot name='r'><link name='base'/></robot>")
    monkeypatch.setitem(sys.modules, "pinocchio", None)  # makes `import pinocchio` fail
    robot = URDFRobot(path=str(urdf))
    with pytest.raises(ImportError, match=r"pip install 'lnn\[robots\]'"):
        _ = robot.n_dof
    with pytest.raises(ImportError, match=r"pip install 'lnn\[robots\]'"):
        simulations.panda()


def test_urdf_robot_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="URDF file not found: .*missing.urdf"):
        URDFRobot.from_urdf(tmp_path / "missing.urdf")


def test_simulations_imports_neither_lnn_nor_tensorflow():
    import subprocess

    code = (
        "import sys, simulations; bad = [m for m in ('lnn', 'tensorflow', 'keras') if m in sys.modules]; "
        "sys.exit(f'imported {bad}' if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_cli_lists_every_system_with_its_parameters(capsys):
    from lnn.cli.systems import run

    assert run(None) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line for line in lines}
    assert set(listed) == set(simulations.SYSTEMS)
    assert "n_dof=3" in listed["n-pendulum"] and "masses=[1.0, 1.0, 1.0]" in listed["n-pendulum"]
    assert "pole_mass=0.1" in listed["cart-pole"]
