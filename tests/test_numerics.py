"""dpjax._src.numerics.bisect: the switch point of a monotone predicate, to the stated tolerance, on the
host and in the graph; and the Laplace-difference quantile built on it."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float_tolerance import assert_close_ulp

from dpjax._src.numerics import bisect, ceil_div, resolution_steps
from dpjax._src.postprocess.laplace_difference import laplace_difference_quantile, laplace_difference_tail


def test_host_bisection_keeps_its_sides_and_reaches_the_stated_width():
    targets = np.array([0.5, 2.0, 7.0])
    lo, hi = bisect(lambda x: x * x <= targets, 0.0, 3.0, resolution_steps(np.float64))
    assert np.all(lo * lo <= targets) and np.all(hi * hi > targets)
    assert np.all(hi - lo <= 3.0 * 2.0**-54 + np.spacing(hi))
    np.testing.assert_allclose(lo, np.sqrt(targets), rtol=2e-16)


def test_host_bisection_to_adjacent_floats_is_harmless_past_resolution():
    lo, hi = bisect(lambda x: math.exp(float(x)) <= 10.0, 0.0, 5.0, 200)
    assert float(hi) == np.nextafter(float(lo), np.inf)
    assert math.exp(float(lo)) <= 10.0 < math.exp(float(hi))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_graph_bisection_in_each_dtype(dtype, request):
    if dtype == jnp.float64:
        request.getfixturevalue("x64")
    lo, hi = bisect(lambda x: x * x <= 2, jnp.zeros((), dtype), 2.0, resolution_steps(dtype))
    assert lo.dtype == dtype and hi.dtype == dtype
    assert float(lo) ** 2 <= 2 < float(hi) ** 2
    assert float(hi - lo) <= 2 * float(jnp.finfo(dtype).eps)


def test_graph_bisection_under_vmap_equals_separate_calls():
    def root(c):
        return bisect(lambda x: x * x <= c, jnp.float32(0), jnp.float32(4), 25)[0]

    cs = jnp.asarray([0.5, 2.0, 9.0], jnp.float32)
    swept = jax.jit(jax.vmap(root))(cs)
    for got, c in zip(np.asarray(swept), [0.5, 2.0, 9.0], strict=True):
        assert_close_ulp(got, root(jnp.float32(c)))


def test_laplace_difference_quantile_inverts_the_tail(x64):
    for a, b in ((0.3, 0.1), (1.0, 1.0), (0.05, 0.5)):
        for p in (0.4, 0.05, 1e-6, 1e-300):
            t = laplace_difference_quantile(jnp.float64(p), jnp.float64(a), jnp.float64(b), 54)
            assert float(laplace_difference_tail(t, a, b)) == pytest.approx(p, rel=1e-10)
    # equal rates: the closed form (2 + a t)/4 e^{-a t}
    assert float(laplace_difference_tail(3.0, 0.5, 0.5)) == pytest.approx((2 + 1.5) / 4 * math.exp(-1.5))


def test_ceil_div_is_exact_for_integers_of_any_size():
    for a, b in [(0, 3), (1, 3), (3, 3), (4, 3), (7, 2), (2**64 + 1, 2**32)]:
        assert ceil_div(a, b) == (a + b - 1) // b
