"""Exact integer noise against dpjax's float noise and OpenDP's exact samplers, interleaved A/B.

Per-sample times of ``noise.discrete_laplace`` (scale 10: the fast pass; and its state-machine path,
forced) and ``noise.discrete_gaussian`` (sigma 10: the fast rounds; and the state machine, forced) on
one vector of 10^5 lanes, and vmapped over 1000 keys of 1000 lanes
(``additive.discrete_laplace_mechanism`` on a histogram: the Monte Carlo path), against
``noise.laplace`` / ``noise.gaussian`` (dpjax's float samplers, ``mode="high"``), ``jax.random.laplace``
and OpenDP's ``make_laplace`` / ``make_gaussian`` on an int64 vector (exact discrete samplers, one
call of 10^4). Each round times every sampler once, in turn, so a shared machine's load hits all of
them alike; medians over the rounds. Run from the repository root:

    python -m benchmarks.bench_exact [--rounds 7] [--lanes 100000]

``--lanes`` sets the vector's length (10^7 keeps a GPU busy; 10^5 is the CPU's figure).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import additive, noise
from dpjax._src.exact import noise as exact_noise
from dpjax._src.tools.bench.harness import load_average

N_PEER, KEYS, BINS = 10**4, 1000, 1000


def _jitted(fn):
    compiled = jax.jit(fn)
    compiled(jax.random.key(0)).block_until_ready()
    counter = iter(range(1, 10**9))
    return lambda: compiled(jax.random.key(next(counter))).block_until_ready()


def _state_machine(key, t, shape):
    """The discrete Laplace at scale ``t`` on the state machine (the path of numerators above 64)."""
    return exact_noise._machine(key, shape, np.dtype(np.int32), (t, 1), None)


def _gaussian_machine(key, sigma, shape):
    """The discrete Gaussian on the state machine (the path of proposal scales the fast rounds leave)."""
    gauss = exact_noise.gaussian_params(exact_noise.exact_rational(sigma, "sigma"), np.uint32)
    return exact_noise._machine(key, shape, np.dtype(np.int32), gauss["laplace"], gauss)


def _samplers(lanes):
    counts = jnp.asarray(np.random.default_rng(0).poisson(50, BINS), jnp.int32)
    keys = jax.random.split(jax.random.key(1), KEYS)
    mc = jax.jit(jax.vmap(lambda k: additive.discrete_laplace_mechanism(k, counts, (1, 10))))
    mc(keys).block_until_ready()
    shape = (lanes,)
    rows = {
        "noise.discrete_laplace (scale 10)": (_jitted(lambda k: noise.discrete_laplace(k, 10, shape)), lanes),
        "noise.discrete_laplace (scale 10, state machine)": (
            _jitted(lambda k: _state_machine(k, 10, shape)),
            lanes,
        ),
        "noise.discrete_gaussian (sigma 10)": (
            _jitted(lambda k: noise.discrete_gaussian(k, 10, shape)),
            lanes,
        ),
        "noise.discrete_gaussian (sigma 10, state machine)": (
            _jitted(lambda k: _gaussian_machine(k, 10, shape)),
            lanes,
        ),
        "discrete_laplace_mechanism, vmapped 1000 x 1000": (
            lambda: mc(keys).block_until_ready(),
            KEYS * BINS,
        ),
        "noise.laplace (float32, mode='high')": (_jitted(lambda k: noise.laplace(k, shape, 10.0)), lanes),
        "noise.gaussian (float32, mode='high')": (_jitted(lambda k: noise.gaussian(k, shape, 10.0)), lanes),
        "jax.random.laplace (float32)": (_jitted(lambda k: 10 * jax.random.laplace(k, shape)), lanes),
    }
    try:
        dp = importlib.import_module("opendp.prelude")
    except ImportError:
        return rows
    dp.enable_features("contrib")
    domain, zeros = dp.vector_domain(dp.atom_domain(T="i64")), np.zeros(N_PEER, np.int64)
    laplace = dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=10.0)
    gaussian = dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=10.0)
    rows["OpenDP make_laplace (int64, exact)"] = (lambda: laplace(zeros), N_PEER)
    rows["OpenDP make_gaussian (int64, exact)"] = (lambda: gaussian(zeros), N_PEER)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lanes", type=int, default=10**5, help="values per call (default: 10^5)")
    args = parser.parse_args(argv)
    rows = _samplers(args.lanes)
    print(f"devices: {jax.devices()}; {args.lanes} lanes per call")
    times = {name: [] for name in rows}
    print(f"load average at start: {load_average()}")
    for _ in range(args.rounds):
        for name, (call, samples) in rows.items():
            start = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - start) / samples)
    print(f"load average at end: {load_average()}")
    median = {name: statistics.median(values) for name, values in times.items()}
    print("| sampler | ns per sample (median) |\n|---|---|")
    for name, value in median.items():
        print(f"| {name} | {value * 1e9:.3g} |")
    for kind in ("laplace", "gaussian"):
        ours = median[f"noise.discrete_{kind} " + ("(scale 10)" if kind == "laplace" else "(sigma 10)")]
        floats = median[f"noise.{kind} (float32, mode='high')"]
        peer = median.get(f"OpenDP make_{kind} (int64, exact)")
        speedup = f"{peer / ours:.0f}x OpenDP" if peer else "OpenDP not installed"
        print(f"discrete {kind}: {speedup}; {ours / floats:.1f}x dpjax's float sampler")


if __name__ == "__main__":
    main()
