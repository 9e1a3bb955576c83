"""Clip-norm strategies of :func:`dpjax.optax.dp_aggregate`: how the clip norm moves between steps.

Three strategies, each a pytree (a frozen dataclass whose privacy parameters are leaves, so they may
be traced, vmapped over or stored in a training state):

* :func:`fixed_clip`: the clip norm never moves (Abadi et al. 2016).
* :func:`quantile_clip`: every ``every`` steps the clip norm is set to a private q-quantile of the
  batch's per-example norms, estimated with the fully unbounded quantile mechanism (Durfee 2023,
  Algorithm 4) on the log norms, so no good start is needed.
* :func:`geometric_clip`: Andrew, Thakkar, McMahan, Ramaswamy (2021), "Differentially private
  learning with adaptive clipping", Algorithm 1: a geometric step towards the q-quantile driven by
  the noised count of unclipped examples.

Every strategy moves the clip norm *after* the step that used it: step t clips at ``C_t`` and the
strategy computes ``C_{t+1}`` from step t's per-example norms (on the same Poisson-sampled batch).

Neighboring relation: add/remove one example (the DP-SGD relation under Poisson sampling). Padding
examples (``example_mask`` False) count as absent. The privacy of what each strategy releases is
described to the accountant by :meth:`accounting_steps` as an equivalent Gaussian noise multiplier
per step; :mod:`dpjax._src.optax.accounting` states and composes it.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import noise
from dpjax._src.host_checks import check_int, check_positive, is_traced
from dpjax._src.numerics import ceil_div
from dpjax._src.optax import defaults
from dpjax._src.optax.gdp import pure_dp_to_gdp
from dpjax._src.quantiles.unbounded import halting, query_grid, tabulate
from dpjax._src.quantiles.unbounded_bins import grid_edges
from dpjax._src.validation import Checks

_DEFAULT_QUANTILE, _DEFAULT_CLIP_EPSILON, _DEFAULT_EVERY = (
    defaults.QUANTILE,
    defaults.CLIP_EPSILON,
    defaults.EVERY,
)
_DEFAULT_MAX_QUERIES = 300  # at beta = 1.01: estimates within a factor 1.5e8 of the centre


def _validate_initial_norm(checks: Checks, norm):
    return checks.positive(norm, "initial_norm")


def _validate_quantile(checks: Checks, quantile):
    return checks.probability(quantile, "quantile", open_low=True, open_high=True)


@partial(jax.tree_util.register_dataclass, data_fields=["initial_norm"], meta_fields=[])
@dataclasses.dataclass(frozen=True)
class FixedClip:
    """A constant clip norm. Build it with :func:`fixed_clip`."""

    initial_norm: float | jax.Array

    def validate(self, checks: Checks) -> FixedClip:
        """This strategy with every leaf checked (eagerly if concrete, recorded if traced)."""
        return FixedClip(_validate_initial_norm(checks, self.initial_norm))

    def next_norm(
        self,
        key: jax.Array,
        clip_norm: jax.Array,
        norms: jax.Array,
        mask: jax.Array,
        *,
        expected_batch_size: ArrayLike,
        step: jax.Array,
    ) -> jax.Array:
        """The clip norm of the next step: unchanged."""
        del key, norms, mask, expected_batch_size, step
        return clip_norm

    def accounting_steps(self, noise_multiplier: float, steps: int) -> tuple[tuple[int, float], ...]:
        """``((count, sigma), ...)``: every step is the Gaussian sum alone (noise multiplier sigma)."""
        return ((steps, noise_multiplier),)


def _log_norm_quantile(key, logs, real, below, above, epsilon, beta, max_queries: int, dtype):
    """Durfee (2023), Algorithm 4 (fully unbounded quantile estimation) on the log norms ``logs`` of
    the ``real`` examples, with the fixed public thresholds ``below`` and ``above``.

    Two AboveThreshold calls, queries from i = 0: the first halts when the count of real examples with
    ``y_j + 1 < beta**i`` reaches ``below`` (searching upwards from 0), the second when the count of
    real examples with ``y_j - 1 > -beta**i`` reaches ``above`` (searching downwards); the release is
    ``beta**k - 1`` if the first halts at k > 0, else ``1 - beta**k`` if the second does, else 0.
    Examples that are not real count in neither call (they are absent, as under add/remove).

    Guarantee (add/remove one example): each call's counts have increasing candidates and move by 0
    or 1 together, and its threshold is fixed, so with Exponential noise of scale ``2/epsilon`` on the
    threshold and on each query it is ``epsilon/2``-DP (Durfee 2023, Lemma B.2: ``max{epsilon1,
    epsilon2}``); the two calls compose to ``epsilon``-DP.
    """
    g = query_grid(beta, max_queries, dtype)
    half = jnp.asarray(epsilon, dtype) / 2

    def call(key, data, threshold):  # the second call is the first on the negated data
        counts, _ = tabulate(data, 0.0, beta, g, dtype)
        k, _ = halting(
            key, counts, threshold, 1, half, half, g.cap, noise="exponential", dtype=dtype, first=0
        )
        return k

    keys = jax.random.split(key)
    k = [
        call(keys[0], jnp.where(real, logs, jnp.inf), below),
        call(keys[1], jnp.where(real, -logs, jnp.inf), above),
    ]
    up, down = grid_edges(k[0], g.log_b), -grid_edges(k[1], g.log_b)
    return jnp.where(k[0] > 0, up, jnp.where(k[1] > 0, down, jnp.zeros((), dtype)))


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["initial_norm", "quantile", "epsilon", "every", "beta"],
    meta_fields=["max_queries"],
)
@dataclasses.dataclass(frozen=True)
class QuantileClip:
    """The clip norm re-estimated privately every ``every`` steps. Build it with :func:`quantile_clip`."""

    initial_norm: float | jax.Array
    quantile: float | jax.Array
    epsilon: float | jax.Array
    every: int | jax.Array
    beta: float | jax.Array
    max_queries: int = _DEFAULT_MAX_QUERIES

    def validate(self, checks: Checks) -> QuantileClip:
        """This strategy with every leaf checked (eagerly if concrete, recorded if traced)."""
        return _checked_quantile_clip(
            checks, self.initial_norm, self.quantile, self.epsilon, self.every, self.beta, self.max_queries
        )

    def next_norm(
        self,
        key: jax.Array,
        clip_norm: jax.Array,
        norms: jax.Array,
        mask: jax.Array,
        *,
        expected_batch_size: ArrayLike,
        step: jax.Array,
    ) -> jax.Array:
        """At steps with ``step % every == 0``: the fully unbounded quantile mechanism (Durfee 2023,
        Algorithm 4) on the log norms; at other steps the clip norm is kept.

        The data are ``y_j = log(norm_j / c)`` with the public centre ``c = 1`` at step 0 and
        ``c = C_t`` afterwards, and the release is ``c * exp(y*)`` for Algorithm 4's estimate ``y*``
        (see :func:`_log_norm_quantile`). The grid ``+-(beta**k - 1)`` is then relative: resolution
        ``beta - 1`` of the centre near it, and ``log(1 + |log(norm / c)|) / log(beta)`` queries to
        reach norms far from it. The first estimate does not depend on ``initial_norm`` at all, so
        a start 100x too high or too low costs one step clipped at it and nothing else.
        """
        dtype = clip_norm.dtype
        centre = jnp.where(step == 0, jnp.ones((), dtype), clip_norm)
        real = mask & jnp.isfinite(norms)
        logs = jnp.log(jnp.where(real, norms, 1).astype(dtype) / centre)

        def estimate(_):
            level = jnp.asarray(self.quantile, dtype) * jnp.asarray(expected_batch_size, dtype)
            above = jnp.asarray(expected_batch_size, dtype) - level
            y = _log_norm_quantile(
                key, logs, real, level, above, self.epsilon, self.beta, self.max_queries, dtype
            )
            return centre * jnp.exp(y)

        now = lax.rem(step, jnp.asarray(self.every, step.dtype)) == 0
        return lax.cond(now, estimate, lambda _: clip_norm, None)

    def accounting_steps(self, noise_multiplier: float, steps: int) -> tuple[tuple[int, float], ...]:
        """``((count, sigma), ...)``: ``ceil(steps / every)`` steps (those with ``t % every == 0``)
        release a quantile estimate beside the Gaussian sum, the others only the sum.

        One estimate on the sampled batch is ``epsilon``-DP under add/remove: two AboveThreshold
        calls, each with increasing candidates and a fixed threshold, so ``epsilon/2``-DP by Lemma
        B.2 of Durfee (2023) (``max{epsilon1, epsilon2}`` with ``epsilon1 = epsilon2 = epsilon/2``).
        A pure epsilon-DP mechanism is mu-GDP with
        ``mu = 2 Phi^-1(e^eps / (1 + e^eps))`` (see :func:`dpjax.optax.pure_dp_to_gdp`),
        i.e. dominated by a Gaussian of noise multiplier ``1/mu``; with the sum (noise multiplier
        sigma) on the same batch the step is dominated by one Gaussian of noise multiplier
        ``(sigma^-2 + mu^2)^-1/2`` (GDP composition), which the accountant then subsamples.
        """
        given = np.asarray(self.every)  # a Python int, or an array after a jit round trip of the state
        if given.ndim or given.dtype.kind not in "iu":
            raise TypeError(f"every must be a scalar integer, got {self.every!r}.")
        every = check_int(int(given), "every", minimum=1)
        estimates = ceil_div(steps, every)
        mu = pure_dp_to_gdp(float(self.epsilon))
        joint = (noise_multiplier**-2 + mu**2) ** -0.5
        return ((estimates, joint), (steps - estimates, noise_multiplier))


def _checked_quantile_clip(
    checks: Checks,
    initial_norm: ArrayLike,
    quantile: ArrayLike,
    epsilon: ArrayLike,
    every: ArrayLike,
    beta: ArrayLike,
    max_queries: int,
) -> QuantileClip:
    """A :class:`QuantileClip` of the given leaves, each checked (eagerly if concrete, recorded if
    traced): the one check behind :func:`quantile_clip` and :meth:`QuantileClip.validate`."""
    checked_every: int | jax.Array
    if is_traced(every):
        checked_every = jnp.asarray(every)
        checks.record(checked_every >= 1, "every must be an integer >= 1.")
    else:
        checked_every = check_int(every, "every", minimum=1)
    return QuantileClip(
        _validate_initial_norm(checks, initial_norm),
        _validate_quantile(checks, quantile),
        checks.epsilon(epsilon),
        checked_every,
        checks.real(beta, "beta", minimum=1.0, open_minimum=True),
        max_queries,
    )


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["initial_norm", "quantile", "learning_rate", "count_noise_multiplier"],
    meta_fields=[],
)
@dataclasses.dataclass(frozen=True)
class GeometricClip:
    """Andrew et al. (2021) geometric adaptive clipping. Build it with :func:`geometric_clip`."""

    initial_norm: float | jax.Array
    quantile: float | jax.Array
    learning_rate: float | jax.Array
    count_noise_multiplier: float | jax.Array

    def validate(self, checks: Checks) -> GeometricClip:
        """This strategy with every leaf checked (eagerly if concrete, recorded if traced)."""
        return _checked_geometric_clip(
            checks, self.initial_norm, self.quantile, self.learning_rate, self.count_noise_multiplier
        )

    def next_norm(
        self,
        key: jax.Array,
        clip_norm: jax.Array,
        norms: jax.Array,
        mask: jax.Array,
        *,
        expected_batch_size: ArrayLike,
        step: jax.Array,
    ) -> jax.Array:
        """Andrew et al. (2021), Algorithm 1: ``C <- C exp(-eta (b - gamma))`` with
        ``b = (sum_j (1[norm_j <= C] - 1/2) + N(0, (z_b/2)^2)) / expected_batch_size + 1/2``.

        The centred count has add/remove sensitivity 1/2, so ``count_noise_multiplier`` ``z_b`` is its
        noise standard deviation over its sensitivity (TF Privacy's ``clipped_count_stddev`` is
        ``z_b / 2``; its default ``0.05 * expected_batch_size`` is ``z_b = 0.1 * expected_batch_size``).
        """
        del step
        dtype = clip_norm.dtype
        centred = jnp.sum(
            jnp.where(mask & (norms <= clip_norm), 0.5, jnp.where(mask, -0.5, 0.0)), dtype=dtype
        )
        std = jnp.asarray(self.count_noise_multiplier, dtype) / 2
        noisy = (centred + noise.gaussian(key, (), std, dtype)) / jnp.asarray(
            expected_batch_size, dtype
        ) + 0.5
        rate = jnp.asarray(self.learning_rate, dtype)
        return clip_norm * jnp.exp(-rate * (noisy - jnp.asarray(self.quantile, dtype)))

    def accounting_steps(self, noise_multiplier: float, steps: int) -> tuple[tuple[int, float], ...]:
        """``((count, sigma), ...)``: every step releases the sum (noise multiplier sigma) and the
        centred count (noise multiplier ``z_b``) of the same batch. The pair is one Gaussian
        mechanism on a vector whose coordinates, divided by their noise standard deviations, have
        sensitivities ``1/sigma`` and ``1/z_b`` attained together (an added example with norm above
        C_t moves both), so it is exactly the Gaussian of noise multiplier
        ``(sigma^-2 + z_b^-2)^-1/2`` (Andrew et al. 2021, §3.1)."""
        z_b = check_positive(float(self.count_noise_multiplier), "count_noise_multiplier")
        return ((steps, (noise_multiplier**-2 + z_b**-2) ** -0.5),)


def _checked_geometric_clip(
    checks: Checks,
    initial_norm: ArrayLike,
    quantile: ArrayLike,
    learning_rate: ArrayLike,
    count_noise_multiplier: ArrayLike,
) -> GeometricClip:
    """A :class:`GeometricClip` of the given leaves, each checked (eagerly if concrete, recorded if
    traced): the one check behind :func:`geometric_clip` and :meth:`GeometricClip.validate`."""
    return GeometricClip(
        _validate_initial_norm(checks, initial_norm),
        _validate_quantile(checks, quantile),
        checks.positive(learning_rate, "learning_rate"),
        checks.positive(count_noise_multiplier, "count_noise_multiplier"),
    )


@runtime_checkable
class ClipStrategy(Protocol):
    """A clip-norm strategy: what :func:`dpjax.optax.dp_aggregate` takes as ``clip``.

    One of :class:`FixedClip` (:func:`fixed_clip`, Abadi et al. 2016), :class:`QuantileClip`
    (:func:`quantile_clip`, Durfee 2023, Algorithm 4 on the log norms) or :class:`GeometricClip`
    (:func:`geometric_clip`, Andrew et al. 2021, Algorithm 1); ``dp_aggregate`` also takes a bare
    number, as ``fixed_clip(number)``. A protocol (the methods the three share), so it works in
    annotations and in ``isinstance``; the three strategies are the ones ``dp_aggregate`` accepts.
    """

    def validate(self, checks: Checks) -> ClipStrategy:
        """This strategy with every leaf checked (eagerly if concrete, recorded if traced)."""

    def next_norm(
        self,
        key: jax.Array,
        clip_norm: jax.Array,
        norms: jax.Array,
        mask: jax.Array,
        *,
        expected_batch_size: ArrayLike,
        step: jax.Array,
    ) -> jax.Array:
        """The clip norm of the next step, from this step's per-example ``norms`` (``mask``: the real
        examples)."""

    def accounting_steps(self, noise_multiplier: float, steps: int) -> tuple[tuple[int, float], ...]:
        """``((count, sigma), ...)``: what the steps release, as Gaussian noise multipliers (for the
        accountant)."""


def fixed_clip(norm: ArrayLike) -> FixedClip:
    """A fixed clip norm (Abadi et al. 2016), > 0 (may be traced)."""
    return FixedClip(_validate_initial_norm(Checks(), norm))


def quantile_clip(
    initial_norm: ArrayLike = 1.0,
    *,
    quantile: ArrayLike = _DEFAULT_QUANTILE,
    epsilon: ArrayLike = _DEFAULT_CLIP_EPSILON,
    every: ArrayLike = _DEFAULT_EVERY,
    beta: ArrayLike = 1.01,
    max_queries: int = _DEFAULT_MAX_QUERIES,
) -> QuantileClip:
    """The clip norm tracks a private ``quantile`` of the per-example norms (Durfee 2023).

    At steps ``t`` with ``t % every == 0`` the next clip norm is the fully unbounded quantile
    mechanism's estimate (Durfee 2023, Algorithm 4) of the ``quantile`` of the batch's per-example
    log norms, centred at norm 1 for the first estimate and at the current clip norm afterwards (see
    :meth:`QuantileClip.next_norm`). No bound on the norms is needed, and the first estimate does not
    depend on ``initial_norm``: no good start is needed.

    Guarantee: each estimate is ``epsilon``-DP under add/remove (two AboveThreshold calls with
    increasing candidates and the fixed thresholds ``quantile * expected_batch_size`` and ``(1 -
    quantile) * expected_batch_size``, each ``epsilon/2``-DP by Durfee 2023, Lemma B.2, with
    Exponential noise of scale ``2/epsilon`` on the threshold and on every query). The accountant
    composes it with the Gaussian sum of the same batch through its Gaussian-DP bound
    (:meth:`QuantileClip.accounting_steps`); zCDP is not used there because zCDP does not compose
    with Poisson subsampling through dp_accounting's subsampled-Gaussian bounds.

    Args:
      initial_norm: the clip norm of the first step, > 0 (may be traced); only that step uses it.
      quantile: target fraction of unclipped examples, in (0, 1) (may be traced).
      epsilon: pure DP of each estimate, > 0 (may be traced).
      every: estimate at steps 0, every, 2 every, ...; integer >= 1 (may be traced). The defaults
        (epsilon 0.1 every 10 steps) cost about what geometric clipping with TF Privacy's defaults
        costs per step; with ``quantile`` 0.75 DP-SGD came within 0.2 point of the best fixed clip
        of a sweep on Adult and 0.7 point on MNIST-5k (``benchmarks/results/optax_headline.md``).
        The estimates are noisy in rank: a call's count one query before its release exceeds its
        threshold by ``a`` examples with probability at most ``exp(-a epsilon / 2)`` (the threshold
        noise must exceed ``a``), e.g. 5.8% for 57 of 256 examples at the defaults (rank 0.97 for
        a 0.75 target); where the norms are spread out such an estimate moves the clip by a large
        factor, until the next one.
      beta: grid ratio > 1 in log-norm units (may be traced): the resolution near the centre is
        ``beta - 1`` relative (1% at 1.01, the paper's recommendation for clipping).
      max_queries: cap on each call's halting query (static); the estimate is within a factor
        ``exp(beta**max_queries - 1)`` of the centre (1.5e8 at the defaults).

    Example:
      >>> strategy = quantile_clip()  # target 0.75, epsilon 0.1 per estimate, every 10 steps
    """
    max_queries = check_int(max_queries, "max_queries", minimum=1)
    return _checked_quantile_clip(Checks(), initial_norm, quantile, epsilon, every, beta, max_queries)


def geometric_clip(
    initial_norm: ArrayLike,
    *,
    quantile: ArrayLike = 0.5,
    learning_rate: ArrayLike = 0.2,
    count_noise_multiplier: ArrayLike,
) -> GeometricClip:
    """Andrew et al. (2021) geometric adaptive clipping towards the ``quantile`` of the norms.

    Each step releases the noised count of unclipped examples (centred, sensitivity 1/2, noise
    standard deviation ``count_noise_multiplier / 2``) and moves the clip norm geometrically
    (:meth:`GeometricClip.next_norm`). Guarantee: the count and the Gaussian sum of the same batch
    together are one Gaussian mechanism of noise multiplier ``(sigma^-2 + count_noise_multiplier^-2)
    ^-1/2`` (:meth:`GeometricClip.accounting_steps`): what is reported is what is run, the sum's
    noise is not raised to compensate (use :func:`dpjax.optax.noise_multiplier_for_epsilon` to pick
    sigma for a target).

    Args:
      initial_norm: the clip norm of the first step, > 0 (may be traced).
      quantile: target fraction of unclipped examples gamma, in (0, 1) (may be traced).
      learning_rate: eta, > 0 (may be traced); TF Privacy's default is 0.2.
      count_noise_multiplier: z_b, > 0 (may be traced); TF Privacy's default corresponds to
        ``0.1 * expected_batch_size``.

    Example:
      >>> strategy = geometric_clip(0.1, count_noise_multiplier=25.6)
    """
    return _checked_geometric_clip(Checks(), initial_norm, quantile, learning_rate, count_noise_multiplier)


_STRATEGIES = (FixedClip, QuantileClip, GeometricClip)  # what dp_aggregate accepts as a strategy


def as_strategy(clip: ClipStrategy | ArrayLike) -> ClipStrategy:
    """``clip`` if it is one of the three strategies, else ``fixed_clip(clip)``.

    Another object with :class:`ClipStrategy`'s methods is refused (``TypeError``): the accounting
    and the clip state of :func:`dpjax.optax.dp_aggregate` are proved for the three only.
    """
    if isinstance(clip, _STRATEGIES):
        return clip
    if isinstance(clip, ClipStrategy):
        raise TypeError(
            f"clip must be fixed_clip(...), quantile_clip(...), geometric_clip(...) or a number, got a "
            f"user-written {type(clip).__name__}: dp_aggregate's accounting covers these three only."
        )
    return fixed_clip(clip)


__all__ = [
    "ClipStrategy",
    "FixedClip",
    "GeometricClip",
    "QuantileClip",
    "fixed_clip",
    "geometric_clip",
    "quantile_clip",
]
