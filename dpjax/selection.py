"""Selection over a known candidate set: exponential mechanism, report-noisy-max, one-shot Gumbel
top-k and noisy top-k with free gaps.

* Exponential mechanism (McSherry and Talwar 2007), sampled as a Gumbel-max: ``argmax(u + G)`` with
  ``G`` iid Gumbel(b) is exactly a draw with probabilities proportional to ``exp(u/b)``
  (Durfee and Rogers 2019, Lemma 4.2 with k = 1). It never forms linear-space probabilities, so
  10^6 candidates whose utilities span 10^4 are fine. ``method="inverse_cdf"`` draws from the same
  law by a two-level cumulative table built once per data (:mod:`dpjax._src.categorical`), O(log d) per
  draw against the literal kernel's O(d), faster for one release too (timings in benchmarks/README.md).
  Its probabilities carry an absolute error of about 1e-7 in float32 where the literal Gumbel-max
  has a relative one down to ~1e-19, so ``"auto"`` never picks it.
* ``method="auto"`` (the default of every function here, :mod:`dpjax._src.auto`): one release, or a
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
  available. Estimators that use the gaps are in :mod:`dpjax._src.postprocess.topk_gap`.

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

from dpjax._src.selection import (
    discrete_peeling_top_k,
    discrete_peeling_top_k_guarantee,
    discrete_report_noisy_max,
    discrete_report_noisy_max_guarantee,
    exponential_mechanism,
    exponential_mechanism_guarantee,
    gumbel_top_k,
    gumbel_top_k_guarantee,
    joint_top_k,
    joint_top_k_guarantee,
    report_noisy_max,
    report_noisy_max_guarantee,
)
from dpjax._src.selection_draws import Method, Noise, TopKMethod
from dpjax._src.selection_gap import (
    GapNoise,
    noisy_max_with_gap,
    noisy_max_with_gap_guarantee,
    noisy_top_k_with_gap,
    noisy_top_k_with_gap_guarantee,
    noisy_top_k_with_gap_scale,
)
from dpjax._src.topk.joint import JointMethod

__all__ = [
    "GapNoise",
    "JointMethod",
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
