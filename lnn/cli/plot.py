"""``lnn plot KIND INPUT... -o FILE``: figures and animations from the files of other commands.

Inputs are read by suffix: ``.npz`` (a rollout pair from ``lnn rollout``, a
trajectory from ``Trajectory.save`` or a dataset from ``lnn simulate``),
``.keras`` (a model, :func:`lnn.load_model`) and ``.csv`` (a training log).
The output format follows the suffix of ``-o``: PNG (300 dpi), PDF or SVG,
and GIF or MP4 for ``animate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lnn.cli._common import add_system_arguments, check_output, make_system

KINDS = (
    "trajectory",
    "phase",
    "energy",
    "error",
    "mass-matrix",
    "potential",
    "torques",
    "history",
    "animate",
    "paper",
    "residuals",
    "calibration",
)
_FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
_ANIMATION_SUFFIXES = (".gif", ".mp4")


def register(subparsers) -> None:
    """Add the ``plot`` verb."""
    parser = subparsers.add_parser(
        "plot",
        help="draw a figure or animation from rollout, trajectory, model or log files",
        description=(
            "KIND and its INPUTs: trajectory / phase / paper: ROLLOUT.npz (or TRUE.npz "
            "[LEARNED.npz]); energy / error: ROLLOUT.npz... (one curve per file); "
            "mass-matrix / potential: MODEL.keras (against the true system, or alone over its training range "
            "when none is known); torques: MODEL.keras ROLLOUT.npz; "
            "history: LOG.csv; animate: ROLLOUT.npz (or TRAJECTORY.npz), output .gif/.mp4; "
            "residuals: MODEL.keras DATA.npz (the torque the model leaves on a dataset with torques); "
            "calibration: ENSEMBLE.keras DATA.npz (the share of held-out truths inside each nominal interval). "
            "The system comes from --system or from the metadata of an .npz input."
        ),
    )
    parser.add_argument("kind", choices=KINDS, metavar="KIND", help=" | ".join(KINDS))
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help=".npz, .keras or .csv files")
    parser.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="output file (.png, .pdf, .svg; .gif or .mp4 for animate)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    add_system_arguments(parser, required=False)
    parser.add_argument(
        "--coordinate", type=int, action="append", metavar="I", help="coordinate index to plot (0-based); repeatable"
    )
    parser.add_argument(
        "--index", type=int, default=0, metavar="B", help="trajectory of the batch for torques and animate (default 0)"
    )
    parser.add_argument(
        "--threshold", type=float, default=0.1, help="error level ending the valid prediction time (default 0.1)"
    )
    parser.add_argument(
        "--by",
        choices=("blocks", "recordings"),
        default="blocks",
        help="residuals: shares on held-out time blocks (default) or on whole recordings held out, i.e. what "
        "carries over to a new log",
    )
    parser.add_argument("--fps", type=float, default=25.0, help="animation frames per second")
    parser.add_argument(
        "--layout", choices=("overlay", "side-by-side"), default="overlay", help="animation layout (default overlay)"
    )
    parser.add_argument(
        "--label",
        action="append",
        metavar="TEXT",
        help="legend label of each input for energy / error (default: file name)",
    )
    parser.set_defaults(func=run)


@dataclass
class _Inputs:
    """The inputs sorted by type, each with its path."""

    pairs: list = field(default_factory=list)  # (path, RolloutPair)
    trajectories: list = field(default_factory=list)  # (path, Trajectory, or the ValueError of a dataset's batch)
    models: list = field(default_factory=list)  # (path, model)
    logs: list = field(default_factory=list)  # path
    datasets: list = field(default_factory=list)  # (path, Dataset)
    metadata: dict = field(default_factory=dict)  # of the first .npz

    def batches(self, kind: str) -> list:
        """``(path, Trajectory)`` of the trajectory and dataset inputs, for a kind that draws them as batches.

        A dataset whose recordings lie on different time grids (logs of different lengths) is no batch:
        the kinds that read a dataset sample by sample (``residuals``, ``calibration``) take it, these refuse it.
        """
        for path, trajectory in self.trajectories:
            if isinstance(trajectory, ValueError):
                raise ValueError(
                    f"plot {kind} draws trajectories on one time grid, but the dataset {str(path)!r} is no such "
                    f"batch ({trajectory}): roll the model out on it (lnn rollout MODEL --data {path.name}) and "
                    f"plot the rollout pair"
                )
        return self.trajectories


def _read_npz(path: Path):
    """A RolloutPair, Trajectory or Dataset file, whichever it holds."""
    from lnn.data import Dataset
    from lnn.plot import RolloutPair
    from lnn.trajectory import Trajectory

    errors = []
    for reader in (RolloutPair.load, Trajectory.load, Dataset.load):
        try:
            return reader(path)
        except ValueError as exc:
            errors.append(str(exc))
            if "is not an lnn" in str(exc) or "cannot read" in str(exc):
                break
    raise ValueError(f"{str(path)!r} is neither a rollout pair, a trajectory nor a dataset file: {errors[-1]}")


def _load(paths: list[str]) -> _Inputs:
    import dataclasses

    from lnn.data import Dataset
    from lnn.plot import RolloutPair

    inputs = _Inputs()
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise FileNotFoundError(f"no such input file: {name!r}")
        suffix = path.suffix.lower()
        if suffix == ".npz":
            content = _read_npz(path)
            if isinstance(content, RolloutPair):
                inputs.pairs.append((path, content))
                metadata = content.metadata
            elif isinstance(content, Dataset):
                inputs.datasets.append((path, content))
                metadata = {
                    "system": content.system,
                    "parameters": content.parameters,
                    "angular": list(content.angular),
                }
                try:
                    trajectory = content.as_trajectory()
                except ValueError as exc:  # recordings of different lengths: refused only where a batch is drawn
                    inputs.trajectories.append((path, exc))
                else:
                    inputs.trajectories.append(
                        (path, dataclasses.replace(trajectory, metadata={**trajectory.metadata, **metadata}))
                    )
            else:
                inputs.trajectories.append((path, content))
                metadata = content.metadata
            if not inputs.metadata:
                inputs.metadata = dict(metadata)
        elif suffix == ".keras":
            import lnn

            inputs.models.append((path, lnn.load_model(path)))
        elif suffix == ".csv":
            inputs.logs.append(path)
        else:
            raise ValueError(f"cannot read input {name!r}: expected .npz, .keras or .csv")
    return inputs


def _system(args, inputs: _Inputs, *, required: bool):
    if args.system:
        return make_system(args.system, args.param)
    name = inputs.metadata.get("system")
    if name:
        return make_system(name, args.param, dict(inputs.metadata.get("parameters") or {}))
    if required:
        raise ValueError(
            f"plot {args.kind} needs the true system: pass --system NAME (no .npz input names one in its metadata)"
        )
    return None


def _training_range(model):
    """The model's training range of ``q`` ``(low, high)``, each ``(n,)``, or ``(None, None)`` where a
    coordinate has none (an angle that turned fully, a model never adapted): the plot's default range then."""
    import numpy as np

    box = model.training_box() if hasattr(model, "training_box") else None
    if box is None or not (np.isfinite(box.q_low).all() and np.isfinite(box.q_high).all()):
        return None, None
    return box.q_low, box.q_high


def _pair(args, inputs: _Inputs):
    """True and learned trajectories from one rollout pair or one/two trajectory files."""
    if inputs.pairs:
        pair = inputs.pairs[0][1]
        return pair.true, pair.learned
    if inputs.trajectories:
        batches = inputs.batches(args.kind)
        true = batches[0][1]
        learned = batches[1][1] if len(batches) > 1 else None
        return true, learned
    raise ValueError(
        f"plot {args.kind} needs a rollout pair .npz (lnn rollout) or trajectory .npz files, got {args.inputs}"
    )


def _labels(args, paths: list[Path]) -> list[str]:
    if args.label:
        if len(args.label) != len(paths):
            raise ValueError(
                f"--label must be given once per input ({len(paths)}), got {len(args.label)}: {args.label}"
            )
        return list(args.label)
    return [path.stem for path in paths]


def _model(args, inputs: _Inputs):
    if len(inputs.models) != 1:
        raise ValueError(
            f"plot {args.kind} needs exactly one model .keras input, got {len(inputs.models)} in {args.inputs}"
        )
    return inputs.models[0][1]


def _draw(args, inputs: _Inputs):
    """Call the lnn.plot function for ``args.kind``; return its result."""
    from lnn import plot

    coordinates = args.coordinate
    if args.kind in ("trajectory", "phase", "paper", "animate"):
        true, learned = _pair(args, inputs)
        if args.kind == "trajectory":
            return plot.trajectories(true, learned, coordinates=coordinates)
        if args.kind == "phase":
            return plot.phase_portraits(true, learned, coordinates=coordinates)
        if args.kind == "paper":
            if learned is None:
                raise ValueError("plot paper needs a learned rollout: a rollout pair .npz or two trajectory files")
            return plot.paper_figure(
                true,
                learned,
                system=_system(args, inputs, required=False),
                coordinates=coordinates,
                threshold=args.threshold,
            )
        return plot.animate(
            _system(args, inputs, required=True), true, learned, index=args.index, layout=args.layout, fps=args.fps
        )
    if args.kind in ("energy", "error"):
        return _compare(args, inputs)
    if args.kind == "history":
        if len(inputs.logs) != 1:
            raise ValueError(f"plot history needs exactly one .csv training log, got {args.inputs}")
        return plot.history(inputs.logs[0])
    if args.kind == "residuals":
        if len(inputs.datasets) != 1:
            raise ValueError(f"plot residuals needs exactly one dataset .npz (with torques), got {args.inputs}")
        return plot.residuals(_model(args, inputs), inputs.datasets[0][1], coordinates=coordinates, by=args.by)
    if args.kind == "calibration":
        if len(inputs.datasets) != 1:
            raise ValueError(f"plot calibration needs exactly one held-out dataset .npz, got {args.inputs}")
        return plot.calibration(_model(args, inputs), inputs.datasets[0][1], coordinates=coordinates)
    if args.kind in ("mass-matrix", "potential"):
        import numpy as np

        model = _model(args, inputs)
        system = _system(args, inputs, required=False)  # none: the model alone, over its training states
        low, high = _training_range(model) if system is None else (None, None)
        if args.kind == "mass-matrix":
            coordinate = (coordinates or [0])[0]
            values = None if low is None else np.linspace(low[coordinate], high[coordinate], 61)
            return plot.mass_matrix(system, model, coordinate=coordinate, values=values)
        chosen = coordinates or list(range(min(2, model.n_dof)))
        bounds = None if low is None else [(low[i], high[i]) for i in chosen]
        return plot.potential(system, model, coordinates=chosen, bounds=bounds)
    system = _system(args, inputs, required=True)
    model = _model(args, inputs)
    true, _ = _pair(args, inputs)
    return plot.torques(system, true, model, index=args.index)


def _compare(args, inputs: _Inputs):
    """Energy or rollout error: one curve per rollout pair, or true vs learned trajectory files."""
    from lnn import plot

    if inputs.pairs:
        paths = [path for path, _ in inputs.pairs]
        labels = _labels(args, paths)
        reference = inputs.pairs[0][1].true
        learned = {label: pair.learned for label, (_, pair) in zip(labels, inputs.pairs)}
        if len(inputs.pairs) == 1 and not args.label:
            learned = {"learned": inputs.pairs[0][1].learned}
    elif len(inputs.trajectories) >= 2 and args.kind == "error":
        batches = inputs.batches(args.kind)
        paths = [path for path, _ in batches[1:]]
        reference = batches[0][1]
        learned = dict(zip(_labels(args, paths), (t for _, t in batches[1:])))
    elif inputs.trajectories and args.kind == "energy":
        batches = inputs.batches(args.kind)
        paths = [path for path, _ in batches]
        return plot.energy_error(
            dict(zip(_labels(args, paths), (t for _, t in batches))),
            system=_system(args, inputs, required=False),
        )
    else:
        raise ValueError(
            f"plot {args.kind} needs rollout pair .npz files (lnn rollout), or "
            f"trajectory files (for error: TRUE.npz LEARNED.npz...), got {args.inputs}"
        )
    if args.kind == "error":
        return plot.rollout_error(reference, learned, threshold=args.threshold)
    system = _system(args, inputs, required=False)
    if system is None:
        return plot.energy_error({"true": reference, **learned})
    return plot.energy_error(learned, reference=reference, system=system)


def run(args) -> int:
    """Draw the figure or animation and write it to ``-o``."""
    from lnn import plot

    suffixes = _ANIMATION_SUFFIXES if args.kind == "animate" else _FIGURE_SUFFIXES
    output = check_output(Path(args.output), force=args.force, suffixes=suffixes)
    result = _draw(args, _load(args.inputs))
    if args.kind == "animate":
        plot.save_animation(result, output, overwrite=args.force)
        print(f"wrote {output} ({result.n_frames} frames at {result.fps:g} fps)")
    else:
        plot.save(result.figure, output, overwrite=args.force)
        print(f"wrote {output}")
    return 0
