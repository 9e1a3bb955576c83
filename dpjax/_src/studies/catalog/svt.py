"""Studies of the sparse vector family on the built-in Zipf item-count histogram.

Item counts of a histogram where each record holds one item are monotonic counting queries under
add/remove-one-record (each count moves by 0 or +1), so the monotonic noise scales apply. The stream
order is the dataset's fixed random item order. Thresholds sit between two ranks of the counts
(computed on the host from the data: public in the study's setting).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.postprocess import svt_gap
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register
from dpjax._src.svt.above_threshold import above_threshold
from dpjax._src.svt.gap import adaptive_sparse_vector_with_gap, sparse_vector_with_gap
from dpjax._src.svt.gap_parameters import gap_budget

__all__: list[str] = []

_C = 10  # the number of answers above the threshold (the SVT count c)


def _threshold_at_rank(rank):
    """Midpoint of the counts at (0-based) ranks ``rank - 1`` and ``rank``: ``rank`` items are above."""

    def threshold(counts):
        ordered = np.sort(counts)[::-1]
        return float(ordered[rank - 1] + ordered[rank]) / 2

    return threshold


def _gap_with_measures(key, counts, epsilon, threshold):
    counts = counts.astype(jnp.result_type(float))
    budget = gap_budget(epsilon / 2, _C, monotonic=True)
    measure_scale = _C / (epsilon / 2)
    select_key, measure_key = jax.random.split(key)
    res = sparse_vector_with_gap(select_key, counts, threshold, epsilon / 2, c=_C, monotonic=True)
    truth = jnp.where(res.indices >= 0, counts[jnp.maximum(res.indices, 0)], jnp.nan)  # NaN: not reported
    alpha = truth + measure_scale * jax.random.laplace(measure_key, (_C,), truth.dtype)
    beta = svt_gap.combine_gap_and_measurement(
        res.gaps, threshold, alpha, svt_gap.gap_variance(budget, res.answer_branches), 2 * measure_scale**2)
    # NaN where fewer than k were reported: a failed trial.
    return {"measurement only": alpha - truth, "gap only": res.gaps + threshold - truth,
            "gap + measurement": beta - truth}


register(Study(
    "svt_gap_with_measures",
    family="svt",
    description=f"sparse vector with gap (c={_C}, ε/2) + Laplace measurements (ε/2), combined (Ding §6.2)",
    mechanisms=[Mechanism("SVT with gap + measures", _gap_with_measures,
                          variants=("measurement only", "gap only", "gap + measurement"),
                          theory={("measurement only", "count_mse"): lambda counts, epsilon, **_: {
                              "mean": 2 * (2 * _C / epsilon) ** 2}})],
    datasets={"zipf": ("zipf", {"threshold": _threshold_at_rank(4 * _C)})},
    grid={"epsilon": EPSILONS},
    metrics=[metrics.Metric(
        "count_mse", lambda error, _: jnp.mean(error**2),
        f"squared error of the {_C} reported items' counts (mean over the {_C})", "count²")],
))

_ABOVE = 8 * _C  # items above the adaptive study's threshold


def _adaptive(key, counts, epsilon, threshold):
    counts = counts.astype(jnp.result_type(float))
    out = {}
    for name, sigma in (("adaptive", None), ("σ=∞ baseline", jnp.inf)):
        res = adaptive_sparse_vector_with_gap(key, counts, threshold, epsilon, c=_C, sigma=sigma,
                                              monotonic=True)
        out[name] = {"indices": res.indices, "answers": (res.indices >= 0).sum(),
                     "budget_left": res.epsilon_left / epsilon}
    return out


register(Study(
    "adaptive_svt_answers",
    family="svt",
    description=f"adaptive SVT with gap vs its σ=∞ baseline (c={_C}), {_ABOVE} items above the threshold",
    mechanisms=[Mechanism("adaptive SVT", _adaptive, variants=("adaptive", "σ=∞ baseline"))],
    datasets={"zipf": ("zipf", {"threshold": _threshold_at_rank(_ABOVE)})},
    grid={"epsilon": EPSILONS},
    truth=lambda counts, threshold, **_: jnp.nonzero(counts > threshold, size=_ABOVE, fill_value=-1)[0],
    metrics=[
        metrics.value("answers", "number of answers (items reported above the threshold)", "items",
                      output="answers"),
        metrics.precision(output="indices", description="precision: share of the answers truly above"),
        metrics.recall(output="indices", description=f"recall: share of the {_ABOVE} items above reported"),
        metrics.value("budget_left", "share of ε left unspent", "fraction of ε", output="budget_left"),
    ],
))

_FIRST_RANK = 100  # AboveThreshold's threshold: 100 items are above it
_NOISES = ("laplace", "gumbel", "exponential")


def _first_heavy(noise):
    def release(key, counts, epsilon, threshold):
        counts = counts.astype(jnp.result_type(float))
        index = above_threshold(key, counts, threshold, epsilon / 2, epsilon / 2, noise=noise)
        above = (index >= 0) & (counts[jnp.maximum(index, 0)] > threshold)
        return {"index": jnp.where(index >= 0, index, jnp.nan), "wrong": ~above}

    return release


register(Study(
    "above_threshold_first_heavy_item",
    family="svt",
    description=f"AboveThreshold (ε/2 + ε/2), Laplace vs Gumbel vs Exponential noise: first item above "
    f"rank {_FIRST_RANK} of the 10^4-record sample",
    mechanisms=[Mechanism(f"AboveThreshold, {noise}", _first_heavy(noise)) for noise in _NOISES],
    # The sample's counts near rank 100 are single digits, so the noise (scale 2/ε) matters.
    datasets={"zipf_sample": ("zipf_sample", {"threshold": _threshold_at_rank(_FIRST_RANK)})},
    grid={"epsilon": EPSILONS},
    truth=lambda counts, threshold, **_: jnp.argmax(counts > threshold),
    metrics=[
        metrics.value("wrong_item", "the reported item is not above the threshold (or none is)",
                      "fraction of releases", output="wrong", rate=True),
        # The mean: a median of whole stream positions is often the same for two noises.
        metrics.abs_error(("mean",), unit="stream positions", output="index",
                          description="distance from the reported item to the first item truly above"),
    ],
))
