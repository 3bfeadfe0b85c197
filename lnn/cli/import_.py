"""``lnn import``: read measured CSV logs or ROS bags into an lnn dataset (:mod:`lnn.logs`).

Repeated and held samples are dropped, logs are split at gaps, jittered time
stamps are resampled onto a uniform grid, and ``qd``, ``qdd`` are estimated
with one Savitzky–Golay window for all the files, the one whose motion explains
the measured torques best (:func:`lnn.ingest.choose_window_by_torque`); the
torque's lag behind the positions is estimated (and applied with ``--lag``);
the verb prints what was done, file by file. A file ending in ``.mcap``, ``.db3`` or ``.bag``, or a directory holding
``metadata.yaml``, is read as a ROS bag (``--topic``, ``--joints``); anything
else as CSV (``--time``, ``--q``, ``--tau``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lnn.cli._common import require_directory

#: Options that only CSV logs take (a bag's messages carry their own time, names and arrays).
_CSV_ONLY = (("time", "--time"), ("q", "--q"), ("qd", "--qd"), ("tau", "--tau"), ("delimiter", "--delimiter"))


def register(subparsers) -> None:
    """Add the ``import`` verb."""
    parser = subparsers.add_parser(
        "import",
        help="read measured CSV logs or ROS bags into a dataset (.npz)",
        description="Read CSV logs or ROS bags of a robot (one trajectory per file, more where a log has "
        "gaps): drop repeated and held samples, split at gaps, resample jittered time stamps "
        "onto a uniform grid, estimate qd and qdd (Savitzky-Golay, one window "
        "for all files, where the motion explains the torques best), estimate the torque's lag behind the positions, "
        "and write an lnn dataset. CSV columns (--time, --q, --tau) "
        "are header names or 0-based indices, comma-separated. A .mcap, .db3 or .bag file, or a "
        "directory with metadata.yaml, is a ROS bag: its sensor_msgs/JointState messages on --topic "
        "are read (needs pip install 'lnn[ros]').",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="CSV log(s), or ROS bag(s)")
    parser.add_argument("--time", default=None, metavar="COL", help="the time column (CSV; required there)")
    parser.add_argument("--q", default=None, metavar="COLS", help="position columns, e.g. q1,q2 (CSV; required there)")
    parser.add_argument(
        "--qd",
        default=None,
        metavar="COLS",
        help="measured velocity columns: compared with d(q)/dt (lag, mismatch) "
        "and used for qd with --velocity measured",
    )
    parser.add_argument("--tau", default=None, metavar="COLS", help="torque (force) columns (CSV; required there)")
    parser.add_argument(
        "--topic", default=None, metavar="TOPIC", help="the JointState topic of ROS bags, e.g. /joint_states"
    )
    parser.add_argument(
        "--joints",
        default=None,
        metavar="NAMES",
        help="joint names, comma-separated: for bags the joints to read, in this order (default: every "
        "joint of the first message); for CSV the names of the --q columns' joints (default: the column names)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="output dataset file (.npz)")
    parser.add_argument(
        "--angular",
        default="none",
        metavar="FLAGS",
        help="which coordinates are angles that may wrap: all, none (default), or comma-separated 0/1 per q column",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds per unit of the time column (1e-3 for ms, 1e-9 for ns; default 1)",
    )
    parser.add_argument(
        "--delimiter", default=None, metavar="CHAR", help="column separator (default: sniffed from the first line)"
    )
    parser.add_argument(
        "--step",
        type=float,
        default=None,
        metavar="S",
        help="step of the uniform grid in seconds (default: the median step)",
    )
    parser.add_argument(
        "--max-gap",
        type=float,
        default=None,
        metavar="S",
        help="split a log at holes longer than this (s; default max(3 steps, a quarter of the acceleration window))",
    )
    _derivative_options(parser)
    parser.add_argument(
        "--lag",
        default=None,
        metavar="S",
        help="shift the torque stream before resampling: auto (by the estimated lag, where it is known to "
        "half a step), seconds, or seconds per joint comma-separated (default: estimated and reported, "
        "not applied)",
    )
    parser.add_argument(
        "--overwrite", "--force", dest="overwrite", action="store_true", help="replace FILE if it exists"
    )
    parser.set_defaults(func=run)


def _derivative_options(parser) -> None:
    """The options of the derivatives: the Savitzky-Golay window (or another import's rule), order, trim, qd."""
    parser.add_argument(
        "--window",
        type=_window,
        default=None,
        metavar="N",
        help="Savitzky-Golay window in samples (odd), or 'spectrum' (per coordinate from the "
        "positions' rate, noise and bandwidth); default: one window, where the motion explains the "
        "torques best (the spectral rule where they cannot tell)",
    )
    parser.add_argument(
        "--like",
        default=None,
        metavar="DATASET",
        help="read the logs with the derivative windows of DATASET's import (e.g. train.npz), at each "
        "log's own step: held-out logs then get the training logs' derivatives, not windows chosen by "
        "their own torques (the targets they are scored on)",
    )
    parser.add_argument(
        "--order",
        type=int,
        default=None,
        metavar="K",
        help="Savitzky-Golay polynomial degree (default 4, or that of --like's import)",
    )
    parser.add_argument("--no-trim", action="store_true", help="keep the half window at each end of each piece")
    parser.add_argument(
        "--velocity",
        choices=("q", "measured"),
        default="q",
        help="qd from the positions (default) or from the --qd columns, filtered",
    )


def _window(text: str):
    """``--window``: an odd number of samples or ``spectrum``."""
    if text == "spectrum":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an odd number of samples or 'spectrum'; got {text!r}") from None


def run(args) -> int:
    """Import the logs (or bags), write the dataset and print the report."""
    from lnn.ingest import is_rosbag
    from lnn.logs import import_csv, import_rosbag

    output = Path(args.output)
    if output.suffix != ".npz":
        raise ValueError(f"the output file must end in '.npz'; got {args.output!r}")
    if output.exists() and not args.overwrite:
        raise FileExistsError(f"{args.output!r} exists; pass --overwrite to replace it")
    require_directory(output)
    bags = [is_rosbag(path) for path in args.files]
    if any(bags) and not all(bags):
        raise ValueError(
            "give either CSV logs or ROS bags, not both; bags: "
            + ", ".join(f for f, bag in zip(args.files, bags) if bag)
        )
    window, order = _window_option(args)
    options = dict(
        angular=None,
        step=args.step,
        max_gap=args.max_gap,
        window=window,
        order=order,
        trim=not args.no_trim,
        velocity=args.velocity,
        lag=_lag(args.lag),
    )
    joints = None if args.joints is None else _columns("--joints", args.joints, names=True)
    if all(bags):
        given = [flag for name, flag in _CSV_ONLY if getattr(args, name) is not None]
        if given or args.time_scale != 1.0:
            raise ValueError(f"{', '.join(given or ['--time-scale'])} apply to CSV logs, not to ROS bags")
        if args.topic is None:
            raise ValueError("ROS bags need --topic, the topic of their JointState messages (e.g. /joint_states)")
        n = len(joints) if joints is not None else None
        options["angular"] = _angular(args.angular, n)
        result = import_rosbag(args.files, topic=args.topic, joints=joints, **options)
    else:
        missing = [flag for flag in ("--time", "--q", "--tau") if getattr(args, flag[2:]) is None]
        if missing:
            raise ValueError(f"CSV logs need {', '.join(missing)} (the columns of the time, positions and torques)")
        if args.topic is not None:
            raise ValueError("--topic applies to ROS bags (.mcap, .db3, .bag or a bag directory), not to CSV logs")
        q = _columns("--q", args.q)
        options["angular"] = _angular(args.angular, len(q))
        result = import_csv(
            args.files,
            time=_columns("--time", args.time)[0],
            q=q,
            qd=None if args.qd is None else _columns("--qd", args.qd),
            tau=_columns("--tau", args.tau),
            joints=joints,
            time_scale=args.time_scale,
            delimiter=args.delimiter,
            **options,
        )
    result.dataset.save(output, overwrite=args.overwrite)
    print(result.report.format())
    data = result.dataset
    print(
        f"wrote {args.output}: {data.n_trajectories} trajectory(ies), {len(data)} samples, "
        f"n_dof={data.n_dof}, dt={'varies' if data.dt != data.dt else f'{data.dt:.4g} s'}"
        + ("" if data.joint_names is None else f", joints {','.join(data.joint_names)}")
    )
    rule = data.window_rule
    if rule is not None and args.like is not None:
        print(f"derivative windows: {args.like}'s rule, {rule.describe()}")
    elif rule is not None:
        print(f"derivative windows: {rule.describe()}; read held-out logs of this robot with --like {args.output}")
    return 0


def _window_option(args):
    """The import's ``window`` and ``order``: ``--window``/``--order``, or the rule of ``--like``'s import."""
    from lnn.ingest import DEFAULT_ORDER

    if args.like is None:
        return args.window, DEFAULT_ORDER if args.order is None else args.order
    if args.window is not None:
        raise ValueError(f"give --window or --like, not both; got --window {args.window} and --like {args.like}")
    from lnn.data import Dataset

    rule = Dataset.load(args.like).window_rule
    if rule is None:
        raise ValueError(
            f"{args.like!r} records no derivative windows (it was not written by lnn import, or by an earlier "
            f"lnn): pass --window N, the window its import printed"
        )
    if args.order is not None and args.order != rule.order:
        raise ValueError(
            f"--order {args.order} differs from the order of {args.like}'s import ({rule.order}): drop --order to "
            f"read the logs like it"
        )
    return rule, rule.order


def _lag(text: str | None):
    """``--lag``: None, ``auto``, seconds, or comma-separated seconds per joint."""
    if text is None or text.strip().lower() == "auto":
        return None if text is None else "auto"
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        raise ValueError(
            f"--lag must be auto, a number of seconds or one per joint (comma-separated); got {text!r}"
        ) from None
    return values[0] if len(values) == 1 else values


def _columns(option: str, text: str, *, names: bool = False) -> list:
    """``"q1,q2"`` -> ``["q1", "q2"]``; tokens of digits are 0-based indices (unless ``names``)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        what = "names" if names else "column names or indices"
        raise ValueError(f"{option} must be comma-separated {what}; got {text!r}")
    return items if names else [int(item) if item.isdigit() else item for item in items]


def _angular(text: str, n: int | None):
    """``--angular``: ``all``, ``none`` or ``n`` comma-separated 0/1 (any number when ``n`` is None)."""
    if text.strip().lower() in ("all", "none"):
        return text.strip().lower() == "all"
    flags = [flag.strip() for flag in text.split(",")]
    if (n is not None and len(flags) != n) or any(flag not in ("0", "1") for flag in flags):
        count = "comma-separated 0/1, one per joint" if n is None else f"{n} comma-separated 0/1 (one per --q column)"
        raise ValueError(f"--angular must be all, none or {count}; got {text!r}")
    return [flag == "1" for flag in flags]
