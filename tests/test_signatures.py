"""`dpjax._src.signatures.arguments_of`: a derived release shows and accepts its full function's arguments."""

import inspect

import jax
import jax.numpy as jnp
import pytest

from dpjax import aggregates
from dpjax._src.signatures import arguments_of
from dpjax.quantiles import unbounded, unbounded_result


@pytest.mark.parametrize(
    "derived, full",
    [
        (aggregates.sum, aggregates.clipped_sum),
        (aggregates.mean, aggregates.clipped_sum),
        (unbounded, unbounded_result),
    ],
)
def test_derived_release_shows_the_full_parameters(derived, full):
    assert inspect.signature(derived).parameters == inspect.signature(full).parameters


def test_derived_release_forwards_every_argument_and_keeps_its_return_annotation():
    def full(key, x, *, scale=1.0):
        return x * scale

    @arguments_of(full)
    def doubled(key, x, **options) -> float:
        return 2 * full(key, x, **options)

    assert doubled(None, 3.0, scale=5.0) == 30.0
    assert inspect.signature(doubled).return_annotation in (float, "float")
    with pytest.raises(TypeError, match="unexpected keyword"):
        doubled(None, 3.0, scael=5.0)


def test_sum_by_keyword_equals_the_clipped_sum_value():
    x = jnp.arange(100.0)
    key = jax.random.key(3)
    got = aggregates.sum(key, x, 2.0, q=0.9, beta=1.01, lower=-1.0)
    want = aggregates.clipped_sum(key, x, 2.0, q=0.9, beta=1.01, lower=-1.0).value
    assert got == want
