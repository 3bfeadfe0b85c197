"""The registry of model kinds: one parity test per kind, and a kind added from this file.

Every registered kind's closed form (TensorFlow), its numpy twin (the rollout
snapshot) and the nested-tape engine of :mod:`lnn.mechanics` applied to its
energies agree to 1e-10 in float64. A toy kind registered here, in one class
and one decorator, works through every public method without touching the
package.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import lnn
from lnn import mechanics
from lnn.models import KINDS, Kind, LagrangianNetwork, register_kind
from lnn.models.mlp import MLP

from conftest import random_states

N = 3
ANGULAR = (True, False, True)
BUILT_IN = ("kinetic-potential", "black-box", "structured")


def _model(kind, **options):
    model = LagrangianNetwork(
        N, kind=kind, hidden=(10, 8), angular=ANGULAR, dtype="float64", seed=5, xla=False, **options
    )
    rng = np.random.default_rng(2)
    model.adapt(rng.normal(0.3, 1.5, (40, N)), rng.normal(0.0, 2.0, (40, N)))
    return model


def _states(batch=7, seed=1):
    return random_states(N, batch, seed)


def _tapes(model, q, qd, tau):
    """``M``, ``qdd`` and ``E`` of the kind's energies through nested tapes (the oracle)."""
    lagrangian = model.kind_model.tape_lagrangian()
    force = tau - qd @ np.asarray(model.damping_matrix()).T  # zeros without damping
    return (
        mechanics.mass_matrix(lagrangian, q, qd).numpy(),
        mechanics.acceleration(lagrangian, q, qd, force).numpy(),
        mechanics.energy(lagrangian, q, qd).numpy(),
    )


def test_the_built_in_kinds_are_registered():
    assert set(BUILT_IN) <= set(KINDS)
    for name in BUILT_IN:
        assert issubclass(KINDS[name], Kind) and KINDS[name].name == name


@pytest.mark.parametrize(
    "kind, options",
    [
        ("kinetic-potential", {}),
        ("kinetic-potential", {"convex": True, "damping": True}),
        ("black-box", {"damping": True}),
        ("structured", {"damping": True}),
    ],
)
def test_closed_form_equals_numpy_equals_nested_tapes(kind, options):
    """TF closed form = numpy twin = nested tapes, for M, qdd, tau and E (float64, 1e-10)."""
    model = _model(kind, **options)
    q, qd, tau = _states()
    m_tapes, qdd_tapes, e_tapes = _tapes(model, q, qd, tau)
    snapshot = model.numpy_snapshot()
    assert snapshot.mechanics is not None  # the built-in kinds have a numpy twin
    m = model.mass_matrix(q, qd).numpy()
    eigenvalues = np.linalg.eigvalsh(m)
    reg = None if eigenvalues.min() > 0 else 1.0 - eigenvalues.min()  # an indefinite M: shift it
    if reg is None:
        qdd = model.acceleration(q, qd, tau).numpy()
        for other in (qdd_tapes, snapshot.acceleration(q, qd, tau)):
            np.testing.assert_allclose(other, qdd, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(model.inverse_dynamics(q, qd, qdd).numpy(), tau, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(snapshot.inverse_dynamics(q, qd, qdd), tau, rtol=1e-9, atol=1e-9)
    for other in (m_tapes, snapshot.mass_matrix(q, qd)):
        np.testing.assert_allclose(other, m, rtol=1e-10, atol=1e-12)
    energy = model.energy(q, qd).numpy()
    for other in (e_tapes, snapshot.energy(q, qd)):
        np.testing.assert_allclose(other, energy, rtol=1e-10, atol=1e-12)


# -- a kind added from this file ------------------------------------------------------


# --8<-- [start:kind]
class Separable(Kind):
    """``T = 1/2 qd^T diag(exp(w(q))) qd``, ``V`` an MLP: the issue's toy kind."""

    name = "separable-test"
    networks = ("log_mass_net", "potential_net")
    mass_depends_on_qd = False

    def build(self, *, n_features, seeds, options):
        m = self.model
        m.log_mass_net = MLP(
            n_features,
            0,
            options["hidden"],
            m.n_dof,
            seed=int(seeds[0]),
            name="log_mass",
            activation=options["activation"],
            dtype=options["dtype"],
        )
        m.potential_net = MLP(
            n_features,
            0,
            options["hidden"],
            1,
            seed=int(seeds[1]),
            name="potential",
            activation=options["activation"],
            dtype=options["dtype"],
        )

    def diagonal(self, q):
        return tf.exp(self.model.log_mass_net.forward(self.model.features(q).x))

    def kinetic(self, q, qd):
        return 0.5 * tf.reduce_sum(self.diagonal(q) * qd * qd, axis=-1)

    def potential(self, q):
        return self.model.potential_net.forward(self.model.features(q).x)[:, 0]


# --8<-- [end:kind]


@pytest.fixture
def separable():
    register_kind(Separable)  # the one registry line
    yield Separable
    KINDS.pop(Separable.name)


def test_a_kind_registered_from_a_test_file_works_everywhere(separable, tmp_path):
    model = _model("separable-test", damping=True)
    q, qd, tau = _states()
    diagonal = model.kind_model.diagonal(tf.constant(q)).numpy()
    m = model.mass_matrix(q, qd).numpy()
    np.testing.assert_allclose(m, np.eye(N)[None] * diagonal[:, None, :], rtol=1e-12, atol=1e-14)
    m_tapes, qdd_tapes, e_tapes = _tapes(model, q, qd, tau)
    qdd = model.acceleration(q, qd, tau).numpy()
    np.testing.assert_allclose(qdd, qdd_tapes, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(model.inverse_dynamics(q, qd, qdd).numpy(), tau, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        model.energy(q, qd).numpy(),
        model.kinetic_energy(q, qd).numpy() + model.potential_energy(q).numpy(),
        rtol=1e-12,
        atol=1e-12,
    )
    # No numpy twin: the snapshot evaluates the kind's TensorFlow mathematics.
    snapshot = model.numpy_snapshot()
    assert snapshot.mechanics is None
    np.testing.assert_allclose(snapshot.acceleration(q, qd, tau), qdd, rtol=1e-10, atol=1e-10)
    trajectory = lnn.rollout(model, q[:2], qd[:2], np.linspace(0.0, 0.2, 5))
    assert np.isfinite(trajectory.q).all() and trajectory.q.shape == (2, 5, N)
    np.testing.assert_allclose(model.acceleration_jacobian(q[:2], qd[:2]).shape, (2, N, 2 * N))
    path = tmp_path / "separable.keras"
    model.save(path)
    loaded = lnn.load_model(path)
    assert loaded.kind == "separable-test"
    np.testing.assert_array_equal(loaded.acceleration(q, qd, tau).numpy(), qdd)


def test_registering_a_taken_name_or_a_non_kind_is_refused():
    class Other(Kind):
        name = "structured"

    with pytest.raises(ValueError, match="already registered"):
        register_kind(Other)
    with pytest.raises(TypeError, match="Kind subclass"):
        register_kind(object)
    with pytest.raises(ValueError, match="kind must be one of"):
        LagrangianNetwork(2, kind="no-such-kind")
