"""lnn.fast: the numpy inference path equals the TensorFlow path; exact Jacobians; divergence reports."""

from __future__ import annotations

import numpy as np
import pytest

import lnn.fast
import lnn.integrate
from lnn.fast import FastLagrangian, IndefiniteMassMatrixError, acceleration_jacobian
from lnn.models import LagrangianNetwork

N_DOF = 3
ANGULAR = {"mixed": (True, False, True), "linear": (False,) * N_DOF, "angular": (True,) * N_DOF}
KINDS = [
    ("kinetic-potential", {}),
    ("kinetic-potential", {"convex": True}),
    ("black-box", {}),
    ("structured", {}),
    ("kinetic-potential", {"damping": True}),
    ("structured", {"damping": True}),
    ("black-box", {"damping": True, "activation": "tanh"}),
    ("kinetic-potential", {"activation": "swish"}),
    ("structured", {"activation": "sigmoid"}),
]


def _model(kind, options, angular, *, dtype="float64", seed=3):
    model = LagrangianNetwork(N_DOF, kind=kind, hidden=(16, 12), angular=angular, dtype=dtype, seed=seed, **options)
    rng = np.random.default_rng(seed)
    model.adapt(1.5 * rng.normal(size=(64, N_DOF)) + 0.5, 2.0 * rng.normal(size=(64, N_DOF)))
    if options.get("damping"):  # a non-trivial, non-diagonal D
        model.damping_lower.assign(rng.normal(size=model.damping_lower.shape))
    return model


def _states(rng, batch=40):
    return rng.normal(size=(batch, N_DOF)), rng.normal(size=(batch, N_DOF))


@pytest.mark.parametrize(
    "kind, options, angular",
    [kind + (layout,) for kind, layout in zip(KINDS, sorted(ANGULAR) * 3)]
    + [("black-box", {}, "linear"), ("structured", {}, "angular")],
)
def test_numpy_path_equals_tensorflow_float64(kind, options, angular):
    model = _model(kind, options, ANGULAR[angular])
    fast = FastLagrangian.from_model(model)
    rng = np.random.default_rng(7)
    q, qd = _states(rng)
    qdd = rng.normal(size=q.shape)
    mass = model.mass_matrix(q, qd).numpy()
    np.testing.assert_allclose(fast.mass_matrix(q, qd), mass, rtol=0, atol=1e-10 * np.abs(mass).max())
    # Inverse dynamics exercises M, dL/dq, the mixed term and damping for any M (even indefinite).
    tau = model.inverse_dynamics(q, qd, qdd).numpy()
    np.testing.assert_allclose(fast.inverse_dynamics(q, qd, qdd), tau, rtol=0, atol=1e-10 * np.abs(tau).max())
    energy = model.energy(q, qd).numpy()
    np.testing.assert_allclose(fast.energy(q, qd), energy, rtol=0, atol=1e-10 * np.abs(energy).max())
    np.testing.assert_allclose(fast.energy(q[3], qd[3]), energy[3], rtol=0, atol=1e-10 * np.abs(energy).max())
    # Forward dynamics, where M is positive definite by construction (the inverse dynamics
    # above already cover the other kinds: the same terms, without the solve).
    if kind == "structured" or options.get("convex"):
        force = rng.normal(size=q.shape)
        expected = model.acceleration(q, qd, force).numpy()
        np.testing.assert_allclose(
            fast.acceleration(q, qd, force), expected, rtol=0, atol=1e-10 * np.abs(expected).max()
        )
        np.testing.assert_allclose(
            model.numpy_acceleration(q, qd, force), expected, rtol=0, atol=1e-10 * np.abs(expected).max()
        )


@pytest.mark.parametrize("kind, options", KINDS[:4])
def test_numpy_path_equals_tensorflow_float32(kind, options):
    model = _model(kind, options, ANGULAR["mixed"], dtype="float32")
    fast = FastLagrangian.from_model(model)
    rng = np.random.default_rng(11)
    q, qd = (x.astype(np.float32) for x in _states(rng))
    qdd = rng.normal(size=q.shape).astype(np.float32)
    tau = model.inverse_dynamics(q, qd, qdd).numpy()
    ours = fast.inverse_dynamics(q, qd, qdd)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, tau, rtol=0, atol=2e-5 * np.abs(tau).max())
    mass = model.mass_matrix(q, qd).numpy()
    np.testing.assert_allclose(fast.mass_matrix(q, qd), mass, rtol=0, atol=2e-5 * np.abs(mass).max())
    energy = model.energy(q, qd).numpy()
    np.testing.assert_allclose(fast.energy(q, qd), energy, rtol=0, atol=2e-5 * np.abs(energy).max())


def test_single_state_and_bad_shapes():
    model = _model("structured", {}, ANGULAR["mixed"])
    fast = FastLagrangian.from_model(model)
    q, qd = np.array([0.1, 0.2, 0.3]), np.array([0.0, -0.5, 1.0])
    assert fast.acceleration(q, qd).shape == (N_DOF,)
    np.testing.assert_allclose(fast.acceleration(q, qd), fast.acceleration(q[None], qd[None])[0])
    with pytest.raises(ValueError, match=r"qd must have shape \(B, 3\)"):
        fast.acceleration(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="same batch size"):
        fast.acceleration(np.zeros((2, 3)), np.zeros((4, 3)))
    with pytest.raises(TypeError, match="LagrangianNetwork"):
        FastLagrangian.from_model(object())


@pytest.mark.parametrize("kind, options", [("kinetic-potential", {"convex": True, "damping": True}), ("black-box", {})])
def test_acceleration_jacobian_matches_finite_differences(kind, options):
    model = _model(kind, options, ANGULAR["mixed"])
    fast = FastLagrangian.from_model(model)
    rng = np.random.default_rng(5)
    q, qd = _states(rng, batch=30)
    best = np.argsort(np.linalg.eigvalsh(fast.mass_matrix(q, qd))[:, 0])[-8:]  # best conditioned
    q, qd = q[best], qd[best]
    tau = rng.normal(size=q.shape)
    jac = model.acceleration_jacobian(q, qd, tau)
    assert jac.shape == (q.shape[0], N_DOF, 2 * N_DOF)
    np.testing.assert_allclose(acceleration_jacobian(model, q[0], qd[0], tau[0]), jac[0], rtol=1e-9, atol=1e-9)
    eps = 1e-6
    state = np.concatenate([q, qd], axis=1)
    for j in range(2 * N_DOF):
        step = np.zeros_like(state)
        step[:, j] = eps
        up, down = state + step, state - step
        column = (
            fast.acceleration(up[:, :N_DOF], up[:, N_DOF:], tau)
            - fast.acceleration(down[:, :N_DOF], down[:, N_DOF:], tau)
        ) / (2 * eps)
        np.testing.assert_allclose(jac[:, :, j], column, rtol=1e-5, atol=1e-6 * np.abs(jac).max())


def test_indefinite_mass_matrix_is_reported_with_trajectories():
    model = _model("kinetic-potential", {"convex_init": False}, ANGULAR["mixed"])
    fast = FastLagrangian.from_model(model)
    rng = np.random.default_rng(2)
    q, qd = _states(rng, batch=64)
    lowest = np.linalg.eigvalsh(fast.mass_matrix(q, qd))[:, 0]
    bad = np.flatnonzero(lowest <= 0)
    assert bad.size and bad.size < q.shape[0]  # an untrained unconstrained T is indefinite somewhere
    with pytest.raises(IndefiniteMassMatrixError, match="not positive definite") as info:
        fast.acceleration(q, qd)
    assert info.value.trajectories == tuple(bad)
    good = np.flatnonzero(lowest > 0)[:2]
    rows = np.concatenate([good, bad[:1]])
    with pytest.raises(lnn.integrate.IntegrationError) as info:
        lnn.integrate.rollout(model, q[rows], qd[rows], np.linspace(0.0, 1.0, 5))
    # Trajectory 2 fails at once; the others continue (and may fail later): all are named.
    assert 2 in info.value.trajectories and info.value.time == 0.0
    assert next(f for f in info.value.failures if f.index == 2).time == 0.0


def _jacobian_op(model, tau=False):
    return model.compiled_ops()[("acceleration_jacobian_tau" if tau else "acceleration_jacobian", None)]


@pytest.mark.parametrize("kind, options", [("kinetic-potential", {"convex": True}), ("structured", {})])
def test_jacobian_runs_in_graph_mode_at_once_and_xla_once_its_size_recurs(kind, options):
    """No compilation on the caller's path: graph mode first, XLA compiled in the background.

    The structured kind compiles too: its closed form has no forward accumulator.
    """
    from lnn.models import compiled

    model = _model(kind, options, ANGULAR["mixed"])
    assert model.xla
    rng = np.random.default_rng(6)
    batch = 70  # padded to 96 under XLA
    q, qd = _states(rng, batch=batch)
    first = acceleration_jacobian(model, q, qd)
    op = _jacobian_op(model)
    assert op.ready == set() and op.compilations == []  # one call: graph mode, nothing compiled
    acceleration_jacobian(model, q, qd)  # the size recurs: compiled off the caller's path
    compiled.wait()
    assert [(c.rows, c.thread, c.ok) for c in op.compilations] == [(96, "lnn-xla", True)]
    xla = acceleration_jacobian(model, q, qd)  # XLA, padded to 96 rows and cut back
    small = np.concatenate([acceleration_jacobian(model, q[i : i + 16], qd[i : i + 16]) for i in range(0, batch, 16)])
    assert xla.shape == (batch, N_DOF, 2 * N_DOF)
    np.testing.assert_allclose(xla, first, rtol=0, atol=1e-12 * np.abs(first).max())
    np.testing.assert_allclose(small, first, rtol=0, atol=1e-12 * np.abs(first).max())
    assert op.tracing_count() == 1


def test_snapshot_follows_the_weights_at_lookup():
    model = _model("structured", {}, ANGULAR["mixed"])
    q, qd = np.array([[0.1, 0.2, 0.3]]), np.array([[0.0, -0.5, 1.0]])
    before = model.numpy_acceleration
    old = before(q, qd)
    model.potential_net.b_1.assign(model.potential_net.b_1.numpy() + 0.3)
    np.testing.assert_array_equal(before(q, qd), old)  # a snapshot
    new = model.numpy_acceleration(q, qd)
    assert np.abs(new - old).max() > 1e-6
    np.testing.assert_allclose(new, model.acceleration(q, qd).numpy(), rtol=1e-10, atol=1e-12)


class _NumpyWrapper:
    """A plain numpy adapter around a model's TensorFlow ``acceleration`` (no fast path)."""

    def __init__(self, model):
        self.model, self.n_dof, self.angular = model, model.n_dof, model.angular

    def acceleration(self, q, qd, tau=None):
        return self.model.acceleration(q, qd, tau).numpy()

    def energy(self, q, qd):
        return self.model.energy(q, qd).numpy()


def test_learned_rollout_equals_plain_numpy_wrapper():
    """The fast path changes the cost of a rollout, not its answer; Radau (exact Jacobian) agrees."""
    # Graph mode: the wrapper's thousands of eager calls would compile XLA forms in the background
    # (their XLA path: test_jacobian_runs_in_graph_mode_at_once_and_xla_once_its_size_recurs, test_models).
    model = _model("structured", {"damping": True, "xla": False}, ANGULAR["mixed"])
    rng = np.random.default_rng(8)
    q0, qd0 = rng.normal(size=(3, N_DOF)), 0.3 * rng.normal(size=(3, N_DOF))
    t = np.linspace(0.0, 0.5, 6)
    tau = 0.3 * np.sin(np.linspace(0.0, 3.0, t.size))[:, None] * np.ones(N_DOF)
    # At rtol=1e-10 two runs whose right-hand sides differ by rounding (1e-13 here) took
    # different steps and ended 3e-8 apart (TF 2.21): the solver's own error, not the fast path's.
    options = dict(tau=tau, rtol=1e-13, atol=1e-13)
    fast = lnn.integrate.rollout(model, q0, qd0, t, method="DOP853", **options)
    plain = lnn.integrate.rollout(_NumpyWrapper(model), q0, qd0, t, method="DOP853", **options)
    np.testing.assert_allclose(fast.q, plain.q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fast.qd, plain.qd, rtol=0, atol=1e-8)
    implicit = lnn.integrate.rollout(model, q0, qd0, t, method="Radau", tau=tau, rtol=1e-10, atol=1e-12)
    assert implicit.metadata["njev"] > 0
    np.testing.assert_allclose(implicit.q, fast.q, rtol=0, atol=1e-7)
    np.testing.assert_allclose(fast.energy, plain.energy, rtol=0, atol=1e-7 * np.abs(plain.energy).max())


def test_rollout_takes_one_snapshot_for_accelerations_and_energies(monkeypatch):
    """A scipy rollout: no TensorFlow call (nor its compilation for a new batch size) after the solve.

    (``method="auto"``, the default, integrates a learned model with a compiled pair in
    TensorFlow instead; the numpy snapshot serves the scipy methods.)"""
    model = _model("kinetic-potential", {"convex": True}, ANGULAR["mixed"])
    snapshots = []
    take = model.numpy_snapshot

    def counted():
        snapshots.append(take())
        return snapshots[-1]

    def no_tensorflow(*args, **kwargs):
        raise AssertionError("rollout called the TensorFlow path")

    monkeypatch.setattr(model, "numpy_snapshot", counted)
    monkeypatch.setattr(model, "energy", no_tensorflow)
    monkeypatch.setattr(model, "acceleration", no_tensorflow)
    rng = np.random.default_rng(4)
    q0, qd0 = rng.normal(size=(2, N_DOF)), rng.normal(size=(2, N_DOF))
    trajectory = lnn.integrate.rollout(model, q0, qd0, np.linspace(0.0, 0.2, 3), method="DOP853")
    assert len(snapshots) == 1
    monkeypatch.undo()
    expected = model.energy(trajectory.q.reshape(-1, N_DOF), trajectory.qd.reshape(-1, N_DOF))
    np.testing.assert_allclose(trajectory.energy.ravel(), expected.numpy(), rtol=1e-12, atol=1e-12)
