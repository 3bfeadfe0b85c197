"""The ``lnn`` command line: a thin layer over the library.

Each verb lives in a module ``lnn/cli_<verb>.py`` that defines
``register(subparsers)``; this module builds the parser, runs the verb and
turns the library's exceptions into one-line error messages (exit code 2).
This is the only place, with those modules, that talks to the terminal.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from lnn._version import __version__

#: Modules that each register one or more sub-commands, in help order.
COMMAND_MODULES = (
    "lnn.cli_systems",
    "lnn.cli_simulate",
    "lnn.cli_train",
    "lnn.cli_evaluate",
    "lnn.cli_rollout",
    "lnn.cli_plot",
    "lnn.cli_demo",
)


class ProgressBar:
    """A one-line progress bar on stderr, usable as ``progress(done, total)``.

    The library never prints; its long-running functions accept a
    ``progress`` callable, and the CLI passes one of these.
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
        text = (f"\r{self.label} [{bar}] {fraction:6.1%} {_clock(elapsed)} elapsed, "
                f"{_clock(eta)} left {message}")
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


#: Verbs that never need TensorFlow (they start faster without importing it).
_WITHOUT_TENSORFLOW = frozenset({"systems", "simulate"})


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


def build_parser() -> argparse.ArgumentParser:
    """Build the ``lnn`` argument parser with every registered verb."""
    parser = argparse.ArgumentParser(
        prog="lnn",
        description="Lagrangian neural networks: simulate, train, roll out, evaluate, plot.",
    )
    parser.add_argument("--version", action="version", version=f"lnn {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lnn`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 1
    if args.command not in _WITHOUT_TENSORFLOW:
        import_tensorflow_quietly()
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, KeyError, RuntimeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"lnn {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lnn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
