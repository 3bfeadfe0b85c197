"""The ``lnn`` command line: a thin layer over the library.

The package holds one module per verb, ``lnn/cli/<verb>.py``, each with
``register(subparsers)`` (add the verb's parser, ``set_defaults(func=run)``)
and ``run(args) -> int``, listed in :data:`COMMAND_MODULES`; the helpers that
verbs share live in :mod:`lnn.cli._common`, and a verb never imports another
verb. This module builds the parser, runs the verb and turns the library's
exceptions into one-line error messages (exit code 2). This package is the
only code of ``lnn`` that talks to the terminal.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
import warnings

from lnn._version import __version__
from lnn.cli._common import ProgressBar, import_tensorflow_quietly

__all__ = ["COMMAND_MODULES", "ProgressBar", "build_parser", "import_tensorflow_quietly", "main"]

#: Modules that each register one or more sub-commands, in help order.
COMMAND_MODULES = (
    "lnn.cli.systems",
    "lnn.cli.simulate",
    "lnn.cli.import_",
    "lnn.cli.train",
    "lnn.cli.identify",
    "lnn.cli.evaluate",
    "lnn.cli.export",
    "lnn.cli.rollout",
    "lnn.cli.plot",
    "lnn.cli.demo",
)

#: Verbs that never need TensorFlow (they start faster without importing it).
_WITHOUT_TENSORFLOW = frozenset({"systems", "simulate", "import"})


def build_parser() -> argparse.ArgumentParser:
    """Build the ``lnn`` argument parser with every registered verb.

    Returns
    -------
    argparse.ArgumentParser
        The parser of ``lnn``, one sub-parser per verb of :data:`COMMAND_MODULES`.
    """
    parser = argparse.ArgumentParser(
        prog="lnn",
        description="Lagrangian neural networks: simulate, train, roll out, evaluate, plot.",
    )
    parser.add_argument("--version", action="version", version=f"lnn {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def _show_warning(command: str, message, category, filename, lineno, file=None, line=None) -> None:
    """The library's warnings as one line each, ``lnn VERB: Category: message`` (not Python's file, line and source)."""
    print(f"lnn {command}: {category.__name__}: {message}", file=sys.stderr if file is None else file, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lnn`` console script.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``lnn`` (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 on success, 1 without a verb (the help is printed),
        2 for an error of the library (printed as one line on stderr), 130
        when interrupted.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 1
    if args.command not in _WITHOUT_TENSORFLOW:
        import_tensorflow_quietly()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = functools.partial(_show_warning, args.command)
            return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, KeyError, RuntimeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"lnn {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lnn {args.command}: interrupted", file=sys.stderr)
        return 130
