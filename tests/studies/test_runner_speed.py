"""The study runner costs what the kernel costs (issue 42): compiled chunks cached across calls (counted
with JAX's compile events), closed-over data passed as arguments (no large constant for XLA to fold),
chunks sized from memory with ``chunk_size`` an upper bound, results equal to the hand-written
``jit(vmap)`` with the same keys, and progress that says what is compiling and how fast it samples."""

import hashlib
import io
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import noise
from dpjax._src.studies import chunking
from dpjax._src.studies.compiled import compiled_chunk
from dpjax._src.studies.compiles import CompileCounter
from dpjax._src.studies.progress import Progress
from dpjax._src.studies.status import ChunkStatus
from dpjax.studies import Mechanism, Study, metrics, monte_carlo, run_study

_X = np.random.default_rng(0).lognormal(size=2000).astype(np.float32)


def _noisy_median(key, x, epsilon):
    return jnp.median(x) + noise.laplace(key, (), 1.0) / epsilon


def _noisy_median_hand_written(key, x, epsilons, trials):
    """The releases of run_study's step, written by hand: vmap over trial keys of vmap over epsilon."""
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(trials, dtype=jnp.uint32))
    return jax.jit(jax.vmap(lambda k: jax.vmap(lambda e: _noisy_median(k, x, e))(epsilons)))(keys)


@pytest.fixture(scope="module")
def study():
    return Study("speed", mechanisms=[Mechanism("noisy median", _noisy_median)], datasets={"ln": _X},
                 grid={"epsilon": [0.5, 2.0]}, truth=lambda x, epsilon: jnp.median(x),
                 metrics=[metrics.error(("mean",))])


def test_a_second_run_study_compiles_nothing_and_equals_the_hand_written_vmap(study):
    first = run_study(study, trials=300, progress=False)
    with CompileCounter() as compiles:
        second = run_study(study, trials=300, progress=False)
    assert compiles.count == 0
    def cached(result):
        return [c["cached"] for s in result.record["steps"] for run in s["chunks"] for c in run["compiled"]]

    assert cached(first) == [False] and cached(second) == [True]
    assert first.table["estimate"].tolist() == second.table["estimate"].tolist()
    step_key = jax.random.key(0)  # the documented step key: each name's sha256, 64 bits, in turn
    for name in (b"speed", b"noisy median", b"ln"):
        digest = hashlib.sha256(name).digest()
        for word in (digest[:4], digest[4:8]):
            step_key = jax.random.fold_in(step_key, int.from_bytes(word, "big"))
    errors = _noisy_median_hand_written(step_key, jnp.asarray(_X),
                                        jnp.asarray([0.5, 2.0], jnp.float32), 300) - np.median(_X)
    expected = np.asarray(errors, np.float64).mean(axis=0)
    np.testing.assert_allclose(second.table.sort_values("epsilon")["estimate"], expected, rtol=1e-6)


def test_a_second_monte_carlo_compiles_nothing_and_closed_over_data_is_an_argument():
    x = jnp.asarray(_X)

    def f(key):  # sorts closed-over data: XLA would fold the sort of a constant at compile time
        return jnp.sort(x)[x.size // 2] + noise.laplace(key)

    first = monte_carlo(f, jax.random.key(1), 100, progress=False)
    with CompileCounter() as compiles:
        again = monte_carlo(f, jax.random.key(1), 100, progress=False)
    assert compiles.count == 0
    np.testing.assert_array_equal(first, again)
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(1), i))(jnp.arange(100, dtype=jnp.uint32))
    np.testing.assert_array_equal(first, jax.jit(jax.vmap(f))(keys))
    chunk = compiled_chunk(f, 100, jax.random.key(1))
    assert chunk.cached
    prepare, sample = (e.as_text() for e in chunk.executables)
    assert not re.search(rf"f32\[{x.size}\]\S* constant\(", prepare)  # a parameter, not a constant
    assert re.search(rf"f32\[{x.size}\]\S* parameter\(", prepare)
    assert f"f32[{x.size}]" not in sample  # the sort is data work: done once per call, not per chunk


def test_chunks_are_sized_from_memory_and_chunk_size_is_an_upper_bound(monkeypatch, study):
    budget = {"bytes": 2**40}
    monkeypatch.setattr(chunking, "memory_budget", lambda device=None: budget["bytes"])
    whole = run_study(study, trials=1000, progress=False)
    assert whole.record["steps"][0]["chunks"][0]["chunks"] == 1
    compiled = whole.record["steps"][0]["chunks"][0]["compiled"][0]
    budget["bytes"] = compiled["memory_bytes"] // 2  # half of what 1,000 trials need
    small = run_study(study, trials=1000, progress=False)
    chunks = small.record["steps"][0]["chunks"][0]
    assert chunks["compiled"][0]["trials"] == 1000
    assert chunks["chunk_trials"] < 1000 and chunks["chunks"] > 1
    budget["bytes"] = 2**40
    capped = run_study(study, trials=1000, chunk_size=2 * 300, progress=False)  # 600 releases: 300 trials
    assert capped.record["steps"][0]["chunks"][0]["chunk_trials"] == 250  # 4 equal chunks of <= 300
    for result in (small, capped):
        np.testing.assert_array_equal(result.table["estimate"], whole.table["estimate"])


def test_fitted_sizes():
    assert chunking.first_size(10**6, None) == 250_000  # 4 chunks for progress
    assert chunking.first_size(10**5, None) == 10**5  # one: none below 2**17 trials
    assert chunking.first_size(1000, 64) == 63  # 16 equal chunks of at most 64
    assert chunking.fitted_size(1000, 1000, memory=4000, budget=1000) == 250
    assert chunking.fitted_size(1000, 1000, memory=4000, budget=1000, fixed=500) == 125  # 142 fit
    assert chunking.fitted_size(1000, 1000, memory=None, budget=1) == 1000
    assert chunking.equal_chunks(1000, 300, multiple=8) == 256
    assert chunking.memory_budget() > 0


def test_monte_carlo_progress_says_what_compiles_then_releases_rate_and_eta(capsys):
    monte_carlo(lambda k: noise.laplace(k, (3,)), jax.random.key(5), 1000, chunk_size=250, progress=True,
                description="laplace")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("laplace: compiling 250 trials per call")
    done = [line for line in lines if "chunk" not in line and "compiling" not in line]
    assert [re.match(r"laplace: ([\d,]+)/1,000 releases", d).group(1) for d in done] == [
        "250", "500", "750", "1,000"]
    assert all(re.search(r", [\d,]+/s, ETA \d+ s$", d) for d in done)


def test_status_repeats_while_compiling_and_progress_lines_show_it():
    said = []
    status = ChunkStatus(said.append, 100, per_trial=4, every=0.05)
    status.compiling("100 trials per call")
    time.sleep(0.3)
    status.sampling(1, 1)
    status.chunk_done(100)
    status.close()
    assert said[0] == "compiling 100 trials per call (0 s) · 0/400 releases"
    assert len([s for s in said if s.startswith("compiling")]) >= 3  # repeated while it lasts
    assert re.fullmatch(r"400/400 releases, [\d,]+/s, ETA 0 s", said[-1])
    stream = io.StringIO()
    with Progress(1, enabled=False, lines=True, stream=stream) as progress:
        progress.start("uqe on ln")
        progress._last_line -= 10  # the last line was printed 10 s ago
        progress.status("uqe on ln", "compiling 20,000 trials per call (6 s) · 0/80,000 releases")
        progress.status("uqe on ln", "chunk 1/1 (0 s) · 0/80,000 releases")  # too soon after: kept
        progress.done("uqe on ln")
    assert stream.getvalue().splitlines() == [
        "[1/1] uqe on ln", "  uqe on ln: compiling 20,000 trials per call (6 s) · 0/80,000 releases"]


def _figure_result():
    """Three panels: two metrics with one description (median and mean error), one series equal to
    another, a rate at 0 everywhere, and cells whose interval has zero width."""
    import types

    import pandas as pd

    from dpjax._src.studies.metrics import Metric

    rows = []

    def add(metric, mechanism, values, half=None):
        for eps, value in zip((0.25, 1.0, 4.0), values, strict=True):
            h = value / 4 if half is None else half
            rows.append({"study": "s", "mechanism": mechanism, "dataset": "d", "epsilon": eps,
                         "metric": metric, "statistic": "mean", "estimate": value, "se": 0,
                         "ci_low": value - h, "ci_high": value + h, "theory": None, "unit": "u"})

    add("median_error", "A", [3, 2, 1])
    add("median_error", "B", [3, 2, 1])
    add("mean_error", "A", [5, 4, 3], half=0)
    add("mean_error", "B", [6, 4, 2])
    add("wrong", "A", [0, 0, 0], half=0.1)
    add("wrong", "B", [0, 0, 0], half=0.1)
    same = "absolute error |release - truth|"
    ms = [Metric("median_error", None, same, "u"), Metric("mean_error", None, same, "u"),
          Metric("wrong", None, "wrong answer", "fraction", scale="linear", rate=True)]
    study = types.SimpleNamespace(name="s", description="", grid={"epsilon": (0.25, 1.0, 4.0)}, metrics=ms)
    return types.SimpleNamespace(study=study, table=pd.DataFrame(rows),
                                 record={"trials": 10, "confidence": 0.95, "seed": 0, "wall_seconds": 1.0,
                                         "steps": [], "compiles": 0})


def test_figures_keep_the_users_words():
    import matplotlib

    matplotlib.use("Agg")
    from dpjax._src.studies.figure_notes import ZERO_WIDTH
    from dpjax._src.studies.plots import _figure_problems, study_figure
    from dpjax._src.studies.report import format_result

    result = _figure_result()
    fig = study_figure(result)
    median, mean, rate = fig.axes[:3]
    assert median.get_title().startswith("median_error · mean") and mean.get_title().startswith("mean_error")
    assert median.get_ylabel() == "mean of median_error (u)"
    assert rate.get_ylabel() == "rate of wrong (fraction)"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "B (coincides with A)" in legend and ZERO_WIDTH in legend
    lines = [line for line in median.get_lines() if len(line.get_xdata()) == 3]
    assert len(lines) == 2 and lines[0].get_linewidth() > lines[1].get_linewidth()  # both visible
    assert rate.get_lines() == [] and "rate 0 at every epsilon" in rate.texts[0].get_text()
    circled = [line for line in mean.get_lines()
               if line.get_marker() == "o" and line.get_markerfacecolor() == "none"]
    assert [list(line.get_ydata()) for line in circled] == [[5, 4, 3]]  # A's zero-width cells only
    assert _figure_problems(result, fig) == []  # the coincidence is noted
    assert any("hides" in p for p in _figure_problems(result))  # ... which the data alone cannot say
    text = format_result(result)
    assert "5 °" in text and "°: interval of zero width" in text
    matplotlib.pyplot.close("all")


def test_a_long_run_shows_its_rate_after_a_probe_with_the_same_results(capsys):
    f, key, trials = (lambda k: noise.laplace(k, (2,))), jax.random.key(9), 2**17 + 5
    assert chunking.first_size(trials, None) == 65_539  # two chunks, a probe of 1/64 of one
    assert chunking.probe_size(trials, 65_539) == 1_024 and chunking.probe_size(2**17 - 1, 2**17) is None
    assert chunking.probe_size(10**6, 4096) is None  # 245 chunks: the first one ends soon enough
    plain = monte_carlo(f, key, trials)  # no status, no probe
    shown = monte_carlo(f, key, trials, progress=True, description="laplace")
    np.testing.assert_array_equal(shown, plain)  # the probe's trials are the run's first trials
    lines = capsys.readouterr().err.splitlines()
    assert any(line.startswith("laplace: compiling a probe of 1,024 trials") for line in lines)
    done = [line for line in lines if "chunk" not in line and "compiling" not in line]
    assert re.fullmatch(r"laplace: 1,024/131,077 releases, [\d,]+/s, ETA \d+ s", done[0])  # after the probe
    assert len(done) == 3 and done[-1].startswith("laplace: 131,077/131,077 releases")
    with CompileCounter() as compiles:
        again = monte_carlo(f, key, trials, progress=True)
    assert compiles.count == 0
    np.testing.assert_array_equal(again, plain)
