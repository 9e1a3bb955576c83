"""``method="auto"`` in the bounded quantile mechanisms (EMQ, IndExp, AppIndExp) and the traced path of
UQE: the heap sampler of the gap (:mod:`dpjax._src.quantiles.em_sampler`) has the literal Gumbel-max's law
(exact enumeration of the heap on tiny inputs with ties and zero-width gaps, a chi-square at 10^6 draws
on 10^5 values), ``"auto"`` picks it exactly when releases share the data, traced parameters and bad
input behave, and UQE's prefix log-masses equal ``cumlogsumexp`` (traced data: the closed-over
release, bit for bit)."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import kernel_names
from scipy import special, stats

from dpjax import quantiles
from dpjax._src.quantiles import em_sampler
from dpjax._src.quantiles.exp_mech import _gap_logits
from dpjax._src.quantiles.intervals import sorted_gaps
from dpjax._src.svt.monotone_halting import _cumlogsumexp_nondecreasing

KEYS = jax.random.split(jax.random.key(7), 4)
TINY = np.asarray([0.3, -1.2, 0.7, 0.7, 2.0, -0.1], np.float32)  # a tie: a zero-width gap
CLAMPED = np.asarray([-3.0, -2.0, 0.5, 0.5, 0.5, 2.0, 5.0], np.float32)  # onto both bounds, a triple tie


def _heap_pmf(tree) -> np.ndarray:
    """Exact law of one heap draw, by enumeration: the product of the split probabilities on each
    leaf's path (``P(left) = exp(-split)``), in float64."""
    split = np.asarray(tree.split, np.float64)
    leaves = split.shape[0]
    mass = np.ones(1)
    for level in range(leaves.bit_length() - 1):
        nodes = np.arange(2**level, 2 ** (level + 1))
        left = np.exp(-split[nodes])
        mass = np.stack([mass * left, mass * (1 - left)], axis=1).reshape(-1)
    return mass[: tree.size]


@pytest.mark.parametrize("x64_on", [False, True])
@pytest.mark.parametrize(
    "data, bounds, qs, epsilon, neighbors",
    [
        (TINY, (-2.0, 2.0), (0.4,), 1.3, "swap"),
        (CLAMPED, (-2.0, 2.0), (0.1, 0.5, 0.9), 3.0, "add_remove"),
        (np.zeros(0, np.float32), (0.0, 1.0), (0.5,), 1.0, "swap"),
        (np.full(9, 1.5, np.float32), (1.0, 4.0), (0.3, 0.7), 0.2, "swap"),
    ],
)
def test_heap_law_is_the_gumbel_max_law_exactly(data, bounds, qs, epsilon, neighbors, x64_on):
    """The literal kernel's law is softmax(logits) (Gumbel-max); the heap's enumerated law equals it to
    the rounding of its log-sums, and zero-width gaps get probability exactly 0."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64_on)
    try:
        dtype = jnp.float64 if x64_on else jnp.float32
        edges, log_width = sorted_gaps(jnp.asarray(data, dtype), *bounds)
        logits = _gap_logits(log_width, jnp.asarray(qs, dtype), epsilon, neighbors)
        for row in np.asarray(logits):
            pmf = _heap_pmf(em_sampler.em_tree(jnp.asarray(row)))
            want = special.softmax(row.astype(np.float64))
            np.testing.assert_array_equal(pmf == 0, want == 0)
            np.testing.assert_allclose(pmf, want, rtol=1e-12 if x64_on else 2e-5, atol=0)
        assert np.any(np.diff(np.asarray(edges)) == 0) == (data.size > 1)
    finally:
        jax.config.update("jax_enable_x64", previous)


def _gap_index(values, edges) -> np.ndarray:
    """The gap of each released value (a value on an edge counts in the gap to its left)."""
    return np.clip(np.searchsorted(edges, values, side="left") - 1, 0, edges.size - 2)


def _pooled_chisquare(counts, pmf, least: float = 50.0) -> float:
    """Chi-square p-value of ``counts`` against ``pmf`` with neighbouring cells pooled until each
    expects at least ``least`` draws (the mass lies in a few hundred of 10^5 gaps)."""
    expected = pmf * counts.sum()
    edges = np.searchsorted(np.cumsum(expected), np.arange(least, expected.sum(), least))
    cells = np.split(np.arange(expected.size), np.unique(edges))
    observed = np.asarray([counts[c].sum() for c in cells])
    wanted = np.asarray([expected[c].sum() for c in cells])
    if wanted[-1] < least:  # fold the last, short cell into the one before
        observed[-2] += observed[-1]
        wanted[-2] += wanted[-1]
        observed, wanted = observed[:-1], wanted[:-1]
    return stats.chisquare(observed, wanted * observed.sum() / wanted.sum()).pvalue


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
def test_auto_over_a_million_keys_draws_the_literal_law_on_1e5_values():
    """EMQ's default under ``jit(vmap)`` over 10^6 keys (the heap sampler, one compiled call) on 10^5
    lognormal values rounded to 3 decimals (many ties: zero-width gaps), gap frequencies against the
    literal kernel's law softmax(logits) computed in float64."""
    x = np.round(np.random.default_rng(3).lognormal(0.0, 1.0, 10**5), 3).astype(np.float32)
    bounds, q, epsilon, draws = (0.0, 50.0), 0.5, 0.5, 10**6
    release = jax.jit(
        jax.vmap(lambda k, x: quantiles.emq(k, x, q, epsilon, bounds=bounds), in_axes=(0, None))
    )
    values = np.asarray(release(jax.random.split(jax.random.key(11), draws), x))
    edges = np.concatenate([[bounds[0]], np.sort(np.clip(x, *bounds)), [bounds[1]]]).astype(np.float64)
    width = np.diff(edges)
    with np.errstate(divide="ignore"):
        logits = np.log(width) - epsilon / 2 * np.abs(np.arange(x.size + 1) - q * x.size)
    pmf = special.softmax(logits)
    counts = np.bincount(_gap_index(values, edges), minlength=x.size + 1)
    assert np.all((values >= bounds[0]) & (values <= bounds[1]))
    assert (width == 0).sum() > 10**4  # the ties are there
    assert _pooled_chisquare(counts, pmf) > 1e-4


@functools.cache
def _over_keys(name: str, method: str):
    """``jit(vmap over keys)`` of a bounded quantile mechanism, data and parameters as arguments."""
    calls = {
        "emq": lambda k, x, e: quantiles.emq(k, x, 0.4, e, bounds=(-2, 2), method=method),
        "ind_exp": lambda k, x, e: quantiles.ind_exp(k, x, (0.2, 0.8), e, bounds=(-2, 2), method=method),
        "app_ind_exp": lambda k, x, e: quantiles.app_ind_exp(
            k, x, (0.2, 0.5, 0.8), e, bounds=(-2, 2), method=method
        ),
    }
    return jax.jit(jax.vmap(calls[name], in_axes=(0, None, None)))


@pytest.mark.parametrize("name", ["emq", "ind_exp", "app_ind_exp"])
def test_auto_is_literal_alone_and_the_heap_over_keys_bit_for_bit(name):
    release = _over_keys(name, "auto")
    names = kernel_names(jax.make_jaxpr(release)(KEYS, TINY, 1.0))
    assert "_tree_releases" in names and "_literal_releases" not in names
    chex.assert_trees_all_equal(release(KEYS, TINY, 1.0), _over_keys(name, "tree")(KEYS, TINY, 1.0))
    one = getattr(quantiles, name)
    kwargs = {"q": 0.4} if name == "emq" else {"qs": (0.2, 0.8)}
    eager = one(KEYS[0], TINY, epsilon=1.0, bounds=(-2, 2), **kwargs)
    literal = one(KEYS[0], TINY, epsilon=1.0, bounds=(-2, 2), method="literal", **kwargs)
    chex.assert_trees_all_equal(eager, literal)
    alone = jax.make_jaxpr(lambda k: one(k, TINY, epsilon=1.0, bounds=(-2, 2), **kwargs))(KEYS[0])
    names = kernel_names(alone)
    assert "_literal_releases" in names and "_tree_releases" not in names  # one release, under jit


def test_auto_follows_what_is_shared_and_traced_parameters():
    """The study runner's shape (vmap over epsilon of vmap over keys, epsilon traced) runs the heap,
    once per epsilon, and equals the named method; keys zipped with datasets run the literal kernel;
    an invalid traced epsilon marks its row NaN and leaves the others; invalid traced q, bounds or
    NaN data mark the heap path's output NaN."""
    at = lambda k, x, e, q, lo: quantiles.emq(k, x, q, e, bounds=jnp.stack([lo, 2.0]))  # noqa: E731
    runner = jax.jit(jax.vmap(lambda e: jax.vmap(lambda k: at(k, TINY, e, 0.4, -2.0))(KEYS)))
    epsilons = jnp.asarray([0.5, -1.0, 2.0])
    assert "_tree_releases" in kernel_names(jax.make_jaxpr(runner)(epsilons))
    grid = np.asarray(runner(epsilons))
    assert np.isnan(grid[1]).all() and np.isfinite(grid[[0, 2]]).all()
    named = jax.jit(jax.vmap(
        lambda k, e, q, lo: quantiles.emq(k, TINY, q, e, bounds=jnp.stack([lo, 2.0]), method="tree"),
        in_axes=(0, None, None, None),
    ))
    np.testing.assert_array_max_ulp(grid[2], named(KEYS, 2.0, 0.4, -2.0), maxulp=4)
    traced = jax.jit(jax.vmap(at, in_axes=(0, None, None, None, None)))
    assert np.isnan(np.asarray(traced(KEYS, TINY, 1.0, 1.5, -2.0))).all()  # q outside [0, 1]
    assert np.isnan(np.asarray(traced(KEYS, TINY, 1.0, 0.4, 3.0))).all()  # lower > upper
    assert np.isnan(np.asarray(traced(KEYS, np.where(TINY > 1, np.nan, TINY), 1.0, 0.4, -2.0))).all()
    assert np.isfinite(np.asarray(traced(KEYS, TINY, 1.0, 0.4, -2.0))).all()
    zipped = jax.vmap(lambda k, x: at(k, x, 1.0, 0.4, -2.0))
    names = kernel_names(jax.make_jaxpr(zipped)(KEYS, jnp.stack([TINY] * 4)))
    assert "_literal_releases" in names and "_tree_releases" not in names


def test_auto_is_exact_in_law_in_x64(x64):
    """The heap path in float64 on tiny data with a tie: gap frequencies against the exact pmf."""
    x = jnp.asarray(TINY, jnp.float64)
    release = jax.jit(jax.vmap(lambda k: quantiles.emq(k, x, 0.4, 1.3, bounds=(-2.0, 2.0))))
    values = np.asarray(release(jax.random.split(jax.random.key(5), 50_000)))
    assert values.dtype == np.float64
    edges, log_width = sorted_gaps(x, -2.0, 2.0)
    pmf = special.softmax(np.asarray(_gap_logits(log_width, 0.4, 1.3)))
    counts = np.bincount(_gap_index(values, np.asarray(edges)), minlength=pmf.size)
    assert counts[pmf == 0].sum() == 0
    keep = pmf > 0
    assert stats.chisquare(counts[keep], pmf[keep] * counts.sum()).pvalue > 1e-4


@pytest.mark.parametrize("name", ["emq", "ind_exp", "app_ind_exp"])
def test_bad_method_is_refused_before_any_randomness(name):
    kwargs = {"q": 0.5} if name == "emq" else {"qs": (0.2, 0.8)}
    with pytest.raises(ValueError, match="method"):
        getattr(quantiles, name)(
            "not a key", TINY, epsilon=1.0, bounds=(-2, 2), method="inverse_cdf", **kwargs
        )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uqe_prefix_log_masses_equal_cumlogsumexp(dtype):
    """Non-decreasing terms with a -inf prefix, flat runs and steps far beyond the float range of
    exp, against np.logaddexp.accumulate in float64 (absolute error within a few ulps of the value)."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", dtype == "float64")
    try:
        rng = np.random.default_rng(2)
        steps = rng.choice([0.0, 0.0, 0.01, 1.0, 200.0], 5000) * rng.uniform(0, 1, 5000)
        terms = np.cumsum(steps) - 3000.0
        terms[:17] = -np.inf
        terms = terms.astype(dtype)
        got = np.asarray(_cumlogsumexp_nondecreasing(jnp.asarray(terms)), np.float64)
        want = np.logaddexp.accumulate(terms.astype(np.float64))
        assert np.isneginf(got[:17]).all()
        eps = np.finfo(dtype).eps
        got, want = got[17:], want[17:]
        np.testing.assert_array_less(np.abs(got - want), 8 * eps * (np.abs(want) + 10))
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_uqe_with_traced_data_is_the_closed_over_release():
    """Traced data bin into the full table (max_queries + 1 = 8,193 counts), closed-over data into one
    just past their maximum (4,096): under ``jit(vmap)`` over keys (the fast sampler) the releases are
    equal."""
    x = np.random.default_rng(4).lognormal(0.0, 1.0, 2000).astype(np.float32)
    keys = jax.random.split(jax.random.key(9), 256)
    release = functools.partial(quantiles.unbounded, q=0.5, epsilon=1.0, max_queries=2**13)
    closed = jax.jit(jax.vmap(lambda k: release(k, x)))(keys)
    traced = jax.jit(jax.vmap(release, in_axes=(0, None)))(keys, x)
    chex.assert_trees_all_equal(closed, traced)
