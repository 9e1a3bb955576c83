"""The implementation behind :mod:`dpjax.selection` (its docstring states the mechanisms, their papers and
guarantees; this module's functions carry theirs)."""

from __future__ import annotations

import jax
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP, RangeBounded
from dpjax._src.host_checks import check_choice, check_int
from dpjax._src.selection_draws import (
    NOISES,
    TOP_K_METHODS,
    Method,
    Noise,
    TopKMethod,
    check_guarantee_args,
    noisy_argmax,
    noisy_top,
    prepare_scores,
    tree_top,
)
from dpjax._src.topk.joint import joint_top_k, joint_top_k_guarantee
from dpjax._src.validation import Checks

__all__ = [
    "discrete_peeling_top_k",
    "discrete_peeling_top_k_guarantee",
    "discrete_report_noisy_max",
    "discrete_report_noisy_max_guarantee",
    "exponential_mechanism",
    "exponential_mechanism_guarantee",
    "gumbel_top_k",
    "gumbel_top_k_guarantee",
    "joint_top_k",
    "joint_top_k_guarantee",
    "report_noisy_max",
    "report_noisy_max_guarantee",
]


def exponential_mechanism(
    key: jax.Array,
    utilities: ArrayLike,
    epsilon: ArrayLike,
    *,
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
    method: Method = "auto",
) -> jax.Array:
    """Samples index i with probability proportional to ``exp(epsilon * u_i / (c * sensitivity))``.

    McSherry and Talwar (2007), sampled by the Gumbel-max trick (Durfee and Rogers 2019, Lemma 4.2,
    k = 1): ``argmax_i u_i + Gumbel(c * sensitivity / epsilon)``, in log space, so it is exact for
    any spread of utilities (10^6 candidates spanning 10^4 included). ``c = 2``, or ``c = 1`` with
    ``monotonic=True`` (see the module docstring for the neighboring relation).

    Guarantee: epsilon-DP and epsilon-range-bounded (Durfee and Rogers 2019, Lemma 4.3), hence
    epsilon^2/8-zCDP (see :func:`exponential_mechanism_guarantee`).

    Args:
      key: a ``jax.random`` key.
      utilities: shape [n], finite, one utility per candidate (higher is better).
      epsilon: privacy parameter, > 0 (may be traced).
      sensitivity: bound on how much any one utility changes between neighbors, > 0 (may be traced).
      monotonic: all utilities move in the same direction between neighbors (static bool).
      method: how the draw is made (static): ``"auto"`` (default), ``"literal"`` for one release
        and ``"tree"`` under ``vmap`` over keys with the data fixed (the rule of :mod:`dpjax._src.auto`;
        same law, the stream depends on the batching); ``"literal"``, the Gumbel-max above (d
        tail-exact Gumbel draws per release, probabilities resolved to about 1e-19); ``"tree"``:
        :func:`gumbel_top_k`'s top-down Gumbel process with k = 1 (O(d) once, key independent, so
        once per data under ``vmap`` over keys, then O(log d) per release; errors relative to each
        split probability); or ``"inverse_cdf"``, :mod:`dpjax._src.categorical`: a two-level cumulative
        table of ``exp(u/b)`` built once and one O(log d) binary search per release, exact in law up
        to the rounding of the tables (an absolute error of about 1e-7 in float32, 1e-16 in
        float64, which is why ``"auto"`` prefers the tree, whose errors stay relative as the
        privacy ratio of small probabilities needs). Same law, different random streams.

    Returns:
      The selected index, an int32 scalar in [0, n); ``-1`` when a traced input is invalid.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = exponential_mechanism(jax.random.key(0), jnp.array([3.0, 10.0, 1.0]), epsilon=1.0)
    """
    return noisy_argmax(key, utilities, epsilon, "gumbel", sensitivity, monotonic, "utilities", method)


@elementwise("epsilon", "sensitivity")
def exponential_mechanism_guarantee(
    epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> RangeBounded:
    """The exponential mechanism's guarantee: ``RangeBounded(epsilon)`` (so epsilon-DP).

    Host-side, for the accountant: concrete numbers, or arrays of them for a grid (an object array
    of guarantees); traced values are refused.
    """
    return RangeBounded(check_guarantee_args(epsilon, sensitivity, monotonic))


def report_noisy_max(
    key: jax.Array,
    scores: ArrayLike,
    epsilon: ArrayLike,
    *,
    noise: Noise = "gumbel",
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
    method: Method = "auto",
) -> jax.Array:
    """Report-noisy-max: the index of the largest ``scores + noise``.

    The noise has scale ``b = c * sensitivity / epsilon`` (``c = 2``, or 1 with ``monotonic=True``):

    * ``"gumbel"``: Gumbel(b); the output is exactly the exponential mechanism (Durfee and Rogers
      2019, Lemma 4.2). epsilon-DP and epsilon-range-bounded (Lemma 4.3).
    * ``"exponential"``: one-sided Exponential(b); equal in law to permute-and-flip (McKenna and
      Sheldon 2020; Ding, Kifer et al. 2021). epsilon-DP; NOT range-bounded in general.
    * ``"laplace"``: Laplace(b) (Dwork and Roth 2014, Claim 3.9, monotone counts; 2x scale for
      general scores). epsilon-DP.

    Neighboring relation: each score has sensitivity ``sensitivity`` under the caller's relation;
    ``monotonic`` asserts all scores move together (counts under add/remove, not under swap).

    Args:
      key: a ``jax.random`` key.
      scores: shape [n], finite.
      epsilon: privacy parameter, > 0 (may be traced).
      noise: "gumbel", "exponential" or "laplace" (static). Default "gumbel": the output is exactly
        the exponential mechanism and epsilon-range-bounded (Durfee and Rogers 2019, Lemmas 4.2-4.3),
        so it is charged the tighter epsilon^2/8-zCDP; "exponential" (permute-and-flip) is more
        accurate under pure DP but not range-bounded.
      sensitivity: per-score sensitivity, > 0 (may be traced).
      monotonic: see above (static bool).
      method: ``"auto"`` (default: :func:`exponential_mechanism`'s rule for Gumbel noise,
        ``"literal"`` for the others), ``"literal"`` (noisy scores and their argmax) or, with
        ``noise="gumbel"`` only, ``"inverse_cdf"`` or ``"tree"`` (see
        :func:`exponential_mechanism`); static.

    Returns:
      The index of the noisy maximum, an int32 scalar in [0, n); ``-1`` when a traced input is
      invalid. The noisy values are not returned.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = report_noisy_max(jax.random.key(0), jnp.array([5, 9, 2]), 1.0, noise="exponential")
    """
    return noisy_argmax(key, scores, epsilon, noise, sensitivity, monotonic, "scores", method)


@elementwise("epsilon", "sensitivity")
def report_noisy_max_guarantee(
    epsilon: float, *, noise: Noise = "gumbel", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP | RangeBounded:
    """``RangeBounded(epsilon)`` for Gumbel noise; ``PureDP(epsilon)`` for Exponential and Laplace.

    Only the Gumbel version is range-bounded, so only it gets the epsilon^2/8-zCDP conversion; the
    others convert as pure DP (epsilon^2/2-zCDP).
    """
    check_choice(noise, "noise", NOISES)
    epsilon = check_guarantee_args(epsilon, sensitivity, monotonic)
    return RangeBounded(epsilon) if noise == "gumbel" else PureDP(epsilon)


def gumbel_top_k(
    key: jax.Array,
    scores: ArrayLike,
    k: int,
    epsilon: ArrayLike,
    *,
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
    method: TopKMethod = "auto",
) -> jax.Array:
    """One-shot Gumbel top-k: the indices of the k largest ``scores + Gumbel(b)``, best first.

    Durfee and Rogers (2019), Lemma 4.2. Noise convention (fixed): ``b = sensitivity / epsilon`` when
    ``monotonic=True``, ``b = 2 * sensitivity / epsilon`` otherwise, so each of the k selections is
    the exponential mechanism with parameter epsilon, and the ranked output is equal in law to
    k-fold peeling (Plackett-Luce):
    ``P(o_1..o_k) = prod_t exp(u_{o_t}/b) / sum_{j not in o_1..o_{t-1}} exp(u_j/b)``.
    ``method="literal"`` draws n Gumbels and takes the exact ``lax.top_k`` (never an approximate one).
    ``method="tree"`` draws the same ranked top-k exactly in law by the top-down Gumbel process
    (Maddison, Tarlow and Minka 2014, :mod:`dpjax._src.gumbel_process`): a log-mass tree built in O(n)
    (key independent, so once per data under ``vmap`` over keys) and ``1 + 2k ceil(log2 n)``
    exponential variates per release; its float error is in that module's docstring.
    ``method="auto"`` (default, :mod:`dpjax._src.auto`) runs the literal kernel for one release and the
    tree under ``vmap`` over keys with the scores fixed (the tree built once per data).

    Guarantee: the k-fold composition of epsilon-range-bounded steps: ``RangeBounded(k * epsilon)``
    (k epsilon-DP), or ``k * epsilon^2 / 8``-zCDP (see :func:`gumbel_top_k_guarantee`).

    Args:
      key: a ``jax.random`` key.
      scores: shape [n], finite.
      k: number of indices, 1 <= k <= n (static).
      epsilon: privacy parameter of each selection, > 0 (may be traced).
      sensitivity: per-score sensitivity, > 0 (may be traced).
      monotonic: all scores move in the same direction between neighbors (counts, add/remove;
        static bool).
      method: ``"auto"`` (default), ``"literal"`` or ``"tree"`` (static), see above. Same law,
        different random streams.

    Returns:
      int32 indices of shape [k], distinct, in decreasing noisy order; all ``-1`` when a traced
      input is invalid.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> top = gumbel_top_k(jax.random.key(0), jnp.arange(100), k=5, epsilon=1.0, monotonic=True)
    """
    check_choice(method, "method", TOP_K_METHODS)
    checks = Checks()
    units, _, k = prepare_scores(checks, scores, epsilon, sensitivity, monotonic, k)
    paths = {
        "literal": lambda key, units: noisy_top(key, units, noise="gumbel", k=k)[1],
        "tree": lambda key, units: tree_top(key, units, k=k)[1],
    }
    return checks.guard(_auto.run(method, paths, key, units, fast="tree"))


@elementwise("epsilon", "sensitivity")
def gumbel_top_k_guarantee(
    k: int, epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> RangeBounded:
    """What to charge for :func:`gumbel_top_k`: k epsilon-range-bounded selections.

    ``RangeBounded(k * epsilon, rho=k * epsilon^2 / 8)``: ``k * epsilon``-range-bounded (hence
    ``k * epsilon``-DP) by composition (Durfee and Rogers 2019, Lemma 3.2), and ``k epsilon^2/8``-zCDP
    by composing each selection's epsilon^2/8 (Cesar and Rogers 2021, Lemma 3.4), which is tighter
    than converting the composed range bound (``(k epsilon)^2 / 8``). The accountant uses the bound
    that fits its budget.
    """
    k = check_int(k, "k", minimum=1)
    epsilon = check_guarantee_args(epsilon, sensitivity, monotonic)
    return RangeBounded(k * epsilon, rho=k * (epsilon * epsilon) / 8)  # inf past 1e154, no OverflowError

# Exact integer variants (discrete Laplace noise, integer comparisons): dpjax/discrete_selection.py.
from dpjax._src import discrete_selection as _discrete  # noqa: E402

discrete_report_noisy_max = _discrete.discrete_report_noisy_max
discrete_report_noisy_max_guarantee = _discrete.discrete_report_noisy_max_guarantee
discrete_peeling_top_k = _discrete.discrete_peeling_top_k
discrete_peeling_top_k_guarantee = _discrete.discrete_peeling_top_k_guarantee
