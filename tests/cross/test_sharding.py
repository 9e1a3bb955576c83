"""Sharded data and sharded trials give the results of one device (issue 17).

Each test starts ``tests/sharding_worker.py`` in a subprocess, since the number of virtual CPU devices
(``--xla_force_host_platform_device_count``) is fixed before JAX is imported.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).resolve().parents[1] / "sharding_worker.py"
ROOT = WORKER.parent.parent


def worker(*args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )


def result(process: subprocess.Popen, timeout: float) -> dict:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"worker timed out after {timeout} s: {stderr[-3000:]}")
    assert process.returncode == 0, stderr[-3000:]
    line = next(line for line in stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def run_worker(*args, timeout: float = 900) -> dict:
    return result(worker(*args), timeout)


@pytest.mark.slow
def test_monte_carlo_sharded_over_8_devices_equals_one_device_and_heavy_kernels_split_memory():
    results = run_worker("monte_carlo", 8)
    assert results["explicit"] is None, results["explicit"]
    assert results["auto"] is None, results["auto"]
    memory = {int(n): size for n, size in results["memory"].items()}
    for n in (2, 4, 8):  # a chunk's memory per device falls as 1/devices (within 10%)
        assert memory[n] <= 1.1 * memory[1] / n, memory
    # the heavy kernels on data sharded over 8 devices (explicit axes): per-user state, records and
    # candidates are split (within 50% of 1/8: the per-device histogram, constants and counters stay)
    for name, kernel in results["kernels"].items():
        one, eight = kernel["1"], kernel["8"]
        assert eight <= 1.5 * one / 8, (name, kernel)


@pytest.mark.slow
def test_every_registered_mechanism_in_every_sharding_context_equals_one_device():
    """Each registry entry on data sharded over 2 devices in two complementary contexts (eagerly and
    under ``jit``, outside and inside ``jax.set_mesh``, explicit and automatic axes: each level of
    each factor), rotating over ``sharding_worker.ROTATION`` so the registry covers all eight
    combinations; each equal to the one-device result (integers exactly, floats within 4 ulp: sums
    are reordered by the shards).
    2 devices: the contexts, not the device count, are what this checks (8: the Monte Carlo test)."""
    results = run_worker("registry", 2)
    assert len(results) >= 2 * 30
    contexts = {name.split("|", 1)[1] for name in results}
    assert len(contexts) == 8, contexts
    failures = {name: verdict for name, verdict in results.items() if verdict is not None}
    assert not failures, "\n".join(f"{name}: {verdict}" for name, verdict in failures.items())


def test_sharded_top_k_is_exact_with_ties_to_the_lower_index():
    results = run_worker("top_k", 8)
    assert results == {"explicit": None, "auto": None}


@pytest.mark.slow
def test_two_processes_on_localhost_run_a_sharded_mechanism_and_monte_carlo_as_one_process():
    """``jax.distributed.initialize`` with 2 processes of 2 CPU devices each (gloo collectives): the
    registry worker's mechanisms on data sharded over the 4 devices of both processes, and a Monte
    Carlo sharded over them, equal the single-process results in each process."""
    with socket.socket() as free:
        free.bind(("localhost", 0))
        port = free.getsockname()[1]
    processes = [worker("distributed", i, 2, port) for i in range(2)]
    try:
        outcomes = [result(p, timeout=480) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for outcome in outcomes:
        assert outcome["devices"] == 4
        assert outcome["monte_carlo"] == {"explicit": None, "auto": None}, outcome["monte_carlo"]
        assert len(outcome["registry"]) >= 8
        failures = {name: verdict for name, verdict in outcome["registry"].items() if verdict is not None}
        assert not failures, failures
