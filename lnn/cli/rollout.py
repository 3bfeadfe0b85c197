"""``lnn rollout``: roll out a learned model and the true system from the same initial states.

The result is one ``.npz`` file of kind ``"rollout-pair"``
(:class:`lnn.plot.RolloutPair`): the true and the learned trajectories on one
time grid, with the system's name, parameters and coordinate types and the
model's path in the metadata, ready for ``lnn plot``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lnn.cli._common import ProgressBar, add_system_arguments, check_output, make_system


def register(subparsers) -> None:
    """Add the ``rollout`` verb."""
    from lnn.integrate import AUTO, method_names

    parser = subparsers.add_parser(
        "rollout",
        help="roll out a learned model and the true system from the same initial states",
        description="Integrate a learned model (.keras) and the true system from the same random "
        "initial states (or replay a dataset's recordings with their torques: --data) and write both "
        "trajectories to one .npz file for `lnn plot`.",
    )
    parser.add_argument("model", metavar="MODEL", help="learned model file (.keras)")
    add_system_arguments(parser, required=False)
    parser.add_argument(
        "--data",
        default=None,
        metavar="DATA",
        help="instead of --system: replay the recordings of a dataset (.npz, e.g. from lnn import): the model "
        "from each one's first state, driven by its measured torques, against what was measured (the first N "
        "recordings of the first one's rate, cut to the shortest and to --duration; their own time grid)",
    )
    parser.add_argument("--trajectories", type=int, default=8, metavar="N", help="number of initial states (default 8)")
    parser.add_argument(
        "--duration", type=float, default=5.0, metavar="S", help="simulated time in seconds (default 5)"
    )
    parser.add_argument(
        "--dt",
        type=float,
        default=None,
        metavar="DT",
        help="sampling interval in seconds (default 0.01; with --data the recordings' own)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, metavar="K", help="seed of the initial states (default 0; not with --data)"
    )
    parser.add_argument(
        "--method",
        choices=method_names() + (AUTO,),
        default=AUTO,
        help="integration method (lnn.integrate.methods(): scipy's, the compiled pairs of lnn.solvers, the "
        "fixed-step rk4 and verlet); the true system (numpy) takes DOP853 where the learned model takes a "
        "compiled or fixed-step one. Default auto: the fastest measured (lnn.integrate.choose_method)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="output file (.npz)")
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    parser.set_defaults(func=run)


def _check_grid(args) -> None:
    """``--trajectories`` a positive integer, ``--duration`` and ``--dt`` (when given) positive, ``dt <= duration``."""
    for name in ("trajectories",):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be a positive integer, got {getattr(args, name)}")
    for name in ("duration", "dt"):
        value = getattr(args, name)
        if value is not None and (not np.isfinite(value) or value <= 0):
            raise ValueError(f"--{name} must be a positive number of seconds, got {value}")
    if args.dt is not None and args.dt > args.duration:
        raise ValueError(f"--dt ({args.dt} s) must not exceed --duration ({args.duration} s)")


def run(args) -> int:
    """Roll out both systems and write the pair; print a one-line summary."""
    import lnn
    from lnn.integrate import method
    from lnn.metrics import rollout_error
    from lnn.plot import RolloutPair

    output = check_output(Path(args.output), force=args.force, suffixes=(".npz",))
    _check_grid(args)
    if (args.system is None) == (args.data is None):
        raise ValueError("give --system NAME (roll out the true system) or --data DATA.npz (replay its recordings)")
    if args.data is not None:
        given = [f"--{name}" for name in ("dt", "seed") if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{' and '.join(given)} apply to --system: --data replays the recordings on their grid")
        return _replay(args, output)
    args.dt = 0.01 if args.dt is None else args.dt
    args.seed = 0 if args.seed is None else args.seed
    system = make_system(args.system, args.param)
    model = lnn.load_model(args.model)
    if model.n_dof != system.n_dof:
        raise ValueError(
            f"model {args.model!r} has n_dof={model.n_dof}, system {args.system!r} has n_dof={system.n_dof}"
        )
    state = system.sample_state(args.trajectories, rng=args.seed)
    steps = int(round(args.duration / args.dt))
    t = np.arange(steps + 1) * args.dt
    # The true system is numpy: a compiled or fixed-step method (TensorFlow) rolls out the learned model only.
    truth_method = args.method if args.method == "auto" or method(args.method).backend == "scipy" else "DOP853"
    true = lnn.rollout(system, state.q, state.qd, t, method=truth_method, progress=ProgressBar("true system  "))
    learned = lnn.rollout(model, state.q, state.qd, t, method=args.method, progress=ProgressBar("learned model"))
    metadata = {
        "system": args.system,
        "parameters": system.parameters(),
        "angular": [bool(a) for a in system.angular],
        "model": str(args.model),
        "method": learned.method,
        "truth_method": true.method,
        "seed": args.seed,
        "dt": args.dt,
        "duration": float(t[-1]),
        "n_trajectories": args.trajectories,
    }
    RolloutPair(true, learned, metadata).save(output, overwrite=args.force)
    error = rollout_error(learned, true, angular=system.angular)
    print(
        f"wrote {output}: {args.trajectories} trajectories x {t.size} samples of {args.system}; "
        f"relative error (geometric mean) {error.geometric_mean:.3g}, median valid "
        f"prediction time {np.median(error.valid_time):.3g} s"
    )
    return 0


def _replay(args, output: Path) -> int:
    """The learned model driven by a dataset's measured torques from its recordings' first states."""
    import lnn
    from lnn.metrics import rollout_error
    from lnn.plot import RolloutPair

    data = lnn.Dataset.load(args.data)
    model = lnn.load_model(args.model)
    if model.n_dof != data.n_dof:
        raise ValueError(f"model {args.model!r} has n_dof={model.n_dof}, dataset {args.data!r} has n_dof={data.n_dof}")
    chosen = data.at_first_rate(limit=args.trajectories)
    ids = chosen.trajectory_ids
    true = chosen.as_trajectory(truncate=True).until(args.duration)
    learned = lnn.rollout(
        model,
        true.q[:, 0],
        true.qd[:, 0],
        true.t,
        tau=true.tau,
        method=args.method,
        progress=ProgressBar("learned model"),
    )
    angular = [bool(a) for a in data.angular] if data.angular else None
    metadata = {
        "system": None,
        "data": str(args.data),
        "trajectory_ids": [int(i) for i in ids],
        "angular": angular,
        "model": str(args.model),
        "method": learned.method,
        "dt": float(np.mean(np.diff(true.t))),
        "duration": float(true.t[-1]),
        "n_trajectories": len(ids),
    }
    RolloutPair(true, learned, metadata).save(output, overwrite=args.force)
    error = rollout_error(learned, true, angular=angular)
    left = data.n_trajectories - len(ids)
    print(
        f"wrote {output}: {len(ids)} recordings x {true.t.size} samples of {args.data} replayed with their torques"
        + (f" ({left} more not replayed: --trajectories, or another rate)" if left else "")
        + f"; relative error (geometric mean) {error.geometric_mean:.3g}, median valid prediction time "
        f"{np.median(error.valid_time):.3g} s"
    )
    return 0
