"""The exponential mechanism for one quantile (EMQ) and IndExp, one EMQ per quantile level.

Smith (2011), "Privacy-preserving statistical estimation with optimal convergence rates", Alg. 2;
in the form of Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1 ("IndExp"). The output is in gap
``i`` of the clamped sorted data (see :mod:`dpjax._src.quantiles.intervals`) with probability

    P[i] ∝ (x_{i+1} - x_i) * exp(-(epsilon / (2 Delta)) * |i - q n|),

then uniform inside the gap: the exponential mechanism with utility ``-| #{x < o} - q n |``, whose
sensitivity is ``Delta = 1`` under swap and ``max(q, 1 - q)`` under add/remove (the target ``q n``
moves by ``q`` when a record is added). Everything is in log space (zero-width gaps get weight
exactly 0). One release draws the gap by Gumbel-max (``method="literal"``); under ``vmap`` over keys
with the data fixed ``method="auto"`` (the default) draws it from a log-mass heap of the same
log-weights, built once (:mod:`dpjax._src.quantiles.em_sampler`, O(log n) per release, the same law), and
the sort and the scores are computed once. The levels, epsilon and the bounds may be traced (only
the number of levels is static): an invalid traced value, or NaN data under ``jit``, makes the output NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import RangeBounded
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.host_checks import check_choice, check_epsilon, float_dtype
from dpjax._src.quantiles import em_sampler as _em_sampler
from dpjax._src.quantiles.intervals import (
    check_bounds,
    check_inputs,
    gumbel_argmax,
    sorted_gaps,
    uniform_in_gaps,
)
from dpjax._src.validation import Checks

QuantileMethod: TypeAlias = Literal["auto", "literal", "tree"]
"""How the gap is drawn (static): ``"auto"`` (default), ``"literal"`` or ``"tree"`` (see :func:`emq`)."""
_METHODS: tuple[QuantileMethod, ...] = get_args(QuantileMethod)


def _emq_sensitivity(q, neighbors: NeighborsLike = Neighbors.SWAP):
    """Sensitivity of the rank utility ``-|#{x < o} - q n|``: 1 (swap), ``max(q, 1 - q)`` (add/remove).

    ``q`` may be an array (elementwise) and traced.
    """
    return 1.0 if neighbors == "swap" else jnp.maximum(q, 1 - q)


def _gap_logits(log_width, q, epsilon, neighbors: NeighborsLike = Neighbors.SWAP):
    """Log weights of the gaps for level(s) ``q``: ``log width - epsilon/(2 Delta) |i - q n|``.

    ``q`` and ``epsilon`` may be traced and are used in ``log_width``'s dtype; ``q`` may be an
    array, the result then has shape ``q.shape + (n + 1,)``.
    """
    dtype = log_width.dtype
    n = log_width.shape[0] - 1
    q = jnp.asarray(q, dtype)[..., None]
    c = jnp.asarray(epsilon, dtype) / (2 * _emq_sensitivity(q, neighbors))
    ranks = jnp.arange(n + 1, dtype=dtype)
    return log_width - c * jnp.abs(ranks - q * n)


def _releases(draw, key, x, levels, epsilon_each, lower, upper, neighbors) -> jax.Array:
    """One EMQ release per level in ``levels`` (shape ``(m,)``), each with ``epsilon_each``; sorted.
    ``draw(key, logits)`` picks one gap per row of the ``(m, n + 1)`` log-weights."""
    edges, log_width = sorted_gaps(x, lower, upper)
    logits = _gap_logits(log_width, levels, epsilon_each, neighbors)
    choice_key, uniform_key = jax.random.split(key)
    index = draw(choice_key, logits)
    return jnp.sort(uniform_in_gaps(uniform_key, edges, index))


@functools.partial(jax.jit, static_argnames=("neighbors",))
@sharded.auto_axes
def _literal_releases(key, x, levels, epsilon_each, lower, upper, neighbors: NeighborsLike = Neighbors.SWAP):
    """:func:`_releases` by Gumbel-max (n + 1 Gumbel variates per level). Compiled, so that an eager
    call runs the same fused arithmetic as a call inside ``jit``/``vmap``."""
    return _releases(gumbel_argmax, key, x, levels, epsilon_each, lower, upper, neighbors)


def _tree_draw(key, logits) -> jax.Array:
    """One gap per row of ``logits`` from its log-mass heap (:mod:`dpjax._src.quantiles.em_sampler`); the
    heaps are key independent, so under ``vmap`` over keys they are built once."""
    keys = jax.random.split(key, logits.shape[0])
    return jax.vmap(lambda k, row: _em_sampler.em_index(k, _em_sampler.em_tree(row)))(keys, logits)


@functools.partial(jax.jit, static_argnames=("neighbors",))
@sharded.auto_axes
def _tree_releases(key, x, levels, epsilon_each, lower, upper, neighbors: NeighborsLike = Neighbors.SWAP):
    """:func:`_releases` by the top-down Gumbel process: O(n) preparation per level, O(log n) per draw."""
    return _releases(_tree_draw, key, x, levels, epsilon_each, lower, upper, neighbors)


def _independent_releases(
    key, x, levels, epsilon_each, lower, upper, neighbors: NeighborsLike = Neighbors.SWAP, method="auto"
) -> jax.Array:
    """The shared body of EMQ, IndExp and AppIndExp (they differ only in how the budget is split):
    one EMQ release per level, sorted, by ``method`` (validated by the callers; ``"auto"``: the rule
    of :mod:`dpjax._src.auto`). The levels, budget and bounds may be traced."""
    paths = {
        "literal": functools.partial(_literal_releases, neighbors=neighbors),
        "tree": functools.partial(_tree_releases, neighbors=neighbors),
    }
    return _auto.run(method, paths, key, x, levels, epsilon_each, lower, upper, fast="tree")


def emq(
    key: jax.Array,
    x: ArrayLike,
    q: ArrayLike,
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: QuantileMethod = "auto",
) -> jax.Array:
    """The exponential mechanism for the ``q``-quantile of ``x`` within ``bounds`` (Smith 2011, Alg. 2).

    Neighboring relation: ``"swap"`` (default; one record replaced, sensitivity 1) or
    ``"add_remove"`` (sensitivity ``max(q, 1 - q)``). Guarantee: pure ``epsilon``-DP
    (:func:`emq_guarantee`).

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty; ``n`` static); values are clamped to ``bounds``.
      q: quantile level in [0, 1] (may be traced).
      epsilon: privacy parameter, > 0 (may be traced).
      bounds: ``(a, b)`` with ``a < b``, data independent (may be traced: either end, or an array
        of shape ``(2,)``).
      neighbors: a :class:`~dpjax.accounting.Neighbors` or its value, "swap" or "add_remove" (static).
      method: how the gap is drawn (static), the same law each way: ``"literal"``, Gumbel-max over
        the n + 1 gap log-weights (n + 1 variates per release); ``"tree"``, the top-down Gumbel
        process over a log-mass heap of the log-weights (:mod:`dpjax._src.quantiles.em_sampler`: O(n)
        preparation, key independent, then O(log n) per release); ``"auto"`` (default), the rule of
        :mod:`dpjax._src.auto`: ``"literal"`` for one release, ``"tree"`` under ``vmap`` over keys with
        the data fixed (the heap is then built once per data and level). With ``"auto"`` the random
        stream depends on the batching; name the method to fix it.

    Returns:
      A scalar in ``[a, b]``, in ``x``'s float dtype (at least float32; the default float for integer
      data); NaN when a traced input is invalid (``q``, ``epsilon``, ``bounds``) or traced data
      contain NaN or infinities. Concrete invalid inputs raise a ``ValueError`` before any
      randomness is used.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.array([0.3, -1.2, 0.7, 0.7, 2.0])
      >>> median = emq(jax.random.key(0), x, 0.5, 1.0, bounds=(-2.0, 2.0))
    """
    checks = Checks()
    lower, upper = check_bounds(checks, bounds)
    q = checks.probability(q, "q")
    epsilon = checks.epsilon(epsilon)
    neighbors = Neighbors.check(neighbors)
    check_choice(method, "method", _METHODS)
    x = checks.data(x, allow_infinite=False, allow_empty=True)
    levels = jnp.reshape(jnp.asarray(q, float_dtype(x)), (1,))
    return checks.guard(_independent_releases(key, x, levels, epsilon, lower, upper, neighbors, method)[0])


@elementwise("epsilon")
def emq_guarantee(epsilon: float, *, neighbors: NeighborsLike = Neighbors.SWAP) -> RangeBounded:
    """EMQ's guarantee: ``RangeBounded(epsilon)`` under ``neighbors``.

    EMQ is the exponential mechanism (Smith 2011) with weights ``exp(epsilon u / (2 Delta))`` over a
    data-independent base measure, ``Delta`` the utility's sensitivity under the relation
    (:func:`_emq_sensitivity`): the privacy loss at every output lies in an interval of width
    ``epsilon``, so it is epsilon-range-bounded (Durfee and Rogers 2019, Lemma 3.1), hence epsilon-DP
    and epsilon^2/8-zCDP (Cesar and Rogers 2021, Lemma 3.4), which is what OpenDP charges for its
    private quantile.
    """
    Neighbors.check(neighbors)
    return RangeBounded(check_epsilon(epsilon))


def ind_exp(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: QuantileMethod = "auto",
) -> jax.Array:
    """IndExp: ``m`` independent EMQ releases with ``epsilon / m`` each, sorted.

    Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1 (baseline); each release is Smith (2011),
    Alg. 2. Guarantee: pure ``epsilon``-DP by basic composition (:func:`ind_exp_guarantee`).
    Neighboring relation as in :func:`emq`.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty; ``n`` static).
      qs: ``m`` strictly increasing levels in [0, 1] (may be traced; ``m`` is static).
      epsilon: total privacy parameter, > 0 (may be traced); ``epsilon / m`` per release, computed
        in the working dtype.
      bounds: ``(a, b)`` with ``a < b`` (may be traced).
      neighbors: a :class:`~dpjax.accounting.Neighbors` or its value, "swap" or "add_remove" (static).
      method: ``"auto"`` (default), ``"literal"`` or ``"tree"``, as in :func:`emq` (one heap per
        level; static).

    Returns:
      Shape ``(m,)``, sorted, in ``[a, b]``; all NaN when a traced input is invalid or traced data
      contain NaN or infinities.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> deciles = ind_exp(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-10, 10))
    """
    return independent_quantiles(
        Checks(), key, x, qs, epsilon, bounds, neighbors, lambda epsilon, m, dtype: epsilon / m, method
    )


def independent_quantiles(
    checks: Checks, key, x, qs, epsilon, bounds, neighbors, per_level, method: str = "auto"
) -> jax.Array:
    """Validated IndExp-style releases: one EMQ per level with ``per_level(epsilon, m, dtype)``.

    IndExp and AppIndExp differ only in that budget rule (``epsilon / m``, or the DDR20 composition
    budget); ``epsilon`` reaches ``per_level`` as a ``dtype`` array (it may be traced) and ``checks``
    may already hold the caller's own checks. NaN on invalid traced input.
    """
    x, levels, epsilon, lower, upper = check_inputs(checks, x, qs, epsilon, bounds)
    neighbors = Neighbors.check(neighbors)
    check_choice(method, "method", _METHODS)
    dtype = float_dtype(x)
    epsilon_each = per_level(jnp.asarray(epsilon, dtype), levels.shape[0], dtype)
    levels = jnp.asarray(levels, dtype)
    return checks.guard(_independent_releases(key, x, levels, epsilon_each, lower, upper, neighbors, method))


@elementwise("epsilon")
def ind_exp_guarantee(
    qs: ArrayLike | Sequence[float], epsilon: float, *, neighbors: NeighborsLike = Neighbors.SWAP
) -> RangeBounded:
    """IndExp's guarantee: ``RangeBounded(epsilon, rho=epsilon^2 / (8 m))`` under ``neighbors``.

    ``m = len(qs)`` EMQ releases of ``epsilon / m``, each ``epsilon / m``-range-bounded
    (:func:`emq_guarantee`): by composition ``epsilon``-range-bounded (Durfee and Rogers 2019,
    Lemma 3.2), hence epsilon-DP, and ``m (epsilon/m)^2/8``-zCDP (Cesar and Rogers 2021, Lemma 3.4).
    Takes the levels ``qs`` as the mechanism does (only their number matters).
    """
    Neighbors.check(neighbors)
    m = number_of_levels(qs)
    epsilon = check_epsilon(epsilon)
    return RangeBounded(epsilon, rho=epsilon * epsilon / (8 * m))


def number_of_levels(qs) -> int:
    """``m``, the number of quantile levels ``qs`` (a 1-D sequence; only its length is used here)."""
    shape = np.shape(qs)
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"qs must be a non-empty 1-D sequence of levels, got shape {shape}.")
    return shape[0]


__all__ = [
    "QuantileMethod",
    "emq",
    "emq_guarantee",
    "ind_exp",
    "ind_exp_guarantee",
]
