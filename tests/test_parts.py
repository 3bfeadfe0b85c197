"""The gauge and the named parts of the inverse dynamics, and typed copies of a model.

For every kind ``T(q, 0) = 0`` and ``V(q) = -L(q, 0)`` is the potential, and
``M qdd + coriolis(q, qd) + gravity(q) + friction_torque(qd)`` is
``inverse_dynamics(q, qd, qdd)``; a model fed the exact double-pendulum
Lagrangian gives the true mass matrix, gravity (``dV/dq``) and velocity terms.
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import simulations  # noqa: E402
from lnn import plot  # noqa: E402
from lnn.models import KINDS, Kind, LagrangianNetwork  # noqa: E402

NETWORK_KINDS = ("kinetic-potential", "black-box", "structured")
FORCES = ({}, {"damping": True, "friction": "viscous+coulomb"})


def _states(n=16, n_dof=2, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-np.pi, np.pi, (n, n_dof)), rng.normal(0.0, 1.5, (n, n_dof)), rng.normal(0.0, 2.0, (n, n_dof)))


def _trained_like(kind, seed=0, **forces):
    """A float64 model with adapted scales and every weight moved off its initialisation."""
    model = LagrangianNetwork(
        2, kind=kind, hidden=(16, 16), angular=(True, False), dtype="float64", seed=seed, xla=False, **forces
    )
    q, qd, qdd = _states(64, seed=seed + 1)
    model.adapt(q, qd, qdd)
    rng = np.random.default_rng(seed + 2)
    for var in model.trainable_variables:
        var.assign(var.numpy() + 0.1 * rng.normal(size=var.shape))
    return model


def _np(x):
    return np.asarray(x, dtype=np.float64)


# ------------------------------------------------------------------------------ the gauge
@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_kinetic_energy_vanishes_at_rest_and_v_is_the_potential(kind):
    model = _trained_like(kind)
    q, qd, _ = _states()
    zero = np.zeros_like(qd)
    np.testing.assert_allclose(_np(model.kinetic_energy(q, zero)), 0.0, atol=1e-12)
    np.testing.assert_allclose(_np(model.potential_energy(q)), -_np(model.lagrangian(q, zero)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        _np(model.kinetic_energy(q, qd)) - _np(model.potential_energy(q)),
        _np(model.lagrangian(q, qd)),
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_allclose(_np(model.energy(q, zero)), _np(model.potential_energy(q)), rtol=1e-12, atol=1e-12)
    # gravity = dV/dq, by autodiff of the potential
    qt = tf.constant(q)
    with tf.GradientTape() as tape:
        tape.watch(qt)
        v = model._potential(qt)
    np.testing.assert_allclose(_np(model.gravity(q)), _np(tape.gradient(v, qt)), rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------ the parts
@pytest.mark.parametrize("forces", FORCES, ids=["conservative", "damping+friction"])
@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_the_parts_add_up_to_the_inverse_dynamics(kind, forces):
    model = _trained_like(kind, **forces)
    q, qd, qdd = _states()
    mass = _np(model.mass_matrix(q, qd))
    gravity, coriolis = _np(model.gravity(q)), _np(model.coriolis(q, qd))
    friction = _np(model.friction_torque(qd))
    total = _np(model.inverse_dynamics(q, qd, qdd))
    parts = np.einsum("bij,bj->bi", mass, qdd) + coriolis + gravity + friction
    np.testing.assert_allclose(parts, total, rtol=0, atol=1e-10 * max(1.0, np.abs(total).max()))
    # The velocity terms vanish at rest; the friction torque dissipates and vanishes with forces off.
    np.testing.assert_allclose(_np(model.coriolis(q, np.zeros_like(qd))), 0.0, atol=1e-12)
    if forces:
        assert np.all(np.einsum("bi,bi->b", qd, friction) >= 0)
        assert np.abs(friction).max() > 1e-3
    else:
        np.testing.assert_array_equal(friction, 0.0)
    # torque_decomposition reads the named parts
    split = plot.torque_decomposition(model, q, qd, qdd)
    np.testing.assert_allclose(split.gravity, gravity, rtol=1e-12)
    np.testing.assert_allclose(split.coriolis, coriolis, rtol=1e-12)
    np.testing.assert_allclose(split.friction, friction, rtol=1e-12)
    np.testing.assert_allclose(
        split.inertial + split.coriolis + split.gravity + split.friction,
        split.total,
        atol=1e-10 * max(1.0, np.abs(total).max()),
    )


def test_a_conservative_model_shows_no_friction():
    """The even/odd split of ID(q, +-qd) saw friction in a T with odd terms in qd; the parts do not."""
    model = _trained_like("kinetic-potential")
    q, qd, qdd = _states()
    split = plot.torque_decomposition(model, q, qd, qdd)
    np.testing.assert_array_equal(split.friction, 0.0)
    zero = np.zeros_like(q)
    odd = 0.5 * (_np(model.inverse_dynamics(q, qd, zero)) - _np(model.inverse_dynamics(q, -qd, zero)))
    assert np.abs(odd).max() > 1e-3  # what the inverse-dynamics split would have called friction


def test_parts_take_single_states_and_compile_once():
    model = _trained_like("structured")
    q, qd, _ = _states(3)
    np.testing.assert_allclose(_np(model.gravity(q[0])), _np(model.gravity(q))[0], rtol=1e-12)
    np.testing.assert_allclose(_np(model.coriolis(q[1], qd[1])), _np(model.coriolis(q, qd))[1], rtol=1e-12)
    for batch in (1, 5, 7):
        q, qd, _ = _states(batch, seed=batch)
        model.gravity(q), model.coriolis(q, qd), model.friction_torque(qd)
    for op in ("gravity", "coriolis", "friction_torque"):
        assert model.tracing_count(op) == 1
    with pytest.raises(ValueError, match="q"):
        model.gravity(np.zeros((4, 3)))


def test_parts_inline_inside_a_tape():
    """The tape's gradient of a loss on gravity and Coriolis torques is the finite difference of that loss."""
    model = _trained_like("kinetic-potential")
    q, qd, _ = (tf.constant(x) for x in _states(4))

    def loss():
        return float(tf.reduce_sum(model.gravity(q) ** 2) + tf.reduce_sum(model.coriolis(q, qd) ** 2))

    with tf.GradientTape() as tape:
        value = tf.reduce_sum(model.gravity(q) ** 2) + tf.reduce_sum(model.coriolis(q, qd) ** 2)
    grads = tape.gradient(value, model.trainable_variables)
    assert all(g is not None for g in grads), [v.name for v, g in zip(model.trainable_variables, grads) if g is None]
    rng = np.random.default_rng(7)
    directions = [rng.normal(size=v.shape) for v in model.trainable_variables]
    along = sum(float(np.sum(g.numpy() * d)) for g, d in zip(grads, directions))
    h, shifted = 1e-5, []
    for sign in (1.0, -1.0):
        for v, d in zip(model.trainable_variables, directions):
            v.assign_add(sign * h * d)
        shifted.append(loss())
        for v, d in zip(model.trainable_variables, directions):
            v.assign_sub(sign * h * d)
    assert abs(along) > 1e-3
    np.testing.assert_allclose(along, (shifted[0] - shifted[1]) / (2 * h), rtol=1e-6)


# -------------------------------------------------------------- the exact Lagrangian's parts
PENDULUM = simulations.DoublePendulum(m1=1.3, m2=0.7, l1=1.1, l2=0.9, g=9.8)


class ExactDoublePendulum(Kind):
    """The double pendulum's own T and V, in TensorFlow: no networks."""

    name = "test-exact-double-pendulum"

    def build(self, *, n_features, seeds, options):
        pass

    def kinetic(self, q, qd):
        p = PENDULUM
        return (
            0.5 * (p.m1 + p.m2) * p.l1**2 * qd[:, 0] ** 2
            + 0.5 * p.m2 * p.l2**2 * qd[:, 1] ** 2
            + p.m2 * p.l1 * p.l2 * qd[:, 0] * qd[:, 1] * tf.cos(q[:, 0] - q[:, 1])
        )

    def potential(self, q):
        p = PENDULUM
        return -(p.m1 + p.m2) * p.g * p.l1 * tf.cos(q[:, 0]) - p.m2 * p.g * p.l2 * tf.cos(q[:, 1])


@pytest.fixture
def exact_model():
    KINDS[ExactDoublePendulum.name] = ExactDoublePendulum
    try:
        yield LagrangianNetwork(2, kind=ExactDoublePendulum.name, hidden=(1,), angular=True, dtype="float64", xla=False)
    finally:
        del KINDS[ExactDoublePendulum.name]


@pytest.fixture
def exact_damped_model():
    KINDS[ExactDoublePendulum.name] = ExactDoublePendulum
    try:
        yield LagrangianNetwork(
            2, kind=ExactDoublePendulum.name, hidden=(1,), angular=True, dtype="float64", xla=False, damping=True
        )
    finally:
        del KINDS[ExactDoublePendulum.name]


def test_each_part_of_the_exact_lagrangian_is_the_true_part(exact_model):
    model, system = exact_model, PENDULUM
    q, qd, qdd = _states(32, seed=3)
    np.testing.assert_allclose(_np(model.mass_matrix(q, qd)), system.mass_matrix(q), rtol=1e-12, atol=1e-12)
    # gravity = dV/dq of the true potential, by central differences
    h = 1e-6
    grad = np.stack(
        [(system.potential_energy(q + h * e) - system.potential_energy(q - h * e)) / (2 * h) for e in np.eye(2)], -1
    )
    np.testing.assert_allclose(_np(model.gravity(q)), grad, rtol=1e-8, atol=1e-8)
    # the velocity terms: the bias force b(q, qd) = C(q, qd) qd + g(q) less gravity
    coriolis = system.bias_force(q, qd) - system.bias_force(q, np.zeros_like(qd))
    np.testing.assert_allclose(_np(model.coriolis(q, qd)), coriolis, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(_np(model.friction_torque(qd)), 0.0)
    np.testing.assert_allclose(
        _np(model.inverse_dynamics(q, qd, qdd)), system.inverse_dynamics(q, qd, qdd), rtol=1e-12, atol=1e-12
    )
    # and the figure's split of the model is the true system's
    mine, true = plot.torque_decomposition(model, q, qd, qdd), plot.torque_decomposition(system, q, qd, qdd)
    for part in ("inertial", "coriolis", "gravity", "friction", "total"):
        np.testing.assert_allclose(getattr(mine, part), getattr(true, part), rtol=1e-10, atol=1e-10)


def test_the_friction_torque_of_learned_damping_is_d_qd(exact_damped_model):
    model, system = exact_damped_model, PENDULUM
    q, qd, qdd = _states(8, seed=4)
    d = _np(model.damping_matrix())
    assert np.all(np.linalg.eigvalsh(d) > 0)
    np.testing.assert_allclose(_np(model.friction_torque(qd)), qd @ d.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        _np(model.inverse_dynamics(q, qd, qdd)), system.inverse_dynamics(q, qd, qdd) + qd @ d.T, rtol=1e-12, atol=1e-12
    )
    split = plot.torque_decomposition(model, q, qd, qdd)
    np.testing.assert_allclose(split.friction, qd @ d.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        split.inertial + split.coriolis + split.gravity + split.friction, split.total, rtol=1e-12, atol=1e-12
    )


# --------------------------------------------------------------------------- typed copies
@pytest.mark.parametrize("kind", NETWORK_KINDS)
def test_a_copy_in_another_dtype_has_the_same_configuration_and_cast_variables(kind):
    model = LagrangianNetwork(2, kind=kind, hidden=(8,), angular=(True, False), seed=0, damping=True, xla=False)
    q, qd, qdd = _states(64, seed=1)
    model.adapt(q, qd, qdd)
    copy = model.astype("float64")
    assert copy is not model and copy.dtype == "float64" and model.dtype == "float32"
    assert copy.get_config() == {**model.get_config(), "dtype": "float64"}
    assert len(copy.variables) == len(model.variables)
    for source, target in zip(model.variables, copy.variables):
        assert target.dtype == "float64" and source.dtype == "float32"
        np.testing.assert_array_equal(target.numpy(), source.numpy().astype(np.float64))


def test_a_float64_copy_computes_what_the_float32_model_does():
    kind = "kinetic-potential"
    model = LagrangianNetwork(2, kind=kind, hidden=(16, 16), angular=(True, False), seed=0, damping=True, xla=False)
    q, qd, qdd = _states(64, seed=1)
    model.adapt(q, qd, qdd)
    before = [v.numpy().copy() for v in model.variables]
    copy = model.astype("float64")
    assert copy is not model and copy.dtype == "float64" and model.dtype == "float32"
    assert copy.get_config() == {**model.get_config(), "dtype": "float64"}
    for source, target in zip(model.variables, copy.variables):
        assert target.dtype == "float64"
        np.testing.assert_array_equal(target.numpy(), source.numpy().astype(np.float64))
    for name in ("q_mean", "q_std", "qd_std", "qdd_std"):
        np.testing.assert_array_equal(getattr(copy, name).numpy(), getattr(model, name).numpy().astype(np.float64))
    # the same function, to float32 precision; the copy's ops run in float64
    for method, args in (
        ("acceleration", (q, qd)),
        ("inverse_dynamics", (q, qd, qdd)),
        ("mass_matrix", (q, qd)),
        ("energy", (q, qd)),
        ("gravity", (q,)),
    ):
        wide, narrow = getattr(copy, method)(*args), getattr(model, method)(*args)
        assert wide.dtype == tf.float64 and narrow.dtype == tf.float32
        scale = max(1.0, float(np.abs(_np(wide)).max()))
        np.testing.assert_allclose(_np(narrow), _np(wide), rtol=0, atol=2e-4 * scale)
    assert copy.numpy_acceleration(q, qd).dtype == np.float64
    # the original is unchanged, and a copy back to float32 is the original function exactly
    for kept, old in zip(model.variables, before):
        np.testing.assert_array_equal(kept.numpy(), old)
    back = copy.astype("float32")
    np.testing.assert_array_equal(_np(back.acceleration(q, qd)), _np(model.acceleration(q, qd)))
    with pytest.raises(ValueError, match="dtype"):
        model.astype("int32")
