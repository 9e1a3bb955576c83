"""Registry-driven tests: every public mechanism takes traced parameters and never answers
confidently on invalid traced input (see :class:`dpjax.validation.Checks`)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float_tolerance import assert_close_ulp
from jax import lax
from mechanism_registry import all_mechanisms, jitted_call, leaves

MECHANISMS = all_mechanisms()
KEY = jax.random.key(7)
INVALID = (-1.0, 0.0, math.nan, math.inf)


def _ids(cases):
    return [f"{m.name}-{p}" for m, p in cases]


NAN_DATA_CASES = [(m, d) for m in MECHANISMS for d in m.float_data()]
GUARANTEE_CASES = [m for m in MECHANISMS if m.guarantee is not None and m.guarantee_grid]


def assert_same_output(mechanism, got, want):
    """Integer and boolean leaves bit-identical, floating leaves within ``float_tolerance.MAX_ULP``
    (4 ulps on the CPU) of themselves or of the mechanism's ``operand_scale``, NaN where NaN."""
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if np.issubdtype(g.dtype, np.floating):
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            finite = ~np.isnan(g)
            assert_close_ulp(g[finite], w[finite], mechanism.operand_scale)
        else:
            np.testing.assert_array_equal(g, w)


def assert_invalid(output):
    """Every floating leaf NaN and every integer leaf -1 (boolean leaves are not markers)."""
    marked = 0
    for leaf in leaves(output):
        if np.issubdtype(leaf.dtype, np.floating):
            assert np.isnan(leaf).all(), leaf
            marked += 1
        elif np.issubdtype(leaf.dtype, np.integer):
            assert (leaf == -1).all(), leaf
            marked += 1
    assert marked, "the output has no floating or integer leaf to carry the invalid marker"


def _slice(output, i):
    return jax.tree.map(lambda leaf: leaf[i], output)


def _as_array(values):
    return jnp.asarray(np.asarray(values, dtype=jax.dtypes.canonicalize_dtype(float)))


def _sweep_rows(mechanism):
    """The rows of one batch that sweeps every parameter in turn: the parameter's valid values,
    then for a privacy parameter the invalid ones, the others at their defaults. Returns the rows
    (``(param, value, valid)`` per row) and the batch (each parameter an array over the rows)."""
    rows = [(param, value, True) for param, values in mechanism.params.items() for value in values]
    rows += [(param, bad, False) for param in mechanism.privacy for bad in INVALID]
    batch = {
        name: _as_array([value if param == name else default for param, value, _ in rows])
        for name, default in mechanism.defaults.items()
    }
    return rows, batch


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_vmap_over_each_parameter_equals_separate_calls_and_marks_invalid_privacy_values(mechanism):
    """One ``jit(vmap)`` over a batch that sweeps each parameter in turn (one compile per mechanism):
    each valid row gives its separate call's release, each row with an invalid privacy value only
    markers (NaN, -1), whatever its neighbors; an invalid privacy value raises eagerly."""
    for param in mechanism.privacy:
        for bad in INVALID:
            with pytest.raises(ValueError, match=param):
                mechanism.call(KEY, **{param: bad})
    rows, batch = _sweep_rows(mechanism)
    swept = jax.jit(jax.vmap(jitted_call(mechanism), in_axes=(None, None, 0)))(KEY, mechanism.data, batch)
    for i, (param, value, valid) in enumerate(rows):
        if valid:
            assert_same_output(mechanism, _slice(swept, i), mechanism.call(KEY, **{param: value}))
        else:
            assert_invalid(_slice(swept, i))


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_vmap_over_epsilon_equals_separate_calls_in_x64(mechanism, x64):
    param = mechanism.privacy[0]
    data = {
        name: np.asarray(value, np.float64) if name in mechanism.float_data() else value
        for name, value in mechanism.data.items()
    }
    values = mechanism.params[param]
    swept = jax.jit(
        jax.vmap(lambda data, v: mechanism.call(KEY, data, **{param: v}), in_axes=(None, 0))
    )(data, _as_array(values))
    for i, value in enumerate(values):
        assert_same_output(mechanism, _slice(swept, i), mechanism.call(KEY, data, **{param: value}))


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_jit_compiles_once_for_every_parameter_value(mechanism):
    step = jitted_call(mechanism)
    for i in range(2):
        params = {p: _as_array(values[i % len(values)]) for p, values in mechanism.params.items()}
        got = step(KEY, mechanism.data, params)
    assert step._cache_size() == 1
    want = mechanism.call(KEY, **{p: values[1 % len(values)] for p, values in mechanism.params.items()})
    assert_same_output(mechanism, got, want)


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_scan_carries_a_traced_privacy_parameter(mechanism):
    param = mechanism.privacy[0]
    first, second = mechanism.params[param][:2]
    keys = jax.random.split(KEY, 2)

    def step(value, key):
        return jnp.asarray(second, value.dtype), mechanism.call(key, **{param: value})

    _, outputs = jax.jit(lambda v: lax.scan(step, v, keys))(_as_array(first))
    for i, value in enumerate((first, second)):
        assert_same_output(mechanism, _slice(outputs, i), mechanism.call(keys[i], **{param: value}))


@pytest.mark.parametrize(("mechanism", "name"), NAN_DATA_CASES, ids=_ids(NAN_DATA_CASES))
def test_nan_data_raises_eagerly_and_marks_output_under_jit(mechanism, name):
    data = dict(mechanism.data)
    poisoned = np.array(data[name], copy=True)
    poisoned.flat[poisoned.size // 2] = np.nan
    data[name] = poisoned
    with pytest.raises(ValueError, match=name):
        mechanism.call(KEY, data)
    defaults = {param: _as_array(value) for param, value in mechanism.defaults.items()}
    assert_invalid(jitted_call(mechanism)(KEY, data, defaults))


@pytest.mark.parametrize("mechanism", GUARANTEE_CASES, ids=[m.name for m in GUARANTEE_CASES])
def test_guarantee_takes_a_grid_and_refuses_traced_values(mechanism):
    param = next(p for p in mechanism.privacy if p in mechanism.guarantee_args)
    values = mechanism.params[param]
    grid = mechanism.call_guarantee(**{param: np.asarray(values)})
    assert isinstance(grid, np.ndarray) and grid.shape == (len(values),)
    assert list(grid) == [mechanism.call_guarantee(**{param: v}) for v in values]
    with pytest.raises(TypeError, match="host"):
        jax.jit(lambda v: mechanism.call_guarantee(**{param: v}))(values[0])
