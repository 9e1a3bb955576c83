"""Shared pytest fixtures: float32 by default, an x64 fixture that restores the setting, and XLA
without its expensive optimization passes unless a test is marked ``optimized``.

Most tests compile small programs and run each a few times on tiny inputs, so compiling is most of
the suite's CPU: XLA without its expensive passes (``jax_disable_most_optimizations``) compiles in
about half the CPU (``tests/test_selection.py``: 61 s against 129 s) and computes the same IEEE
results, only slower. Tests whose CPU goes into running compiled code (large Monte Carlo batches,
statistical tests with many draws) are marked ``optimized`` and compile with every pass. Processes
the tests start (the ``dpjax`` command, notebooks, the sharding workers) inherit the setting from
the environment.

XLA's CPU backend also compiles with its older elemental code emitters instead of the MLIR fusion
emitters (``--xla_cpu_use_fusion_emitters=false``): again about half the compile CPU (a JointExp
release: 4.1 s against 2.1 s; the whole suite: 3100 s against 2170 s). They emit a reduction as the
same loop in a batched, scanned or jitted program as in a separate call (the fusion emitters, without
the optimization passes, did not: up to 48 ulps apart); a transcendental function's vectorized and
scalar code may still round one ulp apart (``tests/float_tolerance.py``). The flag is known to jaxlib
0.10, where it was measured; XLA refuses an unknown flag at start, so another jaxlib keeps its
defaults.
"""

import ctypes
import gc
import os
from importlib.metadata import version
from pathlib import Path

from xla_env import FAST_EMITTERS

os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")  # before JAX reads its configuration
# before XLA starts (it reads XLA_FLAGS once)
if version("jaxlib").startswith("0.10.") and FAST_EMITTERS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_EMITTERS}".strip()

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]

# The modules with the longest single tests (subprocesses of minutes) run first, so that the xdist
# workers share them out at the start instead of one worker finishing them alone at the end.
LONGEST_FIRST = ("test_sharding.py", "test_bench.py", "test_notebooks.py", "test_reproduce.py")


def pytest_collection_modifyitems(items):
    """The longest modules first; within each module the tests marked ``optimized`` before the
    others (stable otherwise), so that no optimized test follows fast ones: the caches are emptied
    at most once per module (see ``_xla_optimizations``), not before every optimized run of a
    parametrization, and the fast tests after them keep what the module compiled."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    module = {}
    for item in items:
        module.setdefault(item.path, len(module))
    items.sort(key=lambda item: (
        rank.get(item.path.name, len(rank)),
        module[item.path],  # modules stay whole
        item.get_closest_marker("optimized") is None,
    ))


# `dpjax study` turns on JAX's persistent compilation cache (a process-wide setting): not in tests.
os.environ.setdefault("DPJAX_COMPILE_CACHE", "off")
FAST_COMPILE = jax.config.values["jax_disable_most_optimizations"]


_cached = {"fast": False}  # whether executables compiled without the passes may be in JAX's caches


@pytest.fixture(autouse=True)
def _xla_optimizations(request):
    """Full XLA optimizations for tests marked ``optimized`` (run-time bound), the suite's fast
    compilation for the rest. The setting is not part of JAX's cache keys, so an optimized test that
    follows fast ones starts from empty caches: it never runs an executable compiled without the
    passes (executables it compiles serve the fast tests after it unchanged)."""
    optimized = request.node.get_closest_marker("optimized") is not None
    if optimized and _cached["fast"]:
        jax.clear_caches()
    _cached["fast"] = FAST_COMPILE and not optimized
    jax.config.update("jax_disable_most_optimizations", FAST_COMPILE and not optimized)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", FAST_COMPILE)


@pytest.fixture(scope="session")
def compile_cache_env(tmp_path_factory):
    """Environment for subprocesses (notebook kernels, the ``dpjax`` command) with JAX's persistent
    compilation cache in one directory shared by every xdist worker of this run: the paper notebooks
    run the same smoke reproductions as ``dpjax reproduce all --smoke``, so whichever runs second
    loads the compiled kernels (a smoke reproduction then costs ~1/10 of its CPU). Tests in this
    process keep the cache off: some count their compilations."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    env = dict(os.environ)
    env["JAX_COMPILATION_CACHE_DIR"] = str(shared / "jax-compile-cache")
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def _release_memory() -> None:
    """Drops JAX's compiled executables and traces, and hands freed heap pages back to the system."""
    jax.clear_caches()
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


try:  # glibc's malloc_trim, where there is one (Linux); elsewhere freed pages stay with the process
    _LIBC = ctypes.CDLL("libc.so.6")
    _resident_bytes()
except (OSError, AttributeError):
    _LIBC = None

MAX_RESIDENT = 2 * 2**30  # a worker past this after a test drops its compiled executables


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Drops JAX's compiled executables after each test module: a worker that runs many modules
    otherwise keeps every executable it ever compiled (the largest worker grew to 6 GB)."""
    yield
    _release_memory()


@pytest.fixture(autouse=True)
def _bounded_memory():
    """Drops the compiled executables after any test that leaves the worker above ``MAX_RESIDENT``
    bytes (tests of one module share compiled functions, so only when memory asks for it): with a
    test's own peak on top, a worker stays within about 3 GB."""
    yield
    if _LIBC is not None and _resident_bytes() > MAX_RESIDENT:
        _release_memory()


@pytest.fixture
def x64():
    """Runs the test with ``jax_enable_x64`` on, restoring the previous value afterwards."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.fixture(params=["float32", "float64"])
def float_dtype(request):
    """Each float dtype, with x64 enabled for float64."""
    if request.param == "float32":
        yield jax.numpy.float32
        return
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield jax.numpy.float64
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def no_fork(monkeypatch):
    """``os.fork`` in this process fails the test: a documented pattern never forks a process that runs
    JAX (its threads may deadlock the copy); a forkserver or spawn context starts processes instead."""

    def refuse():
        raise AssertionError("this example forks a process that runs JAX: use a forkserver or spawn context")

    monkeypatch.setattr(os, "fork", refuse)
