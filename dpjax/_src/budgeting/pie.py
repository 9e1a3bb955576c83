"""Private iterative elimination: PIE-NI (Algorithm 4) and PIE-k (Algorithm 5) of Liang and Yi.

Every user ``i`` in ``G_0 = {i : r_i > 0}`` splits its per-query allotment ``r_i`` into ``c`` rounds
(``r_{i,j} = r_i frac_j``, :mod:`dpjax.budgeting.splits`). In round ``j`` each still-active user
releases a fresh Gaussian value ``v = u + Z / sqrt(2 r_{i,j})`` (the CGP mechanism of Lemma 3.4 with
K = 1, cost ``r_{i,j}``); the analyst keeps the inverse-variance running mean of the releases
(Fact 6.2: it has the noise of one release at the cumulative budget), a running estimate ``g`` of
the 1-Lipschitz score and the half-width

    h = lambda(d_eff, beta0 / (c |G_{j-1}|)) / sqrt(2 r_i cumfrac_j)          (Lemma 6.1)

with ``|G_{j-1}|`` the number of users active *before* the round's eliminations (Liang and Yi,
Algorithms 4 and 5: the current, public count, not ``n``).

* **PIE-NI** moves user ``i`` to ``S_1`` when ``est < nu_low - h``, to ``S_0`` when
  ``est > nu_high + h``, and otherwise keeps it; it stops after ``c`` rounds or when nobody is left.
  Lemma 5.2: with probability >= 1 - beta0 every decision is right.
* **PIE-k** keeps ``{i active : est_i - h_i <= U_k}``, ``U_k`` the k-th smallest upper end
  ``est + h`` (equivalent to Algorithm 5, lines 8-14); it stops after ``c``
  rounds or when exactly ``k`` users are left. Lemma 5.3: with probability >= 1 - beta0 the true k
  smallest stay active.

Two modes: **point** (``score_fn`` given, ``data`` (n, d); the users release noisy points and the
analyst scores the weighted mean point: the triple (M(.,.;f_id), g_0, h_0), d_eff = d) and
**distance** (``score_fn=None``, ``data`` (n,) holds each user's locally computed score phi(x_i);
the users release noisy scores: the triple (M(.,.;phi), g_1, h_1), d_eff = 1).

Parameters: ``c``, the split, ``chunk_size``, ``noise_mode``, ``score_fn`` and (PIE-k) ``k`` fix
the loop structure and the shapes and are static; every other parameter (``rho``, scalar or per
user, ``beta0``, the thresholds, ``score_params``, and the applications' query parameters) may be
traced. Concrete values are validated eagerly; traced ones are checked in the graph, and an invalid
one (or non-finite traced data) makes every float output NaN and every integer output ``-1``
(:class:`dpjax.validation.Checks`). The applications run their whole computation (score, rounds,
answer) in one jit-compiled kernel, so a call with concrete parameters runs the same compiled code
as a call under ``vmap`` over them and gives the same result for the same key.

Privacy (per user, neighboring inputs at distance dist <= Lambda in the user's metric): the
releases of user ``i`` cost at most ``r_i`` in CGP (``r_i``-CGP, i.e. ``D_alpha <= r_i alpha
dist^2``), whatever the stopping time (Thm 4.4); eliminated users are charged only
``r_i cumfrac[e_i]`` for the ``e_i`` rounds they released in, and keep the rest as savings. The
analyst's decisions use only releases and public parameters: the raw data enter only
:func:`user_release`.

Noise, chunking and compaction: the Gaussian of user ``i`` in round ``j`` depends only on the key,
the round and the user's index: with threefry keys (JAX's default) its four random words are
``threefry2x32(fold_in(key, j), (i, 0))`` and ``(i, 1)``, mapped by
:func:`dpjax.noise.gaussian_from_words` (the law of ``noise.gaussian``'s tail-exact mode); other key
implementations draw them from ``fold_in(fold_in(key, j), i)``. Rounds are element-wise over users
except two exact reductions (the active count and, for PIE-k, ``U_k``, the k-th smallest upper
end), so ``chunk_size`` (users whose noise words are drawn at once: it bounds the temporaries) and
the sharding never change the result. Noise is drawn for active users only: the active users are
gathered into smaller static working sets (n, n/4, then halves down to 2048) once the next one can
hold them, so late rounds cost what their survivors cost.

Many devices: users sharded evenly along a mesh axis (explicit axes under ``jit``, or any concrete
sharded array) run the rounds per device with ``shard_map``: each device keeps the state and the
working sets of its own users, and the devices exchange only the active count (``psum``), the
largest per-device active count (``pmax``: when to compact) and PIE-k's k smallest upper ends.
Results equal one device's for the same key (integers bit for bit, floats within 1 ulp).

Memory: per user and query (float32), the inputs ``4 d + 4`` bytes (data and allotment), the state
and outputs ``4 d`` (mean) + 4 (estimate) + 4 (half-width) + 1 (status) + 2 (rounds), the round's
noise ``4 d``, plus the compacted working sets and one chunk of noise words: XLA's compiled memory
analysis gives about 40 bytes per user in distance mode at n = 10^6 (c = 4), divided by the device
count when the users are sharded (``benchmarks/sharded_memory.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry_2x32
from jax.sharding import PartitionSpec
from jax.typing import ArrayLike, DTypeLike

from dpjax._src import noise, sharded
from dpjax._src.accounting.guarantees import ZCDP
from dpjax._src.budgeting.bounds import tail_radius_from_log
from dpjax._src.budgeting.splits import Split, running_mean_weights, split_schedule
from dpjax._src.noise import NoiseMode
from dpjax._src.numerics import ceil_div
from dpjax._src.validation import (
    Checks,
    TracedParameterError,
    check_choice,
    check_int,
    float_dtype,
    is_traced,
)

__all__ = [
    "PIEResult",
    "charged",
    "pie_guarantee",
    "pie_k",
    "pie_ni",
    "user_noise",
]

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


def _user_words(round_key, users, count: int) -> jax.Array:
    """uint32 words (count, len(users)); user i's (column i) depend only on ``round_key`` and i.

    Threefry keys (JAX's default): words ``b`` and ``count/2 + b`` of user i are
    ``threefry2x32(round_key, (i, b))``, one hash per two words. Other key implementations:
    ``bits(fold_in(round_key, i), count)``.
    """
    if str(jax.random.key_impl(round_key)) != "threefry2x32":
        bits = jax.vmap(lambda i: jax.random.bits(jax.random.fold_in(round_key, i), (count,), jnp.uint32))
        return bits(users).T
    blocks = ceil_div(count, 2)
    m = users.shape[0]
    keypair = jax.random.key_data(round_key)
    counters = jnp.concatenate([jnp.tile(users, blocks), jnp.repeat(jnp.arange(blocks, dtype=jnp.uint32), m)])
    return threefry_2x32((keypair[0], keypair[1]), counters).reshape(2 * blocks, m)[:count]


def _user_gaussians(round_key, users, dshape, dtype, mode):
    """Standard Gaussians (len(users), *dshape): user i's depend only on ``round_key`` and i.

    ``mode="high"``: :func:`dpjax.noise.gaussian_from_words` on 4 words per coordinate from
    :func:`_user_words`; ``mode="low"``: ``jax.random.normal`` from ``fold_in(round_key, i)``.
    """
    if mode == "low":
        return jax.vmap(
            lambda i: noise.gaussian(jax.random.fold_in(round_key, i), dshape, 1.0, dtype, mode=mode)
        )(users)
    coords = int(np.prod(dshape, dtype=np.int64))
    words = _user_words(round_key, users, 4 * coords).reshape(4, coords, users.shape[0])
    return noise.gaussian_from_words(jnp.swapaxes(words, 1, 2).reshape(4, users.shape[0], *dshape), dtype)


def user_noise(
    key: jax.Array,
    round_index: int,
    n: int,
    dshape: Sequence[int] = (),
    dtype: DTypeLike | None = None,
    mode: NoiseMode = "high",
) -> jax.Array:
    """The (n, *dshape) standard Gaussians PIE uses for users 0..n-1 in round ``round_index`` (0-based).

    User i's noise in round j depends only on the key, j and i (:func:`_user_gaussians` with the
    round key ``fold_in(key, j)``): not on n, the chunking, the sharding or which other users are
    still active. Exposed for audits.
    """
    users = jnp.arange(n, dtype=jnp.uint32)
    return _user_gaussians(jax.random.fold_in(key, round_index), users, tuple(dshape), dtype, mode)


def _chunked(fn, x, chunk: int):
    """``fn(x)`` for an element-wise ``fn`` of the leading axis, computed ``chunk`` rows at a time (a
    scan, then the remainder): bounds the temporaries (the noise's random words) to one chunk."""
    size = x.shape[0]
    cs = min(chunk, max(size // 2, 1))
    main = size - size % cs
    if main == cs and main == size:
        return fn(x)
    _, out = lax.scan(lambda _, rows: (None, fn(rows)), None, x[:main].reshape(main // cs, cs, *x.shape[1:]))
    out = out.reshape(main, *out.shape[2:])
    return out if main == size else jnp.concatenate([out, fn(x[main:])])


def user_release(x, r_round, z):
    """User side: ``x + Z/sqrt(2 r)``: the only function that sees raw data."""
    scale = lax.rsqrt(2 * jnp.where(r_round > 0, r_round, 1))
    return x + z * scale.reshape(scale.shape + (1,) * (z.ndim - scale.ndim))


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
        z = _chunked(lambda ids: _user_gaussians(rkey, ids, dshape, dtype, noise_mode), fixed.users, chunk)
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

    Users sharded evenly over mesh axes (``layout``, :func:`dpjax.sharded.leading_axes` of the data,
    also read from explicit-axis types under ``jit``): each device runs the rounds on its own users
    (``shard_map``), so the per-user state, noise and compaction are split over the devices, and the
    per-user outputs stay sharded. Otherwise XLA partitions the kernel (:func:`dpjax.sharded.auto_axes`).
    """
    options = dict(score_fn=score_fn, k=k, plan=plan)
    layout = layout or sharded.leading_axes(data)
    if layout is None:
        run = sharded.auto_axes(functools.partial(_pie_rounds, axes=None, devices=1, **options))
        return run(key, data, r, nu, beta0, score_params)
    mesh, axes = layout
    devices = int(np.prod([mesh.shape[a] for a in axes]))
    users = PartitionSpec(axes)
    run = jax.shard_map(
        functools.partial(_pie_rounds, axes=axes, devices=devices, **options),
        mesh=mesh,
        in_specs=(PartitionSpec(), users, users, PartitionSpec(), PartitionSpec(), PartitionSpec()),
        out_specs=PIEResult(users, users, users, users, users, PartitionSpec(), PartitionSpec()),
        axis_names=set(axes),
    )
    data, r = sharded.constrain_leading(data, layout), sharded.constrain_leading(r, layout)
    return run(key, data, r, nu, beta0, score_params)


def check_allotments(checks: Checks, rho, n: int, dtype) -> jax.Array:
    """Per-user allotments: a scalar > 0 (everyone) or an (n,) array >= 0 (0 = not in G_0).

    Concrete values are checked eagerly; traced ones are recorded in ``checks``.
    """
    if jnp.ndim(rho) == 0:
        return jnp.full(n, checks.positive(rho, "rho"), dtype)
    r = checks.array(rho, "rho", ndim=1, nonnegative=True)
    if r.shape[0] != n:
        raise ValueError(f"rho must be a scalar or have shape ({n},) to match the data, got {r.shape}.")
    return r.astype(dtype)


def check_beta0(checks: Checks, beta0, dtype) -> jax.Array:
    """The failure probability ``beta0`` in (0, 1) as a ``dtype`` scalar (eager or recorded)."""
    return jnp.asarray(checks.probability(beta0, "beta0", open_low=True, open_high=True), dtype)


def _prepare(checks: Checks, data, rho, beta0, *, point: bool, score_params):
    """Validates PIE's own inputs (before any randomness): (data, r, beta0) in the data's dtype."""
    data = checks.array(data, "data", ndim=2 if point else 1)
    dtype = float_dtype(data)
    beta0 = check_beta0(checks, beta0, dtype)
    r = check_allotments(checks, rho, data.shape[0], dtype)
    for leaf in jax.tree.leaves(score_params):
        checks.array(leaf, "score_params", ndim=None, allow_empty=True, finite=False)
    return data.astype(dtype), r, beta0


def _thresholds(checks: Checks, nu_low, nu_high):
    """PIE-NI's thresholds: scalars, not NaN, ``nu_low <= nu_high`` (+-inf allowed)."""
    for name, value in (("nu_low", nu_low), ("nu_high", nu_high)):
        if jnp.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {jnp.shape(value)}.")
    if is_traced(nu_low) or is_traced(nu_high):
        low, high = jnp.asarray(nu_low), jnp.asarray(nu_high)
        checks.record(
            ~jnp.isnan(low) & ~jnp.isnan(high) & (low <= high),
            "nu_low and nu_high must not be NaN, and nu_low <= nu_high.",
        )
        return nu_low, nu_high
    if np.isnan(nu_low) or np.isnan(nu_high):
        raise ValueError("nu_low and nu_high must not be NaN.")
    if float(nu_low) > float(nu_high):
        raise ValueError(f"nu_low must be <= nu_high, got {nu_low} > {nu_high}.")
    return nu_low, nu_high


def pie_ni(
    key: jax.Array,
    data: ArrayLike,
    rho: ArrayLike,
    *,
    c: int,
    beta0: float,
    nu_low: ArrayLike = -np.inf,
    nu_high: ArrayLike = np.inf,
    score_fn: Callable | None = None,
    score_params: Any = None,
    split: Split = "even",
    chunk_size: int | None = None,
    noise_mode: NoiseMode = "high",
) -> PIEResult:
    """PIE-NI, private iterative elimination against fixed thresholds (Liang and Yi, Algorithm 4).

    Local model; neighboring relation: one user's datum moves by ``dist`` in its metric. Privacy:
    user ``i`` is ``rho_i``-CGP (see :func:`pie_guarantee`) and is charged only
    ``rho_i * cumfrac[result.rounds[i]]`` (settle with
    :meth:`dpjax.accounting.per_user.PerUserLedger.settle`).

    Traced parameters: ``rho`` (a scalar or a per-user array), ``beta0``, ``nu_low``, ``nu_high``
    and ``score_params`` may be traced (``jax.vmap`` over any of them gives, for the same key, what
    separate calls give); ``c``, ``split``, ``chunk_size``, ``noise_mode`` and ``score_fn`` are
    static. Concrete values are validated eagerly (``ValueError`` before any randomness). When a
    traced value is invalid (``rho`` not > 0, or negative entries of a per-user ``rho``, ``beta0``
    outside (0, 1), NaN or infinite values, NaN thresholds or ``nu_low > nu_high``, NaN in
    ``score_params``) or traced ``data`` contain NaN or infinities, every floating field of the
    result is NaN and every integer field (``status``, ``rounds``, ``rounds_run``,
    ``active_counts``) is ``-1``.

    Args:
      key: a ``jax.random`` key.
      data: (n, d) points (point mode, ``score_fn`` given) or (n,) user-side scores phi(x_i)
        (distance mode). Finite.
      rho: per-user allotment for this query: a scalar > 0 or an (n,) array >= 0 (0: not queried)
        (may be traced).
      c: number of rounds, 1 <= c <= 32767 (static).
      beta0: total failure probability of the elimination decisions, in (0, 1) (may be traced).
      nu_low, nu_high: thresholds, ``nu_low <= nu_high`` (may be -inf / +inf; scalars, may be traced).
      score_fn: point mode only: a 1-Lipschitz ``score_fn(points (m, d), score_params) -> (m,)``
        (e.g. :func:`dpjax.budgeting.geometry.box_signed_distance`); hashable (static).
      score_params: pytree of arrays passed to ``score_fn``, without NaN (may be traced, e.g. vmap
        over queries).
      split: "even" or "doubling" (:func:`dpjax.budgeting.splits.split_schedule`) (static).
      chunk_size: users per chunk of the round loop; bounds working memory and never changes the
        result (static).
      noise_mode: "high" (tail-exact, default) or "low" (plain ``jax.random``, faster) (static).

    Returns:
      A :class:`PIEResult` (NaN / ``-1`` fields on invalid traced input).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> scores = jnp.array([-50.0, 3.0, 80.0])       # e.g. signed distances to a range, in metres
      >>> res = pie_ni(jax.random.key(0), scores, 1e-2, c=4, beta0=0.1, nu_low=0.0, nu_high=0.0)
      >>> res.status.shape
      (3,)
    """
    checks = Checks()
    nu_low, nu_high = _thresholds(checks, nu_low, nu_high)
    static = check_plan(c, split, chunk_size, noise_mode)
    point = score_fn is not None
    data, r, beta0 = _prepare(checks, data, rho, beta0, point=point, score_params=score_params)
    nu = jnp.stack([jnp.asarray(nu_low, data.dtype), jnp.asarray(nu_high, data.dtype)])
    result = pie_kernel(key, data, r, nu, beta0, score_params, score_fn=score_fn, plan=static)
    return checks.guard(result)


def pie_k(
    key: jax.Array,
    data: ArrayLike,
    rho: ArrayLike,
    *,
    k: int,
    c: int,
    beta0: float,
    score_fn: Callable | None = None,
    score_params: Any = None,
    split: Split = "even",
    chunk_size: int | None = None,
    noise_mode: NoiseMode = "high",
) -> PIEResult:
    """PIE-k, private iterative elimination keeping the k smallest scores (Liang and Yi, Algorithm 5).

    Same privacy, modes and arguments as :func:`pie_ni`, with ``1 <= k <= n`` (static) instead of
    thresholds. If ``|G_0| <= k`` no round runs and nobody is charged. Survivors have status 3;
    eliminated users status 2. Lemma 5.3: with probability >= 1 - beta0 the k users with the
    smallest scores survive.

    Traced parameters: ``rho`` (a scalar or a per-user array), ``beta0`` and ``score_params`` may be
    traced; ``k``, ``c``, ``split``, ``chunk_size``, ``noise_mode`` and ``score_fn`` are static.
    Invalid traced values or non-finite traced ``data`` give NaN floating fields and ``-1`` integer
    fields, as :func:`pie_ni`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> dist = jnp.array([1.0, 50.0, 2.0, 90.0])      # user-side distances to a query point
      >>> res = pie_k(jax.random.key(0), dist, 1.0, k=2, c=8, beta0=0.1)
      >>> int((res.status == 3).sum()) >= 2
      True
    """
    checks = Checks()
    static = check_plan(c, split, chunk_size, noise_mode)
    point = score_fn is not None
    data, r, beta0 = _prepare(checks, data, rho, beta0, point=point, score_params=score_params)
    k = check_int(k, "k", minimum=1, maximum=data.shape[0])
    nu = jnp.zeros(2, data.dtype)
    result = pie_kernel(key, data, r, nu, beta0, score_params, score_fn=score_fn, k=k, plan=static)
    return checks.guard(result)


def pie_guarantee(rho: ArrayLike) -> ZCDP | np.ndarray:
    """Per-user worst case of one PIE query: ``max_i rho_i``-CGP.

    Returned as ``ZCDP(rho)``: in the user's metric this is rho-CGP (``D_alpha <= rho alpha
    dist^2``); with the Hamming metric and Lambda = 1 (central model) it is exactly rho-zCDP.

    Host side: ``rho`` is a concrete scalar or (n,) per-user array (one guarantee, the worst case
    over users), or a ``(..., n)`` array of several queries' allotments (e.g. a ``vmap`` over
    per-user rho arrays), which gives an object array of shape ``rho.shape[:-1]``, one guarantee
    per query. Traced values are refused.

    Example:
      >>> pie_guarantee(np.array([0.5, 0.0, 2.0])).rho
      2.0
    """
    if is_traced(rho):
        raise TracedParameterError(
            "rho must be a concrete number or array, not a traced value: guarantees are computed on "
            "the host for the accountant."
        )
    rho = np.asarray(rho, dtype=np.float64)
    if rho.ndim > 1:
        out = np.empty(rho.shape[:-1], dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = pie_guarantee(rho[index])
        return out
    if rho.size == 0 or not np.all(np.isfinite(rho)) or np.any(rho < 0) or not np.any(rho > 0):
        raise ValueError("rho must be finite, >= 0 and positive for some user.")
    return ZCDP(float(rho.max()))


def charged(result: PIEResult, rho: ArrayLike, c: int, split: Split = "even") -> jax.Array:
    """Each user's charge ``rho_i * cumfrac[e_i]`` in the kernel dtype (the ledger recomputes it in f64).

    An invalid result (``rounds`` = -1, from invalid traced input) is charged the full ``rho_i``.
    """
    cum = split_schedule(c, split).cumfrac
    rho = jnp.broadcast_to(jnp.asarray(rho, result.estimate.dtype), result.rounds.shape)
    return jnp.minimum(rho * jnp.asarray(cum, rho.dtype)[result.rounds], rho)
