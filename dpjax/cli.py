"""The ``dpjax`` command line.

Each subcommand is a module with ``add_parser(subparsers) -> ArgumentParser`` (it adds its parser
to the ``argparse`` subparsers) and ``run(args) -> int`` (the exit status). Registering one is one
line in ``SUBCOMMANDS``. Only the module of the command being run is imported (the others are listed
by their one-line help), so ``dpjax --help`` answers without loading JAX.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

# name: (module, the one-line help its add_parser gives; tests/test_cli_startup.py checks they agree)
SUBCOMMANDS = {
    "study": (
        "dpjax.studies.cli",
        "run Monte Carlo accuracy studies (the registered ones, or your own from a TOML file)",
    ),
    "bench": (
        "dpjax.bench.cli",
        "time every mechanism family on this device against the RNG floor and peer libraries",
    ),
    "train": (
        "dpjax.optax.train",
        "DP-SGD on UCI Adult or MNIST with a fixed, quantile or geometric clip norm",
    ),
    "reproduce": (
        "dpjax.studies.reproduce.cli",
        "reproduce the numbers of the papers dpjax implements, beside the papers' values",
    ),
}


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
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (module_name, summary) in SUBCOMMANDS.items():
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_parser(commands).set_defaults(run=module.run)
        else:
            commands.add_parser(name, help=summary)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
