"""Built-in datasets for studies: synthetic, generated from a fixed seed, so nothing is downloaded.

* ``normal``: 10,000 draws of N(0, 5^2), bounds [-100, 100] (the JointExp paper's setting).
* ``uniform``: 10,000 draws of U(-5, 5), bounds [-100, 100].
* ``lognormal``: 10,000 draws of exp(N(3, 1.5^2)), lower bound 0 and no upper bound (heavy-tailed,
  for the unbounded quantile and the DP sum).
* ``zipf``: a histogram of 10,000 items whose counts follow a Zipf law with exponent 1.1 over
  10^6 records, in random item order (for selection, top-k and sparse vector studies).
* ``zipf_sample``: a 1% Bernoulli sample of the records of ``zipf`` (about 10^4 records, same
  items), where the top counts are less separated.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from dpjax._src.datasets.zipf import zipf_histogram

__all__ = [
    "DATASET_NAMES",
    "Dataset",
    "load",
]


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A built-in dataset.

    Attributes:
      name: registry name.
      kind: "samples" (one value per individual) or "histogram" (one count per item).
      values: the data, float64 samples or int64 counts.
      lower: a data-independent lower bound (``None`` if unbounded below).
      upper: a data-independent upper bound (``None`` if unbounded above).
      description: one line for tables and ``--list``.
    """

    name: str
    kind: str
    values: np.ndarray
    lower: float | None
    upper: float | None
    description: str


def _normal(rng, seed):
    return Dataset(
        "normal",
        "samples",
        rng.normal(0.0, 5.0, 10_000),
        -100.0,
        100.0,
        "10,000 draws of N(0, 5^2)",
    )


def _uniform(rng, seed):
    return Dataset(
        "uniform",
        "samples",
        rng.uniform(-5.0, 5.0, 10_000),
        -100.0,
        100.0,
        "10,000 draws of U(-5, 5)",
    )


def _lognormal(rng, seed):
    return Dataset(
        "lognormal",
        "samples",
        rng.lognormal(3.0, 1.5, 10_000),
        0.0,
        None,
        "10,000 draws of exp(N(3, 1.5^2)), heavy-tailed",
    )


def _zipf(rng, seed):
    return Dataset(
        "zipf",
        "histogram",
        zipf_histogram(rng, 10_000, 1_000_000, 1.1).astype(np.int64),
        0.0,
        None,
        "10,000-item Zipf(1.1) histogram of 10^6 records",
    )


def _zipf_sample(rng, seed):
    return Dataset(
        "zipf_sample",
        "histogram",
        rng.binomial(load("zipf", seed).values, 0.01).astype(np.int64),
        0.0,
        None,
        "1% Bernoulli sample of the zipf records (about 10^4 records)",
    )


_BUILDERS = {
    "normal": _normal,
    "uniform": _uniform,
    "lognormal": _lognormal,
    "zipf": _zipf,
    "zipf_sample": _zipf_sample,
}
DATASET_NAMES = tuple(_BUILDERS)


@functools.cache
def load(name: str, seed: int = 0) -> Dataset:
    """The built-in dataset ``name``, generated from ``seed`` (same seed, same data)."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown dataset {name!r}; choose from {sorted(_BUILDERS)}.")
    # Each dataset has its own stream, so adding a dataset never changes the others.
    index = DATASET_NAMES.index(name)
    return _BUILDERS[name](np.random.default_rng([seed, index]), seed)
