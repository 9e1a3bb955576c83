"""The fast exact paths against exact arithmetic: every 16-bit digit's reading of Algorithm 1 (CKS 2020)
checked with Python fractions, the resolver's Bernoulli laws, the tie wiring, the law of lanes that
only the cleanup settles, and the discrete Gaussian's acceptance rows and hand-offs."""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src.exact import compact, fast, gauss_fast, machine, tables
from dpjax._src.exact.noise import gaussian_params

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
        return jax.tree.map(np.asarray, fast.v_digit(jnp.asarray(DIGITS)))
    row = jnp.asarray(tables.packed_thresholds((a,), b))
    below, tie, tabled = tables.unpack(jnp.broadcast_to(row, (DIGITS.size, 3)))
    return jax.tree.map(np.asarray, tables.read_digit(jnp.asarray(DIGITS), below, tie, tabled, a > 0))


@pytest.mark.parametrize(
    ("a", "b"),
    [(1, 1), (0, 10), (1, 10), (3, 10), (9, 10), (1, 64), (37, 64), (63, 64), (2, 3), (6, 7), (1, 200),
     (196, 200), (7, 8)],  # the last three: discrete Gaussian fractions (sigma 10 and 1/2)
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
    ``stop`` a success goes on with fresh trials Bernoulli(a / (b k)): P(K odd | K > k) for gamma = a/b.
    ``resolve_sparse`` gives the lanes it gathers (several rounds of them) the same laws."""
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
        # the sparse resolver on a third of the lanes open: those follow the same law, the others stay
        open_ = jnp.arange(n) % 3 == 0
        p = p._replace(done=~open_, output=~open_)
        output = np.asarray(tables.resolve_sparse(jax.random.key(i), p, n // 8))
        assert np.all(output[~np.asarray(open_)])
        ones = int(np.sum(output[np.asarray(open_)]))
        assert stats.binomtest(ones, int(np.sum(open_)), float(want)).pvalue > ALPHA, (k, r, d)


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
    assert _chi_square_pvalue(np.asarray(settled(jax.random.key(t))), _laplace_pmf(t, s)) > ALPHA


def _laplace_pmf(t, s):
    q = math.exp(-s / t)
    return lambda z: (1 - q) / (1 + q) * q ** np.abs(z)


def _gaussian_pmf(sigma):
    total = np.exp(-(np.arange(-60 * sigma, 60 * sigma + 1, dtype=np.float64) ** 2) / (2 * sigma**2)).sum()
    return lambda z: np.exp(-(z.astype(np.float64) ** 2) / (2 * sigma**2)) / total


def _chi_square_pvalue(z, pmf):
    """Chi-square of the integer draws ``z`` against ``pmf``, values expecting fewer than 20 draws pooled."""
    support = np.arange(z.min() - 1, z.max() + 2)
    counts = np.bincount(z - support[0], minlength=support.size)
    expected = pmf(support) * z.size
    keep = expected >= 20
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], z.size - expected[keep].sum())
    return stats.chisquare(observed, expected).pvalue


def test_rounds_short_of_lanes_continue_the_stream():
    """Plans with far fewer candidates per round than values, so every call takes many rounds: the output
    is the kept candidates of rounds 0, 1, ... in order (the stream), and has the exact law (chi-square
    on 60000 draws, discrete Laplace at scale 10, discrete Gaussian at sigma 10)."""
    n, key = 60_000, jax.random.key(5)
    c = fast.constants(10, 1)
    plan = fast.Plan(8192, fast.chunk(8192, 10, 1))
    z = np.asarray(fast.sample(key, c, (n,), np.dtype(np.int32), plan))
    draw = jax.jit(lambda k: fast.candidates(k, c, plan.lanes, plan.chunk, jnp.int32))
    stream = []
    for i in range(n // 4000):
        values, kept = draw(jax.random.fold_in(key, i))
        stream.append(np.asarray(values)[np.asarray(kept)])
    np.testing.assert_array_equal(z, np.concatenate(stream)[:n])
    assert _chi_square_pvalue(z, _laplace_pmf(10, 1)) > ALPHA
    params, c = _gaussian_constants(10)
    plan = gauss_fast.plan(4096, 10, 1, params)
    assert plan.lanes < n / 8
    word = machine.word_type()
    lap = machine.laplace_words(*params["laplace"], word)
    gauss = {name: jnp.asarray(params[name], word) for name in ("r", "c", "w", "D")}
    z = np.asarray(gauss_fast.sample(key, c, lap, gauss, (n,), np.dtype(np.int32), plan))
    assert _chi_square_pvalue(z, _gaussian_pmf(10)) > ALPHA


@pytest.mark.parametrize("filled", [0, 5, 990])
def test_compact_fill_takes_the_kept_values_in_order(filled):
    """The stream's output: lanes from ``filled`` on take the kept values in order, until the output is
    full; the count of filled lanes never passes its size."""
    rng = np.random.default_rng(filled)
    for size, share in ((1500, 0.7), (700, 0.9), (3000, 0.01), (64, 0.0)):
        values, kept = rng.integers(-99, 99, size).astype(np.int32), rng.random(size) < share
        out = np.full(1000, -1000, np.int32)
        count, got = compact.fill(jnp.int32(filled), jnp.asarray(out), jnp.asarray(values), jnp.asarray(kept))
        taken = values[kept][: 1000 - filled]
        out[filled : filled + taken.size] = taken
        np.testing.assert_array_equal(np.asarray(got), out)
        assert int(count) == filled + taken.size


@pytest.mark.parametrize(
    ("n", "share"), [(100_000, 0.008), (100_000, 0.5), (777, 0.01), (1000, 1.0), (64, 0.0)]
)
def test_compact_nonzero_matches_jnp_nonzero(n, share):
    """The gathers' compaction: the same first ``size`` set positions, in order, then the fill."""
    mask = jnp.asarray(np.random.default_rng(n).random(n) < share)
    for size in (1, 64, 1664, n):
        want = jnp.nonzero(mask, size=size, fill_value=n)[0]
        assert np.array_equal(np.asarray(compact.nonzero(mask, size, n)), np.asarray(want)), size


def _odd_given_digit(gamma: Fraction, x: int, k1: int) -> Fraction:
    """P(Algorithm 1 outputs 1 | W's first digit is x) when trials 1..k1 read W (A_k = [W < T_k]) and
    later ones are fresh, from exact fractions only."""
    scale = 2**tables.DIGIT

    def survive(k):  # P(K > k | x)
        if k <= k1:
            return min(max(scale * _T(gamma, k) - x, Fraction(0)), Fraction(1))
        return survive(k1) * _T(gamma, k) / _T(gamma, k1)

    return sum((survive(j - 1) - survive(j) for j in range(1, k1 + 40, 2)), Fraction(0))


def _gaussian_constants(sigma):
    params = gaussian_params(Fraction(sigma), np.uint32)
    t, s = params["laplace"]
    return params, gauss_fast.constants(t, s, params)


@pytest.mark.parametrize("sigma", [Fraction(10), Fraction(7, 2), Fraction(1, 2)])
def test_gaussian_acceptance_rows_are_exact(sigma):
    """Every row |y| < L of the acceptance table against Fraction arithmetic: g = floor(gamma) (counted
    up to 4), gamma's fraction a/D, and Algorithm 1's thresholds floor(2^16 f^k / k!) with their tie
    flags, and the 16-bit thresholds floor(2^16 f / k) of the fresh trials k = k1 + 1, k1 + 2, k1 + 3
    past them with theirs; rows past the table are left to the machine."""
    params, c = _gaussian_constants(sigma)
    length = c.packed.shape[0]
    assert length >= 6 * Fraction(*params["laplace"])
    y = np.arange(-length - 3, length + 3)
    reading = gauss_fast._read(jnp.asarray(y, jnp.int32), jnp.zeros(y.size, jnp.uint32),
                               jnp.zeros(y.size, jnp.uint32), c)
    below, tie, tabled = tables.unpack(c.packed)
    for i, value in enumerate(y):
        v = abs(int(value))
        assert bool(reading.in_table[i]) == (v < length)
        if v >= length:
            assert int(reading.whole[i]) == 4
            continue
        gamma = Fraction(params["w"] * (params["r"] * v - params["c"]) ** 2, params["D"])
        whole, f = math.floor(gamma), gamma - math.floor(gamma)
        assert int(reading.whole[i]) == min(whole, 4)
        assert Fraction(int(reading.a[i]), params["D"]) == f
        k1 = int(tabled[v])
        for k in range(1, tables.MAX_TRIALS + 1):
            theta = 2**tables.DIGIT * _T(f, k)
            if k <= k1:
                assert int(below[k - 1][v]) == math.floor(theta) >= 2
                assert (int(tie[k - 1][v]) == math.floor(theta)) == (theta.denominator != 1)
            else:
                assert int(below[k - 1][v]) == 0
        uncomparable = params["D"] ** (k1 + 1) * math.factorial(k1 + 1) >= 2**31
        deeper = 2**tables.DIGIT * _T(f, k1 + 1) < 2 or uncomparable
        assert k1 == tables.MAX_TRIALS or deeper
        fresh = [int(c.packed[v, 3]) & 0xFFFF, int(c.packed[v, 3]) >> 16, int(c.packed[v, 4]) & 0xFFFF]
        for j, q in enumerate(fresh, start=1):  # the fresh trial k1 + j: Bernoulli(f / (k1 + j))
            threshold = 2**tables.DIGIT * f / (k1 + j)
            assert q == math.floor(threshold)
            assert ((int(c.packed[v, 4]) >> (15 + j)) & 1) == (threshold.denominator != 1)


def _resumed(gamma: Fraction, k: int) -> Fraction:
    """P(Algorithm 1 outputs 1 | its first k trials passed), from exact fractions."""
    return _odd_after(gamma, k, terms=60)


def _v_success(x):
    return _odd_given_digit(Fraction(1), x, int(fast.V_TABLE.below[:, 0].astype(bool).sum()))


def test_gaussian_hand_offs_have_the_exact_conditional_laws():
    """Sigma 10 (gamma = (|y| - 10)^2 / 200): candidates forced onto every path of the fast rounds, each
    case on 20000 lanes: a tie and runs past the table on gamma's fraction (its fresh trials read from
    the spare digits: a failure, a tie, all passed and resolved on, g = 2 with one spare), exp(-1)
    trials past V's table and on a tie (all resolved), g > 3 with its three read trials passed (the
    machine runs the rest), |y| >= L (a read trial rejects it, or the machine runs the rest of its
    test). A lane is accepted with P(the trials read pass | their digits), from exact fractions; the
    machine accepts a lane with P(the rest passes): exp(-(g - 3)), times exp(-f) past the table."""
    params, c = _gaussian_constants(10)
    n, success, failure = 20_000, 20_000, 40_000  # V digits: K = 3 (exp(-1) trial passed), K = 2
    assert _v_success(success) == 1 and _v_success(failure) == 0
    cases = [  # (y, exp(-1) digits 1 and 2, (fraction digit, exp(-1) digit 3), P(read trials pass), rest)
        (11, (failure, failure), (327, failure), _odd_given_digit(Fraction(1, 200), 327, 1), None),  # a tie
        (-24, (failure, failure), (0, failure), Fraction(0), None),  # past: fresh trial 4 fails, K = 4
        (0, (failure, failure), (0, 0), Fraction(1), None),  # past: trial 4 passes (0 < 8192), 5 fails
        (1, (0, 0), (5, 0), _resumed(Fraction(81, 200), 6), None),  # past: 4, 5, 6 pass, 7 on resolved
        (0, (failure, 6553), (0, 0), 1 - Fraction(3, 5) * (1 - _resumed(Fraction(1, 2), 5)), None),  # tie
        (33, (success, success), (0, 0), _resumed(Fraction(129, 200), 4), None),  # g = 2: one spare digit
        (30, (0, success), (60_000, failure), _v_success(0), None),  # g = 2, a = 0: trial 1 past V's table
        (-30, (success, fast.V_TIES[2]), (60_000, 0), _v_success(fast.V_TIES[2]), None),  # V's tie
        (35, (success, success), (60_000, 0), _v_success(0), None),  # g = 3, f = 1/8: trial 3 past the table
        (39, (success, success), (60_000, success), Fraction(1), Fraction(1)),  # g = 4: the machine's 1
        (-70, (success, success), (0, success), Fraction(1), Fraction(3600, 200) - 3),  # |y| >= L
        (70, (success, failure), (0, success), Fraction(0), None),  # |y| >= L, rejected by trial 2
    ]
    y = np.repeat([case[0] for case in cases], n).astype(np.int32)
    hi = np.repeat([(e1 << 16) | e2 for _, (e1, e2), *_ in cases], n).astype(np.uint32)
    lo = np.repeat([(x << 16) | e3 for _, _, (x, e3), *_ in cases], n).astype(np.uint32)
    y, hi, lo = jnp.asarray(y), jnp.asarray(hi), jnp.asarray(lo)
    reading = gauss_fast._read(y, hi, lo, c)
    status = gauss_fast._status(reading, gauss_fast._read_outcomes(reading))
    status = np.asarray(gauss_fast._settle_pending(jax.random.key(1), y, hi, lo, status, c))
    word = machine.word_type()
    lap = machine.laplace_words(*params["laplace"], word)
    gauss = {name: jnp.asarray(params[name], word) for name in ("r", "c", "w", "D")}
    handed = status == gauss_fast._MACHINE
    accepted = gauss_fast._machine_accepts(jax.random.key(2), y, jnp.asarray(handed), c, lap, gauss,
                                           np.dtype(np.int32))
    accepted = np.asarray(accepted)
    for i, (value, _, _, passed, rest) in enumerate(cases):
        block = slice(i * n, (i + 1) * n)
        if rest is None:  # settled in the round: accepted or rejected
            assert not np.any(handed[block])
            ones = int(np.sum(status[block] == gauss_fast._DONE))
            assert stats.binomtest(ones, n, float(passed)).pvalue > ALPHA, (value, ones / n)
            continue
        assert np.all(handed[block])
        p = float(passed) * math.exp(-float(rest))
        ones = int(np.sum(accepted[block]))
        assert stats.binomtest(ones, n, p).pvalue > ALPHA, (value, ones / n, p)
    assert np.all(accepted[~handed])  # lanes not handed are left alone
    # past a table cut to L = 32, |y| = 40 (gamma = 4 + 1/2) leaves the machine exp(-1) and the fraction
    short = c._replace(packed=c.packed[:32], residual=c.residual[:, :32])
    y = jnp.full(n, 40, jnp.int32)
    g4 = slice(n * [case[0] for case in cases].index(39), None)  # the words of the case g = 4 above
    reading = gauss_fast._read(y, hi[g4][:n], lo[g4][:n], short)
    status = gauss_fast._status(reading, gauss_fast._read_outcomes(reading))
    assert np.all(np.asarray(status) == gauss_fast._MACHINE)
    accepted = gauss_fast._machine_accepts(jax.random.key(3), y, jnp.ones(n, bool), short, lap, gauss,
                                           np.dtype(np.int32))
    assert stats.binomtest(int(np.sum(np.asarray(accepted))), n, math.exp(-1.5)).pvalue > ALPHA
