"""Speed of UQE (Durfee 2023, Alg. 2): n = 10^6 points, 10,000 vmapped releases at q = 0.99.

Run from the repository root: ``python -m benchmarks.bench_unbounded [--n 1000000] [--trials 10000]``

Reports, side by side in one run:
* the one O(n) binning pass (key-independent, done once per dataset);
* dpjax per release, with the default ``"fast"`` sampler (thinning + closed-form tail) and with the
  ``"blocks"`` sampler (one noise per query up to the halting point, closed-form tail);
* the RNG floor: ``jax.random`` time for the noise a literal sampler draws (mean halting index
  variates per release), and for 4 variates per release;
* a NumPy reference (Appendix C's loop, vectorized per release: histogram once, then per release
  draw noise for every query up to the data maximum and take the first hit);
* diffprivlib's and OpenDP's quantile per release on the same data, when installed (both bounded:
  range [0, 10^4]; OpenDP with 1,000 candidates).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import print_machine, print_table, rng_floor, time_call, time_python
from dpjax.quantiles.unbounded import DEFAULT_MAX_QUERIES, grid, halting, unbounded_result
from dpjax.quantiles.unbounded_bins import cumulative_counts, static_size

Q, EPSILON, BETA = 0.99, 1.0, 1.001


def numpy_reference(rng, hist, n, trials):
    """Appendix C (with Algorithm 2's output): per release, noise for each query, first hit."""
    f = np.cumsum(hist)
    out = np.empty(trials)
    for t in range(trials):
        threshold = Q * n + rng.exponential(2.0)
        hit = f + rng.exponential(2.0, f.size) >= threshold
        k = np.argmax(hit) + 1 if hit.any() else f.size  # the tail beyond the maximum is ignored here
        out[t] = BETA**k - 1
    return out


def peers(x, trials):
    rows = []
    try:
        from diffprivlib.tools import quantile as dpl_quantile
    except ImportError:
        print("diffprivlib not installed: skipped")
    else:
        seconds = time_python(lambda: dpl_quantile(x, Q, epsilon=EPSILON, bounds=(0, 1e4)), repeats=3)
        rows.append({"method": "diffprivlib.tools.quantile (bounded)", "sec_per_release": seconds})
    try:
        import opendp.prelude as dp
    except ImportError:
        print("opendp not installed: skipped")
    else:
        dp.enable_features("contrib")
        meas = dp.m.make_private_quantile(
            dp.vector_domain(dp.atom_domain(T=float, nan=False), size=len(x)),
            dp.symmetric_distance(),
            dp.max_divergence(),
            candidates=list(np.linspace(0, 1e4, 1000)),
            alpha=Q,
            scale=2.0 / EPSILON,
        )
        data = [float(v) for v in x]
        seconds = time_python(lambda: meas(data), repeats=3)
        rows.append({"method": "opendp make_private_quantile (1000 candidates)", "sec_per_release": seconds})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--numpy-trials", type=int, default=100)
    args = parser.parse_args(argv)
    print_machine()
    x_np = np.random.default_rng(0).lognormal(3.0, 1.5, args.n).astype(np.float32)
    x = jnp.asarray(x_np)
    print(
        f"data: n={args.n} lognormal(3, 1.5) float32, q={Q}, epsilon={EPSILON}, beta={BETA}, "
        f"trials={args.trials}"
    )

    g = grid(BETA, DEFAULT_MAX_QUERIES, jnp.float32)
    size = static_size(x, 0.0, BETA, g.static_cap, jnp.float32)
    table = dict(size=size, dtype=jnp.float32)
    t_bin = time_call(lambda: cumulative_counts(x, 0.0, g.log_b, g.cap, **table), repeats=3)
    counts = cumulative_counts(x, 0.0, g.log_b, g.cap, **table)
    keys = jax.random.split(jax.random.key(0), args.trials)

    def kernel(method):
        def one(key):
            return halting(
                key,
                counts,
                Q,
                args.n,
                EPSILON / 2,
                EPSILON / 2,
                g.cap,
                noise="exponential",
                dtype=jnp.float32,
                first=1,
                method=method,
            )[0]

        return jax.jit(jax.vmap(one))

    fast, blocks = kernel("fast"), kernel("blocks")
    t_fast, t_blocks = time_call(fast, keys), time_call(blocks, keys)
    k = np.asarray(fast(keys))
    mean_k = float(k.mean())
    floor_literal = rng_floor("exponential", int(args.trials * mean_k), repeats=3)
    floor_four = rng_floor("exponential", 4 * args.trials, repeats=3)
    # End to end through the public function (binning done once at trace time, data closed over).
    public = jax.jit(jax.vmap(lambda key: unbounded_result(key, x, Q, EPSILON).estimate))
    t_public = time_call(public, keys, repeats=3)

    hist = np.diff(np.concatenate([[0], np.asarray(counts.f)[: int(counts.tail_start) + 1]]))
    rng = np.random.default_rng(1)
    t_numpy = time_python(lambda: numpy_reference(rng, hist, args.n, args.numpy_trials), repeats=1)
    per_numpy = t_numpy / args.numpy_trials

    print(
        f"mean halting index {mean_k:.0f} (bins up to the data max: {int(counts.tail_start)}); "
        f"true q: {np.quantile(x_np, Q):.2f}, median release {np.median(BETA**k - 1):.2f}"
    )
    per_fast = t_fast / args.trials
    rows = [
        {"method": "binning pass (once per dataset)", "sec_per_release": t_bin},
        {"method": "dpjax fast sampler", "sec_per_release": per_fast},
        {"method": "dpjax public unbounded() (jit+vmap)", "sec_per_release": t_public / args.trials},
        {"method": "dpjax blocks sampler", "sec_per_release": t_blocks / args.trials},
        {"method": f"RNG floor: {mean_k:.0f} expo variates", "sec_per_release": floor_literal / args.trials},
        {"method": "RNG floor: 4 expo variates", "sec_per_release": floor_four / args.trials},
        {"method": "NumPy reference loop", "sec_per_release": per_numpy},
        *peers(x_np, args.trials),
    ]
    for row in rows:
        row["fast_speedup"] = row["sec_per_release"] / per_fast
    print_table("UQE per release (10^6 points, q=0.99)", rows)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - start:.0f}s")
