"""lnn.odeint after the de-duplication: one Verlet step for both momenta, one result type."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf
from test_odeint import TFDoublePendulum
from test_odeint import _WithoutLagrangian as WithoutLagrangian

import lnn
import lnn.integrate
from lnn._schemes import LagrangianMomentum, MassMomentum, scheme, verlet_step
from lnn.odeint import odeint


@dataclass(frozen=True, eq=False)
class QuadraticPendulum(TFDoublePendulum):
    """The TensorFlow double pendulum of ``test_odeint`` (other masses), with its ``lagrangian``.

    Both Verlet flavours apply: ``p = dL/dqd`` (it has ``lagrangian``) and
    ``p = M(q) qd`` (the view :class:`WithoutLagrangian`).
    """

    m2: object = 1.5
    l2: float = 0.8

    def potential(self, q):
        return -(self.m1 + self.m2) * self.g * self.l1 * tf.cos(q[..., 0]) - self.m2 * self.g * self.l2 * tf.cos(
            q[..., 1]
        )

    def lagrangian(self, q, qd):
        return 0.5 * tf.einsum("bi,bij,bj->b", qd, self.mass_matrix(q), qd) - self.potential(q)


SYSTEM = QuadraticPendulum()
Q0 = np.array([[0.6, -0.4], [1.1, 0.3], [-0.2, 0.9]])
QD0 = np.array([[0.0, 0.5], [0.4, -0.2], [-0.3, 0.1]])


def test_both_verlet_momenta_give_the_same_step_on_a_quadratic_kinetic_energy():
    q0, qd0 = tf.constant(Q0), tf.constant(QD0)
    s, h = tf.constant(0.1, tf.float64), tf.constant(0.05, tf.float64)
    tau = tf.constant([[0.3, -0.1]], tf.float64)

    def force(time, q, qd):
        return tf.broadcast_to(tau * time, tf.shape(q))

    steps = {}
    for momentum in (LagrangianMomentum(SYSTEM), MassMomentum(SYSTEM)):
        p0, _ = momentum.parts(q0, qd0)
        steps[type(momentum).__name__] = verlet_step(momentum, (q0, qd0, p0), s, h, force, iterations=4)
    # p = dL/dqd of T = ½ qdᵀ M qd is M qd: the two momenta (and their rates) are equal.
    np.testing.assert_allclose(
        LagrangianMomentum(SYSTEM).parts(q0, qd0)[0].numpy(), MassMomentum(SYSTEM).parts(q0, qd0)[0].numpy(), rtol=1e-14
    )
    for by_lagrangian, by_mass in zip(steps["LagrangianMomentum"], steps["MassMomentum"]):
        np.testing.assert_allclose(by_lagrangian.numpy(), by_mass.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("forced", [False, True])
def test_both_verlet_flavours_agree_through_odeint(forced):
    t = np.linspace(0.0, 2.0, 41)
    tau = np.stack([0.4 * np.sin(2 * t), -0.3 * t], axis=-1) if forced else None
    by_lagrangian = odeint(SYSTEM, Q0, QD0, t, method="verlet", tau=tau)
    by_mass = odeint(WithoutLagrangian(SYSTEM), Q0, QD0, t, method="verlet", tau=tau)
    for field in ("q", "qd", "qdd", "tau", "energy"):
        np.testing.assert_allclose(
            getattr(by_lagrangian, field).numpy(), getattr(by_mass, field).numpy(), rtol=0, atol=1e-11
        )
    # Evaluations per step: dL/d(q, qd) for the Lagrangian form, accelerations for p = M qd.
    assert by_lagrangian.nfev == (3 * 4 + 4) * 40 + 41
    assert by_mass.nfev == (4 + 2) * 40 + 41
    assert scheme(SYSTEM, "verlet", iterations=2).evaluations == 3 * 2 + 4
    assert scheme(WithoutLagrangian(SYSTEM), "verlet", iterations=2).evaluations == 2 + 2


def test_odeint_returns_a_trajectory_eagerly_and_inside_a_tf_function():
    t = np.linspace(0.0, 0.5, 6)
    eager = odeint(SYSTEM, Q0, QD0, t, method="rk4")
    wrapped = lnn.integrate.odeint(SYSTEM, Q0, QD0, t)
    assert type(eager) is type(wrapped) is lnn.Trajectory
    with pytest.warns(DeprecationWarning, match="OdeintResult is deprecated"):
        assert lnn.odeint.OdeintResult is lnn.Trajectory  # the old name, one release as an alias
    assert lnn.integrate.odeint is odeint  # a thin alias of door two, not a door of its own
    assert not eager.symbolic and isinstance(eager.t, np.ndarray)
    assert isinstance(eager.q, tf.Tensor) and eager.q.shape == (3, 6, 2)
    assert eager.metadata == {"substeps": 1, "iterations": 4} and eager.nfev == 4 * 5 + 6
    np.testing.assert_array_equal(wrapped.q.numpy(), eager.q.numpy())

    seen = {}
    spec = tf.TensorSpec((None, 2), tf.float64)

    @tf.function(input_signature=[spec, spec])
    def final_state(q0, qd0):
        for name, entry in (("odeint", odeint), ("lnn.integrate.odeint", lnn.integrate.odeint)):
            path = entry(SYSTEM, q0, qd0, t, method="verlet")
            seen[name] = (
                type(path),
                path.symbolic,
                path.q.shape.as_list(),
                path.qd.shape.as_list(),
                path.energy.shape.as_list(),
                path.nfev,
            )
        return path.q[:, -1], path.qd[:, -1]

    q_end, qd_end = final_state(Q0, QD0)
    for name in ("odeint", "lnn.integrate.odeint"):
        kind, symbolic, q_shape, qd_shape, energy_shape, nfev = seen[name]
        assert kind is lnn.Trajectory and symbolic, name
        assert q_shape == qd_shape == [None, 6, 2] and energy_shape == [None, 6]
        assert nfev == 16 * 5 + 6
    verlet = odeint(SYSTEM, Q0, QD0, t, method="verlet")
    np.testing.assert_allclose(q_end.numpy(), verlet.q.numpy()[:, -1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(qd_end.numpy(), verlet.qd.numpy()[:, -1], rtol=0, atol=1e-14)


def test_a_symbolic_trajectory_can_be_indexed_not_cut_or_saved(tmp_path):
    spec = tf.TensorSpec((None, 2), tf.float64)
    traced = []

    @tf.function(input_signature=[spec, spec, tf.TensorSpec((None,), tf.float64)])
    def first(q0, qd0, t):
        path = odeint(SYSTEM, q0, qd0, t)
        traced.append(path)
        return path[0].q

    q = first(Q0, QD0, np.linspace(0.0, 0.2, 3))
    assert q.shape == (1, 3, 2)
    (path,) = traced
    assert path.symbolic and path.nfev == 0  # T is only known when the graph runs
    assert path.t.shape.as_list() == [None] and path.q.shape.as_list() == [None, None, 2]
    with pytest.raises(TypeError, match="Trajectory.until needs values.*symbolic"):
        path.until(0.1)
    with pytest.raises(TypeError, match="Trajectory.save needs values.*symbolic"):
        path.save(tmp_path / "never.npz")
    assert not (tmp_path / "never.npz").exists()


def test_trajectory_keeps_refusing_inconsistent_numpy_shapes():
    q = np.zeros((2, 5, 3))
    good = dict(t=np.linspace(0, 1, 5), q=q, qd=q, qdd=q, tau=q, energy=np.zeros((2, 5)))
    assert lnn.Trajectory(**good).n_trajectories == 2
    for field, value, message in [
        ("t", np.zeros((5, 1)), r"Trajectory.t must have shape \(T,\), got shape \(5, 1\)"),
        ("q", np.zeros((2, 4, 3)), r"Trajectory.q must have shape \(B, T=5, n\)"),
        ("qd", np.zeros((2, 5, 2)), r"Trajectory.qd must have shape \(2, 5, 3\), got shape \(2, 5, 2\)"),
        ("energy", np.zeros((2, 4)), r"Trajectory.energy must have shape \(2, 5\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            lnn.Trajectory(**{**good, field: value})


def test_xla_rollout_agrees_with_the_graph_rollout():
    t = np.linspace(0.0, 0.3, 4)
    for method in ("rk4", "verlet"):
        plain = odeint(SYSTEM, Q0, QD0, t, method=method, iterations=2)
        xla = odeint(SYSTEM, Q0, QD0, t, method=method, iterations=2, jit_compile=True)
        np.testing.assert_allclose(xla.q.numpy(), plain.q.numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(xla.qd.numpy(), plain.qd.numpy(), rtol=0, atol=1e-11)
