"""Models saved by earlier releases still load and give the same outputs.

``tests/data/legacy_*.keras`` were written before the model kinds moved into
``lnn/models/`` (one float64 model per kind, angular and linear coordinates,
learned damping, adapted input scaling, weights moved off their
initialisation); ``legacy_outputs.npz`` holds what they computed then.
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
    np.testing.assert_allclose(model.acceleration(q, qd, tau).numpy(), expected[f"{tag}/qdd"],
                               rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(model.inverse_dynamics(q, qd, qdd).numpy(), expected[f"{tag}/tau"],
                               rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(model.energy(q, qd).numpy(), expected[f"{tag}/E"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.lagrangian(q, qd).numpy(), expected[f"{tag}/L"], rtol=1e-12, atol=1e-12)
