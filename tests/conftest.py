"""Shared pytest fixtures: float32 by default, and an x64 fixture that restores the setting."""

import os

import jax
import pytest

# `dpjax study` turns on JAX's persistent compilation cache (a process-wide setting): not in tests.
os.environ.setdefault("DPJAX_COMPILE_CACHE", "off")


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
