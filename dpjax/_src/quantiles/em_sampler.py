"""The exponential mechanism's draw from prepared log-weights: O(n) once, O(log n) per draw.

The bounded quantile mechanisms (EMQ, IndExp, AppIndExp; Smith 2011, Alg. 2) pick gap ``i`` with
probability proportional to ``exp(l_i)``, ``l_i = log width_i - epsilon / (2 Delta) |i - q n|``. The
literal kernel draws it by Gumbel-max: n + 1 Gumbel variates per release. Under ``vmap`` over keys
with the data fixed the log-weights do not depend on the key, so they can be prepared once and each
release made by one walk down a log-mass heap: the top-down Gumbel process of
:mod:`dpjax._src.gumbel_process` with k = 1 (Maddison, Tarlow and Minka 2014, Sec. 3), the sampler
:func:`dpjax.selection.exponential_mechanism` uses for the same purpose. It is the inverse CDF of the
log-weights, read in log space: each level of the heap goes left with probability ``P(left)``,
computed as a difference of log-masses, so zero-width gaps (``-inf`` log-weights, ties and points
clamped onto a bound) are never drawn and split probabilities stay relative down to about 1e-19.

Exactness: the same law as the Gumbel-max, up to the rounding of the heap's log-sums (relative
errors of the split probabilities of about ``2 L eps (M + 1)``, ``L = ceil(log2(n + 1))``, ``M`` the
largest ``|l|`` of a candidate with non-negligible mass after the shift by the maximum; see
:mod:`dpjax._src.gumbel_process`), where the literal kernel's relative error is about ``eps (|l| + 1)``
per candidate. That is why one release takes the literal kernel (it also has no preparation to
amortize) and ``method="auto"`` takes this sampler only when releases share the preparation.

These are the internal entry points for any mechanism that draws an exponential mechanism many times
from the same weights: ``em_tree(log_weights)`` prepares, ``em_index(key, tree)`` draws (vmap
either over leading axes of the log-weights or keys; the preparation is key independent).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax._src import gumbel_process as _gumbel_process

__all__: list[str] = []


def em_tree(log_weights: jax.Array) -> _gumbel_process.LogMassTree:
    """The key-independent preparation for :func:`em_index`, O(d).

    Args:
      log_weights: shape ``(d,)``, float, finite or ``-inf`` (weight 0); unnormalized. They are
        shifted by their maximum first (the heap's rounding is relative to ``|l|``). NaN, or no finite
        entry, gives a tree whose draws are arbitrary indices in ``[0, d)`` (callers mark such output
        invalid).

    Returns:
      The log-mass heap of :mod:`dpjax._src.gumbel_process`, in the dtype of ``log_weights``.
    """
    top = jnp.max(log_weights)
    top = jnp.where(jnp.isfinite(top), top, jnp.zeros((), log_weights.dtype))
    return _gumbel_process.log_mass_tree(log_weights - top)


def em_index(key, tree: _gumbel_process.LogMassTree) -> jax.Array:
    """One draw of ``i`` with probability ``exp(l_i) / sum_j exp(l_j)`` from :func:`em_tree`'s heap:
    an int32 scalar in ``[0, d)``, O(log d) (``1 + 2 ceil(log2 d)`` exponential variates)."""
    index = _gumbel_process.top_k(key, tree, 1)[1][0]
    return jnp.minimum(index, tree.size - 1)  # padding leaves have weight 0; this only bounds NaN input
