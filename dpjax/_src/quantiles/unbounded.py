"""The unbounded quantile mechanism (UQE): Durfee (2023), "Unbounded Differentially Private Quantile
and Maximum Estimation", Algorithm 2, and its fully unbounded version, Algorithm 4 (Appendix B.1).

UQE runs AboveThreshold with threshold ``T = q*n`` over the counting queries
``f_i = #{j : x_j - lower + 1 < beta**i}``, i = 1, 2, ..., and releases ``beta**k + lower - 1`` where k
is the first query whose noisy count reaches the noisy threshold. No upper bound is needed.

Kernel design (Durfee 2023, §4.2 "simple and scalable implementation", vectorised): one O(n)
pass bins the data on the geometric grid exactly
(:mod:`dpjax._src.quantiles.unbounded_bins`); each trial then samples the halting query exactly in
O(log bins) expected time (thinning far below the threshold, literal draws near it, and the constant
stretch beyond the data maximum in closed form; :mod:`dpjax._src.svt.monotone_halting`), so no
trial runs long. Under ``vmap`` over keys the binning and that sampler's preparation are done once;
one release takes the sampler without preparation (``"blocks"``, same law; :func:`halting`).

Traced parameters: the quantile level, epsilon and its split, the lower bound and beta
are values that may be traced (inside ``jit``, ``vmap``, ``scan``); only ``max_queries``, the cap on
the halting query, is static, because it sizes the count table of traced inputs. It replaces the
cap the code used to derive from beta with Python math: the cap in force is the smaller of
``max_queries`` and the largest index whose candidate is finite in the working dtype, computed with
``jnp`` in that dtype from ``beta`` (traced or not), and a halt beyond it is flagged ``truncated``.

Privacy (swap neighbors, Def. 2.1, the paper's default): the counts are monotonic with
sensitivity 1 (Lemma 4.1), so UQE is ``(epsilon1 + epsilon2)``-DP (Lemma 3.1, Cor. 3.1, Lemma 3.2)
and ``(epsilon1/2 + epsilon2)**2 / 2``-zCDP (Theorem 1), with ``epsilon1 = split*epsilon`` and
``epsilon2 = (1-split)*epsilon``. Add/remove neighbors (Def. B.1): ``max{(1-q) epsilon1,
q epsilon1 + epsilon2}``-DP (Lemma B.1; Cor. B.1 with epsilon1 = epsilon2). See
:func:`unbounded_guarantee`.

UQE is not scale invariant: the grid resolution near ``lower`` is about ``beta - 1`` in the data's
units, and small n or epsilon make early halting likely (paper §6.4). Float noise is not hardened
against floating-point side channels.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Literal, NamedTuple, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import sharded
from dpjax._src.accounting.composition import compose
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import Guarantee, PureDP
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.host_checks import (
    check_choice,
    check_epsilon,
    check_int,
    check_probability,
    float_dtype,
    is_traced,
)
from dpjax._src.quantiles.unbounded_bins import (
    INDEX_LIMIT,
    cumulative_counts,
    grid_edges,
    log_beta,
    prefix_sums,
    query_cap,
    static_size,
)
from dpjax._src.signatures import arguments_of
from dpjax._src.svt.above_threshold import above_threshold_guarantee
from dpjax._src.svt.monotone_halting import METHODS as HALTING_METHODS
from dpjax._src.svt.monotone_halting import halting_index, split_threshold
from dpjax._src.validation import Checks

__all__ = [
    "UnboundedNoise",
    "UnboundedResult",
    "fully_unbounded",
    "fully_unbounded_guarantee",
    "unbounded",
    "unbounded_guarantee",
    "unbounded_result",
]

UnboundedNoise: TypeAlias = Literal["exponential", "laplace", "gumbel"]
"""UQE's noise (static); the default is exponential (see :func:`unbounded`)."""
NOISES: tuple[UnboundedNoise, ...] = get_args(UnboundedNoise)
_GUMBEL_SPLIT = "noise='gumbel' requires epsilon1 == epsilon2 (split=0.5), Lemma 3.2."
# The static cap K on the halting query: the count table of traced data (or of a traced lower bound
# or beta) has K + 1 entries. Above the paper's float32 limit at beta = 1.001 (86,6xx queries).
DEFAULT_MAX_QUERIES = 2**17


class UnboundedResult(NamedTuple):
    """A UQE release with its diagnostics.

    Attributes:
      estimate: the released value ``beta**index + lower - 1`` (working float dtype, scalar; NaN when
        a traced input is invalid).
      index: int32 halting query k (1-based for Algorithm 2; -1 when a traced input is invalid).
      truncated: bool, True when the halting query lay beyond the query cap (``max_queries``, or the
        largest finite candidate if smaller): ``index`` is then that cap (truncation is post-processing).
    """

    estimate: jax.Array
    index: jax.Array  # type: ignore[assignment]  # the public field shadows tuple.index (a method)
    truncated: jax.Array


class _Grid(NamedTuple):
    """The geometric grid of one call: ``log_b = log1p(beta - 1)`` in the working dtype, the int32
    query cap (both values, traced with ``beta``) and the static cap that sizes the count table."""

    log_b: jax.Array
    cap: jax.Array
    static_cap: int


def check_beta(checks: Checks, beta, dtype):
    """The grid ratio: a finite real number > 1, also once rounded to the working ``dtype``."""
    beta = checks.real(beta, "beta", minimum=1.0, open_minimum=True)
    message = f"beta must be > 1 in the working dtype {jnp.dtype(dtype).name}"
    if is_traced(beta):
        checks.record(jnp.asarray(beta, dtype) > 1, message + ".")
    elif not np.asarray(beta, dtype) > 1:
        raise ValueError(f"{message}, got {beta} (it rounds to 1).")
    return beta


def check_split(checks: Checks, split, noise: str):
    """The share of epsilon spent on the threshold, in (0, 1); Gumbel noise needs 0.5 (Lemma 3.2)."""
    check_choice(noise, "noise", NOISES)
    split = checks.probability(split, "split", open_low=True, open_high=True)
    if noise == "gumbel":
        if is_traced(split):
            checks.record(split == 0.5, _GUMBEL_SPLIT)
        elif split != 0.5:
            raise ValueError(_GUMBEL_SPLIT)
    return split


def check_max_queries(max_queries) -> int:
    """The static cap on the halting query (it sizes the count table of traced inputs)."""
    return check_int(max_queries, "max_queries", minimum=1, maximum=INDEX_LIMIT)


def usable(checks: Checks, value, fallback):
    """``value``, or ``fallback`` where a recorded check fails: an invalid traced input then runs the
    kernel on harmless values (no long loop) and :meth:`Checks.guard` marks the output."""
    if not (checks.traced and is_traced(value)):
        return value
    return jnp.where(checks.valid(), value, jnp.asarray(fallback, value.dtype))


def split_epsilon(epsilon, split, noise: str) -> tuple[float, float]:
    """Host side: ``(epsilon1, epsilon2) = (split*epsilon, (1-split)*epsilon)``; Gumbel needs them equal."""
    epsilon = check_epsilon(epsilon)
    split = check_probability(split, "split", open_low=True, open_high=True)
    check_choice(noise, "noise", NOISES)
    if noise == "gumbel" and split != 0.5:
        raise ValueError(_GUMBEL_SPLIT)
    return split * epsilon, (1.0 - split) * epsilon


def _budget(epsilon, split, dtype) -> tuple[jax.Array, jax.Array]:
    """In the mechanisms: ``(split*epsilon, (1-split)*epsilon)`` computed in ``dtype`` (traced or not)."""
    epsilon, split = jnp.asarray(epsilon, dtype), jnp.asarray(split, dtype)
    return split * epsilon, (jnp.ones((), dtype) - split) * epsilon


@functools.partial(jax.jit, static_argnames=("max_queries", "dtype"))
def _grid_values(beta, *, max_queries: int, dtype):
    log_b = log_beta(beta, dtype)
    return log_b, query_cap(log_b, max_queries, dtype)


def query_grid(beta, max_queries: int, dtype) -> _Grid:
    """The grid of ``beta``; computed now when ``beta`` is concrete (not constant-folded under ``jit``,
    so a concrete beta gives the same bits as a traced one); the table is at most ``max_queries + 1``
    long."""
    if is_traced(beta):
        log_b, cap = _grid_values(beta, max_queries=max_queries, dtype=dtype)
        return _Grid(log_b, cap, max_queries)
    with jax.ensure_compile_time_eval():
        log_b, cap = _grid_values(beta, max_queries=max_queries, dtype=dtype)
    return _Grid(log_b, cap, int(cap))


def tabulate(x, lower, beta, g: _Grid, dtype, *, negate: bool = False, sums: bool = False):
    """The cumulative counts (and, with ``sums``, the prefix sums of ``max(x, lower)``) of the grid.

    Concrete data and parameters are binned now, once, into a table just past the data maximum
    (under ``vmap`` over keys this is the only O(n) work); otherwise the table has the static
    cap + 1 entries and the binning is part of the compiled graph.
    """
    concrete = not any(is_traced(v) for v in (x, lower, beta))
    if concrete:
        size = static_size(x, lower, beta, g.static_cap, dtype, negate=negate)
    else:
        size = g.static_cap + 1
    context = jax.ensure_compile_time_eval() if concrete else contextlib.nullcontext()
    with context:
        counts = cumulative_counts(
            x, lower, g.log_b, g.cap, size=size, dtype=dtype, negate=negate, layout=sharded.leading_axes(x)
        )
        prefix = prefix_sums(x, lower, g.log_b, g.cap, size=size, dtype=dtype) if sums else None
    return counts, prefix


class _CheckedInputs(NamedTuple):
    """UQE's validated inputs (see :func:`_checked_inputs`)."""

    x: jax.Array
    dtype: np.dtype
    q: jax.Array | float
    epsilon: jax.Array | float
    split: jax.Array | float
    beta: jax.Array | float
    grid: _Grid


def _checked_inputs(checks: Checks, x, q, epsilon, split, beta, noise: str, max_queries) -> _CheckedInputs:
    """Validates the inputs every UQE variant shares (eagerly when concrete, recorded in ``checks``
    when traced), replaces invalid traced values by usable ones (the output is then marked by
    ``checks.guard``) and builds the query grid."""
    x = checks.data(x, allow_infinite=True)
    dtype = float_dtype(x)
    q = checks.probability(q, "q", open_low=True)
    epsilon = checks.epsilon(epsilon)
    split = check_split(checks, split, noise)
    beta = check_beta(checks, beta, dtype)
    max_queries = check_max_queries(max_queries)
    q, epsilon, split = usable(checks, q, 0.5), usable(checks, epsilon, 1.0), usable(checks, split, 0.5)
    beta = usable(checks, beta, 2.0)
    return _CheckedInputs(x, dtype, q, epsilon, split, beta, query_grid(beta, max_queries, dtype))


@functools.partial(jax.jit, static_argnames=("noise", "dtype", "first", "method"))
def halting(key, counts, q, n, epsilon1, epsilon2, cap, *, noise, dtype, first, method=_auto.AUTO):
    """AboveThreshold's halting index over ``counts`` with ``T = q*n`` computed in ``dtype``:
    ``(k, truncated)`` (see :func:`~dpjax._src.svt.monotone_halting.halting_index`).

    ``method="auto"`` (the rule of :mod:`dpjax._src.auto`): ``"fast"`` under ``vmap`` over keys with the
    counts fixed (its key-independent prefix log-masses of the table are then built once), and
    ``"blocks"`` for one release, which has no preparation to amortize (at a table of 16,384
    counts the fast sampler's preparation alone costs several times a whole blocks release). Same
    law, different random streams.
    """
    threshold = split_threshold(jnp.asarray(q, dtype) * jnp.asarray(n, dtype))

    def path(name):
        def kernel(key, counts, threshold, epsilon1, epsilon2, cap):
            return halting_index(
                key,
                counts,
                threshold,
                epsilon1,
                epsilon2,
                noise=noise,
                dtype=dtype,
                first=first,
                cap=cap,
                method=name,
            )

        return kernel

    paths = {name: path(name) for name in HALTING_METHODS}
    return _auto.run(
        method, paths, key, counts, threshold, epsilon1, epsilon2, cap, fast="fast", single="blocks"
    )


def unbounded_result(
    key: jax.Array,
    x: ArrayLike,
    q: ArrayLike,
    epsilon: ArrayLike,
    *,
    lower: ArrayLike = 0.0,
    beta: ArrayLike = 1.001,
    noise: UnboundedNoise = "exponential",
    split: ArrayLike = 0.5,
    neighbors: NeighborsLike = Neighbors.SWAP,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> UnboundedResult:
    """UQE (Durfee 2023, Algorithm 2) with its halting index and truncation flag.

    Same arguments as :func:`unbounded`; returns an :class:`UnboundedResult` (on invalid traced
    input: estimate NaN, index -1).
    """
    checks = Checks()
    x, dtype, q, epsilon, split, beta, g = _checked_inputs(
        checks, x, q, epsilon, split, beta, noise, max_queries
    )
    lower = usable(checks, checks.real(lower, "lower"), 0.0)
    neighbors = Neighbors.check(neighbors)
    counts, _ = tabulate(x, lower, beta, g, dtype)
    result = _release(
        key, counts, q, x.shape[0], epsilon, split, lower, g.log_b, g.cap, noise=noise, dtype=dtype
    )
    return checks.guard(result)


@functools.partial(jax.jit, static_argnames=("noise", "dtype"))
def _release(key, counts, q, n, epsilon, split, lower, log_b, cap, *, noise, dtype) -> UnboundedResult:
    """The key-dependent part of :func:`unbounded_result` on the tabulated counts, as one compiled
    call (an eager release pays no per-operation dispatch)."""
    epsilon1, epsilon2 = _budget(epsilon, split, dtype)
    k, truncated = halting(key, counts, q, n, epsilon1, epsilon2, cap, noise=noise, dtype=dtype, first=1)
    return UnboundedResult(jnp.asarray(lower, dtype) + grid_edges(k, log_b), k, truncated)


@arguments_of(unbounded_result)
def unbounded(key: jax.Array, x: ArrayLike, q: ArrayLike, epsilon: ArrayLike, **options: Any) -> jax.Array:
    """Differentially private q-quantile of data bounded below only (UQE).

    Durfee (2023), Algorithm 2: AboveThreshold (Alg. 1) with ``T = q*n`` over
    ``f_i = #{x_j - lower + 1 < beta**i}``, i = 1, 2, ...; the release is ``beta**k + lower - 1``.

    Neighbors and guarantee: ``epsilon``-DP under swap (one record changed, n public), i.e.
    ``epsilon1 + epsilon2`` with ``epsilon1 = split*epsilon`` on the threshold and
    ``epsilon2 = (1-split)*epsilon`` on each query, and ``(epsilon1/2 + epsilon2)**2/2``-zCDP
    (Theorem 1). Under add/remove the same release is ``max{(1-q) epsilon1, q epsilon1 + epsilon2}``-DP
    (Lemma B.1); ``neighbors`` only selects which of these the caller means (it does not change the
    computation). See :func:`unbounded_guarantee`.

    Traced parameters: ``q``, ``epsilon``, ``split``, ``lower`` and ``beta`` may be traced (e.g. a
    clipping quantile carried in a training state under ``jit``, or ``vmap`` over a grid); for the
    same key a traced call gives exactly what the concrete call gives. ``max_queries`` is static
    because it sizes the count table. Concrete data and parameters (e.g. ``vmap`` over keys) are
    binned once into a table just past the data maximum; traced data, ``lower`` or ``beta`` are
    binned in the graph into a table of ``max_queries + 1`` counts, so a small ``max_queries`` makes
    that path cheaper. Concrete invalid values raise ``ValueError`` before any randomness; a traced
    invalid value (``q`` outside (0, 1], ``epsilon`` <= 0, NaN or inf, ...) or NaN data make the
    output NaN (and :func:`unbounded_result`'s index -1).

    Args:
      key: a ``jax.random`` key.
      x: 1-D data, n >= 1 (may be traced). Points below ``lower`` (and -inf) count below every
        candidate; +inf counts above every candidate. NaN is refused (NaN output when traced).
      q: the quantile, in (0, 1] (may be traced).
      epsilon: total privacy parameter, > 0 (may be traced).
      lower: a data-independent lower bound, finite (may be traced; points below it are allowed).
      beta: grid ratio > 1 (may be traced; the paper uses 1.001; 1.01 for clipping). The grid uses
        ``beta`` rounded to the working dtype.
      noise: "exponential" (default: the noise of the paper's experiments, Durfee 2023 Sec. 5; it has
        Laplace's guarantee, Cor. 3.1, with one-sided noise and a smaller error on these counts),
        "laplace" or "gumbel" (requires split=0.5) (static).
      split: fraction of ``epsilon`` spent on the threshold, in (0, 1) (may be traced).
      neighbors: a :class:`~dpjax.accounting.Neighbors` (or its value); documents the intended
        relation for the guarantee (the computation is the same under both) (static).
      max_queries: the cap K on the halting query, 1 <= K <= 2**24 (static). The largest candidate
        is ``beta**K + lower - 1``; a later halt is released as that candidate and flagged
        ``truncated`` (post-processing, no privacy cost). Where ``beta**K - 1`` would overflow the
        working dtype the cap is the largest finite one instead (86,6xx in float32 at beta = 1.001).
        The default 2**17 therefore covers the whole float32 range at beta >= 1.001, and data up to
        about ``lower + 1e57`` in float64 at beta = 1.001; pick ``K >= log(max(x) - lower + 1) /
        log(beta)`` to rule truncation out (e.g. 4096 at beta = 1.01 reaches 5e17).

    Returns:
      A scalar in the data's float dtype (the default float for integer data), on the grid
      ``{beta**k + lower - 1 : 1 <= k <= K}``; NaN on invalid traced input. Use
      :func:`unbounded_result` for k and the truncation flag.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.arange(1000.0)
      >>> est = unbounded(jax.random.key(0), x, 0.9, 1.0)  # close to 900
    """
    return unbounded_result(key, x, q, epsilon, **options).estimate


@elementwise("q", "epsilon", "split")
def unbounded_guarantee(
    q: float,
    epsilon: float,
    *,
    noise: UnboundedNoise = "exponential",
    split: float = 0.5,
    neighbors: NeighborsLike = Neighbors.SWAP,
) -> PureDP:
    """The guarantee of :func:`unbounded` (also of each call inside :func:`fully_unbounded`).

    Takes :func:`unbounded`'s privacy arguments, in its order.

    * swap: the counts are monotonic with sensitivity 1 (Lemma 4.1), so this is AboveThreshold's
      monotonic guarantee (:func:`dpjax.svt.above_threshold_guarantee`): ``PureDP(epsilon1 + epsilon2)``
      carrying Theorem 1's ``rho = (epsilon1/2 + epsilon2)**2/2``; ``q`` is validated, unused.
    * add_remove: ``PureDP(max{(1-q) epsilon1, q epsilon1 + epsilon2})`` (Lemma B.1 with Cor. A.1;
      Cor. B.1 when epsilon1 = epsilon2); these queries are not monotonic, so Theorem 1 does not
      apply and the zCDP form is the generic conversion.

    Host side: concrete numbers, or arrays of ``q``, ``epsilon``, ``split`` for a grid (an object
    array of guarantees); traced values are refused.

    Example:
      >>> unbounded_guarantee(0.5, 1.0)
      PureDP(epsilon=1.0, rho=0.28125)
      >>> unbounded_guarantee(0.99, 1.0, neighbors="add_remove")
      PureDP(epsilon=0.995)
    """
    q = check_probability(q, "q", open_low=True)
    epsilon1, epsilon2 = split_epsilon(epsilon, split, noise)
    if Neighbors.check(neighbors) == Neighbors.SWAP:
        return above_threshold_guarantee(epsilon1, epsilon2, monotonic=True, noise=noise)
    return PureDP(max((1 - q) * epsilon1, q * epsilon1 + epsilon2))


def fully_unbounded(
    key: jax.Array,
    x: ArrayLike,
    q: ArrayLike,
    epsilon: ArrayLike,
    *,
    beta: ArrayLike = 1.001,
    noise: UnboundedNoise = "exponential",
    split: ArrayLike = 0.5,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> jax.Array:
    """Differentially private q-quantile of data with no bounds at all.

    Durfee (2023), Algorithm 4 (Appendix B.1): two AboveThreshold calls with queries from i = 0, the
    first with ``T = q*n`` over ``f_i = #{x_j + 1 < beta**i}`` (the positives), the second with
    ``T = (1-q)*n`` over ``g_i = #{x_j - 1 > -beta**i}`` (the negatives, i.e. the first call on -x).
    If the first halts at k > 0 the release is ``beta**k - 1``; else if the second halts at k > 0 it is
    ``1 - beta**k``; else 0. Both calls always run (the first takes precedence).

    Neighbors and guarantee: swap; each call gets ``epsilon/2`` split as in :func:`unbounded`, so the
    total is ``epsilon``-DP and ``2 (epsilon1/2 + epsilon2)**2/2``-zCDP with per-call epsilon1,
    epsilon2 (see :func:`fully_unbounded_guarantee`).

    Args:
      key, x, q, beta, noise, split, max_queries: as in :func:`unbounded` (``q`` in (0, 1]; ``x``,
        ``q``, ``beta`` and ``split`` may be traced; ``noise`` and ``max_queries`` are static).
      epsilon: total privacy parameter over both calls, > 0 (may be traced).

    Returns:
      A scalar on the grid ``{beta**k - 1} U {1 - beta**k} U {0}``; NaN when a traced input is
      invalid (or the traced data contain NaN).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(-50.0, 50.0, 1001)
      >>> est = fully_unbounded(jax.random.key(0), x, 0.25, 1.0)  # close to -25
    """
    checks = Checks()
    x, dtype, q, epsilon, split, beta, g = _checked_inputs(
        checks, x, q, epsilon, split, beta, noise, max_queries
    )
    epsilon1, epsilon2 = _budget(jnp.asarray(epsilon, dtype) * jnp.asarray(0.5, dtype), split, dtype)
    key_up, key_down = jax.random.split(key)
    k = []
    for key_half, level, negate in ((key_up, q, False), (key_down, 1 - jnp.asarray(q, dtype), True)):
        counts, _ = tabulate(x, 0.0, beta, g, dtype, negate=negate)
        k.append(
            halting(
                key_half,
                counts,
                level,
                x.shape[0],
                epsilon1,
                epsilon2,
                g.cap,
                noise=noise,
                dtype=dtype,
                first=0,
            )[0]
        )
    up, down = grid_edges(k[0], g.log_b), -grid_edges(k[1], g.log_b)
    return checks.guard(jnp.where(k[0] > 0, up, jnp.where(k[1] > 0, down, jnp.zeros((), dtype))))


@elementwise("q", "epsilon", "split")
def fully_unbounded_guarantee(
    q: float, epsilon: float, *, noise: UnboundedNoise = "exponential", split: float = 0.5
) -> Guarantee:
    """The guarantee of :func:`fully_unbounded` (swap; it takes no ``neighbors``: Lemma 4.1's
    monotonicity is what its two calls use): the composition of two calls of
    :func:`unbounded_guarantee` at ``epsilon/2`` each (pure: ``epsilon``; zCDP: twice Theorem 1's
    rho). Host side: concrete numbers, or arrays of them for a grid (an object array of guarantees)."""
    part = unbounded_guarantee(q, check_epsilon(epsilon) / 2, split=split, noise=noise)
    return compose([part, part])
