"""Poisson sampling for DP-SGD in fixed shapes: a sample padded to a static size, and that size chosen
so that the chance of truncating a sample is a known, small part of delta.

DP-SGD's accounting (:mod:`dpjax._src.optax.accounting`) assumes Poisson sampling: every example joins each
step's batch independently with probability ``sampling_rate``. A ``jit``-compiled step needs a static
batch shape, so the sample is drawn into ``padded_size`` slots with a mask, and a sample larger than
that is truncated (its first ``padded_size`` examples kept): "truncated Poisson subsampling" (Chua,
Ghazi, Harrison, Leeman, Kamath, Kumar, Manurangsi, Sinha, Zhang 2024, "Scalable DP-SGD: Shuffling vs.
Poisson Subsampling", Sec. 4).

Guarantee. The truncated run equals the Poisson run unless some step's sample exceeds
``padded_size``, an event of probability at most ``eta = truncation_probability(...)`` on a dataset
and on each of its add/remove neighbours (the bound is taken at ``dataset_size + 1`` examples). So if
the Poisson run is ``(epsilon, delta)``-DP, the truncated run is ``(epsilon, delta + eta (1 +
e^epsilon))``-DP (:func:`truncation_delta`): ``P[T(D) in S] <= P[M(D) in S] + eta <= e^eps P[M(D') in
S] + delta + eta <= e^eps P[T(D') in S] + e^eps eta + delta + eta``.
:func:`dpjax.optax.training_epsilon` and :func:`dpjax.optax.noise_multiplier_for_epsilon` charge it
when given ``padded_size`` and ``dataset_size``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src.host_checks import check_epsilon, check_int, check_probability

__all__ = [
    "padded_batch_size",
    "poisson_sample",
    "truncation_delta",
    "truncation_probability",
]


def poisson_sample(
    key: jax.Array, dataset_size: int, sampling_rate: ArrayLike, padded_size: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A Poisson sample of ``range(dataset_size)`` (each index independently with probability
    ``sampling_rate``) in ``padded_size`` slots.

    The gaps between selected indices are i.i.d. Geometric(``sampling_rate``), so ``padded_size + 1``
    geometric draws give the first ``padded_size`` selected indices exactly, in increasing order.

    Args:
      key: a ``jax.random`` key.
      dataset_size: number of examples n (static), >= 1.
      sampling_rate: the probability q in (0, 1] (may be traced).
      padded_size: the number of slots (static), >= 1.

    Returns:
      ``(indices int32[padded_size], mask bool[padded_size], truncated bool)``: the selected indices
      (0 in unused slots), which slots hold one, and whether a selected index did not fit.

    Example:
      >>> import jax
      >>> indices, mask, truncated = poisson_sample(jax.random.key(0), 1000, 0.01, 25)
    """
    dataset_size = check_int(dataset_size, "dataset_size", minimum=1)
    padded_size = check_int(padded_size, "padded_size", minimum=1)
    positions = jnp.cumsum(jax.random.geometric(key, sampling_rate, (padded_size + 1,))) - 1
    mask = positions[:padded_size] < dataset_size
    indices = jnp.where(mask, positions[:padded_size], 0).astype(jnp.int32)
    return indices, mask, positions[padded_size] < dataset_size


def _validated(dataset_size, sampling_rate, steps):
    dataset_size = check_int(dataset_size, "dataset_size", minimum=1)
    sampling_rate = check_probability(sampling_rate, "sampling_rate", open_low=True)
    steps = check_int(steps, "steps", minimum=0)
    return dataset_size, sampling_rate, steps


def _log_tail(n: int, rate: float, size: int) -> float:
    """Chernoff's bound on ``log P(Binomial(n, rate) > size)``: ``-n KL(a || rate)`` at
    ``a = (size + 1) / n`` when ``a > rate`` (else 0, the trivial bound)."""
    if size >= n:
        return -math.inf
    a = (size + 1) / n
    if a <= rate:
        return 0.0
    if a == 1:
        return n * math.log(rate)  # P(all n selected) = rate^n
    return -n * (a * math.log(a / rate) + (1 - a) * math.log((1 - a) / (1 - rate)))


def _log_truncation(dataset_size, sampling_rate, steps, padded_size) -> float:
    n, rate, steps = _validated(dataset_size, sampling_rate, steps)
    padded_size = check_int(padded_size, "padded_size", minimum=1)
    if steps == 0:
        return -math.inf
    return min(0.0, math.log(steps) + _log_tail(n + 1, rate, padded_size))


def truncation_probability(dataset_size: int, *, sampling_rate: float, steps: int, padded_size: int) -> float:
    """An upper bound on the probability that some of ``steps`` Poisson samples exceeds
    ``padded_size``, on ``dataset_size`` examples or one more (an add neighbour): ``steps * P(Binomial(
    dataset_size + 1, sampling_rate) > padded_size)`` with Chernoff's bound on the tail (union bound).

    Example:
      >>> truncation_probability(32561, sampling_rate=256 / 32561, steps=400, padded_size=378) < 1e-8
      True
    """
    return math.exp(_log_truncation(dataset_size, sampling_rate, steps, padded_size))


def truncation_delta(
    dataset_size: int, *, sampling_rate: float, steps: int, padded_size: int, epsilon: float
) -> float:
    """What truncation adds to delta at ``epsilon``: ``eta (1 + e^epsilon)`` with ``eta`` the
    :func:`truncation_probability` (module docstring), computed in log space, capped at 1.

    Example:
      >>> truncation_delta(32561, sampling_rate=256 / 32561, steps=400, padded_size=380, epsilon=3.0) < 1e-7
      True
    """
    epsilon = check_epsilon(epsilon)
    log_eta = _log_truncation(dataset_size, sampling_rate, steps, padded_size)
    return math.exp(min(0.0, log_eta + epsilon + math.log1p(math.exp(-epsilon))))


def padded_batch_size(
    dataset_size: int, *, sampling_rate: float, steps: int, epsilon: float, delta: float, share: float = 0.01
) -> int:
    """The smallest padded size whose :func:`truncation_delta` at ``epsilon`` is at most ``share *
    delta``: a run over ``steps`` truncated Poisson samples of that size is ``(epsilon, delta)``-DP
    when its Poisson run is ``(epsilon, (1 - share) delta)``-DP (module docstring). Chernoff's bound
    in log space: any epsilon's tiny truncation probability is representable.

    Example:
      >>> padded_batch_size(32561, sampling_rate=256 / 32561, steps=636, epsilon=3.0, delta=1e-5)
      378
    """
    n, rate, steps = _validated(dataset_size, sampling_rate, steps)
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    share = check_probability(share, "share", open_low=True, open_high=True)
    log_eta = math.log(share * delta) - epsilon - math.log1p(math.exp(-epsilon)) - math.log(max(steps, 1))
    lo, hi = 0, n + 1  # _log_tail(n + 1, rate, hi) = -inf <= log_eta
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _log_tail(n + 1, rate, mid) <= log_eta else (mid, hi)
    return max(hi, 1)
