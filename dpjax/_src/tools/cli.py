"""The ``dpjax`` command line.

Each subcommand is a module with ``add_parser(subparsers) -> ArgumentParser`` (it adds its parser
to the ``argparse`` subparsers) and ``run(args) -> int`` (the exit status). Registering one is one
line in ``SUBCOMMANDS``; the modules live in :mod:`dpjax._src.tools` and never import this one back
(their shared ``argparse`` types are in :mod:`dpjax._src.tools.argtypes`). Only the module of the
command being run is imported (the others are listed by their one-line help), so ``dpjax --help``
answers without loading JAX.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys

__all__ = [
    "SUBCOMMANDS",
    "build_parser",
    "main",
]

# name: (module, the one-line help its add_parser gives; tests/tools/test_cli_startup.py checks they agree)
SUBCOMMANDS = {
    "study": (
        "dpjax._src.tools.study.cli",
        "run Monte Carlo accuracy studies (the registered ones, or your own from a TOML file)",
    ),
    "bench": (
        "dpjax._src.tools.bench.cli",
        "time every mechanism family on this device against the RNG floor and peer libraries",
    ),
    "train": (
        "dpjax._src.tools.train.cli",
        "DP-SGD on UCI Adult or MNIST with a fixed, quantile or geometric clip norm",
    ),
    "reproduce": (
        "dpjax._src.tools.reproduce.cli",
        "reproduce the numbers of the papers dpjax implements, beside the papers' values",
    ),
    "data": (
        "dpjax._src.tools.data.cli",
        "fetch the papers' public datasets into a local cache, or list them",
    ),
}


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The ``dpjax`` parser: every subcommand in full, or (``chosen`` given) only that one in full
    and the others by their one-line help, so ``dpjax --help`` and each command import only what
    they need."""
    parser = argparse.ArgumentParser(
        prog="dpjax", description="Differential-privacy mechanisms as vectorized JAX kernels.",
        epilog="Ctrl-C (SIGINT) or SIGTERM stops study, bench and reproduce after the work in progress: "
        "what is finished is written, and the exit status is 130 (143 for SIGTERM).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     help="one of the commands below; COMMAND --help for its options")
    for name, (module_name, summary) in SUBCOMMANDS.items():
        if chosen is None or name == chosen:
            module = importlib.import_module(module_name)
            module.add_parser(commands).set_defaults(run=module.run)
        else:
            commands.add_parser(name, help=summary)
    return parser


def _chosen_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first non-option word), or ``None``."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    """Runs ``dpjax``; returns the exit status: 130 after Ctrl-C, 143 after SIGTERM (never 0 once a
    signal came, at whatever moment from the first line to the last write), never a traceback.

    Without ``argv`` (the process's own command line: the console script, ``python -m dpjax.cli``) an
    interrupted command ends the process at once with that status, its outputs written and its
    streams flushed, without the interpreter's teardown, where threads of XLA still running (a
    compile that the signal left behind) could crash it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from dpjax._src import interrupt

    own = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    with interrupt.session():
        try:
            try:
                args = build_parser(_chosen_command(argv) or "").parse_args(argv)
                interrupt.check()  # a signal recorded while the command's modules were imported
                status = args.run(args)
            finally:
                interrupt.defer()  # from here a first signal is only recorded (a later one exits at once)
        except KeyboardInterrupt as err:  # outside the commands' own handling: before or after their work
            status = interrupt.exit_code(getattr(err, "signum", None) or interrupt.seen() or signal.SIGINT)
            print(f"\ndpjax: interrupted ({signal.Signals(status - 128).name})", file=sys.stderr)
        signum = interrupt.seen()
        if signum is not None and status != interrupt.exit_code(signum):  # e.g. its exception was swallowed
            print(f"dpjax: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
            status = interrupt.exit_code(signum)
        if own and signum is not None:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
