"""Applications of iterative elimination: geometry, c = 1 equivalences with shared noise, statistics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src.budgeting import geometry
from dpjax._src.budgeting.kde import _ELIMINATED_BIAS, kde, kde_baseline
from dpjax._src.budgeting.knn import knn, knn_baseline
from dpjax._src.budgeting.range_count import range_count, range_count_baseline
from dpjax._src.budgeting.threshold import threshold_baseline, threshold_guarantee, threshold_query

RNG = np.random.default_rng(0)
X = RNG.uniform(0, 4000, (3000, 2)).astype(np.float32)  # locations in metres
CENTER, HALF = np.array([2000.0, 2000.0], np.float32), np.array([500.0, 300.0], np.float32)
KEYS = jax.random.split(jax.random.key(1), 24)

# --- geometry ------------------------------------------------------------------------------------


def test_box_signed_distance_equals_appendix_a_rectangle_routine():
    pts = jnp.asarray(RNG.uniform(-3, 3, (4000, 2)), jnp.float32)
    for center, half in [((0.0, 0.0), (1.0, 1.0)), ((0.5, -0.3), (2.0, 0.7))]:
        c, h = np.array(center), np.array(half)
        u, v = c + np.array([-h[0], h[1]]), c + h
        w, z = c - h, c + np.array([h[0], -h[1]])
        rect = geometry.rectangle_signed_distance(pts, jnp.asarray(np.stack([u, v, w, z]), jnp.float32))
        box = geometry.box_signed_distance(pts, (jnp.asarray(c, jnp.float32), jnp.asarray(h, jnp.float32)))
        np.testing.assert_allclose(np.asarray(rect), np.asarray(box), atol=1e-5)
        inside = np.all(np.abs(np.asarray(pts) - c) < h, axis=1)
        np.testing.assert_array_equal(np.asarray(box) < 0, inside)


def test_scores_are_one_lipschitz():
    a = jnp.asarray(RNG.normal(0, 800, (5000, 2)) + 2000, jnp.float32)
    b = a + jnp.asarray(RNG.normal(0, 300, (5000, 2)), jnp.float32)
    gap = np.asarray(jnp.linalg.norm(a - b, axis=1))
    for f in (
        lambda p: geometry.box_signed_distance(p, (CENTER, HALF)),
        lambda p: geometry.distance_to(p, CENTER),
    ):
        assert np.all(np.abs(np.asarray(f(a) - f(b))) <= gap * (1 + 1e-5) + 1e-3)


def test_eta_shift_equalises_band_areas():
    for length, width, gamma in [(10.0, 10.0, 1.0), (30.0, 12.0, 2.0), (50.0, 40.0, 5.0)]:
        rho = 1 / (2 * gamma**2)
        a = -float(geometry.eta_shift(rho, length, width)) / gamma
        assert 0 <= a <= 1
        if length > 2 * (1 + a) * gamma and width > 2 * (1 + a) * gamma:
            s = length + width
            b2 = 2 * (1 - a) * gamma * s + 4 * (1 - a) ** 2 * gamma**2
            b1 = 2 * (1 + a) * gamma * s - 4 * (1 + a) ** 2 * gamma**2
            assert b1 == pytest.approx(b2, rel=1e-4)
    # case 2 (inner rectangle empty): the outer band equals the whole area l*w
    length, width, gamma = 1.5, 1.0, 1.0
    a = -float(geometry.eta_shift(0.5, length, width))
    assert 2 * (1 - a) * (length + width) + 4 * (1 - a) ** 2 == pytest.approx(length * width, rel=1e-5)
    # documented discontinuity at l = w = 2 gamma: a jumps from ~1 to 2 - sqrt(2)
    assert -float(geometry.eta_shift(0.5, 2.0001, 2.0001)) > 0.98
    assert -float(geometry.eta_shift(0.5, 2.0, 2.0)) == pytest.approx(2 - np.sqrt(2), rel=1e-5)


# --- c = 1: elimination equals the baseline with shared noise (spec 5.3) ---------------------------


@pytest.mark.parametrize("mode", ["point", "distance"])
def test_range_count_c1_equals_baseline(mode):
    def both(key):
        pm, _ = range_count(key, X, 1e-5, CENTER, HALF, c=1, beta0=0.025, mode=mode)
        return pm, range_count_baseline(key, X, 1e-5, CENTER, HALF, mode=mode)

    pm, bm = jax.jit(jax.vmap(both))(KEYS)
    np.testing.assert_array_equal(np.asarray(pm), np.asarray(bm))


@pytest.mark.parametrize("mode", ["point", "distance"])
def test_knn_c1_equals_baseline_as_sets(mode):
    def both(key):
        pm, _ = knn(key, X, 1e-3, CENTER, k=7, c=1, beta0=0.025, mode=mode)
        return pm, knn_baseline(key, X, 1e-3, CENTER, k=7, mode=mode)

    pm, bm = jax.jit(jax.vmap(both))(KEYS)
    for a, b in zip(np.asarray(pm), np.asarray(bm), strict=True):
        assert set(a.tolist()) == set(b.tolist())


def test_kde_c1_within_elimination_bias_of_baseline():
    def both(key):
        pm, res = kde(key, X, 1e-4, CENTER, bandwidth=150.0, c=1, beta0=0.025, mode="distance")
        return pm, kde_baseline(key, X, 1e-4, CENTER, bandwidth=150.0, mode="distance"), res.status

    pm, bm, status = jax.jit(jax.vmap(both))(KEYS)
    pm, bm = np.asarray(pm, np.float64), np.asarray(bm, np.float64)
    eliminated = np.asarray(status == 2).sum(axis=1)
    assert np.all(eliminated > 0)
    assert np.all(np.abs(pm - bm) <= eliminated * _ELIMINATED_BIAS / X.shape[0] + 1e-6 * bm + 1e-12)


def test_threshold_c1_equals_baseline_with_corrected_sets():
    counts = jnp.asarray(np.repeat([950.0, 990.0, 1000.0, 1010.0, 1050.0], 40))
    keys = jax.random.split(jax.random.key(5), counts.size)

    def both(key, count):
        pm, res = threshold_query(key, count, 1e-3, q=0.1, n_records=10000, c=1, beta0=0.05)
        return pm, threshold_baseline(key, count, 1e-3, q=0.1, n_records=10000), res.status[0]

    pm, bm, status = jax.jit(jax.vmap(both))(keys, counts)
    np.testing.assert_array_equal(np.asarray(pm), np.asarray(bm))
    assert np.any(np.asarray(status) == 1) and np.any(np.asarray(status) == 2)  # decided both ways
    assert threshold_guarantee(1e-3).rho == 1e-3


# --- c > 1: accuracy, statistics, invariants -----------------------------------------------------


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
def test_range_count_elimination_is_correct_and_saves():
    """Lemma 5.2 for the range count and Cor 6.3; savings > 0; PM error is close to BM error."""
    truth = int(np.sum(np.all(np.abs(X - np.asarray(CENTER)) < np.asarray(HALF), axis=1)))
    phi = np.asarray(geometry.box_signed_distance(jnp.asarray(X), (CENTER, HALF)))
    keys = jax.random.split(jax.random.key(2), 100)

    def run(key):
        count, res = range_count(key, X, 1e-4, CENTER, HALF, c=8, beta0=0.025)
        return count, res.status, res.rounds, res.estimate, res.mean

    count, status, rounds, est, mean = (np.asarray(a) for a in jax.jit(jax.vmap(run))(keys))
    wrong = ((status == 1) & (phi >= 0)) | ((status == 2) & (phi <= 0))
    assert np.any(wrong, axis=1).sum() <= stats.binom.ppf(1 - 1e-4, 100, 0.025)
    saving = 1 - rounds.mean() / 8
    assert saving > 0.3
    # point mode: the estimate is Proj of the weighted mean point
    np.testing.assert_allclose(
        est[0], np.asarray(geometry.box_signed_distance(mean[0], (CENTER, HALF))), rtol=1e-6
    )
    bm = np.asarray(jax.jit(jax.vmap(lambda k: range_count_baseline(k, X, 1e-4, CENTER, HALF)))(keys))
    assert abs(np.abs(count - truth).mean() - np.abs(bm - truth).mean()) < 0.5 * np.abs(bm - truth).mean() + 2


def test_norm_is_finite_at_extreme_scales_and_unchanged_in_the_safe_range():
    """:func:`geometry.norm` (behind every score): 3-4-5 triangles scaled by 10^±25 in float32 (their
    squares overflow or underflow) give 5 times the scale to 2 ulp; in the safe range it is the
    plain ``sqrt(sum(v^2))`` bit for bit."""
    for scale in (1e-25, 1e20, 1e30):
        v = jnp.asarray([[3.0 * scale, -4.0 * scale], [0.0, 0.0]], jnp.float32)
        got = np.asarray(geometry.norm(v))
        np.testing.assert_array_max_ulp(got, np.array([5.0 * scale, 0.0], np.float32), maxulp=2)
    v = jnp.asarray(RNG.normal(0, 800, (1000, 3)), jnp.float32)
    np.testing.assert_array_equal(geometry.norm(v), jnp.sqrt(jnp.sum(jnp.square(v), axis=-1)))


def test_knn_on_coordinates_scaled_by_1e20_returns_the_true_neighbors():
    """Points 10^20 apart in float32 (their squared distances overflow): every estimate finite and the
    k nearest found (the noise, of order 1, is negligible at this scale), in both modes."""
    pts = (RNG.normal(0, 1, (50, 3)) * 1e20).astype(np.float32)
    true = np.argsort(np.linalg.norm(pts.astype(np.float64), axis=1))[:5]
    for mode in ("distance", "point"):
        idx, res = knn(jax.random.key(0), pts, 10.0, np.zeros(3, np.float32), k=5, c=8, beta0=0.025,
                       mode=mode)
        assert np.isfinite(np.asarray(res.estimate)).all(), mode
        np.testing.assert_array_equal(np.sort(np.asarray(idx)), np.sort(true))


def test_knn_returns_the_true_neighbors_when_exactly_k_survive():
    """Cor 6.5: when |G_jhat| = k, G_jhat = J* with probability >= 1 - beta0."""
    angle = RNG.uniform(0, 2 * np.pi, 2000)
    radius = np.concatenate([[1.0, 2.0, 3.0], RNG.uniform(20, 200, 1997)])  # a clear gap after k = 3
    pts = (radius[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=1)).astype(np.float32)
    p = np.zeros(2, np.float32)
    true = {0, 1, 2}
    keys = jax.random.split(jax.random.key(4), 200)

    def run(key):
        idx, res = knn(key, pts, 1.0, p, k=3, c=32, beta0=0.1)
        return idx, jnp.sum(res.status == 3)

    idx, survivors = (np.asarray(a) for a in jax.jit(jax.vmap(run))(keys))
    exact = survivors == 3
    assert exact.sum() > 50
    wrong = sum(set(i.tolist()) != true for i in idx[exact])
    assert wrong <= stats.binom.ppf(1 - 1e-4, int(exact.sum()), 0.1)


def test_threshold_query_decides_early_and_correctly():
    """Cor C.1: if decided early, the answer is right with probability >= 1 - beta0."""
    keys = jax.random.split(jax.random.key(6), 400)
    counts = jnp.asarray(np.where(np.arange(400) % 2 == 0, 900.0, 1100.0))

    def run(key, count):
        ans, res = threshold_query(key, count, 0.5, q=0.1, n_records=10000, c=16, beta0=0.05)
        return ans, res.rounds[0]

    ans, rounds = (np.asarray(a) for a in jax.jit(jax.vmap(run))(keys, counts))
    assert set(np.unique(ans)) <= {0, 1}  # 1: yes, 0: no (-1 only for invalid traced input)
    decided = rounds < 16
    assert decided.mean() > 0.5
    wrong = ans[decided] != (np.asarray(counts)[decided] < 1000)
    assert wrong.sum() <= stats.binom.ppf(1 - 1e-4, int(decided.sum()), 0.05)


# --- bad input -----------------------------------------------------------------------------------


def test_applications_reject_bad_input():
    key = jax.random.key(0)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        range_count(key, bad, 1e-4, CENTER, HALF, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="center"):
        range_count(key, X, 1e-4, jnp.zeros(3), HALF, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="mode"):
        range_count(key, X, 1e-4, CENTER, HALF, c=2, beta0=0.1, mode="both")
    with pytest.raises(ValueError, match="c must"):
        range_count(key, X, 1e-4, CENTER, HALF, c=0, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        range_count(key, X, np.full(5, 1e-4), CENTER, HALF, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="bandwidth"):
        kde(key, X, 1e-4, CENTER, bandwidth=0.0, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="p must"):
        kde(key, X, 1e-4, jnp.zeros(3), bandwidth=1.0, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="k must be <="):
        knn(key, X, 1e-4, CENTER, k=X.shape[0] + 1, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="k must be <="):
        knn_baseline(key, X, 1e-4, CENTER, k=X.shape[0] + 1)
    with pytest.raises(ValueError, match="q must"):
        threshold_query(key, 10.0, 0.1, q=1.5, n_records=100, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        threshold_query(key, 10.0, 0.0, q=0.5, n_records=100, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="count"):
        threshold_query(key, -1.0, 0.1, q=0.5, n_records=100, c=2, beta0=0.1)


def test_guarantee_companions_are_the_worst_case():
    from dpjax.budgeting import kde_guarantee, knn_guarantee, range_count_guarantee

    for companion in (range_count_guarantee, kde_guarantee, knn_guarantee):
        assert companion(np.array([1e-4, 5e-4, 0.0])).rho == 5e-4
        with pytest.raises(ValueError, match="rho"):
            companion(np.array([-1e-4]))


@pytest.mark.parametrize("mode", ["point", "distance"])
def test_vmap_over_query_points_equals_one_call_per_query(mode):
    """Range counts of several boxes in one vmapped call equal the calls made one query at a time."""
    centers = jnp.asarray([[1000.0, 1000.0], [2000.0, 2000.0], [3000.0, 1500.0]], jnp.float32)
    key = jax.random.key(7)

    def count(center):
        return range_count(key, X, 1e-4, center, HALF, c=4, beta0=0.025, mode=mode)[0]

    batched = np.asarray(jax.jit(jax.vmap(count))(centers))
    one_by_one = [int(jax.jit(count)(c)) for c in centers]
    np.testing.assert_array_equal(batched, one_by_one)
    truth = [int(np.sum(np.all(np.abs(X - np.asarray(c)) <= HALF, axis=1))) for c in centers]
    assert len(set(truth)) > 1  # the boxes really differ


# --- traced parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["point", "distance"])
def test_vmap_over_per_user_rho_arrays_equals_separate_calls(mode):
    """Per-user allotments are values: a batch of (n,) rho arrays in one vmapped call gives, for the
    same key, what one eager call per array gives (users with rho_i = 0 take no part)."""
    x, key = X[:400], jax.random.key(8)
    rhos = np.stack([np.full(400, 1e-4), np.where(np.arange(400) % 3 == 0, 0.0, 4e-4)]).astype(np.float32)

    def run(rho):
        return range_count(key, x, rho, CENTER, HALF, c=4, beta0=0.025, mode=mode)

    batched = jax.jit(jax.vmap(run))(rhos)
    for i, rho in enumerate(rhos):
        count, res = run(rho)
        assert int(batched[0][i]) == int(count)
        np.testing.assert_array_equal(np.asarray(batched[1].status[i]), np.asarray(res.status))
        np.testing.assert_array_equal(np.asarray(batched[1].rounds[i]), np.asarray(res.rounds))
    assert (np.asarray(batched[1].status[1])[::3] == 0).all()  # rho_i = 0: not in G_0


def test_invalid_traced_per_user_rho_marks_the_output():
    """A negative or NaN entry of a traced per-user rho never yields a count: -1 and a marked result
    (the same values raise eagerly)."""
    x, key = X[:50], jax.random.key(9)
    run = jax.jit(lambda rho: range_count(key, x, rho, CENTER, HALF, c=2, beta0=0.1))
    for bad in (-1e-4, np.nan, np.inf):
        rho = np.full(50, 1e-4, np.float32)
        rho[7] = bad
        with pytest.raises(ValueError, match="rho"):
            range_count(key, x, rho, CENTER, HALF, c=2, beta0=0.1)
        count, res = run(rho)
        assert (
            int(count) == -1 and (np.asarray(res.status) == -1).all() and (np.asarray(res.rounds) == -1).all()
        )
        assert np.isnan(np.asarray(res.mean)).all() and int(res.rounds_run) == -1


def test_threshold_query_answer_is_an_int_with_an_invalid_marker():
    """The answer is 1 (yes) / 0 (no); under jit a NaN count or an invalid traced parameter gives -1
    (a bool answer would say "no" with confidence)."""
    key = jax.random.key(10)
    query = jax.jit(
        lambda count, rho: threshold_query(key, count, rho, q=0.1, n_records=10000, c=4, beta0=0.05)
    )
    baseline = jax.jit(lambda count, rho: threshold_baseline(key, count, rho, q=0.1, n_records=10000))
    for count, want in ((10.0, 1), (9000.0, 0)):
        ans, _ = query(count, 0.5)
        assert ans.dtype == jnp.int32 and int(ans) == want and int(baseline(count, 0.5)) == want
    for count, rho in ((np.nan, 0.5), (-3.0, 0.5), (10.0, 0.0), (10.0, np.nan)):
        ans, res = query(count, rho)
        assert int(ans) == -1 and int(res.status[0]) == -1 and np.isnan(float(res.mean[0]))
        assert int(baseline(count, rho)) == -1


def test_pie_guarantee_takes_a_grid_of_per_user_allotments_and_refuses_traced_values():
    from dpjax.budgeting import pie_guarantee

    grid = pie_guarantee(np.array([[1e-4, 5e-4, 0.0], [2e-4, 2e-4, 2e-4]]))
    assert grid.shape == (2,) and [g.rho for g in grid] == [5e-4, 2e-4]
    with pytest.raises(TypeError, match="host"):
        jax.jit(pie_guarantee)(jnp.ones(3))
