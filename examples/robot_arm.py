"""Learn a robot arm's dynamics from excitation trajectories, then control it with them.

A robot's inverse dynamics ``tau = M(q) qdd + c(q, qd) + g(q)`` is what a
computed-torque controller needs: ``tau = ID(q, qd, qdd_ref + Kp e + Kd ė)``
cancels the arm's nonlinear dynamics and leaves a linear error system. Here a
Lagrangian network learns the inverse dynamics of a 2-link planar arm — and,
with ``--panda``, of the 7-DOF Franka Panda — from prescribed joint motions
and the torques that produce them (``lnn.excitation_trajectories``, the data
of robot identification; torque-excited data leave a 7-DOF arm's mass matrix
badly identified, see the README's accuracy section). The planar arm gets
DeLaN's structured model (torque loss plus the acceleration loss, without
which a structured ``M`` can shrink towards zero while the torques stay
right), the Panda the kinetic-potential model on the torque loss (6x more
accurate there in ``benchmarks/bench_accuracy.py``). The learned model then
tracks a reference trajectory on the *true* arm; the figure compares its
tracking error with PD control alone (no model) and with computed torque
using the exact model.

    python examples/robot_arm.py             # planar arm, about 3 minutes
    python examples/robot_arm.py --panda     # adds the Panda (needs the robots extra)
    python examples/robot_arm.py --quick     # a smoke test
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import lnn
import simulations
from lnn.metrics import torque_error


@dataclass(frozen=True)
class Reference:
    """A smooth joint-space reference ``q_ref(t) = q_c + a sin(w t + phi)`` and its derivatives."""

    center: np.ndarray
    amplitude: np.ndarray
    omega: np.ndarray
    phase: np.ndarray

    def __call__(self, t: float):
        """``(q_ref, qd_ref, qdd_ref)`` at time ``t``, each ``(n,)``."""
        arg = self.omega * t + self.phase
        return (
            self.center + self.amplitude * np.sin(arg),
            self.amplitude * self.omega * np.cos(arg),
            -self.amplitude * self.omega**2 * np.sin(arg),
        )


@dataclass(frozen=True)
class ComputedTorque:
    """``tau = ID(q, qd, qdd_ref + Kp (q_ref - q) + Kd (qd_ref - qd))``; ``model=None`` gives PD control."""

    reference: Reference
    model: object
    kp: float = 100.0
    kd: float = 20.0

    def __call__(self, t, q, qd):
        """The controller's torques, ``(B, n)``, as ``lnn.rollout`` calls it."""
        q_ref, qd_ref, qdd_ref = self.reference(t)
        v = qdd_ref + self.kp * (q_ref - q) + self.kd * (qd_ref - qd)
        if self.model is None:
            return v  # PD on the error, no dynamics model (unit "inertia")
        return np.asarray(self.model.inverse_dynamics(q, qd, v), dtype=np.float64)


def learn_arm(system, *, quick: bool, time_limit: float, seed: int = 0):
    """Generate excitation trajectories, train a model on the torques, report the torque error."""
    # Excursions of 0.5 rad around random centres cover the references tracked below.
    data = lnn.excitation_trajectories(
        system,
        n_trajectories=8 if quick else (5000 if system.n_dof > 2 else 1000),
        duration=1.0,
        dt=0.02,
        seed=seed,
        amplitude=0.5,
    )
    split = data.split(fractions=(0.8, 0.1, 0.1), seed=seed)
    loss: str | dict[str, float]
    if system.n_dof > 2:
        kind, loss, learning_rate = "kinetic-potential", "torque", 1e-2
    else:
        kind, loss, learning_rate = "structured", {"torque": 1.0, "acceleration": 1.0}, 3e-3
    model = lnn.LagrangianNetwork(
        system.n_dof, kind=kind, angular=system.angular, hidden=(32, 32) if quick else (128, 128), seed=seed
    )
    history = lnn.fit(
        model,
        split.train,
        validation=split.validation,
        loss=loss,
        learning_rate=learning_rate,
        epochs=100 if quick else 1000,
        time_limit=None if quick else time_limit,
        seed=seed,
    )
    test = split.test
    error = torque_error(np.asarray(model.inverse_dynamics(test.q, test.qd, test.qdd)), test.tau)
    print(
        f"{system.name}: {len(history.epoch)} epochs ({history.stopped_reason}); held-out torque "
        f"MSE {error.mse:.3g}, normalised MSE {error.nmse:.2e}"
    )
    return model


def track(system, model, *, duration: float, seed: int = 0):
    """Track a reference on the true system with PD, learned and exact computed torque."""
    rng = np.random.default_rng(seed + 7)
    start = system.sample_state(1, rng=seed + 5)
    n = system.n_dof
    reference = Reference(
        center=start.q[0], amplitude=rng.uniform(0.2, 0.5, n), omega=rng.uniform(1.0, 3.0, n), phase=np.zeros(n)
    )
    t = np.linspace(0.0, duration, int(duration * 100) + 1)
    q0, qd0, _ = reference(0.0)
    errors = {}
    for label, controller in (
        ("PD only", ComputedTorque(reference, None)),
        ("learned model", ComputedTorque(reference, model)),
        ("exact model", ComputedTorque(reference, system)),
    ):
        try:
            run = lnn.rollout(system, q0[None], qd0[None], t, tau=controller, rtol=1e-7, atol=1e-9)
        except lnn.IntegrationError as exc:  # e.g. an under-trained model's torques blow up
            print(f"{system.name}: {label:14s} diverged: {exc}")
            continue
        q_ref = np.stack([reference(ti)[0] for ti in t])
        errors[label] = np.linalg.norm(run.q[0] - q_ref, axis=-1)
        print(f"{system.name}: {label:14s} RMS tracking error {np.sqrt(np.mean(errors[label] ** 2)):.2e} rad")
    return t, errors


def plot_tracking(results: dict, path: Path) -> None:
    """One panel per arm: tracking error over time (log scale) for each controller."""
    with lnn.plot.style():
        fig = lnn.plot.new_figure(width=lnn.plot.COLUMN_WIDTH * len(results), height=2.4)
        axes = fig.subplots(1, len(results), squeeze=False)[0]
        for ax, (name, (t, errors)) in zip(axes, results.items()):
            for k, (label, error) in enumerate(errors.items()):
                ax.semilogy(t, np.maximum(error, 1e-12), color=list(lnn.plot.PALETTE.values())[k], label=label)
            ax.set_title(name)
            ax.set_xlabel("time $t$ [s]")
            ax.set_ylabel(r"$\|q - q_\mathrm{ref}\|$ [rad]")
        axes[0].legend()
        lnn.plot.save(fig, path, overwrite=True)


def main(argv=None) -> int:
    """Learn the arms, track a reference with each controller, plot the errors."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--panda", action="store_true", help="also learn and control the Panda")
    parser.add_argument("--output-dir", default="robot-arm-output", type=Path)
    parser.add_argument("--time-limit", type=float, default=150.0, help="training budget per arm (s)")
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)

    systems = [simulations.PlanarArm()] + ([simulations.panda()] if args.panda else [])
    results = {}
    for system in systems:
        model = learn_arm(system, quick=args.quick, time_limit=args.time_limit)
        model.save(args.output_dir / f"{system.name}.keras")
        results[system.name] = track(system, model, duration=1.0 if args.quick else 5.0)
    plot_tracking(results, args.output_dir / "tracking.png")
    print(f"wrote {args.output_dir}/tracking.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
