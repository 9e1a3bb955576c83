"""Sparse vector family beyond the headline rows: the blocked AboveThreshold and the adaptive sparse
vector with gap (speed, same harness as ``dpjax bench``), and the adaptivity claims of Ding, Wang,
Zhang, Kifer (PVLDB 2019, §7.3) on a synthetic Zipf item-count histogram.

``dpjax bench svt`` times the headline rows (``above_threshold`` and ``sparse_vector`` over 10^4
queries, with the literal NumPy loops). Run from the repository root:

    python -m benchmarks.bench_svt speed [--size 1] [--out DIR]
    python -m benchmarks.bench_svt adaptivity [--trials 1000]

1. ``speed``: ``above_threshold_blocked(block_size=1024)`` on the headline queries, Gumbel
   ``above_threshold(method="first_passage")`` on them (10^4 releases per batch; two variates and
   one search per release against the literal kernel's n + 1), and
   ``adaptive_sparse_vector_with_gap`` on a 10^5-item Zipf(1.1) histogram (k = 10, eps = 0.7,
   monotonic) against the floor of its 2*10^5 Laplace variates and a NumPy loop of Alg. 2.
2. ``adaptivity`` (Fig. 3/4 protocol): the free-gap item datasets (BMS-POS, Kosarak, T40I10D100K) are
   not in ../shared/data (see its README), so a synthetic stand-in is used: 1,657 items (BMS-POS's
   item count), 3,360,000 item occurrences drawn from a Zipf(1.0) law, shuffled once with seed 0 (the
   stream order). eps = 0.7, theta = 1/(1 + k^(2/3)), threshold per trial between the counts at ranks
   r and r+1 with r uniform on {2k, ..., 8k-1}; truth set = items above it. Sparse Vector baseline =
   the same kernel with sigma = inf (classical SVT answers), same key.
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import svt
from dpjax.bench.case import Case, Peer, power_label, scaled
from dpjax.bench.cli import script
from dpjax.bench.report import print_machine, print_table

K, EPSILON = 10, 0.7


def zipf_counts(items, occurrences, exponent, seed):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, items + 1) ** exponent
    return rng.permutation(rng.multinomial(occurrences, weights / weights.sum())).astype(np.float64)


# ----------------------------------------------------------------------------- NumPy references


def numpy_adaptive_svt(rng, queries, threshold, budget):
    """Algorithm 2 literally (integer cost units), noise drawn per query as it is processed."""
    noisy_threshold = threshold + rng.laplace(0, budget.threshold_scale)
    units, answers = 0, []
    for i, q in enumerate(queries):
        top = q + rng.laplace(0, budget.top_scale) - noisy_threshold
        if top >= budget.sigma:
            units += 1
            answers.append((i, top))
        else:
            middle = q + rng.laplace(0, budget.middle_scale) - noisy_threshold
            if middle >= 0:
                units += 2
                answers.append((i, middle))
        if units > 2 * budget.c - 2:
            break
    return answers


def speed_cases(scale: float) -> list[Case]:
    n = scaled(10**4, scale, 1_000)
    queries = np.linspace(0.0, 100.0, n).astype(np.float32)
    items = scaled(10**5, scale, 1_000)
    counts = zipf_counts(items, 10 * items, 1.1, 1)
    threshold = float(np.sort(counts)[::-1][8 * K])
    budget = svt.gap_budget(EPSILON, K, monotonic=True)

    def numpy_adaptive():
        rng = np.random.default_rng(0)
        return lambda: numpy_adaptive_svt(rng, counts, threshold, budget)

    return [
        Case(
            family="svt",
            mechanism="svt.above_threshold_blocked (block_size=1024)",
            setting=f"{power_label(n)} queries linspace(0, 100), T=50, eps1=eps2=0.5, Laplace",
            release=lambda key, q: svt.above_threshold_blocked(
                key, q, threshold=50.0, epsilon1=0.5, epsilon2=0.5, block_size=1024
            ),
            args=(queries,),
            releases=scaled(1_000, scale, 32),
            bytes_per_release=16 * n,
            noise="laplace",
            variates=float(n + 1),
            variates_note="one Laplace per query and one for the threshold",
        ),
        Case(
            family="svt",
            mechanism="svt.above_threshold (noise='gumbel', method='first_passage')",
            setting=f"{power_label(n)} queries linspace(0, 100), T=50, eps1=eps2=0.5, Gumbel",
            release=lambda key, q: svt.above_threshold(
                key, q, threshold=50.0, epsilon1=0.5, epsilon2=0.5, noise="gumbel", method="first_passage"
            ),
            args=(queries,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64,
            noise="gumbel",
            variates=float(n + 1),
            variates_note="floor: one Gumbel per query and one for the threshold (the literal kernel's draw)",
        ),
        Case(
            family="svt",
            mechanism="svt.adaptive_sparse_vector_with_gap",
            setting=f"{power_label(items)}-item Zipf(1.1) histogram, c={K}, eps={EPSILON}, monotonic",
            release=lambda key, c: svt.adaptive_sparse_vector_with_gap(
                key, c, threshold=threshold, epsilon=EPSILON, c=K, monotonic=True
            ),
            args=(counts.astype(np.float32),),
            releases=scaled(100, scale, 8),
            bytes_per_release=32 * items,
            noise="laplace",
            variates=float(2 * items + 1),
            variates_note="two Laplace per query (top and middle branch) and one for the threshold",
            peers=(
                Peer(
                    "NumPy loop (Alg. 2)", "numpy", numpy_adaptive, note="float64, stops at the k-th answer"
                ),
            ),
        ),
    ]


# ----------------------------------------------------------------------------- adaptivity reproduction


def _f_measure(precision, recall):
    return jnp.where(
        precision + recall > 0, 2 * precision * recall / jnp.maximum(precision + recall, 1e-12), 0.0
    )


def adaptivity_trial(key, counts, descending, k, epsilon):
    rank_key, run_key = jax.random.split(key)
    r = jax.random.randint(rank_key, (), 2 * k, 8 * k)
    threshold = (descending[r] + descending[r + 1]) / 2
    truth = jnp.asarray(counts) > threshold
    out = {}
    for name, sigma in (("asvt", None), ("svt", jnp.inf)):
        res = svt.adaptive_sparse_vector_with_gap(
            run_key, counts, threshold, epsilon, c=k, sigma=sigma, monotonic=True
        )
        valid = res.indices >= 0
        answers = valid.sum()
        hits = jnp.where(valid, truth[jnp.maximum(res.indices, 0)], False).sum()
        precision = jnp.where(answers > 0, hits / jnp.maximum(answers, 1), 0.0)
        recall = hits / truth.sum()
        out[name] = (answers, precision, _f_measure(precision, recall))
        if name == "asvt":
            units = jnp.where(
                res.branch == svt.BRANCH_TOP, 1, jnp.where(res.branch == svt.BRANCH_MIDDLE, 2, 0)
            )
            kth = res.indices[k - 1]
            units_at_k = jnp.cumsum(units)[jnp.maximum(kth, 0)]
            budget = svt.gap_budget(epsilon, k, monotonic=True)
            left = epsilon - (budget.eps0 + units_at_k * budget.eps2)
            out["left"] = jnp.where(kth >= 0, left / epsilon, 0.0)
            out["top"] = (res.answer_branches == svt.BRANCH_TOP).sum()
    return out


def reproduce_adaptivity(trials, epsilon=0.7, ks=tuple(range(2, 25, 2))):
    counts = zipf_counts(1_657, 3_360_000, 1.0, 0)
    descending = jnp.asarray(np.sort(counts)[::-1])
    keys = jax.random.split(jax.random.key(2019), trials)
    rows = []
    for k in ks:
        run = jax.jit(jax.vmap(lambda key, k=k: adaptivity_trial(key, counts, descending, k, epsilon)))
        out = jax.tree.map(np.asarray, run(keys))
        a_n, a_p, a_f = (x.mean() for x in out["asvt"])
        s_n, s_p, s_f = (x.mean() for x in out["svt"])
        rows.append(
            {
                "k": k,
                "SVT answers": s_n,
                "ASVT answers": a_n,
                "of which top": out["top"].mean(),
                "SVT precision": s_p,
                "ASVT precision": a_p,
                "SVT F": s_f,
                "ASVT F": a_f,
                "F ratio": a_f / s_f,
                "% budget left at k": 100 * out["left"].mean(),
                "max % left": 100 * (1 - svt.default_theta(k, monotonic=True)) / 2,
            }
        )
    print_table(
        f"Adaptivity (Ding et al. §7.3): synthetic Zipf(1.0), 1,657 items, eps={epsilon}, {trials} trials",
        rows,
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["adaptivity"]:
        parser = argparse.ArgumentParser(description="adaptivity reproduction (Ding et al. 2019, §7.3)")
        parser.add_argument("--trials", type=int, default=1000, help="trials per k (paper: 10,000)")
        args = parser.parse_args(argv[1:])
        print_machine()
        reproduce_adaptivity(args.trials)
    elif argv[:1] == ["speed"]:
        script("benchmarks.bench_svt speed", speed_cases, "speed of the non-headline SVT kernels", argv[1:])
    else:
        raise SystemExit("usage: python -m benchmarks.bench_svt {speed,adaptivity} [options]")


if __name__ == "__main__":
    main()
