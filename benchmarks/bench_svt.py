"""Sparse vector family: speed against the RNG floor and NumPy sequential loops, and the adaptivity
claims of Ding, Wang, Zhang, Kifer (PVLDB 2019, §7.3) on a synthetic Zipf item-count histogram.

Run from the repository root:  /work/venv/bin/python -m benchmarks.bench_svt [--trials-repro 1000]

1. AboveThreshold, 10^4 queries x 1,000 trials (Laplace, eps1 = eps2 = 0.5): ``jit(vmap)`` over keys,
   the blocked form, the RNG floor (10^7 ``jax.random.laplace`` variates) and a literal NumPy loop.
2. Adaptive sparse vector with gap on a 10^5-item Zipf histogram x 1,000 trials (k = 10, eps = 0.7,
   monotonic): per trial against the floor of its 2*10^5 Laplace variates and a NumPy loop of Alg. 2.
3. Adaptivity reproduction (Fig. 3/4 protocol): the free-gap item datasets (BMS-POS, Kosarak,
   T40I10D100K) are not in ../shared/data (see its README), so a synthetic stand-in is used: 1,657
   items (BMS-POS's item count), 3,360,000 item occurrences drawn from a Zipf(1.0) law, shuffled once
   with seed 0 (the stream order). eps = 0.7, theta = 1/(1 + k^(2/3)), threshold per trial between the
   counts at ranks r and r+1 with r uniform on {2k, ..., 8k-1}; truth set = items above it.
   Sparse Vector baseline = the same kernel with sigma = inf (classical SVT answers), same key.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import print_machine, print_table, rng_floor, time_call
from dpjax import noise as noise_lib
from dpjax import svt


def zipf_counts(items, occurrences, exponent, seed):
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, items + 1) ** exponent
    return rng.permutation(rng.multinomial(occurrences, weights / weights.sum())).astype(np.float64)


# ----------------------------------------------------------------------------- NumPy references


def numpy_above_threshold(rng, queries, threshold, epsilon1, epsilon2):
    """Algorithm 1 literally: one noise draw and one comparison per query."""
    noisy_threshold = threshold + rng.laplace(0, 1 / epsilon1)
    for i, q in enumerate(queries):
        if q + rng.laplace(0, 1 / epsilon2) >= noisy_threshold:
            return i
    return -1


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
        if units > 2 * budget.k - 2:
            break
    return answers


def dpjax_noise_floor(n, repeats=5):
    """Seconds for dpjax.noise.laplace (mode="high", 64 random bits per variate) to draw n variates:
    the noise the kernels actually draw, about twice the bits of jax.random.laplace."""
    draw = jax.jit(lambda key: noise_lib.laplace(key, (n,), 1.0))
    return time_call(draw, jax.random.key(0), repeats=repeats)


def time_numpy(fn, trials):
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(trials):
        fn(rng)
    return (time.perf_counter() - start) / trials


# ----------------------------------------------------------------------------- speed


def bench_above_threshold(n=10_000, trials=1_000):
    queries = np.linspace(0.0, 100.0, n)  # halts near the middle of the stream
    keys = jax.random.split(jax.random.key(0), trials)
    full = jax.jit(jax.vmap(lambda k: svt.above_threshold(k, queries, 50.0, 0.5, 0.5)))
    blocked = jax.jit(
        jax.vmap(lambda k: svt.above_threshold_blocked(k, queries, 50.0, 0.5, 0.5, block_size=1024))
    )
    t_full = time_call(full, keys) / trials
    t_blocked = time_call(blocked, keys) / trials
    floor = rng_floor("laplace", n * trials) / trials
    high = dpjax_noise_floor(n * trials) / trials
    t_numpy = time_numpy(lambda rng: numpy_above_threshold(rng, queries, 50.0, 0.5, 0.5), 20)
    halting = np.asarray(full(keys))
    rows = [
        {
            "kernel": "above_threshold (jit+vmap)",
            "us/trial": 1e6 * t_full,
            "x floor": t_full / floor,
            "NumPy loop / this": t_numpy / t_full,
        },
        {
            "kernel": "above_threshold_blocked(1024)",
            "us/trial": 1e6 * t_blocked,
            "x floor": t_blocked / floor,
            "NumPy loop / this": t_numpy / t_blocked,
        },
        {"kernel": "RNG floor (jax.random.laplace)", "us/trial": 1e6 * floor, "x floor": 1.0},
        {"kernel": "dpjax.noise.laplace (high), same n", "us/trial": 1e6 * high, "x floor": high / floor},
        {"kernel": "NumPy sequential loop", "us/trial": 1e6 * t_numpy, "x floor": t_numpy / floor},
    ]
    print_table(
        f"AboveThreshold: {n} queries x {trials} trials, Laplace eps1=eps2=0.5 (median halting index "
        f"{int(np.median(halting))})",
        rows,
    )


def bench_adaptive(n=100_000, trials=1_000, chunk=100, k=10, epsilon=0.7):
    counts = zipf_counts(n, 10 * n, 1.1, 1)
    threshold = float(np.sort(counts)[::-1][8 * k])
    budget = svt.gap_budget(epsilon, k, monotonic=True)
    keys = jax.random.split(jax.random.key(0), chunk)
    run = jax.jit(
        jax.vmap(
            lambda key: svt.adaptive_sparse_vector_with_gap(
                key, counts, threshold, epsilon, k=k, monotonic=True
            )
        )
    )
    t_kernel = time_call(run, keys, repeats=3) / chunk
    floor = rng_floor("laplace", 2 * n * chunk, repeats=3) / chunk
    high = dpjax_noise_floor(2 * n * chunk, repeats=3) / chunk
    t_numpy = time_numpy(lambda rng: numpy_adaptive_svt(rng, counts, threshold, budget), 3)
    processed = float(np.mean(np.asarray(run(keys).num_processed)))
    rows = [
        {
            "kernel": "adaptive_sparse_vector_with_gap",
            "ms/trial": 1e3 * t_kernel,
            "x floor": t_kernel / floor,
            "NumPy loop / this": t_numpy / t_kernel,
        },
        {"kernel": "RNG floor (2n jax.random.laplace)", "ms/trial": 1e3 * floor, "x floor": 1.0},
        {"kernel": "dpjax.noise.laplace (high), same 2n", "ms/trial": 1e3 * high, "x floor": high / floor},
        {"kernel": "NumPy sequential loop (Alg. 2)", "ms/trial": 1e3 * t_numpy, "x floor": t_numpy / floor},
    ]
    print_table(
        f"Adaptive SVT with gap: {n}-item Zipf(1.1) histogram x {trials} trials (timed in chunks of {chunk}),"
        f" "
        f"k={k}, eps={epsilon}; mean queries processed {processed:.0f}",
        rows,
    )


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
            run_key, counts, threshold, epsilon, k=k, sigma=sigma, monotonic=True
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials-repro", type=int, default=1000, help="trials per k (paper: 10,000)")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    print_machine()
    if not args.skip_speed:
        bench_above_threshold()
        bench_adaptive()
    reproduce_adaptivity(args.trials_repro)


if __name__ == "__main__":
    main()
