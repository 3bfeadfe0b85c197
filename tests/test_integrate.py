"""Tests of lnn.rollout (scipy solve_ivp) against closed forms and its own invariants."""

from __future__ import annotations

import numpy as np
import pytest

from lnn.integrate import IMPLICIT_METHODS, METHODS, IntegrationError, rollout


class Oscillators:
    """Coupled linear oscillators ``qdd = -K q - c qd + tau`` (unit masses), K symmetric PD."""

    angular = (False, False)
    n_dof = 2

    def __init__(self, *, c: float = 0.0, with_jacobian: bool = True) -> None:
        self.K = np.array([[5.0, -1.0], [-1.0, 3.0]])
        self.c = c
        if with_jacobian:
            self.acceleration_jacobian = self._jacobian

    def mass_matrix(self, q, qd=None):
        return np.broadcast_to(np.eye(2), np.shape(q) + (2,))

    def acceleration(self, q, qd, tau=None):
        qdd = -np.asarray(q) @ self.K - self.c * np.asarray(qd)
        return qdd if tau is None else qdd + tau

    def _jacobian(self, q, qd, tau=None):
        J = np.empty(np.shape(q)[:-1] + (2, 4))
        J[..., :2] = -self.K
        J[..., 2:] = -self.c * np.eye(2)
        return J

    def inverse_dynamics(self, q, qd, qdd):
        return qdd + np.asarray(q) @ self.K + self.c * np.asarray(qd)

    def energy(self, q, qd):
        return 0.5 * np.sum(qd * qd, axis=-1) + 0.5 * np.einsum("...i,ij,...j->...", q, self.K, q)

    def exact(self, q0, qd0, t):
        """Closed-form undamped solution, ``(B, T, 2)``."""
        w2, V = np.linalg.eigh(self.K)
        w = np.sqrt(w2)
        a, b = q0 @ V, (qd0 @ V) / w
        modal = a[:, None, :] * np.cos(w * t[:, None])[None] + b[:, None, :] * np.sin(w * t[:, None])[None]
        return modal @ V.T


class CoupledPendulums:
    """A nonlinear chain ``qdd_i = -sin q_i + k (q_{i+1} - 2 q_i + q_{i-1}) - c qd_i + tau_i``."""

    def __init__(self, n: int = 3, *, k: float = 2.0, c: float = 0.1, with_jacobian: bool = True) -> None:
        self.n_dof = n
        self.angular = (True,) * n
        self.L = k * (np.diag(np.full(n - 1, 1.0), 1) + np.diag(np.full(n - 1, 1.0), -1) - 2 * np.eye(n))
        self.c = c
        if with_jacobian:
            self.acceleration_jacobian = self._jacobian

    def mass_matrix(self, q, qd=None):
        return np.broadcast_to(np.eye(self.n_dof), np.shape(q) + (self.n_dof,))

    def acceleration(self, q, qd, tau=None):
        qdd = -np.sin(q) + q @ self.L - self.c * qd
        return qdd if tau is None else qdd + tau

    def _jacobian(self, q, qd, tau=None):
        n = self.n_dof
        J = np.zeros(np.shape(q)[:-1] + (n, 2 * n))
        J[..., :n] = self.L - np.cos(q)[..., None] * np.eye(n)
        J[..., n:] = -self.c * np.eye(n)
        return J

    def inverse_dynamics(self, q, qd, qdd):
        return qdd - self.acceleration(q, qd)

    def energy(self, q, qd):
        return 0.5 * np.sum(qd**2, -1) + np.sum(1 - np.cos(q), -1) - 0.5 * np.einsum("...i,ij,...j->...", q, self.L, q)


def _states(B, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, n)), rng.normal(size=(B, n))


@pytest.mark.parametrize("method", METHODS)
def test_oscillators_match_closed_form_for_every_method(method):
    system = Oscillators()
    q0, qd0 = _states(4, 2)
    t = np.linspace(0.0, 3.0, 31)
    traj = rollout(system, q0, qd0, t, method=method, rtol=1e-10, atol=1e-12)
    exact = system.exact(q0, qd0, t)
    # BDF and LSODA are low-order multistep methods: looser, still tight.
    tolerance = 1e-6 if method in ("BDF", "LSODA", "RK23") else 1e-8
    np.testing.assert_allclose(traj.q, exact, atol=tolerance)
    assert traj.q.shape == traj.qd.shape == traj.qdd.shape == traj.tau.shape == (4, 31, 2)
    np.testing.assert_array_equal(traj.t, t)
    np.testing.assert_allclose(traj.qdd, -traj.q @ system.K, atol=1e-12)
    np.testing.assert_array_equal(traj.tau, 0.0)
    np.testing.assert_allclose(traj.energy, system.energy(q0, qd0)[:, None] * np.ones(31), rtol=1e-6)
    assert traj.method == method and traj.nfev > 0


def test_single_state_gives_batch_of_one():
    system = Oscillators()
    t = np.linspace(0.0, 1.0, 11)
    traj = rollout(system, [0.1, 0.2], [0.0, 0.0], t)
    assert traj.q.shape == (1, 11, 2)
    np.testing.assert_allclose(traj.q, system.exact(np.array([[0.1, 0.2]]), np.zeros((1, 2)), t), atol=1e-8)


def test_batched_rollout_equals_solo_rollouts():
    system = CoupledPendulums()
    q0, qd0 = _states(6, 3, seed=1)
    t = np.linspace(0.0, 4.0, 41)
    batch = rollout(system, q0, qd0, t, rtol=1e-11, atol=1e-12)
    for b in range(6):
        solo = rollout(system, q0[b], qd0[b], t, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(batch.q[b], solo.q[0], atol=1e-8)
        np.testing.assert_allclose(batch.qd[b], solo.qd[0], atol=1e-8)


def test_one_right_hand_side_call_per_stage_for_the_whole_batch():
    calls = []

    class Counting(CoupledPendulums):
        def acceleration(self, q, qd, tau=None):
            calls.append(np.shape(q))
            return super().acceleration(q, qd, tau)

    q0, qd0 = _states(32, 3, seed=2)
    traj = rollout(Counting(), q0, qd0, np.linspace(0.0, 1.0, 11))
    # nfev stage calls plus one final batched evaluation of qdd at the samples.
    assert len(calls) == traj.nfev + 1
    assert calls[0] == (32, 3) and calls[-1] == (32 * 11, 3)


def test_numpy_acceleration_is_preferred():
    used = []

    class Fast(Oscillators):
        def numpy_acceleration(self, q, qd, tau=None):
            used.append(True)
            return self.acceleration(q, qd, tau)

    q0, qd0 = _states(2, 2)
    rollout(Fast(), q0, qd0, np.linspace(0.0, 1.0, 5))
    assert used


def test_tau_array_and_callable_agree():
    system = CoupledPendulums()
    B, n = 3, 3
    q0, qd0 = _states(B, n, seed=3)
    t = np.linspace(0.0, 2.0, 201)
    freq = np.array([0.7, 1.3, 2.1])

    def controller(time, q, qd):
        return np.broadcast_to(np.sin(freq * time), (B, n))

    samples = np.sin(freq * t[:, None])  # (T, n), shared by the batch
    by_array = rollout(system, q0, qd0, t, tau=samples, rtol=1e-10, atol=1e-12)
    by_array_batched = rollout(
        system, q0, qd0, t, tau=np.broadcast_to(samples, (B,) + samples.shape), rtol=1e-10, atol=1e-12
    )
    by_callable = rollout(system, q0, qd0, t, tau=controller, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(by_callable.tau, by_array.tau, atol=1e-15)
    np.testing.assert_array_equal(by_array.q, by_array_batched.q)
    # Linear interpolation on a 0.01 s grid errs by at most h^2/8 max|tau''| = 5.5e-5 on the
    # force; over 2 s the positions accumulate less than that.
    np.testing.assert_allclose(by_array.q, by_callable.q, atol=5.5e-5)
    np.testing.assert_allclose(by_array.qdd, system.acceleration(by_array.q, by_array.qd, by_array.tau), atol=1e-12)


def test_held_tau_is_piecewise_constant():
    # qdd = tau for a free particle: with a held force the velocity is a sum of steps.
    class Free:
        n_dof, angular = 1, (False,)

        def acceleration(self, q, qd, tau=None):
            return np.zeros_like(q) if tau is None else np.array(tau, dtype=float)

        def energy(self, q, qd):
            return 0.5 * qd[..., 0] ** 2

    t = np.array([0.0, 1.0, 2.0, 3.0])
    tau = np.array([[1.0], [-2.0], [0.5], [7.0]])
    held = rollout(Free(), [0.0], [0.0], t, tau=tau, tau_interpolation="hold", rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(held.qd[0, :, 0], [0.0, 1.0, -1.0, -0.5], atol=1e-9)
    linear = rollout(Free(), [0.0], [0.0], t, tau=tau, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(linear.qd[0, :, 0], [0.0, -0.5, -1.25, 2.5], atol=1e-9)


@pytest.mark.parametrize("method", IMPLICIT_METHODS)
def test_implicit_methods_with_and_without_jacobian_agree(method):
    q0, qd0 = _states(5, 3, seed=4)
    t = np.linspace(0.0, 3.0, 31)
    with_jac = rollout(CoupledPendulums(), q0, qd0, t, method=method, rtol=1e-10, atol=1e-12)
    without = rollout(CoupledPendulums(with_jacobian=False), q0, qd0, t, method=method, rtol=1e-10, atol=1e-12)
    reference = rollout(CoupledPendulums(), q0, qd0, t, method="DOP853", rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(with_jac.q, reference.q, atol=2e-6)
    np.testing.assert_allclose(without.q, reference.q, atol=2e-6)
    assert with_jac.metadata["njev"] >= 1


def test_exact_jacobian_is_what_the_solver_receives():
    calls = []

    class Counting(CoupledPendulums):
        def __init__(self, **options):
            super().__init__(**options)
            inner = self.acceleration_jacobian

            def counted(q, qd, tau=None):
                calls.append(np.shape(q))
                return inner(q, qd, tau)

            self.acceleration_jacobian = counted

    q0, qd0 = _states(7, 3, seed=5)
    # LSODA only uses a Jacobian once it has switched to BDF: make the chain stiff.
    for method, options in (("Radau", {}), ("BDF", {}), ("LSODA", {"c": 2000.0})):
        calls.clear()
        rollout(Counting(**options), q0, qd0, np.linspace(0.0, 1.0, 3), method=method)
        assert calls and calls[0] == (7, 3), method


def test_assembled_jacobians_equal_finite_differences_of_the_vector_field():
    from lnn._torque import NumpyTorque
    from lnn.integrate._scipy import _jacobian_options

    system = CoupledPendulums()
    B, n = 4, 3
    q0, qd0 = _states(B, n, seed=6)
    y = np.concatenate([q0, qd0], axis=1).ravel()

    def field(y):
        Y = y.reshape(B, 2 * n)
        return np.concatenate([Y[:, n:], system.acceleration(Y[:, :n], Y[:, n:])], axis=1).ravel()

    eps = 1e-6
    dense = np.stack([(field(y + eps * e) - field(y - eps * e)) / (2 * eps) for e in np.eye(y.size)], axis=1)
    torque = NumpyTorque.build(None, np.array([0.0, 1.0]), batch=B, n=n)
    sparse = _jacobian_options(system, "Radau", B, n, torque)["jac"](0.0, y)
    np.testing.assert_allclose(sparse.toarray(), dense, atol=1e-8)
    options = _jacobian_options(system, "LSODA", B, n, torque)
    lband, uband = options["lband"], options["uband"]
    packed = options["jac"](0.0, y)
    unpacked = np.zeros_like(dense)
    for i in range(y.size):
        for j in range(max(0, i - lband), min(y.size, i + uband + 1)):
            unpacked[i, j] = packed[uband + i - j, j]
    np.testing.assert_allclose(unpacked, dense, atol=1e-8)
    # Outside the band the vector field has no dependence: the band holds the whole Jacobian.
    assert np.count_nonzero(np.abs(dense) > 1e-12) == np.count_nonzero(np.abs(unpacked) > 1e-12)
    pattern = _jacobian_options(CoupledPendulums(with_jacobian=False), "BDF", B, n, torque)["jac_sparsity"].toarray()
    assert np.all(pattern[np.abs(dense) > 1e-12] == 1)
    assert pattern.sum() == B * (n + 2 * n * n)


def test_unknown_method_lists_the_methods():
    listing = "scipy: RK23, RK45, DOP853, Radau, BDF, LSODA; compiled: .*, or 'auto'; got 'Euler'"
    with pytest.raises(ValueError, match=listing):
        rollout(Oscillators(), [0.0, 0.0], [0.0, 0.0], [0.0, 1.0], method="Euler")


@pytest.mark.parametrize(
    ("q0", "qd0", "t", "message"),
    [
        (np.zeros((2, 3)), np.zeros((2, 3)), [0.0, 1.0], r"q0 must have shape \(B, 2\).*\(2, 3\)"),
        (np.zeros((2, 2)), np.zeros((3, 2)), [0.0, 1.0], r"same shape.*\(2, 2\) and \(3, 2\)"),
        ([np.nan, 0.0], [0.0, 0.0], [0.0, 1.0], r"q0 contains NaN or infinite values.*rows \[0\]"),
        ([0.0, 0.0], [0.0, np.inf], [0.0, 1.0], "qd0 contains NaN or infinite"),
        ([0.0, 0.0], [0.0, 0.0], [0.0, 1.0, 1.0], r"strictly increasing; got t\[1\] = 1.0"),
        ([0.0, 0.0], [0.0, 0.0], [[0.0, 1.0]], r"t must have shape \(T,\)"),
        ([0.0, 0.0], [0.0, 0.0], [0.0, np.nan], "t has non-finite"),
    ],
)
def test_bad_inputs_are_named(q0, qd0, t, message):
    with pytest.raises(ValueError, match=message):
        rollout(Oscillators(), q0, qd0, t)


def test_bad_tau_and_system_are_named():
    t = np.linspace(0.0, 1.0, 5)
    with pytest.raises(ValueError, match=r"tau must have shape \(T, n\) = \(5, 2\).*\(4, 2\)"):
        rollout(Oscillators(), [0.0, 0.0], [0.0, 0.0], t, tau=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="tau_interpolation must be one of"):
        rollout(Oscillators(), [0.0, 0.0], [0.0, 0.0], t, tau_interpolation="cubic")
    with pytest.raises(ValueError, match=r"controller.*\(1, 2\) or \(2,\); got shape \(3,\)"):
        rollout(Oscillators(), [0.0, 0.0], [0.0, 0.0], t, tau=lambda s, q, qd: np.zeros(3))
    with pytest.raises(TypeError, match="has no 'n_dof'"):
        rollout(object(), [0.0], [0.0], t)
    with pytest.raises(ValueError, match=r"rtol must be (positive|a finite number > 0)"):
        rollout(Oscillators(), [0.0, 0.0], [0.0, 0.0], t, rtol=0.0)


class Blowup:
    """``qdd = qd**2``: with ``qd(0) = 1`` the velocity ``1/(1 - t)`` blows up at ``t = 1``."""

    n_dof, angular = 1, (False,)

    def acceleration(self, q, qd, tau=None):
        return np.asarray(qd) ** 2

    def energy(self, q, qd):
        return 0.5 * qd[..., 0] ** 2


@pytest.mark.parametrize("method", ["RK45", "DOP853", "Radau"])
def test_failed_solve_raises_with_scipy_message_and_time(method):
    with pytest.raises(IntegrationError) as info:
        rollout(Blowup(), [[0.0], [0.0]], [[0.5], [1.0]], np.linspace(0.0, 2.0, 5), method=method)
    assert isinstance(info.value, RuntimeError)
    # The singular point t = 1 of trajectory 1 stops the solve there.
    assert 0.9 < info.value.time <= 1.0 + 1e-6
    message = str(info.value)
    assert method in message and "t = " in message
    if not info.value.trajectories:  # scipy gave up first: its message is quoted
        assert "step size" in message.lower()


def test_non_finite_acceleration_names_time_and_trajectory():
    class Cliff(Oscillators):
        def acceleration(self, q, qd, tau=None):
            qdd = super().acceleration(q, qd, tau)
            return np.where(np.asarray(q)[:, :1] > 0.5, np.nan, qdd)

    q0 = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    qd0 = np.array([[0.1, 0.0], [3.0, 0.0], [0.1, 0.0]])  # only trajectory 1 reaches q > 0.5
    with pytest.raises(IntegrationError, match=r"trajectory\(ies\) \[1\] failed.*became non-finite") as info:
        rollout(Cliff(), q0, qd0, np.linspace(0.0, 2.0, 11))
    assert info.value.trajectories == (1,)
    assert 0.1 < info.value.time < 1.0  # only trajectory 1 passes q = 0.5, early


def test_progress_reports_simulated_time():
    reports = []
    q0, qd0 = _states(3, 2)
    rollout(
        Oscillators(), q0, qd0, np.linspace(1.0, 6.0, 11), progress=lambda done, total: reports.append((done, total))
    )
    done = [d for d, _ in reports]
    assert all(total == 5.0 for _, total in reports)
    assert done == sorted(done) and done[-1] == 5.0
    assert 5 <= len(reports) <= 102


def test_errors_of_the_system_are_reported_with_the_time_and_trajectories():
    class Indefinite(Oscillators):
        """Raises like a learned model whose mass matrix stops being positive definite."""

        def acceleration(self, q, qd, tau=None):
            bad = np.flatnonzero(np.asarray(q)[:, 0] > 0.5)
            if bad.size:
                error = np.linalg.LinAlgError(f"mass matrix not positive definite in rows {bad}")
                error.trajectories = tuple(bad)
                raise error
            return super().acceleration(q, qd, tau)

    q0 = np.zeros((3, 2))
    qd0 = np.array([[0.1, 0.0], [0.1, 0.0], [3.0, 0.0]])
    with pytest.raises(IntegrationError, match=r"acceleration failed at t = .*not positive definite") as info:
        rollout(Indefinite(), q0, qd0, np.linspace(0.0, 2.0, 11))
    assert info.value.trajectories == (2,)
    assert 0.1 < info.value.time < 1.0
    assert isinstance(info.value.__cause__, np.linalg.LinAlgError)


def test_sample_accelerations_are_evaluated_in_blocks_equal_to_one_call():
    from lnn.integrate._problem import SAMPLE_BLOCK
    from simulations import DoublePendulum

    system = DoublePendulum()
    rng = np.random.default_rng(3)
    q0, qd0 = rng.uniform(-1, 1, (11, 2)), rng.normal(size=(11, 2))
    t = np.linspace(0.0, 1.0, 101)  # 11 x 101 = 1111 samples: two blocks of 1024
    assert 11 * 101 > SAMPLE_BLOCK
    traj = rollout(system, q0, qd0, t, method="DOP853")
    flat = traj.q.reshape(-1, 2), traj.qd.reshape(-1, 2)
    np.testing.assert_allclose(traj.qdd.reshape(-1, 2), system.acceleration(*flat), rtol=1e-12)
