"""Selection over a known candidate set: exponential mechanism, report-noisy-max, one-shot Gumbel
top-k and noisy top-k with free gaps.

* Exponential mechanism (McSherry and Talwar 2007), sampled as a Gumbel-max: ``argmax(u + G)`` with
  ``G`` iid Gumbel(b) is exactly a draw with probabilities proportional to ``exp(u/b)``
  (Durfee and Rogers 2019, Lemma 4.2 with k = 1). It never forms linear-space probabilities, so
  10^6 candidates whose utilities span 10^4 are fine. ``method="inverse_cdf"`` draws from the same
  law by a two-level cumulative table built once per data (:mod:`dpjax.categorical`), O(log d) per
  draw (at d = 10^6 on 2 loaded CPU cores: ~3-6 us per trial over 10^4-10^5 vmapped keys against
  ~180 ms for the literal kernel, and 2-3x faster for one release). Its probabilities carry an
  absolute error of about 1e-7 in float32 where the literal Gumbel-max has a relative one down to
  ~1e-19, so ``"auto"`` never picks it.
* ``method="auto"`` (the default of every function here, :mod:`dpjax._auto`): one release, or a
  ``vmap`` that gives each key its own data or budget, runs the literal kernel; a ``vmap`` over keys
  with the data fixed (at least 2 keys per value of the scores and budgets, nested ``vmap`` over
  epsilon or datasets included) runs the top-down Gumbel process (``method="tree"``), whose O(d)
  log-mass tree is built once per data and whose draws cost O(k log d): the same law, a different
  random stream. Laplace and Exponential noise have no fast path: ``"auto"`` is ``"literal"``.
* Report-noisy-max with Gumbel, one-sided Exponential or Laplace noise (Dwork and Roth 2014,
  Claim 3.9; with Exponential noise it is the permute-and-flip mechanism, McKenna and Sheldon 2020,
  Ding et al. 2021).
* One-shot Gumbel top-k (Durfee and Rogers 2019, Lemma 4.2): the k largest of ``u + G``, in
  decreasing order, is equal in law to k-fold peeling of the exponential mechanism.
* Noisy-Top-K-with-Gap and Noisy-Max-with-Gap (Ding, Wang, Zhang and Kifer 2019, Algorithm 1,
  Theorem 2): Laplace noise, the k winners and the k gaps between consecutive noisy values, at no
  extra privacy cost; also with Gumbel noise at the same scale (a derivation beyond the paper, in
  ``docs/derivations.md``), then with the one-shot top-down sampler of :func:`gumbel_top_k`
  available. Estimators that use the gaps are in :mod:`dpjax.postprocess.topk_gap`.

Noise convention (every function here). Each candidate score has sensitivity ``sensitivity``: under
the chosen neighboring relation no score moves by more than that (an L-infinity bound, not L1).
``monotonic=True`` additionally asserts that between any two neighbors all scores move in the same
direction, which holds for counting queries under add/remove-one neighbors but NOT under
substitution. The noise scale per selection is ``c * sensitivity / epsilon`` with ``c = 1`` when
monotonic and ``c = 2`` otherwise (times k for the gap mechanisms).

Numerics: the scores are shifted by their maximum (in integer arithmetic for integer counts), which
leaves every output's law unchanged, then divided by the noise scale; under ``vmap`` over keys with
the scores held fixed this data work is done once. Noise comes from :mod:`dpjax.noise` with exact
upper tails. Noisy values are never returned: a Gumbel-noised score is not differentially private.
Ties of the noisy values have probability zero in exact arithmetic; ``lax.top_k`` and ``argmax``
break float ties toward the lower index (data independent). Float noise is not hardened against
floating-point side channels (Mironov 2012).

Parameters. ``epsilon`` and ``sensitivity`` may be traced (``jax.vmap`` over epsilon sweeps a grid
in one compiled call and gives, for the same key, exactly what separate calls give); ``k`` fixes the
output shape and is static; ``noise`` and ``monotonic`` are static options (a string, a Python
bool). Concrete inputs are checked eagerly, before any randomness: NaN or infinite scores, an empty
or non-vector score array, ``epsilon`` or ``sensitivity`` not finite and > 0, and a bad ``k`` raise a
``ValueError`` naming the argument (concrete scores closed over by a jitted caller are still checked
eagerly). Traced values are checked in the graph (:class:`dpjax.validation.Checks`): an invalid
traced ``epsilon`` or ``sensitivity`` (<= 0, NaN, inf) or a non-finite traced score makes every index
output ``-1`` and every float output NaN, never a confident answer. Pass large score arrays to a
jitted Monte Carlo as arguments (``jax.vmap(f, in_axes=(0, None))``) rather than closing over them:
XLA constant-folds closed-over arrays, which takes seconds at 10^6 candidates.
"""

from __future__ import annotations

import functools
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import categorical as _categorical
from dpjax._src import gumbel_process as _gumbel_process
from dpjax._src import noise as _noise
from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP, RangeBounded
from dpjax._src.topk.joint import joint_top_k, joint_top_k_guarantee
from dpjax._src.validation import (
    Checks,
    check_choice,
    check_epsilon,
    check_flag,
    check_int,
    check_positive,
    float_dtype,
)

__all__ = [
    "GapNoise",
    "Method",
    "Noise",
    "TopKMethod",
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
    "noisy_max_with_gap",
    "noisy_max_with_gap_guarantee",
    "noisy_top_k_with_gap",
    "noisy_top_k_with_gap_guarantee",
    "noisy_top_k_with_gap_scale",
    "report_noisy_max",
    "report_noisy_max_guarantee",
]

Noise: TypeAlias = Literal["gumbel", "exponential", "laplace"]
"""Report-noisy-max's noise (static)."""
Method: TypeAlias = Literal["auto", "literal", "inverse_cdf", "tree"]
"""How the exponential mechanism and report-noisy-max draw (static)."""
TopKMethod: TypeAlias = Literal["auto", "literal", "tree"]
"""How Gumbel top-k and the gap mechanisms draw (static)."""
GapNoise: TypeAlias = Literal["laplace", "gumbel"]
"""The gap mechanisms' noise (static)."""
_NOISES: tuple[Noise, ...] = get_args(Noise)
_METHODS: tuple[Method, ...] = get_args(Method)
_TOP_K_METHODS: tuple[TopKMethod, ...] = get_args(TopKMethod)
GAP_NOISES: tuple[GapNoise, ...] = get_args(GapNoise)


def _check_guarantee_args(epsilon, sensitivity, monotonic) -> float:
    """Host-side checks of a guarantee companion's arguments; returns epsilon as a float."""
    epsilon = check_epsilon(epsilon)
    check_positive(sensitivity, "sensitivity")
    check_flag(monotonic, "monotonic")
    return epsilon


def _check_gap_noise(noise, method: str = "auto") -> str:
    """The static options of the gap mechanisms: a noise of :data:`GAP_NOISES`, and ``"tree"`` only
    with Gumbel noise (the top-down construction needs its max-stability)."""
    if noise == "exponential":
        raise ValueError(
            "noise='exponential' is not offered for the gap mechanisms: the privacy of its gaps is "
            "not proven (see noisy_top_k_with_gap); use 'laplace' or 'gumbel'."
        )
    check_choice(noise, "noise", GAP_NOISES)
    check_choice(method, "method", _TOP_K_METHODS)
    if method not in ("auto", "literal") and noise != "gumbel":
        raise ValueError(
            f"method={method!r} is the top-down Gumbel process: noise must be 'gumbel', got {noise!r}."
        )
    return noise


def _scale(checks: Checks, epsilon, sensitivity, monotonic, k: int, dtype) -> jax.Array:
    """The noise scale ``c * k * sensitivity / epsilon`` (c = 1 monotonic, 2 otherwise) in ``dtype``.

    Computed with jnp in ``dtype`` whether the parameters are concrete or traced, so a ``vmap``
    over epsilon gives exactly the separate calls' scales.
    """
    epsilon = checks.epsilon(epsilon)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    c = 1 if check_flag(monotonic, "monotonic") else 2
    return jnp.asarray(c * k, dtype) * jnp.asarray(sensitivity, dtype) / jnp.asarray(epsilon, dtype)


@functools.partial(jax.jit, static_argnames=("noise", "k"))
def _noisy_top(key, units, *, noise: str, k: int | None):
    """The argmax (``k=None``) or the top-k ``(values, indices)`` of ``units + noise(1)``.

    One compiled kernel for eager and traced calls alike, so that an eager call and the same call
    inside ``jit``/``vmap``/``scan`` evaluate the noise with the same code (XLA's fused ``log`` can
    differ from the unfused one by an ulp, which the gaps would amplify).
    """
    noisy = units + _noise.sample(noise, key, units.shape, 1.0, units.dtype)
    if k is None:
        return jnp.argmax(noisy).astype(jnp.int32)
    # The barriers keep XLA CPU's TopK custom call: slices of its outputs that do not all start at 0
    # (the gaps read ``values[1:]``) otherwise turn it back into a full sort of each batch row (25x
    # slower under ``vmap`` at d = 10^6). One barrier per array: a barrier over the (values, indices)
    # tuple aborts XLA's SPMD partitioner on sharded data (jaxlib 0.10).
    values, indices = sharded.top_k(noisy, k)
    return lax.optimization_barrier(values), lax.optimization_barrier(indices.astype(jnp.int32))


@jax.jit
@sharded.auto_axes
def _inverse_cdf_draw(key, units):
    """One exponential-mechanism draw from the two-level table (key independent, so built once
    under ``vmap`` over keys); compiled for the same reason as :func:`_noisy_top`."""
    return _categorical.sample_log_cdf(key, _categorical.log_cdf_table(units))


@functools.partial(jax.jit, static_argnames=("k",))
@sharded.auto_axes
def _tree_top(key, units, *, k: int):
    """The top-k ``(values, indices)`` of ``units + Gumbel(1)`` by the top-down Gumbel process
    (:mod:`dpjax.gumbel_process`), values in the units of ``units``; the log-mass tree is key
    independent (built once under ``vmap`` over keys)."""
    return _gumbel_process.top_k(key, _gumbel_process.log_mass_tree(units), k)


def _noisy_argmax(key, scores, epsilon, noise, sensitivity, monotonic, name, method):
    check_choice(noise, "noise", _NOISES)
    check_choice(method, "method", _METHODS)
    if method not in ("auto", "literal") and noise != "gumbel":
        raise ValueError(
            f"method={method!r} samples the exponential mechanism: noise must be 'gumbel', got {noise!r}."
        )
    checks = Checks()
    units, _, _ = _prepare(checks, scores, epsilon, sensitivity, monotonic, name=name)
    paths = {
        "literal": functools.partial(_noisy_top, noise=noise, k=None),
        "inverse_cdf": _inverse_cdf_draw,
        "tree": lambda key, units: _tree_top(key, units, k=1)[1][0],
    }
    fast = "tree" if noise == "gumbel" else None
    return checks.guard(_auto.run(method, paths, key, units, fast=fast))


def _units(scores: jax.Array, scale: jax.Array) -> jax.Array:
    """``(scores - max(scores)) / scale`` in ``scale``'s dtype: same argmax/top-k law, better precision."""
    if scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    # max - scores >= 0 is exact in integer arithmetic (large counts, unsigned dtypes included).
    # The barrier keeps XLA from folding the scale's own arithmetic into the division (it rewrites
    # ``x / (c k s / epsilon)`` differently under jit than op by op, an ulp apart in the units, which
    # the tree's log-masses and the gaps carry): with it, eager and traced units are the same.
    return -(jnp.max(scores) - scores).astype(scale.dtype) / lax.optimization_barrier(scale)


def _prepare(
    checks: Checks, scores, epsilon, sensitivity, monotonic, k: int | None = None, *, gap=False, name="scores"
):
    """Validates a selection's inputs and returns ``(units, scale, k)``; ``k=None`` means one winner."""
    scores = checks.array(scores, name, ndim=1)
    if gap and scores.shape[0] < 2:
        raise ValueError("scores must have at least 2 entries: the gaps need k + 1 candidates.")
    if k is not None:
        k = check_int(k, "k", minimum=1, maximum=scores.shape[0] - (1 if gap else 0))
    scale = _scale(checks, epsilon, sensitivity, monotonic, k if gap else 1, float_dtype(scores))
    return _units(scores, scale), scale, k


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
        and ``"tree"`` under ``vmap`` over keys with the data fixed (the rule of :mod:`dpjax._auto`;
        same law, the stream depends on the batching); ``"literal"``, the Gumbel-max above (d
        tail-exact Gumbel draws per release, probabilities resolved to about 1e-19); ``"tree"``:
        :func:`gumbel_top_k`'s top-down Gumbel process with k = 1 (O(d) once, key independent, so
        once per data under ``vmap`` over keys, then O(log d) per release; errors relative to each
        split probability); or ``"inverse_cdf"``, :mod:`dpjax.categorical`: a two-level cumulative
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
    return _noisy_argmax(key, utilities, epsilon, "gumbel", sensitivity, monotonic, "utilities", method)


@elementwise("epsilon", "sensitivity")
def exponential_mechanism_guarantee(
    epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> RangeBounded:
    """The exponential mechanism's guarantee: ``RangeBounded(epsilon)`` (so epsilon-DP).

    Host-side, for the accountant: concrete numbers, or arrays of them for a grid (an object array
    of guarantees); traced values are refused.
    """
    return RangeBounded(_check_guarantee_args(epsilon, sensitivity, monotonic))


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
    return _noisy_argmax(key, scores, epsilon, noise, sensitivity, monotonic, "scores", method)


@elementwise("epsilon", "sensitivity")
def report_noisy_max_guarantee(
    epsilon: float, *, noise: Noise = "gumbel", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP | RangeBounded:
    """``RangeBounded(epsilon)`` for Gumbel noise; ``PureDP(epsilon)`` for Exponential and Laplace.

    Only the Gumbel version is range-bounded, so only it gets the epsilon^2/8-zCDP conversion; the
    others convert as pure DP (epsilon^2/2-zCDP).
    """
    check_choice(noise, "noise", _NOISES)
    epsilon = _check_guarantee_args(epsilon, sensitivity, monotonic)
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
    (Maddison, Tarlow and Minka 2014, :mod:`dpjax.gumbel_process`): a log-mass tree built in O(n)
    (key independent, so once per data under ``vmap`` over keys) and ``1 + 2k ceil(log2 n)``
    exponential variates per release; its float error is in that module's docstring.
    ``method="auto"`` (default, :mod:`dpjax._auto`) runs the literal kernel for one release and the
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
    check_choice(method, "method", _TOP_K_METHODS)
    checks = Checks()
    units, _, k = _prepare(checks, scores, epsilon, sensitivity, monotonic, k)
    paths = {
        "literal": lambda key, units: _noisy_top(key, units, noise="gumbel", k=k)[1],
        "tree": lambda key, units: _tree_top(key, units, k=k)[1],
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
    epsilon = _check_guarantee_args(epsilon, sensitivity, monotonic)
    return RangeBounded(k * epsilon, rho=k * (epsilon * epsilon) / 8)  # inf past 1e154, no OverflowError


def noisy_top_k_with_gap_scale(
    k: int,
    epsilon: ArrayLike,
    *,
    noise: GapNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    monotonic: bool = False,
) -> float:
    """The noise scale of :func:`noisy_top_k_with_gap`: ``2k sensitivity/epsilon`` (``k ...`` monotone).

    The same for both noises (``noise``, static, is checked as the mechanism checks it). The gap
    estimators of :mod:`dpjax.postprocess.topk_gap` take it as their ``scale``, with the same
    ``noise``. ``k`` is static; ``epsilon`` and ``sensitivity`` may be traced. Returns a scalar in
    the default float dtype, computed as the mechanism computes it; NaN when a traced input is
    invalid (concrete invalid inputs raise).
    """
    _check_gap_noise(noise)
    k = check_int(k, "k", minimum=1)
    checks = Checks()
    return checks.guard(_scale(checks, epsilon, sensitivity, monotonic, k, float_dtype()))


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
    process (:func:`dpjax.gumbel_process.top_k`, O(k log n) per release after an O(n) key
    independent preparation; about the literal kernel's cost for one release). Its gaps follow a
    different law from the Laplace ones, so estimators must be told (``noise`` of
    :mod:`dpjax.postprocess.topk_gap`).

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
        for Gumbel noise under ``vmap`` over keys with the scores fixed, :mod:`dpjax._auto`),
        ``"literal"`` (n noisy scores and the exact top k + 1) or, with ``noise="gumbel"`` only,
        ``"tree"`` (see above; the float error of its split probabilities is in
        :mod:`dpjax.gumbel_process`); static. Same law, different random streams.

    Returns:
      ``(indices, gaps)``: int32 indices [k] in decreasing noisy order and float gaps [k], > 0
      (>= 0 after rounding); indices ``-1`` and gaps NaN when a traced input is invalid.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> idx, gaps = noisy_top_k_with_gap(jax.random.key(0), jnp.arange(20), 3, 1.0, monotonic=True)
    """
    _check_gap_noise(noise, method)
    checks = Checks()
    units, scale, k = _prepare(checks, scores, epsilon, sensitivity, monotonic, k, gap=True)
    paths = {
        "literal": functools.partial(_noisy_top, noise=noise, k=k + 1),
        "tree": functools.partial(_tree_top, k=k + 1),
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
    return PureDP(_check_guarantee_args(epsilon, sensitivity, monotonic))


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

# Exact integer variants (discrete Laplace noise, integer comparisons): dpjax/discrete_selection.py.
from dpjax._src import discrete_selection as _discrete  # noqa: E402

discrete_report_noisy_max = _discrete.discrete_report_noisy_max
discrete_report_noisy_max_guarantee = _discrete.discrete_report_noisy_max_guarantee
discrete_peeling_top_k = _discrete.discrete_peeling_top_k
discrete_peeling_top_k_guarantee = _discrete.discrete_peeling_top_k_guarantee
