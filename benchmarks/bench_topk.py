"""Top-k over unknown domains, many queries: 10^5 independent queries (histograms of 10^4 items),
kbar = 100, k = 10, limited-domain mechanism (Durfee and Rogers 2019, Algorithm 1).

``dpjax bench topk`` times the headline row (one 10^6-item histogram, single release and releases
vmapped over keys, with a NumPy peer). This script uses the same harness (``dpjax.tools.bench``) for what
is not a headline row. Compares, per query, in one run:
* the RNG floor: kbar + 1 ``jax.random.gumbel`` draws per query;
* ``dpjax.topk.limited_domain`` on a batch of full histograms (exact top-(kbar+1) extraction with
  ``lax.top_k`` + noise + top-k), the batch in chunks of ``--chunk`` queries (one call each);
* the same kernel when the top-(kbar+1) counts are given (the paper's "blackbox top-kbar solver");
* NumPy reference loops over the queries (float64): ``argpartition`` for the top-(kbar+1), then the
  sequential peeling formulation with ⊥ (Algorithm 3: k rounds of the exponential mechanism by
  inverse-CDF sampling), and the one-shot Gumbel formulation.

The mean number of indices returned is printed for dpjax and both references (same histograms) as a
sanity check that they implement the same mechanism.

Run from the repo root: ``python -m benchmarks.bench_topk [--queries 100000] [--items 10000]``
"""

from __future__ import annotations

import argparse
import math

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import topk
from dpjax._src.accounting.pay_what_you_get import calibrate_epsilon
from dpjax._src.numerics import ceil_div
from dpjax._src.tools.bench.floor import rng_floor
from dpjax._src.tools.bench.harness import time_host, time_jitted
from dpjax._src.tools.bench.report import print_machine, print_table

DELTA, DELTA_PRIME = 5e-7, 5e-7


def make_histograms(key, base, n):
    """``n`` Zipf-like histograms: ``base`` relabelled by a random affine map mod d, plus jitter."""
    d = base.shape[0]
    k1, k2, k3 = jax.random.split(key, 3)
    mult = 2 * jax.random.randint(k1, (n, 1), 0, d // 2) + 1  # odd: coprime with d = 10^4
    shift = jax.random.randint(k2, (n, 1), 0, d)
    labels = (jnp.arange(d) * mult + shift) % d
    return base[labels] + jax.random.randint(k3, (n, d), 0, 3, dtype=base.dtype)


def numpy_peeling(rng, counts, k, kbar, eps, delta):
    """Reference: Algorithm 3, sequential exponential mechanism with ⊥, float64."""
    top = np.argpartition(counts, -(kbar + 1))[-(kbar + 1) :]
    top = top[np.lexsort((top, -counts[top]))]
    h_next = counts[top[kbar]]
    logw = eps * (counts[top[:kbar]] - h_next).astype(np.float64)
    log_bottom = eps + math.log(kbar / delta)
    alive = np.ones(kbar, bool)
    out = []
    for _ in range(k):
        logits = np.append(np.where(alive, logw, -np.inf), log_bottom)
        p = np.exp(logits - logits.max())
        j = int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), side="right"))
        if j >= kbar:
            return out, True
        out.append(int(top[j]))
        alive[j] = False
    return out, False


def numpy_one_shot(rng, counts, k, kbar, eps, delta):
    """Reference: Algorithm 1, one-shot Gumbel scores with the noisy ⊥ threshold, float64."""
    top = np.argpartition(counts, -(kbar + 1))[-(kbar + 1) :]
    top = top[np.lexsort((top, -counts[top]))]
    h_next = counts[top[kbar]]
    scores = eps * (counts[top[:kbar]] - h_next) + rng.gumbel(size=kbar)
    threshold = eps + math.log(kbar / delta) + rng.gumbel()
    best = np.argpartition(scores, -k)[-k:]
    best = best[np.argsort(-scores[best])]
    returned = best[scores[best] > threshold]
    return top[returned].tolist(), len(returned) < k


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--kbar", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=10_000, help="queries per kernel call")
    parser.add_argument("--reference-queries", type=int, default=2_000, help="queries run by the NumPy loops")
    parser.add_argument("--epsilon", type=float, default=1.0, help="total epsilon of a query (delta = 1e-6)")
    args = parser.parse_args(argv)
    k, kbar, d = args.k, args.kbar, args.items
    eps = calibrate_epsilon(args.epsilon, k, DELTA_PRIME)
    chunk = min(args.chunk, args.queries)
    n_chunks = ceil_div(args.queries, chunk)

    print_machine()
    print(
        f"queries={args.queries}, items={d}, kbar={kbar}, k={k}, chunk={chunk}, total (eps, delta)="
        f"({args.epsilon}, 1e-6) -> per-step eps={eps:.5f}, delta={DELTA}, delta'={DELTA_PRIME}"
    )
    weights = 1.0 / np.arange(1, d + 1) ** 1.1
    base = jnp.asarray(np.random.default_rng(0).multinomial(10 * d, weights / weights.sum()), jnp.int32)
    data_key, noise_key = jax.random.split(jax.random.key(0))

    run = jax.jit(lambda key, c: topk.limited_domain(key, c, k=k, kbar=kbar, epsilon=eps, delta=DELTA))
    hist = make_histograms(data_key, base, chunk)
    t_chunk = time_jitted(run, noise_key, hist, repeats=3)[0].median
    # The full batch, chunk by chunk (data generation excluded from the timing): one timed call each.
    total, returned = 0.0, []
    for c in range(n_chunks):
        hist = make_histograms(jax.random.fold_in(data_key, c), base, chunk)
        timing, out = time_jitted(run, jax.random.fold_in(noise_key, c), hist, repeats=1)
        total += timing.median
        returned.append(np.asarray(out.num_returned))
    returned = np.concatenate(returned)[: args.queries]

    _, top_values = jax.lax.top_k(hist, kbar + 1)
    t_top = time_jitted(run, noise_key, top_values, repeats=3)[0].median
    floor = rng_floor("gumbel", chunk * (kbar + 1)).median

    rng = np.random.default_rng(1)
    sample = np.asarray(hist[: args.reference_queries])
    t_peel = time_host(lambda: [numpy_peeling(rng, c, k, kbar, eps, DELTA) for c in sample], repeats=1).median
    t_shot = time_host(
        lambda: [numpy_one_shot(rng, c, k, kbar, eps, DELTA) for c in sample], repeats=1
    ).median
    peel_n = np.mean([len(numpy_peeling(rng, c, k, kbar, eps, DELTA)[0]) for c in sample])
    shot_n = np.mean([len(numpy_one_shot(rng, c, k, kbar, eps, DELTA)[0]) for c in sample])
    n_ref = len(sample)

    rows = [
        ("RNG floor: kbar+1 jax.random.gumbel per query", floor, chunk, None),
        (f"dpjax limited_domain, {chunk} full histograms per call", t_chunk, chunk, None),
        (f"dpjax limited_domain, {args.queries} queries, {n_chunks} calls", total, n_chunks * chunk, total),
        ("dpjax limited_domain, top-(kbar+1) counts given", t_top, chunk, None),
        ("NumPy loop: sequential peeling with ⊥ (Alg. 3)", t_peel, n_ref, None),
        ("NumPy loop: one-shot Gumbel with ⊥ (Alg. 1)", t_shot, n_ref, None),
    ]
    rows = [{"method": m, "us/query": s / n * 1e6, "total s": tot} for m, s, n, tot in rows]
    base_time = rows[1]["us/query"]
    for r in rows:
        r["x dpjax"] = r["us/query"] / base_time
    print_table("Time per query (us); 'x dpjax' = time / dpjax on full histograms", rows)
    print(
        f"\nmean indices returned: dpjax {returned.mean():.3f} ({args.queries} queries), "
        f"NumPy peeling {peel_n:.3f}, NumPy one-shot {shot_n:.3f} ({n_ref} queries)"
    )


if __name__ == "__main__":
    main()
