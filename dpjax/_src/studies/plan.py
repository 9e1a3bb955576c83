"""The plan of a study run: its validated settings, resolved grid and datasets, and its steps."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple, cast

import jax.numpy as jnp

from dpjax._src.host_checks import check_int
from dpjax._src.studies.definition import Mechanism, Study, check_grid
from dpjax._src.studies.trials import Data, load_dataset

__all__ = ["Cell", "Plan", "cells", "make_plan", "per_chunk", "step_count"]


def per_chunk(grid_points: int, chunk_size: int | None) -> int | None:
    """At most this many trials per compiled call: ``chunk_size`` releases (one trial's ``grid_points``
    when they alone are more); ``None``: sized from memory."""
    return None if chunk_size is None else max(1, chunk_size // grid_points)


class Plan(NamedTuple):
    """What :func:`run_study` runs: the study, its resolved grid and datasets, the Monte Carlo settings."""

    study: Study
    grid: dict[str, Sequence]
    datasets: list[str]
    static_points: list[dict]  # one compile each (parameters that fix a shape)
    grid_points: list[dict]  # traced: one compiled call covers them all
    trials: int
    replicates: int
    chunk_size: int | None
    confidence: float
    seed: int


class Cell(NamedTuple):
    """One step of a run: a mechanism on a dataset at a static point, over the traced grid points."""

    mechanism: Mechanism
    dataset: str
    data: Data
    static: dict
    points: list[dict]  # the traced grid points, with the derived parameters
    grid: dict  # {parameter: array over the points}, what the compiled call gets

    @property
    def label(self) -> str:
        where = ", ".join(f"{k}={v}" for k, v in self.static.items())
        return f"{self.mechanism.name} on {self.dataset}" + (f" ({where})" if where else "")

    @property
    def fixed(self) -> dict:
        """The closed-over (static) parameters: the mechanism's, the dataset's and the static point."""
        return {**self.mechanism.params, **self.data.params, **self.static}


def make_plan(study: Study, *, trials, seed, grid, datasets, replicates, confidence, chunk_size) -> Plan:
    """The validated settings and the resolved grid and datasets of a run (see :func:`run_study`)."""
    full_grid = dict(study.grid)
    if grid:
        unknown = sorted(set(grid) - set(full_grid))
        if unknown:
            raise ValueError(f"study {study.name!r} has no grid parameter {unknown}.")
        full_grid.update(check_grid(grid))
    names = list(study.datasets) if datasets is None else [d for d in study.datasets if d in datasets]
    if not names:
        raise ValueError(f"study {study.name!r} runs on none of the datasets {list(datasets or [])}.")

    def points(params):
        return [dict(zip(params, v, strict=True)) for v in itertools.product(*(full_grid[p] for p in params))]

    return Plan(
        study, full_grid, names,
        static_points=points([p for p in full_grid if p in study.static]),
        grid_points=points([p for p in full_grid if p not in study.static]),
        trials=check_int(trials, "trials", minimum=1),
        replicates=check_int(replicates, "replicates", minimum=1),
        chunk_size=None if chunk_size is None else check_int(chunk_size, "chunk_size", minimum=1),
        confidence=confidence,
        seed=seed,
    )


def step_count(study: Study, datasets: Sequence[str] | None = None) -> int:
    """The steps (compiled calls, progress bar steps) of ``study`` on ``datasets`` (default: all)."""
    names = [d for d in study.datasets if not datasets or d in datasets]
    return len(study.mechanisms) * math.prod(len(study.grid[p]) for p in study.static) * len(names)


def cells(plan: Plan):
    """The steps of a run, in order; each dataset is loaded once, when first needed."""
    loaded: dict[str, Data] = {}
    mechanisms = cast(tuple[Mechanism, ...], plan.study.mechanisms)  # a tuple once the Study is made
    for mechanism in mechanisms:
        for static in plan.static_points:
            points = [{**pt, **{name: fn(**static, **pt) for name, fn in plan.study.derived.items()}}
                      for pt in plan.grid_points]
            grid = {p: jnp.asarray([pt[p] for pt in points]) for p in points[0]}
            for name in plan.datasets:
                if name not in loaded:
                    loaded[name] = load_dataset(plan.study.datasets[name], plan.seed)
                yield Cell(mechanism, name, loaded[name], static, points, grid)

