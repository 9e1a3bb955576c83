"""``dpjax._src.tools.bench``: timing harness, RNG floor, batch sizing, reports and the ``dpjax bench``
command."""

from __future__ import annotations

import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax._src.tools import readme as readme_region
from dpjax._src.tools.bench import bound as bound_module
from dpjax._src.tools.bench import harness, report
from dpjax._src.tools.bench import run as bench_run
from dpjax._src.tools.bench.case import Case, power_label, scaled
from dpjax._src.tools.bench.cases import FAMILIES
from dpjax._src.tools.bench.cases.aggregates import _variates as sum_variates
from dpjax._src.tools.bench.cases.quantiles import BETA, _halting_variates
from dpjax._src.tools.bench.cli import auto_scale
from dpjax._src.tools.bench.floor import MAX_VARIATES, data_bytes, floor_releases, rng_floor, variate_count
from dpjax._src.tools.bench.harness import (
    MAX_REPEATS,
    MIN_SECONDS,
    Timing,
    time_eager,
    time_host,
    time_jitted,
)
from dpjax._src.tools.bench.run import MIN_RELEASES, batch_size
from dpjax._src.tools.cli import main

GIB = 2**30


def test_timing_statistics():
    timing = Timing((3.0, 1.0, 2.0, 6.0), compile=0.5, memory=10)
    assert timing.median == 2.5 and timing.low == 1.0 and timing.high == 6.0
    assert timing.spread == pytest.approx(2.0)
    per = timing.per(4)
    assert per.times == (0.75, 0.25, 0.5, 1.5) and per.compile == 0.5 and per.memory == 10


def test_time_jitted_compiles_once_and_times_repeats():
    traces = []

    def fn(x):
        traces.append(1)
        return jnp.cumsum(x) * 2

    x = jnp.arange(1000.0)
    timing, output = time_jitted(fn, x, repeats=4)
    assert len(traces) == 1  # compiled once, before the timed calls
    assert len(timing.times) >= 4 and min(timing.times) > 0
    assert timing.compile > 0
    assert timing.memory >= 2 * 4 * 1000  # at least the argument and the output
    np.testing.assert_array_equal(output, np.cumsum(np.arange(1000.0)) * 2)


def test_time_eager_and_host_count_calls():
    calls = []

    def fn(x):
        calls.append(x)
        return x + 1

    timing, output = time_eager(lambda x: (time.sleep(MIN_SECONDS / 2), fn(x))[1], 1, repeats=3)
    assert output == 2 and len(calls) == 4 and len(timing.times) == 3 and timing.compile >= 0
    calls.clear()
    timing = time_host(fn, 1, repeats=2)
    assert len(calls) == len(timing.times) + 1 and timing.compile is None
    # Short calls are repeated until MIN_SECONDS have been spent (at most MAX_REPEATS times).
    assert len(timing.times) == MAX_REPEATS or sum(timing.times) >= MIN_SECONDS
    calls.clear()
    slow = time_host(lambda: (calls.append(1), time.sleep(MIN_SECONDS))[0], repeats=2)
    assert len(slow.times) == 2 and len(calls) == 3
    with pytest.raises(ValueError, match="repeats"):
        time_host(fn, 1, repeats=0)


def test_rng_floor_is_per_release():
    assert variate_count(3.2) == 4 and variate_count(0.3) == 1
    assert floor_releases(1000, 50) == 50 and floor_releases(MAX_VARIATES / 4, 50) == 4
    assert floor_releases(10 * MAX_VARIATES, 50) == 1
    with pytest.raises(ValueError):
        variate_count(math.nan)
    with pytest.raises(ValueError, match="kind"):
        rng_floor("cauchy", 10)
    single = rng_floor("gumbel", 1000, repeats=2)
    batch = rng_floor("gumbel", 1000, releases=50, repeats=2)
    assert len(single.times) >= 2 and single.median > 0 and batch.median > 0


def test_data_bytes_counts_the_arrays():
    args = (jnp.zeros(1000, jnp.float32), {"counts": np.zeros((10, 3), np.int64)}, 2.0)
    assert data_bytes(args) == 4000 + 240  # the arrays; a Python scalar is not data that is read


def test_batch_size_is_at_least_a_thousand_releases_or_capped_by_memory():
    case = Case("f", "m", "s", release=None, releases=1000, bytes_per_release=10 * 2**20)
    assert batch_size(case, memory=None) == (1000, "the minimum batch")
    size, why = batch_size(case, memory=16 * GIB)
    assert size == 409 and why.startswith("capped by memory")  # a quarter of 16 GiB in 10 MiB releases
    assert batch_size(case, memory=2**20)[0] == 1
    small = Case("f", "m", "s", release=None, releases=10, bytes_per_release=64)
    assert batch_size(small, memory=16 * GIB) == (MIN_RELEASES, "the minimum batch")
    large = Case("f", "m", "s", release=None, releases=10_000, bytes_per_release=64)
    assert batch_size(large, memory=16 * GIB) == (10_000, "the row's batch")
    assert batch_size(Case("f", "m", "s", release=None), memory=16 * GIB) == (0, "")


def test_scales_and_labels():
    assert [auto_scale(m) for m in (None, 8 * GIB, 23.5 * GIB, 60 * GIB, 139 * GIB, 4096 * GIB)] == [
        1.0,
        1.0,
        1.0,
        2.0,
        8.0,
        8.0,
    ]
    assert scaled(10**6, 0.1, 1000) == 10**5 and scaled(10**6, 1e-6, 1000) == 1000
    assert [power_label(n) for n in (10**6, 1000, 2500, 250_000)] == ["10^6", "10^3", "2,500", "2.5e+05"]


def test_variates_from_releases():
    """UQE's estimate is beta**k - 1, so the halting index is recovered from the release."""
    k = np.array([5, 10, 6_502])
    estimates = np.expm1(k * np.log(BETA)).astype(np.float32)
    assert _halting_variates(estimates) == pytest.approx(k.mean() + 1)
    assert sum_variates(type("R", (), {"bound": estimates})) == pytest.approx(k.mean() + 2)


def _bound(seconds, binds="RNG"):
    return {"bytes": 4000.0, "random_bits": 6400.0, "memory_seconds": seconds / 2, "rng_seconds": seconds,
            "seconds": seconds, "binds": binds, "uncounted_loops": 0,
            "call": {"bytes": 4000.0, "hashes": 100.0, "releases": 1}}


def _record():
    row = {
        "family": "selection",
        "mechanism": "selection.gumbel_top_k",
        "setting": "d=10",
        "method": "auto",
        "model": "",
        "bound": "one line",
        "single": {
            "seconds": 2e-3,
            "floor_seconds": 1e-3,
            "floor_ratio": 2.0,
            "method": "literal",
            "bound": _bound(1.6e-3),
            "limit_ratio": 1.25,
            "compile_seconds": 0.3,
            "memory_bytes": 2048,
            "path": "jax.jit",
        },
        "monte_carlo": {
            "releases": 1000,
            "batch_reason": "the minimum batch",
            "method": "tree",
            "seconds": 1e-5,
            "floor_seconds": 5e-6,
            "floor_ratio": 2.0,
            "bound": _bound(5e-6, "memory"),
            "limit_ratio": 2.0,
            "releases_per_second": 1e5,
            "compile_seconds": 0.4,
            "memory_bytes": 4096,
        },
        "peers": [
            {
                "name": "P",
                "library": "numpy",
                "version": "2",
                "note": "n",
                "seconds": 4e-3,
                "repeated_seconds": 4e-3,
                "ratio_single": 2.0,
                "ratio_monte_carlo": 400.0,
            },
            {"name": "Q", "library": "opendp", "version": None, "note": "m", "skipped": "not installed"},
        ],
    }
    machine = {
        "backend": "gpu",
        "device": "H100",
        "device_count": 1,
        "device_memory_bytes": GIB,
        "host_cpu": "x",
        "cores": 2,
        "python": "3",
        "jax": "0",
        "x64": False,
    }
    return {
        "command": "dpjax bench",
        "date": "d",
        "wall_seconds": 1.0,
        "scale": 1.0,
        "repeats": 3,
        "limits": {"stream_bandwidth_by_bytes": {"16384": 3e13, "268435456": 2.9e12}, "hash_rate": 1e11,
                   "random_bits_per_second": 6.4e12},
        "machine": machine,
        "load_average_start": [1.0, 1.0, 1.0],
        "load_average_during": [[1.5, 1.0, 1.0]],
        "load_average_end": [2.0, 1.0, 1.0],
        "quiet": True,
        "self_check": [],
        "rows": [row],
    }


def test_markdown_and_readme_region(tmp_path):
    text = report.markdown(_record())
    assert (
        "| selection.gumbel_top_k | literal, tree | d=10 | 2 ms | 1.25x (RNG) | 1000 (the minimum batch) "
        "| 10 us | 2x (memory) | 1.00e+05 | 2x, 2x | 0.30, 0.40 | 4 KiB |" in text
    )
    assert "streaming bandwidth 2.9e+03 GB/s at 256 MiB, 3e+04 GB/s at 16 KiB; RNG 6.4e+03 Gbit/s" in text
    assert "load average 1.0 before, 1.5 at most during, 2.0 after (quiet)" in text
    assert "Loud run" not in text
    bounds = "| selection.gumbel_top_k | 3.91 KiB, 6.4e+03 bits (RNG) | 3.91 KiB, 6.4e+03 bits (memory) |"
    assert bounds in text
    assert "| selection.gumbel_top_k | P (numpy 2) | n | 4 ms | 2x | 400x |" in text
    assert "skipped: not installed" in text
    readme = tmp_path / "README.md"
    begin, end = readme_region.markers()
    named = readme_region.markers("x")
    readme.write_text(f"# B\n\nbefore\n{begin}\nold\n{end}\nmiddle\n{named[0]}\nkept\n{named[1]}\nafter\n")
    readme_region.update_readme(readme, text)
    readme_region.update_readme(readme, text)  # idempotent
    content = readme.read_text()
    assert content.startswith("# B\n\nbefore\n") and content.endswith(f"{named[1]}\nafter\n")
    assert "old" not in content and "kept" in content
    assert content.count("selection.gumbel_top_k | literal") == 1
    readme_region.update_readme(readme, "new text", region="x")
    assert "kept" not in readme.read_text() and "new text" in readme.read_text()
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="dpjax-bench"):
        readme_region.update_readme(readme, text)


@pytest.mark.slow
def test_dpjax_bench_command_end_to_end(tmp_path, capsys, monkeypatch):
    """Every family at the smallest sizes, one repeat: table, JSON, Markdown, plot, README region."""
    # One timed call per figure: the repeat-until-MIN_SECONDS rule is tested above
    # (test_time_eager_and_host_count_calls); here it would only add ~0.2 s per figure (~30 s).
    monkeypatch.setattr(harness, "MIN_SECONDS", 0.0)
    # Monte Carlo batches of 16: the 1,000-release rule is tested above (test_batch_size_...); here
    # it would only multiply the Monte Carlo work (PIE-NI alone: 10 s a call).
    monkeypatch.setattr(bench_run, "MIN_RELEASES", 16)
    # The device's rates measured in short passes (every rung and both ways of hashing, 1 MiB and
    # 2^14 hashes per call), as in test_record_schema_method_batch_bound_limit_ratio_and_load: their
    # values are not tested, and the full passes (256 MiB per rung, 2^22 hashes) measured twice
    # (before and after the rows) would add ~9 s of CPU.
    monkeypatch.setattr(bound_module, "_PASS_BYTES", 2**20)
    monkeypatch.setattr(bound_module, "_HASHES", 2**14)
    out = tmp_path / "out"
    status = main(["bench", "--size", "1e-6", "--repeats", "1", "--out", str(out)])
    record = json.loads((out / "results.json").read_text())
    assert status == (1 if record["self_check"] else 0)  # a row that beats its limit fails the run
    assert {row["family"] for row in record["rows"]} == set(FAMILIES)
    for row in record["rows"]:
        assert "error" not in row, row
        assert row["single"]["seconds"] > 0 and row["single"]["floor_seconds"] > 0
        assert row["single"]["compile_seconds"] >= 0
        assert row["method"] and row["single"]["method"] and row["bound"]
        assert row["single"]["limit_ratio"] > 0 and row["single"]["bound"]["bytes"] > 0
        if "monte_carlo" in row:
            mc = row["monte_carlo"]
            assert mc["releases"] >= 16 or mc["batch_reason"].startswith("capped by memory")
            assert mc["floor_ratio"] > 0 and mc["limit_ratio"] > 0 and mc["method"]
    assert record["machine"]["backend"] == jax.default_backend()
    assert record["limits"]["hash_rate"] > 0 and record["limits"]["stream_bandwidth_by_bytes"]
    assert len(record["load_average_start"]) == 3
    assert len(record["load_average_during"]) == len(record["rows"])
    assert (out / "results.png").stat().st_size > 0
    assert "Command: `dpjax bench --size 1e-06 --repeats 1" in (out / "results.md").read_text()
    readme = tmp_path / "README.md"
    readme.write_text("{}\n{}\n".format(*readme_region.markers()))
    assert main(["bench", "--from-json", str(out / "results.json"), "--update-readme", str(readme),
                 "--loud"]) == (1 if record["self_check"] else 0)
    assert (out / "results.md").read_text().strip() in readme.read_text()
    assert "selection.gumbel_top_k" in capsys.readouterr().out
    assert main(["bench", "nosuchfamily"]) == 2


def test_figure_names_the_device_and_shows_the_spread_and_limit_ratios(tmp_path):
    record = _record()
    assert report._device_name(record["machine"]) == "H100"
    cpu = {**record["machine"], "backend": "cpu", "device": "cpu", "host_cpu": "AMD EPYC", "cores": 2}
    assert report._device_name(cpu) == "CPU AMD EPYC (2 cores)"
    row = record["rows"][0]
    row["single"].update(min_seconds=1e-3, max_seconds=5e-3)
    assert report._with_spread(row["single"]) == (2e-3, 1e-3, 5e-3)
    assert report._with_spread(report._fastest_peer(row)) == (4e-3, 4e-3, 4e-3)
    long = dict(row, mechanism="selection.noisy_top_k_with_gap (noise='gumbel', method='tree')", model="MLP")
    assert all(len(line) <= 44 for line in report._plot_label(long).splitlines())  # wrapped, not cut
    assert report._plot_label(long).replace("\n", " ") == report.label(long)
    report.plot(record, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000
