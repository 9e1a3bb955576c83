"""The ``dpjax`` command line.

Each subcommand is a module with ``add_parser(subparsers) -> ArgumentParser`` (it adds its parser
to the ``argparse`` subparsers) and ``run(args) -> int`` (the exit status). Registering one is one
line in ``SUBCOMMANDS``. Keep those modules light to import: the command should answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

SUBCOMMANDS = (
    "dpjax.studies.cli",  # dpjax study
    "dpjax.bench.cli",  # dpjax bench
    "dpjax.optax.train_cli",  # dpjax train
    "dpjax.studies.reproduce.cli",  # dpjax reproduce
)


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    """An ``argparse`` type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = argparse.ArgumentParser(
        prog="dpjax", description="Differential-privacy mechanisms as vectorized JAX kernels."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(name)
        module.add_parser(commands).set_defaults(run=module.run)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
