"""Exact inputs or a clear refusal (issue 45, item 1): every exact mechanism x every integer dtype x
``jax_enable_x64`` on and off x extreme values.

Before: int64 counts without x64 were truncated mod 2^32 (``2**33 + 7`` released as about 7), uint32
``2**32 - 5`` and uint64 ``2**64 - 2`` wrapped to about -5 and -2, int32 ``-2**31`` passed the range
check (``jnp.abs`` overflows), and ``discrete_above_threshold`` compared a threshold ``2**40`` as 0.

The law checked here: data of any integer dtype is either taken **exactly** (every value unchanged, in
int32, or in int64 under x64 for 64-bit and uint32 data) or refused with a ``ValueError`` before any
randomness; it is taken exactly when every value lies in ``[-B, B]`` of the dtype computed in. With
noise of scale 1 (sigma 2), ``|noise| <= 60`` except with probability below ``e^-60``, and a release
saturates at ``+-B`` (moving toward the value, never wrapping), so every accepted release is within 60
of its value, an argmax within 120 of the largest count, and AboveThreshold's answer is consistent
with every query more than 120 away from the threshold. Hypothesis draws a bounded number of
examples (``derandomize``); the shapes are fixed so that each sampler compiles once per dtype.
"""

from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpjax._src.additive import (
    discrete_gaussian_guarantee,
    discrete_gaussian_mechanism,
    discrete_gaussian_sigma,
    discrete_laplace_guarantee,
    discrete_laplace_mechanism,
)
from dpjax._src.selection import (
    discrete_peeling_top_k,
    discrete_peeling_top_k_guarantee,
    discrete_report_noisy_max,
    discrete_report_noisy_max_guarantee,
)
from dpjax.svt import discrete_above_threshold, discrete_above_threshold_guarantee
from dpjax.validation import check_rational

KEY = jax.random.key(45)
DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
B32, B64 = (2**31 - 2) // 2, (2**63 - 2) // 2
NOISE = 60  # |noise| of scale 1 or sigma 2 exceeds this with probability below e^-60


def _extremes(dtype) -> list[int]:
    info = np.iinfo(dtype)
    points = {int(info.min), int(info.min) + 1, int(info.max) - 1, int(info.max), -1, 0, 1, 7}
    points |= {sign * b + d for b in (B32, B64) for sign in (1, -1) for d in (-1, 0, 1)}
    points |= {2**33 + 7, 2**32 - 5, -(2**31), 2**40}
    return sorted(p for p in points if info.min <= p <= info.max)


def _bound(dtype, x64: bool) -> int:
    dtype = np.dtype(dtype)
    return B64 if x64 and (dtype.itemsize == 8 or dtype == np.uint32) else B32


def _additive(mechanism):
    def run(values, dtype, x64, threshold):
        release = mechanism(np.array(values, dtype))
        assert release.dtype == (np.int64 if _bound(dtype, x64) == B64 else np.int32)
        diff = [int(r) - v for r, v in zip(np.asarray(release).tolist(), values, strict=True)]
        assert max(abs(d) for d in diff) <= NOISE, (values, diff)

    return run


def _selection(mechanism):
    def run(values, dtype, x64, threshold):
        i = int(mechanism(np.array(values, dtype)))
        assert values[i] >= max(values) - 2 * NOISE, (values, i)

    return run


def _svt(values, dtype, x64, threshold):
    i = int(discrete_above_threshold(KEY, np.array(values, dtype), threshold, 1, 1))
    surely_above = [v >= threshold + 2 * NOISE for v in values]
    assert not any(surely_above[: i if i >= 0 else len(values)]), (values, threshold, i)
    assert i == -1 or values[i] > threshold - 2 * NOISE, (values, threshold, i)


MECHANISMS = {
    "discrete_laplace_mechanism": _additive(lambda v: discrete_laplace_mechanism(KEY, v, 1)),
    "discrete_gaussian_mechanism": _additive(lambda v: discrete_gaussian_mechanism(KEY, v, 2)),
    "discrete_report_noisy_max": _selection(lambda v: discrete_report_noisy_max(KEY, v, 1, monotonic=True)),
    "discrete_peeling_top_k": _selection(lambda v: discrete_peeling_top_k(KEY, v, 1, 1, monotonic=True)[0]),
    "discrete_above_threshold": _svt,
}


@st.composite
def _inputs(draw):
    dtype = draw(st.sampled_from(DTYPES))
    values = draw(st.lists(st.sampled_from(_extremes(dtype)), min_size=3, max_size=3))
    threshold = draw(st.sampled_from([*_extremes("int64"), 2**63 + 5]))
    return dtype, values, threshold


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", sorted(MECHANISMS))
@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=_inputs())
def test_integer_data_is_taken_exactly_or_refused(name, x64, drawn):
    dtype, values, threshold = drawn
    bound = _bound(dtype, x64)
    accepted = all(-bound <= v <= bound for v in values)
    if name == "discrete_above_threshold":
        accepted &= abs(threshold) <= (B64 if x64 else B32)
    with jax.enable_x64(x64):
        if accepted:
            MECHANISMS[name](values, dtype, x64, threshold)
        else:
            with pytest.raises(ValueError, match=r"must lie in \[-\d+, \d+\]"):
                MECHANISMS[name](values, dtype, x64, threshold)


def test_the_reported_failures():
    """The five releases of issue 45, each refused (x32) or exact (x64)."""
    cases = [
        (np.array([2**33 + 7], np.int64), "jax_enable_x64"),
        (np.array([2**32 - 5], np.uint32), "jax_enable_x64"),
        (np.array([2**64 - 2], np.uint64), r"got values in \[18446744073709551614"),
        (np.array([-(2**31)], np.int32), r"got values in \[-2147483648"),
        (jax.numpy.array([-(2**31)], jax.numpy.int32), r"got values in \[-2147483648"),
    ]
    for value, message in cases:
        with pytest.raises(ValueError, match=message):
            discrete_laplace_mechanism(KEY, value, 1)
    with jax.enable_x64(True):
        for value in (np.array([2**33 + 7], np.int64), np.array([2**32 - 5], np.uint32)):
            assert abs(int(discrete_laplace_mechanism(KEY, value, 1)[0]) - int(value[0])) <= NOISE
        queries = jax.numpy.array([1, 5], jax.numpy.int32)
        assert int(discrete_above_threshold(KEY, queries, 2**40, 1, 1)) == -1  # not compared as 0
        assert int(discrete_above_threshold(KEY, queries, -(2**40), 1, 1)) == 0
    with pytest.raises(ValueError, match=r"threshold must lie in .*jax_enable_x64"):
        discrete_above_threshold(KEY, jax.numpy.array([1, 5]), 2**40, 1, 1)


def test_traced_data_is_clamped_in_its_own_dtype_never_wrapped():
    release = jax.jit(lambda v: discrete_laplace_mechanism(KEY, v, 1))
    assert int(release(jax.numpy.array([2**32 - 5], jax.numpy.uint32))[0]) >= B32 - NOISE
    assert int(release(jax.numpy.array([-(2**31)], jax.numpy.int32))[0]) <= -B32 + NOISE


_NUMBERS = {
    "epsilon": lambda p: discrete_laplace_mechanism(KEY, np.array([3]), p),
    "sensitivity": lambda p: discrete_laplace_mechanism(KEY, np.array([3]), 1, sensitivity=p),
    "sigma": lambda p: discrete_gaussian_mechanism(KEY, np.array([3]), p),
    "epsilon1": lambda p: discrete_above_threshold(KEY, np.array([3]), 0, p, 1),
    "laplace guarantee": lambda p: discrete_laplace_guarantee(p),
    "gaussian guarantee": lambda p: discrete_gaussian_guarantee(p),
    "selection guarantee": lambda p: discrete_report_noisy_max_guarantee(1, sensitivity=p),
}


@pytest.mark.parametrize("name", sorted(_NUMBERS))
def test_numpy_integers_are_taken_and_booleans_of_every_kind_refused(name):
    _NUMBERS[name](np.int64(3))
    _NUMBERS[name](np.array(3, np.uint16))
    _NUMBERS[name]((np.int64(3), np.int32(2)))
    for boolean in (True, np.bool_(True), np.array(True), jax.numpy.array(True), (True, 1)):
        with pytest.raises(TypeError, match=r"boolean|as a pair must be"):
            _NUMBERS[name](boolean)


@pytest.mark.parametrize("monotonic", ["False", 0, 1, np.bool_(False), None])
def test_monotonic_must_be_a_bool(monotonic):
    calls = (
        lambda: discrete_report_noisy_max(KEY, np.array([3, 4]), 1, monotonic=monotonic),
        lambda: discrete_peeling_top_k(KEY, np.array([3, 4]), 1, 1, monotonic=monotonic),
        lambda: discrete_report_noisy_max_guarantee(1, monotonic=monotonic),
        lambda: discrete_peeling_top_k_guarantee(1, monotonic=monotonic),
        lambda: discrete_above_threshold_guarantee(1, 1, monotonic=monotonic),
    )
    for call in calls:
        with pytest.raises(TypeError, match="monotonic must be True or False"):
            call()


def test_a_float_sigma_is_rounded_up_and_the_guarantee_is_the_realized_one():
    """sigma = 3.7 (exactly 3.70000000000000017...: too many digits) is drawn with the smallest
    rational at least as large that the sampler takes, as the scale of the Laplace's epsilon = 0.1."""
    realized = discrete_gaussian_sigma(3.7)
    assert Fraction(3.7) < realized < Fraction(3.7) * (1 + 1e-4)
    assert discrete_gaussian_guarantee(3.7).rho == pytest.approx(float(1 / (2 * realized**2)), rel=1e-15)
    assert discrete_gaussian_guarantee(3.7).rho < 1 / (2 * 3.7**2)  # more noise than asked
    assert np.abs(np.asarray(discrete_gaussian_mechanism(KEY, np.zeros(3, np.int32), 3.7))).max() <= NOISE
    with jax.enable_x64(False):
        assert discrete_gaussian_sigma(3.7) == realized  # the guarantee does not depend on the mode
    assert discrete_gaussian_sigma(Fraction(37, 10)) == Fraction(37, 10)  # fits: kept exactly


def test_a_traced_boolean_parameter_is_refused_while_tracing():
    from dpjax._src.additive import laplace_mechanism

    with pytest.raises(TypeError, match="epsilon must be a real number, got a boolean"):
        jax.jit(lambda e: laplace_mechanism(KEY, 1.0, e))(True)
    with pytest.raises(TypeError, match="epsilon must be a real number, got a boolean"):
        laplace_mechanism(KEY, 1.0, np.array(True))


@pytest.mark.parametrize("value", [3**70, -(3**70), 2**64 + 1])
def test_python_integers_beyond_int64_are_taken_exactly(value):
    """A Python int of any size is an exact rational (NumPy holds it only as an object array)."""
    if value <= 0:
        with pytest.raises(ValueError, match="> 0"):
            check_rational(value, "epsilon")
    else:
        assert check_rational(value, "epsilon") == Fraction(value)
