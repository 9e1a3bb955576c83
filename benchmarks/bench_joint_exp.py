"""Speed of JointExp's three forward passes (linear, scan and FFT) against a NumPy reference of the
paper's algorithm (FFT per quantile, dense ``m x (n+1) x m`` table as in Alg. 1), side by side.

``dpjax bench quantiles`` times the headline row (the default scan path at n = 10^6, m = 29, one
release and vmapped releases). This script uses the same harness (``dpjax.tools.bench``) for the rest.
Run from the repository root:

    python -m benchmarks.bench_joint_exp [--sizes 1000:30 100000:29 1000000:30] [--x64] [--epsilon 1]
    python -m benchmarks.bench_joint_exp --accuracy [--sizes 1500:19 20000:29]

Prints machine info, then per size: seconds per release for each method, the speedup over NumPy,
and the process's peak resident memory after each size. The NumPy reference is skipped when its
table would exceed 2 GB. With ``--accuracy`` it prints instead, per method and dtype, the largest
total variation between a normalised forward row ``alphahat(j, .)`` and the float64 scan's.
"""

from __future__ import annotations

import argparse
import resource

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import logsumexp

from dpjax._src.tools.bench.harness import time_host, time_jitted
from dpjax._src.tools.bench.report import print_machine, print_table


def numpy_joint_exp(rng, x, qs, epsilon, lower, upper):
    """The paper's Alg. 1 in NumPy (float64): FFT Toeplitz step per quantile, dense table, racing."""
    x = np.sort(np.clip(x, lower, upper))
    n, m = x.size, len(qs)
    edges = np.concatenate([[lower], x, [upper]])
    with np.errstate(divide="ignore"):
        log_tau = np.log(np.diff(edges))
    c = epsilon / 4.0
    nu = np.diff(np.concatenate([[0.0], qs, [1.0]])) * n
    gaps = np.arange(n + 1)
    size = 1 << (2 * (n + 1) - 2).bit_length()
    table = np.full((m, n + 1, m), -np.inf)
    table[0, :, 0] = log_tau - c * np.abs(gaps - nu[0])
    for j in range(1, m):
        prev = logsumexp(table[j - 1], axis=1)
        kernel = np.where(gaps >= 1, -c * np.abs(gaps - nu[j]), -np.inf)
        km, xm = kernel.max(), prev[np.isfinite(prev)].max()
        conv = np.fft.irfft(
            np.fft.rfft(np.exp(kernel - km), size) * np.fft.rfft(np.exp(prev - xm), size), size
        )
        with np.errstate(divide="ignore"):
            table[j, :, 0] = log_tau + np.log(np.maximum(conv[: n + 1], 0)) + km + xm
        table[j, 0, 0] = -np.inf
        ks = np.arange(2, j + 2)
        table[j, :, 1 : j + 1] = (log_tau - c * nu[j])[:, None] + table[j - 1, :, :j] - np.log(ks)[None, :]
    out, j, hi, first = np.zeros(m, int), m, n, True
    while j > 0:
        w = table[j - 1, : hi + 1, :j] - c * np.abs(hi - gaps[: hi + 1] - nu[j])[:, None]
        if not first:
            w[hi] = -np.inf
        flat = np.argmax(w.ravel() - np.log(-np.log(rng.uniform(size=w.size))))
        i, k = divmod(flat, j)
        out[j - k - 1 : j] = i
        j, hi, first = j - k - 1, i, False
    return np.sort(edges[out] + rng.uniform(size=m) * (edges[out + 1] - edges[out]))


def accuracy(sizes):
    """Max total variation of the normalised ``alphahat`` rows of each method and dtype vs the float64
    scan (N(0,5) data, bounds +-100, epsilon 1)."""
    from dpjax._src.quantiles.joint_exp_tables import METHODS
    from dpjax.quantiles import joint_exp_tables

    def probs(tables, n):
        t = np.asarray(tables.log_total, np.float64)[:, : n + 1]
        p = np.exp(t - t.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    rng = np.random.default_rng(0)
    rows = []
    for spec in sizes:
        n, m = (int(v) for v in spec.split(":"))
        x = rng.normal(0.0, 5.0, n)
        qs = np.arange(1, m + 1) / (m + 1)

        def tables(dtype, method, x=x, qs=qs):
            return joint_exp_tables(jnp.asarray(x, dtype), qs, 1.0, bounds=(-100, 100), method=method)

        with jax.enable_x64():
            ref = probs(tables(jnp.float64, "scan"), n)
            row = {"n": n, "m": m}
            for method in METHODS:
                row[f"{method} f64"] = 0.5 * np.abs(probs(tables(jnp.float64, method), n) - ref).sum(1).max()
        for method in METHODS:
            row[f"{method} f32"] = 0.5 * np.abs(probs(tables(jnp.float32, method), n) - ref).sum(1).max()
        rows.append(row)
    print_table("JointExp forward rows: max total variation vs the float64 scan", rows)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1000:30", "100000:29", "1000000:30"])
    parser.add_argument("--x64", action="store_true", help="float64 (the FFT path needs it)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0, help="privacy parameter of every release")
    parser.add_argument("--accuracy", action="store_true", help="forward-row accuracy instead of speed")
    args = parser.parse_args()
    if args.accuracy:
        print_machine()
        accuracy(args.sizes)
        return
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    from dpjax._src.quantiles.joint_exp_tables import METHODS
    from dpjax.quantiles import joint_exp

    print_machine()
    dtype = jnp.float64 if args.x64 else jnp.float32
    rng = np.random.default_rng(0)
    rows = []
    for spec in args.sizes:
        n, m = (int(v) for v in spec.split(":"))
        x = rng.normal(0.0, 5.0, n)
        qs = np.arange(1, m + 1) / (m + 1)
        row = {"n": n, "m": m, "dtype": jnp.dtype(dtype).name}
        for method in METHODS:
            fn = jax.jit(
                lambda k, x, method=method, qs=qs: joint_exp(
                    k, x, qs, epsilon=args.epsilon, bounds=(-100, 100), method=method
                )
            )
            timing, _ = time_jitted(fn, jax.random.key(0), jnp.asarray(x, dtype), repeats=args.repeats)
            row[f"{method} s"] = timing.median
        if m * (n + 1) * m * 8 <= 2e9:
            reference = time_host(numpy_joint_exp, rng, x, qs, args.epsilon, -100.0, 100.0, repeats=1)
            row["numpy s"] = reference.median
            for method in METHODS:
                row[f"numpy/{method}"] = row["numpy s"] / row[f"{method} s"]
        row["peak RSS MB"] = peak_mb()
        rows.append(row)
    title = f"JointExp, seconds per release (N(0,5) data, bounds [-100,100], epsilon {args.epsilon:g})"
    print_table(title, rows)


if __name__ == "__main__":
    main()
