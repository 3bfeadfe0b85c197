"""``lnn train``: train a Lagrangian network on a dataset and save it as ``.keras``."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from lnn.cli._common import ProgressBar, parse_hidden, parse_loss, refuse_overwrite, require_directory


def register(subparsers) -> None:
    """Add the ``train`` verb."""
    p = subparsers.add_parser("train", help="train a Lagrangian network on a dataset (.npz)")
    p.add_argument("data", help="dataset file written by `lnn simulate` / Dataset.save (.npz)")
    p.add_argument("-o", "--output", required=True, help="model file to write (.keras)")
    p.add_argument("--kind", default="structured",
                   choices=("kinetic-potential", "black-box", "structured"),
                   help="model structure (default: structured)")
    p.add_argument("--hidden", default="128,128", help="hidden widths, comma separated (default: 128,128)")
    p.add_argument("--activation", default="softplus", help="hidden activation (default: softplus)")
    p.add_argument("--convex", action="store_true", help="input-convex kinetic network (kinetic-potential)")
    p.add_argument("--damping", action="store_true", help="learn a viscous damping matrix")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--loss", default="auto",
                   help="loss term or weighted terms, e.g. 'acceleration' or 'torque=1,energy=0.1' "
                        "(default auto: 'acceleration' for unforced data; for data with torques "
                        "'torque', plus 'acceleration' for the structured kind, as in "
                        "benchmarks/bench_accuracy.py)")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default: 3e-3)")
    p.add_argument("--schedule", default="cosine", choices=("cosine", "exponential", "constant"))
    p.add_argument("--patience", type=int, default=None, help="early stopping patience (epochs)")
    p.add_argument("--init", default=None, choices=("cranmer",), help="LNN initialisation of Cranmer et al.")
    p.add_argument("--time-limit", type=float, default=None, help="wall-time budget in seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--validation", type=float, default=0.1,
                   help="fraction of trajectories held out for validation (0 for none)")
    p.add_argument("--checkpoint-dir", default=None, help="save checkpoints there and resume from them")
    p.add_argument("--csv-log", default=None, help="write per-epoch losses to this CSV file")
    p.add_argument("--tensorboard-dir", default=None, help="write TensorBoard scalars there")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    p.set_defaults(func=run)


def default_loss(data, kind: str):
    """The loss of ``--loss auto`` for a dataset and a model kind.

    Unforced data: the accelerations. Data with torques: the torques (DeLaN's
    loss, the one that identifies a robot's inertia and gravity), plus the
    accelerations for the structured kind, whose Cholesky factor can shrink
    towards zero under the torque loss alone.

    Parameters
    ----------
    data : lnn.Dataset
        The training data.
    kind : str
        The model kind (``--kind``).

    Returns
    -------
    str or dict
        A loss term, or ``{term: weight}``, for :func:`lnn.fit`.
    """
    import numpy as np

    if not np.any(np.asarray(data.tau) != 0.0):
        return "acceleration"
    return {"torque": 1.0, "acceleration": 1.0} if kind == "structured" else "torque"


def run(args) -> int:
    """Load the dataset, build and train the model, save it and print a summary."""
    from lnn.data import Dataset
    from lnn.models import LagrangianNetwork
    from lnn.train import fit

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
    model = LagrangianNetwork(data.n_dof, kind=args.kind, hidden=parse_hidden(args.hidden),
                              activation=args.activation, angular=data.angular,
                              damping=args.damping, convex=args.convex, dtype=args.dtype,
                              seed=args.seed)
    loss = default_loss(data, args.kind) if args.loss.strip() == "auto" else parse_loss(args.loss)
    history = fit(model, data, loss=loss, epochs=args.epochs,
                  batch_size=args.batch_size, learning_rate=args.lr,
                  validation=args.validation if args.validation > 0 else None, seed=args.seed,
                  time_limit=args.time_limit, checkpoint_dir=args.checkpoint_dir,
                  schedule=args.schedule, patience=args.patience, initialization=args.init,
                  csv_log=args.csv_log, tensorboard_dir=args.tensorboard_dir,
                  progress=ProgressBar("train", stream=sys.stderr))
    model.save(str(output))
    monitored = "validation" if history.validation else "training"
    print(f"trained {args.kind} model on {len(data)} samples of {data.system or 'unnamed system'}: "
          f"{len(history.epoch)} epochs in {history.time[-1] if len(history.time) else 0.0:.1f} s "
          f"(stopped: {history.stopped_reason})")
    for term, values in history.train.items():
        line = f"  {term:<16s} train {values[-1]:.4g}"
        if term in history.validation:
            line += f"   validation {history.validation[term][-1]:.4g}"
        print(line)
    print(f"best epoch {history.best_epoch} ({monitored} loss {history.best_loss:.4g}); wrote {output}")
    return 0
