"""Shared pytest fixtures: float32 by default, and an x64 fixture that restores the setting."""

import gc
import os
from pathlib import Path

import jax
import pytest

ROOT = Path(__file__).resolve().parents[1]

# `dpjax study` turns on JAX's persistent compilation cache (a process-wide setting): not in tests.
os.environ.setdefault("DPJAX_COMPILE_CACHE", "off")


@pytest.fixture(scope="session")
def compile_cache_env(tmp_path_factory):
    """Environment for subprocesses (notebook kernels, the ``dpjax`` command) with JAX's persistent
    compilation cache in one directory shared by every xdist worker of this run: the paper notebooks
    run the same smoke reproductions as ``dpjax reproduce all --smoke``, so whichever runs second
    loads the compiled kernels (a smoke reproduction then costs ~1/10 of its CPU). Tests in this
    process keep the cache off: some count their compilations. Also compiles without XLA's most
    expensive optimizations (below)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    env = dict(os.environ)
    env["JAX_COMPILATION_CACHE_DIR"] = str(shared / "jax-compile-cache")
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    # Their smoke sizes make them compile-bound: XLA without its expensive optimization passes compiles
    # the JointExp forward pass in 0.6x the CPU (and runs it 2.5x slower, which smoke sizes do not feel).
    env["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


@pytest.fixture
def fast_compile():
    """Compiles without XLA's expensive optimization passes while the test runs: for tests that
    compile many small programs (one per random tiny input shape) and run each once, where compiling
    is nearly all the CPU. Measured on the JointExp forward pass: 0.6x the compile CPU, 2.5x the run
    time (which tiny inputs do not feel). The semantics are IEEE's either way; only speed differs."""
    previous = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Drops JAX's compiled executables and traces after each test module: a worker that runs many
    modules otherwise keeps every executable it ever compiled (the largest worker grew to 6 GB)."""
    yield
    jax.clear_caches()
    gc.collect()


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
