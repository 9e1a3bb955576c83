"""The ``dpjax train`` command line: its parser, defaults and first line, without importing JAX (the
training itself is :mod:`dpjax._src.tools.train.run`, imported once the command has printed its first line).
"""

from __future__ import annotations

import argparse

from dpjax._src.tools.argtypes import open_unit, positive_float, positive_int, seed_type
from dpjax._src.tools.train.settings import DEFAULT_EPOCHS, DEFAULTS

__all__ = [
    "DefaultsHelpFormatter",
    "add_parser",
    "run",
]


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with ``(default: X)`` after every option that has a default other than None."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def add_parser(commands) -> argparse.ArgumentParser:
    """Adds ``dpjax train`` to the CLI's subcommands."""
    d = DEFAULTS
    p = commands.add_parser(
        "train",
        help="DP-SGD on UCI Adult or MNIST with a fixed, quantile or geometric clip norm",
        description="Trains a small MLP (Adult) or CNN (MNIST) with dpjax.optax.dp_aggregate and Adam, "
        "calibrating the noise so the whole run is (epsilon, delta)-DP (add/remove one example, "
        "Poisson sampling).",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("--dataset", choices=("adult", "mnist"), default=d["dataset"], help="training data")
    p.add_argument(
        "--data", metavar="PATH",
        help="MNIST CSV (default: mnist_5k.csv.gz in the `dpjax data fetch` cache; Adult ships in dpjax)"
    )
    p.add_argument(
        "--model", choices=("auto", "mlp", "cnn"), default="auto", help="auto: mlp for Adult, cnn for MNIST"
    )
    p.add_argument(
        "--clip", choices=("fixed", "quantile", "geometric"), default=d["clip"], help="clip norm strategy"
    )
    p.add_argument(
        "--clip-norm", type=positive_float, default=d["clip_norm"], help="fixed or initial clip norm"
    )
    p.add_argument("--quantile", type=open_unit, default=d["quantile"], help="target unclipped fraction")
    p.add_argument(
        "--clip-epsilon",
        type=positive_float,
        default=d["clip_epsilon"],
        help="quantile clip: epsilon per estimate",
    )
    p.add_argument(
        "--every", type=positive_int, default=d["every"], help="quantile clip: estimate every N steps"
    )
    p.add_argument(
        "--count-noise-multiplier", type=positive_float, help="geometric clip (default: 0.1 * batch size)"
    )
    p.add_argument("--epsilon", type=positive_float, default=d["epsilon"], help="epsilon of the whole run")
    p.add_argument("--delta", type=open_unit, default=d["delta"], help="delta of the whole run")
    p.add_argument(
        "--epochs", type=positive_float,
        help="expected passes over the data (default: "
        f"{', '.join(f'{epochs:g} for {name}' for name, epochs in DEFAULT_EPOCHS.items())})",
    )
    p.add_argument("--batch-size", type=positive_int, default=d["batch_size"], help="expected batch size")
    p.add_argument("--hidden", type=positive_int, default=d["hidden"], help="MLP hidden units")
    p.add_argument(
        "--learning-rate", type=positive_float, default=d["learning_rate"], help="Adam learning rate"
    )
    p.add_argument(
        "--microbatch-size", type=positive_int,
        help="per-example gradients this many at a time (default: the whole batch)",
    )
    p.add_argument("--seed", type=seed_type, default=d["seed"], help="model init, sampling and noise")
    p.add_argument(
        "--out", metavar="DIR", help="write metrics.csv, metrics.json, metrics.png there (default: no "
        "files); DIR must be new or empty unless --overwrite is given"
    )
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier dpjax train run in --out DIR (default: refuse)")
    return p


def run(args: argparse.Namespace) -> int:
    """``dpjax train``: prints its first line before importing JAX, then trains
    (:func:`dpjax._src.tools.train.run.main`)."""
    print(
        f"dpjax train: {args.dataset}, clip {args.clip}, epsilon {args.epsilon:g}, delta {args.delta:g}",
        flush=True,
    )
    print("  importing JAX ...", flush=True)
    from dpjax._src import interrupt
    from dpjax._src.tools.train import run

    interrupt.check()  # a signal that came during the import (recorded there, see dpjax._src.interrupt)
    return run.main(args)
