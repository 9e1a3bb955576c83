"""The release of ``quantile_clip`` has the exact law of Durfee (2023), Algorithm 4, on the log norms.

This is what bounds the jumps of the tracked clip norm in DP-SGD (e.g. ``dpjax train`` on Adult: 2.6 ->
9.8 at the last estimate): each estimate is two AboveThreshold calls with Exponential noise of scale
``2/epsilon`` examples (20 at the default epsilon 0.1) on a threshold of ``q * expected_batch_size``
examples, so its *rank* error is tens of examples on a batch of 256, and where the norms are spread out
(the upper tail of the per-example gradient norms) such a rank error moves the clip by a large factor.
The law bounds it: a call halts at k > 0 only if ``c_{k-1} + nu_{k-1} < T + nu``, so its count one query
before the release exceeds the threshold by ``a`` examples with probability at most ``P(nu >= a) =
exp(-a epsilon / 2)`` (5.8% at a = 57, the 0.97 rank of 256 examples, at epsilon 0.1). The test checks
the whole released distribution, not a moment: any bias in the counts (padding, non-finite norms, the
centring at the current clip norm, the thresholds, the choice between the two calls) would show.

Oracle: with ``y_j = log(norm_j / C_t)`` over the real finite examples, the upward call halts at the
first query i with ``#{y_j < beta**i - 1} + nu_i >= q B + nu`` and the downward one with
``#{y_j > 1 - beta**i} + nu_i >= (1 - q) B + nu`` (``nu``, ``nu_i`` Exponential of scale
``2/epsilon``), an index past the cap being the cap; the release is ``C_t exp(beta**k0 - 1)`` if
``k0 > 0``, else ``C_t exp(1 - beta**k1)``. The two calls use independent keys, so the law of the
release is ``L0(k0)`` for the upward values, ``L0(0) L1(k1)`` for the others (``tests/svt_laws.py``'s
quadrature for each call). Pearson chi-square against it, fixed seeds, fails a correct implementation
with probability 1e-4.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import chi_square_pvalue
from svt_laws import halting_law

from dpjax import optax as dpo

B, QUANTILE, EPSILON, BETA, CAP = 20, 0.75, 1.0, 1.25, 16
CENTRE, STEP = 2.0, 10  # a later estimate: centred at the current clip norm
# 18 real finite norms spread over a factor e^6 around the centre, a real non-finite one (counted
# nowhere), and padding slots whose norms must be ignored.
LOGS = np.linspace(-3.0, 3.0, 18)
NORMS = np.concatenate([CENTRE * np.exp(LOGS), [np.nan, 1e6, 1e-6, 5.0]]).astype(np.float32)
MASK = np.array([True] * 19 + [False] * 3)


def call_law(counts, threshold):
    """P(k) for k = 0..CAP of one call (``CAP``: no halt before it)."""
    law = halting_law("exponential", counts, threshold, EPSILON / 2, EPSILON / 2)
    return np.concatenate([law[:-1], [max(law[-1], 0.0)]])


def release_law():
    """Probabilities of the releases: upward k0 = 1..CAP, downward k1 = 1..CAP, then the centre."""
    edges = BETA ** np.arange(CAP) - 1
    up = call_law([np.sum(LOGS < e) for e in edges], QUANTILE * B)
    down = call_law([np.sum(LOGS > -e) for e in edges], (1 - QUANTILE) * B)
    return np.concatenate([up[1:], up[0] * down[1:], [up[0] * down[0]]])


def release_cells(released):
    """The cell of each release in :func:`release_law`'s order (-1 if it is none of them)."""
    y = np.log(np.asarray(released, np.float64) / CENTRE)
    k = np.rint(np.log1p(np.abs(y)) / np.log(BETA)).astype(int)
    on_grid = np.abs(np.abs(y) - np.expm1(k * np.log(BETA))) < 1e-3 * (1 + np.abs(y))
    cells = np.where(y > 0, k - 1, CAP - 1 + k)
    cells = np.where(y == 0, 2 * CAP, cells)
    return np.where(on_grid & (k <= CAP), cells, -1)


def next_norm(key):
    strategy = dpo.quantile_clip(quantile=QUANTILE, epsilon=EPSILON, beta=BETA, max_queries=CAP)
    return strategy.next_norm(
        key, jnp.float32(CENTRE), jnp.asarray(NORMS), jnp.asarray(MASK), expected_batch_size=B,
        step=jnp.int32(STEP),
    )


@pytest.mark.parametrize(
    "batched, trials",
    [(True, 20_000), (False, 2_000)],  # vmap over keys (the benchmarks) / one release (dpjax train)
)
def test_quantile_clip_release_has_the_exact_law(batched, trials):
    keys = jax.random.split(jax.random.key(43), trials)
    run = jax.vmap(next_norm) if batched else lambda keys: jax.lax.map(next_norm, keys)
    cells = release_cells(jax.jit(run)(keys))
    assert np.all(cells >= 0), "a release off the grid"
    law = release_law()
    observed = np.bincount(cells, minlength=law.size)
    assert chi_square_pvalue(observed, law) > 1e-4

