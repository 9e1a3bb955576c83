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
  :func:`noisy_top_k_with_gap`), then with the one-shot top-down sampler of :func:`gumbel_top_k`
  available. Estimators that use the gaps are in :mod:`dpjax.postprocess.topk_gap`.

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

import jax
import jax.numpy as jnp
from jax import lax

from dpjax import _auto, sharded
from dpjax import categorical as _categorical
from dpjax import gumbel_process as _gumbel_process
from dpjax import noise as _noise
from dpjax.accounting import PureDP, RangeBounded
from dpjax.accounting.elementwise import _elementwise
from dpjax.validation import Checks, check_choice, check_epsilon, check_int, check_positive, float_dtype

__all__ = [
    "discrete_peeling_top_k",
    "discrete_peeling_top_k_guarantee",
    "discrete_report_noisy_max",
    "discrete_report_noisy_max_guarantee",
    "exponential_mechanism",
    "exponential_mechanism_guarantee",
    "gumbel_top_k",
    "gumbel_top_k_guarantee",
    "noisy_max_with_gap",
    "noisy_max_with_gap_guarantee",
    "noisy_top_k_with_gap",
    "noisy_top_k_with_gap_guarantee",
    "noisy_top_k_with_gap_scale",
    "report_noisy_max",
    "report_noisy_max_guarantee",
]

_NOISES = ("gumbel", "exponential", "laplace")
_METHODS = ("auto", "literal", "inverse_cdf", "tree")
_TOP_K_METHODS = ("auto", "literal", "tree")
_GAP_NOISES = ("laplace", "gumbel")


def _check_flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}.")
    return value


def _check_guarantee_args(epsilon, sensitivity, monotonic) -> float:
    """Host-side checks of a guarantee companion's arguments; returns epsilon as a float."""
    epsilon = check_epsilon(epsilon)
    check_positive(sensitivity, "sensitivity")
    _check_flag(monotonic, "monotonic")
    return epsilon


def _check_gap_noise(noise, method: str = "auto") -> str:
    """The static options of the gap mechanisms: a noise of :data:`_GAP_NOISES`, and ``"tree"`` only
    with Gumbel noise (the top-down construction needs its max-stability)."""
    if noise == "exponential":
        raise ValueError(
            "noise='exponential' is not offered for the gap mechanisms: the privacy of its gaps is "
            "not proven (see noisy_top_k_with_gap); use 'laplace' or 'gumbel'."
        )
    check_choice(noise, "noise", _GAP_NOISES)
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
    c = 1 if _check_flag(monotonic, "monotonic") else 2
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
    return _categorical._sample_log_cdf(key, _categorical._log_cdf_table(units))


@functools.partial(jax.jit, static_argnames=("k",))
@sharded.auto_axes
def _tree_top(key, units, *, k: int):
    """The top-k ``(values, indices)`` of ``units + Gumbel(1)`` by the top-down Gumbel process
    (:mod:`dpjax.gumbel_process`), values in the units of ``units``; the log-mass tree is key
    independent (built once under ``vmap`` over keys)."""
    return _gumbel_process._top_k(key, _gumbel_process._log_mass_tree(units), k)


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
    key,
    utilities,
    epsilon: float,
    *,
    sensitivity: float = 1.0,
    monotonic: bool = False,
    method: str = "auto",
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
      epsilon: privacy parameter, > 0 (may be traced).
      sensitivity: bound on how much any one utility changes between neighbours, > 0 (may be traced).
      monotonic: all utilities move in the same direction between neighbours (static bool).
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


@_elementwise("epsilon", "sensitivity")
def exponential_mechanism_guarantee(
    epsilon: float, *, sensitivity: float = 1.0, monotonic: bool = False
) -> RangeBounded:
    """The exponential mechanism's guarantee: ``RangeBounded(epsilon)`` (so epsilon-DP).

    Host-side, for the accountant: concrete numbers, or arrays of them for a grid (an object array
    of guarantees); traced values are refused.
    """
    return RangeBounded(_check_guarantee_args(epsilon, sensitivity, monotonic))


def report_noisy_max(
    key,
    scores,
    epsilon: float,
    *,
    noise: str = "gumbel",
    sensitivity: float = 1.0,
    monotonic: bool = False,
    method: str = "auto",
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


@_elementwise("epsilon", "sensitivity")
def report_noisy_max_guarantee(
    epsilon: float, *, noise: str = "gumbel", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP | RangeBounded:
    """``RangeBounded(epsilon)`` for Gumbel noise; ``PureDP(epsilon)`` for Exponential and Laplace.

    Only the Gumbel version is range-bounded, so only it gets the epsilon^2/8-zCDP conversion; the
    others convert as pure DP (epsilon^2/2-zCDP).
    """
    check_choice(noise, "noise", _NOISES)
    epsilon = _check_guarantee_args(epsilon, sensitivity, monotonic)
    return RangeBounded(epsilon) if noise == "gumbel" else PureDP(epsilon)


def gumbel_top_k(
    key,
    scores,
    k: int,
    epsilon: float,
    *,
    sensitivity: float = 1.0,
    monotonic: bool = False,
    method: str = "auto",
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
      monotonic: all scores move in the same direction between neighbours (counts, add/remove;
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


@_elementwise("epsilon", "sensitivity")
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
    return RangeBounded(k * epsilon, rho=k * epsilon**2 / 8)


def noisy_top_k_with_gap_scale(
    k: int, epsilon: float, *, noise: str = "laplace", sensitivity: float = 1.0, monotonic: bool = False
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
    key,
    scores,
    k: int,
    epsilon: float,
    *,
    noise: str = "laplace",
    sensitivity: float = 1.0,
    monotonic: bool = False,
    method: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Top-K-with-Gap: the k noisy winners and the k gaps between consecutive noisy values.

    Ding, Wang, Zhang and Kifer (2019), Algorithm 1 and Theorem 2. Adds noise of scale
    ``b = 2 k sensitivity / epsilon`` (``b = k sensitivity / epsilon`` when ``monotonic=True``,
    e.g. counts under add/remove neighbours) to every score, takes the k+1 largest noisy values
    ``v_1 > ... > v_{k+1}`` (exact ``lax.top_k``) and releases their first k indices and the gaps
    ``g_i = v_i - v_{i+1}``. ``g_k`` is the gap to the best unselected candidate. The noisy values
    themselves are never released.

    Noise. ``"laplace"`` (default): Laplace(b), the paper's mechanism (Theorem 2 covers
    Laplace-type noise only). ``"gumbel"``: Gumbel(b) at the same b; the winners are then exactly
    :func:`gumbel_top_k`'s Plackett-Luce ranking at ``epsilon / k`` (more accurate than Laplace's),
    and ``method="tree"`` draws the k + 1 largest values, hence the gaps, by the top-down Gumbel
    process (:func:`dpjax.gumbel_process._top_k`, O(k log n) per release after an O(n) key
    independent preparation; about the literal kernel's cost for one release). Its gaps follow a
    different law from the Laplace ones, so estimators must be told (``noise`` of
    :mod:`dpjax.postprocess.topk_gap`).

    Privacy of the Gumbel version (a derivation, not in the 2019 paper). In units ``u = scores / b``,
    with ``s_j = g_j + ... + g_k`` (gaps in units), ``S = {i_1..i_k}``,
    ``Z_R = sum_{l not in S} exp(u_l)`` and ``A = sum_j exp(u_{i_j} - s_j) + Z_R``: the density of
    ``(v_1..v_{k+1})`` with the top-k indices, summed over which unselected candidate is
    ``v_{k+1}``, is ``prod_j exp(u_{i_j} - v_j - e^{u_{i_j} - v_j}) * Z_R t exp(-Z_R t)`` with
    ``t = exp(-v_{k+1})`` (the product of the unselected Gumbel CDFs is ``exp(-Z_R t)``). Writing
    ``v_j = v_{k+1} + s_j`` and integrating ``v_{k+1}`` out (``dv = dt / t``) gives the density of the
    release: ``p(i_1..i_k, g_1..g_k) = k! prod_j exp(u_{i_j} - s_j) Z_R / A^{k+1}``. On a neighbour
    every score moves by ``delta_l`` with ``|delta_l| <= a = sensitivity / b``: the numerator gains
    the factors ``x_j = exp(delta_{i_j})`` and ``y = Z'_R / Z_R`` (a weighted mean of the
    unselected ``exp(delta_l)``), and ``A' / A`` is a weighted mean of the same k + 1 factors, so
    at least their minimum m. The density ratio is then at most ``prod_j (x_j / m) * (y / m)``:
    k + 1 factors in ``[1, e^{2a}]``, one of them 1, so at most ``e^{2ka} = e^{epsilon}``; with
    monotone neighbours all ``delta`` share a sign, the factors lie in ``[1, e^a]`` and the bound is
    ``e^{ka} = e^{epsilon}`` at ``b = k sensitivity / epsilon``. The bound is attained in the limit
    (winners up, the rest down, unselected mass dominating). Checked numerically in
    ``tests/test_selection_gumbel_gap.py`` (the density against both samplers; its ratios on
    neighbours). Ties: as for Laplace, probability zero only in exact arithmetic.

    Not offered: one-sided Exponential noise (permute-and-flip's). Its density has bounded support,
    so it is not admissible noise for the paper's proof (Lemma 1, a log-density Lipschitz on the
    real line), and it lacks max-stability: the unselected maximum's law depends on each score
    through the truncation ``max(v, u_l)``, so the integral above has no common form across
    neighbours and no proof is at hand here (Ding et al. 2019 cover Laplace-type noise only).

    Guarantee: epsilon-DP, the same as Noisy Top-K without the gaps (Theorem 2 for Laplace, the
    derivation above for Gumbel); see :func:`noisy_top_k_with_gap_guarantee`. Ties have probability
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


@_elementwise("epsilon", "sensitivity")
def noisy_top_k_with_gap_guarantee(
    k: int, epsilon: float, *, noise: str = "laplace", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP:
    """Noisy-Top-K-with-Gap's guarantee: ``PureDP(epsilon)`` for both noises (Ding et al. 2019,
    Theorem 2 for Laplace; the derivation in :func:`noisy_top_k_with_gap` for Gumbel)."""
    _check_gap_noise(noise)
    check_int(k, "k", minimum=1)
    return PureDP(_check_guarantee_args(epsilon, sensitivity, monotonic))


def noisy_max_with_gap(
    key,
    scores,
    epsilon: float,
    *,
    noise: str = "laplace",
    sensitivity: float = 1.0,
    monotonic: bool = False,
    method: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Max-with-Gap: :func:`noisy_top_k_with_gap` with k = 1, as scalars.

    Ding et al. (2019), Algorithm 1 with k = 1: Laplace(2 sensitivity/epsilon) noise (half with
    ``monotonic=True``), or Gumbel noise at the same scale (``noise="gumbel"``, static; then
    ``method="tree"`` is allowed); releases the noisy argmax and its gap to the runner-up.
    epsilon-DP (for Gumbel noise by the derivation in :func:`noisy_top_k_with_gap`: the density of
    ``(i, g)`` in units is ``e^{u_i - g} Z_R / (e^{u_i - g} + Z_R)^2``). ``epsilon`` and
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


@_elementwise("epsilon", "sensitivity")
def noisy_max_with_gap_guarantee(
    epsilon: float, *, noise: str = "laplace", sensitivity: float = 1.0, monotonic: bool = False
) -> PureDP:
    """Noisy-Max-with-Gap's guarantee: ``PureDP(epsilon)`` for both noises."""
    return noisy_top_k_with_gap_guarantee(
        1, epsilon, noise=noise, sensitivity=sensitivity, monotonic=monotonic
    )

# Exact integer variants (discrete Laplace noise, integer comparisons): dpjax/discrete_selection.py.
from dpjax import discrete_selection as _discrete  # noqa: E402

discrete_report_noisy_max = _discrete.discrete_report_noisy_max
discrete_report_noisy_max_guarantee = _discrete.discrete_report_noisy_max_guarantee
discrete_peeling_top_k = _discrete.discrete_peeling_top_k
discrete_peeling_top_k_guarantee = _discrete.discrete_peeling_top_k_guarantee
