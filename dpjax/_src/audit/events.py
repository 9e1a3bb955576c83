"""Output events for privacy audits: a named indicator, and the automatic families the audit searches.

An :class:`Event` maps a batch of mechanism outputs (the pytree returned by the mechanism, each leaf
with a leading trial axis) to a boolean array with one entry per trial. The automatic families
follow StatDP (Ding, Wang, Wang, Zhang, Kifer, CCS 2018) and dp_auditorium:

* each output is flattened to a float vector; a coordinate with few distinct values is *discrete*,
  the others *continuous* (NaN marks an absent value, e.g. an unanswered query);
* the *outcome* (stratum) of a run is its discrete coordinates together with the NaN pattern of its
  continuous ones. Discrete events: every frequent outcome, every value of every discrete
  coordinate, and unions of the most discriminating ones (prefixes of the outcomes sorted by their
  estimated probability ratio);
* continuous events, per continuous coordinate and within each frequent outcome (or any outcome):
  ``y <= t``, ``y > t`` and ``t_a < y <= t_b`` for thresholds ``t`` on a quantile grid.

Candidate events are built from one half of the samples only; the audit then tests the best few on
the other half, so the choice of events cannot bias the final bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = [
    "Candidates",
    "Event",
    "candidate_events",
    "features",
]


@dataclass(frozen=True)
class Event:
    """A set of outputs, given by its indicator on a batch of outputs.

    Attributes:
      description: human-readable definition, e.g. ``"y[1] > 2.31 and outcome (1,)"``.
      indicator: ``indicator(outputs) -> bool array of shape (trials,)``; ``outputs`` is the
        mechanism's output pytree with a leading trial axis (NumPy arrays).
      on_features: optional faster form taking the flattened outputs (see :func:`features`).
    """

    description: str
    indicator: Callable
    on_features: Callable | None = None

    def evaluate(self, outputs: Any, flat: np.ndarray | None = None) -> np.ndarray:
        """The indicator, computed from ``flat = features(outputs)`` when given and possible."""
        if self.on_features is not None and flat is not None:
            return np.asarray(self.on_features(flat), dtype=bool)
        return self(outputs)

    def __call__(self, outputs: Any) -> np.ndarray:
        if self.on_features is not None:
            return np.asarray(self.on_features(features(outputs)), dtype=bool)
        mask = np.asarray(self.indicator(outputs), dtype=bool)
        if mask.ndim != 1:
            raise ValueError(
                f"event {self.description!r} must return one boolean per trial, got {mask.shape}."
            )
        return mask

    def __str__(self) -> str:
        return self.description


def features(outputs: Any) -> np.ndarray:
    """The outputs flattened to a float64 matrix ``(trials, d)`` (leaves concatenated in tree order)."""
    leaves = jax.tree.leaves(outputs)
    if not leaves:
        raise ValueError("the mechanism returned no arrays.")
    trials = np.shape(leaves[0])[0] if np.ndim(leaves[0]) else 0
    columns = [np.asarray(leaf, np.float64).reshape(trials, -1) for leaf in leaves]
    return np.concatenate(columns, axis=1) + 0.0  # + 0.0 turns -0.0 into 0.0 for exact matching


def _row_keys(matrix: np.ndarray) -> np.ndarray:
    """One hashable (void) key per row, equal iff the rows are bitwise equal."""
    matrix = np.ascontiguousarray(np.where(np.isnan(matrix), np.nan, matrix))
    if matrix.shape[1] == 0:
        matrix = np.zeros((matrix.shape[0], 1))
    return matrix.view(np.dtype((np.void, matrix.dtype.itemsize * matrix.shape[1]))).ravel()


@dataclass(frozen=True)
class _Layout:
    """Which flattened coordinates are discrete; how to compute a run's outcome key."""

    discrete: np.ndarray  # column indices
    continuous: np.ndarray
    _recent: list = field(default_factory=list, compare=False)  # [(y, unique keys, inverse)], last 4

    def member(self, y: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Whether each run's outcome key is in ``keys`` (outcome ids of ``y`` are computed once)."""
        for seen, unique, inverse in self._recent:
            if seen is y:
                return np.isin(unique, keys)[inverse]
        unique, inverse = np.unique(_row_keys(self.strata_matrix(y)), return_inverse=True)
        self._recent[:] = [*self._recent[-3:], (y, unique, inverse.ravel())]
        return np.isin(unique, keys)[inverse.ravel()]

    def strata_matrix(self, y: np.ndarray) -> np.ndarray:
        return np.concatenate([y[:, self.discrete], np.isnan(y[:, self.continuous]).astype(np.float64)], 1)

    def describe(self, row: np.ndarray) -> str:
        values = [f"y[{c}]={v:g}" for c, v in zip(self.discrete, row[: len(self.discrete)], strict=True)]
        absent = [
            f"y[{c}] absent" for c, a in zip(self.continuous, row[len(self.discrete) :], strict=True) if a
        ]
        return "(" + ", ".join(values + absent) + ")" if values or absent else "(any)"


def _layout(y: np.ndarray, max_levels: int) -> _Layout:
    columns = []
    for column in range(y.shape[1]):
        values = y[:, column]
        values = values[~np.isnan(values)]
        if np.unique(values[:200_000]).size <= max_levels:
            columns.append(column)
    discrete = np.asarray(columns, dtype=int)
    continuous = np.setdiff1d(np.arange(y.shape[1]), discrete)
    return _Layout(discrete, continuous)


def _from_features(label: str, on_features: Callable) -> Event:
    return Event(label, lambda outputs: on_features(features(outputs)), on_features)


def _outcome_event(layout: _Layout, rows: np.ndarray, label: str) -> Event:
    keys = _row_keys(rows)
    return _from_features(label, lambda y: layout.member(y, keys))


def _threshold_event(layout, column, stratum_row, low, high) -> Event:
    """``low < y[column] <= high`` (either end may be infinite), within a stratum (None: any)."""
    key = None if stratum_row is None else _row_keys(stratum_row[None, :])
    parts = []
    if np.isfinite(low):
        parts.append(f"y[{column}] > {low:.6g}")
    if np.isfinite(high):
        parts.append(f"y[{column}] <= {high:.6g}")
    label = " and ".join(parts) + ("" if key is None else f" and outcome {layout.describe(stratum_row)}")

    def on_features(y):
        inside = (y[:, column] > low) & (y[:, column] <= high)
        if key is not None:
            inside &= layout.member(y, key)
        return inside

    return _from_features(label, on_features)


@dataclass(frozen=True)
class _Block:
    """A family of candidate events: counts on the selection half and a factory for event ``i``."""

    count_x: np.ndarray
    count_x_prime: np.ndarray
    make: Callable[[int], Event]


@dataclass(frozen=True)
class Candidates:
    """Candidate events with their counts on the selection half (events are built on demand)."""

    blocks: list

    @property
    def count_x(self) -> np.ndarray:
        return np.concatenate([b.count_x for b in self.blocks]) if self.blocks else np.zeros(0)

    @property
    def count_x_prime(self) -> np.ndarray:
        return np.concatenate([b.count_x_prime for b in self.blocks]) if self.blocks else np.zeros(0)

    def event(self, index: int) -> Event:
        for block in self.blocks:
            if index < block.count_x.size:
                return block.make(index)
            index -= block.count_x.size
        raise IndexError(index)


def candidate_events(
    y_x: np.ndarray,
    y_x_prime: np.ndarray,
    *,
    max_levels: int = 16,
    max_outcomes: int = 512,
    max_strata: int = 8,
    grid: int = 48,
) -> Candidates:
    """Builds the automatic event families from the selection half and counts them on it.

    Args:
      y_x, y_x_prime: flattened outputs (see :func:`features`) of the runs on x and on x'.
      max_levels: a coordinate with at most this many distinct values is discrete.
      max_outcomes: at most this many (most frequent) outcomes get their own events.
      max_strata: continuous events are built within the most frequent outcomes and within "any".
      grid: number of quantile thresholds per continuous coordinate and stratum.
    """
    layout = _layout(np.concatenate([y_x, y_x_prime]), max_levels)
    outcomes = _outcomes(layout, y_x, y_x_prime, max_outcomes)
    blocks = _outcome_blocks(layout, outcomes)
    blocks += _discrete_blocks(layout, y_x, y_x_prime)
    blocks += _continuous_blocks(layout, y_x, y_x_prime, outcomes, max_strata, grid)
    return Candidates(blocks)


class _Outcomes(NamedTuple):
    """The runs' outcomes (strata), most frequent first, counted on each side."""

    inverse: np.ndarray  # outcome id of each run, x runs first then x' runs
    order: np.ndarray  # outcome ids by decreasing frequency (at most max_outcomes)
    rows: np.ndarray  # a strata row of each outcome in ``order``
    count_x: np.ndarray  # runs on x with each outcome in ``order``
    count_x_prime: np.ndarray
    n: int  # runs on x


def _outcomes(layout, y_x, y_x_prime, max_outcomes) -> _Outcomes:
    n = y_x.shape[0]
    pooled = np.concatenate([layout.strata_matrix(y_x), layout.strata_matrix(y_x_prime)])
    _, first_row, inverse, frequency = np.unique(
        _row_keys(pooled), return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.ravel()
    order = np.argsort(-frequency, kind="stable")[:max_outcomes]
    return _Outcomes(
        inverse,
        order,
        pooled[first_row[order]],
        np.bincount(inverse[:n], minlength=frequency.size)[order].astype(np.float64),
        np.bincount(inverse[n:], minlength=frequency.size)[order].astype(np.float64),
        n,
    )


def _outcome_blocks(layout, outcomes: _Outcomes) -> list:
    """Each frequent outcome, and the unions of the most discriminating ones in either direction."""
    if outcomes.order.size <= 1:
        return []
    cx, cxp, rows = outcomes.count_x, outcomes.count_x_prime, outcomes.rows

    def single(i):
        return _outcome_event(layout, rows[i : i + 1], f"outcome {layout.describe(rows[i])}")

    blocks = [_Block(cx, cxp, single)]
    for sign in (1.0, -1.0):
        ranked = np.argsort(-sign * (np.log(cx + 0.5) - np.log(cxp + 0.5)), kind="stable")

        def union(i: int, ranked: np.ndarray = ranked) -> Event:
            return _outcome_event(
                layout,
                rows[ranked[: i + 2]],
                f"one of {i + 2} outcomes: "
                + ", ".join(layout.describe(r) for r in rows[ranked[: min(i + 2, 8)]])
                + (", ..." if i + 2 > 8 else ""),
            )

        blocks.append(_Block(np.cumsum(cx[ranked])[1:-1], np.cumsum(cxp[ranked])[1:-1], union))
    return blocks


def _discrete_blocks(layout, y_x, y_x_prime) -> list:
    """Each value of each discrete coordinate."""
    blocks = []
    for column in layout.discrete:
        values = np.unique(np.concatenate([y_x[:, column], y_x_prime[:, column]]))
        if values.size < 2:
            continue

        def make(i, column=column, values=values):
            return _from_features(f"y[{column}] == {values[i]:g}", lambda y: y[:, column] == values[i])

        blocks.append(
            _Block(
                (y_x[:, column][:, None] == values).sum(0).astype(np.float64),
                (y_x_prime[:, column][:, None] == values).sum(0).astype(np.float64),
                make,
            )
        )
    return blocks


def _continuous_blocks(layout, y_x, y_x_prime, outcomes: _Outcomes, max_strata, grid) -> list:
    """Thresholds and intervals on each continuous coordinate, overall and within frequent outcomes."""
    n, order = outcomes.n, outcomes.order
    strata_choices = [None] + ([] if order.size <= 1 else list(range(min(max_strata, order.size))))
    blocks = []
    for column in layout.continuous:
        for choice in strata_choices:
            if choice is None:
                in_x, in_xp, row = np.ones(n, bool), np.ones(y_x_prime.shape[0], bool), None
            else:
                in_x, in_xp, row = (
                    outcomes.inverse[:n] == order[choice],
                    outcomes.inverse[n:] == order[choice],
                    outcomes.rows[choice],
                )
            vx, vxp = y_x[in_x, column], y_x_prime[in_xp, column]
            block = _interval_block(layout, column, row, vx[~np.isnan(vx)], vxp[~np.isnan(vxp)], grid)
            if block is not None:
                blocks.append(block)
    return blocks


def _interval_block(layout, column, row, vx, vxp, grid):
    """Intervals ``(edge_a, edge_b]`` between ``grid`` quantile cuts of the pooled values (and +-inf);
    the whole space is left out when not within an outcome (``row`` None). None for < 2 values."""
    both = np.concatenate([vx, vxp])
    if both.size < 2:
        return None
    cuts = np.unique(np.quantile(both, np.linspace(0, 1, grid + 2)[1:-1]))
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    below_x = np.searchsorted(np.sort(vx), edges, side="right").astype(np.float64)  # #(y <= edge)
    below_xp = np.searchsorted(np.sort(vxp), edges, side="right").astype(np.float64)
    lows, highs = np.triu_indices(edges.size, k=1)
    if row is None:  # drop the whole space
        keep = ~((lows == 0) & (highs == edges.size - 1))
        lows, highs = lows[keep], highs[keep]
    return _Block(
        below_x[highs] - below_x[lows],
        below_xp[highs] - below_xp[lows],
        lambda i: _threshold_event(layout, column, row, edges[lows[i]], edges[highs[i]]),
    )
