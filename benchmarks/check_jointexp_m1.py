"""Gillenwater, Joseph, Kulesza (ICML 2021) §5.3 at m = 1, with many trials: "JointExp matches
AppIndExp and obtains roughly an order of magnitude better error than CSmooth or AggTree".

``dpjax reproduce jointexp`` judges these claims on the paper's 50 trials, where the error (points
between the release and the true median) is heavy-tailed. This script measures the same ratios of
mean errors on many more trials, twice: with dpjax's mechanisms (the reproduction's own code path)
and with an independent NumPy rebuild from the papers' formulas (no dpjax code), so that a
difference from the paper can be told apart from a defect of dpjax:

* JointExp at m = 1 (Alg. 1 with one quantile): the utility ``-(|i - q n| + |n - i - (1 - q) n|)``
  has swap sensitivity 2 and weight ``exp(epsilon/4 * utility) = exp(-epsilon/2 |i - q n|)`` per gap
  of the clipped sorted data, times its width; a uniform point in the chosen gap;
* AppIndExp at m = 1: the same mechanism at the per-quantile epsilon of Dong et al.'s composition
  (0.99 at epsilon 1, delta 1e-6, the paper's App. E grid);
* CSmooth (Bun and Steinke 2019 §3.1.1): ``x_(r) + S_t Z / s`` with the smooth sensitivity ``S_t``
  of the order statistic ``r = floor((n - 1) q)`` (Nissim, Raskhodnikova, Smith 2007 §3.1), Laplace
  log-normal ``Z``, ``sigma`` the positive root of ``(5 eps/t) sigma^3 - 5 sigma^2 - 1``,
  ``s = exp(-1.5 sigma^2)(eps - t/sigma)``, ``t`` tuned on two N(0, 1) datasets of the same size
  (the least variance on a 50-point log grid on [0.01, 1]); clipped to the bounds.

Protocol as the reproduction's (§5.3): n = 1000 per trial (fresh synthetic draws, or Goodreads rows
without replacement), bounds [-100, 100], epsilon 1, q = 1/2; the truth is numpy's ``lower``
quantile. Prints, per dataset, each method's mean error and the ratios with their delta-method SE.
Run from the repository root:

    python -m benchmarks.check_jointexp_m1 --data-dir ../shared/data [--trials 1000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import numpy as np

from dpjax._src.tools.reproduce import jointexp
from dpjax._src.tools.reproduce.result import ratio_of_means_se

BOUNDS, EPSILON, Q = (-100.0, 100.0), 1.0, 0.5
APP_EPSILON = 0.99  # Dong et al. (2020) Thm. 3 at m = 1, delta 1e-6, on the paper's 0.01 grid
T_GRID = np.logspace(-2, 0, 50)


def exponential_mechanism(rng, x, epsilon):
    """One quantile by the exponential mechanism on the gaps (JointExp and IndExp at m = 1)."""
    lower, upper = BOUNDS
    edges = np.concatenate([[lower], np.sort(np.clip(x, lower, upper)), [upper]])
    with np.errstate(divide="ignore"):
        logits = np.log(np.diff(edges)) - epsilon / 2 * np.abs(np.arange(x.size + 1) - Q * x.size)
    gap = np.argmax(logits + rng.gumbel(size=logits.size))
    return rng.uniform(edges[gap], edges[gap + 1])


def max_spreads(x, rank):
    """``M[L]``: the largest ``e[i + L] - e[i]`` over windows containing the order statistic, for the
    edges ``e = [a, x_(0..n-1), b]`` (padded index ``rank + 1``), L = 1, ..., n + 1."""
    lower, upper = BOUNDS
    edges = np.concatenate([[lower], np.sort(np.clip(x, lower, upper)), [upper]])
    pivot, size = rank + 1, edges.size
    out = np.empty(size - 1)
    for length in range(1, size):
        first = np.arange(max(0, pivot - length), min(pivot, size - 1 - length) + 1)
        out[length - 1] = np.max(edges[first + length] - edges[first])
    return out


def log_smooth_sensitivity(spreads, t):
    """``log S_t = max_L (-t max(L - 1, 0) + log M[L])`` for each ``t`` (an array)."""
    lengths = np.arange(1, spreads.size + 1)
    with np.errstate(divide="ignore"):
        values = np.log(spreads)[None, :] - np.atleast_1d(t)[:, None] * np.maximum(lengths - 1, 0)[None, :]
    return values.max(axis=1)


def lln_parameters(epsilon, t):
    """``(sigma, log s)`` of the Laplace log-normal noise (Bun and Steinke 2019, §3.1.1)."""
    roots = np.roots([5 * epsilon / t, -5.0, 0.0, -1.0])
    sigma = float(max(r.real for r in roots if abs(r.imag) < 1e-9 and r.real > 0))
    return sigma, -1.5 * sigma**2 + np.log(epsilon - t / sigma)


def tuned_t(n, rng):
    """The grid ``t`` of least noise variance ``S_t^2 e^{5 sigma^2} / (eps - t/sigma)^2``, averaged over
    two N(0, 1) datasets of size n."""
    rank = int(np.floor((n - 1) * Q))
    params = [lln_parameters(EPSILON, t) for t in T_GRID]
    log_var_noise = np.array([2 * sigma**2 - 2 * log_s for sigma, log_s in params])
    picks = []
    for _ in range(2):
        log_s_t = log_smooth_sensitivity(max_spreads(rng.normal(0.0, 1.0, n), rank), T_GRID)
        picks.append(T_GRID[np.argmin(2 * log_s_t + log_var_noise)])
    return float(np.mean(picks))


def csmooth(rng, x, t):
    """CSmooth for the median with ``eps = 1`` (epsilon^2/2-zCDP, the paper's comparison)."""
    rank = int(np.floor((x.size - 1) * Q))
    sigma, log_s = lln_parameters(EPSILON, t)
    log_s_t = log_smooth_sensitivity(max_spreads(x, rank), t)[0]
    z = rng.laplace() * np.exp(sigma * rng.normal())
    return float(np.clip(np.sort(x)[rank] + np.exp(log_s_t - log_s) * z, *BOUNDS))


def missed(x, release, truth):
    """Points of the sorted ``x`` between the release and the truth."""
    return abs(int(np.searchsorted(x, release)) - int(np.searchsorted(x, truth)))


def numpy_errors(sample, trials, rng):
    t = tuned_t(1000, np.random.default_rng(0))
    out = {"JointExp": [], "AppIndExp": [], "CSmooth": []}
    for _ in range(trials):
        x = np.sort(sample(rng))
        truth = np.quantile(x, Q, method="lower")
        out["JointExp"].append(missed(x, exponential_mechanism(rng, x, EPSILON), truth))
        out["AppIndExp"].append(missed(x, exponential_mechanism(rng, x, APP_EPSILON), truth))
        out["CSmooth"].append(missed(x, csmooth(rng, x, t), truth))
    return {name: np.asarray(v, np.float64) for name, v in out.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="directory with books.csv")
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    samplers, _ = jointexp._samplers(args.data_dir, 0)
    qs = np.array([Q])
    releasers = jointexp._releasers(qs)
    print(f"m = 1, {args.trials} trials per dataset, epsilon {EPSILON:g}, bounds {BOUNDS}, seed {args.seed}")
    print("| dataset | code | JointExp | AppIndExp | CSmooth | AggTree | AppIndExp / JointExp | "
          "CSmooth / JointExp | AggTree / JointExp | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for index, (name, sample) in enumerate(samplers.items()):
        for code in ("dpjax", "NumPy rebuild"):
            start = time.perf_counter()
            rng = np.random.default_rng([args.seed, index, code == "dpjax"])
            if code == "dpjax":
                key = jax.random.fold_in(jax.random.key(args.seed), index)
                errs = jointexp._errors(key, releasers, sample, qs, args.trials, rng)
            else:
                errs = numpy_errors(sample, args.trials, rng)
            cells = [f"{errs[m].mean():.3g}" if m in errs else "–" for m in
                     ("JointExp", "AppIndExp", "CSmooth", "AggTree")]
            ratios = []
            for other in ("AppIndExp", "CSmooth", "AggTree"):
                if other in errs:
                    ratio, se = ratio_of_means_se(errs[other], errs["JointExp"])
                    ratios.append(f"{ratio:.3g} ± {se:.2g}")
                else:
                    ratios.append("–")
            print(f"| {name} | {code} | {' | '.join(cells)} | {' | '.join(ratios)} | "
                  f"{time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
