"""An independent NumPy rebuild of Durfee (2023) §6.2 (Figure 3: UQE against EMQ for single
quantiles), to tell a defect of dpjax from a difference of protocol where ``dpjax reproduce uqe``
and the paper disagree.

Rebuilt from the papers' text only (no dpjax code): EMQ is Smith (2011) Alg. 2 as in Durfee §5.1
(the gaps of the clipped, sorted data weighted by ``width * exp(-epsilon/2 |i - q n|)``, swap
neighbors, a uniform point in the chosen gap); UQE is Durfee Alg. 2 with AboveThreshold as in
Appendix C (Exponential noise of scale ``1/epsilon_1`` on the threshold ``q n`` and ``1/epsilon_2`` on
each count ``#{x < beta^i + lower - 1}``, i = 1, 2, ...; the first noisy count at or above the
noisy threshold halts), ``epsilon_1 = epsilon_2 = 1/2``, ``beta = 1.001``. The protocol is §6.2's:
1000 points without replacement per sample, jitter N(0, sd^2) once per real dataset, the truth from
``numpy.quantile`` (default, linear) on the un-jittered sample, outputs rounded on integer data,
EMQ on the paper's ranges, MAE over the samples, q = 0.05, 0.06, ..., 0.95.

The paper does not say which lower bound UQE gets on the signed synthetic data; the variants are:

* ``range``: the lower end of EMQ's range (-5, -25; what ``dpjax reproduce`` uses);
* ``alg4``: no bound at all, Algorithm 4 (App. B.1): two AboveThreshold calls with epsilon/2 each,
  the first on the positives (``#{x + 1 < beta^i}``, i = 0, 1, ...), the second, when the first
  halts at i = 0, on the negatives (``#{x - 1 > -beta^i}`` against ``(1 - q) n``).

Prints, per dataset and variant, the share of q where EMQ's MAE is below UQE's and the median over
q of MAE(EMQ)/MAE(UQE), with 95% bootstrap intervals over the samples (the rows of ``dpjax
reproduce uqe``'s Fig. 3). Run from the repository root:

    python -m benchmarks.rebuild_uqe_fig3 --data-dir ../shared/data [--samples 100] [--step 0.01]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from dpjax._src.tools import papers as data

RANGES = {
    "uniform": (-5.0, 5.0),
    "normal": (-25.0, 25.0),
    "ratings": (0.0, 10.0),
    "pages": (0.0, 10_000.0),
    "hours": (0.0, 100.0),
    "ages": (0.0, 100.0),
}
JITTER = {"ratings": 0.001, "pages": 0.1, "ages": 0.1, "hours": 0.1}
INTEGER = ("pages", "ages", "hours")
EPSILON, BETA = 1.0, 1.001


def emq(rng, x, q, epsilon, lower, upper):
    """Smith (2011) Alg. 2: a gap of the sorted clipped data by width * exp(-epsilon/2 |i - q n|)."""
    x = np.sort(np.clip(x, lower, upper))
    edges = np.concatenate([[lower], x, [upper]])
    with np.errstate(divide="ignore"):
        logits = np.log(np.diff(edges)) - epsilon / 2 * np.abs(np.arange(x.size + 1) - q * x.size)
    gap = np.argmax(logits + rng.gumbel(size=logits.size))
    return rng.uniform(edges[gap], edges[gap + 1])


def above_threshold(rng, counts_at, threshold, epsilon1, epsilon2, first, limit=10**6):
    """Appendix C: the first i >= ``first`` with ``counts_at(i) + Exp(1/epsilon2) >= threshold +
    Exp(1/epsilon1)`` (queries drawn in blocks; ``counts_at`` is vectorised)."""
    noisy_threshold = threshold + rng.exponential(1 / epsilon1)
    start, block = first, 4096
    while start < limit:
        i = np.arange(start, start + block)
        hit = counts_at(i) + rng.exponential(1 / epsilon2, i.size) >= noisy_threshold
        if hit.any():
            return int(i[np.argmax(hit)])
        start, block = start + block, block * 2
    raise RuntimeError("no halt")


def uqe(rng, x, q, epsilon, lower):
    """Durfee Alg. 2: candidates beta^i + lower - 1, i = 1, 2, ...; epsilon1 = epsilon2 = epsilon/2."""
    shifted = np.sort(x - lower + 1.0)

    def counts(i):
        return np.searchsorted(shifted, BETA ** i.astype(np.float64), side="left")

    k = above_threshold(rng, counts, q * x.size, epsilon / 2, epsilon / 2, first=1)
    return BETA**k + lower - 1


def uqe_alg4(rng, x, q, epsilon):
    """Durfee Alg. 4 (App. B.1): the positives first, then the negatives; epsilon/2 per call."""
    up, down = np.sort(x + 1.0), np.sort(-(x - 1.0))

    def positives(i):
        return np.searchsorted(up, BETA ** i.astype(np.float64), side="left")

    def negatives(i):  # #{x - 1 > -beta^i} = #{-(x - 1) < beta^i}
        return np.searchsorted(down, BETA ** i.astype(np.float64), side="left")

    eps = epsilon / 4  # per call epsilon/2, split evenly between threshold and queries
    k = above_threshold(rng, positives, q * x.size, eps, eps, first=0)
    if k > 0:
        return BETA**k - 1
    k = above_threshold(rng, negatives, (1 - q) * x.size, eps, eps, first=0)
    return 1 - BETA**k if k > 0 else 0.0


def errors(rng, values, name, samples, qs, variant):
    """[samples, q] absolute errors of EMQ and of UQE on ``samples`` subsamples of 1000 points."""
    low, high = RANGES[name]
    jittered = values + rng.normal(0.0, JITTER[name], values.size) if name in JITTER else values
    out = {"EMQ": np.empty((samples, qs.size)), "UQE": np.empty((samples, qs.size))}
    for s in range(samples):
        idx = rng.choice(values.size, 1000, replace=False)
        truth, x = np.quantile(values[idx], qs), jittered[idx]
        for j, q in enumerate(qs):
            releases = {
                "EMQ": emq(rng, x, q, EPSILON, low, high),
                "UQE": uqe_alg4(rng, x, q, EPSILON) if variant == "alg4" else uqe(rng, x, q, EPSILON, low),
            }
            for method, value in releases.items():
                out[method][s, j] = abs((np.round(value) if name in INTEGER else value) - truth[j])
    return out


def statistics(emq_errors, uqe_errors):
    """Share of q where EMQ's MAE is below UQE's, median ratio (1 where both are exact)."""
    emq_mae, uqe_mae = emq_errors.mean(axis=0), uqe_errors.mean(axis=0)
    both_exact = (emq_mae == 0) & (uqe_mae == 0)
    with np.errstate(divide="ignore"):
        ratio = np.where(both_exact, 1.0, emq_mae / np.where(both_exact, 1.0, uqe_mae))
    return float(np.mean(ratio < 1)), float(np.median(ratio))


def bootstrap(emq_errors, uqe_errors, resamples=1000, seed=0):
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        idx = rng.integers(0, emq_errors.shape[0], emq_errors.shape[0])
        draws.append(statistics(emq_errors[idx], uqe_errors[idx]))
    return np.quantile(np.asarray(draws), [0.025, 0.975], axis=0).T


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="books.csv, adult.data, adult.test")
    parser.add_argument("--samples", type=int, default=100, help="subsamples per quantile (paper: 100)")
    parser.add_argument("--step", type=float, default=0.01, help="quantile step (paper: 0.01)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    columns, sources = data.real_columns(args.data_dir)
    datasets = {"uniform": rng.uniform(-5.0, 5.0, 10_000), "normal": rng.normal(0.0, 5.0, 10_000), **columns}
    qs = np.round(np.arange(0.05, 0.95 + 1e-9, args.step), 2)
    print(f"NumPy rebuild of Durfee (2023) §6.2: {args.samples} samples x {qs.size} quantiles, "
          f"epsilon {EPSILON:g}, beta {BETA}, seed {args.seed}")
    print("| dataset | UQE's lower bound | share of q where EMQ's MAE < UQE's [95%] | "
          "median MAE(EMQ)/MAE(UQE) [95%] | s |")
    print("|---|---|---|---|---|")
    for name in RANGES:
        for variant in ("range", "alg4") if name in ("uniform", "normal") else ("range",):
            start = time.perf_counter()
            out = errors(rng, datasets[name], name, args.samples, qs, variant)
            share, median = statistics(out["EMQ"], out["UQE"])
            (share_lo, share_hi), (median_lo, median_hi) = bootstrap(out["EMQ"], out["UQE"])
            bound = "none (Alg. 4)" if variant == "alg4" else f"{RANGES[name][0]:g}"
            source = sources.get(name, "synthetic")
            print(f"| {name} ({source}) | {bound} | {share:.2f} [{share_lo:.2f}, {share_hi:.2f}] | "
                  f"{median:.3f} [{median_lo:.3f}, {median_hi:.3f}] | {time.perf_counter() - start:.0f} |",
                  flush=True)


if __name__ == "__main__":
    main()
