"""``lnn identify``: learn a robot from a dataset with measured torques (:func:`lnn.identify`).

With ``--urdf`` the robot's URDF is the rigid-body prior (its inertias are
identified, not trusted); without it a Lagrangian network with friction is
trained. The verb prints each stage's validation torque error and writes the
chosen model (``.keras``, read back by :func:`lnn.load_model`).
"""

from __future__ import annotations

from pathlib import Path

from lnn.cli._common import check_output


def register(subparsers) -> None:
    """Add the ``identify`` verb."""
    parser = subparsers.add_parser(
        "identify",
        help="learn a robot's dynamics from a dataset with measured torques",
        description="The package's recipe for robots (lnn.identify): with --urdf, identify every "
        "body's inertial parameters and the joints' friction by least squares "
        "(regularised towards the URDF as much as held-out data asks, kept physical), "
        "then learn a residual Lagrangian network; without it, train a structured "
        "Lagrangian network with friction. The stage with the lowest validation "
        "torque error is written.",
    )
    parser.add_argument("data", metavar="DATA", help="dataset (.npz, e.g. written by lnn import)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="model file (.keras)")
    parser.add_argument("--urdf", default=None, metavar="FILE", help="the robot's URDF (the prior)")
    parser.add_argument(
        "--add-missing-links",
        action="store_true",
        help="accept a URDF whose joints name links it never defines (e.g. a Drake 'world' link) by adding them, empty",
    )
    parser.add_argument(
        "--friction",
        default="viscous+coulomb",
        metavar="TERMS",
        help="friction terms joined by '+' (viscous, coulomb, offset) or 'none' (default: viscous+coulomb)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="time budget of the trained stages in seconds (default 120)",
    )
    parser.add_argument(
        "--validation",
        type=float,
        default=0.1,
        metavar="F",
        help="fraction held out to choose stages and settings (default 0.1)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Identify, print the stages, save the model."""
    import lnn

    output = check_output(Path(args.output), force=args.force, suffixes=(".keras",))
    dataset = lnn.Dataset.load(args.data)
    prior = None
    if args.urdf is not None:
        import simulations

        prior = simulations.URDFRobot.from_urdf(args.urdf, missing_links="add" if args.add_missing_links else "error")
    friction = None if args.friction.strip().lower() == "none" else args.friction
    print(
        f"identifying {args.data}: {len(dataset)} samples, n_dof={dataset.n_dof}"
        + (f", prior {args.urdf}" if prior is not None else ", no prior"),
        flush=True,
    )
    model = lnn.identify(
        dataset,
        prior=prior,
        friction=friction,
        time_limit=args.time_limit,
        seed=args.seed,
        validation=args.validation,
        progress=lambda message: print("  " + message, flush=True),
    )
    print(model.report.format())
    model.save(output, overwrite=args.force)
    print(f"wrote {output} (stage {model.report.chosen!r})")
    return 0
