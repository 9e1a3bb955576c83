"""Report-noisy-max and peeling top-k on integer counts with exact discrete Laplace noise.

Report-noisy-max (Dwork and Roth 2014, Claim 3.9) with noise from
:func:`dpjax.noise.discrete_laplace` (Canonne, Kamath and Steinke 2020, Algorithm 2) of scale
``2 sensitivity/epsilon`` (``sensitivity/epsilon`` for monotonic counts), returning the *lowest*
index among the noisy maxima (a fixed tie-break).

Guarantee: ``epsilon``-DP, as Dwork and Roth's Claim 3.9, with ties of positive probability broken
by the lowest index; the proof, and why the free gap is not offered, are in ``docs/derivations.md``.

**Top-k.** :func:`discrete_peeling_top_k` runs k report-noisy-max rounds with ``epsilon/k`` each,
removing each winner (adaptive composition: ``epsilon``-DP). The one-shot top-k with Laplace noise
(Qiao, Su and Zhang 2021; Ding et al. 2019) is not offered: its proofs also rely on ties of
probability zero among the reported ranks, which discrete noise breaks.

Noisy counts are formed as ``clip(c_i + z_i, -B, B)`` (B = (L - 1)/2, L the dtype's maximum, counts
checked to lie in [-B, B]); the result is exact (``docs/derivations.md``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import additive, exact, noise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_exact_integers, check_flag, check_int, check_rational

__all__ = [
    "discrete_peeling_top_k",
    "discrete_peeling_top_k_guarantee",
    "discrete_report_noisy_max",
    "discrete_report_noisy_max_guarantee",
]


def _counts(counts: ArrayLike) -> jax.Array:
    counts = check_exact_integers(counts, "counts")  # exact, in [-B, B] (traced ones clamped)
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(f"counts must have shape (n,) with n >= 1, got {counts.shape}.")
    return counts


def _scale(epsilon, sensitivity, monotonic: bool, rounds: int):
    factor = 1 if check_flag(monotonic, "monotonic") else 2
    scale = factor * rounds * check_rational(sensitivity, "sensitivity") / check_rational(epsilon, "epsilon")
    return exact.scale_at_least(scale, exact.word_type())


def _noisy(key, counts, scale):
    return additive.add_integer_noise(counts, noise.discrete_laplace(key, scale, counts.shape, counts.dtype))


def discrete_report_noisy_max(
    key: jax.Array,
    counts: ArrayLike,
    epsilon: exact.Rational,
    *,
    sensitivity: exact.Rational = 1,
    monotonic: bool = False,
) -> jax.Array:
    """The lowest index of the largest ``counts + Z``, Z exact discrete Laplace per count.

    Guarantee: ``epsilon``-DP (:func:`discrete_report_noisy_max_guarantee`; proof with ties in
    ``docs/derivations.md``) when each count moves by at most the integer ``sensitivity`` between
    neighbors; ``monotonic=True`` (all counts move in the same direction, e.g. histograms under
    add/remove) halves the noise.

    Args:
      key: a ``jax.random`` key (:func:`dpjax.noise.release_key` for a release).
      counts: integer counts, shape ``(n,)``, any integer dtype (taken exactly, as
        :func:`dpjax.additive.discrete_laplace_mechanism` takes its data).
      epsilon: > 0, a host-side exact rational (the noise scale is exact; rounded up when too long).
      sensitivity: integer >= 1 (host-side).
      monotonic: whether the counts are monotonic (static; a Python bool).

    Returns:
      An int32 index.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = discrete_report_noisy_max(jax.random.key(0), jnp.array([3, 90, 12]), 1, monotonic=True)
    """
    counts = _counts(counts)
    noisy = _noisy(key, counts, _scale(epsilon, sensitivity, monotonic, 1))
    return jnp.argmax(noisy).astype(jnp.int32)  # argmax returns the first maximum


def discrete_report_noisy_max_guarantee(
    epsilon: exact.Rational, *, sensitivity: exact.Rational = 1, monotonic: bool = False
) -> PureDP:
    """Pure ``epsilon``-DP (Dwork and Roth 2014, Claim 3.9, with the discrete argument above)."""
    check_rational(sensitivity, "sensitivity")
    check_flag(monotonic, "monotonic")
    return PureDP(float(check_rational(epsilon, "epsilon")))


def discrete_peeling_top_k(
    key: jax.Array,
    counts: ArrayLike,
    k: int,
    epsilon: exact.Rational,
    *,
    sensitivity: exact.Rational = 1,
    monotonic: bool = False,
) -> jax.Array:
    """The indices of k counts chosen by k rounds of :func:`discrete_report_noisy_max`, each with
    ``epsilon/k`` and fresh noise, removing each winner: ``epsilon``-DP by adaptive composition.

    Args:
      key, counts, epsilon, sensitivity, monotonic: as :func:`discrete_report_noisy_max`.
      k: the number of indices, 1 <= k <= n (static).

    Returns:
      int32 indices, shape ``(k,)``, in the order chosen.
    """
    counts = _counts(counts)
    k = check_int(k, "k", minimum=1, maximum=counts.size)
    scale = _scale(epsilon, sensitivity, monotonic, k)
    return _peel(jax.random.split(key, k), counts, scale)


@functools.partial(jax.jit, static_argnames="scale")
def _peel(keys, counts, scale):
    """The rounds of :func:`discrete_peeling_top_k`, one per key (compiled once per shape and scale)."""
    info = jnp.iinfo(counts.dtype)

    def round_(taken, round_key):
        noisy = jnp.where(taken, info.min, _noisy(round_key, counts, scale))
        winner = jnp.argmax(noisy)
        return taken.at[winner].set(True), winner.astype(jnp.int32)

    _, chosen = lax.scan(round_, jnp.zeros(counts.shape, bool), keys)
    return chosen


def discrete_peeling_top_k_guarantee(
    epsilon: exact.Rational, *, sensitivity: exact.Rational = 1, monotonic: bool = False
) -> PureDP:
    """Pure ``epsilon``-DP: k rounds of ``epsilon/k``-DP report-noisy-max, composed."""
    check_rational(sensitivity, "sensitivity")
    check_flag(monotonic, "monotonic")
    return PureDP(float(check_rational(epsilon, "epsilon")))
