"""The common result of a reproduction: one row per reproduced number, the paper's value beside ours.

A :class:`Row` holds what a paper reports (a number, or only a claim such as "savings grow with
rho") and what dpjax measures in the same setting, with its standard error, a 95% interval and the
ratio ours / paper. A :class:`Reproduction` gathers the rows of one paper with the notes a reader
needs (stand-in data, settings the paper leaves open) and a function that draws its figure.

How a claim is judged (:func:`verdict`): the claim is turned into a tolerance, a closed range
``accept = (low, high)`` of our measurement within which the claim counts as reproduced (e.g.
"PM performs like BM": a ratio in [0.8, 1.25]; "significant improvement": a ratio <= 1), and the
row's 95% interval decides: **holds** when the interval lies inside the tolerance, **does not
hold** when it lies wholly outside, **inconclusive at this size** when it straddles an edge (more
trials would decide). The interval is ``ours +- 1.96 SE`` (normal approximation) where the row has a
standard error (of a mean, or the delta-method SE of a ratio of paired means), a percentile
bootstrap over the trials (:func:`bootstrap_interval`) for statistics without one (medians, trends,
counts of cells), and the value itself for exact numbers (formulas, no Monte Carlo); a module may
give its own interval where these do not fit (Durfee's share of quantiles counts each quantile by its
own interval).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

__all__ = [
    "COLUMNS",
    "COLUMN_DESCRIPTIONS",
    "FAILS",
    "HOLDS",
    "INCONCLUSIVE",
    "INTERVAL_RULE",
    "MODES",
    "NOT_JUDGED",
    "VERDICTS",
    "Z95",
    "Reproduction",
    "Row",
    "bootstrap_interval",
    "explanation",
    "figure_written",
    "mean_and_se",
    "pick",
    "ratio_of_means_se",
    "row_record",
    "shown_verdict",
    "subkey",
    "tolerance_text",
    "verdict",
]

MODES = ("smoke", "quick", "full")
COLUMNS = (
    "experiment", "setting", "quantity", "paper", "ours", "std_error", "ci_low", "ci_high", "ratio",
    "claim", "accept_low", "accept_high", "verdict", "why",
)  # fmt: skip
COLUMN_DESCRIPTIONS = {
    "reproduction": "the reproduction (dpjax reproduce NAME)",
    "mode": "the size it ran at: smoke, quick or full (the papers' trial counts)",
    "experiment": "where the paper reports it (Table 1, Fig. 3, Lemma 8.1, ...)",
    "setting": "the cell: dataset, epsilon, k, method, ...",
    "quantity": "what is measured",
    "paper": "the paper's number; empty where the paper states only a claim",
    "ours": "our measurement",
    "std_error": "Monte Carlo standard error of ours; empty for exact values and bootstrap statistics",
    "ci_low": "low end of the 95% interval of ours (ours - 1.96 SE, a bootstrap, or ours when exact)",
    "ci_high": "high end of the 95% interval of ours",
    "ratio": "ours / paper where the paper gives a non-zero number",
    "claim": "the paper's statement about this quantity; empty where paper says it all",
    "accept_low": "low end of the claim's tolerance: the closed range of ours in which it holds (-inf: none)",
    "accept_high": "high end of the claim's tolerance (inf: none)",
    "verdict": "holds (interval inside the tolerance), does not hold (wholly outside) or inconclusive "
    "at this size (straddling an edge); empty without a claim",
    "why": "why a claim does not hold or is inconclusive; empty when it holds",
}
HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive at this size"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE)
NOT_JUDGED = "not judged at this size"  # what the report and the screen show for a claim at --smoke size
Z95 = 1.959963984540054  # the two-sided 95% quantile of the standard normal
INTERVAL_RULE = (
    "A claim is judged by the 95% interval of our measurement against the claim's tolerance (column "
    '"judged by"): it **holds** when the interval lies inside the tolerance, **does not hold** when it '
    "lies wholly outside, and is **inconclusive at this size** when it straddles an edge. The interval "
    "is ours ± 1.96 SE (normal approximation; the SE of a mean, or the delta-method SE of a ratio of "
    "paired means) where a row has an SE, a percentile bootstrap over the trials (1,000 resamples) for "
    "statistics without one (medians, trends, counts), and the value itself for exact numbers; for a "
    "share of quantiles (Durfee's Fig. 3), each quantile counts by the 95% interval of its own paired "
    "difference: from the share decided for the claim to the share not decided against it."
)


def verdict(interval: tuple[float, float], accept: tuple[float, float]) -> str:
    """The verdict on a claim: :data:`HOLDS` if ``interval`` lies in the closed range ``accept``,
    :data:`FAILS` if it lies wholly outside, else :data:`INCONCLUSIVE` (also for a NaN interval)."""
    (low, high), (a, b) = interval, accept
    if a <= low and high <= b:
        return HOLDS
    if high < a or low > b:
        return FAILS
    return INCONCLUSIVE


def shown_verdict(row: Row, mode: str) -> str:
    """The verdict as the report and the screen show it: :data:`NOT_JUDGED` for every claim of a
    ``--smoke`` run (a handful of trials decide nothing; the CSV keeps the interval's verdict), else
    the row's own; empty for a row without a claim."""
    if row.accept is None:
        return ""
    return NOT_JUDGED if mode == "smoke" else row.verdict


def tolerance_text(accept: tuple[float, float]) -> str:
    """``accept`` in words: ">= a", "<= b" or "in [a, b]"."""
    a, b = accept
    if math.isinf(b):
        return f">= {a:.4g}"
    if math.isinf(a):
        return f"<= {b:.4g}"
    return f"in [{a:.4g}, {b:.4g}]"


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
        (e.g. "EMQ better", "rises with rho"); empty when ``paper`` says it all.
      accept: the claim's tolerance, the closed range of ``ours`` in which the claim holds
        (``-inf``/``inf`` for one-sided claims); ``None`` for a row without a claim.
      ci: the 95% interval of ``ours`` where ``std_error`` cannot give it (a bootstrap); by
        default ``ours +- 1.96 std_error``, or ``(ours, ours)`` for an exact value.
      why: why the claim does not hold (or is inconclusive): the paper's protocol differs, the
        paper's implementation has a known defect, or what a larger run would need.
      nonnegative: the quantity cannot be negative (an error, a ratio of errors): the low end of
        ``ours +- 1.96 SE`` is clipped at 0, which keeps the interval's coverage.
    """

    experiment: str
    setting: str
    quantity: str
    paper: float | None
    ours: float
    std_error: float | None = None
    claim: str = ""
    accept: tuple[float, float] | None = None
    ci: tuple[float, float] | None = None
    why: str = ""
    nonnegative: bool = False

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% interval of ``ours`` (see the module docstring); NaN where the SE is NaN."""
        if self.ci is not None:
            return float(self.ci[0]), float(self.ci[1])
        if self.std_error is None:
            return float(self.ours), float(self.ours)
        half = Z95 * float(self.std_error)
        low = float(self.ours) - half
        return (max(low, 0.0) if self.nonnegative else low), float(self.ours) + half

    @property
    def verdict(self) -> str:
        """:func:`verdict` of the interval against ``accept``; empty for a row without a claim."""
        return "" if self.accept is None else verdict(self.interval, self.accept)

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
      mode: the size it ran at ("smoke", "quick" or "full").
      command, machine: the command that ran it and where (for a report merged from several runs).
    """

    name: str
    title: str
    rows: list[Row]
    trials: str
    notes: list[str]
    plot: Callable[[Path], None] | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    mode: str = ""
    command: str = ""
    machine: str = ""

    def table(self):
        """The rows as a ``pandas.DataFrame`` with the columns :data:`COLUMNS` (ci_low/ci_high the
        95% interval, accept_low/accept_high the claim's tolerance, verdict and why)."""
        import pandas as pd

        return pd.DataFrame([row_record(row) for row in self.rows], columns=list(COLUMNS))


def explanation(row: Row) -> str:
    """The row's "why": its own for a claim that does not hold or is inconclusive; for an
    inconclusive one without its own, how much larger a run would decide it (if the interval
    shrinks as 1/sqrt(trials)); empty for a claim that holds or a row without a claim."""
    state = row.verdict
    if state in ("", HOLDS) or row.accept is None:  # no accept: no claim, state ""
        return ""
    if row.why or state == FAILS:
        return row.why
    low, high = row.interval
    if not all(map(math.isfinite, (low, high, row.ours))):
        return "no finite interval at this size"
    edges = [e for e in row.accept if math.isfinite(e)]
    straddled = [e for e in edges if low <= e <= high] or edges  # the edges the interval reaches over
    if row.ours in straddled:
        return f"ours lies on the tolerance's edge {row.ours:.4g}"

    def trials(edge):  # the interval's side facing the edge must shrink to the distance to it
        reach = high - row.ours if edge > row.ours else row.ours - low
        return (reach / abs(edge - row.ours)) ** 2

    edge = max(straddled, key=trials)
    return (
        f"the interval straddles the tolerance's edge {edge:.4g}: about {trials(edge):.3g}x the trials "
        "would decide it"
    )


def row_record(row: Row) -> dict:
    """The row as a dict of :data:`COLUMNS` (``None`` where a column does not apply)."""
    names = ("experiment", "setting", "quantity", "paper", "ours", "std_error", "ratio", "claim", "verdict")
    record = {name: getattr(row, name) for name in names}
    record["ci_low"], record["ci_high"] = row.interval
    record["accept_low"], record["accept_high"] = (None, None) if row.accept is None else row.accept
    record["why"] = explanation(row)
    return record


def figure_written(path: Path) -> None:
    """The ``plot`` of a reproduction whose PNG is already written (from a checkpoint or a stored run)."""


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


def bootstrap_interval(statistic, *groups, resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of ``statistic(*groups)``.

    Each group is an array, or a tuple of arrays sharing their first axis (paired trials), resampled
    with replacement over that axis independently of the other groups; ``statistic`` receives the
    resampled groups in the same structure. Fixed ``seed``: the same data give the same interval.
    """
    rng = np.random.default_rng(seed)

    def draw(group):
        arrays = group if isinstance(group, tuple) else (group,)
        index = rng.integers(0, len(arrays[0]), len(arrays[0]))
        picked = tuple(np.asarray(a)[index] for a in arrays)
        return picked if isinstance(group, tuple) else picked[0]

    values = np.array([statistic(*map(draw, groups)) for _ in range(resamples)], np.float64)
    if np.isnan(values).any():
        return math.nan, math.nan
    low, high = np.quantile(values, [0.025, 0.975], method="inverted_cdf")  # resampled values: inf kept
    return float(low), float(high)


def subkey(key, *labels) -> jax.Array:
    """An independent key for the named part of a study, stable across runs and selections."""
    for label in labels:
        key = jax.random.fold_in(key, zlib.crc32(str(label).encode()))
    return key
