"""Statistics of Monte Carlo trials, each with a standard error and a confidence interval.

A study measures one number per trial (a :class:`~dpjax._src.studies.metrics.Metric`) and summarizes the
``T`` trials of each cell by one or more statistics:

* ``"mean"``: the sample mean. Interval: the normal (CLT) interval ``mean ± z SE`` with
  ``SE = s / sqrt(n)``; for a rate (a metric that is 0 or 1 per trial), the Wilson score interval,
  which stays inside [0, 1] and does not collapse when every trial agrees (Wilson 1927).
* ``"rmse"``: the root mean square. Interval: the CLT interval of the mean square, square-rooted;
  SE by the delta method, ``SE(mean square) / (2 rmse)``. Asymptotic: with heavy-tailed errors it
  covers less than the nominal level at small T (about 90% at T = 100 for Laplace errors).
* ``"median"`` and ``"qNN"`` (``"q95"``: the 0.95 quantile): the sample quantile (linear
  interpolation). Interval: distribution-free, between two order statistics
  ``[x_(r), x_(s)]`` with ``r = floor(np - z sqrt(np(1-p)))`` and ``s = ceil(np + z sqrt(np(1-p))) + 1``
  (1-based, clamped to ``[1, n]``; the normal approximation of the binomial count below the true
  quantile, e.g. Conover, *Practical Nonparametric Statistics*, 3rd ed., Sec. 3.2); SE is reported as
  the interval's half-width divided by ``z``.

Trials whose value is not finite (a mechanism's NaN/-1 "invalid" marker, an empty answer) are left
out and counted as failures by the caller.
"""

from __future__ import annotations

import re
from statistics import NormalDist

import numpy as np

__all__: list[str] = []

_QUANTILE = re.compile(r"^q(\d{1,2}(?:\.\d+)?)$")


def quantile_level(statistic: str) -> float | None:
    """The quantile level of ``"median"`` (0.5) or ``"qNN"`` (NN/100); ``None`` for other statistics."""
    if statistic == "median":
        return 0.5
    match = _QUANTILE.match(statistic)
    if match:
        level = float(match.group(1)) / 100
        if 0 < level < 1:
            return level
    return None


def check_statistic(statistic: str) -> str:
    """``statistic`` if it is one this module computes, else a ``ValueError``."""
    if statistic in ("mean", "rmse") or quantile_level(statistic) is not None:
        return statistic
    raise ValueError(f"unknown statistic {statistic!r}; use 'mean', 'rmse', 'median' or 'qNN' (e.g. 'q95').")


def describe(statistic: str) -> str:
    """The statistic in words, for tables and plot titles."""
    level = quantile_level(statistic)
    if statistic == "mean":
        return "mean"
    if statistic == "rmse":
        return "root mean square"
    if statistic == "median":
        return "median"
    if level is None:  # was a TypeError of the product below
        raise ValueError(f"unknown statistic {statistic!r}.")
    return f"{100 * level:g}% quantile"


def z_value(confidence: float) -> float:
    """The two-sided normal critical value for ``confidence`` (1.96 for 0.95)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}.")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def summarize(values, statistic: str, confidence: float = 0.95, *, rate: bool = False) -> dict:
    """Estimate, standard error and confidence interval of ``statistic`` over the last axis.

    Args:
      values: trials along the last axis, any leading shape; non-finite entries are left out.
      statistic: ``"mean"``, ``"rmse"``, ``"median"`` or ``"qNN"``.
      confidence: level of the two-sided interval.
      rate: the values are 0 or 1 (Wilson interval for the mean).

    Returns:
      ``estimate``, ``se``, ``ci_low``, ``ci_high`` (float arrays of the leading shape; NaN where no
      trial is finite), ``n`` (finite trials) and ``method`` (an array of method names).
    """
    check_statistic(statistic)
    z = z_value(confidence)
    x = np.asarray(values, dtype=np.float64)
    x = np.where(np.isfinite(x), x, np.nan)
    n = np.sum(~np.isnan(x), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        level = quantile_level(statistic)
        if level is not None:
            return _quantile(x, n, level, z)
        if statistic == "rmse":
            return moment_rmse(*_nan_mean_and_se(x**2, n), n, z)
        mean, se = _nan_mean_and_se(x, n)
        return wilson_interval(mean, n, z) if rate else moment_mean(mean, se, n, z)


def _nan_mean_and_se(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    total = np.nansum(x, axis=-1)
    mean = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    deviation = np.nansum((x - mean[..., None]) ** 2, axis=-1)
    sd = np.sqrt(deviation / np.maximum(n - 1, 1))
    return mean, np.where(n > 1, sd / np.sqrt(np.maximum(n, 1)), np.nan)


def moment_mean(mean, se, n, z):
    method = np.full(n.shape, "CLT")
    return {"estimate": mean, "se": se, "ci_low": mean - z * se, "ci_high": mean + z * se, "n": n,
            "method": method}


def wilson_interval(p, n, z):
    m = np.maximum(n, 1)
    centre = (p + z**2 / (2 * m)) / (1 + z**2 / m)
    half = z / (1 + z**2 / m) * np.sqrt(p * (1 - p) / m + z**2 / (4 * m**2))
    low = np.where(p == 0, 0.0, np.clip(centre - half, 0, 1))  # exact ends at p = 0 and p = 1
    high = np.where(p == 1, 1.0, np.clip(centre + half, 0, 1))
    method = np.full(n.shape, "Wilson")
    return {"estimate": p, "se": np.sqrt(p * (1 - p) / m), "ci_low": low, "ci_high": high, "n": n,
            "method": method}


def moment_rmse(square, se_square, n, z):
    rmse = np.sqrt(square)
    low = np.sqrt(np.maximum(square - z * se_square, 0.0))
    high = np.sqrt(square + z * se_square)
    se = se_square / (2 * rmse)
    method = np.full(n.shape, "CLT (mean square)")
    return {"estimate": rmse, "se": se, "ci_low": low, "ci_high": high, "n": n, "method": method}


def _quantile(x, n, level, z):
    ordered = np.sort(x, axis=-1)  # NaN last
    estimate = np.where(n > 0, _nanquantile(ordered, n, level), np.nan)
    _, _, low_rank, high_rank = quantile_ranks(n, level, z)
    low = np.take_along_axis(ordered, (low_rank - 1)[..., None], axis=-1)[..., 0]
    high = np.take_along_axis(ordered, (high_rank - 1)[..., None], axis=-1)[..., 0]
    low, high = np.where(n > 0, low, np.nan), np.where(n > 0, high, np.nan)
    method = np.full(n.shape, "order statistics")
    return {"estimate": estimate, "se": (high - low) / (2 * z), "ci_low": low, "ci_high": high, "n": n,
            "method": method}


def quantile_ranks(n, level, z):
    """``(position, below, low_rank, high_rank)``: the sample quantile interpolates the 0-based order
    statistics ``below`` and ``below + 1`` at ``position``; the interval's ends are the 1-based ranks."""
    position = level * np.maximum(n - 1, 0)
    below = np.floor(position).astype(int)
    spread = z * np.sqrt(n * level * (1 - level))
    low_rank = np.clip(np.floor(n * level - spread), 1, np.maximum(n, 1)).astype(int)
    high_rank = np.clip(np.ceil(n * level + spread) + 1, 1, np.maximum(n, 1)).astype(int)
    return position, below, low_rank, high_rank


def _nanquantile(ordered, n, level):
    """Linear-interpolation quantile of sorted rows whose first ``n`` entries are the finite ones."""
    position, below, _, _ = quantile_ranks(n, level, 0.0)
    above = np.minimum(below + 1, np.maximum(n - 1, 0))
    lo = np.take_along_axis(ordered, below[..., None], axis=-1)[..., 0]
    hi = np.take_along_axis(ordered, above[..., None], axis=-1)[..., 0]
    return lo + (position - below) * (hi - lo)
