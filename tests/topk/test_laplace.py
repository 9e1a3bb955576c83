"""The EXPERIMENTAL Laplace limited-domain mechanism (Algorithm 4) for k = 1, against its law by
numerical integration: chi-square of the kernel, and an audit of the derived guarantee on tiny
domains (the paper's constants were lost; spec §4.1)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats
from topk_laws import BOTTOM, hockey_stick, neighbor_pairs, ranked

from dpjax import topk
from dpjax._src.topk.laplace import laplace_limited_domain, laplace_limited_domain_guarantee


def _cdf(x):
    return 0.5 * math.exp(x) if x < 0 else 1 - 0.5 * math.exp(-x)


def laplace_law_k1(counts, kbar, eps, delta, cap):
    """``{item or BOTTOM: probability}`` for k = 1: the largest of the noisy scores in EM units."""
    order = ranked(counts, kbar + 1)
    h_next = order[kbar][0]
    locations = {i: eps * (c - h_next) for c, i in order[:kbar]}
    locations[BOTTOM] = eps + math.log(cap / delta)
    law = {}
    for o, a in locations.items():
        others = [b for p, b in locations.items() if p != o]

        def integrand(x, a=a, others=others):
            return 0.5 * math.exp(-abs(x - a)) * math.prod(_cdf(x - b) for b in others)

        points = sorted(locations.values())
        pieces = [(-math.inf, points[0]), *itertools.pairwise(points), (points[-1], math.inf)]
        law[(o,)] = sum(integrate.quad(integrand, lo, hi, epsabs=1e-14, epsrel=1e-12)[0] for lo, hi in pieces)
    return law


def test_law_sums_to_one():
    assert sum(laplace_law_k1([5, 3, 3, 0, 1], 3, 0.7, 0.1, 2).values()) == pytest.approx(1.0, abs=1e-10)


@pytest.mark.slow
def test_kernel_matches_law():
    counts, eps, delta, cap, n = [6, 3, 5, 2, 1], 0.7, 0.2, 2, 100_000
    res = laplace_limited_domain(
        jax.random.key(0), jnp.tile(jnp.asarray(counts), (n, 1)), 1, 3, eps, delta, max_contributions=cap
    )
    first = np.asarray(res.indices[:, 0])
    law = laplace_law_k1(counts, 3, eps, delta, cap)
    outcomes = sorted(law, key=str)
    observed = [np.sum(first == (o[0] if o[0] != BOTTOM else -1)) for o in outcomes]
    assert stats.chisquare(observed, [law[o] * n for o in outcomes]).pvalue > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize(("kbar", "cap", "values"), [(2, 1, 3), (3, 2, 2)])
@pytest.mark.parametrize(("eps", "delta"), [(0.5, 0.05), (2.0, 0.2)])
def test_derived_guarantee_holds_for_k1(kbar, cap, values, eps, delta):
    g = laplace_limited_domain_guarantee(1, eps, delta, max_contributions=cap)
    worst = 0.0
    for h, h2 in neighbor_pairs(4, cap, values=range(values)):
        p, q = laplace_law_k1(h, kbar, eps, delta, cap), laplace_law_k1(h2, kbar, eps, delta, cap)
        worst = max(worst, hockey_stick(p, q, g.epsilon), hockey_stick(q, p, g.epsilon))
    assert worst <= g.delta


def test_bad_input_and_api():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="max_contributions must be < kbar"):
        laplace_limited_domain(key, [3, 2, 1, 0], 1, 2, 1.0, 0.1, max_contributions=2)
    with pytest.raises(ValueError, match="delta"):
        laplace_limited_domain(key, [3, 2, 1, 0], 1, 2, 1.0, 0.0, max_contributions=1)
    assert not hasattr(topk, "laplace_limited_domain")  # experimental: not exported


def test_traced_max_contributions_must_stay_below_kbar():
    # A traced Delta is checked in the graph: Delta < kbar gives the eager call's result, Delta = kbar
    # (or a non-integer Delta) gives the invalid marker, -1 in every index and in num_returned.
    key, counts = jax.random.key(0), jnp.asarray([9, 5, 3, 1])
    run = jax.jit(lambda cap: laplace_limited_domain(key, counts, 2, 3, 1.0, 0.1, max_contributions=cap))
    want = laplace_limited_domain(key, counts, 2, 3, 1.0, 0.1, max_contributions=2)
    for got, ref in zip(run(2.0), want, strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    for cap in (3.0, 1.5, 0.0):
        bad = run(cap)
        assert (np.asarray(bad.indices) == -1).all() and int(bad.num_returned) == -1
