"""AboveThreshold and sparse vector as first-passage times: O(n) once, O(log n) per answer.

Durfee (2023), Algorithm 1: threshold noise ``eta`` (scale ``b1``), query noise ``nu_i`` (scale ``b2``),
and the run halts at the first ``i`` with ``c_i + nu_i >= eta`` (``c_i = q_i - T``). Given ``eta`` the
queries fire independently with probability ``p_i = S(eta - c_i)`` (``S`` the survival function of
the query noise), so the halting index is the first success of independent Bernoulli trials. In units
of ``b2`` write ``u_i = c_i / b2``, ``h = eta / b2`` and ``x_i = exp(u_i - h) = C w_i`` with
``C = e^-h`` (key) and ``w_i = e^{u_i}`` (data):

* Gumbel (``b1 == b2``): ``p_i = 1 - exp(-x_i)``, so no query in ``s..i`` fires with probability
  ``exp(-C (w_s + ... + w_i))``: the first passage from ``s`` is the first ``i`` with
  ``log(w_s + ... + w_i) >= log E + h`` (``E ~ Exp(1)``; ``h = -log E_0`` with ``E_0 ~ Exp(1)``).
* Laplace: ``p_i = x_i / 2`` for ``x_i < 1`` and ``1 - 1/(2 x_i)`` otherwise. The envelope
  ``r_i = 1 - exp(-(x_i/2 + x_i^2/4))`` dominates it for every ``x``: below 1, with ``y = x/2 <= 1/2``,
  ``-log(1 - p) = y + y^2/2 + y^3/3 + ... <= y + y^2 / (2 (1 - y)) <= y + y^2``; from 1 on,
  ``-log(1 - p) = log(2x)``, below ``x/2 + x^2/4`` at 1 (0.69 < 0.75) and growing slower (``1/x <=
  1/2 + x/2``). Its rate is a sum of two Gumbel-form rates, ``C/2 w_i + C^2/4 w_i^2``, so the passage
  from ``s`` is the first ``i`` with ``log(S1(s..i)/2 + e^-h S2(s..i)/4) >= log E + h`` (``S1``, ``S2``
  the sums of ``w`` and ``w^2``: two log-mass heaps searched together node by node, as in
  :mod:`dpjax._src.svt.gap_passage`). Each candidate is kept with probability ``p_i / r_i`` (thinning,
  Lewis and Shedler 1979), which is 1 - x/8 + O(x^2) for small ``x`` and at least 0.85 everywhere
  (its minimum, near ``x = 3``); after a rejection the passage restarts one past the candidate with a
  fresh exponential (the trials are independent). (The first-order envelope ``1 - exp(-x)`` keeps
  only about half of the candidates below the threshold: under ``vmap`` the loop lasts as long as
  the slowest release, about ``log2`` of the batch size rejections, where this one takes a few.)
* Exponential: ``p_i = min(1, x_i)``, which no envelope of the form ``1 - exp(-a x)`` dominates near
  ``x = 1``. Queries with ``x_i >= 1/2`` (``u_i >= h - log 2``) are candidates with certainty, kept
  with probability ``min(1, x_i) >= 1/2``: the first of them after ``s`` is a search in the running
  maximum of ``u`` over the queries from ``s`` on. The others are candidates with probability
  ``1 - exp(-2 log 2 x_i) >= x_i`` (concave, equal at ``x = 1/2``), kept with probability ``x_i`` over
  it (``>= 1/(2 log 2)``). The next candidate is the first of the two searches.

Each candidate is kept with probability at least 1/2 (0.85 for Laplace noise), so a release takes
``1 + Geometric(1/2)`` searches on average at most (at most a few dozen over 10^6 vmapped keys,
which share the loop).

The data structure (key independent, built once under ``vmap`` over keys): heaps over the
queries padded to ``D = 2^L`` leaves, :func:`dpjax._src.gumbel_process.heap`, of the log-masses
``logsumexp(u)``, for Laplace noise of ``logsumexp(2u)`` and, for Exponential noise, of the maxima
of ``u``. The search from ``s`` climbs
from leaf ``s`` accumulating the log-mass of the nodes to its right until one holds the passage,
then descends into it: ``2 L`` steps, each a ``logaddexp``. Only sums *from* ``s`` on are formed
(no difference of prefix sums), so the queries before ``s`` (in particular those far above the
threshold that answered a previous run of sparse vector) cost no precision.

Float precision. A node's log-mass at height ``k`` carries an absolute error of at most
``k eps (|l| + 1)`` (``l`` the largest log-mass on the way) and the climb adds at most ``2 L`` more
roundings, so the sums from ``s`` are off by a relative ``(3 L + 2) eps (M + 1)`` with ``M`` the
largest ``|log sum|`` the search compares: the target ``log E + h - log a`` lies within
``|h| + 45`` (tail-exact exponentials of :mod:`dpjax.noise`), so at ``n = 10^4`` and ``|h| < 5``
a passage probability is off by about ``2e-4`` relative in float32 and ``4e-13`` in float64, at
most (the literal kernel's comparison rounds with an absolute ``eps (|c_i| + |eta|)``). The
acceptance test compares ``E' >= log r_i - log p_i`` in log space (``log1p``/``expm1``), exact to a
few ulp. The maxima are exact. A rounding disagreement between a node and its children ends the
descent at the node's last leaf, clamped to the last query.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import noise as noise_lib
from dpjax._src.gumbel_process import heap
from dpjax._src.noise import standard_exponential

__all__: list[str] = []

_LOG2 = math.log(2.0)


class PassageTree(NamedTuple):
    """The heaps of :func:`_passage_tree` (key independent)."""

    log_mass: jax.Array  # [2D]: log of the sum of e^u under each node (leaves D .. 2D - 1: u itself)
    top: jax.Array | None  # [2D]: the largest u under each node (-inf on padding); Exponential only
    size: int  # n, the number of queries (static)
    square: jax.Array | None = None  # [2D]: log of the sum of e^{2u} under each node; Laplace only


def _passage_tree(units: jax.Array, noise: noise_lib.Sampler) -> PassageTree:
    """The log-mass heap over ``units = (q - T) / b2``; for Laplace noise the log-mass heap of
    ``2 units`` (the envelope's second rate); for Exponential noise (the only one whose search also
    stops at a level) the maximum heap; O(n)."""
    top = heap(units, jnp.maximum, -jnp.inf) if noise == "exponential" else None
    square = heap(2 * units, jnp.logaddexp, -jnp.inf) if noise == "laplace" else None
    return PassageTree(heap(units, jnp.logaddexp, -jnp.inf), top, units.shape[0], square)


def first_stop(tree: PassageTree, start, target, level=None, mass=None) -> jax.Array:
    """The first ``i >= start`` with ``log(sum_{start <= j <= i} e^{u_j}) >= target`` or
    ``u_i >= level`` (no such condition when ``level`` is None); ``n`` when there is none (or
    ``start >= n``). ``mass(node)`` gives a node's log-mass (default ``tree.log_mass[node]``; the
    two-rate passage of :mod:`dpjax._src.svt.gap_passage` adds a second heap). ``2 L`` heap steps."""
    leaves = tree.log_mass.shape[0] // 2
    depth = leaves.bit_length() - 1
    n = tree.size
    mass = (lambda node: tree.log_mass[node]) if mass is None else mass
    top = tree.top

    def stop(node, acc):
        reached = jnp.logaddexp(acc, mass(node)) >= target
        if level is None:
            return reached
        assert top is not None  # a level comes with the maximum heap (Exponential noise: _candidate)
        return reached | (top[node] >= level)

    node = leaves + jnp.minimum(start, n - 1)
    found = stop(node, -jnp.inf)
    acc = jnp.where(found, -jnp.inf, mass(node))

    def climb(_, carry):  # acc: log-mass of start .. the last leaf under node
        node, found, acc = carry
        sibling = jnp.minimum(node + 1, 2 * leaves - 1)
        right = ~found & (node % 2 == 0)
        hit = right & stop(sibling, acc)
        acc = jnp.where(right & ~hit, jnp.logaddexp(acc, mass(sibling)), acc)
        return jnp.where(found, node, jnp.where(hit, sibling, node // 2)), found | hit, acc

    def descend(_, carry):  # acc: log-mass of start .. the leaf before node's first
        node, acc = carry
        internal = node < leaves
        left = jnp.where(internal, 2 * node, node)
        hit = stop(left, acc)
        acc = jnp.where(internal & ~hit, jnp.logaddexp(acc, mass(left)), acc)
        return jnp.where(internal, jnp.where(hit, left, left + 1), node), acc

    node, found, acc = lax.fori_loop(0, depth, climb, (node, found, acc))
    node, _ = lax.fori_loop(0, depth, descend, (node, acc))
    return jnp.where(found & (start < n), jnp.minimum(node - leaves, n - 1), n).astype(jnp.int32)


def laplace_log_fire(log_x):
    """``log P(Z >= t)`` for ``Z ~ Laplace(1)`` and ``t = -log_x``: ``log(x/2)`` for ``x < 1``, else
    ``log(1 - 1/(2x))``."""
    return jnp.where(log_x < 0, log_x - _LOG2, jnp.log1p(-0.5 * jnp.exp(-jnp.maximum(log_x, 0))))


def laplace_log_miss(log_x):
    """``log P(Z < t)`` for ``Z ~ Laplace(1)`` and ``t = -log_x``: ``log(1 - x/2)`` for ``x < 1``,
    else ``-log(2x)``."""
    return jnp.where(log_x < 0, jnp.log1p(-0.5 * jnp.exp(jnp.minimum(log_x, 0))), -log_x - _LOG2)


def _thinning(noise: noise_lib.Sampler, log_x):
    """``(log a, level offset, log r_i - log p_i)`` of the envelope of module docstring for a
    candidate with ``log x_i = log_x``: rate ``a x`` (Laplace: ``x/2 + x^2/4``, :func:`_laplace_mass`)
    and certain candidates at ``u >= h + offset``."""
    if noise == "gumbel":
        return 0.0, math.inf, jnp.zeros_like(log_x)
    if noise == "laplace":
        rate = jnp.exp(log_x - _LOG2) + jnp.exp(2 * log_x - 2 * _LOG2)
        return 0.0, math.inf, jnp.log(-jnp.expm1(-rate)) - laplace_log_fire(log_x)
    log_a = math.log(2.0 * _LOG2)
    certain = log_x >= -_LOG2
    log_r = jnp.where(certain, 0, jnp.log(-jnp.expm1(-jnp.exp(log_x + log_a))))
    return log_a, -_LOG2, log_r - jnp.minimum(log_x, 0)


def _candidate(key, tree: PassageTree, start, shift, noise: noise_lib.Sampler):
    """One step of the thinned passage from ``start`` (module docstring): the next candidate
    ``index`` (``n`` when none) and whether it fires (always true for Gumbel noise)."""
    dtype = tree.log_mass.dtype
    leaves = tree.log_mass.shape[0] // 2
    log_a, offset, _ = _thinning(noise, jnp.zeros((), dtype))
    stop_exp, keep_exp = standard_exponential(key, (2,), dtype)
    level = None if math.isinf(offset) else shift + offset  # only Exponential noise has certain candidates
    mass = _laplace_mass(tree, shift) if noise == "laplace" else None
    index = first_stop(tree, start, jnp.log(stop_exp) - log_a + shift, level, mass)
    log_x = tree.log_mass[leaves + jnp.minimum(index, tree.size - 1)] - shift  # a leaf holds its u
    return index, keep_exp >= _thinning(noise, log_x)[2]


def _laplace_mass(tree: PassageTree, shift):
    """A node's log-mass for the Laplace envelope, ``log(S1/2 + e^-h S2/4)`` with ``h = shift``
    (module docstring): the passage target stays ``log E + h``."""
    square = tree.square
    assert square is not None  # the tree of Laplace noise has it (_passage_tree)
    return lambda node: jnp.logaddexp(tree.log_mass[node] - _LOG2, square[node] - shift - 2 * _LOG2)


def _threshold_shift(key, noise: noise_lib.Sampler, scale1, scale2, dtype) -> jax.Array:
    """``eta / b2`` for one threshold noise ``eta`` of scale ``b1 = scale1`` (``b2 = scale2``)."""
    if noise == "gumbel":  # b1 == b2: eta / b2 = -log E_0
        return -jnp.log(standard_exponential(key, (), dtype))
    return noise_lib.sample(noise, key, (), scale1, dtype) / scale2


class _Passages(NamedTuple):
    run: jax.Array  # j, the run under way (count when all are done)
    step: jax.Array  # candidates drawn so far in run j
    start: jax.Array  # where run j's next search starts
    shift: jax.Array  # run j's threshold noise in units of b2
    indices: jax.Array  # (count,) answers so far, -1 padded


def halting_indices(key, units, scale1, scale2, *, noise: noise_lib.Sampler, count: int):
    """The first ``count`` answers of sparse vector on ``units = (q - T) / b2`` (AboveThreshold when
    ``count == 1``), static ``noise`` and ``count``. Run ``j`` starts one past answer ``j - 1`` with
    a fresh threshold noise (Dwork and Roth 2014, Algorithm 2). Returns the int32 indices
    ``(count,)``, -1 padded.

    One ``lax.while_loop`` draws one candidate per step and moves to the next run when the current
    one ends, so under ``vmap`` the loop lasts as long as the slowest release's total number of
    candidates (not the sum over runs of the slowest run). A run that finds no answer ends them all.
    """
    tree = _passage_tree(units, noise)
    n = units.shape[0]
    dtype = units.dtype

    def step(state: _Passages) -> _Passages:
        threshold_key, passage_key = jax.random.split(jax.random.fold_in(key, state.run))
        fresh = _threshold_shift(threshold_key, noise, scale1, scale2, dtype)
        shift = jnp.where(state.step == 0, fresh, state.shift)
        index, keep = _candidate(jax.random.fold_in(passage_key, state.step), tree, state.start, shift, noise)
        none, done = index >= n, (index >= n) | keep
        run = jnp.minimum(state.run, count - 1)
        indices = state.indices.at[run].set(jnp.where(done & ~none, index, state.indices[run]))
        return _Passages(
            jnp.where(none, count, state.run + done.astype(jnp.int32)),
            jnp.where(done, 0, state.step + 1),
            index + 1,
            shift,
            indices,
        )

    zero = jnp.int32(0)
    init = _Passages(zero, zero, zero, jnp.zeros((), dtype), jnp.full((count,), -1, jnp.int32))
    return lax.while_loop(lambda state: state.run < count, step, init).indices
