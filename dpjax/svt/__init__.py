"""The sparse vector family: AboveThreshold, sparse vector, and the free-gap sparse vectors.

* :func:`above_threshold` (Durfee 2023, Algorithm 1) with Laplace, Gumbel or Exponential noise, a
  blocked form for long streams, and :func:`above_threshold_guarantee` (general, monotonic, zCDP).
* :func:`sparse_vector` (Dwork and Roth 2014, Algorithm 2): up to ``c`` answers, resampled threshold.
* :func:`sparse_vector_with_gap` and :func:`adaptive_sparse_vector_with_gap` (Ding, Wang, Zhang,
  Kifer 2019, Algorithm 2), with integer cost accounting.

:func:`above_threshold`, :func:`sparse_vector`, :func:`sparse_vector_with_gap` and
:func:`adaptive_sparse_vector_with_gap` take ``method="first_passage"``: the same laws drawn as
first-passage times on heaps built once per data (:mod:`dpjax._src.svt.first_passage`,
:mod:`dpjax._src.svt.gap_passage`), O(log n) per answer. Their default ``method="auto"``
(:mod:`dpjax._src.auto`) runs the literal kernel for one release and the first passage under ``vmap``
over keys with the queries and budgets fixed (Monte Carlo), nested ``vmap`` over budgets included.

Each keyed kernel has a ``*_from_noise`` core that takes the (scaled) noise as arrays; the cores
equal a sequential loop of the paper's pseudocode bit for bit. Inside a keyed kernel XLA may fuse
``scale*E + q`` into one FMA, so a released gap can differ from the core's in the last bit.

Parameters: the threshold, every budget (``epsilon1``, ``epsilon2``, ``epsilon``, ``theta``),
``sigma`` and ``sensitivity`` may be traced (``jax.vmap`` over any of them equals separate calls
for the same key: noise scales are computed in the working dtype either way); ``c`` (the number of
answers above the threshold before halting, the papers' ``c``), ``block_size``, ``noise`` and
``monotonic`` are static. Concrete values are validated eagerly
(``ValueError`` before any randomness); invalid traced values or NaN queries give the invalid
marker: index -1 (AboveThreshold), ``num_processed = -1`` (sparse vector), ``units_used = -1``
and NaN gaps (the gap variants). Guarantee companions are host-side and take arrays for grids.

Default noise: Laplace, the noise of the classical analysis (Dwork and Roth 2014, Alg. 1 and 2; Lyu,
Su and Li 2017) and of Durfee's Lemma 3.1: its guarantee holds for any split of the budget between
``epsilon1`` and ``epsilon2``, whereas Gumbel noise needs ``epsilon1 == epsilon2`` (Lemma 3.2).
Exponential noise has the same guarantee (Cor. 3.1) and is offered for its smaller error.
"""

from dpjax._src.svt.above_threshold import (
    NOISES,
    AboveThresholdMethod,
    AboveThresholdNoise,
    above_threshold,
    above_threshold_blocked,
    above_threshold_from_noise,
    above_threshold_guarantee,
)
from dpjax._src.svt.gap import (
    adaptive_sparse_vector_with_gap,
    adaptive_sparse_vector_with_gap_from_noise,
    adaptive_sparse_vector_with_gap_guarantee,
    sparse_vector_with_gap,
    sparse_vector_with_gap_from_noise,
    sparse_vector_with_gap_guarantee,
)
from dpjax._src.svt.gap_core import BRANCH_BOTTOM, BRANCH_MIDDLE, BRANCH_TOP, BRANCH_UNPROCESSED, GapResult
from dpjax._src.svt.gap_parameters import GapBudget, default_theta, gap_budget
from dpjax._src.svt.sparse_vector import (
    SparseVectorResult,
    sparse_vector,
    sparse_vector_from_noise,
    sparse_vector_guarantee,
)

__all__ = [
    "BRANCH_BOTTOM",
    "BRANCH_MIDDLE",
    "BRANCH_TOP",
    "BRANCH_UNPROCESSED",
    "NOISES",
    "AboveThresholdMethod",
    "AboveThresholdNoise",
    "GapBudget",
    "GapResult",
    "SparseVectorResult",
    "above_threshold",
    "above_threshold_blocked",
    "above_threshold_from_noise",
    "above_threshold_guarantee",
    "adaptive_sparse_vector_with_gap",
    "adaptive_sparse_vector_with_gap_from_noise",
    "adaptive_sparse_vector_with_gap_guarantee",
    "default_theta",
    "discrete_above_threshold",
    "discrete_above_threshold_guarantee",
    "gap_budget",
    "sparse_vector",
    "sparse_vector_from_noise",
    "sparse_vector_guarantee",
    "sparse_vector_with_gap",
    "sparse_vector_with_gap_from_noise",
    "sparse_vector_with_gap_guarantee",
]

# Exact AboveThreshold on integer queries (discrete Laplace noise): dpjax/svt/discrete.py.
from dpjax._src.svt.discrete import discrete_above_threshold, discrete_above_threshold_guarantee
