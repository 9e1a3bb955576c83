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


def _laplace_survival(t):
    """P(Z >= t) for Z ~ Laplace(1), vectorized."""
    t = np.asarray(t, float)
    return np.where(t > 0, 0.5 * np.exp(-np.abs(t)), 1 - 0.5 * np.exp(-np.abs(t)))


def adaptive_gap_transcripts(n: int, c: int):
    """Every transcript of Adaptive-Sparse-Vector-with-Gap on ``n`` queries (Ding, Wang, Zhang, Kifer
    2019, Alg. 2): tuples of branches (0 ⊥, 1 top costing 1 unit, 2 middle costing 2 units), stopped
    after the answer that takes the cost past ``2c - 2`` (line 16) and padded with -1."""
    out = []

    def extend(prefix, units):
        if units > 2 * c - 2 or len(prefix) == n:
            out.append(prefix + (-1,) * (n - len(prefix)))
            return
        for branch in (0, 1, 2):
            extend((*prefix, branch), units + branch)

    extend((), 0)
    return out


def adaptive_gap_law(queries, threshold, scales, sigma, c, gap_edges=None, answer=None):
    """P(transcript) for every :func:`adaptive_gap_transcripts` by quadrature over the threshold noise
    ``v ~ Lap(b0)``, ``scales = (b0, bt, bm)``: given ``v`` query ``i`` is a top ⊤ with probability
    ``pt = S((v + sigma - c_i)/bt)``, a middle ⊤ with ``(1 - pt) S((v - c_i)/bm)``, else ⊥.

    With ``gap_edges`` and ``answer = (transcript, i)`` it returns instead ``P(transcript, gap_i <=
    g)`` for each edge ``g``: the answer's factor is replaced by the probability that its branch's
    noise lands in ``[threshold of the branch, g]`` (gap ``c_i + noise - v``)."""
    c_i = np.asarray(queries, float) - threshold
    b0, bt, bm = scales
    n = len(c_i)
    listed = adaptive_gap_transcripts(n, c) if answer is None else [answer[0]]
    codes = np.array(listed)

    def integrand(v):
        pt = _laplace_survival((v + sigma - c_i) / bt) if np.isfinite(sigma) else np.zeros(n)
        pm = _laplace_survival((v - c_i) / bm)
        table = np.stack([(1 - pt) * (1 - pm), pt, (1 - pt) * pm, np.ones(n)], axis=1)  # -1 -> column 3
        factors = table[np.arange(n), codes]  # (transcripts, n)
        if answer is None:
            return np.exp(-abs(v) / b0) / (2 * b0) * factors.prod(axis=1)
        i = answer[1]
        rest = np.delete(factors[0], i).prod()
        g = np.asarray(gap_edges, float)
        if codes[0, i] == 1:
            inside = np.clip(pt[i] - _laplace_survival((v + np.maximum(g, sigma) - c_i[i]) / bt), 0, None)
        else:
            inside = (1 - pt[i]) * (pm[i] - _laplace_survival((v + np.maximum(g, 0) - c_i[i]) / bm))
        return np.exp(-abs(v) / b0) / (2 * b0) * rest * inside

    lo = min(c_i.min(), 0) - 60 * b0
    hi = max(c_i.max(), 0) + 60 * max(b0, bt, bm)
    kinks = {0.0, *c_i, *(c_i - sigma if np.isfinite(sigma) else [])}
    points = sorted(float(x) for x in kinks if lo < x < hi)
    law = integrate.quad_vec(integrand, lo, hi, points=points, epsabs=1e-13, epsrel=1e-10, limit=400)[0]
    return (dict(zip(listed, law, strict=True)) if answer is None else law), listed
