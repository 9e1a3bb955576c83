"""Private iterative elimination: PIE-NI (Algorithm 4) and PIE-k (Algorithm 5) of Liang and Yi.

Every user ``i`` in ``G_0 = {i : r_i > 0}`` splits its per-query allotment ``r_i`` into ``c`` rounds
(``r_{i,j} = r_i frac_j``, :mod:`dpjax._src.budgeting.splits`). In round ``j`` each still-active user
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

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src.accounting.guarantees import ZCDP
from dpjax._src.budgeting.pie_kernel import PIEResult, check_plan, pie_kernel
from dpjax._src.budgeting.splits import Split, split_schedule
from dpjax._src.host_checks import TracedParameterError, check_int, float_dtype, is_traced
from dpjax._src.noise import NoiseMode
from dpjax._src.validation import Checks

__all__ = ["charged", "pie_guarantee", "pie_k", "pie_ni"]


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


def _prepare(
    checks: Checks, data, rho, beta0, *, point: bool, score_params
) -> tuple[jax.Array, jax.Array, jax.Array]:
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
    beta0: ArrayLike,
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
    :meth:`dpjax._src.accounting.ledger.Reservation.settle`).

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
        (e.g. :func:`dpjax.budgeting.box_signed_distance`); hashable (static).
      score_params: pytree of arrays passed to ``score_fn``, without NaN (may be traced, e.g. vmap
        over queries).
      split: "even" or "doubling" (:func:`dpjax.budgeting.split_schedule`) (static).
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
    data, r, beta = _prepare(checks, data, rho, beta0, point=point, score_params=score_params)
    nu = jnp.stack([jnp.asarray(nu_low, data.dtype), jnp.asarray(nu_high, data.dtype)])
    result = pie_kernel(key, data, r, nu, beta, score_params, score_fn=score_fn, plan=static)
    return checks.guard(result)


def pie_k(
    key: jax.Array,
    data: ArrayLike,
    rho: ArrayLike,
    *,
    k: int,
    c: int,
    beta0: ArrayLike,
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
    data, r, beta = _prepare(checks, data, rho, beta0, point=point, score_params=score_params)
    k = check_int(k, "k", minimum=1, maximum=data.shape[0])
    nu = jnp.zeros(2, data.dtype)
    result = pie_kernel(key, data, r, nu, beta, score_params, score_fn=score_fn, k=k, plan=static)
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
