"""Selection benchmark: one-shot Gumbel top-k over d = 10^6 candidates, k = 10, 100 trials vmapped.

Compares, per release (trial), in one run:
* the RNG floor: d ``jax.random.gumbel`` draws (plain 32-bit sampler), and d dpjax tail-exact Gumbel draws;
* ``dpjax.selection.gumbel_top_k`` (and the other selection kernels at the same size), 100 trials vmapped;
* a NumPy reference loop (``Generator.gumbel`` + ``argpartition`` + sort of the k winners);
* OpenDP's noisy top-k (``make_noisy_top_k`` with a zCDP output measure, i.e. Gumbel noise) when installed.

Run from the repo root: ``python -m benchmarks.bench_selection [--d 1000000] [--k 10] [--trials 100] [--all]``
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.harness import print_machine, print_table, rng_floor, time_call
from dpjax import noise, selection


def numpy_gumbel_top_k(rng, scores, k, scale):
    """Reference: the k largest of scores + Gumbel(scale), best first."""
    noisy = scores + rng.gumbel(scale=scale, size=scores.shape)
    top = np.argpartition(noisy, -k)[-k:]
    return top[np.argsort(-noisy[top])]


def opendp_top_k(scores, k, scale, repeats):
    """Seconds per release of OpenDP's noisy top-k, or None when OpenDP is not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    try:
        meas = dp.m.make_noisy_top_k(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.linf_distance(T=float, monotonic=True),
            dp.zero_concentrated_divergence(),  # zCDP output measure: Gumbel noise, like ours
            k=k,
            scale=scale,
        )
    except (AttributeError, TypeError) as err:  # older OpenDP releases
        print(f"OpenDP present but make_noisy_top_k unavailable: {err}")
        return None
    values = [float(v) for v in scores]
    meas(values)
    start = time.perf_counter()
    for _ in range(repeats):
        meas(values)
    return (time.perf_counter() - start) / repeats


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--d", type=int, default=10**6)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--numpy-trials", type=int, default=10)
    parser.add_argument("--opendp-trials", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per kernel (median)")
    parser.add_argument("--all", action="store_true", help="also time the other selection kernels")
    args = parser.parse_args(argv)
    d, k, trials, eps = args.d, args.k, args.trials, args.epsilon
    print_machine()
    print(f"d = {d}, k = {k}, trials = {trials} (vmapped), epsilon = {eps}, float32, monotonic counts")

    rng = np.random.default_rng(0)
    counts_np = rng.zipf(1.3, d).clip(max=10**6).astype(np.float32)
    counts = jnp.asarray(counts_np)
    keys = jax.random.split(jax.random.key(0), trials)

    def per_trial(fn):
        # The scores are an argument, not a closed-over constant (XLA would constant-fold 10^6 entries).
        return (
            time_call(jax.jit(jax.vmap(fn, in_axes=(0, None))), keys, counts, repeats=args.repeats) / trials
        )

    floor = rng_floor("gumbel", d, repeats=args.repeats)
    floor_high = time_call(
        jax.jit(lambda key: noise.gumbel(key, (d,), 1.0, jnp.float32)), keys[0], repeats=args.repeats
    )
    floor_vmapped = per_trial(lambda key, c: jax.random.gumbel(key, c.shape, jnp.float32))
    kernels = {
        f"gumbel_top_k (k={k})": lambda key, c: selection.gumbel_top_k(key, c, k, eps, monotonic=True),
        "exponential_mechanism": lambda key, c: selection.exponential_mechanism(key, c, eps, monotonic=True),
        "exponential_mechanism inverse_cdf": lambda key, c: selection.exponential_mechanism(
            key, c, eps, monotonic=True, method="inverse_cdf"
        ),
        "report_noisy_max exponential": lambda key, c: selection.report_noisy_max(
            key, c, eps, noise="exponential", monotonic=True
        ),
        "report_noisy_max laplace": lambda key, c: selection.report_noisy_max(
            key, c, eps, noise="laplace", monotonic=True
        ),
        f"noisy_top_k_with_gap (k={k})": lambda key, c: selection.noisy_top_k_with_gap(
            key, c, k, eps, monotonic=True
        ),
    }
    rows = [
        {"what": "floor: jax.random.gumbel, 1 call", "ms/trial": 1e3 * floor, "x floor": 1.0},
        {
            "what": "floor: jax.random.gumbel, vmapped",
            "ms/trial": 1e3 * floor_vmapped,
            "x floor": floor_vmapped / floor,
        },
        {
            "what": "floor: dpjax.noise.gumbel (high)",
            "ms/trial": 1e3 * floor_high,
            "x floor": floor_high / floor,
        },
    ]
    timings = {}
    for name, fn in list(kernels.items())[: None if args.all else 1]:
        timings[name] = per_trial(fn)
        rows.append(
            {"what": f"dpjax {name}", "ms/trial": 1e3 * timings[name], "x floor": timings[name] / floor}
        )

    scale = 1.0 / eps
    numpy_rng = np.random.default_rng(1)
    numpy_gumbel_top_k(numpy_rng, counts_np, k, scale)
    start = time.perf_counter()
    for _ in range(args.numpy_trials):
        numpy_gumbel_top_k(numpy_rng, counts_np, k, scale)
    t_numpy = (time.perf_counter() - start) / args.numpy_trials
    rows.append(
        {"what": "NumPy reference gumbel top-k", "ms/trial": 1e3 * t_numpy, "x floor": t_numpy / floor}
    )
    t_opendp = opendp_top_k(counts_np, k, scale, args.opendp_trials)
    if t_opendp is None:
        print("OpenDP not installed: its row is skipped.")
    else:
        rows.append(
            {"what": "OpenDP make_noisy_top_k", "ms/trial": 1e3 * t_opendp, "x floor": t_opendp / floor}
        )
    print_table("Gumbel top-k and selection kernels, time per release", rows)
    gumbel = timings[f"gumbel_top_k (k={k})"]
    print(
        f"gumbel_top_k: {gumbel / floor:.2f}x the jax.random floor, "
        f"{gumbel / floor_high:.2f}x the tail-exact floor"
    )
    print(f"speed-up vs NumPy reference: {t_numpy / gumbel:.1f}x")
    if t_opendp is not None:
        print(f"speed-up vs OpenDP: {t_opendp / gumbel:.1f}x")


if __name__ == "__main__":
    main()
