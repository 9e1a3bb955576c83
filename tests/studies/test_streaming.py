"""Streamed statistics of long runs (``dpjax/studies/_streaming.py``) against the exact ones.

The sketch's k-th value is within ALPHA relative of the exact k-th order statistic, on adversarial
inputs (the whole float64 range, both signs, zeros, ties, bucket boundaries) and on realistic ones; the
streamed means and intervals equal the exact ones up to float64 rounding; a run_study that streams
gives the exact run's means and, for quantiles, estimates within the bound and intervals that contain
the exact ones.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from dpjax._src.studies import streaming as _streaming
from dpjax.additive import laplace_mechanism
from dpjax.studies import Mechanism, Study, metrics, run_study
from dpjax.validation import check_epsilon

ALPHA = _streaming.ALPHA
BOUND = _streaming.BOUND  # ALPHA and the float rounding of the logarithm
STATISTICS = ("mean", "rmse", "median", "q95", "q5")


def _adversarial(rng, size):
    gamma = (1 + ALPHA) / (1 - ALPHA)
    edges = gamma ** rng.integers(-300_000, 300_000, size // 4).astype(float)  # bucket boundaries
    parts = [
        10.0 ** rng.uniform(-307, 308, size // 4) * rng.choice([-1, 1], size // 4),  # all magnitudes
        np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf)])[: size // 4],
        np.repeat(rng.normal(size=size // 40), 10),  # ties
        np.zeros(size // 8),
        np.array([np.finfo(float).max, -np.finfo(float).max, np.finfo(float).tiny, np.nan, np.inf]),
    ]
    x = np.concatenate(parts)
    return x[rng.permutation(len(x))]


def _exact_order(x):
    finite = np.sort(x[np.isfinite(x)])
    return finite


@pytest.mark.parametrize("kind", ["adversarial", "lognormal errors", "signed normal"])
def test_sketch_order_statistics_are_within_the_stated_bound(kind):
    rng = np.random.default_rng(7)
    size = 40_000
    x = {"adversarial": lambda: _adversarial(rng, size),
         "lognormal errors": lambda: rng.lognormal(-3, 2, size),
         "signed normal": lambda: rng.normal(1, 1e3, size)}[kind]()
    summary = _streaming.Summary(len(x), 1, 1)
    for start in range(0, len(x), 6_001):  # uneven chunks
        summary.add(start, x[start:start + 6_001])
    exact = _exact_order(x)
    assert summary.n[0] == len(exact)
    sketched = np.array([summary.order_statistics([k])[0] for k in range(1, len(exact) + 1, 7)])
    truth = exact[::7]
    normal = np.abs(truth) >= np.finfo(float).tiny
    assert np.all(np.abs(sketched - truth)[normal] <= BOUND * np.abs(truth)[normal])
    assert np.all(np.abs(sketched - truth)[~normal] <= np.finfo(float).tiny)
    # memory: at most one bucket per value, independent of the trial count for a bounded range
    assert len(summary.keys) <= len(exact)
    if kind == "lognormal errors":
        again = _streaming.Summary(len(x), 1, 1)
        for start in range(0, 10 * len(x), len(x)):
            again.add(start % len(x), x)
        assert len(again.keys) == len(summary.keys) and again.n[0] == 10 * len(exact)


def _exact(values, trials, replicates, statistic, rate=False):
    return _streaming.summarize(values, trials, replicates, statistic, 0.95, rate)


def _check_against_exact(streamed, exact, statistic):
    """Means unchanged (float rounding); quantile estimates within the bound, intervals containing the
    exact ones and no wider than the bound allows."""
    assert np.array_equal(streamed["n"], exact["n"])
    if _streaming.quantile_level(statistic) is None:
        for k in ("estimate", "se", "ci_low", "ci_high"):
            np.testing.assert_allclose(streamed[k], exact[k], rtol=1e-11, atol=1e-300)
        assert np.array_equal(streamed["method"], exact["method"])
        return
    # relative: the two order statistics each estimate interpolates have one sign in these cells
    error = np.abs(streamed["estimate"] - exact["estimate"])
    assert np.all(error <= BOUND * np.abs(exact["estimate"]) + 1e-300)
    assert np.all(streamed["ci_low"] <= exact["ci_low"]) and np.all(streamed["ci_high"] >= exact["ci_high"])
    widen = 2 * BOUND / (1 - BOUND)
    assert np.all(exact["ci_low"] - streamed["ci_low"] <= widen * np.abs(exact["ci_low"]))
    assert np.all(streamed["ci_high"] - exact["ci_high"] <= widen * np.abs(exact["ci_high"]))
    assert all("streamed" in m for m in streamed["method"].ravel())


def test_summaries_equal_the_exact_statistics_across_replicates_points_and_chunks():
    rng = np.random.default_rng(3)
    trials, replicates, points = 3_000, 3, 4
    x = rng.lognormal(0, 2, (trials * replicates, points))
    x[::13, 1] *= -1  # a signed column
    x[::17, 2] = np.nan  # failures
    x[:, 3] = rng.integers(0, 3, len(x)) == 0  # a rate, with ties
    summary = _streaming.Summary(trials, replicates, points)
    for start in range(0, len(x), 1_111):  # chunks across replicate boundaries
        summary.add(start, x[start:start + 1_111])
    points_apart = [_streaming.Summary(trials, replicates, 1) for _ in range(points)]
    for g, s in enumerate(points_apart):
        for start in range(0, len(x), 2_500):
            s.add(start, x[start:start + 2_500, g])
    stacked = _streaming.stack(points_apart)
    for statistic in STATISTICS:
        exact = _exact(x, trials, replicates, statistic)
        for s in (summary, stacked):
            _check_against_exact(s.summarize(statistic, 0.95, False), exact, statistic)
    rate = summary.summarize("mean", 0.95, True)
    _check_against_exact(rate, _exact(x, trials, replicates, "mean", rate=True), "mean")


def _private_mean(key, x, epsilon):
    return laplace_mechanism(key, jnp.clip(x, 0.0, 1.0).mean(), epsilon, sensitivity=1.0 / x.size)


def _refuses_tracers(key, x, epsilon):
    check_epsilon(epsilon)  # one compile per grid point: the per-point summaries are stacked
    return _private_mean(key, x, epsilon)


def _study(fn):
    return Study("streamed", mechanisms=[Mechanism("laplace mean", fn)],
                 datasets={"uniform": np.random.default_rng(0).uniform(size=200)},
                 grid={"epsilon": (0.5, 2.0)}, truth=lambda x, **_: jnp.clip(x, 0.0, 1.0).mean(),
                 metrics=[metrics.abs_error(("mean", "median", "q95")), metrics.error(("rmse", "q5"))])


@pytest.mark.parametrize("fn", [_private_mean, _refuses_tracers])
def test_a_long_run_streams_and_reports_it(fn, monkeypatch):
    settings = dict(trials=700, replicates=2, seed=4, chunk_size=2 * 250)  # chunks across replicates
    exact = run_study(_study(fn), **settings)
    values = 700 * 2 * 2  # per metric: trials x replicates x grid points (also when run point by point)
    monkeypatch.setattr(_streaming, "STREAM_ABOVE", values)
    assert _streaming.fold(700, 2, 1, 2) is None and _streaming.fold(700, 2, 2, 2) is None
    monkeypatch.setattr(_streaming, "STREAM_ABOVE", values - 1)
    assert _streaming.fold(700, 2, 1, 2) is not None
    streamed = run_study(_study(fn), **settings)
    assert "streamed" not in exact.record["steps"][0]["chunks"][0]
    record = streamed.record["steps"][0]["chunks"][0]["streamed"]
    assert record["alpha"] == ALPHA and record["memory_bytes"] > 0
    a, b = exact.table, streamed.table
    assert len(a) == len(b) == 2 * 2 * 5
    for (metric, statistic), cells in a.groupby(["metric", "statistic"], sort=False):
        other = b[(b["metric"] == metric) & (b["statistic"] == statistic)]
        as_dict = {k: np.asarray(cells[k], float) for k in ("estimate", "se", "ci_low", "ci_high")}
        got = {k: np.asarray(other[k], float) for k in ("estimate", "se", "ci_low", "ci_high")}
        as_dict.update(n=np.asarray(1 - cells["failure_rate"]), method=np.asarray(cells["ci_method"]))
        got.update(n=np.asarray(1 - other["failure_rate"]), method=np.asarray(other["ci_method"]))
        _check_against_exact(got, as_dict, statistic)
