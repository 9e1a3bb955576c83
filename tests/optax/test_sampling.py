"""dpjax._src.optax.sampling: the fixed-shape Poisson sample's law, the truncation bound and the padded size,
and the accountant's charge for truncation (training_epsilon, noise_multiplier_for_epsilon)."""

import math

import jax
import numpy as np
import pytest
from scipy import stats

from dpjax import optax as dpo

ADULT = 32561
RATE = 256 / ADULT


def test_poisson_sample_selects_each_index_independently_with_the_rate():
    """20,000 samples of range(12) at rate 0.3: every index's frequency and the sample size's mean and
    variance match Bernoulli(0.3) / Binomial(12, 0.3) (z-scores below 4.5, a correct sampler fails
    with probability < 1e-4 over the 14 checks); the selected indices are increasing and distinct."""
    n, rate, size, runs = 12, 0.3, 12, 20_000
    idx, mask, truncated = jax.jit(jax.vmap(lambda k: dpo.poisson_sample(k, n, rate, size)))(
        jax.random.split(jax.random.key(0), runs)
    )
    idx, mask = np.asarray(idx), np.asarray(mask)
    assert not np.any(truncated)  # size = n slots always suffice
    tally = np.zeros((runs, n), int)
    np.add.at(tally, (np.nonzero(mask)[0], idx[mask]), 1)
    assert tally.max() == 1  # distinct
    chosen = tally == 1
    assert np.all(np.where(mask[:, 1:], np.diff(idx, axis=1) > 0, True))  # increasing
    z = (chosen.mean(axis=0) - rate) / np.sqrt(rate * (1 - rate) / runs)
    assert np.all(np.abs(z) < 4.5), z
    counts = mask.sum(axis=1)
    assert abs(counts.mean() - n * rate) / np.sqrt(n * rate * (1 - rate) / runs) < 4.5
    assert abs(counts.var() / (n * rate * (1 - rate)) - 1) < 4.5 * np.sqrt(2 / runs) * 1.2


def test_poisson_sample_flags_truncation():
    _, mask, truncated = dpo.poisson_sample(jax.random.key(1), 1000, 0.5, 10)
    assert bool(truncated) and bool(np.all(mask))


def test_truncation_probability_bounds_the_exact_tail_of_both_neighbours():
    steps = 500
    for size in (300, 330, 380):
        eta = dpo.truncation_probability(ADULT, sampling_rate=RATE, steps=steps, padded_size=size)
        exact = steps * stats.binom.sf(size, ADULT + 1, RATE)  # the add neighbour's tail (the larger)
        assert min(1.0, exact) <= eta <= 1.0
    assert dpo.truncation_probability(10, sampling_rate=0.5, steps=3, padded_size=11) == 0.0


def test_padded_size_is_the_smallest_within_its_share_of_delta():
    steps, epsilon, delta = 636, 3.0, 1e-5
    size = dpo.padded_batch_size(ADULT, sampling_rate=RATE, steps=steps, epsilon=epsilon, delta=delta)
    charge = lambda s: dpo.truncation_delta(  # noqa: E731
        ADULT, sampling_rate=RATE, steps=steps, padded_size=s, epsilon=epsilon
    )
    assert charge(size) <= 0.01 * delta < charge(size - 1)
    assert size < 256 + 10 * math.sqrt(256)  # not wastefully large
    # epsilon 1000: eta ~ e^-1000 is not a float, the padded size is still finite and below n
    huge = dpo.padded_batch_size(ADULT, sampling_rate=RATE, steps=steps, epsilon=1000.0, delta=delta)
    assert 256 < huge < ADULT


def test_accounting_charges_the_truncation_to_delta():
    """Calibrated with the padded size, the truncated run is (epsilon, delta)-DP: the Poisson run's
    delta at epsilon plus eta (1 + e^epsilon) is at most delta; an under-padded run is refused."""
    steps, epsilon, delta, grid = 20, 2.0, 1e-5, 1e-3
    size = dpo.padded_batch_size(ADULT, sampling_rate=RATE, steps=steps, epsilon=epsilon, delta=delta)
    run = dict(steps=steps, sampling_rate=RATE, clip=1.0)
    truncated = dict(run, padded_size=size, dataset_size=ADULT)
    sigma = dpo.noise_multiplier_for_epsilon(epsilon, delta, **truncated, pld_discretization=grid)
    spent = dpo.training_epsilon(delta, noise_multiplier=sigma, **truncated, pld_discretization=grid)
    untruncated = dpo.training_epsilon(delta, noise_multiplier=sigma, **run, pld_discretization=grid)
    assert untruncated < spent <= epsilon * (1 + 1e-6)
    with pytest.raises(ValueError, match="pad more"):
        dpo.noise_multiplier_for_epsilon(epsilon, delta, **dict(run, padded_size=260, dataset_size=ADULT))
    with pytest.raises(ValueError, match="together"):
        dpo.training_epsilon(delta, noise_multiplier=1.0, **dict(run, padded_size=size))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dpo.poisson_sample(jax.random.key(0), 0, 0.1, 4), "dataset_size"),
        (lambda: dpo.poisson_sample(jax.random.key(0), 10, 0.1, 0), "padded_size"),
        (lambda: dpo.truncation_probability(10, sampling_rate=0.0, steps=1, padded_size=2), "sampling_rate"),
        (lambda: dpo.padded_batch_size(10, sampling_rate=0.1, steps=1, epsilon=1.0, delta=0.0), "delta"),
        (lambda: dpo.padded_batch_size(10, sampling_rate=0.1, steps=-1, epsilon=1.0, delta=1e-5), "steps"),
    ],
)
def test_bad_input_raises(call, message):
    with pytest.raises(ValueError, match=message):
        call()
