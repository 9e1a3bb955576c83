"""Error vs number of quantiles m: JointExp against IndExp, AppIndExp, CSmooth and AggTree
(Gillenwater, Joseph, Kulesza, ICML 2021, Fig. 3).

Setting of the paper: per trial a fresh sample of n = 1000 points, bounds [-100, 100], epsilon = 1,
swap neighbours, ``q_j = j / (m + 1)``; error = mean over quantiles of the number of data points
between the release and the true ("lower") quantile, averaged over trials. Datasets: N(0, 5^2),
U(-5, 5), and the Goodreads ratings and page counts / 100 when ``books.csv`` is in the data dir.

    /work/venv/bin/python -m benchmarks.joint_exp_accuracy [DATA_DIR] [--ms 1 3 5 9 15 29]
        [--trials 20] [--out benchmarks/joint_exp_accuracy.png] [--csv PATH]

The paper's code runs ``m = 1..29``. Progress (seconds per method) is printed per (m, dataset);
``--csv`` also writes each cell's mean and standard error over trials.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import time

import jax
import matplotlib
import numpy as np

from dpjax.bench.report import print_machine, print_table
from dpjax.quantiles import agg_tree, app_ind_exp, csmooth, ind_exp, joint_exp

matplotlib.use("Agg")
import matplotlib.pyplot as plt

METHODS = {
    "JointExp": joint_exp,
    "IndExp": ind_exp,
    "AppIndExp": app_ind_exp,
    # CSmooth takes zCDP rho: rho = epsilon^2/2, the zCDP that epsilon-DP implies (the paper's comparison).
    "CSmooth": lambda key, x, qs, epsilon, **kw: csmooth(key, x, qs, epsilon**2 / 2, **kw),
    "AggTree": agg_tree,
}
N, BOUNDS, EPSILON = 1000, (-100.0, 100.0), 1.0


def goodreads(data_dir: pathlib.Path) -> dict:
    path = data_dir / "books.csv"
    if not path.exists():
        return {}
    ratings, pages = [], []
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rating_col, pages_col = header.index("average_rating"), header.index("  num_pages")
        for row in reader:
            try:
                rating, page = float(row[rating_col]), float(row[pages_col])
            except (ValueError, IndexError):
                continue
            ratings.append(rating)
            pages.append(page / 100)
    return {"goodreads ratings": np.array(ratings), "goodreads pages/100": np.array(pages)}


def samplers(data_dir):
    out = {
        "N(0,5)": lambda rng: rng.normal(0.0, 5.0, N),
        "U(-5,5)": lambda rng: rng.uniform(-5.0, 5.0, N),
    }
    for name, column in goodreads(data_dir).items():
        out[name] = lambda rng, column=column: rng.choice(column, N, replace=False)
    return out


def compile_methods(qs):
    """Each method as ``fn(key, x)`` for the levels ``qs`` (CSmooth tunes in Python, so it is not jitted)."""

    def bind(fn):
        return lambda k, x: fn(k, x, qs, EPSILON, bounds=BOUNDS)

    return {name: bind(fn) if name == "CSmooth" else jax.jit(bind(fn)) for name, fn in METHODS.items()}


def missed_points(x, release, truth):
    """Mean over quantiles of the number of sorted points ``x`` between release and true quantile."""
    return np.abs(np.searchsorted(x, np.asarray(release)) - np.searchsorted(x, truth)).mean()


def run_cell(methods, sample, qs, trials):
    """Per-trial errors of every method on fresh samples (seeded per cell) and seconds per method."""
    rng = np.random.default_rng(0)
    errors, seconds = {name: [] for name in methods}, dict.fromkeys(methods, 0.0)
    for trial in range(trials):
        x = np.sort(sample(rng))
        truth = np.quantile(x, qs, method="lower")
        key = jax.random.key(trial)
        for name, fn in methods.items():
            start = time.perf_counter()
            release = jax.block_until_ready(fn(key, x))
            seconds[name] += time.perf_counter() - start
            errors[name].append(missed_points(x, release, truth))
    return errors, seconds


def write_csv(path, per_trial, ms):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["dataset", "m", "method", "mean", "stderr", "trials"])
        for d, by_m in per_trial.items():
            for m in ms:
                for name, errs in by_m[m].items():
                    se = np.std(errs, ddof=1) / np.sqrt(len(errs)) if len(errs) > 1 else float("nan")
                    writer.writerow([d, m, name, f"{np.mean(errs):.4f}", f"{se:.4f}", len(errs)])


def plot(path, errors, ms):
    datasets = list(errors)
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.6), squeeze=False)
    for ax, d in zip(axes[0], datasets, strict=True):
        for name in METHODS:
            ax.plot(ms, errors[d][name], marker="o", label=name)
        ax.set_yscale("log")
        ax.set_title(d)
        ax.set_xlabel("number of quantiles m")
    axes[0][0].set_ylabel("missed points per quantile")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", default="../shared/data")
    parser.add_argument("--ms", type=int, nargs="+", default=[1, 3, 5, 9, 15, 29])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", default="benchmarks/joint_exp_accuracy.png")
    parser.add_argument("--csv", default=None, help="also write mean and standard error per cell")
    args = parser.parse_args()
    print_machine()
    datasets = samplers(pathlib.Path(args.data_dir))
    per_trial = {d: {} for d in datasets}
    for m in args.ms:
        qs = np.arange(1, m + 1) / (m + 1)
        methods = compile_methods(qs)
        for d, sample in datasets.items():
            per_trial[d][m], seconds = run_cell(methods, sample, qs, args.trials)
            timing = ", ".join(f"{name} {s:.1f}s" for name, s in seconds.items())
            print(f"m = {m}, {d}: {timing}", flush=True)
    errors = {
        d: {name: [np.mean(per_trial[d][m][name]) for m in args.ms] for name in METHODS} for d in datasets
    }
    rows = []
    for d in datasets:
        for j, m in enumerate(args.ms):
            row = {"dataset": d, "m": m} | {name: errors[d][name][j] for name in METHODS}
            others = min(errors[d][name][j] for name in METHODS if name != "JointExp")
            row["best other / JointExp"] = others / max(errors[d]["JointExp"][j], 1e-12)
            rows.append(row)
    print_table(f"mean missed points per quantile (n={N}, epsilon={EPSILON}, {args.trials} trials)", rows)
    if args.csv:
        write_csv(args.csv, per_trial, args.ms)
        print(f"csv: {args.csv}")
    plot(args.out, errors, args.ms)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
