"""lnn.mechanics: the Euler-Lagrange engine against exact Lagrangians (float64)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

from lnn import mechanics
from simulations import CartPole, DoublePendulum, PlanarArm

from conftest import random_states

TOL = 1e-10


# -- exact Lagrangians written in TensorFlow (independent of simulations/) ---------


def double_pendulum_energies(m1=1.3, m2=0.7, l1=1.1, l2=0.9, g=9.81):
    def kinetic(q, qd):
        c = tf.cos(q[:, 0] - q[:, 1])
        return (
            0.5 * (m1 + m2) * l1**2 * qd[:, 0] ** 2
            + 0.5 * m2 * l2**2 * qd[:, 1] ** 2
            + m2 * l1 * l2 * c * qd[:, 0] * qd[:, 1]
        )

    def potential(q):
        return -(m1 + m2) * g * l1 * tf.cos(q[:, 0]) - m2 * g * l2 * tf.cos(q[:, 1])

    return kinetic, potential, DoublePendulum(m1=m1, m2=m2, l1=l1, l2=l2, g=g)


def planar_arm_energies(masses, lengths, g=9.81):
    """Uniform rods, relative joint angles from the downward vertical.

    With absolute angles ``phi = cumsum(q)``, the centre of link ``i`` is
    ``sum_{j<i} l_j u(phi_j) + l_i/2 u(phi_i)`` with ``u = (sin, -cos)``, so
    ``T = 1/2 phid^T (A o cos(phi_j - phi_k)) phid`` with
    ``A_jk = sum_i m_i r_ij r_ik + delta_jk m_j l_j^2 / 12`` (``r_ij`` the lever
    of link ``j`` in the centre of ``i``) and ``V = -g sum_j b_j cos(phi_j)``,
    ``b_j = sum_i m_i r_ij``.
    """
    masses = np.asarray(masses, float)
    lengths = np.asarray(lengths, float)
    n = len(masses)
    lever = np.zeros((n, n))
    for i in range(n):
        lever[i, :i] = lengths[:i]
        lever[i, i] = 0.5 * lengths[i]
    a = np.einsum("i,ij,ik->jk", masses, lever, lever) + np.diag(masses * lengths**2 / 12.0)
    b = masses @ lever

    def kinetic(q, qd):
        phi = tf.cumsum(q, axis=1)
        phid = tf.cumsum(qd, axis=1)
        inertia = a * tf.cos(phi[:, :, None] - phi[:, None, :])
        return 0.5 * tf.einsum("bj,bjk,bk->b", phid, inertia, phid)

    def potential(q):
        return -g * tf.linalg.matvec(tf.cos(tf.cumsum(q, axis=1)), b)

    return kinetic, potential, PlanarArm(masses=tuple(masses), lengths=tuple(lengths), g=g)


def cart_pole_energies(cart_mass=1.2, pole_mass=0.3, pole_length=0.8, g=9.81):
    a = 0.5 * pole_length
    inertia = pole_mass * pole_length**2 / 3.0

    def kinetic(q, qd):
        return (
            0.5 * (cart_mass + pole_mass) * qd[:, 0] ** 2
            + pole_mass * a * tf.cos(q[:, 1]) * qd[:, 0] * qd[:, 1]
            + 0.5 * inertia * qd[:, 1] ** 2
        )

    def potential(q):
        return -pole_mass * g * a * tf.cos(q[:, 1])

    return kinetic, potential, CartPole(cart_mass=cart_mass, pole_mass=pole_mass, pole_length=pole_length, g=g)


SYSTEMS = {
    "double-pendulum": double_pendulum_energies,
    "arm-2": lambda: planar_arm_energies([1.0, 0.8], [1.0, 0.7]),
    "arm-3": lambda: planar_arm_energies([1.2, 0.9, 0.5], [0.8, 0.6, 0.4]),
    "cart-pole": cart_pole_energies,
}


def _states(n, batch=16, seed=0):
    return random_states(n, batch, seed, angles=True, scales=(1.0, 1.5, 2.0))


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_exact_systems_reproduce_ground_truth(name):
    kinetic, potential, system = SYSTEMS[name]()
    lag = mechanics.separable(kinetic, potential)
    q, qd, tau = _states(system.n_dof)
    m = mechanics.mass_matrix(lag, q, qd)
    assert m.dtype == tf.float64
    np.testing.assert_allclose(m.numpy(), system.mass_matrix(q), rtol=0, atol=TOL)
    qdd = mechanics.acceleration(lag, q, qd, tau).numpy()
    np.testing.assert_allclose(qdd, system.acceleration(q, qd, tau), rtol=0, atol=TOL)
    tau_back = mechanics.inverse_dynamics(lag, q, qd, qdd).numpy()
    np.testing.assert_allclose(tau_back, system.inverse_dynamics(q, qd, qdd), rtol=0, atol=TOL)
    np.testing.assert_allclose(tau_back, tau, rtol=0, atol=TOL)
    np.testing.assert_allclose(mechanics.energy(lag, q, qd).numpy(), system.energy(q, qd), rtol=0, atol=TOL)


@pytest.mark.parametrize("name", ["double-pendulum", "arm-3"])
def test_plain_callable_and_forward_over_reverse_agree(name):
    kinetic, potential, system = SYSTEMS[name]()

    def lag(q, qd):
        return kinetic(q, qd) - potential(q)

    q, qd, tau = _states(system.n_dof, seed=3)
    m = mechanics.mass_matrix(lag, q, qd, method="forward-over-reverse")
    np.testing.assert_allclose(m.numpy(), system.mass_matrix(q), rtol=0, atol=TOL)
    qdd = mechanics.acceleration(lag, q, qd, tau, method="forward-over-reverse")
    np.testing.assert_allclose(qdd.numpy(), system.acceleration(q, qd, tau), rtol=0, atol=TOL)


def test_power_balance_of_exact_dynamics():
    kinetic, potential, system = SYSTEMS["arm-3"]()
    lag = mechanics.separable(kinetic, potential)
    q, qd, tau = _states(3, batch=32, seed=4)
    qdd = system.acceleration(q, qd, tau)
    balance = mechanics.power_balance(lag, q, qd, qdd, tau)
    np.testing.assert_allclose(balance.energy_rate, np.sum(qd * tau, axis=1), atol=1e-9)
    assert np.max(np.abs(balance.residual)) < 1e-9
    # A wrong acceleration breaks the balance: the check is informative.
    off = mechanics.power_balance(lag, q, qd, qdd + 0.1, tau)
    assert np.min(np.abs(off.residual)) > 0


def test_energy_rate_matches_finite_difference_along_flow():
    kinetic, potential, system = SYSTEMS["double-pendulum"]()
    lag = mechanics.separable(kinetic, potential)
    q, qd, tau = _states(2, batch=8, seed=2)
    qdd = system.acceleration(q, qd, tau)
    h = 1e-5
    e_plus = system.energy(q + h * qd, qd + h * qdd)
    e_minus = system.energy(q - h * qd, qd - h * qdd)
    np.testing.assert_allclose(
        mechanics.energy_rate(lag, q, qd, qdd).numpy(), (e_plus - e_minus) / (2 * h), rtol=1e-6, atol=1e-6
    )


def test_mixed_term_is_a_jacobian_vector_product():
    """(d2L/dqd dq) qd from the engine equals the full mixed block times qd."""
    kinetic, potential, _ = SYSTEMS["arm-3"]()
    q, qd, _ = _states(3, batch=5, seed=7)
    q, qd = tf.constant(q), tf.constant(qd)
    with tf.GradientTape() as outer:
        outer.watch(q)
        with tf.GradientTape() as inner:
            inner.watch(qd)
            value = kinetic(q, qd)
        p = inner.gradient(value, qd)
    block = outer.batch_jacobian(p, q).numpy()  # (B, n, n): d p_i / d q_j
    lag = mechanics.separable(kinetic, potential)
    m = mechanics.mass_matrix(lag, q, qd).numpy()
    # M qdd = dL/dq - mixed  (tau = 0)  ->  mixed = dL/dq - M qdd
    qdd = mechanics.acceleration(lag, q, qd).numpy()
    with tf.GradientTape() as tape:
        tape.watch(q)
        value = lag(q, qd)
    grad_q = tape.gradient(value, q).numpy()
    mixed = grad_q - np.einsum("bij,bj->bi", m, qdd)
    np.testing.assert_allclose(mixed, np.einsum("bij,bj->bi", block, qd.numpy()), atol=1e-10)


def test_tracing_count_stays_one_across_batch_sizes():
    kinetic, potential, _ = SYSTEMS["cart-pole"]()
    lag = mechanics.separable(kinetic, potential)
    rng = np.random.default_rng(1)
    for batch in (1, 7, 1024, 1):
        q, qd = rng.normal(size=(batch, 2)), rng.normal(size=(batch, 2))
        mechanics.mass_matrix(lag, q, qd)
        mechanics.acceleration(lag, q, qd)
        mechanics.acceleration(lag, q, qd, rng.normal(size=(batch, 2)))
        mechanics.energy(lag, q, qd)
    for op in ("mass_matrix", "acceleration", "energy"):
        assert mechanics.tracing_count(lag, op, dtype="float64", n_dof=2) == 1
    # A float32 call is a separate function, traced once too.
    mechanics.mass_matrix(lag, np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32))
    assert mechanics.tracing_count(lag, "mass_matrix", dtype="float32", n_dof=2) == 1


def test_float32_inputs_give_float32_results():
    kinetic, potential, system = SYSTEMS["double-pendulum"]()
    lag = mechanics.separable(kinetic, potential)
    q, qd, _ = _states(2, batch=4)
    qdd = mechanics.acceleration(lag, q.astype(np.float32), qd.astype(np.float32))
    assert qdd.dtype == tf.float32
    np.testing.assert_allclose(qdd.numpy(), system.acceleration(q, qd), rtol=1e-3, atol=1e-3)


def test_single_state_and_symbolic_inputs():
    kinetic, potential, system = SYSTEMS["double-pendulum"]()
    lag = mechanics.separable(kinetic, potential)
    q, qd, _ = _states(2, batch=3)
    single = mechanics.acceleration(lag, q[0], qd[0])
    assert single.shape == (2,)
    np.testing.assert_allclose(single.numpy(), system.acceleration(q[0], qd[0]), atol=1e-10)

    @tf.function(input_signature=[tf.TensorSpec((None, 2), tf.float64)] * 2, autograph=False)
    def inside(a, b):
        return mechanics.acceleration(lag, a, b)

    np.testing.assert_allclose(inside(q, qd).numpy(), system.acceleration(q, qd), atol=1e-10)


def test_mass_matrix_health_report():
    good = np.array([[2.0, 0.0], [0.0, 0.5]])
    bad = np.array([[1.0, 0.0], [0.0, -0.25]])
    health = mechanics.mass_matrix_health(np.stack([good, good, good, bad]))
    assert health.n_samples == 4
    assert health.min_eigenvalue == pytest.approx(-0.25)
    assert health.max_eigenvalue == pytest.approx(2.0)
    assert health.fraction_not_positive_definite == pytest.approx(0.25)
    assert health.condition_number == np.inf
    assert health.median_condition_number == pytest.approx(4.0)
    np.testing.assert_allclose(health.condition_numbers[:3], 4.0)
    assert not health.positive_definite
    assert mechanics.mass_matrix_health(good).positive_definite
    with pytest.raises(ValueError, match="shape"):
        mechanics.mass_matrix_health(np.zeros((3, 2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        mechanics.mass_matrix_health(np.full((1, 2, 2), np.nan))


# -- bad input ---------------------------------------------------------------------------


def _indefinite(q, qd):
    """L with M = diag(1, -1) in 1 of ... samples: sign flips with q[:, 0]."""
    sign = tf.sign(q[:, 0])
    return 0.5 * qd[:, 0] ** 2 + 0.5 * sign * qd[:, 1] ** 2


def test_indefinite_mass_matrix_raises_with_count_and_eigenvalue():
    q = np.array([[1.0, 0.0], [-1.0, 0.0], [2.0, 0.0], [-3.0, 0.0]])
    qd = np.ones((4, 2))
    with pytest.raises(
        mechanics.MassMatrixError, match=r"not positive definite for 2 of 4 samples \(smallest eigenvalue -1"
    ) as caught:
        mechanics.acceleration(_indefinite, q, qd)
    assert caught.value.health.fraction_not_positive_definite == 0.5
    np.testing.assert_allclose(caught.value.health.min_eigenvalue, -1.0, atol=1e-12)
    assert issubclass(mechanics.MassMatrixError, ValueError)


def test_explicit_regularization_of_a_singular_mass_matrix():
    def singular(q, qd):  # M = diag(1, 0)
        return 0.5 * qd[:, 0] ** 2 - tf.cos(q[:, 0]) - 0.5 * q[:, 1] ** 2

    q, qd = np.array([[0.3, 0.2]]), np.array([[0.1, 0.0]])
    with pytest.raises(mechanics.MassMatrixError, match="not positive definite"):
        mechanics.acceleration(singular, q, qd)
    qdd = mechanics.acceleration(singular, q, qd, regularize=0.5).numpy()
    np.testing.assert_allclose(qdd, [[np.sin(0.3) / 1.5, -0.2 / 0.5]], atol=1e-12)


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.zeros((3, 2)), np.zeros((3, 3))), "qd must have n_dof = 2 columns"),
        ((np.zeros((3, 2)), np.zeros((4, 2))), "batch size 4 but q has batch size 3"),
        ((np.zeros((1, 2)), np.zeros(2)), "pass both as"),
        ((np.zeros((3, 2, 1)), np.zeros((3, 2))), r"q must have shape \(B, n\)"),
        ((np.array([[np.nan, 0.0]]), np.zeros((1, 2))), "q contains NaN"),
        ((np.zeros((1, 2)), np.array([[0.0, np.inf]])), "qd contains NaN or infinite"),
    ],
)
def test_bad_inputs_raise_clearly(args, message):
    kinetic, potential, _ = SYSTEMS["double-pendulum"]()
    lag = mechanics.separable(kinetic, potential)
    with pytest.raises(ValueError, match=message):
        mechanics.acceleration(lag, *args)


def test_bad_arguments_raise_clearly():
    q = np.zeros((1, 2))
    with pytest.raises(TypeError, match="lagrangian must be a callable"):
        mechanics.mass_matrix(3.0, q, q)
    with pytest.raises(ValueError, match="method must be one of"):
        mechanics.mass_matrix(_indefinite, q, q, method="pinv")
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        mechanics.energy(_indefinite, q, q, dtype="int32")
    with pytest.raises(ValueError, match="tau must have the shape"):
        mechanics.power_balance(_indefinite, q + 1, q, q, np.zeros((1, 3)))
    with pytest.raises(TypeError, match="kinetic and potential must be callables"):
        mechanics.separable(None, _indefinite)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_unrolled_cholesky_under_xla_equals_tensorflow_solve(n):
    rng = np.random.default_rng(n)
    a = rng.normal(size=(5, n, n))
    m = tf.constant(a @ np.swapaxes(a, 1, 2) + n * np.eye(n))
    rhs = tf.constant(rng.normal(size=(5, n)))
    reference = np.linalg.solve(m.numpy(), rhs.numpy()[..., None])[..., 0]
    xla = tf.function(mechanics.solve_cholesky, jit_compile=True, autograph=False)
    np.testing.assert_allclose(xla(m, rhs).numpy(), reference, rtol=1e-12, atol=1e-12)
    # Outside XLA the same function runs TensorFlow's kernel.
    np.testing.assert_allclose(mechanics.solve_cholesky(m, rhs).numpy(), reference, rtol=1e-12)


def test_unrolled_cholesky_gives_nan_for_an_indefinite_matrix():
    m = tf.constant([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 1.0]]], tf.float64)
    rhs = tf.ones((2, 2), tf.float64)
    out = tf.function(mechanics.solve_cholesky, jit_compile=True, autograph=False)(m, rhs).numpy()
    assert np.all(np.isfinite(out[0])) and np.all(np.isnan(out[1]))


def test_fast_caller_raises_tensorflows_errors_and_returns_structures():
    spec = [tf.TensorSpec((None, 2, 2), tf.float64)]
    checked = mechanics.fast_caller(
        tf.function(
            lambda x: tf.sqrt(tf.debugging.check_numerics(x, "x has NaN")), input_signature=spec
        ).get_concrete_function()
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="x has NaN"):
        checked(tf.constant([[[1.0, np.nan], [2.0, 1.0]]], tf.float64))
    ok = tf.constant([[[4.0, 0.0], [0.0, 9.0]]], tf.float64)
    np.testing.assert_allclose(checked(ok).numpy(), [[[2.0, 0.0], [0.0, 3.0]]])

    def pair(x):
        return {"sum": tf.reduce_sum(x, axis=(1, 2)), "twice": (2.0 * x,)}

    call = mechanics.fast_caller(tf.function(pair, input_signature=spec).get_concrete_function())
    out = call(ok)
    assert set(out) == {"sum", "twice"} and isinstance(out["twice"], tuple)
    np.testing.assert_allclose(out["sum"].numpy(), [13.0])
    np.testing.assert_allclose(out["twice"][0].numpy(), 2.0 * ok.numpy())


def test_fast_caller_keeps_gradients_when_a_tape_records():
    w = tf.Variable([[2.0, 0.5], [0.0, 1.0]], dtype=tf.float64)

    def body(x):
        return tf.matmul(x, w) ** 2

    spec = [tf.TensorSpec((None, 2), tf.float64)]
    call = mechanics.fast_caller(tf.function(body, input_signature=spec).get_concrete_function())
    x = tf.constant([[1.0, 2.0], [3.0, -1.0]], tf.float64)
    np.testing.assert_allclose(call(x).numpy(), body(x).numpy())
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(call(x))
    with tf.GradientTape() as reference_tape:
        y_ref = tf.reduce_sum(body(x))
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), reference_tape.gradient(y_ref, w).numpy())
    w.assign(w * 2.0)  # variables are captured by reference, not copied
    np.testing.assert_allclose(call(x).numpy(), body(x).numpy())


# -- batch buckets (XLA compiles once per shape) ---------------------------------


def test_batch_bucket_is_a_short_ladder_with_bounded_padding():
    assert [mechanics.batch_bucket(b) for b in range(11)] == [0, 1, 2, 3, 4, 6, 6, 8, 8, 12, 12]
    sizes = {mechanics.batch_bucket(b) for b in range(1, 4097)}
    assert len(sizes) <= 2 * 12 + 1  # about 2 log2(4096) compilations
    for b in range(1, 4097):
        size = mechanics.batch_bucket(b)
        assert b <= size <= 1.5 * b
        assert mechanics.batch_bucket(size) == size  # sizes on the ladder are not padded
    assert mechanics.batch_bucket(1024) == 1024 and mechanics.batch_bucket(1000) == 1024


def test_xla_form_pads_with_row_zero_cuts_the_outputs_and_passes_gradients():
    """lnn.models.compiled: a recurring size runs padded to the ladder, cut back, differentiable."""
    from lnn.models.compiled import XLA_AFTER_CALLS, CompiledOp, wait

    def body(x):
        q, qd = x[:, :3], x[:, 3:]
        return {"sum": q + 2.0 * qd, "first": q[:, :1] * qd[:, :1]}

    op = CompiledOp(body, width=6, dtype=tf.float64, xla=True)
    rng = np.random.default_rng(0)
    q, qd = (tf.constant(rng.normal(size=(5, 3))) for _ in range(2))
    x = tf.concat([q, qd], axis=1)
    for _ in range(XLA_AFTER_CALLS):  # graph mode while the size is new
        graph = op(x.numpy())
    wait()
    assert op.ready == {6}  # 5 rows run as 6 under XLA
    out = op(x.numpy())
    np.testing.assert_array_equal(out["sum"].numpy(), (q + 2.0 * qd).numpy())
    np.testing.assert_array_equal(out["first"].numpy(), graph["first"].numpy())
    assert out["first"].shape == (5, 1)
    with tf.GradientTape() as tape:  # under a tape the padding and the cut are TensorFlow ops
        tape.watch(x)
        total = tf.reduce_sum(op(x)["sum"] ** 2)
    grad = tape.gradient(total, x).numpy()
    np.testing.assert_allclose(grad[:, :3], (2 * (q + 2.0 * qd)).numpy())
    np.testing.assert_allclose(grad[:, 3:], (4 * (q + 2.0 * qd)).numpy())


# -- the public calls' hot path: inputs packed side by side ---------------------------


def test_packed_plain_accepts_only_finite_batches_of_one_shape_and_dtype():
    f64 = np.dtype("float64")
    q, qd = np.arange(6.0).reshape(3, 2), np.ones((3, 2))
    np.testing.assert_array_equal(mechanics.packed_plain([q, qd], f64, tf.float64, 2), np.concatenate([q, qd], axis=1))
    eager = tf.constant(qd)  # eager tensors pass through their numpy view (no tape)
    if mechanics.tape_may_record():  # LNN_PUBLIC_TF=1: no public way to know, so tensors stay tensors
        assert mechanics.packed_plain([q, eager], f64, tf.float64, 2) is None
    else:
        np.testing.assert_array_equal(
            mechanics.packed_plain([q, eager], f64, tf.float64, 2), np.concatenate([q, qd], axis=1)
        )
    with tf.GradientTape():  # under a tape tensors must stay tensors (gradients)
        assert mechanics.packed_plain([q, eager], f64, tf.float64, 2) is None
    bad = [
        [q, qd[:2]],  # batch sizes differ
        [q[:, :1], qd[:, :1]],  # wrong n
        [q[0], qd[0]],  # single states: the full checks handle them
        [q.astype(np.float32), qd],  # another dtype
        [q.tolist(), qd],
    ]  # not an array
    for values in bad:
        assert mechanics.packed_plain(values, f64, tf.float64, 2) is None
    for value in (np.nan, np.inf, -np.inf):
        for rows in (3, 100):  # the Python sum check (small) and numpy's (large)
            x = np.ones((rows, 2))
            x[rows - 1, 1] = value
            assert mechanics.packed_plain([x, np.ones((rows, 2))], f64, tf.float64, 2) is None


def test_all_finite_is_exact_when_the_sum_overflows():
    assert mechanics._all_finite(np.full((1, 4), 1e308))  # sum overflows, entries finite
    assert not mechanics._all_finite(np.array([[1.0, np.nan]]))
    assert not mechanics._all_finite(np.array([[np.inf, -np.inf]]))  # sum is nan
    assert mechanics._all_finite(np.zeros((0, 3)))


def test_pack_columns_keeps_gradients_under_a_tape():
    q, qd = tf.constant([[1.0, 2.0]]), tf.constant([[3.0, 4.0]])
    np.testing.assert_array_equal(mechanics.pack_columns([q, qd], tf.float32).numpy(), [[1.0, 2.0, 3.0, 4.0]])
    with tf.GradientTape() as tape:
        tape.watch(qd)
        total = tf.reduce_sum(mechanics.pack_columns([q, qd], tf.float32) ** 2)
    np.testing.assert_array_equal(tape.gradient(total, qd).numpy(), 2 * qd.numpy())


def test_the_compiled_function_cache_is_bounded_and_keeps_the_recently_used(monkeypatch):
    """Callables that cannot be weakly referenced stay alive in the cache: its size is what bounds it."""
    monkeypatch.setattr(mechanics, "CACHE_SIZE", 3)
    monkeypatch.setattr(mechanics, "_CACHE", type(mechanics._CACHE)())

    class Lagrangian:  # __slots__ without __weakref__: not weakly referenceable
        __slots__ = ("k",)

        def __init__(self, k):
            self.k = k

        def __call__(self, q, qd):
            return 0.5 * self.k * tf.reduce_sum(qd**2, axis=1) - 0.5 * tf.reduce_sum(q**2, axis=1)

    q, qd = np.array([[0.3, -0.2]]), np.array([[0.1, 0.4]])
    springs = [Lagrangian(k) for k in (1.0, 2.0, 3.0, 4.0)]
    for spring in springs[:3]:
        np.testing.assert_allclose(mechanics.acceleration(spring, q, qd).numpy(), -q / spring.k, rtol=1e-12)
    assert len(mechanics._CACHE) == 3
    mechanics.acceleration(springs[0], q, qd)  # used again: the most recent now
    np.testing.assert_allclose(mechanics.acceleration(springs[3], q, qd).numpy(), -q / 4.0, rtol=1e-12)
    assert len(mechanics._CACHE) == 3
    count = functools.partial(mechanics.tracing_count, op="acceleration", dtype="float64", n_dof=2)
    assert [count(s) for s in springs] == [1, 0, 1, 1]  # the least recently used (k = 2) was dropped
    np.testing.assert_allclose(mechanics.acceleration(springs[1], q, qd).numpy(), -q / 2.0, rtol=1e-12)
    assert count(springs[1]) == 1 and len(mechanics._CACHE) == 3
