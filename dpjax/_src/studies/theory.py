"""Closed-form laws of a metric, for the ``theory`` column and the dashed lines of study figures.

A mechanism's ``theory`` gives, per metric, either a mapping ``{statistic: value}`` or a *law*: any
object with ``mean()``, ``moment(2)`` and ``ppf(p)`` (the methods of a frozen ``scipy.stats``
distribution, so those work too). :func:`theory_value` reads a statistic off either.

* :class:`Exponential` is the law of ``|Laplace(0, b)|``: the absolute error of the Laplace
  mechanism of scale ``b = sensitivity / epsilon`` (Dwork, McSherry, Nissim, Smith 2006).
* :class:`HalfNormal` is the law of ``|N(0, sigma^2)|``: the absolute error of the Gaussian mechanism.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from statistics import NormalDist

from dpjax._src.studies.statistics import quantile_level

__all__ = [
    "Exponential",
    "HalfNormal",
]


@dataclasses.dataclass(frozen=True)
class Exponential:
    """Exponential law of mean ``scale``: ``|X|`` for ``X ~ Laplace(0, scale)``."""

    scale: float

    def mean(self) -> float:
        return self.scale

    def moment(self, order: int) -> float:
        return math.factorial(order) * self.scale**order

    def ppf(self, p: float) -> float:
        return -self.scale * math.log1p(-p)


@dataclasses.dataclass(frozen=True)
class HalfNormal:
    """Half-normal law: ``|X|`` for ``X ~ N(0, sigma^2)``."""

    sigma: float

    def mean(self) -> float:
        return self.sigma * math.sqrt(2 / math.pi)

    def moment(self, order: int) -> float:
        # E|X|^k = sigma^k 2^(k/2) Gamma((k+1)/2) / sqrt(pi)
        return self.sigma**order * 2 ** (order / 2) * math.gamma((order + 1) / 2) / math.sqrt(math.pi)

    def ppf(self, p: float) -> float:
        return self.sigma * NormalDist().inv_cdf((1 + p) / 2)


def theory_value(theory, statistic: str) -> float:
    """``statistic`` of a law or of a ``{statistic: value}`` mapping; NaN when it has none."""
    if theory is None:
        return math.nan
    if isinstance(theory, Mapping):
        return float(theory.get(statistic, math.nan))
    if statistic == "mean":
        return float(theory.mean())
    if statistic == "rmse":
        return math.sqrt(float(theory.moment(2)))
    return float(theory.ppf(quantile_level(statistic)))
