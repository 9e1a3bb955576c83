"""Speed and memory of PIE-NI range counting at 10^6 and 10^7 users, c = 64 rounds.

Run: ``python -m benchmarks.bench_budgeting [--sizes 1000000 10000000] [--rounds 64]``

Data (synthetic, not from the paper): users at a Gaussian mixture of 20 "hotspots" in a
100 km x 100 km square (metres); the query counts the users in a 2 km x 2 km square centred on a
hotspot; every user has rho = 1e-4 / m^2 (one-shot noise 70.7 m), beta0 = 0.025, even split.

Columns:

* ``dpjax ms``: one jit-compiled PIE-NI query (compile excluded), point mode (users release noisy
  2-D points) or distance mode (users release noisy signed distances).
* ``numpy ms``: a NumPy reference loop of Algorithm 4 that draws noise only for the active users
  (index compaction every round), same math, ``numpy.random.Generator.standard_normal``.
* ``floor(active) ms``: ``jax.random.normal`` for one Gaussian per active user per round
  (``sum_j |G_{j-1}|`` times the dimension), the floor named in the issue; ``floor(all) ms``: one
  per user per executed round, which is what a static-shape kernel draws.
* ``bytes/user``: XLA's compiled memory analysis (arguments + outputs + temporaries, aliasing
  ignored) divided by n.
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import print_machine, print_table, rng_floor, time_call
from dpjax.budgeting import pie_ni, split_schedule, tail_radius
from dpjax.budgeting.geometry import box_signed_distance

RHO, BETA0, HALF = 1e-4, 0.025, 1000.0


def hotspots(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n users around 20 hotspots in a 100 km square (float32 metres) and the hotspot centres."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(10_000, 90_000, (20, 2))
    which = rng.integers(0, 20, n)
    x = centres[which] + rng.normal(0, 3_000, (n, 2))
    return x.astype(np.float32), centres.astype(np.float32)


def numpy_pie_ni(x, rho, c, beta0, box, point, seed=0):
    """Algorithm 4 in NumPy with active-set compaction; returns (count, rounds per user)."""
    rng = np.random.default_rng(seed)
    frac, cum = split_schedule(c)
    center, half = box
    data = x if point else _box_np(x, center, half)
    n = data.shape[0]
    active = np.arange(n)
    mean = np.zeros_like(data, dtype=np.float64)
    rounds = np.zeros(n, np.int16)
    inside = 0
    d_eff = data.shape[1] if point else 1
    for j in range(c):
        if active.size == 0:
            break
        lam = float(tail_radius(d_eff, beta0 / (c * active.size)))
        r = rho * frac[j]
        v = data[active] + rng.standard_normal(data[active].shape) / math.sqrt(2 * r)
        w = frac[j] / cum[j + 1]
        mean[active] += w * (v - mean[active])
        rounds[active] = j + 1
        est = _box_np(mean[active], center, half) if point else mean[active]
        h = lam / math.sqrt(2 * rho * cum[j + 1])
        to1, to0 = est < -h, est > h
        inside += int(to1.sum())
        active = active[~(to1 | to0)]
    est = _box_np(mean[active], center, half) if point else mean[active]
    return inside + int((est < 0).sum()), rounds


def _box_np(p, center, half):
    q = np.abs(p - center) - half
    outside = np.sqrt(np.sum(np.maximum(q, 0) ** 2, axis=-1))
    return np.where(np.any(q > 0, axis=-1), outside, np.max(q, axis=-1))


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
        phi = np.asarray(box_signed_distance(jnp.asarray(x), box))
        xd, phid = jnp.asarray(x), jnp.asarray(phi)
        for mode in ("distance", "point"):
            for noise_mode in ("high", "low"):
                if mode == "point":
                    call = jax.jit(
                        lambda k, data, noise_mode=noise_mode, box=box: pie_ni(
                            k,
                            data,
                            RHO,
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
                            k, data, RHO, c=c, beta0=BETA0, nu_low=0.0, nu_high=0.0, noise_mode=noise_mode
                        )
                    )
                    data = phid
                key = jax.random.key(1)
                mem = call.lower(key, data).compile().memory_analysis()
                nbytes = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
                t = time_call(call, key, data, repeats=args.repeats)
                res = call(key, data)
                counts = np.asarray(res.active_counts).astype(np.int64)
                dim = 2 if mode == "point" else 1
                executed = int(res.rounds_run)
                floor_active = rng_floor("gaussian", int(counts.sum()) * dim, repeats=args.repeats)
                floor_all = rng_floor("gaussian", n * executed * dim, repeats=args.repeats)
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
                    "bytes/user": nbytes / n,
                }
                if noise_mode == "high" and n <= args.numpy_max:
                    start = time.perf_counter()
                    numpy_pie_ni(x, RHO, c, BETA0, box, mode == "point")
                    t_np = time.perf_counter() - start
                    row["numpy ms"] = 1e3 * t_np
                    row["numpy/dpjax"] = t_np / t
                rows.append(row)
                print_table(f"PIE-NI range count, c = {c} (so far)", rows[-1:])
    print_table(f"PIE-NI range count, c = {c}, rho = {RHO}/m^2, beta0 = {BETA0}", rows)


if __name__ == "__main__":
    main()
