"""The sparse vector kernels equal plain sequential loops bit for bit when fed the same noise arrays.

Each reference below is the paper's pseudocode written as a Python loop over the queries, in NumPy
with the kernel's dtype (so every addition rounds the same way), with the budget of Algorithm 2
counted in integer units of eps2. Thousands of randomized cases include ties (noise and queries on
a coarse grid so comparisons land exactly on ``sigma`` or 0), streams that end before the budget
does, and budgets that run out on the last query.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import noise as noise_lib
from dpjax import svt

# ----------------------------------------------------------------------------- references


def ref_above_threshold(centered, eta, nu):
    for i in range(len(centered)):
        if centered[i] + nu[i] >= eta:
            return i
    return -1


def ref_sparse_vector(centered, etas, nu, c):
    indices, j = [], 0
    for i in range(len(centered)):
        if centered[i] + nu[i] >= etas[j]:
            indices.append(i)
            j += 1  # resample: the next run uses the next threshold noise
            if j == c:
                return indices, i + 1
    return indices, len(centered)


def ref_gap(centered, eta, xi, nu, k, sigma, adaptive):
    """Ding et al. 2019, Algorithm 2 literally, with cost in integer units of eps2."""
    units, branch, indices, gaps = 0, [-1] * len(centered), [], []
    for i in range(len(centered)):
        x = (centered[i] + xi[i]) - eta if adaptive else None
        y = (centered[i] + nu[i]) - eta
        if adaptive and x >= sigma:
            branch[i], units = 1, units + 1
            indices.append(i)
            gaps.append(x)
        elif y >= 0:
            branch[i], units = 2, units + 2
            indices.append(i)
            gaps.append(y)
        else:
            branch[i] = 0
        if units > 2 * k - 2:  # line 16: eps0 + units*eps2 > epsilon - eps1
            break
    return indices, gaps, branch, units


# ----------------------------------------------------------------------------- random cases


def random_case(rng, n, dtype):
    """Queries, threshold and standard noises; on a coarse grid half of the time to force ties."""
    coarse = rng.random() < 0.5
    if coarse:
        q = rng.integers(-4, 5, n).astype(dtype)
        threshold = dtype(rng.integers(-2, 3))
        noise = lambda size: (rng.integers(-8, 9, size) / 2).astype(dtype)  # noqa: E731
    else:
        q = (rng.normal(0, 3, n) + rng.choice([0, 6, 30], n)).astype(dtype)
        threshold = dtype(rng.normal(3, 3))
        noise = lambda size: rng.laplace(0, rng.choice([0.3, 2.0, 10.0]), size).astype(dtype)  # noqa: E731
    return q, threshold, noise


def centered_np(q, threshold, dtype):
    return q.astype(dtype) - dtype(threshold)


SIZES = (1, 23)  # each size is one compilation; 23 covers early stops and streams that run out
CASES_PER_SIZE = 400


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_above_threshold_equals_sequential(dtype_name, request):
    if dtype_name == "float64":
        request.getfixturevalue("x64")
    dtype = np.dtype(dtype_name).type
    rng = np.random.default_rng(100)
    core = jax.jit(jax.vmap(svt.above_threshold_from_noise, in_axes=(0, None, 0, 0)))
    mismatches = 0
    for n in SIZES:
        cases = [random_case(rng, n, dtype) for _ in range(CASES_PER_SIZE)]
        threshold = cases[0][1]
        qs = np.stack([c[0] for c in cases])
        etas = np.array([c[2](()) for c in cases], dtype)
        nus = np.stack([c[2](n) for c in cases])
        got = np.asarray(core(qs, threshold, etas, nus))
        for b in range(CASES_PER_SIZE):
            want = ref_above_threshold(centered_np(qs[b], threshold, dtype), etas[b], nus[b])
            mismatches += int(got[b] != want)
    assert mismatches == 0


@pytest.mark.parametrize("c", [1, 3])
def test_sparse_vector_equals_sequential(c):
    dtype = np.float32
    rng = np.random.default_rng(200 + c)
    batched = jax.jit(jax.vmap(lambda q, t, e, nu: svt.sparse_vector_from_noise(q, t, e, nu, c=c)))
    mismatches = 0
    for n in SIZES:
        cases = [random_case(rng, n, dtype) for _ in range(CASES_PER_SIZE)]
        qs = np.stack([x[0] for x in cases])
        thresholds = np.array([x[1] for x in cases], dtype)
        etas = np.stack([x[2](c) for x in cases])
        nus = np.stack([x[2](n) for x in cases])
        got = jax.tree.map(np.asarray, batched(qs, thresholds, etas, nus))
        for b in range(CASES_PER_SIZE):
            want, processed = ref_sparse_vector(centered_np(qs[b], thresholds[b], dtype), etas[b], nus[b], c)
            mask = np.zeros(n, bool)
            mask[want] = True
            mismatches += int(
                got.indices[b].tolist() != want + [-1] * (c - len(want))
                or int(got.num_processed[b]) != processed
                or not np.array_equal(got.above[b], mask)
            )
    assert mismatches == 0


def _gap_batch(rng, n, batch, dtype, k):
    cases = [random_case(rng, n, dtype) for _ in range(batch)]
    threshold = cases[0][1]
    qs = np.stack([c[0] for c in cases])
    eta = np.array([c[2](()) for c in cases], dtype)
    xi = np.stack([c[2](n) for c in cases])
    nu = np.stack([c[2](n) for c in cases])
    return qs, threshold, eta, xi, nu


def _check_gap_result(got, b, want, k, size, dtype, eps0, eps2):
    indices, gaps, branch, units = want
    ok = got.indices[b].tolist() == indices + [-1] * (size - len(indices))
    got_gaps = got.gaps[b]
    ok &= (
        np.array_equal(got_gaps[: len(gaps)], np.array(gaps, dtype)) and np.isnan(got_gaps[len(gaps) :]).all()
    )
    ok &= got.branch[b].tolist() == branch
    ok &= got.answer_branches[b].tolist() == [branch[i] for i in indices] + [-1] * (size - len(indices))
    ok &= int(got.units_used[b]) == units
    ok &= int(got.num_processed[b]) == sum(x >= 0 for x in branch)
    ok &= math.isclose(float(got.epsilon_spent[b]), eps0 + units * eps2, rel_tol=1e-5)
    ok &= math.isclose(float(got.epsilon_left[b]), (2 * k - units) * eps2, rel_tol=1e-5, abs_tol=1e-7)
    return bool(ok)


GAP_SETTINGS = [(1, 1.0, None), (2, 0.7, 0.0), (3, 0.3, 2.5), (5, 1.5, math.inf)]


def default_sigma(epsilon, k, dtype):
    """The default sigma ``4*sqrt(2)/eps2`` (sensitivity 1, general queries, default theta) in the
    kernel's dtype, step by step: eps2 = (1 - theta)*epsilon/k/2 (Algorithm 2, line 2)."""
    theta = dtype(svt.default_theta(k, monotonic=False))
    eps2 = (dtype(1) - theta) * dtype(epsilon) / dtype(k) / dtype(2)
    return dtype(4 * math.sqrt(2)) / eps2


@pytest.mark.parametrize(("k", "epsilon", "sigma"), GAP_SETTINGS)
def test_adaptive_sparse_vector_with_gap_equals_sequential(k, epsilon, sigma):
    """800 randomized cases per setting; sigma = None uses the default 4*sqrt(2)/eps2."""
    dtype = np.float32
    rng = np.random.default_rng(300 + k)
    budget = svt.gap_budget(epsilon, k, sigma=sigma)
    sigma_used = default_sigma(epsilon, k, dtype) if sigma is None else dtype(sigma)

    def run(q, threshold, eta, xi, nu):
        return svt.adaptive_sparse_vector_with_gap_from_noise(
            q, threshold, eta, xi, nu, epsilon=epsilon, c=k, sigma=sigma
        )

    batched = jax.jit(jax.vmap(run, in_axes=(0, None, 0, 0, 0)))
    failures = 0
    for n in SIZES:
        qs, threshold, eta, xi, nu = _gap_batch(rng, n, CASES_PER_SIZE, dtype, k)
        if sigma is None:  # the default sigma is far above the random gaps: rescale the top noise
            xi = xi * dtype(sigma_used / 4)
        got = jax.tree.map(np.asarray, batched(qs, threshold, eta, xi, nu))
        for b in range(CASES_PER_SIZE):
            want = ref_gap(centered_np(qs[b], threshold, dtype), eta[b], xi[b], nu[b], k, sigma_used, True)
            failures += not _check_gap_result(got, b, want, k, 2 * k - 1, dtype, budget.eps0, budget.eps2)
    assert failures == 0


@pytest.mark.parametrize(("k", "epsilon"), [(1, 1.0), (4, 0.2)])
def test_sparse_vector_with_gap_equals_sequential(k, epsilon):
    dtype = np.float32
    rng = np.random.default_rng(400 + k)
    budget = svt.gap_budget(epsilon, k, monotonic=True)

    def run(q, threshold, eta, nu):
        return svt.sparse_vector_with_gap_from_noise(
            q, threshold, eta, nu, epsilon=epsilon, c=k, monotonic=True
        )

    batched = jax.jit(jax.vmap(run, in_axes=(0, None, 0, 0)))
    failures = 0
    for n in SIZES:
        qs, threshold, eta, _, nu = _gap_batch(rng, n, CASES_PER_SIZE, dtype, k)
        got = jax.tree.map(np.asarray, batched(qs, threshold, eta, nu))
        for b in range(CASES_PER_SIZE):
            want = ref_gap(centered_np(qs[b], threshold, dtype), eta[b], None, nu[b], k, None, False)
            failures += not _check_gap_result(got, b, want, k, k, dtype, budget.eps0, budget.eps2)
    assert failures == 0


def test_gap_kernels_equal_reference_in_x64(x64):
    rng = np.random.default_rng(5)
    k, epsilon = 3, 0.7
    budget = svt.gap_budget(epsilon, k, sigma=1.0)
    for _ in range(200):
        q, threshold, noise = random_case(rng, 12, np.float64)
        eta, xi, nu = noise(()), noise(12), noise(12)
        got = svt.adaptive_sparse_vector_with_gap_from_noise(
            q, threshold, eta, xi, nu, epsilon=epsilon, c=k, sigma=1.0
        )
        assert got.gaps.dtype == jnp.float64
        want = ref_gap(centered_np(q, threshold, np.float64), eta, xi, nu, k, 1.0, True)
        got1 = jax.tree.map(lambda a: np.asarray(a)[None], got)
        assert _check_gap_result(got1, 0, want, k, 2 * k - 1, np.float64, budget.eps0, budget.eps2)


# ----------------------------------------------------------------------------- keyed = core on drawn noise
# The keyed kernels fuse ``scale * E + q`` and XLA may contract it into one FMA, so their gaps can
# differ from the core fed separately rounded noise in the last bit: gaps are compared to 1e-6.

KEYS = jax.random.split(jax.random.key(7), 200)


def assert_same_result(got, want):
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if np.issubdtype(g.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("noise", svt.NOISES)
def test_keyed_above_threshold_uses_the_documented_noise(noise):
    q = np.linspace(-3.0, 6.0, 50)

    def core(key):
        kt, kq = jax.random.split(key)
        eta = noise_lib.sample(noise, kt, (), 1 / 0.7)
        return svt.above_threshold_from_noise(q, 4.0, eta, noise_lib.sample(noise, kq, (50,), 1 / 0.7))

    keyed = lambda key: svt.above_threshold(key, q, 4.0, 0.7, 0.7, noise=noise, method="literal")  # noqa: E731
    got = jax.jit(jax.vmap(keyed))(KEYS)
    np.testing.assert_array_equal(got, jax.jit(jax.vmap(core))(KEYS))


@pytest.mark.parametrize("monotonic", [False, True])
def test_keyed_gap_kernels_use_the_documented_noise(monotonic):
    """epsilon = 1, k = 2, theta = 1/2: eps0 = 1/2, eps1 = 1/4, eps2 = 1/8, so the threshold noise is
    Lap(2), the middle noise Lap(2/eps1) = Lap(8) (Lap(4) monotonic) and the top noise Lap(16) (Lap(8)):
    dyadic scales, exact in every dtype, so both sides draw the same bits."""
    q = np.array([0.0, 30.0, 5.0, 60.0, 1.0, 45.0, 80.0, 2.0])
    width = 1.0 if monotonic else 2.0

    def core(key):
        kt, ktop, kmid = jax.random.split(key, 3)
        eta = noise_lib.laplace(kt, (), 2.0)
        xi = noise_lib.laplace(ktop, (8,), 8.0 * width)
        nu = noise_lib.laplace(kmid, (8,), 4.0 * width)
        return svt.adaptive_sparse_vector_with_gap_from_noise(
            q, 20.0, eta, xi, nu, epsilon=1.0, c=2, theta=0.5, sigma=4.0, monotonic=monotonic
        )

    def keyed(key):
        return svt.adaptive_sparse_vector_with_gap(
            key, q, 20.0, 1.0, c=2, theta=0.5, sigma=4.0, monotonic=monotonic, method="literal"
        )

    assert_same_result(jax.jit(jax.vmap(keyed))(KEYS), jax.jit(jax.vmap(core))(KEYS))


def test_keyed_sparse_vector_uses_the_documented_noise():
    q = np.array([0.0, 30.0, 5.0, 60.0, 1.0, 45.0, 80.0, 2.0])

    def core(key):
        kt, kq = jax.random.split(key)
        etas = noise_lib.laplace(kt, (3,), 1 / 0.4)
        return svt.sparse_vector_from_noise(q, 20.0, etas, noise_lib.laplace(kq, (8,), 1 / 0.2), c=3)

    keyed = lambda key: svt.sparse_vector(key, q, 20.0, 0.4, 0.2, c=3, method="literal")  # noqa: E731
    got = jax.jit(jax.vmap(keyed))(KEYS)
    assert_same_result(got, jax.jit(jax.vmap(core))(KEYS))
