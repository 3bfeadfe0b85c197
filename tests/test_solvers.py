"""The compiled adaptive integrators (lnn.solvers): order, agreement with solve_ivp, gradients,
per-trajectory tolerances, no retracing, and the errors of bad input. float64 throughout."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
import tensorflow as tf

import lnn
from lnn import solvers
from lnn.integrate import method_names, rollout
from lnn.models import compiled
from lnn.odeint import odeint
from lnn.solvers import _engine, _scheduler

ORDERS = {"tsit5": 5, "dopri5": 5, "dopri8": 8, "dopri853": 8}
#: Log-log slopes measurable above float64's rounding where they differ from the order (ORDER_CASES).
OBSERVED_SLOPES = {"dopri8": 9}
#: Degree of the polynomials that each dense output reproduces exactly (inside a step).
DENSE_DEGREE = {"tsit5": 4, "dopri5": 4, "dopri8": 5, "dopri853": 7}


class TFPendulums:
    """Two coupled, damped pendulums written in TensorFlow.

    ``qdd = -w**2 sin(q) - 0.3 qd + 0.4 sin(q_other - q) + tau``, with ``w`` a
    ``tf.Variable`` (the "weights" a gradient must reach). The velocity term
    keeps the problem generic (an undamped ``qdd = f(q)`` has a special
    structure on which the pairs' error constants are unusual).
    """

    n_dof, angular, dtype = 2, (True, True), "float64"

    def __init__(self, w=(1.0, 1.7)):
        self.w = tf.Variable(np.asarray(w, np.float64))

    def acceleration(self, q, qd, tau=None):
        q = tf.convert_to_tensor(q, tf.float64)
        qd = tf.convert_to_tensor(qd, tf.float64)
        coupling = 0.4 * tf.sin(q[:, ::-1] - q)
        qdd = -(self.w**2) * tf.sin(q) - 0.3 * qd + coupling
        return qdd if tau is None else qdd + tf.convert_to_tensor(tau, tf.float64)

    def energy(self, q, qd):
        q, qd = tf.convert_to_tensor(q, tf.float64), tf.convert_to_tensor(qd, tf.float64)
        return tf.reduce_sum(0.5 * qd**2 + self.w**2 * (1 - tf.cos(q)), axis=-1)


class NumpyPendulums:
    """The numpy twin of :class:`TFPendulums` at its current ``w`` (test_numpy_twin_equals_the_tf_pendulums):
    a fast oracle for scipy's reference solves, which call the right-hand side thousands of times."""

    n_dof, angular, dtype = 2, (True, True), "float64"

    def __init__(self, system):
        self.w = system.w.numpy().copy()

    def acceleration(self, q, qd, tau=None):
        qdd = -(self.w**2) * np.sin(q) - 0.3 * qd + 0.4 * np.sin(q[:, ::-1] - q)
        return qdd if tau is None else qdd + tau

    def energy(self, q, qd):
        return np.sum(0.5 * qd**2 + self.w**2 * (1 - np.cos(q)), axis=-1)


SYSTEM = TFPendulums()
Q0 = np.array([[1.0, -0.5], [0.3, 2.0], [-2.5, 0.1]])
QD0 = np.array([[0.0, 0.4], [-1.0, 0.0], [0.2, 0.3]])


def test_numpy_twin_equals_the_tf_pendulums():
    rng = np.random.default_rng(0)
    q, qd, tau = rng.normal(0.0, 2.0, (3, 7, 2))
    twin = NumpyPendulums(SYSTEM)
    for force in (None, tau):
        np.testing.assert_allclose(
            twin.acceleration(q, qd, force), SYSTEM.acceleration(q, qd, force).numpy(), rtol=1e-14, atol=1e-14
        )
    np.testing.assert_allclose(twin.energy(q, qd), SYSTEM.energy(q, qd).numpy(), rtol=1e-14, atol=1e-14)


def _reference(q0, qd0, t):
    """``SYSTEM``'s solve by DOP853 at 1e-13, on its numpy twin."""
    return rollout(NumpyPendulums(SYSTEM), q0, qd0, t, method="DOP853", rtol=1e-13, atol=1e-13)


@functools.cache
def _scipy_references():
    """``test_equals_solve_ivp_to_the_tolerance``'s scipy solves (DOP853 on the numpy twin), shared by its methods:
    the grid, the forces, the forced solve at 1e-12 and 1e-8 and the unforced one at 1e-12."""
    twin = NumpyPendulums(SYSTEM)
    t = np.linspace(0.0, 5.0, 26)
    tau = 0.3 * np.sin(np.linspace(0.0, 6.0, 26))[:, None] * np.ones(2)
    exact = rollout(twin, Q0, QD0, t, tau=tau, method="DOP853", rtol=1e-12, atol=1e-12)
    scipy_result = rollout(twin, Q0, QD0, t, tau=tau, method="DOP853", rtol=1e-8, atol=1e-8)
    smooth_exact = rollout(twin, Q0, QD0, t, method="DOP853", rtol=1e-12, atol=1e-12)
    return t, tau, exact, scipy_result, smooth_exact


class TFOscillators:
    """Two harmonic oscillators in TensorFlow, ``qdd = -w**2 q``: the exact solution is known."""

    n_dof, angular, dtype = 2, (False, False), "float64"
    w = np.array([1.0, 2.3])

    def acceleration(self, q, qd, tau=None):
        return -tf.constant(self.w**2) * tf.convert_to_tensor(q, tf.float64)

    def energy(self, q, qd):
        return 0.5 * tf.reduce_sum(
            tf.convert_to_tensor(qd, tf.float64) ** 2 + self.w**2 * tf.convert_to_tensor(q, tf.float64) ** 2, axis=-1
        )


# Fixed steps (max_step with a loose tolerance) in each method's asymptotic range, above the
# rounding floor of float64 (measured: the pre-asymptotic slopes of these pairs are steeper,
# e.g. DOP853's 9th-order terms dominate on the nonlinear pendulums down to errors of 1e-13).
ORDER_CASES = {
    "tsit5": ("pendulums", 2.0, [0.05, 0.025, 0.0125]),
    "dopri5": ("pendulums", 2.0, [0.1, 0.05, 0.025]),
    # Prince–Dormand 8(7) minimises its 8th-order error coefficients ("13M"): above the rounding
    # floor its 9th-order terms dominate (measured slopes 9.0 here, 7.8 -> 8.8 on the oscillators);
    # test_tableau_order_conditions proves the order, 8, from the coefficients.
    "dopri8": ("pendulums", 2.0, [0.4, 0.2, 0.1]),
    "dopri853": ("oscillators", 10.0, [10 / 40, 10 / 50, 10 / 64, 10 / 80, 10 / 100]),
}


@pytest.mark.parametrize("method", method_names("compiled"))
def test_order_of_convergence(method):
    """The end-point error falls like ``h**order`` (log-log slope within 0.2)."""
    problem, duration, steps = ORDER_CASES[method]
    t = np.array([0.0, duration])
    if problem == "pendulums":
        system, q0, qd0 = SYSTEM, Q0, QD0
        # A finer fixed-step dopri8 solve of the same TF system is the ground truth.
        exact = rollout(system, q0, qd0, t, method="dopri8", rtol=1e3, atol=1e3, max_step=0.004).q[:, -1]
        np.testing.assert_allclose(exact, _reference(q0, qd0, t).q[:, -1], atol=1e-12)
    else:
        system, q0, qd0 = TFOscillators(), np.array([[1.0, 0.5]]), np.array([[0.0, 0.3]])
        w = TFOscillators.w
        exact = q0 * np.cos(w * duration) + qd0 / w * np.sin(w * duration)
    errors = []
    for h in steps:
        result = rollout(system, q0, qd0, t, method=method, rtol=1e3, atol=1e3, max_step=h)
        steps_taken = sum(result.metadata["n_accepted"]) / q0.shape[0]
        assert abs(steps_taken - round(duration / h)) <= 1  # fixed steps indeed
        errors.append(np.abs(result.q[:, -1] - exact).max())
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert errors[-1] > 1e-13  # above the rounding floor
    assert abs(slope - OBSERVED_SLOPES.get(method, ORDERS[method])) < 0.2, (method, errors, slope)


class TFPolynomialChain:
    """``q1'' = q2, q2'' = q3, q3'' = 1`` from rest: ``q = (t^6/720, t^4/24, t^2/2)``, polynomials in t."""

    n_dof, angular, dtype = 3, (False, False, False), "float64"

    def acceleration(self, q, qd, tau=None):
        q = tf.convert_to_tensor(q, tf.float64)
        return tf.concat([q[:, 1:], tf.ones_like(q[:, :1])], axis=1)


@pytest.mark.parametrize("method", method_names("compiled"))
def test_dense_output_reproduces_polynomials_of_its_degree(method):
    """Between the steps (up to 1 s long, most samples inside them), every component whose
    exact solution is a polynomial of degree <= the dense output's degree is exact; the next
    degree is not (the test can fail)."""
    t = np.linspace(0.0, 3.0, 17)
    result = rollout(
        TFPolynomialChain(), np.zeros((1, 3)), np.zeros((1, 3)), t, method=method, rtol=1e3, atol=1e3, max_step=1.0
    )
    assert sum(result.metadata["n_accepted"]) <= 10  # growing from Hairer's initial step to 1 s
    exact = np.stack([t**6 / 720, t**4 / 24, t**2 / 2], axis=1)
    error = np.abs(result.q[0] - exact).max(axis=0)  # per component: degrees 6, 4, 2
    for degree, err in zip((6, 4, 2), error):
        if degree <= DENSE_DEGREE[method]:
            assert err < 1e-12, (method, degree, err)
        else:
            assert err > 1e-8, (method, degree, err)


@pytest.mark.parametrize("method", method_names("compiled"))
def test_equals_solve_ivp_to_the_tolerance(method):
    t, tau, exact, scipy_result, smooth_exact = _scipy_references()
    result = rollout(SYSTEM, Q0, QD0, t, tau=tau, method=method, rtol=1e-8, atol=1e-8)
    # Linearly interpolated samples are only continuous at the samples (no solver stops
    # there): both solvers lose digits at the kinks, alike.
    error = np.abs(result.q - exact.q).max()
    assert error < 1e-5
    assert error < 30 * max(np.abs(scipy_result.q - exact.q).max(), 1e-9)
    smooth = rollout(SYSTEM, Q0, QD0, t, method=method, rtol=1e-8, atol=1e-8)
    assert np.abs(smooth.q - smooth_exact.q).max() < 1e-6
    # The samples hold the system's own accelerations, forces and energies.
    np.testing.assert_allclose(
        result.qdd,
        SYSTEM.acceleration(result.q.reshape(-1, 2), result.qd.reshape(-1, 2), result.tau.reshape(-1, 2))
        .numpy()
        .reshape(result.q.shape),
        atol=1e-12,
    )
    np.testing.assert_allclose(result.tau, np.broadcast_to(tau, result.tau.shape))
    assert np.all(np.isnan(result.failed_at)) and result.failures == ()
    assert result.method == method and result.nfev > 0


def test_held_forces_match_solve_ivp():
    t = np.linspace(0.0, 2.0, 9)
    tau = np.where(np.arange(9) % 2, 0.5, -0.5)[:, None] * np.ones(2)
    twin = NumpyPendulums(SYSTEM)
    exact = rollout(twin, Q0, QD0, t, tau=tau, tau_interpolation="hold", method="DOP853", rtol=1e-12, atol=1e-12)
    result = rollout(SYSTEM, Q0, QD0, t, tau=tau, tau_interpolation="hold", method="dopri5", rtol=1e-9, atol=1e-9)
    assert np.abs(result.q - exact.q).max() < 1e-6


def test_each_trajectory_meets_its_own_tolerance():
    """Per-trajectory tolerances: each trajectory's error is that of its solo solve."""
    t = np.linspace(0.0, 5.0, 11)
    exact = _reference(Q0, QD0, t)
    rtol = np.array([1e-4, 1e-7, 1e-10])
    batch = rollout(SYSTEM, Q0, QD0, t, method="dopri5", rtol=rtol, atol=rtol)
    for b in range(3):
        solo = rollout(SYSTEM, Q0[b : b + 1], QD0[b : b + 1], t, method="dopri5", rtol=rtol[b], atol=rtol[b])
        np.testing.assert_allclose(batch.q[b], solo.q[0], atol=1e-13, rtol=0)
        error = np.abs(batch.q[b] - exact.q[b]).max()
        assert error < 100 * rtol[b]
    errors = [np.abs(batch.q[b] - exact.q[b]).max() for b in range(3)]
    assert errors[0] > errors[1] > errors[2]


def test_the_step_controller_s_factor_follows_its_formula():
    """Accepted: PI proposal clipped (and held after a rejection); rejected: the I shrink; non-finite: fixed."""
    c = solvers.StepController(
        beta1=0.7, beta2=0.4, growth_safety=0.95, safety=0.9, accepted_min=0.2, hold_after_reject=True
    )
    k = 0.2
    norm = tf.constant([0.5, 0.5, 2.0, math.inf, 1e-30, 0.99], tf.float64)
    err_prev = tf.constant([0.1, 0.1, 0.1, 0.1, 0.1, 1e-4], tf.float64)
    accept = tf.constant([True, True, False, False, True, True])
    rejected = tf.constant([False, True, False, False, False, False])
    finite = tf.constant([True, True, True, False, True, True])
    factor = c.factor(norm, err_prev, accept=accept, rejected=rejected, finite=finite, k_exp=k, dtype=tf.float64)
    pi = 0.95 * 0.5 ** (-0.7 * k) * 0.1 ** (0.4 * k)
    expected = [pi, min(pi, 1.0), max(0.2, 0.9 * 2.0**-k), 0.25, 10.0, max(0.2, 0.95 * 0.99 ** (-0.7 * k) * 1e-4**0.08)]
    np.testing.assert_allclose(factor.numpy(), expected, rtol=1e-14)


def test_the_default_controller_is_the_integral_one_that_never_shrinks_after_an_accepted_step():
    c = solvers.DEFAULT_CONTROLLER
    k = 1 / 5
    norm = tf.constant(np.concatenate([np.geomspace(1e-12, 1.0, 50), np.geomspace(1.0001, 1e6, 50)]))
    accept = norm <= 1.0
    ones = tf.ones_like(accept)
    factor = c.factor(
        norm, 0.5 * tf.ones_like(norm), accept=accept, rejected=~ones, finite=ones, k_exp=k, dtype=tf.float64
    )
    factor = factor.numpy()
    assert np.all(factor[accept.numpy()] >= 1.0) and np.all(factor[accept.numpy()] <= c.factor_max)
    assert np.all(factor[~accept.numpy()] <= c.safety) and np.all(factor[~accept.numpy()] >= c.factor_min)
    # Its proposal does not depend on the previous error (integral controller).
    other = c.factor(
        norm, 1e-3 * tf.ones_like(norm), accept=accept, rejected=~ones, finite=ones, k_exp=k, dtype=tf.float64
    )
    np.testing.assert_array_equal(factor, other.numpy())


def test_the_engine_with_scipy_s_controller_takes_scipy_s_steps():
    """dopri5 under scipy RK45's rules (the I controller, safety 0.9, no growth after a rejection,
    the same initial step and norm) takes the same accepted and rejected steps as solve_ivp's RK45:
    the engine's step loop is the textbook one, and its controller is the only thing that differs."""
    from scipy.integrate import solve_ivp

    w = SYSTEM.w.numpy()

    def f(_, y):
        q, qd = y[:2], y[2:]
        return np.concatenate([qd, -(w**2) * np.sin(q) - 0.3 * qd + 0.4 * np.sin(q[::-1] - q)])

    scipy_rules = solvers.StepController.scipy()
    y0 = np.concatenate([Q0, QD0], axis=1)
    t = np.linspace(0.0, 6.0, 7)
    rtol, atol = 1e-6, 1e-9
    ours = solvers.solve(
        SYSTEM, y0, t, method="dopri5", rtol=np.full(3, rtol), atol=np.full(3, atol), controller=scipy_rules
    )
    default = solvers.solve(SYSTEM, y0, t, method="dopri5", rtol=np.full(3, rtol), atol=np.full(3, atol))
    for b in range(3):
        sol = solve_ivp(f, (0.0, 6.0), y0[b], method="RK45", rtol=rtol, atol=atol)
        accepted = sol.t.size - 1
        attempts = (sol.nfev - 2) // 6  # f(t0) and the initial step's probe, then 6 per attempt (FSAL)
        assert int(ours.n_accepted[b]) == accepted
        assert int(ours.n_rejected[b]) == attempts - accepted
    assert np.any(default.n_accepted.numpy() != ours.n_accepted.numpy())


def test_the_controller_presets_and_their_bad_values():
    d = solvers.StepController.diffrax()  # diffrax's PIDController defaults (an integral controller)
    assert (d.beta1, d.beta2, d.growth_safety, d.safety, d.factor_min, d.factor_max) == (1, 0, 0.9, 0.9, 0.2, 10)
    assert (d.accepted_min, d.hold_after_reject) == (1.0, False)
    # The default: diffrax's rules with a safety of 0.75 and no growth right after a rejection
    # (lnn.solvers._controller says why).
    assert solvers.DEFAULT_CONTROLLER == dataclasses.replace(
        solvers.StepController.diffrax(), growth_safety=0.75, safety=0.75, hold_after_reject=True
    )
    assert not solvers.StepController.diffrax().hold_after_reject and solvers.StepController.scipy().hold_after_reject
    pi = solvers.StepController.pi()
    assert (pi.beta1, pi.beta2, pi.hold_after_reject) == (0.7, 0.4, True)
    for options, message in (
        ({"safety": 0.0}, "safety must be in \\(0, 1\\]; got 0.0"),
        ({"growth_safety": 1.5}, "growth_safety must be in \\(0, 1\\]; got 1.5"),
        ({"factor_min": 1.0}, "factor_min must be in \\(0, 1\\); got 1.0"),
        ({"factor_max": 0.5}, "factor_max must be >= 1; got 0.5"),
        ({"accepted_min": 0.1}, "accepted_min must be in \\[factor_min, 1\\]; got 0.1"),
        ({"nonfinite_factor": 1.0}, "nonfinite_factor must be in \\(0, 1\\); got 1.0"),
    ):
        with pytest.raises(ValueError, match=message):
            solvers.StepController(**options)


def test_a_controller_that_is_not_a_step_controller_is_refused():
    with pytest.raises(TypeError, match="controller must be a lnn.solvers.StepController; got dict"):
        solvers.solve(
            SYSTEM, np.concatenate([Q0, QD0], axis=1), [0.0, 1.0], method="tsit5", rtol=1e-6, atol=1e-6, controller={}
        )


def test_gradients_match_finite_differences():
    t = tf.constant(np.linspace(0.0, 1.5, 4))
    q0 = tf.constant(Q0[:2])
    qd0 = tf.constant(QD0[:2])

    def loss(q0, qd0):
        # One plain graph for the taped call and the differences (eagerly, without a tape, the
        # default would compile the solve in XLA: lnn.solvers' XLA path is proven elsewhere).
        result = odeint(SYSTEM, q0, qd0, t, method="dopri5", rtol=1e-10, atol=1e-10, jit_compile=False)
        return tf.reduce_sum(result.q[:, -1] ** 2) + tf.reduce_sum(result.qd[:, 2] * 0.3)

    with tf.GradientTape() as tape:
        tape.watch(q0)
        value = loss(q0, qd0)
    grad_q0, grad_w = tape.gradient(value, [q0, SYSTEM.w])
    eps = 1e-6
    direction = np.array([[0.3, -0.7], [0.5, 0.2]])
    fd = (loss(q0 + eps * direction, qd0) - loss(q0 - eps * direction, qd0)) / (2 * eps)
    np.testing.assert_allclose(np.sum(grad_q0.numpy() * direction), fd.numpy(), rtol=1e-5)
    w = SYSTEM.w.numpy()
    values = []
    for sign in (1, -1):
        SYSTEM.w.assign(w + sign * eps * np.array([1.0, 0.0]))
        values.append(loss(q0, qd0).numpy())
    SYSTEM.w.assign(w)
    np.testing.assert_allclose(grad_w.numpy()[0], (values[0] - values[1]) / (2 * eps), rtol=1e-5)


@pytest.mark.slow  # the step loop of a learned model's Hessians, differentiated in graph mode
def test_gradient_reaches_a_learned_model_s_weights():
    model = lnn.LagrangianNetwork(
        2, kind="kinetic-potential", convex=True, hidden=(8, 8), angular=True, dtype="float64", seed=3
    )
    t = tf.constant([0.0, 0.3, 0.6])
    q0, qd0 = tf.constant(Q0[:2]), tf.constant(QD0[:2])
    kernel = model.trainable_variables[0]

    def loss():
        # One plain graph for the taped call and the differences (no XLA compilation of the solve).
        result = odeint(model, q0, qd0, t, method="tsit5", rtol=1e-10, atol=1e-10, jit_compile=False)
        return tf.reduce_sum(result.q[:, -1] ** 2)

    with tf.GradientTape() as tape:
        value = loss()
    grad = tape.gradient(value, kernel).numpy()
    direction = np.random.default_rng(0).normal(size=kernel.shape)
    start, eps = kernel.numpy(), 1e-6
    values = []
    for sign in (1, -1):
        kernel.assign(start + sign * eps * direction)
        values.append(loss().numpy())
    kernel.assign(start)
    np.testing.assert_allclose(np.sum(grad * direction), (values[0] - values[1]) / (2 * eps), rtol=1e-4)


def test_odeint_adaptive_returns_tensors_equal_to_rollout():
    t = np.linspace(0.0, 2.0, 5)
    tensors = odeint(SYSTEM, Q0, QD0, t, method="dopri8", rtol=1e-9, atol=1e-9)
    arrays = rollout(SYSTEM, Q0, QD0, t, method="dopri8", rtol=1e-9, atol=1e-9)
    assert isinstance(tensors.q, tf.Tensor)
    np.testing.assert_allclose(tensors.q.numpy(), arrays.q, atol=1e-12)
    np.testing.assert_allclose(tensors.energy.numpy(), arrays.energy, atol=1e-12)


def test_compiled_solves_do_not_retrace(monkeypatch):
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 0)  # XLA for every shape at once: both forms run
    system = TFPendulums()
    t = np.linspace(0.0, 1.0, 6)
    rollout(system, Q0, QD0, t, method="tsit5", rtol=1e-6, atol=1e-6)
    compiled.wait()  # the XLA form is traced on the background worker
    count = solvers.tracing_count(system)
    rollout(system, Q0, QD0, t, method="tsit5", rtol=1e-8, atol=1e-7)
    rollout(system, Q0[:1], QD0[:1], np.linspace(0.0, 2.0, 9), method="tsit5")
    rollout(system, Q0 * 0.5, QD0, t, method="tsit5", rtol=np.array([1e-5, 1e-6, 1e-7]))
    compiled.wait()
    assert solvers.tracing_count(system) == count


def _rollout_caller(system, method="tsit5"):
    return _engine._CACHE[system][("rollout", method, 2, tf.float64, False, False)]


def test_a_new_shape_runs_as_a_graph_until_its_xla_form_is_compiled(monkeypatch):
    monkeypatch.setattr(_scheduler, "usable_cores", lambda: 2)  # the policy of a machine with a spare core
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 0)  # compile at the first decision
    system = TFPendulums()
    t = np.linspace(0.0, 3.0, 31)
    first = rollout(system, Q0, QD0, t, method="tsit5", rtol=1e-9, atol=1e-9)
    caller = _rollout_caller(system)
    assert caller.iterations["graph"] > 0  # nobody waited for XLA
    compiled.wait()
    assert [(c.rows, c.thread, c.ok) for c in caller.compilations] == [(4, "lnn-xla", True)]  # 3 rows padded to 4
    graph_iterations = caller.iterations["graph"]
    second = rollout(system, Q0, QD0, t, method="tsit5", rtol=1e-9, atol=1e-9)
    assert caller.iterations["graph"] == graph_iterations and caller.iterations["xla"] > 0
    np.testing.assert_allclose(second.q, first.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(second.qdd, first.qdd, rtol=0, atol=1e-10)
    assert second.metadata["n_accepted"] == first.metadata["n_accepted"]


def test_on_one_core_a_short_rollout_stays_a_graph_and_a_long_one_compiles_at_once(monkeypatch):
    """XLA is compiled when the plain graph's loop iterations at a shape, this call's predicted
    rest included, reach :func:`compile_after`: a short call never waits for a compilation, a long
    one compiles on the caller's thread after its first chunk and runs the rest in XLA."""
    monkeypatch.setattr(_scheduler, "usable_cores", lambda: 1)
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 200)
    system = TFPendulums()
    short = rollout(system, Q0, QD0, np.linspace(0.0, 1.0, 11), method="dopri5")
    caller = _rollout_caller(system, "dopri5")
    assert caller.iterations["xla"] == 0 and caller.compilations == []
    assert sum(short.metadata["n_accepted"]) < 200  # short: the work would not repay a compilation
    t = np.linspace(0.0, 20.0, 11)
    long = rollout(system, Q0, QD0, t, method="dopri5", rtol=1e-10, atol=1e-10)
    short_iterations = max(np.add(short.metadata["n_accepted"], short.metadata["n_rejected"]))
    assert caller.iterations["graph"] == short_iterations + _scheduler.GRAPH_CHUNK  # one chunk, then XLA
    assert caller.iterations["xla"] > 0
    assert [(c.rows, c.thread) for c in caller.compilations] == [(4, "MainThread")]
    graph_only = TFPendulums()
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 10**9)
    reference = rollout(graph_only, Q0, QD0, t, method="dopri5", rtol=1e-10, atol=1e-10)
    assert _rollout_caller(graph_only, "dopri5").iterations["xla"] == 0
    np.testing.assert_allclose(long.q, reference.q, rtol=0, atol=1e-11)
    assert long.metadata["n_accepted"] == reference.metadata["n_accepted"]


def test_batch_sizes_1_to_100_compile_one_shape_per_power_of_two_with_the_same_results(monkeypatch):
    """XLA runs a batch padded to the next power of two (the padding repeats the last trajectory and
    is marked finished): B = 1..100 compile at most the 8 shapes 1, 2, 4, ..., 128, and a padded
    solve gives each trajectory what the unpadded plain graph gives it."""
    monkeypatch.setattr(_scheduler, "usable_cores", lambda: 1)
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 0)  # every shape wants XLA at once
    system = TFPendulums()
    rng = np.random.default_rng(5)
    q0, qd0 = rng.uniform(-1.0, 1.0, (100, 2)), rng.normal(size=(100, 2))
    t = np.linspace(0.0, 0.5, 3)
    padded = {}
    for b in range(1, 101):
        padded[b] = rollout(system, q0[:b], qd0[:b], t, method="tsit5", rtol=1e-9, atol=1e-9)
    caller = _rollout_caller(system)
    rows = [c.rows for c in caller.compilations]
    assert sorted(rows) == [1, 2, 4, 8, 16, 32, 64, 128] and all(c.ok for c in caller.compilations)
    assert caller.iterations["graph"] == 0
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 10**9)  # a plain graph, unpadded
    graph_system = TFPendulums()
    for b in (3, 77, 100):
        plain = rollout(graph_system, q0[:b], qd0[:b], t, method="tsit5", rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(padded[b].q, plain.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(padded[b].qdd, plain.qdd, rtol=0, atol=1e-11)
        np.testing.assert_array_equal(padded[b].metadata["n_accepted"], plain.metadata["n_accepted"])
    assert _rollout_caller(graph_system).compilations == []


def test_what_is_compiled_is_the_same_on_one_core_and_on_two(monkeypatch):
    """The decision counts loop iterations, not seconds: the same calls compile the same shapes
    whether the compilation runs at once (one core) or on the background worker (two)."""
    monkeypatch.setattr(_scheduler, "XLA_AFTER_ITERATIONS", 160)
    calls = [(b, d) for b, d in [(1, 0.5), (1, 0.5), (3, 8.0), (5, 0.5), (20, 0.5), (1, 0.5), (6, 0.5)] * 2]
    compiled_shapes = {}
    for cores in (1, 2):
        monkeypatch.setattr(_scheduler, "usable_cores", lambda cores=cores: cores)
        system, rng = TFPendulums(), np.random.default_rng(6)
        for b, duration in calls:
            q0, qd0 = rng.uniform(-1, 1, (b, 2)), rng.normal(size=(b, 2))
            rollout(system, q0, qd0, np.linspace(0.0, duration, 6), method="tsit5", rtol=1e-9, atol=1e-9)
            compiled.wait()
        caller = _rollout_caller(system)
        compiled_shapes[cores] = sorted(caller.ready)
        assert {c.thread for c in caller.compilations} == {"MainThread" if cores == 1 else "lnn-xla"}
    assert compiled_shapes[1] == compiled_shapes[2]
    assert compiled_shapes[1] and len(compiled_shapes[1]) < 4  # some shapes repaid a compilation, not all


_COMPACT = _scheduler.RolloutScheduler._compact


def _spread_batch(size=12):
    """A batch whose trajectories need very different numbers of steps (tolerances 1e-4 .. 1e-11)."""
    rng = np.random.default_rng(3)
    q0, qd0 = rng.uniform(-2.0, 2.0, (size, 2)), rng.normal(size=(size, 2))
    return q0, qd0, np.logspace(-4, -11, size)


def _tail_rollout(monkeypatch, *, pays):
    """A rollout of :func:`_spread_batch` on a fresh system with the tail policy ``pays``, and its caller."""
    monkeypatch.setattr(_scheduler, "usable_cores", lambda: 1)
    monkeypatch.setattr(_scheduler, "COMPACT_MIN_BATCH", 8)
    monkeypatch.setattr(_scheduler, "XLA_CALL_SECONDS", 0.0)  # XLA calls of 8 iterations
    # XLA for the whole batch (12 rows, padded to 16) at once, never for the smaller tails
    monkeypatch.setattr(_scheduler, "compile_after", lambda rows: 0 if rows >= 16 else 10**9)
    if pays is None:
        monkeypatch.setattr(_scheduler.RolloutScheduler, "_compact", lambda self, *args: False)
    else:
        monkeypatch.setattr(_scheduler.RolloutScheduler, "_compact", _COMPACT)
        monkeypatch.setattr(_scheduler.RolloutScheduler, "_pays", lambda self, *args: pays())
    system = TFPendulums()
    q0, qd0, rtol = _spread_batch()
    result = rollout(system, q0, qd0, np.linspace(0.0, 4.0, 41), method="tsit5", rtol=rtol, atol=1e-12)
    return result, _rollout_caller(system)


def test_the_tail_of_a_batch_continues_as_a_smaller_graph_with_the_same_results(monkeypatch):
    """Whenever at most half of the trajectories run, they are gathered into a smaller plain-graph
    batch (no compilation); every trajectory's samples, steps and failures are those of the
    uncompacted solve, which runs the same number of loop iterations."""
    whole, whole_caller = _tail_rollout(monkeypatch, pays=None)
    tail, caller = _tail_rollout(monkeypatch, pays=lambda: True)
    assert whole_caller.compactions == [] and whole_caller.iterations["graph"] == 0
    sizes = [12] + [to for _, to in caller.compactions]
    assert len(sizes) >= 3 and all(2 * b <= a for a, b in zip(sizes, sizes[1:])), caller.compactions
    assert caller.iterations["graph"] > 0
    assert sum(caller.iterations.values()) == whole_caller.iterations["xla"]  # nothing ran twice
    np.testing.assert_allclose(tail.q, whole.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(tail.qd, whole.qd, rtol=0, atol=1e-11)
    assert tail.metadata["n_accepted"] == whole.metadata["n_accepted"]
    assert tail.metadata["n_rejected"] == whole.metadata["n_rejected"]
    assert np.all(np.isnan(tail.failed_at)) and tail.failures == ()


def test_a_smaller_graph_slower_than_xla_hands_its_rows_back(monkeypatch):
    """A compaction out of XLA that measures slower (here: the policy says so after one chunk)
    returns its rows to the XLA batch, which finishes them; the results are the same."""
    whole, _ = _tail_rollout(monkeypatch, pays=None)
    answers = iter([True])
    tail, caller = _tail_rollout(monkeypatch, pays=lambda: next(answers, False))
    assert len(caller.compactions) == 1
    assert caller.iterations["graph"] == _scheduler.GRAPH_CHUNK  # one chunk, then back to XLA
    np.testing.assert_allclose(tail.q, whole.q, rtol=0, atol=1e-11)
    assert tail.metadata["n_accepted"] == whole.metadata["n_accepted"]


def test_the_cost_buckets_are_powers_of_two():
    assert [_scheduler.bucket(r) for r in (1, 2, 3, 64, 65, 200, 256)] == [1, 2, 4, 64, 128, 256, 256]


def test_a_numpy_only_system_is_refused_with_a_clear_error():
    import simulations

    with pytest.raises(TypeError, match=r"accepts TensorFlow tensors.*DOP853"):
        rollout(simulations.DoublePendulum(), [0.1, 0.2], [0.0, 0.0], [0.0, 0.1], method="dopri5")


def test_bad_input_is_named():
    t = [0.0, 1.0]
    with pytest.raises(
        ValueError,
        match=r"method must be one of scipy: RK23, RK45, DOP853, Radau, BDF, LSODA; compiled: tsit5, dopri5, "
        r"dopri8, dopri853; fixed-step: rk4, verlet, or 'auto'; got 'rk45'",
    ):
        rollout(SYSTEM, Q0, QD0, t, method="rk45")
    with pytest.raises(
        ValueError,
        match=r"method must be one of compiled: tsit5, dopri5, dopri8, dopri853; fixed-step: rk4, verlet; "
        r"got 'euler'",
    ):
        odeint(SYSTEM, Q0, QD0, t, method="euler")
    with pytest.raises(ValueError, match="method must be one of tsit5, dopri5, dopri8, dopri853; got 'rk7'"):
        solvers.tableau("rk7")
    with pytest.raises(
        ValueError,
        match=r"on_failure must be one of \('raise', 'mask'\); "
        r"got 'skip'",
    ):
        rollout(SYSTEM, Q0, QD0, t, method="dopri5", on_failure="skip")
    with pytest.raises(ValueError, match="error_control must be one of"):
        rollout(SYSTEM, Q0, QD0, t, error_control="worst")
    for method in ("dopri5", "DOP853"):
        with pytest.raises(ValueError, match="rtol must be"):
            rollout(SYSTEM, Q0, QD0, t, method=method, rtol=0.0)
        with pytest.raises(ValueError, match="atol must be"):
            rollout(SYSTEM, Q0, QD0, t, method=method, atol=-1e-9)
        with pytest.raises(ValueError, match=r"atol must be positive and finite; got \[1e-06, 0.0"):
            rollout(SYSTEM, Q0, QD0, t, method=method, atol=[1e-6, 0.0, 1e-6])
    with pytest.raises(ValueError, match=r"rtol must be .*shape \(B,\) = \(3,\); got shape \(2,\)"):
        rollout(SYSTEM, Q0, QD0, t, method="dopri5", rtol=[1e-6, 1e-6])
    with pytest.raises(ValueError, match="per-trajectory rtol needs a compiled method"):
        rollout(SYSTEM, Q0, QD0, t, method="DOP853", rtol=[1e-6, 1e-7, 1e-8])
    with pytest.raises(ValueError, match="rtol must be a positive finite number"):
        odeint(SYSTEM, Q0, QD0, t, method="dopri5", rtol=0.0)
    with pytest.raises(ValueError, match="rtol and atol apply to the adaptive methods"):
        odeint(SYSTEM, Q0, QD0, t, method="rk4", rtol=1e-6)
    with pytest.raises(TypeError, match="controller tau"):
        rollout(SYSTEM, Q0, QD0, t, method="dopri5", tau=lambda s, q, qd: np.zeros_like(q))
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        rollout(SYSTEM, Q0, QD0, t, method="dopri5", max_steps=0)


@functools.cache
def _rooted_trees(order: int) -> tuple:
    """The rooted trees with ``order`` nodes, each a sorted tuple of its root's subtrees."""
    if order == 1:
        return ((),)

    def forests(total, smallest):  # multisets of trees with ``total`` nodes, in increasing order
        if total == 0:
            yield ()
            return
        for k in range(1, total + 1):
            for tree in _rooted_trees(k):
                if (k, repr(tree)) >= smallest:
                    for rest in forests(total - k, (k, repr(tree))):
                        yield (tree, *rest)

    return tuple(sorted({tuple(sorted(f, key=repr)) for f in forests(order - 1, (0, ""))}, key=repr))


def _nodes(tree) -> int:
    return 1 + sum(_nodes(child) for child in tree)


def _density(tree) -> int:
    return _nodes(tree) * math.prod(_density(child) for child in tree)


def _elementary_weight(tree, a):
    """``Φ(tree)`` per stage: the product over the root's subtrees of ``a Φ(subtree)``."""
    return np.prod([a @ _elementary_weight(child, a) for child in tree], axis=0) if tree else np.ones(a.shape[0])


def test_rooted_trees_are_counted_right():
    assert [len(_rooted_trees(k)) for k in range(1, 10)] == [1, 1, 2, 4, 9, 20, 48, 115, 286]


@pytest.mark.parametrize("name", solvers.names())
def test_tableau_order_conditions(name):
    """``b · Φ(t) = 1 / γ(t)`` for every rooted tree up to the pair's order (115 trees of order 8),
    not for all of the next order; the same for the embedded solution at its order, and for a
    polynomial dense output at ``θ`` (``θ^ρ(t) / γ(t)``) at its order."""
    tab = solvers.tableau(name)
    a_full, _, b_full, S = tab.stage_matrix()
    a = a_full[:S, :S]
    solutions = [(b_full, tab.order)]
    if tab.error.shape[1] == 1:  # one estimate: b - error is the embedded solution
        solutions.append((b_full - tab.error[:S, 0], tab.error_order))
    for b, order in solutions:
        residual = [
            max(abs(b @ _elementary_weight(tree, a) - 1.0 / _density(tree)) for tree in _rooted_trees(k))
            for k in range(1, order + 2)
        ]
        assert max(residual[:order]) < 1e-13, (name, order, residual)
        assert residual[order] > 1e-6, (name, order, residual)
    if tab.dense_kind == "polynomial":  # b(θ) · Φ(t) = θ^ρ(t) / γ(t) through the dense output's order
        order = DENSE_DEGREE[name]
        for theta in (0.3, 0.7, 1.0):
            b = tab.dense @ theta ** np.arange(1, tab.dense.shape[1] + 1)
            residual = [
                max(
                    abs(b @ _elementary_weight(tree, a) - theta ** _nodes(tree) / _density(tree))
                    for tree in _rooted_trees(k)
                )
                for k in range(1, order + 2)
            ]
            assert max(residual[:order]) < 1e-12, (name, theta, residual)
            if theta < 1.0:
                assert residual[order] > 1e-6, (name, theta, residual)


def test_tableaus_are_consistent():
    for name in solvers.names():
        tab = solvers.tableau(name)
        tab.check()
        assert tab.name == name


def test_auto_is_the_default_and_picks_the_measured_compiled_pair_for_every_learned_model():
    import simulations
    from lnn.integrate import AUTO_TABLE, choose_method

    model64 = lnn.LagrangianNetwork(2, kind="structured", hidden=(8,), dtype="float64", seed=0)
    model32 = lnn.LagrangianNetwork(2, kind="structured", hidden=(8,), seed=0)
    for batch in (1, 4, 5, 16, 256):
        for rtol in (1e-4, 1e-6, 1e-8, 1e-10):
            expected = next(name for largest, tightest, name in AUTO_TABLE if batch <= largest and rtol >= tightest)
            assert choose_method(model64, batch=batch, rtol=rtol) == expected, (batch, rtol)
    assert AUTO_TABLE[-1][:2] == (float("inf"), 0.0)  # every batch and tolerance has a row
    assert choose_method(model64, tau=lambda t, q, qd: 0 * q) == "DOP853"  # a controller: scipy
    assert choose_method(simulations.DoublePendulum()) == "DOP853"  # numpy ground truth: scipy
    assert choose_method(model32) in method_names("compiled")  # float32 too: its state in float64
    t = np.linspace(0.0, 0.5, 6)
    default = rollout(model64, Q0, QD0, t)
    assert default.method == choose_method(model64, batch=Q0.shape[0])
    # The same solve (a plain graph while XLA compiles, then XLA): equal to rounding, which may flip
    # one step's acceptance, so the two agree to the tolerance (1e-8), not bit for bit.
    np.testing.assert_allclose(default.q, rollout(model64, Q0, QD0, t, method=default.method).q, rtol=0, atol=1e-7)
    assert rollout(simulations.DoublePendulum(), Q0, QD0, t).method == "DOP853"
    # A float32 model: the compiled state is float64 (the model's arithmetic float32), so the
    # default path agrees with scipy's within the tolerances, as a change of backend must.
    fast = rollout(model32, Q0, QD0, t)
    reference = rollout(model32, Q0, QD0, t, method="DOP853")
    assert fast.q.dtype == np.float64 and fast.method in method_names("compiled")
    np.testing.assert_allclose(fast.q, reference.q, rtol=0, atol=2e-5)


# -- a pair added from this file ------------------------------------------------------

# --8<-- [start:tableau]
#: Heun's method with Euler's as the embedded solution: order 2(1), two stages, no FSAL, and the
#: quadratic dense output b_1(θ) = θ - θ²/2, b_2(θ) = θ²/2 (the derivative at y_new, the engine's
#: third stage of a pair without FSAL, has weight 0 everywhere).
HEUN = solvers.Tableau(
    name="heun-test",
    order=2,
    error_order=1,
    a=np.array([[0.0, 0.0], [1.0, 0.0]]),
    b=np.array([0.5, 0.5]),
    c=np.array([0.0, 1.0]),
    fsal=False,
    error=np.array([[-0.5], [0.5], [0.0]]),  # b - b_hat, b_hat = (1, 0): Euler
    dense=np.array([[1.0, -0.5], [0.0, 0.5], [0.0, 0.0]]),
)
# --8<-- [end:tableau]


@pytest.fixture
def heun():
    solvers.register_tableau(HEUN)  # the one registry line
    yield HEUN
    solvers.REGISTRY.pop(HEUN.name)


def test_a_pair_registered_from_a_test_file_is_a_method_of_both_doors(heun):
    from lnn.integrate import methods

    assert methods()["heun-test"].backend == "compiled" and methods()["heun-test"].order == 2
    t = np.linspace(0.0, 1.0, 11)
    reference = rollout(NumpyPendulums(SYSTEM), Q0, QD0, t, method="DOP853", rtol=1e-12, atol=1e-12)
    errors = []
    for rtol in (1e-4, 1e-6):
        numpy_door = rollout(SYSTEM, Q0, QD0, t, method="heun-test", rtol=rtol, atol=rtol / 100)
        assert numpy_door.method == "heun-test" and not numpy_door.failures
        errors.append(np.max(np.abs(numpy_door.q - reference.q)))
        assert errors[-1] < 30 * rtol  # a low-order pair meets its tolerance like the others
    assert errors[1] < errors[0] / 10  # and converges as the tolerance tightens
    graph_door = odeint(SYSTEM, Q0, QD0, t, method="heun-test", rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(graph_door.q.numpy(), numpy_door.q, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="registered already"):
        solvers.register_tableau(dataclasses.replace(HEUN))  # the name is taken by another object
    with pytest.raises(ValueError, match="consistency"):
        solvers.register_tableau(dataclasses.replace(HEUN, name="bad-test", b=np.array([0.6, 0.5])))
    with pytest.raises(TypeError, match="lnn.solvers.Tableau"):
        solvers.register_tableau({"name": "dict"})
