"""Per-release time of ApproxQuantiles against JointExp (m = 29, n = 10^5) and of the joint top-k
against one-shot Gumbel top-k (d = 10^5, k = 10), interleaved in one process (issue 47).

Two ways of calling each: one release (``jit``, the data an argument) and Monte Carlo (``jit(vmap)``
over ``T`` keys with the data fixed, time divided by ``T``). Each figure is the median of ``--repeats``
timings after a warm-up call; the pairs are timed alternately so that the machine's load hits both.

    PYTHONPATH=. python benchmarks/bench_sota.py [--repeats 7] [--keys 64] [--quantiles-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import quantiles, selection
from dpjax.quantiles.intervals import _gaps


def _timer(fn, *args):
    jax.block_until_ready(fn(*args))  # compile and warm up

    def once():
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        return time.perf_counter() - start

    return once


def _pairs(keys: int, top_k: bool = True):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(0.0, 5.0, 10**5).astype(np.float32))
    levels = jnp.asarray(np.arange(1, 30) / 30)
    counts = jnp.asarray(np.floor(1e6 / np.arange(1, 10**5 + 1) ** 1.1).astype(np.int32))
    key = jax.random.key(0)
    many = jax.random.split(key, keys)

    def aq(k, d, method="auto"):
        return quantiles.approx_quantiles(k, d, levels, 1.0, bounds=(-100.0, 100.0), method=method)

    def aq_superblocks(k, d):
        return aq(k, d, "superblocks")

    def je(k, d):
        return quantiles.joint_exp(k, d, levels, 1.0, bounds=(-100.0, 100.0))

    def jt(k, c):
        return selection.joint_top_k(k, c, 10, 1.0, monotonic=True)

    def gt(k, c):
        return selection.gumbel_top_k(k, c, 10, 0.1, monotonic=True)

    def mc(f):
        return jax.jit(jax.vmap(f, in_axes=(0, None)))

    pairs = {
        "quantiles one release": (
            ("approx_quantiles", _timer(jax.jit(aq), key, x), 1),
            ("joint_exp", _timer(jax.jit(je), key, x), 1),
        ),
        f"quantiles vmap over {keys} keys": (
            ("approx_quantiles", _timer(mc(aq), many, x), keys),
            ("joint_exp", _timer(mc(je), many, x), keys),
        ),
        "quantiles one release, the data sort alone": (
            ("sort (_gaps)", _timer(jax.jit(lambda d: _gaps(d, -100.0, 100.0)), x), 1),
            ("approx_quantiles", _timer(jax.jit(aq), key, x), 1),
        ),
        "quantiles one release, sampler": (
            ("tree", _timer(jax.jit(aq), key, x), 1),
            ("superblocks", _timer(jax.jit(aq_superblocks), key, x), 1),
        ),
        f"quantiles vmap over {keys} keys, sampler": (
            ("tree", _timer(mc(aq), many, x), keys),
            ("superblocks", _timer(mc(aq_superblocks), many, x), keys),
        ),
    }
    if not top_k:
        return pairs
    return pairs | {
        "top-k one release": (
            ("joint_top_k", _timer(jax.jit(jt), key, counts), 1),
            ("gumbel_top_k", _timer(jax.jit(gt), key, counts), 1),
        ),
        f"top-k vmap over {keys} keys": (
            ("joint_top_k", _timer(mc(jt), many, counts), keys),
            ("gumbel_top_k", _timer(mc(gt), many, counts), keys),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--quantiles-only", action="store_true", help="skip the top-k pairs")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; load {os.getloadavg()}")
    pairs = _pairs(args.keys, not args.quantiles_only)
    for setting, ((name_a, time_a, n_a), (name_b, time_b, n_b)) in pairs.items():
        a, b = [], []
        for _ in range(args.repeats):
            a.append(time_a() / n_a)
            b.append(time_b() / n_b)
        ma, mb = statistics.median(a), statistics.median(b)
        print(
            f"{setting}: {name_a} {ma * 1e3:.3f} ms, {name_b} {mb * 1e3:.3f} ms per release",
            f"(ratio {mb / ma:.2f})",
        )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
