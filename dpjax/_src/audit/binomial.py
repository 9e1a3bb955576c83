"""Exact (Clopper–Pearson) confidence bounds for a binomial proportion, computed in float64.

Clopper and Pearson (1934): with ``k`` successes in ``n`` trials, the one-sided lower bound at level
``a`` is the ``a``-quantile of Beta(k, n - k + 1) (0 when k = 0) and the upper bound is the
``(1 - a)``-quantile of Beta(k + 1, n - k) (1 when k = n). Each bound holds with probability at
least ``1 - a`` whatever the true proportion, which is what makes an audit's false-alarm rate a
guarantee rather than an approximation.

The Beta quantiles are found by :func:`dpjax._src.numerics.bisect` on ``jax.scipy.special.betainc`` (the
regularized incomplete beta function) in float64, whatever the global ``jax_enable_x64`` setting:
80 halvings of [0, 1] leave an error below 1e-24, far under the statistical width, and a relative
error below 1e-8 for quantiles down to 1e-16 (more than :func:`~dpjax._src.numerics.resolution_steps`,
since the roots span many binades of the bracket). These are
host-side statistics of a few numbers, so they run on the CPU device whatever the default backend
(TPUs emulate float64 slowly, and GPUs would only add transfers).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from dpjax._src.numerics import bisect

__all__ = [
    "clopper_pearson",
    "loss_p_value",
    "loss_statistics",
    "privacy_loss_lower_bound",
]

_BISECTIONS = 80


def _beta_lower_quantile(k, n, level):
    """The ``level``-quantile of Beta(k, n - k + 1), elementwise; 0 where k == 0."""
    a = jnp.maximum(k, 1.0)
    b = n - k + 1.0

    lo, hi = bisect(
        lambda t: jax.scipy.special.betainc(a, b, t) < level, jnp.zeros_like(a), jnp.ones_like(a), _BISECTIONS
    )
    return jnp.where(k > 0, 0.5 * (lo + hi), 0.0)


@jax.jit
def _bounds(k, n, level):
    return _beta_lower_quantile(k, n, level), 1.0 - _beta_lower_quantile(n - k, n, level)


def clopper_pearson(
    successes: ArrayLike, trials: ArrayLike, level: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper–Pearson bounds ``(lower, upper)`` on a binomial proportion.

    ``P[p >= lower] >= 1 - level`` and ``P[p <= upper] >= 1 - level`` for every true proportion p
    (each bound separately; a two-sided interval at level ``a`` uses ``level = a / 2``).

    Args:
      successes: counts ``k`` (array-like of integers, 0 <= k <= trials).
      trials: numbers of trials ``n`` (broadcast against ``successes``), >= 1.
      level: one-sided error probability in (0, 1) (broadcast as well).

    Returns:
      Two float64 NumPy arrays of the broadcast shape.

    Example:
      >>> lower, upper = clopper_pearson(5, 100, 0.025)   # 95% two-sided: (0.0164, 0.1128)
    """
    k, n, level = np.broadcast_arrays(
        np.asarray(successes, np.float64), np.asarray(trials, np.float64), np.asarray(level, np.float64)
    )
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)):
        raise ValueError("successes must be integers in [0, trials] and trials >= 1.")
    if np.any(level <= 0) or np.any(level >= 1):
        raise ValueError(f"level must be in (0, 1), got {level}.")
    lower, upper = _padded(_bounds, k, n, level)
    return lower, upper


def _padded(fn, *columns):
    """Calls the jitted ``fn`` on float64 copies padded to a power-of-two length (few compilations)."""
    shape = columns[0].shape
    size = max(64, 1 << (max(columns[0].size, 1) - 1).bit_length())
    padded = []
    for column in columns:
        flat = np.ones(size, np.float64)
        flat[: column.size] = column.ravel()
        padded.append(flat)
    host = _host_device()
    with jax.enable_x64(True):
        outputs = fn(*(jax.device_put(c, host) for c in padded))
        return tuple(np.asarray(o, np.float64)[: columns[0].size].reshape(shape) for o in outputs)


def _host_device():
    """The CPU device, or ``None`` (the default device) when the process has no CPU backend
    (``JAX_PLATFORMS`` restricted to accelerators)."""
    try:
        return jax.devices("cpu")[0]
    except RuntimeError:
        return None


def _loss_bound(k_p, n_p, k_q, n_q, level, delta):
    p_low = _beta_lower_quantile(k_p, n_p, level)
    q_high = 1.0 - _beta_lower_quantile(n_q - k_q, n_q, level)
    return jnp.where(p_low > delta, jnp.log(jnp.maximum(p_low - delta, 1e-300)) - jnp.log(q_high), -jnp.inf)


@jax.jit
def _loss_statistics(k_p, n_p, k_q, n_q, level, epsilon, delta):
    """Both the loss bound at ``level`` and the critical level for ``epsilon`` (one compilation)."""
    return _loss_bound(k_p, n_p, k_q, n_q, level, delta), _critical_level(k_p, n_p, k_q, n_q, epsilon, delta)


def _critical_level(k_p, n_p, k_q, n_q, epsilon, delta):
    """Smallest one-sided level at which the loss bound exceeds ``epsilon``.

    At level ``a`` the lower bound on P is ``t`` where ``a = I_t(k_p, n_p - k_p + 1)`` (increasing in
    t), and the upper bound on Q is ``s`` where ``a = 1 - I_s(k_q + 1, n_q - k_q)`` (decreasing in s).
    The bound equals ``epsilon`` where ``s = (t - delta) e^-epsilon``: one bisection on ``t``.
    """
    a_p, b_p = jnp.maximum(k_p, 1.0), n_p - k_p + 1.0
    a_q, b_q = k_q + 1.0, jnp.maximum(n_q - k_q, 1.0)

    def level_p(t):
        return jnp.where(k_p > 0, jax.scipy.special.betainc(a_p, b_p, t), 0.0)

    def level_q(t):
        s = jnp.clip((t - delta) * jnp.exp(-epsilon), 0.0, 1.0)
        return jnp.where(k_q < n_q, 1.0 - jax.scipy.special.betainc(a_q, b_q, s), 0.0)

    _, hi = bisect(
        lambda t: level_p(t) <= level_q(t), jnp.zeros_like(k_p) + delta, jnp.ones_like(k_p), _BISECTIONS
    )
    never = (k_p == 0) | (k_q == n_q)  # the bound is -inf, resp. log(P_low - delta) <= 0
    return jnp.where(never, 0.5, jnp.clip(level_p(hi), 0.0, 0.5))


def privacy_loss_lower_bound(
    k_p: ArrayLike, n_p: ArrayLike, k_q: ArrayLike, n_q: ArrayLike, level: ArrayLike, delta: float = 0.0
) -> np.ndarray:
    """A lower confidence bound on the privacy loss shown by one event ``E``.

    With ``k_p`` of ``n_p`` runs on one input and ``k_q`` of ``n_q`` runs on its neighbor landing in
    ``E``, (epsilon, delta)-DP requires ``P(E) <= exp(epsilon) Q(E) + delta``, so
    ``log((P_low - delta) / Q_high)`` is a lower bound on epsilon that holds with probability at
    least ``1 - 2 level`` (Clopper–Pearson bounds ``P_low``, ``Q_high`` at ``level`` each; union
    bound, so the two samples need not be independent). ``-inf`` when ``P_low <= delta``.
    """
    return loss_statistics(k_p, n_p, k_q, n_q, level, 0.0, delta)[0]


def loss_p_value(
    k_p: ArrayLike, n_p: ArrayLike, k_q: ArrayLike, n_q: ArrayLike, epsilon: float, delta: float = 0.0
) -> np.ndarray:
    """The smallest ``2 * level`` at which :func:`privacy_loss_lower_bound` exceeds ``epsilon``.

    It is a valid p-value for the null hypothesis "the mechanism is (epsilon, delta)-DP" (for this
    one event): under the null, ``P[p_value <= a] <= a``. Capped at 1.
    """
    return loss_statistics(k_p, n_p, k_q, n_q, 0.25, epsilon, delta)[1]


def loss_statistics(
    k_p: ArrayLike,
    n_p: ArrayLike,
    k_q: ArrayLike,
    n_q: ArrayLike,
    level: ArrayLike,
    epsilon: ArrayLike,
    delta: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`privacy_loss_lower_bound` at ``level`` and :func:`loss_p_value` for ``epsilon``, at once."""
    arrays = np.broadcast_arrays(
        *(np.asarray(a, np.float64) for a in (k_p, n_p, k_q, n_q, level, epsilon, delta))
    )
    bound, critical = _padded(_loss_statistics, *arrays)
    return bound, np.minimum(1.0, 2.0 * critical)
