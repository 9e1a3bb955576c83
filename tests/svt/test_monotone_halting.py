"""dpjax._src.svt.monotone_halting, the AboveThreshold engine of UQE (Durfee 2023): halting-index laws by
Lemma 3.3 (Gumbel) and by quadrature (Exponential and Laplace), the overshoot tail, agreement of the
samplers and the exact privacy ratio on neighboring data."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import chi_square_pvalue
from scipy import integrate, special, stats

from dpjax._src.quantiles.unbounded_bins import _Counts, cumulative_counts, log_beta
from dpjax._src.svt.monotone_halting import halting_index, split_threshold

TRIALS = 20_000
CAP = 2000  # one static cap for every test, so compiled kernels are shared


PAD = 1024  # every count vector is padded to this length, so the kernels compile once per configuration


def _counts(f):
    f = jnp.asarray(f, jnp.int32)
    n_counted = f[-1]
    return _Counts(f, n_counted, jnp.searchsorted(f, n_counted).astype(jnp.int32))


@functools.partial(jax.jit, static_argnames=("noise", "method", "cap", "first"))
def _batch(keys, f, base, frac, eps1, eps2, *, noise, method, cap, first):
    counts = _counts(f)
    return jax.vmap(
        lambda key: halting_index(
            key,
            counts,
            (base, frac),
            eps1,
            eps2,
            noise=noise,
            dtype=jnp.float32,
            first=first,
            cap=cap,
            method=method,
        )
    )(keys)


def _sample(f, threshold, eps1, eps2, noise, *, method="fast", cap=CAP, first=1, trials=TRIALS, seed=0):
    f = np.asarray(f)
    f = np.concatenate([f, np.full(max(PAD - f.size, 0), f[-1])])

    base, frac = split_threshold(np.float32(threshold))
    keys = jax.random.split(jax.random.key(seed), trials)
    k, truncated = _batch(keys, f, base, frac, eps1, eps2, noise=noise, method=method, cap=cap, first=first)
    return np.asarray(k), np.asarray(truncated)


def _chi2_pvalue(samples, probs):
    """probs[j] = P(k = j + 1) for j < K0, and the last entry is P(k > K0)."""
    k0 = len(probs) - 1
    observed = np.bincount(np.minimum(samples, k0 + 1) - 1, minlength=k0 + 1)
    assert abs(np.sum(probs) - 1) < 1e-6
    return chi_square_pvalue(observed, probs)


# Query counts f_1..f_7 of a small dataset (f[0] = f_0 unused by Algorithm 2); n = 8 from f_6 on.
F_SMALL = [0, 1, 2, 2, 5, 6, 8, 8]


def _f_ext(f, k0):
    return np.array([f[min(i, len(f) - 1)] for i in range(k0 + 1)], dtype=float)


def gumbel_law(f, threshold, eps, k0):
    """Lemma 3.3 in log space, P(k) for k = 1..k0 and P(k > k0)."""
    fe = _f_ext(f, k0)
    log_t = eps * threshold
    log_cum = np.logaddexp.accumulate(np.concatenate([[log_t], eps * fe[1:]]))  # log(e^T + sum_{i<=k})
    probs = [math.exp(eps * fe[k] - log_cum[k] + log_t - log_cum[k - 1]) for k in range(1, k0 + 1)]
    probs.append(math.exp(log_t - log_cum[k0]))
    return probs


def _survival(noise, u, s):
    if noise == "exponential":
        return 1.0 if u <= 0 else math.exp(-u / s)
    return 1 - 0.5 * math.exp(u / s) if u <= 0 else 0.5 * math.exp(-u / s)


def quadrature_law(f, threshold, eps1, eps2, noise, k0):
    """Spec O3: P(k) = int p1(v) prod_{i<k} [1 - S(T + v - f_i)] S(T + v - f_k) dv."""
    fe = _f_ext(f, k0)
    s1, s2 = 1 / eps1, 1 / eps2
    density = (
        (lambda v: math.exp(-v / s1) / s1)
        if noise == "exponential"
        else (lambda v: math.exp(-abs(v) / s1) / (2 * s1))
    )
    low = 0.0 if noise == "exponential" else -60 * s1
    breaks = sorted({float(b - threshold) for b in fe[1:] if low < b - threshold < 60 * s1})

    def mass(k, halt):
        def integrand(v):
            alive = math.prod(1 - _survival(noise, threshold + v - fe[i], s2) for i in range(1, k))
            last = (
                _survival(noise, threshold + v - fe[k], s2)
                if halt
                else 1 - _survival(noise, threshold + v - fe[k], s2)
            )
            return density(v) * alive * last

        return integrate.quad(integrand, low, 60 * s1, points=breaks or None, limit=200, epsabs=1e-12)[0]

    probs = [mass(k, True) for k in range(1, k0 + 1)]
    probs.append(mass(k0, False))
    return probs


def test_gumbel_law_lemma_3_3():
    threshold, eps, k0 = 4.0, 1.0, 12
    k, _ = _sample(F_SMALL, threshold, eps, eps, "gumbel")
    probs = gumbel_law(F_SMALL, threshold, eps, k0)
    assert _chi2_pvalue(k, probs) > 1e-4


@pytest.mark.parametrize(("noise", "eps1", "eps2"), [("exponential", 0.5, 0.5), ("laplace", 0.7, 0.4)])
def test_quadrature_law(noise, eps1, eps2):
    threshold, k0 = 4.0, 12
    k, _ = _sample(F_SMALL, threshold, eps1, eps2, noise)
    probs = quadrature_law(F_SMALL, threshold, eps1, eps2, noise, k0)
    assert _chi2_pvalue(k, probs) > 1e-4


def test_exponential_law_dense_counts_thinning_region():
    """Many queries far below the threshold (the thinning proposals) and a steep rise near it."""
    f = np.concatenate([[0], np.repeat(np.arange(0, 40), 3), [41, 45, 50]])
    threshold, eps, k0 = 44.5, 0.5, len(f) + 2
    k, _ = _sample(f, threshold, eps, eps, "exponential")
    assert _chi2_pvalue(k, quadrature_law(f, threshold, eps, eps, "exponential", k0)) > 1e-4


@pytest.mark.parametrize(("split", "ms"), [(0.5, (1, 10, 100, 1000)), (2 / 3, (1, 3, 10, 30))])
def test_overshoot_tail_law(split, ms):
    """All data at the lower bound: P(G > m) = e^{-eps1 margin} Gamma(r+1) Gamma(m+1)/Gamma(m+r+1)."""
    n, q, eps = 100, 0.99, 0.1
    eps1, eps2 = split * eps, (1 - split) * eps
    k, truncated = _sample([0] + [n] * 3, q * n, eps1, eps2, "exponential")
    assert truncated.mean() < 0.002  # only beyond the cap of 2000 queries
    r = eps1 / eps2
    for m in ms:
        p = math.exp(
            -eps1 * (1 - q) * n + special.gammaln(r + 1) + special.gammaln(m + 1) - special.gammaln(m + r + 1)
        )
        hits = int((k > m).sum())
        assert stats.binomtest(hits, k.size, p).pvalue > 1e-4, (m, hits / k.size, p)


def test_closed_tail_matches_literal_sampler():
    """Closed-form tail (fast and blocks) vs drawing every query, on data whose maximum is hit early."""
    f = [0, 3, 5, 9, 10]
    args = (f, 9.5, 0.3, 0.3, "exponential")
    literal, lit_trunc = _sample(*args, method="literal", trials=8000, seed=1)
    k0 = 40
    probs = quadrature_law(f, 9.5, 0.3, 0.3, "exponential", k0)
    for method in ("fast", "blocks"):
        k, _ = _sample(*args, method=method, trials=8000, seed=2)
        table = np.array([np.bincount(np.minimum(s, k0 + 1), minlength=k0 + 2)[1:] for s in (k, literal)])
        table = table[:, table.sum(axis=0) >= 10]
        assert stats.chi2_contingency(table).pvalue > 1e-4
        assert _chi2_pvalue(k, probs) > 1e-4
    assert _chi2_pvalue(literal, probs) > 1e-4
    assert lit_trunc.mean() < 0.002  # P(G > 1996) is about 4e-4


def test_blocks_equal_literal_before_the_tail():
    """Same key: the block sampler and the literal sampler draw the same noise on the data region."""
    f = np.concatenate([[0], np.arange(1, 600), [600]])
    args = (f, 580.5, 0.5, 0.5, "exponential")
    blocks, _ = _sample(*args, method="blocks", trials=2000)
    literal, _ = _sample(*args, method="literal", trials=2000)
    before_tail = blocks < 600
    assert before_tail.mean() > 0.9
    np.testing.assert_array_equal(blocks[before_tail], literal[before_tail])


def test_exact_privacy_ratio_swap_neighbors():
    """Lemma 4.1 + Cor. 3.1 / Lemma 3.2: max_k |log P_x(k)/P_x'(k)| <= eps1 + eps2 (O5)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 20, 7)
    beta, q, k0 = 1.5, 0.6, 12
    worst = {"exponential": 0.0, "gumbel": 0.0}
    for j in range(7):
        neighbor = x.copy()
        neighbor[j] = x[j] + rng.uniform(1, 30)
        fs = [
            np.asarray(
                cumulative_counts(
                    jnp.asarray(d), 0.0, log_beta(beta, jnp.float32), k0, size=k0 + 1, dtype=jnp.float32
                ).f
            )
            for d in (x, neighbor)
        ]
        for noise in worst:
            laws = [
                np.array(
                    gumbel_law(f, q * 7, 0.5, k0)
                    if noise == "gumbel"
                    else quadrature_law(f, q * 7, 0.5, 0.5, noise, k0)
                )
                for f in fs
            ]
            worst[noise] = max(worst[noise], np.max(np.abs(np.log(laws[0] / laws[1]))))
    assert 0.3 < worst["exponential"] <= 1.0 + 1e-6
    assert 0.3 < worst["gumbel"] <= 1.0 + 1e-6
