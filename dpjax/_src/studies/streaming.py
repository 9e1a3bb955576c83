"""Statistics of a long run without keeping every trial: running moments and a quantile sketch.

Below :data:`STREAM_ABOVE` values per metric (trials x replicates x grid points), a study keeps every
trial's metric value on the host and its statistics are exact (``statistics.py``). Above it, each
chunk's values are folded into a :class:`Summary` and dropped, so the host's memory does not grow with
the trial count:

* ``"mean"`` and ``"rmse"``: the count, mean and sum of squared deviations of the values and of their
  squares, merged chunk by chunk (Chan, Golub and LeVeque 1979, the pairwise update). The same
  estimates and intervals as the exact path up to float64 rounding; 40 bytes per cell.
* ``"median"`` and ``"qNN"``: a relative-accuracy log-bucket histogram (DDSketch: Masson, Rim and Lee,
  *DDSketch: a fast and fully-mergeable quantile sketch with relative-error guarantees*, VLDB 2019,
  Sec. 2). A value ``x`` with ``|x| >= 2^-1022`` falls in bucket ``i = ceil(log_gamma |x|)`` of its
  sign, ``gamma = (1 + alpha) / (1 - alpha)``, zero in a bucket of its own; buckets are ordered as
  the values are, so the bucket where the cumulative count reaches ``k`` holds the exact ``k``-th
  order statistic ``x_(k)``, and its representative ``2 gamma^i / (gamma + 1)`` (with the sign) is
  within ``alpha |x_(k)|`` of it (:data:`ALPHA` = 0.001: 0.1%; :data:`BOUND` adds the float rounding
  of the logarithm, ``1e-9`` relative; values of magnitude below ``2^-1022``, subnormal, count as
  zero: absolute error below ``2^-1022``). The sample quantile interpolates two order statistics
  (``statistics.py``), so its error is at most ``alpha ((1 - f)|x_(b)| + f |x_(b+1)|)``: ``alpha``
  relative when both have one sign (absolute errors always do). The order-statistic interval
  ``[x_(r), x_(s)]`` is widened to the values the sketch guarantees, ``[x_(r)^ / (1 + BOUND),
  x_(s)^ / (1 - BOUND)]`` for positive ends (mirrored for negative ones), so it contains the exact
  interval: it never claims more than the exact run would. Memory: 16 bytes per non-empty bucket,
  at most ``min(T, 2 + ln(max|x| / min|x|) / ln gamma)`` buckets per cell and sign (for errors from
  ``1e-6`` to ``1e2``, about 9,200 buckets: 150 kB per cell), whatever the trial count.

The table's ``ci_method`` and the step's record say which path ran (``"streamed"``, with ``alpha``).
"""

from __future__ import annotations

import math

import numpy as np

from dpjax._src.studies import statistics
from dpjax._src.studies.statistics import (
    check_statistic,
    moment_mean,
    moment_rmse,
    quantile_level,
    quantile_ranks,
    wilson_interval,
    z_value,
)

__all__: list[str] = []

STREAM_ABOVE = 2**22  # values per metric (trials x replicates x grid points) kept exactly; above: streamed
ALPHA = 0.001  # relative accuracy of the quantile sketch
BOUND = ALPHA * (1 + 1e-9)  # the guaranteed relative error, with the float rounding of the logarithm
_GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(_GAMMA)
_HALF = 2**19  # |bucket index| < 2^19 for every normal float64 magnitude (ln range 1418 / ln gamma)
_ZERO = 2**20  # the code of zero; positive values above it, negative below
_CELL = 22  # a key is cell << 22 | code (codes are below 2^21 + 1)
_TINY = np.finfo(np.float64).tiny


def _codes(x: np.ndarray) -> np.ndarray:
    """The bucket code of each finite value: ordered as the values are."""
    magnitude = np.abs(x)
    normal = magnitude >= _TINY
    with np.errstate(divide="ignore"):
        index = np.ceil(np.log(np.where(normal, magnitude, 1.0)) / _LOG_GAMMA).astype(np.int64)
    offset = index + _HALF
    code = np.where(x > 0, _ZERO + 1 + offset, _ZERO - 1 - offset)
    return np.where(normal, code, _ZERO)


def _values(code: np.ndarray) -> np.ndarray:
    """The representative value of each bucket code (within ``ALPHA`` of every value in the bucket)."""
    positive = code > _ZERO
    index = np.where(positive, code - _ZERO - 1, _ZERO - 1 - code) - _HALF
    with np.errstate(over="ignore"):
        magnitude = np.exp(index * _LOG_GAMMA + math.log(2 / (_GAMMA + 1)))
    magnitude = np.minimum(magnitude, np.finfo(np.float64).max)  # nearer every value of the top bucket
    return np.where(code == _ZERO, 0.0, np.where(positive, magnitude, -magnitude))


def _bucket_counts(cell, code, cells: int):
    """The sorted keys ``cell << _CELL | code`` present and their counts: a dense count over the codes'
    range when it is short (the usual case: errors within a few decades), else a sort."""
    if not len(code):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    low = int(code.min())
    span = int(code.max()) - low + 1
    if cells * span > 4 * len(code) + 2**16:
        return np.unique(np.left_shift(cell, _CELL) | code, return_counts=True)
    dense = np.bincount(cell * span + (code - low), minlength=cells * span)
    present = np.flatnonzero(dense)
    return np.left_shift(present // span, _CELL) | (present % span + low), dense[present]


class Summary:
    """The running statistics of one metric: per cell (replicate x grid point), the moments of the
    values and of their squares, and the quantile sketch; ``add`` folds in a chunk of trials."""

    def __init__(self, trials: int, replicates: int, points: int):
        self.trials, self.replicates, self.points = trials, replicates, points
        cells = replicates * points
        self.n = np.zeros(cells, np.int64)
        self.moments = np.zeros((2, 2, cells))  # [values, squares] x [mean, squared deviations]
        self.keys = np.zeros(0, np.int64)  # sorted: cell << _CELL | code
        self.counts = np.zeros(0, np.int64)

    @property
    def nbytes(self) -> int:
        return self.n.nbytes + self.moments.nbytes + self.keys.nbytes + self.counts.nbytes

    @np.errstate(over="ignore", invalid="ignore")
    def add(self, start: int, values) -> None:
        """Folds in the values ``[c, points]`` (or ``[c]``) of trials ``start, ..., start + c - 1``."""
        x: np.ndarray = np.asarray(values, dtype=np.float64).reshape(len(values), self.points)
        replicate = (start + np.arange(len(x))) // self.trials
        cell = (replicate[:, None] * self.points + np.arange(self.points)[None, :]).ravel()
        x = x.ravel()
        finite = np.isfinite(x)
        x, cell = x[finite], cell[finite]
        count = np.bincount(cell, minlength=self.n.size)
        total = self.n + count
        for row, y in enumerate((x, x * x)):  # overflow (|x| > 1e154) gives inf as the exact path does
            mean = np.bincount(cell, weights=y, minlength=self.n.size) / np.maximum(count, 1)
            squares = np.bincount(cell, weights=(y - mean[cell]) ** 2, minlength=self.n.size)
            delta = mean - self.moments[row, 0]
            self.moments[row, 0] += delta * count / np.maximum(total, 1)
            self.moments[row, 1] += squares + delta**2 * self.n * count / np.maximum(total, 1)
        self.n = total
        self._merge(*_bucket_counts(cell, _codes(x), self.n.size))

    def _merge(self, keys, counts) -> None:
        keys, inverse = np.unique(np.concatenate([self.keys, keys]), return_inverse=True)
        weights = np.concatenate([self.counts, counts])
        self.counts = np.bincount(inverse, weights=weights, minlength=len(keys)).astype(np.int64)
        self.keys = keys

    def order_statistics(self, rank) -> np.ndarray:
        """The sketch's ``rank``-th smallest value (1-based, an array over the cells): within
        ``ALPHA`` relative of the exact order statistic; NaN where a cell has no value."""
        rank = np.asarray(rank).reshape(-1)
        before = np.concatenate([[0], np.cumsum(self.n)[:-1]])
        where = np.searchsorted(np.cumsum(self.counts), before + np.clip(rank, 1, None), side="left")
        found = np.where(self.n > 0, self.keys[np.minimum(where, len(self.keys) - 1)]
                         if len(self.keys) else 0, 0)
        code = found & ((1 << _CELL) - 1)
        return np.where(self.n > 0, _values(code), np.nan)

    def summarize(self, statistic: str, confidence: float, rate: bool) -> dict:
        """What ``statistics.summarize`` gives for these trials, each array of shape ``[R, G]``."""
        check_statistic(statistic)
        z, n = z_value(confidence), self.n
        level = quantile_level(statistic)
        with np.errstate(invalid="ignore", divide="ignore"):
            if level is not None:
                out = self._quantile(level, z)
            else:
                mean, se = (_moment_mean_and_se(self.moments[row], n) for row in (0, 1))
                out = (moment_rmse(*se, n, z) if statistic == "rmse" else
                       wilson_interval(mean[0], n, z) if rate else moment_mean(*mean, n, z))
        shape = (self.replicates, self.points)
        return {k: np.reshape(v, shape) for k, v in out.items()}

    def _quantile(self, level: float, z: float) -> dict:
        n = self.n
        position, below, low_rank, high_rank = quantile_ranks(n, level, z)
        lo = self.order_statistics(below + 1)
        hi = self.order_statistics(np.minimum(below + 2, np.maximum(n, 1)))
        estimate = lo + (position - below) * (hi - lo)
        low, high = self.order_statistics(low_rank), self.order_statistics(high_rank)
        low = np.where(low > 0, low / (1 + BOUND), low / (1 - BOUND))  # contains the exact x_(r)
        high = np.where(high > 0, high / (1 - BOUND), high / (1 + BOUND))
        method = np.full(n.shape, f"order statistics (streamed: sketch within {ALPHA:g} relative)")
        return {"estimate": estimate, "se": (high - low) / (2 * z), "ci_low": low, "ci_high": high,
                "n": n, "method": method}


def _moment_mean_and_se(moment: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error from a running mean and sum of squared deviations."""
    mean = np.where(n > 0, moment[0], np.nan)
    sd = np.sqrt(moment[1] / np.maximum(n - 1, 1))
    return mean, np.where(n > 1, sd / np.sqrt(np.maximum(n, 1)), np.nan)


class Fold:
    """Folds each chunk's outputs (a pytree of ``[c, G]`` or ``[c]`` arrays) into a :class:`Summary`
    per leaf; the runner's ``fold`` when a step streams."""

    def __init__(self, trials: int, replicates: int, points: int):
        self.trials, self.replicates, self.points = trials, replicates, points
        self.summaries = None

    def add(self, start: int, out) -> None:
        import jax

        if self.summaries is None:
            self.summaries = jax.tree.map(lambda _: Summary(self.trials, self.replicates, self.points), out)
        jax.tree.map(lambda s, v: s.add(start, v), self.summaries, out,
                     is_leaf=lambda s: isinstance(s, Summary))

    def result(self):
        return self.summaries

    def record(self) -> dict:
        import jax

        leaves = jax.tree.leaves(self.summaries, is_leaf=lambda s: isinstance(s, Summary))
        return {"streamed": {"alpha": ALPHA, "memory_bytes": int(sum(s.nbytes for s in leaves))}}


def fold(trials: int, replicates: int, points: int, step_points: int) -> Fold | None:
    """A :class:`Fold` of ``points`` values per trial when a step's values per metric (``trials x
    replicates x step_points``: all its grid points, run together or one at a time) exceed
    :data:`STREAM_ABOVE`, else ``None`` (the runner keeps every value and the statistics are exact)."""
    return Fold(trials, replicates, points) if trials * replicates * step_points > STREAM_ABOVE else None


def stack(leaves):
    """The per-grid-point results of one metric side by side: arrays ``[T]`` stacked to ``[T, G]``,
    or summaries of one point each merged into one of ``G`` points."""
    if not isinstance(leaves[0], Summary):
        return np.stack(leaves, axis=-1)
    first, points = leaves[0], len(leaves)
    out = Summary(first.trials, first.replicates, points)
    out.n = np.stack([s.n for s in leaves], axis=-1).reshape(-1)
    out.moments = np.stack([s.moments for s in leaves], axis=-1).reshape(2, 2, -1)
    for g, s in enumerate(leaves):
        cell = np.right_shift(s.keys, _CELL) * points + g
        out._merge(np.left_shift(cell, _CELL) | (s.keys & ((1 << _CELL) - 1)), s.counts)
    return out


def summarize(values, trials: int, replicates: int, statistic: str, confidence: float, rate: bool) -> dict:
    """``statistic`` of each cell ``[R, G]``: exact from the values ``[R T, G]``, or from a summary."""
    if isinstance(values, Summary):
        return values.summarize(statistic, confidence, rate)
    per_cell = np.moveaxis(np.asarray(values).reshape(replicates, trials, -1), 1, 2)  # [R, G, T]
    return statistics.summarize(per_cell, statistic, confidence, rate=rate)
