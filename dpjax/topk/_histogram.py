"""Shared pieces of the top-k kernels: input checks and the true top of a histogram.

The kernels need only the true top-(kbar+1) counts of each histogram (Durfee and Rogers 2019,
Sec. 3): :func:`top_counts` extracts them with the exact ``lax.top_k``, whose ties go to the lower
item index, a data-independent tie-break as the paper requires. A histogram with fewer than
``kbar + 1`` items is padded with zero counts for the items ``d, d+1, ...`` (the paper's "fixed
list" of padding elements, Sec. 6.2): a returned index ``>= d`` names such a zero-count element.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from dpjax.validation import check_array, check_epsilon, check_int, check_probability, is_traced


def float_dtype():
    """The default floating dtype (float32, or float64 under ``jax_enable_x64``)."""
    return jax.dtypes.canonicalize_dtype(jnp.dtype(float))


def check_counts(counts) -> jax.Array:
    """A histogram (or a batch ``[..., d]`` of them): finite, non-negative, integer-valued counts.

    Concrete counts are checked even inside ``jit`` (e.g. closed over by a Monte Carlo trial
    function): the value checks run at trace time under ``jax.ensure_compile_time_eval``.
    """
    with jax.ensure_compile_time_eval():
        counts = check_array(counts, "counts", ndim=None, nonnegative=True)
        if counts.ndim == 0:
            raise ValueError(f"counts must have at least one axis (items), got shape {counts.shape}.")
        if (
            not is_traced(counts)
            and jnp.issubdtype(counts.dtype, jnp.floating)
            and not bool(jnp.all(counts == jnp.round(counts)))
        ):
            raise ValueError("counts must be integer-valued (distinct-user counts).")
    if counts.dtype == jnp.bool_:
        counts = counts.astype(jnp.int32)
    return counts


def check_k_kbar(k, kbar, kbar_name: str = "kbar") -> tuple[int, int]:
    """``1 <= k <= kbar``."""
    k = check_int(k, "k", minimum=1)
    kbar = check_int(kbar, kbar_name, minimum=1)
    if k > kbar:
        raise ValueError(f"k must be <= {kbar_name}, got k={k} and {kbar_name}={kbar}.")
    return k, kbar


def check_privacy(epsilon, delta) -> tuple[float, float]:
    """Per-step ``epsilon > 0`` and the threshold's ``delta`` in (0, 1)."""
    return check_epsilon(epsilon), check_probability(delta, "delta", open_low=True, open_high=True)


def check_max_contributions(max_contributions) -> int | None:
    """Delta, the l0 bound on the items one user contributes to (``None``: unrestricted)."""
    if max_contributions is None:
        return None
    return check_int(max_contributions, "max_contributions", minimum=1)


def top_counts(counts: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """The ``size`` largest counts of each histogram, descending, and their item indices.

    Ties go to the lower index (``lax.top_k``); missing items are zero-count padding with indices
    ``d, d+1, ...``. Returns ``(ids [..., size] int32, values [..., size])``.
    """
    d = counts.shape[-1]
    if d < size:
        pad = jnp.zeros((*counts.shape[:-1], size - d), counts.dtype)
        counts = jnp.concatenate([counts, pad], axis=-1)
    values, ids = lax.top_k(counts, size)
    return ids.astype(jnp.int32), values
