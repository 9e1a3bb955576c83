"""Compiled memory per device of the heavy kernels on 1, 2, 4, 8 virtual CPU devices (issue 17).

Compiles only (abstract sharded inputs, nothing is allocated), so sizes beyond the machine's RAM can
be measured. Per device: arguments + temporaries + outputs from ``compiled.memory_analysis()``.

    python benchmarks/sharded_memory.py [--users 1e8] [--values 1e9] [--items 1e8] [--trials 1e7]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from dpjax import budgeting, quantiles, topk
from dpjax.studies import runner

KEY = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)


def per_device(compiled) -> float:
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes) / 2**20


def sharded(n: int, mesh, dtype=jnp.float32):
    return jax.ShapeDtypeStruct((n,), dtype, sharding=NamedSharding(mesh, PartitionSpec("d")))


def mc_trial(key, x):
    return topk.limited_domain(key, x, k=5, kbar=10, epsilon=1.0, delta=1e-6)


CASES = {
    "budgeting.pie_ni": lambda n: (
        lambda key, d: budgeting.pie_ni(key, d, 1.0, c=4, beta0=0.1, nu_low=-1.0, nu_high=1.0), "users"),
    "quantiles.unbounded (UQE)": lambda n: (lambda key, x: quantiles.unbounded(key, x, 0.5, 1.0), "values"),
    "topk.limited_domain": lambda n: (
        lambda key, c: topk.limited_domain(key, c, k=10, kbar=20, epsilon=1.0, delta=1e-6), "items"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=float, default=1e8)
    parser.add_argument("--values", type=float, default=1e9)
    parser.add_argument("--items", type=float, default=1e8)
    parser.add_argument("--trials", type=float, default=1e7)
    parser.add_argument("--chunk", type=int, default=2**16, help="Monte Carlo trials per compiled call")
    args = parser.parse_args()
    sizes = {"users": int(args.users), "values": int(args.values), "items": int(args.items)}
    print("| kernel | size | axes | 1 | 2 | 4 | 8 | (MiB per device; compile s at 8) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, case in CASES.items():
        fn, what = case(0)
        n = sizes[what]
        for kind, axis_type in (("explicit", AxisType.Explicit), ("auto", AxisType.Auto)):
            cells = []
            for devices in (1, 2, 4, 8):
                mesh = jax.make_mesh((devices,), ("d",), (axis_type,), devices=jax.devices()[:devices])
                start = time.perf_counter()
                try:
                    cells.append(f"{per_device(jax.jit(fn).lower(KEY, sharded(n, mesh)).compile()):.0f}")
                except Exception as error:  # recorded in the table
                    cells.append(type(error).__name__)
                seconds = time.perf_counter() - start
            print(f"| {name} | {n:.0e} {what} | {kind} | {' | '.join(cells)} | {seconds:.1f} |", flush=True)
    x = jnp.zeros(1000, jnp.float32)  # a 1000-item histogram per trial
    cells = []
    for devices in (1, 2, 4, 8):
        mesh = jax.make_mesh((devices,), ("d",), devices=jax.devices()[:devices])
        chunk = runner._chunk_runner(mc_trial, args.chunk, mesh)
        cells.append(f"{per_device(chunk.lower(jax.random.key(0), jnp.uint32(0), (x,)).compile()):.1f}")
    print(f"| Monte Carlo (topk.limited_domain) | {args.trials:.0e} trials, chunk {args.chunk} | mesh | "
          f"{' | '.join(cells)} | |")


if __name__ == "__main__":
    main()
