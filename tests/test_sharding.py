"""Sharded data and sharded trials give the results of one device (issue 17).

Each test starts ``tests/sharding_worker.py`` in a subprocess, since the number of virtual CPU devices
(``--xla_force_host_platform_device_count``) is fixed before JAX is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("sharding_worker.py")
ROOT = WORKER.parent.parent


def run_worker(*args, timeout: float = 900) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(
        [sys.executable, str(WORKER), *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.slow
def test_monte_carlo_sharded_over_8_devices_equals_one_device_and_splits_memory():
    results = run_worker("monte_carlo", 8)
    assert results["explicit"] is None, results["explicit"]
    assert results["auto"] is None, results["auto"]
    memory = {int(n): size for n, size in results["memory"].items()}
    for n in (2, 4, 8):  # a chunk's memory per device falls as 1/devices (within 10%)
        assert memory[n] <= 1.1 * memory[1] / n, memory


@pytest.mark.slow
def test_every_registered_mechanism_on_data_sharded_over_8_devices_equals_one_device():
    results = run_worker("registry", 8)  # each entry on explicit and automatic axes
    assert len(results) >= 2 * 30
    failures = {name: verdict for name, verdict in results.items() if verdict is not None}
    assert not failures, "\n".join(f"{name}: {verdict}" for name, verdict in failures.items())


def test_sharded_top_k_is_exact_with_ties_to_the_lower_index():
    results = run_worker("top_k", 8)
    assert results == {"explicit": None, "auto": None}
