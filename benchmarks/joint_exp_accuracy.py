"""Error vs number of quantiles m: JointExp against IndExp, AppIndExp, CSmooth and AggTree
(Gillenwater, Joseph, Kulesza, ICML 2021, Fig. 3).

Setting of the paper: per trial a fresh sample of n = 1000 points, bounds [-100, 100], epsilon = 1,
swap neighbours, ``q_j = j / (m + 1)``; error = mean over quantiles of the number of data points
between the release and the true ("lower") quantile, averaged over trials. Datasets: N(0, 5^2),
U(-5, 5), and the Goodreads ratings and page counts / 100 when ``books.csv`` is in the data dir.

    /work/venv/bin/python -m benchmarks.joint_exp_accuracy [DATA_DIR] [--ms 1 3 5 9 15 29]
        [--trials 20] [--out benchmarks/joint_exp_accuracy.png]
"""

from __future__ import annotations

import argparse
import csv
import pathlib

import jax
import matplotlib
import numpy as np

from benchmarks.harness import print_machine, print_table
from dpjax.quantiles import agg_tree, app_ind_exp, csmooth, ind_exp, joint_exp

matplotlib.use("Agg")
import matplotlib.pyplot as plt

METHODS = {
    "JointExp": joint_exp,
    "IndExp": ind_exp,
    "AppIndExp": app_ind_exp,
    "CSmooth": csmooth,
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", default="../shared/data")
    parser.add_argument("--ms", type=int, nargs="+", default=[1, 3, 5, 9, 15, 29])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--out", default="benchmarks/joint_exp_accuracy.png")
    args = parser.parse_args()
    print_machine()
    datasets = samplers(pathlib.Path(args.data_dir))
    errors = {d: {name: [] for name in METHODS} for d in datasets}
    for m in args.ms:
        qs = np.arange(1, m + 1) / (m + 1)
        compiled = {
            name: (
                fn
                if name == "CSmooth"
                else jax.jit(lambda k, x, fn=fn, qs=qs: fn(k, x, qs, EPSILON, bounds=BOUNDS))
            )
            for name, fn in METHODS.items()
        }
        for d, sample in datasets.items():
            rng = np.random.default_rng(0)
            totals = dict.fromkeys(METHODS, 0.0)
            for trial in range(args.trials):
                x = np.sort(sample(rng))
                truth = np.quantile(x, qs, method="lower")
                key = jax.random.key(trial)
                for name, fn in compiled.items():
                    if name == "CSmooth":
                        release = fn(key, x, qs, EPSILON, bounds=BOUNDS)
                    else:
                        release = fn(key, x)
                    missed = np.abs(np.searchsorted(x, np.asarray(release)) - np.searchsorted(x, truth))
                    totals[name] += missed.mean() / args.trials
            for name in METHODS:
                errors[d][name].append(totals[name])
        print(f"m = {m} done", flush=True)
    rows = []
    for d in datasets:
        for j, m in enumerate(args.ms):
            row = {"dataset": d, "m": m} | {name: errors[d][name][j] for name in METHODS}
            others = min(errors[d][name][j] for name in METHODS if name != "JointExp")
            row["best other / JointExp"] = others / max(errors[d]["JointExp"][j], 1e-12)
            rows.append(row)
    print_table(f"mean missed points per quantile (n={N}, epsilon={EPSILON}, {args.trials} trials)", rows)
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.6), squeeze=False)
    for ax, d in zip(axes[0], datasets, strict=True):
        for name in METHODS:
            ax.plot(args.ms, errors[d][name], marker="o", label=name)
        ax.set_yscale("log")
        ax.set_title(d)
        ax.set_xlabel("number of quantiles m")
    axes[0][0].set_ylabel("missed points per quantile")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
