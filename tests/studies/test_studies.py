"""The Monte Carlo runner, the statistics and the study API (tables, keys, compiles, figures)."""

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import noise
from dpjax._src.additive import laplace_mechanism
from dpjax._src.host_checks import check_epsilon
from dpjax._src.studies.compiles import CompileCounter
from dpjax._src.studies.statistics import summarize
from dpjax._src.studies.theory import Exponential, HalfNormal, theory_value
from dpjax.studies import Mechanism, Study, metrics, monte_carlo, run_study


def _mechanism(key):
    return {"a": noise.laplace(key, (), 1.0), "b": noise.gumbel(key, (2,), 1.0)}


@pytest.mark.parametrize("chunk_size", [3, 64, 1000, 5000])
def test_chunking_does_not_change_results(chunk_size):
    key = jax.random.key(42)
    reference = monte_carlo(_mechanism, key, 1000, chunk_size=1000)
    out = monte_carlo(_mechanism, key, 1000, chunk_size=chunk_size)
    # The documented key derivation: trial i uses fold_in(key, i).
    np.testing.assert_array_equal(out["a"][5], _mechanism(jax.random.fold_in(key, 5))["a"])
    np.testing.assert_array_equal(out["a"], reference["a"])
    np.testing.assert_array_equal(out["b"], reference["b"])
    assert out["b"].shape == (1000, 2)


def test_fewer_trials_are_a_prefix_and_trials_are_independent():
    key = jax.random.key(7)
    long = monte_carlo(_mechanism, key, 500, chunk_size=128)
    short = monte_carlo(_mechanism, key, 100, chunk_size=33)
    np.testing.assert_array_equal(short["a"], long["a"][:100])
    assert len(np.unique(long["a"])) == 500


def test_data_is_closed_over_and_vmapped_once():
    x = jnp.arange(10.0)
    out = monte_carlo(lambda k: x.sum() + noise.laplace(k, (), 0.0), jax.random.key(0), 20)
    np.testing.assert_allclose(out, 45.0)


def test_data_passed_as_arguments_equals_closure_and_reuses_the_compiled_code():
    x = jnp.linspace(0.0, 1.0, 1000)

    def by_arg(k, data):
        return data.mean() + noise.laplace(k)

    first = monte_carlo(by_arg, jax.random.key(3), 50, args=(x,))
    by_closure = monte_carlo(lambda k: x.mean() + noise.laplace(k), jax.random.key(3), 50)
    np.testing.assert_allclose(first, by_closure, rtol=1e-6)
    other, key = 2 * x, jax.random.key(4)
    with CompileCounter() as compiles:  # same f, other key and data of the same shape
        again = monte_carlo(by_arg, key, 50, args=(other,))
    assert compiles.count == 0
    assert not np.allclose(again, first)


def test_bad_runner_arguments():
    with pytest.raises(ValueError, match="trials must be >= 1"):
        monte_carlo(_mechanism, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="chunk_size"):
        monte_carlo(_mechanism, jax.random.key(0), 10, chunk_size=0)


def test_statistics_against_numpy_and_closed_intervals():
    rng = np.random.default_rng(0)
    x = rng.exponential(2.0, (2, 4001))
    x[0, :7] = np.nan  # failures are left out
    finite = [row[np.isfinite(row)] for row in x]
    mean = summarize(x, "mean")
    np.testing.assert_allclose(mean["estimate"], [r.mean() for r in finite])
    np.testing.assert_allclose(mean["se"], [r.std(ddof=1) / np.sqrt(r.size) for r in finite])
    np.testing.assert_allclose(mean["ci_high"] - mean["estimate"], 1.959964 * mean["se"], rtol=1e-6)
    assert list(mean["n"]) == [3994, 4001]
    rmse = summarize(x, "rmse")
    np.testing.assert_allclose(rmse["estimate"], [np.sqrt((r**2).mean()) for r in finite])
    for statistic, level in (("median", 0.5), ("q95", 0.95)):
        q = summarize(x, statistic)
        np.testing.assert_allclose(q["estimate"], [np.quantile(r, level) for r in finite])
        # The interval's ends are order statistics around rank n*p (normal approximation of the binomial).
        r = np.sort(finite[1])
        spread = 1.959964 * np.sqrt(4001 * level * (1 - level))
        assert q["ci_low"][1] == r[int(np.floor(4001 * level - spread)) - 1]
        assert q["ci_high"][1] == r[int(np.ceil(4001 * level + spread))]
    # Wilson score interval: 0 successes of 300 gives [0, z^2/(n + z^2)].
    wilson = summarize(np.zeros((1, 300)), "mean", rate=True)
    assert wilson["ci_low"][0] == pytest.approx(0.0, abs=1e-15)
    assert wilson["ci_high"][0] == pytest.approx(1.959964**2 / (300 + 1.959964**2), rel=1e-6)
    with pytest.raises(ValueError, match="unknown statistic"):
        summarize(x, "q200")


def test_laws_against_scipy():
    pairs = ((Exponential(0.7), stats.expon(scale=0.7)), (HalfNormal(1.3), stats.halfnorm(scale=1.3)))
    for law, reference in pairs:
        assert theory_value(law, "mean") == pytest.approx(reference.mean())
        assert theory_value(law, "rmse") == pytest.approx(math.sqrt(reference.moment(2)))
        assert theory_value(law, "q95") == pytest.approx(reference.ppf(0.95))
        assert theory_value(law, "median") == pytest.approx(reference.median())
    assert theory_value({"mean": 2.0}, "mean") == 2.0 and math.isnan(theory_value({"mean": 2.0}, "q95"))


# A user's own mechanism: a clipped mean with Laplace noise, and the closed form of its error.
def _private_mean(key, x, epsilon):
    return laplace_mechanism(key, jnp.clip(x, 0.0, 1.0).mean(), epsilon, sensitivity=1.0 / x.size)


def _refuses_tracers(key, x, epsilon):
    check_epsilon(epsilon)  # host-side check: raises TracedParameterError on a traced epsilon
    return _private_mean(key, x, epsilon)


def _converts_to_float(key, x, epsilon):
    return _private_mean(key, x, float(epsilon))  # JAX's ConcretizationTypeError on a traced epsilon


def _fails_with_a_type_error(key, x, epsilon):
    raise TypeError("not a refusal of a traced value")


def _truth(x, **_):
    return jnp.clip(x, 0.0, 1.0).mean()


def _laplace_theory(x, epsilon, **_):
    return Exponential(1.0 / (x.size * epsilon))


EPSILONS = (0.5, 1.0, 4.0)
DATA = np.random.default_rng(0).uniform(size=500)


def _study(fn=_private_mean, statistics=("mean", "median", "q95"), **kwargs):
    return Study(
        "user_mean",
        mechanisms=[Mechanism("laplace mean", fn, theory={"abs_error": _laplace_theory})],
        datasets=kwargs.pop("datasets", {"uniform": DATA}),
        grid={"epsilon": EPSILONS},
        truth=_truth,
        metrics=[metrics.abs_error(statistics)],
        **kwargs,
    )


def test_confidence_intervals_cover_the_laplace_closed_form():
    # 200 independent replicates of a 400-trial study over 3 epsilons: one compiled vmapped call.
    with CompileCounter() as compiles:
        result = run_study(_study(), trials=400, replicates=200, seed=11, chunk_size=10**6)
    table = result.table
    assert set(table["replicate"]) == set(range(200)) and set(table["epsilon"]) == set(EPSILONS)
    assert result.record["steps"][0]["path"] == "one compiled call over the grid"
    assert result.record["steps"][0]["compiles"] <= 2 and compiles.count <= 4  # the grid call (+ tiny ops)
    for (statistic, epsilon), cell in table.groupby(["statistic", "epsilon"]):
        theory = theory_value(_laplace_theory(DATA, epsilon), statistic)
        np.testing.assert_allclose(cell["theory"], theory, rtol=1e-12)
        covered = int(((cell["ci_low"] <= theory) & (theory <= cell["ci_high"])).sum())
        # Exact coverage at T = 400: CLT mean about 0.945, order statistics at least 0.95; with 200
        # replicates a correct implementation falls outside these bounds with probability < 1e-4.
        assert 176 <= covered <= 200, (statistic, epsilon, covered)
        if statistic == "mean":
            assert covered <= 199
    mean = table[table["statistic"] == "mean"]
    assert (mean["ci_method"] == "CLT").all() and (mean["failure_rate"] == 0).all()


def test_table_record_and_replicate_zero_is_the_plain_run():
    result = run_study(_study(statistics=("mean",)), trials=300, seed=5)
    table = result.table
    assert list(table.columns) == ["study", "mechanism", "dataset", "epsilon", "metric", "statistic",
                                   "estimate", "se", "ci_low", "ci_high", "theory", "unit", "trials",
                                   "failure_rate", "ci_method"]
    assert len(table) == 3 and (table["trials"] == 300).all() and (table["unit"] == "data units").all()
    # Mean absolute error of Laplace(1/(n eps)) within 5 standard errors of the closed form.
    assert (abs(table["estimate"] - table["theory"]) < 5 * table["se"]).all()
    record = result.record
    for key in ("seed", "trials", "date", "wall_seconds", "backend", "devices", "versions", "compiles",
                "steps"):
        assert key in record
    assert record["seed"] == 5 and record["versions"]["jax"] == jax.__version__
    assert record["grid"] == {"epsilon": list(EPSILONS)}
    assert len(record["load"]["average"]) == 3 and record["load"]["cores"] == os.cpu_count()
    replicated = run_study(_study(statistics=("mean",)), trials=300, seed=5, replicates=2).table
    first = replicated[replicated["replicate"] == 0].drop(columns="replicate").reset_index(drop=True)
    np.testing.assert_array_equal(first["estimate"], table["estimate"])
    assert not np.array_equal(replicated[replicated["replicate"] == 1]["estimate"], table["estimate"])
    again = run_study(_study(statistics=("mean",)), trials=300, seed=6).table
    assert not np.array_equal(again["estimate"], table["estimate"])


def test_results_do_not_depend_on_chunking_or_on_the_other_grid_points():
    reference = run_study(_study(), trials=257, seed=3).table
    chunked = run_study(_study(), trials=257, seed=3, chunk_size=50).table
    np.testing.assert_array_equal(chunked["estimate"], reference["estimate"])
    alone = run_study(_study(), trials=257, seed=3, grid={"epsilon": [1.0]}).table
    np.testing.assert_array_equal(alone["estimate"], reference[reference["epsilon"] == 1.0]["estimate"])


def test_a_mechanism_that_refuses_tracers_runs_one_compile_per_grid_point_with_the_same_keys():
    fast = run_study(_study(statistics=("mean",)), trials=200, seed=1)
    slow = run_study(_study(_refuses_tracers, statistics=("mean",)), trials=200, seed=1)
    step = slow.record["steps"][0]
    assert step["path"].startswith("one compile per grid point") and "concrete number" in step["path"]
    assert step["compiles"] >= len(EPSILONS)
    assert fast.record["steps"][0]["path"] == "one compiled call over the grid"
    np.testing.assert_allclose(slow.table["estimate"], fast.table["estimate"], rtol=1e-6)


def test_the_runner_falls_back_on_refusals_by_class_and_raises_other_type_errors():
    slow = run_study(_study(_converts_to_float, statistics=("mean",)), trials=50, seed=1)
    assert slow.record["steps"][0]["path"].startswith("one compile per grid point")
    with pytest.raises(TypeError, match="not a refusal"):
        run_study(_study(_fails_with_a_type_error, statistics=("mean",)), trials=50, seed=1)


def test_derived_parameters_are_computed_on_the_host_and_keep_the_grid_in_one_call():
    def with_half(key, x, epsilon, half):
        return _private_mean(key, x, 2 * half)  # half = epsilon / 2, from a host-only function

    study = Study("user_mean", mechanisms=[Mechanism("laplace mean", with_half)], datasets={"uniform": DATA},
                  grid={"epsilon": EPSILONS}, derived={"half": lambda epsilon: check_epsilon(epsilon) / 2},
                  truth=_truth, metrics=[metrics.abs_error(("mean",))])
    result = run_study(study, trials=200, seed=1)
    assert result.record["steps"][0]["path"] == "one compiled call over the grid"
    np.testing.assert_allclose(result.table["half"], np.array(EPSILONS) / 2)
    reference = run_study(_study(statistics=("mean",)), trials=200, seed=1).table
    np.testing.assert_allclose(result.table["estimate"], reference["estimate"], rtol=1e-6)


def test_other_type_errors_are_not_taken_for_a_refusal():
    def broken(key, x, epsilon):
        raise TypeError("unsupported operand")

    with pytest.raises(TypeError, match="unsupported operand"):
        run_study(_study(broken), trials=10)


def test_datasets_of_the_same_shape_share_the_compiled_grid():
    two = {"a": DATA, "b": np.random.default_rng(1).uniform(size=500)}
    steps = run_study(_study(datasets=two, statistics=("mean",)), trials=100).record["steps"]
    assert steps[0]["compiles"] >= 1 and steps[1]["compiles"] == 0


def test_static_grid_parameters_variants_outputs_and_set_metrics():
    counts = np.array([50, 3, 40, 1, 30, 2, 20, 0], np.int32)

    def top(key, c, epsilon, k):
        scores = c + noise.gumbel(key, c.shape, 2.0 / epsilon)
        chosen = jnp.argsort(-scores)[:k]
        return {"exact": {"set": jnp.argsort(-c)[:k], "size": jnp.float32(k)}, "noisy": {"set": chosen}}

    study = Study(
        "sets", mechanisms=[Mechanism("top", top, variants=("exact", "noisy"))], datasets={"c": counts},
        grid={"epsilon": (0.1, 100.0), "k": (2, 4)}, static=("k",),
        truth=lambda c, k, **_: jnp.argsort(-c)[:k],
        metrics=[metrics.recall(output="set"), metrics.precision(output="set"),
                 metrics.set_error(output="set"), metrics.value("size", "set size", "items", output="size")],
    )
    result = run_study(study, trials=200)
    table = result.table.set_index(["mechanism", "k", "epsilon", "metric"])["estimate"]
    assert len(result.record["steps"]) == 2  # one per value of the static k
    for k in (2, 4):
        for eps in (0.1, 100.0):
            assert table[("exact", k, eps, "recall")] == 1.0 and table[("exact", k, eps, "set_error")] == 0.0
            assert table[("exact", k, eps, "size")] == k
        assert table[("noisy", k, 100.0, "recall")] == 1.0  # noise scale 0.02: the exact top-k
        assert table[("noisy", k, 0.1, "recall")] < 1.0
        # recall = precision for sets of equal size; set error = 2 k (1 - recall).
        assert table[("noisy", k, 0.1, "precision")] == pytest.approx(table[("noisy", k, 0.1, "recall")])
        recall = table[("noisy", k, 0.1, "recall")]
        assert table[("noisy", k, 0.1, "set_error")] == pytest.approx(2 * k * (1 - recall))
    assert ("noisy", 2, 0.1, "size") not in table.index  # a variant without the output is not measured


def test_metric_edge_cases():
    r, t = jnp.array([3, -1, -1]), jnp.array([3, 5, 7])
    assert float(metrics.recall().fn(r, t)) == pytest.approx(1 / 3)
    assert float(metrics.precision().fn(r, t)) == 1.0
    assert math.isnan(float(metrics.precision().fn(jnp.array([-1, -1]), t)))  # nothing released: a failure
    assert float(metrics.set_error().fn(r, t)) == 2.0
    assert float(metrics.rel_error().fn(jnp.array([1.5, 3.0]), jnp.array([1.0, 2.0]))) == 0.5
    assert float(metrics.wrong_answer().fn(jnp.array(True), jnp.array(False))) == 1.0
    with pytest.raises(ValueError, match="scale"):
        metrics.Metric("m", lambda r, t: r, "d", "u", scale="cubic")


def test_figure_and_files(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    result = run_study(_study(statistics=("mean", "q95")), trials=200)
    fig = result.figure()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    for ax in axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        assert ax.get_ylabel().endswith("(data units)")
        assert "absolute error" in ax.get_title()
    assert any(t.get_text() == "closed form" for t in fig.legends[0].get_texts())
    paths = result.save(tmp_path)
    assert [p.name for p in paths] == ["user_mean.csv", "user_mean.json", "user_mean.png"]
    assert paths[0].read_text().startswith("study,mechanism,dataset,epsilon,metric")
    assert paths[2].stat().st_size > 10_000


def test_study_declaration_errors():
    with pytest.raises(ValueError, match="distinct names"):
        Study("s", mechanisms=[Mechanism("m", _private_mean)] * 2, datasets={"d": DATA},
              metrics=[metrics.abs_error()])
    with pytest.raises(ValueError, match="not in the grid"):
        Study("s", mechanisms={"m": _private_mean}, datasets={"d": DATA}, metrics=[metrics.abs_error()],
              static=("k",))
    with pytest.raises(ValueError, match="no grid parameter"):
        run_study(_study(), trials=10, grid={"delta": [1e-6]})
