"""Shared validation: each bad input gets a clear error naming the argument."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import validation as v


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, -math.inf])
def test_epsilon_must_be_positive_and_finite(bad):
    with pytest.raises(ValueError, match="epsilon"):
        v.check_epsilon(bad)


def test_epsilon_accepts_numbers_and_refuses_other_kinds():
    assert v.check_epsilon(1) == 1.0
    assert v.check_epsilon(np.float32(0.5)) == 0.5
    assert v.check_epsilon(0.0, allow_zero=True) == 0.0
    with pytest.raises(TypeError, match="epsilon"):
        v.check_epsilon("1.0")
    with pytest.raises(TypeError, match="epsilon"):
        v.check_epsilon(True)
    with pytest.raises(ValueError, match="scalar"):
        v.check_epsilon(np.ones(2))


def test_epsilon_refused_as_tracer():
    with pytest.raises(v.TracedParameterError, match="traced"):
        jax.jit(lambda e: v.check_epsilon(e))(1.0)


def test_every_refusal_of_a_traced_value_raises_one_exception_class():
    import dpjax
    from dpjax._src.accounting.elementwise import elementwise
    from dpjax._src.budgeting.filters import FilterState, approx_gp_filter_step
    from dpjax._src.budgeting.pie import pie_guarantee
    from dpjax._src.exact.noise import exact_rational

    assert dpjax.TracedParameterError is v.TracedParameterError
    assert issubclass(v.TracedParameterError, TypeError)  # existing ``except TypeError`` still catch it
    companion = elementwise("epsilon")(lambda epsilon: epsilon)
    state = FilterState(jnp.ones(2), jnp.zeros(2), jnp.zeros(2, bool))
    refusals = {
        "check_epsilon": lambda e: v.check_epsilon(e),
        "check_probability": lambda e: v.check_probability(e, "q"),
        "check_int": lambda e: v.check_int(e.astype(int), "k"),
        "exact_rational": lambda e: exact_rational(e, "scale"),
        "elementwise companion": companion,
        "approx_gp_filter_step": lambda e: approx_gp_filter_step(state._replace(budget=e), 0.1, 1e-6, 1.0),
        "pie_guarantee": pie_guarantee,
    }
    for name, refusal in refusals.items():
        with pytest.raises(v.TracedParameterError, match=r"traced|concrete"):
            jax.jit(refusal)(jnp.ones(2) if name in ("approx_gp_filter_step", "pie_guarantee") else 1.0)


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan])
def test_probability_bounds(bad):
    with pytest.raises(ValueError, match=r"q must be in \[0, 1\]"):
        v.check_probability(bad, "q")


def test_probability_open_ends():
    assert v.check_probability(1.0, "q", open_low=True) == 1.0
    with pytest.raises(ValueError, match=r"q must be in \(0, 1\]"):
        v.check_probability(0.0, "q", open_low=True)
    with pytest.raises(ValueError, match=r"delta must be in \(0, 1\)"):
        v.check_probability(1.0, "delta", open_low=True, open_high=True)


def test_int_checks():
    assert v.check_int(np.int64(3), "k", minimum=1, maximum=5) == 3
    with pytest.raises(ValueError, match="k must be >= 1"):
        v.check_int(0, "k", minimum=1)
    with pytest.raises(ValueError, match="k must be <= 4"):
        v.check_int(5, "k", maximum=4)
    with pytest.raises(TypeError, match="k must be an integer"):
        v.check_int(2.0, "k")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1.0, np.nan], "x contains NaN"),
        ([1.0, np.inf], "x contains infinite"),
        ([], "x must not be empty"),
        ([[1.0, 2.0]], "x must have rank 1"),
        (["a", "b"], "x must"),
        ([1 + 2j], "real numeric dtype"),
    ],
)
def test_array_checks(data, message):
    with pytest.raises((ValueError, TypeError), match=message):
        v.check_array(np.asarray(data) if data != ["a", "b"] else data, "x", ndim=1)


def test_array_kind_and_sign_checks():
    with pytest.raises(ValueError, match="counts must have an integer dtype"):
        v.check_array(np.ones(3), "counts", kind="int")
    with pytest.raises(ValueError, match="x must have a floating dtype"):
        v.check_array(np.ones(3, int), "x", kind="float")
    with pytest.raises(ValueError, match="counts must be non-negative"):
        v.check_array([1, -1], "counts", nonnegative=True)
    assert v.check_array([], "x", allow_empty=True).size == 0
    with pytest.raises(TypeError, match="x must be an array"):
        v.check_array(None, "x")


def test_array_value_checks_are_skipped_under_jit_but_shapes_are_not():
    @jax.jit
    def f(x):
        return v.check_array(x, "x", ndim=1).sum()

    assert np.isnan(float(f(jnp.array([1.0, jnp.nan]))))  # values unknown while tracing
    with pytest.raises(ValueError, match="rank 1"):
        f(jnp.ones((2, 2)))


def test_choice_and_same_shape():
    with pytest.raises(ValueError, match="noise must be one of"):
        v.check_choice("cauchy", "noise", {"laplace", "gumbel"})
    with pytest.raises(ValueError, match="a and b must have the same shape"):
        v.check_same_shape(np.ones(2), "a", np.ones(3), "b")


def test_concrete_arrays_closed_over_by_jit_are_still_checked():
    data = jnp.array([1.0, jnp.nan])
    with pytest.raises(ValueError, match="data contains NaN"):
        jax.jit(lambda: v.check_array(data, "data").sum())()
    counts = jnp.array([1, -2])
    with pytest.raises(ValueError, match="counts must be non-negative"):
        jax.jit(lambda: v.check_array(counts, "counts", nonnegative=True).sum())()


def test_traced_checks_raise_under_checkify_only_when_asked():
    import jax.numpy as jnp
    from jax.experimental import checkify

    from dpjax._src.additive import laplace_mechanism
    from dpjax._src.validation import checkify_checks

    def release(epsilon, value):
        return laplace_mechanism(jax.random.key(0), value, epsilon)

    with checkify_checks():
        err, out = jax.jit(checkify.checkify(release))(jnp.float32(-1.0), jnp.float32(1.0))
        assert "epsilon must be finite and > 0" in err.get() and jnp.isnan(out)
        err, _ = jax.jit(checkify.checkify(release))(jnp.float32(1.0), jnp.float32(jnp.nan))
        assert "value must be finite" in err.get()
        err, out = jax.jit(checkify.checkify(release))(jnp.float32(1.0), jnp.float32(1.0))
        assert err.get() is None and jnp.isfinite(out)
    err, out = checkify.checkify(jax.jit(release))(jnp.float32(-1.0), jnp.float32(1.0))
    assert err.get() is None and jnp.isnan(out)  # off by default: the output carries the marker


def test_data_contract_states_whether_infinities_are_allowed():
    x = jnp.asarray([1.0, jnp.inf])
    assert v.Checks().data(x, allow_infinite=True).shape == (2,)
    with pytest.raises(ValueError, match="infinite"):
        v.Checks().data(x, allow_infinite=False)
    with pytest.raises(ValueError, match="NaN"):
        v.Checks().data(jnp.asarray([jnp.nan]), allow_infinite=True)
    with pytest.raises(ValueError, match="empty"):
        v.Checks().data(jnp.zeros(0), allow_infinite=True)
    assert v.Checks().data(jnp.zeros(0), allow_infinite=False, allow_empty=True).shape == (0,)

    def traced(values):
        checks = v.Checks()
        return checks.guard(checks.data(values, allow_infinite=False).sum())

    assert jnp.isnan(jax.jit(traced)(x)) and float(jax.jit(traced)(jnp.ones(2))) == 2.0


def test_integer_check_concrete_and_traced():
    assert float(v.Checks().integer(3, "n", jnp.float32)) == 3.0
    with pytest.raises(ValueError, match="n must be >= 1"):
        v.Checks().integer(0, "n", jnp.float32)

    def traced(value):
        checks = v.Checks()
        return checks.guard(checks.integer(value, "n", jnp.float32))

    assert float(jax.jit(traced)(4.0)) == 4.0
    assert jnp.isnan(jax.jit(traced)(2.5)) and jnp.isnan(jax.jit(traced)(0.0))
