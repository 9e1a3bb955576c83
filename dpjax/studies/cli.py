"""The ``dpjax`` command line: ``dpjax study`` runs the registered Monte Carlo accuracy studies."""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
import zlib
from pathlib import Path

import jax

from dpjax.studies import datasets
from dpjax.studies.registry import studies
from dpjax.studies.reproduce import cli as reproduce_cli

TABLE_COLUMNS = (
    ("study", "study", "{}"),
    ("dataset", "dataset", "{}"),
    ("epsilon", "eps", "{:g}"),
    ("statistic", "statistic", "{}"),
    ("truth", "truth", "{:.4g}"),
    ("mean_abs_error", "MAE", "{:.4g}"),
    ("std_error", "±SE", "{:.2g}"),
    ("median_abs_error", "median AE", "{:.4g}"),
    ("abs_error_q95", "AE q95", "{:.4g}"),
    ("seconds", "sec", "{:.2f}"),
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpjax", description="Differential-privacy mechanisms as vectorized JAX kernels."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    study = commands.add_parser(
        "study",
        help="run Monte Carlo accuracy studies of the registered mechanisms",
        description="Runs each registered mechanism TRIALS times (vmap over keys) on built-in "
        "synthetic data and prints its error against the truth.",
    )
    study.add_argument(
        "--trials",
        type=_positive_int,
        default=1000,
        help="releases per study and dataset (default: 1000)",
    )
    study.add_argument(
        "--epsilon",
        type=_positive_float,
        nargs="+",
        default=[1.0],
        help="total privacy parameter(s) per release (default: 1.0)",
    )
    study.add_argument("--seed", type=int, default=0, help="seed of the data and of the noise (default: 0)")
    study.add_argument("--study", nargs="+", metavar="NAME", help="run only these studies (see --list)")
    study.add_argument(
        "--dataset",
        nargs="+",
        metavar="NAME",
        choices=datasets.DATASET_NAMES,
        help="run only on these built-in datasets",
    )
    study.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write results.csv, results.json and results.png to DIR",
    )
    study.add_argument("--list", action="store_true", help="list the studies and datasets, then exit")
    reproduce_cli.add_parser(commands)
    return parser


def _format_table(rows: list[dict]) -> str:
    header = [title for _, title, _ in TABLE_COLUMNS]
    body = []
    for row in rows:
        cells = []
        for key, _, fmt in TABLE_COLUMNS:
            value = row.get(key, "")
            cells.append(fmt.format(value) if value != "" else "")
        body.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in body
    ]
    return "\n".join(lines)


def _write_outputs(rows: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    with open(out / "results.json", "w") as f:
        json.dump(rows, f, indent=2)
    _plot(rows, out / "results.png")


def _plot(rows: list[dict], path: Path) -> None:
    """Horizontal bars of mean absolute error (log scale), one row per study/dataset/statistic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(f"{r['study']} · {r['dataset']} · {r['statistic']}" for r in rows))
    position = {label: i for i, label in enumerate(labels)}
    epsilons = sorted({r["epsilon"] for r in rows})
    height = 0.8 / len(epsilons)
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.22 * len(labels) * len(epsilons)))
    for j, eps in enumerate(epsilons):
        ys, xs, errs = [], [], []
        for r in rows:
            mae = r.get("mean_abs_error", math.nan)
            if r["epsilon"] == eps and math.isfinite(mae) and mae > 0:
                ys.append(position[f"{r['study']} · {r['dataset']} · {r['statistic']}"] + j * height)
                xs.append(mae)
                errs.append(r.get("std_error", 0.0))
        ax.barh(ys, xs, height, xerr=errs, label=f"ε = {eps:g}")
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(labels))])
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("mean absolute error against the truth (log scale; exact rows omitted)")
    ax.set_title("dpjax study")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_study(args: argparse.Namespace) -> int:
    registered = studies()
    if args.list:
        for s in registered.values():
            print(f"{s.name:32s} [{s.family}] on {', '.join(s.datasets)}: {s.description}")
        for name in datasets.DATASET_NAMES:
            print(f"dataset {name:16s} {datasets.load(name, args.seed).description}")
        return 0
    selected = registered
    if args.study:
        unknown = sorted(set(args.study) - set(registered))
        if unknown:
            print(
                f"dpjax study: error: unknown study {', '.join(unknown)}; "
                f"choose from {', '.join(registered)}",
                file=sys.stderr,
            )
            return 2
        selected = {name: registered[name] for name in args.study}
    print(
        f"dpjax study: {len(selected)} studies, {args.trials} trials, epsilon "
        f"{', '.join(f'{e:g}' for e in args.epsilon)}, seed {args.seed}, "
        f"backend {jax.default_backend()}",
        flush=True,
    )
    key = jax.random.key(args.seed)
    rows, failures = [], []
    for s in selected.values():
        for d_name in s.datasets:
            if args.dataset and d_name not in args.dataset:
                continue
            data = datasets.load(d_name, args.seed)
            for eps in args.epsilon:
                # Independent noise per (study, dataset, epsilon), stable across runs and selections.
                run_key = jax.random.fold_in(key, zlib.crc32(f"{s.name}/{d_name}/{eps!r}".encode()))
                start = time.perf_counter()
                try:
                    results = s.run(run_key, data, eps, args.trials)
                except Exception as err:  # report, run the other studies, exit non-zero
                    failures.append(f"{s.name} on {d_name} at epsilon {eps:g}")
                    print(
                        f"dpjax study: error: {failures[-1]}: {type(err).__name__}: {err}",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                seconds = time.perf_counter() - start
                for r in results:
                    rows.append(
                        {
                            "study": s.name,
                            "dataset": d_name,
                            "epsilon": eps,
                            "trials": args.trials,
                            **r,
                            "seconds": seconds,
                        }
                    )
    if not rows:
        print("dpjax study: error: no study runs on the selected datasets", file=sys.stderr)
        return 2
    print(_format_table(rows))
    if args.out:
        _write_outputs(rows, args.out)
        print(f"wrote {args.out / 'results.csv'}, results.json and results.png")
    if failures:
        print(f"dpjax study: {len(failures)} run(s) failed: {'; '.join(failures)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    if args.command == "study":
        return run_study(args)
    if args.command == "reproduce":
        return reproduce_cli.run(args)
    return 2  # pragma: no cover - argparse enforces the subcommand


if __name__ == "__main__":
    sys.exit(main())
