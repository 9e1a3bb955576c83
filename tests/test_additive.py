"""Laplace and Gaussian mechanisms: laws, guarantees, exact privacy loss, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src.additive import (
    gaussian_guarantee,
    gaussian_mechanism,
    gaussian_sigma_for_zcdp,
    laplace_guarantee,
    laplace_mechanism,
)
from dpjax.accounting import ZCDP, PureDP


def test_laplace_mechanism_law_and_guarantee():
    keys = jax.random.split(jax.random.key(0), 100_000)
    out = np.asarray(jax.jit(jax.vmap(lambda k: laplace_mechanism(k, 3.0, 0.5, sensitivity=2.0)))(keys))
    assert stats.kstest(out, stats.laplace(loc=3.0, scale=4.0).cdf).pvalue > 1e-5
    assert laplace_guarantee(0.5, sensitivity=2.0) == PureDP(0.5)


def test_gaussian_mechanism_law_and_guarantee():
    sigma = gaussian_sigma_for_zcdp(0.125, sensitivity=1.0)
    assert sigma == pytest.approx(2.0)
    keys = jax.random.split(jax.random.key(1), 100_000)
    out = np.asarray(jax.vmap(lambda k: gaussian_mechanism(k, -1.0, sigma))(keys))
    assert stats.kstest(out, stats.norm(loc=-1.0, scale=2.0).cdf).pvalue > 1e-5
    assert gaussian_guarantee(2.0) == ZCDP(0.125)


def test_vector_values_keep_shape_and_dtype(float_dtype):
    value = jnp.arange(6, dtype=float_dtype).reshape(2, 3)
    out = laplace_mechanism(jax.random.key(0), value, 1.0)
    assert out.shape == (2, 3) and out.dtype == float_dtype


def test_privacy_loss_of_laplace_is_exactly_epsilon():
    """Density ratio on neighboring values 0 and sensitivity, over the whole output range."""
    eps, sens = 0.7, 2.0
    z = np.linspace(-30, 30, 2001)
    scale = sens / eps
    ratio = stats.laplace(0, scale).logpdf(z) - stats.laplace(sens, scale).logpdf(z)
    assert np.max(np.abs(ratio)) == pytest.approx(eps)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda k: laplace_mechanism(k, 1.0, 0.0), "epsilon"),
        (lambda k: laplace_mechanism(k, 1.0, 1.0, sensitivity=-1.0), "sensitivity"),
        (lambda k: laplace_mechanism(k, jnp.nan, 1.0), "value contains NaN"),
        (lambda k: gaussian_mechanism(k, 1.0, 0.0), "sigma"),
        (lambda k: gaussian_guarantee(1.0, sensitivity=0.0), "sensitivity"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call(jax.random.key(0))
