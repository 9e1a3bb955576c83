"""Exact laws of the sparse-vector mechanisms, test oracles written from the papers' formulas."""

import math

import numpy as np
from scipy import integrate


def gumbel_halting_log_probabilities(queries, threshold, epsilon: float, *, sensitivity: float = 1.0):
    """Exact log-law of Gumbel AboveThreshold with ``epsilon1 = epsilon2 = epsilon`` (Durfee 2023,
    Lemma 3.3), as a NumPy array of length ``n + 1``: entry ``i`` is ``log P(index = i)`` for
    ``i < n`` and the last entry is ``log P(index = -1)``. Computed in float64."""
    q = np.asarray(queries, dtype=np.float64) * (epsilon / sensitivity)
    t = float(threshold) * (epsilon / sensitivity)
    # log(e^t + sum_{i<=k} e^{q_i}) for k = 0..n (k = 0: e^t alone).
    log_den = np.logaddexp.accumulate(np.concatenate([[t], q]))
    log_halt = q + t - log_den[1:] - log_den[:-1]
    return np.concatenate([log_halt, [t - log_den[-1]]])


def _survival(noise, u, scale):
    """P(nu >= u) for the query noise."""
    if noise == "laplace":
        return 0.5 * math.exp(-u / scale) if u > 0 else 1 - 0.5 * math.exp(u / scale)
    return math.exp(-u / scale) if u > 0 else 1.0  # exponential


def _density(noise, v, scale):
    if noise == "laplace":
        return math.exp(-abs(v) / scale) / (2 * scale)
    return math.exp(-v / scale) / scale if v >= 0 else 0.0


def halting_law(noise, queries, threshold, epsilon1, epsilon2, sensitivity=1.0):
    """P(index = i), i = 0..n-1, then P(index = -1), by quadrature over the threshold noise v
    (Durfee 2023, Algorithm 1): P(i) = int p(v) prod_{j<i} (1 - S(v - c_j)) S(v - c_i) dv."""
    if noise == "gumbel":
        return np.exp(
            gumbel_halting_log_probabilities(queries, threshold, epsilon1, sensitivity=sensitivity)
        )
    c = np.asarray(queries, float) - threshold
    b1, b2 = sensitivity / epsilon1, sensitivity / epsilon2
    lo = 0.0 if noise == "exponential" else min(c.min(), 0) - 60 * b1
    hi = max(c.max(), 0) + 60 * max(b1, b2)
    points = sorted({float(x) for x in c if lo < x < hi} | ({0.0} if lo < 0 else set()))

    def prob(i):
        def f(v):
            p = _density(noise, v, b1)
            for j in range(i if i >= 0 else len(c)):
                p *= 1 - _survival(noise, v - c[j], b2)
            return p * (_survival(noise, v - c[i], b2) if i >= 0 else 1.0)

        return integrate.quad(f, lo, hi, points=points, limit=400, epsabs=1e-13, epsrel=1e-10)[0]

    return np.array([prob(i) for i in range(len(c))] + [prob(-1)])


def halting_histogram(indices, n):
    indices = np.asarray(indices)
    return np.bincount(np.where(indices < 0, n, indices), minlength=n + 1)
