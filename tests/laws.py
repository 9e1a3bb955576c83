"""Shared helpers of the law tests: sampling many releases, chi-square p-values, and the exact
laws of the exponential mechanism family (softmax, Plackett-Luce peeling, report-noisy-max by
quadrature, the difference of two Laplace variables)."""

import functools
import itertools

import jax
import numpy as np
from scipy import integrate, stats

N = 100_000
P_MIN = 1e-4  # a correct implementation fails a law test with probability 1e-4 (seeds are fixed anyway)
LAWS = {
    "gumbel": lambda b: stats.gumbel_r(scale=b),
    "exponential": lambda b: stats.expon(scale=b),
    "laplace": lambda b: stats.laplace(scale=b),
}


@functools.cache
def _batched(mechanism, options):
    return jax.jit(jax.vmap(lambda key, scores: mechanism(key, scores, **dict(options)), in_axes=(0, None)))


def sample(mechanism, scores, trials, seed, **options):
    """``trials`` releases of ``mechanism(key, scores, **options)``, one compile per (mechanism, options)."""
    keys = jax.random.split(jax.random.key(seed), trials)
    return jax.tree.map(np.asarray, _batched(mechanism, tuple(sorted(options.items())))(keys, scores))


def chi_square_pvalue(observed, expected_probabilities):
    """Pearson chi-square p-value of counts against probabilities.

    Cells expected below 5 are pooled into one (dropped when nothing is expected or observed there);
    the expectations are rescaled to the observed total, since probabilities obtained by quadrature
    sum to 1 only up to its tolerance.
    """
    observed = np.asarray(observed, np.float64)
    expected = np.asarray(expected_probabilities, np.float64) * observed.sum()
    small = expected < 5
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        if expected[-1] == 0 and observed[-1] == 0:
            observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


def em_probabilities(scores, scale):
    logits = np.asarray(scores, np.float64) / scale
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def plackett_luce(scores, k, scale):
    """Exact law of k-fold exponential-mechanism peeling, over ordered k-tuples."""
    weights = em_probabilities(scores, scale)
    tuples = list(itertools.permutations(range(len(weights)), k))
    probs = []
    for t in tuples:
        p, left = 1.0, 1.0
        for i in t:
            p *= weights[i] / left
            left -= weights[i]
        probs.append(p)
    return tuples, np.array(probs)


def noisy_max_probabilities(scores, noise, scale):
    """P(argmax_i s_i + Z_i = j), Z iid, by numerical integration of f_j(x) prod_{i != j} F_i(x)."""
    law = LAWS[noise](scale)
    scores = np.asarray(scores, np.float64)
    lo, hi = scores.min() + law.ppf(1e-13), scores.max() + law.isf(1e-13)
    probs = []
    for j, s in enumerate(scores):
        others = np.delete(scores, j)

        def density(x, s=s, others=others):
            return law.pdf(x - s) * np.prod(law.cdf(x - others))

        probs.append(integrate.quad(density, lo, hi, points=sorted(scores), limit=500, epsabs=1e-13)[0])
    probs = np.array(probs)
    assert abs(probs.sum() - 1) < 1e-8
    return probs


def scale_of(epsilon, sensitivity, monotonic):
    return (1 if monotonic else 2) * sensitivity / epsilon


PEELING_CASES = {  # scores, k, monotonic
    "d3_k2": ([3.0, 1.0, 2.0], 2, False),
    "d4_k3_negative": ([-1.0, -2.5, 0.5, -0.5], 3, True),
    "d5_k3_ties": ([0.0, 0.0, 1.0, -2.0, 1.0], 3, False),
    "d5_k2_ties_monotone": ([0.0, 0.0, 1.0, -2.0, 1.0], 2, True),
    "d6_k2_shift": ([2.0**20 + v for v in (0.0, 1.0, 3.0, 2.0, 0.0, -1.0)], 2, False),
    "d6_k1": ([1.0, 0.0, 2.0, 0.5, -1.0, 1.5], 1, True),
}

LAW_CASES = {  # utilities (scale 2: epsilon = 1, general sensitivity 1)
    "flat_13": [0.0] * 13,  # four blocks of 4, the last one padded
    "peaked_spanning_1e4": [0.0, -1.0, -3.0, -1e4, -5e3, -2.0, 0.0, -10.0, -20.0, -9999.0],
    "ties": [1.0, 1.0, 0.5, 1.0, -1.0, 0.5, 0.0],
    "single": [4.0],
}


def laplace_difference_tail(t, b):
    """P(eta - eta' >= t) for iid Lap(b) (the equal-rate case of Ding, Wang, Zhang, Kifer 2019, Lemma 5)."""
    t = np.asarray(t, np.float64)
    x = np.abs(t) / b
    with np.errstate(invalid="ignore"):
        upper = np.where(np.isinf(x), 0.0, (2 + x) / 4 * np.exp(-x))
    return np.where(t >= 0, upper, 1 - upper)
