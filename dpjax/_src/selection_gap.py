"""Noisy-Top-K-with-Gap and Noisy-Max-with-Gap (Ding, Wang, Zhang and Kifer 2019, Algorithm 1,
Theorem 2): the k noisy winners and the k gaps between consecutive noisy values, at no extra privacy
cost (see :mod:`dpjax.selection`)."""

from __future__ import annotations

import functools
from typing import Literal, TypeAlias, get_args

import jax
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_choice, check_int, float_dtype
from dpjax._src.selection_draws import (
    TOP_K_METHODS,
    TopKMethod,
    check_guarantee_args,
    noise_scale,
    noisy_top,
    prepare_scores,
    tree_top,
)
from dpjax._src.validation import Checks

__all__ = [
    "GAP_NOISES",
    "GapNoise",
    "noisy_max_with_gap",
    "noisy_max_with_gap_guarantee",
    "noisy_top_k_with_gap",
    "noisy_top_k_with_gap_guarantee",
    "noisy_top_k_with_gap_scale",
]


GapNoise: TypeAlias = Literal["laplace", "gumbel"]
"""The gap mechanisms' noise (static)."""
GAP_NOISES: tuple[GapNoise, ...] = get_args(GapNoise)


def _check_gap_noise(noise, method: str = "auto") -> str:
    """The static options of the gap mechanisms: a noise of :data:`GAP_NOISES`, and ``"tree"`` only
    with Gumbel noise (the top-down construction needs its max-stability)."""
    if noise == "exponential":
        raise ValueError(
            "noise='exponential' is not offered for the gap mechanisms: the privacy of its gaps is "
            "not proven (see noisy_top_k_with_gap); use 'laplace' or 'gumbel'."
        )
    check_choice(noise, "noise", GAP_NOISES)
    check_choice(method, "method", TOP_K_METHODS)
    if method not in ("auto", "literal") and noise != "gumbel":
        raise ValueError(
            f"method={method!r} is the top-down Gumbel process: noise must be 'gumbel', got {noise!r}."
        )
    return noise


def noisy_top_k_with_gap_scale(
    k: int,
    epsilon: ArrayLike,
    *,
    noise: GapNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
) -> jax.Array:
    """The noise scale of :func:`noisy_top_k_with_gap`: ``2k sensitivity/epsilon`` (``k ...`` monotone).

    The same for both noises (``noise``, static, is checked as the mechanism checks it). The gap
    estimators of :mod:`dpjax._src.postprocess.topk_gap` take it as their ``scale``, with the same
    ``noise``. ``k`` is static; ``epsilon`` and ``sensitivity`` may be traced. Returns a scalar in
    the default float dtype, computed as the mechanism computes it; NaN when a traced input is
    invalid (concrete invalid inputs raise).
    """
    _check_gap_noise(noise)
    k = check_int(k, "k", minimum=1)
    checks = Checks()
    return checks.guard(noise_scale(checks, epsilon, sensitivity, monotonic, k, float_dtype()))


def noisy_top_k_with_gap(
    key: jax.Array,
    scores: ArrayLike,
    k: int,
    epsilon: ArrayLike,
    *,
    noise: GapNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
    method: TopKMethod = "auto",
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Top-K-with-Gap: the k noisy winners and the k gaps between consecutive noisy values.

    Ding, Wang, Zhang and Kifer (2019), Algorithm 1 and Theorem 2. Adds noise of scale
    ``b = 2 k sensitivity / epsilon`` (``b = k sensitivity / epsilon`` when ``monotonic=True``,
    e.g. counts under add/remove neighbors) to every score, takes the k+1 largest noisy values
    ``v_1 > ... > v_{k+1}`` (exact ``lax.top_k``) and releases their first k indices and the gaps
    ``g_i = v_i - v_{i+1}``. ``g_k`` is the gap to the best unselected candidate. The noisy values
    themselves are never released.

    Noise. ``"laplace"`` (default): Laplace(b), the paper's mechanism (Theorem 2 covers
    Laplace-type noise only). ``"gumbel"``: Gumbel(b) at the same b; the winners are then exactly
    :func:`gumbel_top_k`'s Plackett-Luce ranking at ``epsilon / k`` (more accurate than Laplace's),
    and ``method="tree"`` draws the k + 1 largest values, hence the gaps, by the top-down Gumbel
    process (:func:`dpjax._src.gumbel_process.top_k`, O(k log n) per release after an O(n) key
    independent preparation; about the literal kernel's cost for one release). Its gaps follow a
    different law from the Laplace ones, so estimators must be told (``noise`` of
    :mod:`dpjax._src.postprocess.topk_gap`).

    Guarantee: epsilon-DP, the same as Noisy Top-K without the gaps (Theorem 2 for Laplace; for
    Gumbel, a derivation beyond the paper in ``docs/derivations.md``, which also says why one-sided
    Exponential noise is not offered); see :func:`noisy_top_k_with_gap_guarantee`. Ties have probability
    zero only in exact arithmetic (Section 5.1 of the paper); prefer float64 (``jax_enable_x64``)
    for releases.

    Args:
      key: a ``jax.random`` key.
      scores: shape [n] with n >= k + 1, finite.
      k: number of winners, 1 <= k <= n - 1 (static).
      epsilon: privacy parameter, > 0 (may be traced).
      noise: ``"laplace"`` or ``"gumbel"`` (static), see above.
      sensitivity: per-score sensitivity, > 0 (may be traced).
      monotonic: see above (static bool).
      method: ``"auto"`` (default: ``"literal"`` for one release or Laplace noise, ``"tree"``
        for Gumbel noise under ``vmap`` over keys with the scores fixed, :mod:`dpjax._src.auto`),
        ``"literal"`` (n noisy scores and the exact top k + 1) or, with ``noise="gumbel"`` only,
        ``"tree"`` (see above; the float error of its split probabilities is in
        :mod:`dpjax._src.gumbel_process`); static. Same law, different random streams.

    Returns:
      ``(indices, gaps)``: int32 indices [k] in decreasing noisy order and float gaps [k], > 0
      (>= 0 after rounding); indices ``-1`` and gaps NaN when a traced input is invalid.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> idx, gaps = noisy_top_k_with_gap(jax.random.key(0), jnp.arange(20), 3, 1.0, monotonic=True)
    """
    _check_gap_noise(noise, method)
    checks = Checks()
    units, scale, k = prepare_scores(checks, scores, epsilon, sensitivity, monotonic, k, gap=True)
    paths = {
        "literal": functools.partial(noisy_top, noise=noise, k=k + 1),
        "tree": functools.partial(tree_top, k=k + 1),
    }
    values, indices = _auto.run(method, paths, key, units, fast="tree" if noise == "gumbel" else None)
    gaps = (values[:-1] - values[1:]) * scale
    return checks.guard((indices[:k], gaps))


@elementwise("epsilon", "sensitivity")
def noisy_top_k_with_gap_guarantee(
    k: int, epsilon: float, *, noise: GapNoise = "laplace", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP:
    """Noisy-Top-K-with-Gap's guarantee: ``PureDP(epsilon)`` for both noises (Ding et al. 2019,
    Theorem 2 for Laplace; for Gumbel, ``docs/derivations.md``)."""
    _check_gap_noise(noise)
    check_int(k, "k", minimum=1)
    return PureDP(check_guarantee_args(epsilon, sensitivity, monotonic))


def noisy_max_with_gap(
    key: jax.Array,
    scores: ArrayLike,
    epsilon: ArrayLike,
    *,
    noise: GapNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
    method: TopKMethod = "auto",
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Max-with-Gap: :func:`noisy_top_k_with_gap` with k = 1, as scalars.

    Ding et al. (2019), Algorithm 1 with k = 1: Laplace(2 sensitivity/epsilon) noise (half with
    ``monotonic=True``), or Gumbel noise at the same scale (``noise="gumbel"``, static; then
    ``method="tree"`` is allowed); releases the noisy argmax and its gap to the runner-up.
    epsilon-DP (Theorem 2; for Gumbel noise, ``docs/derivations.md``). ``epsilon`` and
    ``sensitivity`` may be traced; ``monotonic`` is a static bool.

    Returns:
      ``(index, gap)``: an int32 scalar and a positive float scalar; ``(-1, NaN)`` when a traced
      input is invalid.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i, gap = noisy_max_with_gap(jax.random.key(0), jnp.array([3.0, 7.0, 1.0]), 1.0)
    """
    indices, gaps = noisy_top_k_with_gap(
        key, scores, 1, epsilon, noise=noise, sensitivity=sensitivity, monotonic=monotonic, method=method
    )
    return indices[0], gaps[0]


@elementwise("epsilon", "sensitivity")
def noisy_max_with_gap_guarantee(
    epsilon: float, *, noise: GapNoise = "laplace", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP:
    """Noisy-Max-with-Gap's guarantee: ``PureDP(epsilon)`` for both noises."""
    return noisy_top_k_with_gap_guarantee(
        1, epsilon, noise=noise, sensitivity=sensitivity, monotonic=monotonic
    )
