"""What the multi-quantile studies share: m quantiles of the first 1000 points of a dataset in
[-100, 100] (swap neighbors), measured by the number of data points between each release and its
true quantile (JointExp's paper, Gillenwater, Joseph and Kulesza, ICML 2021, Sec. 6)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax._src.studies.definition import Mechanism

__all__: list[str] = []

N_POINTS = 1000
BOUNDS = (-100.0, 100.0)


def levels(m: int) -> np.ndarray:
    """``m`` evenly spaced quantile levels: ``1/(m+1), ..., m/(m+1)``."""
    return np.arange(1, m + 1) / (m + 1)


def points(x):
    """The first :data:`N_POINTS` values of ``x``, sorted."""
    return jnp.sort(x[:N_POINTS])


def truth_at(qs: np.ndarray):
    """The study's truth: the true "lower" quantiles (NumPy's ``method="lower"``) and the sorted points."""

    def truth(x, **_):
        sorted_points = points(x)
        quantiles = sorted_points[np.floor(qs * (N_POINTS - 1)).astype(int)]
        return {"quantiles": quantiles, "points": sorted_points}

    return truth


def missed_points(release, truth):
    """The mean number of data points between each released quantile and the true one."""
    sorted_points = truth["points"]
    missed = jnp.searchsorted(sorted_points, release) - jnp.searchsorted(sorted_points, truth["quantiles"])
    return jnp.mean(jnp.abs(missed).astype(jnp.result_type(float)))


def mechanism_at(qs: np.ndarray):
    """``make(name, fn, description)``: a study mechanism releasing ``fn``'s quantiles ``qs``."""

    def make(name, fn, description):
        def release(key, x, epsilon):
            return fn(key, points(x), qs, epsilon, bounds=BOUNDS)

        return Mechanism(name, release, description=description)

    return make
