"""Audit throughput and power: how many mechanism runs per second an audit processes, and the
smallest epsilon violation it detects at 10^6 runs per input.

Run from the repository root: ``python -m benchmarks.bench_audit [--quick]``.

* Throughput: ``dpjax.audit.audit`` at 10^6 runs per input on the Laplace mechanism, randomized
  response and a 10-query sparse vector (Lyu et al. Alg. 1), timed by the harness of ``dpjax bench``
  (``time_eager``: the first call compiles the mechanism, "cold" = that call, "warm" = the median of
  the repeats after it, with their range); beside it the mechanism alone (one ``jit(vmap)`` call over
  2 * trials keys, ``time_jitted``: the sampling part of an audit), the jax.random floor for the same
  number of Laplace variates and a StatDP-style NumPy loop (one Python call of the mechanism per run,
  ``time_host``). Runs per second count the runs on both inputs (2 * trials).
* False alarms: the share of audits (2 * 10^4 runs per input, alpha = 0.05 and 0.2, 200 keys) that
  refute the exact epsilon of randomized response and of the Laplace mechanism (must be <= alpha).
* Power: the Laplace mechanism and randomized response with true epsilon (1 + g) audited against a
  claim of epsilon = 1 at 10^6 runs per input, over several keys; the detection rate per gap g.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import noise
from dpjax._src.tools.bench.floor import rng_floor
from dpjax._src.tools.bench.harness import time_eager, time_host, time_jitted
from dpjax._src.tools.bench.report import print_machine, print_table
from dpjax.audit import audit, neighbors, reference


def laplace_scaled(key, data):
    """value + Lap(1/eps) with (value, eps) as data, so one compilation serves every eps."""
    value, epsilon = data
    return value + noise.laplace(key, (), 1.0) / epsilon


def rr_scaled(key, data):
    bit, epsilon = data
    return jnp.where(jax.random.bernoulli(key, jax.nn.sigmoid(epsilon)), bit, ~bit)


def svt10(key, queries):
    return reference.sparse_vector(key, queries, 1.0, 0.0)


def numpy_svt(rng, queries, epsilon=1.0):
    """One run of Lyu et al. Alg. 1 (c = 1) in NumPy, as a per-run Python call (StatDP style)."""
    threshold = rng.laplace(0.0, 2.0 / epsilon)
    out = np.full(queries.size, -1, np.int8)
    for i, q in enumerate(queries):
        above = q + rng.laplace(0.0, 4.0 / epsilon) >= threshold
        out[i] = above
        if above:
            break
    return out


def numpy_laplace(rng, value, epsilon=1.0):
    return value + rng.laplace(0.0, 1.0 / epsilon)


def throughput(trials: int, repeats: int) -> list[dict]:
    rows = []
    svt_x, svt_xp = neighbors.svt_worst_case(10)
    cases = [
        ("laplace", laplace_scaled, (0.0, 1.0), (1.0, 1.0), 1, numpy_laplace, 0.0),
        ("randomized_response", rr_scaled, (True, 1.0), (False, 1.0), 1, None, None),
        ("sparse_vector_10", svt10, svt_x, svt_xp, 11, numpy_svt, svt_x),
    ]
    for name, mechanism, x, x_prime, variates, numpy_mech, numpy_data in cases:
        timing, result = time_eager(
            lambda m=mechanism, a=x, b=x_prime: audit(m, a, b, epsilon=1.0, trials=trials), repeats=repeats
        )
        keys = jax.random.split(jax.random.key(1), 2 * trials)
        alone, _ = time_jitted(jax.vmap(mechanism, in_axes=(0, None)), keys, x, repeats=repeats)
        floor = rng_floor("laplace", 2 * trials * variates, repeats=repeats).median
        row = {
            "mechanism": name,
            "runs": 2 * trials,
            "cold s": timing.compile + timing.median,
            "warm s": timing.median,
            "warm [min, max]": f"[{timing.low:.3g}, {timing.high:.3g}]",
            "runs/s (warm)": 2 * trials / timing.median,
            "mechanism alone s": alone.median,
            "laplace floor s": floor,
            "lower bound": result.epsilon_lower_bound,
        }
        if numpy_mech is not None:
            rng = np.random.default_rng(0)
            n_loop = 20_000
            loop = time_host(lambda: [numpy_mech(rng, numpy_data) for _ in range(n_loop)], repeats=1)  # noqa: B023
            per_run = loop.median / n_loop
            row["numpy loop runs/s"] = 1.0 / per_run
            row["speed-up vs loop"] = (2 * trials / timing.median) * per_run
        rows.append(row)
    return rows


def power(trials: int, gaps, seeds: int) -> list[dict]:
    rows = []
    for name, mechanism, x, x_prime in (
        ("laplace", laplace_scaled, 0.0, 1.0),
        ("randomized_response", rr_scaled, True, False),
    ):
        for gap in gaps:
            true_epsilon = 1.0 + gap
            results = [
                audit(
                    mechanism,
                    (x, true_epsilon),
                    (x_prime, true_epsilon),
                    epsilon=1.0,
                    trials=trials,
                    key=jax.random.key(1000 + s),
                )
                for s in range(seeds)
            ]
            rows.append(
                {
                    "mechanism": name,
                    "true eps": true_epsilon,
                    "claimed eps": 1.0,
                    "detected": f"{sum(not r.passed for r in results)}/{seeds}",
                    "median lower bound": float(np.median([r.epsilon_lower_bound for r in results])),
                }
            )
    return rows


def false_alarms(repeats: int) -> list[dict]:
    rows = []
    for name, mechanism, x, x_prime in (
        ("laplace", laplace_scaled, (0.0, 1.0), (1.0, 1.0)),
        ("randomized_response", rr_scaled, (True, 1.0), (False, 1.0)),
    ):
        for alpha in (0.05, 0.2):
            failures = sum(
                not audit(
                    mechanism, x, x_prime, epsilon=1.0, trials=20_000, alpha=alpha, key=jax.random.key(s)
                ).passed
                for s in range(repeats)
            )
            rows.append(
                {
                    "mechanism": name,
                    "alpha": alpha,
                    "audits": repeats,
                    "false alarms": failures,
                    "rate": failures / repeats,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 runs and fewer keys (smoke test)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each audit (default 3)")
    args = parser.parse_args()
    trials = 100_000 if args.quick else 1_000_000
    seeds = 2 if args.quick else 5
    print_machine()
    print(f"runs per input: {trials}; alpha = 1e-3; 8 candidate events (Bonferroni)")
    print_table("Audit throughput (claim eps = 1, true eps = 1)", throughput(trials, args.repeats))
    print_table(
        "False alarms at the exact epsilon (2*10^4 runs per input)", false_alarms(50 if args.quick else 200)
    )
    print_table(
        f"Smallest detectable violation at {trials} runs per input ({seeds} keys each)",
        power(trials, (0.0, 0.01, 0.02, 0.03, 0.05, 0.1), seeds),
    )


if __name__ == "__main__":
    main()
