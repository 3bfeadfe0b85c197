"""``lnn evaluate``: every metric of a trained model on a held-out dataset."""

from __future__ import annotations

from lnn.cli._common import make_system, refuse_overwrite


def register(subparsers) -> None:
    """Add the ``evaluate`` verb."""
    p = subparsers.add_parser("evaluate", help="print the metrics of a model on a dataset")
    p.add_argument("model", help="trained model (.keras)")
    p.add_argument("data", help="held-out dataset (.npz)")
    p.add_argument("--csv", default=None, help="also write the metrics table to this CSV file")
    p.add_argument(
        "--rollouts", type=int, default=40, help="number of held-out trajectories to roll out (default: 40; 0 for none)"
    )
    p.add_argument(
        "--threshold", type=float, default=0.1, help="relative error that ends the valid prediction time (default: 0.1)"
    )
    p.add_argument(
        "--energy-scale",
        type=float,
        default=None,
        help="normalisation of the energy error (default: max |V| on the data)",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=1e-6,
        help="relative tolerance of the rollouts (default 1e-6; float32 models are noisy below)",
    )
    p.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance of the rollouts")
    p.add_argument("--force", action="store_true", help="overwrite an existing CSV file")
    p.set_defaults(func=run)


def run(args) -> int:
    """Load model and data, build the true system when the dataset names one, print the table."""
    from lnn import metrics
    from lnn.data import Dataset
    from lnn.models import load_model

    refuse_overwrite(args.csv, force=args.force)
    model = load_model(args.model)
    data = Dataset.load(args.data)
    true_system = None
    if data.system:
        try:
            true_system = make_system(data.system, params=data.parameters)
        except (ValueError, TypeError, ImportError) as exc:
            print(f"note: true system {data.system!r} unavailable ({exc}); energy and mass-matrix errors are skipped")
    table = metrics.evaluate(
        model,
        data,
        true_system=true_system,
        n_rollouts=args.rollouts,
        threshold=args.threshold,
        energy_scale=args.energy_scale,
        rtol=args.rtol,
        atol=args.atol,
    )
    print(table.format())
    novel = table.as_dict().get("novel_fraction")
    if novel is not None:
        print(
            f"novel states: {100 * novel:.3g} % of the held-out states lie beyond the model's training states "
            "(novelty > 1, the training data's 99th percentile): its predictions there are extrapolations"
        )
    if args.csv:
        table.to_csv(args.csv, overwrite=args.force)
        print(f"wrote {args.csv}")
    return 0
