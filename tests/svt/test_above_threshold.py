"""AboveThreshold: exact halting laws (Lemma 3.3 for Gumbel, 1-D quadrature for Laplace and
Exponential), the blocked form, batching, guarantees and bad input."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import P_MIN, chi_square_pvalue
from svt_laws import halting_histogram, halting_law

from dpjax import ZCDP, PureDP, svt
from dpjax import noise as noise_lib
from dpjax._src.svt.above_threshold import _blocked_query_noise

# ----------------------------------------------------------------------------- exact laws


QUERIES = np.array([-1.5, 0.5, -0.5, 1.0, 0.0, 2.0])
TRIALS = 200_000


def test_law_oracle_sums_to_one():
    for noise in svt.NOISES:
        assert halting_law(noise, QUERIES, 1.0, 0.8, 0.8).sum() == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize(
    ("noise", "epsilon1", "epsilon2"),
    [("gumbel", 0.8, 0.8), ("laplace", 0.5, 1.2), ("exponential", 1.1, 0.6)],
)
@pytest.mark.slow
def test_halting_law_matches_closed_form(noise, epsilon1, epsilon2):
    keys = jax.random.split(jax.random.key(1), TRIALS)
    run = jax.jit(jax.vmap(lambda k: svt.above_threshold(k, QUERIES, 1.0, epsilon1, epsilon2, noise=noise)))
    counts = halting_histogram(run(keys), len(QUERIES))
    probs = halting_law(noise, QUERIES, 1.0, epsilon1, epsilon2)
    assert chi_square_pvalue(counts, probs) > P_MIN


def test_halting_law_with_sensitivity_and_x64(x64):
    """Sensitivity 2 scales both noises; float64 path."""
    keys = jax.random.split(jax.random.key(2), TRIALS)
    q = 2 * QUERIES
    run = jax.jit(
        jax.vmap(lambda k: svt.above_threshold(k, q, 2.0, 0.7, 0.7, noise="laplace", sensitivity=2.0))
    )
    counts = halting_histogram(run(keys), len(q))
    assert chi_square_pvalue(counts, halting_law("laplace", q, 2.0, 0.7, 0.7, sensitivity=2.0)) > P_MIN


def test_blocked_halting_law():
    keys = jax.random.split(jax.random.key(3), TRIALS // 2)
    run = jax.jit(
        jax.vmap(
            lambda k: svt.above_threshold_blocked(
                k, QUERIES, 1.0, 0.9, 0.9, noise="exponential", block_size=4
            )
        )
    )
    counts = halting_histogram(run(keys), len(QUERIES))
    assert chi_square_pvalue(counts, halting_law("exponential", QUERIES, 1.0, 0.9, 0.9)) > P_MIN


# ----------------------------------------------------------------------------- blocked form, batching


@pytest.mark.slow
def test_blocked_result_does_not_depend_on_block_size():
    noise = "laplace"
    q = np.linspace(-20.0, 10.0, 40)
    keys = jax.random.split(jax.random.key(4), 300)
    results = [
        np.asarray(
            jax.jit(
                jax.vmap(
                    lambda k, b=b: svt.above_threshold_blocked(k, q, 0.0, 0.3, 0.3, noise=noise, block_size=b)
                )
            )(keys)
        )
        for b in (1, 7)
    ]
    assert (results[0] >= 0).any() and (results[0] < 0).any()
    np.testing.assert_array_equal(results[0], results[1])

    def core(k):  # the same noise, assembled in one piece, through the plain core
        kt, kq = jax.random.split(k)
        eta = noise_lib.sample(noise, kt, (), 1 / 0.3)
        nu = _blocked_query_noise(noise, kq, jnp.uint32(0), 40, 1 / 0.3, jnp.float32)
        return svt.above_threshold_from_noise(q, 0.0, eta, nu)

    np.testing.assert_array_equal(results[0], jax.jit(jax.vmap(core))(keys))


def test_vmap_over_query_vectors_equals_separate_calls():
    rng = np.random.default_rng(0)
    qs = rng.normal(0, 3, (16, 30))
    key = jax.random.key(5)
    batched = jax.jit(jax.vmap(lambda q: svt.above_threshold(key, q, 2.0, 0.5, 0.5)))(qs)
    single = jax.jit(lambda q: svt.above_threshold(key, q, 2.0, 0.5, 0.5))
    np.testing.assert_array_equal(batched, [int(single(q)) for q in qs])


def test_deterministic_limit_and_output_type(float_dtype):
    q = np.array([0.0, 3.0, 9.0, 12.0, 20.0], dtype=float_dtype)
    for noise in svt.NOISES:
        i = svt.above_threshold(jax.random.key(0), q, 10.0, 1e6, 1e6, noise=noise)
        assert i.dtype == jnp.int32 and int(i) == 3
        assert int(svt.above_threshold(jax.random.key(0), q, 50.0, 1e6, 1e6, noise=noise)) == -1
    assert int(svt.above_threshold_blocked(jax.random.key(0), q, 10.0, 1e6, 1e6, block_size=2)) == 3


def test_integer_counts_are_accepted():
    counts = np.array([1, 5, 900, 3], dtype=np.int32)
    assert int(svt.above_threshold(jax.random.key(0), counts, 100, 1.0, 1.0)) == 2


# ----------------------------------------------------------------------------- guarantees


def test_guarantee_values():
    assert svt.above_threshold_guarantee(0.5, 0.25) == PureDP(1.0)
    assert svt.above_threshold_guarantee(0.5, 0.25, monotonic=True).epsilon == 0.75
    assert svt.above_threshold_guarantee(0.5, 0.5, monotonic=True).to_zcdp() == ZCDP(0.5 * 0.75**2)
    assert svt.above_threshold_guarantee(0.5, 0.5).to_zcdp() == ZCDP(0.5 * 1.5**2)
    # Theorem 1 beats Prop. 1 applied to the pure bound: 9/32 eps^2 vs 1/2 eps^2 at eps1 = eps2 = eps/2.
    rho = svt.above_threshold_guarantee(0.5, 0.5, monotonic=True).to_zcdp().rho
    assert rho == pytest.approx(9 / 32) and rho < PureDP(1.0).to_zcdp().rho
    assert svt.sparse_vector_guarantee(0.5, 0.5, c=3, monotonic=True).epsilon == 3.0
    rho = svt.sparse_vector_guarantee(0.5, 0.5, c=4, monotonic=True).to_zcdp().rho
    assert rho == pytest.approx(4 * 9 / 32)
    assert svt.above_threshold_guarantee(0.3, 0.3, noise="gumbel").epsilon == pytest.approx(0.9)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"queries": []}, "queries"),
        ({"queries": [[1.0, 2.0]]}, "queries"),
        ({"queries": [1.0, float("nan")]}, "queries"),
        ({"threshold": [1.0, 2.0]}, "threshold"),
        ({"epsilon1": 0.0}, "epsilon1"),
        ({"epsilon2": -1.0}, "epsilon2"),
        ({"noise": "gaussian"}, "noise"),
        ({"noise": "gumbel", "epsilon1": 0.5, "epsilon2": 0.6}, "epsilon1 == epsilon2"),
        ({"sensitivity": 0.0}, "sensitivity"),
    ],
)
def test_bad_input_is_refused(kwargs, match):
    args = {"queries": [1.0, 2.0], "threshold": 1.0, "epsilon1": 0.5, "epsilon2": 0.5} | kwargs
    positional = [args.pop(name) for name in ("queries", "threshold", "epsilon1", "epsilon2")]
    for fn in (svt.above_threshold, svt.above_threshold_blocked):
        with pytest.raises(ValueError, match=match):
            fn(jax.random.key(0), *positional, **args)


def test_traced_gumbel_budgets_must_be_equal():
    """Lemma 3.2 needs epsilon1 == epsilon2: unequal traced budgets report nothing (index -1), and
    the sparse vector's marker is num_processed = -1 with an empty mask."""
    q = np.array([0.0, 30.0, 60.0])
    at = jax.jit(lambda e1, e2: svt.above_threshold(jax.random.key(0), q, 10.0, e1, e2, noise="gumbel"))
    assert int(at(1e6, 1e6)) == 1 and int(at(1e6, 2e6)) == -1
    sv = jax.jit(lambda e1, e2: svt.sparse_vector(jax.random.key(0), q, 10.0, e1, e2, c=2, noise="gumbel"))
    good, bad = sv(1e6, 1e6), sv(1e6, 2e6)
    assert good.indices.tolist() == [1, 2] and int(good.num_processed) == 3
    assert bad.indices.tolist() == [-1, -1] and int(bad.num_processed) == -1 and not bad.above.any()


def test_bad_input_guarantees_and_sparse_vector():
    with pytest.raises(ValueError, match="epsilon1 == epsilon2"):
        svt.above_threshold_guarantee(0.5, 0.4, noise="gumbel")
    with pytest.raises(ValueError, match="sensitivity"):
        svt.above_threshold_guarantee(0.5, 0.4, sensitivity=0.0)
    with pytest.raises(ValueError, match="c"):
        svt.sparse_vector(jax.random.key(0), [1.0], 0.0, 1.0, 1.0, c=0)
    with pytest.raises(ValueError, match="block_size"):
        svt.above_threshold_blocked(jax.random.key(0), [1.0], 0.0, 1.0, 1.0, block_size=0)
    with pytest.raises(ValueError, match="query_noise"):
        svt.sparse_vector_from_noise([1.0, 2.0], 0.0, [0.0], [0.0], c=1)
    with pytest.raises(ValueError, match="threshold_noise"):
        svt.sparse_vector_from_noise([1.0, 2.0], 0.0, [0.0, 0.0], [0.0, 0.0], c=1)
