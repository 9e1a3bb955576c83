"""Metrics: what a study measures on each release, one number per trial.

A :class:`Metric` is a JAX function ``fn(release, truth) -> scalar`` evaluated inside the compiled
study (so only one number per trial and cell leaves the device), with a name, a description of what
it measures, a unit, the statistics to report over the trials and the axis scale of its plot. The
constructors below cover the usual cases; any other is ``Metric(name, fn, description, unit)``.

For a mechanism that returns a dict, ``output`` picks the entry a metric reads (a mechanism without
that entry is not measured by that metric); ``truth`` likewise picks an entry of the study's truth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp

from dpjax._src.studies.statistics import check_statistic, describe

__all__ = [
    "Metric",
    "abs_error",
    "error",
    "precision",
    "recall",
    "rel_error",
    "set_error",
    "squared_error",
    "value",
    "wrong_answer",
]


@dataclasses.dataclass(frozen=True)
class Metric:
    """One number per trial, and how to summarize and draw it.

    Attributes:
      name: short identifier, the ``metric`` column of the table.
      fn: ``fn(release, truth) -> scalar`` in JAX (traced); NaN marks a failed trial.
      description: what one trial's number is, e.g. "absolute error |release - truth|".
      unit: its unit, e.g. "data units", "fraction of the true top-k", "items".
      statistics: summaries over the trials (see :mod:`dpjax._src.studies.statistics`).
      scale: y-axis scale of its plots, "log" or "linear".
      output: key of the release entry it reads (``None``: the whole release).
      truth: key of the truth entry it compares with (``None``: the whole truth).
      rate: each trial's number is 0 or 1, so its mean is a rate (Wilson interval).
    """

    name: str
    fn: Callable
    description: str
    unit: str
    statistics: tuple[str, ...] = ("mean",)
    scale: str = "log"
    output: str | None = None
    truth: str | None = None
    rate: bool = False

    def __post_init__(self):
        statistics = (self.statistics,) if isinstance(self.statistics, str) else tuple(self.statistics)
        if not statistics:
            raise ValueError(f"metric {self.name!r} needs at least one statistic.")
        object.__setattr__(self, "statistics", tuple(check_statistic(s) for s in statistics))
        if self.scale not in ("log", "linear"):
            raise ValueError(f"scale must be 'log' or 'linear', got {self.scale!r}.")

    def title(self, statistic: str) -> str:
        """What a statistic of this metric measures, e.g. "mean of absolute error |release - truth|"
        (for the mean of a rate: "rate: ...")."""
        if self.rate and statistic == "mean":
            return f"rate: {self.description}"
        return f"{describe(statistic)} of {self.description}"


def _mean(x) -> jnp.ndarray:
    return jnp.mean(jnp.asarray(x, jnp.result_type(float)))


def _paired(r, t):
    """``r`` and ``t`` as arrays, refused (at trace time: shapes are static) unless their shapes are the
    same: a release compared entry by entry with a truth of another shape would be broadcast into a
    confident but meaningless number."""
    r, t = jnp.asarray(r), jnp.asarray(t)
    if r.shape != t.shape:
        raise ValueError(f"the release has shape {r.shape} but the truth has shape {t.shape}: a metric that "
                         "compares them entry by entry needs the same shape")
    return r, t


def _abs_error(r, t):
    r, t = _paired(r, t)
    return _mean(jnp.abs(r - t))


def _rel_error(r, t):
    r, t = _paired(r, t)
    return _mean(jnp.abs(r - t) / jnp.abs(t))


def _error(r, t):
    r, t = _paired(r, t)
    return _mean(r - t)


def _squared_error(r, t):
    r, t = _paired(r, t)
    return _mean((r - t) ** 2)


def _wrong(r, t):
    r, t = _paired(r, t)
    return _mean(r != t)


def abs_error(statistics=("mean", "q95"), *, unit: str = "data units", description: str | None = None,
              name: str = "abs_error", output: str | None = None, truth: str | None = None) -> Metric:
    """``|release - truth|`` (the mean over entries for a vector release)."""
    return Metric(name, _abs_error,
                  description or "absolute error |release - truth|", unit, statistics, "log", output, truth)


def rel_error(statistics=("mean",), *, description: str | None = None, name: str = "rel_error",
              output: str | None = None, truth: str | None = None) -> Metric:
    """``|release - truth| / |truth|`` (the mean over entries for a vector release)."""
    return Metric(name, _rel_error,
                  description or "relative error |release - truth| / |truth|", "fraction of |truth|",
                  statistics, "log", output, truth)


def error(statistics=("mean", "rmse"), *, unit: str = "data units", description: str | None = None,
          name: str = "error", output: str | None = None, truth: str | None = None) -> Metric:
    """The signed error ``release - truth``: its mean is the bias."""
    return Metric(name, _error, description or "signed error release - truth", unit,
                  statistics, "linear", output, truth)


def squared_error(statistics=("mean",), *, unit: str = "data units^2", description: str | None = None,
                  name: str = "squared_error", output: str | None = None, truth: str | None = None) -> Metric:
    """``(release - truth)^2`` (the mean over entries for a vector release): its mean is the MSE."""
    return Metric(name, _squared_error, description or "squared error (release - truth)^2",
                  unit, statistics, "log", output, truth)


def _hits(released, true_set):
    """Entries of ``true_set`` (>= 0; -1 pads) that are among the valid (>= 0) ``released`` indices."""
    released = jnp.where(released >= 0, released, -2)
    return jnp.isin(true_set, released) & (true_set >= 0)


def recall(statistics=("mean",), *, description: str | None = None, name: str = "recall",
           output: str | None = None, truth: str | None = None) -> Metric:
    """Fraction of the true index set (-1 pads ignored) that the release contains."""

    def fn(r, t):
        return _hits(r, t).sum() / jnp.maximum((t >= 0).sum(), 1)

    return Metric(name, fn, description or "recall: share of the true set released", "fraction",
                  statistics, "linear", output, truth)


def precision(statistics=("mean",), *, description: str | None = None, name: str = "precision",
              output: str | None = None, truth: str | None = None) -> Metric:
    """Fraction of the released indices (-1 pads ignored) that are in the true set; NaN (a failed
    trial) when nothing is released."""

    def fn(r, t):
        hits = _hits(r, t).sum()
        released = (r >= 0).sum()
        return jnp.where(released > 0, hits / jnp.maximum(released, 1), jnp.nan)

    return Metric(name, fn, description or "precision: share of the released items that are true",
                  "fraction", statistics, "linear", output, truth)


def set_error(statistics=("mean",), *, description: str | None = None, name: str = "set_error",
              output: str | None = None, truth: str | None = None) -> Metric:
    """Size of the symmetric difference of the released and the true index sets (-1 pads ignored)."""

    def fn(r, t):
        hits = _hits(r, t).sum()
        return ((r >= 0).sum() - hits + (t >= 0).sum() - hits).astype(jnp.result_type(float))

    return Metric(name, fn, description or "set error: items in one set but not the other", "items",
                  statistics, "linear", output, truth)


def wrong_answer(*, description: str | None = None, name: str = "wrong_answer",
                 output: str | None = None, truth: str | None = None) -> Metric:
    """1 when the release differs from the truth, else 0: its mean is the error rate (Wilson interval)."""
    return Metric(name, _wrong, description or "wrong answer (release != truth)",
                  "fraction of releases", ("mean",), "linear", output, truth, rate=True)


def value(name: str, description: str, unit: str, statistics=("mean",), *, scale: str = "linear",
          output: str | None = None, rate: bool = False) -> Metric:
    """The release itself (the mean over entries for a vector release), compared with nothing;
    ``rate=True`` for a 0/1 release (e.g. a flag), whose mean is a rate."""
    return Metric(name, lambda r, t: _mean(r), description, unit, statistics, scale, output, rate=rate)
