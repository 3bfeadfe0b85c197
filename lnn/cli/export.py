"""``lnn export``: hand a saved model to other tools (a SavedModel a controller calls, a URDF with its inertias)."""

from __future__ import annotations

from pathlib import Path

from lnn.cli._common import print_urdf_report, refuse_overwrite


def register(subparsers) -> None:
    """Add the ``export`` verb."""
    parser = subparsers.add_parser(
        "export",
        help="write a saved model as a TensorFlow SavedModel and/or a URDF with its identified inertias",
        description="--savedmodel DIR writes a TensorFlow SavedModel with the signatures inverse_dynamics(q, qd, "
        "qdd) -> tau, acceleration(q, qd, tau) -> qdd and mass_matrix(q) -> M (batch free, the model's dtype, the "
        "learned forces included; an ensemble's mean) that TensorFlow alone loads (Python, C API). --urdf OUT "
        "(with --urdf-template, the URDF the model was identified with) writes that template with every moving "
        "joint's link inertias and linear friction replaced by the model's (a rigid-body model: lnn identify "
        "--urdf).",
    )
    parser.add_argument("model", metavar="MODEL", help="saved model (.keras, e.g. written by lnn identify)")
    parser.add_argument("--savedmodel", default=None, metavar="DIR", help="write a TensorFlow SavedModel here")
    parser.add_argument("--urdf", default=None, metavar="FILE", help="write a URDF with the identified inertias here")
    parser.add_argument(
        "--urdf-template", default=None, metavar="FILE", help="the robot's URDF the model was identified with"
    )
    parser.add_argument(
        "--xla",
        action="store_true",
        help="mark the SavedModel's functions jit_compile (XLA compiles each at its first call per batch size; "
        "faster calls: docs/how-to/export.md)",
    )
    parser.add_argument("--force", action="store_true", help="replace DIR / FILE if they exist")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Load the model, write what was asked, say what was written and what a URDF cannot carry."""
    from lnn.export import export_savedmodel, write_urdf
    from lnn.models import load_model

    if args.savedmodel is None and args.urdf is None:
        raise ValueError("nothing to write: pass --savedmodel DIR and/or --urdf FILE (with --urdf-template)")
    if args.urdf is not None and args.urdf_template is None:
        raise ValueError(f"--urdf {args.urdf} needs --urdf-template: the robot's URDF the model was identified with")
    if args.urdf is None and args.urdf_template is not None:
        raise ValueError("--urdf-template is given without --urdf FILE to write")
    refuse_overwrite(args.savedmodel, args.urdf, force=args.force)
    model = load_model(args.model)
    if args.urdf is not None:
        report = write_urdf(
            model, Path(args.urdf), template=args.urdf_template, force=args.force, stage=f"the model {args.model}"
        )
        print_urdf_report(report)
    if args.savedmodel is not None:
        exported = export_savedmodel(model, Path(args.savedmodel), force=args.force, xla=args.xla)
        print(
            f"wrote {exported.path}: SavedModel, signatures {', '.join(exported.signatures)}, "
            f"q of shape (B, {exported.n_dof}) {exported.dtype}"
            + (f", the mean of {exported.members} members" if exported.members > 1 else "")
        )
    return 0
