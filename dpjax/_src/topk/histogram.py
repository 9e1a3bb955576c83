"""Shared pieces of the top-k kernels: input checks and the true top of a histogram.

The kernels need only the true top-(kbar+1) counts of each histogram (Durfee and Rogers 2019,
Sec. 3): :func:`top_counts` extracts them with the exact ``lax.top_k``, whose ties go to the lower
item index, a data-independent tie-break as the paper requires. A histogram with fewer than
``kbar + 1`` items is padded with zero counts for the items ``d, d+1, ...`` (the paper's "fixed
list" of padding elements, Sec. 6.2): a returned index ``>= d`` names such a zero-count element.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import sharded
from dpjax._src.host_checks import check_epsilon, check_int, check_probability, is_traced
from dpjax._src.validation import Checks

__all__: list[str] = []

_INTEGER_VALUED = "counts must be integer-valued (distinct-user counts)."


def check_counts(checks: Checks, counts) -> jax.Array:
    """A histogram (or a batch ``[..., d]`` of them): finite, non-negative, integer-valued counts.

    Concrete counts are checked eagerly, even inside ``jit`` (e.g. closed over by a Monte Carlo
    trial function); traced counts are checked in the graph through ``checks``, except the sign of
    traced integer counts, which the kernel reads off the top counts (:func:`top_counts`) and
    :func:`record_sign` records: no pass over the counts of its own.
    """
    counts = checks.array(counts, "counts", ndim=None, nonnegative=not _sign_on_top(counts))
    if counts.ndim == 0:
        raise ValueError(f"counts must have at least one axis (items), got shape {counts.shape}.")
    if jnp.issubdtype(counts.dtype, jnp.floating):
        if is_traced(counts):
            checks.record(counts == jnp.round(counts), _INTEGER_VALUED)
        else:
            with jax.ensure_compile_time_eval():
                if not bool(jnp.all(counts == jnp.round(counts))):
                    raise ValueError(_INTEGER_VALUED)
    if counts.dtype == jnp.bool_:
        counts = counts.astype(jnp.int32)
    return counts


def _sign_on_top(counts) -> bool:
    """Whether the sign of ``counts`` is checked on the top counts: traced integer (or boolean,
    ranked as int32) counts."""
    if not is_traced(counts):
        return False
    return jnp.issubdtype(counts.dtype, jnp.signedinteger) or counts.dtype == jnp.bool_


def no_negative_count(values: jax.Array) -> jax.Array:
    """Whether no count is negative, from the top counts of :func:`top_counts` (signed integers
    are ranked by their unsigned bits there, so a negative count, if any, is the top one)."""
    if not jnp.issubdtype(values.dtype, jnp.signedinteger):
        return jnp.asarray(True)
    return jnp.all(values[..., 0] >= 0)


def record_sign(checks: Checks, counts: jax.Array, no_negative: jax.Array) -> None:
    """Records the kernel's :func:`no_negative_count` for counts whose sign :func:`check_counts`
    left to it."""
    if _sign_on_top(counts):
        checks.record(no_negative, "counts must be non-negative.")


def check_k_kbar(k, kbar, kbar_name: str = "kbar") -> tuple[int, int]:
    """``1 <= k <= kbar`` (static: they fix the output shapes)."""
    k = check_int(k, "k", minimum=1)
    kbar = check_int(kbar, kbar_name, minimum=1)
    if k > kbar:
        raise ValueError(f"k must be <= {kbar_name}, got k={k} and {kbar_name}={kbar}.")
    return k, kbar


class _EpsilonDelta(NamedTuple):
    """The privacy parameters of a top-k over an unknown domain.

    Attributes:
      epsilon: the per-step ``epsilon``, > 0.
      delta: the threshold's ``delta``, in (0, 1).
    """

    epsilon: float | jax.Array
    delta: float | jax.Array


def check_privacy(epsilon: ArrayLike, delta: ArrayLike) -> tuple[float, float]:
    """Host side (guarantee companions): per-step ``epsilon > 0`` and the threshold's ``delta`` in (0, 1)."""
    epsilon = check_epsilon(epsilon)
    return epsilon, check_probability(delta, "delta", open_low=True, open_high=True)


def privacy(checks: Checks, epsilon, delta, dtype) -> _EpsilonDelta:
    """Kernel side: ``epsilon > 0`` and ``delta`` in (0, 1), eager when concrete and recorded in
    ``checks`` when traced, returned as ``dtype`` scalars (the same values on both paths)."""
    epsilon = checks.epsilon(epsilon)
    delta = checks.probability(delta, "delta", open_low=True, open_high=True)
    return _EpsilonDelta(jnp.asarray(epsilon, dtype), jnp.asarray(delta, dtype))


def check_max_contributions(max_contributions) -> int | None:
    """Host side: Delta, the l0 bound on the items one user contributes to (``None``: unrestricted)."""
    if max_contributions is None:
        return None
    return check_int(max_contributions, "max_contributions", minimum=1)


def max_contributions_value(checks: Checks, max_contributions, dtype):
    """Kernel side: Delta as a ``dtype`` scalar (``None`` stays ``None``: unrestricted).

    A concrete Delta must be an integer >= 1 (eager ``ValueError``); a traced one is recorded in
    ``checks`` (finite, integer-valued, >= 1).
    """
    if max_contributions is None:
        return None
    return checks.integer(max_contributions, "max_contributions", dtype)


def log_ratio(m, delta) -> jax.Array:
    """``ln(m/delta)`` in the dtype of ``delta``, as ``ln m - ln delta`` (no overflow of ``m/delta``)."""
    return jnp.log(jnp.asarray(m, delta.dtype)) - jnp.log(delta)


def top_counts(counts: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """The ``size`` largest counts of each histogram, descending, and their item indices.

    Ties go to the lower index (``lax.top_k``'s result, by :func:`dpjax.sharded.top_k`: a blocked
    partial selection, integer counts ranked as float32 keys); missing items are zero-count
    padding with indices ``d, d+1, ...``. Signed integer counts are ranked by their unsigned bits:
    the same order for non-negative counts, and a negative count, if any, comes first
    (:func:`no_negative_count`). Returns ``(ids [..., size] int32, values [..., size])``.
    """
    d = counts.shape[-1]
    if d < size:
        pad = jnp.zeros((*counts.shape[:-1], size - d), counts.dtype)
        counts = jnp.concatenate([counts, pad], axis=-1)
    if not jnp.issubdtype(counts.dtype, jnp.signedinteger):
        values, ids = sharded.top_k(counts, size)
        return ids.astype(jnp.int32), values
    unsigned = jnp.dtype(f"uint{8 * counts.dtype.itemsize}")
    values, ids = sharded.top_k(lax.bitcast_convert_type(counts, unsigned), size)
    return ids.astype(jnp.int32), lax.bitcast_convert_type(values, counts.dtype)


def report_above(scores, threshold, ids, k: int) -> tuple[jax.Array, jax.Array]:
    """The kernels' common tail: the ``k`` largest noisy ``scores`` that beat the noisy ⊥ ``threshold``.

    Durfee and Rogers (2019), Algorithm 1 lines 4-6 (and Algorithms 4 and 6, which reuse it): report
    the items in noisy order until one falls below ``threshold``, then ⊥. Since the top-k values are
    sorted, the items above the threshold are a prefix.

    Args:
      scores: ``[..., kbar]`` noisy scores of the candidate items (``-inf`` for excluded ones).
      threshold: ``[...]`` the noisy threshold.
      ids: ``[..., kbar]`` the item index of each score.
      k: how many to report at most (static).

    Returns:
      ``(indices, num_returned)``: ``[..., k]`` int32 item indices in noisy order, ``-1`` after the
      ``num_returned`` (``[...]`` int32) that beat the threshold.
    """
    noisy, positions = lax.top_k(scores, k)
    above = noisy > threshold[..., None]
    num_returned = above.sum(-1, dtype=jnp.int32)
    indices = jnp.where(above, jnp.take_along_axis(ids, positions, axis=-1), -1)
    return indices, num_returned
