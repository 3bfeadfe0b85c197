"""Tutorial: training on rollouts with the differentiable integrator ``lnn.odeint.odeint``.

A loss on single samples (``qdd``) teaches a model the vector field; a loss on
rollouts teaches it what the vector field does over several steps. This script
trains with ``fit``'s built-in rollout term, integrates the model inside
TensorFlow, writes a rollout loss of its own and takes gradient steps on it,
and compares the energy behaviour of the two fixed-step schemes.

Each step is one block between ``--8<-- [start:NAME]`` and ``--8<-- [end:NAME]``
markers, which the page ``docs/tutorials/rollout-training.md`` includes
(``tests/test_docs.py`` runs the quick mode).

    python docs/tutorials/tutorial_rollout_training.py            # about 3 minutes on 2 cores
    python docs/tutorials/tutorial_rollout_training.py --quick    # a smoke test
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv=None) -> int:
    """Run every step of the tutorial and print what each one produced."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny settings (smoke test)")
    args = parser.parse_args(argv)
    quick = args.quick

    # --8<-- [start:fit]
    import lnn
    import simulations

    system = simulations.Pendulum()  # m = l = 1, g = 9.81; q the angle from the downward vertical
    data = lnn.generate(system, n_trajectories=8 if quick else 100, duration=2.0 if quick else 5.0, dt=0.05, seed=0)
    model = lnn.LagrangianNetwork(system.n_dof, angular=system.angular, hidden=(16, 16) if quick else (64, 64), seed=0)
    history = lnn.fit(
        model,
        data,
        loss={"acceleration": 1.0, "rollout": 1.0},
        horizon=5,
        epochs=1 if quick else None,
        time_limit=None if quick else 150.0,
        seed=0,
    )
    print(
        f"{len(history.epoch)} epochs; last training losses per term: "
        + ", ".join(f"{term} {values[-1]:.3g}" for term, values in history.train.items())
    )
    # --8<-- [end:fit]

    # --8<-- [start:odeint]
    import tensorflow as tf

    import lnn.odeint  # door two: in TensorFlow, differentiable

    state = system.sample_state(4, rng=1)
    t = np.linspace(0.0, 1.0, 101)  # 100 fixed steps of 10 ms
    in_graph = lnn.odeint.odeint(model, state.q, state.qd, t, method="rk4")
    adaptive = lnn.rollout(model, state.q, state.qd, t)
    gap = np.abs(np.asarray(in_graph.q) - adaptive.q).max()
    print(f"odeint (RK4, h = 10 ms) against solve_ivp (DOP853): largest |Δq| {gap:.2g} rad")
    # --8<-- [end:odeint]

    # --8<-- [start:gradient]
    q0 = tf.constant(state.q, model.dtype)
    qd0 = tf.constant(state.qd, model.dtype)
    target = lnn.rollout(system, state.q, state.qd, t[:21])  # the truth over 0.2 s
    target_q = tf.constant(target.q, model.dtype)
    optimizer = tf.keras.optimizers.Adam(1e-3)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            path = lnn.odeint.odeint(model, q0, qd0, t[:21], method="rk4")
            loss = tf.reduce_mean(tf.square(path.q - target_q))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    losses = [float(train_step()) for _ in range(3 if quick else 200)]
    print(f"own rollout loss over {len(losses)} steps: {losses[0]:.4g} -> {losses[-1]:.4g}")
    # --8<-- [end:gradient]

    # --8<-- [start:verlet]
    long = np.linspace(0.0, 5.0 if quick else 50.0, 101 if quick else 1001)  # h = 50 ms
    for method in ("rk4", "verlet"):
        energy = np.asarray(lnn.odeint.odeint(model, state.q, state.qd, long, method=method).energy)
        drift = np.abs(energy - energy[:, :1]).max() / np.abs(energy[:, :1]).max()
        print(f"{method:6s}: largest relative energy error over {long[-1]:g} s: {drift:.2g}")
    # --8<-- [end:verlet]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
