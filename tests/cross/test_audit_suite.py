"""The audit suite: every mechanism the library exports passes a statistical privacy audit on the
specs' worst-case neighbors, and every deliberately broken variant (tests/negative_controls.py) is caught.

Each audit has false-alarm probability <= alpha = 1e-3 (DEFAULT_ALPHA) and fixed keys, so a correct
mechanism fails here only if its privacy claim is wrong. Positive audits use 200,000 runs per input
(50,000-100,000 for the slowest kernels, see TRIALS); negative controls use the default number of
trials (DEFAULT_TRIALS = 500,000), as the acceptance criterion asks. The claim audited is the
mechanism's own guarantee companion, converted to (epsilon, delta) (range-bounded -> pure;
zCDP -> (epsilon, 1e-3)).
"""

import jax
import negative_controls
import numpy as np
import pytest

from dpjax import additive, aggregates, budgeting, quantiles, selection, svt, topk
from dpjax._src.topk.laplace import laplace_limited_domain, laplace_limited_domain_guarantee
from dpjax.accounting import ZCDP, ApproxDP, PureDP, RangeBounded
from dpjax.audit import audit, neighbors, reference

POSITIVE_TRIALS = 200_000
ZCDP_DELTA = 1e-3


def claim(guarantee) -> tuple[float, float]:
    """The (epsilon, delta) a guarantee companion promises."""
    if isinstance(guarantee, PureDP):
        return guarantee.epsilon, 0.0
    if isinstance(guarantee, RangeBounded) and guarantee.approx is not None:
        return guarantee.approx.epsilon, guarantee.approx.delta
    if isinstance(guarantee, RangeBounded):
        return guarantee.to_pure().epsilon, 0.0
    if isinstance(guarantee, ApproxDP):
        return guarantee.epsilon, guarantee.delta
    if isinstance(guarantee, ZCDP):
        approx = guarantee.to_approx_dp(ZCDP_DELTA)
        return approx.epsilon, approx.delta
    raise TypeError(guarantee)


EPS = 1.0
NMAX = neighbors.noisy_max_worst_case()
NMAX_MONO = neighbors.noisy_max_worst_case(monotonic=True)
TOP2 = (np.zeros(4), np.array([1.0, 1.0, -1.0, -1.0]))
# The same neighbors among 100 integer counts: the joint top-k's histogram path (the head does not suffice).
TOP2_COUNTS = tuple(np.pad(x, (0, 96)).astype(np.int32) for x in TOP2)
SVT = neighbors.svt_worst_case(8)
SVT_MONO = neighbors.svt_worst_case(8, monotonic=True)
QUANT = neighbors.quantile_worst_case(8, 0.0, 1.0)
QUANT_WIDE = neighbors.quantile_worst_case(8, 0.0, 10.0)
QUANT_SIGNED = neighbors.quantile_worst_case(8, -10.0, 10.0)
HIST = neighbors.histogram_worst_case(5, 2)
DELTA = 0.05  # large enough for delta-events to be measurable

POSITIVE = {
    # additive
    "laplace": (
        lambda k, v: additive.laplace_mechanism(k, v, EPS),
        0.0,
        1.0,
        additive.laplace_guarantee(EPS),
    ),
    "laplace_vector": (
        lambda k, v: additive.laplace_mechanism(k, v, EPS),
        np.zeros(2),
        np.array([0.5, -0.5]),
        additive.laplace_guarantee(EPS),
    ),
    "gaussian": (
        lambda k, v: additive.gaussian_mechanism(k, v, 2.0),
        0.0,
        1.0,
        additive.gaussian_guarantee(2.0),
    ),
    # reference mechanisms of the audit package
    "randomized_response": (
        lambda k, v: reference.randomized_response(k, v, EPS),
        True,
        False,
        reference.randomized_response_guarantee(EPS),
    ),
    "reference_sparse_vector_c2": (
        lambda k, v: reference.sparse_vector(k, v, EPS, 0.0, c=2),
        *SVT,
        reference.sparse_vector_guarantee(EPS, c=2),
    ),
    "reference_noisy_max_with_gap": (
        lambda k, v: reference.noisy_max_with_gap(k, v, EPS),
        *NMAX,
        PureDP(EPS),
    ),
    "reference_limit_domain_top1": (
        lambda k, v: reference.limit_domain_top1(k, v, EPS, DELTA, kbar=2),
        *HIST,
        ApproxDP(EPS, DELTA),
    ),
    # selection
    "exponential_mechanism": (
        lambda k, v: selection.exponential_mechanism(k, v, EPS),
        *NMAX,
        selection.exponential_mechanism_guarantee(EPS),
    ),
    "report_noisy_max_laplace": (
        lambda k, v: selection.report_noisy_max(k, v, EPS, noise="laplace"),
        *NMAX,
        selection.report_noisy_max_guarantee(EPS, noise="laplace"),
    ),
    "report_noisy_max_exponential_monotonic": (
        lambda k, v: selection.report_noisy_max(k, v, EPS, noise="exponential", monotonic=True),
        *NMAX_MONO,
        selection.report_noisy_max_guarantee(EPS, noise="exponential", monotonic=True),
    ),
    "noisy_max_with_gap": (
        lambda k, v: selection.noisy_max_with_gap(k, v, EPS),
        *NMAX,
        selection.noisy_max_with_gap_guarantee(EPS),
    ),
    "noisy_max_with_gap_monotonic": (
        lambda k, v: selection.noisy_max_with_gap(k, v, EPS, monotonic=True),
        *NMAX_MONO,
        selection.noisy_max_with_gap_guarantee(EPS, monotonic=True),
    ),
    "gumbel_top_k": (
        lambda k, v: selection.gumbel_top_k(k, v, 2, EPS),
        *TOP2,
        selection.gumbel_top_k_guarantee(2, EPS),
    ),
    "joint_top_k": (
        lambda k, v: selection.joint_top_k(k, v, 2, EPS),
        *TOP2,
        selection.joint_top_k_guarantee(2, EPS),
    ),
    "joint_top_k_integer_counts": (
        lambda k, v: selection.joint_top_k(k, v, 2, EPS),
        *TOP2_COUNTS,
        selection.joint_top_k_guarantee(2, EPS),
    ),
    "noisy_top_k_with_gap": (
        lambda k, v: selection.noisy_top_k_with_gap(k, v, 2, EPS),
        *TOP2,
        selection.noisy_top_k_with_gap_guarantee(2, EPS),
    ),
    # svt
    "above_threshold": (
        lambda k, v: svt.above_threshold(k, v, 0.0, EPS / 2, EPS / 2),
        *SVT,
        svt.above_threshold_guarantee(EPS / 2, EPS / 2),
    ),
    "above_threshold_exponential_monotonic": (
        lambda k, v: svt.above_threshold(k, v, 0.0, EPS / 2, EPS / 2, noise="exponential"),
        *SVT_MONO,
        svt.above_threshold_guarantee(EPS / 2, EPS / 2, monotonic=True, noise="exponential"),
    ),
    "sparse_vector": (
        lambda k, v: svt.sparse_vector(k, v, 0.0, EPS / 2, EPS / 2, c=2),
        *SVT,
        svt.sparse_vector_guarantee(EPS / 2, EPS / 2, c=2),
    ),
    "sparse_vector_with_gap": (
        lambda k, v: svt.sparse_vector_with_gap(k, v, 0.0, EPS, c=2),
        *SVT,
        svt.sparse_vector_with_gap_guarantee(EPS, c=2),
    ),
    "adaptive_sparse_vector_with_gap": (
        lambda k, v: svt.adaptive_sparse_vector_with_gap(k, v, 0.0, EPS, c=2),
        *SVT,
        svt.adaptive_sparse_vector_with_gap_guarantee(EPS, c=2),
    ),
    # top-k over unknown domains
    "limited_domain": (
        lambda k, v: topk.limited_domain(k, v, 1, 2, EPS, DELTA),
        *HIST,
        topk.limited_domain_guarantee(1, EPS, DELTA),
    ),
    "fixed_threshold": (
        lambda k, v: topk.fixed_threshold(k, v, 2, EPS, DELTA),
        *HIST,
        topk.fixed_threshold_guarantee(2, EPS, DELTA),
    ),
    "private_kbar": (
        lambda k, v: topk.private_kbar(k, v, 1, 3, EPS, DELTA),
        *HIST,
        topk.private_kbar_guarantee(1, EPS, DELTA),
    ),
    "laplace_limited_domain_experimental": (
        lambda k, v: laplace_limited_domain(k, v, 2, 2, EPS, 1e-3, max_contributions=1),
        *HIST,
        laplace_limited_domain_guarantee(2, EPS, 1e-3, max_contributions=1),
    ),
    # quantiles
    "emq": (
        lambda k, v: quantiles.emq(k, v, 0.5, EPS, bounds=(0.0, 1.0)),
        *QUANT,
        quantiles.emq_guarantee(EPS),
    ),
    "ind_exp": (
        lambda k, v: quantiles.ind_exp(k, v, (0.25, 0.75), EPS, bounds=(0.0, 1.0)),
        *QUANT,
        quantiles.ind_exp_guarantee((0.25, 0.75), EPS),
    ),
    "approx_quantiles": (
        lambda k, v: quantiles.approx_quantiles(k, v, (0.25, 0.5, 0.75), EPS, bounds=(0.0, 1.0)),
        *QUANT,
        quantiles.approx_quantiles_guarantee((0.25, 0.5, 0.75), EPS),
    ),
    "agg_tree": (
        lambda k, v: quantiles.agg_tree(k, v, (0.5,), EPS, bounds=(0.0, 1.0), branching=2, height=3),
        *QUANT,
        quantiles.agg_tree_guarantee(EPS),
    ),
    "joint_exp": (
        lambda k, v: quantiles.joint_exp(k, v, (0.25, 0.75), EPS, bounds=(0.0, 1.0)),
        *QUANT,
        quantiles.joint_exp_guarantee(EPS),
    ),
    "unbounded_quantile": (
        lambda k, v: quantiles.unbounded(k, v, 0.5, EPS, beta=1.5, max_queries=30),
        *QUANT_WIDE,
        quantiles.unbounded_guarantee(0.5, EPS),
    ),
    "fully_unbounded_quantile": (
        lambda k, v: quantiles.fully_unbounded(k, v, 0.5, EPS, beta=1.5, max_queries=30),
        *QUANT_SIGNED,
        quantiles.fully_unbounded_guarantee(0.5, EPS),
    ),
    "unbounded_many": (
        lambda k, v: quantiles.unbounded_many(k, v, (0.25, 0.75), EPS, beta=1.5, max_queries=30),
        *QUANT_WIDE,
        quantiles.unbounded_many_guarantee((0.25, 0.75), EPS),
    ),
    "app_ind_exp": (
        lambda k, v: quantiles.app_ind_exp(k, v, (0.25, 0.75), EPS, bounds=(0.0, 1.0)),
        *QUANT,
        quantiles.app_ind_exp_guarantee((0.25, 0.75), EPS),
    ),
    # t is given: its default is tuned with NumPy at call time, which fails when x is traced
    "csmooth": (
        lambda k, v: quantiles.csmooth(k, v, (0.5,), EPS**2 / 2, bounds=(0.0, 1.0), t=(1.0,)),
        *QUANT,
        quantiles.csmooth_guarantee(EPS**2 / 2),
    ),
    # DP sum with a UQE clipping bound (the bound and the truncation flag are released too)
    "dp_sum": (
        lambda k, v: aggregates.clipped_sum(k, v, 2 * EPS, q=0.9, beta=1.5, max_queries=30),
        *QUANT_WIDE,
        aggregates.sum_guarantee(2 * EPS, q=0.9),
    ),
    # adaptive per-user budgeting: one user whose score moves by 1 (the metric's unit)
    "pie_ni": (
        lambda k, v: budgeting.pie_ni(k, v, 0.5, c=4, beta0=0.1, nu_low=0.5, nu_high=0.5),
        np.array([0.0]),
        np.array([1.0]),
        budgeting.pie_guarantee(0.5),
    ),
}
# The slowest kernels per run get fewer runs, to keep the suite in its CI budget.
TRIALS = {
    "joint_exp": 50_000,
    "joint_top_k_integer_counts": 100_000,
    "approx_quantiles": 50_000,
    "pie_ni": 100_000,
    "fully_unbounded_quantile": 100_000,
    "unbounded_many": 100_000,
    "app_ind_exp": 100_000,
    "csmooth": 100_000,
}


# The audits whose CPU goes into running compiled code compile with every XLA pass (tests/conftest.py):
# with the suite's fast compilation they took up to 3x the CPU (unbounded_many 35 s against 12 s,
# each alone from empty caches). The others are compile-bound: 7-12 compilations each, which every
# pass makes 2-4x slower, and runs that take about as long either way (joint_exp 5.2 s against
# 9.9 s alone; the positive audits in one run of this module: 80 s of CPU against 100 s; 2026-12-06,
# load ~3 on 2 cores). Either way the same programs, keys, trials and threshold (each passes both ways).
RUN_BOUND = {
    "above_threshold",
    "above_threshold_exponential_monotonic",
    "adaptive_sparse_vector_with_gap",
    "sparse_vector",
    "sparse_vector_with_gap",
    "unbounded_many",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.optimized) if n in RUN_BOUND else n for n in sorted(POSITIVE)]
)
def test_library_mechanism_passes_its_audit(name):
    mechanism, x, x_prime, guarantee = POSITIVE[name]
    epsilon, delta = claim(guarantee)
    trials = TRIALS.get(name, POSITIVE_TRIALS)
    result = audit(mechanism, x, x_prime, epsilon=epsilon, delta=delta, trials=trials)
    assert result.passed, f"{name}: {result}"


NEGATIVE = {
    "svt_without_threshold_noise": (
        lambda k, v: negative_controls.svt_without_threshold_noise(k, v, EPS, 0.0),
        *neighbors.svt_worst_case(10),
        EPS,
        0.0,
    ),
    "svt_noisy_answers": (
        lambda k, v: negative_controls.svt_noisy_answers(k, v, EPS, 0.0),
        *neighbors.svt_worst_case(10),
        EPS,
        0.0,
    ),
    "svt_threshold_not_resampled": (
        lambda k, v: negative_controls.svt_threshold_not_resampled(k, v, EPS, 0.0),
        *neighbors.svt_worst_case(10),
        EPS,
        0.0,
    ),
    "noisy_max_monotone_scale": (
        lambda k, v: negative_controls.noisy_max_monotone_scale(k, v, EPS), *NMAX, EPS, 0.0
    ),
    "limit_domain_without_plus_one": (
        lambda k, v: negative_controls.limit_domain_without_plus_one(k, v, EPS, DELTA, kbar=2),
        *HIST,
        EPS,
        DELTA,
    ),
    "laplace_half_scale": (lambda k, v: negative_controls.laplace_half_scale(k, v, EPS), 0.0, 1.0, EPS, 0.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_negative_control_is_caught_with_default_trials(name):
    mechanism, x, x_prime, epsilon, delta = NEGATIVE[name]
    result = audit(mechanism, x, x_prime, epsilon=epsilon, delta=delta, key=jax.random.key(7))
    assert not result.passed, f"{name}: {result}"
    assert result.p_value < result.alpha
