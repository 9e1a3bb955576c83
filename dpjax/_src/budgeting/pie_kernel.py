"""PIE's rounds (Liang and Yi, Algorithms 4 and 5): the analyst's side of a round, the round loop
over compacted working sets, and the jit-compiled kernel the applications call (see
:mod:`dpjax._src.budgeting.pie`)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec

from dpjax._src import sharded
from dpjax._src.budgeting.bounds import tail_radius_from_log
from dpjax._src.budgeting.pie_noise import chunked, user_gaussians, user_release
from dpjax._src.budgeting.splits import Split, running_mean_weights, split_schedule
from dpjax._src.host_checks import check_choice, check_int
from dpjax._src.noise import NoiseMode
from dpjax._src.numerics import ceil_div

__all__ = ["ACTIVE", "S0", "S1", "PIEResult", "check_plan", "pie_kernel"]
_DEFAULT_CHUNK = 1 << 16  # users processed at once within a round (bounds the noise temporaries)
_MIN_LEVEL = 2048  # smallest compacted working set


_OUT, S1, S0, ACTIVE = 0, 1, 2, 3  # status codes; ACTIVE after the loop means "survivor" (in G_jhat)


class PIEResult(NamedTuple):
    """Per-user outcome of one PIE run (n users, c rounds).

    Attributes:
      status: (n,) int8: 0 = not in G_0 (r_i = 0), 1 = S_1 (confidently phi < nu_low), 2 = S_0
        (PIE-NI: confidently phi > nu_high; PIE-k: eliminated), 3 = survivor (in G_jhat).
      rounds: (n,) int16 ``e_i``: the rounds user i released in; its charge is ``r_i cumfrac[e_i]``.
      mean: (n,) or (n, d): the weighted mean of user i's releases (x-bar or y-bar; 0 if not in G_0).
      estimate: (n,): the running estimate g at user i's last round (phi of the mean in point mode).
      half_width: (n,): the half-width h at user i's last round (+inf if not in G_0).
      rounds_run: int32 ``jhat``, the number of rounds executed.
      active_counts: (c,) int32 ``|G_{j-1}|`` at the start of each executed round (0 afterwards).
    """

    status: jax.Array
    rounds: jax.Array
    mean: jax.Array
    estimate: jax.Array
    half_width: jax.Array
    rounds_run: jax.Array
    active_counts: jax.Array


def _expand(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def _analyst_round(v, rq, m, e, s, rd, *, j, wj, cj, lam, nu, score, k):
    """Analyst side of one round over a working set: sees the releases ``v`` and public parameters only.

    Updates the running mean ``m``, estimate ``e``, status ``s`` and rounds ``rd`` of the active
    users; returns the new state and (PIE-k) the working set's k smallest upper ends.
    """
    active = s == ACTIVE
    m = jnp.where(_expand(active, m), m + wj * (v - m), m)
    e = jnp.where(active, score(m), e)
    h = lam * lax.rsqrt(2 * jnp.where(active, rq * cj, 1))
    rd = jnp.where(active, (j + 1).astype(jnp.int16), rd)
    if k is None:
        to1 = active & (e < nu[0] - h)
        to0 = active & ~to1 & (e > nu[1] + h)
        s = jnp.where(to1, S1, jnp.where(to0, S0, s)).astype(jnp.int8)
        return (m, e, s, rd), jnp.full((0,), jnp.inf, e.dtype)
    upper = jnp.where(active, e + h, jnp.inf)
    return (m, e, s, rd), -lax.top_k(-upper, min(k, upper.shape[0]))[0]


def _levels(n: int, floor: int) -> list[int]:
    """Static sizes of the compacted working sets: n, n/4, then half the previous one at a time (the
    first compaction reads all n users; the later ones read the smaller working sets)."""
    caps, step = [n], 4
    while caps[-1] // step >= max(_MIN_LEVEL, floor):
        caps.append(caps[-1] // step)
        step = 2
    return caps


class _Plan(NamedTuple):
    """The static shape of a PIE run: rounds ``c``, their ``split``, the ``chunk`` size and the noise
    mode (hashable, so one static argument of the kernels)."""

    c: int
    split: Split
    chunk: int
    noise_mode: NoiseMode


def check_plan(
    c: int, split: Split = "even", chunk_size: int | None = None, noise_mode: NoiseMode = "high"
) -> _Plan:
    """Validates the static options of a PIE run (eagerly: they fix shapes and loop structure)."""
    c = check_int(c, "c", minimum=1)
    check_choice(noise_mode, "noise_mode", ("high", "low"))
    split_schedule(c, split)  # validates c and the split kind
    chunk = _DEFAULT_CHUNK if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1)
    return _Plan(c, split, chunk, noise_mode)


class _Fixed(NamedTuple):
    """What the rounds over a working set read and never change."""

    data: jax.Array  # (m, *dshape) the users' data: read by the user side only
    r: jax.Array  # (m,) allotments
    users: jax.Array  # (m,) uint32 global user indices: the noise streams


class _Work(NamedTuple):
    """The per-user state of a working set, updated by every round."""

    mean: jax.Array  # (m, *dshape) weighted mean of the releases
    estimate: jax.Array  # (m,) running estimate g
    status: jax.Array  # (m,) int8 status code
    rounds: jax.Array  # (m,) int16 rounds released in


class _Loop(NamedTuple):
    """The carry of the round loop."""

    j: jax.Array  # int32, rounds run so far
    active: jax.Array  # int32 |G_j| over all users (every shard)
    local: jax.Array  # int32 active users of this shard's working set (= active on one device)
    counts: jax.Array  # (c,) int32 |G_{j-1}| of each executed round
    work: _Work


def _pie_rounds(key, data, r, nu, beta0, score_params, *, score_fn, k, plan: _Plan, axes, devices: int):
    """PIE on the users of one shard (``axes``: the mesh axes the users are split over, inside
    ``shard_map``) or on all users (``axes=None``). Rounds are element-wise over users; the shards
    meet only in the active count (``psum``), the level decisions (``pmax``) and PIE-k's ``U_k``
    (the shards' k smallest upper ends, gathered)."""
    c, split, chunk, noise_mode = plan
    block = r.shape[0]
    dtype = data.dtype
    dshape = data.shape[1:]
    point = score_fn is not None
    d_eff = dshape[0] if point else 1
    schedule = split_schedule(c, split)
    frac = jnp.asarray(schedule.frac, dtype)
    cum = jnp.asarray(schedule.cumfrac, dtype)
    weight = jnp.asarray(running_mean_weights(schedule.cumfrac), dtype)
    log_c_over_beta = jnp.log(jnp.asarray(c, dtype)) - jnp.log(beta0)  # beta0: a dtype scalar
    stop_at = 0 if k is None else k
    if axes is None:
        offset, total, largest = jnp.uint32(0), (lambda a: a), (lambda a: a)
    else:
        offset = (lax.axis_index(axes) * block).astype(jnp.uint32)
        total = functools.partial(lax.psum, axis_name=axes)
        largest = functools.partial(lax.pmax, axis_name=axes)

    def score(m):
        return score_fn(m, score_params) if point else m

    def one_round(j, nact, fixed: _Fixed, work: _Work) -> _Work:
        """Round j over a working set (``nact`` = |G_{j-1}| over all users)."""
        lam = tail_radius_from_log(d_eff, log_c_over_beta + jnp.log(nact.astype(dtype)))
        fj, wj, cj = frac[j], weight[j], cum[j + 1]
        rkey = jax.random.fold_in(key, j)
        z = chunked(lambda ids: user_gaussians(rkey, ids, dshape, dtype, noise_mode), fixed.users, chunk)
        v = user_release(fixed.data, fixed.r * fj, z)  # user side
        work, best = _analyst_round(v, fixed.r, *work, j=j, wj=wj, cj=cj, lam=lam, nu=nu, score=score, k=k)
        work = _Work(*work)
        if k is None:
            return work
        return _eliminate_above_k(work, best, fixed.r, cj, lam, k=k, axes=axes)

    def run_level(caps, fixed: _Fixed, loop: _Loop) -> _Loop:
        """Rounds over a working set of ``caps[0]`` users while the next level cannot hold every
        shard's active users; then (if rounds remain) the active users are gathered into a working
        set of ``caps[1]``, run there, and scattered back."""
        next_cap = caps[1] if len(caps) > 1 else -1

        def cond(loop: _Loop):
            return (loop.j < c) & (loop.active > stop_at) & (largest(loop.local) > next_cap)

        def body(loop: _Loop) -> _Loop:
            work = one_round(loop.j, loop.active, fixed, loop.work)
            local = jnp.sum(work.status == ACTIVE, dtype=jnp.int32)
            return _Loop(loop.j + 1, total(local), local, loop.counts.at[loop.j].set(loop.active), work)

        loop = lax.while_loop(cond, body, loop)
        if len(caps) == 1:
            return loop

        def deeper(loop: _Loop) -> _Loop:
            size = fixed.r.shape[0]
            idx = jnp.nonzero(loop.work.status == ACTIVE, size=caps[1], fill_value=size)[0]

            def take(a, fill=0):
                return a.at[idx].get(mode="fill", fill_value=fill)

            inner = _Fixed(*(take(a) for a in fixed))
            work = loop.work._replace(status=take(loop.work.status, _OUT))
            work = work._replace(mean=take(work.mean), estimate=take(work.estimate), rounds=take(work.rounds))
            out = run_level(caps[1:], inner, loop._replace(work=work))
            back = _Work(*(a.at[idx].set(b, mode="drop") for a, b in zip(loop.work, out.work, strict=True)))
            return out._replace(work=back)

        return lax.cond((loop.j < c) & (loop.active > stop_at), deeper, lambda loop: loop, loop)

    status = jnp.where(r > 0, ACTIVE, _OUT).astype(jnp.int8)
    work = _Work(jnp.zeros_like(data), jnp.zeros_like(r), status, jnp.zeros_like(r, jnp.int16))  # per shard
    local = jnp.sum(status == ACTIVE, dtype=jnp.int32)
    loop = _Loop(jnp.int32(0), total(local), local, jnp.zeros(c, jnp.int32), work)
    fixed = _Fixed(data, r, offset + jnp.arange(block, dtype=jnp.uint32))
    loop = run_level(_levels(block, ceil_div(stop_at, devices)), fixed, loop)

    mean, est, status, rounds = loop.work
    half = _half_widths(rounds, r, cum, loop.counts, d_eff, log_c_over_beta)
    return PIEResult(status, rounds, mean, est, half, loop.j, loop.counts)


def _eliminate_above_k(work: _Work, best, r, cj, lam, *, k: int, axes) -> _Work:
    """PIE-k's elimination after a round: ``best`` holds the working set's smallest upper ends
    ``g + h``; an active user whose lower end ``g - h`` (``h = lam / sqrt(2 r cj)``) lies above
    ``U_k``, the k-th smallest upper end over all users (every shard's), goes to ``S_0``."""
    if best.shape[0] < k:  # a working set of fewer than k users
        best = jnp.concatenate([best, jnp.full((k - best.shape[0],), jnp.inf, best.dtype)])
    if axes is not None:  # U_k over all users: the k smallest of every shard's k smallest
        best = -lax.top_k(-lax.all_gather(best, axes, tiled=True), k)[0]
    active = work.status == ACTIVE
    h = lam * lax.rsqrt(2 * jnp.where(active, r * cj, 1))
    return work._replace(status=jnp.where(active & (work.estimate - h > best[k - 1]), S0, work.status))


def _half_widths(rounds, r, cum, counts, d_eff: int, log_c_over_beta):
    """Each user's half-width ``h`` at its last round (``+inf`` for users who never released), from
    the round radii ``lam_j`` of the active counts ``counts``."""
    dtype = r.dtype
    last = jnp.maximum(rounds.astype(jnp.int32) - 1, 0)
    lam_rounds = tail_radius_from_log(d_eff, log_c_over_beta + jnp.log(jnp.maximum(counts, 1).astype(dtype)))
    lam_last = lam_rounds[last]
    took_part = rounds > 0
    return jnp.where(took_part, lam_last * lax.rsqrt(2 * jnp.where(took_part, r * cum[rounds], 1)), jnp.inf)


@functools.partial(jax.jit, static_argnames=("score_fn", "k", "plan", "layout"))
def pie_kernel(
    key, data, r, nu, beta0, score_params=None, *, score_fn=None, k=None, plan: _Plan, layout=None
):
    """The PIE kernel on validated inputs: ``data`` and ``r`` (n,) in one float dtype, ``nu`` (2,)
    and ``beta0`` in that dtype, ``k=None`` for PIE-NI. The applications call it inside their own
    jit-compiled kernels, so that a call with concrete parameters runs the same compiled code as a
    call under ``vmap`` (bit-identical results).

    Users sharded evenly over mesh axes (``layout``, :func:`dpjax._src.sharded.leading_axes` of the data,
    also read from explicit-axis types under ``jit``): each device runs the rounds on its own users
    (``shard_map``), so the per-user state, noise and compaction are split over the devices, and the
    per-user outputs stay sharded. Otherwise XLA partitions the kernel (:func:`dpjax.sharded.auto_axes`).
    """
    rounds = functools.partial(_pie_rounds, score_fn=score_fn, k=k, plan=plan)
    layout = layout or sharded.leading_axes(data)
    if layout is None:
        run = sharded.auto_axes(functools.partial(rounds, axes=None, devices=1))
        return run(key, data, r, nu, beta0, score_params)
    mesh, axes = layout
    devices = int(np.prod([mesh.shape[a] for a in axes]))
    users = PartitionSpec(axes)
    run = jax.shard_map(
        functools.partial(rounds, axes=axes, devices=devices),
        mesh=mesh,
        in_specs=(PartitionSpec(), users, users, PartitionSpec(), PartitionSpec(), PartitionSpec()),
        out_specs=PIEResult._make([users, users, users, users, users, PartitionSpec(), PartitionSpec()]),
        axis_names=set(axes),
    )
    data, r = sharded.constrain_leading(data, layout), sharded.constrain_leading(r, layout)
    return run(key, data, r, nu, beta0, score_params)
