"""``method="auto"`` (dpjax._src.auto): the rule, and that each mechanism's default runs the literal kernel
for one release and the fast sampler under ``vmap`` over keys with the data fixed, bit for bit the
named path under the same batching (so the law tests of each named path cover ``"auto"``), with
nested batching (keys x epsilons, keys x datasets, ``jit`` inside ``vmap``)."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import kernel_names

from dpjax import selection, svt
from dpjax._src import auto as _auto
from dpjax._src.quantiles.unbounded import halting, query_grid, tabulate

KEYS = jax.random.split(jax.random.key(3), 4)
SCORES = jnp.asarray(np.random.default_rng(0).normal(0.0, 2.0, 12), jnp.float32)
QUERIES = jnp.linspace(-3.0, 6.0, 24)
EPSILONS = jnp.asarray([0.5, 1.0, 2.0])

# name: (release(key, data, epsilon, method), data, the path "auto" takes under vmap over keys)
MECHANISMS = {
    "exponential_mechanism": (
        lambda k, x, e, m: selection.exponential_mechanism(k, x, e, method=m), SCORES, "tree"),
    "report_noisy_max[laplace]": (
        lambda k, x, e, m: selection.report_noisy_max(k, x, e, noise="laplace", method=m), SCORES, "literal"),
    "gumbel_top_k": (lambda k, x, e, m: selection.gumbel_top_k(k, x, 3, e, method=m), SCORES, "tree"),
    "noisy_top_k_with_gap[gumbel]": (
        lambda k, x, e, m: selection.noisy_top_k_with_gap(k, x, 2, e, noise="gumbel", method=m),
        SCORES,
        "tree",
    ),
    "noisy_max_with_gap[laplace]": (
        lambda k, x, e, m: selection.noisy_max_with_gap(k, x, e, method=m), SCORES, "literal"),
    "above_threshold": (
        lambda k, x, e, m: svt.above_threshold(k, x, 2.0, e, e, method=m), QUERIES, "first_passage"),
    "sparse_vector[exponential]": (
        lambda k, x, e, m: svt.sparse_vector(k, x, 2.0, e, e, c=2, noise="exponential", method=m),
        QUERIES,
        "first_passage",
    ),
    "sparse_vector_with_gap": (
        lambda k, x, e, m: svt.sparse_vector_with_gap(k, x, 2.0, e, c=2, method=m), QUERIES, "first_passage"),
    "adaptive_sparse_vector_with_gap": (
        lambda k, x, e, m: svt.adaptive_sparse_vector_with_gap(k, x, 2.0, e, c=2, method=m),
        QUERIES,
        "first_passage",
    ),
}
NAMES = sorted(MECHANISMS)


@functools.cache
def _over_keys(name, method):
    """``jit(vmap over keys)`` of the release with the data and epsilon fixed."""
    release = MECHANISMS[name][0]
    return jax.jit(jax.vmap(lambda k, x, e: release(k, x, e, method), in_axes=(0, None, None)))


def test_the_rule():
    key_only, data_only, zipped = (5, (True, False)), (3, (False, True)), (5, (True, True))
    assert _auto.choose((), "fast", "literal") == "literal"
    assert _auto.choose((key_only,), "fast", "literal") == "fast"
    assert _auto.choose(((1, (True, False)),), "fast", "literal") == "literal"  # one key: one release
    assert _auto.choose((data_only,), "fast", "literal") == "literal"
    assert _auto.choose((zipped,), "fast", "literal") == "literal"
    assert _auto.choose((data_only, key_only), "fast", "literal") == "fast"
    assert _auto.choose((key_only, data_only), "fast", "literal") == "fast"
    assert _auto.choose((key_only,), None, "literal") == "literal"  # no fast path
    assert _auto.shared_releases((key_only, data_only, (2, (True, False)))) == 10


FAST_KERNELS = {"tree": "tree_top", "first_passage": "_first_passage"}
LITERAL_KERNELS = ("noisy_top", "_keyed")


def _path(fn, *args) -> str:
    """Which kernel the traced ``fn(*args)`` runs (by the jitted kernels' names in its jaxpr);
    tracing only, nothing is compiled."""
    names = kernel_names(jax.make_jaxpr(fn)(*args))
    fast = [path for path, kernel in FAST_KERNELS.items() if kernel in names]
    literal = any(kernel in names for kernel in LITERAL_KERNELS)
    assert len(fast) + literal == 1, names
    return fast[0] if fast else "literal"


@pytest.mark.parametrize("name", NAMES)
def test_auto_runs_the_literal_kernel_alone_and_the_fast_one_over_keys(name):
    release, data, fast = MECHANISMS[name]
    assert _path(lambda k: release(k, data, 1.0, "auto"), KEYS[0]) == "literal"  # under jit: staged
    assert _path(jax.vmap(lambda k: release(k, data, 1.0, "auto")), KEYS) == fast
    datasets = jnp.stack([data] * len(KEYS))  # one dataset per key: nothing to share
    assert _path(jax.vmap(lambda k, x: release(k, x, 1.0, "auto")), KEYS, datasets) == "literal"


@pytest.mark.parametrize("name", ["gumbel_top_k", "above_threshold"])
def test_auto_equals_the_chosen_path_bit_for_bit(name):
    """One release (eager: no staging at all) and a Monte Carlo batch; the law tests of each named
    path therefore cover ``"auto"`` (and those written with the default method run it)."""
    release, data, fast = MECHANISMS[name]
    for key in KEYS[:2]:
        chex.assert_trees_all_equal(release(key, data, 1.0, "auto"), release(key, data, 1.0, "literal"))
    chex.assert_trees_all_equal(
        _over_keys(name, "auto")(KEYS, data, 1.0), _over_keys(name, fast)(KEYS, data, 1.0)
    )


@pytest.mark.parametrize("name", ["noisy_top_k_with_gap[gumbel]", "sparse_vector_with_gap"])
def test_nested_batching_picks_the_path_by_what_is_shared(name):
    release, data, fast = MECHANISMS[name]
    at = lambda k, x, e: release(k, x, e, "auto")  # noqa: E731
    # The study runner's shape (vmap over epsilon of vmap over keys) and the reverse nesting.
    runner = jax.vmap(lambda e: jax.vmap(lambda k: at(k, data, e))(KEYS))
    assert _path(runner, EPSILONS) == fast
    assert _path(jax.vmap(lambda k: jax.vmap(lambda e: at(k, data, e))(EPSILONS)), KEYS) == fast
    datasets = jnp.stack([data, data[::-1], data + 1.0])
    assert _path(jax.vmap(lambda x: jax.vmap(lambda k: at(k, x, 1.0))(KEYS)), datasets) == fast
    assert _path(jax.vmap(lambda e: at(KEYS[0], data, e)), EPSILONS) == "literal"  # a grid, one key
    assert _path(jax.vmap(jax.jit(lambda k: at(k, data, 1.0))), KEYS) == fast  # jit inside vmap
    assert _path(jax.jit(jax.vmap(lambda k: at(k, data, 1.0))), KEYS) == fast  # vmap inside jit
    assert _path(jax.vmap(lambda k: at(k, data, 1.0), axis_size=1), KEYS[:1]) == "literal"


def test_the_study_runner_shape_equals_the_fast_path_under_the_same_batching():
    release, data, fast = MECHANISMS["noisy_top_k_with_gap[gumbel]"]
    grid = lambda m: jax.jit(jax.vmap(lambda e: jax.vmap(lambda k: release(k, data, e, m))(KEYS)))  # noqa: E731
    chex.assert_trees_all_equal(grid("auto")(EPSILONS), grid(fast)(EPSILONS))


def test_derivatives_are_the_literal_kernels_in_both_modes():
    """custom_vmap has no transpose rule: "auto" differentiates the single-release path instead."""
    release, data, _ = MECHANISMS["noisy_top_k_with_gap[gumbel]"]
    gaps = lambda e, m: release(KEYS[0], data, e, m)[1]  # noqa: E731
    auto = jax.jvp(lambda e: gaps(e, "auto"), (1.0,), (1.0,))
    chex.assert_trees_all_equal(auto, jax.jvp(lambda e: gaps(e, "literal"), (1.0,), (1.0,)))
    total = lambda e, m: gaps(e, m).sum()  # noqa: E731
    chex.assert_trees_all_equal(jax.grad(total)(1.0, "auto"), jax.grad(total)(1.0, "literal"))


def test_bad_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        selection.gumbel_top_k(KEYS[0], SCORES, 2, 1.0, method="fast")
    with pytest.raises(ValueError, match="method"):
        svt.above_threshold(KEYS[0], QUERIES, 2.0, 1.0, 1.0, method="tree")


def test_unbounded_halting_takes_blocks_alone_and_the_fast_sampler_over_keys():
    """UQE's halting index (behind quantiles.unbounded, fully_unbounded, aggregates.clipped_sum and
    the private clip norm): one release runs the "blocks" sampler, without the fast sampler's
    preparation (the prefix log-masses of the count table), ``vmap`` over keys the fast one; one release
    is bit for bit the named method (test_svt_monotone_halting tests the two laws)."""
    x = np.random.default_rng(1).lognormal(2.0, 1.0, 300).astype(np.float32)
    counts, _ = tabulate(x, 0.0, 1.001, query_grid(1.001, 4096, np.float32), np.float32)

    def run(key, method="auto"):
        return halting(
            key,
            counts,
            0.9,
            x.size,
            0.5,
            0.5,
            4000,
            noise="exponential",
            dtype=np.float32,
            first=1,
            method=method,
        )

    def prepares(fn, *args) -> bool:  # the fast sampler's key-independent preparation is traced
        return "_cumlogsumexp_nondecreasing" in kernel_names(jax.make_jaxpr(fn)(*args))

    assert not prepares(run, KEYS[0])
    assert prepares(jax.vmap(run), KEYS)
    assert not prepares(
        jax.vmap(
            lambda e: halting(
                KEYS[0], counts, 0.9, x.size, e, e, 4000, noise="exponential", dtype=np.float32, first=1
            )
        ),
        EPSILONS,
    )
    chex.assert_trees_all_equal(run(KEYS[0]), run(KEYS[0], "blocks"))
