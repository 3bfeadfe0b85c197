"""Helpers shared by the verbs of the ``lnn`` command line.

Every verb module (``lnn/cli/<verb>.py``) imports what it shares with another
verb from here and from nowhere else in :mod:`lnn.cli`: the progress bar, the
quiet TensorFlow import, the ``--system``/``--param`` options and the system
lookup, the parsers of option values, and the checks of output paths. This
module stays light: it imports neither TensorFlow nor ``simulations`` at
import time, so ``lnn systems`` and ``lnn simulate`` start fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

__all__ = [
    "ProgressBar",
    "import_tensorflow_quietly",
    "add_system_arguments",
    "make_system",
    "parse_params",
    "parse_hidden",
    "parse_loss",
    "check_output",
    "refuse_overwrite",
    "require_directory",
]


# -- progress and terminal ---------------------------------------------------------------


class ProgressBar:
    """A one-line progress bar on stderr, usable as ``progress(done, total)``.

    The library never prints; its long-running functions accept a
    ``progress`` callable, and the CLI passes one of these.

    Parameters
    ----------
    label : str
        Text in front of the bar.
    stream : file-like, optional, keyword-only
        Where to write (default ``sys.stderr``). A terminal gets one redrawn
        line, 10 times a second; anything else a new line every 10 s.
    width : int, optional, keyword-only
        Number of characters of the bar (default 30).
    """

    def __init__(self, label: str, *, stream=None, width: int = 30) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self._start = time.monotonic()
        self._last = -1.0

    def __call__(self, done: float, total: float, message: str = "") -> None:
        now = time.monotonic()
        finished = total > 0 and done >= total
        interactive = getattr(self.stream, "isatty", lambda: False)()
        # A terminal gets a redrawn line 10 times a second; a log file a line every 10 s.
        if not finished and now - self._last < (0.1 if interactive else 10.0):
            return
        self._last = now
        fraction = min(max(done / total, 0.0), 1.0) if total else 0.0
        filled = int(round(fraction * self.width))
        elapsed = now - self._start
        eta = elapsed * (1 - fraction) / fraction if fraction > 0 else float("nan")
        bar = "#" * filled + "-" * (self.width - filled)
        text = f"\r{self.label} [{bar}] {fraction:6.1%} {_clock(elapsed)} elapsed, {_clock(eta)} left {message}"
        if interactive:
            self.stream.write(text[:200])
            if finished:
                self.stream.write("\n")
        else:
            self.stream.write(text[1:200] + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def import_tensorflow_quietly() -> None:
    """Import TensorFlow with its C++ start-up log (oneDNN, CUDA probes) kept off the terminal.

    TensorFlow >= 2.19 logs through absl before ``TF_CPP_MIN_LOG_LEVEL`` is
    read (tensorflow/tensorflow#100442), so the CLI silences file descriptor 2
    while TensorFlow imports and enumerates its devices, then restores it:
    warnings and errors raised later still reach the terminal.
    """
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow as tf

        tf.config.list_logical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


# -- built-in systems ---------------------------------------------------------------------


def add_system_arguments(parser, *, required: bool) -> None:
    """Add ``--system NAME`` and repeatable ``--param KEY=VALUE`` to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The verb's parser.
    required : bool, keyword-only
        Whether ``--system`` must be given.
    """
    parser.add_argument("--system", required=required, metavar="NAME", help="built-in system (see `lnn systems`)")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="system parameter as in `lnn simulate`, repeatable; lists are comma-separated, e.g. --param masses=1,2",
    )


def make_system(name: str, param_items: list[str] | None = None, params: dict | None = None):
    """Build a built-in system from ``--system``/``--param`` or from file metadata.

    Parameters
    ----------
    name : str
        A name in ``simulations.SYSTEMS``.
    param_items : list of str, optional
        ``--param KEY=VALUE`` strings, parsed by :func:`parse_params`; they
        override ``params``.
    params : dict, optional
        Parameters already parsed (e.g. a file's ``metadata["parameters"]``).

    Returns
    -------
    system
        The ground-truth system.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known systems) or a bad ``--param``.
    """
    import simulations

    if name not in simulations.SYSTEMS:
        raise ValueError(f"unknown system {name!r}; known systems: {', '.join(simulations.SYSTEMS)}")
    if param_items:
        params = {**(params or {}), **parse_params(param_items, simulations.SYSTEMS[name])}
    return simulations.make_system(name, **(params or {}))


# -- option values ------------------------------------------------------------------------


def parse_params(items: list[str], factory=None) -> dict:
    """Parse ``KEY=VALUE`` strings into keyword parameters of a system.

    A value is a float when it parses as one, else a string; a comma makes it
    a list, and so does a key whose default (in ``factory().parameters()``)
    is a list, so ``masses=2`` is ``[2.0]`` for a system with link masses.

    Parameters
    ----------
    items : list of str
        ``["m=2", "lengths=1,0.5"]``.
    factory : callable, optional
        The system's factory, to look up the default parameters.

    Returns
    -------
    dict
    """
    defaults = factory().parameters() if factory is not None and items else {}
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise ValueError(f"--param must look like KEY=VALUE; got {item!r}")
        if defaults and key not in defaults:
            raise ValueError(
                f"unknown parameter {key!r} in --param {item!r}; the system's parameters are: {', '.join(defaults)}"
            )
        if "," in value or isinstance(defaults.get(key), (list, tuple)):
            params[key] = [_scalar(v) for v in value.split(",") if v.strip()]
        else:
            params[key] = _scalar(value)
    return params


def _scalar(text: str):
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return text


def parse_hidden(text: str) -> tuple[int, ...]:
    """Parse ``--hidden``: ``"128,128"`` -> ``(128, 128)``.

    Parameters
    ----------
    text : str
        Comma-separated integers.

    Returns
    -------
    tuple of int
    """
    try:
        widths = tuple(int(h) for h in text.split(","))
    except ValueError:
        raise ValueError(f"--hidden must be comma-separated integers, got {text!r}") from None
    return widths


def parse_loss(text: str):
    """Parse ``--loss``: ``"acceleration"`` stays a string, ``"torque=1,energy=0.1"`` becomes a dict.

    Parameters
    ----------
    text : str
        One loss term, or comma-separated ``TERM[=WEIGHT]`` (weight 1 when omitted).

    Returns
    -------
    str or dict
        The term, or ``{term: weight}`` (``{"torque": 1.0, "energy": 0.1}``).
    """
    if "=" not in text and "," not in text:
        return text.strip()
    weights = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            weights[name.strip()] = float(value) if sep else 1.0
        except ValueError:
            raise ValueError(f"--loss: weight of {name.strip()!r} must be a number, got {value!r}") from None
    return weights


# -- output files -------------------------------------------------------------------------


def check_output(path: Path, *, force: bool, suffixes: tuple[str, ...]) -> Path:
    """Fail early if ``path`` has the wrong suffix, exists without ``force``, or has no directory.

    Parameters
    ----------
    path : pathlib.Path
        The ``-o`` file.
    force : bool, keyword-only
        ``--force``: an existing file may be replaced.
    suffixes : tuple of str, keyword-only
        Accepted suffixes, lower case with the dot (``(".png", ".pdf")``).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    from lnn.plot._style import writable_path

    if path.suffix.lower() not in suffixes:
        raise ValueError(f"-o must end in one of {', '.join(suffixes)}, got {str(path)!r}")
    writable_path(path, overwrite=force)
    return path


def refuse_overwrite(*paths, force: bool) -> None:
    """Raise ``FileExistsError`` for the first of ``paths`` that exists, unless ``force``.

    Parameters
    ----------
    *paths : str, pathlib.Path or None
        Files the verb will write; ``None`` entries (options not given) are skipped.
    force : bool, keyword-only
        ``--force``: existing files may be replaced.
    """
    if force:
        return
    for path in paths:
        if path and Path(path).exists():
            raise FileExistsError(f"refusing to overwrite existing file {str(path)!r}; pass --force to replace it")


def require_directory(path: Path) -> None:
    """Raise ``FileNotFoundError`` unless the directory of ``path`` exists.

    Parameters
    ----------
    path : pathlib.Path
        A file the verb will write.
    """
    if not path.parent.exists():
        raise FileNotFoundError(f"directory {str(path.parent)!r} does not exist (writing {str(path)!r})")


def print_calibration(ensemble) -> None:
    """An ensemble's interval scales and floors (or why it has none) and, per output, how its 50 % and 90 %
    intervals covered each calibration recording when fitted on the others (its range over the recordings)."""
    if not ensemble.calibrated:
        print("  intervals not calibrated (no validation data): they use the members' raw spread")
        return
    calibration = ensemble.calibration
    for output in ("qdd", "tau"):
        scale = getattr(ensemble, f"{output}_scale").numpy()
        floor = getattr(ensemble, f"{output}_floor").numpy()
        dof = getattr(ensemble, f"{output}_dof").numpy()
        print(
            f"  {output} intervals calibrated on the validation data: scale "
            + " ".join(f"{v:.3g}" for v in scale)
            + ", floor "
            + " ".join(f"{v:.3g}" for v in floor)
            + ", tails (Student-t degrees of freedom) "
            + " ".join("Gaussian" if v == float("inf") else f"{v:.3g}" for v in dof)
        )
        fitted = getattr(calibration, output, None)
        if fitted is None or not fitted.recording_coverage:
            continue
        count = len(fitted.recordings)
        for level, covered in fitted.recording_coverage.items():
            spans = ", ".join(f"{low:.0%}-{high:.0%}" for low, high in zip(covered.min(axis=0), covered.max(axis=0)))
            print(
                f"    nominal {level:.0%}: each of {count} recordings, calibrated on the others, covered per "
                f"coordinate {spans}"
            )


def print_urdf_report(report) -> None:
    """What :func:`lnn.export.write_urdf` wrote, and what it could not."""
    print(f"wrote {report.path}: the inertias of {', '.join(report.links.values())} from {report.stage}")
    for child, group in report.merged.items():
        print(f"  {', '.join(group)} (fixed to {child}) merged into {child}'s inertial")
    if report.locked_joints:
        print(f"  locked joints (template values kept): {', '.join(report.locked_joints)}")
    armature = ", ".join(f"{name} {value:.4g}" for name, value in report.armature.items())
    print(f"  armature (no URDF field; a comment in each joint): {armature}")
    print(f"  not carried by a URDF: {'; '.join(report.not_carried)}")
