"""Liang and Yi, "Adaptive Privacy Budgeting" §7: "PM performs like BM" for Gaussian KDE and kNN, with
many more trials than ``dpjax reproduce budgeting`` runs, and the law PM's answer rests on.

* KDE (Fig. 4, distance privatization, c = 64, bandwidth 500 m, the reproduction's 9,740 stand-in
  users around 20 hotspots): at three hotspot centres and rho in {1e-4, 1e-3}, ``keys`` releases of
  PM1 and of BM1 each: mean, SD and mean absolute error of the estimate against the truth, and the
  variance of each surviving user's combined distance estimate times 2 rho (1 when PM1 releases the
  survivors with the full budget's noise, as Algorithm 7 says; the eliminated users lie beyond 6b and
  count e^-18).
* kNN (Fig. 5, MNIST from ``--data-dir``, the first ``rows`` images, ``queries`` held-out ones as
  query points, distance privatization, c = 16, rho = 1e-2): the ratio of mean DistErr PM1 / BM1
  with its delta-method SE at k = 1 and k = 10, the share of exact answers and PM's savings.

Run from the repository root:

    python -m benchmarks.check_budgeting_pm_bm --data-dir ../shared/data [--keys 400] [--rows 1000]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax
import numpy as np

from dpjax._src.tools import papers as data
from dpjax._src.tools.reproduce.result import ratio_of_means_se
from dpjax.budgeting import kde, kde_baseline, knn, knn_baseline

BANDWIDTH, BETA0 = 500.0, 0.025


def kde_check(keys: int) -> None:
    x, centres = data.hotspots(9_740, seed=1)
    print("| rho | point | truth | BM1 mean (SD) | PM1 mean (SD) | MAE PM1 / BM1 | survivors' var x 2 rho |")
    print("|---|---|---|---|---|---|---|")
    for rho in (1e-4, 1e-3):
        rhos = np.full(x.shape[0], rho, np.float32)
        private = jax.jit(jax.vmap(lambda k, p, r=rhos: kde(
            k, x, r, p, bandwidth=BANDWIDTH, c=64, beta0=BETA0, mode="distance"), in_axes=(0, None)))
        baseline = jax.jit(jax.vmap(lambda k, p, r=rhos: kde_baseline(
            k, x, r, p, bandwidth=BANDWIDTH, mode="distance"), in_axes=(0, None)))
        for index, p in enumerate(centres[:3]):
            distance = np.linalg.norm(x - p, axis=1)
            truth = float(np.mean(np.exp(-(distance**2) / (2 * BANDWIDTH**2))))
            split = jax.random.split(jax.random.fold_in(jax.random.key(0), index), keys)
            estimate, result = private(split, p)
            pm, bm = np.asarray(estimate, np.float64), np.asarray(baseline(split, p), np.float64)
            survivors = np.asarray(result.status) == 3
            spread = (np.asarray(result.mean) - distance[None, :])[survivors]
            ratio, se = ratio_of_means_se(np.abs(pm - truth), np.abs(bm - truth))
            law = spread.var() * 2 * rho
            print(f"| {rho:g} | {index} | {truth:.5f} | {bm.mean():.5f} ({bm.std():.2e}) | "
                  f"{pm.mean():.5f} ({pm.std():.2e}) | {ratio:.3f} ± {se:.3f} | {law:.3f} |", flush=True)


def knn_check(data_dir: Path, keys: int, rows: int, queries: int) -> None:
    points, source = data.knn_points(data_dir)
    points = points[:rows]
    chosen = np.random.default_rng(0).choice(points.shape[0], queries, replace=False)
    candidates, query_points = np.delete(points, chosen, axis=0), points[chosen]
    rhos = np.full(candidates.shape[0], 1e-2, np.float32)
    print(f"\nkNN on {source}, {candidates.shape[0]} candidates, {queries} queries x {keys} keys, rho 1e-2")
    print("| k | DistErr PM1 / BM1 | PM1 mean | BM1 mean | exact PM1 | exact BM1 | PM1 PrivSav |")
    print("|---|---|---|---|---|---|---|")
    for k in (1, 10):
        private = jax.jit(jax.vmap(lambda key, p, k=k: knn(
            key, candidates, rhos, p, k=k, c=16, beta0=BETA0, mode="distance"), in_axes=(0, None)))
        baseline = jax.jit(jax.vmap(lambda key, p, k=k: knn_baseline(
            key, candidates, rhos, p, k=k, mode="distance"), in_axes=(0, None)))
        pm_errors, bm_errors, savings = [], [], []
        for index, p in enumerate(query_points):
            split = jax.random.split(jax.random.fold_in(jax.random.key(1), index), keys)
            distance = np.linalg.norm(candidates - p, axis=1)
            best = np.sort(distance)[:k].sum()
            chosen_pm, result = private(split, p)
            chosen_bm = baseline(split, p)
            pm_errors.append((distance[np.asarray(chosen_pm)].sum(axis=1) - best) / best)
            bm_errors.append((distance[np.asarray(chosen_bm)].sum(axis=1) - best) / best)
            savings.append(1 - np.asarray(result.rounds).mean() / 16)
        pm, bm = np.concatenate(pm_errors), np.concatenate(bm_errors)
        ratio, se = ratio_of_means_se(pm, bm)
        exact = f"{np.mean(pm == 0):.3f} | {np.mean(bm == 0):.3f}"
        print(f"| {k} | {ratio:.3f} ± {se:.3f} | {pm.mean():.3g} | {bm.mean():.3g} | {exact} | "
              f"{np.mean(savings):.3f} |", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="directory with mnist_5k.csv.gz")
    parser.add_argument("--keys", type=int, default=400, help="KDE releases per point (kNN: a quarter)")
    parser.add_argument("--rows", type=int, default=1000, help="MNIST images used (the reproduction's quick)")
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args(argv)
    kde_check(args.keys)
    knn_check(args.data_dir, max(args.keys // 4, 2), args.rows, args.queries)


if __name__ == "__main__":
    main()
