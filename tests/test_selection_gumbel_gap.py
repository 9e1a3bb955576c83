"""Noisy-Top-K-with-Gap with Gumbel noise (dpjax.selection, noise="gumbel"): the closed-form density of
(indices, gaps) derived in the docstring of ``noisy_top_k_with_gap`` against both samplers (literal and
tree), the exact privacy ratios of that density on neighbors, a statistical audit, and bad options."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import P_MIN, chi_square_pvalue, sample
from scipy import integrate, stats

from dpjax import selection
from dpjax.accounting import PureDP
from dpjax.audit import audit, neighbors

METHODS = ("literal", "tree")


def gap_density(units, indices, gaps):
    """The derived density of ``(i_1..i_k, g_1..g_k)`` in units (scores / b, gaps / b):
    ``k! prod_j exp(u_{i_j} - s_j) Z_R / A^{k+1}``, ``s_j = g_j + ... + g_k``; ``gaps`` [..., k]."""
    units, gaps = np.asarray(units, np.float64), np.asarray(gaps, np.float64)
    k = len(indices)
    s = np.cumsum(gaps[..., ::-1], axis=-1)[..., ::-1]
    rest = np.delete(units, list(indices))
    z_rest = np.exp(rest).sum()
    a = np.exp(units[list(indices)] - s)
    return math.factorial(k) * a.prod(axis=-1) * z_rest / (a.sum(axis=-1) + z_rest) ** (k + 1)


def max_gap_tail(units, i, g):
    """``P(i_1 = i, g_1 >= g) = e^{u_i - g} / (e^{u_i - g} + Z_R)`` for k = 1 (the integral of
    :func:`gap_density`)."""
    units = np.asarray(units, np.float64)
    head = np.exp(units[i] - np.asarray(g, np.float64))
    return head / (head + np.exp(np.delete(units, i)).sum())


def test_density_integrates_to_one_and_max_gap_tail_is_its_integral():
    units = np.array([0.5, 0.0, -0.7, 0.2])
    one = sum(integrate.quad(lambda g, i=i: gap_density(units, (i,), [g]), 0, np.inf)[0] for i in range(4))
    assert one == pytest.approx(1.0, abs=1e-9)
    for i, g in ((0, 0.0), (2, 0.3), (3, 2.0)):
        tail = integrate.quad(lambda x, i=i: gap_density(units, (i,), [x]), g, np.inf)[0]
        assert tail == pytest.approx(max_gap_tail(units, i, g), rel=1e-9)
    units = units[:3]
    two = sum(
        integrate.dblquad(lambda g2, g1, t=t: gap_density(units, t, [g1, g2]), 0, np.inf, 0, np.inf)[0]
        for t in itertools.permutations(range(3), 2)
    )
    assert two == pytest.approx(1.0, abs=1e-7)


@pytest.mark.parametrize(("method", "monotonic"), [("literal", False), ("tree", True)])
def test_max_with_gap_law(method, monotonic):
    """k = 1: the index is the softmax of the units (chi-square) and the gap given the index has the
    conditional tail ``max_gap_tail / softmax`` (KS), for both samplers."""
    epsilon, sensitivity = 0.8, 1.5
    b = (1 if monotonic else 2) * sensitivity / epsilon
    units = np.array([0.5, 0.0, -0.7, 0.2, -2.0])
    index, gap = sample(
        selection.noisy_max_with_gap, jnp.asarray(units * b, jnp.float32), 100_000, 40,
        epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic, noise="gumbel", method=method,
    )
    assert (gap >= 0).all()
    p_index = np.array([max_gap_tail(units, i, 0.0) for i in range(5)])  # the softmax
    assert chi_square_pvalue(np.bincount(index, minlength=5), p_index) > P_MIN
    for i in range(4):  # the last one is too rare for a KS test of its own
        cdf = lambda g, i=i: 1 - max_gap_tail(units, i, g / b) / p_index[i]  # noqa: E731
        assert stats.kstest(gap[index == i], cdf).pvalue > P_MIN / 4


def top2_cells(units, edges):
    """Probabilities of (i_1, i_2, g_1 bin, g_2 bin) by quadrature of :func:`gap_density` (k = 2)."""
    cells = []
    for t in itertools.permutations(range(len(units)), 2):
        for (a1, b1), (a2, b2) in itertools.product(itertools.pairwise(edges), repeat=2):
            cells.append(
                integrate.dblquad(lambda g2, g1, t=t: gap_density(units, t, [g1, g2]), a1, b1, a2, b2)[0]
            )
    return np.array(cells)


@pytest.mark.parametrize("method", METHODS)
def test_top_2_with_gap_joint_law(method):
    """k = 2, 3 candidates: the joint law of (i_1, i_2, g_1, g_2) on 6 x 4 x 4 cells (chi-square)."""
    epsilon = 1.0
    b = 4 / epsilon
    units = np.array([0.6, 0.0, -0.5])
    edges = np.array([0.0, 0.4, 1.0, 2.0, np.inf])
    probs = top2_cells(units, edges)
    assert probs.sum() == pytest.approx(1.0, abs=1e-7)
    idx, gaps = sample(
        selection.noisy_top_k_with_gap, jnp.asarray(units * b, jnp.float32), 100_000, 41,
        k=2, epsilon=epsilon, noise="gumbel", method=method,
    )
    pairs = {t: n for n, t in enumerate(itertools.permutations(range(3), 2))}
    pair = np.array([pairs[tuple(row)] for row in idx.tolist()])
    bins = np.searchsorted(edges, gaps / b, side="right") - 1
    observed = np.bincount((pair * 4 + bins[:, 0]) * 4 + bins[:, 1], minlength=probs.size)
    assert chi_square_pvalue(observed, probs) > P_MIN


def test_tree_and_literal_have_the_same_law_on_many_candidates(x64):
    """d = 300 (a 512-leaf tree), k = 4, float64: two-sample tests of the winner and of each gap."""
    scores = jnp.asarray(np.random.default_rng(3).normal(0.0, 6.0, 300))
    options = dict(k=4, epsilon=1.0, noise="gumbel", monotonic=True)
    idx_l, gaps_l = sample(selection.noisy_top_k_with_gap, scores, 20_000, 42, method="literal", **options)
    idx_t, gaps_t = sample(selection.noisy_top_k_with_gap, scores, 20_000, 43, method="tree", **options)
    assert gaps_t.dtype == np.float64
    winners = np.union1d(idx_l[:, 0], idx_t[:, 0])
    table = np.array([[(idx[:, 0] == w).sum() for w in winners] for idx in (idx_l, idx_t)])
    table = table[:, table.sum(0) >= 20]
    assert stats.chi2_contingency(table).pvalue > P_MIN / 5
    for i in range(4):
        assert stats.ks_2samp(gaps_l[:, i], gaps_t[:, i]).pvalue > P_MIN / 5


# ---------------------------------------------------------------------------------------------- privacy


def log_density_ratios(scores, shifted, scale, k, grid):
    """log p(x) - log p(x') of the release's density over every index tuple and a grid of gaps."""
    out = []
    for t in itertools.permutations(range(len(scores)), k):
        gaps = np.stack(np.meshgrid(*[grid] * k, indexing="ij"), -1).reshape(-1, k) / scale
        out.append(np.log(gap_density(scores / scale, t, gaps) / gap_density(shifted / scale, t, gaps)))
    return np.concatenate(out)


def all_shifts(d, monotonic):
    steps = np.array(list(itertools.product((-1.0, 0.0, 1.0), repeat=d)))
    if monotonic:
        steps = steps[(steps >= 0).all(1) | (steps <= 0).all(1)]
    return steps


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("monotonic", [False, True])
def test_density_ratios_on_every_neighbor_are_within_e_epsilon(k, monotonic):
    """Exactly (by the closed form): |log p/p'| <= epsilon on every neighbor of a 4-candidate input,
    the bound is nearly attained (it is tight), and the monotone scale on non-monotone neighbors
    breaks it (negative control)."""
    epsilon, scores = 0.9, np.array([2.0, 0.5, 0.0, -3.0])
    grid = np.concatenate([[0.0], np.geomspace(1e-2, 60.0, 12)])
    scale = (1 if monotonic else 2) * k / epsilon
    worst = max(
        np.abs(log_density_ratios(scores, scores + s, scale, k, grid)).max() for s in all_shifts(4, monotonic)
    )
    assert 0.99 * epsilon < worst <= epsilon * (1 + 1e-9)
    if not monotonic:
        broken = max(
            np.abs(log_density_ratios(scores, scores + s, k / epsilon, k, grid)).max()
            for s in all_shifts(4, False)
        )
        assert broken > 1.3 * epsilon


NMAX, NMAX_MONO = neighbors.noisy_max_worst_case(), neighbors.noisy_max_worst_case(monotonic=True)
TOP2 = (np.zeros(4), np.array([1.0, 1.0, -1.0, -1.0]))  # as in tests/cross/test_audit_suite.py


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "options", "pair"),
    [
        ("max_literal", dict(k=1), NMAX),
        ("max_tree_monotonic", dict(k=1, monotonic=True, method="tree"), NMAX_MONO),
        ("top2_tree", dict(k=2, method="tree"), TOP2),
    ],
)
def test_gumbel_gap_release_passes_the_audit(name, options, pair):
    epsilon = 1.0
    guarantee = selection.noisy_top_k_with_gap_guarantee(
        options["k"], epsilon, noise="gumbel", monotonic=options.get("monotonic", False)
    )
    assert guarantee == PureDP(epsilon)

    def mechanism(key, scores):
        return selection.noisy_top_k_with_gap(key, scores, epsilon=epsilon, noise="gumbel", **options)

    result = audit(mechanism, *pair, epsilon=guarantee.epsilon, trials=200_000)
    assert result.passed, f"{name}: {result}"


@pytest.mark.slow
def test_audit_detects_the_gumbel_gap_with_the_monotone_scale_on_non_monotone_neighbors():
    """Negative control: the k = 1 gap release at b = 1/epsilon on (0, 0) vs (1, -1) has log-ratios
    up to 2 epsilon; the audit must reject the claim epsilon."""

    def mechanism(key, scores):
        return selection.noisy_max_with_gap(key, scores, 1.0, noise="gumbel", monotonic=True)

    result = audit(mechanism, *NMAX, epsilon=1.0, trials=100_000)
    assert not result.passed, result


# ------------------------------------------------------------------------------------------ bad options


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: selection.noisy_top_k_with_gap(jax.random.key(0), jnp.zeros(4), 2, 1.0, method="tree"),
         "noise must be 'gumbel'"),
        (lambda: selection.noisy_max_with_gap(jax.random.key(0), jnp.zeros(4), 1.0, method="tree"),
         "noise must be 'gumbel'"),
        (lambda: selection.noisy_max_with_gap(jax.random.key(0), jnp.zeros(4), 1.0, noise="gauss"), "noise"),
        (lambda: selection.noisy_top_k_with_gap(jax.random.key(0), jnp.zeros(4), 1, 1.0, noise="exponential"),
         "not proven"),
        (lambda: selection.noisy_top_k_with_gap(
            jax.random.key(0), jnp.zeros(4), 1, 1.0, noise="gumbel", method="inverse_cdf"), "method"),
        (lambda: selection.noisy_top_k_with_gap_scale(2, 1.0, noise="exponential"), "not proven"),
        (lambda: selection.noisy_top_k_with_gap_guarantee(2, 1.0, noise="gauss"), "noise"),
        (lambda: selection.noisy_max_with_gap_guarantee(1.0, noise="exponential"), "not proven"),
    ],
)
def test_bad_options_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_scale_and_guarantee_do_not_depend_on_the_noise():
    for noise in ("laplace", "gumbel"):
        assert selection.noisy_top_k_with_gap_scale(10, 0.7, noise=noise) == pytest.approx(20 / 0.7)
        assert selection.noisy_max_with_gap_guarantee(0.7, noise=noise, monotonic=True) == PureDP(0.7)
