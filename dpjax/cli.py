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
import signal
import sys
import threading

SUBCOMMANDS = (
    "dpjax.studies.cli",  # dpjax study
    "dpjax.bench.cli",  # dpjax bench
    "dpjax.optax.train",  # dpjax train
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


def build_parser() -> argparse.ArgumentParser:
    """The ``dpjax`` parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="dpjax", description="Differential-privacy mechanisms as vectorized JAX kernels.",
        epilog="Ctrl-C (SIGINT) or SIGTERM stops study, bench and reproduce after the work in progress: "
        "what is finished is written, and the exit status is 130 (143 for SIGTERM).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     help="one of the commands below; COMMAND --help for its options")
    for name in SUBCOMMANDS:
        module = importlib.import_module(name)
        module.add_parser(commands).set_defaults(run=module.run)
    return parser


def _terminate(signum, frame):
    from dpjax.interrupt import Interrupted

    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    """Runs ``dpjax``; returns the exit status (130 after Ctrl-C, 143 after SIGTERM, never a traceback)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from dpjax import interrupt

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except KeyboardInterrupt as err:  # outside the commands' own handling: before or after their work
        signum = getattr(err, "signum", signal.SIGINT)
        print(f"\ndpjax: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return interrupt.exit_code(signum)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


if __name__ == "__main__":
    sys.exit(main())
