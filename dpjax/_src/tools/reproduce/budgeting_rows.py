"""The rows of ``dpjax reproduce budgeting``: each checks one of the paper's stated trends (Liang and
Yi, §7, Fig. 3-6) on the experiments' errors and savings (see :mod:`dpjax._src.tools.reproduce.budgeting`)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from dpjax._src.tools.reproduce.budgeting_runs import MODES, RHOS, label
from dpjax._src.tools.reproduce.result import Row, bootstrap_interval, mean_and_se, ratio_of_means_se

__all__ = ["BETTER", "LIKE", "claim_rows"]
LIKE = (0.8, 1.25)  # "PM performs like BM": the ratio of mean errors within 0.8..1.25
BETTER = (-math.inf, 1.0)  # "A better than B": the ratio of mean errors at most 1


def _ratio_row(experiment, setting, quantity, numerator, denominator, claim, accept, paper=None):
    """A claim about a ratio of mean errors over paired trials (delta-method SE)."""
    ratio, se = ratio_of_means_se(numerator, denominator)
    return Row(experiment, setting, quantity, paper, ratio, se, claim, accept, nonnegative=True)


def _similar(experiment, setting, quantity, pm, bm, savings):
    """"PM performs like BM": the ratio of mean errors (``pm``, ``bm`` paired), with PM's mean savings
    in the quantity (the paper's guarantee that PM is no worse than BM needs at least 1/4 of the users
    eliminated, §6.2.2-6.4.2)."""
    quantity = f"{quantity} (PM's PrivSav {np.mean(savings):.2f})"
    return _ratio_row(experiment, setting, quantity, pm, bm, "PM performs like BM", LIKE, 1.0)


def _mean_savings(*savings):
    return [float(s.mean()) for s in savings]


def _rises(experiment, setting, savings_by_rho):
    """"Savings rise with rho": the smallest step between consecutive rho (>= 0 when they rise),
    resampling the (key, query) trials, which every rho shares, together."""
    rhos = sorted(savings_by_rho)
    paired = tuple(savings_by_rho[rho] for rho in rhos)

    def smallest_step(group):
        return min(b - a for a, b in itertools.pairwise(_mean_savings(*group)))

    values = _mean_savings(*paired)
    return Row(
        experiment,
        setting,
        f"smallest rise of PrivSav from one rho to the next, rho = {rhos[0]:g} -> {rhos[-1]:g}",
        None,
        smallest_step(paired),
        claim=f"rises with rho (ours: {' -> '.join(f'{v:.3f}' for v in values)})",
        accept=(0.0, math.inf),
        ci=bootstrap_interval(smallest_step, paired),
    )


def _difference_row(experiment, setting, quantity, first, second, claim, accept):
    """A claim about ``mean(second) - mean(first)`` of paired savings (SE of the paired difference)."""
    mean, se = mean_and_se(np.asarray(second, np.float64) - first)
    return Row(experiment, setting, quantity, None, mean, se, claim, accept)


def _range_count_rows(rc, c_range):
    """Fig. 3 (range counts): PM like BM at every rho, BM1 against BM0, savings rising with rho and
    large at the smallest rho."""
    rows = []
    small = min(RHOS)
    for mode in MODES:
        for rho in RHOS:
            rows.append(
                _similar(
                    "Fig. 3",
                    f"range count, {label('PM', mode, c_range)} vs {label('BM', mode, None)}, rho={rho:g}",
                    "CountErr PM / BM",
                    rc[(mode, c_range)][rho][0],
                    rc[(mode, None)][rho][0],
                    rc[(mode, c_range)][rho][1],
                )
            )
    rows.append(
        _ratio_row(
            "Fig. 3",
            f"range count, BM1 vs BM0, rho={small:g}",
            "CountErr BM1 / BM0",
            rc[("distance", None)][small][0],
            rc[("point", None)][small][0],
            "distance privatization slightly better at small rho",
            BETTER,
        )
    )
    for mode in MODES:
        for c in sorted({c for (_, c) in rc if c is not None}):
            savings = {rho: rc[(mode, c)][rho][1] for rho in RHOS}
            rows.append(_rises("Fig. 3", f"range count, {label('PM', mode, c)}", savings))
    mean, se = mean_and_se(rc[("distance", c_range)][small][1])
    rows.append(
        Row(
            "Fig. 3",
            f"range count, PM1-c{c_range}, rho={small:g}",
            "PrivSav",
            None,
            mean,
            se,
            "large savings even when rho is very small",
            (0.5, 1.0),
        )
    )
    return rows


def _kde_rows(kd, c_kde):
    """Fig. 4 (KDE): PM like BM at every rho, point against distance privatization, savings rising."""
    rows = []
    for mode in MODES:
        for rho in RHOS:
            rows.append(
                _similar(
                    "Fig. 4",
                    f"KDE, {label('PM', mode, c_kde)} vs {label('BM', mode, None)}, rho={rho:g}",
                    "l1-Err PM / BM",
                    kd[(mode, c_kde)][rho][0],
                    kd[(mode, None)][rho][0],
                    kd[(mode, c_kde)][rho][1],
                )
            )
    point = np.concatenate([kd[("point", None)][rho][0] for rho in RHOS])
    distance = np.concatenate([kd[("distance", None)][rho][0] for rho in RHOS])
    rows.append(
        _ratio_row(
            "Fig. 4", "KDE, BM0 vs BM1, all rho", "l1-Err BM0 / BM1", point, distance,
            "point privatization better", BETTER,
        )
    )
    for mode in MODES:
        savings = {rho: kd[(mode, c_kde)][rho][1] for rho in RHOS}
        rows.append(_rises("Fig. 4", f"KDE, {label('PM', mode, c_kde)}", savings))
    return rows


def _knn_rows(kn, rhos_knn, knn_cs, knn_ks, knn_source):
    """Fig. 5 (kNN): PM like BM and distance against point privatization at every k, and how the
    savings move with k and with c."""
    rows = []
    big = max(rhos_knn)
    c_big = max(knn_cs)
    for k in knn_ks:
        rows.append(
            _similar(
                "Fig. 5",
                f"kNN ({knn_source}), PM1-c{c_big} vs BM1, k={k}, rho={big:g}",
                "DistErr PM / BM",
                kn[("distance", c_big, k)][big][0],
                kn[("distance", None, k)][big][0],
                kn[("distance", c_big, k)][big][1],
            )
        )
        point = np.concatenate([kn[("point", None, k)][rho][0] for rho in rhos_knn])
        distance = np.concatenate([kn[("distance", None, k)][rho][0] for rho in rhos_knn])
        rows.append(
            _ratio_row(
                "Fig. 5", f"kNN, BM1 vs BM0, k={k}, all rho", "DistErr BM1 / BM0", distance, point,
                "distance privatization better", BETTER,
            )
        )
    small_k, large_k = min(knn_ks), max(knn_ks)
    by_k = [kn[("distance", c_big, k)][big][1] for k in (small_k, large_k)]
    rows.append(
        _difference_row(
            "Fig. 5",
            f"kNN, PM1-c{c_big}, rho={big:g}",
            f"PrivSav k={large_k} - PrivSav k={small_k} (k={small_k}: {by_k[0].mean():.3f})",
            *by_k,
            "savings fall as k grows",
            (-math.inf, 0.0),
        )
    )
    by_c = [kn[("distance", c, small_k)][big][1] for c in (min(knn_cs), c_big)]
    rows.append(
        _difference_row(
            "Fig. 5",
            f"kNN, PM1, k={small_k}, rho={big:g}",
            f"PrivSav c={c_big} - PrivSav c={min(knn_cs)} (c={min(knn_cs)}: {by_c[0].mean():.3f})",
            *by_c,
            "larger c gives more savings",
            (0.0, math.inf),
        )
    )
    return rows


def _multi_query_rows(mq):
    """Fig. 6 (multiple range counts): Algorithm 3 against the uniform split at every m, and the
    improvement growing with m."""
    rows = []
    for m, (adaptive, uniform) in mq.items():
        rows.append(
            _ratio_row(
                "Fig. 6",
                f"{m} range counts, Algorithm 3 (PM1-c16) vs uniform B/m",
                "CountErr PM / uniform",
                adaptive,
                uniform,
                "significant improvement",
                BETTER,
            )
        )
    rows.append(_improvement_grows_row(mq))
    return rows


def claim_rows(rc, kd, kn, mq, rhos_knn, c_range, c_kde, knn_cs, knn_ks, knn_source):
    """Every claim row of the reproduction, figure by figure."""
    return [
        *_range_count_rows(rc, c_range),
        *_kde_rows(kd, c_kde),
        *_knn_rows(kn, rhos_knn, knn_cs, knn_ks, knn_source),
        *_multi_query_rows(mq),
    ]


def _improvement_grows_row(mq):
    """"The improvement grows with m": improvement (1 - ratio) at the largest m minus at the smallest,
    each m's repetitions resampled on their own."""
    ms = sorted(mq)
    groups = [mq[ms[0]], mq[ms[-1]]]

    def growth(first, last):
        return ratio_of_means_se(*first)[0] - ratio_of_means_se(*last)[0]

    return Row(
        "Fig. 6",
        f"m = {ms[0]} -> {ms[-1]}",
        f"improvement at m={ms[-1]} - at m={ms[0]} (m={ms[0]}: {1 - ratio_of_means_se(*groups[0])[0]:.3f})",
        None,
        growth(*groups),
        claim="the improvement grows with m",
        accept=(0.0, math.inf),
        ci=bootstrap_interval(growth, *groups),
    )
