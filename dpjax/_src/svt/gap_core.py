"""The compiled core of Sparse-Vector-with-Gap and its adaptive version (Ding, Wang, Zhang and Kifer
2019, Algorithms 1 and 2): the branches over the queries from given noise, and the keyed runs (the
literal draw or the first-passage sampler) (see :mod:`dpjax._src.svt.gap`)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpjax._src import auto as _auto
from dpjax._src import noise as noise_lib
from dpjax._src import sharded
from dpjax._src.svt.above_threshold import center, centered_queries, checked_queries, first_true
from dpjax._src.svt.gap_parameters import GapBudget, GapParameters, check_parameters, working_budget
from dpjax._src.svt.gap_passage import gap_passages
from dpjax._src.validation import Checks

__all__ = [
    "BRANCH_BOTTOM",
    "BRANCH_MIDDLE",
    "BRANCH_TOP",
    "BRANCH_UNPROCESSED",
    "GapResult",
    "run_from_noise",
    "run_keyed",
]


BRANCH_UNPROCESSED = -1
"""``GapResult.branch`` of a query the run stopped before (and the padding of ``answer_branches``)."""
BRANCH_BOTTOM = 0
"""``GapResult.branch`` of a processed query answered ⊥ (below the threshold; free)."""
BRANCH_TOP = 1
"""The branch of a ⊤ whose top-noised gap reached ``sigma`` (Algorithm 2's top branch; costs eps2)."""
BRANCH_MIDDLE = 2
"""The branch of a ⊤ from the middle branch (its middle-noised gap >= 0; costs eps1 = 2 eps2)."""


class GapResult(NamedTuple):
    """Output of :func:`sparse_vector_with_gap` and :func:`adaptive_sparse_vector_with_gap`.

    Attributes:
      indices: int32 ``(m,)``, the ⊤ queries in stream order, padded with -1; ``m = c`` for
        sparse vector with gap and ``2c - 1`` for the adaptive version.
      gaps: float ``(m,)``, the released noisy gap ``q_i + noise_i - T~`` of each ⊤, NaN padded
        (>= 0 in the middle branch, >= sigma in the top branch).
      answer_branches: int8 ``(m,)``, the branch of each ⊤ (1 top, 2 middle), -1 padded.
      branch: int8 ``(n,)``: -1 not processed, 0 ⊥, 1 top branch ⊤, 2 middle branch ⊤.
      units_used: int32, the budget used by the queries in units of ``eps2 = eps1/2`` (<= 2c).
      epsilon_spent: ``eps0 + units_used*eps2`` (<= epsilon).
      epsilon_left: ``epsilon - epsilon_spent = (2c - units_used)*eps2`` (>= 0).
      num_processed: int32, the number of queries answered before the run stopped.

    On invalid traced input (a parameter out of range, NaN queries) every integer field is -1
    (``units_used = -1`` and ``num_processed = -1`` cannot come from a run) and every float field
    is NaN.
    """

    indices: jax.Array
    gaps: jax.Array
    answer_branches: jax.Array
    branch: jax.Array
    units_used: jax.Array
    epsilon_spent: jax.Array
    epsilon_left: jax.Array
    num_processed: jax.Array


def _gap_core(centered, threshold_noise, top_noise, middle_noise, budget: GapBudget, *, adaptive):
    """Algorithm 2 on given noise and a budget in ``centered.dtype`` (traced inside a jitted caller)."""
    c, sigma = budget.c, budget.sigma
    size = 2 * c - 1 if adaptive else c
    n = centered.shape[0]
    middle_gap = (centered + middle_noise) - threshold_noise
    if adaptive:
        top_gap = (centered + top_noise) - threshold_noise
        top = top_gap >= sigma
    else:
        top_gap, top = middle_gap, jnp.zeros(n, jnp.bool_)
    middle = ~top & (middle_gap >= 0)
    units = jnp.where(top, 1, jnp.where(middle, 2, 0)).astype(jnp.int32)
    stop = first_true(jnp.cumsum(units) > 2 * c - 2)  # line 16 in integer units of eps2
    processed = jnp.arange(n) <= jnp.where(stop >= 0, stop, n - 1)
    branch = jnp.where(top, BRANCH_TOP, jnp.where(middle, BRANCH_MIDDLE, BRANCH_BOTTOM))
    branch = jnp.where(processed, branch, BRANCH_UNPROCESSED).astype(jnp.int8)
    (indices,) = jnp.nonzero(processed & (top | middle), size=size, fill_value=-1)
    indices = indices.astype(jnp.int32)
    gap = jnp.where(top, top_gap, middle_gap)
    valid = indices >= 0
    gaps = jnp.where(valid, gap[jnp.maximum(indices, 0)], jnp.nan)
    answer_branches = jnp.where(valid, branch[jnp.maximum(indices, 0)], BRANCH_UNPROCESSED).astype(jnp.int8)
    units_used = jnp.where(processed, units, 0).sum().astype(jnp.int32)
    spent = budget.eps0 + units_used.astype(centered.dtype) * budget.eps2
    left = (2 * c - units_used).astype(centered.dtype) * budget.eps2
    return GapResult(
        indices, gaps, answer_branches, branch, units_used, spent, left, processed.sum().astype(jnp.int32)
    )


def _noise_like(noise, centered, name):
    noise = jnp.asarray(noise, centered.dtype)
    if noise.shape != centered.shape:
        raise ValueError(f"{name} must have shape {centered.shape}, got {noise.shape}.")
    return noise


@functools.partial(jax.jit, static_argnames=("c", "adaptive", "monotonic"))
def _from_noise(centered, threshold_noise, top_noise, middle_noise, params, *, c, adaptive, monotonic):
    budget = working_budget(centered.dtype, params, c, monotonic)
    threshold_noise = jnp.asarray(threshold_noise, centered.dtype)
    return _gap_core(centered, threshold_noise, top_noise, middle_noise, budget, adaptive=adaptive)


def run_from_noise(queries, threshold, threshold_noise, noises, params: GapParameters, c, monotonic):
    """Validates, then runs the core on given noise (``noises``: (name, array) for top and middle)."""
    checks = Checks()
    checked, c = check_parameters(checks, params, c, monotonic)
    centered = centered_queries(checks, queries, threshold)
    top, middle = (None if noise is None else _noise_like(noise, centered, name) for name, noise in noises)
    result = _from_noise(
        centered,
        threshold_noise,
        top,
        middle,
        checked,
        c=c,
        adaptive=top is not None,
        monotonic=monotonic,
    )
    return checks.guard(result)


@functools.partial(jax.jit, static_argnames=("c", "adaptive", "monotonic", "dtype"))
@sharded.auto_axes
def _keyed(key, queries, threshold, params, *, c, adaptive, monotonic, dtype):
    centered = center(queries, threshold, dtype)
    budget = working_budget(centered.dtype, params, c, monotonic)
    threshold_key, top_key, middle_key = jax.random.split(key, 3)
    eta = noise_lib.laplace(threshold_key, (), budget.threshold_scale, centered.dtype)
    xi = noise_lib.laplace(top_key, centered.shape, budget.top_scale, centered.dtype) if adaptive else None
    nu = noise_lib.laplace(middle_key, centered.shape, budget.middle_scale, centered.dtype)
    return _gap_core(centered, eta, xi, nu, budget, adaptive=adaptive)


@functools.partial(jax.jit, static_argnames=("c", "adaptive", "monotonic", "dtype"))
@sharded.auto_axes
def _first_passage(key, queries, threshold, params, *, c, adaptive, monotonic, dtype):
    centered = center(queries, threshold, dtype)
    budget = working_budget(centered.dtype, params, c, monotonic)
    found = gap_passages(key, centered, budget, adaptive=adaptive)
    n = centered.shape[0]
    valid = found.indices >= 0
    answer_branches = jnp.where(found.top, BRANCH_TOP, BRANCH_MIDDLE)
    answer_branches = jnp.where(valid, answer_branches, BRANCH_UNPROCESSED).astype(jnp.int8)
    branch = jnp.where(jnp.arange(n) < found.processed, BRANCH_BOTTOM, BRANCH_UNPROCESSED).astype(jnp.int8)
    branch = branch.at[jnp.where(valid, found.indices, n)].set(answer_branches, mode="drop")
    spent = budget.eps0 + found.units.astype(centered.dtype) * budget.eps2
    left = (2 * c - found.units).astype(centered.dtype) * budget.eps2
    return GapResult(
        found.indices, found.gaps, answer_branches, branch, found.units, spent, left, found.processed
    )


def run_keyed(key, queries, threshold, params: GapParameters, c, monotonic, adaptive, method="auto"):
    checks = Checks()
    checked, c = check_parameters(checks, params, c, monotonic)
    queries, threshold, dtype = checked_queries(checks, queries, threshold)
    static = dict(c=c, adaptive=adaptive, monotonic=monotonic, dtype=dtype)
    paths = {
        "literal": functools.partial(_keyed, **static),
        "first_passage": functools.partial(_first_passage, **static),
    }
    return checks.guard(_auto.run(method, paths, key, queries, threshold, checked, fast="first_passage"))
