"""Nothing in dpjax assumes a CPU: every headline kernel and every registered mechanism lowers for
GPU and TPU, no source hard-codes a device, and the sort used by the quantile kernels has the
single-compare comparator XLA GPU turns into a radix sort.

Cross-platform lowering (``jax.export`` with ``platforms=...``) needs no accelerator: it fails on
host callbacks and on custom calls that exist only on the CPU (LAPACK, ducc FFT, ...), which is
what a CPU-only code path would bring in.
"""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from mechanism_registry import all_mechanisms

from dpjax._src.quantiles.intervals import _sort_floats
from dpjax._src.tools.bench.cases import FAMILIES, cases

ACCELERATORS = ("cuda", "rocm", "tpu")
ROOT = Path(__file__).resolve().parents[2]

# A device named in code, a CPU-only XLA flag, or a platform restriction.
DEVICE_ASSUMPTION = re.compile(r"""["']cpu["']|xla_cpu|XLA_FLAGS|JAX_PLATFORMS|jax_platforms|taskset""")
ALLOWED = {
    # host-side float64 statistics are pinned to the CPU device on purpose (documented there)
    "dpjax/_src/audit/binomial.py",
    # the machine description reads the host's memory when the device is the CPU
    "dpjax/_src/tools/bench/harness.py",
    # the bench figure names a recorded CPU backend by the host's CPU model (and its test says so)
    "dpjax/_src/tools/bench/report.py",
    "tests/tools/test_bench.py",
    # the bench report's rendering of a synthetic record made on a CPU host
    "tests/tools/test_bench_bounds.py",
    # the multi-device tests make 8 virtual host devices (XLA_FLAGS) in their worker processes
    "tests/sharding_worker.py",
    # the suite compiles with XLA's older CPU emitters (half the compile time; a flag for the CPU only)
    "tests/conftest.py",
    "tests/xla_env.py",
    # the float tolerance of traced against eager calls is 4 ulps on the CPU, more elsewhere
    "tests/float_tolerance.py",
    # the docstring-reference check names jax's JAX_PLATFORMS as an external name docstrings may cite
    "tests/meta/test_docstring_references.py",
}


def _lowers_everywhere(fn, *args):
    exported = export.export(jax.jit(fn), platforms=ACCELERATORS)(*args)
    assert exported.platforms == ACCELERATORS
    return exported


def test_no_hard_coded_device_in_sources():
    found = {}
    for path in sorted([*ROOT.glob("dpjax/**/*.py"), *ROOT.glob("tests/**/*.py")]):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "tests/cross/test_backends.py":
            continue
        hits = [
            n for n, line in enumerate(path.read_text().splitlines(), 1) if DEVICE_ASSUMPTION.search(line)
        ]
        if hits:
            found[relative] = hits
    assert set(found) <= ALLOWED, {k: v for k, v in found.items() if k not in ALLOWED}
    assert set(found) == ALLOWED, f"stale allow-list entries: {ALLOWED - set(found)}"


@pytest.mark.parametrize("family", FAMILIES)
def test_headline_kernels_lower_for_accelerators(family):
    """Each ``dpjax bench`` row, single release and vmapped Monte Carlo batch, at the smallest size."""
    for case in cases(family, 1e-6):
        key = jax.random.key(0)
        _lowers_everywhere(case.release, key, *case.args)
        if case.releases:
            batched = jax.vmap(case.release, in_axes=(0,) + (None,) * len(case.args))
            _lowers_everywhere(batched, jax.random.split(key, 2), *case.args)


@pytest.mark.parametrize("mechanism", all_mechanisms(), ids=lambda m: m.name)
def test_registered_mechanisms_lower_for_accelerators(mechanism):
    _lowers_everywhere(lambda key: mechanism.call(key), jax.random.key(0))


def test_sort_floats_comparator_is_one_integer_compare():
    """The comparator XLA GPU's SortRewriter accepts for CUB radix sort: one compare of the operands."""
    exported = _lowers_everywhere(_sort_floats, jnp.asarray(np.linspace(-1, 1, 64), jnp.float32))
    text = exported.mlir_module()
    regions = re.findall(r'"stablehlo\.sort".*?\}\)', text, flags=re.DOTALL)
    assert len(regions) == 1
    ops = re.findall(r"stablehlo\.(\w+)", regions[0])
    assert ops.count("compare") == 1 and set(ops) == {"sort", "compare", "return"}, ops
    assert re.search(r"compare\s+LT,\s+%\w+,\s+%\w+,\s+SIGNED\s*:\s*\(tensor<i32>", regions[0])
