"""AboveThreshold with Laplace, Gumbel or Exponential noise, and its guarantee companion.

Durfee, "Unbounded Differentially Private Quantile and Maximum Estimation", Algorithm 1: the threshold
is noised once, ``T + Noise(sensitivity/epsilon1)``, every query gets fresh ``Noise(sensitivity/epsilon2)``,
and the mechanism releases the first query whose noisy value reaches the noisy threshold (the
transcript ``⊥^(k-1) ⊤``). Privacy (any neighboring relation under which each query has sensitivity
``sensitivity``): Lemma 3.1 / Corollary 3.1 / Lemma 3.2 give ``epsilon1 + 2*epsilon2``-DP for general
queries and ``epsilon1 + epsilon2``-DP for monotonic ones (Def. 3.1); Theorem 1 gives
``1/2*(epsilon1/2 + epsilon2)^2``-zCDP for monotonic queries. Gumbel noise needs ``epsilon1 == epsilon2``.

Vectorization: the halting index is the first true entry of ``(q - T) + nu >= eta``, so the whole
stream is one comparison and one ``argmax``; under ``vmap`` over keys ``q - T`` is computed once.
:func:`above_threshold_blocked` walks a long stream block by block and stops at the first hit; the
noise of query ``i`` depends only on the key and ``i``, so its result does not depend on the block size.
"""

from __future__ import annotations

import functools
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import noise as noise_lib
from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import (
    check_choice,
    check_epsilon,
    check_int,
    check_positive,
    float_dtype,
    is_traced,
)
from dpjax._src.numerics import ceil_div
from dpjax._src.svt.first_passage import halting_indices
from dpjax._src.validation import Checks

__all__ = [
    "NOISES",
    "AboveThresholdMethod",
    "AboveThresholdNoise",
    "above_threshold",
    "above_threshold_blocked",
    "above_threshold_from_noise",
    "above_threshold_guarantee",
]

AboveThresholdNoise: TypeAlias = Literal["laplace", "gumbel", "exponential"]
"""The sparse vector family's noise (static)."""
AboveThresholdMethod: TypeAlias = Literal["auto", "literal", "first_passage"]
"""How the sparse vector family draws (static)."""
NOISES: tuple[AboveThresholdNoise, ...] = get_args(AboveThresholdNoise)
METHODS: tuple[AboveThresholdMethod, ...] = get_args(AboveThresholdMethod)


def check_noise_epsilons(noise: AboveThresholdNoise, epsilon1, epsilon2, checks: Checks | None = None):
    """Validates the noise family and the two budgets (Gumbel needs ``epsilon1 == epsilon2``).

    Without ``checks`` (guarantee companions, on the host) both budgets must be concrete. With a
    mechanism's ``checks`` they may be traced: the conditions are then recorded in the graph.
    """
    check_choice(noise, "noise", NOISES)
    if checks is None:
        epsilon1, epsilon2 = check_epsilon(epsilon1, "epsilon1"), check_epsilon(epsilon2, "epsilon2")
    else:
        epsilon1, epsilon2 = checks.epsilon(epsilon1, "epsilon1"), checks.epsilon(epsilon2, "epsilon2")
    if noise != "gumbel":
        return epsilon1, epsilon2
    if checks is not None and (is_traced(epsilon1) or is_traced(epsilon2)):  # host values are floats
        checks.record(
            jnp.asarray(epsilon1) == jnp.asarray(epsilon2),
            "Gumbel AboveThreshold requires epsilon1 == epsilon2 (Lemma 3.2).",
        )
    elif epsilon1 != epsilon2:
        raise ValueError(
            "Gumbel AboveThreshold requires epsilon1 == epsilon2 (Lemma 3.2), "
            f"got epsilon1={epsilon1} and epsilon2={epsilon2}."
        )
    return epsilon1, epsilon2


def checked_queries(checks: Checks, queries, threshold, name: str = "queries"):
    """Validates a 1-D query vector and a scalar threshold; returns them and the working dtype.

    The working dtype is :func:`~dpjax.validation.float_dtype` of the queries and the threshold.
    Traced queries (NaN) or a traced threshold (not finite) are recorded in ``checks``.
    """
    queries = checks.array(queries, name, ndim=1)
    if isinstance(threshold, list | tuple):
        threshold = np.asarray(threshold)
    dtype = float_dtype(queries, threshold)
    return queries, checks.real(threshold, "threshold"), dtype


def center(queries, threshold, dtype) -> jax.Array:
    """``queries - threshold`` in ``dtype`` (inside the kernels: no extra dispatch when eager).

    Comparing ``(q - T) + nu >= eta`` rather than ``q + nu >= T + eta`` keeps large counts exact in
    the subtraction (counts above 2^24 need ``jax_enable_x64`` in any case).
    """
    return queries.astype(dtype) - jnp.asarray(threshold, dtype)


def centered_queries(checks: Checks, queries, threshold, name: str = "queries") -> jax.Array:
    """:func:`checked_queries`, then :func:`center`: the validated ``queries - threshold``."""
    return center(*checked_queries(checks, queries, threshold, name))


def first_true(mask: jax.Array) -> jax.Array:
    """0-based index of the first true entry of a 1-D mask, or -1 when there is none (int32)."""
    return jnp.where(mask.any(), jnp.argmax(mask), -1).astype(jnp.int32)


def above_threshold_from_noise(
    queries: ArrayLike, threshold: ArrayLike, threshold_noise: ArrayLike, query_noise: ArrayLike
) -> jax.Array:
    """AboveThreshold on given (already scaled) noise: the pure core of :func:`above_threshold`.

    Returns the 0-based index of the first ``i`` with ``(queries[i] - threshold) + query_noise[i] >=
    threshold_noise``, or -1. Used to test the kernel against a sequential reference bit for bit.
    ``threshold`` may be traced; -1 when traced queries hold NaN or a traced threshold is not finite.
    """
    checks = Checks()
    centered = centered_queries(checks, queries, threshold)
    return checks.guard(first_true(centered + jnp.asarray(query_noise, centered.dtype) >= threshold_noise))


def above_threshold(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon1: ArrayLike,
    epsilon2: ArrayLike,
    *,
    noise: AboveThresholdNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    method: AboveThresholdMethod = "auto",
) -> jax.Array:
    """AboveThreshold (Durfee 2023, Algorithm 1; Dwork and Roth 2014, Algorithm 1 for Laplace).

    Neighboring relation: any under which every query changes by at most ``sensitivity``.
    Guarantee (see :func:`above_threshold_guarantee`): ``epsilon1 + 2*epsilon2``-DP in general,
    ``epsilon1 + epsilon2``-DP and ``1/2*(epsilon1/2 + epsilon2)^2``-zCDP for monotonic queries.

    Args:
      key: a ``jax.random`` key.
      queries: query answers ``f_1(x), ..., f_n(x)``, shape ``(n,)``, n >= 1 (the length is static).
      threshold: the public threshold ``T``, a finite scalar (may be traced).
      epsilon1: budget of the threshold noise (scale ``sensitivity/epsilon1``), > 0 (may be traced).
      epsilon2: budget of the query noise (scale ``sensitivity/epsilon2``), > 0 (may be traced).
      noise: "laplace", "gumbel" (needs ``epsilon1 == epsilon2``) or "exponential" (one-sided)
        (static).
      sensitivity: per-query sensitivity, > 0 (may be traced).
      method: ``"auto"`` (default), ``"literal"`` or ``"first_passage"`` (static). ``"literal"``:
        one noise variate per query and a comparison. ``"first_passage"``: the same law by
        searches in heaps of the log-masses and maxima of ``(q - T)/b2`` (key independent, so
        built once under ``vmap`` over keys), O(log n) per search: one search for Gumbel noise,
        ``1 + Geometric(1/2)`` on average for Laplace and Exponential (envelope and thinning,
        :mod:`dpjax._src.svt.first_passage`, which states its float error). Under ``vmap`` over keys
        the heaps are built once and a release costs O(log n) searches against the literal
        kernel's O(n) pass; one release costs about what the literal kernel costs (timings:
        benchmarks/README.md, "SVT: one release"). ``"auto"`` runs ``"literal"`` for one release
        and ``"first_passage"`` under ``vmap`` over keys with the queries and budgets fixed (the
        rule of :mod:`dpjax._src.auto`). Same law, different random streams.

    The noise scales are computed in the working dtype (:func:`~dpjax.validation.float_dtype` of
    ``queries`` and ``threshold``), the same way for concrete and traced parameters.

    Returns:
      int32 scalar: the 0-based index of the first query whose noisy value reaches the noisy
      threshold, or -1 when none does (stopping after ``n`` queries is post-processing). On
      invalid traced input (a budget or the sensitivity not finite and > 0, Gumbel with
      ``epsilon1 != epsilon2``, a non-finite threshold, NaN queries) it is -1 as well: no query
      is reported (trace inside :func:`dpjax.validation.checkify_checks` and run under
      :func:`jax.experimental.checkify.checkify` to tell the cases apart).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = above_threshold(jax.random.key(0), jnp.array([1.0, 5.0, 90.0]), 50.0, 0.5, 0.5)
      >>> keys = jax.random.split(jax.random.key(1), 1000)
      >>> idx = jax.vmap(lambda k: above_threshold(k, jnp.arange(100.0), 50.0, 0.5, 0.5))(keys)
    """
    check_choice(method, "method", METHODS)
    checks = Checks()
    epsilon1, epsilon2 = check_noise_epsilons(noise, epsilon1, epsilon2, checks)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    queries, threshold, dtype = checked_queries(checks, queries, threshold)
    paths = {
        "literal": functools.partial(_keyed, noise=noise, dtype=dtype),
        "first_passage": functools.partial(_first_passage, noise=noise, dtype=dtype),
    }
    operands = (queries, threshold, epsilon1, epsilon2, sensitivity)
    return checks.guard(_auto.run(method, paths, key, *operands, fast="first_passage"))


def noise_scales(dtype, epsilon1, epsilon2, sensitivity) -> tuple[jax.Array, jax.Array]:
    """``sensitivity/epsilon1`` and ``sensitivity/epsilon2`` in ``dtype`` (the same bits whether the
    parameters are concrete or traced)."""
    sensitivity = jnp.asarray(sensitivity, dtype)
    return sensitivity / jnp.asarray(epsilon1, dtype), sensitivity / jnp.asarray(epsilon2, dtype)


@functools.partial(jax.jit, static_argnames=("noise", "dtype"))
def _keyed(key, queries, threshold, epsilon1, epsilon2, sensitivity, *, noise, dtype):
    centered = center(queries, threshold, dtype)
    scale1, scale2 = noise_scales(centered.dtype, epsilon1, epsilon2, sensitivity)
    threshold_key, query_key = jax.random.split(key)
    eta = noise_lib.sample(noise, threshold_key, (), scale1, centered.dtype)
    nu = noise_lib.sample(noise, query_key, centered.shape, scale2, centered.dtype)
    return first_true(centered + nu >= eta)


@functools.partial(jax.jit, static_argnames=("noise", "dtype"))
@sharded.auto_axes
def _first_passage(key, queries, threshold, epsilon1, epsilon2, sensitivity, *, noise, dtype):
    centered = center(queries, threshold, dtype)
    scale1, scale2 = noise_scales(centered.dtype, epsilon1, epsilon2, sensitivity)
    return halting_indices(key, centered / scale2, scale1, scale2, noise=noise, count=1)[0]


def _blocked_query_noise(noise: noise_lib.Sampler, key, start, size: int, scale, dtype) -> jax.Array:
    """Noise of queries ``start, ..., start+size-1`` of a blocked stream: query ``i`` uses
    ``fold_in(key, i)``, so a query's noise does not depend on how the stream is cut into blocks."""
    index = start + jnp.arange(size, dtype=jnp.uint32)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(index)
    return jax.vmap(lambda k: noise_lib.sample(noise, k, (), scale, dtype))(keys)


@functools.partial(jax.jit, static_argnames=("noise", "block_size", "dtype"))
@sharded.auto_axes
def _blocked(key, queries, threshold, epsilon1, epsilon2, sensitivity, *, noise, block_size, dtype):
    centered = center(queries, threshold, dtype)
    scale1, scale2 = noise_scales(centered.dtype, epsilon1, epsilon2, sensitivity)
    n = centered.shape[0]
    n_blocks = ceil_div(n, block_size)
    padded = jnp.pad(centered, (0, n_blocks * block_size - n))
    threshold_key, query_key = jax.random.split(key)
    eta = noise_lib.sample(noise, threshold_key, (), scale1, centered.dtype)

    def not_done(carry):
        block, found = carry
        return (found < 0) & (block < n_blocks)

    def step(carry):
        block, _ = carry
        start = block * block_size
        values = lax.dynamic_slice(padded, (start,), (block_size,))
        offset = start.astype(jnp.uint32)
        nu = _blocked_query_noise(noise, query_key, offset, block_size, scale2, values.dtype)
        in_stream = start + jnp.arange(block_size) < n
        hit = first_true((values + nu >= eta) & in_stream)
        return block + 1, jnp.where(hit >= 0, start + hit, -1).astype(jnp.int32)

    return lax.while_loop(not_done, step, (jnp.int32(0), jnp.int32(-1)))[1]


def above_threshold_blocked(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon1: ArrayLike,
    epsilon2: ArrayLike,
    *,
    noise: AboveThresholdNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    block_size: int = 1024,
) -> jax.Array:
    """AboveThreshold over a long stream, ``block_size`` queries at a time, stopping at the first hit.

    Same mechanism, guarantee and output as :func:`above_threshold` (Durfee 2023, Algorithm 1), but
    query ``i``'s noise is drawn from ``fold_in(query_key, i)``: for a given key the result is the
    same for every ``block_size`` (it is *not* the same draw as :func:`above_threshold`, whose noise
    is drawn in one piece). Work stops after the block that holds the first hit, which pays off when
    the halting index is typically far below ``n``; under ``vmap`` the loop runs until every batch
    member has halted.

    ``threshold``, ``epsilon1``, ``epsilon2`` and ``sensitivity`` may be traced; ``noise`` and
    ``block_size`` (>= 1, the number of queries per loop step) are static. Invalid traced input
    gives -1, as in :func:`above_threshold`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = above_threshold_blocked(jax.random.key(0), jnp.arange(10_000.0), 30.0, 1.0, 1.0,
      ...                             noise="exponential", block_size=256)
    """
    checks = Checks()
    epsilon1, epsilon2 = check_noise_epsilons(noise, epsilon1, epsilon2, checks)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    block_size = check_int(block_size, "block_size", minimum=1)
    queries, threshold, dtype = checked_queries(checks, queries, threshold)
    return checks.guard(
        _blocked(
            key,
            queries,
            threshold,
            epsilon1,
            epsilon2,
            sensitivity,
            noise=noise,
            block_size=block_size,
            dtype=dtype,
        )
    )


@elementwise("epsilon1", "epsilon2", "sensitivity")
def above_threshold_guarantee(
    epsilon1: float,
    epsilon2: float,
    *,
    noise: AboveThresholdNoise = "laplace",
    sensitivity: float = 1.0,
    monotonic: bool = False,
) -> PureDP:
    """The guarantee of one AboveThreshold run (Durfee 2023, Lemmas 3.1, 3.2, Cor. 3.1, Theorem 1).

    Host-side, for the accountant: the budgets must be concrete numbers, or arrays of them for a
    grid (an object array of guarantees, see :func:`~dpjax._src.accounting.elementwise.elementwise`).

    Args:
      epsilon1: threshold budget; epsilon2: query budget (both > 0).
      noise: the noise family; "gumbel" requires ``epsilon1 == epsilon2``.
      sensitivity: the queries' sensitivity the noise is calibrated to (> 0); the guarantee holds
        for queries of at most this sensitivity, whatever its value.
      monotonic: the queries are monotonic (Def. 3.1): for every neighboring pair they all move
        in the same direction (e.g. counting queries ``|{x_j < t_i}|`` under swap). A property of
        the queries, not an option of the mechanism: the same run has the tighter guarantee.

    Returns:
      ``PureDP(epsilon1 + 2*epsilon2)``, or ``PureDP(epsilon1 + epsilon2, rho=(epsilon1/2 +
      epsilon2)^2/2)`` when monotonic: Theorem 1's zCDP bound, via the range-bounded property, is
      tighter than converting the pure epsilon; the accountant uses it for zCDP budgets.

    Example:
      >>> above_threshold_guarantee(0.5, 0.5, monotonic=True)
      PureDP(epsilon=1.0, rho=0.28125)
      >>> above_threshold_guarantee(0.5, 0.5, monotonic=True).to_zcdp()
      ZCDP(rho=0.28125)
    """
    epsilon1, epsilon2 = check_noise_epsilons(noise, epsilon1, epsilon2)
    check_positive(sensitivity, "sensitivity")
    if monotonic:
        tight = epsilon1 / 2 + epsilon2
        return PureDP(epsilon1 + epsilon2, rho=0.5 * (tight * tight))
    return PureDP(epsilon1 + 2 * epsilon2)
