"""The rigid-body prior kind: fed the true inertias it is the true system (float64).

Against the planar arm's closed form and Pinocchio's Panda (M, qdd, tau, E);
its closed form (Newton-Euler) against the Hessian of its own ``T`` by nested
tapes; the log-Cholesky coordinates round-trip physical bodies; save/load.
"""

from __future__ import annotations

import numpy as np
import pytest

import lnn
import simulations
from lnn import mechanics
from lnn.models import RigidBodyChain
from lnn.models.chain import from_log_cholesky, log_cholesky, pseudo_inertia, standard_parameters


def _rigid(system, **options):
    return lnn.LagrangianNetwork(
        system.n_dof, kind="rigid-body", prior=system, angular=system.angular, dtype="float64", xla=False, **options
    )


def _states(n, batch=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, n)), rng.normal(size=(batch, n)), rng.normal(size=(batch, n))


def _assert_equals_system(model, system, q, qd, a):
    M = system.mass_matrix(q)
    np.testing.assert_allclose(model.mass_matrix(q).numpy(), M, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        model.inverse_dynamics(q, qd, a).numpy(), system.inverse_dynamics(q, qd, a), rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(model.energy(q, qd).numpy(), system.energy(q, qd), rtol=0, atol=1e-10)
    # qdd = M^-1 (...): both sides carry rounding amplified by cond(M); compare relative to its size.
    qdd, ref = model.acceleration(q, qd, a).numpy(), system.acceleration(q, qd, a)
    scale = np.abs(ref).max(axis=-1, keepdims=True)
    assert np.all(np.abs(qdd - ref) <= 1e-10 * np.linalg.cond(M)[:, None] * scale)


def test_planar_arm_with_its_true_parameters_is_the_planar_arm():
    arm = simulations.PlanarArm(masses=(1.0, 0.7, 0.5), lengths=(1.0, 0.8, 0.6))
    _assert_equals_system(_rigid(arm), arm, *_states(3))


@pytest.mark.robots
def test_panda_with_its_true_parameters_is_pinocchios_panda():
    pytest.importorskip("pinocchio")
    panda = simulations.panda()
    _assert_equals_system(_rigid(panda), panda, *_states(panda.n_dof, batch=3, seed=1))


def test_closed_form_equals_the_hessian_of_its_own_kinetic_energy_by_nested_tapes():
    arm = simulations.PlanarArm(masses=(1.2, 0.6), lengths=(0.9, 0.7))
    model = _rigid(arm, residual=True, hidden=(8, 8), friction="viscous+coulomb")
    rng = np.random.default_rng(3)
    for var in model.trainable_variables:  # move away from the prior and from a near-zero residual
        var.assign(np.asarray(var) + 0.3 * rng.normal(size=var.shape))
    q, qd, tau = _states(2, batch=6, seed=4)
    tapes = model.kind_model.tape_lagrangian()
    force = tau + np.asarray(model._friction_force(qd))
    np.testing.assert_allclose(
        model.mass_matrix(q).numpy(), mechanics.mass_matrix(tapes, q, qd).numpy(), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(
        model.acceleration(q, qd, tau).numpy(),
        mechanics.acceleration(tapes, q, qd, force).numpy(),
        rtol=1e-9,
        atol=1e-10,
    )


def test_newton_euler_inverse_dynamics_with_a_residual_equals_the_mass_matrix_form_and_the_tapes():
    """The O(n) inverse dynamics (Newton-Euler + forward-over-reverse residual) = M qdd + C qd + g."""
    from lnn.models.registry import Kind

    panda = simulations.panda() if _has_pinocchio() else simulations.PlanarArm(masses=(1.0, 0.7, 0.5))
    model = _rigid(panda, residual=True, hidden=(8, 8), friction="viscous+coulomb")
    rng = np.random.default_rng(5)
    for var in model.trainable_variables:
        var.assign(np.asarray(var) + 0.3 * rng.normal(size=var.shape))
    q, qd, qdd = _states(panda.n_dof, batch=6, seed=7)
    fast = model.inverse_dynamics(q, qd, qdd).numpy()
    import tensorflow as tf

    args = [tf.constant(x) for x in (q, qd, qdd)]
    by_mass = Kind.inverse_dynamics(model.kind_model, *args).numpy() - np.asarray(model._force_graph(*args[:2]))
    np.testing.assert_allclose(fast, by_mass, rtol=1e-10, atol=1e-10)
    tapes = mechanics.inverse_dynamics(model.kind_model.tape_lagrangian(), q, qd, qdd).numpy()
    np.testing.assert_allclose(fast, tapes - np.asarray(model._force_graph(*args[:2])), rtol=1e-9, atol=1e-9)
    # and it inverts the forward dynamics
    np.testing.assert_allclose(model.acceleration(q, qd, fast).numpy(), qdd, rtol=1e-8, atol=1e-8)


def _has_pinocchio() -> bool:
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_body_stays_physical_and_log_cholesky_round_trips():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(20, 10))
    J = from_log_cholesky(theta)
    assert np.all(np.linalg.eigvalsh(J) > 0)
    pi = standard_parameters(J)
    np.testing.assert_allclose(pseudo_inertia(pi), J, atol=1e-12)
    np.testing.assert_allclose(log_cholesky(pi), theta, atol=1e-9)
    with pytest.raises(ValueError, match="body 0 is not physical"):
        log_cholesky(np.array([-1.0, 0, 0, 0, 1, 0, 1, 0, 0, 1]))


def test_save_load_keeps_the_prior_the_residual_and_the_learned_inertias(tmp_path):
    arm = simulations.PlanarArm()
    model = _rigid(arm, residual=True, hidden=(8,), friction="viscous")
    model.kind_model.assign(RigidBodyChain.from_system(arm).inertias * 1.1)
    path = tmp_path / "rigid.keras"
    model.save(path)
    loaded = lnn.load_model(path)
    q, qd, a = _states(2)
    np.testing.assert_allclose(
        loaded.inverse_dynamics(q, qd, a).numpy(), model.inverse_dynamics(q, qd, a).numpy(), atol=1e-12
    )
    np.testing.assert_allclose(loaded.kind_model.chain().inertias, model.kind_model.chain().inertias, atol=1e-12)


def test_bad_priors_are_refused_clearly():
    with pytest.raises(ValueError, match="needs prior="):
        lnn.LagrangianNetwork(2, kind="rigid-body")
    with pytest.raises(ValueError, match="prior has 2 joints"):
        lnn.LagrangianNetwork(3, kind="rigid-body", prior=simulations.PlanarArm())
    with pytest.raises(ValueError, match="prior= applies to kind 'rigid-body' only"):
        lnn.LagrangianNetwork(2, kind="kinetic-potential", prior=simulations.PlanarArm())
    with pytest.raises(ValueError, match="residual= applies to kind 'rigid-body' or 'trigonometric' only"):
        lnn.LagrangianNetwork(2, kind="structured", residual=True)
    with pytest.raises(TypeError, match="rigid-body prior must be"):
        lnn.LagrangianNetwork(2, kind="rigid-body", prior=object())
