"""``lnn demo``: the whole job on a built-in system, from simulation to a paper figure."""

from __future__ import annotations

import dataclasses
import time

from lnn.cli._common import ProgressBar, make_system


def register(subparsers) -> None:
    """Add the ``demo`` verb."""
    from lnn.demo import DEMOS

    parser = subparsers.add_parser(
        "demo",
        help="simulate, train, roll out, evaluate and plot a built-in system",
        description="Simulate a built-in system, train a Lagrangian neural network on the data, "
        "roll it out against the truth from held-out initial states, print the "
        "metrics and write a paper figure and an animation to an output folder.",
    )
    parser.add_argument(
        "--system", choices=sorted(DEMOS), default="double-pendulum", help="which demo (default double-pendulum)"
    )
    parser.add_argument(
        "-o", "--output-dir", default="lnn-demo", metavar="DIR", help="output folder (default ./lnn-demo)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of data, model and held-out states")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="S",
        help="training budget in seconds (default: the demo's own, 90 s)",
    )
    parser.add_argument("--epochs", type=int, default=None, help="maximum number of epochs")
    parser.add_argument(
        "--force", action="store_true", help="overwrite the demo's files if they exist in the output folder"
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    """Run the demo and print where everything went."""
    from lnn.demo import DEMOS, run_demo

    config = DEMOS[args.system]
    changes = {}
    if args.time_limit is not None:
        changes["time_limit"] = args.time_limit
    if args.epochs is not None:
        changes["epochs"] = args.epochs
    config = dataclasses.replace(config, **changes)
    system = make_system(config.system)
    print(
        f"lnn demo: {config.system} ({system.n_dof} DOF), {config.kind} model "
        f"{'x'.join(map(str, config.hidden))}, loss {_loss_text(config.loss)}, "
        f"training budget {config.time_limit:g} s, output folder {args.output_dir}/"
    )
    start = time.monotonic()
    result = run_demo(
        system,
        config=config,
        output_dir=args.output_dir,
        seed=args.seed,
        overwrite=args.force,
        progress=ProgressBar("demo"),
    )
    print()
    print(result.metrics.format())
    print()
    print(f"finished in {time.monotonic() - start:.0f} s; wrote:")
    for label, path in (
        ("dataset", result.dataset),
        ("model", result.model),
        ("rollouts", result.rollouts),
        ("metrics", result.metrics_csv),
        ("training log", result.history_csv),
        ("figure", result.figure_png),
        ("figure (vector)", result.figure_pdf),
        ("animation", result.animation),
    ):
        print(f"  {label:16s} {path}")
    print(f"next: lnn plot trajectory {result.rollouts} -o trajectory.png")
    return 0


def _loss_text(loss) -> str:
    """``"acceleration"`` or ``"torque + acceleration"`` for a loss term or a weight dict."""
    if isinstance(loss, dict):
        return " + ".join(f"{w:g} {k}" if w != 1 else k for k, w in loss.items())
    return str(loss)
