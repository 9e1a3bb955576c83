"""Error summaries of Monte Carlo releases against a known truth."""

from __future__ import annotations

import dataclasses

import numpy as np

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclasses.dataclass(frozen=True)
class ErrorSummary:
    """Accuracy of T releases of a scalar statistic.

    Attributes:
      trials: number of releases summarized.
      mean_abs_error: mean of |estimate - truth|.
      std_error: standard error of ``mean_abs_error`` (sample std / sqrt(T)).
      median_abs_error: median of |estimate - truth|.
      rmse: root mean squared error.
      bias: mean of (estimate - truth).
      abs_error_quantiles: quantiles of |estimate - truth| at ``QUANTILES``.
      failure_rate: fraction of releases that were not finite (e.g. overflow flags), excluded above.
    """

    trials: int
    mean_abs_error: float
    std_error: float
    median_abs_error: float
    rmse: float
    bias: float
    abs_error_quantiles: tuple[float, ...]
    failure_rate: float

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        quantiles = d.pop("abs_error_quantiles")
        for q, v in zip(QUANTILES, quantiles, strict=True):
            d[f"abs_error_q{round(100 * q):02d}"] = v
        return d


def summarize_errors(estimates, truth) -> ErrorSummary:
    """Summarizes ``estimates`` (shape [T] or [T, ...], flattened) against ``truth`` (broadcast)."""
    est = np.asarray(estimates, dtype=np.float64)
    if est.size == 0:
        raise ValueError("estimates must not be empty.")
    err = (est - np.asarray(truth, dtype=np.float64)).ravel()
    finite = np.isfinite(err)
    err_ok = err[finite]
    if err_ok.size == 0:
        nan = float("nan")
        return ErrorSummary(err.size, nan, nan, nan, nan, nan, (nan,) * len(QUANTILES), 1.0)
    abs_err = np.abs(err_ok)
    std_error = float(abs_err.std(ddof=1) / np.sqrt(abs_err.size)) if abs_err.size > 1 else 0.0
    return ErrorSummary(
        trials=int(err.size),
        mean_abs_error=float(abs_err.mean()),
        std_error=std_error,
        median_abs_error=float(np.median(abs_err)),
        rmse=float(np.sqrt(np.mean(err_ok**2))),
        bias=float(err_ok.mean()),
        abs_error_quantiles=tuple(float(v) for v in np.quantile(abs_err, QUANTILES)),
        failure_rate=float(1 - finite.mean()),
    )
