"""The RNG floor: time to draw N variates with ``jax.random``, and with dpjax's tail-exact samplers.

Run: ``python -m benchmarks.rng_floor [--sizes 1000000 10000000]``
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

from benchmarks.harness import print_machine, print_table, rng_floor, time_call
from dpjax import noise


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**6, 10**7])
    args = parser.parse_args(argv)
    print_machine()
    rows = []
    for n in args.sizes:
        for kind in ("laplace", "gumbel", "exponential", "gaussian"):
            floor = rng_floor(kind, n)
            high = jax.jit(lambda key, kind=kind, n=n: noise.sample(kind, key, (n,), 1.0, jnp.float32))
            t_high = time_call(high, jax.random.key(0))
            rows.append({
                "noise": kind,
                "n": n,
                "jax.random ms": 1e3 * floor,
                "ns/variate": 1e9 * floor / n,
                "dpjax mode=high ms": 1e3 * t_high,
                "high/floor": t_high / floor,
            })
    print_table("RNG floor (float32): jax.random vs dpjax.noise tail-exact samplers", rows)


if __name__ == "__main__":
    main()
