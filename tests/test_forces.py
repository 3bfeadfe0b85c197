"""Learned generalized forces: the registry, dissipation, TF = numpy, inverse = forward (float64)."""

from __future__ import annotations

import numpy as np
import pytest

import lnn
from lnn.models.forces import FORCES, friction_names


def _model(friction, **options):
    model = lnn.LagrangianNetwork(
        2, kind="structured", hidden=(8,), friction=friction, dtype="float64", seed=0, xla=False, **options
    )
    rng = np.random.default_rng(1)
    for name in ("friction_viscous", "friction_coulomb", "friction_offset"):
        if hasattr(model, name):
            getattr(model, name).assign(rng.normal(size=2))
    return model


def test_the_friction_argument_names_registered_terms():
    assert {"damping", "viscous", "coulomb", "offset"} <= set(FORCES)
    assert friction_names("coulomb+viscous") == ("viscous", "coulomb")
    assert friction_names(None) == ()
    with pytest.raises(ValueError, match="unknown: 'stribeck'"):
        friction_names("viscous+stribeck")
    with pytest.raises(ValueError, match="unknown: 'damping'"):
        lnn.LagrangianNetwork(2, kind="kinetic-potential", friction="damping")


@pytest.mark.parametrize("friction", ["viscous", "coulomb", "viscous+coulomb"])
def test_friction_is_dissipative_at_every_state(friction):
    model = _model(friction, damping=True)
    rng = np.random.default_rng(2)
    qd = np.concatenate([rng.normal(size=(200, 2)), 1e-4 * rng.normal(size=(50, 2))])
    f = model._friction_force(qd).numpy()
    assert np.all(np.sum(qd * f, axis=-1) <= 1e-15)


def test_forces_in_tensorflow_equal_numpy_and_inverse_dynamics_inverts_the_forward():
    model = _model("viscous+coulomb+offset", damping=True)
    rng = np.random.default_rng(3)
    q, qd, qdd = rng.normal(size=(3, 7, 2))
    tau = model.inverse_dynamics(q, qd, qdd).numpy()
    np.testing.assert_allclose(model.acceleration(q, qd, tau).numpy(), qdd, atol=1e-10)
    snapshot = model.numpy_snapshot()
    np.testing.assert_allclose(snapshot.inverse_dynamics(q, qd, qdd), tau, atol=1e-10)
    np.testing.assert_allclose(snapshot.acceleration(q, qd, tau), qdd, atol=1e-10)
    # the forces are what separates inverse dynamics from the Lagrangian's own terms
    b = model.friction_parameters()
    expected = b["damping"] @ qd.T
    expected = expected.T + b["viscous"] * qd + b["coulomb"] * np.tanh(qd / model.friction_velocity) + b["offset"]
    np.testing.assert_allclose(-model._friction_force(qd).numpy(), expected, atol=1e-12)


def test_the_friction_terms_are_saved(tmp_path):
    model = _model("viscous+coulomb+offset")
    model.save(tmp_path / "f.keras")
    loaded = lnn.load_model(tmp_path / "f.keras")
    assert loaded.friction_terms == "viscous+coulomb+offset"
    for key, value in model.friction_parameters().items():
        np.testing.assert_allclose(loaded.friction_parameters()[key], value)
