"""A failing trajectory does not take the batch with it: masks, failure records, per-sample
evaluations, and per-trajectory error control of the scipy path. float64, fixed seeds."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import lnn
from lnn.integrate import Failure, IntegrationError, evaluate_masked, rollout
from lnn.trajectory import Trajectory

K = np.array([[5.0, -1.0], [-1.0, 3.0]])


class Indefinite:
    """Coupled oscillators whose "mass matrix" stops being positive definite where ``q_0 > 0.5``.

    The numpy acceleration raises like :class:`lnn.fast.IndefiniteMassMatrixError`
    (a ``ValueError`` with the failing rows in ``trajectories``).
    """

    n_dof, angular = 2, (False, False)

    def acceleration(self, q, qd, tau=None):
        q = np.asarray(q)
        bad = np.flatnonzero(q[:, 0] > 0.5)
        if bad.size:
            error = np.linalg.LinAlgError(f"mass matrix not positive definite in rows {bad}")
            error.trajectories = tuple(bad)
            raise error
        return -q @ K

    def energy(self, q, qd):
        return 0.5 * np.sum(np.asarray(qd) ** 2, axis=-1)


class TFIndefinite:
    """The same in TensorFlow: NaN accelerations where ``q_0 > 0.5`` (what an indefinite
    learned ``M`` gives under the compiled integrators' unrolled Cholesky)."""

    n_dof, angular, dtype = 2, (False, False), "float64"

    def acceleration(self, q, qd, tau=None):
        q = tf.convert_to_tensor(q, tf.float64)
        qdd = -tf.matmul(q, tf.constant(K))
        return tf.where(q[:, :1] > 0.5, tf.constant(np.nan, tf.float64), qdd)

    def energy(self, q, qd):
        return 0.5 * tf.reduce_sum(tf.convert_to_tensor(qd, tf.float64) ** 2, axis=-1)


Q0 = np.zeros((4, 2))
QD0 = np.array([[0.1, 0.0], [0.2, 0.1], [3.0, 0.0], [0.0, 0.3]])  # only trajectory 2 fails
T = np.linspace(0.0, 3.0, 31)


@pytest.mark.parametrize(
    ("system", "method", "tol"),
    [
        (Indefinite(), "DOP853", 1e-6),
        (Indefinite(), "RK45", 1e-6),
        (Indefinite(), "Radau", 1e-6),
        (TFIndefinite(), "dopri5", 1e-12),
        (TFIndefinite(), "dopri8", 1e-12),
    ],
)
def test_masked_rollout_keeps_the_others_equal_to_their_solo_rollouts(system, method, tol):
    result = rollout(system, Q0, QD0, T, method=method, rtol=1e-9, atol=1e-11, on_failure="mask")
    assert result.failed.tolist() == [False, False, True, False]
    assert 0.1 < result.failed_at[2] < 0.5
    assert np.isnan(result.failed_at[[0, 1, 3]]).all()
    (failure,) = result.failures
    assert isinstance(failure, Failure) and failure.index == 2
    assert failure.time == result.failed_at[2] and failure.reason
    # The failed trajectory: valid samples before its failure, NaN after.
    before, after = T < result.failed_at[2] - 0.1, T > result.failed_at[2]
    assert np.isfinite(result.q[2, before]).all() and np.isnan(result.q[2, after]).all()
    assert np.isnan(result.qdd[2, after]).all() and np.isnan(result.energy[2, after]).all()
    for b in (0, 1, 3):
        solo = rollout(system, Q0[b : b + 1], QD0[b : b + 1], T, method=method, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(result.q[b], solo.q[0], atol=tol, rtol=0)
        np.testing.assert_allclose(result.qdd[b], solo.qdd[0], atol=100 * tol, rtol=0)


@pytest.mark.parametrize(("system", "method"), [(Indefinite(), "DOP853"), (TFIndefinite(), "tsit5")])
def test_raise_names_every_failed_trajectory_with_its_time_and_reason(system, method):
    qd0 = QD0.copy()
    qd0[0, 0] = 2.0  # trajectory 0 fails too
    with pytest.raises(IntegrationError) as info:
        rollout(system, Q0, qd0, T, method=method)
    error = info.value
    assert isinstance(error, RuntimeError)
    assert error.trajectories == (0, 2) and [f.index for f in error.failures] == [0, 2]
    message = str(error)
    assert "2 of 4 trajectory(ies) [0, 2] failed" in message
    assert "trajectory 0 at t = " in message and "trajectory 2 at t = " in message
    assert error.time == min(f.time for f in error.failures) > 0
    assert error.trajectory is not None and error.trajectory.failed.tolist() == [True, False, True, False]
    if method == "DOP853":
        assert "not positive definite" in message
        assert isinstance(error.__cause__, np.linalg.LinAlgError)
    else:
        assert "non-finite" in message


def test_a_failing_initial_state_fails_at_the_start():
    q0 = np.array([[0.0, 0.0], [1.0, 0.0]])
    result = rollout(Indefinite(), q0, np.zeros((2, 2)), T, on_failure="mask")
    assert result.failed.tolist() == [False, True] and result.failed_at[1] == 0.0
    assert np.isnan(result.q[1, 1:]).all() and np.isfinite(result.q[0]).all()


def test_a_learned_model_s_batch_evaluations_are_masked_per_sample():
    """numpy_acceleration, evaluate_masked and the metrics keep the samples with a good M."""
    model = lnn.LagrangianNetwork(
        2, kind="kinetic-potential", hidden=(16, 16), activation="tanh", convex_init=False, dtype="float64", seed=1
    )
    rng = np.random.default_rng(0)
    q, qd = rng.normal(size=(400, 2)) * 2, rng.normal(size=(400, 2)) * 3
    eigenvalues = np.linalg.eigvalsh(np.asarray(model.mass_matrix(q, qd)))[:, 0]
    bad = eigenvalues <= 0
    assert 0 < bad.sum() < 400  # an indefinite learned M at some of the states
    snapshot = model.numpy_snapshot()
    with pytest.raises(lnn.fast.IndefiniteMassMatrixError) as info:
        snapshot.acceleration(q, qd)
    assert set(info.value.trajectories) == set(np.flatnonzero(bad))
    masked = snapshot.acceleration(q, qd, on_failure="mask")
    assert np.isnan(masked[bad]).all() and np.isfinite(masked[~bad]).all()
    np.testing.assert_allclose(masked[~bad], snapshot.acceleration(q[~bad], qd[~bad]), rtol=1e-12)
    evaluation = evaluate_masked(snapshot.acceleration, q, qd)
    assert evaluation.failed.tolist() == bad.tolist() and evaluation.n_failed == bad.sum()
    assert "not positive definite" in evaluation.reasons[int(np.flatnonzero(bad)[0])]
    np.testing.assert_allclose(evaluation.values[~bad], masked[~bad], rtol=1e-12)
    from lnn.metrics import masked_acceleration

    by_model = masked_acceleration(model, q, qd)
    assert by_model.failed.tolist() == bad.tolist()
    with pytest.raises(ValueError, match="on_failure must be one of"):
        snapshot.acceleration(q, qd, on_failure="nan")


def test_evaluate_masked_finds_rows_without_a_record():
    def fn(q, qd, tau):
        if np.any(q[:, 0] > 1):
            raise ValueError("refused")  # no rows named: found one by one
        return -q

    q = np.array([[0.0, 0.0], [2.0, 0.0], [0.5, 0.0]])
    result = evaluate_masked(fn, q, q)
    assert result.failed.tolist() == [False, True, False]
    np.testing.assert_allclose(result.values[[0, 2]], -q[[0, 2]])
    assert result.reasons == {1: "refused"}


def test_failed_at_follows_indexing_cutting_and_files(tmp_path):
    result = rollout(Indefinite(), Q0, QD0, T, on_failure="mask")
    sub = result[[2, 3]]
    assert sub.failed.tolist() == [True, False]
    assert [f.index for f in sub.failures] == [0]
    assert result[0].failures == () and np.isnan(result[0].failed_at).all()
    assert result.until(0.05).failures == () and not result.until(0.05).failed.any()
    path = tmp_path / "masked.npz"
    result.save(path)
    np.testing.assert_array_equal(Trajectory.load(path).failed_at, result.failed_at)
    plain = Trajectory(
        t=T,
        q=np.zeros((3, 31, 2)),
        qd=np.zeros((3, 31, 2)),
        qdd=np.zeros((3, 31, 2)),
        tau=np.zeros((3, 31, 2)),
        energy=np.zeros((3, 31)),
    )
    assert plain.failed_at.shape == (3,) and not plain.failed.any()
    with pytest.raises(ValueError, match=r"failed_at must have shape \(3,\)"):
        Trajectory(
            t=T,
            q=np.zeros((3, 31, 2)),
            qd=np.zeros((3, 31, 2)),
            qdd=np.zeros((3, 31, 2)),
            tau=np.zeros((3, 31, 2)),
            energy=np.zeros((3, 31)),
            failed_at=np.zeros(2),
        )


class Oscillators:
    """Uncoupled oscillators, trajectory ``b`` of frequency ``w[b]`` (a batch of fixed size)."""

    n_dof, angular = 2, (False, False)

    def __init__(self, w):
        self.w = np.asarray(w, dtype=float)

    def acceleration(self, q, qd, tau=None):
        return -(self.w[:, None] ** 2) * np.asarray(q)

    def energy(self, q, qd):
        return 0.5 * np.sum(np.asarray(qd) ** 2, axis=-1)


@pytest.mark.parametrize("method", ["DOP853", "RK45"])
def test_per_trajectory_error_control_meets_each_trajectory_s_tolerance(method):
    """The error of each trajectory of a batch is no worse than that of its solo solve."""
    w = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 6.0])
    t = np.linspace(0.0, 10.0, 51)
    q0 = np.tile([[1.0, 0.5]], (8, 1))
    qd0 = np.zeros((8, 2))
    exact = q0[:, None, :] * np.cos(w[:, None, None] * t[None, :, None])

    errors = {}
    for control in ("trajectory", "batch"):
        result = rollout(Oscillators(w), q0, qd0, t, method=method, rtol=1e-7, atol=1e-9, error_control=control)
        errors[control] = np.abs(result.q - exact).max(axis=(1, 2))
    solo = rollout(Oscillators(w[7:]), q0[7:], qd0[7:], t, method=method, rtol=1e-7, atol=1e-9)
    solo_error = np.abs(solo.q[0] - exact[7]).max()
    # The fast trajectory dominates: per trajectory it meets its own tolerance as solo does;
    # the shared RMS norm lets it drift (its error is diluted by the 7 slow ones).
    assert errors["trajectory"][7] <= 1.5 * solo_error
    assert errors["batch"][7] > 2 * errors["trajectory"][7]
