"""``lnn identify``: learn a robot from a dataset with measured torques (:func:`lnn.identify`).

With ``--urdf`` the robot's URDF is the rigid-body prior (its inertias are
identified, not trusted); without it a trigonometric Lagrangian (``M(q)``
and ``V(q)`` linear in their parameters, no kinematics) takes the rigid
body's place. The dataset's coordinates are the URDF's joints named by
``--joints`` (or the dataset's own joint names, e.g. from a ROS bag); the
URDF's other joints are locked at zero. The verb prints each stage's
validation torque error and what the rigid body left, and writes the chosen
model (``.keras``, read back by :func:`lnn.load_model`).
"""

from __future__ import annotations

from pathlib import Path

from lnn.cli._common import check_output, print_calibration, print_urdf_report, refuse_overwrite


def register(subparsers) -> None:
    """Add the ``identify`` verb."""
    from lnn._catalog import BUILT_IN_FORCES, DEFAULT_FRICTION  # not the models': --help imports no TensorFlow

    parser = subparsers.add_parser(
        "identify",
        help="learn a robot's dynamics from a dataset with measured torques",
        description="The package's recipe for robots (lnn.identify): with --urdf, identify every "
        "body's inertial parameters, the joints' friction and the torque offsets by least squares "
        "(regularised towards the URDF as much as held-out data asks, kept physical), "
        "then learn a passive friction network of each joint's state (and, on request, a residual Lagrangian); "
        "without it, fit a trigonometric Lagrangian (mass matrix and potential linear in their "
        "parameters over products of the joints' cos and sin: no kinematics needed) by the same "
        "least squares, then the same learned stages. The simplest stage whose validation "
        "torque error is within one standard error of the lowest is written.",
    )
    parser.add_argument("data", metavar="DATA", help="dataset (.npz, e.g. written by lnn import)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="model file (.keras)")
    parser.add_argument("--urdf", default=None, metavar="FILE", help="the robot's URDF (the prior)")
    parser.add_argument(
        "--joints",
        default=None,
        metavar="J1,J2,...",
        help="the URDF joints of the dataset's coordinates, in the dataset's order (default: the dataset's "
        "joint names, e.g. from a ROS bag); the URDF's other joints are locked at zero",
    )
    parser.add_argument(
        "--add-missing-links",
        action="store_true",
        help="accept a URDF whose joints name links it never defines (e.g. a Drake 'world' link) by adding them, empty",
    )
    parser.add_argument(
        "--friction",
        default=DEFAULT_FRICTION,
        metavar="TERMS",
        help=f"forces joined by '+' (built in: {', '.join(BUILT_IN_FORCES)}) or 'none' "
        f"(default: {DEFAULT_FRICTION}); the linear ones are fitted by least squares, the others learned",
    )
    parser.add_argument(
        "--offsets",
        choices=("auto", "recording", "constant", "none"),
        default="auto",
        help="torque offsets: a constant one plus a nuisance deviation per recording, a constant one, none, or "
        "auto (default: the leave-one-recording-out validation chooses among the three)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="time budget of the trained stages in seconds (default 120)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        metavar="N",
        help="train each learned stage for N epochs instead of a time budget (the same work, and with --seed the "
        "same model, on any machine and under any load; not with --time-limit)",
    )
    parser.add_argument(
        "--validation",
        type=float,
        default=0.1,
        metavar="F",
        help="fraction held out to choose stages and settings (default 0.1)",
    )
    parser.add_argument(
        "--ensemble",
        type=int,
        default=None,
        metavar="K",
        help="learn an ensemble of K members (bootstraps of the recordings) with intervals calibrated on the "
        "validation data and the samples out of each member's bag (lnn.Ensemble)",
    )
    parser.add_argument(
        "--residual-lagrangian",
        choices=("yes", "no", "both"),
        default=None,
        help="add a residual Lagrangian network to the learned friction (yes), not (no), or train both and let "
        "the validation choose (both); default: only where --friction names no learned force",
    )
    parser.add_argument(
        "--write-urdf",
        default=None,
        metavar="FILE",
        help="also write the --urdf file with the identified inertias and friction (lnn.export.write_urdf)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--force", action="store_true", help="replace FILE (and the --write-urdf file) if it exists")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Identify, print the stages, save the model."""
    from lnn.data import Dataset
    from lnn.identification import identify

    output = check_output(Path(args.output), force=args.force, suffixes=(".keras",))
    if args.write_urdf is not None:
        if args.urdf is None:
            raise ValueError(
                f"--write-urdf {args.write_urdf} needs --urdf: the identified inertias are written into the "
                "robot's URDF"
            )
        refuse_overwrite(args.write_urdf, force=args.force)
    dataset = Dataset.load(args.data)
    prior = None
    if args.urdf is not None:
        prior, dataset = _prior(args, dataset)
    friction = None if args.friction.strip().lower() == "none" else args.friction
    print(
        f"identifying {args.data}: {len(dataset)} samples, n_dof={dataset.n_dof}"
        + (f", prior {args.urdf}" if prior is not None else ", no prior"),
        flush=True,
    )
    model = identify(
        dataset,
        prior=prior,
        friction=friction,
        offsets=None if args.offsets == "none" else args.offsets,
        time_limit=args.time_limit,
        epochs=args.epochs,
        seed=args.seed,
        validation=args.validation,
        ensemble=args.ensemble,
        residual_lagrangian={None: None, "yes": True, "no": False, "both": "both"}[args.residual_lagrangian],
        progress=lambda message: print("  " + message, flush=True),
    )
    print(model.report.format())
    if args.ensemble is not None:
        print_calibration(model.network)
    model.save(output, overwrite=args.force)
    print(f"wrote {output} (stage {model.report.chosen!r})")
    if args.write_urdf is not None:
        print_urdf_report(model.to_urdf(Path(args.write_urdf), template=args.urdf, force=args.force))
    return 0


def _prior(args, dataset):
    """The URDF robot with every joint that is not a coordinate locked, and the dataset in its joint order."""
    import simulations

    missing = "add" if args.add_missing_links else "error"
    full = simulations.URDFRobot.from_urdf(args.urdf, missing_links=missing)
    names = _names(args.joints, dataset)
    if names is None:
        return full, dataset
    known = list(full.joint_names)
    unknown = [name for name in names if name not in known]
    if unknown and args.joints is None and len(unknown) == len(names) == len(known):
        # the dataset's names are not joint names (e.g. CSV columns): as many joints as coordinates, in order
        print(
            f"  the dataset's coordinates ({', '.join(names)}) are not joints of {args.urdf}: taken as its "
            f"{len(known)} joints in order, {', '.join(known)} (--joints says otherwise)",
            flush=True,
        )
        return full, dataset
    if unknown:
        given = "--joints names" if args.joints is not None else "the dataset's joint names (no --joints given)"
        raise ValueError(
            f"{given} {unknown}, which {args.urdf} does not have; its joints are {known}: pass --joints with the "
            f"URDF joint of each of the dataset's {dataset.n_dof} coordinates, in the dataset's order"
        )
    locked = tuple(name for name in known if name not in names)
    robot = simulations.URDFRobot.from_urdf(args.urdf, locked_joints=locked, missing_links=missing)
    order = [names.index(name) for name in robot.joint_names]  # the dataset's columns in the URDF's order
    if order != list(range(len(order))):
        print(f"  coordinates reordered to the URDF's joint order: {', '.join(robot.joint_names)}", flush=True)
    return robot, _reordered(dataset, order, tuple(robot.joint_names))


def _names(joints, dataset):
    """The joint names of the dataset's coordinates: ``--joints``, else the dataset's own, else None."""
    if joints is not None:
        names = [name.strip() for name in joints.split(",") if name.strip()]
        if len(names) != dataset.n_dof or len(set(names)) != len(names):
            raise ValueError(f"--joints must name the dataset's {dataset.n_dof} coordinates once each; got {joints!r}")
        return names
    return None if getattr(dataset, "joint_names", None) is None else list(dataset.joint_names)


def _reordered(dataset, order, names):
    """``dataset`` with its coordinates permuted by ``order`` (and named ``names``)."""
    import dataclasses

    import numpy as np

    columns = {k: np.asarray(getattr(dataset, k))[:, order] for k in ("q", "qd", "qdd", "tau")}
    angular = tuple(dataset.angular[i] for i in order)
    return dataclasses.replace(dataset, **columns, angular=angular, joint_names=names)
