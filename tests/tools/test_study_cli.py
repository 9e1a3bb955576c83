"""``dpjax study``: tables that fit 100 columns, files with the run record, TOML studies, the catalog."""

import json
import textwrap

import numpy as np
import pytest

from dpjax._src.datasets import builtin as datasets
from dpjax._src.tools.cli import main
from dpjax.studies import studies


def test_catalog_studies_declare_what_they_measure():
    registered = studies()
    assert {"clipped_mean", "quantiles_m5", "top_k_recall", "topk_limited_domain"} <= set(registered)
    for s in registered.values():
        for entry in s.datasets.values():
            name = entry[0] if isinstance(entry, tuple) else entry
            assert name in datasets.DATASET_NAMES, s.name
        assert "epsilon" in s.grid and s.description, s.name
        for m in s.metrics:
            assert m.unit and m.description and m.name not in ("truth", "MAE"), (s.name, m.name)


def test_builtin_datasets_are_deterministic():
    a = datasets.load("normal", 0)
    assert a is datasets.load("normal", 0)
    assert not np.array_equal(datasets.load("normal", 1).values, a.values)
    zipf = datasets.load("zipf", 0)
    assert zipf.kind == "histogram" and zipf.values.sum() == 1_000_000
    sample = datasets.load("zipf_sample", 0).values
    assert (sample <= zipf.values).all() and 9_000 < sample.sum() < 11_000
    with pytest.raises(ValueError, match="unknown dataset"):
        datasets.load("mnist")


def test_cli_study_prints_a_narrow_table_and_writes_record_and_figures(tmp_path, capsys):
    code = main(["study", "--trials", "200", "--study", "clipped_mean", "--epsilon", "0.5", "2",
                 "--out", str(tmp_path)])
    assert code == 0
    captured = capsys.readouterr()
    assert "[1/4] clipped_mean: Laplace (ε-DP) on normal" in captured.err  # which step runs
    printed = captured.out
    assert "mean of absolute error of the released mean [data units]" in printed and "closed form" in printed
    assert max(len(line) for line in printed.splitlines() if str(tmp_path) not in line) <= 100
    payload = json.loads((tmp_path / "results.json").read_text())
    record = payload["record"]
    assert record["seed"] == 0 and record["trials"] == 200 and record["grid"] == {"epsilon": [0.5, 2.0]}
    assert {"jax", "dpjax", "numpy"} <= set(record["versions"])
    assert record["date"] and record["wall_seconds"] > 0
    assert record["compiles"] >= 1 and all(s["study"] == "clipped_mean" for s in record["steps"])
    assert set(payload["columns"]) == set(payload["rows"][0])  # every column described, epsilon too
    assert payload["studies"]["clipped_mean"]["metrics"]["abs_error"]["unit"] == "data units"
    rows = [r for r in payload["rows"] if r["statistic"] == "mean"]
    assert {r["epsilon"] for r in rows} == {0.5, 2.0}
    # Laplace noise of scale (200/10000)/eps: its mean absolute error is the scale.
    for r in rows:
        if r["mechanism"].startswith("Laplace"):
            assert r["theory"] == pytest.approx(0.02 / r["epsilon"])
            assert abs(r["estimate"] - r["theory"]) < 5 * r["se"]
    assert (tmp_path / "results.csv").read_text().startswith("study,mechanism,dataset,epsilon,metric")
    assert (tmp_path / "figures" / "clipped_mean.png").stat().st_size > 10_000


def test_cli_runs_a_study_from_a_toml_file(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp
        from dpjax.additive import laplace_mechanism

        def private_mean(key, x, epsilon, upper):
            return laplace_mechanism(key, jnp.clip(x, 0, upper).mean(), epsilon, sensitivity=upper / x.size)

        def true_mean(x, epsilon, upper):
            return jnp.clip(x, 0, upper).mean()
    """))
    np.save(tmp_path / "ages.npy", np.random.default_rng(0).uniform(0, 100, 400))
    config = tmp_path / "study.toml"
    config.write_text(textwrap.dedent("""
        trials = 300
        seed = 4

        [studies.ages]
        description = "mean age, Laplace"
        mechanisms = { "Laplace mean" = "mine.py:private_mean" }
        truth = "mine.py:true_mean"
        datasets = { ages = "ages.npy" }
        grid = { epsilon = [0.5, 2.0] }
        params = { upper = 100.0 }
        metrics = [ { metric = "abs_error", statistics = ["mean"], unit = "years" } ]
    """))
    assert main(["study", "--config", str(config), "--trials", "250", "--out", str(tmp_path / "out")]) == 0
    assert "mean of absolute error |release - truth| [years]" in capsys.readouterr().out
    payload = json.loads((tmp_path / "out" / "results.json").read_text())
    assert payload["record"]["trials"] == 250 and payload["record"]["seed"] == 4  # command line, then file
    rows = payload["rows"]
    assert {r["study"] for r in rows} == {"ages"} and len(rows) == 2
    for r in rows:  # Laplace(100/(400 eps)): mean absolute error = scale
        assert abs(r["estimate"] - 0.25 / r["epsilon"]) < 5 * r["se"]
    bad = tmp_path / "bad.toml"
    bad.write_text("trails = 3\n")
    assert main(["study", "--config", str(bad)]) == 2
    assert "unknown options ['trails']" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["study", "--trials", "-1"], "--trials: must be a positive integer"),
        (["study", "--trials", "ten"], "expected a positive integer"),
        (["study", "--epsilon", "0"], "--epsilon: must be a finite number > 0"),
        (["study", "--confidence", "1.5"], "must be in (0, 1)"),
        (["study", "--dataset", "mnist"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_cli_bad_arguments_exit_nonzero(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code != 0
    assert message in capsys.readouterr().err


def test_cli_help_explains_the_columns_and_metrics(capsys):
    with pytest.raises(SystemExit):
        main(["study", "--help"])
    text = capsys.readouterr().out
    for word in ("failure_rate", "ci_method", "closed form", "Wilson", "order statistics", "abs_error"):
        assert word in text


def test_cli_unknown_study_and_list(capsys):
    assert main(["study", "--study", "nope"]) == 2
    assert "unknown study nope" in capsys.readouterr().err
    assert main(["study", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "clipped_mean" in listing and "dataset zipf_sample" in listing


def test_cli_reports_a_failing_study_and_still_runs_the_others(capsys, monkeypatch):
    from dpjax._src.studies import registry
    from dpjax.studies import Study, metrics

    def broken(key, x, epsilon):
        raise RuntimeError("boom")

    failing = Study("zz_broken", mechanisms={"broken": broken}, datasets={"normal": "normal"},
                    metrics=[metrics.value("v", "value", "units")])
    monkeypatch.setitem(registry._STUDIES, "zz_broken", failing)
    code = main(["study", "--trials", "50", "--epsilon", "1", "--study", "clipped_mean", "zz_broken"])
    captured = capsys.readouterr()
    assert code == 1
    assert "zz_broken: RuntimeError: boom" in captured.err
    assert "clipped_mean" in captured.out


@pytest.mark.slow
def test_second_run_loads_the_compiled_study_from_the_compile_cache(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from xla_env import as_users_compile

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "DPJAX_COMPILE_CACHE": str(tmp_path / "cache")}
    env = as_users_compile(env)  # the suite's faster compilations can fall under the cache's 0.1 s
    command = [sys.executable, "-c", "from dpjax.cli import main; raise SystemExit(main(['study', "
               "'--study', 'clipped_mean', '--trials', '50', '--epsilon', '1', '--out', 'out', "
               "'--overwrite']))"]
    hits = []
    for run in ("first", "second"):
        out = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert f"compile cache {tmp_path / 'cache'}" in out.stdout, run
        hits.append(json.loads((tmp_path / "out" / "results.json").read_text())["record"]["cache_hits"])
    assert hits[0] == 0 and hits[1] >= 2  # one kernel per mechanism, loaded instead of compiled
