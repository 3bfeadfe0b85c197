"""``lnn simulate``: write a dataset of simulated trajectories of a built-in system."""

from __future__ import annotations

import time
from pathlib import Path

from lnn.cli._common import ProgressBar, make_system

#: Systems driven by motors, excited by random sums of sinusoids unless told otherwise.
ROBOTS = ("planar-arm", "panda", "cart-pole")
#: Default excitation per robot: arms get gravity compensation plus sinusoids (without it
#: they fall and whirl at tens of rad/s); the cart-pole has no gravity torque to compensate.
DEFAULT_EXCITATION = {"planar-arm": "gravity-sinusoids", "panda": "gravity-sinusoids", "cart-pole": "sinusoids"}


def register(subparsers) -> None:
    """Add the ``simulate`` verb."""
    from lnn.integrate import AUTO, method_names

    parser = subparsers.add_parser(
        "simulate",
        help="simulate a built-in system and write a dataset (.npz)",
        description="Roll out random initial states of a built-in system (see `lnn systems`) "
        "and write the sampled trajectories as an lnn dataset.",
    )
    parser.add_argument("system", metavar="SYSTEM", help="built-in system name, e.g. double-pendulum")
    parser.add_argument(
        "--trajectories", type=int, default=100, metavar="N", help="number of trajectories (default 100)"
    )
    parser.add_argument(
        "--duration", type=float, default=10.0, metavar="S", help="length of each trajectory in seconds (default 10)"
    )
    parser.add_argument(
        "--dt", type=float, default=0.01, metavar="DT", help="sampling interval in seconds (default 0.01)"
    )
    parser.add_argument("--seed", type=int, default=0, metavar="K", help="random seed (default 0)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="output dataset file (.npz)")
    parser.add_argument(
        "--method",
        choices=method_names("scipy") + (AUTO,),
        default="DOP853",
        help="solve_ivp method (default DOP853; auto picks it too): the built-in systems are numpy, which the "
        "compiled and fixed-step methods of lnn.integrate.methods() (TensorFlow) do not integrate",
    )
    parser.add_argument("--rtol", type=float, default=1e-8, help="relative tolerance (default 1e-8)")
    parser.add_argument("--atol", type=float, default=1e-10, help="absolute tolerance (default 1e-10)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="system parameter, repeatable; lists are comma-separated, e.g. --param masses=1,2,0.5",
    )
    parser.add_argument(
        "--excitation",
        choices=("none", "sinusoids", "gravity-sinusoids", "joint"),
        default=None,
        help="excitation torques (default: gravity-sinusoids, i.e. gravity "
        "compensation plus random sinusoids, for planar-arm and panda; "
        "sinusoids for cart-pole; none otherwise); joint: prescribed "
        "joint motions (random sinusoids around random centres within "
        "the joint limits) with the inverse-dynamics torques that produce "
        "them, as robot identification does (no ODE solved; --method, "
        "--rtol and --atol do not apply)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Simulate, write the dataset and print a one-line summary."""
    from lnn.data import excitation_trajectories, generate

    output = Path(args.output)
    if output.suffix != ".npz":
        raise ValueError(f"the output file must end in '.npz'; got {args.output!r}")
    if output.exists() and not args.force:
        raise FileExistsError(f"{args.output!r} exists; pass --force to overwrite it")
    if not output.parent.exists():
        raise FileNotFoundError(f"directory {str(output.parent)!r} does not exist")
    system = make_system(args.system, args.param)
    excitation = args.excitation or DEFAULT_EXCITATION.get(args.system, "none")
    start = time.monotonic()
    progress = ProgressBar(f"simulate {args.system}")
    if excitation == "joint":
        dataset = excitation_trajectories(
            system,
            n_trajectories=args.trajectories,
            duration=args.duration,
            dt=args.dt,
            seed=args.seed,
            progress=progress,
        )
        how = "inverse dynamics"
    else:
        dataset = generate(
            system,
            n_trajectories=args.trajectories,
            duration=args.duration,
            dt=args.dt,
            seed=args.seed,
            tau=None if excitation == "none" else excitation,
            method=args.method,
            rtol=args.rtol,
            atol=args.atol,
            progress=progress,
        )
        how = args.method
    dataset.save(output, overwrite=args.force)
    samples = len(dataset) // dataset.n_trajectories
    print(
        f"wrote {args.output}: {dataset.n_trajectories} trajectories x {samples} samples of "
        f"{args.system} (n_dof={dataset.n_dof}), dt={args.dt:g} s, excitation={excitation}, "
        f"{how}, {time.monotonic() - start:.1f} s"
    )
    return 0
