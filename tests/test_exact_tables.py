"""The fast exact discrete Laplace path against exact arithmetic: every 16-bit digit's reading of
Algorithm 1 (CKS 2020) checked with Python fractions, the resolver's Bernoulli laws, the tie wiring,
and the law of lanes that only the cleanup settles."""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import _exact_fast as fast
from dpjax import _exact_tables as tables

ALPHA = 1e-4
DIGITS = np.arange(2**tables.DIGIT, dtype=np.uint32)


def _T(gamma: Fraction, k: int) -> Fraction:
    """P(the first k trials of Algorithm 1 succeed) = gamma^k / k!."""
    return gamma**k / math.factorial(k)


def _odd_after(gamma: Fraction, k: int, terms: int = 40) -> Fraction:
    """P(K odd | K > k) for Algorithm 1's stopping trial K: sum over j > k of P(K = j) / T_k."""
    total = sum((_T(gamma, j - 1) - _T(gamma, j) for j in range(k + 1, k + terms) if j % 2), Fraction(0))
    return total / _T(gamma, k)


def _exp_series(gamma: Fraction, terms: int = 60) -> Fraction:
    return sum((Fraction((-gamma) ** j) / math.factorial(j) for j in range(terms)), Fraction(0))


def _digits(a: int, b: int) -> tables.Digit:
    """The code's reading of every digit for gamma = a/b, as the fast pass reads it."""
    if (a, b) == (1, 1):
        return jax.tree.map(np.asarray, fast._v_digit(jnp.asarray(DIGITS)))
    row = jnp.asarray(tables.packed_thresholds((a,), b))
    below, tie, tabled = tables.unpack(jnp.broadcast_to(row, (DIGITS.size, 3)))
    return jax.tree.map(np.asarray, tables.read_digit(jnp.asarray(DIGITS), below, tie, tabled, a > 0))


@pytest.mark.parametrize(
    ("a", "b"), [(1, 1), (0, 10), (1, 10), (3, 10), (9, 10), (1, 64), (37, 64), (63, 64), (2, 3), (6, 7)]
)
def test_one_digit_reads_algorithm_1_exactly(a, b):
    """Each digit x fixes W in [x, x + 1) / 2^16. The coupling A_k = [W < T_k] decides K when that
    interval lies on one side of every tabled T_k; the code's count, tie and past-the-table flags must
    say exactly that, and P(output 1) summed over digits (ties and the fresh trials past the table in
    exact fractions) must be exp(-gamma)."""
    gamma = Fraction(a, b)
    digit = _digits(a, b)
    k1 = int(digit.tabled[0])
    scale = 2**tables.DIGIT
    thresholds = [scale * _T(gamma, k) for k in range(1, k1 + 1)]
    for k, theta in enumerate(thresholds, 1):  # what the table holds: floor >= 2, thresholds >= 2x apart
        assert theta >= 2 and (k == 1 or 2 * theta <= thresholds[k - 2])
    next_untabled = scale * _T(gamma, k1 + 1) < 2 or b ** (k1 + 1) * math.factorial(k1 + 1) >= 2**31
    assert k1 == tables.MAX_TRIALS or next_untabled

    count, tie, beyond = digit.count, digit.tie, digit.beyond
    floors = np.array([math.floor(theta) for theta in thresholds] + [0])
    ceils = np.array([math.ceil(theta) for theta in thresholds] + [0])
    for k in range(1, k1 + 1):  # trials 1..count succeed for sure: the interval lies below T_k
        assert np.all(DIGITS[count >= k] + 1 <= floors[k - 1])
    decided = ~tie & ~beyond
    nxt = np.minimum(count, k1)  # trial count + 1 fails for sure (unless past the table)
    assert np.all((DIGITS >= ceils[nxt])[decided & (count < k1)])
    assert not np.any(decided & (count == k1) & (gamma > 0)) or k1 == 0
    probability = Fraction(int(np.sum(decided & (count % 2 == 0))))  # K = count + 1 odd
    assert not np.any(beyond) or gamma > 0
    probability += int(np.sum(beyond)) * _odd_after(gamma, k1) if k1 else 0
    for x in DIGITS[tie]:  # trial j = count + 1 undecided: T_j lies inside the digit's interval
        j = int(count[x]) + 1
        assert x < thresholds[j - 1] < x + 1
        success = thresholds[j - 1] - int(x)  # P(W < T_j | x), the resolver's r/d
        odd_if_success = Fraction(j % 2 == 0) if j < k1 else _odd_after(gamma, j)
        probability += success * odd_if_success + (1 - success) * (j % 2)
    assert abs(probability / scale - _exp_series(gamma)) < Fraction(1, 10**30)


def test_resolver_decides_bernoulli_fractions_and_fresh_trials():
    """``resolve`` on r/d with ``stop`` is Bernoulli(r/d) mapped to K = k + 1 or K = k; without
    ``stop`` a success goes on with fresh trials Bernoulli(a / (b k)): P(K odd | K > k) for gamma = a/b."""
    n = 200_000
    cases = [  # (k, r, d, a, b, stop, P(output 1))
        (2, 5, 7, 3, 10, True, Fraction(5, 7)),  # success: K = 3, odd
        (3, 1, 3, 3, 10, True, Fraction(2, 3)),  # success: K = 4, even; failure: K = 3, odd
        (5, 3, 10 * 5, 3, 10, False, _odd_after(Fraction(3, 10), 4)),  # past the table after trial 4
        (8, 1, 8, 1, 1, False, _odd_after(Fraction(1), 7)),  # exp(-1)'s trials past its table
    ]
    for i, (k, r, d, a, b, stop, want) in enumerate(cases):
        u32 = lambda v: jnp.full(n, v, jnp.uint32)  # noqa: E731
        p = tables.Pending(u32(k), u32(r), u32(d), u32(a), u32(b), jnp.full(n, stop), jnp.zeros(n, bool),
                           jnp.zeros(n, bool))
        ones = int(np.sum(np.asarray(tables.resolve(jax.random.key(i), p))))
        assert stats.binomtest(ones, n, float(want)).pvalue > ALPHA, (k, r, d)


def _word(u: int, t: int, x: int, sign: int = 0) -> int:
    """An attempt word whose uniform (kept by Lemire's rule) is ``u``, with digit ``x`` and sign bit."""
    low = next(v for v in range(2**15) if (v * t) >> 15 == u and (v * t) & 0x7FFF >= 2**15 % t)
    return (x << 16) | (sign << 15) | low


@pytest.mark.parametrize(("u", "t"), [(7, 10), (3, 10), (40, 64)])
def test_ties_and_past_the_table_digits_resolve_with_the_exact_conditional_law(u, t):
    """Lanes forced onto every pending digit of U = u: the cleanup accepts them with probability
    P(Algorithm 1 outputs 1 | that digit), computed from exact fractions."""
    gamma, n = Fraction(u, t), 20_000
    digit = _digits(u, t)
    c = fast.constants(t, 1)
    for x in [*np.flatnonzero(digit.tie), np.flatnonzero(digit.beyond)[-1]]:  # every tie, one past the table
        count = int(digit.count[x])
        k1 = int(digit.tabled[0])
        if digit.tie[x]:
            j = count + 1
            success = 2**tables.DIGIT * _T(gamma, j) - int(x)
            odd_if_success = Fraction(j % 2 == 0) if j < k1 else _odd_after(gamma, j)
            want = success * odd_if_success + (1 - success) * (j % 2)
        else:
            want = _odd_after(gamma, k1)
        words = jnp.full((1, n), _word(u, t, int(x)), jnp.uint32)
        lanes = fast._advance(fast._fresh((n,)), [words[0]], list(words), c)
        assert bool(jnp.all(lanes.found & lanes.digit.pending))
        resolved = fast._decide(jax.random.key(int(x)), lanes, jnp.ones(n, bool), c)
        kept = int(np.sum(np.asarray(resolved.found)))
        assert not bool(jnp.any(resolved.digit.pending))
        assert stats.binomtest(kept, n, float(want)).pvalue > ALPHA, (x, float(want), kept / n)


@pytest.mark.parametrize(("t", "s"), [(10, 1), (1, 3), (64, 5)])
def test_lanes_settled_from_scratch_have_the_discrete_laplace_law(t, s):
    """The cleanup alone (every lane fresh: restarts, pending digits and V's runs all through its
    steps) draws the discrete Laplace law: chi-square on 2 * 10^5 draws, and P(Z = 0)."""
    n = 200_000
    c = fast.constants(t, s)
    settled = jax.jit(lambda key: fast._signed(fast._settle(key, fast._fresh((n,)), jnp.ones(n, bool), c), c,
                                               jnp.int32))
    z = np.asarray(settled(jax.random.key(t)))
    q = math.exp(-s / t)
    support = np.arange(-60 * t // s - 5, 60 * t // s + 6)
    pmf = (1 - q) / (1 + q) * q ** np.abs(support)
    counts = np.bincount(np.clip(z, support[0], support[-1]) - support[0], minlength=support.size)
    expected = pmf * n
    keep = expected >= 20
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], n - expected[keep].sum())
    assert stats.chisquare(observed, expected).pvalue > ALPHA
