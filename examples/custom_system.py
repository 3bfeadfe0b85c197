"""Your own system: define it, generate data, learn it, check the learned physics.

The system here is an elastic (spring) pendulum, which is not built in: a bob
of mass ``m`` on a spring of stiffness ``k`` and rest length ``l0`` swinging
under gravity, with coordinates ``q = (r, θ)`` — a length (not an angle) and
an angle from the downward vertical. Anything with the attributes and methods
of :class:`lnn.MechanicalSystem` (plus ``sample_state`` and ``positions`` for
data generation and animations) works with ``lnn.generate``, ``lnn.rollout``,
the metrics and the plots.

    python examples/custom_system.py                 # about 3 minutes on 2 cores
    python examples/custom_system.py --quick         # seconds (a smoke test)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import lnn
from lnn.metrics import evaluate
from simulations import State


@dataclass(frozen=True)
class SpringPendulum:
    """Elastic pendulum: ``T = m (ṙ² + r² θ̇²) / 2``, ``V = k (r − l0)² / 2 − m g r cos θ``."""

    m: float = 1.0
    k: float = 40.0
    l0: float = 1.0
    g: float = 9.81

    name = "spring-pendulum"
    n_dof = 2
    angular = (False, True)

    def parameters(self) -> dict:
        """The physical parameters (JSON-serialisable)."""
        return {"m": self.m, "k": self.k, "l0": self.l0, "g": self.g}

    def mass_matrix(self, q, qd=None):
        """``M = diag(m, m r²)``, shape ``(..., 2, 2)``."""
        r = np.asarray(q)[..., 0]
        M = np.zeros(r.shape + (2, 2))
        M[..., 0, 0] = self.m
        M[..., 1, 1] = self.m * r**2
        return M

    def potential_energy(self, q):
        """Spring plus gravity, shape ``(...)``."""
        r, theta = np.moveaxis(np.asarray(q), -1, 0)
        return 0.5 * self.k * (r - self.l0) ** 2 - self.m * self.g * r * np.cos(theta)

    def kinetic_energy(self, q, qd):
        """``m (ṙ² + r² θ̇²) / 2``, shape ``(...)``."""
        r = np.asarray(q)[..., 0]
        rd, thetad = np.moveaxis(np.asarray(qd), -1, 0)
        return 0.5 * self.m * (rd**2 + r**2 * thetad**2)

    def energy(self, q, qd):
        """``E = T + V``, shape ``(...)``."""
        return self.kinetic_energy(q, qd) + self.potential_energy(q)

    def _bias(self, q, qd):
        """Coriolis, centrifugal and gravity terms ``h`` with ``M qdd + h = tau``."""
        r, theta = np.moveaxis(np.asarray(q), -1, 0)
        rd, thetad = np.moveaxis(np.asarray(qd), -1, 0)
        h_r = -self.m * r * thetad**2 + self.k * (r - self.l0) - self.m * self.g * np.cos(theta)
        h_theta = 2.0 * self.m * r * rd * thetad + self.m * self.g * r * np.sin(theta)
        return np.stack([h_r, h_theta], axis=-1)

    def acceleration(self, q, qd, tau=None):
        """Euler–Lagrange accelerations, shape ``(..., 2)``."""
        rhs = -self._bias(q, qd) + (0.0 if tau is None else np.asarray(tau))
        return rhs / np.diagonal(self.mass_matrix(q), axis1=-2, axis2=-1)

    def inverse_dynamics(self, q, qd, qdd):
        """``tau = M qdd + h``, shape ``(..., 2)``."""
        return np.diagonal(self.mass_matrix(q), axis1=-2, axis2=-1) * np.asarray(qdd) + self._bias(q, qd)

    def positions(self, q):
        """Pivot and bob, shape ``(..., 2, 2)``."""
        r, theta = np.moveaxis(np.asarray(q), -1, 0)
        bob = np.stack([r * np.sin(theta), -r * np.cos(theta)], axis=-1)
        return np.stack([np.zeros_like(bob), bob], axis=-2)

    def sample_state(self, n, *, rng):
        """Random states around the static equilibrium ``r = l0 + m g / k``."""
        rng = np.random.default_rng(rng)
        r_eq = self.l0 + self.m * self.g / self.k
        q = np.stack([r_eq + rng.uniform(-0.2, 0.2, n), rng.uniform(-1.2, 1.2, n)], axis=-1)
        qd = rng.normal(0.0, [0.5, 1.0], size=(n, 2))
        return State(q=q, qd=qd)


def main(argv=None) -> int:
    """Generate data of the spring pendulum, learn it, evaluate and plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="custom-system-output", type=Path)
    parser.add_argument("--time-limit", type=float, default=120.0, help="training budget (s)")
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    args = parser.parse_args(argv)
    quick = args.quick
    args.output_dir.mkdir(parents=True, exist_ok=True)

    system = SpringPendulum()
    data = lnn.generate(system, n_trajectories=8 if quick else 150, duration=2.0 if quick else 5.0, dt=0.05, seed=0)
    held_out = lnn.generate(system, n_trajectories=4 if quick else 16, duration=2.0 if quick else 5.0, dt=0.05, seed=1)
    # Quadratic kinetic energy: the structured (DeLaN) model fits it exactly.
    model = lnn.LagrangianNetwork(
        system.n_dof, kind="structured", hidden=(32, 32) if quick else (128, 128), angular=system.angular, seed=0
    )
    history = lnn.fit(
        model,
        data,
        loss="acceleration",
        epochs=100 if quick else 400,
        time_limit=None if quick else args.time_limit,
        seed=0,
    )
    print(f"trained {len(history.epoch)} epochs ({history.stopped_reason})")

    table = evaluate(model, held_out, true_system=system, n_rollouts=len(np.unique(held_out.trajectory)))
    print(table.format())

    # The learned mass matrix against the true diag(m, m r²) along a slice of r.
    figure = lnn.plot.mass_matrix(system, model, coordinate=0, values=np.linspace(0.9, 1.6, 30))
    lnn.plot.save(figure.figure, args.output_dir / "mass_matrix.png", overwrite=True)
    paper = lnn.plot.paper_figure(table.details["reference"], table.details["predicted"], system=system)
    lnn.plot.save(paper.figure, args.output_dir / "spring_pendulum.png", overwrite=True)
    model.save(args.output_dir / "spring_pendulum.keras")
    print(f"wrote {args.output_dir}/mass_matrix.png, spring_pendulum.png, spring_pendulum.keras")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
