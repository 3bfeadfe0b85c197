"""``lnn systems``: list the built-in ground-truth systems and their parameters."""

from __future__ import annotations


def register(subparsers) -> None:
    """Add the ``systems`` verb."""
    parser = subparsers.add_parser("systems", help="list the built-in systems and their parameters")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Print one line per built-in system with its default parameters."""
    import simulations

    for name, factory in simulations.SYSTEMS.items():
        try:
            system = factory()
        except ImportError as exc:  # e.g. the robots extra is missing
            print(f"{name:16s} (unavailable: {exc})")
            continue
        params = ", ".join(f"{k}={v}" for k, v in system.parameters().items())
        print(f"{name:16s} n_dof={system.n_dof:<2d} {params}")
    return 0
