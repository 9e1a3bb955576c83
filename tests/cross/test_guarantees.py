"""One guarantee protocol: every registered mechanism's companion takes the mechanism's privacy
arguments by name and returns the guarantee its paper states for them.

The expected guarantees below are written from the papers (theorem numbers in the comments), not
from the package: a companion that drifts from its mechanism's arguments or from the stated bound
fails here. Every registered mechanism has a companion (``Mechanism.no_guarantee`` would have to
give the reason otherwise).
"""

import inspect
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant
from mechanism_registry import all_mechanisms

from dpjax._src.accounting.bounded_range import optimal_composition_epsilon
from dpjax._src.additive import gaussian_guarantee, laplace_guarantee
from dpjax._src.selection import gumbel_top_k_guarantee
from dpjax.accounting import ZCDP, ApproxDP, Neighbors, PureDP, RangeBounded, zcdp_epsilon

MECHANISMS = all_mechanisms()
WITH_COMPANION = [m for m in MECHANISMS if m.guarantee is not None]

# Arguments that are privacy arguments wherever a mechanism takes them: its companion must take them.
PRIVACY_ARGUMENTS = (
    "epsilon", "epsilon1", "epsilon2", "delta", "rho", "sigma", "sensitivity", "neighbors", "noise",
    "monotonic", "split", "clip_fraction", "k", "c",
)
# In budgeting, ``c`` counts PIE rounds, ``split`` names the schedule of the rounds' fractions and
# ``k`` is the k of k-NN: none changes the per-user worst case ``max_i rho_i`` (Liang and Yi,
# Thm 4.4), so those companions take ``rho`` only.
NOT_PRIVACY = {"budgeting": ("c", "k", "split")}


def _uqe(q, epsilon, split, neighbors=Neighbors.SWAP):
    """Durfee (2023): UQE is AboveThreshold over monotonic counts. Swap: epsilon1 + epsilon2 (Lemma
    4.1) and (epsilon1/2 + epsilon2)^2/2-zCDP (Theorem 1); add/remove: max{(1-q) e1, q e1 + e2}
    (Lemma B.1)."""
    e1, e2 = split * epsilon, (1 - split) * epsilon
    if neighbors == Neighbors.SWAP:
        return PureDP(e1 + e2, rho=(e1 / 2 + e2) ** 2 / 2)
    return PureDP(max((1 - q) * e1, q * e1 + e2))


def _sum(v):
    # UQE clipping bound at clip_fraction * epsilon, then Laplace at the rest; basic composition.
    cf = v.get("clip_fraction", 0.5)
    bound = _uqe(v["q"], cf * v["epsilon"], 0.5)
    rest = (1 - cf) * v["epsilon"]
    return PureDP(v["epsilon"], rho=bound.rho + rest**2 / 2)


def _app_ind_exp(v):
    m, epsilon, delta = len(v["qs"]), v["epsilon"], v["delta"]
    if delta == 0:  # no (epsilon, delta) composition: basic composition of m at epsilon/m
        return RangeBounded(epsilon, rho=epsilon**2 / (8 * m))
    eps_0 = optimal_composition_epsilon(epsilon, delta, m)
    return RangeBounded(m * eps_0, rho=m * eps_0**2 / 8, approx=ApproxDP(epsilon, delta))


def _above_threshold(e1, e2):
    # Lyu, Su and Li (2017) / Durfee (2023) Lemmas 3.1-3.2: general queries, epsilon1 + 2 epsilon2.
    return PureDP(e1 + 2 * e2)


def _laplace_limited_domain(v):
    # dpjax spec's derived bound for the Laplace variant: (Delta + 1) eps, delta-tail of its Lemma.
    eps = (v["max_contributions"] + 1) * v["epsilon"]
    bad = (v["delta"] / 2) * (1 + math.log(v["max_contributions"] / v["delta"]) / 2)
    return ApproxDP(eps, min((1 + math.exp(eps)) * bad, 1.0))


def _fully_unbounded(v):
    half = _uqe(v["q"], v["epsilon"] / 2, 0.5)  # two UQE runs at epsilon/2 (Durfee Sec. 4.2)
    return PureDP(2 * half.epsilon, rho=2 * half.rho)


def _above_threshold_run(v):
    return _above_threshold(v["epsilon1"], v["epsilon2"])


def _sparse_vector(v):
    one = _above_threshold(v["epsilon1"], v["epsilon2"])  # c AboveThreshold runs composed
    return PureDP(v["c"] * one.epsilon, rho=v["c"] * one.epsilon**2 / 2)


EXPECTED = {
    # Dwork, McSherry, Nissim, Smith (2006); Bun and Steinke (2016), Prop. 1.6.
    "additive.laplace_mechanism": lambda v: PureDP(v["epsilon"]),
    "additive.gaussian_mechanism": lambda v: ZCDP(v["sensitivity"] ** 2 / (2 * v["sigma"] ** 2)),
    "aggregates.clipped_sum": _sum,
    "aggregates.sum": _sum,
    "aggregates.mean": _sum,
    # Liang and Yi, Thm 4.4: each user is charged at most its allotment rho (as rho-CGP / zCDP).
    **{
        f"budgeting.{name}": (lambda v: ZCDP(v["rho"]))
        for name in (
            "pie_ni", "pie_k", "range_count", "range_count_baseline", "kde", "kde_baseline", "knn",
            "knn_baseline", "threshold_query", "threshold_baseline",
        )
    },
    # Gillenwater, Joseph, Kulesza (2021): JointExp (Thm 1), EMQ and IndExp are exponential mechanisms
    # (m of them at epsilon/m for IndExp) under the relation they are calibrated to: epsilon-range-
    # bounded (DR19 Lemmas 3.1-3.2), m (epsilon/m)^2/8-zCDP (CR21 Lemma 3.4). AggTree (Laplace counts)
    # is epsilon-DP. AppIndExp: m releases at the DDR20 Thm. 3 budget eps_0, (epsilon, delta)-DP.
    "quantiles.joint_exp": lambda v: RangeBounded(v["epsilon"]),
    "quantiles.emq": lambda v: RangeBounded(v["epsilon"]),
    "quantiles.ind_exp": lambda v: RangeBounded(v["epsilon"], rho=v["epsilon"] ** 2 / (8 * len(v["qs"]))),
    "quantiles.agg_tree": lambda v: PureDP(v["epsilon"]),
    # Kaplan, Schnapp, Stemmer (2022): depth = floor(log2 m) + 1 levels of range-bounded EMs.
    "quantiles.approx_quantiles": lambda v: RangeBounded(
        v["epsilon"], rho=v["epsilon"] ** 2 / (8 * len(v["qs"]).bit_length())
    ),
    # Gillenwater, Joseph, Munoz Medina, Ribero Diaz (2022): one exponential mechanism.
    "selection.joint_top_k": lambda v: RangeBounded(v["epsilon"]),
    "quantiles.app_ind_exp": _app_ind_exp,
    # Bun and Steinke (2019), Sec. 3.1.1: rho-zCDP for all quantiles together.
    "quantiles.csmooth": lambda v: ZCDP(v["rho"]),
    "quantiles.unbounded": lambda v: _uqe(v["q"], v["epsilon"], v["split"], v.get("neighbors", "swap")),
    "quantiles.unbounded_result": lambda v: _uqe(v["q"], v["epsilon"], v["split"]),
    "quantiles.fully_unbounded": _fully_unbounded,
    # Durfee (2023), Lemma B.2: the levels' budgets are split so that the whole tree costs epsilon.
    "quantiles.unbounded_many": lambda v: PureDP(v["epsilon"]),
    # Durfee and Rogers (2019), Lemma 4.3: the exponential mechanism (Gumbel noise) is range-bounded.
    "selection.exponential_mechanism": lambda v: RangeBounded(v["epsilon"]),
    "selection.exponential_mechanism[inverse_cdf]": lambda v: RangeBounded(v["epsilon"]),
    "selection.exponential_mechanism[tree]": lambda v: RangeBounded(v["epsilon"]),
    "selection.report_noisy_max": lambda v: RangeBounded(v["epsilon"]),
    # Permute-and-flip (McKenna and Sheldon 2020) and Laplace report-noisy-max: epsilon-DP only.
    "selection.report_noisy_max[exponential]": lambda v: PureDP(v["epsilon"]),
    "selection.report_noisy_max[laplace]": lambda v: PureDP(v["epsilon"]),
    # k range-bounded selections: k eps-range-bounded (DR19 Lemma 3.2), k eps^2/8-zCDP (CR21 L. 3.4).
    **{
        f"selection.gumbel_top_k{variant}": lambda v: RangeBounded(
            v["k"] * v["epsilon"], rho=v["k"] * v["epsilon"] ** 2 / 8
        )
        for variant in ("", "[tree]", "[counts]")
    },
    # Ding et al. (2019), free gap: the gaps come at no extra cost.
    "selection.noisy_top_k_with_gap": lambda v: PureDP(v["epsilon"]),
    "selection.noisy_max_with_gap": lambda v: PureDP(v["epsilon"]),
    # With Gumbel noise at the same scale (the derivation in docs/derivations.md).
    "selection.noisy_top_k_with_gap[gumbel]": lambda v: PureDP(v["epsilon"]),
    "selection.noisy_top_k_with_gap[gumbel,tree]": lambda v: PureDP(v["epsilon"]),
    "selection.noisy_max_with_gap[gumbel,tree]": lambda v: PureDP(v["epsilon"]),
    "svt.above_threshold[first_passage]": lambda v: _above_threshold(v["epsilon"], v["epsilon"]),
    "svt.above_threshold": lambda v: _above_threshold(v["epsilon1"], v["epsilon2"]),
    # The first-passage samplers have the literal kernels' laws, hence their guarantees.
    "svt.above_threshold[first_passage_laplace]": _above_threshold_run,
    "svt.above_threshold[first_passage_exponential]": _above_threshold_run,
    "svt.sparse_vector[first_passage]": _sparse_vector,
    "svt.sparse_vector_with_gap[first_passage]": lambda v: PureDP(v["epsilon"]),
    "svt.above_threshold_blocked": lambda v: _above_threshold(v["epsilon1"], v["epsilon2"]),
    "svt.sparse_vector": _sparse_vector,
    "svt.sparse_vector_with_gap": lambda v: PureDP(v["epsilon"]),  # Ding et al. 2019, Theorem 4
    "svt.adaptive_sparse_vector_with_gap": lambda v: PureDP(v["epsilon"]),
    "svt.adaptive_sparse_vector_with_gap[first_passage]": lambda v: PureDP(v["epsilon"]),
    # Durfee and Rogers (2019), Thm 1 with delta' = 0 (k eps, delta); Sec. 6.3 (k + 1 outputs); Thm 5.
    "topk.limited_domain": lambda v: ApproxDP(v["k"] * v["epsilon"], v["delta"]),
    "topk.strictly_limited_domain": lambda v: ApproxDP(v["k"] * v["epsilon"], v["delta"]),
    "topk.private_kbar": lambda v: ApproxDP((v["k"] + 1) * v["epsilon"], v["delta"]),
    "topk.fixed_threshold": lambda v: ApproxDP(v["kbar"] * v["epsilon"], v["delta"]),
    "topk.laplace.laplace_limited_domain": _laplace_limited_domain,
}


def _required(mechanism) -> set[str]:
    skip = NOT_PRIVACY.get(mechanism.name.split(".")[0], ())
    return {p for p in inspect.signature(mechanism.fn).parameters if p in PRIVACY_ARGUMENTS and p not in skip}


def test_every_registered_mechanism_has_a_companion_and_a_documented_guarantee():
    assert {m.name for m in MECHANISMS if m.guarantee is None} == set()
    assert set(EXPECTED) == {m.name for m in WITH_COMPANION}


@pytest.mark.parametrize("mechanism", WITH_COMPANION, ids=[m.name for m in WITH_COMPANION])
def test_companion_takes_the_mechanisms_privacy_arguments_by_name(mechanism):
    mech = inspect.signature(mechanism.fn).parameters
    comp = inspect.signature(mechanism.guarantee).parameters
    assert _required(mechanism) <= set(comp), f"companion lacks {_required(mechanism) - set(comp)}"
    shared = [name for name in comp if name in mech]
    for name in shared:  # keyword where the mechanism's is keyword, and the same default
        assert (comp[name].kind == inspect.Parameter.KEYWORD_ONLY) == (
            mech[name].kind == inspect.Parameter.KEYWORD_ONLY
        ), name
        if mech[name].default is not inspect.Parameter.empty:
            assert comp[name].default == mech[name].default, name
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert [n for n in mech if n in shared and mech[n].kind == positional] == [
        n for n in comp if n in shared and comp[n].kind == positional
    ]
    registered = {**mechanism.params, **mechanism.static}
    assert set(mechanism.guarantee_args) == {name for name in comp if name in registered}


def _cases(mechanism):
    """The defaults, then each registered value of every parameter the companion takes."""
    yield {}
    for name in mechanism.guarantee_args:
        for value in mechanism.params.get(name, ())[1:]:
            yield {name: value}


def _assert_same(got, want):
    assert type(got) is type(want), (got, want)
    assert getattr(got, "approx", None) == getattr(want, "approx", None), (got, want)
    for field in ("epsilon", "delta", "rho"):
        g, w = getattr(got, field, None), getattr(want, field, None)
        assert (g is None) == (w is None), (field, got, want)
        if w is not None:
            assert g == pytest.approx(w, rel=1e-12), (field, got, want)


@pytest.mark.parametrize("mechanism", WITH_COMPANION, ids=[m.name for m in WITH_COMPANION])
def test_companion_returns_the_documented_guarantee(mechanism):
    for override in _cases(mechanism):
        values = {**mechanism.defaults, **mechanism.static, **override}
        try:
            want = EXPECTED[mechanism.name](values)
        except ValueError:  # the bound is not a guarantee at these values (e.g. delta = 0): skip
            continue
        _assert_same(mechanism.call_guarantee(**override), want)


@pytest.mark.parametrize("mechanism", WITH_COMPANION, ids=[m.name for m in WITH_COMPANION])
def test_companion_accepts_every_large_finite_privacy_value(mechanism):
    """A privacy parameter valid at 1e3 stays valid up to 1e300 (no ``OverflowError`` from squaring or
    exponentiating it): the companion returns a guarantee of the same notion, whose zCDP conversion,
    where it has one, is finite or refused with a ``ValueError``."""
    for name in (p for p in mechanism.privacy if p in mechanism.guarantee_args):
        try:
            moderate = mechanism.call_guarantee(**{name: 1e3})
        except ValueError:  # a parameter of a bounded domain (delta, theta)
            continue
        for value in (1e154, 1e200, 1e300):
            guarantee = mechanism.call_guarantee(**{name: value})
            assert type(guarantee) is type(moderate), (name, value, guarantee)
            try:
                rho = guarantee.to_zcdp().rho
            except (TypeError, ValueError):  # no zCDP conversion, or an infinite one refused
                continue
            assert math.isfinite(rho) and rho >= 0, (name, value, guarantee)


def test_neighbors_is_one_enum_that_accepts_its_values():
    assert Neighbors.check("swap") is Neighbors.SWAP and Neighbors.check(Neighbors.ADD_REMOVE) == "add_remove"
    with pytest.raises(ValueError, match="neighbors"):
        Neighbors.check("replace_one")


def test_guarantees_compose_through_a_dp_accounting_accountant():
    """Laplace (eps = 0.5: eps^2/2-zCDP), Gaussian (sigma = 2: 1/8-zCDP, once as its zCDP form and
    once as its own GaussianDpEvent, which RDP composes identically) and Gumbel top-3 at 0.2
    (3 * 0.2^2/8-zCDP) composed by dp_accounting's RDP accountant: the total is
    rho = 0.125 + 0.125 + 0.125 + 0.015 and epsilon(delta) the CKS20 Prop. 12 conversion of it."""
    guarantees = [laplace_guarantee(0.5), gaussian_guarantee(2.0), gumbel_top_k_guarantee(3, 0.2)]
    events = [g.to_dp_event() for g in guarantees]
    assert isinstance(events[0], dp_event.LaplaceDpEvent) and events[0].noise_multiplier == 2.0
    assert isinstance(events[1], dp_event.GaussianDpEvent) and events[1].noise_multiplier == 2.0
    assert isinstance(events[2], dp_event.ZCDpEvent)
    # The RDP accountant composes the Laplace event exactly (tighter than eps^2/2-zCDP), so compose
    # their zCDP forms here to compare with the closed form.
    events = [dp_event.ZCDpEvent(g.to_zcdp().rho) for g in guarantees[:2]] + events[1:]
    rho = 0.5**2 / 2 + 1 / (2 * 2.0**2) + 1 / (2 * 2.0**2) + 3 * 0.2**2 / 8
    orders = np.concatenate([np.linspace(1.01, 10.0, 2000), np.linspace(10.01, 500.0, 2000)])
    accountant = RdpAccountant(orders=list(orders))
    for event in events:
        accountant.compose(event)
    delta = 1e-6
    # CKS20 Prop. 12: epsilon = min_a a rho + (log(1/delta) + (a-1) log(1-1/a) - log a)/(a-1).
    epsilon = min(
        a * rho + (math.log(1 / delta) + (a - 1) * math.log(1 - 1 / a) - math.log(a)) / (a - 1)
        for a in orders
    )
    assert accountant.get_epsilon(delta) == pytest.approx(epsilon, rel=1e-9)
    assert accountant.get_epsilon(delta) == pytest.approx(zcdp_epsilon(rho, delta), rel=1e-6)
    assert isinstance(ApproxDP(1.0, 1e-6).to_dp_event(), dp_event.UnsupportedDpEvent)


def test_laplace_event_composes_exactly_in_the_pld_accountant():
    """The Laplace mechanism at epsilon0 has delta(eps) = 1 - exp((eps - epsilon0)/2) for
    0 <= eps <= epsilon0 (its privacy loss law); the PLD accountant's (pessimistic) value is within
    its discretization of it."""
    from dp_accounting.pld import PLDAccountant

    accountant = PLDAccountant()
    accountant.compose(laplace_guarantee(0.5, sensitivity=3.0).to_dp_event())
    assert accountant.get_delta(0.25) == pytest.approx(1 - math.exp((0.25 - 0.5) / 2), abs=2e-3)
    assert accountant.get_delta(0.25) >= 1 - math.exp((0.25 - 0.5) / 2) - 1e-9
