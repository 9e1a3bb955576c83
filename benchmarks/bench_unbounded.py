"""UQE (Durfee 2023, Alg. 2) internals at the headline size: n = 10^6 lognormal(3, 1.5) float32
points, q = 0.99, epsilon = 1, beta = 1.001; same harness as ``dpjax bench``.

``dpjax bench quantiles`` times the headline row (the public ``unbounded``, single eager release
and vmapped Monte Carlo, with OpenDP, diffprivlib and python-dp). This script splits it:

* the O(n) binning pass (``cumulative_counts``, done once per dataset and once per eager call);
* the halting-index kernel on binned counts with the default ``"fast"`` sampler (thinning far below
  the threshold, closed-form tail) and with the ``"blocks"`` sampler (one noise per query up to the
  halt), both against the floor of a literal AboveThreshold (halting index + 1 Exponentials);
* a NumPy reference of Appendix C (histogram once; per release one Exponential per query up to the
  data maximum, first hit) as the fast kernel's peer.

Run from the repository root: ``python -m benchmarks.bench_unbounded [--size 1] [--out DIR]``
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax._src.quantiles.unbounded import DEFAULT_MAX_QUERIES, halting, query_grid
from dpjax._src.quantiles.unbounded_bins import cumulative_counts, static_size
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled
from dpjax._src.tools.bench.cases.quantiles import BETA, EPSILON, Q
from dpjax._src.tools.bench.cli import script


def numpy_reference(rng, f, n):
    """Appendix C with Algorithm 2's output: noise for each query up to the data maximum, first hit."""
    threshold = Q * n + rng.exponential(2.0 / EPSILON)
    hit = f + rng.exponential(2.0 / EPSILON, f.size) >= threshold
    k = np.argmax(hit) + 1 if hit.any() else f.size  # the tail beyond the maximum is ignored here
    return BETA**k - 1


def cases(scale: float) -> list[Case]:
    n = scaled(10**6, scale, 1_000)
    x = np.random.default_rng(0).lognormal(3.0, 1.5, n).astype(np.float32)
    g = query_grid(BETA, DEFAULT_MAX_QUERIES, jnp.float32)
    size = static_size(x, 0.0, BETA, g.static_cap, jnp.float32)

    def binning(data):
        return cumulative_counts(data, 0.0, g.log_b, g.cap, size=size, dtype=jnp.float32)

    counts = binning(x)
    f = np.asarray(counts.f)[: int(counts.tail_start) + 1].astype(np.float64)
    setting = f"n={power_label(n)} lognormal(3, 1.5) float32, q={Q:g}, epsilon={EPSILON:g}, beta={BETA:g}"

    def kernel(method):
        def release(key, c):
            return halting(
                key,
                c,
                Q,
                n,
                EPSILON / 2,
                EPSILON / 2,
                g.cap,
                noise="exponential",
                dtype=jnp.float32,
                first=1,
                method=method,
            )[0]

        return release

    def numpy_peer():
        rng = np.random.default_rng(1)
        return lambda: numpy_reference(rng, f, n)

    literal = dict(
        noise="exponential",
        variates=lambda k: float(np.mean(k)) + 1.0,
        variates_note="literal AboveThreshold: one Exponential per query up to the halt, plus one",
    )
    return [
        Case(
            family="quantiles",
            mechanism="unbounded_bins.cumulative_counts (binning pass)",
            setting=setting,
            release=lambda key, data: binning(data),
            args=(x,),
            noise="uniform",
            variates=float(n),
            variates_note="no noise: n uniforms as a memory-bandwidth reference",
        ),
        Case(
            family="quantiles",
            mechanism="halting kernel, method='fast'",
            setting=setting,
            release=kernel("fast"),
            args=(counts,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64,
            peers=(Peer("NumPy reference (Appendix C)", "numpy", numpy_peer, note="float64 histogram"),),
            **literal,
        ),
        Case(
            family="quantiles",
            mechanism="halting kernel, method='blocks'",
            setting=setting,
            release=kernel("blocks"),
            args=(counts,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64 * 1024,
            **literal,
        ),
    ]


def main(argv=None) -> None:
    script("benchmarks.bench_unbounded", cases, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
