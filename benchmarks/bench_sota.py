"""Per-release time of ApproxQuantiles against JointExp (m = 29, n = 10^5) and of the joint top-k
against one-shot Gumbel top-k (d = 10^5, k = 10), interleaved in one process (issue 47).

Two ways of calling each: one release (``jit``, the data an argument) and Monte Carlo (``jit(vmap)``
over ``T`` keys with the data fixed, time divided by ``T``); for the joint top-k also the study
runner's shape, ``vmap`` over 3 epsilons of ``vmap`` over keys, against ``jit(vmap)`` over the keys
called at each epsilon. Each figure is the median of ``--repeats``
timings after a warm-up call; the pairs are timed alternately so that the machine's load hits both.

    PYTHONPATH=. python benchmarks/bench_sota.py [--repeats 7] [--keys 64] [--family top-k | "top-k epsilons"]
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
from dpjax._src.quantiles.intervals import sorted_gaps


def _timer(fn, *args):
    warm = []

    def once():
        if not warm:  # compile and warm up on the first call (only the pairs that run compile)
            jax.block_until_ready(fn(*args))
            warm.append(True)
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        return time.perf_counter() - start

    return once


def _pairs(keys: int, family: str):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(0.0, 5.0, 10**5).astype(np.float32))
    levels = jnp.asarray(np.arange(1, 30) / 30)
    counts = jnp.asarray(np.floor(1e6 / np.arange(1, 10**5 + 1) ** 1.1).astype(np.int32))
    # Zipf counts 1000x smaller: the top scores crowd within b k log d, the threshold sampler's
    # head does not suffice and the histogram of the errors runs (integer counts).
    crowded = jnp.asarray(np.floor(1e3 / np.arange(1, 10**5 + 1) ** 1.1).astype(np.int32))
    # Zipf counts 33x smaller than the spread ones: crowded near the k-th largest at small epsilon.
    middle = jnp.asarray(np.floor(3e4 / np.arange(1, 10**5 + 1) ** 1.1).astype(np.int32))
    key = jax.random.key(0)
    many = jax.random.split(key, keys)
    epsilons = jnp.asarray([0.5, 1.0, 2.0])

    def aq(k, d, method="auto"):
        return quantiles.approx_quantiles(k, d, levels, 1.0, bounds=(-100.0, 100.0), method=method)

    def aq_tree(k, d):
        return aq(k, d, "tree")

    def je(k, d):
        return quantiles.joint_exp(k, d, levels, 1.0, bounds=(-100.0, 100.0))

    def jt(k, c):
        return selection.joint_top_k(k, c, 10, 1.0, monotonic=True)

    def jt_literal(k, c):
        return selection.joint_top_k(k, c, 10, 1.0, monotonic=True, method="blocks")

    def jt_literal_tree(k, c):
        return selection.joint_top_k(k, c, 10, 1.0, monotonic=True, method="tree")

    def gt(k, c):
        return selection.gumbel_top_k(k, c, 10, 0.1, monotonic=True)

    def jt_at(epsilon):
        return jax.jit(lambda k, c: selection.joint_top_k(k, c, 10, epsilon, monotonic=True))

    def mc(f):
        return jax.jit(jax.vmap(f, in_axes=(0, None)))

    def jt_eps(k, c, epsilon):
        return selection.joint_top_k(k, c, 10, epsilon, monotonic=True)

    over_keys = jax.jit(jax.vmap(jt_eps, in_axes=(0, None, None)))  # epsilon traced: one compile
    runner = jax.jit(jax.vmap(jax.vmap(jt_eps, in_axes=(0, None, None)), in_axes=(None, None, 0)))

    def per_epsilon(k, c):
        return [over_keys(k, c, epsilon) for epsilon in epsilons]

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
            ("sort (sorted_gaps)", _timer(jax.jit(lambda d: sorted_gaps(d, -100.0, 100.0)), x), 1),
            ("approx_quantiles", _timer(jax.jit(aq), key, x), 1),
        ),
        "quantiles one release, sampler": (
            ("segments", _timer(jax.jit(aq), key, x), 1),
            ("tree", _timer(jax.jit(aq_tree), key, x), 1),
        ),
        f"quantiles vmap over {keys} keys, sampler": (
            ("segments", _timer(mc(aq), many, x), keys),
            ("tree", _timer(mc(aq_tree), many, x), keys),
        ),
    }
    pairs |= {
        "top-k one release": (
            ("joint_top_k", _timer(jax.jit(jt), key, counts), 1),
            ("gumbel_top_k", _timer(jax.jit(gt), key, counts), 1),
        ),
        f"top-k vmap over {keys} keys": (
            ("joint_top_k", _timer(mc(jt), many, counts), keys),
            ("gumbel_top_k", _timer(mc(gt), many, counts), keys),
        ),
        "top-k one release, crowded counts": (
            ("joint_top_k", _timer(jax.jit(jt), key, crowded), 1),
            ("gumbel_top_k", _timer(jax.jit(gt), key, crowded), 1),
        ),
        f"top-k vmap over {keys} keys, crowded counts": (
            ("joint_top_k", _timer(mc(jt), many, crowded), keys),
            ("gumbel_top_k", _timer(mc(gt), many, crowded), keys),
        ),
        **{
            f"top-k one release, {name}, epsilon {epsilon}": (
                ("joint_top_k", _timer(jt_at(epsilon), key, data), 1),
                ("gumbel_top_k", _timer(jax.jit(gt), key, data), 1),
            )
            for name, data, epsilon in (
                ("crowded counts", crowded, 0.1),
                ("middle counts", middle, 1.0),
                ("middle counts", middle, 0.1),
                ("middle counts", middle, 0.02),
            )
        },
        **{
            f"top-k epsilons: vmap over 3 epsilons of vmap over {keys} keys, {name}": (
                ("runner-shaped", _timer(lambda k, c: runner(k, c, epsilons), many, data), 3 * keys),
                ("jit(vmap) per epsilon", _timer(per_epsilon, many, data), 3 * keys),
            )
            for name, data in (("spread counts", counts), ("crowded counts", crowded))
        },
        "top-k one release, sampler": (
            ("threshold", _timer(jax.jit(jt), key, counts), 1),
            ("blocks (literal)", _timer(jax.jit(jt_literal), key, counts), 1),
        ),
        f"top-k vmap over {keys} keys, sampler": (
            ("threshold_tree", _timer(mc(jt), many, counts), keys),
            ("tree (literal)", _timer(mc(jt_literal_tree), many, counts), keys),
        ),
    }
    return {setting: pair for setting, pair in pairs.items() if setting.startswith(family)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--keys", type=int, default=64)
    families = ("quantiles", "top-k", "top-k epsilons", "")
    parser.add_argument("--family", choices=families, default="", help="one pair family")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; load {os.getloadavg()}")
    for setting, ((name_a, time_a, n_a), (name_b, time_b, n_b)) in _pairs(args.keys, args.family).items():
        a, b = [], []
        for _ in range(args.repeats):
            a.append(time_a() / n_a)
            b.append(time_b() / n_b)
        ma, mb = statistics.median(a), statistics.median(b)
        print(
            f"{setting}: {name_a} {ma * 1e3:.4f} ms, {name_b} {mb * 1e3:.4f} ms per release",
            f"(ratio {mb / ma:.2f})",
        )
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
