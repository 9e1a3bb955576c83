"""The joint exponential mechanism for top-k: one exponential mechanism over sequences of k items.

Gillenwater, Joseph, Munoz Medina and Ribero Diaz, "A Joint Exponential Mechanism for Differentially
Private Top-k", ICML 2022, Alg. 1. With the scores sorted, ``c_(1) >= ... >= c_(d)``, a sequence
``S = (s_1, ..., s_k)`` of distinct items has utility ``u(S) = -max_i (c_(i) - c_{s_i})`` (how far
its i-th item falls below the true i-th largest score, at worst) and is drawn with

    P(S) ∝ exp(epsilon u(S) / (2 Delta_u)),

``Delta_u = 2 sensitivity`` in general and ``sensitivity`` when all scores move in the same
direction between neighbors (``monotonic``: counts under add/remove), the paper's swap and
add/remove cases for counts (Sec. 3, Lemma 3.2).

Sampling (Sec. 3.2): the ``k d`` entries ``D[i, j] = c_(i) - c_(j)`` of the difference matrix are
ordered by ``(D, -i, j)`` (the order the paper's uniquifying terms give, without perturbing the
scores, so it holds for real scores too); each sequence's worst entry is then unique. Entry
``(i, j)`` is the worst entry of ``prod_{r != i} (t_r - r)`` sequences (Lemma 3.7), ``t_r`` the
number of row-``r`` entries before it in the order (the rows' allowed columns are nested prefixes of
the sorted items, row ``i`` holds column ``j``). One entry is drawn with weight (count) x
``exp(-D / b)``, then a uniform sequence with that worst entry, row by row. The order is one sort of
the ``k d`` entries and the counts one cumulative sum, ``O(d k log(d k))`` time and ``O(d k^2)``
memory (key independent: once per data under ``vmap`` over keys); each release draws the entry by
Gumbel-max over blocks of ``~sqrt(d k)`` entries (block log-masses, then one block's entries) or,
under ``vmap`` over keys, by the top-down Gumbel process over the entries (:mod:`dpjax._src.gumbel_process`,
``O(log(d k))`` per release; the same law), and the sequence in ``O(k^2)``.

These two ("blocks", "tree") are the literal sampler. The default samples the same law through the
error threshold instead (:mod:`dpjax._src.topk.joint_head`): one partial top-k of ``max(64, 8k)`` items
``k`` binary searches per candidate difference of that head, and no sort of the ``d k``
differences; where the rest could matter (scores crowded within about ``b k log d`` of the k-th
largest), integer counts go to the histogram of their errors
(:mod:`dpjax._src.topk.joint_histogram`: one scatter-add over the ``d`` counts, the ``W`` unit
cells of the error threshold, no sort for one release) and real scores to the literal sampler.

Wu and Zhang (NeurIPS 2024, "Faster Differentially Private Top-k Selection: A Joint Exponential
Mechanism with Pruning") run in ``O(d + k^2 / epsilon ln d)`` but sample a pruned variant of this
mechanism (a different law, with similar reported accuracy), so it is not a ``method`` here: every
method samples the law above. The histogram path has their complexity for integer counts.
"""

from __future__ import annotations

import functools
import math
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import gumbel_process as _gumbel_process
from dpjax._src import noise, sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import RangeBounded
from dpjax._src.host_checks import (
    check_choice,
    check_epsilon,
    check_int,
    check_positive,
    float_dtype,
    is_traced,
)
from dpjax._src.topk import joint_head, joint_histogram
from dpjax._src.topk.joint_head import nth_free
from dpjax._src.validation import Checks

__all__ = [
    "JointMethod",
    "joint_top_k",
    "joint_top_k_guarantee",
]


JointMethod: TypeAlias = Literal[
    "auto", "histogram", "histogram_tree", "threshold", "threshold_tree", "blocks", "tree"
]
"""How :func:`joint_top_k` samples (static; every method samples the same law)."""


def _gumbel_argmax(key, logits) -> jax.Array:
    return jnp.argmax(logits + noise.gumbel(key, logits.shape, 1.0, logits.dtype))


def _entry_table(scores, k: int, scale):
    """The key-independent work: entries ordered by ``(D, -row, col)`` with their log-weights.

    Returns ``(order, rows, cols, t, logits)``: ``order`` maps sorted item positions to item ids;
    for the ``k d`` entries in order, their row, column (sorted position), the number ``t[s, r]`` of
    row-``r`` entries before entry ``s``, and ``log #sequences - D / scale``.
    """
    d = scores.shape[0]
    dtype = scale.dtype
    if scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    ids = jnp.arange(d, dtype=jnp.int32)
    neg_sorted, order = lax.sort((-scores, ids), num_keys=1, is_stable=True)  # decreasing, ties by id
    top = -neg_sorted[:k]
    sorted_scores = -neg_sorted
    diff = top[:, None] - sorted_scores[None, :]  # exact for integer scores; nondecreasing along rows
    # One stable sort on D of the rows in reverse: ties of D keep (row descending, column ascending).
    position = jnp.arange(k * d, dtype=jnp.int32)
    diff, position = lax.sort((diff[::-1].ravel(), position), num_keys=1, is_stable=True)
    row, col = k - 1 - position // d, position % d
    one_hot = (row[:, None] == jnp.arange(k, dtype=jnp.int32)[None, :]).astype(jnp.int32)
    t = jnp.cumsum(one_hot, axis=0) - one_hot  # row-r entries strictly before each entry
    free = (t - jnp.arange(k, dtype=jnp.int32)[None, :]).astype(dtype)
    with jax.numpy_dtype_promotion("standard"):
        log_free = jnp.where(free > 0, jnp.log(jnp.maximum(free, 1)), -jnp.inf)
    log_count = jnp.sum(jnp.where(one_hot == 1, 0, log_free), axis=1)
    logits = log_count - diff.astype(dtype) / scale
    return order, row, col, t, logits


def _draw_entry(key, logits) -> jax.Array:
    """An exact draw of an index with probability ``softmax(logits)``: Gumbel-max over blocks of
    ``B = ceil(sqrt(size))`` (their log-sum-exp), then over the chosen block's entries."""
    size = logits.shape[0]
    block = max(1, math.isqrt(size - 1) + 1)
    blocks = -(-size // block)
    padded = jnp.pad(logits, (0, blocks * block - size), constant_values=-jnp.inf).reshape(blocks, block)
    masses = jax.nn.logsumexp(padded, axis=1)
    block_key, entry_key = jax.random.split(key)
    chosen = _gumbel_argmax(block_key, masses)
    inside = _gumbel_argmax(entry_key, padded[chosen])
    return (chosen * block + inside).astype(jnp.int32)


def _sequence(key, row_i, col_j, t_row, k: int) -> jax.Array:
    """A uniform sequence whose worst entry is ``(row_i, col_j)``: row ``i`` holds ``col_j``, each
    other row ``r`` (in order) a uniform free column among the first ``t_row[r]`` sorted items."""
    d_cap = jnp.iinfo(jnp.int32).max
    taken = jnp.full(k, d_cap, jnp.int32).at[0].set(col_j)
    sequence = jnp.zeros(k, jnp.int32).at[row_i].set(col_j)
    keys = jax.random.split(key, k)

    def body(r, carry):
        taken, sequence, used = carry
        available = t_row[r] - r
        n = jax.random.randint(keys[r], (), 0, jnp.maximum(available, 1), jnp.int32)
        pick = nth_free(n, taken, k)
        skip = r == row_i
        taken = jnp.where(skip, taken, taken.at[used].set(pick))
        sequence = jnp.where(skip, sequence, sequence.at[r].set(pick))
        return taken, sequence, used + jnp.where(skip, 0, 1)

    return lax.fori_loop(0, k, body, (taken, sequence, jnp.int32(1)))[1]


def _tree_entry(key, logits) -> jax.Array:
    """The same law by the top-down Gumbel process (:mod:`dpjax._src.gumbel_process`): a log-mass tree
    over the entries, key independent, then ``O(log(d k))`` per draw."""
    tree = _gumbel_process.log_mass_tree(logits - jnp.max(logits))
    return _gumbel_process.top_k(key, tree, 1)[1][0]


def _by_entry(key, scores, scale, *, k: int, draw) -> jax.Array:
    order, row, col, t, logits = _entry_table(scores, k, scale)
    entry_key, sequence_key = jax.random.split(key)
    s = draw(entry_key, logits)
    return order[_sequence(sequence_key, row[s], col[s], t[s], k)]


def _tree_draw(logits):
    return _gumbel_process.log_mass_tree(logits - jnp.max(logits))


def _tree_pick(key, tree) -> jax.Array:
    return _gumbel_process.top_k(key, tree, 1)[1][0]


@functools.partial(jax.jit, static_argnames=("k", "method", "width", "window"))
@sharded.auto_axes
def _joint_top_k(
    key, scores, scale, *, k: int, method: str, width: int | None = None, window: int | None = None
) -> jax.Array:
    width = joint_head.default_width(scores.shape[0], k) if width is None else width
    threshold = functools.partial(joint_head.sample, k=k, width=width)
    paths = {
        "blocks": functools.partial(_by_entry, k=k, draw=_draw_entry),
        "tree": functools.partial(_by_entry, k=k, draw=_tree_entry),
    }
    paths["threshold"] = functools.partial(
        threshold, draw=(lambda x: x, _gumbel_argmax), literal=paths["blocks"]
    )
    paths["threshold_tree"] = functools.partial(
        threshold, draw=(_tree_draw, _tree_pick), literal=paths["tree"]
    )
    paths["histogram"] = functools.partial(
        threshold,
        draw=(lambda x: x, _gumbel_argmax),
        literal=joint_histogram.sampler(
            k=k, window=window, draw=(lambda x: x, _draw_entry), fallback=paths["blocks"]
        ),
    )
    paths["histogram_tree"] = functools.partial(
        threshold,
        draw=(_tree_draw, _tree_pick),
        literal=joint_histogram.sampler(
            k=k, window=window, draw=(_tree_draw, _tree_pick), fallback=paths["tree"], sort=True
        ),
    )
    if method in ("histogram", "histogram_tree") and not _integer(scores):
        raise ValueError(f"method={method!r} needs integer counts, got dtype {scores.dtype}.")
    if _integer(scores):
        return _auto.run(method, paths, key, scores, scale, fast="histogram_tree", single="histogram")
    return _auto.run(method, paths, key, scores, scale, fast="threshold_tree", single="threshold")


def _integer(scores) -> bool:
    return jnp.issubdtype(scores.dtype, jnp.integer) or scores.dtype == jnp.bool_


def joint_top_k(
    key: jax.Array,
    scores: ArrayLike,
    k: int,
    epsilon: ArrayLike,
    *,
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
    method: JointMethod = "auto",
) -> jax.Array:
    """The joint exponential mechanism for top-k (Gillenwater, Joseph, Munoz Medina and Ribero Diaz,
    ICML 2022, Alg. 1): one exponential mechanism over all sequences of ``k`` distinct items.

    ``P(S) ∝ exp(-epsilon max_i (c_(i) - c_{s_i}) / (2 Delta_u))`` with ``Delta_u = sensitivity``
    when ``monotonic`` (all scores move the same way between neighbors: counts under add/remove, the
    paper's ``Delta = 1``) and ``2 sensitivity`` otherwise (swap). ``epsilon`` is the *total* budget
    of the k items (not per item, unlike :func:`~dpjax.selection.gumbel_top_k`). Guarantee:
    ``epsilon``-DP and ``epsilon``-range-bounded (:func:`joint_top_k_guarantee`) for the paper's law
    (Sec. 3.2), which ``method="blocks"`` and ``"tree"`` draw exactly. The default threshold and
    histogram samplers leave out outcomes whose total probability is bounded below ``1e-86`` (the
    tail bounds of :mod:`dpjax._src.topk.joint_head` and :mod:`dpjax._src.topk.joint_histogram`), so
    each release is within that total variation of the exact law, and its guarantee holds up to an
    additive delta of that order. For integer scores and a concrete ``epsilon`` the histogram's
    window is fixed from ``epsilon`` (a traced one takes a default window with the literal
    fallback), so, like the batching, it picks the random stream, not the law.

    Args:
      key: a ``jax.random`` key.
      scores: shape ``[d]``, finite (counts, or any real scores with per-item sensitivity
        ``sensitivity``).
      k: number of items, ``1 <= k <= d`` (static).
      epsilon: total privacy parameter, > 0 (may be traced).
      sensitivity: per-score sensitivity (L-infinity), > 0 (may be traced).
      monotonic: all scores move in the same direction between neighbors (static bool).
      method: the sampler (static; same law, different random streams): ``"histogram"`` (integer
        counts only: the threshold sampler below, and where its head does not suffice the exact
        histogram of the errors, :mod:`dpjax._src.topk.joint_histogram`, instead of the literal
        sampler), ``"histogram_tree"`` (the same with the top-down Gumbel process, for many
        keys), ``"threshold"`` (the
        error threshold's interval by Gumbel-max over a pruned head of ``max(64, 8k)`` items, then
        a uniform sequence within it; :mod:`dpjax._src.topk.joint_head`), ``"threshold_tree"`` (the same
        with the top-down Gumbel process, for many keys), the paper's worst-entry sampler over all
        ``d k`` sorted differences, ``"blocks"`` (Gumbel-max over blocks of ``~sqrt(d k)`` entries)
        or ``"tree"`` (the top-down Gumbel process over them), or ``"auto"`` (default,
        :mod:`dpjax._src.auto`: for integer (or boolean) scores ``"histogram"`` for one release and
        ``"histogram_tree"`` under ``vmap`` over keys with the scores fixed; for real scores
        ``"threshold"`` and ``"threshold_tree"``).

    Returns:
      int32 item indices of shape ``[k]``, distinct, the estimate of the top item first; all ``-1``
      when a traced input is invalid. Concrete invalid inputs raise a ``ValueError`` before any
      randomness is used.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> top = joint_top_k(jax.random.key(0), jnp.arange(100), k=5, epsilon=1.0, monotonic=True)
    """
    checks = Checks()
    scores = checks.array(scores, "scores", ndim=1)
    k = check_int(k, "k", minimum=1, maximum=scores.shape[0])
    epsilon = checks.epsilon(epsilon)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    if not isinstance(monotonic, bool):
        raise TypeError(f"monotonic must be a Python bool, got {type(monotonic).__name__}.")
    check_choice(method, "method", get_args(JointMethod))
    dtype = float_dtype(scores)
    scale = jnp.asarray(4 if not monotonic else 2, dtype) * jnp.asarray(sensitivity, dtype)
    scale = scale / jnp.asarray(epsilon, dtype)
    window = None
    if _integer(scores) and not (is_traced(epsilon) or is_traced(sensitivity)):
        factor = 4.0 if not monotonic else 2.0
        b = factor * float(np.asarray(sensitivity)) / float(np.asarray(epsilon))
        window = joint_histogram.window_for(scores.shape[0], k, b)
    return checks.guard(_joint_top_k(key, scores, scale, k=k, method=method, window=window))


@elementwise("epsilon", "sensitivity")
def joint_top_k_guarantee(
    k: int, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> RangeBounded:
    """What to charge for :func:`joint_top_k`: ``RangeBounded(epsilon)``.

    One exponential mechanism whose utility has sensitivity ``Delta_u`` under the relation, with
    weights ``exp(epsilon u / (2 Delta_u))`` (Gillenwater et al. 2022, Thm. 3.3: epsilon-DP); its
    privacy loss lies in an interval of width ``epsilon`` (Durfee and Rogers 2019, Lemma 3.1), hence
    ``epsilon^2/8``-zCDP (Cesar and Rogers 2021, Lemma 3.4). ``k``, ``sensitivity`` and ``monotonic``
    are checked as the mechanism checks them.
    """
    check_int(k, "k", minimum=1)
    check_positive(sensitivity, "sensitivity")
    if not isinstance(monotonic, bool):
        raise TypeError(f"monotonic must be a Python bool, got {type(monotonic).__name__}.")
    return RangeBounded(check_epsilon(epsilon))
