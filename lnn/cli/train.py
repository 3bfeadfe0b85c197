"""``lnn train``: train a Lagrangian network on a dataset and save it as ``.keras``."""

from __future__ import annotations

import argparse
import ast
import functools
import shutil
import sys
from pathlib import Path

from lnn.cli._common import (
    ProgressBar,
    parse_hidden,
    parse_loss,
    print_calibration,
    refuse_overwrite,
    require_directory,
)

_LIBRARY = Path(__file__).resolve().parent.parent
#: Where the library's signatures live: (file, class or None, function).
_SIGNATURES = {
    "model": (_LIBRARY / "models" / "network.py", "LagrangianNetwork", "__init__"),
    "fit": (_LIBRARY / "train" / "_fit.py", None, "fit"),
}


@functools.cache
def library_defaults(which: str) -> dict:
    """The keyword defaults of ``LagrangianNetwork`` (``"model"``) or ``lnn.fit`` (``"fit"``).

    Read from the library's source by :mod:`ast` (literal defaults only), so
    that ``lnn train --help`` shows the library's defaults without importing
    TensorFlow, and the CLI cannot drift from them (``tests/test_cli_train.py``
    compares them with :func:`inspect.signature`).

    Parameters
    ----------
    which : {"model", "fit"}

    Returns
    -------
    dict of str to object
        Argument name -> default value.
    """
    path, owner, name = _SIGNATURES[which]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    scope = tree.body
    if owner is not None:
        scope = next(node.body for node in scope if isinstance(node, ast.ClassDef) and node.name == owner)
    function = next(node for node in scope if isinstance(node, ast.FunctionDef) and node.name == name)
    args = function.args
    defaults = {}
    positional = args.posonlyargs + args.args
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
        defaults[arg.arg] = default
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is not None:
            defaults[arg.arg] = default
    out = {}
    for key, node in defaults.items():
        try:
            out[key] = ast.literal_eval(node)
        except ValueError:  # a named constant: not shown by the CLI
            continue
    return out


def _hidden_text(hidden) -> str:
    return ",".join(str(int(h)) for h in hidden)


def register(subparsers) -> None:
    """Add the ``train`` verb, its defaults those of ``LagrangianNetwork`` and ``lnn.fit``."""
    model, fit = library_defaults("model"), library_defaults("fit")
    p = subparsers.add_parser(
        "train",
        help="train a Lagrangian network on a dataset (.npz)",
        description="Train a Lagrangian network on a dataset and save it (.keras). Every default "
        "is the library's: LagrangianNetwork(n_dof, angular=...) and lnn.fit(model, "
        "data, ...).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("data", help="dataset file written by `lnn simulate` / Dataset.save (.npz)")
    p.add_argument("-o", "--output", required=True, help="model file to write (.keras)")
    p.add_argument(
        "--kind",
        default=model["kind"],
        help="model structure, a registered kind: structured, kinetic-potential, black-box, rigid-body, ... "
        "(lnn.models.KINDS)",
    )
    p.add_argument("--hidden", default=_hidden_text(model["hidden"]), help="hidden widths, comma separated")
    p.add_argument("--activation", default=model["activation"], help="hidden activation")
    p.add_argument(
        "--convex",
        action="store_true",
        default=model["convex"],
        help="input-convex kinetic network (kinetic-potential)",
    )
    p.add_argument("--damping", action="store_true", default=model["damping"], help="learn a viscous damping matrix")
    if "friction" in model:
        p.add_argument("--friction", default=model["friction"], help="learned per-joint friction, e.g. viscous+coulomb")
    p.add_argument("--dtype", default=model["dtype"], choices=("float32", "float64"), help="weights and computations")
    p.add_argument(
        "--ensemble",
        type=int,
        default=None,
        metavar="K",
        help="train an ensemble of K members in one step (lnn.Ensemble: bootstrapped trajectories, "
        "intervals calibrated on the validation data, and on the training samples out of each member's bag "
        "when those are fewer than 10 trajectories)",
    )
    p.add_argument(
        "--loss",
        default=fit["loss"],
        help="loss term or weighted terms, e.g. 'acceleration' or 'torque=1,energy=0.1'; "
        "auto: lnn.train.default_loss ('acceleration' for unforced data, 'torque' "
        "for data with torques, plus 'acceleration' for the structured kind)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=fit["epochs"],
        help="passes over the data (None: 100 without --time-limit, else until it)",
    )
    p.add_argument("--batch-size", type=int, default=fit["batch_size"], help="global batch size")
    p.add_argument("--lr", type=float, default=fit["learning_rate"], help="peak learning rate")
    p.add_argument(
        "--schedule",
        default=fit["schedule"],
        choices=("cosine", "exponential", "constant"),
        help="learning-rate schedule",
    )
    p.add_argument("--patience", type=int, default=fit["patience"], help="early stopping patience (epochs)")
    p.add_argument(
        "--init", default=fit["initialization"], choices=("cranmer",), help="LNN initialisation of Cranmer et al."
    )
    p.add_argument("--time-limit", type=float, default=fit["time_limit"], help="wall-time budget in seconds")
    p.add_argument(
        "--seed",
        type=int,
        default=fit["seed"],
        help="seed of the data split and shuffling (fit) and of the initial weights",
    )
    p.add_argument(
        "--validation",
        type=float,
        default=fit["validation"],
        help="fraction of trajectories held out for validation (0 for none)",
    )
    p.add_argument(
        "--checkpoint-dir", default=fit["checkpoint_dir"], help="save checkpoints there and resume from them"
    )
    p.add_argument("--csv-log", default=fit["csv_log"], help="write per-epoch losses to this CSV file")
    p.add_argument("--tensorboard-dir", default=fit["tensorboard_dir"], help="write TensorBoard scalars there")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def run(args) -> int:
    """Load the dataset, build and train the model, save it and print a summary."""
    from lnn.data import Dataset
    from lnn.models import Ensemble, LagrangianNetwork
    from lnn.train import default_loss, fit

    output = Path(args.output)
    if output.suffix != ".keras":
        raise ValueError(f"--output must end in '.keras', got {str(output)!r}")
    refuse_overwrite(output, Path(args.csv_log) if args.csv_log else None, force=args.force)
    require_directory(output)
    if args.csv_log and Path(args.csv_log).exists() and args.force and not args.checkpoint_dir:
        Path(args.csv_log).unlink()
    if args.tensorboard_dir and Path(args.tensorboard_dir).exists() and args.force:
        shutil.rmtree(args.tensorboard_dir)

    data = Dataset.load(args.data)
    extra = {"friction": args.friction} if getattr(args, "friction", None) is not None else {}
    if args.ensemble is not None and args.ensemble < 2:
        raise ValueError(f"--ensemble must be at least 2 members, got {args.ensemble}")
    build = LagrangianNetwork if args.ensemble is None else functools.partial(Ensemble, members=args.ensemble)
    model = build(
        data.n_dof,
        kind=args.kind,
        hidden=parse_hidden(args.hidden),
        activation=args.activation,
        angular=data.angular,
        damping=args.damping,
        convex=args.convex,
        dtype=args.dtype,
        seed=args.seed,
        **extra,
    )
    loss = default_loss(data, model) if args.loss.strip() == "auto" else parse_loss(args.loss)
    history = fit(
        model,
        data,
        loss=loss,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        validation=args.validation if args.validation > 0 else None,
        seed=args.seed,
        time_limit=args.time_limit,
        checkpoint_dir=args.checkpoint_dir,
        schedule=args.schedule,
        patience=args.patience,
        initialization=args.init,
        csv_log=args.csv_log,
        tensorboard_dir=args.tensorboard_dir,
        progress=ProgressBar("train", stream=sys.stderr),
    )
    model.save(str(output))
    monitored = "validation" if history.validation else "training"
    what = f"{args.kind} model" if args.ensemble is None else f"ensemble of {args.ensemble} {args.kind} models"
    print(
        f"trained {what} on {len(data)} samples of {data.system or 'unnamed system'}: "
        f"{len(history.epoch)} epochs in {history.time[-1] if len(history.time) else 0.0:.1f} s "
        f"(stopped: {history.stopped_reason})"
    )
    for term, values in history.train.items():
        line = f"  {term:<16s} train {values[-1]:.4g}"
        if term in history.validation:
            line += f"   validation {history.validation[term][-1]:.4g}"
        print(line)
    print(f"best epoch {history.best_epoch} ({monitored} loss {history.best_loss:.4g}); wrote {output}")
    if args.ensemble is not None:
        print_calibration(model)
    return 0
