"""The bounded quantile mechanisms' ``method="auto"`` against ``method="literal"``, and UQE with data
passed as an argument (traced) against data closed over (issue 42, items 3 and 4). Same harness as
``dpjax bench``: "single" is one release, "MC" one call of ``jit(vmap(release))`` over keys with the
data fixed (passed as an argument, except the closed-over UQE row). Run from the repository root:

    python -m benchmarks.bench_quantile_auto [--size 1] [--repeats 3] [--out DIR]
    python -m benchmarks.bench_quantile_auto --interleaved [REPEATS]

``--interleaved`` times UQE's Monte Carlo call with the data closed over and passed as an argument,
and the fast sampler's prefix log-masses over the 131,073-count table of traced data
(``lax.cumlogsumexp`` against the scan UQE uses), interleaved in one process (min of the repeats):
on a shared machine a ratio is only meaningful side by side.

Data: n = 10^5 lognormal(0, 1) float32 points (at scale 1), bounds [0, 100], epsilon 1. EMQ: the
median; IndExp and AppIndExp (delta 1e-6): the 9 deciles; JointExp: the same deciles (it has no fast
sampler; the row gives its rate under ``vmap``). The floor is the literal kernel's draw: n + 1 Gumbel
variates per level (m (n + 1) for JointExp's literal backward pass). UQE: median, epsilon 1,
beta 1.001; its floor counts the Exponential variates of a literal AboveThreshold (one per query up
to the halting index, plus one), as in the headline row.
"""

from __future__ import annotations

import math
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import quantiles
from dpjax._src.svt.monotone_halting import _cumlogsumexp_nondecreasing
from dpjax._src.tools.bench.case import Case, power_label, scaled
from dpjax._src.tools.bench.cli import script

BOUNDS, EPSILON, BETA = (0.0, 100.0), 1.0, 1.001
DECILES = tuple(np.linspace(0.1, 0.9, 9).tolist())


def _bounded(x: np.ndarray, scale: float) -> list[Case]:
    n = x.size
    setting = f"n={power_label(n)} lognormal(0, 1) float32, bounds {BOUNDS}, epsilon={EPSILON:g}"
    releases = {"literal": scaled(32, scale, 8), "auto": scaled(10_000, scale, 100)}
    rows = {
        "quantiles.emq": (
            lambda m: lambda key, x: quantiles.emq(key, x, 0.5, EPSILON, bounds=BOUNDS, method=m),
            "median",
            1,
        ),
        "quantiles.ind_exp": (
            lambda m: lambda key, x: quantiles.ind_exp(key, x, DECILES, EPSILON, bounds=BOUNDS, method=m),
            "9 deciles",
            len(DECILES),
        ),
        "quantiles.app_ind_exp": (
            lambda m: lambda key, x: quantiles.app_ind_exp(
                key, x, DECILES, EPSILON, bounds=BOUNDS, delta=1e-6, method=m
            ),
            "9 deciles, delta=1e-6",
            len(DECILES),
        ),
    }
    cases = [
        Case(
            family="quantiles",
            mechanism=f"{name} (method='{method}')",
            setting=f"{setting}, {detail}",
            release=make(method),
            args=(jnp.asarray(x),),
            releases=releases[method],
            bytes_per_release=(8 * levels * n if method == "literal" else 256 * levels),
            noise="gumbel",
            variates=float(levels * (n + 1)),
            variates_note="floor: the literal kernel's n + 1 Gumbel draws per level",
        )
        for name, (make, detail, levels) in rows.items()
        for method in ("literal", "auto")
    ]
    joint = Case(
        family="quantiles",
        mechanism="quantiles.joint_exp",
        setting=f"{setting}, 9 deciles",
        release=lambda key, x: quantiles.joint_exp(key, x, DECILES, EPSILON, bounds=BOUNDS),
        args=(jnp.asarray(x),),
        releases=scaled(1_000, scale, 16),
        bytes_per_release=64 * len(DECILES) * math.isqrt(n) + 4096,
        noise="gumbel",
        variates=float(len(DECILES) * (n + 1)),
        variates_note="literal backward pass: one Gumbel per gap per quantile",
    )
    return [*cases, joint]


def _halting_variates(estimates) -> float:
    """Mean halting index k of the releases (``estimate = beta**k - 1``) plus the threshold's draw."""
    k = np.round(np.log1p(np.asarray(estimates, np.float64)) / math.log(BETA))
    return float(k.mean()) + 1.0


def _unbounded(x: np.ndarray, scale: float) -> list[Case]:
    setting = f"n={power_label(x.size)} lognormal(0, 1) float32, median, epsilon={EPSILON:g}, beta={BETA:g}"
    common = dict(
        family="quantiles",
        releases=scaled(10_000, scale, 100),
        bytes_per_release=64,
        noise="exponential",
        variates=_halting_variates,
        variates_note="literal AboveThreshold: one Exponential per query up to the halt, plus one",
    )
    return [
        Case(
            mechanism="quantiles.unbounded (data closed over)",
            setting=setting,
            release=lambda key: quantiles.unbounded(key, x, 0.5, EPSILON, beta=BETA),
            **common,
        ),
        Case(
            mechanism="quantiles.unbounded (data as argument)",
            setting=setting + ", table of 131,073 counts",
            release=lambda key, data: quantiles.unbounded(key, data, 0.5, EPSILON, beta=BETA),
            args=(jnp.asarray(x),),
            **common,
        ),
    ]


def cases(scale: float) -> list[Case]:
    x = np.random.default_rng(0).lognormal(0.0, 1.0, scaled(10**5, scale, 1_000)).astype(np.float32)
    return _bounded(x, scale) + _unbounded(x, scale)


def interleaved(repeats: int = 7) -> None:
    """UQE closed over vs data as argument at 10^3..10^5 keys, and the prefix log-masses two ways,
    interleaved; prints the min of ``repeats`` of each."""
    x = np.random.default_rng(0).lognormal(0.0, 1.0, 10**5).astype(np.float32)
    data = jnp.asarray(x)
    closed = jax.jit(jax.vmap(lambda key: quantiles.unbounded(key, x, 0.5, EPSILON, beta=BETA)))
    traced = jax.jit(jax.vmap(lambda key, d: quantiles.unbounded(key, d, 0.5, EPSILON, beta=BETA), (0, None)))
    terms = jnp.cumsum(jnp.asarray(np.random.default_rng(1).poisson(1.0, 2**17 + 1), jnp.float32)) * 0.5
    calls = {"prefix log-masses, lax.cumlogsumexp": (jax.jit(jax.lax.cumlogsumexp), (terms,)),
             "prefix log-masses, scan": (_cumlogsumexp_nondecreasing, (terms,))}
    for trials in (10**3, 10**4, 10**5):
        keys = jax.random.split(jax.random.key(0), trials)
        calls[f"UQE closed over, {trials} keys"] = (closed, (keys,))
        calls[f"UQE data as argument, {trials} keys"] = (traced, (keys, data))
    best = dict.fromkeys(calls, math.inf)
    for round_ in range(repeats + 1):  # round 0 compiles
        for name, (call, args) in calls.items():
            start = time.perf_counter()
            jax.block_until_ready(call(*args))
            if round_:
                best[name] = min(best[name], time.perf_counter() - start)
    for name, seconds in best.items():
        print(f"{name}: {seconds * 1e3:.2f} ms")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--interleaved"]:
        interleaved(*(int(a) for a in argv[1:2]))
        return
    script("benchmarks.bench_quantile_auto", cases, "quantiles: method='auto' and traced data", argv)


if __name__ == "__main__":
    main()
