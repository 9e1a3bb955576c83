"""Monte Carlo runner (chunking invariance), error summaries, datasets, registry and the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import noise
from dpjax.studies import datasets, monte_carlo, studies, summarize_errors
from dpjax.studies.cli import main


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


def test_data_passed_as_arguments_equals_closure():
    x = jnp.linspace(0.0, 1.0, 1000)
    by_arg = monte_carlo(lambda k, data: data.mean() + noise.laplace(k), jax.random.key(3), 50, args=(x,))
    by_closure = monte_carlo(lambda k: x.mean() + noise.laplace(k), jax.random.key(3), 50)
    np.testing.assert_allclose(by_arg, by_closure, rtol=1e-6)


def test_bad_runner_arguments():
    with pytest.raises(ValueError, match="trials must be >= 1"):
        monte_carlo(_mechanism, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="chunk_size"):
        monte_carlo(_mechanism, jax.random.key(0), 10, chunk_size=0)


def test_summary_statistics_against_numpy():
    rng = np.random.default_rng(0)
    est = rng.normal(1.0, 2.0, 10_001)
    s = summarize_errors(est, 0.5)
    err = est - 0.5
    assert s.mean_abs_error == pytest.approx(np.abs(err).mean())
    assert s.median_abs_error == pytest.approx(np.median(np.abs(err)))
    assert s.bias == pytest.approx(err.mean())
    assert s.rmse == pytest.approx(np.sqrt((err**2).mean()))
    assert s.std_error == pytest.approx(np.abs(err).std(ddof=1) / np.sqrt(err.size))
    assert s.abs_error_quantiles[2] == pytest.approx(s.median_abs_error)
    assert s.failure_rate == 0.0
    with_failures = summarize_errors(np.array([1.0, np.inf, 3.0, np.nan]), 0.0)
    assert with_failures.failure_rate == 0.5 and with_failures.mean_abs_error == 2.0
    with pytest.raises(ValueError, match="empty"):
        summarize_errors([], 0.0)


def test_builtin_datasets_are_deterministic():
    a = datasets.load("normal", 0)
    b = datasets.load("normal", 0)
    assert a is b or np.array_equal(a.values, b.values)
    assert not np.array_equal(datasets.load("normal", 1).values, a.values)
    zipf = datasets.load("zipf", 0)
    assert zipf.kind == "histogram" and zipf.values.sum() == 1_000_000
    with pytest.raises(ValueError, match="unknown dataset"):
        datasets.load("mnist")


def test_registry_has_the_foundation_studies():
    registered = studies()
    assert "laplace_clipped_mean" in registered
    for s in registered.values():
        assert set(s.datasets) <= set(datasets.DATASET_NAMES), s.name


def test_cli_study_writes_table_and_files(tmp_path, capsys):
    code = main(
        [
            "study",
            "--trials",
            "200",
            "--study",
            "laplace_clipped_mean",
            "--epsilon",
            "0.5",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "laplace_clipped_mean" in printed and "MAE" in printed
    rows = json.loads((tmp_path / "results.json").read_text())
    assert {r["epsilon"] for r in rows} == {0.5, 2.0}
    assert all(r["trials"] == 200 for r in rows)
    # Laplace noise of scale (200/10000)/eps: mean absolute error is the scale.
    for r in rows:
        assert r["mean_abs_error"] == pytest.approx(0.02 / r["epsilon"], rel=0.25)
    assert (tmp_path / "results.csv").read_text().startswith("study,")
    assert (tmp_path / "results.png").stat().st_size > 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["study", "--trials", "-1"], "--trials: must be a positive integer"),
        (["study", "--trials", "ten"], "expected a positive integer"),
        (["study", "--epsilon", "0"], "--epsilon: must be a finite number > 0"),
        (["study", "--dataset", "mnist"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_cli_bad_arguments_exit_nonzero(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    assert message in capsys.readouterr().err


def test_cli_unknown_study_and_list(capsys):
    assert main(["study", "--study", "nope"]) == 2
    assert "unknown study nope" in capsys.readouterr().err
    assert main(["study", "--list"]) == 0
    assert "laplace_clipped_mean" in capsys.readouterr().out


def test_cli_reports_a_failing_study_and_still_runs_the_others(capsys, monkeypatch):
    from dpjax.studies import registry

    def broken(key, data, epsilon, trials):
        raise RuntimeError("boom")

    monkeypatch.setitem(
        registry._STUDIES,
        "zz_broken",
        registry.Study("zz_broken", "test", ("normal",), "always fails", broken),
    )
    code = main(["study", "--trials", "50", "--study", "laplace_clipped_mean", "zz_broken"])
    captured = capsys.readouterr()
    assert code == 1
    assert "zz_broken on normal at epsilon 1: RuntimeError: boom" in captured.err
    assert "laplace_clipped_mean" in captured.out
