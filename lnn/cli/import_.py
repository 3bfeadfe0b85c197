"""``lnn import``: read measured CSV logs into an lnn dataset (:func:`lnn.logs.import_csv`).

Repeated samples are dropped, logs are split at gaps, jittered time stamps
are resampled onto a uniform grid, and ``qd``, ``qdd`` are estimated with
Savitzky–Golay windows chosen from the sampling rate, the noise and the
motion's bandwidth; the verb prints what was done, file by file.
"""

from __future__ import annotations

from pathlib import Path

from lnn.cli._common import require_directory


def register(subparsers) -> None:
    """Add the ``import`` verb."""
    parser = subparsers.add_parser(
        "import",
        help="read measured CSV logs into a dataset (.npz)",
        description="Read CSV logs of a robot (one trajectory per file, more where a log has "
        "gaps): drop repeated samples, split at gaps, resample jittered time stamps "
        "onto a uniform grid, estimate qd and qdd (Savitzky-Golay, window chosen "
        "from the sampling rate and the noise), and write an lnn dataset. Columns "
        "are header names or 0-based indices, comma-separated.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="CSV log(s)")
    parser.add_argument("--time", required=True, metavar="COL", help="the time column")
    parser.add_argument("--q", required=True, metavar="COLS", help="position columns, e.g. q1,q2")
    parser.add_argument(
        "--qd",
        default=None,
        metavar="COLS",
        help="measured velocity columns: compared with d(q)/dt (lag, mismatch) "
        "and used for qd with --velocity measured",
    )
    parser.add_argument("--tau", required=True, metavar="COLS", help="torque (force) columns")
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
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="N",
        help="Savitzky-Golay window in samples (odd; default: chosen per "
        "coordinate from the rate, noise and bandwidth)",
    )
    parser.add_argument(
        "--order", type=int, default=4, metavar="K", help="Savitzky-Golay polynomial degree (default 4)"
    )
    parser.add_argument("--no-trim", action="store_true", help="keep the half window at each end of each piece")
    parser.add_argument(
        "--velocity",
        choices=("q", "measured"),
        default="q",
        help="qd from the positions (default) or from the --qd columns, filtered",
    )
    parser.add_argument(
        "--overwrite", "--force", dest="overwrite", action="store_true", help="replace FILE if it exists"
    )
    parser.set_defaults(func=run)


def run(args) -> int:
    """Import the logs, write the dataset and print the report."""
    from lnn.logs import import_csv

    output = Path(args.output)
    if output.suffix != ".npz":
        raise ValueError(f"the output file must end in '.npz'; got {args.output!r}")
    if output.exists() and not args.overwrite:
        raise FileExistsError(f"{args.output!r} exists; pass --overwrite to replace it")
    require_directory(output)
    q = _columns("--q", args.q)
    result = import_csv(
        args.files,
        time=_columns("--time", args.time)[0],
        q=q,
        qd=None if args.qd is None else _columns("--qd", args.qd),
        tau=_columns("--tau", args.tau),
        angular=_angular(args.angular, len(q)),
        time_scale=args.time_scale,
        delimiter=args.delimiter,
        step=args.step,
        max_gap=args.max_gap,
        window=args.window,
        order=args.order,
        trim=not args.no_trim,
        velocity=args.velocity,
    )
    result.dataset.save(output, overwrite=args.overwrite)
    print(result.report.format())
    data = result.dataset
    print(
        f"wrote {args.output}: {data.n_trajectories} trajectory(ies), {len(data)} samples, "
        f"n_dof={data.n_dof}, dt={'varies' if data.dt != data.dt else f'{data.dt:.4g} s'}"
    )
    return 0


def _columns(option: str, text: str) -> list:
    """``"q1,q2"`` -> ``["q1", "q2"]``; tokens of digits are 0-based indices."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise ValueError(f"{option} must be comma-separated column names or indices; got {text!r}")
    return [int(item) if item.isdigit() else item for item in items]


def _angular(text: str, n: int):
    """``--angular``: ``all``, ``none`` or ``n`` comma-separated 0/1."""
    if text.strip().lower() in ("all", "none"):
        return text.strip().lower() == "all"
    flags = [flag.strip() for flag in text.split(",")]
    if len(flags) != n or any(flag not in ("0", "1") for flag in flags):
        raise ValueError(f"--angular must be all, none or {n} comma-separated 0/1 (one per --q column); got {text!r}")
    return [flag == "1" for flag in flags]
