"""The limits of ``dpjax bench`` (:mod:`dpjax._src.tools.bench.bound`): counts of bytes and random bits,
the self-check, the record's schema (method, batch, bound, limit ratio, load), the quiet-run rule,
the terminal's width and the accelerator script's dry run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from dpjax._src.tools import readme as readme_region
from dpjax._src.tools.bench import bound as bound_module
from dpjax._src.tools.bench import harness, report
from dpjax._src.tools.bench import run as bench_run
from dpjax._src.tools.bench.bound import (
    HASH_BITS,
    Limits,
    bound,
    bytes_moved,
    measure_limits,
    rebound,
    self_check,
    threefry_hashes,
)
from dpjax._src.tools.bench.case import Case
from dpjax._src.tools.bench.cases import cases
from dpjax._src.tools.bench.cases.topk import KBAR
from dpjax._src.tools.bench.cases.training import SHAPES
from dpjax._src.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
KEY = jax.random.key(0)


def test_threefry_hashes_counts_every_random_call_as_a_lower_bound():
    assert threefry_hashes(lambda k: jax.random.normal(k, (1000,)), KEY) == (1000, 0)
    assert threefry_hashes(lambda k: jax.random.bits(k, (7,), jnp.uint8), KEY) == (7, 0)
    assert threefry_hashes(lambda k: jax.random.split(k, 5), KEY) == (5, 0)
    assert threefry_hashes(lambda k: jax.random.fold_in(k, 3), KEY) == (1, 0)

    def scanned(k):  # a scan multiplies its body (a fold_in and 3 draws) by its length
        return lax.scan(
            lambda c, i: (c, jax.random.uniform(jax.random.fold_in(k, i), (3,))), 0, jnp.arange(4)
        )[1]

    assert threefry_hashes(scanned, KEY) == (16, 0)

    def counted(k):  # fori_loop from a constant to a constant: its trip count is known
        return lax.fori_loop(
            0, 6, lambda i, a: a + jax.random.uniform(jax.random.fold_in(k, i), (2,)), jnp.zeros(2)
        )

    assert threefry_hashes(counted, KEY) == (18, 0)

    def branches(k, flag):  # a cond counts its cheapest branch
        return lax.cond(
            flag,
            lambda: jax.random.uniform(k, (10,)),
            lambda: jnp.zeros(10).at[:3].set(jax.random.uniform(k, (3,))),
        )

    assert threefry_hashes(branches, KEY, True) == (3, 0)

    def open_loop(k):  # stops when a draw says so: its draws are left out, and the loop is reported
        def body(state):
            i, _ = state
            return i + 1, jax.random.uniform(jax.random.fold_in(k, i))

        return lax.while_loop(lambda s: s[1] < 0.9, body, (0, 0.0))

    assert threefry_hashes(open_loop, KEY) == (0, 1)
    # under vmap over keys the count is the batch's
    assert threefry_hashes(jax.vmap(lambda k: jax.random.gumbel(k, (10,))), jax.random.split(KEY, 8))[0] == 80


@pytest.fixture(scope="module")
def counts():
    """(single hashes, Monte Carlo hashes per release, loops left out) of every cheap row at scale
    1e-6, keyed by (mechanism, model)."""
    table = {}
    keys = jax.random.split(KEY, 4)
    for family in ("noise", "selection", "svt", "topk", "aggregates", "training"):
        for case in cases(family, 1e-6):
            if case.mechanism.startswith("noise.discrete") or case.eager_single:
                continue
            single = threefry_hashes(case.release, KEY, *case.args)
            batched = jax.vmap(case.release, in_axes=(0,) + (None,) * len(case.args))
            mc = threefry_hashes(batched, keys, *case.args) if case.releases else (math.nan, 0)
            table[case.mechanism, case.model] = (single[0], mc[0] / 4, single[1] + mc[1], case)
    return table


def test_each_rows_kernel_draws_what_its_sampler_must(counts):
    """The literal kernels draw one hash per variate (Gumbel, Laplace, ... from ``jax.random`` or
    ``dpjax.noise``; the tail-exact Gaussian three per four variates); the fast samplers a few per
    result (O(k log d) for the Gumbel tree, O(log d) for the exponential mechanism's tree, O(1) for
    its inverse CDF); and ``"auto"`` runs under ``vmap`` the sampler the row names."""
    for kind in ("laplace", "gumbel", "exponential"):
        single, _, _, case = counts[f"noise.{kind}", ""]
        assert single == case.variates
    single, _, _, case = counts["noise.gaussian", ""]
    assert single == 0.75 * case.variates
    d = 1000
    tree_bound = (
        2 * 11 * (math.log2(d) + 2)
    )  # k + 1 paths down a binary tree over d leaves, two draws a level
    for name in ("selection.gumbel_top_k", "selection.exponential_mechanism"):
        single, mc, loops, case = counts[name, ""]
        assert single == d and loops == 0 and case.methods == ("literal", "tree")
        assert mc == counts[f"{name} (method='tree')", ""][1]  # auto's Monte Carlo draw is the tree's
    assert 10 <= counts["selection.gumbel_top_k (method='tree')", ""][1] <= tree_bound
    assert 1 <= counts["selection.exponential_mechanism (method='tree')", ""][1] <= 2 * (math.log2(d) + 2)
    assert 1 <= counts["selection.exponential_mechanism (method='inverse_cdf')", ""][1] <= 8
    for name, extra in (("svt.above_threshold", 1), ("svt.sparse_vector", 10)):
        single, mc, loops, case = counts[name, ""]
        n = case.args[0].shape[0]
        assert n + extra <= single <= n + extra + 4  # one Laplace per query and the thresholds (+ splits)
        assert mc == 0 and loops >= 1  # first passage: a search whose length depends on the draws
    assert counts["topk.limited_domain", ""][:2] == (KBAR + 1, KBAR + 1)
    assert counts["aggregates: laplace_mechanism of a clipped sum (bound given)", ""][:2] == (1, 1)
    for model, shapes in SHAPES.items():
        parameters = sum(math.prod(s) for s in shapes)
        assert abs(counts["optax.dp_aggregate", model][0] - 0.75 * parameters) <= 2 * len(shapes) + 4


def test_bytes_and_bound_per_release():
    x = jnp.zeros(1000, jnp.float32)
    keys = jax.random.split(KEY, 10)
    assert bytes_moved((KEY, (x,)), jnp.zeros(3, jnp.int32)) == 8 + 4000 + 12
    assert bytes_moved((keys, (x,)), jnp.zeros((10, 3))) == 80 + 4000 + 120
    limits = Limits({2**14: 1e11, 2**20: 1e10}, hash_rate=1e8)
    assert limits.bandwidth_for(100) == 1e11 and limits.bandwidth_for(2**19) == 1e11
    assert limits.bandwidth_for(2**30) == 1e10  # the largest rung below the working set
    b = bound(4e6, 1e3, limits, releases=10)  # 4 MB at 10 GB/s: 0.4 ms; 1000 hashes: 10 us
    assert b["seconds"] == pytest.approx(4e-5) and b["binds"] == "memory"
    assert b["bytes"] == 4e5 and b["random_bits"] == HASH_BITS * 100
    b = bound(4e3, 1e6, limits)
    assert b["binds"] == "RNG" and b["seconds"] == pytest.approx(1e-2)
    part = {"seconds": 2e-2, "bound": b}
    rebound(part, Limits({2**14: 1e11}, hash_rate=2e8))  # a better rate measured later: a lower bound
    assert part["bound"]["seconds"] == pytest.approx(5e-3) and part["limit_ratio"] == pytest.approx(4.0)


def _synthetic_record(ratio: float, loads=(0.5, 0.7, 0.6)):
    part = {
        "seconds": ratio * 1e-3,
        "method": "literal",
        "limit_ratio": ratio,
        "bound": bound(1e3, 1e5, Limits({2**14: 1e12}, 1e8)),
    }
    row = {
        "family": "f",
        "mechanism": "m.synthetic",
        "setting": "s",
        "method": "auto",
        "model": "",
        "bound": "b",
        "single": dict(part),
        "monte_carlo": dict(part, releases=1000, batch_reason="r"),
    }
    machine = {
        "backend": "cpu",
        "device": "cpu",
        "device_count": 1,
        "device_memory_bytes": None,
        "host_cpu": "c",
        "cores": 2,
        "python": "3",
        "jax": "0",
        "x64": False,
    }
    record = {
        "command": "dpjax bench",
        "date": "d",
        "wall_seconds": 1.0,
        "scale": 1.0,
        "repeats": 1,
        "machine": machine,
        "rows": [row],
        "status": "complete",
        "load_average_start": [loads[0]] * 3,
        "load_average_during": [[loads[1]] * 3],
        "load_average_end": [loads[2]] * 3,
    }
    record["quiet"] = bench_run.load_is_quiet(record)
    return record


def test_self_check_fails_a_row_that_beats_its_bound(tmp_path, capsys):
    assert self_check(_synthetic_record(0.95)) == []  # measurement noise allowed
    failures = self_check(_synthetic_record(0.5))
    assert len(failures) == 2 and "single at 0.5x" in failures[0] and "monte_carlo" in failures[1]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_synthetic_record(0.5)))
    assert main(["bench", "--from-json", str(path)]) == 1
    assert "self-check failed: m.synthetic" in capsys.readouterr().err
    path.write_text(json.dumps(_synthetic_record(1.5)))
    assert main(["bench", "--from-json", str(path)]) == 0


def test_update_readme_refuses_a_loud_run_or_marks_it(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("{}\nold\n{}\n".format(*readme_region.markers()))
    path = tmp_path / "r.json"
    loud = _synthetic_record(1.5, loads=(0.5, 2.5, 1.0))  # 2.5 on 2 cores during the run
    assert loud["quiet"] is False and _synthetic_record(1.5)["quiet"] is True
    path.write_text(json.dumps(loud))
    assert main(["bench", "--from-json", str(path), "--update-readme", str(readme)]) == 1
    assert "old" in readme.read_text() and "--loud" in capsys.readouterr().err
    assert main(["bench", "--from-json", str(path), "--update-readme", str(readme), "--loud"]) == 0
    assert "**Loud run**" in readme.read_text() and "2.5 at most during" in readme.read_text()
    path.write_text(json.dumps(_synthetic_record(1.5)))
    assert main(["bench", "--from-json", str(path), "--update-readme", str(readme)]) == 0
    assert "Loud run" not in readme.read_text() and "(quiet)" in readme.read_text()


def test_record_schema_method_batch_bound_limit_ratio_and_load(monkeypatch):
    """A run of one cheap case, with the rates measured at a small size: every field the issue names."""
    monkeypatch.setattr(harness, "MIN_SECONDS", 0.0)
    monkeypatch.setattr(bound_module, "_PASS_BYTES", 2**20)  # short passes: the rates' values are not tested
    monkeypatch.setattr(bound_module, "_HASHES", 2**14)
    monkeypatch.setattr(bound_module, "HASH_LADDER", (2**12,))
    limits = measure_limits(16 * 2**16, repeats=1)  # rungs up to 64 KiB
    assert set(limits.bandwidth) == {2**14, 2**16} and limits.hash_rate > 0
    monkeypatch.setattr(bench_run, "measure_limits", lambda memory, repeats: limits)
    scores = jnp.asarray(np.arange(100.0, dtype=np.float32))
    case = Case(
        "selection",
        "argmax of Gumbel",
        "d=100",
        lambda k, s: jnp.argmax(s + jax.random.gumbel(k, s.shape)),
        args=(scores,),
        releases=10,
        bytes_per_release=64,
        noise="gumbel",
        variates=100.0,
    )
    record = bench_run.run_cases([case], command="t", scale=1.0, repeats=1, with_peers=False)
    row = record["rows"][0]
    assert row["method"] == "(one kernel)" and row["single"]["method"] and row["monte_carlo"]["method"]
    assert (
        row["monte_carlo"]["releases"] == 1000 and row["monte_carlo"]["batch_reason"] == "the minimum batch"
    )
    for part in (row["single"], row["monte_carlo"]):
        assert part["bound"]["random_bits"] == 100 * HASH_BITS and part["limit_ratio"] > 0
        assert part["bound"]["binds"] in ("RNG", "memory") and part["bound"]["seconds"] > 0
    assert row["single"]["bound"]["bytes"] == 8 + 400 + 4  # key, scores, the index written
    assert row["monte_carlo"]["bound"]["bytes"] == pytest.approx(8 + 400 / 1000 + 4)
    assert "random bits" in row["bound"] and "\n" not in row["bound"]
    assert len(record["load_average_during"]) == 1 and record["quiet"] in (True, False)
    assert record["self_check"] == self_check(record) and "limits" in record


def test_terminal_fits_the_screen(monkeypatch, capsys):
    record = _synthetic_record(1.5)
    record["rows"][0]["mechanism"] = "selection.noisy_top_k_with_gap (noise='gumbel', method='tree') " * 3
    for width in (60, 100):
        monkeypatch.setenv("COLUMNS", str(width))
        text = report.terminal(record)
        assert max(len(line) for line in text.splitlines()) <= width
        assert "selection." in text
    report.say("  " + "selection.noisy_top_k_with_gap: single 0.000137 s, Monte Carlo " * 4)
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 100  # the progress lines
    monkeypatch.delenv("COLUMNS")
    assert report.screen_width() == 100


@pytest.mark.slow
def test_accelerator_script_dry_run(tmp_path):
    """``benchmarks/accelerator_run.sh --dry-run``: every step of the GPU run, small, on the CPU."""
    out = tmp_path / "run"
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "accelerator_run.sh"), "--dry-run", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = dict(line.split("\t")[:2] for line in (out / "steps.tsv").read_text().splitlines()[1:])
    assert steps["environment"] == steps["tests"] == steps["bench"] == steps["exact"] == "0"
    assert steps["training"] == "0" or steps["training"].startswith("absent")
    environment = json.loads((out / "environment.json").read_text())
    assert environment["machine"]["backend"] == jax.default_backend()
    assert environment["versions"]["jax"] == jax.__version__
    record = json.loads((out / "bench" / "results.json").read_text())
    assert record["rows"] and all("limit_ratio" in row["single"] for row in record["rows"])
    assert "--update-readme benchmarks/README.md --region accelerator" in (out / "summary.md").read_text()
