"""The in-graph integrators of :mod:`lnn.odeint`: order, long-time energy, gradients, agreement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf
from scipy.integrate import solve_ivp

import lnn.integrate
import simulations
from lnn.odeint import METHODS, odeint


@dataclass(frozen=True, eq=False)
class TFDoublePendulum:
    """The exact double pendulum (absolute angles from the downward vertical) in TensorFlow.

    ``mass`` may be a ``tf.Variable`` (the lower bob's mass) so that gradients
    with respect to a parameter of the system can be checked.
    """

    m1: float = 1.0
    m2: object = 1.0
    l1: float = 1.0
    l2: float = 1.0
    g: float = 9.81

    n_dof = 2
    angular = (True, True)
    dtype = "float64"

    def mass_matrix(self, q, qd=None):
        """``M(q)``, shape ``(B, 2, 2)``."""
        off = self.m2 * self.l1 * self.l2 * tf.cos(q[..., 0] - q[..., 1])
        m11 = (self.m1 + self.m2) * self.l1**2 * tf.ones_like(off)
        m22 = self.m2 * self.l2**2 * tf.ones_like(off)
        return tf.stack([tf.stack([m11, off], -1), tf.stack([off, m22], -1)], -2)

    def acceleration(self, q, qd, tau=None):
        """``qdd``, shape ``(B, 2)``."""
        k = self.m2 * self.l1 * self.l2 * tf.sin(q[..., 0] - q[..., 1])
        r1 = -k * qd[..., 1] ** 2 - (self.m1 + self.m2) * self.g * self.l1 * tf.sin(q[..., 0])
        r2 = k * qd[..., 0] ** 2 - self.m2 * self.g * self.l2 * tf.sin(q[..., 1])
        rhs = tf.stack([r1, r2], -1)
        if tau is not None:
            rhs = rhs + tau
        return tf.linalg.solve(self.mass_matrix(q), rhs[..., None])[..., 0]

    def energy(self, q, qd):
        """``T + V``, shape ``(B,)``."""
        kinetic = 0.5 * tf.einsum("bi,bij,bj->b", qd, self.mass_matrix(q), qd)
        potential = -(self.m1 + self.m2) * self.g * self.l1 * tf.cos(q[..., 0]) - self.m2 * self.g * self.l2 * tf.cos(
            q[..., 1]
        )
        return kinetic + potential


SYSTEM = TFDoublePendulum()
Q0 = np.array([[0.5, -0.3], [1.0, 0.2]])
QD0 = np.array([[0.0, 0.4], [0.3, -0.1]])


def _reference(q0, qd0, t_end):
    """Final state of a DOP853 solve at rtol = 1e-13 of ``SYSTEM``'s numpy twin (checked equal below: a fast
    oracle, where ``SYSTEM`` itself would be called eagerly thousands of times), shape ``(B, 4)``."""
    twin = simulations.DoublePendulum()
    B, n = q0.shape

    def f(time, y):
        y = y.reshape(B, 2 * n)
        qdd = twin.acceleration(y[:, :n], y[:, n:])
        return np.concatenate([y[:, n:], qdd], 1).ravel()

    y0 = np.concatenate([q0, qd0], 1).ravel()
    sol = solve_ivp(f, (0.0, t_end), y0, method="DOP853", rtol=1e-13, atol=1e-13)
    return sol.y[:, -1].reshape(B, 2 * n)


def _final_state(trajectory):
    return np.concatenate([trajectory.q.numpy()[:, -1], trajectory.qd.numpy()[:, -1]], 1)


def test_test_oracle_matches_ground_truth_double_pendulum():
    truth = simulations.DoublePendulum()
    rng = np.random.default_rng(0)
    q, qd = rng.normal(size=(5, 2)), rng.normal(size=(5, 2))
    np.testing.assert_allclose(
        SYSTEM.acceleration(tf.constant(q), tf.constant(qd)).numpy(), truth.acceleration(q, qd), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        SYSTEM.energy(tf.constant(q), tf.constant(qd)).numpy(), truth.energy(q, qd), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("method, order", [("rk4", 4.0), ("verlet", 2.0)])
def test_convergence_order(method, order):
    """Fit the log-log slope of the global error against the step (as diffrax's test_ode_order)."""
    t_end = 1.0
    reference = _reference(Q0, QD0, t_end)
    steps, errors = [], []
    for n_steps in (20, 40, 80, 160):
        t = np.linspace(0.0, t_end, n_steps + 1)
        trajectory = odeint(SYSTEM, Q0, QD0, t, method=method)
        errors.append(np.abs(_final_state(trajectory) - reference).max())
        steps.append(t_end / n_steps)
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.2, (method, slope, errors)


def test_substeps_equal_a_finer_grid():
    t = np.linspace(0.0, 0.5, 11)
    fine = np.linspace(0.0, 0.5, 31)
    for method in METHODS:
        coarse = odeint(SYSTEM, Q0, QD0, t, method=method, substeps=3)
        refined = odeint(SYSTEM, Q0, QD0, fine, method=method)
        np.testing.assert_allclose(coarse.q.numpy(), refined.q.numpy()[:, ::3], rtol=0, atol=1e-12)
        np.testing.assert_allclose(coarse.qd.numpy(), refined.qd.numpy()[:, ::3], rtol=0, atol=1e-12)


def _energy_drift(system, q0, qd0, jit_compile=False):
    """Per method: the largest energy error over 10^4 steps of h = 0.05 s, and its growth
    (largest error in the last third of the run over the largest in the first third)."""
    t = 0.05 * np.arange(10_001)
    third = t.shape[0] // 3
    largest, growth = {}, {}
    for method in METHODS:
        energy = odeint(system, q0, qd0, t, method=method, jit_compile=jit_compile).energy.numpy()
        error = np.abs(energy - energy[:, :1])
        largest[method] = error.max()
        growth[method] = error[:, -third:].max(axis=1) / error[:, :third].max(axis=1)
    return largest, growth


def test_symplectic_energy_bounded_while_rk4_drifts():
    """10^4 steps of h = 0.05 s: Verlet's energy error does not grow, RK4's does."""
    largest, growth = _energy_drift(SYSTEM, Q0, QD0)
    assert largest["verlet"] < 0.15  # O(h^2) and bounded, against |E| ~ 20
    assert np.all(growth["verlet"] < 1.3), growth
    assert np.all(growth["rk4"] > 2.0), growth


@pytest.mark.parametrize("method", METHODS)
def test_gradients_match_finite_differences(method):
    """d loss / d q0 and d loss / d (a variable the system reads) through a 20-step rollout."""
    mass = tf.Variable(1.3, dtype=tf.float64)
    system = TFDoublePendulum(m2=mass)
    q0 = tf.constant(Q0[:1])
    t = np.linspace(0.0, 1.0, 21)

    def loss(q_init):
        trajectory = odeint(system, q_init, QD0[:1], t, method=method)
        return tf.reduce_sum(trajectory.q[:, -1] ** 2) + tf.reduce_sum(trajectory.qd[:, -1])

    with tf.GradientTape() as tape:
        tape.watch(q0)
        value = loss(q0)
    grad_q0, grad_mass = tape.gradient(value, [q0, mass])
    eps = 1e-6
    fd_q0 = []
    for i in range(2):
        e = np.zeros((1, 2))
        e[0, i] = eps
        fd_q0.append((loss(q0 + e) - loss(q0 - e)).numpy() / (2 * eps))
    np.testing.assert_allclose(grad_q0.numpy()[0], fd_q0, rtol=1e-6, atol=1e-8)
    mass.assign(1.3 + eps)
    up = loss(q0).numpy()
    mass.assign(1.3 - eps)
    down = loss(q0).numpy()
    mass.assign(1.3)
    np.testing.assert_allclose(grad_mass.numpy(), (up - down) / (2 * eps), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_agrees_with_scipy_rollout_under_torques(method):
    """A sampled torque (interpolated linearly) and the equivalent controller give the scipy answer."""
    t = np.linspace(0.0, 1.0, 201)
    tau_samples = np.stack([0.5 * np.sin(3 * t), 0.2 * t], axis=-1)  # (T, 2), linear in between
    exact = simulations.DoublePendulum()  # numpy twin of SYSTEM (checked above): fast oracle
    truth = lnn.integrate.rollout(exact, Q0, QD0, t, tau=tau_samples, method="DOP853", rtol=1e-12, atol=1e-12)
    ours = odeint(SYSTEM, Q0, QD0, t, method=method, tau=tau_samples, substeps=2)
    tolerance = 1e-7 if method == "rk4" else 2e-4
    np.testing.assert_allclose(ours.q.numpy(), truth.q, atol=tolerance)
    np.testing.assert_allclose(ours.qd.numpy(), truth.qd, atol=10 * tolerance)
    np.testing.assert_allclose(ours.tau.numpy(), truth.tau, atol=1e-12)
    np.testing.assert_allclose(ours.qdd.numpy(), SYSTEM.acceleration(ours.q, ours.qd, ours.tau).numpy(), atol=1e-12)

    def controller(time, q, qd):
        return -0.5 * qd  # damping: a force that depends on the state

    damped = odeint(SYSTEM, Q0, QD0, t, method=method, tau=controller, substeps=2)
    truth = lnn.integrate.rollout(exact, Q0, QD0, t, tau=lambda s, q, qd: -0.5 * qd, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(damped.q.numpy(), truth.q, atol=tolerance)
    np.testing.assert_allclose(damped.tau.numpy(), truth.tau, atol=10 * tolerance)
    assert np.all(damped.energy.numpy()[:, -1] < damped.energy.numpy()[:, 0])


def test_lazy_wrapper_and_no_retracing():
    t = np.linspace(0.0, 0.2, 5)
    first = lnn.integrate.odeint(SYSTEM, Q0, QD0, t)
    direct = odeint(SYSTEM, Q0[:1], QD0[:1], np.linspace(0.0, 0.4, 9))  # new batch and length
    assert first.method == "rk4" and first.q.shape == (2, 5, 2) and direct.q.shape == (1, 9, 2)
    assert isinstance(first.q, tf.Tensor) and first.q.dtype == tf.float64
    assert first.nfev == 4 * 4 + 5
    from lnn.integrate.graph import _CACHE

    (compiled,) = [f for key, f in _CACHE[SYSTEM].items() if key[0] == "rk4" and key[1] == 1 and key[3] is None]
    assert compiled.experimental_get_tracing_count() == 1


def test_bad_input_is_rejected_with_a_clear_message():
    t = np.linspace(0.0, 1.0, 5)
    with pytest.raises(ValueError, match="method"):
        odeint(SYSTEM, Q0, QD0, t, method="euler")
    with pytest.raises(ValueError, match=r"q0 must have shape \(B, 2\)"):
        odeint(SYSTEM, np.zeros((2, 3)), QD0, t)
    with pytest.raises(ValueError, match="batch size"):
        odeint(SYSTEM, Q0, QD0[:1], t)
    with pytest.raises(ValueError, match="strictly increasing"):
        odeint(SYSTEM, Q0, QD0, t[::-1])
    with pytest.raises(ValueError, match=r"t must have shape \(T,\)"):
        odeint(SYSTEM, Q0, QD0, [0.0])
    with pytest.raises(ValueError, match=r"tau must have shape \(T, n\) = \(5, 2\).*\(4, 2\)"):
        odeint(SYSTEM, Q0, QD0, t, tau=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="substeps"):
        odeint(SYSTEM, Q0, QD0, t, substeps=0)
    with pytest.raises(TypeError, match="mass_matrix"):
        odeint(
            type("NoMass", (), {"n_dof": 2, "acceleration": SYSTEM.acceleration, "energy": SYSTEM.energy})(),
            Q0,
            QD0,
            t,
            method="verlet",
        )


def _learned_double_pendulum(kind):
    """A small float64 model with damping whose M is positive definite by construction."""
    from lnn.models import LagrangianNetwork

    options = {"convex": True} if kind == "kinetic-potential" else {}
    model = LagrangianNetwork(
        2, kind=kind, hidden=(8, 8), angular=(True, True), damping=True, dtype="float64", seed=4, **options
    )
    rng = np.random.default_rng(4)
    model.adapt(rng.uniform(-np.pi, np.pi, (64, 2)), rng.normal(size=(64, 2)))
    return model


@pytest.fixture(scope="module")
def damped_models():
    """One damped float64 model per kind, shared so that the compiled rollouts are reused."""
    return {kind: _learned_double_pendulum(kind) for kind in ("kinetic-potential", "black-box")}


def _scipy_truth(model, t):
    """DOP853 at 1e-12 on the model's numpy twin (lnn.rollout's scipy path: no compiled solve)."""
    return lnn.integrate.rollout(model, Q0, QD0, t, method="DOP853", rtol=1e-12, atol=1e-12)


def test_learned_model_agrees_with_scipy_rollout_and_weight_gradient_matches(damped_models):
    """RK4 on a LagrangianNetwork matches lnn.rollout; d loss / d weight matches FD."""
    model = damped_models["kinetic-potential"]
    t = np.linspace(0.0, 1.0, 11)
    truth = _scipy_truth(model, t)
    ours = odeint(model, Q0, QD0, t, method="rk4", substeps=4)
    np.testing.assert_allclose(ours.q.numpy(), truth.q, atol=1e-6)
    np.testing.assert_allclose(ours.energy.numpy(), truth.energy, atol=1e-5)

    weight = model.potential_net.w_x
    index = (1, 3)
    t = np.linspace(0.0, 0.5, 6)

    def loss():
        trajectory = odeint(model, Q0, QD0, t, method="rk4")
        return tf.reduce_sum(trajectory.q[:, -1] ** 2) + tf.reduce_sum(trajectory.qd[:, -1] ** 2)

    with tf.GradientTape() as tape:
        value = loss()
    grad = tape.gradient(value, weight)
    assert grad is not None
    np.testing.assert_allclose(grad.numpy()[index], _weight_difference(weight, index, loss), rtol=1e-6, atol=1e-9)


def _weight_difference(weight, index, loss, eps=1e-6):
    """Central difference of ``loss()`` in one entry ``index`` of the variable ``weight``."""
    original = weight.numpy()
    shifted = []
    for sign in (1.0, -1.0):
        trial = original.copy()
        trial[index] += sign * eps
        weight.assign(trial)
        shifted.append(loss().numpy())
    weight.assign(original)
    return (shifted[0] - shifted[1]) / (2 * eps)


def test_verlet_on_a_structured_learned_model_agrees_with_scipy_rollout():
    model = _learned_double_pendulum("structured")
    t = np.linspace(0.0, 1.0, 11)
    truth = _scipy_truth(model, t)
    coarse = odeint(model, Q0, QD0, t, method="verlet", substeps=2)
    fine = odeint(model, Q0, QD0, t, method="verlet", substeps=8)
    error_coarse = np.abs(coarse.q.numpy() - truth.q).max()
    error_fine = np.abs(fine.q.numpy() - truth.q).max()
    assert error_fine < 2e-3
    assert 16 / 1.5 < error_coarse / error_fine < 16 * 1.5  # second order: 4x the steps, 1/16


# ----------------------------------------------------------------------------- Verlet on any Lagrangian


@pytest.mark.parametrize("kind", ["kinetic-potential", "black-box"])
def test_verlet_on_a_learned_lagrangian_is_second_order_and_agrees_with_rk4(damped_models, kind):
    """p = dL/dqd with qd-dependent M (and damping): global error slope 2, RK4 agreement."""
    model = damped_models[kind]
    truth = _scipy_truth(model, np.array([0.0, 1.0]))
    reference = np.concatenate([truth.q[:, -1], truth.qd[:, -1]], 1)
    steps, errors = [], []
    for n_steps in (10, 20, 40):  # one compiled rollout: only the grid changes
        trajectory = odeint(model, Q0, QD0, np.linspace(0.0, 1.0, n_steps + 1), method="verlet")
        errors.append(np.abs(_final_state(trajectory) - reference).max())
        steps.append(1.0 / n_steps)
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - 2.0) < 0.2, (slope, errors)

    t = np.linspace(0.0, 1.0, 81)
    verlet = odeint(model, Q0, QD0, t, method="verlet")
    rk4 = odeint(model, Q0, QD0, t, method="rk4")
    np.testing.assert_allclose(verlet.q.numpy(), rk4.q.numpy(), rtol=0, atol=5e-4)
    np.testing.assert_allclose(verlet.qd.numpy(), rk4.qd.numpy(), rtol=0, atol=2e-3)
    np.testing.assert_allclose(verlet.energy.numpy(), rk4.energy.numpy(), rtol=0, atol=2e-3)
    assert verlet.nfev == (3 * 4 + 4) * 80 + 81

    tau = np.stack([0.5 * np.sin(3 * t), 0.2 * t], axis=-1)  # (T, 2), same compiled rollouts
    forced = odeint(model, Q0, QD0, t, method="verlet", tau=tau)
    assert np.abs(forced.q.numpy() - verlet.q.numpy()).max() > 1e-2
    np.testing.assert_allclose(
        forced.q.numpy(), odeint(model, Q0, QD0, t, method="rk4", tau=tau).q.numpy(), rtol=0, atol=5e-4
    )


class _WithoutLagrangian:
    """A view of a model without ``lagrangian``: odeint's Verlet then uses ``p = M(q) qd``."""

    def __init__(self, model):
        self._model = model
        self.n_dof, self.dtype = model.n_dof, model.dtype
        self.mass_matrix, self.acceleration = model.mass_matrix, model.acceleration
        self.energy = model.energy


def test_verlet_through_dl_dqd_reduces_to_the_mass_matrix_form_for_a_structured_model():
    """M independent of qd: Newton on p = M qd is exact, so both forms give the same steps."""
    model = _learned_double_pendulum("structured")
    t = np.linspace(0.0, 1.0, 21)
    general = odeint(model, Q0, QD0, t, method="verlet")
    by_mass = odeint(_WithoutLagrangian(model), Q0, QD0, t, method="verlet")
    np.testing.assert_allclose(general.q.numpy(), by_mass.q.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(general.qd.numpy(), by_mass.qd.numpy(), rtol=0, atol=1e-11)


@pytest.mark.slow
def test_verlet_energy_bounded_on_a_conservative_learned_model_while_rk4_drifts():
    """10^4 steps on a convex kinetic-potential model without damping (its energy is a first
    integral): Verlet's error stays bounded (a one-degree-of-freedom model is integrable, so
    the error oscillates), RK4's grows."""
    from lnn.models import LagrangianNetwork

    model = LagrangianNetwork(
        1, kind="kinetic-potential", hidden=(8, 8), angular=(True,), convex=True, dtype="float64", seed=4
    )
    rng = np.random.default_rng(4)
    model.adapt(rng.uniform(-np.pi, np.pi, (64, 1)), rng.normal(size=(64, 1)))
    q0, qd0 = rng.uniform(-1.0, 1.0, (2, 1)), rng.uniform(-0.5, 0.5, (2, 1))
    # XLA: 10^4 steps of a learned model's Hessians run 10x faster, for one compilation per method.
    largest, growth = _energy_drift(model, q0, qd0, jit_compile=True)
    assert largest["verlet"] < 1e-2  # O(h^2), against |E| ~ 4
    assert np.all(growth["verlet"] < 1.2), growth
    assert np.all(growth["rk4"] > 2.0), growth


def test_verlet_gradients_through_a_learned_lagrangian_match_finite_differences(damped_models):
    """d loss / d q0 and d loss / d (a kinetic-network weight) through 5 Verlet steps."""
    model = damped_models["kinetic-potential"]
    weight = model.kinetic_net.w_v
    index = (1, 2)
    t = np.linspace(0.0, 0.5, 6)

    def loss(q_init):
        trajectory = odeint(model, q_init, QD0, t, method="verlet")
        return tf.reduce_sum(trajectory.q[:, -1] ** 2) + tf.reduce_sum(trajectory.qd[:, -1] ** 2)

    q0 = tf.constant(Q0)
    with tf.GradientTape() as tape:
        tape.watch(q0)
        value = loss(q0)
    grad_q0, grad_weight = tape.gradient(value, [q0, weight])
    eps = 1e-6
    for i in range(2):
        e = np.zeros_like(Q0)
        e[0, i] = eps
        fd = (loss(q0 + e) - loss(q0 - e)).numpy() / (2 * eps)
        np.testing.assert_allclose(grad_q0.numpy()[0, i], fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        grad_weight.numpy()[index], _weight_difference(weight, index, lambda: loss(q0), eps), rtol=1e-6, atol=1e-8
    )


# ----------------------------------------------------------------------------- inside tf.function


def test_inside_a_tf_function_with_unknown_batch_returns_tensors_and_traces_once(damped_models):
    """None batch dimension: a Trajectory of tensors, the eager values and gradients, one trace."""
    model = damped_models["kinetic-potential"]
    t = np.linspace(0.0, 0.5, 6)
    spec = tf.TensorSpec((None, 2), tf.float64)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec((None, None, 2), tf.float64)])
    def loss_and_gradients(q0, qd0, tau):
        with tf.GradientTape() as tape:
            result = odeint(model, q0, qd0, t, method="rk4", tau=tau)
            loss = tf.reduce_sum(result.q[:, -1] ** 2) + tf.reduce_sum(result.energy[:, -1])
        assert isinstance(result, lnn.Trajectory) and result.method == "rk4"
        assert result.q.shape.as_list() == [None, 6, 2]
        assert result.energy.shape.as_list() == [None, 6]
        return loss, tape.gradient(loss, model.trainable_variables)

    rng = np.random.default_rng(7)
    weight, index, eps = model.potential_net.w_x, (1, 3), 1e-6
    original = weight.numpy()
    for batch in (1, 3, 4):
        q0, qd0 = rng.normal(size=(batch, 2)), rng.normal(size=(batch, 2))
        tau = rng.normal(size=(batch, 6, 2))
        loss, grads = loss_and_gradients(q0, qd0, tau)
        eager = odeint(model, q0, qd0, t, method="rk4", tau=tau)
        expected = tf.reduce_sum(eager.q[:, -1] ** 2) + tf.reduce_sum(eager.energy[:, -1])
        np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-12)
        shifted = []
        for sign in (1.0, -1.0):
            trial = original.copy()
            trial[index] += sign * eps
            weight.assign(trial)
            shifted.append(loss_and_gradients(q0, qd0, tau)[0].numpy())
        weight.assign(original)
        (grad,) = [g for g, v in zip(grads, model.trainable_variables) if v is weight]
        np.testing.assert_allclose(grad.numpy()[index], (shifted[0] - shifted[1]) / (2 * eps), rtol=1e-6, atol=1e-9)
    assert loss_and_gradients.experimental_get_tracing_count() == 1


def test_inside_a_tf_function_symbolic_times_and_shapes_are_checked_when_the_graph_runs():
    spec = tf.TensorSpec((None, 2), tf.float64)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec((None,), tf.float64)])
    def final_q(q0, qd0, t):
        return odeint(SYSTEM, q0, qd0, t, method="verlet").q[:, -1]

    t = np.linspace(0.0, 0.5, 11)
    np.testing.assert_allclose(
        final_q(Q0, QD0, t).numpy(), odeint(SYSTEM, Q0, QD0, t, method="verlet").q.numpy()[:, -1], rtol=0, atol=1e-14
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="strictly increasing"):
        final_q(Q0, QD0, t[::-1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="same batch size"):
        final_q(Q0, QD0[:1], t)

    @tf.function(input_signature=[tf.TensorSpec((None, 3), tf.float64)] * 2)
    def wrong_width(q0, qd0):
        return odeint(SYSTEM, q0, qd0, t).q

    with pytest.raises(ValueError, match=r"q0 must have shape \(B, 2\)"):
        wrong_width.get_concrete_function()
