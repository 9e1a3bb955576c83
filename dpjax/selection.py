"""Selection over a known candidate set: exponential mechanism, report-noisy-max, one-shot Gumbel
top-k and noisy top-k with free gaps.

* Exponential mechanism (McSherry and Talwar 2007), sampled as a Gumbel-max: ``argmax(u + G)`` with
  ``G`` iid Gumbel(b) is exactly a draw with probabilities proportional to ``exp(u/b)``
  (Durfee and Rogers 2019, Lemma 4.2 with k = 1). It never forms linear-space probabilities, so
  10^6 candidates whose utilities span 10^4 are fine.
* Report-noisy-max with Gumbel, one-sided Exponential or Laplace noise (Dwork and Roth 2014,
  Claim 3.9; with Exponential noise it is the permute-and-flip mechanism, McKenna and Sheldon 2020,
  Ding et al. 2021).
* One-shot Gumbel top-k (Durfee and Rogers 2019, Lemma 4.2): the k largest of ``u + G``, in
  decreasing order, is equal in law to k-fold peeling of the exponential mechanism.
* Noisy-Top-K-with-Gap and Noisy-Max-with-Gap (Ding, Wang, Zhang and Kifer 2019, Algorithm 1,
  Theorem 2): Laplace noise, the k winners and the k gaps between consecutive noisy values, at no
  extra privacy cost. Estimators that use the gaps are in :mod:`dpjax.postprocess.topk_gap`.

Noise convention (every function here). Each candidate score has sensitivity ``sensitivity``: under
the chosen neighbouring relation no score moves by more than that (an L-infinity bound, not L1).
``monotonic=True`` additionally asserts that between any two neighbours all scores move in the same
direction, which holds for counting queries under add/remove-one neighbours but NOT under
substitution. The noise scale per selection is ``c * sensitivity / epsilon`` with ``c = 1`` when
monotonic and ``c = 2`` otherwise (times k for the gap mechanisms).

Numerics: the scores are shifted by their maximum (in integer arithmetic for integer counts), which
leaves every output's law unchanged, then divided by the noise scale; under ``vmap`` over keys with
the scores held fixed this data work is done once. Noise comes from :mod:`dpjax.noise` with exact
upper tails. Noisy values are never returned: a Gumbel-noised score is not differentially private.
Ties of the noisy values have probability zero in exact arithmetic; ``lax.top_k`` and ``argmax``
break float ties toward the lower index (data independent). Float noise is not hardened against
floating-point side channels (Mironov 2012).

Array checks (NaN, infinities) are skipped under ``jit`` for traced scores; shapes, k, epsilon and
the options are checked eagerly and must be concrete. Pass large score arrays to a jitted Monte Carlo
as arguments (``jax.vmap(f, in_axes=(0, None))``) rather than closing over them: XLA constant-folds
closed-over arrays, which takes seconds at 10^6 candidates.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from dpjax import noise as _noise
from dpjax.accounting import ZCDP, PureDP, RangeBounded
from dpjax.validation import check_array, check_choice, check_epsilon, check_int, check_positive

NOISES = ("gumbel", "exponential", "laplace")
_NOTIONS = ("range_bounded", "zcdp")


def _check_flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}.")
    return value


def _selection_scale(epsilon, sensitivity, monotonic, k: int = 1) -> float:
    """The noise scale ``c * k * sensitivity / epsilon`` (c = 1 monotonic, 2 otherwise), validated."""
    epsilon = check_epsilon(epsilon)
    sensitivity = check_positive(sensitivity, "sensitivity")
    return (1 if _check_flag(monotonic, "monotonic") else 2) * k * sensitivity / epsilon


def _scores(scores, name: str) -> jax.Array:
    # Concrete scores closed over by a jitted caller are still checked, eagerly.
    with jax.ensure_compile_time_eval():
        return check_array(scores, name, ndim=1)


def _units(scores: jax.Array, scale: float) -> jax.Array:
    """``(scores - max(scores)) / scale`` in a float dtype: same argmax/top-k law, better precision."""
    if scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    dtype = scores.dtype if jnp.issubdtype(scores.dtype, jnp.floating) else jnp.result_type(float)
    dtype = jnp.promote_types(dtype, jnp.float32)
    # max - scores >= 0 is exact in integer arithmetic (large counts, unsigned dtypes included).
    return -(jnp.max(scores) - scores).astype(dtype) / jnp.asarray(scale, dtype)


def exponential_mechanism(
    key, utilities, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
):
    """Samples index i with probability proportional to ``exp(epsilon * u_i / (c * sensitivity))``.

    McSherry and Talwar (2007), sampled by the Gumbel-max trick (Durfee and Rogers 2019, Lemma 4.2,
    k = 1): ``argmax_i u_i + Gumbel(c * sensitivity / epsilon)``, in log space, so it is exact for
    any spread of utilities (10^6 candidates spanning 10^4 included). ``c = 2``, or ``c = 1`` with
    ``monotonic=True`` (see the module docstring for the neighbouring relation).

    Guarantee: epsilon-DP and epsilon-range-bounded (Durfee and Rogers 2019, Lemma 4.3), hence
    epsilon^2/8-zCDP (see :func:`exponential_mechanism_guarantee`).

    Args:
      key: a ``jax.random`` key.
      utilities: shape [n], finite, one utility per candidate (higher is better).
      epsilon: privacy parameter, > 0.
      sensitivity: bound on how much any one utility changes between neighbours, > 0.
      monotonic: all utilities move in the same direction between neighbours.

    Returns:
      The selected index, an int32 scalar in [0, n).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = exponential_mechanism(jax.random.key(0), jnp.array([3.0, 10.0, 1.0]), epsilon=1.0)
    """
    return report_noisy_max(
        key, utilities, epsilon, noise="gumbel", sensitivity=sensitivity, monotonic=monotonic
    )


def exponential_mechanism_guarantee(
    epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> RangeBounded:
    """The exponential mechanism's guarantee: ``RangeBounded(epsilon)`` (so epsilon-DP)."""
    _selection_scale(epsilon, sensitivity, monotonic)
    return RangeBounded(float(epsilon))


def report_noisy_max(
    key,
    scores,
    epsilon: float,
    *,
    noise: str = "gumbel",
    sensitivity: float = 1.0,
    monotonic: bool = False,
):
    """Report-noisy-max: the index of the largest ``scores + noise``.

    The noise has scale ``b = c * sensitivity / epsilon`` (``c = 2``, or 1 with ``monotonic=True``):

    * ``"gumbel"``: Gumbel(b); the output is exactly the exponential mechanism (Durfee and Rogers
      2019, Lemma 4.2). epsilon-DP and epsilon-range-bounded (Lemma 4.3).
    * ``"exponential"``: one-sided Exponential(b); equal in law to permute-and-flip (McKenna and
      Sheldon 2020; Ding, Kifer et al. 2021). epsilon-DP; NOT range-bounded in general.
    * ``"laplace"``: Laplace(b) (Dwork and Roth 2014, Claim 3.9, monotone counts; 2x scale for
      general scores). epsilon-DP.

    Neighbouring relation: each score has sensitivity ``sensitivity`` under the caller's relation;
    ``monotonic`` asserts all scores move together (counts under add/remove, not under swap).

    Args:
      key: a ``jax.random`` key.
      scores: shape [n], finite.
      epsilon: privacy parameter, > 0.
      noise: "gumbel", "exponential" or "laplace".
      sensitivity: per-score sensitivity, > 0.
      monotonic: see above.

    Returns:
      The index of the noisy maximum, an int32 scalar in [0, n). The noisy values are not returned.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = report_noisy_max(jax.random.key(0), jnp.array([5, 9, 2]), 1.0, noise="exponential")
    """
    check_choice(noise, "noise", NOISES)
    scale = _selection_scale(epsilon, sensitivity, monotonic)
    units = _units(_scores(scores, "scores"), scale)
    noisy = units + _noise.sample(noise, key, units.shape, 1.0, units.dtype)
    return jnp.argmax(noisy).astype(jnp.int32)


def report_noisy_max_guarantee(
    epsilon: float, *, noise: str = "gumbel", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP | RangeBounded:
    """``RangeBounded(epsilon)`` for Gumbel noise; ``PureDP(epsilon)`` for Exponential and Laplace.

    Only the Gumbel version is range-bounded, so only it gets the epsilon^2/8-zCDP conversion; the
    others convert as pure DP (epsilon^2/2-zCDP).
    """
    check_choice(noise, "noise", NOISES)
    _selection_scale(epsilon, sensitivity, monotonic)
    return RangeBounded(float(epsilon)) if noise == "gumbel" else PureDP(float(epsilon))


def gumbel_top_k(
    key, scores, k: int, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> jax.Array:
    """One-shot Gumbel top-k: the indices of the k largest ``scores + Gumbel(b)``, best first.

    Durfee and Rogers (2019), Lemma 4.2. Noise convention (fixed): ``b = sensitivity / epsilon`` when
    ``monotonic=True``, ``b = 2 * sensitivity / epsilon`` otherwise, so each of the k selections is
    the exponential mechanism with parameter epsilon, and the ranked output is equal in law to
    k-fold peeling (Plackett-Luce):
    ``P(o_1..o_k) = prod_t exp(u_{o_t}/b) / sum_{j not in o_1..o_{t-1}} exp(u_j/b)``.
    Uses the exact ``lax.top_k`` (never an approximate one); n Gumbel draws per release.

    Guarantee: the k-fold composition of epsilon-range-bounded steps: ``RangeBounded(k * epsilon)``
    (k epsilon-DP), or ``k * epsilon^2 / 8``-zCDP (see :func:`gumbel_top_k_guarantee`).

    Args:
      key: a ``jax.random`` key.
      scores: shape [n], finite.
      k: number of indices, 1 <= k <= n (static).
      epsilon: privacy parameter of each selection, > 0.
      sensitivity: per-score sensitivity, > 0.
      monotonic: all scores move in the same direction between neighbours (counts, add/remove).

    Returns:
      int32 indices of shape [k], distinct, in decreasing noisy order.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> top = gumbel_top_k(jax.random.key(0), jnp.arange(100), k=5, epsilon=1.0, monotonic=True)
    """
    scores = _scores(scores, "scores")
    k = check_int(k, "k", minimum=1, maximum=scores.shape[0])
    units = _units(scores, _selection_scale(epsilon, sensitivity, monotonic))
    noisy = units + _noise.gumbel(key, units.shape, 1.0, units.dtype)
    return lax.top_k(noisy, k)[1].astype(jnp.int32)


def gumbel_top_k_guarantee(
    k: int,
    epsilon: float,
    *,
    sensitivity: float = 1.0,
    monotonic: bool = False,
    notion: str = "range_bounded",
) -> RangeBounded | ZCDP:
    """What to charge for :func:`gumbel_top_k`: k epsilon-range-bounded selections.

    ``notion="range_bounded"`` gives ``RangeBounded(k * epsilon)`` (hence ``k * epsilon``-DP);
    ``notion="zcdp"`` gives ``ZCDP(k * epsilon^2 / 8)`` (Cesar and Rogers 2021), which is tighter
    for zCDP budgets than converting the composed range bound (``(k epsilon)^2 / 8``).
    """
    check_choice(notion, "notion", _NOTIONS)
    k = check_int(k, "k", minimum=1)
    _selection_scale(epsilon, sensitivity, monotonic)
    if notion == "zcdp":
        return ZCDP(k * float(epsilon) ** 2 / 8)
    return RangeBounded(k * float(epsilon))


def noisy_top_k_with_gap_scale(
    k: int, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> float:
    """The Laplace scale of :func:`noisy_top_k_with_gap`: ``2k sensitivity/epsilon`` (``k ...`` monotone).

    The gap estimators of :mod:`dpjax.postprocess.topk_gap` take it as their ``scale``.
    """
    return _selection_scale(epsilon, sensitivity, monotonic, check_int(k, "k", minimum=1))


def noisy_top_k_with_gap(
    key, scores, k: int, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Top-K-with-Gap: the k noisy winners and the k gaps between consecutive noisy values.

    Ding, Wang, Zhang and Kifer (2019), Algorithm 1 and Theorem 2. Adds ``Laplace(b)`` to every score
    with ``b = 2 k sensitivity / epsilon`` (``b = k sensitivity / epsilon`` when ``monotonic=True``,
    e.g. counts under add/remove neighbours), takes the k+1 largest noisy values
    ``v_1 > ... > v_{k+1}`` (exact ``lax.top_k``) and releases their first k indices and the gaps
    ``g_i = v_i - v_{i+1}``. ``g_k`` is the gap to the best unselected candidate. The noisy values
    themselves are never released.

    Guarantee: epsilon-DP, the same as Noisy Top-K without the gaps (Theorem 2); see
    :func:`noisy_top_k_with_gap_guarantee`. Ties have probability zero only in exact arithmetic
    (Section 5.1 of the paper); prefer float64 (``jax_enable_x64``) for releases.

    Args:
      key: a ``jax.random`` key.
      scores: shape [n] with n >= k + 1, finite.
      k: number of winners, 1 <= k <= n - 1 (static).
      epsilon: privacy parameter, > 0.
      sensitivity: per-score sensitivity, > 0.
      monotonic: see above.

    Returns:
      ``(indices, gaps)``: int32 indices [k] in decreasing noisy order and float gaps [k], > 0.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> idx, gaps = noisy_top_k_with_gap(jax.random.key(0), jnp.arange(20), 3, 1.0, monotonic=True)
    """
    scores = _scores(scores, "scores")
    if scores.shape[0] < 2:
        raise ValueError("scores must have at least 2 entries: the gaps need k + 1 candidates.")
    k = check_int(k, "k", minimum=1, maximum=scores.shape[0] - 1)
    scale = noisy_top_k_with_gap_scale(k, epsilon, sensitivity=sensitivity, monotonic=monotonic)
    units = _units(scores, scale)
    values, indices = lax.top_k(units + _noise.laplace(key, units.shape, 1.0, units.dtype), k + 1)
    gaps = (values[:-1] - values[1:]) * jnp.asarray(scale, units.dtype)
    return indices[:k].astype(jnp.int32), gaps


def noisy_top_k_with_gap_guarantee(
    k: int, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP:
    """Noisy-Top-K-with-Gap's guarantee: ``PureDP(epsilon)`` (Ding et al. 2019, Theorem 2)."""
    noisy_top_k_with_gap_scale(k, epsilon, sensitivity=sensitivity, monotonic=monotonic)
    return PureDP(float(epsilon))


def noisy_max_with_gap(
    key, scores, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Max-with-Gap: :func:`noisy_top_k_with_gap` with k = 1, as scalars.

    Ding et al. (2019), Algorithm 1 with k = 1: Laplace(2 sensitivity/epsilon) noise (half with
    ``monotonic=True``); releases the noisy argmax and its gap to the runner-up. epsilon-DP.

    Returns:
      ``(index, gap)``: an int32 scalar and a positive float scalar.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i, gap = noisy_max_with_gap(jax.random.key(0), jnp.array([3.0, 7.0, 1.0]), 1.0)
    """
    indices, gaps = noisy_top_k_with_gap(
        key, scores, 1, epsilon, sensitivity=sensitivity, monotonic=monotonic
    )
    return indices[0], gaps[0]


def noisy_max_with_gap_guarantee(
    epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP:
    """Noisy-Max-with-Gap's guarantee: ``PureDP(epsilon)``."""
    return noisy_top_k_with_gap_guarantee(1, epsilon, sensitivity=sensitivity, monotonic=monotonic)
