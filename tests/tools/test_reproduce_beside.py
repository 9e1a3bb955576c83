"""The reproductions beside the seeds (dpjax._src.tools.reproduce.approxquantiles, .jointtopk): their
error measures, the peeling baseline's calibration and the claim checks, on exact inputs."""

import math

import numpy as np
import pytest

from dpjax._src.accounting.conversions import bun_steinke_epsilon, zcdp_epsilon
from dpjax._src.selection import gumbel_top_k_guarantee
from dpjax._src.tools.reproduce import approxquantiles, jointtopk
from dpjax._src.tools.reproduce.jointexp import AGGTREE
from dpjax._src.tools.reproduce.result import FAILS, HOLDS


def test_missed_points_counts_the_points_strictly_between_release_and_truth():
    x = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 4.0])
    releases = np.array([[1.5, 4.0], [0.0, 1.0]])  # [T = 2, m = 2]
    truth = np.array([3.0, 1.0])
    # (1.5, 3): {2}; (1, 4): {2, 3}; (0, 3): {1, 1, 2}; release = truth: 0
    np.testing.assert_array_equal(approxquantiles.missed_points(x, releases, truth), [1.5, 1.5])


@pytest.mark.parametrize("k", [15, 55, 195])
def test_cdp_peel_is_exactly_one_one_in_a_million_dp_by_the_zcdp_conversion(k):
    step = jointtopk.cdp_epsilon(1.0, 1e-6, k)
    assert step > 1.0 / k  # the CDP analysis gives each step more than basic composition
    rho = gumbel_top_k_guarantee(k, step, monotonic=True).rho  # k step^2 / 8
    assert bun_steinke_epsilon(rho, 1e-6) == pytest.approx(1.0, rel=1e-12)
    assert zcdp_epsilon(rho, 1e-6) <= 1.0 + 1e-12


def test_cdp_peel_falls_back_to_basic_composition_where_that_is_larger():
    assert jointtopk.cdp_epsilon(1.0, 1e-6, 5) == 0.2  # the zCDP route would give 0.167
    assert gumbel_top_k_guarantee(5, 0.2, monotonic=True).epsilon == pytest.approx(1.0)


def test_approxquantiles_claim_rows_and_their_why():
    const = lambda v: np.full(8, float(v))  # noqa: E731
    by_m = {
        1: {"AQ": const(2), "JointExp": const(2), "AppIndExp": const(2), "AggTree": const(6)},
        30: {"AQ": const(5), "JointExp": const(10), "AppIndExp": const(20), "AggTree": const(4)},
    }
    rows = approxquantiles._accuracy_rows({"d": by_m}, [1, 30])
    assert [(r.setting, r.quantity.split(" (")[0]) for r in rows] == [
        ("d, m=30", "AQ error / JointExp error"),
        ("d, m=30", "AQ error / AggTree error"),
    ]  # judged from m = 10 and 30 (JointExp has its own row; the closest of the others: AggTree)
    against_joint, against_tree = rows
    assert against_joint.ours == pytest.approx(0.5) and against_joint.verdict == HOLDS
    assert against_tree.ours == pytest.approx(1.25) and against_tree.verdict == FAILS
    assert approxquantiles.explain(against_tree) == AGGTREE and approxquantiles.explain(against_joint) == ""
    few = approxquantiles._accuracy_rows({"d": {10: {**by_m[30], "JointExp": const(4)}}}, [10])[0]
    assert few.verdict == FAILS and approxquantiles.explain(few) == approxquantiles.FEW


def test_jointtopk_claims_judge_pure_peeling_at_every_k_and_cdp_peeling_at_moderate_k():
    big = jointtopk.MODERATE + 10
    errs = {"joint": np.array([1.0, 1.2]), "CDP peel": np.array([0.5, 0.5]), "PNF peel": np.array([4.0, 4.0])}
    rows = jointtopk._rows({"d": {5: errs, big: errs}}, [5, big])
    assert [r.verdict for r in rows] == [HOLDS, FAILS, HOLDS, ""]  # CDP at k > MODERATE: not judged
    assert rows[0].ours == pytest.approx(0.275) and rows[1].ours == pytest.approx(2.2)
    assert math.isinf(rows[0].accept[0]) and rows[3].accept is None and "not judged" in rows[3].claim
