"""Private iterative elimination: PIE-NI (Algorithm 4) and PIE-k (Algorithm 5) of Liang and Yi.

Every user ``i`` in ``G_0 = {i : r_i > 0}`` splits its per-query allotment ``r_i`` into ``c`` rounds
(``r_{i,j} = r_i frac_j``, :mod:`dpjax.budgeting.splits`). In round ``j`` each still-active user
releases a fresh Gaussian value ``v = u + Z / sqrt(2 r_{i,j})`` (the CGP mechanism of Lemma 3.4 with
K = 1, cost ``r_{i,j}``); the analyst keeps the inverse-variance running mean of the releases
(Fact 6.2: it has the noise of one release at the cumulative budget), a running estimate ``g`` of
the 1-Lipschitz score and the half-width

    h = lambda(d_eff, beta0 / (c |G_{j-1}|)) / sqrt(2 r_i cumfrac_j)          (Lemma 6.1)

with ``|G_{j-1}|`` the number of users active *before* the round's eliminations (spec erratum 10).

* **PIE-NI** moves user ``i`` to ``S_1`` when ``est < nu_low - h``, to ``S_0`` when
  ``est > nu_high + h``, and otherwise keeps it; it stops after ``c`` rounds or when nobody is left.
  Lemma 5.2: with probability >= 1 - beta0 every decision is right.
* **PIE-k** keeps ``{i active : est_i - h_i <= U_k}``, ``U_k`` the k-th smallest upper end
  ``est + h`` (equivalent to Algorithm 5, lines 8-14, spec section 2.3); it stops after ``c``
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

Privacy (per user, neighbouring inputs at distance dist <= Lambda in the user's metric): the
releases of user ``i`` cost at most ``r_i`` in CGP (``r_i``-CGP, i.e. ``D_alpha <= r_i alpha
dist^2``), whatever the stopping time (Thm 4.4); eliminated users are charged only
``r_i cumfrac[e_i]`` for the ``e_i`` rounds they released in, and keep the rest as savings. The
analyst's decisions use only releases and public parameters: the raw data enter only
:func:`_user_release`.

Noise, chunking and compaction: the Gaussian of user ``i`` in round ``j`` is drawn (through
:mod:`dpjax.noise`) from ``fold_in(fold_in(key, j), i)``: it depends only on the key, the round and
the user's index. Rounds are element-wise over users except two exact reductions (the active count
and, for PIE-k, ``U_k``, merged from per-chunk top-k), so ``chunk_size`` (which only bounds the
per-round working memory) never changes the result. Noise is drawn for active users only: whenever
the active set falls to a quarter of the working set, the active users are gathered into a smaller
static working set (n, n/4, n/16, ... down to 2048), so late rounds cost what their survivors cost.

Memory: per user and query (float32), the inputs ``4 d + 4`` bytes (data and allotment), the state
and outputs ``4 d`` (mean) + 4 (estimate) + 4 (half-width) + 1 (status) + 2 (rounds), plus the
compacted working sets (at most a quarter of that again) and one chunk of noise temporaries: XLA's
compiled memory analysis gives about 43 bytes per user in distance mode and 56 in 2-D point mode at
n = 10^6 (``benchmarks/bench_budgeting.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax import noise, sharded
from dpjax.accounting import ZCDP
from dpjax.budgeting.bounds import tail_radius_from_log
from dpjax.budgeting.splits import running_mean_weights, split_schedule
from dpjax.validation import Checks, check_choice, check_int, float_dtype, is_traced

DEFAULT_CHUNK = 1 << 16  # users processed at once within a round (bounds the noise temporaries)
MIN_LEVEL = 2048  # smallest compacted working set

OUT, S1, S0, ACTIVE = 0, 1, 2, 3  # status codes; ACTIVE after the loop means "survivor" (in G_jhat)


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


def _user_gaussians(round_key, users, dshape, dtype, mode):
    """Standard Gaussians (len(users), *dshape): user i's from ``fold_in(round_key, i)``."""
    return jax.vmap(
        lambda i: noise.gaussian(jax.random.fold_in(round_key, i), dshape, 1.0, dtype, mode=mode)
    )(users)


def user_noise(key, round_index: int, n: int, dshape=(), dtype=None, mode: str = "high") -> jax.Array:
    """The (n, *dshape) standard Gaussians PIE uses for users 0..n-1 in round ``round_index`` (0-based).

    User i's noise in round j comes from ``fold_in(fold_in(key, j), i)``: it depends on nothing
    else (not on n, the chunking or which other users are still active). Exposed for audits.
    """
    users = jnp.arange(n, dtype=jnp.uint32)
    return _user_gaussians(jax.random.fold_in(key, round_index), users, tuple(dshape), dtype, mode)


def _user_release(x, r_round, z):
    """User side: ``x + Z/sqrt(2 r)``: the only function that sees raw data."""
    scale = lax.rsqrt(2 * jnp.where(r_round > 0, r_round, 1))
    return x + z * scale.reshape(scale.shape + (1,) * (z.ndim - scale.ndim))


def _expand(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


def _analyst_round(v, rq, m, e, s, rd, *, j, wj, cj, lam, nu, score, k):
    """Analyst side of one round for a chunk: sees the releases ``v`` and public parameters only.

    Updates the running mean ``m``, estimate ``e``, status ``s`` and rounds ``rd`` of the active
    users; returns the new state and (PIE-k) the chunk's k smallest upper ends.
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


def keep_k_smallest(estimate, half_width, active, k: int):
    """PIE-k's elimination rule (Algorithm 5, lines 8-14) in vectorised form.

    Keeps ``{i active : est_i - h_i <= U_k}`` with ``U_k`` the k-th smallest upper end ``est + h``
    among the active users (needs more than k active). Equivalent to the literal rule "the k smallest
    upper ends plus every interval meeting the k-th one's interval", ties included: a user whose
    interval lies wholly left of ``I_{t_k}`` has an upper end below ``U_k`` and is one of the k.
    """
    upper = jnp.where(active, estimate + half_width, jnp.inf)
    u_k = -lax.top_k(-upper, k)[0][k - 1]
    return active & (estimate - half_width <= u_k)


def _levels(n: int, floor: int) -> list[int]:
    """Static sizes of the compacted working sets: n, then about a quarter at a time."""
    caps = [n]
    while caps[-1] // 4 >= max(MIN_LEVEL, floor):
        caps.append(caps[-1] // 4)
    return caps


class Plan(NamedTuple):
    """The static shape of a PIE run: rounds ``c``, their ``split``, the ``chunk`` size and the noise
    mode (hashable, so one static argument of the kernels)."""

    c: int
    split: str
    chunk: int
    noise_mode: str


def _plan(c: int, split: str = "even", chunk_size: int | None = None, noise_mode: str = "high") -> Plan:
    """Validates the static options of a PIE run (eagerly: they fix shapes and loop structure)."""
    c = check_int(c, "c", minimum=1)
    check_choice(noise_mode, "noise_mode", ("high", "low"))
    split_schedule(c, split)  # validates c and the split kind
    chunk = DEFAULT_CHUNK if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1)
    return Plan(c, split, chunk, noise_mode)


@functools.partial(jax.jit, static_argnames=("score_fn", "k", "plan"))
@sharded.auto_axes
def _pie_kernel(key, data, r, nu, beta0, score_params=None, *, score_fn=None, k=None, plan: Plan):
    """The PIE kernel on validated inputs: ``data`` and ``r`` (n,) in one float dtype, ``nu`` (2,)
    and ``beta0`` in that dtype, ``k=None`` for PIE-NI. The applications call it inside their own
    jit-compiled kernels, so that a call with concrete parameters runs the same compiled code as a
    call under ``vmap`` (bit-identical results)."""
    c, split, chunk, noise_mode = plan
    n = r.shape[0]
    dtype = data.dtype
    dshape = data.shape[1:]
    point = score_fn is not None
    d_eff = dshape[0] if point else 1
    frac64, cum64 = split_schedule(c, split)
    frac = jnp.asarray(frac64, dtype)
    cum = jnp.asarray(cum64, dtype)
    weight = jnp.asarray(running_mean_weights(cum64), dtype)
    log_c_over_beta = jnp.log(jnp.asarray(c, dtype)) - jnp.log(beta0)  # beta0: a dtype scalar
    stop_at = 0 if k is None else k

    def score(m):
        return score_fn(m, score_params) if point else m

    def one_round(j, nact, fixed, work):
        """Round j over a working set: ``fixed = (x, r, users)`` (data, allotments, global indices)
        stays out of the loop carry; ``work = (mean, est, status, rounds)`` is updated."""
        lam = tail_radius_from_log(d_eff, log_c_over_beta + jnp.log(nact.astype(dtype)))
        fj, wj, cj = frac[j], weight[j], cum[j + 1]
        rkey = jax.random.fold_in(key, j)
        size = fixed[1].shape[0]
        cs = min(chunk, size)
        n_chunks = -(-size // cs)

        def chunk_round(q, work, best):
            # the last chunk is shifted back to fit; users already done in chunk q-1 are masked out
            start = jnp.minimum(q * cs, size - cs)
            x, rq, ids, m, e, s, rd = (lax.dynamic_slice_in_dim(a, start, cs) for a in (*fixed, *work))
            fresh = start + jnp.arange(cs) >= q * cs
            s_masked = jnp.where(fresh, s, OUT).astype(jnp.int8)
            v = _user_release(x, rq * fj, _user_gaussians(rkey, ids, dshape, dtype, noise_mode))  # user side
            (m2, e2, s2, rd2), cand = _analyst_round(
                v, rq, m, e, s_masked, rd, j=j, wj=wj, cj=cj, lam=lam, nu=nu, score=score, k=k
            )
            s2 = jnp.where(fresh, s2, s).astype(jnp.int8)
            new = [
                lax.dynamic_update_slice_in_dim(a, b, start, 0)
                for a, b in zip(work, (m2, e2, s2, rd2), strict=True)
            ]
            if k is not None:
                best = -lax.top_k(-jnp.concatenate([best, cand]), k)[0]
            return tuple(new), best

        best = jnp.full((0 if k is None else k,), jnp.inf, dtype)
        if n_chunks == 1:
            work, best = chunk_round(0, work, best)
        else:
            work, best = lax.fori_loop(0, n_chunks, lambda q, wb: chunk_round(q, *wb), (work, best))
        m, e, s, rd = work
        if k is not None:
            active = s == ACTIVE
            h = lam * lax.rsqrt(2 * jnp.where(active, fixed[1] * cj, 1))
            s = jnp.where(active & (e - h > best[k - 1]), S0, s).astype(jnp.int8)
        return (m, e, s, rd)

    status = jnp.where(r > 0, ACTIVE, OUT).astype(jnp.int8)
    state = [jnp.zeros_like(data), jnp.zeros(n, dtype), status, jnp.zeros(n, jnp.int16)]  # m, e, s, rd
    j, nact, counts = jnp.int32(0), jnp.sum(status == ACTIVE, dtype=jnp.int32), jnp.zeros(c, jnp.int32)
    caps = _levels(n, stop_at)
    for level, cap in enumerate(caps):
        next_cap = caps[level + 1] if level + 1 < len(caps) else -1
        if level == 0:
            fixed, work = (data, r, jnp.arange(n, dtype=jnp.uint32)), tuple(state)
        else:  # compaction: gather the (at most cap) active users
            idx = jnp.nonzero(state[2] == ACTIVE, size=cap, fill_value=n)[0]
            gather = lambda a, fill=0, idx=idx: a.at[idx].get(mode="fill", fill_value=fill)  # noqa: E731
            fixed = (gather(data), gather(r), idx.astype(jnp.uint32))
            work = (gather(state[0]), gather(state[1]), gather(state[2], OUT), gather(state[3]))

        def cond(carry, next_cap=next_cap):
            j, nact = carry[0], carry[1]
            return (j < c) & (nact > stop_at) & (nact > next_cap)

        def body(carry, fixed=fixed):
            j, nact, counts, work = carry
            work = one_round(j, nact, fixed, work)
            counts = counts.at[j].set(nact)
            return j + 1, jnp.sum(work[2] == ACTIVE, dtype=jnp.int32), counts, work

        j, nact, counts, work = lax.while_loop(cond, body, (j, nact, counts, work))
        if level == 0:
            state = list(work)
        else:  # scatter the working set back (fill indices n are dropped)
            state = [a.at[idx].set(w, mode="drop") for a, w in zip(state, work, strict=True)]

    mean, est, status, rounds = state
    last = jnp.maximum(rounds.astype(jnp.int32) - 1, 0)
    lam_last = tail_radius_from_log(
        d_eff, log_c_over_beta + jnp.log(jnp.maximum(counts[last], 1).astype(dtype))
    )
    took_part = rounds > 0
    half = jnp.where(took_part, lam_last * lax.rsqrt(2 * jnp.where(took_part, r * cum[rounds], 1)), jnp.inf)
    return PIEResult(status, rounds, mean, est, half, j, counts)


def _per_user(checks: Checks, rho, n: int, dtype) -> jax.Array:
    """Per-user allotments: a scalar > 0 (everyone) or an (n,) array >= 0 (0 = not in G_0).

    Concrete values are checked eagerly; traced ones are recorded in ``checks``.
    """
    if jnp.ndim(rho) == 0:
        return jnp.full(n, checks.positive(rho, "rho"), dtype)
    r = checks.array(rho, "rho", ndim=1, nonnegative=True)
    if r.shape[0] != n:
        raise ValueError(f"rho must be a scalar or have shape ({n},) to match the data, got {r.shape}.")
    return r.astype(dtype)


def _beta0(checks: Checks, beta0, dtype) -> jax.Array:
    """The failure probability ``beta0`` in (0, 1) as a ``dtype`` scalar (eager or recorded)."""
    return jnp.asarray(checks.probability(beta0, "beta0", open_low=True, open_high=True), dtype)


def _prepare(checks: Checks, data, rho, beta0, *, point: bool, score_params):
    """Validates PIE's own inputs (before any randomness): (data, r, beta0) in the data's dtype."""
    data = checks.array(data, "data", ndim=2 if point else 1)
    dtype = float_dtype(data)
    beta0 = _beta0(checks, beta0, dtype)
    r = _per_user(checks, rho, data.shape[0], dtype)
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
    key,
    data,
    rho,
    *,
    c: int,
    beta0: float,
    nu_low=-np.inf,
    nu_high=np.inf,
    score_fn: Callable | None = None,
    score_params=None,
    split: str = "even",
    chunk_size: int | None = None,
    noise_mode: str = "high",
) -> PIEResult:
    """PIE-NI, private iterative elimination against fixed thresholds (Liang and Yi, Algorithm 4).

    Local model; neighbouring relation: one user's datum moves by ``dist`` in its metric. Privacy:
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
    static = _plan(c, split, chunk_size, noise_mode)
    point = score_fn is not None
    data, r, beta0 = _prepare(checks, data, rho, beta0, point=point, score_params=score_params)
    nu = jnp.stack([jnp.asarray(nu_low, data.dtype), jnp.asarray(nu_high, data.dtype)])
    result = _pie_kernel(key, data, r, nu, beta0, score_params, score_fn=score_fn, plan=static)
    return checks.guard(result)


def pie_k(
    key,
    data,
    rho,
    *,
    k: int,
    c: int,
    beta0: float,
    score_fn: Callable | None = None,
    score_params=None,
    split: str = "even",
    chunk_size: int | None = None,
    noise_mode: str = "high",
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
    static = _plan(c, split, chunk_size, noise_mode)
    point = score_fn is not None
    data, r, beta0 = _prepare(checks, data, rho, beta0, point=point, score_params=score_params)
    k = check_int(k, "k", minimum=1, maximum=data.shape[0])
    nu = jnp.zeros(2, data.dtype)
    result = _pie_kernel(key, data, r, nu, beta0, score_params, score_fn=score_fn, k=k, plan=static)
    return checks.guard(result)


def pie_guarantee(rho):
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
        raise TypeError(
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


def charged(result: PIEResult, rho, c: int, split: str = "even") -> jax.Array:
    """Each user's charge ``rho_i * cumfrac[e_i]`` in the kernel dtype (the ledger recomputes it in f64).

    An invalid result (``rounds`` = -1, from invalid traced input) is charged the full ``rho_i``.
    """
    _, cum = split_schedule(c, split)
    rho = jnp.broadcast_to(jnp.asarray(rho, result.estimate.dtype), result.rounds.shape)
    return jnp.minimum(rho * jnp.asarray(cum, rho.dtype)[result.rounds], rho)
