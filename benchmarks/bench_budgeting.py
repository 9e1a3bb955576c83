"""Speed and memory of PIE-NI range counting beyond the headline row: point and distance modes,
tail-exact and plain noise, 10^6 and 10^7 users, c = 64 rounds (same harness as ``dpjax bench``).

``dpjax bench budgeting`` times the headline row (distance mode, tail-exact noise, 10^6 users, with
the NumPy loop). Run: ``python -m benchmarks.bench_budgeting [--sizes 1000000 10000000] [--rounds 64]``

Data (synthetic, not from the paper, :func:`dpjax.datasets.papers.hotspots`): users at a
Gaussian mixture of 20 "hotspots" in a 100 km x 100 km square (metres); the query counts the users
in a 2 km x 2 km square centred on a hotspot; every user has rho = 1e-4 / m^2 (one-shot noise
70.7 m), beta0 = 0.025, even split.

Columns:

* ``dpjax ms``: one jit-compiled PIE-NI query (compile excluded), point mode (users release noisy
  2-D points) or distance mode (users release noisy signed distances).
* ``numpy ms``: :func:`dpjax.tools.bench.cases.budgeting.numpy_pie_ni`, Algorithm 4 in NumPy drawing noise
  only for the active users (index compaction every round).
* ``floor(active) ms``: ``jax.random.normal`` for one Gaussian per active user per round
  (``sum_j |G_{j-1}|`` times the dimension); ``floor(all) ms``: one per user per executed round,
  which is what a static-shape kernel draws.
* ``bytes/user``: XLA's compiled memory analysis (arguments + outputs + temporaries - aliased) / n.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.budgeting.geometry import box_signed_distance
from dpjax._src.tools.bench.cases.budgeting import BETA0, HALF, RHO, box_distance, numpy_pie_ni
from dpjax._src.tools.bench.floor import rng_floor
from dpjax._src.tools.bench.harness import time_host, time_jitted
from dpjax._src.tools.bench.report import print_machine, print_table
from dpjax._src.tools.papers import hotspots
from dpjax.budgeting import pie_ni


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**6, 10**7])
    parser.add_argument("--rounds", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--numpy-max", type=int, default=10**7, help="largest n for the NumPy loop")
    args = parser.parse_args(argv)
    print_machine()
    c = args.rounds
    rows = []
    for n in args.sizes:
        x, centres = hotspots(n)
        box = (centres[0], np.full(2, HALF, np.float32))
        phi = box_distance(x, *box).astype(np.float32)
        xd, phid = jnp.asarray(x), jnp.asarray(phi)
        for mode in ("distance", "point"):
            for noise_mode in ("high", "low"):
                if mode == "point":
                    call = jax.jit(
                        lambda k, data, noise_mode=noise_mode, box=box: pie_ni(
                            k,
                            data,
                            rho=RHO,
                            c=c,
                            beta0=BETA0,
                            nu_low=0.0,
                            nu_high=0.0,
                            score_fn=box_signed_distance,
                            score_params=box,
                            noise_mode=noise_mode,
                        )
                    )
                    data = xd
                else:
                    call = jax.jit(
                        lambda k, data, noise_mode=noise_mode: pie_ni(
                            k, data, rho=RHO, c=c, beta0=BETA0, nu_low=0.0, nu_high=0.0, noise_mode=noise_mode
                        )
                    )
                    data = phid
                key = jax.random.key(1)
                timing, res = time_jitted(call, key, data, repeats=args.repeats)
                t = timing.median
                counts = np.asarray(res.active_counts).astype(np.int64)
                dim = 2 if mode == "point" else 1
                executed = int(res.rounds_run)
                floor_active = rng_floor("gaussian", int(counts.sum()) * dim, repeats=args.repeats).median
                floor_all = rng_floor("gaussian", n * executed * dim, repeats=args.repeats).median
                row = {
                    "mode": mode,
                    "noise": noise_mode,
                    "n": n,
                    "rounds run": executed,
                    "saving": 1 - float(np.asarray(res.rounds).mean()) / c,
                    "dpjax ms": 1e3 * t,
                    "floor(active) ms": 1e3 * floor_active,
                    "floor(all) ms": 1e3 * floor_all,
                    "dpjax/floor(active)": t / floor_active,
                    "bytes/user": timing.memory / n,
                }
                if noise_mode == "high" and n <= args.numpy_max:
                    rng = np.random.default_rng(0)
                    t_np = time_host(
                        numpy_pie_ni, rng, x, RHO, c, BETA0, box, mode == "point", repeats=1
                    ).median
                    row["numpy ms"] = 1e3 * t_np
                    row["numpy/dpjax"] = t_np / t
                rows.append(row)
                print_table(f"PIE-NI range count, c = {c} (so far)", rows[-1:])
    print_table(f"PIE-NI range count, c = {c}, rho = {RHO}/m^2, beta0 = {BETA0}", rows)


if __name__ == "__main__":
    main()
