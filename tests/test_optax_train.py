"""dpjax.optax.train: the Poisson sampler's law, the padded size's tail bound, the shipped dataset and
the ``dpjax train`` command."""

import jax
import numpy as np
import pytest
from scipy import stats

from dpjax.cli import main
from dpjax.optax import data, train


def test_poisson_batch_selects_each_index_independently_with_the_rate():
    """20,000 samples of range(12) at rate 0.3: every index's frequency and the sample size's mean and
    variance match Bernoulli(0.3) / Binomial(12, 0.3) (z-scores below 4.5, a correct sampler fails
    with probability < 1e-4 over the 14 checks); the selected indices are increasing and distinct."""
    n, rate, size, runs = 12, 0.3, 12, 20_000
    idx, mask, truncated = jax.jit(jax.vmap(lambda k: train.poisson_batch(k, n, rate, size)))(
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


def test_poisson_batch_flags_truncation():
    _, mask, truncated = train.poisson_batch(jax.random.key(1), 1000, 0.5, 10)
    assert bool(truncated) and bool(np.all(mask))


def test_padded_size_bounds_the_truncation_probability():
    n, rate, steps, eta = 32561, 256 / 32561, 500, 1e-9
    size = train.padded_size(n, rate, steps, eta)
    assert steps * stats.binom.sf(size, n, rate) <= eta  # exact tail below the Chernoff bound
    assert size < n * rate + 10 * np.sqrt(n * rate)  # and not wastefully large


def test_shipped_adult_has_every_row():
    adult = data.load_adult()
    assert adult.x_train.shape == (32561, 107) and adult.x_test.shape == (16281, 107)
    assert adult.y_train.mean() == np.float64(7841 / 32561)  # 7,841 incomes >50K in adult.data
    np.testing.assert_allclose(adult.x_train[:, -5:].mean(axis=0), 0, atol=1e-5)  # standardized on train


@pytest.mark.slow
def test_train_command_runs(capsys):
    assert main(["train", "--clip", "geometric", "--epochs", "0.05", "--hidden", "8"]) == 0
    out = capsys.readouterr().out
    assert "test accuracy" in out and "epsilon spent" in out
