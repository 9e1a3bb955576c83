"""JointExp against the math: brute-force enumeration, closed forms, invariants and a privacy audit."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float_tolerance import assert_close_ulp
from jax import enable_x64
from scipy import stats
from scipy.special import logsumexp

from dpjax._src.quantiles.exp_mech import _gap_logits
from dpjax._src.quantiles.intervals import _sort_floats, sorted_gaps
from dpjax._src.quantiles.joint_exp import _draw_gap, _joint_exp_sensitivity, _sample_gaps, _sample_outputs
from dpjax._src.quantiles.joint_exp_layout import sampling_block
from dpjax._src.quantiles.joint_exp_linear import LINEAR_BLOCKS, _toeplitz_linear_certified, toeplitz_linear
from dpjax._src.quantiles.joint_exp_state import OMITTED_MASS
from dpjax._src.quantiles.joint_exp_tables import forward_tables, log_normalizer
from dpjax._src.quantiles.joint_exp_toeplitz import _log_filter, remainder, toeplitz_scan
from dpjax.accounting import RangeBounded
from dpjax.quantiles import joint_exp, joint_exp_guarantee, joint_exp_log_normalizer, joint_exp_tables

# The forward pass compiled (one compilation per shape and static option instead of one per eager
# operation); the margin and the levels stay arguments.
FORWARD_TABLES = jax.jit(forward_tables, static_argnames=("method", "restart_above", "span"))

WORKED_X = [0.1, 0.1, 0.4, 0.9]
WORKED_Q = [0.25, 0.5, 0.75]


def brute_force(x, lower, upper, qs, epsilon, neighbors="swap"):
    """Every nondecreasing gap sequence with its weight exp(c u) prod tau / gamma (spec Sec. 2)."""
    x = np.sort(np.clip(np.asarray(x, np.float64), lower, upper))
    n, m = x.size, len(qs)
    tau = np.diff(np.concatenate([[lower], x, [upper]]))
    nu = np.diff(np.concatenate([[0.0], qs, [1.0]])) * n
    c = epsilon / (2 * _joint_exp_sensitivity(qs, neighbors))
    weights = {}
    for seq in itertools.combinations_with_replacement(range(n + 1), m):
        path = [0, *seq, n]
        utility = -sum(abs(path[j + 1] - path[j] - nu[j]) for j in range(m + 1))
        weight = math.exp(c * utility) * np.prod(tau[list(seq)])
        for gap in set(seq):
            weight /= math.factorial(seq.count(gap))
        weights[seq] = weight
    return weights


def utility(x, lower, upper, qs, o):
    """u_Q(X, o) by direct counting (half-open intervals, o_0 = a, o_{m+1} = b + 1)."""
    x = np.clip(np.asarray(x, np.float64), lower, upper)
    ends = np.concatenate([[lower], o, [upper + 1]])
    counts = np.array([np.sum((x >= ends[j]) & (x < ends[j + 1])) for j in range(len(o) + 1)])
    targets = np.diff(np.concatenate([[0.0], qs, [1.0]])) * x.size
    return -np.sum(np.abs(counts - targets))


# The random cases' (n, m): three shapes (with empty data), so that the cases of a test share their
# compilations (JointExp compiles once per data shape and m; the values are arguments).
SHAPES = ((0, 1), (3, 2), (6, 3))


def random_case(rng, i):
    """Case ``i``: shape ``SHAPES[i % 3]``, random data (duplicates, points outside the bounds),
    levels and epsilon."""
    n, m = SHAPES[i % len(SHAPES)]
    x = np.round(rng.uniform(-1.4, 1.4, n), 1)  # duplicates and points outside [-1, 1]
    qs = np.sort(rng.choice(np.linspace(0, 1, 11), m, replace=False))
    return x, qs, float(rng.uniform(0, 4))


@pytest.mark.parametrize("method", ["scan", "fft"])
def test_log_normalizer_matches_brute_force_x64(method):
    rng = np.random.default_rng(1)
    with enable_x64():
        for i in range(6):
            x, qs, eps = random_case(rng, i)
            for neighbors in ("swap", "add_remove"):
                want = math.log(sum(brute_force(x, -1, 1, qs, eps, neighbors).values()))
                got = joint_exp_log_normalizer(
                    jnp.asarray(x, jnp.float64), qs, eps, bounds=(-1, 1), neighbors=neighbors, method=method
                )
                assert abs(float(got) - want) < 1e-9, (x, qs, eps, neighbors)


def test_log_normalizer_linear_matches_brute_force_x64():
    test_log_normalizer_matches_brute_force_x64("linear")


def test_log_normalizer_float32_scan_close():
    rng = np.random.default_rng(2)
    for i in range(3):
        x, qs, eps = random_case(rng, i)
        want = math.log(sum(brute_force(x, -1, 1, qs, eps).values()))
        got = joint_exp_log_normalizer(jnp.asarray(x, jnp.float32), qs, eps, bounds=(-1, 1))
        assert abs(float(got) - want) < 1e-5


def test_worked_example():
    with enable_x64():
        got = joint_exp_log_normalizer(jnp.asarray(WORKED_X), WORKED_Q, 2.0, bounds=(0, 1))
    assert abs(float(got) - (-3.137969095175098)) < 1e-12


def _chi_square_sequences(
    x, qs, eps, dtype, draws=40_000, seed=0, bounds=(0.0, 1.0), tables=None, weights=None
):
    weights = brute_force(x, *bounds, qs, eps) if weights is None else weights
    total = sum(weights.values())
    if tables is None:
        tables = joint_exp_tables(jnp.asarray(x, dtype), qs, eps, bounds=bounds)
    keys = jax.random.split(jax.random.key(seed), draws)
    seqs = np.asarray(jax.jit(jax.vmap(lambda k: _sample_gaps(k, tables)))(keys))
    seen = {}
    for s in map(tuple, seqs):
        seen[s] = seen.get(s, 0) + 1
    assert all(weights.get(s, 0) > 0 for s in seen), "sampled a zero-probability sequence"
    expected = np.array([w / total * draws for w in weights.values() if w > 0])
    observed = np.array([seen.get(s, 0) for s, w in weights.items() if w > 0])
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1] * obs[:-1].sum() / exp[:-1].sum()
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("x64", [False, True])
def test_sampled_sequences_match_exact_probabilities(x64):
    with enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        assert _chi_square_sequences(WORKED_X, WORKED_Q, 2.0, dtype) > 1e-4
        x = [0.05, 0.3, 0.3, 0.35, 0.8, 1.5]  # a duplicate and a point clamped onto b
        assert _chi_square_sequences(x, [0.2, 0.7], 0.7, dtype, seed=3) > 1e-4


def test_repeat_factor_epsilon_zero():
    # X = [0.5], m = 2, epsilon = 0: P(0,0) = P(1,1) = 1/4, P(0,1) = 1/2 (1/3 each without 1/k!).
    tables = joint_exp_tables(jnp.asarray([0.5]), [0.3, 0.6], 0.0, bounds=(0, 1))
    keys = jax.random.split(jax.random.key(4), 20_000)
    seqs = np.asarray(jax.vmap(lambda k: _sample_gaps(k, tables))(keys))
    counts = [np.sum((seqs == s).all(axis=1)) for s in ([0, 0], [0, 1], [1, 1])]
    assert stats.chisquare(counts, [5000, 10000, 5000]).pvalue > 1e-4


@functools.partial(jax.jit, static_argnames="neighbors")
def _m1_pmfs(x, q, eps, neighbors):
    """JointExp's law of the one gap, P(i) ∝ alpha(1, i, 1) phi_2(n - i), and IndExp's."""
    _, log_width = sorted_gaps(x, -2.0, 2.0)
    logits = _gap_logits(log_width, q, eps, neighbors)
    tables = joint_exp_tables(x, jnp.stack([q]), eps, bounds=(-2, 2), neighbors=neighbors)
    n = x.size
    last = -tables.c * jnp.abs(n - jnp.arange(n + 1) - tables.nu[-1])
    return jax.nn.softmax(tables.log_total[0, : n + 1] + last), jax.nn.softmax(logits)


def test_m1_equals_ind_exp():
    rng = np.random.default_rng(5)
    with enable_x64():
        for neighbors in ("swap", "add_remove"):
            for n in (1, 4, 8):
                x = np.round(rng.uniform(-2.2, 2.2, n), 1)
                q, eps = float(rng.choice([0.0, 0.3, 0.5, 0.8, 1.0])), float(rng.uniform(0.1, 3))
                joint, ind = _m1_pmfs(jnp.asarray(x), jnp.asarray(q), eps, neighbors)
                np.testing.assert_allclose(joint, ind, atol=1e-12)


def test_ind_exp_pmf_spec_example():
    with enable_x64():
        _, log_width = sorted_gaps(jnp.asarray([0.3, -1.2, 0.7, 0.7, 2.0, -0.1]), -2.0, 2.0)
        pmf = jax.nn.softmax(_gap_logits(log_width, 0.4, 1.3))
    want = [0.117558, 0.309633, 0.215678, 0.189386, 0, 0.167745, 0]
    np.testing.assert_allclose(pmf, want, atol=1e-6)


def test_epsilon_zero_gives_sorted_uniforms():
    # joint_exp itself refuses epsilon = 0; its tables still describe the 0-DP law.
    m, lower, upper = 3, -2.0, 6.0
    x = jnp.asarray([0.0, 0.0, 1.0, 2.5, 5.0])
    with enable_x64():
        x64 = jnp.asarray(x, jnp.float64)
        lz = joint_exp_log_normalizer(x64, [0.2, 0.5, 0.9], 0.0, bounds=(lower, upper))
        assert abs(float(lz) - (m * math.log(upper - lower) - math.log(6))) < 1e-12
    tables = joint_exp_tables(x, [0.2, 0.5, 0.9], 0.0, bounds=(lower, upper))
    keys = jax.random.split(jax.random.key(6), 4000)
    out = jax.jit(jax.vmap(_sample_outputs, in_axes=(0, None)))(keys, tables)
    u = (np.asarray(out, np.float64) - lower) / (upper - lower)
    for j in range(m):
        assert stats.kstest(u[:, j], stats.beta(j + 1, m - j).cdf).pvalue > 1e-4


def test_empty_data_and_all_equal():
    keys = jax.random.split(jax.random.key(7), 2000)
    out = jax.vmap(lambda k: joint_exp(k, jnp.zeros(0), [0.25, 0.75], 1.0, bounds=(0, 1)))(keys)
    assert out.shape == (2000, 2) and np.all(np.diff(out, axis=1) >= 0)
    assert stats.kstest(np.asarray(out[:, 0], np.float64), stats.beta(1, 2).cdf).pvalue > 1e-4
    out = jax.vmap(lambda k: joint_exp(k, jnp.full(50, -1.0), [0.1, 0.5, 0.9], 1.0, bounds=(-1, 1)))(keys)
    assert np.all(np.isfinite(out)) and np.all(out > -1) and np.all(out <= 1)


def test_outputs_sorted_in_bounds_not_in_empty_gaps():
    x = jnp.asarray([-3.0, 0.5, 0.5, 0.5, 1.0, 2.0, 2.0, 9.0])
    out = jax.vmap(lambda k: joint_exp(k, x, [0.1, 0.4, 0.6, 0.9], 3.0, bounds=(-1, 4)))(
        jax.random.split(jax.random.key(8), 3000)
    )
    assert out.shape == (3000, 4)
    assert np.all(np.diff(out, axis=1) >= 0) and np.all(out >= -1) and np.all(out <= 4)


def test_invariances_same_key():
    rng = np.random.default_rng(9)
    x = rng.normal(0, 1, 40)
    key = jax.random.key(10)
    qs = [0.2, 0.5, 0.8]
    with enable_x64():
        base = joint_exp(key, jnp.asarray(x), qs, 1.0, bounds=(-3, 3))
        shuffled = joint_exp(key, jnp.asarray(rng.permutation(x)), qs, 1.0, bounds=(-3, 3))
        clamped = joint_exp(key, jnp.asarray(np.clip(x, -3, 3)), qs, 1.0, bounds=(-3, 3))
        affine = joint_exp(key, jnp.asarray(2 * x + 1), qs, 1.0, bounds=(-5, 7))
    np.testing.assert_array_equal(base, shuffled)
    np.testing.assert_array_equal(base, clamped)
    np.testing.assert_allclose(np.asarray(affine), 2 * np.asarray(base) + 1, atol=1e-9)


def test_scan_and_fft_agree_and_float32_scan_accurate():
    rng = np.random.default_rng(11)
    x = rng.normal(0, 5, 300)
    qs = np.linspace(0, 1, 9)[1:-1]

    def probs(tables):
        t = np.asarray(tables.log_total, np.float64)[:, : x.size + 1]
        p = np.exp(t - t.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    with enable_x64():
        ref = probs(joint_exp_tables(jnp.asarray(x), qs, 1.0, bounds=(-100, 100), method="scan"))
        fft = probs(joint_exp_tables(jnp.asarray(x), qs, 1.0, bounds=(-100, 100), method="fft"))
    scan32 = probs(joint_exp_tables(jnp.asarray(x, jnp.float32), qs, 1.0, bounds=(-100, 100)))
    assert 0.5 * np.abs(ref - fft).sum(axis=1).max() < 1e-10
    assert 0.5 * np.abs(ref - scan32).sum(axis=1).max() < 1e-5


def test_density_ratio_privacy_audit():
    rng = np.random.default_rng(12)
    worst = 0.0
    with enable_x64():
        for neighbors in ("swap", "add_remove"):
            for i in range(6):
                n, m = SHAPES[1 + i % 2]
                qs = np.sort(rng.choice(np.linspace(0.05, 0.95, 19), m, replace=False))
                eps = float(rng.uniform(0.2, 3))
                x = rng.uniform(-1.2, 1.2, n)
                if neighbors == "swap":
                    y = x.copy()
                    y[rng.integers(n)] = rng.uniform(-1.2, 1.2)
                else:
                    y = np.append(x, rng.uniform(-1.2, 1.2))
                c = eps / (2 * _joint_exp_sensitivity(qs, neighbors))
                lz_x = float(
                    joint_exp_log_normalizer(jnp.asarray(x), qs, eps, bounds=(-1, 1), neighbors=neighbors)
                )
                lz_y = float(
                    joint_exp_log_normalizer(jnp.asarray(y), qs, eps, bounds=(-1, 1), neighbors=neighbors)
                )
                for o in np.sort(rng.uniform(-1, 1, (40, m)), axis=1):
                    log_fx = c * utility(x, -1, 1, qs, o) - lz_x
                    log_fy = c * utility(y, -1, 1, qs, o) - lz_y
                    worst = max(worst, abs(log_fx - log_fy) / eps)
    assert worst <= 1 + 1e-9


def test_guarantee():
    assert joint_exp_guarantee(1.5) == RangeBounded(1.5)  # one exponential mechanism


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"bounds": (1.0, 1.0)}, "a < b"),
        ({"bounds": (2.0, 1.0)}, "a < b"),
        ({"qs": [0.5, 0.2]}, "increasing"),
        ({"qs": [0.5, 0.5]}, "increasing"),
        ({"qs": [0.5, 1.2]}, r"\[0, 1\]"),
        ({"x": [0.1, float("nan")]}, "NaN"),
        ({"x": [[0.1]]}, "rank"),
        ({"neighbors": "bounded"}, "neighbors"),
        ({"method": "dense"}, "method"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"x": [0.1, 0.4], "qs": [0.5], "epsilon": 1.0, "bounds": (0.0, 1.0)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        joint_exp(
            jax.random.key(0),
            args.pop("x"),
            args.pop("qs"),
            args.pop("epsilon"),
            **args,
        )


# --- The vectorised kernels at sizes where they block and recurse (n in the hundreds to thousands) ---


def test_log_filter_matches_the_sequential_recurrence():
    rng = np.random.default_rng(20)
    with enable_x64():
        for size in (1, 15, 16, 17, 300, 5000):
            decay = rng.choice([-0.7, 0.4, -np.inf], size=(2, size), p=[0.6, 0.3, 0.1])
            values = np.where(rng.random((2, size)) < 0.2, -np.inf, 5 * rng.normal(size=(2, size)))
            want = np.empty_like(values)
            for r in range(2):
                acc = -np.inf
                for k in range(size):
                    acc = np.logaddexp(acc + decay[r, k], values[r, k])
                    want[r, k] = acc
            got = np.asarray(_log_filter(jnp.asarray(decay), jnp.asarray(values)))
            np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
            np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=0, atol=1e-10)


def test_remainder_by_a_traced_length_is_exact():
    rng = np.random.default_rng(27)
    info = np.iinfo(np.int32)
    values = np.concatenate(
        [rng.integers(info.min, info.max, 20_000), np.arange(-300, 300), [info.min, info.max, info.max - 1]]
    ).astype(np.int32)
    compiled = jax.jit(remainder)
    for length in (1, 2, 3, 16, 31, 32, 1001, 2**20 + 7, 2**30 + 3):
        want = np.mod(values.astype(np.int64), length)
        np.testing.assert_array_equal(np.asarray(compiled(jnp.asarray(values), jnp.int32(length))), want)


def dense_toeplitz(x, c, nu):
    i = np.arange(x.size)
    kernel = np.where(i[None, :] < i[:, None], -c * np.abs(i[:, None] - i[None, :] - nu), -np.inf)
    return logsumexp(kernel + x[None, :], axis=1)


@pytest.mark.parametrize("size", [1, 2, 17, 300, 2500])
def test_toeplitz_scan_matches_dense_log_sum_exp(size):
    rng = np.random.default_rng(size)
    step = jax.jit(toeplitz_scan)  # c and nu traced: one compilation per size and dtype
    for nu in (0.0, 0.4, 1.0, 2.5, size / 3, size - 0.5, size + 2.0):
        for c in (0.05, 1.5):
            x = np.where(rng.random(size) < 0.15, -np.inf, 4 * rng.normal(size=size))
            want = dense_toeplitz(x, c, nu)
            finite = np.isfinite(want)
            with enable_x64():
                got = np.asarray(step(jnp.asarray(x), c, nu))
            np.testing.assert_array_equal(np.isfinite(got), finite)
            np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=1e-9)
            got32 = np.asarray(step(jnp.asarray(x, jnp.float32), c, nu), np.float64)
            near = finite & (want > want[finite].max(initial=0) - 30)
            np.testing.assert_allclose(got32[near], want[near], rtol=0, atol=2e-3)


@pytest.mark.parametrize("size", [1, 17, 300, 2500])
def test_toeplitz_linear_matches_dense_log_sum_exp(size):
    rng = np.random.default_rng(size + 1)
    step = jax.jit(toeplitz_linear)
    certificate = jax.jit(lambda x, c, nu: _toeplitz_linear_certified(x, c, nu)[1])
    for nu in (0.0, 0.4, 2.5, 40.0, 70.5, size / 3, size - 0.5, size + 2.0):
        for c in (0.05, 1.5, 40.0):
            x = np.where(rng.random(size) < 0.15, -np.inf, 4 * rng.normal(size=size))
            want = dense_toeplitz(x, c, nu)
            finite = np.isfinite(want)
            with enable_x64():
                got = np.asarray(step(jnp.asarray(x), c, nu))
                if c < 40:  # the linear-space path itself (not the scan fallback) is what is checked
                    assert certificate(jnp.asarray(x), c, nu)
            np.testing.assert_array_equal(np.isfinite(got), finite)
            np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=1e-9)
            got32 = np.asarray(step(jnp.asarray(x, jnp.float32), c, nu), np.float64)
            np.testing.assert_array_equal(np.isfinite(got32), finite)
            near = finite & (want > want[finite].max(initial=0) - 30)
            np.testing.assert_allclose(got32[near], want[near], rtol=0, atol=2e-3)
            if c == 0.05:
                assert certificate(jnp.asarray(x, jnp.float32), c, nu)


@pytest.mark.parametrize("c, certifying", [(1.5, 16), (3.0, None)])
def test_toeplitz_linear_refuses_to_certify_underflow(c, certifying):
    # One finite input and a steep kernel: y[i] = -c (i - 1/2). The explicit kernel block next to a
    # block of B gaps reaches gaps 1 to 2B - 1, so its entries span c (2B - 2) nats, which float32
    # holds in one frame only below ~66 nats: with c = 1.5 blocks of 32 (93 nats) must refuse and
    # blocks of 16 (45) certify; with c = 3 both refuse and the scan runs. The result must be exact
    # either way; float64 holds the range and certifies at once.
    x = np.full(64, -np.inf)
    x[0] = 0.0
    want = dense_toeplitz(x, c, 0.5)
    x32 = jnp.asarray(x, jnp.float32)
    step = jax.jit(toeplitz_linear)  # c traced: one compilation per dtype, not one per eager operation
    certified = jax.jit(lambda x, c, block: _toeplitz_linear_certified(x, c, 0.5, block)[1], static_argnums=2)
    for block in LINEAR_BLOCKS:
        assert bool(certified(x32, c, block)) == (block == certifying)
    got32 = np.asarray(step(x32, c, 0.5), np.float64)
    np.testing.assert_allclose(got32[1:], want[1:], rtol=1e-6)
    with enable_x64():
        assert certified(jnp.asarray(x), c, LINEAR_BLOCKS[0])
        got = np.asarray(step(jnp.asarray(x), c, 0.5))
    assert got[0] == -np.inf
    np.testing.assert_allclose(got[1:], want[1:], rtol=1e-12)


def dense_alphahat(x, lower, upper, qs, epsilon):
    """Alg. 1's forward table with the explicit run-length axis, exact LSE Toeplitz (float64)."""
    x = np.sort(np.clip(x, lower, upper))
    n, m = x.size, len(qs)
    with np.errstate(divide="ignore"):
        log_tau = np.log(np.diff(np.concatenate([[lower], x, [upper]])))
    c = epsilon / 4.0
    nu = np.diff(np.concatenate([[0.0], qs, [1.0]])) * n
    gaps = np.arange(n + 1)
    table = np.full((m, n + 1, m), -np.inf)
    table[0, :, 0] = log_tau - c * np.abs(gaps - nu[0])
    for j in range(1, m):
        table[j, :, 0] = log_tau + dense_toeplitz(logsumexp(table[j - 1], axis=1), c, nu[j])
        for k in range(1, j + 1):
            table[j, :, k] = log_tau - c * nu[j] + table[j - 1, :, k - 1] - np.log(k + 1)
    return logsumexp(table, axis=2), c, nu


def test_forward_tables_match_dense_reference_with_runs():
    rng = np.random.default_rng(21)
    x = np.round(rng.normal(0, 1, 400), 2)  # many ties (zero-width gaps)
    qs = [0.1, 0.11, 0.5, 0.52, 0.9]  # close levels: runs of equal gaps carry mass
    with enable_x64():
        tables = joint_exp_tables(jnp.asarray(x), qs, 0.3, bounds=(-5, 5))
    want, c, nu = dense_alphahat(x, -5.0, 5.0, qs, 0.3)
    got = np.asarray(tables.log_total)[:, : x.size + 1] + np.asarray(tables.offsets)[:, None]
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], want[finite], rtol=0, atol=1e-8)
    last = -c * np.abs(x.size - np.arange(x.size + 1) - nu[-1])
    with enable_x64():
        lz = joint_exp_log_normalizer(jnp.asarray(x), qs, 0.3, bounds=(-5, 5))
    assert abs(float(lz) - logsumexp(want[-1] + last)) < 1e-8


@pytest.mark.parametrize(("x64", "epsilon"), [(False, 0.3), (False, 6.0), (False, 40.0), (True, 0.3)])
def test_block_masses_are_the_log_sum_exp_of_their_blocks(x64, epsilon):
    """block_left / block_right are LSE_t log_total[j, bB + t] +- c t for every row, whether they come
    from the linear step's block summaries with blocks of 32 (epsilon 0.3) or of 16 (epsilon 6, where
    float32 certifies only the smaller blocks on these data) or, when float32 certifies neither
    (epsilon 40, c = 10: ~300 nats per block of 16), from the fallback; m = 1 has only a last row."""
    rng = np.random.default_rng(24)
    x = rng.normal(0, 1, 3000)
    for qs in ([0.5], [0.2, 0.5, 0.8]):
        with enable_x64(x64):
            tables = joint_exp_tables(
                jnp.asarray(x, jnp.float64 if x64 else jnp.float32), qs, epsilon, bounds=(-4, 4)
            )
        assert_block_masses_match_rows(tables, x.size, x64)


def assert_block_masses_match_rows(tables, n, x64):
    """The sampler's block masses are LSE_t log_total[j, bB + t] +- c t of the rows it samples."""
    block = sampling_block(n + 1)
    total = np.asarray(tables.log_total, np.float64).reshape(tables.log_total.shape[0], -1, block)
    ramp = float(tables.c) * np.arange(block)
    for got, sign in ((tables.block_left, 1), (tables.block_right, -1)):
        want = logsumexp(total + sign * ramp, axis=2)
        got = np.asarray(got, np.float64)
        np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
        finite = np.isfinite(want)
        np.testing.assert_allclose(
            got[finite], want[finite], rtol=1e-13 if x64 else 1e-6, atol=1e-12 if x64 else 1e-4
        )


def test_block_sampler_draws_the_exact_conditional():
    """draw_gap (block masses + one block) against the exact pmf, at the kink, at block edges."""
    rng = np.random.default_rng(22)
    x = rng.normal(0, 1, 500)
    tables = joint_exp_tables(jnp.asarray(x, jnp.float32), [0.2, 0.5, 0.8], 0.05, bounds=(-4, 4))
    size = x.size + 1
    block = sampling_block(size)
    assert tables.log_total.shape[1] % block == 0
    assert np.all(np.asarray(tables.log_total)[:, size:] == -np.inf)
    draw = jax.jit(jax.vmap(_draw_gap, in_axes=(0, None, None, None, None)))
    keys = jax.random.split(jax.random.key(23), 20_000)
    cases = ((2, 500, True), (1, 3 * block, False), (1, 3 * block - 1, True), (0, 140, False))
    for row, hi, inclusive in cases:
        logits = np.asarray(tables.log_total[row, :size], np.float64) - float(tables.c) * np.abs(
            hi - np.arange(size) - float(tables.nu[row + 1])
        )
        logits[np.arange(size) > hi if inclusive else np.arange(size) >= hi] = -np.inf
        pmf = np.exp(logits - logsumexp(logits))
        counts = np.bincount(np.asarray(draw(keys, tables, row, hi, inclusive)), minlength=size)
        assert counts[pmf == 0].sum() == 0
        expected = pmf * keys.shape[0]
        big = expected >= 5
        obs = np.append(counts[big], counts[~big].sum())
        exp = np.append(expected[big], expected[~big].sum())
        if exp[-1] < 5:
            obs, exp = obs[:-1], exp[:-1] * obs[:-1].sum() / exp[:-1].sum()
        assert stats.chisquare(obs, exp).pvalue > 1e-6, (row, hi, inclusive)


def test_vmapped_releases_equal_single_releases():
    x = jnp.asarray(np.random.default_rng(24).normal(0, 5, 3000), jnp.float32)
    qs = np.arange(1, 8) / 8
    keys = jax.random.split(jax.random.key(25), 5)
    release = jax.jit(lambda k, x: joint_exp(k, x, qs, 1.0, bounds=(-100, 100)))
    batched = jax.vmap(release, in_axes=(0, None))(keys, x)
    for key, row in zip(keys, batched, strict=True):
        np.testing.assert_array_equal(release(key, x), row)


@pytest.mark.parametrize("x64", [False, True])
def test_sort_floats_equals_numpy_sort(x64):
    rng = np.random.default_rng(26)
    values = np.concatenate([rng.normal(0, 1e3, 5000), [0.0, -0.0, 1e-40, -1e-40, 3.0, 3.0, -np.inf, np.inf]])
    with enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        x = jnp.asarray(rng.permutation(values), dtype)
        np.testing.assert_array_equal(np.asarray(_sort_floats(x)), np.sort(np.asarray(x)))


def maximal_runs(seq):
    """``(j, l)`` (0-based rows) of every maximal run of ``k >= 2`` equal gaps in ``seq``."""
    runs, start = [], 0
    for j in range(1, len(seq) + 1):
        if j == len(seq) or seq[j] != seq[start]:
            if j - 1 > start:
                runs.append((j - 1, start))
            start = j
    return runs


def test_omitted_runs_give_the_restricted_law_within_the_certified_bound():
    """Forced omission (no restart): the tables are exactly the mechanism restricted to sequences
    without the omitted runs, and the left-out probability is below ``exp(log_omitted)``."""
    rng = np.random.default_rng(30)
    omitted_any = False
    with enable_x64():
        for case in range(8):
            x, qs, eps = random_case(rng, 1 + (case // 3) % 2)  # both non-empty shapes at each margin
            edges, log_width = sorted_gaps(jnp.asarray(x, jnp.float64), -1.0, 1.0)
            tables = FORWARD_TABLES(
                edges,
                log_width,
                tuple(qs),
                eps / 4,
                "scan",
                margin_nats=-40.0 * (case % 3),
                restart_above=np.inf,
            )
            kept = np.isfinite(np.asarray(tables.run_shift))
            weights = brute_force(x, -1, 1, qs, eps)
            restricted = {s: w for s, w in weights.items() if all(kept[j, l] for j, l in maximal_runs(s))}
            omitted_any |= len(restricted) < len(weights)
            z, z_kept = sum(weights.values()), sum(restricted.values())
            assert abs(float(log_normalizer(tables)) - math.log(z_kept)) < 1e-9
            assert (z - z_kept) / z <= math.exp(float(tables.log_omitted)) * (1 + 1e-9) + 1e-300
            if case == 1:
                assert (
                    _chi_square_sequences(
                        x, qs, eps, jnp.float64, bounds=(-1.0, 1.0), tables=tables, weights=restricted
                    )
                    > 1e-4
                )
    assert omitted_any


def test_failed_certificate_restarts_without_omission():
    x = np.zeros(5)  # all points equal: runs in the two wide end gaps carry the mass
    qs = [0.3, 0.5, 0.6]
    with enable_x64():
        edges, log_width = sorted_gaps(jnp.asarray(x), -1.0, 1.0)
        tables = FORWARD_TABLES(edges, log_width, tuple(qs), 0.25, "scan", margin_nats=-100.0)
        lz = float(log_normalizer(tables))
        unchecked = FORWARD_TABLES(
            edges, log_width, tuple(qs), 0.25, "scan", margin_nats=-100.0, restart_above=np.inf
        )
    assert float(unchecked.log_omitted) > math.log(OMITTED_MASS)  # so the first pass failed its certificate
    assert float(tables.log_omitted) == -np.inf
    assert np.isfinite(np.asarray(tables.run_shift)[np.tril_indices(3)]).all()
    assert abs(lz - math.log(sum(brute_force(x, -1, 1, qs, 1.0).values()))) < 1e-9


@pytest.mark.parametrize("x64", [False, True])
def test_certified_omission_at_large_n_matches_the_dense_reference(x64):
    """n / m >> 1 / c: every run is omitted, the bound is certified, and the normaliser and every
    table entry within 200 nats of its row maximum agree with the exact dense Alg. 1."""
    x = np.random.default_rng(31).normal(0, 1, 3000)
    qs = [0.2, 0.4, 0.6, 0.8]
    want, c, nu = dense_alphahat(x, -5.0, 5.0, qs, 8.0)
    last = -c * np.abs(x.size - np.arange(x.size + 1) - nu[-1])
    with enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        tables = joint_exp_tables(jnp.asarray(x, dtype), qs, 8.0, bounds=(-5, 5))
        lz = float(log_normalizer(tables))
    assert not np.isfinite(np.asarray(tables.run_shift)[np.tril_indices(4, -1)]).any()
    assert float(tables.log_omitted) <= math.log(OMITTED_MASS)
    got = (
        np.asarray(tables.log_total, np.float64)[:, : x.size + 1]
        + np.asarray(tables.offsets, np.float64)[:, None]
    )
    near = want > want.max(axis=1, keepdims=True) - 200
    tol = 1e-8 if x64 else 2e-3
    np.testing.assert_allclose(got[near], want[near], rtol=0, atol=tol * np.abs(want[near]).max())
    assert abs(lz - logsumexp(want[-1] + last)) < tol * abs(lz)




@pytest.mark.parametrize(
    ("x64", "epsilon", "span", "windowed"),
    [
        (True, 8.0, 512, [True] * 4),
        (False, 3.0, 512, [True] * 4),
        (False, 3.0, 256, [True, False, False, False]),
        (False, 8.0, 512, [False] * 4),
    ],
)
def test_windowed_rows_match_the_dense_reference(x64, epsilon, span, windowed):
    """Rows kept in windows (forced here: by default only rows of at least 32768 gaps are): a
    windowed row is ``-inf`` outside its window, the normaliser and every entry within 40 nats of
    its row maximum agree with the exact dense Alg. 1, the left-out mass is certified, and the
    sampler's block masses are those of the windowed rows. With 256 gaps at epsilon 3 only row 0
    fits, and row 1 is computed whole from it. At epsilon 8 (c = 2) the explicit kernel blocks of
    32 gaps span 124 nats: float64 certifies them, float32 (66 nats) does not, so there no row is
    windowed."""
    n, qs = 3000, (0.2, 0.4, 0.6, 0.8)
    x = np.random.default_rng(31).normal(0, 1, n)
    want, c, nu = dense_alphahat(x, -5.0, 5.0, qs, epsilon)
    last = -c * np.abs(n - np.arange(n + 1) - nu[-1])
    with enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        edges, log_width = sorted_gaps(jnp.asarray(x, dtype), -5.0, 5.0)
        tables = FORWARD_TABLES(edges, log_width, jnp.asarray(qs, dtype), c, "linear", span=span)
        lz = float(log_normalizer(tables))
    got = np.asarray(tables.log_total, np.float64)
    finite = np.isfinite(got).sum(axis=1)
    assert (finite <= span).tolist() == windowed
    assert float(tables.log_omitted) <= math.log(OMITTED_MASS)
    got = got[:, : n + 1] + np.asarray(tables.offsets, np.float64)[:, None]
    # A window holds every entry within the margin (> 50 nats) of its row's maximum; the left-out
    # mass changes the entries of later rows by at most ~e^-30 of themselves within 40 nats of theirs.
    near = want > want.max(axis=1, keepdims=True) - 40
    tol = 1e-8 if x64 else 2e-3
    np.testing.assert_allclose(got[near], want[near], rtol=0, atol=tol * np.abs(want[near]).max())
    assert abs(lz - logsumexp(want[-1] + last)) < tol * abs(lz)
    assert_block_masses_match_rows(tables, n, x64)


@pytest.mark.parametrize("span", [-32, 100])
def test_window_span_must_be_a_multiple_of_the_block(span):
    edges, log_width = sorted_gaps(jnp.zeros(10), -1.0, 1.0)
    with pytest.raises(ValueError, match="multiple of 32"):
        forward_tables(edges, log_width, jnp.asarray([0.5]), 1.0, "linear", span=span)


def test_windowed_pass_restarts_whole_and_batches():
    """Forced omission (``margin_nats=-100``) takes every window even where it leaves out real mass
    (c = 0.25: a window of 512 gaps holds about 64 nats either side); the certificate fails and the
    pass restarts with whole rows and nothing left out, as a pass that omits nothing computes. Under
    ``vmap`` over datasets (every branch computed, then selected; c = 2, where the default margins
    take the windows) the tables are the single ones."""
    n, qs = 3000, jnp.asarray([0.2, 0.4, 0.6, 0.8])
    rng = np.random.default_rng(35)

    def tables(x, span, c=0.25, **options):
        edges, log_width = sorted_gaps(x, -5.0, 5.0)
        return FORWARD_TABLES(edges, log_width, qs, c, "linear", span=span, **options)

    with enable_x64():
        x = jnp.asarray(rng.normal(0, 1, n))
        first_pass = tables(x, 512, margin_nats=-100.0, restart_above=np.inf)
        restarted = tables(x, 512, margin_nats=-100.0)
        whole = tables(x, 0, margin_nats=np.inf)
        data = jnp.stack([x, jnp.asarray(rng.standard_t(3, n))])
        batched = jax.vmap(lambda x: tables(x, 512, 2.0))(data)
        single = [tables(x, 512, 2.0) for x in data]
    assert float(first_pass.log_omitted) > math.log(OMITTED_MASS)
    assert (np.isfinite(np.asarray(first_pass.log_total)).sum(axis=1) <= 512).all()
    assert float(restarted.log_omitted) == -np.inf
    for got, want in zip(restarted, whole, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=0)
    for i, want in enumerate(single):
        assert (np.isfinite(np.asarray(want.log_total)).sum(axis=1) <= 512).all()
        for got_field, want_field in zip(batched, want, strict=True):
            np.testing.assert_allclose(np.asarray(got_field[i]), np.asarray(want_field), rtol=1e-12, atol=0)


def test_tied_data_keeps_its_runs_and_a_forced_restart_works_under_vmap():
    """All points equal: runs are the only way to place three quantiles in the two gaps of positive
    width, so the default pass keeps them. Forced omission (``margin_nats=-100``) fails the
    certificate and restarts exactly, also inside ``vmap`` over datasets next to one whose omission
    is certified."""
    n, qs, eps = 2000, (0.25, 0.5, 0.75), 8.0
    c = eps / 4
    nu = np.diff(np.concatenate([[0.0], qs, [1.0]])) * n
    want = -np.inf  # k quantiles in gap 0 (width 1) and 3 - k in gap n (width 1)
    for k in range(4):
        path = [0] * (k + 1) + [n] * (4 - k)
        utility = -sum(abs(path[j + 1] - path[j] - nu[j]) for j in range(4))
        want = np.logaddexp(want, c * utility - math.lgamma(k + 1) - math.lgamma(4 - k))

    def forced(x, restart_above=OMITTED_MASS):
        edges, log_width = sorted_gaps(x, -1.0, 1.0)
        return FORWARD_TABLES(
            edges, log_width, qs, c, "scan", margin_nats=-100.0, restart_above=restart_above
        )

    with enable_x64():
        data = jnp.stack([jnp.zeros(n), jnp.asarray(np.random.default_rng(32).normal(0, 0.3, n))])
        default = joint_exp_tables(data[0], qs, eps, bounds=(-1, 1))
        batched = jax.vmap(forced)(data)
        got = np.asarray(jax.vmap(log_normalizer)(batched))
        single = [float(log_normalizer(forced(x))) for x in data]
        first_pass = forced(data[0], restart_above=np.inf)
        default_lz = float(log_normalizer(default))
    assert float(default.log_omitted) == -np.inf and abs(default_lz - want) < 1e-9
    assert float(first_pass.log_omitted) > math.log(OMITTED_MASS)  # so the batched pass restarted
    assert float(batched.log_omitted[0]) == -np.inf and abs(got[0] - want) < 1e-9
    assert -np.inf < float(batched.log_omitted[1]) <= math.log(OMITTED_MASS)
    np.testing.assert_allclose(got, single, rtol=0, atol=1e-9)


def test_traced_epsilon_and_levels_cross_the_omission_certificate():
    """One compiled call over epsilon and the levels gives what separate calls give, where the
    certified omission leaves every run out (large epsilon) and where it keeps them (small)."""
    x = jnp.asarray(np.random.default_rng(33).normal(0, 1, 1000), jnp.float32)
    levels = np.array([[0.2, 0.4, 0.6, 0.8], [0.2, 0.4, 0.41, 0.8]])
    epsilons = np.array([8.0, 0.05])
    key = jax.random.key(34)

    def release(qs, eps):
        return joint_exp(key, x, qs, eps, bounds=(-5, 5)), joint_exp_tables(x, qs, eps, bounds=(-5, 5))

    out, tables = jax.jit(jax.vmap(release))(jnp.asarray(levels, jnp.float32), jnp.asarray(epsilons))
    omitted = ~np.isfinite(np.asarray(tables.run_shift)[:, 1, 0])
    assert omitted.tolist() == [True, False]
    for i in range(2):
        want, want_tables = release(levels[i], float(epsilons[i]))
        assert_close_ulp(out[i], want)
        np.testing.assert_array_equal(np.isfinite(tables.run_shift[i]), np.isfinite(want_tables.run_shift))
        # The normaliser sums m row offsets: batched and single passes agree to rounding.
        got_lz = float(log_normalizer(jax.tree.map(lambda t, i=i: t[i], tables)))
        assert abs(got_lz - float(log_normalizer(want_tables))) <= 1e-6 * abs(got_lz)
