"""(Adaptive-)Sparse-Vector-with-Gap by first passage: O(n) once, O(log n) per candidate.

Ding, Wang, Zhang, Kifer (2019), Algorithm 2, given the one threshold noise ``eta``: query ``i`` (``c_i =
q_i - T``) is a top ⊤ when its top noise ``xi_i`` (scale ``bt``) has ``c_i + xi_i - eta >= sigma``, else
a middle ⊤ when its middle noise ``nu_i`` (scale ``bm``) has ``c_i + nu_i - eta >= 0``, else ⊥. Given
``eta`` the queries are independent, so the next ⊤ after ``s`` is the first success of independent
trials of probability ``p_i = 1 - (1 - pt_i)(1 - pm_i)``, ``pt_i = S((eta + sigma - c_i)/bt)`` and
``pm_i = S((eta - c_i)/bm)`` (``S`` the Laplace(1) survival function).

Two-rate envelope. With ``xt_i = exp((c_i - sigma - eta)/bt)`` and ``xm_i = exp((c_i - eta)/bm)``,
each branch's Laplace envelope ``1 - exp(-x) >= S(-log x)`` (:mod:`dpjax._src.svt.first_passage`) gives
``r_i = 1 - exp(-(xt_i + xm_i)) >= p_i``: a Gumbel-form passage of rate ``xt_i + xm_i``, i.e. the first
``i`` with ``log(e^{hm - ht} St(s..i) + Sm(s..i)) >= log E + hm`` (``E ~ Exp(1)``, ``ht = eta/bt``,
``hm = eta/bm``, ``St``/``Sm`` the sums of ``e^{(c_j - sigma)/bt}`` and ``e^{c_j/bm}``: one log-mass
heap per noise scale, searched together node by node). The candidate is kept with probability
``p_i / r_i >= 1/2`` (from ``pt >= rt/2`` and ``pm >= rm/2``), else the passage restarts one past it.
A kept candidate is a top ⊤ with probability ``pt_i / p_i`` (a top ⊤ needs only ``xi_i``; a middle
⊤ needs ``xi_i`` to miss and ``nu_i`` to fire: ``(1 - pt_i) pm_i``). Its gap is drawn given its
branch: ``sigma + bt * O`` for a top ⊤ and ``bm * O`` for a middle one, ``O`` the overshoot of a
Laplace(1) over its threshold ``t`` conditioned to reach it (the top noise's miss, for a middle ⊤,
is independent of ``nu_i``). :func:`_laplace_overshoot` samples it exactly: an Exp(1) when
``t >= 0`` (memorylessness); otherwise, with probability ``1/(2 - e^t)``, ``-t`` plus an Exp(1),
else the inverse CDF on ``[t, 0)``. The cost (top 1 unit of ``eps2``, middle 2) is summed over the
⊤s and the run stops after the ⊤ that takes it past ``2c - 2`` (line 16).

With ``sigma = inf`` (or without the top branch, ``adaptive=False``: Sparse-Vector-with-Gap) the top
heap holds ``-inf``, every mass and probability is the middle one exactly, and the same key gives
the same draw either way.

Float precision: as :mod:`dpjax._src.svt.first_passage` states for one heap (the sums from ``s`` relative
``(3 L + 2) eps (M + 1)``), plus one rounding per node for the second heap (``(4 L + 2) eps (M + 1)``).
The acceptance ``E' >= log r_i - log p_i`` and the branch ``E'' >= log p_i - log pt_i`` are formed
in log space (``log1p``/``expm1`` of the per-branch ``log(1 - p)``), a few ulp. The overshoot is
tail-exact to about 44 (:func:`dpjax.noise.standard_exponential`) and its inverse-CDF part
(:func:`_inside_overshoot`) is relative ``eps`` for ``|t| <= 1`` and a few ``eps (|t| + |log U|)``
beyond, computed without forming ``e^|t|``: the gap is finite for any finite queries and threshold
(a query far above the threshold, e.g. 400 scales in float32, used to give ``inf``);
``sigma + bt * O`` rounds once more, and is never below ``sigma``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import noise as noise_lib
from dpjax._src.gumbel_process import heap
from dpjax._src.noise import standard_exponential
from dpjax._src.svt.first_passage import PassageTree, first_stop, laplace_log_fire, laplace_log_miss

__all__: list[str] = []


def _inside_overshoot(u, s) -> jax.Array:
    """``log(1 + u (e^s - 1))`` for ``u`` in [0, 1) and ``s >= 0``: the inverse CDF of the overshoot
    ``Z - t`` of ``Z ~ Laplace(1)`` conditioned on ``t <= Z < 0`` (``s = -t``), a value in ``[0, s)``.

    ``log1p(u expm1(s))`` (a few ulp) for ``s <= 1``; beyond, the same value as
    ``logaddexp(log u + s, log1p(-u))``, which never forms ``e^s`` (in float32 ``expm1(s)`` is inf
    from ``s = 89``) and so is finite for every finite ``s``, with a relative error of a few
    ``eps (s + |log u|)``: the absolute ``eps |c_i - eta|`` (in units of the scale) with which the
    literal kernel rounds the same gap."""
    direct = jnp.log1p(u * jnp.expm1(jnp.minimum(s, 1)))
    return jnp.where(s <= 1, direct, jnp.logaddexp(jnp.log(u) + s, jnp.log1p(-u)))


def _laplace_overshoot(key, t) -> jax.Array:
    """``Z - t`` for ``Z ~ Laplace(1)`` conditioned on ``Z >= t``, exactly (module docstring); finite
    for every finite ``t`` (at most ``max(-t, 0)`` plus an Exp(1))."""
    dtype = jnp.asarray(t).dtype
    exp_key, pick_key, inverse_key = jax.random.split(key, 3)
    above_zero = jax.random.uniform(pick_key, (), dtype) * (2 - jnp.exp(jnp.minimum(t, 0))) < 1
    tail = jnp.maximum(-t, 0) + standard_exponential(exp_key, (), dtype)
    inside = _inside_overshoot(jax.random.uniform(inverse_key, (), dtype), jnp.maximum(-t, 0))
    return jnp.where((t >= 0) | above_zero, tail, inside)


class _GapPassages(NamedTuple):
    """The ⊤s of one run: ``indices`` int32 ``(m,)`` -1 padded, ``gaps`` ``(m,)`` NaN padded,
    ``top`` bool ``(m,)`` (top branch), ``units`` int32 (cost in units of ``eps2``) and ``processed``
    int32 (queries answered)."""

    indices: jax.Array
    gaps: jax.Array
    top: jax.Array
    units: jax.Array
    processed: jax.Array


class _State(NamedTuple):
    draw: jax.Array  # candidates drawn so far (the key of the next one)
    start: jax.Array  # where the next search starts
    answers: jax.Array  # ⊤s so far
    units: jax.Array  # their cost in units of eps2
    done: jax.Array
    indices: jax.Array  # (m,)
    top: jax.Array  # (m,)


def gap_passages(key, centered, budget, *, adaptive: bool) -> _GapPassages:
    """Algorithm 2 on ``centered = q - T`` with the budget's scales and ``sigma`` (module docstring);
    ``adaptive`` (static) adds the top branch, else it is Sparse-Vector-with-Gap (``m = c``)."""
    c, n, dtype = budget.c, centered.shape[0], centered.dtype
    size = 2 * c - 1 if adaptive else c
    # Multiplications by the scalar reciprocals: XLA divides a vector by a broadcast scalar in a
    # way that can differ by an ulp from the batched division (vmap over a budget must give the
    # separate calls' gaps).
    per_middle, per_top = 1 / budget.middle_scale, 1 / budget.top_scale
    middle_units = centered * per_middle
    top_units = (centered - budget.sigma) * per_top if adaptive else None
    tree = PassageTree(heap(middle_units, jnp.logaddexp, -jnp.inf), None, n)
    top_heap = None if top_units is None else heap(top_units, jnp.logaddexp, -jnp.inf)  # None: not adaptive
    threshold_key, passage_key, gap_key = jax.random.split(key, 3)
    eta = noise_lib.laplace(threshold_key, (), budget.threshold_scale, dtype)
    middle_shift, top_shift = eta * per_middle, eta * per_top

    def mass(node):
        if top_heap is None:  # not adaptive
            return tree.log_mass[node]
        return jnp.logaddexp(top_heap[node] + (middle_shift - top_shift), tree.log_mass[node])

    def step(state: _State) -> _State:
        stop_exp, keep_exp, branch_exp = standard_exponential(
            jax.random.fold_in(passage_key, state.draw), (3,), dtype
        )
        index = first_stop(tree, state.start, jnp.log(stop_exp) + middle_shift, mass=mass)
        leaf = jnp.minimum(index, n - 1)
        log_xm = middle_units[leaf] - middle_shift
        log_xt = jnp.asarray(-jnp.inf, dtype) if top_units is None else top_units[leaf] - top_shift
        log_p = jnp.log(-jnp.expm1(laplace_log_miss(log_xm) + laplace_log_miss(log_xt)))
        log_r = jnp.log(-jnp.expm1(-(jnp.exp(log_xm) + jnp.exp(log_xt))))
        fire = (index < n) & (keep_exp >= log_r - log_p)
        top = branch_exp >= log_p - laplace_log_fire(log_xt)
        slot = jnp.minimum(state.answers, size - 1)
        units = state.units + jnp.where(fire, jnp.where(top, 1, 2), 0)
        return _State(
            state.draw + 1,
            index + 1,
            state.answers + fire.astype(jnp.int32),
            units,
            (index >= n) | (units > 2 * c - 2),
            state.indices.at[slot].set(jnp.where(fire, index, state.indices[slot])),
            state.top.at[slot].set(jnp.where(fire, top, state.top[slot])),
        )

    zero = jnp.int32(0)
    init = _State(
        zero,
        zero,
        zero,
        zero,
        jnp.bool_(False),
        jnp.full((size,), -1, jnp.int32),
        jnp.zeros((size,), jnp.bool_),
    )
    final = lax.while_loop(lambda state: ~state.done, step, init)
    valid = final.indices >= 0
    keys = jax.vmap(lambda j: jax.random.fold_in(gap_key, j))(jnp.arange(size, dtype=jnp.uint32))
    answered = centered[jnp.maximum(final.indices, 0)]
    at = (eta - answered) * per_middle  # each ⊤'s threshold in units of its noise's scale
    if adaptive:
        at = jnp.where(final.top, (eta + budget.sigma - answered) * per_top, at)
    overshoot = jax.vmap(_laplace_overshoot)(keys, at)
    gaps = jnp.where(final.top, budget.sigma + budget.top_scale * overshoot, budget.middle_scale * overshoot)
    last = final.indices[jnp.maximum(final.answers - 1, 0)]
    processed = jnp.where(final.units > 2 * c - 2, last + 1, n).astype(jnp.int32)
    gaps = jnp.where(valid, gaps, jnp.nan)
    return _GapPassages(final.indices, gaps, final.top & valid, final.units, processed)
