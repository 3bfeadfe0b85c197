"""The one torque rule (lnn._torque): its numpy and TensorFlow evaluations agree."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from lnn import _torque
from lnn._torque import NumpyTorque

B, N = 3, 2
T_GRID = np.array([0.0, 0.3, 0.7, 1.2, 2.0])  # non-uniform on purpose
RNG = np.random.default_rng(11)
Q = RNG.normal(size=(B, N))
QD = RNG.normal(size=(B, N))
SAMPLES = RNG.normal(size=(B, T_GRID.shape[0], N))


def _tensor_force(tau, k, *, hold):
    """The TensorFlow force of interval ``k`` of the grid, from ``tau`` as odeint receives it."""
    t = tf.constant(T_GRID)
    samples, checks = _torque.tensor_samples(
        tau, n=N, n_t=T_GRID.shape[0], batch=B, dtype=tf.float64, t=t, q0=tf.constant(Q)
    )
    assert checks == []
    tau_t = tf.transpose(samples, [1, 0, 2])
    return _torque.interval_force(None, tau_t[k], tau_t[k + 1], t[k], t[k + 1], dtype=tf.float64, hold=hold)


def _times(k):
    """Times across interval ``k``, both ends included."""
    return np.linspace(T_GRID[k], T_GRID[k + 1], 7)


@pytest.mark.parametrize("interpolation", ["linear", "hold"])
@pytest.mark.parametrize("layout", ["(B, T, n)", "(1, T, n)", "(T, n)"])
def test_numpy_and_tensorflow_interpolation_agree_on_the_same_samples(interpolation, layout):
    tau = {"(B, T, n)": SAMPLES, "(1, T, n)": SAMPLES[:1], "(T, n)": SAMPLES[0]}[layout]
    hold = interpolation == "hold"
    numpy_torque = NumpyTorque.build(tau, T_GRID, batch=B, n=N, interpolation=interpolation)
    broadcast = np.broadcast_to(tau if np.ndim(tau) == 3 else tau[None], SAMPLES.shape)
    for k in range(T_GRID.shape[0] - 1):
        tensor_force = _tensor_force(tau, k, hold=hold)
        for s in _times(k):
            by_numpy = numpy_torque(float(s), Q, QD)
            by_tensor = tensor_force(tf.constant(s, tf.float64), tf.constant(Q), tf.constant(QD)).numpy()
            assert by_numpy.shape == by_tensor.shape == (B, N)
            np.testing.assert_allclose(by_tensor, by_numpy, rtol=0, atol=1e-15)
            # The closed form of the rule.
            if hold:
                expected = broadcast[:, k + 1 if s >= T_GRID[k + 1] else k]
            else:
                w = (s - T_GRID[k]) / (T_GRID[k + 1] - T_GRID[k])
                expected = (1 - w) * broadcast[:, k] + w * broadcast[:, k + 1]
            np.testing.assert_allclose(by_numpy, expected, rtol=0, atol=1e-15)


def test_outside_the_grid_the_end_intervals_are_used():
    linear = NumpyTorque.build(SAMPLES, T_GRID, batch=B, n=N)
    held = NumpyTorque.build(SAMPLES, T_GRID, batch=B, n=N, interpolation="hold")
    np.testing.assert_array_equal(held(-1.0, Q, QD), SAMPLES[:, 0])
    np.testing.assert_array_equal(held(5.0, Q, QD), SAMPLES[:, -1])
    w = (5.0 - T_GRID[-2]) / (T_GRID[-1] - T_GRID[-2])  # the last interval, extended
    np.testing.assert_allclose(linear(5.0, Q, QD), (1 - w) * SAMPLES[:, -2] + w * SAMPLES[:, -1])


@pytest.mark.parametrize("returns", ["(B, n)", "(n,)"])
def test_numpy_and_tensorflow_controllers_agree(returns):
    """One controller, written with operators that numpy arrays and tensors share."""
    if returns == "(B, n)":

        def controller(s, q, qd):
            return s * q - 0.5 * qd
    else:
        direction = np.array([1.0, -2.0])

        def controller(s, q, qd):
            return direction * s

    numpy_torque = NumpyTorque.build(controller, T_GRID, batch=B, n=N)
    tensor_force = _torque.interval_force(controller, None, None, None, None, dtype=tf.float64)
    for s in np.linspace(0.0, 2.0, 9):
        np.testing.assert_allclose(
            tensor_force(tf.constant(s, tf.float64), tf.constant(Q), tf.constant(QD)).numpy(),
            numpy_torque(float(s), Q, QD),
            rtol=0,
            atol=1e-15,
        )

    # At the samples, for paths q, qd: numpy (B, T, n) and TensorFlow time-major (T, B, n).
    q_path = RNG.normal(size=(B, T_GRID.shape[0], N))
    qd_path = RNG.normal(size=(B, T_GRID.shape[0], N))
    by_tensor = _torque.tensor_at_samples(
        controller,
        tf.constant(T_GRID),
        tf.constant(q_path.transpose(1, 0, 2)),
        tf.constant(qd_path.transpose(1, 0, 2)),
        None,
        dtype=tf.float64,
    ).numpy()
    np.testing.assert_allclose(
        by_tensor.transpose(1, 0, 2), numpy_torque.at_samples(q_path, qd_path), rtol=0, atol=1e-15
    )


def test_samples_at_the_samples_agree():
    numpy_torque = NumpyTorque.build(SAMPLES[0], T_GRID, batch=B, n=N)
    zeros = np.zeros((T_GRID.shape[0], B, N))
    by_tensor = _torque.tensor_at_samples(
        None,
        tf.constant(T_GRID),
        tf.constant(zeros),
        tf.constant(zeros),
        tf.constant(SAMPLES[:1].transpose(1, 0, 2)),
        dtype=tf.float64,
    ).numpy()
    np.testing.assert_array_equal(
        by_tensor.transpose(1, 0, 2), numpy_torque.at_samples(zeros.transpose(1, 0, 2), zeros.transpose(1, 0, 2))
    )
    unforced = NumpyTorque.build(None, T_GRID, batch=B, n=N)
    assert unforced.is_none and unforced(0.5, Q, QD) is None
    np.testing.assert_array_equal(unforced.at_samples(zeros, zeros), 0.0)


@pytest.mark.parametrize("shape", [(4, N), (2, T_GRID.shape[0], N), (T_GRID.shape[0], 3), (N,)])
def test_both_sides_refuse_the_same_shapes_with_the_same_message(shape):
    tau = np.zeros(shape)
    with pytest.raises(ValueError, match=r"tau must have shape \(T, n\) = \(5, 2\)") as by_numpy:
        NumpyTorque.build(tau, T_GRID, batch=B, n=N)
    with pytest.raises(ValueError) as by_tensor:
        _torque.tensor_samples(
            tau, n=N, n_t=T_GRID.shape[0], batch=B, dtype=tf.float64, t=tf.constant(T_GRID), q0=tf.constant(Q)
        )
    assert str(by_numpy.value) == str(by_tensor.value)
    assert f"got shape {shape}" in str(by_numpy.value)


def test_numpy_side_refuses_non_finite_samples_and_bad_controller_output():
    bad = SAMPLES.copy()
    bad[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match="tau has non-finite values"):
        NumpyTorque.build(bad, T_GRID, batch=B, n=N)
    with pytest.raises(TypeError, match="tau must be None, an array"):
        NumpyTorque.build({"not": "numbers"}, T_GRID, batch=B, n=N)
    with pytest.raises(ValueError, match="tau_interpolation must be one of"):
        NumpyTorque.build(SAMPLES, T_GRID, batch=B, n=N, interpolation="cubic")
    torque = NumpyTorque.build(lambda s, q, qd: np.zeros(3), T_GRID, batch=B, n=N)
    with pytest.raises(ValueError, match=r"controller.*\(3, 2\) or \(2,\); got shape \(3,\)"):
        torque(0.0, Q, QD)
