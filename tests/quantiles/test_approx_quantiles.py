"""ApproxQuantiles (Kaplan, Schnapp and Stemmer 2022, Alg. 1): its recursion, its exact law on tiny
inputs and on realistic data, its guarantee, bad input, dtypes, and the data work done once."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import operand_shapes
from laws import P_MIN, chi_square_pvalue

from dpjax import quantiles
from dpjax._src.quantiles.approx_quantiles import _recursion_levels
from dpjax._src.quantiles.range_em import _layout, build_tables
from dpjax._src.quantiles.range_tree import _canonical, build_trees, layout
from dpjax.accounting import RangeBounded

GRID_X = np.array([0.5, 2.0, 2.5, 4.0, 5.5])  # 6 gaps of [0, 6]
GRID_BOUNDS = (0.0, 6.0)
GL_NODES, GL_WEIGHTS = np.polynomial.legendre.leggauss(48)


def _node_law(edges, gap_lo, gap_hi, lo, hi, q, c):
    """The exact law of one node's gap (Smith 2011 on the node's data, end gaps cut at lo, hi)."""
    gaps = np.arange(gap_lo, gap_hi + 1)
    width = np.minimum(edges[gaps + 1], hi) - np.maximum(edges[gaps], lo)
    with np.errstate(divide="ignore"):
        logits = np.log(width) - c * np.abs(gaps - gap_lo - q * (gap_hi - gap_lo))
    p = np.exp(logits - logits.max())
    law = np.zeros(len(edges) - 1)
    law[gaps] = p / p.sum()
    return law


def _c(q, epsilon_node):
    return epsilon_node / (2 * max(q, 1 - q))


def exact_law(x, bounds, qs, epsilon, neighbors):
    """The joint law of the outputs' gaps for m = 2 or 3 (a root and its children): the root's EM,
    then the children's given the root value v, integrated over v uniform in the root's gap
    (Gauss-Legendre; the integrand is smooth). Returns an array indexed by the m gaps."""
    edges = np.concatenate([[bounds[0]], np.sort(x), [bounds[1]]])
    n, m = len(x), len(qs)
    eps_node = epsilon / (2 if neighbors == "add_remove" else 4)  # depth 2
    q_root = qs[1]
    root = _node_law(edges, 0, n, edges[0], edges[-1], q_root, _c(q_root, eps_node))
    q_left = qs[0] / qs[1]
    law = np.zeros((n + 1,) * m)
    for g in np.flatnonzero(root):
        a, b = edges[g], edges[g + 1]
        for node, weight in zip(GL_NODES, GL_WEIGHTS, strict=True):
            v = a + (node + 1) * (b - a) / 2
            left = _node_law(edges, 0, g, edges[0], v, q_left, _c(q_left, eps_node))
            mass = root[g] * weight / 2
            if m == 2:
                law[:, g] += mass * left
            else:
                q_right = (qs[2] - qs[1]) / (1 - qs[1])
                right = _node_law(edges, g, n, v, edges[-1], q_right, _c(q_right, eps_node))
                law[:, g, :] += mass * np.outer(left, right)
    return law


@functools.cache
def _sampler(qs, epsilon, bounds, neighbors, method="superblocks"):
    def one(key, x):
        return quantiles.approx_quantiles(
            key, x, qs, epsilon, bounds=bounds, neighbors=neighbors, method=method
        )

    return jax.jit(lambda keys, x: jax.lax.map(lambda key: one(key, x), keys, batch_size=125_000))


def _gaps_of(values, x, bounds):
    edges = np.concatenate([[bounds[0]], np.sort(x), [bounds[1]]])
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(x))


def test_recursion_is_static_with_floor_log2_m_plus_one_levels():
    for m in range(1, 40):
        levels = _recursion_levels(m)
        assert len(levels) == m.bit_length()
        released = sorted(mid for nodes in levels for _, mid, _ in nodes)
        assert released == list(range(m))
        seen = set()
        for nodes in levels:  # each node's bounds were released at an earlier level
            for s, mid, e in nodes:
                assert s <= mid < e and (s == 0 or s - 1 in seen) and (e == m or e in seen)
            seen |= {mid for _, mid, _ in nodes}


@pytest.mark.parametrize(
    ("qs", "neighbors", "trials", "method"),
    [
        ((0.2, 0.5, 0.9), "swap", 200_000, "superblocks"),
        ((0.3, 0.6), "add_remove", 100_000, "superblocks"),
        ((0.2, 0.5, 0.9), "swap", 100_000, "blocks"),
    ],
)
def test_law_on_a_six_gap_grid_matches_the_exact_law(qs, neighbors, trials, method):
    epsilon = 4.0
    law = exact_law(GRID_X, GRID_BOUNDS, qs, epsilon, neighbors)
    keys = jax.random.split(jax.random.key(11), trials)
    sampler = _sampler(qs, epsilon, GRID_BOUNDS, neighbors, method)
    out = np.asarray(sampler(keys, jnp.asarray(GRID_X, jnp.float32)))
    assert np.all(np.diff(out, axis=1) >= 0) and out.min() >= 0 and out.max() <= 6
    cells = np.ravel_multi_index(tuple(_gaps_of(out, GRID_X, GRID_BOUNDS).T), law.shape)
    observed = np.bincount(cells, minlength=law.size)
    assert chi_square_pvalue(observed, law.ravel()) > P_MIN


@pytest.mark.optimized
@pytest.mark.parametrize(
    ("method", "draws"), [("superblocks", 10**6), ("tree", 10**6), ("segments", 250_000)]
)
def test_marginal_laws_at_a_million_draws_on_realistic_data(method, draws):
    """Each output's gap on 40 normal points at 10^6 draws (one compiled call; ``"segments"``:
    2.5 10^5, blocks of 5 gaps under a heap of 16 leaves) against its exact marginal (the root's EM,
    and each child's law integrated over the root value)."""
    x = np.random.default_rng(3).normal(0.0, 1.0, 40)
    qs, bounds, epsilon = (0.1, 0.5, 0.75), (-4.0, 4.0), 8.0
    law = exact_law(x, bounds, qs, epsilon, "swap")
    keys = jax.random.split(jax.random.key(5), draws)
    out = np.asarray(_sampler(qs, epsilon, bounds, "swap", method)(keys, jnp.asarray(x, jnp.float32)))
    gaps = _gaps_of(out, x, bounds)
    for j in range(3):
        marginal = law.sum(axis=tuple(i for i in range(3) if i != j))
        observed = np.bincount(gaps[:, j], minlength=len(x) + 1)
        assert chi_square_pvalue(observed, marginal) > P_MIN, j


TIED_X = np.array([0.5, 2.0, 2.0, 2.0, 4.0, 6.0])  # two zero-width gaps and one onto the bound


@pytest.mark.parametrize(
    ("dtype", "method"), [("float32", "auto"), ("float64", "tree"), ("float64", "segments")]
)
def test_tree_law_with_ties_and_traced_epsilon(dtype, method, request):
    """``"tree"`` (heap-drawn stages) and ``"segments"`` (``"auto"`` picks it; blocks of one gap on
    this grid, so every stage of its draw runs) against the exact joint law on a grid with
    zero-width gaps, epsilon traced, in float32 and with x64 (100k draws each)."""
    if dtype == "float64":
        request.getfixturevalue("x64")
    qs, epsilon = (0.25, 0.5, 0.8), 3.0
    law = exact_law(TIED_X, GRID_BOUNDS, qs, epsilon, "swap")

    @jax.jit
    def sampler(keys, x, eps):
        def one(key):
            return quantiles.approx_quantiles(key, x, qs, eps, bounds=GRID_BOUNDS, method=method)

        return jax.lax.map(one, keys, batch_size=100_000)

    keys = jax.random.split(jax.random.key(12), 100_000)
    out = np.asarray(sampler(keys, jnp.asarray(TIED_X, dtype), jnp.asarray(epsilon, dtype)))
    assert out.dtype == np.dtype(dtype) and np.all(np.diff(out, axis=1) >= 0)
    gaps = _gaps_of(out, TIED_X, GRID_BOUNDS)
    assert not np.isin(gaps, (2, 3, 6)).any()  # the zero-width gaps are never drawn
    observed = np.bincount(np.ravel_multi_index(tuple(gaps.T), law.shape), minlength=law.size)
    assert chi_square_pvalue(observed, law.ravel()) > P_MIN


def test_more_accurate_than_ind_exp_at_many_quantiles():
    """KSS22's point (Sec. 5): at m = 29 the rank error is well below IndExp's (here ~4x)."""
    x = jax.random.normal(jax.random.key(1), (1000,))
    qs = jnp.linspace(0.02, 0.98, 29)
    keys = jax.random.split(jax.random.key(0), 40)
    xs = np.sort(np.asarray(x))

    def rank_error(mechanism):
        out = jax.jit(jax.vmap(lambda k: mechanism(k, x, qs, 1.0, bounds=(-10.0, 10.0))))(keys)
        return np.abs(np.searchsorted(xs, np.asarray(out)) - np.asarray(qs) * 1000).mean()

    assert rank_error(quantiles.approx_quantiles) < rank_error(quantiles.ind_exp) / 2


def test_node_tables_are_the_tilted_block_sums_in_both_branches():
    """The superblock sampler's tables (:mod:`dpjax._src.quantiles.range_em`) against float64 sums, by the
    matrix product (small c) and by log-sum-exps (c beyond the product's underflow bound)."""
    rng = np.random.default_rng(2)
    log_width = np.log(rng.exponential(1.0, 1000)) * 8  # widths over ~50 orders of magnitude
    log_width[rng.integers(0, 1000, 100)] = -np.inf  # ties
    size, supers = _layout(1000)
    padded = np.full(size * size * supers, -np.inf)
    padded[:1000] = log_width
    for cs in ([0.01, 0.7, 3.0], [0.2, 9.0]):  # 9 (B - 1) = 81 > 43: the log-sum-exp branch
        tables = build_tables(jnp.asarray(log_width, jnp.float32), jnp.asarray(cs, jnp.float32))
        for i, c in enumerate(cs):
            for unit, left, right in (
                (size, tables.left, tables.right),
                (size * size, tables.super_left, tables.super_right),
            ):
                o = c * np.arange(unit)
                blocks = padded.reshape(-1, unit)
                want_left = np.logaddexp.reduce(blocks + o - o[-1], axis=1)
                want_right = np.logaddexp.reduce(blocks - o, axis=1)
                np.testing.assert_allclose(left[i], want_left, rtol=2e-5, atol=2e-5)
                np.testing.assert_allclose(right[i], want_right, rtol=2e-5, atol=2e-5)


def test_segment_trees_hold_the_tilted_sums_and_splits():
    """:func:`build_trees` against float64 sums: heap node ``v`` over the blocks ``[s, s + 2^h)``
    holds ``log sum width_g e^{-c (e - g)}`` (side 0, ``e`` its last gap) and ``log sum width_g
    e^{-c (g - s B)}`` (side 1), and ``-log P(first child)``; ties give ``-inf`` widths."""
    rng = np.random.default_rng(4)
    log_width = np.log(rng.exponential(1.0, 300)) * 6
    log_width[rng.integers(0, 300, 40)] = -np.inf
    log_width[96:128] = -np.inf  # a whole heap node of empty blocks
    size, depth = layout(300)
    cs = [0.02, 0.5, 9.0]  # 9 (B - 1) > 43: the tables' log-sum-exp branch
    trees = build_trees(jnp.asarray(log_width, jnp.float32), jnp.asarray(cs, jnp.float32))
    padded = np.full(size << depth, -np.inf)
    padded[:300] = log_width
    for i, c in enumerate(cs):
        for v in range(1, 2 << depth):
            h = depth - (v.bit_length() - 1)
            first = (v << h) - (1 << depth)
            gaps = np.arange(first * size, (first + (1 << h)) * size)
            want = [
                np.logaddexp.reduce(padded[gaps] - c * (gaps[-1] - gaps)),
                np.logaddexp.reduce(padded[gaps] - c * (gaps - gaps[0])),
            ]
            np.testing.assert_allclose(trees.mass[i, :, v], want, rtol=1e-5, atol=1e-4)
            if h and np.isfinite(max(want)):
                half = len(gaps) // 2
                first_mass = [
                    np.logaddexp.reduce(padded[gaps[:half]] - c * (gaps[-1] - gaps[:half])),
                    np.logaddexp.reduce(padded[gaps[:half]] - c * (gaps[:half] - gaps[0])),
                ]
                np.testing.assert_allclose(
                    trees.split[i, :, v], np.subtract(want, first_mass), rtol=1e-4, atol=1e-5
                )


def test_canonical_cover_is_the_block_range():
    depth = 4
    first, stop = np.meshgrid(np.arange(17), np.arange(17), indexing="ij")
    nodes, heights, valid = (np.asarray(a) for a in _canonical(jnp.asarray(first), jnp.asarray(stop), depth))
    for i in range(17):
        for j in range(17):
            covered = []
            for v, h in zip(nodes[i, j][valid[i, j]], heights[i, j][valid[i, j]], strict=True):
                assert v >> (depth - h) == 1  # a heap node at height h
                covered += range((v << h) - 16, ((v + 1) << h) - 16)
            assert sorted(covered) == list(range(i, max(i, j)))
            assert valid[i, j].sum() <= 2 * depth


def test_vmap_over_keys_sorts_the_data_and_builds_the_tables_once():
    x = jnp.linspace(-1.0, 1.0, 50)
    keys = jax.random.split(jax.random.key(0), 7)
    jaxpr = jax.make_jaxpr(
        jax.vmap(lambda k: quantiles.approx_quantiles(k, x, (0.25, 0.5, 0.75), 1.0, bounds=(-2.0, 2.0)))
    )(keys)
    shapes = operand_shapes(jaxpr.jaxpr, ("sort",))
    assert shapes and all(shape == (50,) for shape in shapes), shapes
    size, _ = layout(51)  # the tables' product: [blocks, B] @ [B, 2 nodes], no key axis
    assert operand_shapes(jaxpr.jaxpr, ("dot_general",)) == [(-(-51 // size), size), (size, 6)]


def test_float64_output_and_order(x64):
    x = np.random.default_rng(0).normal(0.0, 1.0, 200)
    out = quantiles.approx_quantiles(jax.random.key(0), x, (0.1, 0.5, 0.9), 2.0, bounds=(-5.0, 5.0))
    assert out.dtype == jnp.float64 and np.all(np.diff(out) >= 0)
    assert np.all(np.abs(out - np.quantile(x, (0.1, 0.5, 0.9))) < 1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"qs": (0.5, 0.4)}, "increasing"),
        ({"qs": (0.5, 1.5)}, r"\[0, 1\]"),
        ({"bounds": (1.0, 1.0)}, "a < b"),
        ({"x": np.array([0.0, np.nan])}, "x"),
        ({"neighbors": "bounded"}, "neighbors"),
    ],
)
def test_bad_input_raises_before_randomness(kwargs, match):
    args = {"x": np.zeros(3), "qs": (0.5,), "epsilon": 1.0, "bounds": (-1.0, 1.0)} | kwargs
    neighbors = args.pop("neighbors", "swap")
    with pytest.raises(ValueError, match=match):
        quantiles.approx_quantiles(jax.random.key(0), **args, neighbors=neighbors)


def test_guarantee_splits_epsilon_over_the_levels():
    for m, depth in ((1, 1), (2, 2), (3, 2), (4, 3), (29, 5)):
        qs = np.linspace(0.1, 0.9, m)
        for neighbors in ("swap", "add_remove"):
            g = quantiles.approx_quantiles_guarantee(qs, 2.0, neighbors=neighbors)
            assert g == RangeBounded(2.0, rho=4.0 / (8 * depth))
    grid = quantiles.approx_quantiles_guarantee((0.5,), np.array([0.5, 1.0]))
    assert [g.epsilon for g in grid] == [0.5, 1.0]
    with pytest.raises(ValueError):
        quantiles.approx_quantiles_guarantee((), 1.0)


def test_auto_is_tree_for_one_release_and_segments_over_keys_bit_for_bit():
    """``"auto"`` runs the ``"tree"`` kernel for one release (under ``jit``: staged) and the
    ``"segments"`` one under ``vmap`` over keys with the data fixed (dpjax._src.auto's rule), so the
    law tests of those two methods cover the default."""
    x = jnp.asarray(np.random.default_rng(4).normal(0.0, 1.0, 40), jnp.float32)
    qs = jnp.asarray([0.25, 0.5, 0.75])
    keys = jax.random.split(jax.random.key(8), 3)

    def release(key, data, method):
        return quantiles.approx_quantiles(key, data, qs, 1.0, bounds=(-4.0, 4.0), method=method)

    one = jax.jit(release, static_argnames="method")
    np.testing.assert_array_equal(one(keys[1], x, "auto"), one(keys[1], x, "tree"))
    over_keys = jax.jit(jax.vmap(release, in_axes=(0, None, None)), static_argnames="method")
    np.testing.assert_array_equal(over_keys(keys, x, "auto"), over_keys(keys, x, "segments"))
