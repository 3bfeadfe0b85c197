"""The double pendulum and the planar arms against equations derived by sympy.physics.mechanics.

The equations here are derived from the geometry (frames, points, bodies and
applied torques) by ``LagrangesMethod``, independently of the closed forms in
``simulations``; they are compared at random states to 1e-10.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from simulations import DoublePendulum, NPendulum, PlanarArm

from conftest import random_states

sympy = pytest.importorskip("sympy")
me = pytest.importorskip("sympy.physics.mechanics")

SEED = 1234


def _lambdify_lagrange(lagrangian, qs, forcelist, frame, params):
    """Return numeric ``M(q, p)`` and ``F(q, qd, tau, p)`` with ``M qdd = F``."""
    method = me.LagrangesMethod(lagrangian, qs, forcelist=forcelist, frame=frame)
    method.form_lagranges_equations()
    qds = [sympy.diff(q, me.dynamicsymbols._t) for q in qs]
    q_syms = sympy.symbols(f"q0:{len(qs)}")
    qd_syms = sympy.symbols(f"qd0:{len(qs)}")
    subs = dict(zip(qds, qd_syms)) | dict(zip(qs, q_syms))
    mass = method.mass_matrix.subs(subs)
    forcing = method.forcing.subs(subs)
    taus = params["tau"]
    consts = params["constants"]
    mass_fn = sympy.lambdify([q_syms, consts], mass, "numpy")
    forcing_fn = sympy.lambdify([q_syms, qd_syms, taus, consts], forcing, "numpy")
    return mass_fn, forcing_fn


@functools.cache
def double_pendulum_equations():
    """Point masses on massless rods, absolute angles from the downward vertical."""
    q1, q2 = me.dynamicsymbols("q1 q2")
    m1, m2, l1, l2, g = sympy.symbols("m1 m2 l1 l2 g", positive=True)
    tau1, tau2 = sympy.symbols("tau1 tau2")
    frame = me.ReferenceFrame("N")
    rod1 = frame.orientnew("A", "Axis", [q1, frame.z])
    rod2 = frame.orientnew("B", "Axis", [q2, frame.z])  # absolute angle: oriented from N
    pivot = me.Point("O")
    pivot.set_vel(frame, 0)
    bob1 = pivot.locatenew("P1", -l1 * rod1.y)
    bob2 = bob1.locatenew("P2", -l2 * rod2.y)
    bob1.v2pt_theory(pivot, frame, rod1)
    bob2.v2pt_theory(bob1, frame, rod2)
    particles = [me.Particle("p1", bob1, m1), me.Particle("p2", bob2, m2)]
    particles[0].potential_energy = m1 * g * bob1.pos_from(pivot).dot(frame.y)
    particles[1].potential_energy = m2 * g * bob2.pos_from(pivot).dot(frame.y)
    lagrangian = me.Lagrangian(frame, *particles)
    # Torques about the absolute angles: rod frames rotate at q1', q2' in N.
    forces = [(rod1, tau1 * frame.z), (rod2, tau2 * frame.z)]
    return _lambdify_lagrange(
        lagrangian, [q1, q2], forces, frame, {"tau": [tau1, tau2], "constants": [m1, m2, l1, l2, g]}
    )


@functools.cache
def planar_arm_equations(n):
    """Uniform rods, relative joint angles, motors and viscous friction at the joints."""
    qs = me.dynamicsymbols(f"q1:{n + 1}")
    masses = sympy.symbols(f"m1:{n + 1}", positive=True)
    lengths = sympy.symbols(f"l1:{n + 1}", positive=True)
    taus = sympy.symbols(f"tau1:{n + 1}")
    g, c = sympy.symbols("g c", nonnegative=True)
    frame = me.ReferenceFrame("N")
    base = me.Point("O")
    base.set_vel(frame, 0)
    joint, parent = base, frame
    bodies, link_frames = [], []
    for i in range(n):
        link = parent.orientnew(f"L{i}", "Axis", [qs[i], parent.z])  # relative joint angle
        centre = joint.locatenew(f"C{i}", -lengths[i] / 2 * link.y)
        centre.v2pt_theory(joint, frame, link)
        inertia = (me.inertia(link, 0, 0, masses[i] * lengths[i] ** 2 / 12), centre)
        body = me.RigidBody(f"B{i}", centre, link, masses[i], inertia)
        body.potential_energy = masses[i] * g * centre.pos_from(base).dot(frame.y)
        bodies.append(body)
        link_frames.append(link)
        next_joint = joint.locatenew(f"J{i + 1}", -lengths[i] * link.y)
        next_joint.v2pt_theory(joint, frame, link)
        joint, parent = next_joint, link
    lagrangian = me.Lagrangian(frame, *bodies)
    # Joint i drives link i against link i-1; viscous friction acts the same way.
    qds = [sympy.diff(q, me.dynamicsymbols._t) for q in qs]
    joint_torque = [taus[i] - c * qds[i] for i in range(n)]
    forces = []
    for i, link in enumerate(link_frames):
        torque = joint_torque[i] - (joint_torque[i + 1] if i + 1 < n else 0)
        forces.append((link, torque * frame.z))
    return _lambdify_lagrange(
        lagrangian, qs, forces, frame, {"tau": list(taus), "constants": [*masses, *lengths, g, c]}
    )


def _states(n, size=25, seed=SEED):
    return random_states(n, size, seed, angles=True, scales=(1.0, 2.0, 3.0))


def _sympy_dynamics(mass_fn, forcing_fn, q, qd, tau, consts):
    masses = np.array([np.array(mass_fn(qi, consts), dtype=float) for qi in q])
    forcing = np.array(
        [np.array(forcing_fn(qi, vi, ti, consts), dtype=float).ravel() for qi, vi, ti in zip(q, qd, tau)]
    )
    return masses, np.linalg.solve(masses, forcing[..., None])[..., 0]


@pytest.mark.parametrize("cls", [DoublePendulum, NPendulum])
def test_double_pendulum_matches_sympy(cls):
    m1, m2, l1, l2, g = 1.3, 0.7, 0.9, 1.4, 9.81
    system = (
        DoublePendulum(m1=m1, m2=m2, l1=l1, l2=l2, g=g)
        if cls is DoublePendulum
        else NPendulum(masses=(m1, m2), lengths=(l1, l2), g=g)
    )
    q, qd, tau = _states(2)
    mass, qdd = _sympy_dynamics(*double_pendulum_equations(), q, qd, tau, [m1, m2, l1, l2, g])
    np.testing.assert_allclose(system.mass_matrix(q), mass, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(system.acceleration(q, qd, tau), qdd, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n, damping", [(2, 0.0), (2, 0.3), (3, 0.0), (3, 0.25)])
def test_planar_arm_matches_sympy(n, damping):
    rng = np.random.default_rng(n)
    masses = tuple(rng.uniform(0.5, 2.0, n))
    lengths = tuple(rng.uniform(0.3, 1.2, n))
    g = 9.81
    arm = PlanarArm(masses=masses, lengths=lengths, g=g, damping=damping)
    q, qd, tau = _states(n)
    mass, qdd = _sympy_dynamics(*planar_arm_equations(n), q, qd, tau, [*masses, *lengths, g, damping])
    np.testing.assert_allclose(arm.mass_matrix(q), mass, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(arm.acceleration(q, qd, tau), qdd, rtol=1e-10, atol=1e-10)
