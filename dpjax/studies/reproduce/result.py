"""The common result of a reproduction: one row per reproduced number, the paper's value beside ours.

A :class:`Row` holds what a paper reports (a number, or only a claim such as "savings grow with
rho") and what dpjax measures in the same setting, with its standard error and the ratio
ours / paper. A :class:`Reproduction` gathers the rows of one paper with the notes a reader needs
(stand-in data, settings the paper leaves open) and a function that draws its figure.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

MODES = ("smoke", "quick", "full")
COLUMNS = ("experiment", "setting", "quantity", "paper", "ours", "std_error", "ratio", "claim", "holds")


@dataclasses.dataclass(frozen=True)
class Row:
    """One reproduced number.

    Attributes:
      experiment: where the paper reports it ("Table 1", "Fig. 3", "Lemma 8.1", ...).
      setting: the cell (dataset, epsilon, k, method, ...).
      quantity: what is measured ("MAE", "% MSE improvement", ...).
      paper: the paper's number, or ``None`` where the paper states only a claim.
      ours: our measurement.
      std_error: Monte Carlo standard error of ``ours`` (``None`` for exact or derived values).
      claim: the paper's statement about this quantity, when it is a claim or a range
        (e.g. "< 1: EMQ better", "rises with rho"); empty when ``paper`` says it all.
      holds: whether our measurement agrees with the claim (``None`` when there is no claim).
    """

    experiment: str
    setting: str
    quantity: str
    paper: float | None
    ours: float
    std_error: float | None = None
    claim: str = ""
    holds: bool | None = None

    @property
    def ratio(self) -> float | None:
        """``ours / paper`` where the paper gives a non-zero number, else ``None``."""
        if self.paper is None or self.paper == 0 or not math.isfinite(self.ours):
            return None
        return self.ours / self.paper


@dataclasses.dataclass
class Reproduction:
    """The reproduced numbers of one paper.

    Attributes:
      name: the ``dpjax reproduce`` name.
      title: the paper (authors, title, venue).
      rows: the reproduced numbers.
      trials: the Monte Carlo sizes used, in words (and the paper's, where they differ).
      notes: what a reader must know: stand-in data, choices for what the paper leaves open,
        known differences.
      plot: draws the figure into the given PNG path.
      seconds: wall time of the run.
      cpu_seconds: CPU time of the process during the run (all threads); on a busy machine the
        wall time says more about the other jobs than about the run.
    """

    name: str
    title: str
    rows: list[Row]
    trials: str
    notes: list[str]
    plot: Callable[[Path], None] | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    def table(self):
        """The rows as a ``pandas.DataFrame``: experiment, setting, quantity, paper, ours,
        std_error, ratio (ours / paper), claim, holds."""
        import pandas as pd

        return pd.DataFrame(
            [{**dataclasses.asdict(row), "ratio": row.ratio} for row in self.rows],
            columns=list(COLUMNS),
        )


def pick(mode: str, *, smoke, quick, full):
    """The value for ``mode`` ("smoke", "quick" or "full")."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}.")
    return {"smoke": smoke, "quick": quick, "full": full}[mode]


def mean_and_se(values) -> tuple[float, float]:
    """Mean and standard error (sample std / sqrt(n); NaN for n < 2) of a 1-D sample."""
    values = np.asarray(values, np.float64).ravel()
    if values.size < 2:
        return float(values.mean()), math.nan
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


def ratio_of_means_se(numerator, denominator) -> tuple[float, float]:
    """``sum(numerator)/sum(denominator)`` over paired trials and its delta-method standard error.

    Two all-zero samples (e.g. two methods that are exact on every trial) have ratio 1 and
    standard error 0; a zero denominator alone gives ``inf``.
    """
    a = np.asarray(numerator, np.float64).ravel()
    b = np.asarray(denominator, np.float64).ravel()
    if a.sum() == 0 and b.sum() == 0:
        return 1.0, 0.0
    if b.sum() == 0:
        return math.inf, math.nan
    ratio = float(a.sum() / b.sum())
    if a.size < 2:
        return ratio, math.nan
    residual = a - ratio * b
    return ratio, float(residual.std(ddof=1) / (math.sqrt(a.size) * b.mean()))


def subkey(key, *labels) -> jax.Array:
    """An independent key for the named part of a study, stable across runs and selections."""
    for label in labels:
        key = jax.random.fold_in(key, zlib.crc32(str(label).encode()))
    return key
