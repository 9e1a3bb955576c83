"""What the selection mechanisms share (:mod:`dpjax.selection`): their options, the checks of their
inputs, the noise scale ``c * k * sensitivity / epsilon``, the scores in units of it, and the
compiled draws (the literal noisy top-k, the inverse-CDF draw and the top-down Gumbel process)."""

from __future__ import annotations

import functools
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import auto as _auto
from dpjax._src import categorical as _categorical
from dpjax._src import gumbel_process as _gumbel_process
from dpjax._src import noise as _noise
from dpjax._src import sharded
from dpjax._src.host_checks import (
    check_choice,
    check_epsilon,
    check_flag,
    check_int,
    check_positive,
    float_dtype,
)
from dpjax._src.validation import Checks

__all__ = [
    "NOISES",
    "TOP_K_METHODS",
    "Method",
    "Noise",
    "TopKMethod",
    "check_guarantee_args",
    "noise_scale",
    "noisy_argmax",
    "noisy_top",
    "prepare_scores",
    "tree_top",
]


Noise: TypeAlias = Literal["gumbel", "exponential", "laplace"]
"""Report-noisy-max's noise (static)."""
Method: TypeAlias = Literal["auto", "literal", "inverse_cdf", "tree"]
"""How the exponential mechanism and report-noisy-max draw (static)."""
TopKMethod: TypeAlias = Literal["auto", "literal", "tree"]
"""How Gumbel top-k and the gap mechanisms draw (static)."""
NOISES: tuple[Noise, ...] = get_args(Noise)
METHODS: tuple[Method, ...] = get_args(Method)
TOP_K_METHODS: tuple[TopKMethod, ...] = get_args(TopKMethod)


def check_guarantee_args(epsilon, sensitivity, monotonic) -> float:
    """Host-side checks of a guarantee companion's arguments; returns epsilon as a float."""
    epsilon = check_epsilon(epsilon)
    check_positive(sensitivity, "sensitivity")
    check_flag(monotonic, "monotonic")
    return epsilon


def noise_scale(checks: Checks, epsilon, sensitivity, monotonic, k: int, dtype) -> jax.Array:
    """The noise scale ``c * k * sensitivity / epsilon`` (c = 1 monotonic, 2 otherwise) in ``dtype``.

    Computed with jnp in ``dtype`` whether the parameters are concrete or traced, so a ``vmap``
    over epsilon gives exactly the separate calls' scales.
    """
    epsilon = checks.epsilon(epsilon)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    c = 1 if check_flag(monotonic, "monotonic") else 2
    return jnp.asarray(c * k, dtype) * jnp.asarray(sensitivity, dtype) / jnp.asarray(epsilon, dtype)


@functools.partial(jax.jit, static_argnames=("noise", "k"))
def noisy_top(key, units, *, noise: _noise.Sampler, k: int | None):
    """The argmax (``k=None``) or the top-k ``(values, indices)`` of ``units + noise(1)``.

    One compiled kernel for eager and traced calls alike, so that an eager call and the same call
    inside ``jit``/``vmap``/``scan`` evaluate the noise with the same code (XLA's fused ``log`` can
    differ from the unfused one by an ulp, which the gaps would amplify).
    """
    noisy = units + _noise.sample(noise, key, units.shape, 1.0, units.dtype)
    if k is None:
        return jnp.argmax(noisy).astype(jnp.int32)
    # The barriers keep XLA CPU's TopK custom call: slices of its outputs that do not all start at 0
    # (the gaps read ``values[1:]``) otherwise turn it back into a full sort of each batch row (much
    # slower under ``vmap``; benchmarks/README.md). One barrier per array: a barrier over the
    # (values, indices) tuple aborts XLA's SPMD partitioner on sharded data (jaxlib 0.10).
    values, indices = sharded.top_k(noisy, k)
    return lax.optimization_barrier(values), lax.optimization_barrier(indices.astype(jnp.int32))


@jax.jit
@sharded.auto_axes
def _inverse_cdf_draw(key, units):
    """One exponential-mechanism draw from the two-level table (key independent, so built once
    under ``vmap`` over keys); compiled for the same reason as :func:`noisy_top`."""
    return _categorical.sample_log_cdf(key, _categorical.log_cdf_table(units))


@functools.partial(jax.jit, static_argnames=("k",))
@sharded.auto_axes
def tree_top(key, units, *, k: int):
    """The top-k ``(values, indices)`` of ``units + Gumbel(1)`` by the top-down Gumbel process
    (:mod:`dpjax._src.gumbel_process`), values in the units of ``units``; the log-mass tree is key
    independent (built once under ``vmap`` over keys)."""
    return _gumbel_process.top_k(key, _gumbel_process.log_mass_tree(units), k)


def noisy_argmax(key, scores, epsilon, noise, sensitivity, monotonic, name, method):
    check_choice(noise, "noise", NOISES)
    check_choice(method, "method", METHODS)
    if method not in ("auto", "literal") and noise != "gumbel":
        raise ValueError(
            f"method={method!r} samples the exponential mechanism: noise must be 'gumbel', got {noise!r}."
        )
    checks = Checks()
    units, _, _ = prepare_scores(checks, scores, epsilon, sensitivity, monotonic, name=name)
    paths = {
        "literal": functools.partial(noisy_top, noise=noise, k=None),
        "inverse_cdf": _inverse_cdf_draw,
        "tree": lambda key, units: tree_top(key, units, k=1)[1][0],
    }
    fast = "tree" if noise == "gumbel" else None
    return checks.guard(_auto.run(method, paths, key, units, fast=fast))


def _units(scores: jax.Array, scale: jax.Array) -> jax.Array:
    """``(scores - max(scores)) / scale`` in ``scale``'s dtype: same argmax/top-k law, better precision."""
    if scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    # max - scores >= 0 is exact in integer arithmetic (large counts, unsigned dtypes included).
    # The barrier keeps XLA from folding the scale's own arithmetic into the division (it rewrites
    # ``x / (c k s / epsilon)`` differently under jit than op by op, an ulp apart in the units, which
    # the tree's log-masses and the gaps carry): with it, eager and traced units are the same.
    return -(jnp.max(scores) - scores).astype(scale.dtype) / lax.optimization_barrier(scale)


def prepare_scores(
    checks: Checks, scores, epsilon, sensitivity, monotonic, k: int | None = None, *, gap=False, name="scores"
):
    """Validates a selection's inputs and returns ``(units, scale, k)``; ``k=None`` means one winner."""
    scores = checks.array(scores, name, ndim=1)
    if gap and scores.shape[0] < 2:
        raise ValueError("scores must have at least 2 entries: the gaps need k + 1 candidates.")
    if k is not None:
        k = check_int(k, "k", minimum=1, maximum=scores.shape[0] - (1 if gap else 0))
    count = k if gap and k is not None else 1  # the noise scale's k (one winner without the gaps)
    scale = noise_scale(checks, epsilon, sensitivity, monotonic, count, float_dtype(scores))
    return _units(scores, scale), scale, k
