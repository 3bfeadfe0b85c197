"""Models saved by earlier releases still load and give the same outputs.

``tests/data/legacy_*.keras`` were written before the model kinds moved into
``lnn/models/`` (one float64 model per kind, angular and linear coordinates,
learned damping, adapted input scaling, weights moved off their
initialisation); ``legacy_outputs.npz`` holds what they computed then.
The kinetic and potential energies are not among them: the gauge ``T(q, 0) =
0`` moved the kinetic-potential kind's split of ``L`` (not ``L`` itself).
"""

from pathlib import Path

import numpy as np
import pytest

import lnn

DATA = Path(__file__).parent / "data"
KINDS = ("kinetic-potential", "black-box", "structured")


@pytest.fixture(scope="module")
def expected():
    with np.load(DATA / "legacy_outputs.npz") as f:
        return dict(f)


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_saved_before_the_models_package_loads_with_the_same_outputs(kind, expected):
    tag = kind.replace("-", "_")
    model = lnn.load_model(DATA / f"legacy_{tag}.keras")
    assert model.kind == kind and model.dtype == "float64" and model.damping
    q, qd, qdd, tau = (expected[k] for k in ("q", "qd", "qdd", "tau"))
    np.testing.assert_allclose(model.mass_matrix(q, qd).numpy(), expected[f"{tag}/M"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.acceleration(q, qd, tau).numpy(), expected[f"{tag}/qdd"], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(
        model.inverse_dynamics(q, qd, qdd).numpy(), expected[f"{tag}/tau"], rtol=1e-11, atol=1e-11
    )
    np.testing.assert_allclose(model.energy(q, qd).numpy(), expected[f"{tag}/E"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.lagrangian(q, qd).numpy(), expected[f"{tag}/L"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_model_loads_in_the_gauge_with_its_parts(kind, expected):
    """The gauge (T(q, 0) = 0, V = -L(q, 0)) moves only the split of L and E into T and V.

    The saved kinetic-potential model's networks give the same L, E, M and
    dynamics (asserted above); its T and V are those of the gauge, and the
    named parts add up to the saved inverse dynamics.
    """
    tag = kind.replace("-", "_")
    model = lnn.load_model(DATA / f"legacy_{tag}.keras")
    q, qd, qdd = (expected[k] for k in ("q", "qd", "qdd"))
    zero = np.zeros_like(qd)
    np.testing.assert_allclose(model.kinetic_energy(q, zero).numpy(), 0.0, atol=1e-12)
    np.testing.assert_allclose(
        model.potential_energy(q).numpy(), -model.lagrangian(q, zero).numpy(), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        model.kinetic_energy(q, qd).numpy() - model.potential_energy(q).numpy(),
        expected[f"{tag}/L"],
        rtol=1e-11,
        atol=1e-11,
    )
    parts = (
        np.einsum("bij,bj->bi", model.mass_matrix(q, qd).numpy(), qdd)
        + model.coriolis(q, qd).numpy()
        + model.gravity(q).numpy()
        + model.friction_torque(qd).numpy()
    )
    np.testing.assert_allclose(parts, expected[f"{tag}/tau"], rtol=1e-10, atol=1e-10)
