"""Memory per device and time of the heavy kernels on 1, 2, 4, 8 virtual CPU devices (issue 17).

Memory: compiled only (abstract sharded inputs, nothing is allocated), so sizes beyond the machine's
RAM can be measured. Per device: arguments + temporaries + outputs from ``compiled.memory_analysis()``.
Memory is that of a call under ``jit`` on abstract inputs: with automatic axes the sharding is not
in the traced type, so it shows XLA's partitioning (an eager call on concrete data reads the layout
from the data and splits like explicit axes). Time (explicit axes): eager calls on real sharded data
of the ``--time-*`` sizes, timed by the harness of ``dpjax bench`` (``time_eager``: the first call
compiles and is not counted, then the median of ``--repeats`` calls or more, more for calls shorter
than 0.2 s, with the range when there are several); the virtual devices share the machine's cores,
so time shows the overhead of splitting, not a speed-up.

    python benchmarks/sharded_memory.py [--users 1e8] [--values 1e9] [--items 1e8] [--trials 1e7]
        [--time-users 1e7] [--time-values 1e8] [--time-items 1e7] [--time-trials 1e5] [--repeats 1]
        [--out FILE.md]
"""

from __future__ import annotations

import argparse
import functools
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from dpjax import budgeting, quantiles, topk
from dpjax._src.studies import runner
from dpjax._src.studies.compiled import _trials_function
from dpjax._src.tools.bench.harness import Timing, time_eager

KEY = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
DEVICES = (1, 2, 4, 8)


def per_device(compiled) -> float:
    m = compiled.memory_analysis()
    return (m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes) / 2**20


def mc_trial(key, x):
    return topk.limited_domain(key, x, k=5, kbar=10, epsilon=1.0, delta=1e-6)


# name: (function of (key, sharded data), what the data are, trailing data shape, data generator)
CASES = {
    "budgeting.pie_ni (distance mode, c=4)": (
        lambda key, d: budgeting.pie_ni(key, d, 1.0, c=4, beta0=0.1, nu_low=-1.0, nu_high=1.0),
        "users", (), jax.random.normal),
    "quantiles.unbounded (UQE binning)": (
        lambda key, x: quantiles.unbounded(key, x, 0.5, 1.0), "values", (), jax.random.normal),
    "topk.limited_domain (top-k, unknown domain)": (
        lambda key, c: topk.limited_domain(key, c, k=10, kbar=20, epsilon=1.0, delta=1e-6), "items", (),
        lambda key, shape: jnp.floor(1000 * jax.random.uniform(key, shape))),
}


def mesh_of(devices: int, axis_type):
    return jax.make_mesh((devices,), ("d",), (axis_type,), devices=jax.devices()[:devices])


def seconds(timing: Timing) -> str:
    """The median time, with the range of the repeats when there are several."""
    if len(timing.times) == 1:
        return f"{timing.median:.3g} s"
    return f"{timing.median:.3g} s [{timing.low:.3g}, {timing.high:.3g}]"


def time_call(fn, make, shape, sharding, repeats: int) -> Timing:
    """Eager calls of ``fn`` on concrete data of ``shape`` made by ``make``, sharded by ``sharding``."""
    x = jax.jit(lambda k: make(k, shape), out_shardings=sharding)(jax.random.key(1))
    return time_eager(fn, jax.random.key(0), x, repeats=repeats)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("users", 1e8), ("values", 1e9), ("items", 1e8), ("trials", 1e7)):
        parser.add_argument(f"--{name}", type=float, default=default)
    for name, default in (("users", 1e7), ("values", 1e8), ("items", 1e7), ("trials", 1e5)):
        parser.add_argument(f"--time-{name}", type=float, default=default)
    parser.add_argument("--chunk", type=int, default=2**16, help="Monte Carlo trials per compiled call")
    parser.add_argument("--repeats", type=int, default=1, help="timed calls per cell at least (default 1)")
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args()
    lines = [
        "| kernel | memory at | time at | axes | " + " | ".join(f"{d} dev." for d in DEVICES) + " |",
        "|---|---|---|---|" + "---|" * len(DEVICES),
    ]

    def emit(line):
        print(line, flush=True)
        lines.append(line)

    for line in lines:
        print(line)
    for name, (fn, what, trailing, make) in CASES.items():
        n, n_time = int(getattr(args, what)), int(getattr(args, f"time_{what}"))
        for kind, axis_type in (("explicit", AxisType.Explicit), ("auto", AxisType.Auto)):
            cells = []
            for devices in DEVICES:
                mesh = mesh_of(devices, axis_type)
                sharding = NamedSharding(mesh, PartitionSpec("d"))
                data = jax.ShapeDtypeStruct((n, *trailing), jnp.float32, sharding=sharding)
                try:
                    memory = per_device(jax.jit(fn).lower(KEY, data).compile())
                    cell = f"{memory:.0f} MiB"
                    if kind == "explicit":
                        timing = time_call(fn, make, (n_time, *trailing), sharding, args.repeats)
                        cell += f", {seconds(timing)}"
                    cells.append(cell)
                except Exception as error:  # recorded in the table
                    cells.append(type(error).__name__)
            emit(f"| {name} | {n:.0e} {what} | {n_time:.0e} | {kind} | " + " | ".join(cells) + " |")
    x = jnp.zeros(1000, jnp.float32)  # a 1000-item histogram per trial
    cells = []
    for devices in DEVICES:
        mesh = mesh_of(devices, AxisType.Explicit)
        chunk = jax.jit(_trials_function(mc_trial, args.chunk, mesh))
        memory = per_device(chunk.lower(jax.random.key(0), jnp.uint32(0), (x,)).compile())
        study = functools.partial(runner.monte_carlo, mc_trial, jax.random.key(0), int(args.time_trials),
                                  args=(x,), chunk_size=args.chunk, mesh=mesh)
        timing = time_eager(study, repeats=args.repeats)[0]
        cells.append(f"{memory:.1f} MiB, {seconds(timing)}")
    emit(f"| Monte Carlo (topk.limited_domain, 1000 items) | chunk of {args.chunk} (any number of trials) | "
         f"{args.time_trials:.0e} trials | mesh | " + " | ".join(cells) + " |")
    if args.out:
        with open(args.out, "w") as out:
            out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
